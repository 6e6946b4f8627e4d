//! The session tree: an index over entry lines, with Pi's SessionManager semantics.
//!
//! A [`Session`] holds the bytes of its lines and, per entry, a small
//! [`EntryRecord`] (id, parent, type, role, where the line is). Payloads are
//! parsed only when asked for ([`Session::entry_value`]), so opening a large
//! session costs one pass over its bytes and a few words per entry.
//!
//! Indices into `entries` are the handles used everywhere ([`EntryIdx`]); ids
//! are resolved through `by_id`, where, as in Pi, the last entry with an id wins.

mod heads;
mod load;
mod marks;
mod text;
mod tree;
pub mod verify;
mod write;

pub use heads::{HeadCache, OpenedFrom};
pub use load::{LoadError, LoadReport};
pub use marks::{Mark, PathMarks};
pub use tree::{LeafChoice, PathWalk, Tree, TreeNode};
pub use write::AppendError;
pub use write::PreparedEntry;

use pi_formats::jsonl;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;

/// Position of an entry in file order (header excluded).
pub type EntryIdx = u32;

/// An entry's `type`, with the kinds Pi knows spelled out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Message,
    ThinkingLevelChange,
    ModelChange,
    Compaction,
    BranchSummary,
    Custom,
    CustomMessage,
    Label,
    SessionInfo,
    ContextEdit,
    Usage,
    /// A type this version does not know; kept verbatim and ignored by context building.
    Other(Box<str>),
    /// `type` missing or not a string.
    Untyped,
}

impl Kind {
    pub fn parse(kind: Option<&str>) -> Kind {
        use pi_formats::entry::kind as k;
        match kind {
            None => Kind::Untyped,
            Some(k::MESSAGE) => Kind::Message,
            Some(k::THINKING_LEVEL_CHANGE) => Kind::ThinkingLevelChange,
            Some(k::MODEL_CHANGE) => Kind::ModelChange,
            Some(k::COMPACTION) => Kind::Compaction,
            Some(k::BRANCH_SUMMARY) => Kind::BranchSummary,
            Some(k::CUSTOM) => Kind::Custom,
            Some(k::CUSTOM_MESSAGE) => Kind::CustomMessage,
            Some(k::LABEL) => Kind::Label,
            Some(k::SESSION_INFO) => Kind::SessionInfo,
            Some(k::CONTEXT_EDIT) => Kind::ContextEdit,
            Some(k::USAGE) => Kind::Usage,
            Some(other) => Kind::Other(other.into()),
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        use pi_formats::entry::kind as k;
        Some(match self {
            Kind::Message => k::MESSAGE,
            Kind::ThinkingLevelChange => k::THINKING_LEVEL_CHANGE,
            Kind::ModelChange => k::MODEL_CHANGE,
            Kind::Compaction => k::COMPACTION,
            Kind::BranchSummary => k::BRANCH_SUMMARY,
            Kind::Custom => k::CUSTOM,
            Kind::CustomMessage => k::CUSTOM_MESSAGE,
            Kind::Label => k::LABEL,
            Kind::SessionInfo => k::SESSION_INFO,
            Kind::ContextEdit => k::CONTEXT_EDIT,
            Kind::Usage => k::USAGE,
            Kind::Other(other) => other,
            Kind::Untyped => return None,
        })
    }
}

/// How an entry names its parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parent {
    /// `parentId: null`.
    Root,
    Id(Box<str>),
    /// No `parentId` key.
    Missing,
    /// A `parentId` that is neither a string nor null.
    Other,
}

impl Parent {
    /// The parent id Pi follows (`entry.parentId ? byId.get(parentId) : undefined`).
    pub fn id(&self) -> Option<&str> {
        match self {
            Parent::Id(id) if !id.is_empty() => Some(id),
            _ => None,
        }
    }
}

/// The indexed facts about one entry line.
#[derive(Debug, Clone)]
pub struct EntryRecord {
    pub id: Option<Box<str>>,
    pub parent: Parent,
    pub kind: Kind,
    /// `message.role` for message entries.
    pub role: Option<Box<str>>,
    pub timestamp: Option<Box<str>>,
    pub target_id: Option<Box<str>>,
    pub label: Option<Box<str>>,
    pub name: Option<Box<str>>,
    /// 1-based physical line number in the source file.
    pub line: u64,
    start: usize,
    len: usize,
}

impl EntryRecord {
    pub fn is_message_with_role(&self, role: &str) -> bool {
        self.kind == Kind::Message && self.role.as_deref() == Some(role)
    }
}

/// Entry indices by id. The table holds only indices; ids are compared and
/// re-hashed through `entries`, so the index costs no copy of any id.
#[derive(Debug, Clone, Default)]
struct IdIndex {
    table: hashbrown::HashTable<EntryIdx>,
    hasher: hashbrown::DefaultHashBuilder,
}

