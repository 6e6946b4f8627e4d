//! `pi install|remove|uninstall|update|list`: Pi 1.6.0's package commands, with its options,
//! messages and exit codes. The arguments are parsed here, not by clap, as Pi's own parser
//! does (unknown options and extra arguments are reported with Pi's wording).
//!
//! `pi update` without a target updates Pi itself in Pi; this build cannot update itself, so
//! it says so and exits 1 (`--extensions`, `<source>` and `--extension <source>` work).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pi_agent::config::{home, resolve_trust, Settings, TrustDecision, TrustInputs, TrustStore};
use pi_agent::packages::{offline, Output, PackageManager, PackageScope, Progress};

/// The first words that start a package command.
pub const COMMANDS: &[&str] = &["install", "remove", "uninstall", "update", "list", "config"];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Cmd {
    Install,
    Remove,
    Update,
    List,
}

impl Cmd {
    fn name(self) -> &'static str {
        match self {
            Cmd::Install => "install",
            Cmd::Remove => "remove",
            Cmd::Update => "update",
            Cmd::List => "list",
        }
    }

    fn usage(self) -> &'static str {
        match self {
            Cmd::Install => "pi install <source> [-l] [--approve|--no-approve]",
            Cmd::Remove => "pi remove <source> [-l] [--approve|--no-approve]",
            Cmd::Update => "pi update [source|self|pi] [--self|--extensions|--models|--all] [--extension <source>] [--approve|--no-approve] [--force]",
            Cmd::List => "pi list [--approve|--no-approve]",
        }
    }
}

const INSTALL_HELP: &str = "Usage:
  pi install <source> [-l] [--approve|--no-approve]

Install a package and add it to settings.

Options:
  -l, --local       Install project-locally (.pi/settings.json)
  -a, --approve     Trust project-local files for this command
  -na, --no-approve Ignore project-local files for this command

Examples:
  pi install npm:@foo/bar
  pi install git:github.com/user/repo
  pi install git:git@github.com:user/repo
  pi install https://github.com/user/repo
  pi install ssh://git@github.com/user/repo
  pi install ./local/path
";

const REMOVE_HELP: &str = "Usage:
  pi remove <source> [-l] [--approve|--no-approve]

Remove a package and its source from settings.
Alias: pi uninstall <source> [-l]

Options:
  -l, --local       Remove from project settings (.pi/settings.json)
  -a, --approve     Trust project-local files for this command
  -na, --no-approve Ignore project-local files for this command

Examples:
  pi remove npm:@foo/bar
  pi uninstall npm:@foo/bar
";

const UPDATE_HELP: &str = "Usage:
  pi update [source|self|pi] [--self|--extensions|--models|--all] [--extension <source>] [--approve|--no-approve] [--force]

Update pi, installed packages, or model catalogs.

Options:
  --self                  Update pi only (default when no target is given)
  --extensions            Update installed packages only
  --models                Refresh model catalogs only
  --all                   Update pi and installed packages
  --extension <source>    Update one package only
  -a, --approve           Trust project-local files for this command
  -na, --no-approve       Ignore project-local files for this command
  --force                 Reinstall pi even if the current version is latest

Short forms:
  pi update                Update pi only
  pi update --all          Update pi and all extensions
  pi update --models       Refresh model catalogs only
  pi update <source>       Update one package
  pi update pi             Update pi only (self works as alias to pi)
";

const LIST_HELP: &str = "Usage:
  pi list [--approve|--no-approve]

List installed packages from user and project settings.

Options:
  -a, --approve      Trust project-local files for this command
  -na, --no-approve  Ignore project-local files for this command
";

/// What `pi update` should do.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    SelfOnly,
    Extensions(Option<String>),
    All,
    Models,
}

#[derive(Debug, Default)]
struct Parsed {
    local: bool,
    approve: Option<bool>,
    help: bool,
    source: Option<String>,
    invalid_option: Option<String>,
    invalid_argument: Option<String>,
    missing_value: Option<String>,
    conflict: Option<String>,
    target: Option<Target>,
    skipped_note: bool,
}

