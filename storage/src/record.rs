//! What a store moves: the header line and raw entry lines, kept as their original bytes.
//!
//! A store never re-serializes what it was given. The few fields it needs for indexing
//! (id, parent id, type) are read from the line once, when the record is built, and
//! travel next to the bytes.

use pi_formats::head::EntryHead;
use pi_formats::header::{is_valid_header, NewHeader};
use pi_formats::jsonl;
use serde_json::Value;

use crate::error::{StoreError, StoreResult};
use crate::ids::{EntryId, SessionId};

/// One entry line of a session, exactly as stored, without its line feed.
///
/// Every physical line after the header is one record, including blank and malformed lines
/// from hand-edited or crashed files: dropping them would make export differ from import.
/// Such lines have no id and an empty `kind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    id: Option<EntryId>,
    parent_id: Option<EntryId>,
    kind: String,
    line: Vec<u8>,
}

impl StoredEntry {
    /// Builds a record from a line, reading its id, parent and type.
    ///
    /// Never fails: a line that is not a JSON object simply has no id.
    /// The line must not contain a line feed; stores refuse such records on append.
    pub fn from_line(line: impl Into<Vec<u8>>) -> StoredEntry {
        let line = line.into();
        let (id, parent_id, kind) = match EntryHead::parse(&line) {
            Ok(head) if !head.falsy => (
                head.id.as_deref().map(EntryId::from),
                head.parent.as_id().map(EntryId::from),
                head.kind().to_string(),
            ),
            _ => (None, None, String::new()),
        };
        StoredEntry {
            id,
            parent_id,
            kind,
            line,
        }
    }

    /// Rebuilds a record from columns a database stored next to the line.
    pub(crate) fn from_parts(
        id: Option<String>,
        parent_id: Option<String>,
        kind: String,
        line: Vec<u8>,
    ) -> StoredEntry {
        StoredEntry {
            id: id.map(EntryId::new),
            parent_id: parent_id.map(EntryId::new),
            kind,
            line,
        }
    }

    /// The entry's `id`, when the line has a string one.
    pub fn id(&self) -> Option<&EntryId> {
        self.id.as_ref()
    }

    /// The entry's `parentId`, when it is a non-empty string (Pi stops a path walk otherwise).
    pub fn parent_id(&self) -> Option<&EntryId> {
        self.parent_id.as_ref()
    }

    /// The entry's `type`, or `""` for lines without one.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The exact line bytes, without the line feed.
    pub fn line(&self) -> &[u8] {
        &self.line
    }

    /// The line bytes, owned.
    pub fn into_line(self) -> Vec<u8> {
        self.line
    }
}

/// A session's header line (`{"type":"session",...}`), with the fields stores index.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionHeader {
    line: Vec<u8>,
    id: SessionId,
    cwd: Option<String>,
    timestamp: Option<String>,
    parent_session: Option<String>,
    version: f64,
}

impl SessionHeader {
    /// Reads a header line. Refused, with the reason, unless it is what Pi accepts as a header:
    /// a JSON object with `type: "session"` and a string `id`.
    pub fn parse(line: impl Into<Vec<u8>>) -> Result<SessionHeader, String> {
        let line = line.into();
        if line.contains(&b'\n') {
            return Err("contains a line feed".into());
        }
        if jsonl::is_blank(&line) {
            return Err("blank line".into());
        }
        let value = jsonl::parse_value(&line).map_err(|e| format!("malformed JSON ({e})"))?;
        if !is_valid_header(&value) {
            return Err("needs \"type\":\"session\" and a string \"id\"".into());
        }
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
        Ok(SessionHeader {
            id: SessionId::new(text("id").unwrap_or_default()),
            cwd: text("cwd"),
            timestamp: text("timestamp"),
            parent_session: text("parentSession"),
            version: pi_formats::header::version_of(&value),
            line,
        })
    }

    /// The header line of a session we create.
    pub fn new(header: &NewHeader) -> SessionHeader {
        SessionHeader {
            line: header.to_line().into_bytes(),
            id: SessionId::new(header.id.clone()),
            cwd: Some(header.cwd.clone()),
            timestamp: Some(header.timestamp.clone()),
            parent_session: header.parent_session.clone(),
            version: header.version as f64,
        }
    }

    /// The exact line bytes, without the line feed.
    pub fn line(&self) -> &[u8] {
        &self.line
    }

    /// The session id.
    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// `cwd`, when it is a string.
    pub fn cwd(&self) -> Option<&str> {
        self.cwd.as_deref()
    }

