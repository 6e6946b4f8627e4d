//! Providers registered by extensions (`pi.registerProvider(name, config)`): the config
//! form, with models.json's fields (`baseUrl`, `apiKey`, `api`, `headers`, `authHeader`,
//! `models`), joins the catalog as a models.json provider does, except that a `models` list
//! replaces every model the provider had (Pi's rule for registered providers). A provider
//! with a `streamSimple` function keeps it in the sidecar: its `api` is registered with
//! [`crate::llm::external`], and each request made with one of its models becomes a
//! sidecar `stream` call whose `stream_event` notifications carry Pi's events back. A
//! provider object (`pi.registerProvider(provider)`) arrives as such a declaration with
//! `nativeAuth`: its requests resolve their auth in the sidecar ([`register_auth_resolvers`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use serde_json::{json, Value};
use tokio::sync::mpsc::UnboundedSender;

use super::{lock, Extensions, Shared};
use pi_formats::message::{AgentMessage, ThinkingLevel, Tool};
use tokio_util::sync::CancellationToken;

use crate::llm::external::{self, ExternalCall, StreamFunction};
use crate::llm::provider_auth::{self, ResolvedAuth};
use crate::llm::{apply_provider, Context, Model, ModelRegistry, StreamOptions, ThinkingBudgets};
use futures::future::BoxFuture;

/// `registry` with the declared providers (`{name, config}`) applied in order, and the
/// errors of those that could not be (a model without an id, no `api`, …).
pub fn with_providers(
    mut registry: ModelRegistry,
    declared: &[Value],
) -> (ModelRegistry, Vec<String>) {
    let mut errors = Vec::new();
    for provider in declared {
        let Some(name) = provider.get("name").and_then(Value::as_str) else {
            continue;
        };
        let Some(config) = provider.get("config").and_then(Value::as_object) else {
            continue;
        };
        let mut next = registry.clone();
        if config.get("models").is_some_and(Value::is_array) {
            Arc::make_mut(&mut next.models).retain(|m| m.provider != name);
        }
        // A provider object is the base models.json's block for its id applies above (Pi's
        // `composeModelProvider`): its `baseUrl`, `compat`, `models` and `modelOverrides`
        // over the object's models, its `apiKey` and `authHeader` over the object's, its
        // `headers` over the object's headers.
        let configured = is_native(config)
            .then(|| registry.providers.get(name).map(|c| c.block.clone()))
            .flatten();
        let applied = apply_provider(&mut next, name, config).and_then(|()| match &configured {
            Some(block) => apply_models_json_above(&mut next, name, block),
            None => Ok(()),
        });
        match applied {
            Ok(()) => registry = next,
            Err(e) => errors.push(format!("Provider \"{name}\": {e}")),
        }
    }
    (registry, errors)
}

/// models.json's `block` for provider `name` applied above the provider object just
/// applied to `registry`; the object's headers stay where models.json sets none.
fn apply_models_json_above(
    registry: &mut ModelRegistry,
    name: &str,
    block: &serde_json::Map<String, Value>,
) -> Result<(), String> {
    let own_headers = registry
        .providers
        .get(name)
        .map(|c| c.headers.clone())
        .unwrap_or_default();
    apply_provider(registry, name, block)?;
    if let Some(config) = registry.providers.get_mut(name) {
        let above = std::mem::replace(&mut config.headers, own_headers);
        config.headers.extend(above);
    }
    Ok(())
}

/// Whether a declaration is a provider object's (`pi.registerProvider(provider)`), whose
/// auth the extension resolves.
fn is_native(config: &serde_json::Map<String, Value>) -> bool {
    config.get("nativeAuth").is_some_and(Value::is_object)
}

