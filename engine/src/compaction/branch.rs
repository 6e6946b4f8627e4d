//! Branch summaries: what to summarize when the user navigates the session
//! tree away from where they are (Pi 1.6's `collectEntriesForBranchSummary`,
//! `prepareBranchEntries` and the `navigateTree` leaf rule).

use super::file_ops::FileOps;
use super::tokens::estimate_tokens;
use crate::context::{entry_messages, project_entry};
use crate::js;
use crate::session::{EntryIdx, Session};
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// The entries being left, oldest first, and where the two branches meet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BranchEntries {
    pub entries: Vec<Value>,
    /// The deepest entry on both the old and the target branch (`None`: they
    /// share no entry, or there was no old position).
    pub common_ancestor_id: Option<String>,
}

fn branch_ids(session: &Session, from: Option<EntryIdx>) -> Vec<Option<String>> {
    session
        .path_to(from)
        .entries
        .iter()
        .map(|&i| session.entry(i).id.as_deref().map(str::to_string))
        .collect()
}

/// Pi's `collectEntriesForBranchSummary`: walks from `old_leaf_id` up to the
/// common ancestor with `target_id`. Compactions on the way are included (their
/// summaries are context too). A parent cycle ends the walk instead of looping.
pub fn collect_entries_for_branch_summary(
    session: &Session,
    old_leaf_id: Option<&str>,
    target_id: &str,
) -> BranchEntries {
    let Some(old_leaf_id) = old_leaf_id.filter(|id| !id.is_empty()) else {
        return BranchEntries::default();
    };
    let old_path: HashSet<Option<String>> = branch_ids(session, session.find(old_leaf_id))
        .into_iter()
        .collect();
    let target_path = branch_ids(session, session.find(target_id));
    let common_ancestor_id = target_path
        .iter()
        .rev()
        .find(|id| old_path.contains(*id))
        .cloned()
        .flatten();
    let mut entries = Vec::new();
    let mut seen = HashSet::new();
    let mut current = Some(old_leaf_id.to_string());
    while let Some(id) = current.filter(|id| !id.is_empty()) {
        if common_ancestor_id.as_deref() == Some(id.as_str()) {
            break;
        }
        let Some(idx) = session.find(&id) else { break };
        if !seen.insert(idx) {
            break;
        }
        entries.push(session.entry_value(idx));
        current = session.entry(idx).parent.id().map(str::to_string);
    }
    entries.reverse();
    BranchEntries {
        entries,
        common_ancestor_id,
    }
}

/// Messages chosen for a branch summary, and the files the branch touched.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BranchPreparation {
    /// Oldest first.
    pub messages: Vec<Value>,
    pub file_ops: FileOps,
    pub total_tokens: u64,
}

fn kind_of(entry: &Value) -> &str {
    entry.get("type").and_then(Value::as_str).unwrap_or("")
}

/// The one message an entry stands for in a branch summary. Tool results are
/// left out (their call says what happened); summaries count as their summary
/// message; a context edit on the entry applies.
fn branch_message(entry: &Value, edit: Option<&Value>) -> Option<Value> {
    match kind_of(entry) {
        "message" => {
            let message = entry.get("message")?;
            if message.get("role").and_then(Value::as_str) == Some("toolResult") {
                return None;
            }
            match edit {
                Some(edit) => project_entry(entry, Some(edit)).into_iter().next(),
                None => Some(message.clone()),
            }
        }
        "custom_message" => match edit {
            Some(edit) => project_entry(entry, Some(edit)).into_iter().next(),
            None => {
                let mut message = entry_messages(entry).into_iter().next()?;
                // Unlike the context builder, Pi passes a missing content through here.
                if let Some(obj) = message.as_object_mut() {
                    match entry.get("content") {
                        None => {
                            obj.shift_remove("content");
                        }
                        Some(Value::Null) => {
                            obj.insert("content".into(), Value::Null);
                        }
                        Some(_) => {}
                    }
                }
                Some(message)
            }
        },
        // Built whatever the summary holds (the context builder skips empty
        // ones); the placeholder only borrows its message construction.
        "branch_summary" => {
            let mut stand_in = entry.clone();
            stand_in
                .as_object_mut()?
                .insert("summary".into(), Value::from("x"));
            let mut message = entry_messages(&stand_in).into_iter().next()?;
            let obj = message.as_object_mut()?;
            match entry.get("summary") {
                Some(summary) => obj.insert("summary".into(), summary.clone()),
                None => obj.shift_remove("summary"),
            };
            Some(message)
        }
        // The summary message only: a compaction's system message is not conversation.
        "compaction" => entry_messages(entry).pop(),
        _ => None,
    }
}

