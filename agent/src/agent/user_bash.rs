//! `!command` / RPC `bash`: a command the user runs, recorded as a `bashExecution` message.

use std::process::Stdio;

use pi_formats::entry::NewEntry;
use pi_formats::time::now_millis;
use serde_json::{json, Map, Value};
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use super::{AgentError, AgentSession};
use crate::tools::output::OutputAccumulator;

impl AgentSession {
    /// Runs `command` with bash in the session's directory, streaming output chunks to
    /// `on_delta`, and records the result (Pi's `executeBash`). Returns the RPC result object
    /// `{output, exitCode, cancelled, truncated}`.
    pub async fn execute_bash(
        &self,
        command: &str,
        exclude_from_context: bool,
        cancel: CancellationToken,
        on_delta: impl Fn(&str),
    ) -> Result<Value, AgentError> {
        let cwd = self.cwd();
        let mut child = tokio::process::Command::new("bash")
            .arg("-c")
            // stderr joins stdout, in order, as a terminal would show it.
            .arg(format!("exec 2>&1\n{command}"))
            .current_dir(&cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            // Its own process group, so cancelling kills what the command started too.
            .process_group(0)
            .spawn()
            .map_err(|e| AgentError::Other(format!("cannot run bash: {e}")))?;
        let mut stdout = child
            .stdout
            .take()
            .ok_or_else(|| AgentError::Other("bash has no stdout".into()))?;
        // Bounded like the bash tool: a rolling tail in memory, everything in a temp file once
        // the output passes the truncation limits (Pi's `executeBash`, `pi-bash-*.log`).
        let mut output = OutputAccumulator::new("pi-bash", None);
        let mut buf = [0u8; 8192];
        let mut cancelled = false;
        loop {
            tokio::select! {
                n = stdout.read(&mut buf) => match n {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        on_delta(&String::from_utf8_lossy(&buf[..n]));
                        output.append(&buf[..n]);
                    }
                },
                _ = cancel.cancelled() => {
                    cancelled = true;
                    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
                        // SAFETY: kill(2) on the process group we created; no memory involved.
                        #[allow(unsafe_code)]
                        unsafe {
                            libc::kill(-pid, libc::SIGKILL);
                        }
                    }
                    let _ = child.start_kill();
                    break;
                }
            }
        }
        let status = child.wait().await.ok();
        let exit_code = if cancelled {
            None
        } else {
            status.and_then(|s| s.code())
        };
        output.finish();
        let snapshot = output.snapshot(true);
        output.close_temp_file();
        let t = snapshot.truncation;
        let full_output_path = snapshot
            .full_output_path
            .map(|p| Value::String(p.display().to_string()));
        let result = json!({"output": t.content, "exitCode": exit_code,
            "cancelled": cancelled, "truncated": t.truncated});
        self.record_bash(command, exclude_from_context, &result, full_output_path)
    }

    /// Records a `!cmd` that ran (or that an extension's `user_bash` handler answered) as
    /// a `bashExecution` message; returns the result as RPC's `bash` answers it.
    pub fn record_bash(
        &self,
        command: &str,
        exclude_from_context: bool,
        result: &Value,
        full_output_path: Option<Value>,
    ) -> Result<Value, AgentError> {
        let output = result.get("output").and_then(Value::as_str).unwrap_or("");
        let exit_code = result.get("exitCode").and_then(Value::as_i64);
        let cancelled = result.get("cancelled").and_then(Value::as_bool) == Some(true);
        let truncated = result.get("truncated").and_then(Value::as_bool) == Some(true);
        let mut message = Map::new();
        message.insert("role".into(), "bashExecution".into());
        message.insert("command".into(), command.into());
        message.insert("output".into(), output.into());
        message.insert(
            "exitCode".into(),
            exit_code.map_or(Value::Null, Value::from),
        );
        message.insert("cancelled".into(), cancelled.into());
        message.insert("truncated".into(), truncated.into());
        if let Some(path) = &full_output_path {
            message.insert("fullOutputPath".into(), path.clone());
        }
        message.insert("timestamp".into(), now_millis().into());
        if exclude_from_context {
            message.insert("excludeFromContext".into(), true.into());
        }
        self.append(NewEntry::Message {
            message: Value::Object(message),
        })?;
        let mut result = json!({"output": output, "exitCode": exit_code,
            "cancelled": cancelled, "truncated": truncated});
        if let (Some(path), Value::Object(m)) = (full_output_path, &mut result) {
            m.insert("fullOutputPath".into(), path);
        }
        Ok(result)
    }
}