/// Makes the requests of the declared provider objects resolve their auth in the sidecar
/// ([`provider_auth`]), and forgets those no longer declared.
pub(super) fn register_auth_resolvers(shared: &Arc<Shared>, declared: &[Value]) {
    let wanted: Vec<String> = declared
        .iter()
        .filter(|p| {
            p.get("config")
                .and_then(Value::as_object)
                .is_some_and(is_native)
        })
        .filter_map(|p| p.get("name").and_then(Value::as_str).map(str::to_string))
        .collect();
    let mut providers = lock(&shared.provider_streams.auth);
    for gone in providers.iter().filter(|p| !wanted.contains(p)) {
        provider_auth::unregister(gone);
    }
    for provider in &wanted {
        provider_auth::register(
            provider,
            Arc::new(SidecarAuth {
                shared: Arc::downgrade(shared),
                provider: provider.clone(),
                filters: declared.iter().any(|p| {
                    p.get("name").and_then(Value::as_str) == Some(provider.as_str())
                        && p.pointer("/config/filterModels").and_then(Value::as_bool) == Some(true)
                }),
            }),
        );
    }
    *providers = wanted;
}

/// A provider object's `auth` (`apiKey.resolve`, `oauth.toAuth`), called in the sidecar
/// with the provider's credential from auth.json.
struct SidecarAuth {
    shared: Weak<Shared>,
    provider: String,
    /// The provider has `filterModels`.
    filters: bool,
}

impl SidecarAuth {
    /// Asks the sidecar `method` about the provider, with its stored credential from
    /// auth.json (read now: `/login` may have stored one since start-up) and `extra`
    /// params. `refresh`: an OAuth login about to expire is refreshed first, as Pi's
    /// `getAuth` does.
    fn ask(
        &self,
        method: &'static str,
        refresh: bool,
        extra: Value,
    ) -> BoxFuture<'static, Result<Value, String>> {
        let target = self.shared.upgrade().and_then(|s| {
            let sidecar = lock(&s.sidecar).clone();
            sidecar.map(|sidecar| (s, sidecar))
        });
        let provider = self.provider.clone();
        Box::pin(async move {
            let Some((shared, sidecar)) = target else {
                return Err("The extension that registered this provider is not running".into());
            };
            let agent_dir = lock(&shared.credential_models.agent_dir).clone();
            let credential = match agent_dir {
                Some(dir) => {
                    if refresh {
                        let (dir2, name) = (dir.clone(), provider.clone());
                        let _ = tokio::task::spawn_blocking(move || {
                            crate::llm::oauth::store::refresh_if_expiring(&dir2, &name)
                        })
                        .await;
                    }
                    read_object(&dir.join("auth.json")).remove(&provider)
                }
                None => None,
            };
            let mut params = json!({"provider": provider, "credential": credential});
            if let (Some(params), Value::Object(extra)) = (params.as_object_mut(), extra) {
                params.extend(extra);
            }
            let (tx, rx) = tokio::sync::oneshot::channel();
            shared.runtime.spawn(async move {
                let _ = tx.send(sidecar.request(method, params).await);
            });
            rx.await
                .map_err(|_| "the extension process stopped".to_string())?
        })
    }
}

impl SidecarAuth {
    /// models.json's `apiKey` for the provider, as written.
    fn models_json_key(&self) -> Option<String> {
        let shared = self.shared.upgrade()?;
        let base = lock(&shared.credential_models.base);
        base.as_ref()?
            .providers
            .get(&self.provider)?
            .api_key
            .clone()
    }

    /// Whether auth.json holds a credential for the provider (read now: `/login` may have
    /// stored one since start-up).
    fn has_stored_credential(&self) -> bool {
        let Some(shared) = self.shared.upgrade() else {
            return false;
        };
        let agent_dir = lock(&shared.credential_models.agent_dir).clone();
        agent_dir
            .is_some_and(|dir| read_object(&dir.join("auth.json")).contains_key(&self.provider))
    }
}

impl provider_auth::AuthResolver for SidecarAuth {
    fn resolve(&self) -> BoxFuture<'static, Result<Option<ResolvedAuth>, String>> {
        let answer = self.ask("resolve_auth", true, Value::Null);
        Box::pin(async move { Ok(resolved_auth(answer.await?.get("result"))) })
    }

    fn check(&self) -> BoxFuture<'static, Result<bool, String>> {
        // Without a stored credential, models.json's `apiKey` for the provider decides alone
        // (Pi's composed check): configured when it is a command or its variables are set;
        // the object's own `check` is not asked.
        if let Some(raw) = self
            .models_json_key()
            .filter(|_| !self.has_stored_credential())
        {
            let configured = raw.starts_with('!')
                || crate::llm::models_json::resolve_config_value(&raw, &|k| std::env::var(k).ok())
                    .is_some();
            return Box::pin(async move { Ok(configured) });
        }
        let answer = self.ask("check_auth", false, Value::Null);
        Box::pin(async move {
            Ok(answer.await?.get("configured").and_then(Value::as_bool) == Some(true))
        })
    }

    fn filter(
        &self,
        models: Vec<Model>,
    ) -> BoxFuture<'static, Result<Option<Vec<String>>, String>> {
        if !self.filters {
            return Box::pin(async { Ok(None) });
        }
        let answer = self.ask("filter_models", false, json!({ "models": models }));
        Box::pin(async move {
            let answer = answer.await?;
            Ok(answer.get("ids").and_then(Value::as_array).map(|ids| {
                ids.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            }))
        })
    }
}

