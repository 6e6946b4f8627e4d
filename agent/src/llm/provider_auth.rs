//! Request auth that extensions' provider objects own (`pi.registerProvider(provider)` with
//! `auth.apiKey.resolve` / `auth.oauth.toAuth`, Pi 1.6.0's native providers). The functions
//! stay in the extension process; the host registers one [`AuthResolver`] per such provider
//! here, process-wide like [`super::external`], and every request to one of the provider's
//! models resolves its auth first ([`prepare`], from [`super::stream`]): Pi's `applyAuth`,
//! where the key, headers and base URL the resolver returns are used, explicit request
//! options winning field by field, and a provider that resolves nothing is not configured.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};

use futures::future::BoxFuture;

use super::{Model, StreamOptions};

/// What a provider's auth resolved to (Pi's `ModelAuth`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResolvedAuth {
    /// `auth.apiKey`.
    pub api_key: Option<String>,
    /// `auth.headers`.
    pub headers: BTreeMap<String, String>,
    /// `auth.baseUrl`: replaces the model's for the request.
    pub base_url: Option<String>,
}

/// One provider's auth resolution, run by the extension that registered it.
pub trait AuthResolver: Send + Sync {
    /// The auth for a request now (from the stored credential or ambient sources);
    /// `Ok(None)` when the provider is not configured.
    fn resolve(&self) -> BoxFuture<'static, Result<Option<ResolvedAuth>, String>>;

    /// Whether the provider is configured (Pi's `checkProviderAuth`: `auth.apiKey.check`
    /// when the provider has one, so availability does not resolve the key).
    fn check(&self) -> BoxFuture<'static, Result<bool, String>>;

    /// The ids of `models` (the provider's) that its `filterModels(models, credential)`
    /// keeps available; `Ok(None)` when the provider has no such hook.
    fn filter(&self, models: Vec<Model>)
        -> BoxFuture<'static, Result<Option<Vec<String>>, String>>;
}

type Registry = RwLock<BTreeMap<String, Arc<dyn AuthResolver>>>;

fn registry() -> &'static Registry {
    static RESOLVERS: OnceLock<Registry> = OnceLock::new();
    RESOLVERS.get_or_init(Default::default)
}

/// Makes `provider`'s requests resolve their auth through `resolver`.
pub fn register(provider: &str, resolver: Arc<dyn AuthResolver>) {
    registry()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(provider.to_string(), resolver);
}

/// Forgets `provider`'s resolver.
pub fn unregister(provider: &str) {
    registry()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .remove(provider);
}

/// `provider`'s resolver, when an extension registered one.
pub fn lookup(provider: &str) -> Option<Arc<dyn AuthResolver>> {
    registry()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(provider)
        .cloned()
}

/// [`AuthResolver::resolve`] for `provider` from sync code (the key lookups that choose
/// models and fill a request's key): `None` when no extension owns the provider's auth.
pub fn resolve_blocking(provider: &str) -> Option<Result<Option<ResolvedAuth>, String>> {
    let resolver = lookup(provider)?;
    Some(super::oauth::extension::block_on(resolver.resolve()))
}

/// [`AuthResolver::check`] for `provider` from sync code (availability: `--list-models`,
/// the model picker, choosing a model): `None` when no extension owns the provider's auth.
pub fn check_blocking(provider: &str) -> Option<Result<bool, String>> {
    let resolver = lookup(provider)?;
    Some(super::oauth::extension::block_on(resolver.check()))
}

/// The models of `models` that are available as far as their providers' `filterModels`
/// hooks say (Pi's `getAvailable`: applied after auth said the provider is configured), in
/// their order. A provider without a hook keeps its models; one whose hook fails keeps none,
/// as Pi's availability pass fails.
pub fn filter_available(models: Vec<Model>) -> Vec<Model> {
    let mut kept: BTreeMap<String, Option<Vec<String>>> = BTreeMap::new();
    for model in &models {
        if kept.contains_key(&model.provider) {
            continue;
        }
        let verdict = lookup(&model.provider).and_then(|resolver| {
            let own: Vec<Model> = models
                .iter()
                .filter(|m| m.provider == model.provider)
                .cloned()
                .collect();
            match super::oauth::extension::block_on(resolver.filter(own)) {
                Ok(ids) => ids,
                Err(_) => Some(Vec::new()),
            }
        });
        kept.insert(model.provider.clone(), verdict);
    }
    models
        .into_iter()
        .filter(|m| match kept.get(&m.provider) {
            Some(Some(ids)) => ids.contains(&m.id),
            _ => true,
        })
        .collect()
}

