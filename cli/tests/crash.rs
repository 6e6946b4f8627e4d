//! A writing `pi` process killed at random moments, on every backend.
//!
//! The writer is the real binary: `pi sessions import FILE…` creates one session per new
//! file and appends the new lines of a file that grew since it was imported, printing
//! `imported ID …` / `updated ID …` only after the store call returned, so each such line
//! acknowledges every line of that session. Each iteration imports a fresh batch (24 new
//! sessions, plus up to 4 sessions the previous run acknowledged, grown by 1–40 entries)
//! and SIGKILLs the process after a random delay drawn from a seeded RNG, spread over the
//! time an uninterrupted import of a batch takes. After every kill:
//!
//! - the store opens (in this process, and at the end in a fresh `pi` process);
//! - every acknowledged session holds exactly the lines of its file;
//! - an unacknowledged session is absent or holds a prefix of its file, keeping every line
//!   acknowledged before;
//! - `pi sessions verify`'s check (`verify_bytes`) passes, or reports only a torn tail.
//!
//! The JSONL store's files are also checked with the `pi sessions verify` binary.
//!
//! `PI_CRASH_ITERATIONS` sets the kills per backend (default 70, so 210 in all) and
//! `PI_CRASH_SEED` the seed; a failure prints both so it can be replayed:
//!
//! ```text
//! PI_CRASH_SEED=… PI_CRASH_ITERATIONS=200 cargo test --release -p pi-cli --test crash -- --nocapture
//! ```

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pi_engine::session::verify::{verify_bytes, ProblemKind};
use pi_storage::{open_store, SessionId, SessionStore, StoreError, StoreOptions};

/// splitmix64: a seeded generator small enough to need no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Clone, Copy, Debug)]
enum Backend {
    Jsonl,
    Redb,
    Sqlite,
}

impl Backend {
    fn spec(self, dir: &Path) -> String {
        match self {
            Backend::Jsonl => format!("jsonl:{}", dir.join("sessions").display()),
            Backend::Redb => format!("redb:{}", dir.join("sessions.redb").display()),
            Backend::Sqlite => format!("sqlite:{}", dir.join("sessions.sqlite").display()),
        }
    }
}

/// One source file: its session id and every line after the header.
#[derive(Clone)]
struct Source {
    path: PathBuf,
    id: String,
    header: Vec<u8>,
    lines: Vec<Vec<u8>>,
    /// Lines of this session the store had acknowledged before this import (a grown file).
    acked_len: usize,
}

impl Source {
    /// Adds 1–40 chained message entries (some a few KB).
    fn grow(&mut self, n: usize, rng: &mut Rng) {
        let first = self.lines.len();
        let mut parent = match first {
            0 => "null".to_string(),
            _ => format!("\"{n:04x}{:04x}\"", first - 1),
        };
        for e in first..first + 1 + rng.below(40) as usize {
            let pad = "x".repeat(rng.below(4) as usize * rng.below(1500) as usize);
            let eid = format!("{n:04x}{e:04x}");
            let role = if e % 2 == 0 { "user" } else { "assistant" };
            self.lines.push(
                format!(
                    r#"{{"type":"message","id":"{eid}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"{role}","content":[{{"type":"text","text":"entry {e} {pad}"}}],"timestamp":1767225601000}}}}"#
                )
                .into_bytes(),
            );
            parent = format!("\"{eid}\"");
        }
    }

    fn write(&mut self, dir: &Path) {
        fs::create_dir_all(dir).unwrap();
        self.path = dir.join(format!("{}.jsonl", self.id));
        let mut bytes = self.header.clone();
        bytes.push(b'\n');
        for l in &self.lines {
            bytes.extend_from_slice(l);
            bytes.push(b'\n');
        }
        fs::write(&self.path, bytes).unwrap();
    }
}

/// Writes a batch: `count` new v3 sessions, plus the sessions of `grown` with entries added
/// after those the store acknowledged (imported as appends to the stored session).
fn write_batch(
    dir: &Path,
    tag: &str,
    count: usize,
    grown: &[Source],
    rng: &mut Rng,
) -> Vec<Source> {
    let mut batch = Vec::new();
    for n in 0..count {
        let id = format!("0192f000-{tag}-7000-8000-{n:012x}");
        let header = format!(
            r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/crash/work"}}"#
        );
        let mut src = Source {
            path: PathBuf::new(),
            id,
            header: header.into_bytes(),
            lines: Vec::new(),
            acked_len: 0,
        };
        src.grow(n, rng);
        src.write(dir);
        batch.push(src);
    }
    for old in grown {
        let mut src = old.clone();
        src.acked_len = src.lines.len();
        let n = usize::from_str_radix(&src.id[src.id.len() - 4..], 16).unwrap();
        src.grow(n, rng);
        src.write(&dir.join("grown"));
        batch.push(src);
    }
    batch
}

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn pi(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pi"));
        cmd.current_dir(self.dir.path())
            .env("HOME", self.dir.path())
            .env("PI_CODING_AGENT_DIR", self.dir.path().join("agent"))
            .env_remove("PI_SESSION_STORE")
            .env_remove("PI_CODING_AGENT_SESSION_DIR");
        cmd
    }
}