/// Pi's `AuthResult` (`{auth: {apiKey, headers, baseUrl}, source}`) as a request uses it.
fn resolved_auth(result: Option<&Value>) -> Option<ResolvedAuth> {
    let auth = result.filter(|r| r.is_object())?.get("auth");
    let text = |k: &str| {
        auth.and_then(|a| a.get(k))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Some(ResolvedAuth {
        api_key: text("apiKey"),
        headers: auth
            .and_then(|a| a.get("headers"))
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect(),
        base_url: text("baseUrl"),
    })
}

/// Pi's `oauth.modifyModels(models, credentials)` (the legacy credential-dependent model
/// projection): the lists it returned for the stored OAuth credentials, by provider. They
/// replace the provider's models wherever the declared providers are applied
/// ([`with_declared`]), so the projection always starts from the declared models.
#[derive(Default)]
pub(super) struct CredentialModels {
    /// The catalog the providers are applied to (what [`super::Extensions::catalog`] was
    /// last given): where `modifyModels`' input comes from.
    pub(super) base: Mutex<Option<ModelRegistry>>,
    /// Provider → the models `modifyModels` returned.
    pub(super) modified: Mutex<std::collections::BTreeMap<String, Vec<Model>>>,
    /// The agent dir of the last refresh: where a refresh after a later registration reads
    /// credentials and the models store.
    pub(super) agent_dir: Mutex<Option<std::path::PathBuf>>,
}

/// Pi refreshes the catalogs without network whenever a provider is registered or
/// unregistered: after a registration made once the extensions loaded (a command's), the
/// providers' `refreshModels` and `oauth.modifyModels` run again, in the background.
pub(super) fn refresh_after_registration(shared: &Arc<Shared>) {
    let Some(agent_dir) = lock(&shared.credential_models.agent_dir).clone() else {
        return;
    };
    let Some(ext) = lock(&shared.this).upgrade() else {
        return;
    };
    shared.runtime.spawn(async move {
        ext.refresh_models(&agent_dir, false, None).await;
    });
}

/// Whether `provider` is declared with `oauth.modifyModels`.
pub(super) fn modifies_models(declared: &[Value], provider: &str) -> bool {
    declared.iter().any(|p| {
        p.get("name").and_then(Value::as_str) == Some(provider)
            && p.pointer("/config/oauth/modifyModels")
                .and_then(Value::as_bool)
                == Some(true)
    })
}

/// [`with_providers`], then the lists `modifyModels` returned in place of those providers'
/// models (at the position of their first model).
pub(super) fn with_declared(
    shared: &Shared,
    registry: ModelRegistry,
    declared: &[Value],
) -> (ModelRegistry, Vec<String>) {
    let (mut registry, errors) = with_providers(registry, declared);
    let modified = lock(&shared.credential_models.modified);
    for (provider, models) in modified.iter() {
        if !modifies_models(declared, provider) {
            continue;
        }
        let list = Arc::make_mut(&mut registry.models);
        let at = list
            .iter()
            .position(|m| m.provider == *provider)
            .unwrap_or(list.len());
        list.retain(|m| m.provider != *provider);
        let at = at.min(list.len());
        list.splice(at..at, models.iter().cloned());
    }
    (registry, errors)
}

/// The models of a `modify_models` answer, under `provider` (entries that are no model are
/// reported in the error).
pub(super) fn modified_models(provider: &str, answer: &Value) -> Result<Vec<Model>, String> {
    let list = answer
        .get("models")
        .and_then(Value::as_array)
        .ok_or("modifyModels returned no list")?;
    list.iter()
        .map(|m| {
            let mut model: Model = serde_json::from_value(m.clone())
                .map_err(|e| format!("modifyModels returned an invalid model: {e}"))?;
            model.provider = provider.to_string();
            Ok(model)
        })
        .collect()
}

/// A JSON file of the agent dir as an object (empty when missing or unreadable).
fn read_object(path: &std::path::Path) -> serde_json::Map<String, Value> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// Writes what refreshes published with `persist` to models-store.json (Pi's models store,
/// 0600, other providers' entries kept): an entry replaces the provider's, `null` deletes it.
fn persist_entries(agent_dir: &std::path::Path, persist: &serde_json::Map<String, Value>) {
    if persist.is_empty() {
        return;
    }
    let path = agent_dir.join(MODELS_STORE);
    let mut store = read_object(&path);
    for (provider, entry) in persist {
        match entry {
            Value::Null => store.remove(provider),
            entry => store.insert(provider.clone(), entry.clone()),
        };
    }
    let text = serde_json::to_string_pretty(&Value::Object(store)).unwrap_or_default();
    let _ = crate::config::error::write_atomic(&path, text.as_bytes(), Some(0o600));
}

/// Pi's models store in the agent dir (`{<provider>: entry}`).
const MODELS_STORE: &str = "models-store.json";

/// A request to the sidecar made on its own runtime (callers may run on another one, the
/// TUI's threads), bounded by Pi's 15 s model refresh limit.
async fn ask_sidecar(
    ext: &Extensions,
    method: &'static str,
    params: Value,
) -> Result<Value, String> {
    let sidecar = ext.sidecar.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    ext.shared.runtime.spawn(async move {
        let answer = sidecar
            .request_bounded(method, params, super::MODEL_REFRESH_TIMEOUT)
            .await;
        let _ = tx.send(answer);
    });
    rx.await
        .map_err(|_| "the extension process stopped".to_string())?
}

/// What a refresh of the extensions' providers' models came to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ModelRefresh {
    /// Some provider's models changed.
    pub changed: bool,
    /// The providers whose `refreshModels` failed (their models stay as they were), in the
    /// order they failed.
    pub failed: Vec<String>,
    /// The refresh did not finish within Pi's 15 s limit.
    pub timed_out: bool,
}

