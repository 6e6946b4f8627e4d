//! Which router models are offered for chat, and as what [`Model`].
//!
//! Pi 1.6.0's rules: loaded and sleeping models are selectable (a request wakes a sleeping
//! one); unloaded models only when they come from a preset, did not fail, and the router
//! loads on first use (`models_autoload`), which is asked only when such a model exists.
//! Decision models (`architecture.output_modalities` contains `decisions`) are classifiers,
//! not chat models, unless they also output text. The chat template of a loaded model says
//! whether it thinks (`enable_thinking`); sleeping and unloaded ones are not asked, since
//! asking could wake or load them.

use serde_json::{json, Map, Value};

use super::client::{RouterClient, RouterError, RouterModel};
use super::{inference_url, PROVIDER_ID};
use crate::llm::model::{api, InputKind, Model, ModelCost};

/// The context window when the router reports none (Pi's fallback).
const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;

/// Whether `/model` may offer `model` (see the module docs).
pub fn is_selectable(model: &RouterModel, router_autoload: bool) -> bool {
    if model.is_loaded() {
        return true;
    }
    router_autoload
        && model.status.value == "unloaded"
        && !model.status.failed
        && model.source.as_deref() == Some("preset")
}

/// A decision model: answers typed questions through `/v1/systemone`, not chat.
pub fn is_decision_model(model: &RouterModel) -> bool {
    outputs(model).any(|o| o == "decisions")
}

/// A model that can chat: not a decision model, or one that outputs text as well.
pub fn is_chat_model(model: &RouterModel) -> bool {
    !is_decision_model(model) || outputs(model).any(|o| o == "text")
}

fn outputs(model: &RouterModel) -> impl Iterator<Item = &str> {
    model
        .architecture
        .iter()
        .flat_map(|a| a.output_modalities.iter().map(String::as_str))
}

/// `-c N` / `--ctx-size N` / `-ctx N` in the model's process arguments.
fn configured_context(model: &RouterModel) -> Option<u64> {
    let args = &model.status.args;
    args.windows(2)
        .find(|w| matches!(w[0].as_str(), "--ctx-size" | "-c" | "-ctx"))
        .and_then(|w| w[1].parse::<u64>().ok())
        .filter(|&n| n > 0)
}

/// The running context, else the configured one, else the trained one, else 128k.
pub fn context_window(model: &RouterModel) -> u64 {
    let meta = model.meta.as_ref();
    meta.and_then(|m| m.n_ctx)
        .filter(|&n| n > 0)
        .or_else(|| configured_context(model))
        .or_else(|| meta.and_then(|m| m.n_ctx_train).filter(|&n| n > 0))
        .unwrap_or(DEFAULT_CONTEXT_WINDOW)
}

/// The chat model for `model` on the router at `server_url`; `reasoning` when its chat
/// template takes `enable_thinking` (Qwen-style thinking switch, medium only).
pub fn to_model(model: &RouterModel, server_url: &str, reasoning: bool) -> Model {
    let window = context_window(model);
    let images = model
        .architecture
        .as_ref()
        .is_some_and(|a| a.input_modalities.iter().any(|m| m == "image"));
    let mut compat = json!({
        "supportsStore": false,
        "supportsDeveloperRole": false,
        "supportsReasoningEffort": false,
        "supportsUsageInStreaming": true,
        "supportsStrictMode": false,
        "maxTokensField": "max_tokens",
    });
    if reasoning {
        compat["thinkingFormat"] = Value::from("qwen-chat-template");
    }
    let level_map = reasoning.then(|| {
        let map = json!({"off": "off", "minimal": null, "low": null, "medium": "medium",
            "high": null, "xhigh": null});
        map.as_object().cloned().unwrap_or_default()
    });
    Model {
        id: model.id.clone(),
        name: model.id.clone(),
        api: api::OPENAI_COMPLETIONS.to_string(),
        provider: PROVIDER_ID.to_string(),
        base_url: inference_url(server_url),
        reasoning,
        input: if images {
            vec![InputKind::Text, InputKind::Image]
        } else {
            vec![InputKind::Text]
        },
        cost: ModelCost::default(),
        context_window: window,
        max_tokens: window,
        headers: Default::default(),
        compat: compat.as_object().cloned().or_else(|| Some(Map::new())),
        thinking_level_map: level_map,
        sampling_params: None,
    }
}

