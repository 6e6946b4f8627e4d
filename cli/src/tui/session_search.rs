//! /resume's message search, answered by the store's history index (`pi_storage::history`,
//! the index `pi sessions search` uses). The first picker opens it and brings it up to date
//! (a walk of the store and a `stat` per file); the index then stays open for the life of
//! the TUI, and for a JSONL store a file watcher (inotify on Linux) notes which session
//! files change, so later pickers refresh only those and look at no other file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use notify::{EventKind, RecursiveMode, Watcher};
use pi_storage::history::{HistoryIndex, HistorySource, RefreshReport};
use pi_storage::{StoreOptions, StoreSpec};

/// The open index, kept from one /resume picker to the next.
#[derive(Debug, Default)]
pub struct SessionSearch {
    open: Option<Open>,
    /// Whether the index must be brought up to date before its next answer (a picker
    /// opened since the last refresh).
    stale: bool,
    /// Why the index could not be used (asked once per picker, not on every key).
    failed: Option<String>,
    /// What the last refresh did.
    last_refresh: Option<RefreshReport>,
}

#[derive(Debug)]
struct Open {
    source: HistorySource,
    index: HistoryIndex,
    /// Changes to a JSONL store's files since the last refresh; `None` when there is no
    /// watcher (a database store, or watching failed), and every refresh looks at all files.
    watch: Option<Watch>,
}

impl SessionSearch {
    /// A picker opened: the next search brings the index up to date first, so it finds
    /// sessions written since.
    pub fn reset(&mut self) {
        self.stale = true;
        self.failed = None;
    }

    /// What the last refresh did (for tests and diagnostics).
    pub fn last_refresh(&self) -> Option<&RefreshReport> {
        self.last_refresh.as_ref()
    }

    /// Locations of the sessions whose user or assistant text matches `query` (the index's
    /// query language). `Err` names why the index cannot be used; the picker then matches
    /// the first message only.
    pub fn sessions_matching(
        &mut self,
        store: &(StoreSpec, StoreOptions),
        query: &str,
    ) -> Result<std::collections::HashSet<String>, String> {
        if let Some(why) = &self.failed {
            return Err(why.clone());
        }
        let refreshed = match self.open.as_mut() {
            None => open(&store.0, &store.1).map(|(open, report)| {
                self.open = Some(open);
                report
            }),
            Some(open) if self.stale => open.refresh(),
            Some(_) => Ok(self.last_refresh.clone().unwrap_or_default()),
        };
        match refreshed {
            Ok(report) => {
                self.last_refresh = Some(report);
                self.stale = false;
            }
            Err(why) => {
                self.failed = Some(why.clone());
                return Err(why);
            }
        }
        let open = self.open.as_ref().ok_or("no index")?;
        open.index
            .sessions_with_message_text(query)
            .map_err(|e| e.to_string())
    }
}

impl Open {
    /// Brings the index up to date: only the files the watcher saw change when it can
    /// say, else every file.
    fn refresh(&mut self) -> Result<RefreshReport, String> {
        let changed = self.watch.as_ref().and_then(Watch::take);
        let report = match (&self.source, changed) {
            (HistorySource::Jsonl(store), Some(paths)) => {
                self.index.refresh_jsonl_files(store, &paths)
            }
            (source, _) => source.refresh(&mut self.index),
        };
        report.map_err(|e| e.to_string())
    }
}

/// Opens the history index of the store, with a watcher on a JSONL store's files started
/// first (so nothing written during the refresh is missed), and indexes what changed since
/// its last use. No progress is printed: the UI owns the terminal.
fn open(spec: &StoreSpec, options: &StoreOptions) -> Result<(Open, RefreshReport), String> {
    let source = HistorySource::open(spec, options).map_err(|e| e.to_string())?;
    let watch = source.layout().and_then(|layout| {
        let root = match layout {
            pi_storage::JsonlLayout::PerCwd { root } => root,
            pi_storage::JsonlLayout::Flat { dir } => dir,
        };
        Watch::start(root)
    });
    let path = source.index_path(spec, options);
    let (index, report) = source.open_index(&path).map_err(|e| e.to_string())?;
    Ok((
        Open {
            source,
            index,
            watch,
        },
        report,
    ))
}

/// Which session files changed under a directory since they were last taken.
struct Watch {
    /// Kept alive for its events; dropping it stops watching.
    _watcher: notify::RecommendedWatcher,
    seen: Arc<Mutex<Seen>>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}

#[derive(Debug, Default)]
struct Seen {
    /// Session files created, written, renamed or removed.
    changed: BTreeSet<PathBuf>,
    /// Something the list of files cannot say (a directory created, moved or removed,
    /// events lost, a watcher error): the next refresh looks at every file.
    everything: bool,
}

