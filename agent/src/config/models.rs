//! Choosing the model from the command line and settings (Pi's `model-resolver`):
//! `--provider`, `--model` (`provider/id`, exact then fuzzy id/name match, `:thinking`
//! suffix), `--thinking`, `--models` scope patterns (globs allowed) and `--list-models`.
//!
//! Model lists are passed in (`&[Model]`, usually `ModelRegistry::models`), and "has usable
//! credentials" is a callback, so the rules are pure and testable without files.

use pi_formats::message::ThinkingLevel;

use super::settings::Settings;
use crate::collation::locale_compare;
use crate::llm::Model;

/// The thinking level when nothing else picks one.
pub const DEFAULT_THINKING_LEVEL: ThinkingLevel = ThinkingLevel::Medium;

/// The preferred model of each provider, used for a first run without settings and as the
/// template of a custom model id (Pi's `defaultModelPerProvider`, in its order).
const DEFAULT_MODEL_PER_PROVIDER: [(&str, &str); 42] = [
    ("amazon-bedrock", "us.anthropic.claude-opus-5-5"),
    ("ant-ling", "Ring-2.6-1T"),
    ("anthropic", "claude-opus-5-5"),
    ("openai", "gpt-6.2-sol"),
    ("azure", "gpt-6.2-sol"),
    ("openai-codex", "gpt-6.2-sol"),
    ("radius", "balanced"),
    ("nvidia", "nvidia/nemotron-3.5-super-vl-120b-a12b"),
    ("deepseek", "deepseek-v4-pro"),
    ("google", "gemini-4-argon"),
    ("google-vertex", "gemini-4-argon"),
    ("github-copilot", "gpt-6.1-sol"),
    ("openrouter", "moonshotai/kimi-k2.7-code"),
    ("vercel-ai-gateway", "zai/glm-5.3"),
    ("xai", "grok-4.7"),
    ("groq", "openai/gpt-oss-120b"),
    ("cerebras", "gpt-oss-120b"),
    ("zai", "glm-5.3"),
    ("zai-coding-cn", "glm-5.3"),
    ("mistral", "devstral-medium-latest"),
    ("minimax", "MiniMax-M3"),
    ("minimax-cn", "MiniMax-M3"),
    ("moonshotai", "kimi-k2.7-code"),
    ("moonshotai-cn", "kimi-k2.7-code"),
    ("huggingface", "moonshotai/Kimi-K2.7-Code"),
    ("fireworks", "accounts/fireworks/models/kimi-k3"),
    ("together", "moonshotai/Kimi-K3"),
    ("baseten", "zai-org/GLM-5.3"),
    ("opencode", "kimi-k2.7-code"),
    ("opencode-go", "kimi-k3.1-pro"),
    ("kimi-coding", "kimi-for-coding"),
    ("meta", "muse-spark-1.3"),
    ("cloudflare-workers-ai", "@cf/moonshotai/kimi-k2.7-code"),
    (
        "cloudflare-ai-gateway",
        "workers-ai/@cf/moonshotai/kimi-k2.7-code",
    ),
    ("qwen-token-plan", "qwen3.8-max"),
    ("qwen-token-plan-cn", "qwen3.8-max"),
    ("qwen-token-plan-individual", "qwen3.8-max"),
    ("qwen-token-plan-individual-cn", "qwen3.8-max"),
    ("xiaomi", "mimo-v2.6-pro"),
    ("xiaomi-token-plan-cn", "mimo-v2.6-pro"),
    ("xiaomi-token-plan-ams", "mimo-v2.6-pro"),
    ("xiaomi-token-plan-sgp", "mimo-v2.6-pro"),
];

/// The default model id of `provider`, if Pi names one.
pub fn default_model_for_provider(provider: &str) -> Option<&'static str> {
    DEFAULT_MODEL_PER_PROVIDER
        .iter()
        .find(|(p, _)| *p == provider)
        .map(|(_, id)| *id)
}

/// How a `:suffix` is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Suffix {
    /// Never split a suffix.
    None,
    /// A valid level splits; an invalid one makes the lookup fail.
    Strict,
    /// A valid level splits; an invalid one is dropped with a warning.
    Lenient,
}

/// Where a reference that names no known model would go (a custom id on a provider).
#[derive(Debug, Clone)]
struct Target {
    provider: String,
    provider_models: Vec<Model>,
    model_text: String,
    model_id: String,
    thinking: Option<ThinkingLevel>,
}

