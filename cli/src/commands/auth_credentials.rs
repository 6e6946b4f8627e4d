//! `pi auth check`, `pi auth print-api-key` and `pi auth print-bearer-token`: the credential
//! a provider would be called with, for scripts and other clients (Pi 1.6.0's
//! `auth-command` / `auth-check` / `credential-print`). The two print commands, and `check
//! --credentials`, are the only commands that write a secret to stdout, because that is
//! what they are for.
//!
//! Output and exit codes are Pi's: `check` prints `ready` / `not_ready` / `invalid` (or
//! `--json`) and exits 0 / 1 / 2; the print commands print the value and exit 0, or `Error:
//! …` on stderr and 1.

use std::path::{Path, PathBuf};

use pi_agent::config::{AuthStore, CliModelRequest, Credential};
use pi_agent::llm::catalog::builtin_provider;
use pi_agent::llm::models_json::{load_models, ModelRegistry};
use pi_agent::llm::oauth::{self, RefreshOutcome};
use serde_json::{json, Value};

/// print-bearer-token wants at least this much of the token left unless `--min-expiry`
/// says otherwise (Pi's default, 30 minutes).
const DEFAULT_BEARER_MIN_EXPIRY_MS: f64 = 30.0 * 60_000.0;

/// Which command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Check,
    ApiKey,
    BearerToken,
}

impl Kind {
    /// The command for a `pi auth` word.
    pub fn from_word(word: &str) -> Option<Kind> {
        match word {
            "check" => Some(Kind::Check),
            "print-api-key" => Some(Kind::ApiKey),
            "print-bearer-token" => Some(Kind::BearerToken),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Check => "auth check",
            Kind::ApiKey => "auth print-api-key",
            Kind::BearerToken => "auth print-bearer-token",
        }
    }

    fn usage(self) -> &'static str {
        match self {
            Kind::Check => {
                "pi auth check --provider <provider> [--json] [--credentials] [--no-refresh]"
            }
            Kind::ApiKey => "pi auth print-api-key --provider <provider> [--model <model>]",
            Kind::BearerToken => {
                "pi auth print-bearer-token --provider <provider> [--model <model>] \
                 [--min-expiry <duration>]"
            }
        }
    }

    /// The exit status of an error: `check` reserves 1 for "not ready".
    fn error_status(self) -> i32 {
        if self == Kind::Check {
            2
        } else {
            1
        }
    }
}

/// The parsed command line.
#[derive(Debug, Default)]
struct Request {
    provider: Option<String>,
    model: Option<String>,
    json: bool,
    credentials: bool,
    no_refresh: bool,
    min_expiry_ms: Option<f64>,
}

/// How parsing failed; the variants print differently, as in Pi.
enum ParseError {
    /// `Error: …`, exit 1.
    Usage(String),
    /// An option no command knows: Pi's two-line hint, exit 1.
    UnknownOption(String),
    /// Valid options that do not make a request (no provider, extra arguments): `Error: …`
    /// with the command's error status.
    Invalid(String),
}

/// Runs `pi auth <word> <args>`; returns the exit status.
pub fn run(kind: Kind, args: &[String]) -> i32 {
    let request = match parse(kind, args) {
        Ok(r) => r,
        Err(ParseError::Usage(message)) => {
            eprintln!("Error: {message}");
            return 1;
        }
        Err(ParseError::UnknownOption(option)) => {
            eprintln!("Unknown option --{option} for \"{}\".", kind.name());
            eprintln!("Use \"pi --help\" or \"{}\".", kind.usage());
            return 1;
        }
        Err(ParseError::Invalid(message)) => {
            eprintln!("Error: {message}");
            return kind.error_status();
        }
    };
    let agent_dir = pi_agent::config::agent_dir(
        &|k| std::env::var(k).ok(),
        pi_agent::config::home().as_deref(),
    );
    if kind == Kind::Check {
        let (report, credential) = check(&request, &agent_dir);
        let status = report["status"].as_str().unwrap_or("invalid").to_string();
        let output = if request.json {
            let mut report = report;
            if let Some(c) = &credential {
                report["credentials"] = json!(c);
            }
            report.to_string()
        } else {
            credential.unwrap_or_else(|| status.clone())
        };
        println!("{output}");
        return match status.as_str() {
            "ready" => 0,
            "not_ready" => 1,
            _ => 2,
        };
    }
    match resolve_for_print(kind, &request, &agent_dir) {
        Ok(value) => {
            println!("{value}");
            0
        }
        Err(message) => {
            eprintln!("Error: {message}");
            1
        }
    }
}

