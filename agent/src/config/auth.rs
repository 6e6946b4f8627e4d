//! `auth.json` in the agent dir and API key resolution.
//!
//! The file maps provider ids to credentials: `{"type": "api_key", "key": "...", "env": {...}}`
//! or `{"type": "oauth", "access": ..., "refresh": ..., "expires": ...}`. `key` may be a
//! literal, `$VAR` / `${VAR}` (looked up in the credential's `env` first, then the process
//! environment) or `!command`, resolved by [`resolve_config_value`] like models.json values.
//!
//! The file is created with mode 0600. One whose permissions give group or others any
//! access is still used, as Pi uses it, but [`AuthStore::load_or_warn`] says so: the
//! secrets in it are readable by other users until it is `chmod 600`.

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;

use serde_json::Map;
use serde_json::Value;

use super::error::parse_json;
use super::error::read_optional;
use super::error::write_atomic;
use super::error::ConfigError;
use super::error::ConfigResult;
use crate::llm::models_json::resolve_config_value;
use crate::llm::models_json::ModelRegistry;

/// One stored credential.
#[derive(Debug, Clone, PartialEq)]
pub enum Credential {
    /// An API key.
    ApiKey {
        /// The key as written (`None` when only `env` is given).
        key: Option<String>,
        /// Provider-specific environment values, consulted before the process environment.
        env: BTreeMap<String, String>,
    },
    /// OAuth tokens from `/login`.
    OAuth {
        /// The access token.
        access: String,
        /// The refresh token.
        refresh: String,
        /// Expiry, epoch milliseconds.
        expires: f64,
    },
}

/// `auth.json`, loaded.
#[derive(Debug, Clone)]
pub struct AuthStore {
    path: PathBuf,
    data: Map<String, Value>,
}

impl AuthStore {
    /// Loads `<agent dir>/auth.json` (empty when missing).
    pub fn load(agent_dir: &Path) -> ConfigResult<AuthStore> {
        AuthStore::open(&agent_dir.join("auth.json"))
    }

    /// Loads, or on any problem returns an empty store and the problem as a warning line
    /// (what startup wants: a bad auth.json must not stop Pi, but must be said).
    pub fn load_or_warn(agent_dir: &Path, warnings: &mut Vec<String>) -> AuthStore {
        warnings.extend(permission_warning(&agent_dir.join("auth.json")));
        AuthStore::load(agent_dir).unwrap_or_else(|e| {
            warnings.push(e.to_string());
            AuthStore {
                path: agent_dir.join("auth.json"),
                data: Map::new(),
            }
        })
    }

