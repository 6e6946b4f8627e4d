//! `pi --mode rpc` under load: a burst of 10,000 commands gets 10,000 responses, and a
//! command printing 1 GB streams to its temp file in bounded memory.
//!
//! Peak RSS of the `pi` process comes from `/usr/bin/time -v` when it is installed and is
//! printed (figures in docs/reliability.md):
//!
//! ```text
//! cargo test --release -p pi-cli --test rpc_bounded -- --nocapture --test-threads=1
//! ```

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use serde_json::Value;

/// `pi --mode rpc --no-session` in `dir`, under `/usr/bin/time -v` when available.
fn spawn_rpc(dir: &Path) -> Child {
    let time = Path::new("/usr/bin/time");
    let mut cmd = if time.exists() {
        let mut c = Command::new(time);
        c.arg("-v").arg(env!("CARGO_BIN_EXE_pi"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_pi"))
    };
    std::fs::create_dir_all(dir.join("agent")).unwrap();
    cmd.args(["--mode", "rpc", "--no-session"])
        .current_dir(dir)
        .env("HOME", dir)
        .env("PI_CODING_AGENT_DIR", dir.join("agent"))
        .env("TMPDIR", dir)
        .env_remove("PI_SESSION_STORE")
        .env_remove("PI_CODING_AGENT_SESSION_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for the child; its peak RSS in MB when `/usr/bin/time` reported it.
fn finish(child: Child) -> Option<u64> {
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pi failed: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|kb| kb / 1024)
}

/// 10,000 commands written without waiting for any answer: state queries, setters, reads,
/// unknown commands, bad arguments, lines that are not JSON and a few bash runs. Every
/// command with an id gets exactly one response with that id; every bad line gets one
/// `parse` response; nothing is lost or answered twice.
#[test]
fn a_burst_of_10_000_commands_gets_10_000_responses() {
    const N: usize = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_rpc(dir.path());
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let start = Instant::now();
    let mut not_json = 0;
    let mut lines = String::new();
    for i in 0..N {
        let line = match i % 10 {
            0 => format!(r#"{{"id":"c{i}","type":"get_state"}}"#),
            1 => format!(r#"{{"id":"c{i}","type":"set_steering_mode","mode":"all"}}"#),
            2 => format!(r#"{{"id":"c{i}","type":"get_messages"}}"#),
            3 => format!(r#"{{"id":"c{i}","type":"set_session_name","name":"n{i}"}}"#),
            4 => format!(r#"{{"id":"c{i}","type":"no_such_command"}}"#),
            5 => format!(r#"{{"id":"c{i}","type":"set_thinking_level","level":"loud"}}"#),
            6 => format!(r#"{{"id":"c{i}","type":"get_entries"}}"#),
            7 if i % 1000 == 7 => format!(r#"{{"id":"c{i}","type":"bash","command":"echo {i}"}}"#),
            8 => {
                not_json += 1;
                format!("{{not json {i}")
            }
            _ => format!(r#"{{"id":"c{i}","type":"get_session_stats"}}"#),
        };
        lines.push_str(&line);
        lines.push('\n');
    }
    // One write of everything (about 500 KB): the burst reaches pi faster than it answers.
    let writer = std::thread::spawn(move || {
        stdin.write_all(lines.as_bytes()).unwrap();
        // stdin closes here; pi answers what it read, waits for running work, and exits.
    });
    let mut by_id: HashMap<String, usize> = HashMap::new();
    let mut parse_errors = 0;
    let mut responses = 0;
    for line in BufReader::new(stdout).lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["type"] != "response" {
            continue;
        }
        responses += 1;
        match v["id"].as_str() {
            Some(id) => *by_id.entry(id.to_string()).or_default() += 1,
            None => {
                assert_eq!(v["command"], "parse", "{v}");
                parse_errors += 1;
            }
        }
    }
    writer.join().unwrap();
    let rss = finish(child);
    assert_eq!(responses, N, "one response per command");
    assert_eq!(parse_errors, not_json);
    assert_eq!(by_id.len(), N - not_json, "every id answered");
    assert!(by_id.values().all(|&n| n == 1), "no id answered twice");
    eprintln!(
        "rpc burst: {N} commands, {responses} responses in {:.2} s, peak RSS {}",
        start.elapsed().as_secs_f64(),
        rss.map_or("(no /usr/bin/time)".into(), |m| format!("{m} MB"))
    );
}

/// RPC `bash` printing 1 GB: the output streams to a `pi-bash-*.log` temp file (all of it)
/// while pi keeps only the tail; peak RSS stays far below the output's size.
#[test]
fn a_command_printing_1_gb_streams_to_its_temp_file_in_bounded_memory() {
    const SIZE: u64 = 1_000_000_000;
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_rpc(dir.path());
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let start = Instant::now();
    // 100-byte lines: 10,000,000 of them.
    writeln!(
        stdin,
        r#"{{"id":"big","type":"bash","command":"yes 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789 | cut -c1-99 | head -c {SIZE}"}}"#
    )
    .unwrap();
    let mut response = None;
    let mut streamed = 0u64;
    let mut lines = BufReader::new(stdout).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        // Skip parsing the many update events; only their size is counted.
        if line.starts_with(r#"{"type":"bash_execution_update""#) {
            streamed += line.len() as u64;
            continue;
        }
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["type"] == "response" {
            response = Some(v);
            break;
        }
    }
    let response = response.expect("a response");
    assert_eq!(response["success"], true, "{response}");
    let data = &response["data"];
    assert_eq!(data["exitCode"], 0);
    assert_eq!(data["truncated"], true);
    assert!(data["output"].as_str().unwrap().len() <= 50 * 1024);
    let path = data["fullOutputPath"].as_str().expect("fullOutputPath");
    assert!(Path::new(path).starts_with(dir.path()), "{path}");
    // All of it, while pi runs; the file goes with the process.
    assert_eq!(std::fs::metadata(path).unwrap().len(), SIZE);
    drop(stdin);
    lines.for_each(drop);
    let rss = finish(child);
    assert!(!Path::new(path).exists(), "{path} is removed when pi exits");
    assert!(streamed > SIZE, "the output was streamed as updates");
    if let Some(mb) = rss {
        assert!(mb < 200, "peak RSS {mb} MB for 1 GB of output");
    }
    eprintln!(
        "rpc bash, 1 GB of output: {:.1} s, peak RSS {}",
        start.elapsed().as_secs_f64(),
        rss.map_or("(no /usr/bin/time)".into(), |m| format!("{m} MB"))
    );
}
