//! The line printed after the UI exits that tells how to come back to the session (Pi's
//! "To resume this session:" hint).
//!
//! Pi prints it only to a terminal and only when the session file exists (a session with no
//! message yet has none, `--no-session` writes none), and adds `--session-dir` only when the
//! file is not in the default directory for the session's cwd, so the command works from
//! anywhere. The id goes on its own line so a triple-click selects the whole command.

use std::path::Path;

use pi_storage::paths::{resolve_path, session_dir_name, sessions_root};

/// Pi's `quoteIfNeeded`: a path made only of `[A-Za-z0-9_./~:@-]` is printed as is,
/// anything else in single quotes (a `'` inside as `'\''`), so the line can be pasted into a
/// POSIX shell.
fn shell_word(value: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./~:@".contains(c);
    if !value.is_empty() && value.chars().all(plain) {
        value.to_string()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

/// `pi [--session-dir DIR] --session ID` for the session stored in `session_file`.
pub fn resume_command(
    session_file: &Path,
    session_id: &str,
    cwd: &str,
    agent_dir: &Path,
) -> String {
    let mut args = vec!["pi".to_string()];
    let dir = session_file.parent().map(resolve_path).unwrap_or_default();
    let default_dir = resolve_path(&sessions_root(agent_dir).join(session_dir_name(cwd)));
    if dir != default_dir {
        args.push("--session-dir".into());
        args.push(shell_word(&dir.to_string_lossy()));
    }
    args.push("--session".into());
    args.push(session_id.to_string());
    args.join(" ")
}

/// The hint as printed: the label dimmed, then the command. `None` when there is nothing to
/// resume (no file on disk).
pub fn resume_hint(
    session_file: Option<&Path>,
    session_id: &str,
    cwd: &str,
    agent_dir: &Path,
) -> Option<String> {
    let file = session_file?;
    if session_id.is_empty() || !file.is_file() {
        return None;
    }
    let command = resume_command(file, session_id, cwd, agent_dir);
    // The id and directory come from the session file: never let a control character through.
    let command = crate::visible::visible_line(&command).into_owned();
    Some(format!(
        "\x1b[2mTo resume this session:\x1b[22m\n{command}\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn default_directory_needs_only_the_id() {
        let agent = PathBuf::from("/home/u/.pi/agent");
        let file = agent.join("sessions/--work-proj--/2026_x_abc.jsonl");
        assert_eq!(
            resume_command(&file, "abc", "/work/proj", &agent),
            "pi --session abc"
        );
    }

    #[test]
    fn another_directory_is_named_and_quoted_when_needed() {
        let agent = PathBuf::from("/home/u/.pi/agent");
        let file = PathBuf::from("/tmp/my sessions/it's/x.jsonl");
        assert_eq!(
            resume_command(&file, "abc", "/work/proj", &agent),
            r"pi --session-dir '/tmp/my sessions/it'\''s' --session abc"
        );
        let file = PathBuf::from("/tmp/plain/x.jsonl");
        assert_eq!(
            resume_command(&file, "abc", "/work/proj", &agent),
            "pi --session-dir /tmp/plain --session abc"
        );
    }

    #[test]
    fn no_file_no_hint() {
        let agent = PathBuf::from("/nonexistent-agent");
        assert_eq!(resume_hint(None, "abc", "/w", &agent), None);
        let missing = PathBuf::from("/nonexistent-agent/x.jsonl");
        assert_eq!(resume_hint(Some(&missing), "abc", "/w", &agent), None);
    }
}
