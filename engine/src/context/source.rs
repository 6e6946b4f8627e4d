//! Where context building reads entries from.

use crate::session::{EntryIdx, Mark, PathMarks, PathWalk, Session};
use serde_json::Value;
use std::borrow::Cow;

/// A root-first path of entries. Context building asks for an entry's type, id
/// and role (cheap: from the index) and for its full value only where it needs
/// the payload, so an implementation can parse lazily.
pub trait EntrySource {
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The entry's `type` (`""` when missing or not a string).
    fn kind(&self, i: usize) -> &str;
    fn id(&self, i: usize) -> Option<&str>;
    /// `message.role` of message entries.
    fn role(&self, i: usize) -> Option<&str>;
    /// The entry's `timestamp` when it is a string.
    fn timestamp(&self, i: usize) -> Option<&str>;
    /// The whole entry.
    fn value(&self, i: usize) -> Cow<'_, Value>;
    /// The first position in `range` whose entry has this id (Pi's `findIndex` by id).
    fn position_of_id(&self, id: &str, range: std::ops::Range<usize>) -> Option<usize> {
        range.into_iter().find(|&i| self.id(i) == Some(id))
    }
    /// The last position whose entry is a `mark`.
    fn last_mark(&self, mark: Mark) -> Option<usize> {
        (0..self.len())
            .rev()
            .find(|&i| mark.matches(self.kind(i), self.role(i)))
    }
}

impl EntrySource for [Value] {
    fn len(&self) -> usize {
        <[Value]>::len(self)
    }
    fn kind(&self, i: usize) -> &str {
        self[i].get("type").and_then(Value::as_str).unwrap_or("")
    }
    fn id(&self, i: usize) -> Option<&str> {
        self[i].get("id").and_then(Value::as_str)
    }
    fn role(&self, i: usize) -> Option<&str> {
        self[i].get("message")?.get("role")?.as_str()
    }
    fn timestamp(&self, i: usize) -> Option<&str> {
        self[i].get("timestamp")?.as_str()
    }
    fn value(&self, i: usize) -> Cow<'_, Value> {
        Cow::Borrowed(&self[i])
    }
}

/// So callers holding a `Vec` need not slice it.
impl EntrySource for Vec<Value> {
    fn len(&self) -> usize {
        <[Value]>::len(self)
    }
    fn kind(&self, i: usize) -> &str {
        self[..].kind(i)
    }
    fn id(&self, i: usize) -> Option<&str> {
        self[..].id(i)
    }
    fn role(&self, i: usize) -> Option<&str> {
        self[..].role(i)
    }
    fn timestamp(&self, i: usize) -> Option<&str> {
        self[..].timestamp(i)
    }
    fn value(&self, i: usize) -> Cow<'_, Value> {
        self[..].value(i)
    }
}

/// A path through a [`Session`], parsing entry lines on demand.
pub struct SessionPath<'a> {
    pub session: &'a Session,
    pub path: &'a [EntryIdx],
    /// The path's marks when it is a walk's, so the last entry of a kind is found
    /// without scanning the path.
    marks: Option<PathMarks>,
}

impl<'a> SessionPath<'a> {
    /// Any root-first list of entries; the last entry of a kind is found by a scan.
    pub fn new(session: &'a Session, path: &'a [EntryIdx]) -> Self {
        SessionPath {
            session,
            path,
            marks: None,
        }
    }

    /// A walked path (`branch_path`, `path_to`, `context_path`), with its marks: what
    /// every per-turn caller should use, as its cost follows the context, not the path.
    pub fn of(session: &'a Session, walk: &'a PathWalk) -> Self {
        SessionPath {
            session,
            path: &walk.entries,
            marks: walk.marks().copied(),
        }
    }

    /// Every entry of the path, parsed.
    pub fn values(&self) -> Vec<Value> {
        self.path
            .iter()
            .map(|&i| self.session.entry_value(i))
            .collect()
    }
}

