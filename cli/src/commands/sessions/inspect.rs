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

/// Everything `inspect` prints, key by key. Small fields are values; the ones that
/// follow the context's size (`context`, `llmMessages`, `tokenEstimates`,
/// `compaction`) are written straight to the output when the report is written, one
/// context entry at a time, so a huge uncompacted session is never held as values
/// more than once. The tree stays flat (adjacency lists) because it can be deeper
/// than any recursive writer.
pub struct Report<'a> {
    pub session: &'a Session,
    pub tree: Tree,
    branch: PathWalk,
    fields: Vec<(&'static str, Field)>,
}

/// A report field: a value, or one written from the session when the report is.
enum Field {
    Ready(Value),
    Context,
    LlmMessages,
    TokenEstimates,
    /// The plans for default settings and these extra `keepRecentTokens`.
    Compaction(Vec<u64>),
}

impl<'a> Report<'a> {
    pub fn build(session: &'a Session) -> Report<'a> {
        let branch = session.branch_path();
        let path = SessionPath::of(session, &branch);
        let context_ids: Vec<Value> = context::context_entry_positions(&path)
            .iter()
            .map(|&pos| id_value(session, branch.entries[pos]))
            .collect();

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
            (
                "header",
                Field::Ready(session.header().unwrap_or(Value::Null)),
            ),
            ("entryCount", Field::Ready(json!(session.entry_count()))),
            (
                "leafId",
                Field::Ready(session.leaf_id().map_or(Value::Null, |id| json!(id))),
            ),
            (
                "sessionName",
                Field::Ready(session.session_name().map_or(Value::Null, Value::String)),
            ),
            ("labels", Field::Ready(Value::Object(labels))),
            ("branch", Field::Ready(Value::Array(branch_ids))),
            ("contextEntryIds", Field::Ready(Value::Array(context_ids))),
            ("context", Field::Context),
            ("llmMessages", Field::LlmMessages),
            ("tokenEstimates", Field::TokenEstimates),
            ("compaction", Field::Compaction(Vec::new())),
            (
                "warnings",
                Field::Ready(Value::Array(
                    warnings.into_iter().map(Value::String).collect(),
                )),
            ),
        ];
        Report {
            session,
            tree: session.tree(),
            branch,
            fields,
        }
    }

    /// Adds `compaction["keepRecentTokens=N"]` for each value, as the oracle records them.
    pub fn with_compaction_plans(mut self, keep_recent_tokens: &[u64]) -> Self {
        if let Some((_, slot)) = self.fields.iter_mut().find(|(k, _)| *k == "compaction") {
            *slot = Field::Compaction(keep_recent_tokens.to_vec());
        }
        self
    }

    /// One field as a value (built in full: for tests and small sessions).
    pub fn get(&self, key: &str) -> Option<Value> {
        let (_, field) = self.fields.iter().find(|(k, _)| *k == key)?;
        if let Field::Ready(v) = field {
            return Some(v.clone());
        }
        let mut buf = Vec::new();
        self.write_field(field, &mut buf).ok()?;
        serde_json::from_slice(&buf).ok()
    }

    /// Writes the report object, the tree after `labels` as in Pi's key order.
    pub fn write(&self, out: &mut impl Write) -> anyhow::Result<()> {
        out.write_all(b"{")?;
        for (n, (key, value)) in self.fields.iter().enumerate() {
            if n > 0 {
                out.write_all(b",")?;
            }
            serde_json::to_writer(&mut *out, key)?;
            out.write_all(b":")?;
            self.write_field(value, out)?;
            if *key == "labels" {
                out.write_all(b",\"tree\":")?;
                write_tree(self.session, &self.tree, out)?;
            }
        }
        out.write_all(b"}")?;
        Ok(())
    }

