//! Virtual models registered by extensions (`pi.registerVirtualModel`): their declarations
//! become catalog entries; their `route` stays in the sidecar and runs per request.

use pi_formats::message::ThinkingLevel;
use serde_json::Value;

use crate::llm::{InputKind, Model, ModelRegistry};

/// The catalog entry of a declaration (`{provider, id, name, thinkingLevels?,
/// contextWindow?, maxTokens?, input?}`), as Pi's `createVirtualModel` builds it: levels
/// default to `off`, input to text and images, unset limits are 0 (unknown).
pub fn virtual_model_of(declaration: &Value) -> Option<Model> {
    let text = |k: &str| declaration.get(k).and_then(Value::as_str);
    let provider = text("provider").filter(|p| !p.is_empty())?;
    let id = text("id").filter(|i| !i.is_empty())?;
    let levels: Vec<ThinkingLevel> = match declaration.get("thinkingLevels") {
        Some(Value::Array(levels)) => levels
            .iter()
            .filter_map(|l| l.as_str().and_then(ThinkingLevel::parse))
            .collect(),
        _ => vec![ThinkingLevel::Off],
    };
    let input = match declaration.get("input") {
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(|k| serde_json::from_value::<InputKind>(k.clone()).ok())
            .collect(),
        _ => vec![InputKind::Text, InputKind::Image],
    };
    let limit = |k: &str| declaration.get(k).and_then(Value::as_u64).unwrap_or(0);
    Some(Model::new_virtual(
        provider,
        id,
        text("name").unwrap_or(id),
        &levels,
        input,
        limit("contextWindow"),
        limit("maxTokens"),
    ))
}

/// `registry` with exactly the virtual models `declarations` describe.
pub fn with_virtual_models(mut registry: ModelRegistry, declarations: &[Value]) -> ModelRegistry {
    let current: Vec<(String, String)> = registry
        .models
        .iter()
        .filter(|m| m.is_virtual())
        .map(|m| (m.provider.clone(), m.id.clone()))
        .collect();
    for (provider, id) in current {
        registry.remove_virtual(&provider, &id);
    }
    for model in declarations.iter().filter_map(virtual_model_of) {
        registry.add_virtual(model);
    }
    registry
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_declaration_becomes_a_catalog_entry_like_pis() {
        let m = virtual_model_of(&json!({
            "provider": "router", "id": "auto", "name": "Auto",
            "thinkingLevels": ["low", "high"], "contextWindow": 200000
        }))
        .unwrap();
        assert!(m.is_virtual());
        assert!(m.reasoning);
        assert_eq!(
            m.supported_thinking_levels(),
            vec![ThinkingLevel::Low, ThinkingLevel::High]
        );
        assert_eq!(
            m.clamp_thinking_level(ThinkingLevel::Medium),
            ThinkingLevel::High
        );
        assert_eq!((m.context_window, m.max_tokens), (200_000, 0));
        assert_eq!(m.input, vec![InputKind::Text, InputKind::Image]);

        let plain = virtual_model_of(&json!({"provider": "r", "id": "x"})).unwrap();
        assert_eq!(plain.name, "x");
        assert!(!plain.reasoning);
        assert_eq!(plain.supported_thinking_levels(), vec![ThinkingLevel::Off]);
        assert!(virtual_model_of(&json!({"provider": "r"})).is_none());
    }

    #[test]
    fn a_virtual_model_hides_a_physical_one_and_leaves_it_when_removed() {
        let builtin = ModelRegistry::builtin();
        let physical = builtin
            .find("anthropic", "claude-sonnet-4-5")
            .cloned()
            .unwrap();
        let routed = with_virtual_models(
            builtin.clone(),
            &[
                json!({"provider": "anthropic", "id": "claude-sonnet-4-5"}),
                json!({"provider": "router", "id": "auto"}),
            ],
        );
        assert!(routed
            .find("anthropic", "claude-sonnet-4-5")
            .unwrap()
            .is_virtual());
        assert!(routed.is_virtual_only_provider("router"));
        assert!(!routed.is_virtual_only_provider("anthropic"));
        let again = with_virtual_models(routed, &[json!({"provider": "router", "id": "auto"})]);
        assert_eq!(
            again.find("anthropic", "claude-sonnet-4-5"),
            Some(&physical)
        );
        assert!(again.find("router", "auto").is_some());
    }
}
