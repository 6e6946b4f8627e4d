//! The /tree navigator: a snapshot of the session tree, filtered and folded into rows.
//!
//! Built once from [`pi_engine::session::Session`] when the dialog opens, so moving the
//! selection or switching filters never re-reads entry payloads.

use pi_engine::session::{Kind, Session};
use serde_json::Value;
use std::collections::HashSet;

/// Pi's tree filter modes, in ctrl+o order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    Default,
    NoTools,
    UserOnly,
    LabeledOnly,
    All,
}

impl Filter {
    pub const ALL: [Filter; 5] = [
        Filter::Default,
        Filter::NoTools,
        Filter::UserOnly,
        Filter::LabeledOnly,
        Filter::All,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Filter::Default => "default",
            Filter::NoTools => "no-tools",
            Filter::UserOnly => "user-only",
            Filter::LabeledOnly => "labeled-only",
            Filter::All => "all",
        }
    }

    pub fn cycle(self, forward: bool) -> Filter {
        let i = Filter::ALL.iter().position(|f| *f == self).unwrap_or(0);
        let n = Filter::ALL.len();
        Filter::ALL[if forward {
            (i + 1) % n
        } else {
            (i + n - 1) % n
        }]
    }
}

/// What an entry is, as far as the navigator cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeKind {
    User,
    Assistant,
    ToolResult,
    Compaction,
    BranchSummary,
    /// Bookkeeping entries (labels, model/thinking changes, session info, custom): shown
    /// only by the `all` filter.
    Meta(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub id: String,
    pub kind: NodeKind,
    pub text: String,
    pub label: Option<String>,
    pub label_time: Option<String>,
    pub children: Vec<usize>,
    pub parent: Option<usize>,
}

/// One visible row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub node: usize,
    pub indent: usize,
    pub folded: bool,
    pub has_children: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TreeNav {
    pub nodes: Vec<Node>,
    pub roots: Vec<usize>,
    /// Nodes on the active branch (root to leaf).
    pub active: HashSet<usize>,
    pub leaf: Option<usize>,
    pub filter: Filter,
    pub folded: HashSet<usize>,
    pub rows: Vec<Row>,
    pub selected: usize,
    pub show_label_time: bool,
    /// Label being edited for the selected node.
    pub label_edit: Option<String>,
    /// Typed search: only entries whose text or label contains it (any case) are shown.
    pub search: String,
}

fn message_text(v: &Value) -> String {
    let Some(m) = v.get("message") else {
        return String::new();
    };
    let content = m.get("content");
    let text = match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => {
            let mut out = Vec::new();
            for p in parts {
                match p.get("type").and_then(Value::as_str) {
                    Some("text") => out.push(
                        p.get("text")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string(),
                    ),
                    Some("toolCall") => out.push(format!(
                        "[{}]",
                        p.get("name").and_then(Value::as_str).unwrap_or("tool")
                    )),
                    _ => {}
                }
            }
            out.join(" ")
        }
        _ => String::new(),
    };
    if m.get("role").and_then(Value::as_str) == Some("toolResult") {
        let name = m.get("toolName").and_then(Value::as_str).unwrap_or("tool");
        return format!("{name}: {text}");
    }
    text
}