impl Watch {
    /// Watches `root` and what is below it; `None` when the platform or the directory
    /// does not allow it (refreshes then look at every file, as before).
    fn start(root: &Path) -> Option<Watch> {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let sink = seen.clone();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let Ok(mut seen) = sink.lock() else { return };
                note(&mut seen, event);
            })
            .ok()?;
        std::fs::create_dir_all(root).ok()?;
        watcher.watch(root, RecursiveMode::Recursive).ok()?;
        Some(Watch {
            _watcher: watcher,
            seen,
        })
    }

    /// The session files changed since the last call, or `None` when every file must be
    /// looked at; starts collecting anew either way.
    fn take(&self) -> Option<Vec<PathBuf>> {
        let mut seen = self.seen.lock().ok()?;
        let taken = std::mem::take(&mut *seen);
        (!taken.everything).then(|| taken.changed.into_iter().collect())
    }
}

/// Folds one watcher event into what was seen.
fn note(seen: &mut Seen, event: notify::Result<notify::Event>) {
    let Ok(event) = event else {
        seen.everything = true;
        return;
    };
    if event.need_rescan() {
        seen.everything = true;
        return;
    }
    match event.kind {
        // Reading a file changes nothing the index holds.
        EventKind::Access(_) => {}
        EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) => {
            for path in &event.paths {
                if path.extension().is_some_and(|e| e == "jsonl") {
                    seen.changed.insert(path.clone());
                } else if !path.is_file() {
                    // A directory (a new cwd directory, one moved or removed), or a path
                    // gone before it could be looked at: its events do not list the files
                    // in it.
                    seen.everything = true;
                }
            }
        }
        EventKind::Any | EventKind::Other => seen.everything = true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::{Duration, Instant};

    fn user(id: &str, word: &str) -> String {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"about the {word}"}}}}"#
        )
    }

    fn session(dir: &Path, name: &str, id: &str, word: &str) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "{}\n{}\n",
                format_args!(
                    r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}}"#
                ),
                user(&format!("{id}-u"), word)
            ),
        )
        .unwrap();
        path
    }

    /// Searches until `word` is found in `expected` sessions (the watcher's events arrive
    /// on their own thread), for at most 10 s.
    fn found(
        search: &mut SessionSearch,
        store: &(StoreSpec, StoreOptions),
        word: &str,
        expected: usize,
    ) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            search.reset();
            let n = search.sessions_matching(store, word).unwrap().len();
            if n == expected || Instant::now() > deadline {
                return n;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    #[test]
    fn later_pickers_refresh_only_the_files_that_changed() {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let root = agent.join("sessions");
        let cwd = root.join("--w--");
        let files: Vec<PathBuf> = (0..20)
            .map(|n| session(&cwd, &format!("s{n:02}.jsonl"), &format!("s{n}"), "okapi"))
            .collect();
        let store = (StoreSpec::Jsonl(None), StoreOptions::new(&agent));
        let mut search = SessionSearch::default();
        assert_eq!(search.sessions_matching(&store, "okapi").unwrap().len(), 20);
        assert_eq!(search.last_refresh().unwrap().sessions_seen, 20);

        // One file appended to: the next picker looks at it alone.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&files[3])
            .unwrap();
        writeln!(f, "{}", user("late", "walrus")).unwrap();
        drop(f);
        assert_eq!(found(&mut search, &store, "walrus", 1), 1);
        let report = search.last_refresh().unwrap();
        assert_eq!(
            (report.sessions_seen, report.sessions_updated),
            (1, 1),
            "{report:?}"
        );

        // Nothing changed: nothing is looked at.
        search.reset();
        assert_eq!(search.sessions_matching(&store, "okapi").unwrap().len(), 20);
        assert_eq!(search.last_refresh().unwrap().sessions_seen, 0);

        // A removed file goes; a session in a new cwd directory is found (a directory
        // event: every file is looked at once).
        std::fs::remove_file(&files[0]).unwrap();
        assert_eq!(found(&mut search, &store, "okapi", 19), 19);
        session(&root.join("--v--"), "n.jsonl", "n1", "narwhal");
        assert_eq!(found(&mut search, &store, "narwhal", 1), 1);
    }

    #[test]
    fn directory_events_and_lost_events_ask_for_every_file() {
        let mut seen = Seen::default();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.jsonl");
        std::fs::write(&file, "").unwrap();
        let event = |kind, paths: Vec<PathBuf>| {
            Ok(notify::Event {
                kind,
                paths,
                attrs: Default::default(),
            })
        };
        use notify::event::{CreateKind, ModifyKind};
        note(
            &mut seen,
            event(EventKind::Modify(ModifyKind::Any), vec![file.clone()]),
        );
        note(
            &mut seen,
            event(EventKind::Access(notify::event::AccessKind::Any), vec![]),
        );
        assert!(!seen.everything);
        assert_eq!(seen.changed.iter().collect::<Vec<_>>(), vec![&file]);
        note(
            &mut seen,
            event(
                EventKind::Create(CreateKind::Folder),
                vec![dir.path().join("--new--")],
            ),
        );
        assert!(seen.everything);
        let mut seen = Seen::default();
        note(&mut seen, Err(notify::Error::generic("queue overflow")));
        assert!(seen.everything);
    }
}
