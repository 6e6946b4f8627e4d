//! The `edit` tool: exact-text replacements, several disjoint ones per call.

use std::sync::OnceLock;

use serde_json::json;
use serde_json::Map;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::edit_diff::apply_edits_to_normalized_content;
use super::edit_diff::apply_replacements_to_original;
use super::edit_diff::generate_edit_diff;
use super::edit_diff::normalize_to_lf;
use super::edit_diff::EditDiff;
use super::edit_diff::EditSpec;
use super::fs_util::access;
use super::fs_util::errno_name_and_text;
use super::fs_util::node_path_error;
use super::mutation_queue::lock_file;
use super::paths::resolve_to_cwd;
use super::Tool;
use super::ToolContext;
use super::ToolError;
use super::ToolOutput;
use super::ToolUpdateFn;

/// Pi's `edit` tool (1.6.0: `edits[]`, with legacy top-level `oldText`/`newText` folded in).
#[derive(Debug, Default)]
pub struct EditTool;

fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        json!({
            "type": "object",
            "required": ["path", "edits"],
            "properties": {
                "path": {"type": "string", "description": "Path to the file to edit (relative or absolute)"},
                "edits": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["oldText", "newText"],
                        "properties": {
                            "oldText": {"type": "string", "description": "Exact text for one targeted replacement. It must be unique in the original file and must not overlap with any other edits[].oldText in the same call."},
                            "newText": {"type": "string", "description": "Replacement text for this targeted edit."}
                        }
                    },
                    "description": "One or more targeted replacements. Each edit is matched against the original file, not incrementally. Do not include overlapping or nested edits. If two changes touch the same block or nearby lines, merge them into one edit instead."
                }
            }
        })
    })
}

fn is_single_edit(value: &Value) -> bool {
    value.get("oldText").is_some_and(Value::is_string)
        && value.get("newText").is_some_and(Value::is_string)
}

/// Pi's `prepareEditArguments`: `edits` sent as a JSON string or as one object becomes an array,
/// and legacy top-level `oldText`/`newText` becomes one more edit.
fn prepare_edit_arguments(args: Value) -> Value {
    let Value::Object(mut map) = args else {
        return args;
    };
    match map.get("edits") {
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(parsed @ Value::Array(_)) => {
                map.insert("edits".to_string(), parsed);
            }
            Ok(parsed) if is_single_edit(&parsed) => {
                map.insert("edits".to_string(), Value::Array(vec![parsed]));
            }
            _ => {}
        },
        Some(single) if is_single_edit(single) => {
            let single = single.clone();
            map.insert("edits".to_string(), Value::Array(vec![single]));
        }
        _ => {}
    }
    let legacy = (
        map.get("oldText").and_then(Value::as_str),
        map.get("newText").and_then(Value::as_str),
    );
    let (Some(old_text), Some(new_text)) = legacy else {
        return Value::Object(map);
    };
    let legacy_edit = json!({ "oldText": old_text, "newText": new_text });
    let mut edits = match map.get("edits") {
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    edits.push(legacy_edit);
    let mut out = Map::new();
    for (key, value) in map {
        if key != "oldText" && key != "newText" {
            out.insert(key, value);
        }
    }
    out.insert("edits".to_string(), Value::Array(edits));
    Value::Object(out)
}

fn parse_edits(args: &Value) -> Result<Vec<EditSpec>, ToolError> {
    let invalid = || {
        ToolError::new("Edit tool input is invalid. edits must contain at least one replacement.")
    };
    let items = args
        .get("edits")
        .and_then(Value::as_array)
        .filter(|items| !items.is_empty())
        .ok_or_else(invalid)?;
    Ok(items
        .iter()
        .map(|item| EditSpec {
            old_text: item
                .get("oldText")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            new_text: item
                .get("newText")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        })
        .collect())
}

