//! Anthropic (Claude Pro/Max): authorization code + PKCE against claude.ai, tokens from
//! platform.claude.com, and what a request with such a token must look like (Claude Code's
//! identity: bearer auth, its beta flags, user agent, system prompt line and tool names).

use serde_json::{json, Value};

use super::callback::{callback_host, CallbackServer, CallbackSpec};
use super::pkce::Pkce;
use super::{
    callback_or_paste, client, endpoint, now_ms, parse_pasted, read_json, with_query, Interaction,
    LoginEvent, LoginMethod,
};

/// Claude Code's public OAuth client id.
const CLIENT_ID: &str = "9d1c250a-e61b-44d9-88ed-5944d1962f5e";
const AUTHORIZE_URL: &str = "https://claude.ai/oauth/authorize";
const TOKEN_URL: &str = "https://platform.claude.com/v1/oauth/token";
/// Preferred so it can be forwarded into containers or over SSH; Anthropic accepts any
/// loopback port, so a taken port falls back to a free one.
const CALLBACK_PORT: u16 = 53692;
const CALLBACK_PATH: &str = "/callback";
/// Where the headless (copy code) login sends the browser: a page that shows `code#state`.
const COPY_CODE_REDIRECT_URI: &str = "https://platform.claude.com/oauth/code/callback";
const SCOPES: &str = "org:create_api_key user:profile user:inference user:sessions:claude_code \
                      user:mcp_servers user:file_upload";
/// Tokens are treated as expired five minutes early.
const EXPIRY_MARGIN_MS: f64 = 5.0 * 60.0 * 1000.0;

/// The Claude Code version whose identity OAuth requests carry.
pub const CLAUDE_CODE_VERSION: &str = "2.1.322";
/// Beta flags every OAuth request sends, before the request's own.
pub const OAUTH_BETAS: [&str; 2] = ["claude-code-20250219", "oauth-2025-04-20"];
/// The system prompt line OAuth requests must start with.
pub const CLAUDE_CODE_SYSTEM_LINE: &str =
    "You are Claude Code, Anthropic's official CLI for Claude.";
/// Claude Code 2.x tool names: Pi's tools of the same name (any case) are sent in this
/// casing and mapped back in replies.
const CLAUDE_CODE_TOOLS: [&str; 17] = [
    "Read",
    "Write",
    "Edit",
    "Bash",
    "Grep",
    "Glob",
    "AskUserQuestion",
    "EnterPlanMode",
    "ExitPlanMode",
    "KillShell",
    "NotebookEdit",
    "Skill",
    "Task",
    "TaskOutput",
    "TodoWrite",
    "WebFetch",
    "WebSearch",
];

/// Whether `key` is a Claude subscription token rather than an API key (Pi's test).
pub fn is_oauth_token(key: &str) -> bool {
    key.contains("sk-ant-oat")
}

/// `name` in Claude Code's casing when it is one of its tools.
pub fn to_claude_code_name(name: &str) -> String {
    CLAUDE_CODE_TOOLS
        .iter()
        .find(|t| t.eq_ignore_ascii_case(name))
        .map_or_else(|| name.to_string(), |t| t.to_string())
}

/// A tool name from a reply, back in the casing of the request's tool of that name.
pub fn from_claude_code_name(name: &str, tools: &[String]) -> String {
    tools
        .iter()
        .find(|t| t.eq_ignore_ascii_case(name))
        .cloned()
        .unwrap_or_else(|| name.to_string())
}

/// Rewrites a Messages request body for an OAuth token: Claude Code's system line first,
/// tool names (definitions and earlier calls) in Claude Code's casing.
pub fn apply_claude_code_identity(body: &mut Value) {
    let cache = body
        .get("system")
        .and_then(|s| s.get(0))
        .and_then(|b| b.get("cache_control"))
        .cloned();
    let mut line = json!({"type": "text", "text": CLAUDE_CODE_SYSTEM_LINE});
    if let Some(c) = cache {
        line["cache_control"] = c;
    }
    let mut system = vec![line];
    if let Some(Value::Array(existing)) = body.get("system") {
        system.extend(existing.iter().cloned());
    }
    body["system"] = Value::Array(system);
    if let Some(Value::Array(tools)) = body.get_mut("tools") {
        for t in tools {
            rename(t);
        }
    }
    if let Some(Value::Array(messages)) = body.get_mut("messages") {
        for m in messages {
            if let Some(Value::Array(blocks)) = m.get_mut("content") {
                for b in blocks.iter_mut().filter(|b| b["type"] == "tool_use") {
                    rename(b);
                }
            }
        }
    }
}

fn rename(v: &mut Value) {
    if let Some(name) = v.get("name").and_then(Value::as_str) {
        let renamed = to_claude_code_name(name);
        v["name"] = json!(renamed);
    }
}

