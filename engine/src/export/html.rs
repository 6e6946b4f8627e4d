//! A session as one self-contained HTML page: the whole tree, every branch, readable offline.
//!
//! Pi's own export ships the session as base64 JSON and renders it with JavaScript in the
//! browser (marked, highlight.js). We render on our side instead, into static HTML, because
//! session content is untrusted — a tool result can contain any markup a web page can — and
//! a page that runs no script cannot be made to run the session's. So:
//!
//! * every piece of session text goes through [`escape`] before it reaches the page, and no
//!   session value is ever placed in an attribute other than a validated `data:` image URI
//!   (attributes carry only our constant class names and numeric anchors);
//! * a Content-Security-Policy `<meta>` allows no script at all, no network fetches and no
//!   forms; images only as `data:` URIs, styles only inline (ours);
//! * the session's data is embedded once more as JSON for tools that want it, inside
//!   `<script type="application/json">` (never executed) with `<`, `>`, `&`, U+2028 and
//!   U+2029 escaped as `\uXXXX`, so no `</script>` or comment opener can appear in it.
//!
//! Branches are folded with `<details>`: the active branch is open, the others closed, so the
//! page reads like the conversation while every branch stays one click away — no script needed.

use std::collections::HashSet;
use std::fmt::Write as _;

use serde_json::Value;

use super::content::{self, Block};
use crate::session::{EntryIdx, Kind, Session};

/// Renders the session as a complete HTML document.
pub fn render(session: &Session) -> String {
    let header = session.header().unwrap_or(Value::Null);
    let active: HashSet<EntryIdx> = session.branch_path().entries.into_iter().collect();
    let steps = walk(session, &active);

    let mut out = String::with_capacity(16 * 1024 + session.entries().len() * 512);
    let title = session
        .session_name()
        .unwrap_or_else(|| format!("Session {}", content::str_field(&header, "id")));
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta http-equiv=\"Content-Security-Policy\" content=\"");
    out.push_str(CSP);
    out.push_str("\">\n<meta name=\"referrer\" content=\"no-referrer\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    out.push_str("<title>");
    escape_into(&title, &mut out);
    out.push_str(" · pi</title>\n<style>\n");
    out.push_str(CSS);
    out.push_str("</style>\n</head>\n<body>\n<div id=\"app\">\n");

    render_outline(session, &steps, &mut out);
    out.push_str("<main id=\"content\">\n");
    render_header(session, &header, &title, &mut out);
    out.push_str("<div id=\"messages\">\n");
    render_tree(session, &steps, &active, &mut out);
    out.push_str("</div>\n</main>\n</div>\n");
    render_data(session, &header, &mut out);
    out.push_str("</body>\n</html>\n");
    out
}

/// No script, no network, no forms, no plugins: images from `data:` only, our inline styles.
const CSP: &str = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; \
                   script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'";

/// HTML-escapes text for element content and (quoted) attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape_into(text, &mut out);
    out
}

fn escape_into(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // The parser replaces NUL anyway; make it visible instead of silently lost.
            '\0' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
}

/// JSON made safe to sit inside a `<script type="application/json">` element: every
/// character that could end the element, open a comment or end a JS string is escaped.
/// All of them can only occur inside JSON strings, where `\uXXXX` means the same thing.
pub fn json_for_script(value: &Value) -> String {
    let text = serde_json::to_string(value).unwrap_or_else(|_| "null".into());
    let mut out = String::with_capacity(text.len() + 64);
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// One step of the tree walk, shared by the outline and the main view.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    Entry(EntryIdx),
    /// A branch point follows: `count` arms.
    GroupOpen,
    /// One arm of the current group, starting at `first`.
    ArmOpen {
        first: EntryIdx,
        index: usize,
        count: usize,
        active: bool,
    },
    ArmClose,
    GroupClose,
}

