//! A session as one self-contained HTML page: the whole tree, search, filters, toggles and
//! totals, readable offline, under a content policy that runs our script and nothing else.
//!
//! Pi's export embeds the session (base64 JSON) and renders it in the browser with marked
//! and highlight.js, as HTML strings. Session content is untrusted — a tool result can hold
//! any markup a page can — so we keep Pi's shape (data block + script) but close every door
//! the session could use:
//!
//! * **No session value in markup.** The page's markup is a constant shell ([`SHELL`]); the
//!   session is only in one `<script type="application/json">` block, which a browser never
//!   executes. Every `<` in it is written `\u003c` (legal only inside JSON strings, where it
//!   means the same), so no `</script>` or `<!--` in a message can end or bend the block.
//! * **Only our script runs.** The policy allows exactly one script, ours, by its SHA-256
//!   (`script-src 'sha256-…'`); no `unsafe-inline`, no `unsafe-eval`, no URL. The same for
//!   the stylesheet. No fetches, frames, forms, plugins or `<base>`; images only `data:`.
//! * **Text stays text.** The script builds the page with `createElement` and
//!   `textContent`; `require-trusted-types-for 'script'` makes the browser refuse any
//!   `innerHTML`-style sink outright. Links are made only from `http(s)` URLs, with
//!   `rel="noopener noreferrer"`.
//!
//! The data block holds the session's own lines, byte for byte apart from that escaping (a
//! raw CR, legal only as JSON whitespace, becomes a space so the HTML parser keeps lines
//! apart), one per text line: the page's size is the session's plus a fixed ~50 KB, and the
//! "download JSONL" button gives back the session's lines. Rendering is lazy in the page
//! (the tree is a virtual list; the conversation renders in windows), so a 50 MB session
//! stays usable. What only the engine knows well — the tree (with Pi's cycle and orphan
//! rules), labels, the name and the totals `pi sessions stats` would count — comes along as
//! a small `meta` object.

use std::io::{self, Write};
use std::sync::OnceLock;

use base64::Engine as _;
use serde_json::{json, Value};

use super::content;
use crate::session::{EntryIdx, Session};

/// The page's script, written by hand (no bundler, no library); see its header comment.
const SCRIPT: &str = include_str!("page.js");
/// The page's stylesheet.
const STYLE: &str = include_str!("page.css");

/// The constant markup the script fills in. Nothing in it comes from the session.
const SHELL: &str = r#"<div id="app">
<aside id="sidebar">
<div class="sidebar-head">
<input type="search" id="search" placeholder="Search every entry…" autocomplete="off" spellcheck="false" aria-label="Search every entry">
<div class="filters" role="group" aria-label="Filter the tree">
<button type="button" class="filter active" data-filter="default" title="Hide setting changes and tool-call-only replies">Default</button>
<button type="button" class="filter" data-filter="no-tools" title="Default without tool results">No tools</button>
<button type="button" class="filter" data-filter="user" title="Only user messages">User</button>
<button type="button" class="filter" data-filter="labeled" title="Only labeled entries">Labeled</button>
<button type="button" class="filter" data-filter="all" title="Every entry">All</button>
</div>
</div>
<div id="tree" tabindex="0" aria-label="Session tree"><div id="tree-spacer"></div></div>
<div id="tree-status" aria-live="polite"></div>
</aside>
<main id="content">
<header id="session-header">
<h1 id="title">Session</h1>
<div class="actions">
<button type="button" id="toggle-thinking" aria-pressed="true" title="Show or hide thinking (T)">Thinking <kbd>T</kbd></button>
<button type="button" id="toggle-tools" aria-pressed="false" title="Expand or fold long tool output (O)">Tool output <kbd>O</kbd></button>
<button type="button" id="toggle-hidden" aria-pressed="false" title="Show messages hidden in the terminal (H)">Hidden <kbd>H</kbd></button>
<button type="button" id="download" title="Download the session as JSONL">Download JSONL</button>
</div>
<dl id="facts"></dl>
<h2>Totals <span class="muted">(whole session, every branch)</span></h2>
<dl id="totals"></dl>
<p id="warnings" class="warning" hidden></p>
</header>
<div id="path-info" class="muted"></div>
<div id="messages"></div>
</main>
</div>
<noscript><p class="warning">This page shows the session with its own small script; it is blocked here. The session's lines are in the page source, in the <code>session-data</code> block.</p></noscript>
"#;

/// Renders the session as a complete HTML document.
pub fn render(session: &Session) -> String {
    // A session line that is not UTF-8 shows with replacement characters, as in a browser.
    let page = super::in_memory(|out| render_to(session, out));
    String::from_utf8_lossy(&page).into_owned()
}

