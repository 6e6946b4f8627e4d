//! Moving sessions between stores and files: copy (migration), import, export, verify.

use std::collections::{HashMap, HashSet};
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use pi_formats::jsonl;
use pi_formats::migrate::{migrate, needs_migration};

use crate::error::{IoResultExt, StoreError, StoreResult};
use crate::ids::{EntryId, SessionId};
use crate::record::{SessionData, SessionHeader, StoredEntry};
use crate::store::SessionStore;

/// What a copy or import did (or, in a dry run, would do) with one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyAction {
    /// The session was new to the target and was created.
    Created {
        /// Lines after the header.
        lines: usize,
    },
    /// The target held a prefix of the session; the missing lines were appended.
    Appended {
        /// Lines appended.
        lines: usize,
    },
    /// The target already held the same lines.
    Skipped,
    /// The target holds a different session under this id; it was left alone.
    Conflict {
        /// The first difference.
        reason: String,
    },
}

/// Progress of a copy, reported once per session after it is done.
#[derive(Debug)]
pub struct CopyProgress<'a> {
    /// 1-based position.
    pub done: usize,
    /// Sessions in the source.
    pub total: usize,
    /// The session.
    pub id: &'a SessionId,
    /// What happened, or why it failed.
    pub outcome: &'a Result<CopyAction, StoreError>,
}

/// What [`copy_sessions`] did.
#[derive(Debug, Default)]
pub struct CopyReport {
    /// Per session, in source order: what was done, or the error that stopped it.
    /// A failure of one session does not stop the others.
    pub sessions: Vec<(SessionId, Result<CopyAction, StoreError>)>,
}

impl CopyReport {
    /// Sessions that failed or conflicted.
    pub fn problems(&self) -> usize {
        self.sessions
            .iter()
            .filter(|(_, r)| matches!(r, Err(_) | Ok(CopyAction::Conflict { .. })))
            .count()
    }

    /// Sessions with this kind of outcome (compared by variant).
    pub fn count(&self, pred: impl Fn(&CopyAction) -> bool) -> usize {
        self.sessions
            .iter()
            .filter(|(_, r)| r.as_ref().is_ok_and(&pred))
            .count()
    }
}

/// Copies every session of `from` into `to`, losslessly.
///
/// Idempotent: a session the target already holds with identical lines is skipped; one it holds
/// a prefix of gets the rest appended; one that differs is reported as a conflict and left
/// alone. Every written session is read back and compared byte for byte before it counts as
/// done. With `dry_run`, nothing is written and the report says what would happen.
pub fn copy_sessions(
    from: &dyn SessionStore,
    to: &dyn SessionStore,
    dry_run: bool,
    progress: &mut dyn FnMut(&CopyProgress<'_>),
) -> StoreResult<CopyReport> {
    let ids = from.session_ids()?;
    let total = ids.len();
    let mut report = CopyReport::default();
    for (i, id) in ids.into_iter().enumerate() {
        let outcome = from
            .read_session(&id)
            .and_then(|src| put_session(to, &src, dry_run));
        progress(&CopyProgress {
            done: i + 1,
            total,
            id: &id,
            outcome: &outcome,
        });
        report.sessions.push((id, outcome));
    }
    Ok(report)
}

/// Writes `src` into `to` as described at [`copy_sessions`], verifying what was written.
pub fn put_session(
    to: &dyn SessionStore,
    src: &SessionData,
    dry_run: bool,
) -> StoreResult<CopyAction> {
    let id = src.header.id();
    let existing = match to.read_session(id) {
        Ok(existing) => Some(existing),
        Err(StoreError::SessionNotFound { .. }) => None,
        Err(e) => return Err(e),
    };
    let action = match &existing {
        None => CopyAction::Created {
            lines: src.entries.len(),
        },
        Some(dst) => match common_prefix(src, dst) {
            Err(reason) => return Ok(CopyAction::Conflict { reason }),
            Ok(n) if n == src.entries.len() => return Ok(CopyAction::Skipped),
            Ok(n) => CopyAction::Appended {
                lines: src.entries.len() - n,
            },
        },
    };
    if dry_run {
        return Ok(action);
    }
    match (&action, existing) {
        (CopyAction::Created { .. }, _) => {
            to.create_session(&src.header, &src.entries)?;
        }
        (CopyAction::Appended { .. }, Some(dst)) => {
            let mut writer = to.open_writer(id)?;
            writer.append(&src.entries[dst.entries.len()..])?;
            writer.sync()?;
        }
        _ => {}
    }
    verify_same(to, src)?;
    Ok(action)
}

/// How many of `src`'s lines `dst` already holds, or why `dst` is another session.
fn common_prefix(src: &SessionData, dst: &SessionData) -> Result<usize, String> {
    if src.header.line() != dst.header.line() {
        return Err("header lines differ".into());
    }
    if dst.entries.len() > src.entries.len() {
        return Err(format!(
            "target has {} lines, source only {}",
            dst.entries.len(),
            src.entries.len()
        ));
    }
    match src
        .entries
        .iter()
        .zip(&dst.entries)
        .position(|(a, b)| a.line() != b.line())
    {
        Some(i) => Err(format!("line {} differs", i + 2)),
        None => Ok(dst.entries.len()),
    }
}

/// Re-reads a session from `store` and compares it with `expected`, byte for byte.
pub fn verify_same(store: &dyn SessionStore, expected: &SessionData) -> StoreResult<()> {
    let id = expected.header.id();
    let got = store.read_session(id)?;
    let fail = |reason: String| StoreError::VerifyFailed {
        id: id.clone(),
        reason,
    };
    if got.header.line() != expected.header.line() {
        return Err(fail("header line differs".into()));
    }
    if got.entries.len() != expected.entries.len() {
        return Err(fail(format!(
            "{} lines stored, {} expected",
            got.entries.len(),
            expected.entries.len()
        )));
    }
    if let Some(i) = got
        .entries
        .iter()
        .zip(&expected.entries)
        .position(|(a, b)| a.line() != b.line())
    {
        return Err(fail(format!("line {} differs", i + 2)));
    }
    Ok(())
}

/// What [`import_jsonl`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportOutcome {
    /// The session id (from the header).
    pub id: SessionId,
    /// Whether the file was v1/v2 and was migrated to v3 on the way in.
    pub migrated: bool,
    /// What was done.
    pub action: CopyAction,
}

