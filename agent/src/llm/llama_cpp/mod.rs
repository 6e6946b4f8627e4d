//! The `llama.cpp` provider: models served by a llama.cpp router (`llama serve` without a
//! model), as Pi 1.6.0's built-in `builtin:llama.cpp` extension offers them.
//!
//! The router lists every model it knows with a state (`GET /models`: loaded, sleeping,
//! unloaded, loading, downloading), loads and unloads on request (`POST /models/load`,
//! `POST /models/unload` with `{"model": id}`) and answers chat on `/v1/chat/completions`
//! with the `model` field choosing the model. So the provider has no fixed catalog: its
//! models are discovered from the router ([`catalog::discover`]) and chat goes through the
//! existing `openai-completions` client.
//!
//! Where the router is comes from `/login llama.cpp` (stored in auth.json as Pi stores it:
//! `{"type":"api_key","key"?,"env":{"LLAMA_BASE_URL":url}}`) or the `LLAMA_BASE_URL` /
//! `LLAMA_API_KEY` environment variables; without either the provider is not configured,
//! as in Pi (the default URL is only what `/login` offers).

pub mod catalog;
pub mod client;

use std::time::Duration;

use serde_json::{json, Value};

use super::models_json::ModelRegistry;
use super::Model;
use crate::config::{AuthStore, Credential};

pub use client::{RouterClient, RouterError, RouterModel};

/// The provider id (also the auth.json key and the `--provider` value).
pub const PROVIDER_ID: &str = "llama.cpp";
/// The name `pi config` and `settings.json` use for the built-in extension.
pub const BUILTIN_NAME: &str = "llama.cpp";
/// The URL `/login llama.cpp` offers when nothing is entered (Pi 1.6.0's default).
pub const DEFAULT_SERVER_URL: &str = "http://127.0.0.1:9931";
/// The key sent when none is configured (Pi sends `local`; the router ignores it unless it
/// was started with `--api-key`).
pub const NO_KEY: &str = "local";

/// Where the router is and the key to send it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// The router's root URL (no trailing `/v1`).
    pub server_url: String,
    /// The configured key; [`Connection::key`] falls back to [`NO_KEY`].
    pub api_key: Option<String>,
    /// Where the URL came from, for messages: `stored credential` or `LLAMA_BASE_URL`.
    pub source: &'static str,
}

impl Connection {
    /// The key to send (Pi: the stored key, else `LLAMA_API_KEY`, else `local`).
    pub fn key(&self) -> String {
        self.api_key.clone().unwrap_or_else(|| NO_KEY.to_string())
    }

    /// The chat base URL, `{server}/v1`.
    pub fn inference_url(&self) -> String {
        inference_url(&self.server_url)
    }

    /// A client for the router's management endpoints.
    pub fn client(&self, timeout: Duration) -> RouterClient {
        RouterClient::new(&self.server_url, Some(self.key()), timeout)
    }
}

/// The router's root URL from what a user typed: http(s) only, query and fragment dropped,
/// trailing slashes and a trailing `/v1` removed (Pi accepts the chat URL too).
pub fn normalize_server_url(value: &str) -> Result<String, String> {
    let mut url = reqwest::Url::parse(value.trim()).map_err(|e| format!("Invalid URL: {e}"))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err("Server URL must use http or https".into());
    }
    url.set_fragment(None);
    url.set_query(None);
    let trimmed = url.path().trim_end_matches('/');
    let path = trimmed.strip_suffix("/v1").unwrap_or(trimmed).to_string();
    url.set_path(if path.is_empty() { "/" } else { &path });
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// `{server}/v1`, where the OpenAI-compatible chat endpoint lives.
pub fn inference_url(server_url: &str) -> String {
    format!("{}/v1", server_url.trim_end_matches('/'))
}

