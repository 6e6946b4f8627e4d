//! `pi sessions inspect FILE --json`: what the engine makes of a session file, with
//! the key names of real Pi's SessionManager (the oracle outputs in `fixtures/realpi`).
//! The file is only read.

use anyhow::Context as _;
use clap::Args;
use pi_engine::compaction::{self, CompactionSettings};
use pi_engine::context::{self, SessionPath};
use pi_engine::session::{EntryIdx, HeadCache, PathWalk, Session, Tree};
use serde_json::{json, Map, Value};
use std::io::Write;
use std::path::Path;

use super::store::{is_path_argument, StoreArgs};

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The session file (.jsonl), or a session id, unique id prefix or name in the store
    /// (as `--session` takes it).
    #[arg(value_name = "FILE|ID")]
    pub file: String,
    /// Build the branch and context from this entry instead of the leaf.
    #[arg(long)]
    pub leaf: Option<String>,
    /// Print JSON (the only format so far; kept for symmetry with other commands).
    #[arg(long)]
    pub json: bool,
    /// Also prepare a compaction with these `keepRecentTokens` values (reported as
    /// `compaction["keepRecentTokens=N"]`, next to `compaction.default`).
    #[arg(long, value_delimiter = ',', value_name = "N[,N…]")]
    pub keep_recent_tokens: Vec<u64>,
}