/// Pi's `applyAuth` for a provider whose auth an extension owns: the resolved key unless
/// the request has one, the resolved headers under the request's, the resolved base URL.
/// An unconfigured provider fails the request as Pi's does.
pub(crate) async fn prepare(model: &mut Model, options: &mut StreamOptions) -> Result<(), String> {
    let Some(resolver) = lookup(&model.provider) else {
        return Ok(());
    };
    let auth = resolver
        .resolve()
        .await?
        .ok_or_else(|| format!("Provider is not configured: {}", model.provider))?;
    apply(auth, model, options);
    Ok(())
}

fn apply(auth: ResolvedAuth, model: &mut Model, options: &mut StreamOptions) {
    if options.api_key.is_none() {
        options.api_key = auth.api_key;
    }
    for (name, value) in auth.headers {
        let taken = options
            .headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case(&name));
        if !taken {
            options.headers.insert(name, value);
        }
    }
    if let Some(url) = auth.base_url.filter(|u| !u.is_empty()) {
        model.base_url = url;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keeps the models named in `keep`; `None` for no hook.
    struct Filtering(Option<Vec<&'static str>>);

    impl AuthResolver for Filtering {
        fn resolve(&self) -> BoxFuture<'static, Result<Option<ResolvedAuth>, String>> {
            Box::pin(async { Ok(None) })
        }
        fn check(&self) -> BoxFuture<'static, Result<bool, String>> {
            Box::pin(async { Ok(true) })
        }
        fn filter(
            &self,
            models: Vec<Model>,
        ) -> BoxFuture<'static, Result<Option<Vec<String>>, String>> {
            let keep = self.0.clone();
            Box::pin(async move {
                Ok(keep.map(|keep| {
                    models
                        .into_iter()
                        .filter(|m| keep.contains(&m.id.as_str()))
                        .map(|m| m.id)
                        .collect()
                }))
            })
        }
    }

    #[test]
    fn filter_models_narrows_only_its_providers_list() {
        let model = |provider: &str, id: &str| {
            let mut m = super::super::builtin_models().remove(0);
            m.provider = provider.into();
            m.id = id.into();
            m
        };
        register("test-filtering", Arc::new(Filtering(Some(vec!["b"]))));
        register("test-unfiltered", Arc::new(Filtering(None)));
        let models = vec![
            model("test-filtering", "a"),
            model("test-other", "a"),
            model("test-filtering", "b"),
            model("test-unfiltered", "c"),
        ];
        let kept: Vec<(String, String)> = filter_available(models)
            .into_iter()
            .map(|m| (m.provider, m.id))
            .collect();
        unregister("test-filtering");
        unregister("test-unfiltered");
        assert_eq!(
            kept,
            [
                ("test-other".to_string(), "a".to_string()),
                ("test-filtering".to_string(), "b".to_string()),
                ("test-unfiltered".to_string(), "c".to_string()),
            ]
        );
    }

    #[test]
    fn request_options_win_field_by_field() {
        let mut model = super::super::builtin_models().remove(0);
        let mut options = StreamOptions {
            api_key: Some("explicit".into()),
            headers: BTreeMap::from([("X-Mine".to_string(), "request".to_string())]),
            ..Default::default()
        };
        let auth = ResolvedAuth {
            api_key: Some("resolved".into()),
            headers: BTreeMap::from([
                ("x-mine".to_string(), "auth".to_string()),
                ("x-auth".to_string(), "auth".to_string()),
            ]),
            base_url: Some("http://127.0.0.1:9/v1".into()),
        };
        apply(auth.clone(), &mut model, &mut options);
        assert_eq!(options.api_key.as_deref(), Some("explicit"));
        assert_eq!(
            options.headers.get("X-Mine").map(String::as_str),
            Some("request")
        );
        assert_eq!(
            options.headers.get("x-auth").map(String::as_str),
            Some("auth")
        );
        assert!(!options.headers.contains_key("x-mine"));
        assert_eq!(model.base_url, "http://127.0.0.1:9/v1");

        let mut bare = StreamOptions::default();
        apply(auth, &mut model, &mut bare);
        assert_eq!(bare.api_key.as_deref(), Some("resolved"));
    }
}