/// The chat models the router offers now, in its order.
pub async fn discover(client: &RouterClient) -> Result<Vec<Model>, RouterError> {
    let list = client.list().await?;
    Ok(chat_models(client, &list).await)
}

/// The chat models among `list` (a listing just read from `client`'s router).
pub async fn chat_models(client: &RouterClient, list: &[RouterModel]) -> Vec<Model> {
    let autoload = if list
        .iter()
        .any(|m| m.status.value == "unloaded" && m.source.as_deref() == Some("preset"))
    {
        // A router that cannot say is treated as not autoloading (Pi).
        client.autoload().await.unwrap_or(false)
    } else {
        false
    };
    let mut out = Vec::new();
    for m in list
        .iter()
        .filter(|m| is_selectable(m, autoload) && is_chat_model(m))
    {
        let reasoning = if m.status.value == "loaded" {
            client
                .chat_template(&m.id)
                .await
                .ok()
                .flatten()
                .is_some_and(|t| t.contains("enable_thinking"))
        } else {
            false
        };
        out.push(to_model(m, client.server_url(), reasoning));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(v: Value) -> RouterModel {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn selection_follows_state_source_and_autoload() {
        let loaded = model(json!({"id": "a", "status": {"value": "loaded"}}));
        let sleeping = model(json!({"id": "b", "status": {"value": "sleeping"}}));
        let preset = model(json!({"id": "c", "status": {"value": "unloaded"}, "source": "preset"}));
        let failed = model(
            json!({"id": "d", "status": {"value": "unloaded", "failed": true}, "source": "preset"}),
        );
        let dir =
            model(json!({"id": "e", "status": {"value": "unloaded"}, "source": "models_dir"}));
        let loading = model(json!({"id": "f", "status": {"value": "loading"}}));
        assert!(is_selectable(&loaded, false) && is_selectable(&sleeping, false));
        assert!(!is_selectable(&preset, false) && is_selectable(&preset, true));
        assert!(!is_selectable(&failed, true) && !is_selectable(&dir, true));
        assert!(!is_selectable(&loading, true));

        let decision = model(json!({"id": "jev", "status": {"value": "loaded"},
            "architecture": {"output_modalities": ["decisions"]}}));
        let both = model(json!({"id": "x", "status": {"value": "loaded"},
            "architecture": {"output_modalities": ["decisions", "text"]}}));
        assert!(!is_chat_model(&decision) && is_chat_model(&both) && is_chat_model(&loaded));
    }

    #[test]
    fn context_and_inputs() {
        let m = model(
            json!({"id": "g", "status": {"value": "loaded", "args": ["-m", "x", "-c", "32768"]},
            "architecture": {"input_modalities": ["text", "image"]}, "meta": {"n_ctx_train": 131072}}),
        );
        assert_eq!(context_window(&m), 32768);
        let chat = to_model(&m, "http://h:1", false);
        assert_eq!(chat.base_url, "http://h:1/v1");
        assert_eq!(chat.provider, "llama.cpp");
        assert_eq!((chat.context_window, chat.max_tokens), (32768, 32768));
        assert!(chat.supports_images() && !chat.reasoning);
        assert_eq!(chat.compat_str("maxTokensField"), Some("max_tokens"));
        let plain = model(json!({"id": "h", "status": {"value": "sleeping"}}));
        assert_eq!(context_window(&plain), 128_000);
        let thinking = to_model(&plain, "http://h:1", true);
        assert_eq!(
            thinking.compat_str("thinkingFormat"),
            Some("qwen-chat-template")
        );
        assert_eq!(
            thinking.supported_thinking_levels(),
            vec![
                pi_formats::message::ThinkingLevel::Off,
                pi_formats::message::ThinkingLevel::Medium
            ]
        );
    }
}