#[derive(Debug, Clone)]
enum Reference {
    Resolved {
        // Boxed: a model is far larger than the other variants.
        model: Box<Model>,
        thinking: Option<ThinkingLevel>,
        warning: Option<String>,
    },
    Ambiguous {
        candidates: Vec<Model>,
        usable_count: usize,
        thinking: Option<ThinkingLevel>,
        warning: Option<String>,
    },
    NotFound(Option<Box<Target>>),
}

impl Reference {
    /// Pi spreads the outer thinking level and warning over whatever the inner lookup found.
    fn with(self, thinking: Option<ThinkingLevel>, warning: Option<String>) -> Reference {
        match self {
            Reference::Resolved { model, .. } => Reference::Resolved {
                model,
                thinking,
                warning,
            },
            Reference::Ambiguous {
                candidates,
                usable_count,
                ..
            } => Reference::Ambiguous {
                candidates,
                usable_count,
                thinking,
                warning,
            },
            other => other,
        }
    }

    fn warning(&self) -> Option<&String> {
        match self {
            Reference::Resolved { warning, .. } | Reference::Ambiguous { warning, .. } => {
                warning.as_ref()
            }
            Reference::NotFound(_) => None,
        }
    }
}

fn split_thinking_suffix(text: &str) -> Option<(&str, ThinkingLevel)> {
    let colon = text.rfind(':')?;
    let level = ThinkingLevel::parse(&text[colon + 1..])?;
    Some((&text[..colon], level))
}

/// `provider/rest` where `provider` is a known provider id (longest match wins, since ids may
/// contain `/`).
fn split_provider_prefix<'a>(text: &'a str, models: &[Model]) -> Option<(String, &'a str)> {
    let lower = text.to_lowercase();
    let mut best: Option<(String, &'a str)> = None;
    for model in models {
        let prefix = model.provider.trim().to_lowercase();
        if prefix.is_empty()
            || best
                .as_ref()
                .is_some_and(|(p, _)| p.len() >= model.provider.len())
        {
            continue;
        }
        let Some(slash) = lower
            .get(prefix.len()..)
            .and_then(|r| r.find('/'))
            .map(|i| i + prefix.len())
        else {
            continue;
        };
        if lower[..slash].trim() != prefix {
            continue;
        }
        let model_text = text.get(slash + 1..).unwrap_or("").trim();
        if !model_text.is_empty() {
            best = Some((model.provider.clone(), model_text));
        }
    }
    best
}

fn fuzzy_matches<'a>(text: &str, models: &'a [Model]) -> Vec<&'a Model> {
    let lower = text.to_lowercase();
    models
        .iter()
        .filter(|m| m.id.to_lowercase().contains(&lower) || m.name.to_lowercase().contains(&lower))
        .collect()
}

/// Aliases (`claude-sonnet-4-5`, `*-latest`) before dated ids (`…-20250929`), then the
/// greatest id.
fn best_fuzzy<'a>(matches: &[&'a Model]) -> Option<&'a Model> {
    let is_alias = |id: &str| {
        id.ends_with("-latest") || {
            let tail = id.rsplit('-').next().unwrap_or("");
            !(id.contains('-') && tail.len() == 8 && tail.bytes().all(|b| b.is_ascii_digit()))
        }
    };
    let aliases: Vec<&Model> = matches
        .iter()
        .copied()
        .filter(|m| is_alias(&m.id))
        .collect();
    let pool = if aliases.is_empty() {
        matches.to_vec()
    } else {
        aliases
    };
    pool.into_iter().max_by(|a, b| a.id.cmp(&b.id))
}

fn distinct_providers(models: &[Model]) -> usize {
    let mut providers: Vec<&str> = models.iter().map(|m| m.provider.as_str()).collect();
    providers.sort();
    providers.dedup();
    providers.len()
}