impl TreeNav {
    pub fn from_session(session: &Session) -> TreeNav {
        let tree = session.tree();
        let n = session.entries().len();
        let mut nodes = Vec::with_capacity(n);
        for idx in 0..n {
            let rec = session.entry(idx as u32);
            let id = rec.id.as_deref().unwrap_or("").to_string();
            let (kind, text) = match rec.kind {
                Kind::Message => {
                    let v = session.entry_value(idx as u32);
                    let kind = match rec.role.as_deref() {
                        Some("user") => NodeKind::User,
                        Some("assistant") => NodeKind::Assistant,
                        Some("toolResult") => NodeKind::ToolResult,
                        Some(other) => NodeKind::Meta(other.to_string()),
                        None => NodeKind::Meta("message".into()),
                    };
                    (kind, message_text(&v))
                }
                Kind::Compaction => (NodeKind::Compaction, "[compaction]".to_string()),
                Kind::BranchSummary => {
                    let v = session.entry_value(idx as u32);
                    (
                        NodeKind::BranchSummary,
                        format!(
                            "[branch summary] {}",
                            v.get("summary").and_then(Value::as_str).unwrap_or("")
                        ),
                    )
                }
                ref other => {
                    let name = other.as_str().unwrap_or("?").to_string();
                    (NodeKind::Meta(name.clone()), format!("[{name}]"))
                }
            };
            let label = session.label(&id);
            nodes.push(Node {
                id: id.clone(),
                kind,
                text: text.split_whitespace().collect::<Vec<_>>().join(" "),
                label: label.map(|l| l.text.to_string()),
                label_time: label.and_then(|l| l.timestamp.as_deref().map(str::to_string)),
                children: tree.children[idx].iter().map(|&c| c as usize).collect(),
                parent: None,
            });
        }
        for i in 0..nodes.len() {
            for c in nodes[i].children.clone() {
                nodes[c].parent = Some(i);
            }
        }
        let active: HashSet<usize> = session
            .branch_path()
            .entries
            .iter()
            .map(|&i| i as usize)
            .collect();
        let leaf = session.leaf().map(|l| l as usize);
        let mut nav = TreeNav {
            nodes,
            roots: tree.roots.iter().map(|&r| r as usize).collect(),
            active,
            leaf,
            filter: Filter::Default,
            folded: HashSet::new(),
            rows: Vec::new(),
            selected: 0,
            show_label_time: false,
            label_edit: None,
            search: String::new(),
        };
        nav.rebuild();
        // Start on the leaf, as Pi does.
        if let Some(leaf) = leaf {
            nav.select_node_or_ancestor(leaf);
        }
        nav
    }

    fn visible(&self, i: usize) -> bool {
        let n = &self.nodes[i];
        if !self.search.is_empty() {
            let q = self.search.to_lowercase();
            let hit = n.text.to_lowercase().contains(&q)
                || n.label
                    .as_ref()
                    .is_some_and(|l| l.to_lowercase().contains(&q));
            if !hit {
                return false;
            }
        }
        match self.filter {
            Filter::All => true,
            Filter::Default => !matches!(n.kind, NodeKind::Meta(_)),
            Filter::NoTools => !matches!(n.kind, NodeKind::Meta(_) | NodeKind::ToolResult),
            Filter::UserOnly => n.kind == NodeKind::User,
            Filter::LabeledOnly => n.label.is_some(),
        }
    }

    /// Recomputes the rows after a filter or fold change, keeping the selected node when
    /// it is still shown.
    pub fn rebuild(&mut self) {
        let keep = self.rows.get(self.selected).map(|r| r.node);
        self.rows.clear();
        // Iterative DFS: sessions can be deep chains, so no recursion.
        let mut stack: Vec<(usize, usize)> = self.roots.iter().rev().map(|&r| (r, 0)).collect();
        let root_indent = usize::from(self.roots.len() > 1);
        for s in stack.iter_mut() {
            s.1 = root_indent;
        }
        while let Some((i, indent)) = stack.pop() {
            let shown = self.visible(i);
            let folded = self.folded.contains(&i);
            if shown {
                self.rows.push(Row {
                    node: i,
                    indent,
                    folded,
                    has_children: !self.nodes[i].children.is_empty(),
                });
            }
            if folded && shown {
                continue;
            }
            let kids = &self.nodes[i].children;
            // Indent only where the tree branches, so a long conversation stays flush left.
            let child_indent = if kids.len() > 1 { indent + 1 } else { indent };
            for &c in kids.iter().rev() {
                stack.push((c, child_indent));
            }
        }
        self.selected = keep
            .and_then(|k| self.rows.iter().position(|r| r.node == k))
            .unwrap_or(self.selected)
            .min(self.rows.len().saturating_sub(1));
    }

    fn select_node_or_ancestor(&mut self, mut node: usize) {
        loop {
            if let Some(p) = self.rows.iter().position(|r| r.node == node) {
                self.selected = p;
                return;
            }
            match self.nodes[node].parent {
                Some(p) => node = p,
                None => return,
            }
        }
    }

