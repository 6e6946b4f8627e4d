//! `<agentDir>/mcp.log`: the `notifications/message` log lines servers send, one append per
//! message as `<time> [<server>] <level> <logger>: <message>`, moved to `mcp.log.1` once the
//! file passes 5 MB (Pi's `McpServerLog`). Write errors are ignored: logging must never break a
//! tool call.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::Value;

const MAX_LOG_BYTES: u64 = 5 * 1024 * 1024;

/// The shared log file of every server of a run.
#[derive(Debug)]
pub struct McpLog {
    path: PathBuf,
    lock: Mutex<()>,
}

impl McpLog {
    /// A log at `path` (created on the first message).
    pub fn new(path: PathBuf) -> Self {
        McpLog {
            path,
            lock: Mutex::new(()),
        }
    }

    /// Appends one message of `server` (`level`, optional `logger`, `data` of any JSON type).
    pub fn write(&self, server: &str, level: &str, logger: Option<&str>, data: &Value) {
        let line = format_log_line(server, level, logger, data, &pi_formats::time::now_iso());
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let size = std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        if size > MAX_LOG_BYTES {
            let mut rotated = self.path.clone().into_os_string();
            rotated.push(".1");
            let _ = std::fs::rename(&self.path, rotated);
        }
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
        {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

/// One log line; continuation lines of the message are indented by four spaces.
pub fn format_log_line(
    server: &str,
    level: &str,
    logger: Option<&str>,
    data: &Value,
    time: &str,
) -> String {
    let text = match data {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let text = text.replace("\r\n", "\n").replace('\n', "\n    ");
    let logger = logger
        .filter(|l| !l.is_empty())
        .map(|l| format!(" {l}:"))
        .unwrap_or_default();
    format!("{time} [{server}] {level}{logger} {text}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_rotation() {
        let line = format_log_line("fs", "info", Some("core"), &Value::from("a\nb"), "T");
        assert_eq!(line, "T [fs] info core: a\n    b\n");
        let line = format_log_line("fs", "error", None, &serde_json::json!({"x": 1}), "T");
        assert_eq!(line, "T [fs] error {\"x\":1}\n");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.log");
        std::fs::write(&path, vec![b'x'; (MAX_LOG_BYTES + 1) as usize]).unwrap();
        let log = McpLog::new(path.clone());
        log.write("s", "info", None, &Value::from("hello"));
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .ends_with("[s] info hello\n"));
        assert!(dir.path().join("mcp.log.1").exists());
    }
}
