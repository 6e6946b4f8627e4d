//! Radius (Earendil's gateway, `radius`): OAuth against the gateway itself. The browser
//! login discovers the authorization page at `<gateway>/v1/oauth`, sends the browser there
//! with PKCE (S256) and takes the code on 127.0.0.1:1456/oauth/callback; the headless login
//! is RFC 8628 at `<gateway>/v1/oauth/device`. Tokens come from `<gateway>/v1/oauth/token`
//! (form), client `pi-gateway`, scope `gateway offline_access`. The access token is sent as
//! the API key.

use serde_json::{json, Value};

use super::callback::{CallbackServer, CallbackSpec};
use super::device::{poll_device_flow, Poll};
use super::pkce::{random_hex, Pkce};
use super::{
    client, endpoint, now_ms, post_form, read_json, web_url, with_query, Interaction, LoginEvent,
    LoginMethod,
};

/// The public gateway (Pi's `DEFAULT_RADIUS_GATEWAY`).
pub const GATEWAY: &str = "https://radius.pi.dev";
/// The gateway's MCP server, which a Radius login adds to `mcp.json`.
pub const MCP_URL: &str = "https://radius.pi.dev/mcp";
const CLIENT_ID: &str = "pi-gateway";
const SCOPE: &str = "gateway offline_access";
const CALLBACK_HOST: &str = "127.0.0.1";
const CALLBACK_PORT: u16 = 1456;
const CALLBACK_PATH: &str = "/oauth/callback";
const REDIRECT_URI: &str = "http://127.0.0.1:1456/oauth/callback";
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
/// Stored expiries are a minute early, as Pi's.
const EXPIRY_SKEW_MS: f64 = 60_000.0;

fn gateway_url(path: &str) -> String {
    endpoint(&format!("{GATEWAY}{path}"))
}

/// Runs the browser (default) or device-code login.
pub(crate) async fn login(interaction: Interaction) -> Result<Value, String> {
    match interaction.method {
        LoginMethod::DeviceCode => login_device_code(interaction).await,
        _ => login_browser(interaction).await,
    }
}

/// A new credential for the refresh token.
pub(crate) async fn refresh(refresh: &str) -> Result<Value, String> {
    token_request(&[
        ("grant_type", "refresh_token"),
        ("client_id", CLIENT_ID),
        ("refresh_token", refresh),
    ])
    .await
    .map_err(|e| e.message)
}

async fn login_browser(interaction: Interaction) -> Result<Value, String> {
    let resp = client()
        .get(gateway_url("/v1/oauth"))
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("Could not load Radius OAuth config from {GATEWAY}: {e}"))?;
    let discovery = read_json(resp, "Loading the Radius OAuth config").await?;
    let authorize = discovery
        .get("authorizationEndpoint")
        .and_then(Value::as_str)
        .and_then(web_url)
        .ok_or_else(|| format!("Invalid Radius OAuth config from {GATEWAY}"))?;
    let pkce = Pkce::generate();
    let state = random_hex(16);
    let url = with_query(
        &authorize,
        &[
            ("response_type", "code"),
            ("client_id", CLIENT_ID),
            ("redirect_uri", REDIRECT_URI),
            ("scope", SCOPE),
            ("code_challenge", &pkce.challenge),
            ("code_challenge_method", "S256"),
            ("handoff", "url"),
            ("state", &state),
        ],
    );
    let mut server = CallbackServer::start(CallbackSpec {
        provider_name: "Radius",
        host: CALLBACK_HOST,
        port: CALLBACK_PORT,
        path: CALLBACK_PATH,
        redirect_host: CALLBACK_HOST,
        state: Some(&state),
    })
    .await
    .map_err(|e| format!("Cannot listen on {REDIRECT_URI}: {e}"))?;
    interaction.notify(LoginEvent::Progress(format!(
        "Listening for OAuth callback on {REDIRECT_URI}"
    )));
    interaction.notify(LoginEvent::AuthUrl {
        url,
        instructions: "Continue in your browser.".into(),
    });
    let code = server.wait().await?;
    drop(server);
    token_request(&[
        ("grant_type", "authorization_code"),
        ("client_id", CLIENT_ID),
        ("redirect_uri", REDIRECT_URI),
        ("code", &code),
        ("code_verifier", &pkce.verifier),
    ])
    .await
    .map_err(|e| e.message)
}

