//! Which files a stretch of conversation read and changed, carried from one
//! summary to the next so a long session keeps its file list.

use crate::js::{self, utf16_cmp};
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::Value;
use std::collections::BTreeSet;

/// Paths touched by `read`, `write` and `edit` tool calls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileOps {
    pub read: BTreeSet<String>,
    pub written: BTreeSet<String>,
    pub edited: BTreeSet<String>,
}

/// Sorted the way JavaScript sorts strings (UTF-16 code units).
fn js_sorted<'a>(paths: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let mut v: Vec<String> = paths.into_iter().cloned().collect();
    v.sort_by(|a, b| utf16_cmp(a, b));
    v.dedup();
    v
}

impl Serialize for FileOps {
    /// `{read, written, edited}` as sorted arrays, the shape Pi's sets take once
    /// flattened to JSON.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("FileOps", 3)?;
        st.serialize_field("read", &js_sorted(&self.read))?;
        st.serialize_field("written", &js_sorted(&self.written))?;
        st.serialize_field("edited", &js_sorted(&self.edited))?;
        st.end()
    }
}

/// What a summary reports: files only read, and files modified.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileLists {
    pub read_files: Vec<String>,
    pub modified_files: Vec<String>,
}

impl FileOps {
    /// Records one tool call's path, if the tool is one that touches files.
    fn add(&mut self, tool_name: Option<&Value>, args: Option<&Value>) {
        let Some(path) = args
            .and_then(|a| a.get("path"))
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
        else {
            return;
        };
        let set = match tool_name.and_then(Value::as_str) {
            Some("read") => &mut self.read,
            Some("write") => &mut self.written,
            Some("edit") => &mut self.edited,
            _ => return,
        };
        set.insert(path.to_string());
    }

    /// Pi's `extractFileOpsFromMessage`: the tool calls of an assistant message,
    /// or the calls a code-mode script made, recorded on its tool result.
    pub fn add_from_message(&mut self, message: &Value) {
        match message.get("role").and_then(Value::as_str) {
            Some("toolResult") => {
                let calls = message
                    .get("nestedCalls")
                    .and_then(|n| n.get("calls"))
                    .and_then(Value::as_array);
                for call in calls.into_iter().flatten() {
                    self.add(call.get("name"), call.get("arguments"));
                }
            }
            Some("assistant") => {
                let Some(blocks) = message.get("content").and_then(Value::as_array) else {
                    return;
                };
                for block in blocks {
                    let Some(obj) = block.as_object() else {
                        continue;
                    };
                    if obj.get("type").and_then(Value::as_str) != Some("toolCall") {
                        continue;
                    }
                    if !obj.contains_key("arguments") || !obj.contains_key("name") {
                        continue;
                    }
                    self.add(obj.get("name"), obj.get("arguments"));
                }
            }
            _ => {}
        }
    }

    /// Folds in the file lists a previous summary recorded in its `details`
    /// (only summaries Pi generated itself: an extension's `details` is its own
    /// business). Modified files count as edited.
    pub fn add_from_details(&mut self, entry: &Value) {
        if js::truthy(entry.get("fromHook")) {
            return;
        }
        let Some(details) = entry.get("details").filter(|d| js::truthy(Some(d))) else {
            return;
        };
        let strings = |key: &str| {
            details
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        self.read.extend(strings("readFiles"));
        self.edited.extend(strings("modifiedFiles"));
    }

    /// Pi's `computeFileLists`: modified = edited ∪ written; read = read minus modified.
    pub fn file_lists(&self) -> FileLists {
        let modified: BTreeSet<&String> = self.edited.iter().chain(&self.written).collect();
        FileLists {
            read_files: js_sorted(self.read.iter().filter(|f| !modified.contains(f))),
            modified_files: js_sorted(modified),
        }
    }
}

/// Pi's `computeFileLists`.
pub fn compute_file_lists(ops: &FileOps) -> FileLists {
    ops.file_lists()
}

/// Pi's `formatFileOperations`: the `<read-files>` / `<modified-files>` blocks
/// appended to a summary (empty when there are none).
pub fn format_file_operations(read_files: &[String], modified_files: &[String]) -> String {
    let mut sections = Vec::new();
    if !read_files.is_empty() {
        sections.push(format!(
            "<read-files>\n{}\n</read-files>",
            read_files.join("\n")
        ));
    }
    if !modified_files.is_empty() {
        sections.push(format!(
            "<modified-files>\n{}\n</modified-files>",
            modified_files.join("\n")
        ));
    }
    if sections.is_empty() {
        return String::new();
    }
    format!("\n\n{}", sections.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_split_read_from_modified() {
        let mut ops = FileOps::default();
        ops.add_from_message(&json!({"role":"assistant","content":[
            {"type":"toolCall","name":"read","arguments":{"path":"b"}},
            {"type":"toolCall","name":"read","arguments":{"path":"a"}},
            {"type":"toolCall","name":"edit","arguments":{"path":"a"}},
            {"type":"toolCall","name":"write","arguments":{"path":"c"}},
            {"type":"toolCall","name":"bash","arguments":{"path":"d"}},
            {"type":"toolCall","name":"read","arguments":{"path":""}}]}));
        ops.add_from_message(&json!({"role":"toolResult","nestedCalls":{"calls":[
            {"name":"read","arguments":{"path":"e"}}]}}));
        let lists = ops.file_lists();
        assert_eq!(lists.read_files, ["b", "e"]);
        assert_eq!(lists.modified_files, ["a", "c"]);
        assert_eq!(
            format_file_operations(&lists.read_files, &lists.modified_files),
            "\n\n<read-files>\nb\ne\n</read-files>\n\n<modified-files>\na\nc\n</modified-files>"
        );
    }

    #[test]
    fn details_of_hook_summaries_are_ignored() {
        let mut ops = FileOps::default();
        ops.add_from_details(&json!({"fromHook":true,"details":{"readFiles":["x"]}}));
        assert!(ops.read.is_empty());
        ops.add_from_details(&json!({"details":{"readFiles":["x"],"modifiedFiles":["y"]}}));
        assert_eq!(ops.edited.iter().collect::<Vec<_>>(), ["y"]);
    }
}