/// Runs `pi sessions import` on `batch` and kills it after `delay` (never, if `None`).
/// Returns the ids it acknowledged, including acknowledgements still in the pipe at the kill.
fn import_and_kill(
    env: &Env,
    spec: &str,
    batch: &[Source],
    delay: Option<Duration>,
) -> Vec<String> {
    let mut child = env
        .pi()
        .args(["sessions", "--session-store", spec, "import"])
        .args(batch.iter().map(|s| &s.path))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let ack = line
                .strip_prefix("imported ")
                .or_else(|| line.strip_prefix("updated "));
            if let Some(rest) = ack {
                let id = rest.split(' ').next().unwrap_or("").to_string();
                if tx.send(id).is_err() {
                    break;
                }
            }
        }
    });
    match delay {
        Some(d) => {
            // Sleeping, not polling: the moment is the drawn delay after the spawn.
            std::thread::sleep(d);
            let _ = child.kill(); // SIGKILL; it may already have exited
            child.wait().unwrap();
        }
        None => assert!(
            child.wait().unwrap().success(),
            "uninterrupted import failed"
        ),
    }
    reader.join().unwrap();
    rx.try_iter().collect()
}

/// Bytes `pi sessions verify` would read for a session: the JSONL file itself, or the
/// session as the database holds it.
fn session_bytes(backend: Backend, dir: &Path, store: &dyn SessionStore, id: &str) -> Vec<u8> {
    match backend {
        Backend::Jsonl => {
            let root = dir.join("sessions");
            let file = fs::read_dir(&root)
                .unwrap()
                .map(|e| e.unwrap().path())
                .find(|p| p.to_string_lossy().ends_with(&format!("_{id}.jsonl")))
                .unwrap_or_else(|| panic!("no file for {id} in {}", root.display()));
            fs::read(file).unwrap()
        }
        Backend::Redb | Backend::Sqlite => store
            .read_session(&SessionId::new(id.to_string()))
            .unwrap()
            .to_jsonl(),
    }
}

/// What the kills left behind that was not acknowledged.
#[derive(Default)]
struct Leftovers {
    /// Unacknowledged imports whose lines (all or a prefix) are in the store.
    unacked_present: usize,
    /// Of those, sessions whose last line was cut short.
    torn: usize,
}

/// Checks the store after one kill; `Err` says what is wrong.
fn check(
    backend: Backend,
    dir: &Path,
    spec: &str,
    batch: &[Source],
    acked: &[String],
    left: &mut Leftovers,
) -> Result<(), String> {
    let store = open_store(
        &spec.parse().map_err(|e| format!("spec: {e}"))?,
        &StoreOptions::new(&dir.join("agent")),
    )
    .map_err(|e| format!("store does not open after the kill: {e}"))?;
    let acked: std::collections::HashSet<&str> = acked.iter().map(String::as_str).collect();
    for src in batch {
        let data = match store.read_session(&SessionId::new(src.id.clone())) {
            Ok(data) => data,
            Err(StoreError::SessionNotFound { .. }) if !acked.contains(src.id.as_str()) => continue,
            Err(e) => return Err(format!("{}: cannot read: {e}", src.id)),
        };
        let stored: Vec<&[u8]> = data.entries.iter().map(|e| e.line()).collect();
        let source: Vec<&[u8]> = src.lines.iter().map(Vec::as_slice).collect();
        if acked.contains(src.id.as_str()) {
            if stored != source || data.torn_tail {
                return Err(format!(
                    "{}: acknowledged with {} lines, store holds {} (torn: {})",
                    src.id,
                    source.len(),
                    stored.len(),
                    data.torn_tail
                ));
            }
        } else {
            // Lines written that no acknowledgement covers.
            left.unacked_present += usize::from(stored.len() > src.acked_len);
            left.torn += usize::from(data.torn_tail);
            // A prefix of the file that keeps every line acknowledged before; the last stored
            // line may be cut short by the kill.
            let whole = stored.len().saturating_sub(usize::from(data.torn_tail));
            let prefix = whole >= src.acked_len
                && stored.len() <= source.len()
                && stored[..whole] == source[..whole]
                && (!data.torn_tail || source[whole].starts_with(stored[whole]));
            if !prefix {
                return Err(format!(
                    "{}: stored lines are not a prefix of the file",
                    src.id
                ));
            }
        }
        let bytes = session_bytes(backend, dir, store.as_ref(), &src.id);
        let problems = verify_bytes(&bytes, Path::new(&src.id));
        let bad: Vec<_> = problems
            .iter()
            .filter(|p| {
                !matches!(
                    p.kind,
                    ProblemKind::TornTail | ProblemKind::MissingFinalNewline
                ) || acked.contains(src.id.as_str())
            })
            .collect();
        if !bad.is_empty() {
            return Err(format!("{}: verify reports {bad:?}", src.id));
        }
    }
    Ok(())
}

