//! `--mode rpc`: JSON commands on stdin, responses and events on stdout (Pi's rpc.md).
//!
//! Framing is strict LF: a record ends at `\n` only (a trailing `\r` is dropped), so U+2028
//! and U+2029 inside JSON strings are content, not separators. Each command gets one response
//! carrying its `id`; a line that is not JSON gets a `parse` error response and the loop
//! goes on. The loop is framing only: every command goes to the session host
//! ([`pi_agent::host::Host`]), which runs long commands (prompt runs, compaction, bash) on
//! tasks so `abort`, `steer` and state queries are answered while they work.

use pi_agent::protocol::{command::decode_record, response, Command, Decoded, Request};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{build_host, stdout_sink, write_line, Env};
use crate::RunArgs;

/// One output line (responses and events share stdout, each written whole).
fn output(v: &Value) {
    write_line(v);
}

/// Runs the RPC loop until stdin closes, then waits for running work to finish.
pub async fn run(args: RunArgs) -> anyhow::Result<i32> {
    if args.messages.iter().any(|m| m.starts_with('@')) {
        // Pi: stdin carries the commands, so there is no first message to attach files to.
        anyhow::bail!("@file arguments are not supported in RPC mode");
    }
    let env = Env::new(&args)?;
    let host = build_host(&args, &env, stdout_sink())?;
    host.run_extension_prompts();
    // Pi refreshes the catalogs in the background of an RPC session.
    super::radius_refresh::spawn(
        env.home.agent_dir.clone(),
        super::radius_refresh::into_agent(host.agent().clone()),
    );
    // So do the extensions' `refreshModels` (their answers reach the agent's catalog).
    if super::radius_refresh::network_allowed() {
        let agent_dir = env.home.agent_dir.clone();
        std::thread::spawn(move || {
            super::extensions::refresh_models_blocking(&agent_dir, None, true)
        });
    }
    super::mcp_command::report_after_startup(output);
    let mut reader = BufReader::new(tokio::io::stdin());
    let mut buf = Vec::new();
    // Commands that run on tasks (prompt, compact, bash) answer through this channel, so
    // the loop knows when they are all answered before it exits.
    let (answered, mut answers) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut pending = 0usize;
    loop {
        buf.clear();
        // read_until splits on the byte 0x0A only: U+2028/U+2029 never end a record.
        let n = match reader.read_until(b'\n', &mut buf).await {
            Ok(n) => n,
            Err(e) => {
                eprintln!("pi: cannot read stdin: {e}");
                break;
            }
        };
        if n == 0 {
            break;
        }
        if let Some(response) = extension_ui_response(&buf) {
            // Answers to extension dialogs are not commands: no response record.
            if let Some(ext) = super::extensions::current() {
                ext.ui_response(&response);
            }
            continue;
        }
        match decode_record(&buf) {
            Decoded::Blank => continue,
            Decoded::Rejected(r) => output(&response(&r.id, &r.command, Err(r.message))),
            Decoded::Command(Request {
                id,
                command: Command::GetMessages,
            }) => {
                // Streamed straight to stdout: a huge context is never one value.
                let stdout = std::io::stdout();
                let mut out = std::io::BufWriter::new(stdout.lock());
                // A closed stdout (reader gone) must not kill the agent, as for every line.
                let _ = host.write_messages_response(&id, &mut out);
            }
            Decoded::Command(request) => {
                pending += 1;
                let answered = answered.clone();
                let mcp_answered = answered.clone();
                // `/mcp` is the built-in MCP command, answered without the model.
                if super::mcp_command::handle_rpc(
                    &request,
                    &env.home.agent_dir,
                    output,
                    move || {
                        let _ = mcp_answered.send(());
                    },
                ) {
                    continue;
                }
                host.handle(request, move |record| {
                    output(&record);
                    let _ = answered.send(());
                });
            }
        }
        while answers.try_recv().is_ok() {
            pending -= 1;
        }
    }
    while pending > 0 && answers.recv().await.is_some() {
        pending -= 1;
    }
    // Let a run that was started last finish and settle.
    while host.agent().is_streaming() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    Ok(0)
}

/// The record when it is an `extension_ui_response` (Pi's extension-UI sub-protocol).
fn extension_ui_response(line: &[u8]) -> Option<Value> {
    // Cheap test first: most lines are commands.
    if memchr_contains(line, b"extension_ui_response") {
        let v: Value = serde_json::from_slice(line).ok()?;
        if v.get("type").and_then(Value::as_str) == Some("extension_ui_response") {
            return Some(v);
        }
    }
    None
}

fn memchr_contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
