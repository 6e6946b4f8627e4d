//! `pi sessions export ID|FILE`: a session as JSONL (the stored bytes), HTML (the whole tree,
//! one self-contained page) or Markdown (the active branch). `pi sessions export --format
//! parquet -o DIR` exports the whole history instead, one Parquet file per SQL view
//! (`parquet.rs`).
//!
//! The renderers live in `pi_engine::export`; this command finds the session, optionally masks
//! secrets, and writes the result to stdout or atomically to `-o FILE`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, ValueEnum};
use pi_engine::export::{self, redact};
use pi_engine::session::Session;

use super::store::{resolve_target, StoreArgs, Target};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// The session file's lines, byte for byte.
    Jsonl,
    /// One HTML page: the whole tree, search, filters, totals; only its own script runs.
    Html,
    /// The active branch as Markdown.
    Md,
    /// The active branch as a Claude Code transcript, to resume with `claude --resume ID`
    /// once it is at `~/.claude/projects/<cwd with / as ->/<ID>.jsonl`.
    ClaudeCode,
    /// The active branch as a Codex rollout, to resume with `codex resume ID`; `-o DIR` (an
    /// existing folder, e.g. `~/.codex/sessions`) places it at `DIR/YYYY/MM/DD/rollout-…-ID.jsonl`.
    Codex,
    /// The whole history's SQL views, one Parquet file each, into the directory `-o DIR`
    /// (no session argument).
    Parquet,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Session id, unique id prefix or name in the store, or a session file path.
    /// Not with `--format parquet`, which exports every session.
    #[arg(value_name = "ID|FILE")]
    pub session: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Jsonl)]
    pub format: Format,
    /// Write to this file instead of stdout (`--format parquet`: this directory).
    #[arg(
        short = 'o',
        long = "output",
        visible_alias = "out",
        value_name = "FILE"
    )]
    pub output: Option<PathBuf>,
    /// Mask API keys, tokens and private keys in message content.
    #[arg(long)]
    pub redact: bool,
}