fn crash_backend(
    backend: Backend,
    iterations: usize,
    seed: u64,
) -> (usize, usize, usize, Leftovers) {
    let env = Env {
        dir: tempfile::tempdir().unwrap(),
    };
    let dir = env.dir.path().to_path_buf();
    let spec = backend.spec(&dir);
    let mut rng = Rng(seed);
    const BATCH: usize = 24;
    const GROWN: usize = 4;
    // One uninterrupted batch: it must succeed, and its duration spreads the kill moments.
    let first = write_batch(&dir.join("src/calibrate"), "ca11", BATCH, &[], &mut rng);
    let start = Instant::now();
    let acked = import_and_kill(&env, &spec, &first, None);
    let full = start.elapsed();
    assert_eq!(acked.len(), BATCH, "{backend:?}: uninterrupted import");
    let mut left = Leftovers::default();
    check(backend, &dir, &spec, &first, &acked, &mut left).unwrap();

    let (mut total_acked, mut partial, mut none) = (0, 0, 0);
    // Sessions acknowledged whole by the last run, to be grown and imported again.
    let mut done: Vec<Source> = first.iter().take(GROWN).cloned().collect();
    for i in 0..iterations {
        let batch = write_batch(
            &dir.join(format!("src/{i}")),
            &format!("{i:04x}"),
            BATCH,
            &done,
            &mut rng,
        );
        // Up to 1.2× the calibrated time, so some runs die during start-up and some finish.
        let max = full.as_micros() as u64 * 6 / 5;
        let delay = Duration::from_micros(rng.below(max));
        let acked = import_and_kill(&env, &spec, &batch, Some(delay));
        if let Err(e) = check(backend, &dir, &spec, &batch, &acked, &mut left) {
            panic!(
                "{backend:?} iteration {i} (kill after {delay:?}, {} acknowledged): {e}\n\
                 replay with PI_CRASH_SEED={seed} PI_CRASH_ITERATIONS={iterations}",
                acked.len()
            );
        }
        total_acked += acked.len();
        done = batch
            .iter()
            .filter(|s| acked.contains(&s.id))
            .take(GROWN)
            .cloned()
            .collect();
        match acked.len() {
            0 => none += 1,
            n if n < batch.len() => partial += 1,
            _ => {}
        }
    }

    // A fresh `pi` opens the store after all the kills and lists every acknowledged session;
    // the JSONL files pass the real `pi sessions verify` (torn tails aside).
    let out = env
        .pi()
        .args(["sessions", "--session-store", &spec, "list", "--all"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{backend:?}: pi sessions list after the kills: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if let Backend::Jsonl = backend {
        let files: Vec<PathBuf> = fs::read_dir(dir.join("sessions"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        let out = env
            .pi()
            .args(["sessions", "verify", "--json"])
            .args(&files)
            .output()
            .unwrap();
        let mut kinds: HashMap<String, usize> = HashMap::new();
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            for p in v["problems"].as_array().unwrap() {
                let kind = p["kind"].as_str().unwrap_or("?").to_string();
                if kind != "torn_tail" && kind != "missing_final_newline" {
                    *kinds.entry(kind).or_default() += 1;
                }
            }
        }
        assert!(
            kinds.is_empty(),
            "pi sessions verify: {kinds:?} (seed {seed})"
        );
    }
    (total_acked, partial, none, left)
}

fn iterations() -> usize {
    std::env::var("PI_CRASH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(70)
}

fn seed() -> u64 {
    std::env::var("PI_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

fn run(backend: Backend) {
    let (n, seed) = (iterations(), seed());
    println!("{backend:?}: {n} kills, PI_CRASH_SEED={seed}");
    let start = Instant::now();
    let (acked, partial, none, left) = crash_backend(backend, n, seed);
    println!(
        "{backend:?}: {n} kills in {:.1?}: {acked} sessions acknowledged, {partial} kills \
         mid-batch, {none} before the first acknowledgement; {} unacknowledged imports \
         found (partly) in the store, {} with a torn last line",
        start.elapsed(),
        left.unacked_present,
        left.torn
    );
}

#[test]
fn killed_import_keeps_acknowledged_sessions_jsonl() {
    run(Backend::Jsonl)
}

#[test]
fn killed_import_keeps_acknowledged_sessions_redb() {
    run(Backend::Redb)
}

#[test]
fn killed_import_keeps_acknowledged_sessions_sqlite() {
    run(Backend::Sqlite)
}
