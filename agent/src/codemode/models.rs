//! `models.*` for scripts (Pi's `createModelGlobals`): the session's model catalog by type,
//! and `classify()` / `generateImages()` for classifier and image models.
//!
//! This build's catalog has chat models only (no classifier or image providers), so the
//! catalog functions list chat models and find no classifier or image model, and the model
//! calls reject with Pi's texts for a model that is not of the wanted type.

use serde_json::Value;

use super::sandbox::SandboxGlobal;
use crate::tools::ToolSession;

const MODEL_TYPES: [&str; 3] = ["chat", "image", "classifier"];

/// The `models.*` globals, each taking its whole argument list.
pub fn model_globals() -> Vec<SandboxGlobal> {
    [
        "models.getModelsOfType",
        "models.getAvailableOfType",
        "models.getModelOfType",
        "models.classify",
        "models.generateImages",
    ]
    .iter()
    .map(|name| SandboxGlobal {
        name: (*name).to_string(),
        spread: true,
    })
    .collect()
}

/// Runs the global `name` with the script's arguments (`undefined` arrives as `null`).
pub fn call(
    session: Option<&dyn ToolSession>,
    name: &str,
    args: &[Value],
) -> Result<Option<Value>, String> {
    let arg = |i: usize| args.get(i).unwrap_or(&Value::Null);
    match name {
        "models.getModelsOfType" => {
            let kind = model_type(arg(0))?;
            let provider = provider(arg(1))?;
            Ok(Some(Value::Array(
                models_of_type(session, kind, provider)
                    .into_iter()
                    .map(|(info, _)| info)
                    .collect(),
            )))
        }
        "models.getAvailableOfType" => {
            let kind = model_type(arg(0))?;
            let provider = provider(arg(1))?;
            Ok(Some(Value::Array(
                models_of_type(session, kind, provider)
                    .into_iter()
                    .filter(|(_, available)| *available)
                    .map(|(info, _)| info)
                    .collect(),
            )))
        }
        "models.getModelOfType" => {
            let (Value::String(provider), Value::String(id)) = (arg(1), arg(2)) else {
                return Err(format!(
                    "models.getModelOfType(type, provider, id) expects three strings, got ({}). The provider and the id are separate arguments, for example models.getModelOfType(\"classifier\", \"typesafe\", \"jev-latest\").",
                    args.iter().map(describe_value).collect::<Vec<_>>().join(", ")
                ));
            };
            let kind = model_type(arg(0))?;
            Ok(model_of_type(session, kind, provider, id))
        }
        "models.classify" => Err(model_call_error(
            session,
            "models.classify",
            "classifier",
            arg(0),
        )),
        "models.generateImages" => Err(model_call_error(
            session,
            "models.generateImages",
            "image",
            arg(0),
        )),
        other => Err(format!("Unknown global {other}")),
    }
}

fn model_type(value: &Value) -> Result<&'static str, String> {
    MODEL_TYPES
        .iter()
        .find(|t| value.as_str() == Some(t))
        .copied()
        .ok_or_else(|| {
            format!("Unknown model type {value}. Use \"chat\", \"image\", or \"classifier\".")
        })
}

fn provider(value: &Value) -> Result<Option<&str>, String> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        _ => Err("provider must be a string".into()),
    }
}

/// The catalog entries of `kind` (optionally of one provider) as scripts see them, each
/// with whether its provider has credentials. Only chat models exist here.
fn models_of_type(
    session: Option<&dyn ToolSession>,
    kind: &str,
    provider: Option<&str>,
) -> Vec<(Value, bool)> {
    let Some(session) = session.filter(|_| kind == "chat") else {
        return Vec::new();
    };
    session
        .catalog()
        .into_iter()
        .filter(|m| provider.is_none_or(|p| m.provider == p))
        .map(|m| {
            let available = session.provider_has_credentials(&m.provider);
            (model_info(&m), available)
        })
        .collect()
}

