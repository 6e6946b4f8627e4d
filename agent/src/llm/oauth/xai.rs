//! xAI (SuperGrok or X Premium): the RFC 8628 device flow against `auth.x.ai`, form-encoded,
//! with rotating refresh tokens. The access token is sent like an `XAI_API_KEY`.

use serde_json::{json, Value};

use super::device::{poll_device_flow, Poll};
use super::{endpoint, now_ms, post_form, FormReply, Interaction, LoginEvent};

const CLIENT_ID: &str = "b1a00492-073a-47ea-816f-4c329264a828";
const SCOPE: &str = "openid profile email offline_access grok-cli:access api:access";
const DEVICE_CODE_URL: &str = "https://auth.x.ai/oauth2/device/code";
const TOKEN_URL: &str = "https://auth.x.ai/oauth2/token";
const DEVICE_GRANT: &str = "urn:ietf:params:oauth:grant-type:device_code";
/// Stored expiries are moved five minutes early, as Pi does.
const REFRESH_SKEW_MS: f64 = 5.0 * 60.0 * 1000.0;
/// Lifetime assumed when the token response names none.
const DEFAULT_LIFETIME_S: f64 = 3600.0;

/// Runs the device login.
pub(crate) async fn login(interaction: Interaction) -> Result<Value, String> {
    let (status, device) = json_of(
        post_form(
            &endpoint(DEVICE_CODE_URL),
            &[
                ("client_id", CLIENT_ID),
                ("scope", SCOPE),
                ("referrer", "pi"),
            ],
            "xAI OAuth device authorization",
        )
        .await?,
    )?;
    if !status.is_success() {
        return Err(failure("device authorization", status, &device));
    }
    let device_code = required(&device, "device_code")?;
    let user_code = required(&device, "user_code")?;
    let mut verification_uri = https_uri(required(&device, "verification_uri")?)?;
    if let Some(complete) = device
        .get("verification_uri_complete")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
    {
        verification_uri = https_uri(complete)?;
    }
    let expires_in = positive(&device, "expires_in")?;
    interaction.notify(LoginEvent::DeviceCode {
        user_code: user_code.to_string(),
        verification_uri,
    });
    let interval = device.get("interval").and_then(Value::as_f64);
    poll_device_flow(interval, Some(expires_in), true, move || async move {
        let fields = [
            ("grant_type", DEVICE_GRANT),
            ("client_id", CLIENT_ID),
            ("device_code", device_code),
        ];
        let (status, body) = json_of(post_form(&endpoint(TOKEN_URL), &fields, "xAI OAuth").await?)?;
        if status.is_success() {
            return credential(&body, None).map(Poll::Complete);
        }
        Ok(match body.get("error").and_then(Value::as_str) {
            Some("authorization_pending") => Poll::Pending,
            Some("slow_down") => Poll::SlowDown(body.get("interval").and_then(Value::as_f64)),
            Some("access_denied" | "authorization_denied") => {
                Poll::Failed("xAI device authorization was denied".into())
            }
            Some("expired_token") => Poll::Failed("xAI device code expired".into()),
            _ => Poll::Failed(failure("device token polling", status, &body)),
        })
    })
    .await
}

/// Exchanges the refresh token; xAI may omit a new one, then the old one stays.
pub(crate) async fn refresh(refresh_token: &str) -> Result<Value, String> {
    let fields = [
        ("grant_type", "refresh_token"),
        ("client_id", CLIENT_ID),
        ("refresh_token", refresh_token),
    ];
    let (status, body) =
        json_of(post_form(&endpoint(TOKEN_URL), &fields, "xAI OAuth token refresh").await?)?;
    if !status.is_success() {
        return Err(failure("token refresh", status, &body));
    }
    credential(&body, Some(refresh_token))
}

/// xAI always answers JSON objects; anything else is an error, as in Pi.
fn json_of(reply: FormReply) -> Result<(reqwest::StatusCode, Value), String> {
    match reply.json() {
        body @ Value::Object(_) => Ok((reply.status, body)),
        _ => Err(format!(
            "xAI OAuth returned invalid JSON (HTTP {})",
            reply.status.as_u16()
        )),
    }
}

fn credential(body: &Value, previous_refresh: Option<&str>) -> Result<Value, String> {
    let access = required(body, "access_token")?;
    let refresh = match (body.get("refresh_token"), previous_refresh) {
        (None, Some(previous)) => previous,
        _ => required(body, "refresh_token")?,
    };
    let lifetime = match body.get("expires_in") {
        None => DEFAULT_LIFETIME_S,
        Some(_) => positive(body, "expires_in")?,
    };
    Ok(json!({
        "type": "oauth",
        "access": access,
        "refresh": refresh,
        "expires": now_ms() + lifetime * 1000.0 - REFRESH_SKEW_MS,
    }))
}

fn required<'a>(body: &'a Value, field: &str) -> Result<&'a str, String> {
    body.get(field)
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| format!("Invalid xAI OAuth response field: {field}"))
}

fn positive(body: &Value, field: &str) -> Result<f64, String> {
    body.get(field)
        .and_then(Value::as_f64)
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("Invalid xAI OAuth response field: {field}"))
}

/// Only an https verification page is shown to the user.
fn https_uri(raw: &str) -> Result<String, String> {
    match reqwest::Url::parse(raw) {
        Ok(url) if url.scheme() == "https" => Ok(url.to_string()),
        _ => Err("Untrusted verification URI in xAI OAuth response".into()),
    }
}

fn failure(action: &str, status: reqwest::StatusCode, body: &Value) -> String {
    let detail: Vec<&str> = ["error", "error_description"]
        .iter()
        .filter_map(|k| body.get(*k).and_then(Value::as_str))
        .collect();
    let detail = if detail.is_empty() {
        String::new()
    } else {
        format!(": {}", detail.join(": "))
    };
    format!(
        "xAI OAuth {action} failed (HTTP {}){detail}",
        status.as_u16()
    )
}