    /// Loads an auth file at an explicit path.
    pub fn open(path: &Path) -> ConfigResult<AuthStore> {
        let data = match read_optional(path)? {
            None => Map::new(),
            Some(text) if text.trim().is_empty() => Map::new(),
            Some(text) => match parse_json(&text, path)? {
                Value::Object(map) => map,
                _ => {
                    return Err(ConfigError::Invalid {
                        path: path.to_path_buf(),
                        message: "expected an object".into(),
                    })
                }
            },
        };
        for (provider, value) in &data {
            if parse_credential(value).is_none() {
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    message: format!("invalid credential for provider \"{provider}\""),
                });
            }
        }
        Ok(AuthStore {
            path: path.to_path_buf(),
            data,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Providers with a stored credential, in file order.
    pub fn providers(&self) -> Vec<&str> {
        self.data.keys().map(String::as_str).collect()
    }

    /// The stored credential of `provider`.
    pub fn get(&self, provider: &str) -> Option<Credential> {
        parse_credential(self.data.get(provider)?)
    }

    /// The usable key: an API key resolved through its `env` and `env_lookup`, or an OAuth
    /// access token (refreshing expired tokens is the provider's job, not done here).
    pub fn api_key(
        &self,
        provider: &str,
        env_lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Option<String> {
        match self.get(provider)? {
            Credential::ApiKey { key, env } => {
                let lookup = |name: &str| {
                    env.get(name)
                        .filter(|v| !v.is_empty())
                        .cloned()
                        .or_else(|| env_lookup(name))
                };
                resolve_config_value(&key?, &lookup).filter(|k| !k.is_empty())
            }
            Credential::OAuth { access, .. } => Some(access).filter(|a| !a.is_empty()),
        }
    }

    /// Stores an API key for `provider` and writes the file (mode 0600, atomically).
    pub fn set_api_key(&mut self, provider: &str, key: &str) -> ConfigResult<()> {
        let value = serde_json::json!({"type": "api_key", "key": key});
        self.write_entry(provider, Some(value))
    }

    /// Stores a raw credential object (e.g. OAuth tokens) for `provider`.
    pub fn set(&mut self, provider: &str, credential: Value) -> ConfigResult<()> {
        if parse_credential(&credential).is_none() {
            return Err(ConfigError::Invalid {
                path: self.path.clone(),
                message: format!("invalid credential for provider \"{provider}\""),
            });
        }
        self.write_entry(provider, Some(credential))
    }

    /// Removes `provider`'s credential (`/logout`).
    pub fn remove(&mut self, provider: &str) -> ConfigResult<()> {
        self.write_entry(provider, None)
    }

    fn write_entry(&mut self, provider: &str, value: Option<Value>) -> ConfigResult<()> {
        // Re-read so a login in another Pi process meanwhile is kept.
        let mut current = match AuthStore::open(&self.path) {
            Ok(store) => store.data,
            Err(ConfigError::Parse { .. }) => {
                return Err(ConfigError::Invalid {
                    path: self.path.clone(),
                    message: "not rewritten: fix the file first".into(),
                })
            }
            Err(e) => return Err(e),
        };
        match value {
            Some(v) => {
                current.insert(provider.to_string(), v);
            }
            None => {
                current.shift_remove(provider);
            }
        }
        let text =
            serde_json::to_string_pretty(&Value::Object(current.clone())).unwrap_or_default();
        if let Some(dir) = self.path.parent() {
            create_private_dir(dir).map_err(|source| ConfigError::Write {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        write_atomic(&self.path, text.as_bytes(), Some(0o600))?;
        self.data = current;
        Ok(())
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.exists() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// A warning when `path` gives group or others any access (`None` when it is private or
/// missing).
#[cfg(unix)]
fn permission_warning(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| {
        format!(
            "{} is readable by other users (mode {mode:o}); it is used, but run `chmod 600 {}`",
            path.display(),
            path.display()
        )
    })
}

#[cfg(not(unix))]
fn permission_warning(_path: &Path) -> Option<String> {
    None
}

fn parse_credential(value: &Value) -> Option<Credential> {
    let obj = value.as_object()?;
    match obj.get("type")?.as_str()? {
        "api_key" => {
            let key = match obj.get("key") {
                None => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => return None,
            };
            let mut env = BTreeMap::new();
            match obj.get("env") {
                None => {}
                Some(Value::Object(map)) => {
                    for (k, v) in map {
                        env.insert(k.clone(), v.as_str()?.to_string());
                    }
                }
                Some(_) => return None,
            }
            Some(Credential::ApiKey { key, env })
        }
        "oauth" => Some(Credential::OAuth {
            access: obj.get("access")?.as_str()?.to_string(),
            refresh: obj.get("refresh")?.as_str()?.to_string(),
            expires: obj.get("expires")?.as_f64().filter(|f| f.is_finite())?,
        }),
        _ => None,
    }
}

/// The environment variables that hold `provider`'s API key, in lookup order (Pi's
/// `env-api-keys`). Unknown providers have none.
pub fn api_key_env_vars(provider: &str) -> &'static [&'static str] {
    match provider {
        "github-copilot" => &["COPILOT_GITHUB_TOKEN"],
        // ANTHROPIC_AUTH_TOKEN is a bearer token for a different header, never an API key.
        "anthropic" => &["ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"],
        "ant-ling" => &["ANT_LING_API_KEY"],
        "qwen-token-plan" => &["QWEN_TOKEN_PLAN_TEAM_API_KEY", "QWEN_TOKEN_PLAN_API_KEY"],
        "qwen-token-plan-cn" => &[
            "QWEN_TOKEN_PLAN_TEAM_CN_API_KEY",
            "QWEN_TOKEN_PLAN_CN_API_KEY",
        ],
        "qwen-token-plan-individual" => &[
            "QWEN_TOKEN_PLAN_INDIVIDUAL_API_KEY",
            "QWEN_TOKEN_PLAN_API_KEY",
        ],
        "qwen-token-plan-individual-cn" => &[
            "QWEN_TOKEN_PLAN_INDIVIDUAL_CN_API_KEY",
            "QWEN_TOKEN_PLAN_CN_API_KEY",
        ],
        "openai" => &["OPENAI_API_KEY"],
        "azure" | "azure-openai-responses" => &["AZURE_OPENAI_API_KEY"],
        "nvidia" => &["NVIDIA_API_KEY"],
        "deepseek" => &["DEEPSEEK_API_KEY"],
        "google" => &["GEMINI_API_KEY"],
        "google-vertex" => &["GOOGLE_CLOUD_API_KEY"],
        "groq" => &["GROQ_API_KEY"],
        "cerebras" => &["CEREBRAS_API_KEY"],
        "xai" => &["XAI_API_KEY"],
        "typesafe" => &["TYPESAFE_API_KEY"],
        "radius" => &["RADIUS_API_KEY"],
        "openrouter" => &["OPENROUTER_API_KEY"],
        "vercel-ai-gateway" => &["AI_GATEWAY_API_KEY"],
        "zai" => &["ZAI_API_KEY"],
        "zai-coding-cn" => &["ZAI_CODING_CN_API_KEY"],
        "mistral" => &["MISTRAL_API_KEY"],
        "minimax" => &["MINIMAX_API_KEY"],
        "minimax-cn" => &["MINIMAX_CN_API_KEY"],
        "moonshotai" | "moonshotai-cn" => &["MOONSHOT_API_KEY"],
        "huggingface" => &["HF_TOKEN"],
        "fireworks" => &["FIREWORKS_API_KEY"],
        "together" => &["TOGETHER_API_KEY"],
        "baseten" => &["BASETEN_API_KEY"],
        "opencode" | "opencode-go" => &["OPENCODE_API_KEY"],
        "kimi-coding" => &["KIMI_API_KEY"],
        "meta" => &["META_API_KEY"],
        "cloudflare-workers-ai" | "cloudflare-ai-gateway" => &["CLOUDFLARE_API_KEY"],
        "xiaomi" => &["XIAOMI_API_KEY"],
        "xiaomi-token-plan-cn" => &["XIAOMI_TOKEN_PLAN_CN_API_KEY"],
        "xiaomi-token-plan-ams" => &["XIAOMI_TOKEN_PLAN_AMS_API_KEY"],
        "xiaomi-token-plan-sgp" => &["XIAOMI_TOKEN_PLAN_SGP_API_KEY"],
        "amazon-bedrock" => &["AWS_BEARER_TOKEN_BEDROCK"],
        _ => &[],
    }
}

/// `provider`'s key from the environment: the first set variable of
/// [`api_key_env_vars`]. For Amazon Bedrock any AWS credential source counts, and the
/// placeholder `<authenticated>` is returned, as Pi does.
pub fn env_api_key(provider: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let get = |name: &str| env(name).filter(|v| !v.is_empty());
    if let Some(key) = api_key_env_vars(provider).iter().find_map(|v| get(v)) {
        return Some(key);
    }
    if provider == "amazon-bedrock"
        && (get("AWS_PROFILE").is_some()
            || (get("AWS_ACCESS_KEY_ID").is_some() && get("AWS_SECRET_ACCESS_KEY").is_some())
            || get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").is_some()
            || get("AWS_CONTAINER_CREDENTIALS_FULL_URI").is_some()
            || get("AWS_WEB_IDENTITY_TOKEN_FILE").is_some())
    {
        return Some("<authenticated>".into());
    }
    None
}

/// The API key for `provider`, by precedence (providers.md): the CLI `--api-key`, then
/// `auth.json`, then the provider's environment variable, then the `apiKey` of a models.json
/// provider. `None` when no source has one.
pub fn resolve_api_key(
    provider: &str,
    cli_api_key: Option<&str>,
    auth: Option<&AuthStore>,
    registry: &ModelRegistry,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    if let Some(key) = cli_api_key.filter(|k| !k.is_empty()) {
        return Some(key.to_string());
    }
    if let Some(key) = auth.and_then(|a| a.api_key(provider, env)) {
        return Some(key);
    }
    if let Some(key) = env_api_key(provider, env) {
        return Some(key);
    }
    registry.resolve_api_key_with(provider, env)
}

/// Whether `provider` has credentials from any source, without running `!command` keys
/// (Pi's `hasConfiguredAuth`: a cheap check for choosing models, not a key lookup).
pub fn has_configured_auth(
    provider: &str,
    auth: Option<&AuthStore>,
    registry: &ModelRegistry,
    env: &dyn Fn(&str) -> Option<String>,
) -> bool {
    if auth.is_some_and(|a| a.get(provider).is_some()) || env_api_key(provider, env).is_some() {
        return true;
    }
    let Some(raw) = registry
        .providers
        .get(provider)
        .and_then(|c| c.api_key.as_deref())
    else {
        return false;
    };
    // A command counts as configured; a template only when its variables are set.
    raw.starts_with('!') || resolve_config_value(raw, env).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[cfg(unix)]
    #[test]
    fn created_private_and_loose_files_used_with_a_warning() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let mut store = AuthStore::load(&agent).unwrap();
        store.set_api_key("openai", "sk-1").unwrap();
        let path = agent.join("auth.json");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&agent), 0o700);
        assert_eq!(
            AuthStore::load(&agent)
                .unwrap()
                .api_key("openai", &|_| None)
                .as_deref(),
            Some("sk-1")
        );

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        // Pi uses a loose file; we do too, and say how to fix it.
        let mut warnings = Vec::new();
        let store = AuthStore::load_or_warn(&agent, &mut warnings);
        assert_eq!(store.api_key("openai", &|_| None).as_deref(), Some("sk-1"));
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("chmod 600"), "{warnings:?}");
        assert!(warnings[0].contains("644"), "{warnings:?}");
        // A rewrite keeps 0600 even over a loosened file once it is fixed.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut store = AuthStore::load(&agent).unwrap();
        store.remove("openai").unwrap();
        assert_eq!(mode(&path), 0o600);
        assert!(AuthStore::load(&agent).unwrap().providers().is_empty());
    }

    #[test]
    fn credentials_validate_and_resolve() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("auth.json");
        let write = |text: &str| {
            std::fs::write(&path, text).unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
            }
        };
        write(
            r#"{"cf":{"type":"api_key","key":"$CF_KEY","env":{"CF_KEY":"from-cred-env"}},
               "x":{"type":"api_key","key":"${X_KEY}-suffix"},
               "o":{"type":"oauth","access":"acc","refresh":"ref","expires":1}}"#,
        );
        let store = AuthStore::open(&path).unwrap();
        let env = |k: &str| (k == "X_KEY" || k == "CF_KEY").then(|| "proc".to_string());
        assert_eq!(store.api_key("cf", &env).as_deref(), Some("from-cred-env"));
        assert_eq!(store.api_key("x", &env).as_deref(), Some("proc-suffix"));
        assert_eq!(store.api_key("x", &|_| None), None);
        assert_eq!(store.api_key("o", &env).as_deref(), Some("acc"));
        write(r#"{"bad":{"type":"api_key","key":5}}"#);
        let err = AuthStore::open(&path).unwrap_err().to_string();
        assert!(
            err.contains("invalid credential for provider \"bad\""),
            "{err}"
        );
        write("{oops");
        assert!(matches!(
            AuthStore::open(&path),
            Err(ConfigError::Parse { line: 1, .. })
        ));
    }

    #[test]
    fn api_key_resolution_order() {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let mut store = AuthStore::load(&agent).unwrap();
        let mut registry = ModelRegistry::builtin();
        registry.providers.insert(
            "anthropic".into(),
            crate::llm::models_json::ProviderConfig {
                api_key: Some("models-json-key".into()),
                ..Default::default()
            },
        );
        let env_with = |k: &str| (k == "ANTHROPIC_API_KEY").then(|| "env-key".to_string());
        let no_env = |_: &str| None;
        let resolve =
            |cli: Option<&str>, store: Option<&AuthStore>, env: &dyn Fn(&str) -> Option<String>| {
                resolve_api_key("anthropic", cli, store, &registry, env)
            };
        assert_eq!(
            resolve(None, None, &no_env).as_deref(),
            Some("models-json-key")
        );
        assert_eq!(resolve(None, None, &env_with).as_deref(), Some("env-key"));
        store.set_api_key("anthropic", "auth-key").unwrap();
        assert_eq!(
            resolve(None, Some(&store), &env_with).as_deref(),
            Some("auth-key")
        );
        assert_eq!(
            resolve(Some("cli-key"), Some(&store), &env_with).as_deref(),
            Some("cli-key")
        );
        // ANTHROPIC_OAUTH_TOKEN comes before ANTHROPIC_API_KEY; ANTHROPIC_AUTH_TOKEN never counts.
        let env = |k: &str| match k {
            "ANTHROPIC_OAUTH_TOKEN" => Some("oauth".to_string()),
            "ANTHROPIC_API_KEY" => Some("key".to_string()),
            _ => None,
        };
        assert_eq!(env_api_key("anthropic", &env).as_deref(), Some("oauth"));
        let env = |k: &str| (k == "ANTHROPIC_AUTH_TOKEN").then(|| "t".to_string());
        assert_eq!(env_api_key("anthropic", &env), None);
        let env = |k: &str| (k == "GEMINI_API_KEY").then(|| "g".to_string());
        assert_eq!(env_api_key("google", &env).as_deref(), Some("g"));
        assert_eq!(
            resolve_api_key("unknown", None, None, &registry, &env),
            None
        );
    }
}