/// Pi's `prepareBranchEntries`: walks from the newest entry back, taking
/// messages while they fit in `token_budget` (0: no limit). A summary that does
/// not fit is still taken while less than 90% of the budget is used, since it
/// stands for a lot of history. File operations come from every entry, fitting
/// or not, including the lists earlier branch summaries recorded.
pub fn prepare_branch_entries(entries: &[Value], token_budget: u64) -> BranchPreparation {
    let mut file_ops = FileOps::default();
    for entry in entries.iter().filter(|e| kind_of(e) == "branch_summary") {
        file_ops.add_from_details(entry);
    }
    // The latest edit per target wins, as in the context builder.
    let mut edits: HashMap<Option<&str>, &Value> = HashMap::new();
    for entry in entries.iter().filter(|e| kind_of(e) == "context_edit") {
        edits.insert(entry.get("targetId").and_then(Value::as_str), entry);
    }
    let mut messages = Vec::new();
    let mut total_tokens = 0u64;
    for entry in entries.iter().rev() {
        let id = entry.get("id").and_then(Value::as_str);
        let Some(message) = branch_message(entry, edits.get(&id).copied()) else {
            continue;
        };
        file_ops.add_from_message(&message);
        let tokens = estimate_tokens(&message);
        if token_budget > 0 && total_tokens + tokens > token_budget {
            let is_summary = matches!(kind_of(entry), "compaction" | "branch_summary");
            if is_summary && (total_tokens as f64) < token_budget as f64 * 0.9 {
                messages.push(message);
                total_tokens += tokens;
            }
            break;
        }
        messages.push(message);
        total_tokens += tokens;
    }
    messages.reverse();
    BranchPreparation {
        messages,
        file_ops,
        total_tokens,
    }
}

/// Where the leaf goes when navigating to an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NavigationTarget {
    /// The new leaf (`None`: before the root, an empty branch).
    pub new_leaf_id: Option<String>,
    /// Text to put back in the editor, for a target that is the user's own input.
    pub editor_text: Option<String>,
}

/// Pi's `navigateTree` rule: selecting a user message (or a custom message)
/// means "edit and resend it", so the leaf moves to its parent and its text
/// goes to the editor; any other entry becomes the leaf itself.
pub fn navigation_target(target: &Value) -> NavigationTarget {
    let parent = || {
        target
            .get("parentId")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
            .map(str::to_string)
    };
    let is_user = kind_of(target) == "message"
        && target
            .get("message")
            .and_then(|m| m.get("role"))
            .and_then(Value::as_str)
            == Some("user");
    if is_user {
        let content = target.get("message").and_then(|m| m.get("content"));
        return NavigationTarget {
            new_leaf_id: parent(),
            editor_text: Some(js::content_text(content, "")),
        };
    }
    if kind_of(target) == "custom_message" {
        return NavigationTarget {
            new_leaf_id: parent(),
            editor_text: Some(js::content_text(target.get("content"), "")),
        };
    }
    NavigationTarget {
        new_leaf_id: target.get("id").and_then(Value::as_str).map(str::to_string),
        editor_text: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(id: &str, role: &str, text: &str) -> Value {
        json!({"type":"message","id":id,"parentId":null,"timestamp":"2026-01-01T00:00:00.000Z",
               "message":{"role":role,"content":[{"type":"text","text":text}],"timestamp":1}})
    }

    #[test]
    fn budget_keeps_newest_and_squeezes_in_summaries() {
        let entries = vec![
            json!({"type":"branch_summary","id":"s","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z",
                   "fromId":"z","summary":"x".repeat(40),"details":{"readFiles":["r"],"modifiedFiles":["m"]}}),
            msg("a", "user", &"a".repeat(40)),
            msg("t", "toolResult", "ignored"),
            msg("b", "assistant", &"b".repeat(40)),
        ];
        let p = prepare_branch_entries(&entries, 25);
        // b (10) + a (10) = 20 fit; the summary (10) exceeds 25 but 20 < 22.5.
        assert_eq!(p.messages.len(), 3);
        assert_eq!(p.messages[0]["role"], "branchSummary");
        assert_eq!(p.total_tokens, 30);
        assert_eq!(p.file_ops.file_lists().modified_files, ["m"]);
        let p = prepare_branch_entries(&entries, 15);
        assert_eq!(p.messages.len(), 1);
        assert_eq!(p.file_ops.file_lists().read_files, ["r"]);
    }

    #[test]
    fn context_edits_apply_to_branch_messages() {
        let entries = vec![
            msg("a", "user", "secret"),
            json!({"type":"context_edit","id":"e","parentId":"a","targetId":"a","replacement":null}),
            msg("b", "assistant", "kept"),
        ];
        let p = prepare_branch_entries(&entries, 0);
        assert_eq!(p.messages.len(), 1);
        assert_eq!(p.messages[0]["role"], "assistant");
    }

    #[test]
    fn navigation_rule() {
        let mut user = msg("u", "user", "again");
        user["parentId"] = json!("p");
        assert_eq!(
            navigation_target(&user),
            NavigationTarget {
                new_leaf_id: Some("p".into()),
                editor_text: Some("again".into())
            }
        );
        let root_custom = json!({"type":"custom_message","id":"c","parentId":null,"customType":"x","content":"hi","display":true});
        assert_eq!(
            navigation_target(&root_custom),
            NavigationTarget {
                new_leaf_id: None,
                editor_text: Some("hi".into())
            }
        );
        assert_eq!(
            navigation_target(&msg("a", "assistant", "r"))
                .new_leaf_id
                .as_deref(),
            Some("a")
        );
    }
}
