//! `pi sessions upgrade FILE`: migrate a v1/v2 session file to version 3, as Pi does
//! on open, but never in place: the new file is written to a temporary file and
//! renamed over the original, which is kept (hard-linked) as `FILE.v<N>.bak`.

use anyhow::Context as _;
use clap::Args;
use pi_engine::session::Session;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct UpgradeArgs {
    /// The session file to migrate.
    pub file: PathBuf,
    /// Write the migrated session here instead (the original is left untouched).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

pub fn run(args: UpgradeArgs) -> anyhow::Result<i32> {
    let session = Session::open(&args.file)?;
    let Some(version) = session.load_report().migrated_from else {
        println!("{}: already version 3, nothing to do", args.file.display());
        return Ok(0);
    };
    let dropped = session.load_report().skipped_lines.len();
    let bytes = session.to_jsonl();
    match &args.output {
        Some(out) => {
            pi_storage::atomic::write_atomically(out, &bytes)?;
            println!(
                "{} (version {version}) → {}",
                args.file.display(),
                out.display()
            );
        }
        None => {
            let backup = backup_path(&args.file, version);
            if backup.exists() {
                anyhow::bail!("{} already exists; move it away first", backup.display());
            }
            std::fs::hard_link(&args.file, &backup)
                .or_else(|_| std::fs::copy(&args.file, &backup).map(|_| ()))
                .with_context(|| format!("keeping a backup at {}", backup.display()))?;
            pi_storage::atomic::write_atomically(&args.file, &bytes)?;
            println!(
                "{}: migrated from version {version} to 3; original kept at {}",
                args.file.display(),
                backup.display()
            );
        }
    }
    if dropped > 0 {
        println!("note: {dropped} unreadable line(s) are not in the migrated file (they remain in the original)");
    }
    Ok(0)
}

fn backup_path(file: &Path, version: f64) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".v{version}.bak"));
    file.with_file_name(name)
}
