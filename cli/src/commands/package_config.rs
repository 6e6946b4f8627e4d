//! `pi config [-l]`: enable or disable the resources packages offer. Pi 1.6.0 opens a picker;
//! so does this build on a terminal (↑/↓ move, Space toggles, Tab switches between user and
//! project settings, Esc/q leaves). Without a terminal it prints the same list, one resource
//! a line with `[x]` (loads) or `[ ]` (disabled), and exits 0.
//!
//! A toggle writes an exact `+path` / `-path` pattern into the package's entry (turning a
//! string entry into the object form), which is how Pi's settings express it. In project
//! mode a package declared only in user settings gets a project entry with
//! `"autoload": false`, Pi's delta form that only overrides what it names.

use std::io::Write;
use std::path::{Path, PathBuf};

use pi_agent::config::{home, Scope};
use pi_agent::packages::{
    set_resource_enabled, source_of, Kind, Output, PackageManager, PackageResource, PackageScope,
    Source,
};
use serde_json::Value;

const USAGE: &str = "pi config [-l] [--approve|--no-approve]";

const HELP: &str = "Usage:
  pi config [-l] [--approve|--no-approve]

Open the resource configuration TUI to enable or disable package resources.
Without -l, starts in global settings (~/.pi/agent/settings.json).
Press Tab in the TUI to switch between global and project-local modes.

Options:
  -l, --local       Edit project overrides (.pi/settings.json)
  -a, --approve     Trust project-local files for this command with -l
  -na, --no-approve Ignore project-local files for this command with -l
";

/// Runs `pi config` with the arguments after `config`; returns the exit code.
pub fn run(rest: &[String]) -> i32 {
    if rest.iter().any(|a| a == "-h" || a == "--help") {
        print!("{HELP}");
        return 0;
    }
    let mut local = false;
    let mut approve = None;
    for arg in rest {
        match arg.as_str() {
            "-l" | "--local" => local = true,
            "-a" | "--approve" => approve = Some(true),
            "-na" | "--no-approve" => approve = Some(false),
            a if a.starts_with('-') => {
                eprintln!("Unknown option {a} for \"config\".");
                eprintln!("Use \"pi --help\" or \"{USAGE}\".");
                return 1;
            }
            a => {
                eprintln!("Unexpected argument {a}.");
                eprintln!("Usage: {USAGE}");
                return 1;
            }
        }
    }
    let Ok(cwd) = std::env::current_dir() else {
        eprintln!("Error: the current directory is not accessible");
        return 1;
    };
    let agent_dir = pi_agent::config::agent_dir(&|k| std::env::var(k).ok(), home().as_deref());
    let trusted = super::packages::command_trust(&agent_dir, &cwd, approve, false);
    if local && !trusted {
        eprintln!("Project is not trusted. Use --approve to modify local resource config.");
        return 1;
    }
    let mut state = State {
        cwd,
        agent_dir,
        trusted,
        scope: if local {
            PackageScope::Project
        } else {
            PackageScope::User
        },
        rows: Vec::new(),
        selected: 0,
    };
    if let Err(e) = state.reload() {
        eprintln!("Error: {e}");
        return 1;
    }
    use std::io::IsTerminal;
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        print!("{}", state.render_plain());
        return 0;
    }
    match picker(&mut state) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("Error: {e}");
            1
        }
    }
}

struct State {
    cwd: PathBuf,
    agent_dir: PathBuf,
    trusted: bool,
    scope: PackageScope,
    rows: Vec<PackageResource>,
    selected: usize,
}

impl State {
    /// The resources as the chosen scope sees them: user settings alone, or user settings
    /// with the project's on top.
    fn reload(&mut self) -> Result<(), String> {
        let trusted = self.scope == PackageScope::Project && self.trusted;
        let mut manager = PackageManager::new(&self.cwd, &self.agent_dir, trusted, Output::Capture);
        let resolved = manager.resolve();
        for f in &resolved.failures {
            eprintln!("Warning: {}", f.warning());
        }
        self.rows = resolved.resources;
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
        Ok(())
    }

