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
