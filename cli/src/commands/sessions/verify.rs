//! `pi sessions verify FILE…`: every problem of each file, with line numbers.
//!
//! Problems are errors (the file is damaged: lines lost, ids clash, the tree is broken) or
//! warnings (things Pi itself writes or reads fine, such as a compaction whose kept entry is
//! on another branch). Exit code 0 when no file has an error; warnings are printed only.

use clap::Args;

use crate::visible::visible_line;
use pi_engine::session::verify::{verify_bytes, Problem, ProblemKind, Severity};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Session files to check.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Print one JSON object per file:
    /// {file, ok, errors, warnings, problems:[{line, kind, severity, message}]}.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: VerifyArgs) -> anyhow::Result<i32> {
    let mut any_error = false;
    for file in &args.files {
        let problems: Vec<Problem> = match std::fs::read(file) {
            Ok(bytes) => verify_bytes(&bytes, file),
            Err(e) => vec![Problem {
                line: 0,
                kind: ProblemKind::NotASession,
                message: format!("cannot read: {e}"),
            }],
        };
        let errors = problems
            .iter()
            .filter(|p| p.kind.severity() == Severity::Error)
            .count();
        any_error |= errors > 0;
        if args.json {
            let listed: Vec<serde_json::Value> = problems
                .iter()
                .map(|p| {
                    serde_json::json!({"line": p.line, "kind": p.kind,
                        "severity": p.kind.severity(), "message": p.message})
                })
                .collect();
            let out = serde_json::json!({
                "file": file.display().to_string(),
                "ok": errors == 0,
                "errors": errors,
                "warnings": problems.len() - errors,
                "problems": listed,
            });
            println!("{out}");
            continue;
        }
        // Paths and messages may quote the file's own bytes: shown, never obeyed.
        let name = file.display().to_string();
        let name = visible_line(&name);
        if errors == 0 {
            let warnings = problems.len();
            match warnings {
                0 => println!("{name}: ok"),
                1 => println!("{name}: ok (1 warning)"),
                n => println!("{name}: ok ({n} warnings)"),
            }
        }
        for p in &problems {
            let severity = match p.kind.severity() {
                Severity::Error => "error",
                Severity::Warning => "warning",
            };
            let message = visible_line(&p.message);
            if p.line == 0 {
                println!("{name}: {severity}: {message}");
            } else {
                println!("{name}:{}: {severity}: {message}", p.line);
            }
        }
    }
    Ok(if any_error { 1 } else { 0 })
}