    pub fn selected_node(&self) -> Option<&Node> {
        self.rows.get(self.selected).map(|r| &self.nodes[r.node])
    }

    pub fn set_filter(&mut self, f: Filter) {
        // Pressing a filter's key while it is on toggles back to default, as in Pi.
        self.filter = if self.filter == f && f != Filter::Default {
            Filter::Default
        } else {
            f
        };
        self.rebuild();
    }

    pub fn move_by(&mut self, delta: isize) {
        if self.rows.is_empty() {
            return;
        }
        let n = self.rows.len() as isize;
        self.selected = (self.selected as isize + delta).clamp(0, n - 1) as usize;
    }

    /// Fold the selected node if it has children, otherwise jump to the start of the
    /// enclosing segment (the nearest shown ancestor that is a branch point's child).
    pub fn fold_or_up(&mut self) {
        let Some(row) = self.rows.get(self.selected).cloned() else {
            return;
        };
        if row.has_children && !row.folded {
            self.folded.insert(row.node);
            self.rebuild();
            return;
        }
        let mut cur = self.nodes[row.node].parent;
        while let Some(p) = cur {
            let parent_branches = self.nodes[p]
                .parent
                .map(|pp| self.nodes[pp].children.len() > 1)
                .unwrap_or(true);
            if parent_branches && self.rows.iter().any(|r| r.node == p) {
                self.select_node_or_ancestor(p);
                return;
            }
            cur = self.nodes[p].parent;
        }
        self.selected = 0;
    }

    pub fn unfold_or_down(&mut self) {
        let Some(row) = self.rows.get(self.selected).cloned() else {
            return;
        };
        if row.folded {
            self.folded.remove(&row.node);
            self.rebuild();
            return;
        }
        // Next row that starts a segment (indent changes), or the last row.
        let next = self.rows[self.selected + 1..]
            .iter()
            .position(|r| r.indent != row.indent)
            .map(|p| self.selected + 1 + p)
            .unwrap_or(self.rows.len().saturating_sub(1));
        self.selected = next;
    }

    /// Pi's selection rule: a user message puts its text back in the editor and moves the
    /// leaf to its parent (so the message can be edited and re-sent); anything else becomes
    /// the leaf. Returns (new leaf id or None for the root, editor text).
    pub fn resolve_selection(&self) -> Option<(Option<String>, Option<String>)> {
        let row = self.rows.get(self.selected)?;
        let node = &self.nodes[row.node];
        if node.kind == NodeKind::User {
            let parent = node.parent.map(|p| self.nodes[p].id.clone());
            Some((parent, Some(node.text.clone())))
        } else {
            Some((Some(node.id.clone()), None))
        }
    }

