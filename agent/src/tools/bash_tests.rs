//! Bash tool cases on real processes.

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use serde_json::json;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::tools::ignore_updates;

fn context(dir: &Path) -> ToolContext {
    let mut ctx = ToolContext::new(dir);
    ctx.temp_dir = Some(dir.to_path_buf());
    ctx
}

async fn run(ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
    BashTool
        .execute("1", args, ctx, CancellationToken::new(), &ignore_updates)
        .await
}

/// Whether `pid` is still a live (not zombie) process.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesized command name.
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

async fn wait_until_dead(pid: i32) -> bool {
    for _ in 0..100 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn read_pid(path: &Path) -> i32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn success_output_and_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let out = run(&ctx, json!({"command": "echo hi; echo err 1>&2; pwd"}))
        .await
        .unwrap();
    assert!(!out.is_error);
    // stdout and stderr are separate pipes, so only stdout's own order is fixed.
    let text = out.first_text();
    assert!(text.contains("err\n"), "{text}");
    let stdout: Vec<&str> = text.lines().filter(|line| *line != "err").collect();
    assert_eq!(stdout, ["hi", dir.path().to_str().unwrap()], "runs in cwd");
    assert_eq!(out.details, None);
    let out = run(&ctx, json!({"command": "true"})).await.unwrap();
    assert_eq!(out.first_text(), "(no output)");
}

#[tokio::test]
async fn nonzero_exit_is_an_error_result_with_output() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let out = run(&ctx, json!({"command": "echo out; exit 3"}))
        .await
        .unwrap();
    assert!(out.is_error);
    assert_eq!(out.first_text(), "out\n\n\nCommand exited with code 3");
    let out = run(&ctx, json!({"command": "exit 1"})).await.unwrap();
    assert_eq!(
        out.first_text(),
        "(no output)\n\nCommand exited with code 1"
    );
    // A shell killed by a signal reports 128 + signal.
    let out = run(&ctx, json!({"command": "kill -9 $$"})).await.unwrap();
    assert_eq!(
        out.first_text(),
        "(no output)\n\nCommand exited with code 137"
    );
}

#[tokio::test]
async fn environment_and_prefix_reach_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let mut ctx = context(dir.path());
    ctx.env = ToolContext::session_env(
        "sess-1",
        Some("/tmp/s.jsonl"),
        Some(("prov", "mod")),
        Some("high"),
    );
    ctx.shell_command_prefix = Some("GREETING=hello".to_string());
    let command = "echo $PI_CODING_AGENT $PI_SESSION_ID $PI_SESSION_FILE $PI_PROVIDER $PI_MODEL $PI_REASONING_LEVEL $GREETING";
    let out = run(&ctx, json!({ "command": command })).await.unwrap();
    assert_eq!(
        out.first_text(),
        "true sess-1 /tmp/s.jsonl prov mod high hello\n"
    );
}

#[tokio::test]
async fn invalid_timeout_and_missing_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let err = run(&ctx, json!({"command": "true", "timeout": -1}))
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "Invalid timeout: must be a finite number of seconds"
    );
    let err = run(&ctx, json!({"command": "true", "timeout": 3_000_000}))
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "Invalid timeout: maximum is 2147483.647 seconds"
    );
    let gone = context(&dir.path().join("gone"));
    let err = run(&gone, json!({"command": "true"})).await.unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "Working directory does not exist: {}\nCannot execute bash commands.",
            dir.path().join("gone").display()
        )
    );
}

#[tokio::test]
async fn timeout_kills_the_whole_process_tree() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let pid_file = dir.path().join("pid");
    let command = format!(
        "sleep 30 & echo $! > {}; echo started; sleep 30",
        pid_file.display()
    );
    let started = Instant::now();
    let err = run(&ctx, json!({"command": command, "timeout": 0.5}))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        err.message,
        "started\n\n\nCommand timed out after 0.5 seconds"
    );
    assert!(
        wait_until_dead(read_pid(&pid_file)).await,
        "background sleep survived the timeout"
    );
}