    /// Pi's heading lines: the mode and the file it writes.
    fn heading(&self) -> [String; 2] {
        match self.scope {
            PackageScope::User => [
                "Global Resources".into(),
                "~/.pi/agent/settings.json".into(),
            ],
            PackageScope::Project => ["Project Local Resources".into(), ".pi/settings.json".into()],
        }
    }

    /// Pi's layout: each package (`<source> (user|project)`), its resource kinds, one
    /// `[x]`/`[ ]` line per resource; with the display line of the selected resource.
    fn lines(&self) -> (Vec<String>, usize) {
        let mut out = Vec::new();
        let mut selected_line = 0;
        let mut last: Option<(&str, PackageScope, Kind)> = None;
        for (i, r) in self.rows.iter().enumerate() {
            if last.map(|(s, sc, _)| (s, sc)) != Some((r.source.as_str(), r.scope)) {
                let scope = match r.scope {
                    PackageScope::User => "user",
                    PackageScope::Project => "project",
                };
                out.push(format!("  {} ({scope})", visible(&r.source)));
                last = None;
            }
            if last.map(|(_, _, k)| k) != Some(r.kind) {
                out.push(format!("    {}", kind_heading(r.kind)));
            }
            last = Some((r.source.as_str(), r.scope, r.kind));
            if i == self.selected {
                selected_line = out.len();
            }
            let mark = if r.enabled { "[x]" } else { "[ ]" };
            out.push(format!("      {mark} {}", visible(&item_name(r))));
        }
        (out, selected_line)
    }

    fn render_plain(&self) -> String {
        let [title, file] = self.heading();
        let mut text = format!("{title}\n{file}\n\n");
        if self.rows.is_empty() {
            text.push_str("  No package resources.\n");
        }
        for l in self.lines().0 {
            text.push_str(&l);
            text.push('\n');
        }
        text
    }

    /// Flips the selected resource in the current scope's settings file.
    fn toggle(&mut self) -> Result<(), String> {
        let Some(row) = self.rows.get(self.selected).cloned() else {
            return Ok(());
        };
        let root = package_root(&self.cwd, &self.agent_dir, &row);
        let rel = row
            .path
            .strip_prefix(&root)
            .unwrap_or(&row.path)
            .to_string_lossy()
            .replace('\\', "/");
        let trusted = self.scope == PackageScope::Project;
        let mut settings = pi_agent::config::Settings::load(&self.agent_dir, &self.cwd, trusted);
        let (scope, base, map) = match self.scope {
            PackageScope::User => (Scope::Global, self.agent_dir.clone(), settings.global()),
            PackageScope::Project => (Scope::Project, self.cwd.join(".pi"), settings.project()),
        };
        let row_base = match row.scope {
            PackageScope::User => self.agent_dir.clone(),
            PackageScope::Project => self.cwd.join(".pi"),
        };
        let id = Source::parse(&row.source).identity(&row_base);
        let mut packages: Vec<Value> = map
            .get("packages")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let at = packages
            .iter()
            .position(|e| source_of(e).is_some_and(|s| Source::parse(&s).identity(&base) == id));
        match at {
            Some(i) => {
                packages[i] = set_resource_enabled(&packages[i], row.kind, &rel, !row.enabled)
            }
            None => {
                // A user package seen from project mode: a delta entry.
                let source = match Source::parse(&row.source) {
                    Source::Local(p) => pi_agent::packages::resolve_local(&p, &row_base)
                        .to_string_lossy()
                        .into_owned(),
                    _ => row.source.clone(),
                };
                let mut entry = serde_json::json!({ "source": source, "autoload": false });
                entry = set_resource_enabled(&entry, row.kind, &rel, !row.enabled);
                packages.push(entry);
            }
        }
        settings
            .set(scope, &["packages"], Some(Value::Array(packages)))
            .map_err(|e| e.to_string())?;
        self.reload()
    }
}

