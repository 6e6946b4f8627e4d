//! GitHub Copilot: GitHub's device flow (github.com or a GitHub Enterprise domain) for a
//! GitHub token, stored as `refresh`, then Copilot's token exchange for the short-lived
//! Copilot token, stored as `access`. The Copilot token names its API host (`proxy-ep=`),
//! which becomes the requests' base URL.

use serde_json::{json, Value};

use super::device::{poll_device_flow, Poll};
use super::{client, endpoint, read_json, Interaction, LoginEvent};

/// The Copilot editor plugin's public client id.
const CLIENT_ID: &str = "Iv1.b507a08c87ecfe98";
const USER_AGENT: &str = "GitHubCopilotChat/0.35.0";
/// The editor identity Copilot's endpoints expect (also in the catalog's model headers).
const COPILOT_HEADERS: [(&str, &str); 4] = [
    ("User-Agent", USER_AGENT),
    ("Editor-Version", "vscode/1.107.0"),
    ("Editor-Plugin-Version", "copilot-chat/0.35.0"),
    ("Copilot-Integration-Id", "vscode-chat"),
];
const COPILOT_API_VERSION: &str = "2026-06-01";
const DEFAULT_BASE_URL: &str = "https://api.individual.githubcopilot.com";
/// Copilot tokens are treated as expired five minutes early.
const EXPIRY_MARGIN_MS: f64 = 5.0 * 60.0 * 1000.0;

/// The host of a GitHub Enterprise URL or domain (`None` for blank or unparsable input).
pub fn normalize_domain(input: &str) -> Option<String> {
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return None;
    }
    let url = if trimmed.contains("://") {
        trimmed.to_string()
    } else {
        format!("https://{trimmed}")
    };
    reqwest::Url::parse(&url)
        .ok()?
        .host_str()
        .map(str::to_string)
}

/// The API base URL a Copilot token names (`proxy-ep=proxy.X` → `https://api.X`), else
/// the enterprise or individual default. A loopback host (a test server) is spoken to over
/// plain http.
pub fn base_url(token: &str, enterprise_domain: Option<&str>) -> String {
    if let Some(ep) = token
        .split(';')
        .find_map(|part| part.trim().strip_prefix("proxy-ep="))
        .filter(|ep| !ep.is_empty())
    {
        let host = ep
            .strip_prefix("proxy.")
            .map_or_else(|| ep.to_string(), |h| format!("api.{h}"));
        let loopback = ["127.0.0.1", "localhost", "[::1]"]
            .iter()
            .any(|l| host == *l || host.starts_with(&format!("{l}:")));
        let scheme = if loopback { "http" } else { "https" };
        return format!("{scheme}://{host}");
    }
    match enterprise_domain {
        Some(d) => format!("https://copilot-api.{d}"),
        None => DEFAULT_BASE_URL.into(),
    }
}

/// Headers each Copilot request adds from its content: who initiated it (the user, or the
/// agent continuing after a tool result), the intent, and vision when images are sent.
pub fn dynamic_headers(last_role_is_user: bool, has_images: bool) -> Vec<(String, String)> {
    let mut h = vec![
        (
            "X-Initiator".to_string(),
            if last_role_is_user { "user" } else { "agent" }.to_string(),
        ),
        (
            "Openai-Intent".to_string(),
            "conversation-edits".to_string(),
        ),
    ];
    if has_images {
        h.push(("Copilot-Vision-Request".into(), "true".into()));
    }
    h
}

