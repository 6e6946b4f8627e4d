//! `pi sessions export ID|FILE`: a session as JSONL (the stored bytes), HTML (the whole tree,
//! one self-contained page) or Markdown (the active branch).
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
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Session id, unique id prefix or name in the store, or a session file path.
    #[arg(value_name = "ID|FILE")]
    pub session: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Jsonl)]
    pub format: Format,
    /// Write to this file instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Mask API keys, tokens and private keys in message content.
    #[arg(long)]
    pub redact: bool,
}

pub fn run(args: ExportArgs, store_args: &StoreArgs) -> anyhow::Result<i32> {
    let (bytes, name) = read_session(&args.session, store_args)?;
    let bytes = if args.redact {
        redact::redact_jsonl(&bytes)
    } else {
        bytes
    };
    let rendered = match args.format {
        Format::Jsonl => bytes,
        Format::Html | Format::Md => {
            let session = Session::from_bytes(bytes, Path::new(&name))
                .with_context(|| format!("cannot read session {name}"))?;
            let format = if args.format == Format::Html {
                export::Format::Html
            } else {
                export::Format::Markdown
            };
            export::render(&session, format)
        }
    };
    match &args.output {
        Some(path) => pi_storage::atomic::write_atomically(path, &rendered)?,
        None => {
            let mut out = std::io::stdout().lock();
            match out.write_all(&rendered).and_then(|()| out.flush()) {
                // `pi sessions export … | head` is not an error.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                other => other.context("cannot write to stdout")?,
            }
        }
    }
    Ok(0)
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
    pi_storage::atomic::write_atomically(&output, &export::render(&session, export::Format::Html))?;
    println!("Exported to: {}", output.display());
    Ok(0)
}

/// The session's JSONL bytes and a name for messages. A file is read as it is (its exact
/// bytes); a stored session is the stored lines, each followed by a line feed.
pub(super) fn read_session(arg: &str, store_args: &StoreArgs) -> anyhow::Result<(Vec<u8>, String)> {
    // A path never needs the store: exporting a file works whatever store is configured.
    if super::store::is_path_argument(arg) {
        let bytes = std::fs::read(arg).with_context(|| format!("cannot read {arg}"))?;
        return Ok((bytes, arg.to_string()));
    }
    let store = store_args.open()?;
    match resolve_target(store.as_ref(), arg)? {
        Target::File(path) => {
            let bytes =
                std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            Ok((bytes, path.display().to_string()))
        }
        Target::Stored(id) => {
            let data = store
                .read_session(&id)
                .with_context(|| format!("cannot read session {id} from {}", store.describe()))?;
            Ok((data.to_jsonl(), id.to_string()))
        }
    }
}