async fn login_device_code(interaction: Interaction) -> Result<Value, String> {
    let reply = post_form(
        &gateway_url("/v1/oauth/device"),
        &[("client_id", CLIENT_ID), ("scope", SCOPE)],
        "Radius OAuth device authorization",
    )
    .await?;
    let device = reply.json();
    if !reply.status.is_success() {
        return Err(oauth_error(
            reply.status.as_u16(),
            &reply.text,
            "Radius OAuth device authorization failed",
        )
        .message);
    }
    let text = |k: &str| {
        device
            .get(k)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    let expires_in = device.get("expires_in").and_then(Value::as_f64);
    let (Some(device_code), Some(user_code), Some(page), Some(expires_in)) = (
        text("device_code"),
        text("user_code"),
        text("verification_uri"),
        expires_in,
    ) else {
        return Err("Radius OAuth device authorization response is missing required fields".into());
    };
    let page = web_url(page)
        .ok_or("Untrusted verification_uri in Radius OAuth device authorization response")?;
    interaction.notify(LoginEvent::DeviceCode {
        user_code: user_code.to_string(),
        verification_uri: page,
    });
    let interval = device.get("interval").and_then(Value::as_f64);
    poll_device_flow(interval, Some(expires_in), false, move || async move {
        let fields = [
            ("grant_type", DEVICE_GRANT),
            ("client_id", CLIENT_ID),
            ("device_code", device_code),
        ];
        match token_request(&fields).await {
            Ok(credential) => Ok(Poll::Complete(credential)),
            Err(e) => match e.code.as_deref() {
                Some("authorization_pending") => Ok(Poll::Pending),
                Some("slow_down") => Ok(Poll::SlowDown(None)),
                Some("expired_token") => Ok(Poll::Failed("Device authorization expired.".into())),
                Some("access_denied") => {
                    Ok(Poll::Failed("Device authorization was denied.".into()))
                }
                _ => Err(e.message),
            },
        }
    })
    .await
}

/// A failed token request: the OAuth `error` code, and the message to show.
struct TokenError {
    code: Option<String>,
    message: String,
}

fn oauth_error(status: u16, body: &str, what: &str) -> TokenError {
    let data: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let code = data
        .get("error")
        .and_then(Value::as_str)
        .map(str::to_string);
    let description = data
        .get("error_description")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| (data.is_null() && !body.is_empty()).then(|| body.to_string()));
    let detail = match (&code, description) {
        (Some(c), Some(d)) => format!("{c}: {d}"),
        (Some(c), None) => c.clone(),
        (None, Some(d)) => d,
        (None, None) => status.to_string(),
    };
    TokenError {
        code,
        message: format!("{what}: {detail}"),
    }
}

async fn token_request(fields: &[(&str, &str)]) -> Result<Value, TokenError> {
    let failed = "Radius OAuth token request failed";
    let reply = post_form(&gateway_url("/v1/oauth/token"), fields, failed)
        .await
        .map_err(|message| TokenError {
            code: None,
            message,
        })?;
    if !reply.status.is_success() {
        return Err(oauth_error(reply.status.as_u16(), &reply.text, failed));
    }
    let data = reply.json();
    let text = |k: &str| data.get(k).and_then(Value::as_str).unwrap_or_default();
    let expires_in = data
        .get("expires_in")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    if text("access_token").is_empty() {
        return Err(TokenError {
            code: None,
            message: format!("{failed}: no access_token in the answer"),
        });
    }
    let mut credential = json!({
        "type": "oauth",
        "access": text("access_token"),
        "refresh": text("refresh_token"),
        "expires": (now_ms() + expires_in * 1000.0 - EXPIRY_SKEW_MS).floor(),
    });
    if let Some(scope) = data.get("scope").and_then(Value::as_str) {
        credential["scope"] = json!(scope);
    }
    Ok(credential)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oauth_errors_keep_the_code_for_polling() {
        let e = oauth_error(400, r#"{"error":"authorization_pending"}"#, "x");
        assert_eq!(e.code.as_deref(), Some("authorization_pending"));
        assert_eq!(e.message, "x: authorization_pending");
        let e = oauth_error(502, "bad gateway", "x");
        assert_eq!((e.code, e.message.as_str()), (None, "x: bad gateway"));
        assert_eq!(oauth_error(500, "", "x").message, "x: 500");
    }
}
