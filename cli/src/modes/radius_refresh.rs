//! The Radius gateway catalog refreshed in the background at start-up, as Pi 1.6.0 refreshes
//! its model catalogs in interactive and RPC mode (not with `PI_OFFLINE`, not in print
//! mode): the session starts from the catalog kept in `models-store.json`, without waiting
//! for the network; a thread then asks the gateway with the stored Radius credential, keeps
//! the answer and hands the fresh models to `apply`. A failure is dropped (the kept catalog
//! stays), as Pi drops it; so is an answer later than Pi's 15 s limit
//! ([`radius_catalog::REFRESH_LIMIT`]; `PI_TEST_CATALOG_REFRESH_LIMIT_MS` shortens it for
//! the tests, Pi has no such setting).

use std::path::PathBuf;
use std::time::Duration;

use pi_agent::llm::{radius_catalog, Model};

/// Whether start-up may touch the network for catalogs (Pi: `PI_OFFLINE` unset).
pub fn network_allowed() -> bool {
    std::env::var_os("PI_OFFLINE").is_none_or(|v| v.is_empty())
}

/// Starts the refresh when allowed; `apply` runs on the refresh's thread with the new models.
pub fn spawn(agent_dir: PathBuf, apply: impl FnOnce(Vec<Model>) + Send + 'static) {
    if !network_allowed() || !has_radius_credential(&agent_dir) {
        return;
    }
    std::thread::spawn(move || {
        if let Ok(Some(models)) =
            radius_catalog::refresh_blocking_within(&agent_dir, refresh_limit())
        {
            apply(models);
        }
    });
}

/// Pi's limit, or the tests' shorter one.
fn refresh_limit() -> Duration {
    std::env::var("PI_TEST_CATALOG_REFRESH_LIMIT_MS")
        .ok()
        .and_then(|ms| ms.trim().parse().ok())
        .map(Duration::from_millis)
        .unwrap_or(radius_catalog::REFRESH_LIMIT)
}

/// A stored login or key, or `RADIUS_API_KEY`: without one there is nothing to ask with.
fn has_radius_credential(agent_dir: &std::path::Path) -> bool {
    std::env::var_os("RADIUS_API_KEY").is_some_and(|v| !v.is_empty())
        || pi_agent::config::AuthStore::load(agent_dir)
            .is_ok_and(|a| a.get(radius_catalog::PROVIDER_ID).is_some())
}

/// `apply` for a session without a UI (RPC): the agent's registry gets the new models.
pub fn into_agent(agent: pi_agent::agent::AgentSession) -> impl FnOnce(Vec<Model>) + Send {
    move |models| {
        let mut registry = agent.registry();
        radius_catalog::replace_models(&mut registry, models);
        agent.set_registry(registry, None);
    }
}
