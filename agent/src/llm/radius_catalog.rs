//! The Radius gateway's model catalog: `GET <gateway>/v1/config` (with the login's token)
//! names the gateway's `baseUrl` and the models this account may use. Once fetched it is
//! kept in `<agent dir>/models-store.json` under `radius` (`{models, checkedAt}`, Pi's
//! models store) and replaces the shipped Radius models at start-up, with no network: an
//! organization owner can disable models, so the account's catalog wins once known.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::model::api;
use super::oauth::radius::GATEWAY;
use super::{Model, ModelRegistry};

/// The provider id.
pub const PROVIDER_ID: &str = "radius";
const STORE_FILE: &str = "models-store.json";

/// Fetches the account's catalog from the gateway.
pub async fn fetch(token: &str) -> Result<Vec<Model>, String> {
    let url = super::oauth::endpoint(&format!("{GATEWAY}/v1/config"));
    let resp = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .unwrap_or_default()
        .get(&url)
        .header("accept", "application/json")
        .bearer_auth(token)
        .send()
        .await
        .map_err(|e| format!("Could not load Radius config from {GATEWAY}: {e}"))?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        let body: String = text.trim().chars().take(512).collect();
        return Err(format!(
            "Could not load Radius config from {GATEWAY}: {}: {body}",
            status.as_u16()
        ));
    }
    let config: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    models_of_config(&config).ok_or_else(|| format!("Invalid Radius config from {GATEWAY}"))
}

/// The models of a `/v1/config` answer (entries without Pi's required fields are skipped),
/// speaking `pi-messages` to the gateway's `baseUrl`.
fn models_of_config(config: &Value) -> Option<Vec<Model>> {
    let base_url = config.get("baseUrl")?.as_str()?;
    let models = config.get("models")?.as_array()?;
    Some(
        models
            .iter()
            .filter(|m| {
                m.get("id").is_some_and(Value::is_string)
                    && m.get("name").is_some_and(Value::is_string)
                    && m.get("reasoning").is_some_and(Value::is_boolean)
                    && m.get("input").is_some_and(Value::is_array)
                    && m.get("cost").is_some_and(Value::is_object)
                    && m.get("contextWindow").is_some_and(Value::is_number)
                    && m.get("maxTokens").is_some_and(Value::is_number)
            })
            .filter_map(|m| {
                let mut m = m.clone();
                m["api"] = json!(api::PI_MESSAGES);
                m["provider"] = json!(PROVIDER_ID);
                m["baseUrl"] = json!(base_url);
                serde_json::from_value(m).ok()
            })
            .collect(),
    )
}

/// Keeps `models` as the Radius catalog in the models store (0600, other entries kept).
pub fn save(agent_dir: &Path, models: &[Model]) -> Result<(), String> {
    let path = agent_dir.join(STORE_FILE);
    let mut store: Map<String, Value> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    store.insert(
        PROVIDER_ID.into(),
        json!({"models": models, "checkedAt": super::oauth::now_ms()}),
    );
    let text = serde_json::to_string_pretty(&Value::Object(store)).unwrap_or_default();
    crate::config::error::write_atomic(&path, text.as_bytes(), Some(0o600))
        .map_err(|e| e.to_string())
}

/// The key the gateway is asked with: the stored login's access token (refreshed first when
/// it is about to expire), else a stored API key, else `RADIUS_API_KEY`.
fn gateway_key(agent_dir: &Path) -> Option<String> {
    if let (Some(token), _) = super::oauth::oauth_access_token(agent_dir, PROVIDER_ID) {
        return Some(token);
    }
    crate::config::AuthStore::load(agent_dir)
        .ok()
        .and_then(|a| a.api_key(PROVIDER_ID, &|k| std::env::var(k).ok()))
        .or_else(|| std::env::var("RADIUS_API_KEY").ok())
        .filter(|k| !k.is_empty())
}

/// Pi's limit on a catalog refresh at start-up and after a login (15 s, then the refresh is
/// abandoned and the kept catalog stays).
pub const REFRESH_LIMIT: std::time::Duration = std::time::Duration::from_secs(15);

/// The error of a refresh abandoned at its limit.
pub const TIMED_OUT: &str = "the Radius model catalog refresh timed out";

/// Fetches the account's catalog with Radius's stored credential and keeps it (what a
/// login does, and a session's start in the background). Blocks; runs its own runtime, so
/// it may be called from any thread. `Ok(None)`: no Radius credential to ask with.
pub fn refresh_blocking(agent_dir: &Path) -> Result<Option<Vec<Model>>, String> {
    refresh_blocking_within(agent_dir, REFRESH_LIMIT)
}

/// [`refresh_blocking`], abandoned after `limit` ([`TIMED_OUT`]): an answer that comes
/// later is neither kept nor returned.
pub fn refresh_blocking_within(
    agent_dir: &Path,
    limit: std::time::Duration,
) -> Result<Option<Vec<Model>>, String> {
    let Some(key) = gateway_key(agent_dir) else {
        return Ok(None);
    };
    let models = super::llama_cpp::block_on(move || {
        Box::pin(async move {
            tokio::time::timeout(limit, fetch(&key))
                .await
                .map_err(|_| TIMED_OUT.to_string())?
        })
    })
    .ok_or("the catalog refresh did not run")??;
    save(agent_dir, &models)
        .map_err(|e| format!("Could not keep the Radius model catalog: {e}"))?;
    Ok(Some(models))
}

/// Replaces the Radius models of `registry` by `models` (a fresh catalog).
pub fn replace_models(registry: &mut ModelRegistry, models: Vec<Model>) {
    let all = std::sync::Arc::make_mut(&mut registry.models);
    all.retain(|m| m.provider != PROVIDER_ID);
    all.extend(models);
}

/// The catalog kept by [`save`], if any.
pub fn cached(agent_dir: &Path) -> Vec<Model> {
    std::fs::read_to_string(agent_dir.join(STORE_FILE))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v.get(PROVIDER_ID)?.get("models").cloned())
        .and_then(|m| serde_json::from_value::<Vec<Model>>(m).ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.provider == PROVIDER_ID)
        .collect()
}

/// Replaces the shipped Radius models by the cached catalog, when there is one.
pub fn apply_cached(registry: &mut ModelRegistry, agent_dir: &Path) {
    let models = cached(agent_dir);
    if models.is_empty() {
        return;
    }
    replace_models(registry, models);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_models_speak_pi_messages_to_the_gateway_and_round_trip() {
        let config = json!({"baseUrl": "https://gw.example/v1", "models": [
            {"id": "m1", "name": "M1", "reasoning": true, "input": ["text"],
             "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0},
             "contextWindow": 1000, "maxTokens": 100},
            {"id": "broken"}
        ]});
        let models = models_of_config(&config).unwrap();
        assert_eq!(models.len(), 1);
        assert_eq!(models[0].api, "pi-messages");
        assert_eq!(models[0].base_url, "https://gw.example/v1");
        let dir = tempfile::tempdir().unwrap();
        save(dir.path(), &models).unwrap();
        assert_eq!(cached(dir.path()), models);
        assert!(models_of_config(&json!({"models": []})).is_none());
    }
}
