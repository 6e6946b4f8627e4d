//! The active branch of a session as Markdown: what the model saw, in order, for pasting
//! into an issue or a document.
//!
//! Message text is already Markdown (the model writes it, users type it), so it is kept as
//! written — except HTML: `<` and `&` in text become `&lt;` and `&amp;`, so a viewer that
//! renders inline HTML shows a session's `<script>` or `<img onerror>` as the text it is.
//! Tool arguments, tool output and shell runs are code, so they go into fenced blocks whose
//! fence is longer than any backtick run inside, and cannot close early (and HTML in a fence
//! is never rendered). Control characters anywhere become their visible control pictures,
//! so the export printed on a terminal cannot drive it. Images are named, not embedded: a
//! Markdown file full of base64 helps no reader.
//!
//! The content matches the HTML page's: header facts, the totals `pi sessions stats` counts,
//! the system prompt (folded), messages, bash runs, compaction and branch summaries, labels.

use std::fmt::Write as _;

use serde_json::Value;

use super::content::{self, Block};
use crate::session::{Kind, Session};

/// Renders the active branch (root to leaf) as Markdown.
pub fn render(session: &Session) -> String {
    let text = super::in_memory(|out| render_to(session, out));
    String::from_utf8_lossy(&text).into_owned()
}

/// Writes the Markdown to `out` one entry at a time, so a huge branch is never held as
/// one text.
pub fn render_to(session: &Session, sink: &mut dyn std::io::Write) -> std::io::Result<()> {
    let header = session.header().unwrap_or(Value::Null);
    let mut out = String::new();
    let title = session
        .session_name()
        .unwrap_or_else(|| format!("Session {}", content::str_field(&header, "id")));
    let _ = writeln!(out, "# {}\n", one_line(&title));
    for (label, key) in [
        ("Session", "id"),
        ("Directory", "cwd"),
        ("Started", "timestamp"),
    ] {
        let value = content::str_field(&header, key);
        if !value.is_empty() {
            let _ = writeln!(out, "- **{label}:** {}", one_line(value));
        }
    }
    let parent = content::str_field(&header, "parentSession");
    if !parent.is_empty() {
        let _ = writeln!(out, "- **Forked from:** {}", one_line(parent));
    }
    let path = session.branch_path();
    let _ = writeln!(
        out,
        "- **Branch:** {} of {} entries (active branch)",
        path.entries.len(),
        session.entries().len()
    );
    totals(session, &mut out);
    flush(&mut out, sink)?;

    for idx in path.entries {
        flush(&mut out, sink)?;
        let record = session.entry(idx);
        let value = session.entry_value(idx);
        let label = record
            .id
            .as_deref()
            .and_then(|id| session.label(id))
            .map(|l| format!(" — label: {}", one_line(&l.text)))
            .unwrap_or_default();
        match record.kind {
            Kind::Message => render_message(
                value.get("message").unwrap_or(&Value::Null),
                &label,
                &mut out,
            ),
            Kind::Compaction => {
                let _ = writeln!(out, "## Compaction{label}\n");
                quote(content::str_field(&value, "summary"), &mut out);
            }
            Kind::BranchSummary => {
                let _ = writeln!(out, "## Branch summary{label}\n");
                quote(content::str_field(&value, "summary"), &mut out);
            }
            Kind::CustomMessage => {
                let _ = writeln!(
                    out,
                    "## {}{label}\n",
                    one_line(content::str_field(&value, "customType"))
                );
                render_content(value.get("content").unwrap_or(&Value::Null), &mut out);
            }
            Kind::ModelChange => {
                let _ = writeln!(
                    out,
                    "*Model: {}/{}*\n",
                    one_line(content::str_field(&value, "provider")),
                    one_line(content::str_field(&value, "modelId"))
                );
            }
            Kind::ThinkingLevelChange => {
                let _ = writeln!(
                    out,
                    "*Thinking level: {}*\n",
                    one_line(content::str_field(&value, "thinkingLevel"))
                );
            }
            // Labels, names and extension state say nothing about the conversation itself.
            _ => {}
        }
    }
    flush(&mut out, sink)
}

/// Writes what was rendered so far, controls made visible, and empties it.
fn flush(text: &mut String, sink: &mut dyn std::io::Write) -> std::io::Result<()> {
    if !text.is_empty() {
        sink.write_all(visible_controls(text).as_bytes())?;
        text.clear();
    }
    Ok(())
}

