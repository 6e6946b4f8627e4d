//! `~/.pi/agent/models.json`: custom providers and models, overrides of built-in ones, and
//! config values that name environment variables or shell commands (models.md).
//!
//! API keys and header values stay unresolved in the registry and are resolved when a
//! request is made ([`ModelRegistry::resolve_api_key`]): a `!command` may be slow or
//! rotate its secret, and Pi deliberately resolves at request time.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::catalog::builtin_catalog;
use super::model::{default_context_window, default_max_tokens, InputKind, Model, ModelCost};

/// Loading models.json failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelsJsonError {
    /// The file could not be read.
    #[error("failed to read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid JSON of the expected shape.
    #[error("invalid models.json {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Raw per-provider settings kept for request-time resolution.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderConfig {
    /// `apiKey` as written (`$ENV`, `!cmd`, literal).
    pub api_key: Option<String>,
    /// `headers` as written.
    pub headers: BTreeMap<String, String>,
    /// `authHeader: true` adds `Authorization: Bearer <key>`.
    pub auth_header: bool,
    /// The whole provider block as written: models.json's layer, applied again above the
    /// models of a provider object with this id (Pi composes the object below models.json).
    pub block: Map<String, Value>,
}

/// The model catalog after applying models.json.
#[derive(Debug, Clone, Default)]
pub struct ModelRegistry {
    /// All models, built-in first, in catalog order. Shared: the built-in catalog has well
    /// over a thousand models and registries are cloned freely, so a clone shares them and a
    /// change copies them once ([`Arc::make_mut`]).
    pub models: Arc<Vec<Model>>,
    /// Provider settings from models.json, by provider id.
    pub providers: HashMap<String, ProviderConfig>,
    /// Physical models a virtual model of the same provider and id hides, restored when
    /// it is unregistered.
    hidden: Vec<Model>,
    /// models.json providers that could not be applied, one message each: as Pi, the load
    /// reports them and goes on with the other providers.
    pub provider_errors: Vec<String>,
}

impl ModelRegistry {
    /// Only the built-in catalog.
    pub fn builtin() -> Self {
        ModelRegistry {
            models: builtin_catalog().models.clone(),
            providers: HashMap::new(),
            hidden: Vec::new(),
            provider_errors: Vec::new(),
        }
    }

    /// Adds or replaces a virtual model. A physical model of the same provider and id is
    /// hidden behind it, as in Pi.
    pub fn add_virtual(&mut self, model: Model) {
        let models = Arc::make_mut(&mut self.models);
        if let Some(i) = models
            .iter()
            .position(|m| m.provider == model.provider && m.id == model.id)
        {
            let replaced = models.remove(i);
            if !replaced.is_virtual() {
                self.hidden.push(replaced);
            }
        }
        models.push(model);
    }

    /// Removes a virtual model (`pi.unregisterVirtualModel`); a physical model it hid is
    /// listed again.
    pub fn remove_virtual(&mut self, provider: &str, id: &str) {
        let models = Arc::make_mut(&mut self.models);
        models.retain(|m| !(m.is_virtual() && m.provider == provider && m.id == id));
        if let Some(i) = self
            .hidden
            .iter()
            .position(|m| m.provider == provider && m.id == id)
        {
            models.push(self.hidden.remove(i));
        }
    }

    /// Whether `provider` lists only virtual models: such a provider needs no credentials.
    pub fn is_virtual_only_provider(&self, provider: &str) -> bool {
        let mut listed = self.models.iter().filter(|m| m.provider == provider);
        let first = listed.next();
        first.is_some_and(|m| m.is_virtual()) && listed.all(Model::is_virtual)
    }

    /// A model by provider and id.
    pub fn find(&self, provider: &str, id: &str) -> Option<&Model> {
        self.models
            .iter()
            .find(|m| m.provider == provider && m.id == id)
    }

    /// The provider's API key from models.json, resolved now (`None` if unset/unresolved).
    pub fn resolve_api_key(&self, provider: &str) -> Option<String> {
        self.resolve_api_key_with(provider, &|k| std::env::var(k).ok())
    }