/// Walks the tree depth-first without recursion (a session can be tens of thousands of
/// entries deep): linear runs stay flat, branch points open a group with one arm per child.
fn walk(session: &Session, active: &HashSet<EntryIdx>) -> Vec<Step> {
    let tree = session.tree();
    let mut steps = Vec::with_capacity(session.entries().len() + 16);
    let mut stack: Vec<Step> = Vec::new();
    let push_arms = |stack: &mut Vec<Step>, arms: &[EntryIdx]| {
        stack.push(Step::GroupClose);
        for (index, &first) in arms.iter().enumerate().rev() {
            stack.push(Step::ArmClose);
            stack.push(Step::Entry(first));
            stack.push(Step::ArmOpen {
                first,
                index,
                count: arms.len(),
                active: active.contains(&first),
            });
        }
        stack.push(Step::GroupOpen);
    };
    match tree.roots.as_slice() {
        [] => {}
        [root] => stack.push(Step::Entry(*root)),
        roots => push_arms(&mut stack, roots),
    }
    while let Some(step) = stack.pop() {
        steps.push(step);
        if let Step::Entry(idx) = step {
            match tree.children.get(idx as usize).map(Vec::as_slice) {
                None | Some([]) => {}
                Some([only]) => stack.push(Step::Entry(*only)),
                Some(children) => push_arms(&mut stack, children),
            }
        }
    }
    steps
}

fn render_header(session: &Session, header: &Value, title: &str, out: &mut String) {
    let messages = session
        .entries()
        .iter()
        .filter(|r| r.kind == Kind::Message)
        .count();
    let branches = session
        .tree()
        .children
        .iter()
        .filter(|c| c.is_empty())
        .count();
    out.push_str("<header class=\"session-header\">\n<h1>");
    escape_into(title, out);
    out.push_str("</h1>\n<dl>\n");
    let mut row = |label: &str, value: &str| {
        if value.is_empty() {
            return;
        }
        out.push_str("<dt>");
        out.push_str(label);
        out.push_str("</dt><dd>");
        escape_into(value, out);
        out.push_str("</dd>\n");
    };
    row("Session", content::str_field(header, "id"));
    row("Directory", content::str_field(header, "cwd"));
    row("Started", content::str_field(header, "timestamp"));
    row("Forked from", content::str_field(header, "parentSession"));
    row(
        "Entries",
        &format!(
            "{} entries, {messages} messages, {branches} branch ends",
            session.entries().len()
        ),
    );
    let version = header.get("version").map_or("1".into(), Value::to_string);
    row("Format", &format!("version {version}"));
    let report = session.load_report();
    if let Some(from) = report.migrated_from {
        row("Migrated", &format!("from version {from} when loaded"));
    }
    out.push_str("</dl>\n");
    if !report.skipped_lines.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"warning\">{} unreadable line(s) skipped; see <code>pi sessions verify</code>.</p>",
            report.skipped_lines.len()
        );
    }
    out.push_str("</header>\n");
}

fn render_outline(session: &Session, steps: &[Step], out: &mut String) {
    out.push_str("<nav id=\"outline\">\n<h2>Tree</h2>\n<ul>\n");
    for step in steps {
        match *step {
            Step::Entry(idx) => {
                let record = session.entry(idx);
                let user = record.is_message_with_role("user");
                let labeled = record
                    .id
                    .as_deref()
                    .and_then(|id| session.label(id))
                    .is_some();
                // The outline lists the turns and landmarks, not every tool call.
                if !(user
                    || labeled
                    || matches!(record.kind, Kind::Compaction | Kind::BranchSummary))
                {
                    continue;
                }
                let value = session.entry_value(idx);
                let _ = write!(out, "<li><a href=\"#e-{idx}\">");
                escape_into(&one_line(&entry_summary(&value), 60), out);
                out.push_str("</a></li>\n");
            }
            Step::GroupOpen => {}
            Step::ArmOpen {
                first,
                index,
                count,
                active,
            } => {
                let _ = writeln!(
                    out,
                    "<li class=\"arm{}\"><a href=\"#e-{first}\">branch {} of {count}</a><ul>",
                    if active { " active" } else { "" },
                    index + 1
                );
            }
            Step::ArmClose => out.push_str("</ul></li>\n"),
            Step::GroupClose => {}
        }
    }
    out.push_str("</ul>\n</nav>\n");
}

fn render_tree(session: &Session, steps: &[Step], active: &HashSet<EntryIdx>, out: &mut String) {
    for step in steps {
        match *step {
            Step::Entry(idx) => render_entry(session, idx, active.contains(&idx), out),
            Step::GroupOpen => out.push_str("<div class=\"branches\">\n"),
            Step::ArmOpen {
                first,
                index,
                count,
                active,
            } => {
                let _ = write!(
                    out,
                    "<details class=\"branch{}\"{}><summary>Branch {} of {count}{}: ",
                    if active { " active" } else { "" },
                    if active { " open" } else { "" },
                    index + 1,
                    if active { " (active)" } else { "" },
                );
                escape_into(
                    &one_line(&entry_summary(&session.entry_value(first)), 80),
                    out,
                );
                out.push_str("</summary>\n");
            }
            Step::ArmClose => out.push_str("</details>\n"),
            Step::GroupClose => out.push_str("</div>\n"),
        }
    }
}