pub fn run(args: ExportArgs, store_args: &StoreArgs) -> anyhow::Result<i32> {
    if args.format == Format::Parquet {
        return export_parquet(&args, store_args);
    }
    let Some(session) = &args.session else {
        anyhow::bail!("which session? give its ID or FILE (only --format parquet exports all)");
    };
    let mut source = find_session(session, store_args)?;
    if args.redact {
        // Masking rewrites the lines, so the session is read into memory for it.
        let (bytes, name) = source.read()?;
        source = Source::Bytes(redact::redact_jsonl(&bytes), name);
    }
    // A file is copied or mapped, never read into memory: the export streams from the
    // session's bytes to the output. The session is opened before any output exists, so
    // one that cannot be read leaves no file behind.
    let job = match args.format {
        Format::Jsonl => match source {
            Source::File(path) => Job::CopyFile(
                std::fs::File::open(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?,
            ),
            Source::Bytes(bytes, _) => Job::CopyBytes(bytes),
        },
        Format::Html => Job::Render(Box::new(source.into_session()?), export::Format::Html),
        Format::Md => Job::Render(Box::new(source.into_session()?), export::Format::Markdown),
        Format::ClaudeCode => {
            Job::Render(Box::new(source.into_session()?), export::Format::ClaudeCode)
        }
        Format::Codex => Job::Render(Box::new(source.into_session()?), export::Format::Codex),
        // Returned above; kept here so the match stays exhaustive without a panic.
        Format::Parquet => return export_parquet(&args, store_args),
    };
    let output = match (&job, &args.output) {
        (Job::Render(session, export::Format::Codex), Some(dir)) if dir.is_dir() => {
            Some(place_rollout(session, dir)?)
        }
        (_, output) => output.clone(),
    };
    match &output {
        Some(path) => pi_storage::atomic::write_atomically_with(path, |out| job.write(out))?,
        None => {
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
            match job.write(&mut out).and_then(|()| out.flush()) {
                // `pi sessions export … | head` is not an error.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                other => other.context("cannot write to stdout")?,
            }
        }
    }
    Ok(0)
}

/// Where a rollout goes under a Codex `sessions` folder: its date folders (made here) and the
/// file name Codex looks for. The path is printed, since it is not the one given.
fn place_rollout(session: &Session, dir: &Path) -> anyhow::Result<PathBuf> {
    let path = dir.join(export::codex::rollout_path(session));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    println!(
        "{}",
        crate::visible::visible_line(&path.display().to_string())
    );
    Ok(path)
}

fn export_parquet(args: &ExportArgs, store_args: &StoreArgs) -> anyhow::Result<i32> {
    if let Some(session) = &args.session {
        anyhow::bail!(
            "--format parquet exports every session's SQL views; drop the session argument {session:?}"
        );
    }
    if args.redact {
        anyhow::bail!("--redact is not supported with --format parquet");
    }
    let Some(dir) = &args.output else {
        anyhow::bail!("--format parquet needs a directory to write into: -o DIR");
    };
    for (path, rows) in super::parquet::export(dir, store_args)? {
        println!(
            "{} ({rows} rows)",
            crate::visible::visible_line(&path.display().to_string())
        );
    }
    Ok(0)
}

/// Where an export reads the session from: a file (copied or mapped as needed), or
/// bytes (a stored session, or masked lines).
enum Source {
    File(PathBuf),
    Bytes(Vec<u8>, String),
}

impl Source {
    fn read(self) -> anyhow::Result<(Vec<u8>, String)> {
        match self {
            Source::File(path) => {
                let bytes = std::fs::read(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                Ok((bytes, path.display().to_string()))
            }
            Source::Bytes(bytes, name) => Ok((bytes, name)),
        }
    }

    /// The session, its file mapped rather than read.
    fn into_session(self) -> anyhow::Result<Session> {
        match self {
            Source::File(path) => Session::open(&path)
                .with_context(|| format!("cannot read session {}", path.display())),
            Source::Bytes(bytes, name) => Session::from_bytes(bytes, Path::new(&name))
                .with_context(|| format!("cannot read session {name}")),
        }
    }
}

/// What an export writes: the session's bytes unchanged, or a rendering.
enum Job {
    CopyFile(std::fs::File),
    CopyBytes(Vec<u8>),
    Render(Box<Session>, export::Format),
}

impl Job {
    fn write(&self, out: &mut dyn Write) -> std::io::Result<()> {
        match self {
            Job::CopyFile(file) => std::io::copy(&mut &*file, out).map(drop),
            Job::CopyBytes(bytes) => out.write_all(bytes),
            Job::Render(session, format) => export::render_to(session, *format, out),
        }
    }
}

/// The session an export names: a path (read directly, whatever store is configured), or an
/// id, prefix or name resolved in the store.
fn find_session(arg: &str, store_args: &StoreArgs) -> anyhow::Result<Source> {
    if super::store::is_path_argument(arg) {
        return Ok(Source::File(PathBuf::from(arg)));
    }
    let store = store_args.open()?;
    match resolve_target(store.as_ref(), arg)? {
        Target::File(path) => Ok(Source::File(path)),
        Target::Stored(id) => {
            let data = store
                .read_session(&id)
                .with_context(|| format!("cannot read session {id} from {}", store.describe()))?;
            Ok(Source::Bytes(data.to_jsonl(), id.to_string()))
        }
    }
}

/// `pi --export FILE [OUTPUT]`: Pi's one-step HTML export of a session file. The output
/// defaults to `pi-session-<file name without .jsonl>.html` in the current directory, as in
/// Pi; the page is the one every other export path writes.
pub fn export_flag(input: &str, output: Option<&String>) -> anyhow::Result<i32> {
    let path = Path::new(input);
    if !path.exists() {
        // Pi names the file by its absolute path.
        let shown = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        anyhow::bail!("File not found: {}", shown.display());
    }
    let session =
        Session::open(path).with_context(|| format!("cannot read session {}", path.display()))?;
    let output = match output {
        Some(o) => PathBuf::from(o),
        None => {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            let stem = name.as_deref().unwrap_or("session");
            PathBuf::from(format!(
                "pi-session-{}.html",
                stem.strip_suffix(".jsonl").unwrap_or(stem)
            ))
        }
    };
    pi_storage::atomic::write_atomically_with(&output, |out| {
        export::render_to(&session, export::Format::Html, out)
    })?;
    println!("Exported to: {}", output.display());
    Ok(0)
}

/// The session's JSONL bytes and a name for messages. A file is read as it is (its exact
/// bytes); a stored session is the stored lines, each followed by a line feed.
pub(super) fn read_session(arg: &str, store_args: &StoreArgs) -> anyhow::Result<(Vec<u8>, String)> {
    find_session(arg, store_args)?.read()
}