fn parse(kind: Kind, args: &[String]) -> Result<Request, ParseError> {
    let mut request = Request::default();
    let mut extra = false;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| iter.next().cloned())
                .ok_or_else(|| ParseError::Invalid(format!("{name} requires a value")))
        };
        match flag {
            "--min-expiry" => {
                if kind != Kind::BearerToken {
                    return Err(ParseError::Usage(
                        "--min-expiry is only supported by print-bearer-token".into(),
                    ));
                }
                let text = value("--min-expiry").unwrap_or_default();
                request.min_expiry_ms = Some(parse_duration_ms(&text).ok_or_else(|| {
                    ParseError::Usage("--min-expiry must use a duration such as 30m or 1h".into())
                })?);
            }
            "--json" | "--credentials" | "--no-refresh" => {
                if kind != Kind::Check {
                    return Err(ParseError::Usage(format!(
                        "{flag} is only supported by auth check"
                    )));
                }
                match flag {
                    "--json" => request.json = true,
                    "--credentials" => request.credentials = true,
                    _ => request.no_refresh = true,
                }
            }
            "--provider" => request.provider = Some(value("--provider")?),
            "--model" => request.model = Some(value("--model")?),
            // A main option, valid but not here.
            "--api-key" => {
                value("--api-key")?;
                extra = true;
            }
            f if f.starts_with("--") => {
                return Err(ParseError::UnknownOption(f.trim_start_matches('-').into()))
            }
            _ => extra = true,
        }
    }
    if extra {
        return Err(ParseError::Invalid(
            "Auth commands only accept --provider and --model".into(),
        ));
    }
    let trimmed = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    request.provider = trimmed(&request.provider);
    request.model = trimmed(&request.model);
    if request.provider.is_none() && request.model.is_none() {
        return Err(ParseError::Invalid(if kind == Kind::Check {
            "Auth checks require --provider <provider> or --model <model>".into()
        } else {
            "Credential printing requires --provider <provider> or --model <model>".into()
        }));
    }
    Ok(request)
}

/// `30m`, `1h`, `45s`, `500ms` in milliseconds.
fn parse_duration_ms(text: &str) -> Option<f64> {
    let digits = text.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let amount: f64 = text[..digits].parse().ok()?;
    let unit = match text[digits..].to_ascii_lowercase().as_str() {
        "ms" => 1.0,
        "s" => 1_000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        _ => return None,
    };
    Some(amount * unit)
}

/// What the commands consult: the stored credentials and the known providers and models.
struct Sources {
    agent_dir: PathBuf,
    auth: AuthStore,
    registry: ModelRegistry,
}

impl Sources {
    fn load(agent_dir: &Path) -> Result<Sources, String> {
        let auth = AuthStore::load(agent_dir).map_err(|e| e.to_string())?;
        let registry = load_models(&agent_dir.join("models.json")).map_err(|e| e.to_string())?;
        Ok(Sources {
            agent_dir: agent_dir.to_path_buf(),
            auth,
            registry,
        })
    }

    /// The known provider spelled `id` (any case), with its canonical id.
    fn provider(&self, id: &str) -> Option<String> {
        if let Some(m) = self
            .registry
            .models
            .iter()
            .find(|m| m.provider.eq_ignore_ascii_case(id))
        {
            return Some(m.provider.clone());
        }
        if self.registry.providers.contains_key(id) || builtin_provider(id).is_some() {
            return Some(id.to_string());
        }
        None
    }

    fn is_oauth(&self, provider: &str) -> bool {
        matches!(self.auth.get(provider), Some(Credential::OAuth { .. }))
    }

    /// Whether any source configures `provider`.
    fn configured(&self, provider: &str) -> bool {
        pi_agent::config::has_configured_auth(provider, Some(&self.auth), &self.registry, &env)
    }

    /// The API key requests to `provider` would carry (not an OAuth token).
    fn api_key(&self, provider: &str) -> Option<String> {
        if self.is_oauth(provider) {
            return None;
        }
        pi_agent::config::resolve_api_key(provider, None, Some(&self.auth), &self.registry, &env)
    }

