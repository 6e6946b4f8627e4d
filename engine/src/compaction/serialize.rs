//! Turning messages into the text a summarizer reads, and the prompts around it.
//!
//! The conversation is flattened to tagged plain text (`[User]: …`) rather than
//! sent as chat turns, so the summarizing model describes it instead of
//! continuing it. The prompt texts are this project's own; their structure
//! (sections, tags, where the conversation and previous summary go) follows Pi
//! 1.6 so summaries stay interchangeable between the two programs.

use crate::js::{self, slice_head, utf16_len};
use serde_json::Value;

/// Longest tool result kept in a serialized conversation, in UTF-16 code units.
pub const TOOL_RESULT_MAX_CHARS: usize = 2000;

/// Pi's `truncateForSummary`: the head of `text` and a note of how much was cut.
fn truncate_for_summary(text: &str, max_chars: usize) -> String {
    let len = utf16_len(text);
    if len <= max_chars {
        return text.to_string();
    }
    format!(
        "{}\n\n[... {} more characters truncated]",
        slice_head(text, max_chars),
        len - max_chars
    )
}

/// `name(key=<JSON>, …)` for one tool call.
fn format_tool_call(block: &Value) -> String {
    let args = match block.get("arguments") {
        Some(Value::Object(map)) => js::object_keys(map)
            .into_iter()
            .map(|k| format!("{k}={}", js::stringify(&map[k.as_str()])))
            .collect::<Vec<_>>()
            .join(", "),
        _ => String::new(),
    };
    format!("{}({args})", js::to_js_string(block.get("name")))
}

/// Pi's `serializeConversation` over provider-level messages (run
/// [`crate::context::convert_to_llm`] first). Thinking is left out: it is often
/// not part of what the model saw, and can be larger than the context itself.
pub fn serialize_conversation<'a>(messages: impl IntoIterator<Item = &'a Value>) -> String {
    let mut text = ConversationText::default();
    messages.into_iter().for_each(|m| text.push(m));
    text.finish()
}

/// [`serialize_conversation`] one message at a time, so a huge span is held only as
/// the text it becomes, never also as its messages.
#[derive(Debug, Default)]
pub struct ConversationText {
    text: String,
    /// Whether any message produced a part (parts are separated by a blank line).
    any: bool,
}

impl ConversationText {
    /// Appends one provider-level message's parts.
    pub fn push(&mut self, message: &Value) {
        let mut parts: Vec<String> = Vec::new();
        match message.get("role").and_then(Value::as_str) {
            Some("user") => {
                let text = js::content_text(message.get("content"), "");
                if !text.is_empty() {
                    parts.push(format!("[User]: {text}"));
                }
            }
            Some("assistant") => {
                let blocks = message
                    .get("content")
                    .and_then(Value::as_array)
                    .map(Vec::as_slice)
                    .unwrap_or(&[]);
                let block_type = |b: &Value| b.get("type").and_then(Value::as_str) == Some("text");
                let calls: Vec<String> = blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"))
                    .map(format_tool_call)
                    .collect();
                if blocks.iter().any(block_type) {
                    let text = js::content_text(message.get("content"), "\n");
                    parts.push(format!("[Assistant]: {text}"));
                }
                if !calls.is_empty() {
                    parts.push(format!("[Assistant tool calls]: {}", calls.join("; ")));
                }
            }
            Some("toolResult") => {
                let text = js::content_text(message.get("content"), "");
                if !text.is_empty() {
                    parts.push(format!(
                        "[Tool result]: {}",
                        truncate_for_summary(&text, TOOL_RESULT_MAX_CHARS)
                    ));
                }
            }
            _ => {}
        }
        for part in parts {
            if self.any {
                self.text.push_str("\n\n");
            }
            self.text.push_str(&part);
            self.any = true;
        }
    }

    pub fn finish(self) -> String {
        self.text
    }
}

