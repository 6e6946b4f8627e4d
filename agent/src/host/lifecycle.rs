//! The session lifecycle: new, switch, fork, clone and import, each decided once, as real
//! Pi 1.6.0 does it, for RPC and the TUI alike.
//!
//! * `/clone` and RPC `clone` copy the active path (Pi's `createBranchedSession` at the leaf),
//!   not the whole tree.
//! * Forking at a user message starts a new session holding the path to that message's
//!   parent; at the first message (no parent) it is Pi's `newSession` with this session as
//!   its parent, written only once the conversation starts.
//! * A session whose stored directory is gone is opened as [`MissingCwd`] says; one whose
//!   directory exists is worked in there.

use std::path::{Path, PathBuf};

use pi_engine::session::Session;
use pi_formats::header::NewHeader;
use serde_json::Value;

use super::Host;

/// What to do when the session to open names a working directory that does not exist
/// (Pi's prompt for /resume and /import).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingCwd {
    /// Do not open it: fail with [`MissingSessionCwd`], so the UI can ask.
    Ask,
    /// Open it and work in the current directory; the file keeps its cwd, so the question
    /// comes again next time.
    Continue,
    /// Continue in a copy forked into the current directory (new id, the original kept).
    Fork,
}

/// The session to open names a working directory that does not exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingSessionCwd {
    /// The directory in the session header.
    pub session_cwd: String,
    /// Where we work now, offered instead.
    pub fallback_cwd: String,
}

impl std::fmt::Display for MissingSessionCwd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Stored session working directory does not exist: {}\nCurrent working directory: {}",
            self.session_cwd, self.fallback_cwd
        )
    }
}

impl std::error::Error for MissingSessionCwd {}

/// Why a lifecycle operation did not happen.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The session's directory is gone and the caller asked to be asked.
    #[error(transparent)]
    MissingCwd(#[from] MissingSessionCwd),
    /// Anything else, as shown to the user.
    #[error("{0}")]
    Failed(String),
}

fn fail(message: impl Into<String>) -> HostError {
    HostError::Failed(message.into())
}

impl From<crate::agent::AgentError> for HostError {
    fn from(e: crate::agent::AgentError) -> Self {
        fail(e.to_string())
    }
}

/// The working directory a session header names (`None` when it names none).
fn header_cwd(session: &Session) -> Option<String> {
    session
        .header()
        .and_then(|h| h.get("cwd").and_then(Value::as_str).map(str::to_string))
        .filter(|c| !c.is_empty())
}

/// Pi's check before opening a session: its working directory must exist unless the user
/// chose to continue or fork elsewhere. Returns the session's directory when it exists.
fn check_session_cwd(
    session: &Session,
    fallback: &str,
    missing: MissingCwd,
) -> Result<Option<String>, MissingSessionCwd> {
    match header_cwd(session) {
        Some(cwd) if Path::new(&cwd).is_dir() => Ok(Some(cwd)),
        Some(cwd) if missing == MissingCwd::Ask => Err(MissingSessionCwd {
            session_cwd: cwd,
            fallback_cwd: fallback.to_string(),
        }),
        _ => Ok(None),
    }
}

/// A session a replacement made or opened, not yet current: Pi creates (a fork's file is
/// written) or opens the next session before the one being left gets `session_shutdown`,
/// whose `targetSessionFile` names it, and only then switches ([`Host::commit`]).
pub(super) struct Staged {
    session: Session,
    persist: crate::agent::Persistence,
    after: AfterSwitch,
}

/// What makes a [`Staged`] session current once it replaced the old one.
enum AfterSwitch {
    /// A new session: the model and thinking level are recorded in it.
    StartNew,
    /// An existing one (or a copy): its model and thinking level are restored, and its
    /// directory, when it has one that exists, becomes the working directory.
    Restore { cwd: Option<String> },
}

impl Staged {
    fn new_session((session, persist): (Session, crate::agent::Persistence)) -> Staged {
        Staged {
            session,
            persist,
            after: AfterSwitch::StartNew,
        }
    }