pub fn run(args: InspectArgs, store_args: &StoreArgs) -> anyhow::Result<i32> {
    let path = Path::new(&args.file);
    let mut session = if path.is_file() || is_path_argument(&args.file) {
        // Through the head cache in the agent dir (never beside or inside FILE).
        Session::open_cached(path, Some(&HeadCache::from_env()))?.0
    } else {
        let (bytes, name) = super::export::read_session(&args.file, store_args)?;
        Session::from_bytes(bytes, Path::new(&name))
            .with_context(|| format!("cannot read session {name}"))?
    };
    if let Some(leaf) = &args.leaf {
        session
            .branch(leaf)
            .with_context(|| format!("--leaf {leaf} in {}", args.file))?;
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    Report::build(&session)
        .with_compaction_plans(&args.keep_recent_tokens)
        .write(&mut out)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(0)
}

/// Everything `inspect` prints, key by key. Values are the oracle's JSON; the tree
/// stays flat (adjacency lists) because it can be deeper than any recursive writer.
pub struct Report<'a> {
    pub session: &'a Session,
    pub fields: Vec<(&'static str, Value)>,
    pub tree: Tree,
}

impl<'a> Report<'a> {
    pub fn build(session: &'a Session) -> Report<'a> {
        let branch = session.branch_path();
        let path = SessionPath::new(session, &branch.entries);
        let projection = context::project(&path);
        let context_ids: Vec<Value> = projection
            .entries
            .iter()
            .map(|e| id_value(session, branch.entries[e.pos]))
            .collect();
        let llm_messages = context::convert_to_llm(projection.messages());
        let branch_values = compaction_span(session, &branch);
        let token_estimates = json!({
            "perMessage": projection.messages().map(compaction::estimate_tokens).collect::<Vec<_>>(),
            "estimateContextTokens": compaction::estimate_context_tokens(projection.messages()),
            "lastAssistantUsage": last_assistant_usage(session, &branch, &branch_values),
        });

        let mut warnings: Vec<String> = Vec::new();
        if let Some(cycle) = &branch.cycle {
            warnings.push(format!(
                "parent cycle on the leaf path ({}); the path stops before the repeat",
                cycle.join(" -> ")
            ));
        }
        for skipped in &session.load_report().skipped_lines {
            warnings.push(skipped.to_string());
        }

        let mut labels = Map::new();
        let mut label_list: Vec<_> = session.labels().collect();
        label_list.sort_by_key(|(id, _)| session.find(id));
        for (id, label) in label_list {
            labels.insert(id.to_string(), Value::String(label.text.to_string()));
        }
        let branch_ids: Vec<Value> = branch
            .entries
            .iter()
            .map(|&i| id_value(session, i))
            .collect();
        let fields = vec![
            ("header", session.header().unwrap_or(Value::Null)),
            ("entryCount", json!(session.entry_count())),
            (
                "leafId",
                session.leaf_id().map_or(Value::Null, |id| json!(id)),
            ),
            (
                "sessionName",
                session.session_name().map_or(Value::Null, Value::String),
            ),
            ("labels", Value::Object(labels)),
            ("branch", Value::Array(branch_ids)),
            ("contextEntryIds", Value::Array(context_ids)),
            ("context", projection.context_value()),
            ("llmMessages", Value::Array(llm_messages)),
            ("tokenEstimates", token_estimates),
            ("compaction", compaction_plans(&branch, &branch_values, &[])),
            (
                "warnings",
                Value::Array(warnings.into_iter().map(Value::String).collect()),
            ),
        ];
        Report {
            session,
            fields,
            tree: session.tree(),
        }
    }

    /// Adds `compaction["keepRecentTokens=N"]` for each value, as the oracle records them.
    pub fn with_compaction_plans(mut self, keep_recent_tokens: &[u64]) -> Self {
        if keep_recent_tokens.is_empty() {
            return self;
        }
        let branch = self.session.branch_path();
        let values = compaction_span(self.session, &branch);
        let plans = compaction_plans(&branch, &values, keep_recent_tokens);
        if let Some((_, slot)) = self.fields.iter_mut().find(|(k, _)| *k == "compaction") {
            *slot = plans;
        }
        self
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// Writes the report object, the tree after `labels` as in Pi's key order.
    pub fn write(&self, out: &mut impl Write) -> anyhow::Result<()> {
        out.write_all(b"{")?;
        for (n, (key, value)) in self.fields.iter().enumerate() {
            field(out, key, value, n == 0)?;
            if *key == "labels" {
                out.write_all(b",\"tree\":")?;
                write_tree(self.session, &self.tree, out)?;
            }
        }
        out.write_all(b"}")?;
        Ok(())
    }
}

/// Writes the report of a session as one JSON object.
pub fn write_report(session: &Session, out: &mut impl Write) -> anyhow::Result<()> {
    Report::build(session).write(out)
}

/// The part of the branch compaction preparation depends on, parsed: from the latest
/// compaction's kept entry (or the compaction itself) to the leaf. Everything before
/// it can neither be summarized again nor change the projected context, so a long,
/// often-compacted session is not parsed whole just to plan the next compaction.
fn compaction_span(session: &Session, branch: &PathWalk) -> Vec<Value> {
    let path = &branch.entries;
    let kinds = |i: usize| &session.entry(path[i]).kind;
    let start = (0..path.len())
        .rev()
        .find(|&i| *kinds(i) == pi_engine::session::Kind::Compaction)
        .map_or(0, |c| {
            let compaction = session.entry_value(path[c]);
            let first_kept = compaction.get("firstKeptEntryId").and_then(Value::as_str);
            (0..c)
                .find(|&i| {
                    first_kept.is_some() && session.entry(path[i]).id.as_deref() == first_kept
                })
                .unwrap_or(c)
        });
    SessionPath::new(session, &path[start..]).values()
}

/// Pi's `getLastAssistantUsage(getBranch())`: the span is searched first; only when it
/// holds no usable assistant message is the rest of the branch read.
fn last_assistant_usage(session: &Session, branch: &PathWalk, span: &[Value]) -> Value {
    if let Some(usage) = compaction::last_assistant_usage(span) {
        return usage.clone();
    }
    if span.len() == branch.entries.len() {
        return Value::Null;
    }
    let all = SessionPath::new(session, &branch.entries).values();
    compaction::last_assistant_usage(&all)
        .cloned()
        .unwrap_or(Value::Null)
}

/// Pi's `prepareCompaction` on the branch with default settings and each extra
/// `keepRecentTokens`: `{settings, preparation}` or `{settings, preparation: null, reason}`.
/// A branch cut short by a parent cycle is not a conversation to compact:
/// `{"skipped": …}`, as the oracle records (Pi itself never returns there).
fn compaction_plans(walk: &PathWalk, branch: &[Value], keep_recent_tokens: &[u64]) -> Value {
    if walk.cycle.is_some() {
        return json!({"skipped": "parent cycle on leaf path"});
    }
    let plan = |settings: CompactionSettings| {
        let settings_json = json!({
            "enabled": settings.enabled,
            "reserveTokens": settings.reserve_tokens,
            "keepRecentTokens": settings.keep_recent_tokens,
        });
        match compaction::prepare_compaction(branch, &settings) {
            Some(prep) => json!({"settings": settings_json, "preparation": prep}),
            None => json!({
                "settings": settings_json,
                "preparation": null,
                "reason": compaction::no_preparation_reason(branch),
            }),
        }
    };
    let mut plans = Map::new();
    plans.insert("default".into(), plan(CompactionSettings::default()));
    for &keep in keep_recent_tokens {
        let settings = CompactionSettings {
            keep_recent_tokens: keep,
            ..CompactionSettings::default()
        };
        plans.insert(format!("keepRecentTokens={keep}"), plan(settings));
    }
    Value::Object(plans)
}

fn field(out: &mut impl Write, key: &str, value: &Value, first: bool) -> anyhow::Result<()> {
    if !first {
        out.write_all(b",")?;
    }
    serde_json::to_writer(&mut *out, key)?;
    out.write_all(b":")?;
    serde_json::to_writer(&mut *out, value)?;
    Ok(())
}

fn id_value(session: &Session, idx: EntryIdx) -> Value {
    session
        .entry(idx)
        .id
        .as_deref()
        .map_or(Value::Null, |id| Value::String(id.to_string()))
}

/// `[{id, type, role?, label?, children: […]}, …]`, depth-first with an explicit stack.
fn write_tree(session: &Session, tree: &Tree, out: &mut impl Write) -> anyhow::Result<()> {
    // Each frame: the sibling list being written and the next position in it.
    let mut stack: Vec<(&[EntryIdx], usize)> = vec![(&tree.roots, 0)];
    let has_labels = session.labels().next().is_some();
    out.write_all(b"[")?;
    while let Some((siblings, pos)) = stack.last_mut() {
        if *pos == siblings.len() {
            stack.pop();
            out.write_all(b"]")?;
            if !stack.is_empty() {
                out.write_all(b"}")?;
            }
            continue;
        }
        let idx = siblings[*pos];
        if *pos > 0 {
            out.write_all(b",")?;
        }
        *pos += 1;
        let record = session.entry(idx);
        // `{"id":…,"type":…,"role"?:…,"label"?:…,"children":[`, written field by field
        // (a tree can have hundreds of thousands of nodes); the object stays open for the
        // children.
        out.write_all(b"{\"id\":")?;
        serde_json::to_writer(&mut *out, &record.id.as_deref())?;
        out.write_all(b",\"type\":")?;
        serde_json::to_writer(&mut *out, &record.kind.as_str())?;
        if let (pi_engine::session::Kind::Message, Some(role)) = (&record.kind, &record.role) {
            out.write_all(b",\"role\":")?;
            serde_json::to_writer(&mut *out, role.as_ref())?;
        }
        if has_labels {
            if let Some(label) = record.id.as_deref().and_then(|id| session.label(id)) {
                out.write_all(b",\"label\":")?;
                serde_json::to_writer(&mut *out, label.text.as_ref())?;
            }
        }
        out.write_all(b",\"children\":[")?;
        stack.push((&tree.children[idx as usize], 0));
    }
    Ok(())
}
