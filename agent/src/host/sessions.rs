//! Where sessions come from: opening, creating and finding them in the configured store.
//!
//! Every front end opens sessions through [`SessionHome`], so `--session`, `-c`, `--fork`,
//! RPC `switch_session`, `/resume` and `/new` agree on what a reference means and which file
//! is written afterwards.

use std::path::{Path, PathBuf};

use pi_engine::session::Session;
use pi_formats::header::NewHeader;
use pi_storage::paths::{session_dir_name, session_file_name, sessions_root};
use pi_storage::{
    open_store, JsonlFileStore, LazySession, ListScope, SessionHeader, SessionId, SessionStore,
    StoreOptions, StoreSpec, StoredEntry,
};

use crate::agent::Persistence;

/// An error while opening or creating a session, as shown to the user.
pub type HomeResult<T> = Result<T, String>;

/// The store and directory sessions are opened in and created for.
#[derive(Debug, Clone)]
pub struct SessionHome {
    /// `<agentDir>` (`~/.pi/agent` or `PI_CODING_AGENT_DIR`).
    pub agent_dir: PathBuf,
    /// The directory new sessions record as their `cwd`.
    pub cwd: String,
    /// Which store: Pi's JSONL files (default), redb or SQLite.
    pub spec: StoreSpec,
    /// `--session-dir`, fsync policy and the agent dir, for opening the store.
    pub store_options: StoreOptions,
    /// `--no-session`: nothing is written.
    pub no_session: bool,
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl SessionHome {
    /// The configured store.
    pub fn store(&self) -> HomeResult<Box<dyn SessionStore>> {
        open_store(&self.spec, &self.store_options).map_err(err)
    }

    /// Where a new JSONL session file goes (other stores have no file).
    fn new_file(&self, header: &NewHeader) -> Option<PathBuf> {
        let dir = match &self.spec {
            StoreSpec::Jsonl(Some(dir)) => dir.clone(),
            StoreSpec::Jsonl(None) => match &self.store_options.session_dir {
                Some(dir) => dir.clone(),
                None => sessions_root(&self.agent_dir).join(session_dir_name(&header.cwd)),
            },
            _ => return None,
        };
        // Absolute even when the agent or session dir was given relative: the path is
        // reported (`sessionFile`) and stored as a fork's `parentSession`, as Pi's are.
        Some(pi_storage::paths::resolve_path(
            &dir.join(session_file_name(&header.timestamp, &header.id)),
        ))
    }

    /// A new, empty session (written when the conversation starts).
    pub fn new_session(&self, parent: Option<String>) -> HomeResult<(Session, Persistence)> {
        self.new_session_as(pi_formats::id::session_id(), parent)
    }

    /// [`SessionHome::new_session`] with the id given (`--session-id`).
    pub fn new_session_as(
        &self,
        id: String,
        parent: Option<String>,
    ) -> HomeResult<(Session, Persistence)> {
        let header = NewHeader::new(id, pi_formats::time::now_iso(), self.cwd.clone(), parent);
        let mut session = Session::create(&header);
        if self.no_session {
            return Ok((session, Persistence::default()));
        }
        let file = self.new_file(&header);
        session.set_path(file.clone());
        Ok((
            session,
            Persistence {
                store: Some(self.store()?),
                lazy: Some(LazySession::new(SessionHeader::new(&header))),
                file,
            },
        ))
    }

    /// A session made of `lines` (header first), created in the store at once (fork, clone).
    pub fn create_from_lines(&self, lines: Vec<String>) -> HomeResult<(Session, Persistence)> {
        let mut bytes = lines.join("\n").into_bytes();
        bytes.push(b'\n');
        let header_line = lines.first().cloned().unwrap_or_default();
        let header_value: serde_json::Value = serde_json::from_str(&header_line)
            .map_err(|e| format!("building the new session's header: {e}"))?;
        let new_header = NewHeader::new(
            header_value["id"].as_str().unwrap_or_default().to_string(),
            header_value["timestamp"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            header_value["cwd"].as_str().unwrap_or_default().to_string(),
            header_value["parentSession"].as_str().map(str::to_string),
        );
        let file = self.new_file(&new_header);
        let mut session =
            Session::from_bytes(bytes, file.as_deref().unwrap_or(Path::new("new"))).map_err(err)?;
        session.set_path(file.clone());
        if self.no_session {
            return Ok((session, Persistence::default()));
        }
        let store = self.store()?;
        let header = SessionHeader::parse(header_line.into_bytes()).map_err(err)?;
        let entries: Vec<StoredEntry> = lines[1..]
            .iter()
            .map(|l| StoredEntry::from_line(l.clone().into_bytes()))
            .collect();
        // Pi writes a fork only once it has a conversation; with messages it exists at once.
        let mut lazy = LazySession::new(header);
        lazy.append(store.as_ref(), &entries)
            .map_err(|e| format!("cannot write the new session: {e}"))?;
        Ok((
            session,
            Persistence {
                store: Some(store),
                lazy: Some(lazy),
                file,
            },
        ))
    }

    /// Opens a session file for appending. Every write goes to `path` itself (through a link
    /// if it is one), never to another file of its folder that carries the same session id.
    /// As in Pi, an empty file or a path that does not exist yet is a fresh session that will
    /// live there: the empty file gets its header at once, a new path with the conversation.
    pub fn open_file(&self, path: &Path) -> HomeResult<(Session, Persistence)> {
        // Pi resolves the path (without following links) and reports it absolute.
        let path = pi_storage::paths::resolve_path(path);
        match std::fs::metadata(&path) {
            Ok(meta) if meta.len() == 0 && meta.is_file() => return self.fresh_at(&path, true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return self.fresh_at(&path, false)
            }
            _ => {}
        }
        let cache = pi_engine::session::HeadCache::in_agent_dir(&self.agent_dir);
        let (session, _) = Session::open_cached(&path, Some(&cache)).map_err(err)?;
        if self.no_session {
            return Ok((session, Persistence::default()));
        }
        let id = session
            .session_id()
            .ok_or_else(|| format!("{}: the session header has no id", path.display()))?;
        let store = JsonlFileStore::new(&path, self.store_options.fsync);
        let header_line = session
            .header_line()
            .map(<[u8]>::to_vec)
            .ok_or_else(|| format!("{}: no session header", path.display()))?;
        let header = SessionHeader::parse(header_line).map_err(err)?;
        let writer = store
            .open_writer(&SessionId::new(id))
            .map_err(|e| format!("cannot open {} for appending: {e}", path.display()))?;
        Ok((
            session,
            Persistence {
                store: Some(Box::new(store)),
                lazy: Some(LazySession::resume(header, writer)),
                file: Some(path),
            },
        ))
    }

    /// A new session that lives at `path` (Pi's `setSessionFile` on an empty or missing
    /// file). `write_now`: the file exists empty and gets its header at once, as Pi rewrites
    /// it; otherwise the file is created with the conversation.
    fn fresh_at(&self, path: &Path, write_now: bool) -> HomeResult<(Session, Persistence)> {
        let header = NewHeader::new(
            pi_formats::id::session_id(),
            pi_formats::time::now_iso(),
            self.cwd.clone(),
            None,
        );
        let mut session = Session::create(&header);
        session.set_path(Some(path.to_path_buf()));
        if self.no_session {
            return Ok((session, Persistence::default()));
        }
        let store = JsonlFileStore::new(path, self.store_options.fsync);
        let stored = SessionHeader::new(&header);
        let lazy = if write_now {
            let writer = store
                .create_session(&stored, &[])
                .map_err(|e| format!("cannot start a session in {}: {e}", path.display()))?;
            LazySession::resume(stored, writer)
        } else {
            LazySession::new(stored)
        };
        Ok((
            session,
            Persistence {
                store: Some(Box::new(store)),
                lazy: Some(lazy),
                file: Some(path.to_path_buf()),
            },
        ))
    }

    /// `--session FILE|ID`: an existing file, else the session whose id starts with the text.
    pub fn open_ref(&self, reference: &str) -> HomeResult<(Session, Persistence)> {
        let path = Path::new(reference);
        if path.is_file() {
            return self.open_file(path);
        }
        // A path (Pi: it contains a separator or ends in .jsonl) that does not exist yet is a
        // new session to be written there.
        if pi_storage::paths::is_path_argument(reference) && !path.exists() && !path.is_symlink() {
            return self.open_file(path);
        }
        let store = self.store()?;
        let mut matches: Vec<_> = store
            .list_sessions(&ListScope::All)
            .map_err(err)?
            .into_iter()
            .filter(|s| s.id.as_str().starts_with(reference))
            .collect();
        match matches.len() {
            0 => {
                return Err(format!(
                    "no session matches {reference:?} (not a file, not an id prefix)"
                ))
            }
            1 => {}
            n => {
                return Err(format!(
                    "{n} sessions match the id prefix {reference:?}; give more of the id"
                ))
            }
        }
        let summary = matches.remove(0);
        self.open_summary(store, &summary.id, &summary.location)
    }

    fn open_summary(
        &self,
        store: Box<dyn SessionStore>,
        id: &SessionId,
        location: &str,
    ) -> HomeResult<(Session, Persistence)> {
        if matches!(self.spec, StoreSpec::Jsonl(_)) {
            return self.open_file(Path::new(location));
        }
        let data = store.read_session(id).map_err(err)?;
        let session = Session::from_bytes(data.to_jsonl(), Path::new(location)).map_err(err)?;
        if self.no_session {
            return Ok((session, Persistence::default()));
        }
        let writer = store.open_writer(id).map_err(err)?;
        Ok((
            session,
            Persistence {
                store: Some(store),
                lazy: Some(LazySession::resume(data.header, writer)),
                file: None,
            },
        ))
    }

    /// `--session-id`: this directory's session with exactly this id, if there is one.
    pub fn open_local_id(&self, id: &str) -> HomeResult<Option<(Session, Persistence)>> {
        let store = self.store()?;
        let found = store
            .list_sessions(&ListScope::Cwd(self.cwd.clone()))
            .map_err(err)?
            .into_iter()
            .find(|s| s.id.as_str() == id);
        match found {
            Some(s) => Ok(Some(self.open_summary(store, &s.id, &s.location)?)),
            None => Ok(None),
        }
    }

    /// `-c`: the most recently modified session of this directory.
    pub fn latest(&self) -> HomeResult<Option<(Session, Persistence)>> {
        let store = self.store()?;
        let mut list = store
            .list_sessions(&ListScope::Cwd(self.cwd.clone()))
            .map_err(err)?;
        pi_storage::summary::sort_summaries(&mut list);
        match list.into_iter().next() {
            Some(s) => Ok(Some(self.open_summary(store, &s.id, &s.location)?)),
            None => Ok(None),
        }
    }

    /// A copy that only reads (`--fork` opens its source without taking its lock).
    pub fn read_only(&self) -> SessionHome {
        SessionHome {
            no_session: true,
            ..self.clone()
        }
    }
}
