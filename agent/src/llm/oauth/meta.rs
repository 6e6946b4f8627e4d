//! Meta (Muse subscription): an RFC 8628 device flow at `auth.meta.com` for an identity
//! token, which then mints a day-long Model API key at `api.meta.ai/muse-code/key`. The key
//! is stored as `access` and sent as the API key; the identity token is kept as `refresh`,
//! and a "refresh" mints a new key with it.

use serde_json::{json, Value};

use super::device::{poll_device_flow, Poll};
use super::{client, endpoint, now_ms, post_form, web_url, Interaction, LoginEvent};

const CLIENT_ID: &str = "1031625952748946";
const DEVICE_AUTHORIZATION_URL: &str = "https://auth.meta.com/oidc/device/authorization/";
const DEVICE_TOKEN_URL: &str = "https://auth.meta.com/oidc/device/token/";
const API_KEY_MINT_URL: &str = "https://api.meta.ai/muse-code/key";
const API_KEY_LIFETIME_MS: f64 = 24.0 * 60.0 * 60.0 * 1000.0;
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";

/// Runs the device login, then mints the first key.
pub(crate) async fn login(interaction: Interaction) -> Result<Value, String> {
    let reply = post_form(
        &endpoint(DEVICE_AUTHORIZATION_URL),
        &[("client_id", CLIENT_ID)],
        "Meta device authorization",
    )
    .await?;
    let device = reply.json();
    if !reply.status.is_success() {
        return Err(format!(
            "Meta device authorization failed with status {}{}",
            reply.status.as_u16(),
            error_detail(&device)
        ));
    }
    let text = |k: &str| {
        device
            .get(k)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    let page = text("verification_uri_complete")
        .and_then(web_url)
        .or_else(|| text("verification_uri").and_then(web_url));
    let (Some(device_code), Some(user_code), Some(page)) =
        (text("device_code"), text("user_code"), page)
    else {
        return Err(format!(
            "Invalid Meta device authorization response: {device}"
        ));
    };
    interaction.notify(LoginEvent::DeviceCode {
        user_code: user_code.to_string(),
        verification_uri: page,
    });
    let interval = positive(&device, "interval");
    let expires_in = positive(&device, "expires_in");
    let identity = poll_device_flow(interval, expires_in, true, move || async move {
        let fields = [
            ("grant_type", DEVICE_GRANT),
            ("device_code", device_code),
            ("client_id", CLIENT_ID),
        ];
        let reply = post_form(
            &endpoint(DEVICE_TOKEN_URL),
            &fields,
            "Meta device token request",
        )
        .await?;
        let body = reply.json();
        if let Some(token) = body
            .get("access_token")
            .and_then(Value::as_str)
            .filter(|t| reply.status.is_success() && !t.is_empty())
        {
            return Ok(Poll::Complete(token.to_string()));
        }
        Ok(match body.get("error").and_then(Value::as_str) {
            Some("authorization_pending") => Poll::Pending,
            Some("slow_down") => Poll::SlowDown(positive(&body, "interval")),
            Some("access_denied") => Poll::Failed("Meta login was denied.".into()),
            Some("expired_token") => {
                Poll::Failed("Meta device authorization expired. Please restart login.".into())
            }
            _ => Poll::Failed(format!(
                "Meta device token request failed with status {}{}",
                reply.status.as_u16(),
                error_detail(&body)
            )),
        })
    })
    .await?;
    interaction.notify(LoginEvent::Progress(
        "Enabling Meta Model API access...".into(),
    ));
    mint_key(&identity).await
}

/// Mints a new Model API key with the stored identity token.
pub(crate) async fn refresh(identity_token: &str) -> Result<Value, String> {
    mint_key(identity_token).await
}

async fn mint_key(identity_token: &str) -> Result<Value, String> {
    let resp = client()
        .post(endpoint(API_KEY_MINT_URL))
        .header("accept", "application/json")
        .header("authorization", format!("Bearer {identity_token}"))
        .header("content-type", "application/json")
        .header("x-api-version", "1.0.0")
        .body("{}")
        .send()
        .await
        .map_err(|e| format!("Meta API key mint failed: {e}"))?;
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    if status == 401 || status == 403 {
        return Err(format!(
            "Meta session expired (status {status}). Run `/login meta` to sign in again.{}",
            error_detail(&body)
        ));
    }
    if !(200..300).contains(&status) {
        return Err(format!(
            "Meta API key mint failed with status {status}{}",
            error_detail(&body)
        ));
    }
    match body
        .get("api_key")
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty())
    {
        Some(key) => Ok(json!({
            "type": "oauth",
            "refresh": identity_token,
            "access": key,
            "expires": now_ms() + API_KEY_LIFETIME_MS,
        })),
        None => {
            let setup = body
                .get("action_url")
                .and_then(Value::as_str)
                .and_then(web_url)
                .map(|u| format!(" Complete setup at {u}"))
                .unwrap_or_default();
            Err(format!("Meta did not issue an API key.{setup}"))
        }
    }
}

fn positive(body: &Value, key: &str) -> Option<f64> {
    body.get(key)
        .and_then(Value::as_f64)
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// `: <the first message the error body carries>`, or nothing.
fn error_detail(body: &Value) -> String {
    ["error_description", "detail", "message", "error"]
        .iter()
        .find_map(|k| {
            body.get(*k)
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|v| !v.is_empty())
        })
        .map(|v| format!(": {v}"))
        .unwrap_or_default()
}
