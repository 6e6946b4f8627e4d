//! `/mcp login <server>` and `/mcp logout <server>` inside a session: the same sign-in as
//! `pi mcp login`, then the live connection picks up the new credentials (or drops the old
//! ones). Front ends call these and show the [`Notice`] (Pi's texts and levels).

use std::sync::Arc;
use std::time::Duration;

use super::SignInError;
use super::SignInPrompt;
use crate::mcp::McpServer;

/// What to tell the user, with Pi's level.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice {
    /// An `info` notification.
    Info(String),
    /// An `error` notification.
    Error(String),
}

impl Notice {
    /// The text, whatever the level.
    pub fn text(&self) -> &str {
        match self {
            Notice::Info(text) | Notice::Error(text) => text,
        }
    }
}

/// Pi's text when `/mcp login|logout` finds no enabled server that uses OAuth.
pub const NO_OAUTH_SERVERS: &str =
    "No enabled MCP server uses OAuth. Only HTTP servers without an Authorization header do.";

/// Signs in to `server` (the authorization URL goes to `prompt`) within `limit`, then
/// reconnects it so its tools are available on the next turn.
pub async fn sign_in(
    server: &Arc<McpServer>,
    prompt: &dyn SignInPrompt,
    limit: Duration,
) -> Notice {
    let name = server.name();
    let Some(auth) = server.oauth() else {
        return Notice::Error(format!("MCP server \"{name}\" does not use OAuth."));
    };
    match auth.sign_in(prompt, limit).await {
        Ok(()) => {}
        Err(SignInError::Cancelled) => return Notice::Info("Sign-in cancelled.".into()),
        Err(SignInError::Failed(reason)) => {
            return Notice::Error(format!("Sign-in failed: {reason}"))
        }
    }
    if let Err(error) = server.reconnect().await {
        return Notice::Error(format!("Signed in, but {error}"));
    }
    Notice::Info(format!(
        "Signed in to MCP server \"{name}\" ({} tools).",
        server.status().tools.len()
    ))
}

/// Deletes `server`'s stored credentials and disconnects it; it then needs sign-in.
pub async fn sign_out(server: &Arc<McpServer>) -> Notice {
    let name = server.name();
    let Some(auth) = server.oauth() else {
        return Notice::Error(format!("MCP server \"{name}\" does not use OAuth."));
    };
    let removed = match auth.sign_out() {
        Ok(removed) => removed,
        Err(error) => return Notice::Error(error),
    };
    server.signed_out().await;
    Notice::Info(if removed {
        format!("Signed out of MCP server \"{name}\".")
    } else {
        format!("No stored credentials for MCP server \"{name}\".")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::ConnState;
    use crate::mcp::McpManager;

    #[tokio::test]
    async fn sign_out_deletes_credentials_and_marks_the_server() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("mcp.json"),
            serde_json::json!({"mcpServers": {
                "remote": {"url": "http://127.0.0.1:1/mcp"},
                "keyed": {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "x"}}
            }})
            .to_string(),
        )
        .unwrap();
        let manager = McpManager::load(dir.path(), dir.path(), false);
        let remote = manager.servers()[0].clone();
        let auth = remote.oauth().unwrap();
        auth.store()
            .modify("remote", auth.server_url(), |s| {
                s.tokens = Some(super::super::Tokens {
                    access_token: "t".into(),
                    ..Default::default()
                })
            })
            .unwrap();
        assert!(auth.has_tokens());
        assert_eq!(
            sign_out(&remote).await,
            Notice::Info("Signed out of MCP server \"remote\".".into())
        );
        assert!(!auth.has_tokens());
        assert_eq!(remote.status().state, ConnState::NeedsAuth);
        assert_eq!(
            sign_out(&remote).await,
            Notice::Info("No stored credentials for MCP server \"remote\".".into())
        );
        assert_eq!(
            sign_out(&manager.servers()[1]).await,
            Notice::Error("MCP server \"keyed\" does not use OAuth.".into())
        );
    }
}
