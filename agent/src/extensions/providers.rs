//! Providers registered by extensions (`pi.registerProvider(name, config)`): the config
//! form, with models.json's fields (`baseUrl`, `apiKey`, `api`, `headers`, `authHeader`,
//! `models`), joins the catalog as a models.json provider does, except that a `models` list
//! replaces every model the provider had (Pi's rule for registered providers). Providers
//! that stream through the extension (`streamSimple`) are refused in the sidecar.

use std::sync::Arc;

use serde_json::Value;

use crate::llm::{apply_provider, ModelRegistry};

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
        match apply_provider(&mut next, name, config) {
            Ok(()) => registry = next,
            Err(e) => errors.push(format!("Provider \"{name}\": {e}")),
        }
    }
    (registry, errors)
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
    fn a_bad_provider_is_reported_and_left_out() {
        let declared = [json!({"name": "nowhere", "config": {"models": [{"id": "m"}]}})];
        let (registry, errors) = with_providers(ModelRegistry::builtin(), &declared);
        assert_eq!(errors.len(), 1);
        assert!(!registry.models.iter().any(|m| m.provider == "nowhere"));
    }
}
