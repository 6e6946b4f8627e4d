//! OpenAI API access through a ChatGPT account ("Sign in with ChatGPT", provider `openai`):
//! a public-client authorization code + PKCE flow at auth.openai.com in which every login
//! registers its own client. The authorize request names the dynamic-registration client
//! and this installation (`ext_agent_host_id = urn:uuid:<deviceId>`, the `deviceId` of
//! global settings, created on first use as Pi does); the callback on 127.0.0.1:1455 carries
//! the issued `client_id`, which the token exchange and every refresh use. The grant must
//! include the `chatgpt.tokens.use.direct` scope: the access token is then sent to
//! api.openai.com as the API key.

use serde_json::{json, Value};

use super::callback::{callback_host, CallbackServer, CallbackSpec};
use super::pkce::{random_hex, Pkce};
use super::{endpoint, now_ms, post_form, query_param, with_query, Interaction, LoginEvent};

/// The client id of the dynamic registration; OpenAI answers with the client it issued.
const DYNAMIC_CLIENT_ID: &str = "dynamic_agent_client";
const AGENT_NAME_HINT: &str = "Pi";
const AUTHORIZE_URL: &str = "https://auth.openai.com/api/accounts/authorize";
const TOKEN_URL: &str = "https://auth.openai.com/api/accounts/oauth/token";
/// The API the tokens are for.
const RESOURCE: &str = "https://api.openai.com/v1";
const CALLBACK_PORT: u16 = 1455;
const CALLBACK_PATH: &str = "/auth/callback";
const REDIRECT_URI: &str = "http://127.0.0.1:1455/auth/callback";
/// Without this scope the token cannot call the API directly.
const DIRECT_TOKEN_SCOPE: &str = "chatgpt.tokens.use.direct";
const SCOPE: &str = "openid profile email offline_access resource.invoke chatgpt.tokens.use.direct";
/// Stored expiry is this much before the real one, so no request starts with a dying token.
const EXPIRY_MARGIN_MS: f64 = 3.0 * 60.0 * 1000.0;

/// The browser login.
pub(crate) async fn login(mut interaction: Interaction) -> Result<Value, String> {
    let host_id = agent_host_id()?;
    let pkce = Pkce::generate();
    let state = random_hex(32);
    let nonce = random_hex(32);
    let host = callback_host();
    // Another login (or the Codex CLI) on the port would receive the browser's callback and
    // reject it; say so instead of waiting for nothing.
    let mut server = CallbackServer::start(CallbackSpec {
        provider_name: "ChatGPT",
        host: &host,
        port: CALLBACK_PORT,
        path: CALLBACK_PATH,
        redirect_host: "127.0.0.1",
        state: Some(&state),
    })
    .await
    .map_err(|_| {
        format!(
            "Port {CALLBACK_PORT} is in use, probably by an unfinished login in another pi \
             session or by the Codex CLI. Cancel that login and try again."
        )
    })?;
    let url = with_query(
        &endpoint(AUTHORIZE_URL),
        &[
            ("client_id", DYNAMIC_CLIENT_ID),
            ("agent_name_hint", AGENT_NAME_HINT),
            ("ext_agent_host_id", &host_id),
            ("response_type", "code"),
            ("redirect_uri", REDIRECT_URI),
            ("resource", RESOURCE),
            ("scope", SCOPE),
            ("state", &state),
            ("code_challenge", &pkce.challenge),
            ("code_challenge_method", "S256"),
            ("nonce", &nonce),
        ],
    );
    interaction.notify(LoginEvent::AuthUrl {
        url,
        instructions: "Complete sign-in in your browser. If the callback does not complete, \
                       paste the final redirect URL here."
            .into(),
    });
    let query = callback_or_pasted_url(&mut interaction, &mut server).await?;
    drop(server);
    let (code, client_id) = authorization_from_query(&query, &state)?;
    interaction.notify(LoginEvent::Progress(
        "Exchanging authorization code for tokens...".into(),
    ));
    let token = token_request(&[
        ("grant_type", "authorization_code"),
        ("client_id", &client_id),
        ("code", &code),
        ("code_verifier", &pkce.verifier),
        ("redirect_uri", REDIRECT_URI),
        ("resource", RESOURCE),
    ])
    .await?;
    // The ID token is not used, but its presence is part of the answer's contract.
    if token
        .get("id_token")
        .and_then(Value::as_str)
        .is_none_or(|t| t.trim().is_empty())
    {
        return Err("OpenAI OAuth token response did not contain an ID token".into());
    }
    credential_from(&token, &client_id)
}

