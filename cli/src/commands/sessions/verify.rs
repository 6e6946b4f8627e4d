//! `pi sessions verify FILE…`: every problem of each file, with line numbers.
//! Exit code 0 only when every file is clean.

use clap::Args;
use pi_engine::session::verify::{verify_bytes, Problem};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Session files to check.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Print one JSON object per file: {file, ok, problems:[{line, kind, message}]}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: VerifyArgs) -> anyhow::Result<i32> {
    let mut all_clean = true;
    for file in &args.files {
        let problems: Vec<Problem> = match std::fs::read(file) {
            Ok(bytes) => verify_bytes(&bytes, file),
            Err(e) => vec![Problem {
                line: 0,
                kind: pi_engine::session::verify::ProblemKind::NotASession,
                message: format!("cannot read: {e}"),
            }],
        };
        all_clean &= problems.is_empty();
        if args.json {
            let out = serde_json::json!({
                "file": file.display().to_string(),
                "ok": problems.is_empty(),
                "problems": problems,
            });
            println!("{out}");
            continue;
        }
        if problems.is_empty() {
            println!("{}: ok", file.display());
        }
        for p in &problems {
            if p.line == 0 {
                println!("{}: {}", file.display(), p.message);
            } else {
                println!("{}:{}: {}", file.display(), p.line, p.message);
            }
        }
    }
    Ok(if all_clean { 0 } else { 1 })
}
