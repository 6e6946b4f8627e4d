//! Where the entries that settle a context sit on a path.
//!
//! Context building needs, besides the context entries themselves, the *last*
//! entry of a few kinds on the whole path: the thinking level and the model come
//! from the last `thinking_level_change` and the last `model_change` or assistant
//! message, the context starts at the last `compaction`, and a usage recorded
//! before the last `context_edit` or `compaction` no longer counts. Found by a
//! backward scan, these cost the path's length on every turn, and on a long
//! session the thinking level is often set once, at the start. [`PathMarks`]
//! records them per path instead: built once when a path is walked, extended by
//! the few entries a turn appends (see `tree.rs`), so a turn's work follows its
//! context, not the file.

use super::{EntryRecord, Kind};

/// An entry kind whose last position on a path context building asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    ThinkingLevelChange,
    ModelChange,
    /// A `message` entry whose `message.role` is `assistant`.
    AssistantMessage,
    Compaction,
    ContextEdit,
}

impl Mark {
    /// Whether an entry with this `type` and `message.role` is one of these.
    pub fn matches(self, kind: &str, role: Option<&str>) -> bool {
        use pi_formats::entry::kind as k;
        match self {
            Mark::ThinkingLevelChange => kind == k::THINKING_LEVEL_CHANGE,
            Mark::ModelChange => kind == k::MODEL_CHANGE,
            Mark::AssistantMessage => kind == k::MESSAGE && role == Some("assistant"),
            Mark::Compaction => kind == k::COMPACTION,
            Mark::ContextEdit => kind == k::CONTEXT_EDIT,
        }
    }
}

/// The last position (root-first, into the path) of each [`Mark`] on a path of
/// `len` entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathMarks {
    len: usize,
    thinking_level_change: Option<usize>,
    model_change: Option<usize>,
    assistant_message: Option<usize>,
    compaction: Option<usize>,
    context_edit: Option<usize>,
}

impl PathMarks {
    /// The marks of the path whose entries are `records`, in path order.
    pub(super) fn of<'a>(records: impl IntoIterator<Item = &'a EntryRecord>) -> PathMarks {
        let mut marks = PathMarks::default();
        records.into_iter().for_each(|r| marks.push(r));
        marks
    }

    /// The marks after `record` was added at the end of the path.
    pub(super) fn push(&mut self, record: &EntryRecord) {
        let pos = Some(self.len);
        self.len += 1;
        match record.kind {
            Kind::ThinkingLevelChange => self.thinking_level_change = pos,
            Kind::ModelChange => self.model_change = pos,
            Kind::Message if record.role.as_deref() == Some("assistant") => {
                self.assistant_message = pos
            }
            Kind::Compaction => self.compaction = pos,
            Kind::ContextEdit => self.context_edit = pos,
            _ => {}
        }
    }

    /// How many entries the marked path has.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The last position of an entry of this kind.
    pub fn last(&self, mark: Mark) -> Option<usize> {
        match mark {
            Mark::ThinkingLevelChange => self.thinking_level_change,
            Mark::ModelChange => self.model_change,
            Mark::AssistantMessage => self.assistant_message,
            Mark::Compaction => self.compaction,
            Mark::ContextEdit => self.context_edit,
        }
    }
}