/// System prompt for every summarization request.
pub const SUMMARIZATION_SYSTEM_PROMPT: &str = "\
You summarize conversations between a user and an AI coding assistant. Read the \
conversation you are given and write a structured summary in exactly the format \
requested.

Do not carry the conversation on and do not answer anything asked in it. Reply \
with the structured summary and nothing else.";

/// First-time summary of a stretch of conversation.
const HISTORY_PROMPT: &str = "\
The conversation above is to be condensed into a structured checkpoint. Another \
model will pick the work up from this checkpoint alone.

Answer in EXACTLY this format:

## Goal
[What the user wants to achieve; list several goals if the session covers several tasks.]

## Constraints & Preferences
- [Requirements, constraints or preferences the user stated]
- [Or \"(none)\" if there were none]

## Progress
### Done
- [x] [Finished tasks and changes]

### In Progress
- [ ] [Work under way]

### Blocked
- [What stops progress, if anything]

## Key Decisions
- **[Decision]**: [Why, in a few words]

## Next Steps
1. [What to do next, in order]

## Critical Context
- [Data, examples or references needed to go on]
- [Or \"(none)\" if nothing applies]

Be brief in every section. Keep file paths, function names and error messages exactly as written.";

/// Folding new messages into an existing summary.
const UPDATE_PROMPT: &str = "\
The conversation above holds NEW messages. Merge them into the existing summary \
given in the <previous-summary> tags.

Rules:
- KEEP everything the previous summary says
- ADD the new progress, decisions and context
- MOVE items from \"In Progress\" to \"Done\" once they are finished
- REVISE \"Next Steps\" to match what has been done
- KEEP file paths, function names and error messages exactly as written
- DROP only what no longer matters

Answer in EXACTLY this format:

## Goal
[Earlier goals, plus any new ones if the task grew]

## Constraints & Preferences
- [Earlier ones, plus any newly stated]

## Progress
### Done
- [x] [Items done before AND items finished now]

### In Progress
- [ ] [Work under way, as of now]

### Blocked
- [What blocks progress now; drop what was resolved]

## Key Decisions
- **[Decision]**: [Why, in a few words] (keep earlier ones, add new ones)

## Next Steps
1. [What to do next, given where things stand]

## Critical Context
- [Earlier context that still matters, plus anything new]

Be brief in every section. Keep file paths, function names and error messages exactly as written.";

/// Summary of the beginning of a turn whose end is kept verbatim.
const TURN_PREFIX_PROMPT: &str = "\
The messages above open a turn of a longer conversation. The rest of that turn \
is kept word for word elsewhere and must not be reconstructed.

Write a short checkpoint of what the user asked and what happened so far, to be \
placed in front of the kept messages so the turn reads as a whole.

## Original Request
[The user's request]

## Progress So Far
- [Decisions taken and work done in these messages]

## Context Needed to Continue
- [What from these messages the later ones depend on]

Use only what the messages above say. Do not guess at or recreate later messages.";

/// Summary of a branch the user navigated away from.
pub const BRANCH_SUMMARY_PROMPT: &str = "\
Condense this conversation branch into a structured summary, to give context \
when the user comes back to it later.

Answer in EXACTLY this format:

## Goal
[What the user wanted to achieve on this branch]

## Constraints & Preferences
- [Requirements, constraints or preferences stated]
- [Or \"(none)\" if there were none]

## Progress
### Done
- [x] [Finished tasks and changes]

### In Progress
- [ ] [Work begun but not finished]

### Blocked
- [What stops progress, if anything]

## Key Decisions
- **[Decision]**: [Why, in a few words]

## Next Steps
1. [What to do next to carry this work on]

Be brief in every section. Keep file paths, function names and error messages exactly as written.";

/// Put in front of every generated branch summary.
pub const BRANCH_SUMMARY_PREAMBLE: &str = "\
The user explored another branch of this conversation and then came back here.
What happened on that branch:

";

fn with_focus(base: &str, custom_instructions: Option<&str>) -> String {
    match custom_instructions.filter(|c| !c.is_empty()) {
        Some(focus) => format!("{base}\n\nAdditional focus: {focus}"),
        None => base.to_string(),
    }
}

/// The history-summary prompt: the conversation in `<conversation>` tags, the
/// previous summary in `<previous-summary>` tags when there is one (which also
/// switches to the update instructions), then the instructions and any focus.
pub fn history_summary_prompt(
    conversation: &str,
    previous_summary: Option<&str>,
    custom_instructions: Option<&str>,
) -> String {
    let previous = previous_summary.filter(|p| !p.is_empty());
    let base = if previous.is_some() {
        UPDATE_PROMPT
    } else {
        HISTORY_PROMPT
    };
    let mut prompt = format!("<conversation>\n{conversation}\n</conversation>\n\n");
    if let Some(previous) = previous {
        prompt.push_str(&format!(
            "<previous-summary>\n{previous}\n</previous-summary>\n\n"
        ));
    }
    prompt.push_str(&with_focus(base, custom_instructions));
    prompt
}

/// The turn-prefix prompt: conversation under `# Conversation`, instructions
/// under `# Instructions`, then any focus.
pub fn turn_prefix_prompt(conversation: &str, custom_instructions: Option<&str>) -> String {
    let prompt = format!("# Conversation\n{conversation}\n\n# Instructions\n{TURN_PREFIX_PROMPT}");
    with_focus(&prompt, custom_instructions)
}

/// The branch-summary prompt. With `replace_instructions`, custom instructions
/// stand in for the default ones instead of adding a focus.
pub fn branch_summary_prompt(
    conversation: &str,
    custom_instructions: Option<&str>,
    replace_instructions: bool,
) -> String {
    let custom = custom_instructions.filter(|c| !c.is_empty());
    let instructions = match custom {
        Some(custom) if replace_instructions => custom.to_string(),
        _ => with_focus(BRANCH_SUMMARY_PROMPT, custom),
    };
    format!("<conversation>\n{conversation}\n</conversation>\n\n{instructions}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn serializes_roles_and_truncates_tool_results() {
        let long = "x".repeat(2005);
        let msgs = vec![
            json!({"role":"system","content":"ignored"}),
            json!({"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}),
            json!({"role":"assistant","content":[
                {"type":"thinking","thinking":"hidden"},
                {"type":"text","text":"one"},{"type":"text","text":"two"},
                {"type":"toolCall","name":"read","arguments":{"path":"f","n":1.0}}]}),
            json!({"role":"toolResult","content":[{"type":"text","text":long}]}),
            json!({"role":"user","content":""}),
        ];
        let text = serialize_conversation(&msgs);
        let expected = format!(
            "[User]: ab\n\n[Assistant]: one\ntwo\n\n[Assistant tool calls]: read(path=\"f\", n=1)\n\n[Tool result]: {}\n\n[... 5 more characters truncated]",
            "x".repeat(2000)
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn prompts_have_the_structure() {
        let p = history_summary_prompt("C", Some("P"), Some("tests"));
        assert!(p.starts_with(
            "<conversation>\nC\n</conversation>\n\n<previous-summary>\nP\n</previous-summary>\n\n"
        ));
        assert!(p.ends_with("\n\nAdditional focus: tests"));
        assert!(p.contains("## Critical Context"));
        let p = history_summary_prompt("C", None, None);
        assert!(!p.contains("previous-summary"));
        for section in [
            "## Goal",
            "## Constraints & Preferences",
            "### Done",
            "### In Progress",
            "### Blocked",
            "## Key Decisions",
            "## Next Steps",
        ] {
            assert!(p.contains(section), "{section}");
        }
        assert!(turn_prefix_prompt("C", None).starts_with("# Conversation\nC\n\n# Instructions\n"));
        assert_eq!(
            branch_summary_prompt("C", Some("only this"), true),
            "<conversation>\nC\n</conversation>\n\nonly this"
        );
    }
}