impl IdIndex {
    fn hash(&self, id: &str) -> u64 {
        std::hash::BuildHasher::hash_one(&self.hasher, id)
    }

    fn get(&self, entries: &[EntryRecord], id: &str) -> Option<EntryIdx> {
        self.table
            .find(self.hash(id), |&i| {
                entries[i as usize].id.as_deref() == Some(id)
            })
            .copied()
    }

    /// Points `id` at `idx` (the last entry with an id wins). True when `id` was
    /// already taken (the earlier entry is shadowed from now on).
    fn insert(&mut self, entries: &[EntryRecord], id: &str, idx: EntryIdx) -> bool {
        let hash = self.hash(id);
        let eq = |&i: &EntryIdx| entries[i as usize].id.as_deref() == Some(id);
        let rehash = |&i: &EntryIdx| {
            std::hash::BuildHasher::hash_one(
                &self.hasher,
                entries[i as usize].id.as_deref().unwrap_or(""),
            )
        };
        match self.table.entry(hash, eq, rehash) {
            hashbrown::hash_table::Entry::Occupied(mut e) => {
                *e.get_mut() = idx;
                true
            }
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert(idx);
                false
            }
        }
    }

    fn clear(&mut self) {
        self.table.clear();
    }
}

/// A label's current text and when it was set.
#[derive(Debug, Clone, PartialEq)]
pub struct Label {
    pub text: Box<str>,
    pub timestamp: Option<Box<str>>,
}

/// One session: header, entries in file order, and the derived tree index.
#[derive(Debug, Clone)]
pub struct Session {
    path: Option<PathBuf>,
    /// The lines' bytes: the file as read or mapped (or as migrated), then appended lines.
    text: text::Text,
    header_span: Option<(usize, usize)>,
    header_line: u64,
    entries: Vec<EntryRecord>,
    /// Last entry with each id, keyed by the id in `entries` (not a copy of it).
    by_id: IdIndex,
    /// Last entry without a string id: they share one key, as `undefined` does in Pi's map.
    without_id: Option<EntryIdx>,
    labels: HashMap<Box<str>, Label>,
    leaf: Option<EntryIdx>,
    report: LoadReport,
    /// Parent for the branch summary being appended (see `branch_with_summary_with`).
    pending_branch_parent: Option<String>,
    /// No two entries share an id: an id then names exactly one entry, so a
    /// search by id along a path compares entry indices, not strings.
    ids_unique: bool,
    /// The last path walked from a leaf, extended instead of walked again when the
    /// next leaf descends from it (each turn appends a few entries to a long branch).
    branch_memo: tree::BranchMemo,
}

impl Session {
    fn empty() -> Session {
        Session {
            path: None,
            text: text::Text::default(),
            header_span: None,
            header_line: 0,
            entries: Vec::new(),
            by_id: IdIndex::default(),
            without_id: None,
            labels: HashMap::new(),
            leaf: None,
            report: LoadReport::default(),
            pending_branch_parent: None,
            ids_unique: true,
            branch_memo: tree::BranchMemo::default(),
        }
    }

    fn push_record(&mut self, record: EntryRecord) {
        self.entries.push(record);
    }

    /// Pi's `_buildIndex`: ids (last wins), labels (last wins, falsy clears), leaf = last line.
    fn rebuild_index(&mut self) {
        self.by_id.clear();
        self.without_id = None;
        self.labels.clear();
        self.by_id.table.reserve(self.entries.len(), |_| 0);
        self.leaf = None;
        self.ids_unique = true;
        self.branch_memo.clear();
        for idx in 0..self.entries.len() {
            self.index_entry(idx as EntryIdx);
        }
    }

    fn index_entry(&mut self, idx: EntryIdx) {
        let record = &self.entries[idx as usize];
        match &record.id {
            Some(id) => {
                if self.by_id.insert(&self.entries, id, idx) {
                    // Parent links to this id now resolve elsewhere.
                    self.ids_unique = false;
                    self.branch_memo.clear();
                }
            }
            None => self.without_id = Some(idx),
        }
        self.leaf = Some(idx);
        if record.kind == Kind::Label {
            if let Some(target) = record.target_id.clone() {
                match record.label.as_deref().filter(|l| !l.is_empty()) {
                    Some(text) => {
                        self.labels.insert(
                            target,
                            Label {
                                text: text.into(),
                                timestamp: record.timestamp.clone(),
                            },
                        );
                    }
                    None => {
                        self.labels.remove(&target);
                    }
                }
            }
        }
    }

    /// The file this session was read from, if any.
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    pub fn set_path(&mut self, path: Option<PathBuf>) {
        self.path = path;
    }

    /// What loading found (skipped lines, migration, missing newline).
    pub fn load_report(&self) -> &LoadReport {
        &self.report
    }

    /// The header as a value (None only for a session created empty).
    pub fn header(&self) -> Option<Value> {
        let (start, len) = self.header_span?;
        jsonl::parse_value(self.text.slice(start, len)).ok()
    }