    fn restored(
        (session, persist): (Session, crate::agent::Persistence),
        cwd: Option<String>,
    ) -> Staged {
        Staged {
            session,
            persist,
            after: AfterSwitch::Restore { cwd },
        }
    }

    /// The file the session lives (or will live) in, as `targetSessionFile` names it.
    pub(super) fn file(&self) -> Option<String> {
        self.persist.file.as_ref().map(|p| p.display().to_string())
    }
}

impl Host {
    /// Makes a staged session the current one.
    pub(super) fn commit(&self, staged: Staged) -> Result<(), HostError> {
        self.agent.replace_session(staged.session, staged.persist);
        match staged.after {
            AfterSwitch::StartNew => self.agent.start_new()?,
            AfterSwitch::Restore { cwd } => {
                self.agent.restore_from_session();
                if let Some(cwd) = cwd {
                    self.set_cwd(cwd);
                }
            }
        }
        Ok(())
    }

    fn idle(&self, what: &str) -> Result<(), HostError> {
        if self.agent.is_streaming() {
            return Err(fail(format!(
                "Cannot {what} while the agent is running; wait for the current response to finish"
            )));
        }
        Ok(())
    }

    fn new_header(&self, parent: Option<String>) -> NewHeader {
        NewHeader::new(
            pi_formats::id::session_id(),
            pi_formats::time::now_iso(),
            self.cwd(),
            parent,
        )
    }

    /// `new_session` / `/new`: a fresh session, optionally naming its parent session file.
    pub fn new_session(&self, parent: Option<String>) -> Result<(), HostError> {
        let staged = self.stage_new_session(parent)?;
        self.commit(staged)
    }

    pub(super) fn stage_new_session(&self, parent: Option<String>) -> Result<Staged, HostError> {
        self.idle("start a new session")?;
        let made = self.setup().home.new_session(parent).map_err(fail)?;
        Ok(Staged::new_session(made))
    }

    /// `switch_session` / `/resume`: continues the session at a store location (a file for
    /// JSONL, or an id prefix). A session whose directory exists is worked in there.
    pub fn switch_session(&self, location: &str, missing: MissingCwd) -> Result<(), HostError> {
        let staged = self.stage_switch_session(location, missing)?;
        self.commit(staged)
    }

