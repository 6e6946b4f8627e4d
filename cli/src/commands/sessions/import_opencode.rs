//! `pi sessions import --from opencode [PATH…|--all]`: OpenCode sessions into the current store.
//!
//! A path is OpenCode's database (`opencode.db`, read through `pi_storage::opencode_db`), the
//! JSON storage folder of OpenCode before 1.2 (`storage/`, read by `import_opencode_storage`),
//! an `opencode export` JSON file, or a folder holding these (the database and the storage
//! folder if there are any, else every `.json` file in it). `--all` reads OpenCode's own data
//! folder, database and storage folder. Each top-level session is one source, named
//! `<file>#<session id>` for a database or a storage folder; subagent sessions go with the
//! session that launched them. A session in both the database and the storage folder (OpenCode
//! copies the older files into its database) is read from the database only. `import_agent`
//! writes the results through the store, and the mapping itself is
//! `pi_formats::import::opencode`. The session id is OpenCode's and the lines are the same for
//! the same source, so a second import is `skipped`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use pi_formats::import::opencode::{self, Session};
use pi_formats::import::SourceFile;
use pi_storage::opencode_db::read_opencode_db;

use super::import_agent::{home_dir, import_all};
use super::import_opencode_storage::{is_storage_dir, read_storage, STORAGE_DIR};
use super::store::StoreArgs;

/// The database's file name in OpenCode's data folder.
const DB_NAME: &str = "opencode.db";

pub fn run(paths: &[PathBuf], all: bool, store_args: &StoreArgs) -> anyhow::Result<i32> {
    let store = store_args.open()?;
    let files = if all {
        let data = data_dir()?;
        let found = data_sources(&data);
        if found.is_empty() {
            anyhow::bail!(
                "no OpenCode sessions at {} (nor in {})",
                data.join(DB_NAME).display(),
                data.join(STORAGE_DIR).display()
            );
        }
        found
    } else {
        source_files(paths)?
    };
    let (units, prepared) = load(&files);
    Ok(import_all(
        store.as_ref(),
        &units,
        "OpenCode session(s)",
        &|unit| match prepared.get(unit) {
            Some(Ok((root, descendants))) => Ok(opencode::convert(root, descendants)?),
            Some(Err(e)) => Err(anyhow::anyhow!("{e}")),
            None => Err(anyhow::anyhow!("{}: not loaded", unit.display())),
        },
    ))
}

/// A source ready to convert (the session and its subagents' sessions), or why it is not.
type Prepared = Result<(Session, Vec<Session>), String>;

/// Reads every file and groups the sessions: one unit per top-level session (a session whose
/// parent is not among those read), with its descendants; one failing unit per unreadable file.
fn load(files: &[PathBuf]) -> (Vec<PathBuf>, HashMap<PathBuf, Prepared>) {
    let mut units = Vec::new();
    let mut prepared = HashMap::new();
    let mut sessions: Vec<(PathBuf, Session)> = Vec::new();
    let mut from_db = std::collections::HashSet::new();
    // Databases first, so a session OpenCode copied from its older files is taken from them.
    let mut ordered: Vec<&PathBuf> = files.iter().collect();
    ordered.sort_by_key(|f| SourceKind::of(f) != SourceKind::Database);
    for file in ordered {
        let kind = SourceKind::of(file);
        match read_file(file, kind) {
            Ok(list) => {
                for s in list {
                    let unit = match kind {
                        SourceKind::Export => file.clone(),
                        SourceKind::Database | SourceKind::Storage => {
                            PathBuf::from(format!("{}#{}", file.display(), s.id()))
                        }
                    };
                    match kind {
                        SourceKind::Database => {
                            from_db.insert(s.id().to_string());
                        }
                        SourceKind::Storage if from_db.contains(s.id()) => continue,
                        _ => {}
                    }
                    sessions.push((unit, s));
                }
            }
            Err(e) => {
                units.push(file.clone());
                prepared.insert(file.clone(), Err(e));
            }
        }
    }
    let known: HashMap<String, usize> = sessions
        .iter()
        .enumerate()
        .map(|(i, (_, s))| (s.id().to_string(), i))
        .collect();
    let mut children: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, (_, s)) in sessions.iter().enumerate() {
        if let Some(p) = s.parent_id().filter(|p| known.contains_key(*p)) {
            children.entry(p.to_string()).or_default().push(i);
        }
    }
    for (unit, root) in &sessions {
        if root.parent_id().is_some_and(|p| known.contains_key(p)) {
            continue;
        }
        // Descendants, breadth first; `seen` guards against a parent loop.
        let mut descendants = Vec::new();
        let mut seen = vec![root.id().to_string()];
        let mut queue = vec![root.id().to_string()];
        while let Some(id) = queue.pop() {
            for &i in children.get(&id).into_iter().flatten() {
                let child = &sessions[i].1;
                if !seen.iter().any(|s| s == child.id()) {
                    seen.push(child.id().to_string());
                    queue.push(child.id().to_string());
                    descendants.push(child.clone());
                }
            }
        }
        units.push(unit.clone());
        prepared.insert(unit.clone(), Ok((root.clone(), descendants)));
    }
    (units, prepared)
}

fn is_export(file: &Path) -> bool {
    file.extension().is_some_and(|e| e == "json")
}

/// What a source path holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SourceKind {
    Database,
    Storage,
    Export,
}

impl SourceKind {
    fn of(path: &Path) -> SourceKind {
        if path.is_dir() {
            SourceKind::Storage
        } else if is_export(path) {
            SourceKind::Export
        } else {
            SourceKind::Database
        }
    }
}

/// The sessions in one source: a database's or a storage folder's all, an export's one.
fn read_file(file: &Path, kind: SourceKind) -> Result<Vec<Session>, String> {
    match kind {
        SourceKind::Database => return read_opencode_db(file),
        SourceKind::Storage => return read_storage(file),
        SourceKind::Export => {}
    }
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let label = file.display().to_string();
    opencode::from_export(&SourceFile {
        label: &label,
        bytes: &bytes,
    })
    .map(|s| vec![s])
    .map_err(|e| e.to_string())
}

/// The database and the storage folder in an OpenCode data folder, those that exist (the
/// database first: its sessions win over the same sessions' older files).
fn data_sources(data: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    if data.join(DB_NAME).is_file() {
        found.push(data.join(DB_NAME));
    }
    if is_storage_dir(&data.join(STORAGE_DIR)) {
        found.push(data.join(STORAGE_DIR));
    }
    found
}

/// Files as given; for a folder, the storage folder itself, else the database and storage
/// folder in it, else its `.json` files (sorted).
fn source_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        let meta =
            std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
        if !meta.is_dir() {
            files.push(path.clone());
            continue;
        }
        if is_storage_dir(path) {
            files.push(path.clone());
            continue;
        }
        let found = data_sources(path);
        if !found.is_empty() {
            files.extend(found);
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && is_export(p))
            .collect();
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// OpenCode's data folder: `$XDG_DATA_HOME/opencode`, else `~/.local/share/opencode`.
fn data_dir() -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => home_dir()?.join(".local/share"),
    };
    Ok(base.join("opencode"))
}