/// Imports a Pi session file of any version into `store`.
///
/// Version 3 files go in line for line. Version 1 and 2 files are migrated as Pi migrates
/// them on load (`pi_formats::migrate`): parsed lines are rewritten, blank and malformed lines
/// are dropped (Pi's rewrite drops them too), v1 entries get fresh ids. A second import of a
/// session whose id the store already holds is recognised: a migrated file is skipped (its
/// fresh ids could never match), a v3 file is compared and at most its new lines appended.
pub fn import_jsonl(store: &dyn SessionStore, path: &Path) -> StoreResult<ImportOutcome> {
    let buf = fs::read(path).context("read", path)?;
    let data = SessionData::from_jsonl(&path.display().to_string(), &buf)?;
    let id = data.header.id().clone();
    if data.header.version() >= 3.0 {
        let action = put_session(store, &data, false)?;
        return Ok(ImportOutcome {
            id,
            migrated: false,
            action,
        });
    }
    if store.contains(&id)? {
        return Ok(ImportOutcome {
            id,
            migrated: true,
            action: CopyAction::Skipped,
        });
    }
    let migrated = migrate_data(&path.display().to_string(), &data)?;
    let action = put_session(store, &migrated, false)?;
    Ok(ImportOutcome {
        id,
        migrated: true,
        action,
    })
}

/// Pi's load-time migration of a v1/v2 session, as new lines.
fn migrate_data(location: &str, data: &SessionData) -> StoreResult<SessionData> {
    let mut values = Vec::with_capacity(data.entries.len() + 1);
    let header_value =
        jsonl::parse_value(data.header.line()).map_err(|reason| StoreError::InvalidHeader {
            location: location.to_string(),
            line: 1,
            reason,
        })?;
    values.push(header_value);
    // Pi's loader keeps only lines that parse to a truthy value.
    values.extend(
        data.entries
            .iter()
            .filter(|e| !jsonl::is_blank(e.line()))
            .filter_map(|e| jsonl::parse_truthy(e.line()).ok().flatten()),
    );
    if needs_migration(&values) {
        // Pi does not collision-check ids made during v1 migration.
        migrate(&mut values, || pi_formats::id::entry_id(|_| false));
    }
    let mut lines = values.iter().map(|v| {
        serde_json::to_vec(v).map_err(|e| StoreError::Corrupt {
            location: location.to_string(),
            reason: format!("cannot serialize migrated entry: {e}"),
        })
    });
    let header_line = lines
        .next()
        .unwrap_or_else(|| Ok(data.header.line().to_vec()))?;
    let header = SessionHeader::parse(header_line).map_err(|reason| StoreError::InvalidHeader {
        location: location.to_string(),
        line: 1,
        reason,
    })?;
    let entries = lines
        .map(|l| l.map(StoredEntry::from_line))
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(SessionData {
        header,
        entries,
        torn_tail: false,
    })
}

