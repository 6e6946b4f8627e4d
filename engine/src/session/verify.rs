//! `verify`: every structural problem of a session file, with its line number.
//!
//! Pi skips what it cannot read without a word; this names each such spot so a
//! user can repair the file by hand. Nothing here changes the file.

use super::{Kind, LoadError, Parent, Session};
use pi_formats::jsonl::LineErrorKind;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// What kind of problem, from a torn tail (a crash mid-write) to a broken tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// Pi refuses the file (no header, not JSON at all).
    NotASession,
    MalformedLine,
    /// The last line has no newline and does not parse: an interrupted write.
    TornTail,
    /// The file does not end with a newline (Pi appends one when it opens it).
    MissingFinalNewline,
    /// A v1/v2 file; Pi migrates it on open.
    LegacyVersion,
    DuplicateId,
    MissingId,
    /// `parentId` names no entry: the entry and its descendants form an extra root.
    OrphanParent,
    /// The entry's ancestors loop; Pi hangs on such a path.
    ParentCycle,
    /// A compaction's `firstKeptEntryId` is not on its path: Pi drops all earlier context.
    DanglingFirstKept,
    /// A label or context edit points at no entry.
    DanglingTarget,
    UnknownEntryType,
    UnknownRole,
    /// More than one `session` header line.
    ExtraHeader,
}

/// How bad a problem is: an error loses or changes data; a warning is something Pi reads
/// fine (a file Pi itself can write) that a person may still want to know about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

impl ProblemKind {
    /// Whether the file is damaged (error) or only unusual (warning).
    pub fn severity(self) -> Severity {
        match self {
            ProblemKind::NotASession
            | ProblemKind::MalformedLine
            | ProblemKind::TornTail
            | ProblemKind::DuplicateId
            | ProblemKind::MissingId
            | ProblemKind::OrphanParent
            | ProblemKind::ParentCycle
            | ProblemKind::ExtraHeader => Severity::Error,
            // Pi writes, migrates or ignores these without losing anything: a compaction
            // whose kept entry is on another branch (Pi then keeps nothing before it), a
            // label on a deleted entry, entry types and roles of newer versions.
            ProblemKind::MissingFinalNewline
            | ProblemKind::LegacyVersion
            | ProblemKind::DanglingFirstKept
            | ProblemKind::DanglingTarget
            | ProblemKind::UnknownEntryType
            | ProblemKind::UnknownRole => Severity::Warning,
        }
    }
}

/// One problem and where it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    /// 1-based line number (0 when the problem is the file as a whole).
    pub line: u64,
    pub kind: ProblemKind,
    pub message: String,
}

/// Checks a session file's bytes; an empty list means the file is clean.
pub fn verify_bytes(bytes: &[u8], path: &Path) -> Vec<Problem> {
    let mut problems = Vec::new();
    let session = match Session::from_bytes(bytes.to_vec(), path) {
        Ok(s) => s,
        Err(LoadError::NotASession { reason, .. }) => {
            problems.push(Problem {
                line: 0,
                kind: ProblemKind::NotASession,
                message: format!("not a pi session: {reason}"),
            });
            return problems;
        }
        Err(e) => {
            problems.push(Problem {
                line: 0,
                kind: ProblemKind::NotASession,
                message: e.to_string(),
            });
            return problems;
        }
    };
    let report = session.load_report();
    for skipped in &report.skipped_lines {
        let (kind, reason) = match &skipped.kind {
            LineErrorKind::Malformed(r) => (ProblemKind::MalformedLine, r),
            LineErrorKind::Torn(r) => (ProblemKind::TornTail, r),
        };
        let message = match kind {
            ProblemKind::TornTail => format!("torn last line (interrupted write?): {reason}"),
            _ => format!("malformed JSON, Pi skips this line: {reason}"),
        };
        problems.push(Problem {
            line: skipped.line,
            kind,
            message,
        });
    }
    if report.missing_final_newline
        && !report
            .skipped_lines
            .iter()
            .any(|s| matches!(s.kind, LineErrorKind::Torn(_)))
    {
        let last = pi_formats::jsonl::lines(bytes)
            .last()
            .map_or(0, |l| l.number);
        problems.push(Problem {
            line: last,
            kind: ProblemKind::MissingFinalNewline,
            message: "the file does not end with a newline".into(),
        });
    }
    if let Some(version) = report.migrated_from {
        problems.push(Problem {
            line: session.header_line_number(),
            kind: ProblemKind::LegacyVersion,
            message: format!(
                "session format version {version}; Pi migrates it to version 3 when it opens it (pi sessions upgrade FILE)"
            ),
        });
        // Migration gives every entry an id and a parent; the checks below would
        // only describe the migrated copy.
        return problems;
    }
    let header_count = pi_formats::jsonl::lines(bytes)
        .filter(|l| !l.is_blank())
        .filter_map(|l| {
            pi_formats::head::EntryHead::parse(l.bytes)
                .ok()
                .map(|h| (l.number, h))
        })
        .filter(|(_, h)| h.is_header())
        .map(|(n, _)| n)
        .collect::<Vec<_>>();
    for line in header_count.iter().skip(1) {
        problems.push(Problem {
            line: *line,
            kind: ProblemKind::ExtraHeader,
            message: "a second session header; Pi ignores it".into(),
        });
    }
    check_entries(&session, &mut problems);
    problems.sort_by_key(|p| p.line);
    problems
}