/// The whole session's totals, as `pi sessions stats` counts them (every branch).
fn totals(session: &Session, out: &mut String) {
    let f = pi_storage::history::session_figures(
        (0..session.entries().len() as crate::session::EntryIdx).map(|i| session.entry_line(i)),
    );
    let roles: Vec<String> = f.roles.iter().map(|(r, n)| format!("{n} {r}")).collect();
    let models = if f.models.is_empty() {
        "none".to_string()
    } else {
        f.models.join(", ")
    };
    let _ = writeln!(out, "- **Models:** {}", one_line(&models));
    let _ = writeln!(out, "- **Messages:** {} ({})", f.messages, roles.join(", "));
    let _ = writeln!(
        out,
        "- **Tool calls:** {} ({} failed)",
        f.tool_calls, f.tool_errors
    );
    let _ = writeln!(
        out,
        "- **Tokens:** input {} · output {} · cache read {} · cache write {}",
        f.input, f.output, f.cache_read, f.cache_write
    );
    let _ = writeln!(out, "- **Cost:** ${:.4}\n", f.cost);
}

/// Control characters other than line feed and tab as their control pictures (␛, ␇ …).
fn visible_controls(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\t' => c,
            '\u{7f}' => '\u{2421}',
            c if (c as u32) < 0x20 => char::from_u32(0x2400 + c as u32).unwrap_or(c),
            c => c,
        })
        .collect()
}

/// Text outside code: `&` and `<` as entities, so no HTML in it is ever rendered.
fn escape_html(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;")
}

