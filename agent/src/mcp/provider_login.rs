//! `"auth": {"provider": "x"}` on an HTTP server: the server accepts the credential the user
//! stored with `/login x` (or `pi auth login x`), so that credential from `auth.json` is sent
//! as `Authorization: Bearer` instead of going through MCP OAuth. Pi's Radius login adds
//! such a server to `mcp.json`.
//!
//! The credential is read from disk for every request, so a `/login` in another process (or
//! later in this one) is used on the next request without a restart; an OAuth login about to
//! expire is refreshed as the provider's requests refresh it (under `auth.json`'s lock). A
//! server that rejects the credential needs the user to log in again: the server becomes
//! `needs-auth` and the error names the `/login` command.

use std::path::Path;
use std::path::PathBuf;

use serde_json::Map;
use serde_json::Value;

use crate::config::AuthStore;
use crate::llm::oauth::store::oauth_access_token;

/// The provider login an HTTP server authenticates with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderLogin {
    provider: String,
    agent_dir: PathBuf,
}

impl ProviderLogin {
    /// The login `entry`'s `auth.provider` names, with credentials in `agent_dir`; `None`
    /// when the entry has none.
    pub fn from_entry(entry: &Map<String, Value>, agent_dir: &Path) -> Option<ProviderLogin> {
        let provider = configured_provider(entry)?;
        Some(ProviderLogin {
            provider: provider.to_string(),
            agent_dir: agent_dir.to_path_buf(),
        })
    }

    /// The provider whose login is used.
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The stored credential as a bearer token: an OAuth login's access token (refreshed when
    /// it expires soon) or a stored API key; `None` when the user has not logged in.
    pub async fn token(&self) -> Option<String> {
        let login = self.clone();
        // Reading and refreshing take `auth.json`'s lock and may block on a refresh request.
        tokio::task::spawn_blocking(move || login.token_now())
            .await
            .ok()
            .flatten()
    }

    fn token_now(&self) -> Option<String> {
        let (oauth, _refresh_error) = oauth_access_token(&self.agent_dir, &self.provider);
        oauth.filter(|t| !t.is_empty()).or_else(|| {
            AuthStore::load(&self.agent_dir)
                .ok()?
                .api_key(&self.provider, &|name| std::env::var(name).ok())
        })
    }

    /// After a 401 for the token `sent`: `true` when another credential is stored now (a
    /// `/login` since the request started), worth one more attempt.
    pub async fn changed_since(&self, sent: Option<&str>) -> bool {
        let now = self.token().await;
        now.is_some() && now.as_deref() != sent
    }

    /// Pi's error for a server whose login is missing or rejected.
    pub fn sign_in_message(&self, server: &str) -> String {
        format!(
            "MCP server \"{server}\" requires sign-in. Run /login {} to sign in.",
            self.provider
        )
    }
}

/// `auth.provider` of an entry, when it is a non-empty string.
pub fn configured_provider(entry: &Map<String, Value>) -> Option<&str> {
    entry
        .get("auth")?
        .get("provider")?
        .as_str()
        .filter(|p| !p.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[tokio::test]
    async fn reads_the_stored_api_key_or_oauth_token_each_time() {
        let dir = tempfile::tempdir().unwrap();
        let login =
            ProviderLogin::from_entry(&entry(json!({"auth": {"provider": "radius"}})), dir.path())
                .unwrap();
        assert_eq!(login.token().await, None);
        assert!(!login.changed_since(None).await);

        let mut store = AuthStore::load(dir.path()).unwrap();
        store.set_api_key("radius", "key-1").unwrap();
        assert_eq!(login.token().await.as_deref(), Some("key-1"));
        assert!(login.changed_since(None).await);
        assert!(!login.changed_since(Some("key-1")).await);

        // An OAuth login valid for an hour is sent as it is.
        let expires = crate::llm::oauth::now_ms() + 3_600_000.0;
        store
            .set(
                "radius",
                json!({"type": "oauth", "access": "tok-2", "refresh": "r", "expires": expires}),
            )
            .unwrap();
        assert_eq!(login.token().await.as_deref(), Some("tok-2"));
        assert_eq!(
            login.sign_in_message("docs"),
            "MCP server \"docs\" requires sign-in. Run /login radius to sign in."
        );
    }

    #[test]
    fn only_a_named_provider_counts() {
        let dir = Path::new("/nonexistent");
        for none in [
            json!({}),
            json!({"auth": {}}),
            json!({"auth": {"provider": ""}}),
            json!({"auth": {"provider": 3}}),
        ] {
            assert_eq!(ProviderLogin::from_entry(&entry(none), dir), None);
        }
    }
}