fn select_reference(
    text: &str,
    pool: &[Model],
    fuzzy: bool,
    usable: &dyn Fn(&str) -> bool,
) -> Option<Reference> {
    let lower = text.to_lowercase();
    let raw: Vec<&Model> = pool
        .iter()
        .filter(|m| m.id.to_lowercase() == lower)
        .collect();
    let named: Option<&Model> =
        split_provider_prefix(text, pool).and_then(|(provider, model_text)| {
            let provider_models: Vec<Model> = pool
                .iter()
                .filter(|m| m.provider == provider)
                .cloned()
                .collect();
            let lower_model = model_text.to_lowercase();
            pool.iter()
                .find(|m| m.provider == provider && m.id.to_lowercase() == lower_model)
                .or_else(|| raw.iter().copied().find(|m| m.provider == provider))
                .or_else(|| {
                    if !fuzzy {
                        return None;
                    }
                    let matches = fuzzy_matches(model_text, &provider_models);
                    let best = best_fuzzy(&matches)?;
                    pool.iter()
                        .find(|m| m.provider == best.provider && m.id == best.id)
                })
        });
    let others: Vec<&Model> = raw.iter().copied().filter(|m| Some(*m) != named).collect();
    let mut candidates: Vec<Model> = named.into_iter().cloned().collect();
    candidates.extend(others.iter().map(|m| (*m).clone()));
    if candidates.is_empty() {
        return None;
    }
    let resolved = |model: &Model| Reference::Resolved {
        model: Box::new(model.clone()),
        thinking: None,
        warning: None,
    };
    if distinct_providers(&candidates) == 1 {
        return Some(resolved(&candidates[0]));
    }
    if let Some(named) = named.filter(|n| usable(&n.provider)) {
        return Some(resolved(named));
    }
    let usable_others: Vec<&Model> = others
        .iter()
        .copied()
        .filter(|m| usable(&m.provider))
        .collect();
    if usable_others.len() == 1 {
        return Some(resolved(usable_others[0]));
    }
    if let (true, Some(named)) = (usable_others.is_empty(), named) {
        return Some(resolved(named));
    }
    Some(Reference::Ambiguous {
        candidates,
        usable_count: usable_others.len(),
        thinking: None,
        warning: None,
    })
}

fn select_fuzzy(matches: &[&Model], usable: &dyn Fn(&str) -> bool) -> Option<Reference> {
    if matches.is_empty() {
        return None;
    }
    let owned: Vec<Model> = matches.iter().map(|m| (*m).clone()).collect();
    let multiple = distinct_providers(&owned) > 1;
    let usable_matches: Vec<&Model> = if multiple {
        matches
            .iter()
            .copied()
            .filter(|m| usable(&m.provider))
            .collect()
    } else {
        Vec::new()
    };
    let pool: Vec<&Model> = if usable_matches.is_empty() {
        matches.to_vec()
    } else {
        usable_matches.clone()
    };
    let best = best_fuzzy(&pool)?;
    let tied: Vec<Model> = pool
        .iter()
        .filter(|m| m.id == best.id)
        .map(|m| (*m).clone())
        .collect();
    if distinct_providers(&tied) == 1 {
        return Some(Reference::Resolved {
            model: Box::new(best.clone()),
            thinking: None,
            warning: None,
        });
    }
    let usable_count = if usable_matches.is_empty() {
        0
    } else {
        tied.len()
    };
    Some(Reference::Ambiguous {
        candidates: tied,
        usable_count,
        thinking: None,
        warning: None,
    })
}

fn resolve_text(
    text: &str,
    suffix: Suffix,
    fuzzy: bool,
    pool: &[Model],
    usable: &dyn Fn(&str) -> bool,
) -> Reference {
    if let Some(found) = select_reference(text, pool, fuzzy, usable) {
        return found;
    }
    if fuzzy {
        if let Some(found) = select_fuzzy(&fuzzy_matches(text, pool), usable) {
            return found;
        }
    }
    if suffix == Suffix::None {
        return Reference::NotFound(None);
    }
    if let Some((base, level)) = split_thinking_suffix(text) {
        let inner = resolve_text(base, suffix, fuzzy, pool, usable);
        let warning = inner.warning().cloned();
        let thinking = if warning.is_some() { None } else { Some(level) };
        return inner.with(thinking, warning);
    }
    if suffix == Suffix::Strict {
        return Reference::NotFound(None);
    }
    let Some(colon) = text.rfind(':') else {
        return Reference::NotFound(None);
    };
    let bad = &text[colon + 1..];
    resolve_text(&text[..colon], suffix, fuzzy, pool, usable).with(
        None,
        Some(format!(
            "Invalid thinking level \"{bad}\" in pattern \"{text}\". Using default instead."
        )),
    )
}