fn check_entries(session: &Session, problems: &mut Vec<Problem>) {
    let mut first_line: HashMap<&str, u64> = HashMap::new();
    for r in session.entries() {
        let Some(id) = r.id.as_deref() else {
            problems.push(Problem {
                line: r.line,
                kind: ProblemKind::MissingId,
                message: "entry has no string id".into(),
            });
            continue;
        };
        if let Some(first) = first_line.get(id) {
            problems.push(Problem {
                line: r.line,
                kind: ProblemKind::DuplicateId,
                message: format!(
                    "id {id} already used at line {first}; this later entry shadows it"
                ),
            });
        } else {
            first_line.insert(id, r.line);
        }
        match &r.kind {
            Kind::Other(kind) => problems.push(Problem {
                line: r.line,
                kind: ProblemKind::UnknownEntryType,
                message: format!("unknown entry type {kind:?}; kept, and ignored for context"),
            }),
            Kind::Untyped => problems.push(Problem {
                line: r.line,
                kind: ProblemKind::UnknownEntryType,
                message: "entry has no string type".into(),
            }),
            Kind::Message => match r.role.as_deref() {
                Some(role) if pi_formats::entry::role::is_known(role) => {}
                Some(role) => problems.push(Problem {
                    line: r.line,
                    kind: ProblemKind::UnknownRole,
                    message: format!("unknown message role {role:?}; the model never sees it"),
                }),
                None => problems.push(Problem {
                    line: r.line,
                    kind: ProblemKind::UnknownRole,
                    message: "message without a role".into(),
                }),
            },
            _ => {}
        }
        match &r.parent {
            Parent::Id(p) if p.as_ref() != id && session.find(p).is_none() => {
                problems.push(Problem {
                    line: r.line,
                    kind: ProblemKind::OrphanParent,
                    message: format!("parent {p} does not exist; the entry becomes an extra root"),
                })
            }
            Parent::Id(p) if p.as_ref() == id => problems.push(Problem {
                line: r.line,
                kind: ProblemKind::ParentCycle,
                message: format!("entry {id} is its own parent"),
            }),
            Parent::Missing | Parent::Other => problems.push(Problem {
                line: r.line,
                kind: ProblemKind::OrphanParent,
                message: "parentId is missing or not a string".into(),
            }),
            _ => {}
        }
        if matches!(r.kind, Kind::Label | Kind::ContextEdit) {
            match r.target_id.as_deref() {
                Some(t) if session.find(t).is_some() => {}
                target => problems.push(Problem {
                    line: r.line,
                    kind: ProblemKind::DanglingTarget,
                    message: format!("targetId {} names no entry", target.unwrap_or("(missing)")),
                }),
            }
        }
    }
    check_cycles(session, problems);
    check_compactions(session, problems);
}

/// Entries that reach no root by parent links sit on (or under) a cycle.
fn check_cycles(session: &Session, problems: &mut Vec<Problem>) {
    let tree = session.tree();
    let n = session.entries().len();
    let mut reached = vec![false; n];
    let mut stack: Vec<u32> = tree.roots.clone();
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut reached[i as usize], true) {
            continue;
        }
        stack.extend(&tree.children[i as usize]);
    }
    for (i, r) in session.entries().iter().enumerate() {
        let self_parent = matches!((&r.parent, &r.id), (Parent::Id(p), Some(id)) if p == id);
        if !reached[i] && !self_parent {
            problems.push(Problem {
                line: r.line,
                kind: ProblemKind::ParentCycle,
                message: format!(
                    "entry {} is on or under a parent cycle; no root reaches it",
                    r.id.as_deref().unwrap_or("(no id)")
                ),
            });
        }
    }
}

fn check_compactions(session: &Session, problems: &mut Vec<Problem>) {
    for (i, r) in session.entries().iter().enumerate() {
        if r.kind != Kind::Compaction {
            continue;
        }
        let value = session.entry_value(i as u32);
        if crate::context::retained_tail(&value).is_some() {
            continue; // carries its kept messages; `firstKeptEntryId` is not used
        }
        let Some(first_kept) = value.get("firstKeptEntryId").and_then(Value::as_str) else {
            problems.push(Problem {
                line: r.line,
                kind: ProblemKind::DanglingFirstKept,
                message: "compaction without firstKeptEntryId: nothing before it stays in context"
                    .into(),
            });
            continue;
        };
        if Some(first_kept) == r.id.as_deref() {
            continue; // "retain nothing", as Pi writes it
        }
        let path = session.path_to(Some(i as u32));
        let on_path = path
            .entries
            .iter()
            .any(|&p| session.entry(p).id.as_deref() == Some(first_kept));
        if !on_path {
            let why = if session.find(first_kept).is_some() {
                "is not an ancestor"
            } else {
                "names no entry"
            };
            problems.push(Problem {
                line: r.line,
                kind: ProblemKind::DanglingFirstKept,
                message: format!(
                    "firstKeptEntryId {first_kept} {why}: Pi keeps nothing from before this compaction"
                ),
            });
        }
    }
}
