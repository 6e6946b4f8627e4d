//! `pi mcp login <server>` and `pi mcp logout <server>`: sign in to an OAuth MCP server
//! through the browser, or delete its stored credentials (Pi 1.6.0's messages and exit codes).
//!
//! `login` connects first: a server that accepts the stored credentials is "already signed
//! in". Otherwise it prints the authorization URL, tries to open a browser (`xdg-open`/`open`,
//! failures ignored) and waits for the redirect to the loopback callback, or, in a terminal,
//! for the redirect URL pasted from a browser on another machine.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use pi_agent::mcp::config::{self, Scope};
use pi_agent::mcp::oauth::{self, SignInError, SignInPrompt};
use pi_agent::mcp::{ConnState, McpServer};

use super::mcp::{parse_options, project_trusted, Kind, HELP_HINT};

/// The whole sign-in's default time limit, in seconds.
pub const DEFAULT_LOGIN_TIMEOUT_SECS: f64 = 300.0;

/// Runs `pi mcp login|logout <args>`; returns the exit code or the message for stderr.
pub fn run(command: &str, args: &[String], agent_dir: &Path, cwd: &Path) -> Result<i32, String> {
    let known: &[(&str, Kind)] = if command == "login" {
        &[("local", Kind::Flag), ("timeout", Kind::Value)]
    } else {
        &[("local", Kind::Flag)]
    };
    let parsed = parse_options(args, known, usize::MAX)?;
    let [name] = parsed.positional.as_slice() else {
        return Err(format!(
            "Usage: pi mcp {command} <server> [-l]\n{HELP_HINT}"
        ));
    };
    let trusted = project_trusted(agent_dir, cwd);
    let project_file = config::project_config_path(cwd);
    let untrusted_note = (!trusted && project_file.exists()).then(|| {
        format!(
            "{} is ignored because the project is not trusted. Start pi in the project to trust it.",
            project_file.display()
        )
    });
    let loaded = config::load_mcp_config(agent_dir, cwd, trusted);
    let Some(entry) = loaded.servers.iter().find(|s| &s.name == name) else {
        let names: Vec<&str> = loaded.servers.iter().map(|s| s.name.as_str()).collect();
        let suggestion = names
            .iter()
            .find(|candidate| edit_distance(candidate, name) <= 2)
            .map(|s| format!(" Did you mean \"{s}\"?"))
            .unwrap_or_default();
        let note = untrusted_note.map(|n| format!(" {n}")).unwrap_or_default();
        let configured = if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        };
        return Err(format!(
            "No MCP server named \"{name}\".{suggestion}{note} Configured: {configured}."
        ));
    };
    if parsed.flags.iter().any(|f| f == "local") && entry.scope != Scope::Project {
        return Err(format!(
            "MCP server \"{name}\" is defined in {}, not in the project; omit --local.",
            entry.source.display()
        ));
    }
    let log = Arc::new(pi_agent::mcp::log::McpLog::new(agent_dir.join("mcp.log")));
    let server = McpServer::with_credentials(entry.clone(), cwd, log, Some(agent_dir));
    let Some(auth) = server.oauth().cloned() else {
        return Err(format!(
            "MCP server \"{name}\" does not use OAuth. Only HTTP servers without an Authorization header do."
        ));
    };
    if command == "logout" {
        let removed = auth.sign_out()?;
        println!(
            "{}",
            if removed {
                format!("Signed out of MCP server \"{name}\".")
            } else {
                format!("No stored credentials for MCP server \"{name}\".")
            }
        );
        return Ok(0);
    }
    let timeout = match parsed.values.get("timeout") {
        None => DEFAULT_LOGIN_TIMEOUT_SECS,
        Some(text) => text.trim().parse::<f64>().unwrap_or(f64::NAN),
    };
    if !timeout.is_finite() || timeout <= 0.0 {
        return Err("--timeout must be a positive number of seconds.".into());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let code = runtime.block_on(login(&server, &auth, name, timeout));
    runtime.block_on(server.close());
    // A pasted-URL prompt may still be reading stdin; it must not keep the process alive.
    runtime.shutdown_background();
    code
}

async fn login(
    server: &Arc<McpServer>,
    auth: &oauth::ServerAuth,
    name: &str,
    timeout: f64,
) -> Result<i32, String> {
    // Connecting first answers whether a sign-in is needed and records the server's challenge.
    if server.connect().await.is_ok() {
        println!(
            "Already signed in to MCP server \"{name}\" ({} tools).",
            server.status().tools.len()
        );
        return Ok(0);
    }
    let status = server.status();
    if status.state != ConnState::NeedsAuth {
        return Err(format!(
            "MCP server \"{name}\" failed to connect: {}",
            status.error.as_deref().unwrap_or("unknown error")
        ));
    }
    let prompt = TerminalPrompt {
        name: name.to_string(),
        interactive: std::io::stdin().is_terminal(),
    };
    match auth
        .sign_in(&prompt, Duration::from_secs_f64(timeout))
        .await
    {
        Ok(()) => {}
        Err(SignInError::Cancelled) => {
            return Err(format!(
            "Sign-in to MCP server \"{name}\" was cancelled or not completed within {} seconds.",
            timeout.round()
        ))
        }
        Err(SignInError::Failed(reason)) => {
            return Err(format!("Sign-in to MCP server \"{name}\" failed: {reason}"))
        }
    }
    if let Err(error) = server.reconnect().await {
        return Err(format!("Signed in, but {error}"));
    }
    println!(
        "Signed in to MCP server \"{name}\" ({} tools).",
        server.status().tools.len()
    );
    Ok(0)
}

/// Shows the authorization URL on stdout and opens the browser; in a terminal, also takes
/// the redirect URL pasted on stdin.
struct TerminalPrompt {
    name: String,
    interactive: bool,
}

impl SignInPrompt for TerminalPrompt {
    fn show_authorization_url(&self, url: &str) {
        println!(
            "Sign in to MCP server \"{}\" in your browser:\n{url}",
            self.name
        );
        oauth::open_browser(url);
    }

    fn pasted_redirect_url(&self) -> Option<tokio::sync::oneshot::Receiver<String>> {
        if !self.interactive {
            return None;
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        // A plain thread: a blocking read of stdin must not hold the runtime open.
        std::thread::spawn(move || {
            eprint!(
                "If the browser cannot reach this machine, paste the URL it was redirected to: "
            );
            let mut line = String::new();
            if std::io::stdin().read_line(&mut line).is_ok() {
                let _ = tx.send(line);
            }
        });
        Some(rx)
    }
}

/// Levenshtein distance, to suggest a configured name for a mistyped one.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            current.push(
                (previous[j + 1] + 1)
                    .min(current[j] + 1)
                    .min(previous[j] + cost),
            );
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("sentry", "sentyr"), 2);
        assert_eq!(edit_distance("", "ab"), 2);
        assert_eq!(edit_distance("same", "same"), 0);
    }
}