    pub(super) fn stage_switch_session(
        &self,
        location: &str,
        missing: MissingCwd,
    ) -> Result<Staged, HostError> {
        self.idle("switch sessions")?;
        let home = self.setup().home;
        let (session, persist) = home.open_ref(location).map_err(fail)?;
        let cwd = check_session_cwd(&session, &home.cwd, missing)?;
        if cwd.is_none() && missing == MissingCwd::Fork {
            // The original stays as it is: release it before writing the copy.
            drop(persist);
            let parent = session
                .path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| location.to_string());
            return Ok(self.stage_fork_into_cwd(&session, parent)?.0);
        }
        Ok(Staged::restored((session, persist), cwd))
    }

    /// The parent a new session derived from this one records: its file, when it has one.
    fn parent_session(&self) -> Option<String> {
        if self.setup().home.no_session {
            return None;
        }
        self.agent
            .session_file()
            .or_else(|| self.agent.with_session(|s| s.path().map(Path::to_path_buf)))
            .map(|p| p.display().to_string())
    }

    /// A new session holding the path to `leaf` (Pi's `createBranchedSession`), written.
    fn branch_into_new(&self, leaf: &str) -> Result<Staged, HostError> {
        let home = self.setup().home;
        let file = self.agent.session_file();
        if !home.no_session && file.as_ref().is_some_and(|f| !f.is_file()) {
            return Err(fail(
                "This session has not been saved yet. Send a message before cloning or forking it.",
            ));
        }
        let header = self.new_header(self.parent_session());
        let lines = self
            .agent
            .with_session(|s| s.branched_lines(leaf, &header))
            .map_err(|e| fail(e.to_string()))?;
        let made = home.create_from_lines(lines).map_err(fail)?;
        Ok(Staged::restored(made, None))
    }

    /// `fork` / `/fork`: continues from before a user message in a new session. Returns the
    /// message's text, for the editor.
    pub fn fork(&self, entry_id: &str) -> Result<String, HostError> {
        let (staged, text) = self.stage_fork(entry_id)?;
        self.commit(staged)?;
        Ok(text)
    }

    pub(super) fn stage_fork(&self, entry_id: &str) -> Result<(Staged, String), HostError> {
        self.idle("fork")?;
        let (parent, text) = self
            .agent
            .with_session(|s| {
                let idx = s.find(entry_id)?;
                let v = s.entry_value(idx);
                if v["type"] != "message" || v["message"]["role"] != "user" {
                    return None;
                }
                let text = pi_engine::js::content_text(v.pointer("/message/content"), "");
                Some((v["parentId"].as_str().map(str::to_string), text))
            })
            .ok_or_else(|| fail("Invalid entry ID for forking"))?;
        let staged = match parent {
            Some(leaf) => self.branch_into_new(&leaf)?,
            // The first message: a new, empty session that names this one as its parent.
            None => Staged::new_session(
                self.setup()
                    .home
                    .new_session(self.parent_session())
                    .map_err(fail)?,
            ),
        };
        Ok((staged, text))
    }

    /// `clone` / `/clone`: continues in a copy of the active path.
    pub fn clone_session(&self) -> Result<(), HostError> {
        let staged = self.stage_clone()?;
        self.commit(staged)
    }

    pub(super) fn stage_clone(&self) -> Result<Staged, HostError> {
        self.idle("clone")?;
        let leaf = self
            .agent
            .with_session(|s| s.leaf_id().map(str::to_string))
            .ok_or_else(|| fail("Cannot clone session: no current entry selected"))?;
        self.branch_into_new(&leaf)
    }

    /// Pi's `fork(entryId, {position: "at"})`: continues in a new session holding the path
    /// through `entry_id`, which need not be the leaf.
    pub fn clone_at(&self, entry_id: &str) -> Result<(), HostError> {
        let staged = self.stage_clone_at(entry_id)?;
        self.commit(staged)
    }

    pub(super) fn stage_clone_at(&self, entry_id: &str) -> Result<Staged, HostError> {
        self.idle("fork")?;
        if self.agent.with_session(|s| s.find(entry_id)).is_none() {
            return Err(fail("Invalid entry ID for forking"));
        }
        self.branch_into_new(entry_id)
    }

    /// Pi's fork of a session whose directory is gone: every entry, under a new header in
    /// the current directory naming `parent` as its parent session. Returns where it lives.
    fn fork_into_cwd(&self, source: &Session, parent: String) -> Result<String, HostError> {
        let (staged, location) = self.stage_fork_into_cwd(source, parent)?;
        self.commit(staged)?;
        Ok(location)
    }

    fn stage_fork_into_cwd(
        &self,
        source: &Session,
        parent: String,
    ) -> Result<(Staged, String), HostError> {
        let header = self.new_header(Some(parent));
        let id = header.id.clone();
        let (session, persist) = self
            .setup()
            .home
            .create_from_lines(source.fork_from_lines(&header))
            .map_err(fail)?;
        let location = session
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or(id);
        Ok((Staged::restored((session, persist), None), location))
    }

    /// `/import FILE`: copies a session file into the store and continues it. Returns where
    /// the imported session now lives.
    pub fn import(&self, path: &str, missing: MissingCwd) -> Result<String, HostError> {
        self.idle("import a session")?;
        let home = self.setup().home;
        let user_home = crate::config::home();
        let source =
            Path::new(&home.cwd).join(crate::config::expand_tilde(path, user_home.as_deref()));
        if !source.exists() {
            return Err(fail(format!(
                "Session file not found: {}",
                source.display()
            )));
        }
        let imported = check_import_file(&source)?;
        // Checked before copying, so asking leaves no stray copy behind (Pi removes its copy).
        let cwd = check_session_cwd(&imported, &home.cwd, missing)?;
        if cwd.is_none() && missing == MissingCwd::Fork {
            // Pi forks from the file given, which stays where it is.
            let parent = source
                .canonicalize()
                .unwrap_or_else(|_| source.clone())
                .display()
                .to_string();
            return self.fork_into_cwd(&imported, parent);
        }
        let id = imported.session_id().ok_or_else(|| {
            fail(format!(
                "{}: the session header has no id",
                source.display()
            ))
        })?;
        let (session, persist, location) = match &home.spec {
            pi_storage::StoreSpec::Jsonl(_) => {
                let dir = self
                    .agent
                    .session_file()
                    .and_then(|f| f.parent().map(Path::to_path_buf))
                    .ok_or_else(|| fail("the current session has no directory"))?;
                let flat = pi_storage::JsonlStore::open(
                    pi_storage::JsonlLayout::Flat { dir: dir.clone() },
                    Default::default(),
                );
                let sid = pi_storage::SessionId::new(id.clone());
                // Two files with one id would leave appends going to whichever is found first.
                if let Ok(existing) = flat.session_path(&sid) {
                    let same = existing.canonicalize().ok() == source.canonicalize().ok();
                    if !same {
                        return Err(fail(format!(
                            "session {id} is already stored as {}; resume it with /resume",
                            existing.display()
                        )));
                    }
                }
                let dest = copy_into_dir(&source, &dir)?;
                let (session, persist) = home.open_file(&dest).map_err(fail)?;
                (session, persist, dest.display().to_string())
            }
            _ => {
                let store = home.store().map_err(fail)?;
                let outcome = pi_storage::transfer::import_jsonl(store.as_ref(), &source)
                    .map_err(|e| fail(e.to_string()))?;
                drop(store);
                let (session, persist) = home.open_ref(outcome.id.as_str()).map_err(fail)?;
                (session, persist, outcome.id.as_str().to_string())
            }
        };
        self.agent.replace_session(session, persist);
        self.agent.restore_from_session();
        if let Some(cwd) = cwd {
            self.set_cwd(cwd);
        }
        Ok(location)
    }
}

