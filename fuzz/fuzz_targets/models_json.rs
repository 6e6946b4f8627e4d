//! models.json as a user (or a tool that writes it) might leave it.
//!
//! API keys are never resolved from the registry here: a fuzzed `"!cmd"` value
//! would run a shell command. `resolve_config_value` is fuzzed on its own, with
//! `!` inputs left out for the same reason.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pi_agent::llm::models_json::{parse_models_json, resolve_config_value};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(registry) = parse_models_json(text, Path::new("models.json")) {
        for model in registry.models.iter().take(64) {
            assert!(registry.find(&model.provider, &model.id).is_some());
        }
    }
    // `!command` values are never run here: the env lookup is the only resolver.
    if !text.starts_with('!') {
        let _ = resolve_config_value(text, &|name| Some(name.to_string()));
    }
});