    /// [`Self::resolve_api_key`] with an explicit environment lookup.
    pub fn resolve_api_key_with(
        &self,
        provider: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Option<String> {
        let raw = self.providers.get(provider)?.api_key.as_deref()?;
        resolve_config_value(raw, env)
    }

    /// Headers to send for `provider`, resolved now; values that do not resolve are left
    /// out (Pi's `resolveHeaders`).
    pub fn resolve_headers(
        &self,
        provider: &str,
        api_key: Option<&str>,
    ) -> BTreeMap<String, String> {
        let env = |k: &str| std::env::var(k).ok();
        let mut out = BTreeMap::new();
        if let Some(cfg) = self.providers.get(provider) {
            for (k, v) in &cfg.headers {
                if let Some(v) = resolve_config_value(v, &env).filter(|v| !v.is_empty()) {
                    out.insert(k.clone(), v);
                }
            }
            if cfg.auth_header {
                if let Some(key) = api_key {
                    out.insert("Authorization".into(), format!("Bearer {key}"));
                }
            }
        }
        out
    }
}

/// Resolve a config value: `!cmd` runs `cmd` with `sh -c` and uses its trimmed stdout;
/// otherwise `$NAME` / `${NAME}` are replaced from `env` (`$$` → `$`, `$!` → `!`). `None`
/// when a variable is missing or the command fails or prints nothing.
pub fn resolve_config_value(value: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if let Some(cmd) = value.strip_prefix('!') {
        let out = Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .stdin(std::process::Stdio::null())
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let s = String::from_utf8_lossy(&out.stdout).trim().to_string();
        return (!s.is_empty()).then_some(s);
    }
    let is_name_start = |c: char| c.is_ascii_alphabetic() || c == '_';
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::new();
    let mut rest = value;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        let mut chars = after.chars();
        match chars.next() {
            Some(c @ ('$' | '!')) => {
                out.push(c);
                rest = &after[1..];
            }
            Some('{') => match after.find('}') {
                Some(end) => {
                    let name = &after[1..end];
                    if !name.is_empty()
                        && name.starts_with(is_name_start)
                        && name.chars().all(is_name)
                    {
                        out.push_str(&env(name).filter(|v| !v.is_empty())?);
                    } else {
                        out.push('$');
                        out.push_str(&after[..=end]);
                    }
                    rest = &after[end + 1..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            },
            Some(c) if is_name_start(c) => {
                let len = after.find(|c: char| !is_name(c)).unwrap_or(after.len());
                out.push_str(&env(&after[..len]).filter(|v| !v.is_empty())?);
                rest = &after[len..];
            }
            _ => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Some(out)
}

fn get_str(o: &Map<String, Value>, k: &str) -> Option<String> {
    o.get(k).and_then(Value::as_str).map(str::to_string)
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn merge_maps(
    base: Option<&Map<String, Value>>,
    over: Option<&Map<String, Value>>,
) -> Option<Map<String, Value>> {
    match (base, over) {
        (None, None) => None,
        (b, o) => {
            let mut m = b.cloned().unwrap_or_default();
            for (k, v) in o.into_iter().flatten() {
                m.insert(k.clone(), v.clone());
            }
            Some(m)
        }
    }
}

/// `over` merged into the compat settings `base`: key by key, and inside the routing and
/// chat-template objects too (Pi's `mergeCompat`), so an override of one routing field keeps
/// the others.
fn merge_compat(
    base: Option<&Map<String, Value>>,
    over: Option<&Map<String, Value>>,
) -> Option<Map<String, Value>> {
    let mut merged = merge_maps(base, over)?;
    for key in [
        "openRouterRouting",
        "vercelGatewayRouting",
        "chatTemplateKwargs",
        "chatTemplateArgs",
    ] {
        let inner = |m: Option<&Map<String, Value>>| {
            m.and_then(|m| m.get(key))
                .and_then(Value::as_object)
                .cloned()
        };
        let (b, o) = (inner(base), inner(over));
        if b.is_some() || o.is_some() {
            if let Some(m) = merge_maps(b.as_ref(), o.as_ref()) {
                merged.insert(key.to_string(), Value::Object(m));
            }
        }
    }
    Some(merged)
}

/// Apply the per-model override fields models.md lists to `m`.
fn apply_override(m: &mut Model, o: &Map<String, Value>) -> Result<(), String> {
    if let Some(v) = get_str(o, "name") {
        m.name = v;
    }
    if let Some(v) = o.get("reasoning").and_then(Value::as_bool) {
        m.reasoning = v;
    }
    if let Some(v) = o.get("thinkingLevelMap").and_then(Value::as_object) {
        m.thinking_level_map = merge_maps(m.thinking_level_map.as_ref(), Some(v));
    }
    if let Some(v) = o.get("input") {
        m.input = serde_json::from_value::<Vec<InputKind>>(v.clone())
            .map_err(|e| format!("input: {e}"))?;
    }
    if let Some(c) = o.get("cost").and_then(Value::as_object) {
        // Partial cost: only the given rates change.
        let mut cur = serde_json::to_value(&m.cost).map_err(|e| e.to_string())?;
        if let Some(obj) = cur.as_object_mut() {
            for (k, v) in c {
                obj.insert(k.clone(), v.clone());
            }
        }
        m.cost = serde_json::from_value::<ModelCost>(cur).map_err(|e| format!("cost: {e}"))?;
    }
    if let Some(v) = o.get("contextWindow").and_then(Value::as_u64) {
        m.context_window = v;
    }
    if let Some(v) = o.get("maxTokens").and_then(Value::as_u64) {
        m.max_tokens = v;
    }
    if let Some(v) = o.get("samplingParams").and_then(Value::as_object) {
        m.sampling_params = merge_maps(m.sampling_params.as_ref(), Some(v));
    }
    if let Some(v) = o.get("headers") {
        m.headers.extend(string_map(Some(v)));
    }
    if let Some(v) = o.get("compat").and_then(Value::as_object) {
        m.compat = merge_compat(m.compat.as_ref(), Some(v));
    }
    Ok(())
}

/// Build a registry from models.json text on top of the built-in catalog.
pub fn parse_models_json(text: &str, path: &Path) -> Result<ModelRegistry, ModelsJsonError> {
    let invalid = |message: String| ModelsJsonError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let root: Value = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
    let providers = root
        .get("providers")
        .map(|p| {
            p.as_object()
                .cloned()
                .ok_or_else(|| invalid("\"providers\" must be an object".into()))
        })
        .transpose()?
        .unwrap_or_default();
    let mut reg = ModelRegistry::builtin();
    for (pname, pv) in &providers {
        let p = pv
            .as_object()
            .ok_or_else(|| invalid(format!("provider \"{pname}\" must be an object")))?;
        let mut next = reg.clone();
        match apply_provider(&mut next, pname, p) {
            Ok(()) => reg = next,
            Err(e) => {
                // Left out, but its block is kept: a provider object an extension registers
                // under this id may supply what it lacked (the models' `api`, say).
                reg.providers.insert(
                    pname.clone(),
                    ProviderConfig {
                        block: p.clone(),
                        ..ProviderConfig::default()
                    },
                );
                reg.provider_errors
                    .push(format!("Provider \"{pname}\": {e}"));
            }
        }
    }
    Ok(reg)
}

/// Applies one provider block of models.json (or an extension's `pi.registerProvider`
/// config, which has the same fields) to `reg`: its settings, overrides of its built-in
/// models, and its models (one with the id of an existing model replaces it).
pub fn apply_provider(
    reg: &mut ModelRegistry,
    pname: &str,
    p: &Map<String, Value>,
) -> Result<(), String> {
    let base_url = get_str(p, "baseUrl");
    let papi = get_str(p, "api");
    let pheaders = string_map(p.get("headers"));
    let pcompat = p.get("compat").and_then(Value::as_object);
    reg.providers.insert(
        pname.to_string(),
        ProviderConfig {
            api_key: get_str(p, "apiKey"),
            headers: pheaders.clone(),
            auth_header: p
                .get("authHeader")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            block: p.clone(),
        },
    );

    // The provider's models so far (built-in, or a provider object's): routed through
    // `baseUrl`, with `compat` merged into theirs.
    if base_url.is_some() || pcompat.is_some() {
        for m in Arc::make_mut(&mut reg.models)
            .iter_mut()
            .filter(|m| m.provider == pname)
        {
            if let Some(u) = &base_url {
                m.base_url = u.clone();
            }
            if pcompat.is_some() {
                m.compat = merge_compat(m.compat.as_ref(), pcompat);
            }
        }
    }

    let Some(models) = p.get("models") else {
        return apply_model_overrides(reg, pname, p);
    };
    let models = models
        .as_array()
        .ok_or_else(|| format!("provider \"{pname}\": models must be an array"))?;
    for mv in models {
        let mo = mv
            .as_object()
            .ok_or_else(|| format!("provider \"{pname}\": model must be an object"))?;
        let id = get_str(mo, "id")
            .ok_or_else(|| format!("provider \"{pname}\": model without \"id\""))?;
        let api = get_str(mo, "api")
            .or_else(|| papi.clone())
            .or_else(|| {
                reg.models
                    .iter()
                    .find(|m| m.provider == pname)
                    .map(|m| m.api.clone())
            })
            .ok_or_else(|| format!("{pname}/{id}: no \"api\" on the model or provider"))?;
        let base = get_str(mo, "baseUrl")
            .or_else(|| base_url.clone())
            .or_else(|| {
                reg.models
                    .iter()
                    .find(|m| m.provider == pname)
                    .map(|m| m.base_url.clone())
            })
            .ok_or_else(|| format!("provider \"{pname}\": \"baseUrl\" is required"))?;
        let mut m = Model {
            id: id.clone(),
            name: get_str(mo, "name").unwrap_or_else(|| id.clone()),
            api,
            provider: pname.to_string(),
            base_url: base,
            reasoning: false,
            input: vec![InputKind::Text],
            cost: ModelCost::default(),
            context_window: default_context_window(),
            max_tokens: default_max_tokens(),
            headers: pheaders.clone(),
            compat: pcompat.cloned(),
            thinking_level_map: None,
            sampling_params: None,
        };
        apply_override(&mut m, mo).map_err(|e| format!("{pname}/{id}: {e}"))?;
        // Same id within the provider replaces (built-in or earlier entry).
        let all = Arc::make_mut(&mut reg.models);
        match all.iter_mut().find(|x| x.provider == pname && x.id == id) {
            Some(slot) => *slot = m,
            None => all.push(m),
        }
    }
    apply_model_overrides(reg, pname, p)
}

/// `modelOverrides`: the topmost layer, applied once the provider's models are all there
/// (its own `models` included), as Pi applies them last.
fn apply_model_overrides(
    reg: &mut ModelRegistry,
    pname: &str,
    p: &Map<String, Value>,
) -> Result<(), String> {
    let Some(overrides) = p.get("modelOverrides").and_then(Value::as_object) else {
        return Ok(());
    };
    for m in Arc::make_mut(&mut reg.models)
        .iter_mut()
        .filter(|m| m.provider == pname)
    {
        if let Some(o) = overrides.get(&m.id).and_then(Value::as_object) {
            apply_override(m, o).map_err(|e| format!("{pname}/{}: {e}", m.id))?;
        }
    }
    Ok(())
}

/// Load models.json from `path`; a missing file gives the built-in catalog.
pub fn load_models(path: &Path) -> Result<ModelRegistry, ModelsJsonError> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_models_json(&text, path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ModelRegistry::builtin()),
        Err(source) => Err(ModelsJsonError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(k: &str) -> Option<String> {
        match k {
            "KEY" => Some("sk-123".into()),
            "A" => Some("x".into()),
            "A_B" => Some("y".into()),
            _ => None,
        }
    }

    #[test]
    fn value_resolution() {
        let r = |v: &str| resolve_config_value(v, &env);
        assert_eq!(r("$KEY").as_deref(), Some("sk-123"));
        assert_eq!(r("${KEY}").as_deref(), Some("sk-123"));
        assert_eq!(r("${A}_B").as_deref(), Some("x_B"));
        assert_eq!(r("$A_B").as_deref(), Some("y"));
        assert_eq!(r("pre-$A-post").as_deref(), Some("pre-x-post"));
        assert_eq!(r("$$literal").as_deref(), Some("$literal"));
        assert_eq!(r("$!bang").as_deref(), Some("!bang"));
        assert_eq!(r("MY_API_KEY").as_deref(), Some("MY_API_KEY"));
        assert_eq!(r("$MISSING"), None);
        assert_eq!(r("a$").as_deref(), Some("a$"));
        assert_eq!(r("${not valid}").as_deref(), Some("${not valid}"));
        assert_eq!(r("!printf '  from-cmd\\n'").as_deref(), Some("from-cmd"));
        assert_eq!(r("!exit 3"), None);
    }

    /// Real Pi 1.6.0 with this groq block: `--list-models groq` showed
    /// `llama-3.1-8b-instant 50K 3K` (the model `models` redefined, with the override on
    /// top), and a prompt to the built-in `llama-3.3-70b-versatile` went to the block's
    /// `baseUrl` with `max_tokens` (the block's `compat`) where it otherwise sends
    /// `max_completion_tokens`.
    #[test]
    fn a_providers_compat_and_overrides_reach_built_in_and_own_models() {
        let text = serde_json::json!({"providers": {"groq": {
            "baseUrl": "http://127.0.0.1:9/v1", "apiKey": "k",
            "compat": {"maxTokensField": "max_tokens", "openRouterRouting": {"only": ["a"]}},
            "models": [{"id": "llama-3.1-8b-instant", "contextWindow": 50000,
                        "compat": {"openRouterRouting": {"order": ["b"]}}}],
            "modelOverrides": {"llama-3.1-8b-instant": {"maxTokens": 3000},
                               "llama-3.3-70b-versatile": {"compat": {"openRouterRouting": {"sort": "price"}}}}
        }}})
        .to_string();
        let reg = parse_models_json(&text, Path::new("models.json")).unwrap();

        let built_in = reg.find("groq", "llama-3.3-70b-versatile").unwrap();
        assert_eq!(built_in.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(built_in.compat_str("maxTokensField"), Some("max_tokens"));
        assert_eq!(
            built_in.compat_value("openRouterRouting"),
            Some(&serde_json::json!({"only": ["a"], "sort": "price"})),
            "an override's routing is merged into the provider's"
        );

        let own = reg.find("groq", "llama-3.1-8b-instant").unwrap();
        assert_eq!((own.context_window, own.max_tokens), (50_000, 3000));
        assert_eq!(own.compat_str("maxTokensField"), Some("max_tokens"));
        assert_eq!(
            own.compat_value("openRouterRouting"),
            Some(&serde_json::json!({"only": ["a"], "order": ["b"]}))
        );
    }

    #[test]
    fn fixture_models_json_loads() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/realpi/tricky/agent/models.json");
        let reg = load_models(&path).expect("loads");
        let m = reg.find("fakeoai", "fake-model").expect("fake-model");
        assert_eq!(m.api, "openai-completions");
        assert_eq!(m.base_url, "http://127.0.0.1:18765/v1");
        assert!(m.reasoning);
        assert_eq!((m.context_window, m.max_tokens), (128_000, 4096));
        assert_eq!(m.cost.cache_read, 0.1);
        let c = reg.find("fakeant", "fake-claude").expect("fake-claude");
        assert_eq!(c.api, "anthropic-messages");
        assert_eq!(
            reg.resolve_api_key_with("fakeant", &env).as_deref(),
            Some("fake-ant-key")
        );
        assert!(
            reg.find("anthropic", "claude-sonnet-4-5").is_some(),
            "built-ins stay"
        );
    }

    #[test]
    fn overrides_and_merges() {
        let text = r#"{"providers":{
            "anthropic":{"baseUrl":"https://proxy/v1","modelOverrides":{
                "claude-sonnet-4-5":{"name":"Routed","cost":{"input":1},"compat":{"x":true}},
                "unknown-id":{"name":"ignored"}},
              "models":[{"id":"claude-haiku-4-5","contextWindow":1000}]},
            "ollama":{"baseUrl":"http://localhost:11434/v1","api":"openai-completions","apiKey":"ollama",
              "compat":{"supportsDeveloperRole":false},
              "models":[{"id":"llama3.1:8b"},{"id":"q","api":"openai-responses","compat":{"a":1}}]}}}"#;
        let reg = parse_models_json(text, Path::new("models.json")).expect("parses");
        let s = reg.find("anthropic", "claude-sonnet-4-5").expect("sonnet");
        assert_eq!(s.name, "Routed");
        assert_eq!(s.base_url, "https://proxy/v1");
        assert_eq!(s.cost.input, 1.0);
        assert_eq!(s.cost.output, 15.0, "partial cost keeps other rates");
        assert_eq!(s.compat_bool("x"), Some(true));
        assert_eq!(
            s.compat_bool("supportsStrictTools"),
            Some(true),
            "compat merged"
        );
        let h = reg.find("anthropic", "claude-haiku-4-5").expect("haiku");
        assert_eq!(h.context_window, 1000);
        assert_eq!(h.base_url, "https://proxy/v1");
        let l = reg.find("ollama", "llama3.1:8b").expect("llama");
        assert_eq!(
            (l.name.as_str(), l.context_window, l.max_tokens),
            ("llama3.1:8b", 128_000, 16_384)
        );
        assert_eq!(l.compat_bool("supportsDeveloperRole"), Some(false));
        let q = reg.find("ollama", "q").expect("q");
        assert_eq!(q.api, "openai-responses");
        assert_eq!(q.compat_bool("supportsDeveloperRole"), Some(false));
        assert_eq!(q.compat_value("a"), Some(&serde_json::json!(1)));

        // A provider that cannot be applied is reported and left out, its block kept for a
        // provider object of that id; the others load (Pi's "errors loading models.json").
        let bad = r#"{"providers":{"x":{"models":[{"id":"m"}], "apiKey": "k"},
                                   "y":{"baseUrl":"http://y/v1","api":"openai-completions","models":[{"id":"m"}]}}}"#;
        let reg = parse_models_json(bad, Path::new("m.json")).unwrap();
        assert_eq!(
            reg.provider_errors,
            [r#"Provider "x": x/m: no "api" on the model or provider"#]
        );
        assert!(reg.find("x", "m").is_none());
        assert_eq!(reg.providers["x"].api_key, None);
        assert_eq!(reg.providers["x"].block["apiKey"], "k");
        assert!(reg.find("y", "m").is_some());
        assert!(parse_models_json("{not json", Path::new("m.json")).is_err());
    }
}