    /// Whether moving the leaf to `target` leaves the current branch.
    pub fn leaves_branch(&self, target: Option<&str>) -> bool {
        let current = self.leaf.map(|l| self.nodes[l].id.as_str());
        current != target
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small branched session: two answers to the first prompt, one label, one tool call.
    pub(crate) fn sample_session() -> Session {
        let lines = [
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#,
            r#"{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"fix the bug","timestamp":1}}"#,
            r#"{"type":"message","id":"a2","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Reading."},{"type":"toolCall","id":"t1","name":"read","arguments":{"path":"a.rs"}}],"timestamp":2}}"#,
            r#"{"type":"message","id":"a3","parentId":"a2","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"t1","toolName":"read","content":[{"type":"text","text":"fn main() {}"}],"isError":false,"timestamp":3}}"#,
            r#"{"type":"message","id":"a4","parentId":"a3","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Fixed it."}],"timestamp":4}}"#,
            r#"{"type":"message","id":"b1","parentId":"a1","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Another approach."}],"timestamp":5}}"#,
            r#"{"type":"message","id":"b2","parentId":"b1","timestamp":"2026-01-01T00:00:06.000Z","message":{"role":"user","content":"try again","timestamp":6}}"#,
            r#"{"type":"label","id":"l1","parentId":"b2","timestamp":"2026-01-01T00:00:07.000Z","targetId":"a4","label":"good"}"#,
            r#"{"type":"message","id":"b3","parentId":"l1","timestamp":"2026-01-01T00:00:08.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Done again."}],"timestamp":8}}"#,
        ];
        let bytes = lines.join("\n").into_bytes();
        match Session::from_bytes(bytes, std::path::Path::new("/tmp/s.jsonl")) {
            Ok(s) => s,
            Err(e) => panic!("sample session: {e}"),
        }
    }

    fn texts(nav: &TreeNav) -> Vec<String> {
        nav.rows
            .iter()
            .map(|r| format!("{}{}", "  ".repeat(r.indent), nav.nodes[r.node].id))
            .collect()
    }

    /// A file where one id is written twice (same parent, so the tree stays acyclic):
    /// Pi keeps both entries, and every view that walks the file must too.
    fn repeated_id_session() -> Session {
        let lines = [
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}"#,
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"first question","timestamp":1}}"#,
            r#"{"type":"message","id":"b","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"first answer"}],"usage":{"input":10,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":11,"cost":{"total":0}},"timestamp":2}}"#,
            r#"{"type":"message","id":"x","parentId":"b","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":"second question","timestamp":3}}"#,
            r#"{"type":"message","id":"x","parentId":"b","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"user","content":"third question","timestamp":4}}"#,
            r#"{"type":"message","id":"y","parentId":"x","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"assistant","content":[{"type":"text","text":"last answer"}],"usage":{"input":20,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":22,"cost":{"total":0}},"timestamp":5}}"#,
        ];
        match Session::from_bytes(
            lines.join("\n").into_bytes(),
            std::path::Path::new("/tmp/r.jsonl"),
        ) {
            Ok(s) => s,
            Err(e) => panic!("repeated-id session: {e}"),
        }
    }

    #[test]
    fn views_walk_every_entry_when_ids_repeat() {
        let session = repeated_id_session();
        assert_eq!(session.entry_count(), 4, "distinct ids");
        assert_eq!(session.entries().len(), 5, "entries in the file");

        let forkable: Vec<String> = crate::tui::session_ops::fork_rows(&session)
            .into_iter()
            .map(|r| r.text)
            .collect();
        assert_eq!(
            forkable,
            ["first question", "second question", "third question"]
        );

        let totals = crate::tui::session_ops::session_totals(&session);
        assert_eq!((totals.input, totals.output), (30, 3));

        // Building the /tree view used to index past its node list here.
        let nav = TreeNav::from_session(&session);
        assert_eq!(nav.nodes.len(), 5);
        assert_eq!(
            nav.selected_node().map(|n| n.text.as_str()),
            Some("last answer")
        );
    }

    #[test]
    fn filters_select_rows() {
        let mut nav = TreeNav::from_session(&sample_session());
        assert_eq!(nav.selected_node().map(|n| n.id.as_str()), Some("b3"));
        assert_eq!(
            texts(&nav),
            ["a1", "  a2", "  a3", "  a4", "  b1", "  b2", "  b3"]
        );
        nav.set_filter(Filter::NoTools);
        assert_eq!(texts(&nav), ["a1", "  a2", "  a4", "  b1", "  b2", "  b3"]);
        nav.set_filter(Filter::UserOnly);
        assert_eq!(texts(&nav), ["a1", "  b2"]);
        nav.set_filter(Filter::LabeledOnly);
        assert_eq!(texts(&nav), ["  a4"]);
        nav.set_filter(Filter::All);
        assert_eq!(nav.rows.len(), 8);
        nav.set_filter(Filter::All);
        assert_eq!(nav.filter, Filter::Default);
    }

    #[test]
    fn selection_rules_and_folding() {
        let mut nav = TreeNav::from_session(&sample_session());
        nav.selected = 5; // b2, a user message
        assert_eq!(
            nav.resolve_selection(),
            Some((Some("b1".into()), Some("try again".into())))
        );
        nav.selected = 3; // a4
        assert_eq!(nav.resolve_selection(), Some((Some("a4".into()), None)));
        assert!(nav.leaves_branch(Some("a4")));
        assert!(!nav.leaves_branch(Some("b3")));
        nav.selected = 0;
        nav.fold_or_up();
        assert_eq!(texts(&nav), ["a1"]);
        nav.unfold_or_down();
        assert_eq!(nav.rows.len(), 7);
    }
}
