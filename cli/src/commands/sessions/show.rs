//! `pi sessions show FILE`: the session tree for a person to read.
//!
//! Like Pi's `/tree` view, a linear run of entries stays at one indent and only
//! branch points indent their children, so a long session is not a staircase.
//! `*` marks the active path (the leaf, or `--at ENTRY`).

use clap::Args;

use crate::visible::visible_line;
use pi_engine::session::{EntryIdx, HeadCache, Kind, Session};
use serde_json::Value;
use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The session file (.jsonl).
    pub file: PathBuf,
    /// Mark the path to this entry as active instead of the leaf's.
    #[arg(long)]
    pub at: Option<String>,
    /// Characters of text shown per entry.
    #[arg(long, default_value_t = 72)]
    pub width: usize,
}

pub fn run(args: ShowArgs) -> anyhow::Result<i32> {
    let (mut session, _) = Session::open_cached(&args.file, Some(&HeadCache::from_env()))?;
    if let Some(at) = &args.at {
        session.branch(at)?;
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    render(&session, args.width, &mut out)?;
    out.flush()?;
    Ok(0)
}

/// Branch levels shown as indentation; deeper branches are drawn at this indent.
const MAX_INDENT: usize = 40;

/// Writes the header lines and the tree.
pub fn render(session: &Session, width: usize, out: &mut impl Write) -> std::io::Result<()> {
    let header = session.header().unwrap_or(Value::Null);
    writeln!(
        out,
        "session {}  (version {})",
        visible_line(header["id"].as_str().unwrap_or("?")),
        visible_line(
            &header
                .get("version")
                .map_or("1".to_string(), |v| v.to_string())
        )
    )?;
    if let Some(cwd) = header["cwd"].as_str() {
        writeln!(out, "cwd     {}", visible_line(cwd))?;
    }
    if let Some(name) = session.session_name() {
        writeln!(out, "name    {}", visible_line(&name))?;
    }
    writeln!(
        out,
        "entries {}  leaf {}",
        session.entries().len(),
        visible_line(session.leaf_id().unwrap_or("(none)"))
    )?;
    let problems = &session.load_report().skipped_lines;
    if !problems.is_empty() {
        writeln!(
            out,
            "skipped {} unreadable line(s); see pi sessions verify",
            problems.len()
        )?;
    }
    writeln!(out)?;

    let active: HashSet<EntryIdx> = session.branch_path().entries.into_iter().collect();
    let tree = session.tree();
    // Frames: (entry, indent prefix for its line, connector).
    let mut stack: Vec<(EntryIdx, String, &'static str)> = Vec::new();
    let roots = &tree.roots;
    for (n, &root) in roots.iter().enumerate().rev() {
        let connector = if roots.len() == 1 {
            ""
        } else if n + 1 == roots.len() {
            "└─ "
        } else {
            "├─ "
        };
        let prefix = if roots.len() == 1 {
            ""
        } else if n + 1 == roots.len() {
            "   "
        } else {
            "│  "
        };
        stack.push((root, prefix.to_string(), connector));
    }
    let mut reached = vec![false; session.entries().len()];
    while let Some((idx, prefix, connector)) = stack.pop() {
        reached[idx as usize] = true;
        let base_prefix = prefix
            .strip_suffix("│  ")
            .or_else(|| prefix.strip_suffix("   "))
            .unwrap_or(&prefix);
        let marker = if active.contains(&idx) { '*' } else { ' ' };
        let shown_prefix = if connector.is_empty() {
            prefix.as_str()
        } else {
            base_prefix
        };
        writeln!(
            out,
            "{marker} {shown_prefix}{connector}{}",
            visible_line(&describe(session, idx, width))
        )?;
        let children = &tree.children[idx as usize];
        if children.len() == 1 {
            stack.push((children[0], prefix.clone(), ""));
            continue;
        }
        // Past MAX_INDENT branch levels the prefix stops growing: every line would
        // otherwise carry an indent as deep as the tree, and a tree branching at every
        // level of 100,000 would print gigabytes (the lines stay, the staircase ends).
        let capped = prefix.chars().count() >= 3 * MAX_INDENT;
        for (n, &child) in children.iter().enumerate().rev() {
            let last = n + 1 == children.len();
            let child_prefix = match (capped, last) {
                (true, _) => prefix.clone(),
                (false, true) => format!("{prefix}   "),
                (false, false) => format!("{prefix}│  "),
            };
            stack.push((child, child_prefix, if last { "└─ " } else { "├─ " }));
        }
    }
    // Entries whose ancestors loop hang below no root: list them rather than drop them
    // without a word.
    let unreached: Vec<EntryIdx> = (0..reached.len() as EntryIdx)
        .filter(|&i| !reached[i as usize])
        .collect();
    if !unreached.is_empty() {
        writeln!(
            out,
            "\nwarning: {} entr{} on or under a parent cycle (no root reaches them); see pi sessions verify",
            unreached.len(),
            if unreached.len() == 1 { "y is" } else { "ies are" }
        )?;
        for idx in unreached {
            writeln!(out, "! {}", describe(session, idx, width))?;
        }
    }
    Ok(())
}

/// `id  kind  text [label]` for one entry.
fn describe(session: &Session, idx: EntryIdx, width: usize) -> String {
    let r = session.entry(idx);
    let value = session.entry_value(idx);
    let s = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (what, text) = match &r.kind {
        Kind::Message => {
            let m = value.get("message").cloned().unwrap_or(Value::Null);
            let role = r.role.as_deref().unwrap_or("?").to_string();
            let text = match role.as_str() {
                "bashExecution" => format!("$ {}", s(&m, "command")),
                "toolResult" => format!("{}: {}", s(&m, "toolName"), text_of(&m)),
                "assistant" => {
                    let text = text_of(&m);
                    let calls: Vec<String> = m["content"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|b| b["type"] == "toolCall")
                        .map(|b| format!("{}()", b["name"].as_str().unwrap_or("?")))
                        .collect();
                    match (text.is_empty(), calls.is_empty()) {
                        (false, true) => text,
                        (true, false) => calls.join(" "),
                        (false, false) => format!("{text} → {}", calls.join(" ")),
                        (true, true) => s(&m, "errorMessage"),
                    }
                }
                _ => text_of(&m),
            };
            (role, text)
        }
        Kind::ModelChange => (
            "model".into(),
            format!("{}/{}", s(&value, "provider"), s(&value, "modelId")),
        ),
        Kind::ThinkingLevelChange => ("thinking".into(), s(&value, "thinkingLevel")),
        Kind::Compaction => (
            "compaction".into(),
            format!(
                "({} tokens before) {}",
                value["tokensBefore"],
                s(&value, "summary")
            ),
        ),
        Kind::BranchSummary => ("branch summary".into(), s(&value, "summary")),
        Kind::Label => (
            "label".into(),
            match value.get("label").and_then(Value::as_str) {
                Some(l) => format!("{l:?} on {}", s(&value, "targetId")),
                None => format!("cleared on {}", s(&value, "targetId")),
            },
        ),
        Kind::SessionInfo => ("name".into(), s(&value, "name")),
        Kind::Custom => ("custom".into(), s(&value, "customType")),
        Kind::CustomMessage => (
            "custom message".into(),
            format!("{}: {}", s(&value, "customType"), text_of(&value)),
        ),
        Kind::ContextEdit => (
            "context edit".into(),
            format!("of {}", s(&value, "targetId")),
        ),
        Kind::Usage => (
            "usage".into(),
            format!(
                "{} {}/{}",
                s(&value, "kind"),
                s(&value, "provider"),
                s(&value, "model")
            ),
        ),
        Kind::Other(kind) => (kind.to_string(), String::new()),
        Kind::Untyped => ("(untyped)".into(), String::new()),
    };
    let mut line = format!(
        "{}  {what:<14} {}",
        r.id.as_deref().unwrap_or("(no id)"),
        first_line(&text, width)
    );
    if let Some(label) = r.id.as_deref().and_then(|id| session.label(id)) {
        line.push_str(&format!("  [{}]", label.text));
    }
    line.trim_end().to_string()
}

/// A message's text on one line of the listing (text blocks joined by spaces).
fn text_of(m: &Value) -> String {
    pi_engine::js::content_text(m.get("content"), " ")
}

/// The first non-empty line, cut to `width` characters.
fn first_line(text: &str, width: usize) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if line.chars().count() <= width {
        line.to_string()
    } else {
        let cut: String = line.chars().take(width.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}