/// Writes the page to `out` as it is made: the session's lines go from the session's
/// bytes (a mapped file) straight to `out`, so the page is never held in memory.
pub fn render_to(session: &Session, out: &mut dyn Write) -> io::Result<()> {
    let meta = meta(session);
    out.write_all(b"<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")?;
    out.write_all(b"<meta http-equiv=\"Content-Security-Policy\" content=\"")?;
    out.write_all(policy().as_bytes())?;
    out.write_all(b"\">\n<meta name=\"referrer\" content=\"no-referrer\">\n")?;
    out.write_all(b"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n")?;
    // The session's name becomes the title from the script; markup stays constant.
    out.write_all(b"<title>Session export</title>\n<style>")?;
    out.write_all(STYLE.as_bytes())?;
    out.write_all(b"</style>\n</head>\n<body>\n")?;
    out.write_all(SHELL.as_bytes())?;
    out.write_all(b"<script id=\"session-data\" type=\"application/json\">")?;
    data_block(session, &meta, out)?;
    out.write_all(b"</script>\n<script>")?;
    out.write_all(SCRIPT.as_bytes())?;
    out.write_all(b"</script>\n</body>\n</html>\n")
}

/// The Content-Security-Policy of every page: our script and stylesheet by hash, nothing
/// from anywhere else, no string-to-HTML sinks.
pub fn policy() -> &'static str {
    static POLICY: OnceLock<String> = OnceLock::new();
    POLICY.get_or_init(|| {
        format!(
            "default-src 'none'; script-src '{}'; style-src '{}'; img-src data:; \
             object-src 'none'; base-uri 'none'; form-action 'none'; \
             require-trusted-types-for 'script'; trusted-types 'none'",
            sha256_source(SCRIPT),
            sha256_source(STYLE)
        )
    })
}

/// A CSP hash source, `sha256-<base64>`, for an inline element's exact text.
fn sha256_source(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    format!(
        "sha256-{}",
        base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
    )
}

/// What the page needs beyond the lines: the tree as the engine reads it, labels, the name,
/// load facts and totals.
fn meta(session: &Session) -> Value {
    let n = session.entries().len();
    let tree = session.tree();
    // -1: a root; -2: in no tree (a parent cycle, which Pi's tree leaves out too).
    let mut parent = vec![-2i64; n];
    let mut order: Vec<EntryIdx> = Vec::with_capacity(n);
    let mut stack: Vec<EntryIdx> = tree.roots.iter().rev().copied().collect();
    for &root in &tree.roots {
        parent[root as usize] = -1;
    }
    while let Some(idx) = stack.pop() {
        order.push(idx);
        let children = &tree.children[idx as usize];
        for &child in children.iter().rev() {
            parent[child as usize] = i64::from(idx);
            stack.push(child);
        }
    }
    let mut labels: Vec<(EntryIdx, &str)> = session
        .labels()
        .filter_map(|(id, label)| Some((session.find(id)?, label.text.as_ref())))
        .collect();
    labels.sort_unstable();
    let header = session.header().unwrap_or(Value::Null);
    let title = session
        .session_name()
        .unwrap_or_else(|| format!("Session {}", content::str_field(&header, "id")));
    let report = session.load_report();
    let figures =
        pi_storage::history::session_figures((0..n as EntryIdx).map(|i| session.entry_line(i)));
    json!({
        "title": title,
        "leaf": session.leaf().map_or(-1, i64::from),
        "parent": parent,
        "order": order,
        "labels": labels,
        "skippedLines": report.skipped_lines.len(),
        "migratedFrom": report.migrated_from,
        "totals": figures,
        "generator": concat!("pi (Rust) ", env!("CARGO_PKG_VERSION")),
    })
}

/// `{"meta":…,"lines":[` LF, then the header and every entry line (each on its own text
/// line, `,`-separated), then `]}`: one JSON value, and the session's lines for the
/// download button.
fn data_block(session: &Session, meta: &Value, out: &mut dyn Write) -> io::Result<()> {
    out.write_all(b"{\"meta\":")?;
    out.write_all(json_for_script(meta).as_bytes())?;
    out.write_all(b",\"lines\":[\n")?;
    match session.header_line() {
        Some(line) => push_line(line, out)?,
        None => out.write_all(b"null")?,
    }
    for i in 0..session.entries().len() as EntryIdx {
        out.write_all(b",\n")?;
        push_line(session.entry_line(i), out)?;
    }
    out.write_all(b"\n]}")
}