/// A new credential for the stored one, with the client id the login was issued.
pub(crate) async fn refresh(credential: &Value) -> Result<Value, String> {
    let client_id = credential
        .get("clientId")
        .and_then(Value::as_str)
        .filter(|c| !c.trim().is_empty())
        .ok_or(
            "Stored OpenAI OAuth credential does not contain an issued client ID; reconnect ChatGPT",
        )?;
    let refresh = credential
        .get("refresh")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let token = token_request(&[
        ("grant_type", "refresh_token"),
        ("client_id", client_id),
        ("refresh_token", refresh),
        ("resource", RESOURCE),
    ])
    .await?;
    credential_from(&token, client_id)
}

/// The query of the browser's callback, or of the redirect URL the user pasted.
async fn callback_or_pasted_url(
    interaction: &mut Interaction,
    server: &mut CallbackServer,
) -> Result<String, String> {
    let mut input_open = interaction.manual_input.is_some();
    loop {
        tokio::select! {
            got = server.wait_with_query() => return got.map(|(_, query)| query),
            line = interaction.next_input(), if input_open => match line {
                Some(line) if line.trim().is_empty() => {}
                Some(line) => return pasted_query(&line),
                None => input_open = false,
            },
        }
    }
}

/// The query of a pasted callback URL, which must be the redirect URI.
fn pasted_query(input: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(input.trim())
        .map_err(|_| "Paste the full callback URL from the browser".to_string())?;
    let expected = reqwest::Url::parse(REDIRECT_URI).map_err(|e| e.to_string())?;
    if url.origin() != expected.origin() || url.path() != expected.path() {
        return Err(format!(
            "The pasted callback URL must start with {REDIRECT_URI}"
        ));
    }
    let query = url.query().unwrap_or_default().to_string();
    if let Some(error) = query_param(&query, "error") {
        return Err(format!("ChatGPT authorization failed: {error}"));
    }
    Ok(query)
}

/// The code and the issued client id of a callback, its state checked.
fn authorization_from_query(query: &str, state: &str) -> Result<(String, String), String> {
    let code = query_param(query, "code")
        .filter(|c| !c.is_empty())
        .ok_or("Missing authorization code")?;
    let got_state = query_param(query, "state")
        .filter(|s| !s.is_empty())
        .ok_or("Missing OAuth state")?;
    if got_state != state {
        return Err("OAuth state mismatch".into());
    }
    let client_id = query_param(query, "client_id")
        .map(|c| c.trim().to_string())
        .filter(|c| !c.is_empty())
        .ok_or("OpenAI OAuth registration callback did not contain an issued client ID")?;
    Ok((code, client_id))
}

async fn token_request(fields: &[(&str, &str)]) -> Result<Value, String> {
    let reply = post_form(&endpoint(TOKEN_URL), fields, "OpenAI OAuth token request").await?;
    if !reply.status.is_success() {
        return Err(format!(
            "OpenAI OAuth token request failed ({}): {}",
            reply.status.as_u16(),
            reply.text
        ));
    }
    match reply.json() {
        Value::Object(o) => Ok(Value::Object(o)),
        _ => Err("OpenAI OAuth token response must be an object".into()),
    }
}

