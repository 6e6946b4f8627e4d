//! `/mcp` outside the TUI (Pi 1.6.0's built-in `mcp` command in RPC mode): the prompt text
//! `/mcp [login|logout|reconnect [server]]` is answered with an `extension_ui_request` notify
//! record carrying the status or the action's outcome, and the prompt response
//! `{"disposition": "handled"}`; nothing reaches the model. `/mcp login` first sends the
//! authorization URL as an `info` notify (and opens the browser on it); the browser's
//! redirect to the loopback callback completes the sign-in. The start-up report (config errors
//! and failed servers, once every server's first connection settled) is a `warning` notify.
//! In print mode the notice's text is printed on stdout (json mode: the notify record).

use std::sync::Arc;

use pi_agent::mcp::oauth::SignInPrompt;
use pi_agent::mcp::status::{self, Notice};
use pi_agent::mcp::McpManager;
use pi_agent::protocol::{response, Command, Request};
use serde_json::{json, Value};

/// The MCP servers of this run, when MCP is on.
pub(crate) fn current() -> Option<Arc<McpManager>> {
    super::MCP_MANAGERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .last()
        .cloned()
}

/// Pi's notify record of the extension UI sub-protocol.
pub(crate) fn notify_record(notice: &Notice) -> Value {
    json!({
        "type": "extension_ui_request",
        "id": pi_formats::id::session_id(),
        "method": "notify",
        "message": notice.message,
        "notifyType": notice.kind,
    })
}

/// How long `/mcp login` waits for the browser (Pi's `pi mcp login` default).
const LOGIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Pi's notice with the authorization URL of a sign-in.
fn authorization_notice(url: &str) -> Notice {
    Notice {
        message: format!("Sign in to the MCP server in your browser:\n{url}"),
        kind: "info",
    }
}

/// A sign-in from an RPC `/mcp login`: the URL as a notify record, and the browser opened.
struct RpcPrompt(std::sync::Arc<dyn Fn(&Value) + Send + Sync>);

impl SignInPrompt for RpcPrompt {
    fn show_authorization_url(&self, url: &str) {
        (self.0)(&notify_record(&authorization_notice(url)));
        pi_agent::mcp::oauth::open_browser(url);
    }
}

/// A sign-in from a print-mode `/mcp login`: the URL on stderr (stdout carries the result),
/// and the browser opened.
struct PrintPrompt;

impl SignInPrompt for PrintPrompt {
    fn show_authorization_url(&self, url: &str) {
        eprintln!("{}", authorization_notice(url).message);
        pi_agent::mcp::oauth::open_browser(url);
    }
}

/// When `request` is a `/mcp` prompt and MCP is on: handles it on a task, writing the notify
/// record and then the response through `output`; returns false otherwise.
pub(crate) fn handle_rpc(
    request: &Request,
    agent_dir: &std::path::Path,
    output: impl Fn(&Value) + Send + Sync + 'static,
    done: impl FnOnce() + Send + 'static,
) -> bool {
    let Command::Prompt { message, .. } = &request.command else {
        return false;
    };
    let (Some(args), Some(mcp)) = (status::parse_command(message), current()) else {
        return false;
    };
    let args = args.to_string();
    let id = request.id.clone();
    let agent_dir = agent_dir.to_path_buf();
    let output: std::sync::Arc<dyn Fn(&Value) + Send + Sync> = std::sync::Arc::new(output);
    tokio::spawn(async move {
        let prompt = RpcPrompt(output.clone());
        let notice = status::run_command(&mcp, &agent_dir, &args, &prompt, LOGIN_LIMIT).await;
        output(&notify_record(&notice));
        output(&response(
            &id,
            "prompt",
            Ok(Some(json!({"disposition": "handled"}))),
        ));
        done();
    });
    true
}

/// Writes the start-up report through `output` once every enabled server's first connection
/// settled (Pi's `reportProblems`), when there is something to report.
pub(crate) fn report_after_startup(output: impl Fn(&Value) + Send + 'static) {
    let Some(mcp) = current() else { return };
    tokio::spawn(async move {
        pi_agent::mcp::tool_search::wait_for_all_servers(&mcp).await;
        if let Some(notice) = status::startup_report(&mcp) {
            output(&notify_record(&notice));
        }
    });
}

/// `/mcp` given as a print-mode message, when MCP is on: the notice to print. (Pi 1.6.0
/// drops notices in print mode, so its `-p /mcp` prints nothing; its docs say `/mcp` prints
/// the status outside the TUI, which this does.)
pub(crate) async fn run_text(message: &str, agent_dir: &std::path::Path) -> Option<Notice> {
    let args = status::parse_command(message)?;
    let mcp = current()?;
    Some(status::run_command(&mcp, agent_dir, args, &PrintPrompt, LOGIN_LIMIT).await)
}
