//! OpenAI Codex (ChatGPT Plus/Pro): authorization code + PKCE against auth.openai.com with
//! the Codex CLI's client id and loopback port 1455, or OpenAI's device-code login. The
//! access token is a JWT whose `https://api.openai.com/auth` claim names the ChatGPT
//! account, stored as `accountId` and sent as `chatgpt-account-id`.

use std::time::Duration;

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use serde_json::{json, Value};

use super::callback::{callback_host, CallbackServer, CallbackSpec};
use super::device::{poll_device_flow, Poll};
use super::pkce::{random_hex, Pkce};
use super::{
    callback_or_paste, client, endpoint, now_ms, with_query, Interaction, LoginEvent, LoginMethod,
};

/// The Codex CLI's public client id.
const CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";
const AUTHORIZE_URL: &str = "https://auth.openai.com/oauth/authorize";
const TOKEN_URL: &str = "https://auth.openai.com/oauth/token";
/// Shared with the Codex CLI; when taken, the login falls back to the pasted redirect URL.
const CALLBACK_PORT: u16 = 1455;
const CALLBACK_PATH: &str = "/auth/callback";
const REDIRECT_URI: &str = "http://localhost:1455/auth/callback";
const DEVICE_USER_CODE_URL: &str = "https://auth.openai.com/api/accounts/deviceauth/usercode";
const DEVICE_TOKEN_URL: &str = "https://auth.openai.com/api/accounts/deviceauth/token";
const DEVICE_VERIFICATION_URI: &str = "https://auth.openai.com/codex/device";
const DEVICE_REDIRECT_URI: &str = "https://auth.openai.com/deviceauth/callback";
const DEVICE_CODE_TIMEOUT_SECONDS: f64 = 15.0 * 60.0;
const SCOPE: &str = "openid profile email offline_access";
const JWT_CLAIM_PATH: &str = "https://api.openai.com/auth";

