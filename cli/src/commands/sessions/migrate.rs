//! `pi sessions migrate --from STORE --to STORE`: copy every session between backends.
//!
//! `pi_storage::copy_sessions` does the work: every session is copied line for line and read
//! back and compared before it counts, a second run adds nothing, and a session that differs
//! in the target is reported and left alone. This command adds the progress bar and the
//! summary. The source is never modified, so switching back is always possible.

use std::io::IsTerminal;

use anyhow::{bail, Context};
use clap::Args;

use crate::visible::visible_line;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pi_storage::transfer::CopyProgress;
use pi_storage::{copy_sessions, CopyAction, StoreSpec};

use super::store::{open_spec, StoreArgs};

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Source store (jsonl, jsonl:DIR, redb:PATH, sqlite:PATH, postgres://…) [default: the
    /// current store].
    #[arg(long, value_name = "STORE")]
    pub from: Option<String>,
    /// Target store (jsonl, jsonl:DIR, redb:PATH, sqlite:PATH, postgres://…).
    #[arg(long, value_name = "STORE")]
    pub to: String,
    /// Only report what would be copied.
    #[arg(long)]
    pub dry_run: bool,
}

pub fn run(args: MigrateArgs, store_args: &StoreArgs) -> anyhow::Result<i32> {
    let resolved = store_args.resolve()?;
    let from: StoreSpec = match &args.from {
        Some(spec) => spec.parse()?,
        None => resolved.spec.clone(),
    };
    let to: StoreSpec = args.to.parse()?;
    if from == to {
        bail!("--from and --to are the same store ({from})");
    }
    let source = open_spec(&from, &resolved.options)?;
    let target = open_spec(&to, &resolved.options)?;

    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} sessions  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let mut problems_seen = Vec::new();
    let mut on_progress = |p: &CopyProgress<'_>| {
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
        bar.set_message(p.id.to_string());
        match p.outcome {
            Err(e) => problems_seen.push(format!("{}: {e}", p.id)),
            Ok(CopyAction::Conflict { reason }) => problems_seen.push(format!(
                "{}: the target holds a different session with this id ({reason}); left alone",
                p.id
            )),
            Ok(_) => {}
        }
    };
    let (from, to) = (source.describe(), target.describe());
    let report = copy_sessions(
        source.as_ref(),
        target.as_ref(),
        args.dry_run,
        &mut on_progress,
    )
    .with_context(|| format!("cannot list the sessions of {from}"))?;
    bar.finish_and_clear();

    for problem in &problems_seen {
        eprintln!("error: {}", visible_line(&problem.to_string()));
    }
    let created = report.count(|a| matches!(a, CopyAction::Created { .. }));
    let appended = report.count(|a| matches!(a, CopyAction::Appended { .. }));
    let skipped = report.count(|a| matches!(a, CopyAction::Skipped));
    let problems = report.problems();
    let total = report.sessions.len();
    if args.dry_run {
        println!(
            "dry run, {from} → {to}: {total} session(s); would copy {created}, would extend \
             {appended}, {skipped} already there, {problems} problem(s)"
        );
    } else {
        println!(
            "{from} → {to}: {total} session(s); copied {created}, extended {appended}, \
             {skipped} already there, {problems} problem(s){}",
            if created + appended > 0 {
                "; every copied session read back and verified"
            } else {
                ""
            }
        );
    }
    Ok(if problems > 0 { 1 } else { 0 })
}
