//! Logins that extensions bring: `pi.registerProvider(name, {oauth: {name, login,
//! refreshToken, getApiKey}})` (Pi 1.6.0's legacy provider `oauth`). The functions stay in
//! the extension process; the host registers one [`ExtensionFlow`] per such provider here,
//! process-wide like the built-in flows, so `/login`, `pi auth login`, the token refresh in
//! [`super::store`] and the request's key all find it by provider id.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};

use futures::future::BoxFuture;
use serde_json::Value;

use super::Interaction;

/// An extension's login, refresh and key function for one provider.
pub trait ExtensionFlow: Send + Sync {
    /// The display name (`oauth.name`).
    fn name(&self) -> String;
    /// Runs `login(callbacks)`; its credentials as the extension returned them.
    fn login(&self, interaction: Interaction) -> BoxFuture<'static, Result<Value, String>>;
    /// Runs `refreshToken(credentials)`.
    fn refresh(&self, credential: Value) -> BoxFuture<'static, Result<Value, String>>;
    /// Runs `getApiKey(credentials)`: the key a request sends.
    fn api_key(&self, credential: Value) -> BoxFuture<'static, Result<String, String>>;
}

type Registry = RwLock<BTreeMap<String, Arc<dyn ExtensionFlow>>>;

fn registry() -> &'static Registry {
    static FLOWS: OnceLock<Registry> = OnceLock::new();
    FLOWS.get_or_init(Default::default)
}

/// Makes `provider` sign in through `flow` (replacing an earlier registration).
pub fn register(provider: &str, flow: Arc<dyn ExtensionFlow>) {
    registry()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(provider.to_string(), flow);
}

/// Forgets `provider`'s flow.
pub fn unregister(provider: &str) {
    registry()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .remove(provider);
}

/// `provider`'s flow, when an extension registered one.
pub fn lookup(provider: &str) -> Option<Arc<dyn ExtensionFlow>> {
    registry()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(provider)
        .cloned()
}

/// Every registered provider as `(id, display name)`, by id.
pub fn registered() -> Vec<(String, String)> {
    registry()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .map(|(id, flow)| (id.clone(), flow.name()))
        .collect()
}

/// Runs `work` to completion from sync code, inside or outside a runtime (on its own thread,
/// as the built-in refresh does).
pub(crate) fn block_on<T: Send + 'static>(
    work: BoxFuture<'static, Result<T, String>>,
) -> Result<T, String> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async move {
            tokio::time::timeout(std::time::Duration::from_secs(30), work)
                .await
                .unwrap_or_else(|_| Err("timed out".into()))
        })
    })
    .join()
    .map_err(|_| "the extension call panicked".to_string())?
}

/// Credentials an extension returned, as auth.json keeps them: the object with
/// `"type": "oauth"` added last (Pi 1.6.0 writes `{access, refresh, expires, …, type}`).
pub fn stored_form(credentials: Value) -> Value {
    let mut stored = serde_json::Map::new();
    if let Value::Object(map) = credentials {
        for (k, v) in map {
            if k != "type" {
                stored.insert(k, v);
            }
        }
    }
    stored.insert("type".into(), "oauth".into());
    Value::Object(stored)
}