fn resolve_reference(
    text: &str,
    provider: Option<&str>,
    suffix: Suffix,
    fuzzy: bool,
    models: &[Model],
    usable: &dyn Fn(&str) -> bool,
) -> Reference {
    let text = text.trim();
    if text.is_empty() {
        return Reference::NotFound(None);
    }
    let constraint = provider.map(str::to_lowercase);
    let pool: Vec<Model> = match &constraint {
        Some(c) => models
            .iter()
            .filter(|m| m.provider.to_lowercase() == *c)
            .cloned()
            .collect(),
        None => models.to_vec(),
    };
    let result = resolve_text(text, suffix, fuzzy, &pool, usable);
    if !matches!(result, Reference::NotFound(_)) {
        return result;
    }
    let split = split_provider_prefix(text, &pool);
    let anchor = if constraint.is_some() {
        pool.first()
    } else {
        split
            .as_ref()
            .and_then(|(p, _)| pool.iter().find(|m| &m.provider == p))
    };
    let Some(anchor) = anchor else { return result };
    let model_text = split.map_or(text, |(_, m)| m).to_string();
    let split_suffix = if suffix == Suffix::None {
        None
    } else {
        split_thinking_suffix(&model_text)
    };
    let mut provider_models = vec![anchor.clone()];
    provider_models.extend(
        pool.iter()
            .filter(|m| m.provider == anchor.provider && *m != anchor)
            .cloned(),
    );
    Reference::NotFound(Some(Box::new(Target {
        provider: anchor.provider.clone(),
        provider_models,
        model_id: split_suffix.map_or(model_text.clone(), |(b, _)| b.to_string()),
        thinking: split_suffix.map(|(_, l)| l),
        model_text,
    })))
}

/// The CLI flags that select a model.
#[derive(Debug, Clone, Default)]
pub struct CliModelRequest<'a> {
    /// `--provider`.
    pub provider: Option<&'a str>,
    /// `--model`.
    pub model: Option<&'a str>,
    /// `--thinking`.
    pub thinking: Option<ThinkingLevel>,
    /// Whether `--api-key` was given (then stored credentials must not pick the provider).
    pub inline_api_key: bool,
}

/// What [`resolve_cli_model`] decided.
#[derive(Debug, Clone, Default)]
pub struct CliModelResolution {
    /// The model (possibly a custom id on a known provider).
    pub model: Option<Model>,
    /// A thinking level from a `:level` suffix.
    pub thinking_level: Option<ThinkingLevel>,
    /// Something to tell the user, not fatal.
    pub warning: Option<String>,
    /// Fatal: print and exit.
    pub error: Option<String>,
}

/// Resolves `--provider` / `--model` against all known models. `has_auth(provider)` breaks
/// ties between providers offering the same id.
pub fn resolve_cli_model(
    request: &CliModelRequest<'_>,
    models: &[Model],
    has_auth: &dyn Fn(&str) -> bool,
) -> CliModelResolution {
    let error = |e: String| CliModelResolution {
        error: Some(e),
        ..Default::default()
    };
    let Some(cli_model) = request.model else {
        return CliModelResolution::default();
    };
    if models.is_empty() {
        return error(
            "No models available. Check your installation or add models to models.json.".into(),
        );
    }
    let provider = match request.provider {
        Some(p) => match models.iter().find(|m| m.provider.eq_ignore_ascii_case(p)) {
            Some(m) => Some(m.provider.clone()),
            None => {
                return error(format!(
                    "Unknown provider \"{p}\". Use --list-models to see available providers/models."
                ))
            }
        },
        None => None,
    };
    let never = |_: &str| false;
    let usable: &dyn Fn(&str) -> bool = if request.inline_api_key {
        &never
    } else {
        has_auth
    };
    match resolve_reference(
        cli_model,
        provider.as_deref(),
        Suffix::Strict,
        true,
        models,
        usable,
    ) {
        Reference::Resolved {
            model,
            thinking,
            warning,
        } => CliModelResolution {
            model: Some(*model),
            thinking_level: thinking,
            warning,
            error: None,
        },
        Reference::Ambiguous {
            candidates,
            usable_count,
            ..
        } => {
            let mut names: Vec<String> = candidates
                .iter()
                .map(|m| format!("{}/{}", m.provider, m.id))
                .collect();
            names.sort();
            let hint = if request.inline_api_key {
                "--api-key does not choose a provider."
            } else if usable_count == 0 {
                "No matching provider is authenticated."
            } else {
                "More than one matching provider is authenticated."
            };
            error(format!(
                "Model \"{cli_model}\" is ambiguous across providers: {}. {hint} Use --provider or provider/model.",
                names.join(", ")
            ))
        }
        Reference::NotFound(None) => error(format!(
            "Model \"{cli_model}\" not found. Use --list-models to see available models."
        )),
        Reference::NotFound(Some(target)) => {
            // With --thinking the suffix stays part of the custom id.
            let model_id = if request.thinking.is_some() {
                target.model_text.clone()
            } else {
                target.model_id.clone()
            };
            let fallback_thinking = if request.thinking.is_some() {
                None
            } else {
                target.thinking
            };
            let base = default_model_for_provider(&target.provider)
                .and_then(|id| target.provider_models.iter().find(|m| m.id == id))
                .unwrap_or(&target.provider_models[0]);
            let mut model = base.clone();
            model.id = model_id.clone();
            model.name = model_id.clone();
            let requested = request.thinking.or(fallback_thinking);
            if requested.is_some_and(|l| l != ThinkingLevel::Off) {
                model.reasoning = true;
            }
            CliModelResolution {
                model: Some(model),
                thinking_level: fallback_thinking,
                warning: Some(format!(
                    "Model \"{model_id}\" not found for provider \"{}\". Using custom model id.",
                    target.provider
                )),
                error: None,
            }
        }
    }
}