/// Runs the browser or copy-code login.
pub(crate) async fn login(mut interaction: Interaction) -> Result<Value, String> {
    let pkce = Pkce::generate();
    let copy_code = interaction.method == LoginMethod::CopyCode;
    let host = callback_host();
    let mut server = None;
    if !copy_code {
        for port in [CALLBACK_PORT, 0] {
            let spec = CallbackSpec {
                provider_name: "Anthropic",
                host: &host,
                port,
                path: CALLBACK_PATH,
                redirect_host: "localhost",
                // Pi (like Claude Code) uses the verifier as the state.
                state: Some(&pkce.verifier),
            };
            if let Ok(s) = CallbackServer::start(spec).await {
                server = Some(s);
                break;
            }
        }
    }
    let redirect_uri = match (&server, copy_code) {
        (_, true) => COPY_CODE_REDIRECT_URI.to_string(),
        (Some(s), false) => s.redirect_uri.clone(),
        (None, false) => format!("http://localhost:{CALLBACK_PORT}{CALLBACK_PATH}"),
    };
    let url = with_query(
        &endpoint(AUTHORIZE_URL),
        &[
            ("code", "true"),
            ("client_id", CLIENT_ID),
            ("response_type", "code"),
            ("redirect_uri", &redirect_uri),
            ("scope", SCOPES),
            ("code_challenge", &pkce.challenge),
            ("code_challenge_method", "S256"),
            ("state", &pkce.verifier),
        ],
    );
    let instructions = if copy_code {
        "Complete login in your browser, then copy the code Anthropic shows and paste it here."
    } else {
        "Complete login in your browser. If the browser is on another machine, paste the final redirect URL here."
    };
    interaction.notify(LoginEvent::AuthUrl {
        url,
        instructions: instructions.into(),
    });
    let pasted = if copy_code {
        match interaction.next_input().await {
            Some(line) => parse_pasted(&line),
            None => return Err("Missing authorization code".into()),
        }
    } else {
        callback_or_paste(&mut interaction, server.as_mut()).await?
    };
    drop(server);
    if pasted.state.as_deref().is_some_and(|s| s != pkce.verifier) {
        return Err("OAuth state mismatch".into());
    }
    let code = pasted
        .code
        .filter(|c| !c.is_empty())
        .ok_or("Missing authorization code")?;
    let state = pasted.state.unwrap_or_else(|| pkce.verifier.clone());
    interaction.notify(LoginEvent::Progress(
        "Exchanging authorization code for tokens...".into(),
    ));
    token_request(json!({
        "grant_type": "authorization_code",
        "client_id": CLIENT_ID,
        "code": code,
        "state": state,
        "redirect_uri": redirect_uri,
        "code_verifier": pkce.verifier,
    }))
    .await
    .map_err(|e| format!("Token exchange failed: {e}"))
}

/// Exchanges a refresh token.
pub(crate) async fn refresh(refresh_token: &str) -> Result<Value, String> {
    token_request(json!({
        "grant_type": "refresh_token",
        "client_id": CLIENT_ID,
        "refresh_token": refresh_token,
    }))
    .await
    .map_err(|e| format!("Anthropic token refresh failed: {e}"))
}

async fn token_request(body: Value) -> Result<Value, String> {
    let resp = client()
        .post(endpoint(TOKEN_URL))
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    let data = read_json(resp, "token request").await?;
    let field = |k: &str| data.get(k).and_then(Value::as_str).map(str::to_string);
    let (Some(access), Some(refresh), Some(expires_in)) = (
        field("access_token"),
        field("refresh_token"),
        data.get("expires_in").and_then(Value::as_f64),
    ) else {
        return Err("token response lacks access_token, refresh_token or expires_in".into());
    };
    Ok(json!({
        "type": "oauth",
        "refresh": refresh,
        "access": access,
        "expires": now_ms() + expires_in * 1000.0 - EXPIRY_MARGIN_MS,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_identity_rewrites_system_and_tool_names() {
        let mut body = json!({
            "system": [{"type": "text", "text": "pi prompt", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "read"}, {"name": "my_tool"}],
            "messages": [{"role": "assistant", "content": [{"type": "tool_use", "name": "bash"}]}],
        });
        apply_claude_code_identity(&mut body);
        assert_eq!(body["system"][0]["text"], CLAUDE_CODE_SYSTEM_LINE);
        assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(body["system"][1]["text"], "pi prompt");
        assert_eq!(body["tools"][0]["name"], "Read");
        assert_eq!(body["tools"][1]["name"], "my_tool");
        assert_eq!(body["messages"][0]["content"][0]["name"], "Bash");
        let tools = vec!["read".to_string()];
        assert_eq!(from_claude_code_name("Read", &tools), "read");
        assert_eq!(from_claude_code_name("Other", &tools), "Other");
        assert!(is_oauth_token("sk-ant-oat01-x"));
        assert!(!is_oauth_token("sk-ant-api03-x"));
    }
}