fn model_of_type(
    session: Option<&dyn ToolSession>,
    kind: &str,
    provider: &str,
    id: &str,
) -> Option<Value> {
    let session = session.filter(|_| kind == "chat")?;
    session
        .catalog()
        .into_iter()
        .find(|m| m.provider == provider && m.id == id)
        .map(|m| model_info(&m))
}

/// A catalog entry without `headers`, which can carry credentials.
fn model_info(model: &crate::llm::Model) -> Value {
    let mut info = serde_json::to_value(model).unwrap_or(Value::Null);
    if let Some(object) = info.as_object_mut() {
        object.remove("headers");
    }
    info
}

/// Why `classify()` / `generateImages()` cannot run with `model`: it is no `{provider, id}`,
/// or no model of `kind` has that provider and id (none has here).
fn model_call_error(
    session: Option<&dyn ToolSession>,
    name: &str,
    kind: &str,
    model: &Value,
) -> String {
    let list_hint =
        format!("List the {kind} models you can use with models.getAvailableOfType(\"{kind}\").");
    let (Some(provider), Some(id)) = (
        model.get("provider").and_then(Value::as_str),
        model.get("id").and_then(Value::as_str),
    ) else {
        let undefined_hint = if model.is_null() {
            " models.getModelOfType() returns undefined for an unknown provider or id."
        } else {
            ""
        };
        return format!(
            "{name}() expects {} model as its first argument, got {}.{undefined_hint} {list_hint}",
            with_article(kind),
            describe_value(model)
        );
    };
    let reference = format!("{provider}/{id}");
    let actual = MODEL_TYPES
        .iter()
        .find(|other| **other != kind && model_of_type(session, other, provider, id).is_some());
    match actual {
        Some(actual) => format!(
            "\"{reference}\" is {} model, not {} model. {list_hint}",
            with_article(actual),
            with_article(kind)
        ),
        None => format!("Unknown {kind} model \"{reference}\". {list_hint}"),
    }
}

/// `an image`, `a classifier`.
fn with_article(word: &str) -> String {
    let article = if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {word}")
}

/// A script value in an error message: `null`, `a string`, `an array`, or its keys.
fn describe_value(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Array(items) if items.is_empty() => "an empty array".into(),
        Value::Array(_) => "an array".into(),
        Value::Object(map) if map.is_empty() => "{}".into(),
        Value::Object(map) => {
            let keys: Vec<&str> = map.keys().take(6).map(String::as_str).collect();
            let more = if map.len() > 6 { ", ..." } else { "" };
            format!("{{ {}{more} }}", keys.join(", "))
        }
        Value::String(_) => "a string".into(),
        Value::Number(_) => "a number".into(),
        Value::Bool(_) => "a boolean".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn argument_errors_use_pis_texts() {
        assert_eq!(
            call(None, "models.getModelsOfType", &[json!("video")]).unwrap_err(),
            "Unknown model type \"video\". Use \"chat\", \"image\", or \"classifier\"."
        );
        assert_eq!(
            call(None, "models.getModelOfType", &[json!("chat"), json!("a/b")]).unwrap_err(),
            "models.getModelOfType(type, provider, id) expects three strings, got (a string, a string). The provider and the id are separate arguments, for example models.getModelOfType(\"classifier\", \"typesafe\", \"jev-latest\")."
        );
        assert_eq!(
            call(None, "models.classify", &[Value::Null, json!({})]).unwrap_err(),
            "models.classify() expects a classifier model as its first argument, got null. models.getModelOfType() returns undefined for an unknown provider or id. List the classifier models you can use with models.getAvailableOfType(\"classifier\")."
        );
        assert_eq!(
            call(None, "models.generateImages", &[json!({"provider": "x", "id": "y"})]).unwrap_err(),
            "Unknown image model \"x/y\". List the image models you can use with models.getAvailableOfType(\"image\")."
        );
        assert_eq!(
            call(None, "models.getAvailableOfType", &[json!("image")]).unwrap(),
            Some(json!([]))
        );
    }
}