/// A model in the `--models` / `enabledModels` cycle, with its pattern's thinking level.
#[derive(Debug, Clone, PartialEq)]
pub struct ScopedModel {
    /// The model.
    pub model: Model,
    /// From a `:level` suffix.
    pub thinking_level: Option<ThinkingLevel>,
}

fn glob_matches(pattern: &str, text: &str) -> bool {
    globset::GlobBuilder::new(pattern)
        .case_insensitive(true)
        .literal_separator(true)
        .build()
        .map(|g| g.compile_matcher().is_match(text))
        .unwrap_or(false)
}

/// Resolves scope patterns to models, in pattern order without duplicates; warnings for
/// patterns matching nothing, ambiguous ones and invalid thinking suffixes.
pub fn resolve_model_scope(
    patterns: &[String],
    models: &[Model],
) -> (Vec<ScopedModel>, Vec<String>) {
    let mut scoped: Vec<ScopedModel> = Vec::new();
    let mut warnings = Vec::new();
    let add =
        |model: &Model, thinking_level: Option<ThinkingLevel>, scoped: &mut Vec<ScopedModel>| {
            if !scoped
                .iter()
                .any(|s| s.model.provider == model.provider && s.model.id == model.id)
            {
                scoped.push(ScopedModel {
                    model: model.clone(),
                    thinking_level,
                });
            }
        };
    let ambiguous = |pattern: &str, candidates: &[Model]| {
        let mut providers: Vec<&str> = candidates.iter().map(|m| m.provider.as_str()).collect();
        providers.sort();
        providers.dedup();
        format!(
            "Pattern \"{pattern}\" matches several providers: {}. Use provider/id to choose one.",
            providers.join(", ")
        )
    };
    let all = |_: &str| true;
    for pattern in patterns {
        if pattern.contains(['*', '?', '[']) {
            let (glob, level) = match split_thinking_suffix(pattern) {
                Some((base, level)) => (base, Some(level)),
                None => (pattern.as_str(), None),
            };
            // Ids such as `model[1m]` are literal ids, not globs.
            let matches: Vec<Model> =
                match resolve_reference(glob, None, Suffix::None, false, models, &all) {
                    Reference::Resolved { model, .. } => vec![*model],
                    Reference::Ambiguous { candidates, .. } => {
                        warnings.push(ambiguous(pattern, &candidates));
                        candidates
                    }
                    Reference::NotFound(_) => models
                        .iter()
                        .filter(|m| {
                            glob_matches(glob, &format!("{}/{}", m.provider, m.id))
                                || glob_matches(glob, &m.id)
                        })
                        .cloned()
                        .collect(),
                };
            if matches.is_empty() {
                warnings.push(format!("No models match pattern \"{pattern}\""));
            }
            for model in &matches {
                add(model, level, &mut scoped);
            }
            continue;
        }
        match resolve_reference(pattern, None, Suffix::Lenient, true, models, &all) {
            Reference::NotFound(_) => {
                warnings.push(format!("No models match pattern \"{pattern}\""))
            }
            Reference::Resolved {
                model,
                thinking,
                warning,
            } => {
                warnings.extend(warning);
                add(&model, thinking, &mut scoped);
            }
            Reference::Ambiguous {
                candidates,
                thinking,
                warning,
                ..
            } => {
                warnings.extend(warning);
                warnings.push(ambiguous(pattern, &candidates));
                for model in &candidates {
                    add(model, thinking, &mut scoped);
                }
            }
        }
    }
    (scoped, warnings)
}

/// The model a session starts with.
#[derive(Debug, Clone, PartialEq)]
pub struct InitialModel {
    /// `None` when no model has credentials.
    pub model: Option<Model>,
    /// Its thinking level.
    pub thinking_level: ThinkingLevel,
}