/// Adjusts a request to Copilot: the base URL the token names (its per-account endpoint)
/// and the per-request headers, unless the model or caller set them.
pub fn prepare_request(
    model: &mut crate::llm::model::Model,
    context: &crate::llm::Context,
    options: &mut crate::llm::StreamOptions,
) {
    use pi_formats::message::{AgentMessage, Content, ContentBlock};
    if let Some(key) = options
        .api_key
        .as_deref()
        .filter(|k| k.contains("proxy-ep="))
    {
        model.base_url = base_url(key, None);
    }
    let is_image = |b: &ContentBlock| matches!(b, ContentBlock::Image(_));
    let has_images = context.messages.iter().any(|m| match m {
        AgentMessage::User(u) => matches!(&u.content, Content::Blocks(b) if b.iter().any(is_image)),
        AgentMessage::ToolResult(r) => r.content.iter().any(is_image),
        _ => false,
    });
    let last_is_user = matches!(context.messages.last(), Some(AgentMessage::User(_)) | None);
    for (k, v) in dynamic_headers(last_is_user, has_images) {
        let set = model
            .headers
            .keys()
            .chain(options.headers.keys())
            .any(|h| h.eq_ignore_ascii_case(&k));
        if !set {
            options.headers.insert(k, v);
        }
    }
}

struct Urls {
    device_code: String,
    access_token: String,
    copilot_token: String,
}

fn urls(domain: &str) -> Urls {
    Urls {
        device_code: endpoint(&format!("https://{domain}/login/device/code")),
        access_token: endpoint(&format!("https://{domain}/login/oauth/access_token")),
        copilot_token: endpoint(&format!("https://api.{domain}/copilot_internal/v2/token")),
    }
}

