//! OpenRouter: a PKCE browser sign-in whose code is exchanged for a permanent API key (not an
//! expiring token pair). The key is stored as `access` with no refresh token and an expiry
//! that never comes, and is sent like an `OPENROUTER_API_KEY`.

use serde_json::{json, Value};

use super::callback::{callback_host, CallbackServer, CallbackSpec};
use super::pkce::{random_hex, Pkce};
use super::{callback_or_paste, client, endpoint, with_query, Interaction, LoginEvent};

const AUTHORIZE_URL: &str = "https://openrouter.ai/auth";
const KEY_URL: &str = "https://openrouter.ai/api/v1/auth/keys";
/// JavaScript's `Number.MAX_SAFE_INTEGER`, Pi's "never expires".
const NEVER_EXPIRES: f64 = 9_007_199_254_740_991.0;

/// Runs the browser login (a pasted redirect URL or code also completes it).
pub(crate) async fn login(mut interaction: Interaction) -> Result<Value, String> {
    let pkce = Pkce::generate();
    // OpenRouter sends no `state` back; a random callback path keeps stray requests out.
    let path = format!("/oauth/callback/{}", random_hex(16));
    let host = callback_host();
    let mut server = CallbackServer::start(CallbackSpec {
        provider_name: "OpenRouter",
        host: &host,
        port: 0,
        path: &path,
        redirect_host: &host,
        state: None,
    })
    .await
    .map_err(|e| format!("Cannot start the OpenRouter OAuth callback server: {e}"))?;
    let url = with_query(
        &endpoint(AUTHORIZE_URL),
        &[
            ("callback_url", server.redirect_uri.as_str()),
            ("code_challenge", pkce.challenge.as_str()),
            ("code_challenge_method", "S256"),
        ],
    );
    interaction.notify(LoginEvent::Progress(format!(
        "Listening for OpenRouter OAuth callback on {}",
        server.redirect_uri
    )));
    interaction.notify(LoginEvent::AuthUrl {
        url,
        instructions: "Complete sign-in in your browser. If the browser is on another machine, \
                       paste the final redirect URL here."
            .into(),
    });
    let pasted = callback_or_paste(&mut interaction, Some(&mut server)).await?;
    let code = pasted.code.ok_or("Missing authorization code")?;
    interaction.notify(LoginEvent::Progress(
        "Exchanging authorization code for an API key...".into(),
    ));
    exchange(&code, &pkce.verifier).await
}

async fn exchange(code: &str, verifier: &str) -> Result<Value, String> {
    let resp = client()
        .post(endpoint(KEY_URL))
        .header("accept", "application/json")
        .json(&json!({"code": code, "code_verifier": verifier, "code_challenge_method": "S256"}))
        .send()
        .await
        .map_err(|e| format!("OpenRouter OAuth key exchange failed: {e}"))?;
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        let detail = error_detail(&body)
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        return Err(format!(
            "OpenRouter OAuth key exchange failed (HTTP {}){detail}",
            status.as_u16()
        ));
    }
    match body.get("key").and_then(Value::as_str) {
        Some(key) if !key.is_empty() => Ok(json!({
            "type": "oauth", "access": key, "refresh": "", "expires": NEVER_EXPIRES,
        })),
        _ => Err("OpenRouter OAuth response carries no \"key\"".into()),
    }
}

/// The most specific message an OpenRouter error body carries.
fn error_detail(body: &Value) -> Option<&str> {
    ["error_description", "message", "error"]
        .iter()
        .find_map(|k| body.get(*k).and_then(Value::as_str))
        .or_else(|| body.pointer("/error/message").and_then(Value::as_str))
}
