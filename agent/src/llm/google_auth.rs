//! Google Application Default Credentials for Vertex AI: an OAuth access token from the
//! credentials file Pi's Google SDK reads (`GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's
//! `~/.config/gcloud/application_default_credentials.json`).
//!
//! Supported file types, as written by `gcloud auth application-default login` and the
//! Cloud console:
//! * `authorized_user`: the refresh token is exchanged at `token_uri` (default Google's);
//! * `service_account`: a JWT signed RS256 with the file's PKCS#8 key (ring) is exchanged at
//!   its `token_uri` for a `cloud-platform` token.
//!
//! Not supported (a clear error names the type): workload identity federation
//! (`external_account`), impersonation, and the GCE metadata server.
//! Tokens are cached per file until five minutes before they expire.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde_json::{json, Value};

use super::http;
use super::StreamOptions;

const DEFAULT_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// Refresh this long before the token expires.
const EARLY_REFRESH: Duration = Duration::from_secs(300);

/// The credentials file ADC uses, from `env`.
pub fn credentials_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(p) = env("GOOGLE_APPLICATION_CREDENTIALS").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    env("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| Path::new(&h).join(".config/gcloud/application_default_credentials.json"))
}

fn cache() -> &'static Mutex<HashMap<PathBuf, (String, Instant)>> {
    static CACHE: std::sync::OnceLock<Mutex<HashMap<PathBuf, (String, Instant)>>> =
        std::sync::OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// An access token for the credentials file at `path` (cached until near expiry).
pub async fn access_token(path: &Path, options: &StreamOptions) -> Result<String, String> {
    if let Ok(c) = cache().lock() {
        if let Some((token, until)) = c.get(path) {
            if Instant::now() < *until {
                return Ok(token.clone());
            }
        }
    }
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "Cannot read Google credentials file {}: {e}",
            path.display()
        )
    })?;
    let creds: Value = serde_json::from_str(&text).map_err(|e| {
        format!(
            "Google credentials file {} is not valid JSON: {e}",
            path.display()
        )
    })?;
    let field = |k: &str| -> Result<&str, String> {
        creds[k]
            .as_str()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("Google credentials file {} has no \"{k}\"", path.display()))
    };
    let token_uri = creds["token_uri"]
        .as_str()
        .filter(|u| !u.is_empty())
        .unwrap_or(DEFAULT_TOKEN_URI);
    let form: Vec<(&str, String)> = match creds["type"].as_str().unwrap_or("") {
        "authorized_user" => vec![
            ("grant_type", "refresh_token".into()),
            ("client_id", field("client_id")?.into()),
            ("client_secret", field("client_secret")?.into()),
            ("refresh_token", field("refresh_token")?.into()),
        ],
        "service_account" => {
            let jwt = service_account_jwt(
                field("client_email")?,
                field("private_key")?,
                creds["private_key_id"].as_str(),
                token_uri,
                unix_now(),
            )
            .map_err(|e| format!("Google credentials file {}: {e}", path.display()))?;
            vec![
                (
                    "grant_type",
                    "urn:ietf:params:oauth:grant-type:jwt-bearer".into(),
                ),
                ("assertion", jwt),
            ]
        }
        other => {
            return Err(format!(
                "Google credentials file {}: credential type {other:?} is not supported \
                 (use an authorized_user or service_account file, or GOOGLE_CLOUD_API_KEY)",
                path.display()
            ))
        }
    };
    let body = form
        .iter()
        .map(|(k, v)| format!("{}={}", form_encode(k), form_encode(v)))
        .collect::<Vec<_>>()
        .join("&");
    let mut req = http::client(options)
        .post(token_uri)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body);
    if let Some(t) = options.timeout {
        req = req.timeout(t);
    }
    let resp = req
        .send()
        .await
        .map_err(|e| format!("Google token request failed: {}", http::error_chain(&e)))?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(format!(
            "Google token request failed ({}): {}",
            status.as_u16(),
            text.trim()
        ));
    }
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| format!("Google token response is not JSON: {e}"))?;
    let token = v["access_token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or("Google token response has no access_token")?
        .to_string();
    let lifetime = Duration::from_secs(v["expires_in"].as_u64().unwrap_or(3600));
    if let Ok(mut c) = cache().lock() {
        c.insert(
            path.to_path_buf(),
            (
                token.clone(),
                Instant::now() + lifetime.saturating_sub(EARLY_REFRESH),
            ),
        );
    }
    Ok(token)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `application/x-www-form-urlencoded` encoding of one key or value.
fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The signed JWT a service account exchanges for an access token (RFC 7523).
fn service_account_jwt(
    email: &str,
    private_key_pem: &str,
    key_id: Option<&str>,
    audience: &str,
    now: u64,
) -> Result<String, String> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut header = json!({"alg": "RS256", "typ": "JWT"});
    if let Some(kid) = key_id.filter(|k| !k.is_empty()) {
        header["kid"] = json!(kid);
    }
    let claims = json!({"iss": email, "scope": SCOPE, "aud": audience,
        "iat": now, "exp": now + 3600});
    let signing_input = format!(
        "{}.{}",
        b64.encode(header.to_string()),
        b64.encode(claims.to_string())
    );
    let der = pem_body(private_key_pem)?;
    let key = ring::signature::RsaKeyPair::from_pkcs8(&der)
        .map_err(|e| format!("private_key is not a PKCS#8 RSA key: {e}"))?;
    let mut sig = vec![0u8; key.public().modulus_len()];
    key.sign(
        &ring::signature::RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        signing_input.as_bytes(),
        &mut sig,
    )
    .map_err(|_| "signing the token request failed".to_string())?;
    Ok(format!("{signing_input}.{}", b64.encode(sig)))
}

/// The DER bytes of a `-----BEGIN PRIVATE KEY-----` PEM block.
fn pem_body(pem: &str) -> Result<Vec<u8>, String> {
    let start = pem
        .find("-----BEGIN PRIVATE KEY-----")
        .ok_or("private_key is not a PKCS#8 PEM (BEGIN PRIVATE KEY)")?;
    let rest = &pem[start + "-----BEGIN PRIVATE KEY-----".len()..];
    let end = rest
        .find("-----END PRIVATE KEY-----")
        .ok_or("private_key PEM has no END line")?;
    let b64: String = rest[..end].chars().filter(|c| !c.is_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| format!("private_key PEM is not base64: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_encoding() {
        assert_eq!(form_encode("a b/c=d"), "a+b%2Fc%3Dd");
        assert_eq!(form_encode("urn:ietf:params"), "urn%3Aietf%3Aparams");
    }

    #[test]
    fn bad_keys_are_clear_errors() {
        let e = service_account_jwt("a@b", "not a pem", None, "http://x", 0).unwrap_err();
        assert!(e.contains("PKCS#8"), "{e}");
        let pem = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        let e = service_account_jwt("a@b", pem, None, "http://x", 0).unwrap_err();
        assert!(e.contains("PKCS#8 RSA key"), "{e}");
    }
}