/// Writes a session as JSONL (header and lines, each followed by a line feed) to `out`.
/// The bytes are exactly the stored lines.
pub fn export_jsonl(
    store: &dyn SessionStore,
    id: &SessionId,
    out: &mut dyn Write,
) -> StoreResult<u64> {
    let data = store.read_session(id)?;
    let bytes = data.to_jsonl();
    out.write_all(&bytes)
        .and_then(|()| out.flush())
        .context("write export of", Path::new(id.as_str()))?;
    Ok(bytes.len() as u64)
}

/// Exports a session into a new file (refusing to overwrite one), synced to disk.
pub fn export_to_file(store: &dyn SessionStore, id: &SessionId, path: &Path) -> StoreResult<u64> {
    let data = store.read_session(id)?;
    let bytes = data.to_jsonl();
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .context("create", path)?;
    file.write_all(&bytes).context("write", path)?;
    file.sync_data().context("sync", path)?;
    Ok(bytes.len() as u64)
}

/// Problems found in a stored session. Nothing is repaired: the report is for the user.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// The JSONL file ends without a line feed (a torn write); its last line is listed among
    /// `malformed_lines` when it does not parse.
    pub torn_tail: bool,
    /// 1-based line numbers (header = 1) of lines that are not valid JSON. Pi skips them.
    pub malformed_lines: Vec<u64>,
    /// Blank lines. Pi skips them.
    pub blank_lines: Vec<u64>,
    /// Ids used by more than one line (lookups take the last).
    pub duplicate_ids: Vec<EntryId>,
    /// Entries whose parent id names no entry: (line, parent id).
    pub orphans: Vec<(u64, EntryId)>,
    /// Lines whose parent chain runs in a circle.
    pub cycle_lines: Vec<u64>,
}

impl VerifyReport {
    /// Whether nothing was found.
    pub fn is_clean(&self) -> bool {
        *self == VerifyReport::default()
    }
}

/// Checks a session for torn, malformed and blank lines, duplicate ids, orphans and cycles.
pub fn verify_session(store: &dyn SessionStore, id: &SessionId) -> StoreResult<VerifyReport> {
    let data = store.read_session(id)?;
    let mut report = VerifyReport {
        torn_tail: data.torn_tail,
        ..VerifyReport::default()
    };
    let line_no = |i: usize| i as u64 + 2;
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    let mut dup: HashSet<&str> = HashSet::new();
    for (i, e) in data.entries.iter().enumerate() {
        if jsonl::is_blank(e.line()) {
            report.blank_lines.push(line_no(i));
        } else if jsonl::parse_value(e.line()).is_err() {
            report.malformed_lines.push(line_no(i));
        }
        if let Some(eid) = e.id() {
            if by_id.insert(eid.as_str(), i).is_some() && dup.insert(eid.as_str()) {
                report.duplicate_ids.push(eid.clone());
            }
        }
    }
    // Parent links form a functional graph; colour it to find lines on or into a cycle.
    // 0 = unvisited, 1 = on the current walk, 2 = done.
    let mut state = vec![0u8; data.entries.len()];
    for start in 0..data.entries.len() {
        let mut walk = Vec::new();
        let mut at = Some(start);
        while let Some(i) = at {
            match state[i] {
                0 => {
                    state[i] = 1;
                    walk.push(i);
                    at = data.entries[i]
                        .parent_id()
                        .and_then(|p| by_id.get(p.as_str()).copied());
                }
                1 => {
                    // `i` closes a cycle: the lines from its first visit on are in it.
                    if let Some(pos) = walk.iter().position(|&w| w == i) {
                        report
                            .cycle_lines
                            .extend(walk[pos..].iter().map(|&w| line_no(w)));
                    }
                    break;
                }
                _ => break,
            }
        }
        for i in walk {
            state[i] = 2;
        }
    }
    report.cycle_lines.sort_unstable();
    for (i, e) in data.entries.iter().enumerate() {
        if let Some(parent) = e.parent_id() {
            if !by_id.contains_key(parent.as_str()) {
                report.orphans.push((line_no(i), parent.clone()));
            }
        }
    }
    Ok(report)
}