fn parse(cmd: Cmd, rest: &[String]) -> Parsed {
    let mut p = Parsed::default();
    let (mut self_flag, mut ext_flag, mut models, mut all, mut ext_source) =
        (false, false, false, false, None::<String>);
    let mut i = 0;
    while i < rest.len() {
        let arg = rest[i].as_str();
        let update_only = |flag: &mut bool, p: &mut Parsed| {
            if cmd == Cmd::Update {
                *flag = true;
            } else {
                p.invalid_option.get_or_insert(arg.to_string());
            }
        };
        match arg {
            "-h" | "--help" => p.help = true,
            "-l" | "--local" => {
                if matches!(cmd, Cmd::Install | Cmd::Remove) {
                    p.local = true;
                } else {
                    p.invalid_option.get_or_insert(arg.to_string());
                }
            }
            "--self" => update_only(&mut self_flag, &mut p),
            "--extensions" => update_only(&mut ext_flag, &mut p),
            "--models" => update_only(&mut models, &mut p),
            "--all" => update_only(&mut all, &mut p),
            "--force" => {
                let mut force = false;
                update_only(&mut force, &mut p);
            }
            "-a" | "--approve" => p.approve = Some(true),
            "-na" | "--no-approve" => p.approve = Some(false),
            "--extension" => {
                if cmd != Cmd::Update {
                    p.invalid_option.get_or_insert(arg.to_string());
                } else {
                    match rest.get(i + 1) {
                        Some(v) if !v.starts_with('-') => {
                            if ext_source.is_some() {
                                p.conflict
                                    .get_or_insert("--extension can only be provided once".into());
                            } else {
                                ext_source = Some(v.clone());
                            }
                            i += 1;
                        }
                        _ => {
                            p.missing_value.get_or_insert(arg.to_string());
                        }
                    }
                }
            }
            _ if arg.starts_with('-') => {
                p.invalid_option.get_or_insert(arg.to_string());
            }
            _ => {
                if p.source.is_none() {
                    p.source = Some(arg.to_string());
                } else {
                    p.invalid_argument.get_or_insert(arg.to_string());
                }
            }
        }
        i += 1;
    }
    if cmd != Cmd::Update {
        return p;
    }
    let mut conflicts = p.conflict.take();
    let mut conflict = |m: &str| {
        conflicts.get_or_insert(m.to_string());
    };
    if all && (self_flag || ext_flag || models || ext_source.is_some()) {
        conflict("--all cannot be combined with --self, --extensions, --models, or --extension");
    }
    if all && p.source.is_some() {
        conflict("--all cannot be combined with a positional source");
    }
    let target = if models {
        if self_flag || ext_flag || all || ext_source.is_some() {
            conflict(
                "--models cannot be combined with --self, --extensions, --all, or --extension",
            );
        }
        if p.source.is_some() {
            conflict("--models cannot be combined with a positional source");
        }
        Target::Models
    } else if let Some(source) = ext_source {
        if self_flag || ext_flag || all {
            conflict("--extension cannot be combined with --self, --extensions, or --all");
        }
        if p.source.is_some() {
            conflict("--extension cannot be combined with a positional source");
        }
        Target::Extensions(Some(source))
    } else if let Some(source) = p.source.clone() {
        if source == "self" || source == "pi" {
            if ext_flag {
                Target::All
            } else {
                Target::SelfOnly
            }
        } else {
            if ext_flag || self_flag || all {
                conflict(
                    "positional update targets cannot be combined with --self, --extensions, or --all",
                );
            }
            Target::Extensions(Some(source))
        }
    } else if all || (self_flag && ext_flag) {
        Target::All
    } else if self_flag {
        Target::SelfOnly
    } else if ext_flag {
        Target::Extensions(None)
    } else {
        p.skipped_note = true;
        Target::SelfOnly
    };
    p.conflict = conflicts;
    p.target = Some(target);
    p
}

/// The packages' resources for a run: missing npm and git packages are installed first
/// (quietly; a failure becomes a warning and the package is skipped, as in Pi).
pub fn startup_resources(
    agent_dir: &Path,
    cwd: &Path,
    trusted: bool,
) -> pi_agent::packages::Resolved {
    PackageManager::new(cwd, agent_dir, trusted, Output::Capture).resolve()
}

