//! Model descriptions: what a provider needs to know to call a model and price its usage.
//!
//! `compat`, `thinkingLevelMap` and `samplingParams` stay raw JSON objects: their key sets
//! differ per wire API and grow with every Pi release, and the providers read only the keys
//! they understand (through [`Model::compat_bool`] and friends).

use std::collections::BTreeMap;

use pi_formats::message::ThinkingLevel;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Wire API names (`model.api`).
pub mod api {
    /// OpenAI Chat Completions.
    pub const OPENAI_COMPLETIONS: &str = "openai-completions";
    /// OpenAI Responses.
    pub const OPENAI_RESPONSES: &str = "openai-responses";
    /// OpenAI Responses on an Azure OpenAI resource.
    pub const AZURE_OPENAI_RESPONSES: &str = "azure-openai-responses";
    /// Anthropic Messages.
    pub const ANTHROPIC_MESSAGES: &str = "anthropic-messages";
    /// Google Generative AI (Gemini).
    pub const GOOGLE_GENERATIVE_AI: &str = "google-generative-ai";
    /// Mistral's native chat API.
    pub const MISTRAL_CONVERSATIONS: &str = "mistral-conversations";
    /// Gemini on Vertex AI.
    pub const GOOGLE_VERTEX: &str = "google-vertex";
    /// Amazon Bedrock's ConverseStream.
    pub const BEDROCK_CONVERSE_STREAM: &str = "bedrock-converse-stream";
    /// ChatGPT's Codex backend (`openai-codex`, subscription login).
    pub const OPENAI_CODEX_RESPONSES: &str = "openai-codex-responses";
    /// Pi's own message protocol (the Radius gateway).
    pub const PI_MESSAGES: &str = "pi-messages";
    /// A virtual model (`pi.registerVirtualModel`): routed to a physical model before every
    /// request, never sent to a provider itself.
    pub const VIRTUAL: &str = "pi-virtual";
}

/// What a model accepts as input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputKind {
    /// Text.
    Text,
    /// Images.
    Image,
}

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCost {
    /// Uncached input.
    #[serde(default)]
    pub input: f64,
    /// Output.
    #[serde(default)]
    pub output: f64,
    /// Cache reads.
    #[serde(default)]
    pub cache_read: f64,
    /// Cache writes.
    #[serde(default)]
    pub cache_write: f64,
    /// Whole-request rate tiers, chosen by total input tokens.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<CostTier>,
}

/// A full alternative rate set used when the request's input exceeds `input_tokens_above`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CostTier {
    /// Threshold on `input + cacheRead + cacheWrite`.
    pub input_tokens_above: u64,
    /// Uncached input.
    #[serde(default)]
    pub input: f64,
    /// Output.
    #[serde(default)]
    pub output: f64,
    /// Cache reads.
    #[serde(default)]
    pub cache_read: f64,
    /// Cache writes.
    #[serde(default)]
    pub cache_write: f64,
}

/// A chat model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Model {
    /// Model id sent to the API.
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// Wire API (see [`api`]).
    pub api: String,
    /// Provider id (`anthropic`, `openai`, a models.json provider key, …).
    pub provider: String,
    /// Endpoint base URL.
    pub base_url: String,
    /// Whether the model supports extended thinking.
    #[serde(default)]
    pub reasoning: bool,
    /// Accepted input kinds.
    #[serde(default = "default_input")]
    pub input: Vec<InputKind>,
    /// Prices.
    #[serde(default)]
    pub cost: ModelCost,
    /// Context window in tokens.
    #[serde(default = "default_context_window")]
    pub context_window: u64,
    /// Maximum output tokens.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u64,
    /// Extra HTTP headers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// API-specific compatibility switches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compat: Option<Map<String, Value>>,
    /// Pi thinking level → provider value (`null` = unsupported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_level_map: Option<Map<String, Value>>,
    /// Sampling parameters merged verbatim into OpenAI-style request bodies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_params: Option<Map<String, Value>>,
}

pub(crate) fn default_input() -> Vec<InputKind> {
    vec![InputKind::Text]
}
pub(crate) fn default_context_window() -> u64 {
    128_000
}
pub(crate) fn default_max_tokens() -> u64 {
    16_384
}

