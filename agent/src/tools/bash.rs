//! The `bash` tool: run a command in its own process group, stream its output, keep the tail.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;
use std::time::Instant;

use serde_json::json;
use serde_json::Map;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::fs_util::errno_name_and_text;
use super::output::OutputAccumulator;
use super::output::OutputSnapshot;
use super::truncate::format_size;
use super::truncate::TruncatedBy;
use super::truncate::DEFAULT_MAX_BYTES;
use super::ContentBlock;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::ToolOutput;
use super::ToolUpdateFn;
use pi_engine::js::number_to_string;

const MAX_TIMEOUT_MS: f64 = 2_147_483_647.0;
/// How often streamed output is reported (Pi's `BASH_UPDATE_THROTTLE_MS`).
const UPDATE_THROTTLE: Duration = Duration::from_millis(100);
/// After the shell exits, output still arriving from its background processes is read until the
/// pipes close or stay quiet this long (Pi's `EXIT_STDIO_GRACE_MS`).
const EXIT_STDIO_GRACE: Duration = Duration::from_millis(100);
/// Variables describing the parent's session, never inherited by a command.
const SESSION_VARIABLES: [&str; 5] = [
    "PI_SESSION_ID",
    "PI_SESSION_FILE",
    "PI_PROVIDER",
    "PI_MODEL",
    "PI_REASONING_LEVEL",
];

/// Pi's `bash` tool.
#[derive(Debug, Default)]
pub struct BashTool;

fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        json!({
            "type": "object",
            "required": ["command"],
            "properties": {
                "command": {"type": "string", "description": "Shell command to execute"},
                "timeout": {"type": "number", "description": "Timeout in seconds (optional, no default timeout)"}
            }
        })
    })
}

/// How a command run ended when it did not produce an exit code.
enum ExecFailure {
    Aborted,
    /// The deadline hit; `shell_exit` is set when the shell itself had exited before it and only
    /// background processes were still writing: (exit code, seconds after start).
    TimedOut {
        shell_exit: Option<(i32, f64)>,
    },
    Other(String),
}

fn resolve_timeout(timeout: Option<f64>) -> Result<Option<Duration>, String> {
    let Some(timeout) = timeout else {
        return Ok(None);
    };
    if !timeout.is_finite() || timeout <= 0.0 {
        return Err("Invalid timeout: must be a finite number of seconds".to_string());
    }
    let ms = timeout * 1000.0;
    if ms > MAX_TIMEOUT_MS {
        return Err(format!(
            "Invalid timeout: maximum is {} seconds",
            number_to_string(MAX_TIMEOUT_MS / 1000.0)
        ));
    }
    Ok(Some(Duration::from_secs_f64(timeout)))
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// Pi's `getShellConfig`: the settings' shell path (which must exist), else `/bin/bash`, else
/// `bash` on PATH, else `sh`.
fn shell_program(custom: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(custom) = custom {
        if std::fs::metadata(custom).is_ok() {
            return Ok(custom.to_path_buf());
        }
        return Err(format!("Custom shell path not found: {}", custom.display()));
    }
    let bin_bash = Path::new("/bin/bash");
    if std::fs::metadata(bin_bash).is_ok() {
        return Ok(bin_bash.to_path_buf());
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("bash");
            if is_executable_file(&candidate) {
                return Ok(candidate);
            }
        }
    }
    Ok(PathBuf::from("sh"))
}

/// The command's environment: ours without the parent session's variables, `bin_dir` on PATH,
/// then the context's variables.
fn command_env(ctx: &ToolContext) -> BTreeMap<OsString, OsString> {
    let mut env: BTreeMap<OsString, OsString> = std::env::vars_os()
        .filter(|(key, _)| !SESSION_VARIABLES.iter().any(|name| key == name))
        .collect();
    if let Some(bin_dir) = &ctx.bin_dir {
        let path_key = OsString::from("PATH");
        let current = env.get(&path_key).cloned().unwrap_or_default();
        let mut entries: Vec<PathBuf> = std::env::split_paths(&current)
            .filter(|p| !p.as_os_str().is_empty())
            .collect();
        if !entries.iter().any(|entry| entry == bin_dir) {
            entries.insert(0, bin_dir.clone());
            if let Ok(joined) = std::env::join_paths(entries) {
                env.insert(path_key, joined);
            }
        }
    }
    for (key, value) in &ctx.env {
        env.insert(OsString::from(key), OsString::from(value));
    }
    env
}