fn render_entry(session: &Session, idx: EntryIdx, on_path: bool, out: &mut String) {
    let record = session.entry(idx);
    let value = session.entry_value(idx);
    let class = entry_class(&record.kind, record.role.as_deref());
    let _ = write!(
        out,
        "<section class=\"entry {class}{}\" id=\"e-{idx}\">\n<div class=\"meta\">",
        if on_path { " on-path" } else { "" }
    );
    out.push_str("<span class=\"role\">");
    escape_into(&entry_title(&value), out);
    out.push_str("</span>");
    if let Some(ts) = record.timestamp.as_deref() {
        out.push_str(" <span class=\"time\">");
        escape_into(ts, out);
        out.push_str("</span>");
    }
    if let Some(id) = record.id.as_deref() {
        out.push_str(" <span class=\"eid\">#");
        escape_into(id, out);
        out.push_str("</span>");
        if let Some(label) = session.label(id) {
            out.push_str(" <span class=\"label\">");
            escape_into(&label.text, out);
            out.push_str("</span>");
        }
    }
    out.push_str("</div>\n<div class=\"body\">\n");
    render_body(session, &record.kind, &value, out);
    out.push_str("</div>\n</section>\n");
}

fn entry_class(kind: &Kind, role: Option<&str>) -> &'static str {
    match (kind, role) {
        (Kind::Message, Some("user")) => "user",
        (Kind::Message, Some("assistant")) => "assistant",
        (Kind::Message, Some("toolResult")) => "tool-result",
        (Kind::Message, Some("bashExecution")) => "bash",
        (Kind::Message, _) => "message",
        (Kind::Compaction, _) => "compaction",
        (Kind::BranchSummary, _) => "branch-summary",
        (Kind::CustomMessage, _) => "custom-message",
        (Kind::Label | Kind::SessionInfo | Kind::ModelChange | Kind::ThinkingLevelChange, _) => {
            "setting"
        }
        _ => "other",
    }
}

/// The heading of an entry ("User", "Assistant · provider/model", "Compaction", ...).
fn entry_title(value: &Value) -> String {
    let kind = content::str_field(value, "type");
    let message = value.get("message").unwrap_or(&Value::Null);
    match kind {
        "message" => match content::str_field(message, "role") {
            "user" => "User".into(),
            "assistant" => {
                let model = content::model_label(message);
                if model.is_empty() {
                    "Assistant".into()
                } else {
                    format!("Assistant · {model}")
                }
            }
            "toolResult" => {
                let error = message.get("isError").and_then(Value::as_bool) == Some(true);
                format!(
                    "Tool result · {}{}",
                    content::str_field(message, "toolName"),
                    if error { " (error)" } else { "" }
                )
            }
            "bashExecution" => "Bash (user)".into(),
            "system" => "System prompt".into(),
            "compactionSummary" => "Compaction summary".into(),
            "branchSummary" => "Branch summary".into(),
            "custom" => format!("Custom · {}", content::str_field(message, "customType")),
            "" => "Message".into(),
            other => format!("Message · {other}"),
        },
        "compaction" => "Compaction".into(),
        "branch_summary" => "Branch summary".into(),
        "model_change" => "Model change".into(),
        "thinking_level_change" => "Thinking level".into(),
        "label" => "Label".into(),
        "session_info" => "Session name".into(),
        "custom" => format!("Custom · {}", content::str_field(value, "customType")),
        "custom_message" => format!("Extension · {}", content::str_field(value, "customType")),
        "" => "Entry".into(),
        other => other.to_string(),
    }
}