/// Picks the starting model: the first scoped model (unless continuing a session), else the
/// settings default when its provider has credentials, else a provider's preferred model among
/// `available` (models with credentials), else the first available one.
pub fn find_initial_model(
    scoped: &[ScopedModel],
    is_continuing: bool,
    settings: &Settings,
    models: &[Model],
    available: &[Model],
    has_auth: &dyn Fn(&str) -> bool,
) -> InitialModel {
    let default_level = settings.default_thinking_level();
    if let (Some(first), false) = (scoped.first(), is_continuing) {
        let per_model = settings.model_thinking_level(&first.model.provider, &first.model.id);
        return InitialModel {
            model: Some(first.model.clone()),
            thinking_level: first
                .thinking_level
                .or(per_model)
                .or(default_level)
                .unwrap_or(DEFAULT_THINKING_LEVEL),
        };
    }
    if let (Some(provider), Some(id)) = (settings.default_provider(), settings.default_model()) {
        if let Some(found) = models.iter().find(|m| m.provider == provider && m.id == id) {
            if has_auth(&found.provider) {
                return InitialModel {
                    model: Some(found.clone()),
                    thinking_level: settings
                        .model_thinking_level(provider, id)
                        .or(default_level)
                        .unwrap_or(DEFAULT_THINKING_LEVEL),
                };
            }
        }
    }
    let preferred = DEFAULT_MODEL_PER_PROVIDER
        .iter()
        .find_map(|(p, id)| available.iter().find(|m| m.provider == *p && m.id == *id));
    InitialModel {
        model: preferred.or(available.first()).cloned(),
        thinking_level: DEFAULT_THINKING_LEVEL,
    }
}

/// 200000 → `200K`, 1000000 → `1M`, 1048576 → `1.0M`.
fn format_token_count(count: u64) -> String {
    if count >= 1_000_000 {
        let m = count as f64 / 1e6;
        return if count.is_multiple_of(1_000_000) {
            format!("{}M", count / 1_000_000)
        } else {
            format!("{m:.1}M")
        };
    }
    if count >= 1_000 {
        let k = count as f64 / 1e3;
        return if count.is_multiple_of(1_000) {
            format!("{}K", count / 1_000)
        } else {
            format!("{k:.1}K")
        };
    }
    count.to_string()
}

/// Whether all characters of `query` appear in `text` in order (or the query with its
/// letters and digits swapped, so `4o` finds `o4`).
fn fuzzy_token_matches(query: &str, text: &str) -> bool {
    let subsequence = |q: &str| {
        let mut chars = text.chars();
        q.chars().all(|c| chars.any(|t| t == c))
    };
    if subsequence(query) {
        return true;
    }
    let split =
        query.find(|c: char| c.is_ascii_digit() != query.starts_with(|d: char| d.is_ascii_digit()));
    match split {
        Some(i) if i > 0 => {
            let (a, b) = query.split_at(i);
            let homogeneous = |s: &str, digits: bool| {
                s.chars().all(|c| {
                    if digits {
                        c.is_ascii_digit()
                    } else {
                        c.is_ascii_lowercase()
                    }
                })
            };
            let a_digits = a.starts_with(|c: char| c.is_ascii_digit());
            homogeneous(a, a_digits) && homogeneous(b, !a_digits) && subsequence(&format!("{b}{a}"))
        }
        _ => false,
    }
}