/// The edit minus the file system: the file's new text and the diff details.
fn apply_to_text(
    raw: &str,
    edits: &[EditSpec],
    path: &str,
) -> Result<(String, EditDiff), ToolError> {
    // The model never includes an invisible BOM in oldText; match without it, keep it on write.
    let (bom, content) = match raw.strip_prefix('\u{FEFF}') {
        Some(rest) => ("\u{FEFF}", rest),
        None => ("", raw),
    };
    let normalized = normalize_to_lf(content);
    let applied = apply_edits_to_normalized_content(&normalized, edits, path)?;
    let diff = generate_edit_diff(
        path,
        &applied.base_content,
        &applied.new_content,
        &applied.replacements,
    );
    // Splice into the original so untouched lines keep their line endings; without any CR the
    // normalized result already is the final text.
    let body = if content == normalized {
        applied.new_content
    } else {
        apply_replacements_to_original(content, &applied.replacements)
    };
    Ok((format!("{bom}{body}"), diff))
}

/// What the edit tool would write for `args` over a file whose text is `raw`, and the
/// display diff, without touching the file system: argument preparation, matching (exact,
/// then fuzzy), splicing and diffing exactly as [`EditTool`] runs them.
#[doc(hidden)] // For the fuzz targets in fuzz/; not part of the tool API.
pub fn edit_text(raw: &str, args: Value, path: &str) -> Result<(String, String), ToolError> {
    let args = prepare_edit_arguments(args);
    let edits = parse_edits(&args)?;
    apply_to_text(raw, &edits, path).map(|(text, diff)| (text, diff.diff))
}

#[async_trait::async_trait]
impl Tool for EditTool {
    fn name(&self) -> &str {
        "edit"
    }

    fn description(&self) -> &str {
        "Edit a single file using exact text replacement. Every edits[].oldText must match a unique, non-overlapping region of the original file. If two changes affect the same block or nearby lines, merge them into one edit instead of emitting overlapping edits. Do not include large unchanged regions just to connect distant changes."
    }

    fn parameters(&self) -> &Value {
        schema()
    }

    fn prefers_constrained_sampling(&self) -> bool {
        true
    }

    fn prompt_snippet(&self) -> Option<&str> {
        Some("Make precise file edits with exact text replacement, including multiple disjoint edits in one call")
    }

    fn prompt_guidelines(&self) -> &[&str] {
        &[
            "Use edit for targeted changes. Batch changes to one file in a single call.",
            "Each edits[].oldText must exactly and uniquely match the original file. Keep matches short and non-overlapping; merge nearby changes without including large unchanged regions.",
        ]
    }

    fn prepare_arguments(&self, args: Value) -> Value {
        prepare_edit_arguments(args)
    }

    async fn execute(
        &self,
        _call_id: &str,
        args: Value,
        ctx: &ToolContext,
        cancel: CancellationToken,
        _on_update: ToolUpdateFn<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let edits = parse_edits(&args)?;
        let path = args.get("path").and_then(Value::as_str).unwrap_or("");
        let absolute = resolve_to_cwd(path, &ctx.cwd);
        let _guard = lock_file(&absolute).await;
        // Abort is checked between steps, never mid-write (see the write tool).
        let check = || {
            if cancel.is_cancelled() {
                Err(ToolError::aborted())
            } else {
                Ok(())
            }
        };
        check()?;
        if let Err(error) = access(&absolute, libc::R_OK | libc::W_OK) {
            check()?;
            let (code, _) = errno_name_and_text(&error);
            return Err(ToolError::new(format!(
                "Could not edit file: {path}. Error code: {code}."
            )));
        }
        check()?;
        let bytes = tokio::fs::read(&absolute)
            .await
            .map_err(|e| ToolError::new(node_path_error(&e, "open", &absolute)))?;
        let raw = String::from_utf8_lossy(&bytes);
        check()?;
        // Diff before writing, so nothing can fail after the file changed.
        let (text, diff) = apply_to_text(&raw, &edits, path)?;
        check()?;
        tokio::fs::write(&absolute, text)
            .await
            .map_err(|e| ToolError::new(node_path_error(&e, "open", &absolute)))?;
        check()?;
        let mut details = Map::new();
        details.insert("diff".to_string(), Value::String(diff.diff));
        details.insert("patch".to_string(), Value::String(diff.patch));
        if let Some(line) = diff.first_changed_line {
            details.insert("firstChangedLine".to_string(), Value::from(line));
        }
        let mut output = ToolOutput::text(format!(
            "Successfully replaced {} block(s) in {path}.",
            edits.len()
        ));
        output.details = Some(Value::Object(details));
        Ok(output)
    }
}

#[cfg(test)]
#[path = "edit_tests.rs"]
mod tests;