    fn path(&self) -> SessionPath<'_> {
        SessionPath::of(self.session, &self.branch)
    }

    fn write_field(&self, field: &Field, out: &mut impl Write) -> anyhow::Result<()> {
        match field {
            Field::Ready(v) => serde_json::to_writer(&mut *out, v)?,
            Field::Context => self.write_context(out)?,
            Field::LlmMessages => {
                let mut list = ListWriter::new(out)?;
                context::project_each(&self.path(), |_, messages| {
                    for m in context::convert_to_llm(&messages) {
                        list.item(&m);
                    }
                });
                list.finish()?;
            }
            Field::TokenEstimates => {
                let mut acc = compaction::ContextTokensAcc::default();
                context::project_each(&self.path(), |_, messages| {
                    messages.iter().for_each(|m| {
                        acc.push(m);
                    });
                });
                let estimates = json!({
                    "perMessage": acc.per_message(),
                    "estimateContextTokens": acc.finish(),
                    "lastAssistantUsage": compaction::last_assistant_usage(&self.path())
                        .unwrap_or(Value::Null),
                });
                serde_json::to_writer(&mut *out, &estimates)?;
            }
            Field::Compaction(keep) => self.write_compaction_plans(keep, out)?,
        }
        Ok(())
    }

    /// Pi's `SessionContext` object: `{messages, thinkingLevel, model}`, as
    /// `Projection::context_value` builds it, message by message.
    fn write_context(&self, out: &mut impl Write) -> anyhow::Result<()> {
        let path = self.path();
        let (thinking_level, model) = context::context_settings(&path);
        out.write_all(b"{\"messages\":")?;
        let mut list = ListWriter::new(&mut *out)?;
        context::project_each(&path, |_, messages| {
            messages.iter().for_each(|m| list.item(m));
        });
        list.finish()?;
        if let Some(level) = &thinking_level {
            out.write_all(b",\"thinkingLevel\":")?;
            serde_json::to_writer(&mut *out, level)?;
        }
        out.write_all(b",\"model\":")?;
        serde_json::to_writer(&mut *out, &model.unwrap_or(Value::Null))?;
        out.write_all(b"}")?;
        Ok(())
    }

    /// Pi's `prepareCompaction` on the branch with default settings and each extra
    /// `keepRecentTokens`: `{settings, preparation}` or `{settings, preparation: null,
    /// reason}`, each preparation written as it is serialized. A branch cut short by a
    /// parent cycle is not a conversation to compact: `{"skipped": …}`, as the oracle
    /// records (Pi itself never returns there).
    fn write_compaction_plans(&self, keep: &[u64], out: &mut impl Write) -> anyhow::Result<()> {
        if self.branch.cycle.is_some() {
            serde_json::to_writer(&mut *out, &json!({"skipped": "parent cycle on leaf path"}))?;
            return Ok(());
        }
        let path = self.path();
        let mut plans = vec![("default".to_string(), CompactionSettings::default())];
        for &keep in keep {
            let settings = CompactionSettings {
                keep_recent_tokens: keep,
                ..CompactionSettings::default()
            };
            plans.push((format!("keepRecentTokens={keep}"), settings));
        }
        out.write_all(b"{")?;
        for (n, (key, settings)) in plans.iter().enumerate() {
            if n > 0 {
                out.write_all(b",")?;
            }
            serde_json::to_writer(&mut *out, key)?;
            out.write_all(b":{\"settings\":")?;
            let settings_json = json!({
                "enabled": settings.enabled,
                "reserveTokens": settings.reserve_tokens,
                "keepRecentTokens": settings.keep_recent_tokens,
            });
            serde_json::to_writer(&mut *out, &settings_json)?;
            out.write_all(b",\"preparation\":")?;
            // Written as it is read from the session: the plan holds no message.
            match compaction::plan_compaction(&path, settings) {
                Some(plan) => plan.write_json(&path, &mut *out)?,
                None => {
                    out.write_all(b"null,\"reason\":")?;
                    serde_json::to_writer(&mut *out, compaction::no_preparation_reason(&path))?;
                }
            }
            out.write_all(b"}")?;
        }
        out.write_all(b"}")?;
        Ok(())
    }
}

/// Writes a JSON array item by item from inside a callback that cannot return an
/// error: the first error stops the writing and is returned by `finish`.
struct ListWriter<W: Write> {
    out: W,
    first: bool,
    error: Option<std::io::Error>,
}

impl<W: Write> ListWriter<W> {
    fn new(mut out: W) -> std::io::Result<Self> {
        out.write_all(b"[")?;
        Ok(ListWriter {
            out,
            first: true,
            error: None,
        })
    }

    fn item(&mut self, value: &Value) {
        if self.error.is_some() {
            return;
        }
        let sep: &[u8] = if self.first { b"" } else { b"," };
        self.first = false;
        if let Err(e) = self
            .out
            .write_all(sep)
            .and_then(|()| serde_json::to_writer(&mut self.out, value).map_err(Into::into))
        {
            self.error = Some(e);
        }
    }

    fn finish(mut self) -> std::io::Result<()> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.out.write_all(b"]")
    }
}

/// Writes the report of a session as one JSON object.
pub fn write_report(session: &Session, out: &mut impl Write) -> anyhow::Result<()> {
    Report::build(session).write(out)
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