    /// `provider`'s OAuth access token with at least `min_validity_ms` left, refreshed (and
    /// stored) when it has less.
    fn bearer(&self, provider: &str, min_validity_ms: f64) -> Result<Option<String>, String> {
        match oauth::refresh_if_expiring_within(&self.agent_dir, provider, min_validity_ms)? {
            RefreshOutcome::NotStored => Ok(None),
            RefreshOutcome::Valid(t) | RefreshOutcome::Refreshed(t) => {
                Ok(Some(t).filter(|t| !t.is_empty()))
            }
        }
    }

    /// The model `text` names within `provider` (a custom id is accepted there, as a run
    /// accepts it with `--provider`).
    fn resolves(&self, provider: Option<&str>, text: &str) -> Result<String, String> {
        let resolution = pi_agent::config::resolve_cli_model(
            &CliModelRequest {
                provider,
                model: Some(text),
                thinking: None,
                inline_api_key: false,
            },
            &self.registry.models,
            &|p| self.configured(p),
        );
        match (resolution.model, resolution.error) {
            (Some(model), None) => Ok(model.provider),
            (_, error) => {
                Err(error.unwrap_or_else(|| format!("Unable to resolve model \"{text}\"")))
            }
        }
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// `pi auth check`: the JSON report and, with `--credentials`, the credential.
fn check(request: &Request, agent_dir: &Path) -> (Value, Option<String>) {
    let named = request
        .provider
        .clone()
        .or_else(|| request.model.clone())
        .unwrap_or_default();
    let invalid = |provider: &str| json!({"status": "invalid", "provider": provider, "reason": "invalid_state"});
    let not_ready = |provider: &str, reason: &str| json!({"status": "not_ready", "provider": provider, "reason": reason});
    let Ok(sources) = Sources::load(agent_dir) else {
        return (invalid(&named), None);
    };
    let provider = match &request.model {
        Some(model) => match sources.resolves(request.provider.as_deref(), model) {
            Ok(p) => p,
            Err(_) => return (invalid(&named), None),
        },
        None => named.clone(),
    };
    let Some(provider) = sources.provider(&provider) else {
        return (not_ready(&provider, "provider_not_found"), None);
    };
    if !sources.configured(&provider) {
        return (not_ready(&provider, "credentials_not_configured"), None);
    }
    let oauth = sources.is_oauth(&provider);
    let refresh = !request.no_refresh;
    // With refresh (the default) the credential must be usable now: an expired login is
    // refreshed as a request would refresh it, and a refresh that fails makes it invalid.
    let credential = if oauth {
        if refresh {
            match sources.bearer(&provider, oauth::store::MIN_VALIDITY_MS) {
                Ok(token) => token,
                Err(_) => return (invalid(&provider), None),
            }
        } else {
            stored_access(&sources.auth, &provider)
        }
    } else {
        sources.api_key(&provider)
    };
    if refresh && credential.is_none() {
        return (not_ready(&provider, "credentials_not_configured"), None);
    }
    let ready = json!({
        "status": "ready",
        "provider": provider,
        "authType": if oauth { "oauth" } else { "api_key" },
    });
    if !request.credentials {
        return (ready, None);
    }
    match credential {
        Some(c) => (ready, Some(c)),
        None => (not_ready(&provider, "credential_not_available"), None),
    }
}

fn stored_access(auth: &AuthStore, provider: &str) -> Option<String> {
    match auth.get(provider)? {
        Credential::OAuth { access, .. } => Some(access).filter(|a| !a.is_empty()),
        Credential::ApiKey { .. } => None,
    }
}

/// The one credential `print-api-key` / `print-bearer-token` prints.
fn resolve_for_print(kind: Kind, request: &Request, agent_dir: &Path) -> Result<String, String> {
    let failed = |_| "Failed to resolve credential".to_string();
    let sources = Sources::load(agent_dir).map_err(failed)?;
    // The providers asked about: the one named, or every provider with a stored
    // credential that has the model.
    let candidates: Vec<String> = match &request.provider {
        Some(id) => {
            let provider = sources.provider(id).ok_or_else(|| {
                format!("Unknown provider \"{id}\". Use --list-models to see available providers.")
            })?;
            if let Some(model) = &request.model {
                sources.resolves(Some(&provider), model)?;
            }
            vec![provider]
        }
        None => {
            let model = request.model.as_deref().unwrap_or_default();
            let found: Vec<String> = sources
                .auth
                .providers()
                .into_iter()
                .filter_map(|p| sources.provider(p))
                .filter(|p| {
                    let exact = sources.registry.models.iter().any(|m| &m.provider == p);
                    exact && model_in_provider(&sources, p, model)
                })
                .collect();
            if found.is_empty() {
                return Err(format!(
                    "Model \"{model}\" not found. Use --list-models to see available models."
                ));
            }
            found
        }
    };
    let mut values: Vec<(String, String)> = Vec::new();
    for provider in &candidates {
        let oauth = sources.is_oauth(provider);
        let value = match kind {
            Kind::ApiKey if oauth => continue,
            Kind::BearerToken if !oauth => continue,
            Kind::BearerToken => sources
                .bearer(
                    provider,
                    request
                        .min_expiry_ms
                        .unwrap_or(DEFAULT_BEARER_MIN_EXPIRY_MS),
                )
                .map_err(failed)?,
            _ => sources.api_key(provider),
        };
        if let Some(v) = value {
            values.push((provider.clone(), v));
        }
    }
    match values.len() {
        1 => Ok(values.remove(0).1),
        0 => {
            let first = &candidates[0];
            let oauth = sources.is_oauth(first);
            Err(match kind {
                Kind::ApiKey if request.provider.is_some() && oauth => {
                    format!("Provider \"{first}\" is configured with OAuth, not an API key")
                }
                Kind::BearerToken if request.provider.is_some() && !oauth => {
                    format!("Provider \"{first}\" is not configured with an OAuth bearer token")
                }
                Kind::ApiKey => "No usable API key is configured".into(),
                _ => "No usable OAuth bearer token is configured".into(),
            })
        }
        _ => {
            let names: Vec<&str> = values.iter().map(|(p, _)| p.as_str()).collect();
            Err(format!(
                "Multiple configured providers matched ({}). Specify --provider.",
                names.join(", ")
            ))
        }
    }
}

/// Whether `text` names one of `provider`'s models (no custom ids here: without
/// `--provider` the model decides which provider is meant).
fn model_in_provider(sources: &Sources, provider: &str, text: &str) -> bool {
    let resolution = pi_agent::config::resolve_cli_model(
        &CliModelRequest {
            provider: Some(provider),
            model: Some(text),
            thinking: None,
            inline_api_key: false,
        },
        &sources.registry.models,
        &|_| true,
    );
    resolution.error.is_none() && resolution.warning.is_none() && resolution.model.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn durations_in_pi_units() {
        assert_eq!(parse_duration_ms("30m"), Some(1_800_000.0));
        assert_eq!(parse_duration_ms("1H"), Some(3_600_000.0));
        assert_eq!(parse_duration_ms("250ms"), Some(250.0));
        assert_eq!(parse_duration_ms("3x"), None);
        assert_eq!(parse_duration_ms("m"), None);
    }

    #[test]
    fn options_belong_to_their_command() {
        assert!(matches!(
            parse(
                Kind::Check,
                &args(&["--provider", "x", "--min-expiry", "1h"])
            ),
            Err(ParseError::Usage(_))
        ));
        assert!(matches!(
            parse(Kind::ApiKey, &args(&["--provider", "x", "--json"])),
            Err(ParseError::Usage(_))
        ));
        assert!(matches!(
            parse(Kind::Check, &args(&["--provider", "x", "--bogus"])),
            Err(ParseError::UnknownOption(o)) if o == "bogus"
        ));
        assert!(matches!(
            parse(Kind::ApiKey, &args(&["--provider", "x", "extra"])),
            Err(ParseError::Invalid(_))
        ));
        assert!(matches!(
            parse(Kind::Check, &args(&[])),
            Err(ParseError::Invalid(_))
        ));
        let r = parse(
            Kind::BearerToken,
            &args(&["--provider=xai", "--min-expiry", "2h"]),
        )
        .ok()
        .unwrap_or_default();
        assert_eq!(r.provider.as_deref(), Some("xai"));
        assert_eq!(r.min_expiry_ms, Some(7_200_000.0));
    }
}
