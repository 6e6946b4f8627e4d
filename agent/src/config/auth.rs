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
use crate::llm::catalog::builtin_provider;
use crate::llm::llama_cpp;
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

    /// The stored credential object of `provider` as written (OAuth logins keep extra
    /// fields such as `accountId` there).
    pub fn raw(&self, provider: &str) -> Option<&Value> {
        self.data.get(provider)
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

/// The provider id a legacy alias stands for (`azure-openai-responses` was renamed `azure`).
fn canonical_provider(provider: &str) -> &str {
    match provider {
        "azure-openai-responses" => "azure",
        other => other,
    }
}

/// The environment variables that hold `provider`'s credential, in lookup order (Pi's
/// `env-api-keys`, carried in the built-in catalog). Unknown providers have none.
pub fn api_key_env_vars(provider: &str) -> &'static [String] {
    builtin_provider(canonical_provider(provider))
        .map(|p| p.env_vars.as_slice())
        .unwrap_or(&[])
}

/// Variables that are bearer tokens for another header, never API keys: they make a provider
/// usable but are not returned as its key.
const BEARER_ONLY_ENV: [&str; 1] = ["ANTHROPIC_AUTH_TOKEN"];

/// Whether Vertex AI has Application Default Credentials: a credentials file
/// (`GOOGLE_APPLICATION_CREDENTIALS`, else gcloud's default path) plus a project and location.
fn has_vertex_adc(get: &dyn Fn(&str) -> Option<String>) -> bool {
    let credentials = match get("GOOGLE_APPLICATION_CREDENTIALS") {
        Some(path) => std::path::PathBuf::from(path),
        None => match get("HOME") {
            Some(home) => {
                Path::new(&home).join(".config/gcloud/application_default_credentials.json")
            }
            None => return false,
        },
    };
    credentials.is_file()
        && (get("GOOGLE_CLOUD_PROJECT").is_some() || get("GCLOUD_PROJECT").is_some())
        && get("GOOGLE_CLOUD_LOCATION").is_some()
}

/// Whether any AWS credential source Bedrock accepts is configured.
fn has_aws_credentials(get: &dyn Fn(&str) -> Option<String>) -> bool {
    get("AWS_PROFILE").is_some()
        || (get("AWS_ACCESS_KEY_ID").is_some() && get("AWS_SECRET_ACCESS_KEY").is_some())
        || get("AWS_BEARER_TOKEN_BEDROCK").is_some()
        || get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI").is_some()
        || get("AWS_CONTAINER_CREDENTIALS_FULL_URI").is_some()
        || get("AWS_WEB_IDENTITY_TOKEN_FILE").is_some()
}

/// `provider`'s key from the environment: the first set variable of [`api_key_env_vars`]
/// that is an API key. Amazon Bedrock's bearer token is returned as its key; any other AWS
/// credential source, and Vertex AI's Application Default Credentials, give the placeholder
/// `<authenticated>`, as in Pi.
pub fn env_api_key(provider: &str, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let get = |name: &str| env(name).filter(|v| !v.is_empty());
    if let Some(key) = api_key_env_vars(provider)
        .iter()
        .filter(|v| !BEARER_ONLY_ENV.contains(&v.as_str()))
        .find_map(|v| get(v))
    {
        return Some(key);
    }
    match canonical_provider(provider) {
        "amazon-bedrock" => get("AWS_BEARER_TOKEN_BEDROCK")
            .or_else(|| has_aws_credentials(&get).then(|| "<authenticated>".into())),
        "google-vertex" => has_vertex_adc(&get).then(|| "<authenticated>".into()),
        _ => None,
    }
}

/// Whether the environment alone makes `provider` usable: a credential variable (bearer
/// tokens included) or an ambient cloud credential, plus every variable it requires.
fn env_configures(provider: &str, env: &dyn Fn(&str) -> Option<String>) -> bool {
    let get = |name: &str| env(name).filter(|v| !v.is_empty());
    api_key_env_vars(provider).iter().any(|v| get(v).is_some())
        || env_api_key(provider, env).is_some()
}

/// Variables `provider` needs besides its key (Cloudflare's account and gateway ids), all
/// present in the stored credential's `env` or the process environment.
fn required_env_present(
    provider: &str,
    credential_env: Option<&BTreeMap<String, String>>,
    env: &dyn Fn(&str) -> Option<String>,
) -> bool {
    let Some(info) = builtin_provider(canonical_provider(provider)) else {
        return true;
    };
    info.required_env.iter().all(|name| {
        credential_env.is_some_and(|e| e.get(name).is_some_and(|v| !v.is_empty()))
            || env(name).is_some_and(|v| !v.is_empty())
    })
}