/// Runs the device login.
pub(crate) async fn login(interaction: Interaction) -> Result<Value, String> {
    let input = interaction.enterprise_domain.clone().unwrap_or_default();
    let enterprise = normalize_domain(&input);
    if !input.trim().is_empty() && enterprise.is_none() {
        return Err("Invalid GitHub Enterprise URL/domain".into());
    }
    let domain = enterprise.clone().unwrap_or_else(|| "github.com".into());
    let urls = urls(&domain);
    let http = client();
    let resp = http
        .post(&urls.device_code)
        .header("accept", "application/json")
        .header("user-agent", USER_AGENT)
        .form(&[("client_id", CLIENT_ID), ("scope", "read:user")])
        .send()
        .await
        .map_err(|e| format!("Device code request failed: {e}"))?;
    let device = read_json(resp, "Device code request").await?;
    let (Some(device_code), Some(user_code), Some(verification_uri), Some(expires_in)) = (
        device.get("device_code").and_then(Value::as_str),
        device.get("user_code").and_then(Value::as_str),
        device.get("verification_uri").and_then(Value::as_str),
        device.get("expires_in").and_then(Value::as_f64),
    ) else {
        return Err("Invalid device code response fields".into());
    };
    if !verification_uri.starts_with("https://") && !verification_uri.starts_with("http://") {
        return Err("Untrusted verification_uri in device code response".into());
    }
    interaction.notify(LoginEvent::DeviceCode {
        user_code: user_code.to_string(),
        verification_uri: verification_uri.to_string(),
    });
    let interval = device.get("interval").and_then(Value::as_f64);
    let form = [
        ("client_id", CLIENT_ID.to_string()),
        ("device_code", device_code.to_string()),
        (
            "grant_type",
            "urn:ietf:params:oauth:grant-type:device_code".to_string(),
        ),
    ];
    let github_token = poll_device_flow(interval, Some(expires_in), true, || {
        let req = http
            .post(&urls.access_token)
            .header("accept", "application/json")
            .header("user-agent", USER_AGENT)
            .form(&form);
        async move {
            let resp = req
                .send()
                .await
                .map_err(|e| format!("Device flow failed: {e}"))?;
            let raw = read_json(resp, "Device token request").await?;
            if let Some(token) = raw.get("access_token").and_then(Value::as_str) {
                return Ok(Poll::Complete(token.to_string()));
            }
            Ok(match raw.get("error").and_then(Value::as_str) {
                Some("authorization_pending") => Poll::Pending,
                Some("slow_down") => Poll::SlowDown(raw.get("interval").and_then(Value::as_f64)),
                Some(error) => {
                    let description = raw
                        .get("error_description")
                        .and_then(Value::as_str)
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default();
                    Poll::Failed(format!("Device flow failed: {error}{description}"))
                }
                None => Poll::Failed("Invalid device token response".into()),
            })
        }
    })
    .await?;
    let mut credential = copilot_token(&github_token, enterprise.as_deref()).await?;
    // The account's model list is informational (stored as `availableModelIds`); a failure
    // to read it does not fail the login.
    let access = credential["access"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if let Ok(ids) = available_models(&access, enterprise.as_deref()).await {
        credential["availableModelIds"] = json!(ids);
    }
    Ok(credential)
}

/// Exchanges the GitHub token for a fresh Copilot token.
pub(crate) async fn refresh(
    github_token: &str,
    enterprise_url: Option<&str>,
) -> Result<Value, String> {
    let enterprise = enterprise_url.and_then(normalize_domain);
    let mut credential = copilot_token(github_token, enterprise.as_deref()).await?;
    let access = credential["access"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if let Ok(ids) = available_models(&access, enterprise.as_deref()).await {
        credential["availableModelIds"] = json!(ids);
    }
    Ok(credential)
}

async fn copilot_token(github_token: &str, enterprise: Option<&str>) -> Result<Value, String> {
    let domain = enterprise.unwrap_or("github.com");
    let mut req = client()
        .get(urls(domain).copilot_token)
        .header("accept", "application/json")
        .header("authorization", format!("Bearer {github_token}"));
    for (k, v) in COPILOT_HEADERS {
        req = req.header(k, v);
    }
    let resp = req
        .send()
        .await
        .map_err(|e| format!("Copilot token request failed: {e}"))?;
    let raw = read_json(resp, "Copilot token request").await?;
    let (Some(token), Some(expires_at)) = (
        raw.get("token").and_then(Value::as_str),
        raw.get("expires_at").and_then(Value::as_f64),
    ) else {
        return Err("Invalid Copilot token response fields".into());
    };
    let mut credential = json!({
        "type": "oauth",
        "refresh": github_token,
        "access": token,
        "expires": expires_at * 1000.0 - EXPIRY_MARGIN_MS,
    });
    if let Some(d) = enterprise {
        credential["enterpriseUrl"] = json!(d);
    }
    Ok(credential)
}

/// The model ids the account may pick (`model_picker_enabled` and not disabled by policy).
async fn available_models(token: &str, enterprise: Option<&str>) -> Result<Vec<String>, String> {
    let base = base_url(token, enterprise);
    let mut req = client()
        .get(format!("{base}/models"))
        .header("accept", "application/json")
        .header("authorization", format!("Bearer {token}"))
        .header("X-GitHub-Api-Version", COPILOT_API_VERSION);
    for (k, v) in COPILOT_HEADERS {
        req = req.header(k, v);
    }
    let resp = req.send().await.map_err(|e| e.to_string())?;
    let raw = read_json(resp, "Copilot models request").await?;
    let data = raw
        .get("data")
        .and_then(Value::as_array)
        .ok_or("Invalid Copilot models response")?;
    Ok(data
        .iter()
        .filter(|m| m.pointer("/capabilities/supports/tool_calls") != Some(&json!(false)))
        .filter(|m| m.get("model_picker_enabled") == Some(&json!(true)))
        .filter(|m| m.pointer("/policy/state") != Some(&json!("disabled")))
        .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_string))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_and_base_urls() {
        assert_eq!(
            normalize_domain(" https://ghe.example.com/x ").as_deref(),
            Some("ghe.example.com")
        );
        assert_eq!(
            normalize_domain("company.ghe.com").as_deref(),
            Some("company.ghe.com")
        );
        assert_eq!(normalize_domain("  "), None);
        assert_eq!(
            base_url(
                "tid=1;exp=2;proxy-ep=proxy.individual.githubcopilot.com;x=y",
                None
            ),
            "https://api.individual.githubcopilot.com"
        );
        assert_eq!(
            base_url("tid=1;proxy-ep=127.0.0.1:4000", None),
            "http://127.0.0.1:4000"
        );
        assert_eq!(
            base_url("opaque", Some("ghe.io")),
            "https://copilot-api.ghe.io"
        );
        assert_eq!(base_url("opaque", None), DEFAULT_BASE_URL);
        let h = dynamic_headers(false, true);
        assert_eq!(h[0], ("X-Initiator".into(), "agent".into()));
        assert_eq!(h.len(), 3);
    }
}