/// How a model's `thinkingLevelMap` treats one level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LevelMapping {
    /// Key absent: provider default.
    Default,
    /// `null`: the level is not supported.
    Unsupported,
    /// A provider-specific value to send.
    Value(String),
}

impl Model {
    /// A virtual model as Pi lists one (`createVirtualModel`): no endpoint and no price; the
    /// levels it offers are the ones its `thinkingLevelMap` does not map to `null`; limits
    /// of 0 mean unknown.
    pub fn new_virtual(
        provider: &str,
        id: &str,
        name: &str,
        levels: &[ThinkingLevel],
        input: Vec<InputKind>,
        context_window: u64,
        max_tokens: u64,
    ) -> Model {
        let map: Map<String, Value> = ThinkingLevel::ALL
            .into_iter()
            .map(|l| {
                let value = if levels.contains(&l) {
                    Value::String(l.as_str().to_string())
                } else {
                    Value::Null
                };
                (l.as_str().to_string(), value)
            })
            .collect();
        Model {
            id: id.to_string(),
            name: name.to_string(),
            api: api::VIRTUAL.to_string(),
            provider: provider.to_string(),
            base_url: String::new(),
            reasoning: levels.iter().any(|&l| l != ThinkingLevel::Off),
            input,
            cost: ModelCost::default(),
            context_window,
            max_tokens,
            headers: BTreeMap::new(),
            compat: None,
            thinking_level_map: Some(map),
            sampling_params: None,
        }
    }

    /// Whether this is a virtual model, which a router resolves per request.
    pub fn is_virtual(&self) -> bool {
        self.api == api::VIRTUAL
    }

    /// A `compat` boolean, if set.
    pub fn compat_bool(&self, key: &str) -> Option<bool> {
        self.compat.as_ref()?.get(key)?.as_bool()
    }

    /// A `compat` string, if set.
    pub fn compat_str(&self, key: &str) -> Option<&str> {
        self.compat.as_ref()?.get(key)?.as_str()
    }

    /// A raw `compat` value, if set.
    pub fn compat_value(&self, key: &str) -> Option<&Value> {
        self.compat.as_ref()?.get(key)
    }

    /// Whether the model accepts images.
    pub fn supports_images(&self) -> bool {
        self.input.contains(&InputKind::Image)
    }

    /// How `thinkingLevelMap` treats `level`.
    pub fn level_mapping(&self, level: ThinkingLevel) -> LevelMapping {
        match self
            .thinking_level_map
            .as_ref()
            .and_then(|m| m.get(level.as_str()))
        {
            None => LevelMapping::Default,
            Some(Value::Null) => LevelMapping::Unsupported,
            Some(Value::String(s)) => LevelMapping::Value(s.clone()),
            // A non-string, non-null value is a config mistake; treat it as absent.
            Some(_) => LevelMapping::Default,
        }
    }

    /// The provider value for `level`: the mapped string, else the level's own name.
    pub fn level_value(&self, level: ThinkingLevel) -> String {
        match self.level_mapping(level) {
            LevelMapping::Value(v) => v,
            LevelMapping::Default | LevelMapping::Unsupported => level.as_str().to_string(),
        }
    }

    /// Thinking levels the model supports, lowest first (Pi's `getSupportedThinkingLevels`).
    pub fn supported_thinking_levels(&self) -> Vec<ThinkingLevel> {
        if self.is_virtual() {
            // Exactly the levels the router offers, `off` included when listed.
            let levels: Vec<ThinkingLevel> = ThinkingLevel::ALL
                .into_iter()
                .filter(|&l| matches!(self.level_mapping(l), LevelMapping::Value(_)))
                .collect();
            return if levels.is_empty() {
                vec![ThinkingLevel::Off]
            } else {
                levels
            };
        }
        if !self.reasoning {
            return vec![ThinkingLevel::Off];
        }
        ThinkingLevel::ALL
            .into_iter()
            .filter(|&level| match self.level_mapping(level) {
                LevelMapping::Unsupported => false,
                // Extended levels exist only where the model declares them.
                LevelMapping::Default => {
                    !matches!(level, ThinkingLevel::Xhigh | ThinkingLevel::Max)
                }
                LevelMapping::Value(_) => true,
            })
            .collect()
    }