#[tokio::test]
async fn timeout_after_shell_exit_names_background_writers() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    // The shell exits at once; its background loop keeps the pipe busy past the deadline.
    // It writes without pausing: a pause longer than the 100 ms exit grace (easily
    // reached on a loaded machine) would end the read before the timeout.
    let command = "(while true; do echo tick; done) & exit 0";
    let err = run(&ctx, json!({"command": command, "timeout": 0.6}))
        .await
        .unwrap_err();
    assert!(
        err.message.ends_with(
            "Command timed out after 0.6 seconds. The shell exited with code 0 after 0 seconds, but background processes it started kept writing output until the timeout."
        ),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn abort_kills_the_whole_process_tree() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let pid_file = dir.path().join("pid");
    let command = format!("sleep 30 & echo $! > {}; sleep 30", pid_file.display());
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let pid_path = pid_file.clone();
    tokio::spawn(async move {
        // Abort once the grandchild exists.
        for _ in 0..200 {
            if std::fs::read_to_string(&pid_path).is_ok_and(|s| s.ends_with('\n')) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        trigger.cancel();
    });
    let started = Instant::now();
    let err = BashTool
        .execute(
            "1",
            json!({ "command": command }),
            &ctx,
            cancel,
            &ignore_updates,
        )
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(err.message, "Command aborted");
    assert!(
        wait_until_dead(read_pid(&pid_file)).await,
        "background sleep survived the abort"
    );
}

#[tokio::test]
async fn truncated_output_keeps_tail_and_full_file() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let out = run(&ctx, json!({"command": "seq 1 5000"})).await.unwrap();
    let details = out.details.clone().unwrap();
    let path = details["fullOutputPath"].as_str().unwrap().to_string();
    assert!(
        path.starts_with(&dir.path().display().to_string())
            && path.contains("pi-bash-")
            && path.ends_with(".log")
    );
    assert_eq!(
        out.first_text().rsplit("\n\n").next().unwrap(),
        format!("[Showing lines 3001-5000 of 5000. Full output: {path}]")
    );
    assert!(out.first_text().starts_with("3001\n"));
    let full = std::fs::read_to_string(&path).unwrap();
    assert_eq!(full.lines().count(), 5000);
    assert_eq!(details["truncation"]["truncatedBy"], "lines");
    // By bytes: 1000 lines of 100 bytes.
    let out = run(
        &ctx,
        json!({"command": "for i in $(seq 1 1000); do printf '%099d\\n' $i; done"}),
    )
    .await
    .unwrap();
    assert!(
        out.first_text()
            .contains("\n\n[Showing lines 489-1000 of 1000 (50.0KB limit). Full output: "),
        "{}",
        &out.first_text()[out.first_text().len() - 200..]
    );
}

fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Runs in a child test process (see the test below) so the peak memory it reports is this
/// command's alone, not that of tests running in parallel threads.
#[tokio::test]
#[ignore = "run by huge_output_streams_to_file_with_bounded_memory in its own process"]
async fn huge_output_child() {
    let Some(dir) = std::env::var_os("PI_TOOLS_TEST_HUGE_DIR") else {
        return;
    };
    let ctx = context(Path::new(&dir));
    // 256 MiB on one line.
    let out = run(
        &ctx,
        json!({"command": "head -c 268435456 /dev/zero | tr '\\0' x"}),
    )
    .await
    .unwrap();
    println!("PEAK_KB {}", peak_rss_kb());
    println!("TEXT {}", serde_json::to_string(out.first_text()).unwrap());
    println!("DETAILS {}", out.details.unwrap());
}

#[tokio::test]
async fn huge_output_streams_to_file_with_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let child = tokio::process::Command::new(exe)
        .args([
            "--exact",
            "tools::bash::tests::huge_output_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PI_TOOLS_TEST_HUGE_DIR", dir.path())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&child.stdout);
    let field = |name: &str| {
        // The test harness may print its own text before ours on the same line.
        stdout
            .split(name)
            .nth(1)
            .and_then(|rest| rest.lines().next())
            .unwrap_or_else(|| panic!("no {name} in child output: {stdout}"))
            .to_string()
    };
    let peak_kb: u64 = field("PEAK_KB ").parse().unwrap();
    // The test binary itself takes a few MB; 256 MB of output must not show up in memory.
    assert!(peak_kb < 64 * 1024, "peak memory {peak_kb} kB");
    let text: String = serde_json::from_str(&field("TEXT ")).unwrap();
    let details: Value = serde_json::from_str(&field("DETAILS ")).unwrap();
    let path = details["fullOutputPath"].as_str().unwrap();
    assert_eq!(std::fs::metadata(path).unwrap().len(), 268_435_456);
    assert_eq!(
        text.rsplit("\n\n").next().unwrap(),
        format!("[Showing last 50.0KB of line 1 (line is 256.0MB). Full output: {path}]")
    );
    assert_eq!(
        text.len(),
        51200
            + 2
            + format!("[Showing last 50.0KB of line 1 (line is 256.0MB). Full output: {path}]")
                .len()
    );
    assert_eq!(details["truncation"]["lastLinePartial"], true);
}

#[tokio::test]
async fn streams_updates_while_running() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let updates: Mutex<Vec<ToolOutput>> = Mutex::new(Vec::new());
    let collect = |update: ToolOutput| updates.lock().unwrap().push(update);
    let args = json!({"command": "echo one; sleep 0.3; echo two"});
    let out = BashTool
        .execute("1", args, &ctx, CancellationToken::new(), &collect)
        .await
        .unwrap();
    assert_eq!(out.first_text(), "one\ntwo\n");
    let updates = updates.into_inner().unwrap();
    // First an empty update, then the output as it grows.
    assert!(updates[0].content.is_empty());
    assert!(updates.iter().any(|u| u.first_text() == "one\n"));
    assert_eq!(updates.last().unwrap().first_text(), "one\ntwo\n");
}