impl EntrySource for SessionPath<'_> {
    fn len(&self) -> usize {
        self.path.len()
    }
    fn kind(&self, i: usize) -> &str {
        self.session.entry(self.path[i]).kind.as_str().unwrap_or("")
    }
    fn id(&self, i: usize) -> Option<&str> {
        self.session.entry(self.path[i]).id.as_deref()
    }
    fn role(&self, i: usize) -> Option<&str> {
        self.session.entry(self.path[i]).role.as_deref()
    }
    fn timestamp(&self, i: usize) -> Option<&str> {
        self.session.entry(self.path[i]).timestamp.as_deref()
    }
    fn value(&self, i: usize) -> Cow<'_, Value> {
        Cow::Owned(self.session.entry_value(self.path[i]))
    }
    fn position_of_id(&self, id: &str, range: std::ops::Range<usize>) -> Option<usize> {
        if !self.session.ids_unique() {
            return range.into_iter().find(|&i| self.id(i) == Some(id));
        }
        // One entry has this id: look for its index, not for its id's bytes. A walked
        // path holds an entry at most once, so it is looked for from the end, where the
        // entries context building asks for (the compaction, its kept entries, the last
        // usage) sit.
        let target = self.session.find(id)?;
        if self.marks.is_some() {
            range.into_iter().rev().find(|&i| self.path[i] == target)
        } else {
            range.into_iter().find(|&i| self.path[i] == target)
        }
    }
    fn last_mark(&self, mark: Mark) -> Option<usize> {
        match &self.marks {
            Some(marks) => marks.last(mark),
            None => (0..self.len())
                .rev()
                .find(|&i| mark.matches(self.kind(i), self.role(i))),
        }
    }
}

/// A path followed by entries that are not in the session (yet): what a proposal of new
/// entries would make of the context, built without copying the path.
pub struct WithAppended<'a, S: ?Sized> {
    pub path: &'a S,
    /// Whole entries, each a child of the one before it (the first of the path's last).
    pub appended: &'a [Value],
}

impl<S: EntrySource + ?Sized> WithAppended<'_, S> {
    /// Where position `i` is: `Ok` in the path, `Err` in the appended entries.
    fn locate(&self, i: usize) -> Result<usize, usize> {
        let n = self.path.len();
        if i < n {
            Ok(i)
        } else {
            Err(i - n)
        }
    }
}

impl<S: EntrySource + ?Sized> EntrySource for WithAppended<'_, S> {
    fn len(&self) -> usize {
        self.path.len() + self.appended.len()
    }
    fn kind(&self, i: usize) -> &str {
        match self.locate(i) {
            Ok(i) => self.path.kind(i),
            Err(i) => self.appended.kind(i),
        }
    }
    fn id(&self, i: usize) -> Option<&str> {
        match self.locate(i) {
            Ok(i) => self.path.id(i),
            Err(i) => self.appended.id(i),
        }
    }
    fn role(&self, i: usize) -> Option<&str> {
        match self.locate(i) {
            Ok(i) => self.path.role(i),
            Err(i) => self.appended.role(i),
        }
    }
    fn timestamp(&self, i: usize) -> Option<&str> {
        match self.locate(i) {
            Ok(i) => self.path.timestamp(i),
            Err(i) => self.appended.timestamp(i),
        }
    }
    fn value(&self, i: usize) -> Cow<'_, Value> {
        match self.locate(i) {
            Ok(i) => self.path.value(i),
            Err(i) => self.appended.value(i),
        }
    }
    fn position_of_id(&self, id: &str, range: std::ops::Range<usize>) -> Option<usize> {
        let n = self.path.len();
        // The first match in `range`: the path's part, then the appended part.
        self.path
            .position_of_id(id, range.start.min(n)..range.end.min(n))
            .or_else(|| {
                (range.start.max(n)..range.end).find(|&i| self.appended.id(i - n) == Some(id))
            })
    }
    fn last_mark(&self, mark: Mark) -> Option<usize> {
        let n = self.path.len();
        (0..self.appended.len())
            .rev()
            .find(|&i| mark.matches(self.appended.kind(i), self.appended.role(i)))
            .map(|i| n + i)
            .or_else(|| self.path.last_mark(mark))
    }
}