/// The packages `-e` names for this run (`npm:…`, `git:…`, URLs), installed when missing
/// under `<agent>/tmp/extensions`, with their resources.
pub fn temporary_resources(
    agent_dir: &Path,
    cwd: &Path,
    trusted: bool,
    sources: &[String],
) -> pi_agent::packages::Resolved {
    if sources.is_empty() {
        return Default::default();
    }
    PackageManager::new(cwd, agent_dir, trusted, Output::Capture).resolve_temporary(sources)
}

fn agent_dir() -> PathBuf {
    pi_agent::config::agent_dir(&|k| std::env::var(k).ok(), home().as_deref())
}

/// Pi's trust for a command: `-a`/`-na`, else (for `update`) only a saved decision, else
/// the usual resolution without a prompt (no trust-requiring files: trusted;
/// `defaultProjectTrust`; otherwise untrusted).
pub(crate) fn command_trust(
    agent_dir: &Path,
    cwd: &Path,
    approve: Option<bool>,
    saved_only: bool,
) -> bool {
    let store = TrustStore::new(agent_dir);
    if saved_only {
        return approve.unwrap_or_else(|| store.get(cwd).ok().flatten() == Some(true));
    }
    let inputs = TrustInputs {
        override_: approve,
        default: Settings::load_global(agent_dir).default_project_trust(),
        interactive: false,
        home: home(),
    };
    match resolve_trust(cwd, &store, inputs) {
        Ok(decision) => matches!(decision, TrustDecision::Trusted),
        Err(e) => {
            eprintln!("Warning: {e}");
            false
        }
    }
}

/// Runs a package command (`args[0]` is the command word); `None` when `args` is not one.
pub fn run(args: &[String]) -> Option<i32> {
    let (word, rest) = args.split_first()?;
    let cmd = match word.as_str() {
        "install" => Cmd::Install,
        "remove" | "uninstall" => Cmd::Remove,
        "update" => Cmd::Update,
        "list" => Cmd::List,
        "config" => return Some(super::package_config::run(rest)),
        _ => return None,
    };
    Some(run_command(cmd, rest))
}

fn fail(message: &str, hint: String) -> i32 {
    eprintln!("{message}");
    eprintln!("{hint}");
    1
}

fn run_command(cmd: Cmd, rest: &[String]) -> i32 {
    let p = parse(cmd, rest);
    if p.help {
        print!(
            "{}",
            match cmd {
                Cmd::Install => INSTALL_HELP,
                Cmd::Remove => REMOVE_HELP,
                Cmd::Update => UPDATE_HELP,
                Cmd::List => LIST_HELP,
            }
        );
        return 0;
    }
    let usage = format!("Usage: {}", cmd.usage());
    if let Some(o) = &p.invalid_option {
        return fail(
            &format!("Unknown option {o} for \"{}\".", cmd.name()),
            format!("Use \"pi --help\" or \"{}\".", cmd.usage()),
        );
    }
    if let Some(o) = &p.missing_value {
        return fail(&format!("Missing value for {o}."), usage);
    }
    if let Some(a) = &p.invalid_argument {
        return fail(&format!("Unexpected argument {a}."), usage);
    }
    if let Some(c) = &p.conflict {
        return fail(c, usage);
    }
    if matches!(cmd, Cmd::Install | Cmd::Remove) && p.source.is_none() {
        return fail(&format!("Missing {} source.", cmd.name()), usage);
    }
    if p.target == Some(Target::Models) {
        eprintln!("Error: Refreshing model catalogs is not supported by this build.");
        return 1;
    }
    let Ok(cwd) = std::env::current_dir() else {
        eprintln!("Error: the current directory is not accessible");
        return 1;
    };
    let agent_dir = agent_dir();
    let trusted = command_trust(&agent_dir, &cwd, p.approve, cmd == Cmd::Update);
    if p.local && !trusted {
        eprintln!("Project is not trusted. Use --approve to modify local package config.");
        return 1;
    }
    let mut manager = PackageManager::new(&cwd, &agent_dir, trusted, Output::Inherit);
    for e in manager.settings_errors() {
        eprintln!("Warning (package command): {e}");
    }
    let updated: Arc<Mutex<Vec<String>>> = Arc::default();
    let warnings: Arc<Mutex<usize>> = Arc::default();
    {
        let (updated, warnings) = (updated.clone(), warnings.clone());
        manager.on_progress(move |event| match event {
            Progress::Start(m) => println!("{m}"),
            Progress::Warning(m) => {
                *warnings.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                println!("{m}");
            }
            Progress::Updated(m) => updated.lock().unwrap_or_else(|e| e.into_inner()).push(m),
        });
    }
    let source = p.source.clone().unwrap_or_default();
    let result: Result<i32, String> = match cmd {
        Cmd::Install => manager.install_and_persist(&source, p.local).map(|()| {
            println!("Installed {source}");
            0
        }),
        Cmd::Remove => manager.remove_and_persist(&source, p.local).map(|removed| {
            if removed {
                println!("Removed {source}");
                0
            } else {
                eprintln!("No matching package found for {source}");
                1
            }
        }),
        Cmd::List => {
            list(&manager);
            Ok(0)
        }
        Cmd::Update => update(&mut manager, &p, &updated, &warnings),
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("Error: {message}");
            1
        }
    }
}