/// The API key for `provider`, by precedence (providers.md): the CLI `--api-key`, then
/// `auth.json`, then the provider's environment variable, then the `apiKey` of a models.json
/// provider. `None` when no source has one, or when a built-in provider lacks a variable it
/// requires besides the key.
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
    // The llama.cpp router is configured by its URL; its key is optional (Pi sends `local`).
    if provider == llama_cpp::PROVIDER_ID {
        if let Some(conn) = llama_cpp::connection(auth, env) {
            return Some(conn.key());
        }
    }
    // A built-in provider that needs more than its key (Cloudflare's account id) cannot use
    // a stored or environment key without it, as in Pi.
    if let Some(key) = auth.and_then(|a| a.api_key(provider, env)) {
        let credential_env = match auth.and_then(|a| a.get(provider)) {
            Some(Credential::ApiKey { env, .. }) => Some(env),
            _ => None,
        };
        if required_env_present(provider, credential_env.as_ref(), env) {
            return Some(key);
        }
    }
    if let Some(key) = env_api_key(provider, env) {
        if required_env_present(provider, None, env) {
            return Some(key);
        }
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
    if provider == llama_cpp::PROVIDER_ID && llama_cpp::connection(auth, env).is_some() {
        return true;
    }
    // A provider object's own `auth` says whether it is configured (its `apiKey.check`,
    // else its resolution, as Pi's `checkProviderAuth`); models.json's `apiKey` above it
    // still counts.
    let owned = crate::llm::provider_auth::check_blocking(provider);
    if matches!(owned, Some(Ok(true))) {
        return true;
    }
    let stored = auth
        .and_then(|a| a.get(provider))
        .filter(|_| owned.is_none());
    if owned.is_none() && (stored.is_some() || env_configures(provider, env)) {
        let credential_env = match &stored {
            Some(Credential::ApiKey { env, .. }) => Some(env),
            _ => None,
        };
        if required_env_present(provider, credential_env, env) {
            return true;
        }
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

    #[test]
    fn configured_auth_follows_pi_provider_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let registry = ModelRegistry::builtin();
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let has =
            |provider: &str, store: Option<&AuthStore>, env: &dyn Fn(&str) -> Option<String>| {
                has_configured_auth(provider, store, &registry, env)
            };
        // Every catalog variable counts, also ones that are not the first in lookup order.
        assert!(has(
            "qwen-token-plan",
            None,
            &vars(&[("QWEN_TOKEN_PLAN_API_KEY", "k")])
        ));
        assert!(has("mistral", None, &vars(&[("MISTRAL_API_KEY", "k")])));
        assert!(!has("mistral", None, &vars(&[("MISTRAL_API_KEY", "")])));
        // A bearer token makes Anthropic usable although it is no API key.
        let bearer = vars(&[("ANTHROPIC_AUTH_TOKEN", "t")]);
        assert!(has("anthropic", None, &bearer));
        assert_eq!(env_api_key("anthropic", &bearer), None);
        // Cloudflare needs its account (and gateway) ids next to the key.
        let key_only = vars(&[("CLOUDFLARE_API_KEY", "k")]);
        assert!(!has("cloudflare-workers-ai", None, &key_only));
        let with_account = vars(&[("CLOUDFLARE_API_KEY", "k"), ("CLOUDFLARE_ACCOUNT_ID", "a")]);
        assert!(has("cloudflare-workers-ai", None, &with_account));
        assert!(!has("cloudflare-ai-gateway", None, &with_account));
        // ... which a stored credential's `env` may supply.
        let mut store = AuthStore::load(&agent).unwrap();
        store
            .set(
                "cloudflare-ai-gateway",
                serde_json::json!({"type": "api_key", "key": "k",
                    "env": {"CLOUDFLARE_ACCOUNT_ID": "a", "CLOUDFLARE_GATEWAY_ID": "g"}}),
            )
            .unwrap();
        assert!(has("cloudflare-ai-gateway", Some(&store), &|_| None));
        assert_eq!(
            resolve_api_key(
                "cloudflare-ai-gateway",
                None,
                Some(&store),
                &registry,
                &|_| None
            )
            .as_deref(),
            Some("k")
        );
        assert_eq!(
            resolve_api_key("cloudflare-workers-ai", None, None, &registry, &key_only),
            None
        );
        // Bedrock: IAM keys only as a pair; its bearer token is its key.
        assert!(!has(
            "amazon-bedrock",
            None,
            &vars(&[("AWS_ACCESS_KEY_ID", "a")])
        ));
        assert!(has(
            "amazon-bedrock",
            None,
            &vars(&[("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "s")])
        ));
        assert_eq!(
            env_api_key(
                "amazon-bedrock",
                &vars(&[("AWS_BEARER_TOKEN_BEDROCK", "b")])
            )
            .as_deref(),
            Some("b")
        );
        // Vertex ADC needs the credentials file plus project and location.
        let adc = tmp.path().join("adc.json");
        std::fs::write(&adc, "{}").unwrap();
        let adc_path: &'static str = Box::leak(adc.display().to_string().into_boxed_str());
        let project_only = vars(&[
            ("GOOGLE_CLOUD_PROJECT", "p"),
            ("GOOGLE_CLOUD_LOCATION", "l"),
        ]);
        assert!(!has("google-vertex", None, &|k| {
            (k == "GOOGLE_APPLICATION_CREDENTIALS")
                .then(|| "/nonexistent/adc.json".to_string())
                .or_else(|| project_only(k))
        }));
        assert!(has("google-vertex", None, &|k| {
            (k == "GOOGLE_APPLICATION_CREDENTIALS")
                .then(|| adc_path.to_string())
                .or_else(|| project_only(k))
        }));
        // The legacy Azure id reads Azure's variable.
        assert_eq!(
            env_api_key(
                "azure-openai-responses",
                &vars(&[("AZURE_OPENAI_API_KEY", "z")])
            )
            .as_deref(),
            Some("z")
        );
    }
}