/// Kills the process group `pid` leads (the shell and everything it started that did not leave
/// the group), or just `pid` when the group is gone.
fn kill_process_tree(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: plain syscalls on a pid we spawned; failures are reported through the return value.
    #[allow(unsafe_code)]
    unsafe {
        if libc::killpg(pid, libc::SIGKILL) != 0 {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Streams output updates at most every [`UPDATE_THROTTLE`].
struct UpdateThrottle {
    dirty: bool,
    last: Option<Instant>,
    deadline: Option<tokio::time::Instant>,
}

impl UpdateThrottle {
    fn emit(&mut self, output: &mut OutputAccumulator, on_update: ToolUpdateFn<'_>) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        self.deadline = None;
        self.last = Some(Instant::now());
        let snapshot = output.snapshot(true);
        let mut details = Map::new();
        if snapshot.truncation.truncated {
            details.insert("truncation".to_string(), snapshot.truncation.to_json());
        }
        if let Some(path) = &snapshot.full_output_path {
            details.insert("fullOutputPath".to_string(), json!(path.to_string_lossy()));
        }
        on_update(ToolOutput {
            content: vec![ContentBlock::Text(snapshot.content)],
            details: Some(Value::Object(details)),
            is_error: false,
            structured: None,
            usage: None,
        });
    }

    fn schedule(&mut self, output: &mut OutputAccumulator, on_update: ToolUpdateFn<'_>) {
        self.dirty = true;
        let elapsed = self.last.map_or(UPDATE_THROTTLE, |last| last.elapsed());
        if elapsed >= UPDATE_THROTTLE {
            self.emit(output, on_update);
        } else if self.deadline.is_none() {
            self.deadline = Some(tokio::time::Instant::now() + (UPDATE_THROTTLE - elapsed));
        }
    }
}

async fn sleep_until_or_forever(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Runs the command, feeding `output`; the exit code, or why there is none.
async fn exec(
    command: &str,
    ctx: &ToolContext,
    timeout: Option<f64>,
    cancel: &CancellationToken,
    output: &mut OutputAccumulator,
    on_update: ToolUpdateFn<'_>,
) -> Result<i32, ExecFailure> {
    let timeout_duration = resolve_timeout(timeout).map_err(ExecFailure::Other)?;
    if cancel.is_cancelled() {
        return Err(ExecFailure::Aborted);
    }
    let shell = shell_program(ctx.shell_path.as_deref()).map_err(ExecFailure::Other)?;
    if std::fs::metadata(&ctx.cwd).is_err() {
        return Err(ExecFailure::Other(format!(
            "Working directory does not exist: {}\nCannot execute bash commands.",
            ctx.cwd.display()
        )));
    }
    let mut child = Command::new(&shell)
        .arg("-c")
        .arg(command)
        .current_dir(&ctx.cwd)
        .env_clear()
        .envs(command_env(ctx))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so a kill reaches everything the command started.
        .process_group(0)
        .spawn()
        .map_err(|e| {
            let (code, _) = errno_name_and_text(&e);
            ExecFailure::Other(format!("spawn {} {code}", shell.display()))
        })?;
    let pid = child.id().unwrap_or(0);
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let started = Instant::now();
    let deadline = timeout_duration.map(|d| tokio::time::Instant::now() + d);
    let mut throttle = UpdateThrottle {
        dirty: false,
        last: None,
        deadline: None,
    };
    let mut exit_status: Option<std::process::ExitStatus> = None;
    let mut shell_exited_after: Option<Duration> = None;
    let mut timed_out = false;
    let mut timeout_shell_exit: Option<Duration> = None;
    let mut aborted = false;
    let mut grace_deadline: Option<tokio::time::Instant> = None;
    let mut out_buf = vec![0u8; 64 * 1024];
    let mut err_buf = vec![0u8; 64 * 1024];
    loop {
        if exit_status.is_some() && stdout.is_none() && stderr.is_none() {
            break;
        }
        tokio::select! {
            read = async { stdout.as_mut()?.read(&mut out_buf).await.ok() }, if stdout.is_some() => {
                match read {
                    Some(n) if n > 0 => {
                        output.append(&out_buf[..n]);
                        throttle.schedule(output, on_update);
                        if exit_status.is_some() {
                            grace_deadline = Some(tokio::time::Instant::now() + EXIT_STDIO_GRACE);
                        }
                    }
                    _ => stdout = None,
                }
            }
            read = async { stderr.as_mut()?.read(&mut err_buf).await.ok() }, if stderr.is_some() => {
                match read {
                    Some(n) if n > 0 => {
                        output.append(&err_buf[..n]);
                        throttle.schedule(output, on_update);
                        if exit_status.is_some() {
                            grace_deadline = Some(tokio::time::Instant::now() + EXIT_STDIO_GRACE);
                        }
                    }
                    _ => stderr = None,
                }
            }
            status = child.wait(), if exit_status.is_none() => {
                match status {
                    Ok(status) => {
                        exit_status = Some(status);
                        shell_exited_after = Some(started.elapsed());
                        grace_deadline = Some(tokio::time::Instant::now() + EXIT_STDIO_GRACE);
                    }
                    Err(e) => return Err(ExecFailure::Other(e.to_string())),
                }
            }
            () = sleep_until_or_forever(grace_deadline), if grace_deadline.is_some() => {
                // The shell is gone and its pipes went quiet; a detached descendant may hold them
                // open forever.
                break;
            }
            () = sleep_until_or_forever(deadline), if deadline.is_some() && !timed_out => {
                timed_out = true;
                timeout_shell_exit = shell_exited_after;
                // Also after the shell exited: the group kill still reaches background processes
                // holding the pipes.
                kill_process_tree(pid);
            }
            () = cancel.cancelled(), if !aborted => {
                aborted = true;
                kill_process_tree(pid);
            }
            () = sleep_until_or_forever(throttle.deadline), if throttle.deadline.is_some() => {
                throttle.emit(output, on_update);
            }
        }
    }
    output.finish();
    throttle.emit(output, on_update);
    if aborted {
        return Err(ExecFailure::Aborted);
    }
    let exit_code = match exit_status {
        Some(status) => {
            use std::os::unix::process::ExitStatusExt;
            // A signal-killed shell has no exit code; use the shell convention so it never looks
            // like success.
            status
                .code()
                .or_else(|| status.signal().map(|signal| 128 + signal))
                .unwrap_or(1)
        }
        None => 1,
    };
    if timed_out {
        let shell_exit = timeout_shell_exit
            .map(|after| (exit_code, (after.as_secs_f64() * 10.0).round() / 10.0));
        return Err(ExecFailure::TimedOut { shell_exit });
    }
    Ok(exit_code)
}

/// The display text of a snapshot and its `details` when truncated.
fn format_output(
    snapshot: &OutputSnapshot,
    last_line_bytes: usize,
    empty_text: &str,
) -> (String, Option<Value>) {
    let truncation = &snapshot.truncation;
    let mut text = if snapshot.content.is_empty() {
        empty_text.to_string()
    } else {
        snapshot.content.clone()
    };
    if !truncation.truncated {
        return (text, None);
    }
    let path = snapshot.full_output_path.as_ref().map_or_else(
        || "undefined".to_string(),
        |p| p.to_string_lossy().into_owned(),
    );
    let mut details = Map::new();
    details.insert("truncation".to_string(), truncation.to_json());
    if snapshot.full_output_path.is_some() {
        details.insert("fullOutputPath".to_string(), json!(path));
    }
    let start_line = (truncation.total_lines + 1).saturating_sub(truncation.output_lines);
    let end_line = truncation.total_lines;
    if truncation.last_line_partial {
        text.push_str(&format!(
            "\n\n[Showing last {} of line {end_line} (line is {}). Full output: {path}]",
            format_size(truncation.output_bytes),
            format_size(last_line_bytes)
        ));
    } else if truncation.truncated_by == Some(TruncatedBy::Lines) {
        text.push_str(&format!(
            "\n\n[Showing lines {start_line}-{end_line} of {}. Full output: {path}]",
            truncation.total_lines
        ));
    } else {
        text.push_str(&format!(
            "\n\n[Showing lines {start_line}-{end_line} of {} ({} limit). Full output: {path}]",
            truncation.total_lines,
            format_size(DEFAULT_MAX_BYTES)
        ));
    }
    (text, Some(Value::Object(details)))
}

/// Output limit of `structuredContent.output` (Pi's `STRUCTURED_OUTPUT_MAX_BYTES`).
const STRUCTURED_OUTPUT_MAX_BYTES: usize = 1024 * 1024;

/// Pi's `structuredContent` of a finished command: the whole output (up to 1 MiB), whether
/// it was cut, the full output's file when it was, the exit code and the wall time in
/// seconds to one decimal.
fn structured_content(
    output: &OutputAccumulator,
    full_output_path: Option<&Path>,
    exit_code: i32,
    elapsed: Duration,
) -> Value {
    let (text, truncated) = output.read_full_output(STRUCTURED_OUTPUT_MAX_BYTES);
    let mut m = Map::new();
    m.insert("output".into(), text.into());
    m.insert("truncated".into(), truncated.into());
    if let (true, Some(path)) = (truncated, full_output_path) {
        m.insert("full_output_path".into(), path.display().to_string().into());
    }
    m.insert("exit_code".into(), exit_code.into());
    let tenths = (elapsed.as_millis() as f64 / 100.0).round() / 10.0;
    m.insert("wall_time_seconds".into(), json!(tenths));
    Value::Object(m)
}

fn append_status(text: &str, status: &str) -> String {
    if text.is_empty() {
        status.to_string()
    } else {
        format!("{text}\n\n{status}")
    }
}

#[async_trait::async_trait]
impl Tool for BashTool {
    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> &str {
        "Execute a bash command in the current working directory. Returns stdout and stderr. Output is truncated to last 2000 lines or 50KB (whichever is hit first). If truncated, full output is saved to a temp file. Optionally provide a timeout in seconds."
    }

    fn parameters(&self) -> &Value {
        schema()
    }

    fn output_schema(&self) -> Option<&Value> {
        static OUTPUT: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        Some(OUTPUT.get_or_init(|| {
            serde_json::json!({"type": "object", "properties": {
                "output": {"type": "string", "description": "Combined stdout and stderr, possibly truncated"},
                "truncated": {"type": "boolean"},
                "full_output_path": {"type": "string", "description": "Full output, when truncated"},
                "exit_code": {"type": "number"},
                "wall_time_seconds": {"type": "number"}
            }, "required": ["output", "truncated", "exit_code", "wall_time_seconds"]})
        }))
    }

    fn prefers_constrained_sampling(&self) -> bool {
        true
    }

    fn prompt_snippet(&self) -> Option<&str> {
        Some("Execute bash commands (ls, grep, find, etc.)")
    }

    fn prompt_guidelines(&self) -> &[&str] {
        &["You can inspect PI_* environment variables for current model and session details."]
    }

    async fn execute(
        &self,
        _call_id: &str,
        args: Value,
        ctx: &ToolContext,
        cancel: CancellationToken,
        on_update: ToolUpdateFn<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let command = args.get("command").and_then(Value::as_str).unwrap_or("");
        let timeout = args.get("timeout").and_then(Value::as_f64);
        let command = match &ctx.shell_command_prefix {
            Some(prefix) => format!("{prefix}\n{command}"),
            None => command.to_string(),
        };
        let mut output = OutputAccumulator::new("pi-bash", ctx.temp_dir.clone());
        on_update(ToolOutput {
            content: Vec::new(),
            details: None,
            is_error: false,
            structured: None,
            usage: None,
        });
        let started = Instant::now();
        let result = exec(&command, ctx, timeout, &cancel, &mut output, on_update).await;
        output.finish();
        let snapshot = output.snapshot(true);
        output.close_temp_file();
        let last_line_bytes = output.last_line_bytes();
        match result {
            Err(ExecFailure::Aborted) => {
                let (text, _) = format_output(&snapshot, last_line_bytes, "");
                Err(ToolError::new(append_status(&text, "Command aborted")))
            }
            Err(ExecFailure::TimedOut { shell_exit }) => {
                let (text, _) = format_output(&snapshot, last_line_bytes, "");
                let seconds = timeout.map_or_else(String::new, number_to_string);
                let mut status = format!("Command timed out after {seconds} seconds");
                if let Some((code, after)) = shell_exit {
                    status.push_str(&format!(
                        ". The shell exited with code {code} after {} seconds, but background processes it started kept writing output until the timeout.",
                        number_to_string(after)
                    ));
                }
                Err(ToolError::new(append_status(&text, &status)))
            }
            Err(ExecFailure::Other(message)) => Err(ToolError::new(message)),
            Ok(exit_code) => {
                let (text, details) = format_output(&snapshot, last_line_bytes, "(no output)");
                let structured = Some(structured_content(
                    &output,
                    snapshot.full_output_path.as_deref(),
                    exit_code,
                    started.elapsed(),
                ));
                if exit_code != 0 {
                    return Ok(ToolOutput {
                        content: vec![ContentBlock::Text(append_status(
                            &text,
                            &format!("Command exited with code {exit_code}"),
                        ))],
                        details,
                        is_error: true,
                        structured,
                        usage: None,
                    });
                }
                Ok(ToolOutput {
                    content: vec![ContentBlock::Text(text)],
                    details,
                    is_error: false,
                    structured,
                    usage: None,
                })
            }
        }
    }
}

#[cfg(test)]
#[path = "bash_tests.rs"]
mod tests;