/// The ChatGPT account id inside a Codex access token, if it has one.
pub fn account_id(access_token: &str) -> Option<String> {
    let mut parts = access_token.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    let trimmed = payload.trim_end_matches('=');
    let bytes = URL_SAFE_NO_PAD
        .decode(trimmed)
        .or_else(|_| STANDARD.decode(payload))
        .ok()?;
    let claims: Value = serde_json::from_slice(&bytes).ok()?;
    claims
        .get(JWT_CLAIM_PATH)?
        .get("chatgpt_account_id")?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Runs the browser or device-code login.
pub(crate) async fn login(interaction: Interaction) -> Result<Value, String> {
    match interaction.method {
        LoginMethod::DeviceCode => login_device_code(interaction).await,
        _ => login_browser(interaction).await,
    }
}

async fn login_browser(mut interaction: Interaction) -> Result<Value, String> {
    let pkce = Pkce::generate();
    let state = random_hex(16);
    let url = with_query(
        &endpoint(AUTHORIZE_URL),
        &[
            ("response_type", "code"),
            ("client_id", CLIENT_ID),
            ("redirect_uri", REDIRECT_URI),
            ("scope", SCOPE),
            ("code_challenge", &pkce.challenge),
            ("code_challenge_method", "S256"),
            ("state", &state),
            ("id_token_add_organizations", "true"),
            ("codex_cli_simplified_flow", "true"),
            ("originator", "pi"),
        ],
    );
    let host = callback_host();
    let mut server = CallbackServer::start(CallbackSpec {
        provider_name: "OpenAI",
        host: &host,
        port: CALLBACK_PORT,
        path: CALLBACK_PATH,
        redirect_host: "localhost",
        state: Some(&state),
    })
    .await
    .ok();
    interaction.notify(LoginEvent::AuthUrl {
        url,
        instructions: "A browser window should open. Complete login to finish.".into(),
    });
    let pasted = callback_or_paste(&mut interaction, server.as_mut()).await?;
    drop(server);
    if pasted.state.as_deref().is_some_and(|s| s != state) {
        return Err("State mismatch".into());
    }
    let code = pasted
        .code
        .filter(|c| !c.is_empty())
        .ok_or("Missing authorization code")?;
    exchange_code(&code, &pkce.verifier, REDIRECT_URI).await
}

async fn login_device_code(interaction: Interaction) -> Result<Value, String> {
    let resp = client()
        .post(endpoint(DEVICE_USER_CODE_URL))
        .json(&json!({"client_id": CLIENT_ID}))
        .send()
        .await
        .map_err(|e| format!("OpenAI Codex device code request failed: {e}"))?;
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    if status == 404 {
        return Err("OpenAI Codex device code login is not enabled for this server. Use browser login or verify the server URL.".into());
    }
    if !(200..300).contains(&status) {
        return Err(format!(
            "OpenAI Codex device code request failed with status {status}: {text}"
        ));
    }
    let data: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let interval = match data.get("interval") {
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        Some(v) => v.as_f64(),
        None => None,
    };
    let (Some(device_auth_id), Some(user_code), Some(interval)) = (
        data.get("device_auth_id").and_then(Value::as_str),
        data.get("user_code").and_then(Value::as_str),
        interval.filter(|i| i.is_finite() && *i >= 0.0),
    ) else {
        return Err(format!("Invalid OpenAI Codex device code response: {text}"));
    };
    interaction.notify(LoginEvent::DeviceCode {
        user_code: user_code.to_string(),
        verification_uri: DEVICE_VERIFICATION_URI.to_string(),
    });
    let http = client();
    let poll_body = json!({"device_auth_id": device_auth_id, "user_code": user_code});
    let (code, verifier) = poll_device_flow(
        Some(interval),
        Some(DEVICE_CODE_TIMEOUT_SECONDS),
        false,
        || {
            let req = http
                .post(endpoint(DEVICE_TOKEN_URL))
                .json(&poll_body)
                .timeout(Duration::from_secs(30));
            async move {
                let resp = req
                    .send()
                    .await
                    .map_err(|e| format!("OpenAI Codex device auth failed: {e}"))?;
                let status = resp.status().as_u16();
                let text = resp.text().await.unwrap_or_default();
                let data: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                if (200..300).contains(&status) {
                    let code = data.get("authorization_code").and_then(Value::as_str);
                    let verifier = data.get("code_verifier").and_then(Value::as_str);
                    return Ok(match (code, verifier) {
                        (Some(c), Some(v)) => Poll::Complete((c.to_string(), v.to_string())),
                        _ => Poll::Failed(format!(
                            "Invalid OpenAI Codex device auth token response: {text}"
                        )),
                    });
                }
                if status == 403 || status == 404 {
                    return Ok(Poll::Pending);
                }
                let error = match data.get("error") {
                    Some(Value::Object(o)) => o.get("code").and_then(Value::as_str),
                    Some(v) => v.as_str(),
                    None => None,
                };
                Ok(match error {
                    Some("deviceauth_authorization_pending") => Poll::Pending,
                    Some("slow_down") => Poll::SlowDown(None),
                    _ => Poll::Failed(format!(
                        "OpenAI Codex device auth failed with status {status}: {text}"
                    )),
                })
            }
        },
    )
    .await?;
    exchange_code(&code, &verifier, DEVICE_REDIRECT_URI).await
}

async fn exchange_code(code: &str, verifier: &str, redirect_uri: &str) -> Result<Value, String> {
    token_request(
        &[
            ("grant_type", "authorization_code"),
            ("client_id", CLIENT_ID),
            ("code", code),
            ("code_verifier", verifier),
            ("redirect_uri", redirect_uri),
        ],
        "exchange",
    )
    .await
}

/// Exchanges a refresh token.
pub(crate) async fn refresh(refresh_token: &str) -> Result<Value, String> {
    token_request(
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_id", CLIENT_ID),
        ],
        "refresh",
    )
    .await
}

async fn token_request(form: &[(&str, &str)], operation: &str) -> Result<Value, String> {
    let resp = client()
        .post(endpoint(TOKEN_URL))
        .form(form)
        .send()
        .await
        .map_err(|e| format!("OpenAI Codex token {operation} error: {e}"))?;
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    if !(200..300).contains(&status) {
        return Err(format!(
            "OpenAI Codex token {operation} failed ({status}): {text}"
        ));
    }
    let data: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let field = |k: &str| {
        data.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let (Some(access), Some(refresh), Some(expires_in)) = (
        field("access_token"),
        field("refresh_token"),
        data.get("expires_in").and_then(Value::as_f64),
    ) else {
        return Err(format!(
            "OpenAI Codex token {operation} response missing fields"
        ));
    };
    let account = account_id(access).ok_or("Failed to extract accountId from token")?;
    Ok(json!({
        "type": "oauth",
        "access": access,
        "refresh": refresh,
        "expires": now_ms() + expires_in * 1000.0,
        "accountId": account,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_id_from_the_jwt_claim() {
        let payload = URL_SAFE_NO_PAD
            .encode(br#"{"https://api.openai.com/auth":{"chatgpt_account_id":"acct_1"}}"#);
        assert_eq!(
            account_id(&format!("h.{payload}.s")).as_deref(),
            Some("acct_1")
        );
        assert_eq!(account_id("not-a-jwt"), None);
        let empty = URL_SAFE_NO_PAD.encode(br#"{"sub":"x"}"#);
        assert_eq!(account_id(&format!("h.{empty}.s")), None);
    }
}