fn render_body(session: &Session, kind: &Kind, value: &Value, out: &mut String) {
    let message = value.get("message").unwrap_or(&Value::Null);
    match kind {
        Kind::Message => render_message(message, out),
        Kind::Compaction => {
            text_block(content::str_field(value, "summary"), "summary", out);
            let mut facts = Vec::new();
            if let Some(tokens) = value.get("tokensBefore").and_then(Value::as_u64) {
                facts.push(format!("{tokens} tokens before"));
            }
            out.push_str("<p class=\"note\">");
            escape_into(&facts.join(", "), out);
            if let Some(kept) = value.get("firstKeptEntryId").and_then(Value::as_str) {
                out.push_str(" kept from ");
                link_to(session, kept, out);
            }
            out.push_str("</p>\n");
        }
        Kind::BranchSummary => {
            text_block(content::str_field(value, "summary"), "summary", out);
            if let Some(from) = value.get("fromId").and_then(Value::as_str) {
                out.push_str("<p class=\"note\">summarised branch left at ");
                link_to(session, from, out);
                out.push_str("</p>\n");
            }
        }
        Kind::ModelChange => note(
            &format!(
                "{}/{}",
                content::str_field(value, "provider"),
                content::str_field(value, "modelId")
            ),
            out,
        ),
        Kind::ThinkingLevelChange => note(content::str_field(value, "thinkingLevel"), out),
        Kind::Label => {
            out.push_str("<p class=\"note\">");
            match value.get("label").and_then(Value::as_str) {
                Some(label) if !label.is_empty() => {
                    out.push('“');
                    escape_into(label, out);
                    out.push_str("” on ");
                }
                _ => out.push_str("label cleared on "),
            }
            link_to(session, content::str_field(value, "targetId"), out);
            out.push_str("</p>\n");
        }
        Kind::SessionInfo => note(content::str_field(value, "name"), out),
        Kind::CustomMessage => {
            render_content(value.get("content").unwrap_or(&Value::Null), out);
        }
        _ => {
            // Unknown and extension-private entries: shown as their JSON, escaped.
            pre_block(&content::pretty(value), "raw", out);
        }
    }
}

fn render_message(message: &Value, out: &mut String) {
    let content_value = message.get("content").unwrap_or(&Value::Null);
    match content::str_field(message, "role") {
        "bashExecution" => {
            pre_block(
                &format!("$ {}", content::str_field(message, "command")),
                "command",
                out,
            );
            pre_block(content::str_field(message, "output"), "output", out);
            if let Some(code) = message.get("exitCode").filter(|c| !c.is_null()) {
                note(&format!("exit code {code}"), out);
            }
        }
        "toolResult" => {
            for block in content::blocks(content_value) {
                match block {
                    Block::Text(text) => pre_block(text, "output", out),
                    other => render_block(other, out),
                }
            }
        }
        "compactionSummary" | "branchSummary" => {
            text_block(content::str_field(message, "summary"), "summary", out);
        }
        "system" => {
            // Long and the same in every session: folded, like thinking.
            out.push_str("<details class=\"system\"><summary>show</summary>\n");
            text_block(&content::system_text(message), "text", out);
            out.push_str("</details>\n");
        }
        role => {
            render_content(content_value, out);
            if role == "assistant" {
                let stop = content::str_field(message, "stopReason");
                if matches!(stop, "error" | "aborted") {
                    let error = content::str_field(message, "errorMessage");
                    out.push_str("<p class=\"error\">");
                    escape_into(&format!("stopped: {stop}"), out);
                    if !error.is_empty() {
                        out.push_str(" — ");
                        escape_into(error, out);
                    }
                    out.push_str("</p>\n");
                }
                if let Some(usage) = message.get("usage") {
                    let n = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
                    note(
                        &format!(
                            "{} in, {} out, {} cache read, {} cache write tokens",
                            n("input"),
                            n("output"),
                            n("cacheRead"),
                            n("cacheWrite")
                        ),
                        out,
                    );
                }
            }
        }
    }
}

fn render_content(content_value: &Value, out: &mut String) {
    for block in content::blocks(content_value) {
        render_block(block, out);
    }
}

