//! The built-in provider and model catalog.
//!
//! The facts live in `catalog.json`, generated from Pi 1.6.0's npm package by
//! `scripts/gen-model-catalog.mjs` (the file names its source and dates). Each provider
//! entry carries its id, display name, default wire API and base URL, the environment
//! variables its API key is read from and any it cannot work without, whether it offers a
//! subscription login, and its chat models. A model states `api` / `baseUrl` only where they
//! differ from its provider's, which keeps the file small.
//!
//! The file is compiled in and parsed once, on first use.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use serde::Deserialize;
use serde_json::{Map, Value};

use super::model::{default_input, InputKind, Model, ModelCost};

static CATALOG_JSON: &str = include_str!("catalog.json");

/// One built-in provider.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BuiltinProvider {
    /// Provider id (`anthropic`, `openrouter`, …).
    pub id: String,
    /// Display name.
    pub name: String,
    /// The wire API most of its models use.
    pub api: String,
    /// The base URL most of its models use (may hold `{PLACEHOLDERS}`, e.g. Cloudflare's
    /// account id, filled in at request time).
    pub base_url: String,
    /// Variables the API key is read from, in lookup order (Pi's `env-api-keys`).
    #[serde(default)]
    pub env_vars: Vec<String>,
    /// Variables besides the key that must be set for the provider to be usable.
    #[serde(default)]
    pub required_env: Vec<String>,
    /// Whether the provider offers a subscription (OAuth) login.
    #[serde(default)]
    pub oauth: bool,
    /// What its API-key login asks (`pi auth login <p> --api-key`), when it has one.
    #[serde(default)]
    pub api_key_login: Option<ApiKeyLogin>,
}

/// A provider's API-key login as Pi runs it: the prompts, in order.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ApiKeyLogin {
    /// The login starts with a choice of method (Vertex, Bedrock): not described by prompts.
    pub interactive: bool,
    /// The questions, in order.
    pub prompts: Vec<ApiKeyPrompt>,
}

/// One question of an API-key login.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ApiKeyPrompt {
    /// The text shown (`Enter Groq API key`).
    pub message: String,
    /// Read without echo.
    pub secret: bool,
    /// Where the answer is stored: `key`, or `env.NAME` (the credential's `env`).
    pub into: String,
}

/// The parsed catalog.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// Where the data came from (`@earendil-works/pi-ai@1.6.0`).
    pub source: String,
    /// When Pi generated its catalog.
    pub catalog_generated_at: String,
    /// When our data file was extracted from it.
    pub extracted_at: String,
    /// Providers, in catalog order.
    pub providers: Vec<BuiltinProvider>,
    /// Every chat model of every provider, in catalog order (shared with the registries
    /// built from it).
    pub models: Arc<Vec<Model>>,
}

impl Catalog {
    /// A provider by id.
    pub fn provider(&self, id: &str) -> Option<&BuiltinProvider> {
        self.providers.iter().find(|p| p.id == id)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CatalogFile {
    source: String,
    catalog_generated_at: String,
    extracted_at: String,
    providers: Vec<ProviderEntry>,
}

#[derive(Deserialize)]
struct ProviderEntry {
    #[serde(flatten)]
    provider: BuiltinProvider,
    models: Vec<ModelEntry>,
}

/// A model as stored: `api` and `baseUrl` default to the provider's.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelEntry {
    id: String,
    name: String,
    api: Option<String>,
    base_url: Option<String>,
    #[serde(default)]
    reasoning: bool,
    #[serde(default = "default_input")]
    input: Vec<InputKind>,
    #[serde(default)]
    cost: ModelCost,
    #[serde(default)]
    context_window: u64,
    #[serde(default)]
    max_tokens: u64,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    compat: Option<Map<String, Value>>,
    thinking_level_map: Option<Map<String, Value>>,
}

impl ModelEntry {
    fn into_model(self, provider: &BuiltinProvider) -> Model {
        Model {
            id: self.id,
            name: self.name,
            api: self.api.unwrap_or_else(|| provider.api.clone()),
            provider: provider.id.clone(),
            base_url: self.base_url.unwrap_or_else(|| provider.base_url.clone()),
            reasoning: self.reasoning,
            input: self.input,
            cost: self.cost,
            context_window: self.context_window,
            max_tokens: self.max_tokens,
            headers: self.headers,
            compat: self.compat,
            thinking_level_map: self.thinking_level_map,
            sampling_params: None,
        }
    }
}

fn parse(text: &str) -> serde_json::Result<Catalog> {
    let file: CatalogFile = serde_json::from_str(text)?;
    let mut providers = Vec::with_capacity(file.providers.len());
    let mut models = Vec::new();
    for entry in file.providers {
        models.extend(
            entry
                .models
                .into_iter()
                .map(|m| m.into_model(&entry.provider)),
        );
        providers.push(entry.provider);
    }
    Ok(Catalog {
        source: file.source,
        catalog_generated_at: file.catalog_generated_at,
        extracted_at: file.extracted_at,
        providers,
        models: Arc::new(models),
    })
}

/// The built-in catalog, parsed on first use.
pub fn builtin_catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    // The data is compiled in and parsed by a test, so a failure here is a build bug; an
    // empty catalog (no built-in models) is still better than a panic at startup.
    CATALOG.get_or_init(|| parse(CATALOG_JSON).unwrap_or_default())
}

/// A built-in provider by id.
pub fn builtin_provider(id: &str) -> Option<&'static BuiltinProvider> {
    builtin_catalog().provider(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_catalog_parses_completely() {
        let catalog = parse(CATALOG_JSON).expect("catalog.json parses");
        assert_eq!(catalog.source, "@earendil-works/pi-ai@1.6.0");
        assert!(catalog.providers.len() >= 40, "{}", catalog.providers.len());
        assert!(catalog.models.len() >= 1600, "{}", catalog.models.len());
        for model in catalog.models.iter() {
            assert!(
                !model.api.is_empty(),
                "{}/{} has no api",
                model.provider,
                model.id
            );
            assert!(model.context_window > 0, "{}/{}", model.provider, model.id);
        }
    }

    #[test]
    fn models_inherit_and_override_provider_defaults() {
        let catalog = builtin_catalog();
        let mistral = catalog.provider("mistral").expect("mistral");
        assert_eq!(mistral.api, "mistral-conversations");
        assert_eq!(mistral.env_vars, ["MISTRAL_API_KEY"]);
        let codestral = catalog
            .models
            .iter()
            .find(|m| m.provider == "mistral" && m.id == "codestral-2508")
            .expect("codestral");
        assert_eq!(codestral.api, "mistral-conversations");
        assert_eq!(codestral.base_url, "https://api.mistral.ai");
        assert_eq!(codestral.context_window, 256_000);
        assert_eq!(codestral.cost.input, 0.3);
        // Azure serves Foundry models over Chat Completions next to its Responses models.
        let azure_apis: std::collections::BTreeSet<&str> = catalog
            .models
            .iter()
            .filter(|m| m.provider == "azure")
            .map(|m| m.api.as_str())
            .collect();
        assert!(azure_apis.contains("azure-openai-responses"));
        assert!(azure_apis.contains("openai-completions"));
        let gateway = catalog.provider("cloudflare-ai-gateway").expect("gateway");
        assert_eq!(
            gateway.required_env,
            ["CLOUDFLARE_ACCOUNT_ID", "CLOUDFLARE_GATEWAY_ID"]
        );
    }

    #[test]
    fn bad_data_is_an_error_not_a_panic() {
        assert!(parse("{\"providers\": 3}").is_err());
        assert!(parse("").is_err());
    }
}
