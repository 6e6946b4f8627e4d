//! Kimi Code (subscription): the RFC 8628 device flow against `auth.kimi.com` (or
//! `KIMI_CODE_OAUTH_HOST` / `KIMI_OAUTH_HOST`, Pi's knobs), with rotating refresh tokens
//! and retried refreshes. The access token is sent as `Authorization: Bearer`.

use std::time::Duration;

use serde_json::{json, Value};

use super::device::{poll_device_flow, Poll};
use super::{endpoint, now_ms, post_form, web_url, FormReply, Interaction, LoginEvent};

const CLIENT_ID: &str = "17e5f671-d194-4dfb-9706-5516cb48c098";
const DEFAULT_HOST: &str = "https://auth.kimi.com";
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
/// Used when the server names no lifetime for the device code.
const DEVICE_CODE_TIMEOUT_S: f64 = 15.0 * 60.0;
const DEFAULT_INTERVAL_S: f64 = 5.0;
/// Refreshes are retried after 1, 2 and 4 seconds on network errors, 429 and 5xx.
const REFRESH_RETRIES: u32 = 3;

fn host() -> String {
    let configured = ["KIMI_CODE_OAUTH_HOST", "KIMI_OAUTH_HOST"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()));
    configured
        .unwrap_or_else(|| DEFAULT_HOST.to_string())
        .trim_end_matches('/')
        .to_string()
}

fn url(path: &str) -> String {
    endpoint(&format!("{}{path}", host()))
}

/// Runs the device login.
pub(crate) async fn login(interaction: Interaction) -> Result<Value, String> {
    let reply = post_form(
        &url("/api/oauth/device_authorization"),
        &[("client_id", CLIENT_ID)],
        "Kimi Code device authorization",
    )
    .await?;
    if !reply.status.is_success() {
        return Err(format!(
            "Kimi Code device authorization failed with status {}{}",
            reply.status.as_u16(),
            suffix(&reply.text)
        ));
    }
    let device = reply.json();
    let text = |k: &str| device.get(k).and_then(Value::as_str);
    let (Some(device_code), Some(user_code), Some(_), Some(complete)) = (
        text("device_code"),
        text("user_code"),
        text("verification_uri").and_then(web_url),
        text("verification_uri_complete").and_then(web_url),
    ) else {
        return Err(format!(
            "Invalid Kimi Code device authorization response: {}",
            reply.text
        ));
    };
    let positive = |k: &str| {
        device
            .get(k)
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite() && *v > 0.0)
    };
    let interval = positive("interval").unwrap_or(DEFAULT_INTERVAL_S);
    let expires_in = positive("expires_in").unwrap_or(DEVICE_CODE_TIMEOUT_S);
    interaction.notify(LoginEvent::DeviceCode {
        user_code: user_code.to_string(),
        verification_uri: complete,
    });
    poll_device_flow(Some(interval), Some(expires_in), true, move || async move {
        let fields = [
            ("client_id", CLIENT_ID),
            ("device_code", device_code),
            ("grant_type", DEVICE_GRANT),
        ];
        let reply = post_form(
            &url("/api/oauth/token"),
            &fields,
            "Kimi Code device token request",
        )
        .await?;
        Ok(poll_answer(&reply))
    })
    .await
}

fn poll_answer(reply: &FormReply) -> Poll<Value> {
    let status = reply.status.as_u16();
    if reply.status.is_server_error() {
        return Poll::Failed(format!(
            "Kimi Code device token request failed with status {status}{}",
            suffix(&reply.text)
        ));
    }
    let body = reply.json();
    if reply.status.is_success() && body.get("access_token").is_some_and(Value::is_string) {
        return match credential(&body, "poll") {
            Ok(c) => Poll::Complete(c),
            Err(e) => Poll::Failed(e),
        };
    }
    let error = body.get("error").and_then(Value::as_str);
    match error {
        Some("authorization_pending") => Poll::Pending,
        Some("slow_down") => Poll::SlowDown(body.get("interval").and_then(Value::as_f64)),
        Some("expired_token") => {
            Poll::Failed("Kimi Code device authorization expired. Please restart login.".into())
        }
        Some("access_denied") => Poll::Failed("Kimi Code login was denied.".into()),
        _ => {
            let detail = error
                .map(|e| {
                    let description = body
                        .get("error_description")
                        .and_then(Value::as_str)
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default();
                    format!(": {e}{description}")
                })
                .unwrap_or_default();
            Poll::Failed(format!(
                "Kimi Code device token request failed (status {status}){detail}"
            ))
        }
    }
}

/// Exchanges the refresh token, retrying network errors, 429 and 5xx with backoff.
pub(crate) async fn refresh(refresh_token: &str) -> Result<Value, String> {
    let fields = [
        ("client_id", CLIENT_ID),
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh_token),
    ];
    let mut last_error = String::from("Kimi Code token refresh failed");
    for attempt in 0..=REFRESH_RETRIES {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_secs(1 << (attempt - 1))).await;
        }
        let reply =
            match post_form(&url("/api/oauth/token"), &fields, "Kimi Code token refresh").await {
                Ok(reply) => reply,
                Err(e) => {
                    last_error = e;
                    continue;
                }
            };
        let body = reply.json();
        let status = reply.status.as_u16();
        if reply.status.is_success() {
            return credential(&body, "refresh");
        }
        if status == 401
            || status == 403
            || body.get("error").and_then(Value::as_str) == Some("invalid_grant")
        {
            let description = body
                .get("error_description")
                .and_then(Value::as_str)
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            return Err(format!(
                "Kimi Code token refresh unauthorized (status {status}){description}"
            ));
        }
        if (status == 429 || reply.status.is_server_error()) && attempt < REFRESH_RETRIES {
            last_error = format!("Kimi Code token refresh failed with status {status}");
            continue;
        }
        return Err(format!(
            "Kimi Code token refresh failed with status {status}: {body}"
        ));
    }
    Err(last_error)
}

fn credential(body: &Value, operation: &str) -> Result<Value, String> {
    let access = body
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let refresh = body
        .get("refresh_token")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let expires_in = body
        .get("expires_in")
        .and_then(Value::as_f64)
        .filter(|v| v.is_finite() && *v > 0.0);
    match (access, refresh, expires_in) {
        (Some(access), Some(refresh), Some(expires_in)) => Ok(json!({
            "type": "oauth",
            "access": access,
            "refresh": refresh,
            "expires": now_ms() + expires_in * 1000.0,
        })),
        _ => Err(format!(
            "Kimi Code token {operation} response missing fields: {body}"
        )),
    }
}

fn suffix(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!(": {text}")
    }
}