/// Checks that `path` is a session file we can import: readable, a session header with an
/// id first, and no line that does not parse. The error is one line naming the file and,
/// where there is one, the line.
fn check_import_file(path: &Path) -> Result<Session, HostError> {
    let bytes =
        std::fs::read(path).map_err(|e| fail(format!("cannot read {}: {e}", path.display())))?;
    let session = Session::from_bytes(bytes, path).map_err(|e| fail(e.to_string()))?;
    let report = session.load_report();
    if let Some(bad) = report.skipped_lines.first() {
        return Err(fail(format!("{}: {bad}", path.display())));
    }
    if report.was_empty {
        return Err(fail(format!("{}: the file is empty", path.display())));
    }
    Ok(session)
}

/// Pi's import into a JSONL session directory: the file is copied under its own name, with
/// `-1`, `-2`, … before the extension when that name is taken; a file already in `dir` is
/// used where it is. Returns the session's path in `dir`.
fn copy_into_dir(source: &Path, dir: &Path) -> Result<PathBuf, HostError> {
    let name = source
        .file_name()
        .ok_or_else(|| fail(format!("{}: not a file name", source.display())))?;
    std::fs::create_dir_all(dir)
        .map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
    let mut dest = dir.join(name);
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same(&dest, source) {
        return Ok(dest);
    }
    let stem = Path::new(name)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = Path::new(name)
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let mut n = 1;
    loop {
        // `create_new` is the exclusive copy: two imports never write one file.
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&dest)
        {
            Ok(mut out) => {
                let mut input = std::fs::File::open(source)
                    .map_err(|e| fail(format!("cannot read {}: {e}", source.display())))?;
                let copied = std::io::copy(&mut input, &mut out).and_then(|_| out.sync_all());
                if let Err(e) = copied {
                    let _ = std::fs::remove_file(&dest);
                    return Err(fail(format!("cannot write {}: {e}", dest.display())));
                }
                return Ok(dest);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                dest = dir.join(format!("{stem}-{n}{ext}"));
                n += 1;
            }
            Err(e) => return Err(fail(format!("cannot write {}: {e}", dest.display()))),
        }
    }
}