fn render_block(block: Block<'_>, out: &mut String) {
    match block {
        Block::Text(text) => text_block(text, "text", out),
        Block::Thinking(text) => {
            out.push_str("<details class=\"thinking\"><summary>Thinking</summary>\n");
            text_block(text, "text", out);
            out.push_str("</details>\n");
        }
        Block::ToolCall {
            id,
            name,
            arguments,
        } => {
            out.push_str("<div class=\"tool-call\"><div class=\"tool-head\">");
            escape_into(name, out);
            if !id.is_empty() {
                out.push_str(" <span class=\"eid\">");
                escape_into(id, out);
                out.push_str("</span>");
            }
            out.push_str("</div>\n");
            // Shell commands read better as themselves than as a JSON string.
            match arguments.get("command").and_then(Value::as_str) {
                Some(command) if arguments.as_object().is_some_and(|o| o.len() == 1) => {
                    pre_block(command, "command", out)
                }
                _ => pre_block(&content::pretty(arguments), "args", out),
            }
            out.push_str("</div>\n");
        }
        Block::Image { mime, data } => {
            if content::is_safe_image_mime(mime) && content::is_base64(data) {
                // Both parts are checked above, and escaped anyway.
                out.push_str("<img class=\"image\" alt=\"image\" src=\"data:");
                escape_into(mime, out);
                out.push_str(";base64,");
                escape_into(data, out);
                out.push_str("\">\n");
            } else {
                note(&format!("[image of type {mime} not shown]"), out);
            }
        }
        Block::Other(value) => pre_block(&content::pretty(value), "raw", out),
    }
}

fn text_block(text: &str, class: &'static str, out: &mut String) {
    if text.is_empty() {
        return;
    }
    let _ = write!(out, "<div class=\"{class}\">");
    escape_into(text, out);
    out.push_str("</div>\n");
}

fn pre_block(text: &str, class: &'static str, out: &mut String) {
    let _ = write!(out, "<pre class=\"{class}\">");
    escape_into(text, out);
    out.push_str("</pre>\n");
}

fn note(text: &str, out: &mut String) {
    out.push_str("<p class=\"note\">");
    escape_into(text, out);
    out.push_str("</p>\n");
}

/// `#id` as a link when the entry exists (anchors are our numeric ids, never the entry's).
fn link_to(session: &Session, id: &str, out: &mut String) {
    match session.find(id) {
        Some(idx) => {
            let _ = write!(out, "<a href=\"#e-{idx}\">#");
            escape_into(id, out);
            out.push_str("</a>");
        }
        None => {
            out.push('#');
            escape_into(id, out);
        }
    }
}

/// A short description of an entry for the outline and branch headings.
fn entry_summary(value: &Value) -> String {
    let message = value.get("message").unwrap_or(&Value::Null);
    let text = match content::str_field(value, "type") {
        "message" => match content::str_field(message, "role") {
            "bashExecution" => format!("$ {}", content::str_field(message, "command")),
            "compactionSummary" | "branchSummary" => {
                content::str_field(message, "summary").to_string()
            }
            _ => content::text_of(message.get("content").unwrap_or(&Value::Null)),
        },
        "compaction" | "branch_summary" => content::str_field(value, "summary").to_string(),
        _ => String::new(),
    };
    let title = entry_title(value);
    if text.trim().is_empty() {
        title
    } else {
        format!("{title}: {}", text.trim())
    }
}

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// The session as Pi's export shapes it (`header`, `entries`, `leafId`), for tools that read
/// the page; inert JSON, never executed.
fn render_data(session: &Session, header: &Value, out: &mut String) {
    let entries: Vec<Value> = (0..session.entries().len() as EntryIdx)
        .map(|i| session.entry_value(i))
        .collect();
    let data = serde_json::json!({
        "header": header,
        "entries": entries,
        "leafId": session.leaf_id(),
    });
    out.push_str("<script id=\"session-data\" type=\"application/json\">");
    out.push_str(&json_for_script(&data));
    out.push_str("</script>\n");
}

const CSS: &str = r#":root { color-scheme: light dark; --bg: #18181e; --card: #1f1f27; --fg: #e4e4e7;
  --muted: #9a9aa5; --accent: #8ab4f8; --user: #2a2f3d; --tool: #1b2420; --err: #f28b82;
  --border: #33333d; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 14px/1.5 ui-sans-serif, system-ui, -apple-system, "Segoe UI", sans-serif; }
#app { display: flex; min-height: 100vh; }
#outline { width: 280px; flex: none; position: sticky; top: 0; height: 100vh; overflow: auto;
  padding: 12px; border-right: 1px solid var(--border); font-size: 12px; }
#outline h2 { font-size: 13px; margin: 0 0 8px; color: var(--muted); }
#outline ul { list-style: none; margin: 0; padding-left: 10px; }
#outline a { color: var(--fg); text-decoration: none; display: block; white-space: nowrap;
  overflow: hidden; text-overflow: ellipsis; }