    /// `timestamp`, when it is a string.
    pub fn timestamp(&self) -> Option<&str> {
        self.timestamp.as_deref()
    }

    /// `parentSession`, when it is a string.
    pub fn parent_session(&self) -> Option<&str> {
        self.parent_session.as_deref()
    }

    /// The declared format version (absent means 1).
    pub fn version(&self) -> f64 {
        self.version
    }
}

/// A whole session: its header and every line after it, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionData {
    /// The header line.
    pub header: SessionHeader,
    /// Every line after the header, in file order.
    pub entries: Vec<StoredEntry>,
    /// The JSONL file did not end in a line feed (a torn write). Always false for databases.
    /// The last record then holds the torn bytes; the next append starts a fresh line.
    pub torn_tail: bool,
}

impl SessionData {
    /// Frames a session file's bytes. `location` names the file in errors.
    ///
    /// The header must be the first line. Pi also accepts blank or malformed lines before it;
    /// such files are refused here rather than reordered (see docs/storage.md).
    pub fn from_jsonl(location: &str, buf: &[u8]) -> StoreResult<SessionData> {
        let mut lines = jsonl::lines(buf);
        let first = lines.next().ok_or_else(|| StoreError::InvalidHeader {
            location: location.to_string(),
            line: 1,
            reason: "empty file".into(),
        })?;
        let header =
            SessionHeader::parse(first.bytes).map_err(|reason| StoreError::InvalidHeader {
                location: location.to_string(),
                line: 1,
                reason,
            })?;
        let mut torn_tail = !first.terminated;
        let mut entries = Vec::new();
        for line in lines {
            torn_tail = !line.terminated;
            entries.push(StoredEntry::from_line(line.bytes));
        }
        Ok(SessionData {
            header,
            entries,
            torn_tail,
        })
    }

    /// The session as JSONL: header and entries, each followed by a line feed.
    pub fn to_jsonl(&self) -> Vec<u8> {
        let size = self.header.line().len()
            + 1
            + self
                .entries
                .iter()
                .map(|e| e.line().len() + 1)
                .sum::<usize>();
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(self.header.line());
        out.push(b'\n');
        for entry in &self.entries {
            out.extend_from_slice(entry.line());
            out.push(b'\n');
        }
        out
    }
}

/// Refuses lines that would break JSONL framing.
pub(crate) fn check_lines(session: &SessionId, entries: &[StoredEntry]) -> StoreResult<()> {
    match entries.iter().position(|e| e.line().contains(&b'\n')) {
        Some(i) => Err(StoreError::InvalidLine {
            session: session.clone(),
            reason: format!("entry {i} of the batch contains a line feed"),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_head_fields() {
        let e = StoredEntry::from_line(
            br#"{"type":"message","id":"a1","parentId":"p0","message":{"role":"user"}}"#.to_vec(),
        );
        assert_eq!(e.id().map(EntryId::as_str), Some("a1"));
        assert_eq!(e.parent_id().map(EntryId::as_str), Some("p0"));
        assert_eq!(e.kind(), "message");
    }

    #[test]
    fn junk_lines_are_kept_without_id() {
        for line in [&b""[..], b"\r", b"{not json", b"null", b"[1]"] {
            let e = StoredEntry::from_line(line.to_vec());
            assert_eq!(e.id(), None);
            assert_eq!(e.line(), line);
        }
    }

    #[test]
    fn empty_parent_stops_like_pi() {
        let e = StoredEntry::from_line(br#"{"type":"x","id":"a","parentId":""}"#.to_vec());
        assert_eq!(e.parent_id(), None);
    }

    #[test]
    fn framing_round_trips_and_flags_torn_tail() {
        let buf = b"{\"type\":\"session\",\"id\":\"s\"}\n\r\n{\"type\":\"x\",\"id\":\"a\"}\n{\"ty";
        let data = SessionData::from_jsonl("f", buf).unwrap();
        assert!(data.torn_tail);
        assert_eq!(data.entries.len(), 3);
        let mut expected = buf.to_vec();
        expected.push(b'\n');
        assert_eq!(data.to_jsonl(), expected);
    }

    #[test]
    fn header_must_come_first() {
        let err = SessionData::from_jsonl("f", b"\n{\"type\":\"session\",\"id\":\"s\"}\n");
        assert!(matches!(
            err,
            Err(StoreError::InvalidHeader { line: 1, .. })
        ));
        assert!(SessionHeader::parse(b"{\"type\":\"session\"}".to_vec()).is_err());
    }
}
