//! Appending entries, and deriving new sessions (fork, clone, fork-from).
//!
//! An append is two steps so the in-memory tree never runs ahead of the store:
//! [`Session::prepare`] builds the line (fresh id, parent = leaf, timestamp),
//! the caller writes it durably, and only then [`Session::commit`] indexes it.
//! [`Session::append_with`] does both around a write closure.

use super::{EntryIdx, EntryRecord, Kind, Session};
use pi_formats::entry::{EntryBase, NewEntry};
use pi_formats::head::EntryHead;
use pi_formats::header::NewHeader;
use serde_json::Value;

/// Why an entry could not be appended.
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error("Entry {0} not found")]
    NotFound(String),
    #[error("{0}")]
    Invalid(String),
    #[error("could not write the entry: {0}")]
    Write(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// An entry ready to be written: its base fields and its JSONL line (no LF).
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedEntry {
    pub base: EntryBase,
    pub line: String,
}

impl Session {
    /// A new, empty session with this header.
    pub fn create(header: &NewHeader) -> Session {
        let mut session = Session::empty();
        let line = header.to_line();
        session.header_span = Some((0, line.len()));
        session.header_line = 1;
        let mut text = line.into_bytes();
        text.push(b'\n');
        session.text = super::text::Text::owned(text);
        session
    }

    /// Builds the next entry's line: a fresh id, the current leaf as parent, now.
    pub fn prepare(&self, entry: &NewEntry) -> PreparedEntry {
        self.prepare_at(entry, self.leaf_id().map(str::to_string))
    }

    fn prepare_at(&self, entry: &NewEntry, parent_id: Option<String>) -> PreparedEntry {
        let base = EntryBase {
            id: pi_formats::id::entry_id(|id| self.find(id).is_some()),
            parent_id,
            timestamp: pi_formats::time::now_iso(),
        };
        let line = entry.to_line(&base);
        PreparedEntry { base, line }
    }

    /// Indexes an entry whose line has been written; it becomes the leaf.
    // `prepare` built the line from a `NewEntry`, so it parses; a panic here is a bug in
    // this crate, not bad input.
    #[allow(clippy::expect_used)]
    pub fn commit(&mut self, prepared: &PreparedEntry) -> EntryIdx {
        let start = self.text.push_line(prepared.line.as_bytes());
        let head = EntryHead::parse(prepared.line.as_bytes())
            .expect("lines built by NewEntry are valid JSON");
        let line_no = self.entries.last().map_or(self.header_line, |r| r.line) + 1;
        let record = EntryRecord::from_head(&head, line_no, start, prepared.line.len());
        self.entries.push(record);
        let idx = (self.entries.len() - 1) as EntryIdx;
        self.index_entry(idx);
        idx
    }

    /// Prepares, writes through `write`, and commits only if the write succeeded.
    pub fn append_with<E>(
        &mut self,
        entry: &NewEntry,
        write: impl FnOnce(&PreparedEntry) -> Result<(), E>,
    ) -> Result<String, AppendError>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        self.validate(entry)?;
        let prepared = match entry {
            // A branch summary hangs off the entry it summarizes back to, not the leaf.
            NewEntry::BranchSummary { .. } => {
                let parent = self.pending_branch_parent.take();
                self.prepare_at(entry, parent)
            }
            _ => self.prepare(entry),
        };
        write(&prepared).map_err(|e| AppendError::Write(Box::new(e)))?;
        self.commit(&prepared);
        Ok(prepared.base.id)
    }

    /// Appends to the in-memory session only.
    pub fn append(&mut self, entry: &NewEntry) -> Result<String, AppendError> {
        self.append_with(entry, |_| Ok::<(), std::io::Error>(()))
    }

    fn validate(&self, entry: &NewEntry) -> Result<(), AppendError> {
        match entry {
            NewEntry::Label { target_id, .. } if self.find(target_id).is_none() => {
                Err(AppendError::NotFound(target_id.clone()))
            }
            NewEntry::ContextEdit { target_id, .. } => self.validate_context_edit(target_id),
            _ => Ok(()),
        }
    }

    fn validate_context_edit(&self, target_id: &str) -> Result<(), AppendError> {
        let idx = self
            .find(target_id)
            .ok_or_else(|| AppendError::NotFound(target_id.to_string()))?;
        if !self.branch_path().entries.contains(&idx) {
            return Err(AppendError::Invalid(format!(
                "Entry {target_id} is not on the active branch"
            )));
        }
        let r = self.entry(idx);
        let editable = r.kind == Kind::CustomMessage
            || (r.kind == Kind::Message
                && matches!(r.role.as_deref(), Some("user" | "assistant" | "toolResult")));
        if !editable {
            return Err(AppendError::Invalid(format!(
                "Entry {target_id} does not contribute editable model content"
            )));
        }
        Ok(())
    }

    /// A `compaction` entry as Pi's `appendCompaction` builds it: `None` for
    /// `first_kept` means "retain nothing", and the system prompt and tools in force
    /// on the current branch travel with it as `systemMessage`.
    pub fn compaction_entry(
        &self,
        summary: String,
        first_kept: Option<String>,
        tokens_before: u64,
        details: Option<Value>,
        from_hook: Option<bool>,
        usage: Option<Value>,
    ) -> NewEntry {
        let branch = self.branch_path();
        let path = crate::context::SessionPath::of(self, &branch);
        let system = crate::context::transcript::context_system_messages(&path);
        let system_message = crate::context::transcript::current_system_message(&system);
        NewEntry::Compaction {
            summary,
            first_kept_entry_id: first_kept,
            tokens_before,
            details,
            usage,
            from_hook,
            system_message,
        }
    }

    /// Pi's `branchWithSummary`: moves the leaf to `from` (None: before the root) and
    /// appends a `branch_summary` there whose `fromId` is the leaf being left.
    pub fn branch_with_summary_with<E>(
        &mut self,
        from: Option<&str>,
        summary: String,
        details: Option<Value>,
        from_hook: Option<bool>,
        usage: Option<Value>,
        write: impl FnOnce(&PreparedEntry) -> Result<(), E>,
    ) -> Result<String, AppendError>
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        if let Some(id) = from {
            if self.find(id).is_none() {
                return Err(AppendError::NotFound(id.to_string()));
            }
        }
        let from_id = self.leaf_id().unwrap_or("root").to_string();
        self.pending_branch_parent = from.map(str::to_string);
        let entry = NewEntry::BranchSummary {
            from_id,
            summary,
            details,
            usage,
            from_hook,
        };
        let result = self.append_with(&entry, write);
        self.pending_branch_parent = None;
        result
    }

    /// The lines of a new session holding only the path to `leaf` (Pi's
    /// `createBranchedSession`): labels on the path are dropped and re-created at the
    /// end from the live label map, and the kept entries are re-chained so nothing
    /// hangs off a removed label.
    pub fn branched_lines(
        &self,
        leaf: &str,
        header: &NewHeader,
    ) -> Result<Vec<String>, AppendError> {
        let idx = self
            .find(leaf)
            .ok_or_else(|| AppendError::NotFound(leaf.to_string()))?;
        let path = self.path_to(Some(idx)).entries;
        let mut lines = vec![header.to_line()];
        let mut kept_ids: Vec<String> = Vec::new();
        let mut pending_labels: Vec<String> = Vec::new();
        let mut label_replacement: std::collections::HashMap<String, String> =
            std::collections::HashMap::new();
        let mut parent: Option<String> = None;
        for &i in &path {
            let record = self.entry(i);
            let id = record.id.as_deref().unwrap_or_default().to_string();
            if record.kind == Kind::Label {
                pending_labels.push(id);
                continue;
            }
            for label_id in pending_labels.drain(..) {
                label_replacement.insert(label_id, id.clone());
            }
            let mut value = self.entry_value(i);
            if let Some(obj) = value.as_object_mut() {
                obj.insert(
                    "parentId".into(),
                    parent.clone().map_or(Value::Null, Value::String),
                );
                if record.kind == Kind::Compaction {
                    if let Some(first) = obj.get("firstKeptEntryId").and_then(Value::as_str) {
                        if first != id {
                            if let Some(r) = label_replacement.get(first) {
                                obj.insert("firstKeptEntryId".into(), r.clone().into());
                            }
                        }
                    }
                }
            }
            lines.push(value.to_string());
            parent = Some(id.clone());
            kept_ids.push(id);
        }
        let kept: std::collections::HashSet<&str> = kept_ids.iter().map(String::as_str).collect();
        let mut label_ids: std::collections::HashSet<String> = std::collections::HashSet::new();
        let labels: Vec<(String, &super::Label)> = self
            .label_map_order()
            .into_iter()
            .filter(|target| kept.contains(target.as_str()))
            .filter_map(|target| {
                let label = self.labels.get(target.as_str())?;
                Some((target, label))
            })
            .collect();
        for (target, label) in labels {
            let id = pi_formats::id::entry_id(|id| kept.contains(id) || label_ids.contains(id));
            label_ids.insert(id.clone());
            let base = EntryBase {
                id: id.clone(),
                parent_id: parent.clone(),
                timestamp: label
                    .timestamp
                    .as_deref()
                    .map(str::to_string)
                    .unwrap_or_else(pi_formats::time::now_iso),
            };
            let entry = NewEntry::Label {
                target_id: target.to_string(),
                label: Some(label.text.to_string()),
            };
            lines.push(entry.to_line(&base));
            parent = Some(id);
        }
        Ok(lines)
    }

    /// Label targets in the iteration order of Pi's label `Map`: a target keeps the
    /// position of its first set until a clear removes it.
    fn label_map_order(&self) -> Vec<String> {
        let mut order: Vec<String> = Vec::new();
        for r in self.entries.iter().filter(|r| r.kind == Kind::Label) {
            let Some(target) = r.target_id.as_deref() else {
                continue;
            };
            let set = r.label.as_deref().is_some_and(|l| !l.is_empty());
            let pos = order.iter().position(|t| t == target);
            match (set, pos) {
                (true, None) => order.push(target.to_string()),
                (false, Some(p)) => {
                    order.remove(p);
                }
                _ => {}
            }
        }
        order
    }

    /// Pi's `forkFrom`: a new header for `cwd` with `parentSession` = the source, then
    /// every source entry line verbatim (same ids).
    pub fn fork_from_lines(&self, header: &NewHeader) -> Vec<String> {
        let mut lines = vec![header.to_line()];
        for i in 0..self.entries.len() as EntryIdx {
            lines.push(String::from_utf8_lossy(self.entry_line(i)).into_owned());
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> NewEntry {
        NewEntry::Message {
            message: serde_json::json!({"role": "user", "content": text, "timestamp": 1}),
        }
    }

    /// A store whose write fails, as under a file size limit (EFBIG is 27 on Linux).
    fn failing(_: &PreparedEntry) -> Result<(), std::io::Error> {
        Err(std::io::Error::from_raw_os_error(27))
    }

    /// Entry ids, the leaf, and what the id index finds for each id.
    type Snapshot = (Vec<Option<Box<str>>>, Option<String>, Vec<Option<EntryIdx>>);

    /// What a failed write must leave alone: the entries, the leaf and the id index.
    fn snapshot(s: &Session) -> Snapshot {
        let ids: Vec<Option<Box<str>>> = s.entries().iter().map(|e| e.id.clone()).collect();
        let found = ids.iter().flatten().map(|id| s.find(id)).collect();
        (ids, s.leaf_id().map(str::to_string), found)
    }

    #[test]
    fn a_failed_write_leaves_the_session_as_it_was() {
        let mut s = Session::create(&NewHeader::new(
            pi_formats::id::session_id(),
            pi_formats::time::now_iso(),
            "/tmp/cwd".into(),
            None,
        ));
        let first = s.append(&user("one")).expect("append");
        let before = snapshot(&s);

        let err = s
            .append_with(&user("two"), failing)
            .expect_err("write fails");
        assert!(matches!(err, AppendError::Write(_)), "{err}");
        assert_eq!(snapshot(&s), before);

        let err = s
            .branch_with_summary_with(None, "summary".into(), None, None, None, failing)
            .expect_err("write fails");
        assert!(matches!(err, AppendError::Write(_)), "{err}");
        assert_eq!(snapshot(&s), before);

        // The next successful append hangs off the same leaf as before the failures.
        let next = s.prepare(&user("three"));
        assert_eq!(next.base.parent_id.as_deref(), Some(first.as_str()));
    }
}