    /// The header line's bytes.
    pub fn header_line(&self) -> Option<&[u8]> {
        self.header_span
            .map(|(start, len)| self.text.slice(start, len))
    }

    /// The session as JSONL: the header and every indexed entry line, each ending in LF.
    /// For a file read from disk this omits the lines Pi skips (malformed, blank), so it
    /// is the file's bytes only for clean files; it is meant for migrated and new sessions.
    pub fn to_jsonl(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.text.len());
        // Writing to a `Vec` does not fail.
        let _ = self.write_jsonl(&mut out);
        out
    }

    /// [`Session::to_jsonl`] written to `out` line by line.
    pub fn write_jsonl(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        if let Some(header) = self.header_line() {
            out.write_all(header)?;
            out.write_all(b"\n")?;
        }
        for i in 0..self.entries.len() as EntryIdx {
            out.write_all(self.entry_line(i))?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }

    /// The header's 1-based line number in the source file.
    pub fn header_line_number(&self) -> u64 {
        self.header_line
    }

    /// The session id from the header.
    pub fn session_id(&self) -> Option<String> {
        self.header()?.get("id")?.as_str().map(str::to_string)
    }

    /// All entries in file order (header excluded).
    pub fn entries(&self) -> &[EntryRecord] {
        &self.entries
    }

    pub fn entry(&self, idx: EntryIdx) -> &EntryRecord {
        &self.entries[idx as usize]
    }

    /// The exact bytes of an entry's line (no LF).
    pub fn entry_line(&self, idx: EntryIdx) -> &[u8] {
        let r = &self.entries[idx as usize];
        self.text.slice(r.start, r.len)
    }

    /// Parses an entry's full line.
    pub fn entry_value(&self, idx: EntryIdx) -> Value {
        // Every indexed line parsed once already, so this cannot fail.
        jsonl::parse_value(self.entry_line(idx)).unwrap_or(Value::Null)
    }

    /// Whether every entry id is distinct (then [`Session::find`] names the only
    /// entry with an id).
    pub fn ids_unique(&self) -> bool {
        self.ids_unique
    }

    /// Every entry of the file in file order, repeated ids included. Walk this, not
    /// `0..entry_count()`, to visit each entry: the count is of distinct ids.
    pub fn indices(&self) -> impl Iterator<Item = EntryIdx> {
        0..self.entries.len() as EntryIdx
    }

    /// Pi's `getEntryCount()`: the number of distinct ids (not the number of entries
    /// when ids repeat; see [`Session::indices`]).
    pub fn entry_count(&self) -> usize {
        self.by_id.table.len() + usize::from(self.without_id.is_some())
    }

    /// The entry holding `id` (the last one, if ids repeat).
    pub fn find(&self, id: &str) -> Option<EntryIdx> {
        self.by_id.get(&self.entries, id)
    }

    fn parent_of(&self, idx: EntryIdx) -> Option<EntryIdx> {
        let id = self.entries[idx as usize].parent.id()?;
        self.find(id)
    }

    /// The current leaf (after load: the last entry in the file, as in Pi).
    pub fn leaf(&self) -> Option<EntryIdx> {
        self.leaf
    }

    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf
            .and_then(|idx| self.entries[idx as usize].id.as_deref())
    }

    /// Moves the leaf to an existing entry (Pi's `branch`).
    pub fn branch(&mut self, id: &str) -> Result<(), AppendError> {
        let idx = self
            .find(id)
            .ok_or_else(|| AppendError::NotFound(id.to_string()))?;
        self.leaf = Some(idx);
        Ok(())
    }

    /// Puts the leaf before the first entry: the next append is a new root.
    pub fn reset_leaf(&mut self) {
        self.leaf = None;
    }

    /// The live label of an entry.
    pub fn label(&self, id: &str) -> Option<&Label> {
        self.labels.get(id)
    }

    /// Labels that point at existing entries, keyed by target id.
    pub fn labels(&self) -> impl Iterator<Item = (&str, &Label)> {
        self.labels
            .iter()
            .filter(|(id, _)| self.find(id).is_some())
            .map(|(id, l)| (id.as_ref(), l))
    }

    /// Pi 1.6's `getSessionName()`: the latest `session_info` decides; empty clears.
    pub fn session_name(&self) -> Option<String> {
        let record = self
            .entries
            .iter()
            .rev()
            .find(|r| r.kind == Kind::SessionInfo)?;
        let trimmed = pi_formats::jsonl::js_trim(record.name.as_deref()?);
        (!trimmed.is_empty()).then(|| trimmed.to_string())
    }

    /// Children of an entry, in file order.
    pub fn children(&self, id: &str) -> Vec<EntryIdx> {
        (0..self.entries.len() as EntryIdx)
            .filter(|&i| self.entries[i as usize].parent.id() == Some(id))
            .collect()
    }
}