fn kind_heading(kind: Kind) -> &'static str {
    match kind {
        Kind::Extensions => "Extensions",
        Kind::Skills => "Skills",
        Kind::Prompts => "Prompts",
        Kind::Themes => "Themes",
    }
}

/// A skill by its directory's name, other resources by file name (as Pi lists them).
fn item_name(r: &PackageResource) -> String {
    let path = if r.kind == Kind::Skills && r.path.file_name().is_some_and(|n| n == "SKILL.md") {
        r.path.parent().unwrap_or(&r.path)
    } else {
        &r.path
    };
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

fn visible(s: &str) -> String {
    crate::visible::visible_line(s).into_owned()
}

/// The root the package's resource paths are relative to.
fn package_root(cwd: &Path, agent_dir: &Path, row: &PackageResource) -> PathBuf {
    let manager = PackageManager::new(
        cwd,
        agent_dir,
        row.scope == PackageScope::Project,
        Output::Capture,
    );
    manager
        .installed_path(&row.source, row.scope)
        .filter(|p| p.is_dir())
        .unwrap_or_else(|| row.path.parent().map(Path::to_path_buf).unwrap_or_default())
}

/// The interactive list on the alternate screen.
fn picker(state: &mut State) -> Result<(), String> {
    use crossterm::event::{read, Event, KeyCode, KeyEventKind, KeyModifiers};
    use crossterm::{cursor, execute, terminal};
    let mut out = std::io::stdout();
    let err = |e: std::io::Error| e.to_string();
    terminal::enable_raw_mode().map_err(err)?;
    execute!(out, terminal::EnterAlternateScreen, cursor::Hide).map_err(err)?;
    let result = (|| -> Result<(), String> {
        loop {
            draw(state, &mut out).map_err(err)?;
            let Event::Key(key) = read().map_err(err)? else {
                continue;
            };
            if key.kind != KeyEventKind::Press {
                continue;
            }
            match key.code {
                KeyCode::Esc | KeyCode::Char('q') => return Ok(()),
                KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                    return Ok(())
                }
                KeyCode::Up | KeyCode::Char('k') => {
                    state.selected = state.selected.saturating_sub(1)
                }
                KeyCode::Down | KeyCode::Char('j') if state.selected + 1 < state.rows.len() => {
                    state.selected += 1;
                }
                KeyCode::Char(' ') | KeyCode::Enter => state.toggle()?,
                KeyCode::Tab if state.trusted => {
                    state.scope = match state.scope {
                        PackageScope::User => PackageScope::Project,
                        PackageScope::Project => PackageScope::User,
                    };
                    state.reload()?;
                }
                _ => {}
            }
        }
    })();
    let _ = execute!(out, cursor::Show, terminal::LeaveAlternateScreen);
    let _ = terminal::disable_raw_mode();
    result
}

fn draw(state: &State, out: &mut std::io::Stdout) -> std::io::Result<()> {
    use crossterm::{cursor, queue, terminal};
    queue!(
        out,
        terminal::Clear(terminal::ClearType::All),
        cursor::MoveTo(0, 0)
    )?;
    let [title, file] = state.heading();
    let hint = if state.trusted {
        "tab switch mode · space toggle · esc close"
    } else {
        "space toggle · esc close"
    };
    let mut text = vec![format!("{title}    {hint}"), file, String::new()];
    let (lines, selected) = state.lines();
    if lines.is_empty() {
        text.push("  No package resources.".into());
    }
    let offset = text.len();
    text.extend(lines);
    if !state.rows.is_empty() {
        if let Some(line) = text.get_mut(offset + selected) {
            line.replace_range(0..1, ">");
        }
    }
    let rows = terminal::size()
        .map(|(_, h)| h as usize)
        .unwrap_or(24)
        .max(5);
    // Keep the selection on screen.
    let skip = (offset + selected + 2).saturating_sub(rows);
    for line in text.iter().skip(skip).take(rows - 1) {
        write!(out, "{line}\r\n")?;
    }
    out.flush()
}