/// `--list-models [search]`: a table of `provider  model  context  max-out  thinking  images`,
/// sorted by provider then id, filtered by a fuzzy search over `provider id` when given.
pub fn format_model_list(models: &[Model], search: Option<&str>) -> String {
    if models.is_empty() {
        return "No models available. Log in with /login or set a provider API key.\n".to_string();
    }
    let tokens: Vec<String> = search
        .unwrap_or("")
        .split(|c: char| c.is_whitespace() || c == '/')
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect();
    let mut filtered: Vec<&Model> = models
        .iter()
        .filter(|m| {
            let text = format!("{} {}", m.provider, m.id).to_lowercase();
            tokens.iter().all(|t| fuzzy_token_matches(t, &text))
        })
        .collect();
    if filtered.is_empty() {
        return format!("No models matching \"{}\"\n", search.unwrap_or(""));
    }
    // Pi sorts with `localeCompare`, which ignores case at first: `MiniMaxAI/…` < `moonshotai/…`.
    filtered.sort_by(|a, b| {
        locale_compare(&a.provider, &b.provider).then_with(|| locale_compare(&a.id, &b.id))
    });
    let header = [
        "provider", "model", "context", "max-out", "thinking", "images",
    ]
    .map(String::from);
    let rows: Vec<[String; 6]> = filtered
        .iter()
        .map(|m| {
            [
                m.provider.clone(),
                m.id.clone(),
                format_token_count(m.context_window),
                format_token_count(m.max_tokens),
                if m.reasoning { "yes" } else { "no" }.to_string(),
                if m.supports_images() { "yes" } else { "no" }.to_string(),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..6)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String; 6]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ")
    };
    let mut out = line(&header);
    out.push('\n');
    for row in &rows {
        out.push_str(&line(row));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn model(provider: &str, id: &str, name: &str) -> Model {
        serde_json::from_value(json!({
            "id": id, "name": name, "api": "openai-completions", "provider": provider,
            "baseUrl": "http://x", "reasoning": false, "input": ["text"],
            "contextWindow": 200000, "maxTokens": 64000
        }))
        .unwrap()
    }

    fn catalog() -> Vec<Model> {
        vec![
            model("anthropic", "claude-sonnet-4-5", "Claude Sonnet 4.5"),
            model(
                "anthropic",
                "claude-sonnet-4-5-20250929",
                "Claude Sonnet 4.5 (dated)",
            ),
            model("anthropic", "claude-opus-5-5", "Claude Opus 5.5"),
            model("openai", "gpt-5", "GPT-5"),
            model("openrouter", "gpt-5", "GPT-5 via OpenRouter"),
            model(
                "openrouter",
                "anthropic/claude-sonnet-4-5",
                "Sonnet via OpenRouter",
            ),
        ]
    }

    fn cli(provider: Option<&str>, model: &str, has: &[&str]) -> CliModelResolution {
        let has: Vec<String> = has.iter().map(|s| s.to_string()).collect();
        resolve_cli_model(
            &CliModelRequest {
                provider,
                model: Some(model),
                ..Default::default()
            },
            &catalog(),
            &|p| has.iter().any(|h| h == p),
        )
    }

    fn id(r: &CliModelResolution) -> String {
        r.model
            .as_ref()
            .map(|m| format!("{}/{}", m.provider, m.id))
            .unwrap_or_default()
    }

    #[test]
    fn cli_model_resolution_cases() {
        // Exact provider/id and bare id.
        assert_eq!(
            id(&cli(None, "anthropic/claude-opus-5-5", &[])),
            "anthropic/claude-opus-5-5"
        );
        assert_eq!(
            id(&cli(None, "CLAUDE-OPUS-5-5", &[])),
            "anthropic/claude-opus-5-5"
        );
        // Fuzzy: aliases beat dated ids.
        assert_eq!(
            id(&cli(None, "sonnet", &["anthropic"])),
            "anthropic/claude-sonnet-4-5"
        );
        // Thinking suffix.
        let r = cli(None, "opus:high", &[]);
        assert_eq!(id(&r), "anthropic/claude-opus-5-5");
        assert_eq!(r.thinking_level, Some(ThinkingLevel::High));
        // `--provider` constrains.
        assert_eq!(
            id(&cli(Some("openrouter"), "gpt-5", &[])),
            "openrouter/gpt-5"
        );
        // The same id on two providers: credentials decide, else it is ambiguous.
        assert_eq!(id(&cli(None, "gpt-5", &["openai"])), "openai/gpt-5");
        let r = cli(None, "gpt-5", &[]);
        assert_eq!(
            r.error.as_deref(),
            Some("Model \"gpt-5\" is ambiguous across providers: openai/gpt-5, openrouter/gpt-5. No matching provider is authenticated. Use --provider or provider/model.")
        );
        // A provider id containing the model's own slash.
        assert_eq!(
            id(&cli(None, "openrouter/anthropic/claude-sonnet-4-5", &[])),
            "openrouter/anthropic/claude-sonnet-4-5"
        );
        // Unknown id on a known provider: custom model from the provider's default.
        let r = cli(None, "anthropic/claude-next:low", &[]);
        assert_eq!(id(&r), "anthropic/claude-next");
        assert_eq!(r.thinking_level, Some(ThinkingLevel::Low));
        assert!(r.model.as_ref().unwrap().reasoning);
        assert_eq!(
            r.warning.as_deref(),
            Some("Model \"claude-next\" not found for provider \"anthropic\". Using custom model id.")
        );
        // Unknown everything; unknown provider; invalid suffix is strict on the CLI.
        assert_eq!(
            cli(None, "zzz", &[]).error.as_deref(),
            Some("Model \"zzz\" not found. Use --list-models to see available models.")
        );
        assert_eq!(
            cli(Some("nope"), "x", &[]).error.as_deref(),
            Some("Unknown provider \"nope\". Use --list-models to see available providers/models.")
        );
        assert!(cli(None, "opus:ultra", &[]).error.is_some());
        assert!(
            resolve_cli_model(&CliModelRequest::default(), &catalog(), &|_| true)
                .model
                .is_none()
        );
    }

    #[test]
    fn scope_patterns() {
        let patterns: Vec<String> = [
            "anthropic/*",
            "gpt-5:high",
            "*sonnet*:low",
            "nomatch",
            "opus:bogus",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let (scoped, warnings) = resolve_model_scope(&patterns, &catalog());
        let got: Vec<(String, Option<ThinkingLevel>)> = scoped
            .iter()
            .map(|s| {
                (
                    format!("{}/{}", s.model.provider, s.model.id),
                    s.thinking_level,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("anthropic/claude-sonnet-4-5".into(), None),
                ("anthropic/claude-sonnet-4-5-20250929".into(), None),
                ("anthropic/claude-opus-5-5".into(), None),
                // The bare id after `anthropic/` matches the glob too, as with minimatch.
                ("openrouter/anthropic/claude-sonnet-4-5".into(), None),
                ("openai/gpt-5".into(), Some(ThinkingLevel::High)),
                ("openrouter/gpt-5".into(), Some(ThinkingLevel::High)),
            ]
        );
        assert_eq!(
            warnings,
            vec![
                "Pattern \"gpt-5:high\" matches several providers: openai, openrouter. Use provider/id to choose one.".to_string(),
                "No models match pattern \"nomatch\"".to_string(),
                "Invalid thinking level \"bogus\" in pattern \"opus:bogus\". Using default instead.".to_string(),
            ]
        );
    }

    #[test]
    fn initial_model_priority() {
        let models = catalog();
        let settings = Settings::in_memory(
            json!({"defaultProvider":"openai","defaultModel":"gpt-5","defaultThinkingLevel":"low",
                   "modelThinkingLevels":{"anthropic/claude-opus-5-5":"high"}}),
            json!({}),
        );
        let scoped = vec![ScopedModel {
            model: models[2].clone(),
            thinking_level: None,
        }];
        let all = |_: &str| true;
        let r = find_initial_model(&scoped, false, &settings, &models, &models, &all);
        assert_eq!(r.model.as_ref().unwrap().id, "claude-opus-5-5");
        assert_eq!(r.thinking_level, ThinkingLevel::High);
        let r = find_initial_model(&scoped, true, &settings, &models, &models, &all);
        assert_eq!(r.model.as_ref().unwrap().id, "gpt-5");
        assert_eq!(r.thinking_level, ThinkingLevel::Low);
        let only_anthropic = |p: &str| p == "anthropic";
        let available: Vec<Model> = models
            .iter()
            .filter(|m| m.provider == "anthropic")
            .cloned()
            .collect();
        let r = find_initial_model(&[], false, &settings, &models, &available, &only_anthropic);
        assert_eq!(r.model.as_ref().unwrap().id, "claude-opus-5-5");
        assert_eq!(r.thinking_level, DEFAULT_THINKING_LEVEL);
        let r = find_initial_model(&[], false, &settings, &models, &[], &|_| false);
        assert!(r.model.is_none());
    }

    #[test]
    fn list_models_table() {
        let mut models = catalog();
        models[3].context_window = 1_048_576;
        models[3].max_tokens = 128_000;
        models[3].reasoning = true;
        let out = format_model_list(&models, Some("openai gpt"));
        assert_eq!(
            out,
            "provider  model  context  max-out  thinking  images\n\
             openai    gpt-5  1.0M     128K     yes       no    \n"
        );
        let all = format_model_list(&models, None);
        assert_eq!(all.lines().count(), 7);
        assert!(all
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("anthropic   claude-opus-5-5"));
        assert_eq!(
            format_model_list(&models, Some("qqq")),
            "No models matching \"qqq\"\n"
        );
        assert_eq!(format_token_count(999), "999");
        assert_eq!(format_token_count(200_000), "200K");
        assert_eq!(format_token_count(1_500), "1.5K");
        assert!(fuzzy_token_matches("4o", "gpt-o4"));
    }
}