fn render_message(message: &Value, label: &str, out: &mut String) {
    let content_value = message.get("content").unwrap_or(&Value::Null);
    match content::str_field(message, "role") {
        "user" => {
            let _ = writeln!(out, "## User{label}\n");
            render_content(content_value, out);
        }
        "assistant" => {
            let model = content::model_label(message);
            if model.is_empty() {
                let _ = writeln!(out, "## Assistant{label}\n");
            } else {
                let _ = writeln!(out, "## Assistant ({}){label}\n", one_line(&model));
            }
            render_content(content_value, out);
            let stop = content::str_field(message, "stopReason");
            if matches!(stop, "error" | "aborted") {
                let _ = writeln!(
                    out,
                    "*Stopped: {stop}. {}*\n",
                    one_line(content::str_field(message, "errorMessage"))
                );
            }
        }
        "toolResult" => {
            let error = message.get("isError").and_then(Value::as_bool) == Some(true);
            let _ = writeln!(
                out,
                "### Tool result: {}{}{label}\n",
                one_line(content::str_field(message, "toolName")),
                if error { " (error)" } else { "" }
            );
            for block in content::blocks(content_value) {
                match block {
                    Block::Text(text) => fenced(text, "", out),
                    other => render_block(other, out),
                }
            }
        }
        "bashExecution" => {
            let _ = writeln!(out, "### Bash{label}\n");
            fenced(
                &format!("$ {}", content::str_field(message, "command")),
                "sh",
                out,
            );
            fenced(content::str_field(message, "output"), "", out);
            if let Some(code) = message.get("exitCode").filter(|c| !c.is_null()) {
                let _ = writeln!(out, "*Exit code {code}.*\n");
            }
        }
        "system" => {
            // Long and mostly boilerplate: folded, as on the HTML page.
            let text = content::system_text(message);
            let _ = writeln!(
                out,
                "<details><summary>System prompt ({} characters)</summary>\n",
                text.chars().count()
            );
            fenced(&text, "", out);
            out.push_str("</details>\n\n");
        }
        "compactionSummary" | "branchSummary" => {
            let _ = writeln!(out, "## Summary{label}\n");
            quote(content::str_field(message, "summary"), out);
        }
        role => {
            let _ = writeln!(out, "## {}{label}\n", one_line(role));
            render_content(content_value, out);
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
        Block::Text(text) => {
            out.push_str(&escape_html(text.trim_end()));
            out.push_str("\n\n");
        }
        Block::Thinking(text) => {
            out.push_str("*Thinking:*\n\n");
            quote(text, out);
        }
        Block::ToolCall {
            name, arguments, ..
        } => {
            let _ = writeln!(out, "### Tool call: {}\n", one_line(name));
            match arguments.get("command").and_then(Value::as_str) {
                Some(command) if arguments.as_object().is_some_and(|o| o.len() == 1) => {
                    fenced(command, "sh", out)
                }
                _ => fenced(&content::pretty(arguments), "json", out),
            }
        }
        Block::Image { mime, data } => {
            let _ = writeln!(
                out,
                "*[image: {}, {} bytes of base64]*\n",
                one_line(mime),
                data.len()
            );
        }
        Block::Other(value) => fenced(&content::pretty(value), "json", out),
    }
}

/// A fenced code block that nothing inside can close.
fn fenced(text: &str, lang: &str, out: &mut String) {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    let fence = "`".repeat(longest.max(2) + 1);
    let _ = writeln!(
        out,
        "{fence}{lang}\n{}\n{fence}\n",
        text.trim_end_matches('\n')
    );
}

fn quote(text: &str, out: &mut String) {
    for line in text.trim_end().lines() {
        out.push_str("> ");
        out.push_str(&escape_html(line));
        out.push('\n');
    }
    out.push('\n');
}

/// Text for a heading or list item (names, labels, model ids, roles, the cwd): one line,
/// shown as the literal text it is. Message bodies are Markdown by intent; these fields are
/// not, so HTML (`<img onerror=…>`, `<script>`) and Markdown syntax (links, emphasis, code)
/// in them are escaped rather than rendered by whoever views the export.
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            c if c.is_control() => out.push(' '),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '#' | '!' | '|' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn shows_only_the_active_branch() {
        let text = [
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#,
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"question"}}"#,
            r#"{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":[{"type":"text","text":"abandoned"}]}}"#,
            r#"{"type":"message","id":"c","parentId":"a","message":{"role":"assistant","provider":"p","model":"m","content":[{"type":"toolCall","id":"t","name":"bash","arguments":{"command":"echo ```"}}]}}"#,
        ]
        .join("\n");
        let s = Session::from_bytes(text.into_bytes(), Path::new("t")).unwrap();
        let md = render(&s);
        assert!(md.contains("## User\n\nquestion"));
        assert!(md.contains("## Assistant (p/m)"));
        assert!(!md.contains("abandoned"));
        assert!(md.contains("````sh\necho ```\n````"));
    }

    #[test]
    fn html_in_text_is_escaped_and_controls_are_visible() {
        let text = [
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#,
            r#"{"type":"session_info","id":"n","parentId":null,"name":"<b>name</b>"}"#,
            r#"{"type":"message","id":"a","parentId":"n","message":{"role":"user","content":"<script>alert(1)</script> & <img src=x onerror=y> \u001b[2J"}}"#,
            r#"{"type":"message","id":"b","parentId":"a","message":{"role":"bashExecution","command":"echo '<p>'","output":"<p>\n","exitCode":0}}"#,
            r#"{"type":"message","id":"c","parentId":"b","message":{"role":"system","content":"be <brief>"}}"#,
            r#"{"type":"message","id":"d","parentId":"c","message":{"role":"assistant","provider":"p","model":"m","content":[{"type":"text","text":"ok"}],"usage":{"input":7,"output":2,"cost":{"total":0.01}}}}"#,
        ]
        .join("\n");
        let s = Session::from_bytes(text.into_bytes(), Path::new("t")).unwrap();
        let md = render(&s);
        assert!(md.contains("# &lt;b&gt;name&lt;/b&gt;"), "{md}");
        assert!(
            md.contains("&lt;script>alert(1)&lt;/script> &amp; &lt;img src=x onerror=y> ␛[2J"),
            "{md}"
        );
        assert!(!md.contains("<script") && !md.contains("<img") && !md.contains('\u{1b}'));
        // Code stays code: fenced and unescaped.
        assert!(md.contains("```sh\n$ echo '<p>'\n```"), "{md}");
        assert!(md.contains("<details><summary>System prompt (10 characters)"));
        assert!(
            md.contains("- **Messages:** 4 (1 assistant, 1 bash, 1 system, 1 user)"),
            "{md}"
        );
        assert!(md.contains("input 7 · output 2"), "{md}");
    }

    #[test]
    fn names_labels_and_model_ids_are_text_not_html() {
        let text = [
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#,
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"hi"}}"#,
            r#"{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","provider":"p","model":"<script>x</script>","content":[{"type":"text","text":"ok"}]}}"#,
            r#"{"type":"label","id":"l","parentId":"b","targetId":"a","label":"[click](javascript:alert(1))"}"#,
            r#"{"type":"session_info","id":"n","parentId":"l","name":"<img src=x onerror=alert(1)>"}"#,
        ]
        .join("\n");
        let s = Session::from_bytes(text.into_bytes(), Path::new("t")).unwrap();
        let md = render(&s);
        assert!(
            md.starts_with("# &lt;img src=x onerror=alert(1)&gt;\n"),
            "{md}"
        );
        assert!(
            md.contains("## Assistant (p/&lt;script&gt;x&lt;/script&gt;)"),
            "{md}"
        );
        assert!(
            md.contains("label: \\[click\\](javascript:alert(1))"),
            "{md}"
        );
        assert!(!md.contains('<'), "{md}");
    }
}