/// See [`Extensions::refresh_models`].
pub(super) async fn refresh_models(
    ext: &Extensions,
    agent_dir: &std::path::Path,
    allow_network: bool,
    only: Option<&[String]>,
) -> ModelRefresh {
    let _one_at_a_time = ext.shared.refreshing.lock().await;
    *lock(&ext.shared.credential_models.agent_dir) = Some(agent_dir.to_path_buf());
    let declared = ext.providers();
    let named = |p: &&Value| p.get("name").and_then(Value::as_str).map(str::to_string);
    let wanted = |flag: &str| -> Vec<String> {
        declared
            .iter()
            .filter(|p| p.pointer(flag).and_then(Value::as_bool) == Some(true))
            .filter_map(|p| named(&p))
            .filter(|name| only.is_none_or(|only| only.contains(name)))
            .collect()
    };
    let (refreshers, modifiers) = (
        wanted("/config/refreshModels"),
        wanted("/config/oauth/modifyModels"),
    );
    let mut outcome = ModelRefresh::default();
    if refreshers.is_empty() && modifiers.is_empty() {
        return outcome;
    }
    let mut stored = read_object(&agent_dir.join("auth.json"));
    if !refreshers.is_empty() {
        let store = read_object(&agent_dir.join(MODELS_STORE));
        let pick = |from: &serde_json::Map<String, Value>| -> serde_json::Map<String, Value> {
            refreshers
                .iter()
                .filter_map(|name| Some((name.clone(), from.get(name)?.clone())))
                .collect()
        };
        let network = if allow_network {
            network_credentials(ext, agent_dir, &refreshers, &declared).await
        } else {
            serde_json::Map::new()
        };
        let params = json!({
            "providers": refreshers,
            "allowNetwork": allow_network,
            "credentials": pick(&stored),
            "networkCredentials": network,
            "stored": pick(&store),
        });
        let answer = ask_sidecar(ext, "refresh_models", params).await;
        if answer.is_err() {
            // The sidecar's own limit answers first unless a provider ignored its signal.
            outcome.timed_out = true;
        }
        if let Ok(answer) = answer {
            if let Some(errors) = answer.get("errors").and_then(Value::as_object) {
                outcome.failed.extend(errors.keys().cloned());
            }
            if let Some(persist) = answer.get("persist").and_then(Value::as_object) {
                persist_entries(agent_dir, persist);
            }
            if answer.get("changed").and_then(Value::as_bool) == Some(true) {
                let declared = answer
                    .get("providers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                ext.shared.providers_changed(declared);
                outcome.changed = true;
            }
        }
    }
    if allow_network && !refreshers.is_empty() {
        // A login the network phase refreshed is what `modifyModels` sees, as in Pi.
        stored = read_object(&agent_dir.join("auth.json"));
    }
    if !modifiers.is_empty() && modify_models(ext, &stored, &modifiers).await {
        ext.shared.providers_changed(ext.providers());
        outcome.changed = true;
    }
    outcome
}

/// The credentials of Pi's network refresh phase (its `resolveNetworkRefresh`), by
/// provider: a stored OAuth login (refreshed first when it has expired, with the
/// provider's `refreshToken`), else an API key (stored, else the provider's configured
/// `apiKey`) as `{type: "api_key", key}`. A provider without any gets no network phase.
async fn network_credentials(
    ext: &Extensions,
    agent_dir: &std::path::Path,
    providers: &[String],
    declared: &[Value],
) -> serde_json::Map<String, Value> {
    let base = lock(&ext.shared.credential_models.base)
        .clone()
        .or_else(|| ext.shared.agent().map(|a| a.registry()))
        .unwrap_or_else(ModelRegistry::builtin);
    let (registry, _) = with_providers(base, declared);
    let mut found = serde_json::Map::new();
    for provider in providers {
        let stored = read_object(&agent_dir.join("auth.json")).remove(provider);
        let kind = stored
            .as_ref()
            .and_then(|c| c.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let configured_only = declared.iter().any(|p| {
            p.get("name").and_then(Value::as_str) == Some(provider.as_str())
                && p.pointer("/config/refreshModelsAuth")
                    .and_then(Value::as_str)
                    == Some("configured")
        });
        let credential = if configured_only {
            // Pi's `refreshModelsAuth: "configured"`: the network phase runs when the
            // provider is configured, with no credential (`null`) and no OAuth refresh.
            match provider_auth::lookup(provider) {
                Some(resolver) => match resolver.check().await {
                    Ok(true) => Some(Value::Null),
                    _ => None,
                },
                None => None,
            }
        } else if kind == "oauth" {
            if crate::llm::oauth::extension::lookup(provider).is_none() {
                // Pi: an OAuth credential of a provider without a login flow.
                None
            } else {
                let (dir, name) = (agent_dir.to_path_buf(), provider.clone());
                let refreshed = tokio::task::spawn_blocking(move || {
                    crate::llm::oauth::store::refresh_if_expiring_within(&dir, &name, 0.0)
                })
                .await;
                match refreshed {
                    Ok(Ok(_)) => read_object(&agent_dir.join("auth.json")).remove(provider),
                    _ => None,
                }
            }
        } else if let Some(resolver) = provider_auth::lookup(provider) {
            // A provider object: its `apiKey.resolve` makes the credential (Pi's
            // `resolveRefreshCredential`).
            match resolver.resolve().await {
                Ok(Some(auth)) => Some(json!({"type": "api_key", "key": auth.api_key})),
                _ => None,
            }
        } else {
            let key = stored
                .as_ref()
                .filter(|_| kind == "api_key")
                .and_then(|c| c.get("key"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| registry.resolve_api_key(provider));
            key.map(|key| json!({"type": "api_key", "key": key}))
        };
        if let Some(credential) = credential {
            found.insert(provider.clone(), credential);
        }
    }
    found
}

/// Pi's `oauth.modifyModels` for `providers`: with an OAuth credential stored, the
/// provider's models (as the declarations make them from the base catalog) go to the
/// sidecar and the returned list is kept; without one the provider's models are its own
/// again. `true` when some provider's list changed. A failing `modifyModels` is reported
/// and leaves the models unmodified.
async fn modify_models(
    ext: &Extensions,
    stored: &serde_json::Map<String, Value>,
    providers: &[String],
) -> bool {
    let shared = &ext.shared;
    let declared = ext.providers();
    let base = lock(&shared.credential_models.base)
        .clone()
        .or_else(|| shared.agent().map(|a| a.registry()))
        .unwrap_or_else(ModelRegistry::builtin);
    let (plain, _) = with_providers(base, &declared);
    let mut changed = false;
    for provider in providers {
        let credential = stored
            .get(provider)
            .filter(|c| c.get("type").and_then(Value::as_str) == Some("oauth"));
        let next = match credential {
            None => None,
            Some(credential) => {
                let models: Vec<&Model> = plain
                    .models
                    .iter()
                    .filter(|m| m.provider == *provider)
                    .collect();
                let params =
                    json!({"provider": provider, "models": models, "credentials": credential});
                match ask_sidecar(ext, "modify_models", params)
                    .await
                    .and_then(|answer| modified_models(provider, &answer))
                {
                    Ok(models) => Some(models),
                    Err(e) => {
                        shared.report_error(
                            "<extension>",
                            "modifyModels",
                            &format!("Provider \"{provider}\": {e}"),
                        );
                        None
                    }
                }
            }
        };
        let mut modified = lock(&shared.credential_models.modified);
        let before = modified.get(provider).cloned();
        match next.clone() {
            Some(models) => modified.insert(provider.clone(), models),
            None => modified.remove(provider),
        };
        changed |= before != next;
    }
    changed
}

/// The provider streams running in the sidecar and the APIs registered for them.
#[derive(Default)]
pub(super) struct ProviderStreams {
    next: AtomicU64,
    /// Event channels of the running streams, by stream id.
    open: Mutex<HashMap<String, UnboundedSender<Value>>>,
    /// The APIs this process registered with [`external::register`].
    apis: Mutex<Vec<String>>,
    /// Requests the host runs for the sidecar (`anthropicMessagesApi().streamSimple`, …),
    /// by the sidecar's id: what aborts them.
    builtin: Mutex<HashMap<String, CancellationToken>>,
    /// The providers this process registered with [`provider_auth::register`].
    auth: Mutex<Vec<String>>,
}

/// `builtin_stream`: an extension calls one of Pi's provider APIs (the pi-ai shim's
/// `anthropicMessagesApi().streamSimple`, `streamSimple`, …). The host's own provider runs
/// the request; every event goes back as `builtin_stream_event` before the answer.
pub(super) fn builtin_stream(shared: &Arc<Shared>, params: Value, id: Value) {
    let stream_id = params
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let model = params
        .get("model")
        .cloned()
        .map(serde_json::from_value::<Model>);
    let model = match model {
        Some(Ok(m)) => m,
        Some(Err(e)) => {
            shared.answer_sidecar(id, json!({"error": format!("invalid model: {e}")}));
            return;
        }
        None => {
            shared.answer_sidecar(id, json!({"error": "no model"}));
            return;
        }
    };
    let context = context_of(params.get("context").unwrap_or(&Value::Null));
    let cancel = CancellationToken::new();
    let raw_options = params.get("options").unwrap_or(&Value::Null);
    let mut options = options_of(raw_options);
    options.cancel = cancel.clone();
    // `ctx.modelRegistry.complete`: the catalog's model and the provider's credentials,
    // unless the extension gave its own.
    let mut model = model;
    if raw_options.get("useProviderAuth").and_then(Value::as_bool) == Some(true) {
        if let Some(agent) = shared.agent() {
            if let Some(known) = agent.registry().find(&model.provider, &model.id) {
                model = known.clone();
            }
            let (key, headers) = agent.provider_auth(&model.provider);
            if options.api_key.is_none() {
                options.api_key = key;
            }
            for (k, v) in headers {
                options.headers.entry(k).or_insert(v);
            }
        }
    }
    lock(&shared.provider_streams.builtin).insert(stream_id.clone(), cancel);
    let Some(sidecar) = lock(&shared.sidecar).clone() else {
        return;
    };
    let shared = shared.clone();
    shared.runtime.clone().spawn(async move {
        let mut stream = crate::llm::stream(&model, context, options);
        while let Some(event) = stream.next().await {
            let event = serde_json::to_value(&event).unwrap_or(Value::Null);
            sidecar
                .tell(
                    "builtin_stream_event",
                    json!({"id": stream_id, "event": event}),
                )
                .await;
        }
        lock(&shared.provider_streams.builtin).remove(&stream_id);
        sidecar.answer(id, Value::Null).await;
    });
}

/// `abort_builtin_stream`: the extension's `signal` aborted a [`builtin_stream`].
pub(super) fn abort_builtin_stream(shared: &Shared, params: &Value) {
    let id = params.get("id").and_then(Value::as_str).unwrap_or("");
    if let Some(cancel) = lock(&shared.provider_streams.builtin).get(id) {
        cancel.cancel();
    }
}

/// Pi's `Context` (`systemPrompt`, `tools`, `messages`) or transcript (`messages` with
/// system messages) as the providers take it. Messages that cannot be read are left out.
fn context_of(value: &Value) -> Context {
    let list = |k: &str| value.get(k).and_then(Value::as_array).cloned();
    Context {
        system_prompt: value
            .get("systemPrompt")
            .and_then(Value::as_str)
            .map(str::to_string),
        messages: list("messages")
            .unwrap_or_default()
            .into_iter()
            .filter_map(|m| serde_json::from_value::<AgentMessage>(m).ok())
            .collect(),
        tools: list("tools")
            .unwrap_or_default()
            .into_iter()
            .filter_map(|t| serde_json::from_value::<Tool>(t).ok())
            .collect(),
    }
}

/// Pi's `SimpleStreamOptions` fields the host's providers read.
fn options_of(value: &Value) -> StreamOptions {
    let text = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_string);
    let budgets = value.get("thinkingBudgets");
    let budget = |k: &str| budgets.and_then(|b| b.get(k)).and_then(Value::as_u64);
    let headers = value.get("headers").and_then(Value::as_object);
    StreamOptions {
        api_key: text("apiKey"),
        headers: headers
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect(),
        // A `null` header (one a `before_provider_headers` handler removed) is left out
        // of the request, whoever adds it, as for the host's own requests.
        removed_headers: headers
            .into_iter()
            .flatten()
            .filter(|(_, v)| v.is_null())
            .map(|(k, _)| k.clone())
            .collect(),
        max_tokens: value.get("maxTokens").and_then(Value::as_u64),
        temperature: value.get("temperature").and_then(Value::as_f64),
        reasoning: text("reasoning").and_then(|l| ThinkingLevel::parse(&l)),
        thinking_budgets: ThinkingBudgets {
            minimal: budget("minimal"),
            low: budget("low"),
            medium: budget("medium"),
            high: budget("high"),
        },
        session_id: text("sessionId"),
        ..Default::default()
    }
}

impl ProviderStreams {
    /// A `stream_event` notification: the event goes to its request.
    pub(super) fn event(&self, params: &Value) {
        let id = params.get("streamId").and_then(Value::as_str).unwrap_or("");
        if let Some(tx) = lock(&self.open).get(id) {
            let _ = tx.send(params.get("event").cloned().unwrap_or(Value::Null));
        }
    }
}

/// Makes the APIs of the declared providers with `streamSimple` stream through the sidecar,
/// and forgets those no longer declared.
pub(super) fn register_stream_apis(shared: &Arc<Shared>, declared: &[Value]) {
    let wanted: Vec<String> = declared
        .iter()
        .filter_map(|p| p.get("config"))
        .filter(|c| c.get("streamSimple").and_then(Value::as_bool) == Some(true))
        .filter_map(|c| c.get("api").and_then(Value::as_str).map(str::to_string))
        .collect();
    let mut apis = lock(&shared.provider_streams.apis);
    for gone in apis.iter().filter(|a| !wanted.contains(a)) {
        external::unregister(gone);
    }
    for api in &wanted {
        external::register(
            api,
            Arc::new(SidecarStream {
                shared: Arc::downgrade(shared),
            }),
        );
    }
    *apis = wanted;
}

/// A provider's `streamSimple`, run in the sidecar.
struct SidecarStream {
    shared: Weak<Shared>,
}

impl StreamFunction for SidecarStream {
    fn start(&self, mut request: Value, events: UnboundedSender<Value>) -> ExternalCall {
        let sidecar = self.shared.upgrade().and_then(|s| {
            let sidecar = lock(&s.sidecar).clone();
            sidecar.map(|sidecar| (s, sidecar))
        });
        let Some((shared, sidecar)) = sidecar else {
            return ExternalCall {
                done: Box::pin(async {
                    Err("The extension that registered this provider is not running".to_string())
                }),
                abort: Box::new(|| {}),
            };
        };
        let streams = &shared.provider_streams;
        let id = format!("p{}", streams.next.fetch_add(1, Ordering::SeqCst));
        lock(&streams.open).insert(id.clone(), events);
        request["streamId"] = id.clone().into();
        let (done_shared, done_sidecar, done_id) = (shared.clone(), sidecar.clone(), id.clone());
        let done = Box::pin(async move {
            let outcome = done_sidecar.request("stream", request).await;
            lock(&done_shared.provider_streams.open).remove(&done_id);
            outcome.map(|_| ())
        });
        let runtime = shared.runtime.clone();
        let abort = Box::new(move || {
            lock(&shared.provider_streams.open).remove(&id);
            runtime.spawn(async move {
                sidecar
                    .tell("abort_stream", json!({ "streamId": id }))
                    .await;
            });
        });
        ExternalCall { done, abort }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn models_replace_the_providers_and_config_is_kept() {
        let declared = [json!({"name": "openai", "config": {
            "baseUrl": "http://127.0.0.1:9/v1", "apiKey": "k", "api": "openai-completions",
            "models": [{"id": "proxy-model", "contextWindow": 1000}]}})];
        let (registry, errors) = with_providers(ModelRegistry::builtin(), &declared);
        assert!(errors.is_empty(), "{errors:?}");
        let models: Vec<_> = registry
            .models
            .iter()
            .filter(|m| m.provider == "openai")
            .collect();
        assert_eq!(models.len(), 1);
        assert_eq!(models[0].id, "proxy-model");
        assert_eq!(models[0].base_url, "http://127.0.0.1:9/v1");
        assert_eq!(models[0].context_window, 1000);
        assert_eq!(registry.resolve_api_key("openai").as_deref(), Some("k"));
    }

    #[test]
    fn models_json_settings_stay_above_a_provider_object() {
        let mut base = ModelRegistry::builtin();
        let models_json = json!({"apiKey": "$FROM_MODELS_JSON", "authHeader": true,
            "headers": {"x-config": "models.json"}});
        apply_provider(&mut base, "local-server", models_json.as_object().unwrap()).unwrap();
        let object = json!({"name": "local-server", "config": {
            "baseUrl": "http://127.0.0.1:9/v1", "api": "pi-extension-provider:local-server",
            "headers": {"x-config": "object", "x-own": "object"}, "nativeAuth": {"apiKey": true},
            "models": [{"id": "m", "api": "openai-completions"}]}});
        let (registry, errors) = with_providers(base.clone(), std::slice::from_ref(&object));
        assert!(errors.is_empty(), "{errors:?}");
        let config = &registry.providers["local-server"];
        assert_eq!(config.api_key.as_deref(), Some("$FROM_MODELS_JSON"));
        assert!(config.auth_header);
        assert_eq!(config.headers["x-config"], "models.json");
        assert_eq!(config.headers["x-own"], "object");
        let model = registry.find("local-server", "m").unwrap();
        assert_eq!(model.api, "openai-completions");
        assert_eq!(model.base_url, "http://127.0.0.1:9/v1");

        // The config form replaces the provider's settings, as before.
        let mut form = object;
        form["config"].as_object_mut().unwrap().remove("nativeAuth");
        let (registry, _) = with_providers(base, &[form]);
        assert_eq!(registry.providers["local-server"].api_key, None);
    }

    #[test]
    fn a_bad_provider_is_reported_and_left_out() {
        let declared = [json!({"name": "nowhere", "config": {"models": [{"id": "m"}]}})];
        let (registry, errors) = with_providers(ModelRegistry::builtin(), &declared);
        assert_eq!(errors.len(), 1);
        assert!(!registry.models.iter().any(|m| m.provider == "nowhere"));
    }
}