/// One JSON line made safe for the data block (see the module comment).
fn push_line(line: &[u8], out: &mut dyn Write) -> io::Result<()> {
    let text = String::from_utf8_lossy(line);
    let bytes = text.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let replacement: &[u8] = match b {
            b'<' => b"\\u003c",
            b'\r' => b" ",
            _ => continue,
        };
        out.write_all(&bytes[start..i])?;
        out.write_all(replacement)?;
        start = i + 1;
    }
    out.write_all(&bytes[start..])
}

/// HTML-escapes text for element content and (quoted) attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
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
    out
}

/// JSON made safe to sit inside a `<script type="application/json">` element: every
/// character that could end the element or open a comment is escaped. They can only occur
/// inside JSON strings, where `\uXXXX` means the same thing.
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

    /// The text of the data block, as the browser's parser hands it to the script.
    fn block(html: &str) -> &str {
        let start = html.find("type=\"application/json\">").unwrap() + 24;
        let end = start + html[start..].find("</script>").unwrap();
        &html[start..end]
    }

    #[test]
    fn escapes_markup_and_script_json() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        let json = json_for_script(&serde_json::json!({"t": "</script><!--\u{2028}&"}));
        assert!(!json.contains('<') && !json.contains('>') && !json.contains('&'));
        let back: Value = serde_json::from_str(&json).unwrap();
        assert_eq!(back["t"], "</script><!--\u{2028}&");
    }

    #[test]
    fn the_data_block_is_the_lines_and_cannot_be_closed_from_inside() {
        let hostile = r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"</script><script>alert(1)</script><!-- x"}}"#;
        let html = render(&session(&[hostile]));
        let data = block(&html);
        assert!(!data.contains('<'), "{data}");
        let value: Value = serde_json::from_str(data).unwrap();
        assert_eq!(
            value["lines"][1]["message"]["content"],
            "</script><script>alert(1)</script><!-- x"
        );
        // One line per session line between the prologue and the close.
        let text_lines: Vec<&str> = data.split('\n').collect();
        assert_eq!(text_lines.len(), 4);
        assert_eq!(text_lines[2], hostile.replace('<', "\\u003c"));
        assert_eq!(text_lines[3], "]}");
        // The markup before the data holds nothing of the session.
        assert!(!html[..html.find("session-data").unwrap()].contains("alert"));
    }

    #[test]
    fn the_policy_names_the_exact_script_and_style() {
        let html = render(&session(&[]));
        assert!(html.contains(&format!("<script>{SCRIPT}</script>")));
        assert!(html.contains(&format!("<style>{STYLE}</style>")));
        let policy = policy();
        assert!(policy.contains(&format!("script-src '{}'", sha256_source(SCRIPT))));
        assert!(!policy.contains("unsafe"), "{policy}");
        // A known SHA-256, so the hash is the real thing.
        assert_eq!(
            sha256_source("abc"),
            "sha256-ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="
        );
        assert!(!SCRIPT.contains("</script") && !SCRIPT.contains("<!--"));
    }

    #[test]
    fn meta_has_the_tree_labels_and_totals() {
        let s = session(&[
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"q"}}"#,
            r#"{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","provider":"p","model":"m","content":[{"type":"text","text":"one"}],"usage":{"input":3,"output":4}}}"#,
            r#"{"type":"message","id":"c","parentId":"a","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"assistant","content":[{"type":"text","text":"two"}]}}"#,
            r#"{"type":"label","id":"l","parentId":"c","timestamp":"2026-01-01T00:00:04.000Z","targetId":"b","label":"keep"}"#,
            r#"{"type":"message","id":"x","parentId":"y","message":{"role":"user","content":"cycle"}}"#,
            r#"{"type":"message","id":"y","parentId":"x","message":{"role":"user","content":"cycle"}}"#,
        ]);
        let m = meta(&s);
        assert_eq!(m["parent"], json!([-1, 0, 0, 2, -2, -2]));
        assert_eq!(m["order"], json!([0, 1, 2, 3]));
        assert_eq!(m["labels"], json!([[1, "keep"]]));
        assert_eq!(m["leaf"], 5);
        assert_eq!(m["totals"]["messages"], 5);
        assert_eq!(m["totals"]["input"], 3);
        assert_eq!(m["totals"]["models"], json!(["p/m"]));
    }

    #[test]
    fn carriage_returns_outside_strings_keep_lines_apart() {
        let mut out = Vec::new();
        push_line(b"{\"a\":\"<b>\"}\r", &mut out).unwrap();
        assert_eq!(out, b"{\"a\":\"\\u003cb>\"} ");
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