    /// The nearest supported level: the requested one, else the next higher, else the next
    /// lower (Pi's `clampThinkingLevel`).
    pub fn clamp_thinking_level(&self, level: ThinkingLevel) -> ThinkingLevel {
        let available = self.supported_thinking_levels();
        if available.contains(&level) {
            return level;
        }
        let idx = ThinkingLevel::ALL
            .iter()
            .position(|&l| l == level)
            .unwrap_or(0);
        if let Some(&up) = ThinkingLevel::ALL[idx..]
            .iter()
            .find(|l| available.contains(l))
        {
            return up;
        }
        if let Some(&down) = ThinkingLevel::ALL[..idx]
            .iter()
            .rev()
            .find(|l| available.contains(l))
        {
            return down;
        }
        available.first().copied().unwrap_or(ThinkingLevel::Off)
    }
}

/// Every built-in chat model (Pi 1.6.0's catalog, see [`super::catalog`]), in catalog order.
/// models.json can add to and override them.
pub fn builtin_models() -> Vec<Model> {
    super::catalog::builtin_catalog().models.to_vec()
}

/// Find a model by provider and id in `models`.
pub fn find_model<'a>(models: &'a [Model], provider: &str, id: &str) -> Option<&'a Model> {
    models.iter().find(|m| m.provider == provider && m.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_catalog_parses() {
        let models = builtin_models();
        assert!(models.len() >= 15);
        let sonnet = find_model(&models, "anthropic", "claude-sonnet-4-5").expect("sonnet");
        assert_eq!(sonnet.api, api::ANTHROPIC_MESSAGES);
        assert!(sonnet.cost.input > 0.0);
        assert!(find_model(&models, "google", "gemini-2.5-pro").is_some());
        assert!(find_model(&models, "openai", "gpt-5").is_some());
    }

    fn model(reasoning: bool, map: Option<Value>) -> Model {
        let mut m: Model = serde_json::from_value(serde_json::json!({
            "id": "m", "name": "m", "api": "openai-completions", "provider": "p",
            "baseUrl": "http://x", "reasoning": reasoning
        }))
        .expect("model");
        m.thinking_level_map = map.and_then(|v| v.as_object().cloned());
        m
    }

    #[test]
    fn thinking_levels_clamp_like_pi() {
        use ThinkingLevel::*;
        let plain = model(true, None);
        assert_eq!(
            plain.supported_thinking_levels(),
            vec![Off, Minimal, Low, Medium, High]
        );
        assert_eq!(plain.clamp_thinking_level(Xhigh), High);
        assert_eq!(plain.clamp_thinking_level(Max), High);

        let no_reasoning = model(false, None);
        assert_eq!(no_reasoning.clamp_thinking_level(High), Off);

        let gpt5 = model(
            true,
            Some(
                serde_json::json!({"off": null, "minimal": "minimal", "xhigh": null, "max": null}),
            ),
        );
        assert_eq!(gpt5.clamp_thinking_level(Off), Minimal);
        assert_eq!(gpt5.clamp_thinking_level(Max), High);

        let deepseek = model(
            true,
            Some(
                serde_json::json!({"minimal": null, "low": null, "medium": null, "high": "high", "max": "max"}),
            ),
        );
        assert_eq!(deepseek.supported_thinking_levels(), vec![Off, High, Max]);
        assert_eq!(deepseek.clamp_thinking_level(Low), High);
        assert_eq!(deepseek.clamp_thinking_level(Xhigh), Max);
        assert_eq!(deepseek.level_value(Max), "max");
    }

    #[test]
    fn defaults_follow_models_md() {
        let m: Model = serde_json::from_value(serde_json::json!({
            "id": "llama", "name": "llama", "api": "openai-completions", "provider": "ollama",
            "baseUrl": "http://localhost:11434/v1"
        }))
        .expect("model");
        assert_eq!(m.context_window, 128_000);
        assert_eq!(m.max_tokens, 16_384);
        assert_eq!(m.input, vec![InputKind::Text]);
        assert!(!m.reasoning);
    }
}
