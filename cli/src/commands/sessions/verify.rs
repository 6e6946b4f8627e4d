//! `pi sessions verify FILE…`: every problem of each file, with line numbers.
//! Exit code 0 only when every file is clean.

use clap::Args;

use crate::visible::visible_line;
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
        // Paths and messages may quote the file's own bytes: shown, never obeyed.
        let name = file.display().to_string();
        let name = visible_line(&name);
        if problems.is_empty() {
            println!("{name}: ok");
        }
        for p in &problems {
            let message = visible_line(&p.message);
            if p.line == 0 {
                println!("{name}: {message}");
            } else {
                println!("{name}:{}: {message}", p.line);
            }
        }
    }
    Ok(if all_clean { 0 } else { 1 })
}