#outline .arm > a { color: var(--muted); }
#outline .arm.active > a { color: var(--accent); }
#content { flex: 1; min-width: 0; padding: 16px 24px; max-width: 1100px; }
.session-header h1 { font-size: 20px; margin: 0 0 8px; }
.session-header dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px;
  margin: 0 0 16px; color: var(--muted); }
.session-header dd { margin: 0; color: var(--fg); overflow-wrap: anywhere; }
.entry { background: var(--card); border: 1px solid var(--border); border-radius: 6px;
  margin: 8px 0; padding: 8px 12px; }
.entry.user { background: var(--user); }
.entry.tool-result, .entry.bash { background: var(--tool); }
.entry.setting { background: transparent; border-style: dashed; padding: 4px 12px; }
.entry.compaction, .entry.branch-summary { border-color: var(--accent); }
.meta { font-size: 12px; color: var(--muted); margin-bottom: 4px; }
.meta .role { color: var(--fg); font-weight: 600; }
.label { background: var(--accent); color: #000; border-radius: 3px; padding: 0 4px; }
.text, .summary { white-space: pre-wrap; overflow-wrap: anywhere; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 4px 0; padding: 6px 8px;
  background: rgba(0,0,0,.25); border-radius: 4px; max-height: 480px; overflow: auto;
  font: 12px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.tool-call { border-left: 3px solid var(--accent); padding-left: 8px; margin: 6px 0; }
.tool-head { font-weight: 600; font-size: 12px; }
.eid { color: var(--muted); font-weight: normal; font-size: 11px; }
.thinking { color: var(--muted); font-style: italic; margin: 4px 0; }
.note { color: var(--muted); font-size: 12px; margin: 2px 0; }
.error, .warning { color: var(--err); }
.image { max-width: 100%; border-radius: 4px; margin: 4px 0; }
.branches { border-left: 2px solid var(--border); padding-left: 12px; margin: 8px 0; }
.branch > summary { cursor: pointer; color: var(--muted); padding: 4px 0; }
.branch.active > summary { color: var(--accent); }
a { color: var(--accent); }
@media (max-width: 800px) { #outline { display: none; } }
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn session(lines: &[&str]) -> Session {
        let mut text = String::from(
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#,
        );
        text.push('\n');
        for l in lines {
            text.push_str(l);
            text.push('\n');
        }
        Session::from_bytes(text.into_bytes(), Path::new("t.jsonl")).unwrap()
    }

    #[test]
    fn escapes_markup_and_script_json() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        let json = json_for_script(&serde_json::json!({"t": "</script><!--\u{2028}&"}));
        assert!(!json.contains('<') && !json.contains('>') && !json.contains('&'));
        assert!(json.contains("\\u003c/script\\u003e") && json.contains("\\u2028"));
        let back: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["t"], "</script><!--\u{2028}&");
    }

    #[test]
    fn renders_every_branch_with_the_active_one_open() {
        let s = session(&[
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"root question"}}"#,
            r#"{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"first answer"}]}}"#,
            r#"{"type":"message","id":"c","parentId":"a","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"assistant","content":[{"type":"text","text":"second answer"}]}}"#,
        ]);
        let html = render(&s);
        assert!(html.contains("first answer") && html.contains("second answer"));
        assert_eq!(html.matches("<details class=\"branch").count(), 2);
        assert_eq!(
            html.matches("<details class=\"branch active\" open>")
                .count(),
            1
        );
        assert!(html.contains("Branch 2 of 2 (active)"));
    }

    #[test]
    fn refuses_unsafe_images() {
        let s = session(&[
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":[{"type":"image","mimeType":"image/svg+xml","data":"PHN2Zz4="},{"type":"image","mimeType":"image/png","data":"x\" onerror=\"alert(1)"},{"type":"image","mimeType":"image/png","data":"iVBORw0KGgo="}]}}"#,
        ]);
        let html = render(&s);
        assert_eq!(html.matches("<img ").count(), 1);
        assert!(html.contains("src=\"data:image/png;base64,iVBORw0KGgo=\""));
    }

    #[test]
    fn deep_chains_do_not_recurse() {
        let mut lines = Vec::new();
        let mut parent = "null".to_string();
        for i in 0..20_000 {
            lines.push(format!(
                r#"{{"type":"message","id":"e{i}","parentId":{parent},"message":{{"role":"user","content":"m{i}"}}}}"#
            ));
            parent = format!("\"e{i}\"");
        }
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let html = render(&session(&refs));
        assert!(html.contains("m19999"));
    }
}