fn list(manager: &PackageManager) {
    let all = manager.list();
    if all.is_empty() {
        println!("No packages installed.");
        return;
    }
    let mut first = true;
    for (scope, title) in [
        (PackageScope::User, "User packages:"),
        (PackageScope::Project, "Project packages:"),
    ] {
        let of_scope: Vec<_> = all.iter().filter(|c| c.scope == scope).collect();
        if of_scope.is_empty() {
            continue;
        }
        if !first {
            println!();
        }
        first = false;
        println!("{title}");
        for c in of_scope {
            let label = if c.filtered {
                format!("{} (filtered)", c.source)
            } else {
                c.source.clone()
            };
            println!("  {label}");
            if let Some(path) = &c.installed_path {
                println!("    {}", path.display());
            }
        }
    }
}

fn update(
    manager: &mut PackageManager,
    p: &Parsed,
    updated: &Mutex<Vec<String>>,
    warnings: &Mutex<usize>,
) -> Result<i32, String> {
    let target = p.target.clone().unwrap_or(Target::SelfOnly);
    if p.skipped_note {
        println!("Extensions are skipped. Run pi update --extensions to update extensions.");
    }
    if let Target::Extensions(_) | Target::All = target {
        let one = match &target {
            Target::Extensions(s) => s.as_deref(),
            _ => None,
        };
        manager.update(one)?;
        let updated = updated.lock().unwrap_or_else(|e| e.into_inner());
        let warned = *warnings.lock().unwrap_or_else(|e| e.into_inner()) > 0;
        if offline() {
            println!("Skipped package updates (offline mode)");
        } else if updated.is_empty() && warned {
            match one {
                Some(s) => println!("{s} was not updated, see the warnings above"),
                None => println!("No packages were updated, see the warnings above"),
            }
        } else if updated.is_empty() {
            match one {
                Some(s) => println!("{s} is already up to date"),
                None => println!("Packages are already up to date"),
            }
        } else {
            let n = updated.len();
            println!("Updated {n} package{}:", if n == 1 { "" } else { "s" });
            for m in updated.iter() {
                println!("  {m}");
            }
        }
    }
    if let Target::SelfOnly | Target::All = target {
        eprintln!(
            "Error: this build of pi cannot update itself; install a newer release to update it."
        );
        return Ok(1);
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn update_targets() {
        let t = |s: &str| parse(Cmd::Update, &args(s));
        assert_eq!(t("").target, Some(Target::SelfOnly));
        assert!(t("").skipped_note);
        assert_eq!(t("--extensions").target, Some(Target::Extensions(None)));
        assert_eq!(
            t("npm:x").target,
            Some(Target::Extensions(Some("npm:x".into())))
        );
        assert_eq!(
            t("--extension npm:x").target,
            Some(Target::Extensions(Some("npm:x".into())))
        );
        assert_eq!(t("self --extensions").target, Some(Target::All));
        assert!(t("--all npm:x").conflict.is_some());
        assert_eq!(
            t("--extension").missing_value.as_deref(),
            Some("--extension")
        );
    }

    #[test]
    fn options_per_command() {
        let p = parse(Cmd::List, &args("-l"));
        assert_eq!(p.invalid_option.as_deref(), Some("-l"));
        let p = parse(Cmd::Install, &args("-l a b"));
        assert!(p.local);
        assert_eq!(p.invalid_argument.as_deref(), Some("b"));
    }
}