/// The stored credential of a token answer: the tokens, the expiry less a margin, the
/// issued client id and the granted scopes.
fn credential_from(token: &Value, client_id: &str) -> Result<Value, String> {
    let text = |field: &str| {
        token
            .get(field)
            .and_then(Value::as_str)
            .filter(|v| !v.trim().is_empty())
            .map(str::to_string)
            .ok_or_else(|| format!("OpenAI OAuth token response has invalid {field}"))
    };
    let access = text("access_token")?;
    let refresh = text("refresh_token")?;
    let scope = text("scope")?;
    let expires_in = token
        .get("expires_in")
        .and_then(Value::as_f64)
        .filter(|e| e.is_finite() && *e > 0.0)
        .ok_or("OpenAI OAuth token response has invalid expires_in")?;
    let scopes: Vec<&str> = scope.split_whitespace().collect();
    if !scopes.contains(&DIRECT_TOKEN_SCOPE) {
        return Err(format!(
            "OpenAI OAuth grant did not include {DIRECT_TOKEN_SCOPE}"
        ));
    }
    Ok(json!({
        "type": "oauth",
        "access": access,
        "refresh": refresh,
        "expires": (now_ms() + expires_in * 1000.0 - EXPIRY_MARGIN_MS).floor(),
        "clientId": client_id,
        "scopes": scopes,
    }))
}

/// `urn:uuid:<deviceId>`: this installation, as OpenAI identifies agent hosts.
fn agent_host_id() -> Result<String, String> {
    let agent_dir =
        crate::config::agent_dir(&|k| std::env::var(k).ok(), crate::config::home().as_deref());
    Ok(format!("urn:uuid:{}", device_id(&agent_dir)?))
}

/// The `deviceId` of global settings, created (a random UUID) and saved when missing.
fn device_id(agent_dir: &std::path::Path) -> Result<String, String> {
    let mut settings = crate::config::Settings::load_global(agent_dir);
    if let Some(id) = settings
        .global()
        .get("deviceId")
        .and_then(Value::as_str)
        .filter(|id| is_uuid(id))
    {
        return Ok(id.to_ascii_lowercase());
    }
    let id = random_uuid();
    settings
        .set_global(&["deviceId"], Some(json!(id)))
        .map_err(|e| format!("Sign in with ChatGPT requires a device ID: {e}"))?;
    Ok(id)
}

fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// A version 4 UUID.
fn random_uuid() -> String {
    let hex: Vec<char> = random_hex(16).chars().collect();
    let mut out = String::with_capacity(36);
    for (i, c) in hex.iter().enumerate() {
        if [8, 12, 16, 20].contains(&i) {
            out.push('-');
        }
        out.push(match i {
            12 => '4',
            16 => ['8', '9', 'a', 'b'][c.to_digit(16).unwrap_or(0) as usize % 4],
            _ => *c,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callbacks_need_state_and_the_issued_client() {
        assert_eq!(
            authorization_from_query("code=c1&state=s1&client_id=app_9", "s1"),
            Ok(("c1".to_string(), "app_9".to_string()))
        );
        assert!(authorization_from_query("code=c1&state=s2&client_id=a", "s1").is_err());
        assert!(authorization_from_query("code=c1&state=s1", "s1").is_err());
        assert!(pasted_query("http://localhost:1455/auth/callback?code=c").is_err());
        assert_eq!(
            pasted_query("http://127.0.0.1:1455/auth/callback?code=c&state=s").as_deref(),
            Ok("code=c&state=s")
        );
    }

    #[test]
    fn device_ids_are_v4_uuids() {
        let id = random_uuid();
        assert!(is_uuid(&id), "{id}");
        assert_eq!(&id[14..15], "4");
        assert_ne!(id, random_uuid());
    }

    #[test]
    fn grants_without_direct_use_are_refused() {
        let token = json!({"access_token": "a", "refresh_token": "r", "expires_in": 3600,
            "scope": "openid profile"});
        assert!(credential_from(&token, "c").is_err());
        let token = json!({"access_token": "a", "refresh_token": "r", "expires_in": 3600,
            "scope": "openid chatgpt.tokens.use.direct"});
        let cred = credential_from(&token, "c").unwrap();
        assert_eq!(cred["clientId"], "c");
        assert!(cred["expires"].as_f64().unwrap() < now_ms() + 3_600_000.0 - 170_000.0);
    }
}
