//! Reading OpenCode's older JSON storage for `pi sessions import --from opencode`.
//!
//! Before its SQLite database (1.2), OpenCode kept every record as a JSON file of its own under
//! `$XDG_DATA_HOME/opencode/storage/`: `session/<project id>/<session id>.json`,
//! `message/<session id>/<message id>.json` and `part/<message id>/<part id>.json`, each the
//! object OpenCode hands out (ids included), the same objects the database's `data` columns
//! hold later. This module reads them into the [`Session`]s the database reader makes, in the
//! database's order (sessions and messages by creation time then id, parts by id), so the
//! mapping (`pi_formats::import::opencode`) and the entry ids are the same. Records are named
//! by their path inside the storage folder (`message/ses_…/msg_….json`).

use std::cmp::Ordering;
use std::path::Path;

use pi_formats::import::opencode::{Message, Record, Session};
use serde_json::Value;

/// The storage folder's name in OpenCode's data folder.
pub const STORAGE_DIR: &str = "storage";

/// Whether `dir` looks like OpenCode's JSON storage (a `session` and a `message` folder).
pub fn is_storage_dir(dir: &Path) -> bool {
    dir.join("session").is_dir() && dir.join("message").is_dir()
}

/// Every session in a storage folder, with its messages and parts. A file that is not JSON
/// is kept as a string, so the mapping names it; a folder that cannot be read fails the whole
/// source.
pub fn read_storage(dir: &Path) -> Result<Vec<Session>, String> {
    let label = dir.display().to_string();
    let mut sessions = Vec::new();
    for project in sorted_dirs(&dir.join("session"))? {
        for file in json_files(&dir.join("session").join(&project))? {
            let rel = format!("session/{project}/{file}");
            let info = read_record(dir, &rel)?;
            sessions.push(Session {
                label: label.clone(),
                info,
                messages: Vec::new(),
            });
        }
    }
    sessions.sort_by(|a, b| by_creation(&a.info, &b.info));
    for session in &mut sessions {
        session.messages = read_messages(dir, session.id())?;
    }
    Ok(sessions)
}

fn read_messages(dir: &Path, session: &str) -> Result<Vec<Message>, String> {
    let mut messages = Vec::new();
    for file in json_files(&dir.join("message").join(session))? {
        let record = read_record(dir, &format!("message/{session}/{file}"))?;
        let mut parts = Vec::new();
        for part in json_files(&dir.join("part").join(&record.id))? {
            parts.push(read_record(dir, &format!("part/{}/{part}", record.id))?);
        }
        // json_files sorts by name, which is the id plus `.json`: parts in id order.
        messages.push(Message { record, parts });
    }
    messages.sort_by(|a, b| by_creation(&a.record, &b.record));
    Ok(messages)
}

/// A record's file, `rel` inside the storage folder. Its id is the object's `id`, else the
/// file's name (a file that is not a JSON object still needs a name).
fn read_record(dir: &Path, rel: &str) -> Result<Record, String> {
    let path = dir.join(rel);
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::from(String::from_utf8_lossy(&bytes).into_owned()));
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            name.trim_end_matches(".json").to_string()
        });
    Ok(Record {
        key: rel.to_string(),
        id,
        value,
    })
}

/// OpenCode's order: creation time (`time.created`), then id.
fn by_creation(a: &Record, b: &Record) -> Ordering {
    let created = |r: &Record| r.value.pointer("/time/created").and_then(Value::as_i64);
    created(a).cmp(&created(b)).then_with(|| a.id.cmp(&b.id))
}

/// The `.json` file names in `dir`, sorted; none when `dir` does not exist (a session without
/// messages, a message without parts).
fn json_files(dir: &Path) -> Result<Vec<String>, String> {
    list(dir, |p| {
        p.is_file() && p.extension().is_some_and(|e| e == "json")
    })
}

fn sorted_dirs(dir: &Path) -> Result<Vec<String>, String> {
    list(dir, Path::is_dir)
}

fn list(dir: &Path, keep: impl Fn(&Path) -> bool) -> Result<Vec<String>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", dir.display())),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let path = entry.path();
        if keep(&path) {
            if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                names.push(name.to_string());
            }
        }
    }
    names.sort();
    Ok(names)
}