/// The router this run talks to: a stored `/login llama.cpp` credential first, else
/// `LLAMA_BASE_URL`. The key: the stored one, else `LLAMA_API_KEY`.
pub fn connection(
    auth: Option<&AuthStore>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<Connection> {
    let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let stored = auth.and_then(|a| a.get(PROVIDER_ID));
    if let Some(Credential::ApiKey { env: cred_env, .. }) = &stored {
        if let Some(url) = cred_env
            .get("LLAMA_BASE_URL")
            .and_then(|u| normalize_server_url(u).ok())
        {
            let key = auth
                .and_then(|a| a.api_key(PROVIDER_ID, env))
                .or_else(|| get("LLAMA_API_KEY"));
            return Some(Connection {
                server_url: url,
                api_key: key,
                source: "stored credential",
            });
        }
    }
    let url = normalize_server_url(&get("LLAMA_BASE_URL")?).ok()?;
    Some(Connection {
        server_url: url,
        api_key: get("LLAMA_API_KEY"),
        source: "LLAMA_BASE_URL",
    })
}

/// [`connection`] reading auth.json from `agent_dir` now (a `/login` may have run since
/// start-up) and the process environment.
pub fn current_connection(agent_dir: &std::path::Path) -> Option<Connection> {
    let auth = AuthStore::load(agent_dir).ok();
    connection(auth.as_ref(), &|k| std::env::var(k).ok())
}

/// The auth.json credential `/login llama.cpp` stores (Pi's shape: the key only when one
/// was entered, the URL under `env.LLAMA_BASE_URL`).
pub fn credential(server_url: &str, api_key: Option<&str>) -> Value {
    let mut cred = json!({"type": "api_key", "env": {"LLAMA_BASE_URL": server_url}});
    if let Some(key) = api_key.filter(|k| !k.is_empty()) {
        cred["key"] = Value::from(key);
    }
    cred
}

/// Replaces the registry's llama.cpp models with `models` (the router's current ones).
pub fn replace_models(registry: &mut ModelRegistry, models: Vec<Model>) {
    let all = std::sync::Arc::make_mut(&mut registry.models);
    all.retain(|m| m.provider != PROVIDER_ID);
    all.extend(models);
}

/// Runs `work` to completion on a thread of its own with a current-thread runtime, so the
/// caller may be inside or outside a runtime (start-up runs in both).
pub fn block_on<T: Send + 'static>(
    work: impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>
        + Send
        + 'static,
) -> Option<T> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        Some(rt.block_on(work()))
    })
    .join()
    .ok()
    .flatten()
}

/// The chat models the router offers now, fetched without an async caller (start-up,
/// `/reload`). Start-up waits at most `timeout` per request.
pub fn discover_blocking(conn: &Connection, timeout: Duration) -> Result<Vec<Model>, RouterError> {
    let client = conn.client(timeout);
    block_on(move || Box::pin(async move { catalog::discover(&client).await })).unwrap_or_else(
        || {
            Err(RouterError::Connection(
                "the discovery thread failed".into(),
            ))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_normalize_like_pi() {
        let n = |s: &str| normalize_server_url(s);
        assert_eq!(n("http://127.0.0.1:9931").unwrap(), "http://127.0.0.1:9931");
        assert_eq!(n(" http://h:1/v1/ ").unwrap(), "http://h:1");
        assert_eq!(n("https://h/base/v1?x=1#f").unwrap(), "https://h/base");
        assert!(n("ftp://h").is_err());
        assert!(n("not a url").is_err());
        assert_eq!(inference_url("http://h:1"), "http://h:1/v1");
    }

    #[test]
    fn connection_prefers_the_stored_credential() {
        let tmp = tempfile::tempdir().unwrap();
        let mut store = AuthStore::load(tmp.path()).unwrap();
        let env = |k: &str| match k {
            "LLAMA_BASE_URL" => Some("http://env:1/v1".to_string()),
            "LLAMA_API_KEY" => Some("env-key".to_string()),
            _ => None,
        };
        let from_env = connection(Some(&store), &env).unwrap();
        assert_eq!(from_env.server_url, "http://env:1");
        assert_eq!(from_env.key(), "env-key");
        assert_eq!(connection(Some(&store), &|_| None), None);

        store
            .set(PROVIDER_ID, credential("http://stored:2", None))
            .unwrap();
        let stored = connection(Some(&store), &env).unwrap();
        assert_eq!(stored.server_url, "http://stored:2");
        assert_eq!(stored.key(), "env-key", "no stored key: LLAMA_API_KEY");
        assert_eq!(connection(Some(&store), &|_| None).unwrap().key(), NO_KEY);
        store
            .set(PROVIDER_ID, credential("http://stored:2", Some("secret")))
            .unwrap();
        assert_eq!(connection(Some(&store), &env).unwrap().key(), "secret");
        let raw = store.raw(PROVIDER_ID).unwrap();
        assert_eq!(
            raw,
            &json!({"type": "api_key", "env": {"LLAMA_BASE_URL": "http://stored:2"}, "key": "secret"})
        );
    }
}
