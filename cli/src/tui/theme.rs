//! Colours by role. Built-in `system` (the default: made from the terminal's own colours,
//! see [`super::system_theme`]), `dark` and `light`, plus Pi-style JSON themes
//! (`{"name", "vars": {...}, "colors": {"accent": "#8abeb7" | "varName" | 39 | ""}}`) from
//! `<agent-dir>/themes/<name>.json` and from the theme files and directories extensions
//! contributed (`resources_discover`'s `themePaths`), found there by their `name`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ratatui::style::{Color, Modifier, Style};
use serde_json::Value;

use super::okcolor::Rgb;
use super::system_theme::{self, Paint, TerminalColors};

/// What the terminal reported of its colours, and whether a query is still out (the
/// `system` theme stays grey until it answers or the query times out).
static TERMINAL: Mutex<(Option<TerminalColors>, bool)> = Mutex::new((None, false));

/// A colour query went out: `system` is grey until [`set_terminal_colors`].
pub fn mark_terminal_colors_pending() {
    TERMINAL.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
}

/// The terminal's colours (what it reported; nothing when it did not answer). Ends the
/// grey wait. Returns whether `system` changes with them.
pub fn set_terminal_colors(colors: TerminalColors) -> bool {
    let mut t = TERMINAL.lock().unwrap_or_else(|e| e.into_inner());
    let changed = t.1 || t.0.as_ref() != Some(&colors);
    *t = (Some(colors), false);
    changed
}

/// The colours last reported, if any query completed or timed out.
pub fn terminal_colors() -> Option<TerminalColors> {
    TERMINAL.lock().unwrap_or_else(|e| e.into_inner()).0.clone()
}

#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub accent: Color,
    pub border: Color,
    pub border_muted: Color,
    pub muted: Color,
    pub dim: Color,
    pub text: Color,
    pub success: Color,
    pub error: Color,
    pub warning: Color,
    pub user_bg: Color,
    /// A finished tool's background.
    pub tool_bg: Color,
    /// A running tool's background (`None`: [`Theme::tool_bg`]).
    pub tool_pending_bg: Option<Color>,
    pub tool_error_bg: Color,
    pub thinking: Color,
    pub md_heading: Color,
    pub md_code: Color,
    pub md_link: Color,
    pub syntax_keyword: Color,
    pub syntax_string: Color,
    pub syntax_comment: Color,
    pub syntax_number: Color,
    pub selected_bg: Color,
    /// The editor border by thinking level, off to max (`None`: picked from the other
    /// roles, see [`Theme::thinking_border`]).
    pub thinking_levels: Option<[Color; 7]>,
}

impl Theme {
    pub fn dark() -> Theme {
        Theme {
            name: "dark".into(),
            accent: Color::Rgb(0x8a, 0xbe, 0xb7),
            border: Color::Rgb(0x5f, 0x87, 0xff),
            border_muted: Color::Rgb(0x50, 0x50, 0x50),
            muted: Color::Rgb(0x80, 0x80, 0x80),
            dim: Color::Rgb(0x66, 0x66, 0x66),
            text: Color::Reset,
            success: Color::Rgb(0xb5, 0xbd, 0x68),
            error: Color::Rgb(0xcc, 0x66, 0x66),
            warning: Color::Rgb(0xff, 0xff, 0x00),
            user_bg: Color::Rgb(0x34, 0x35, 0x41),
            tool_bg: Color::Rgb(0x28, 0x32, 0x28),
            tool_error_bg: Color::Rgb(0x3c, 0x28, 0x28),
            thinking: Color::Rgb(0x80, 0x80, 0x80),
            md_heading: Color::Rgb(0xf0, 0xc6, 0x74),
            md_code: Color::Rgb(0x8a, 0xbe, 0xb7),
            md_link: Color::Rgb(0x81, 0xa2, 0xbe),
            syntax_keyword: Color::Rgb(0x56, 0x9c, 0xd6),
            syntax_string: Color::Rgb(0xce, 0x91, 0x78),
            syntax_comment: Color::Rgb(0x6a, 0x99, 0x55),
            syntax_number: Color::Rgb(0xb5, 0xce, 0xa8),
            selected_bg: Color::Rgb(0x3a, 0x3a, 0x4a),
            tool_pending_bg: None,
            thinking_levels: None,
        }
    }

    pub fn light() -> Theme {
        Theme {
            name: "light".into(),
            accent: Color::Rgb(0x5a, 0x80, 0x80),
            border: Color::Rgb(0x54, 0x7d, 0xa7),
            border_muted: Color::Rgb(0xb0, 0xb0, 0xb0),
            muted: Color::Rgb(0x6c, 0x6c, 0x6c),
            dim: Color::Rgb(0x8a, 0x8a, 0x8a),
            text: Color::Reset,
            success: Color::Rgb(0x58, 0x8c, 0x58),
            error: Color::Rgb(0xaa, 0x55, 0x55),
            warning: Color::Rgb(0x9a, 0x70, 0x00),
            user_bg: Color::Rgb(0xe8, 0xe8, 0xe8),
            tool_bg: Color::Rgb(0xe8, 0xf0, 0xe8),
            tool_error_bg: Color::Rgb(0xf0, 0xe8, 0xe8),
            thinking: Color::Rgb(0x6c, 0x6c, 0x6c),
            md_heading: Color::Rgb(0x9a, 0x70, 0x00),
            md_code: Color::Rgb(0x5a, 0x80, 0x80),
            md_link: Color::Rgb(0x54, 0x7d, 0xa7),
            syntax_keyword: Color::Rgb(0x00, 0x00, 0xff),
            syntax_string: Color::Rgb(0xa3, 0x15, 0x15),
            syntax_comment: Color::Rgb(0x00, 0x80, 0x00),
            syntax_number: Color::Rgb(0x09, 0x86, 0x58),
            selected_bg: Color::Rgb(0xd8, 0xd8, 0xe8),
            tool_pending_bg: None,
            thinking_levels: None,
        }
    }

    /// Stands for "the terminal's default foreground, faint" (SGR 2), which the `system`
    /// theme uses for secondary text when the terminal reported no colours. [`Theme::fg`]
    /// and [`Theme::bold`] draw it so; no other theme produces this colour (a JSON theme's
    /// index 8 is `Color::Indexed(8)`), and drawn as it is it is bright black, still sane.
    pub const FAINT: Color = Color::DarkGray;

    /// `system` for the terminal's colours as last reported ([`set_terminal_colors`]): grey
    /// while a query is out, palette indices when the terminal reported nothing.
    pub fn system() -> Theme {
        let (colors, pending) = TERMINAL
            .lock()
            .map(|t| t.clone())
            .unwrap_or_else(|e| e.into_inner().clone());
        let saturation = if pending { 0.0 } else { 1.0 };
        Theme::from_generated(&system_theme::generate(
            &colors.unwrap_or_default(),
            saturation,
        ))
    }

    /// The roles of this interface from the `system` theme's tokens.
    pub fn from_generated(generated: &system_theme::Generated) -> Theme {
        let color = |token: &str| match generated.get(token) {
            Paint::Rgb(Rgb { r, g, b }) => Color::Rgb(r, g, b),
            Paint::Index(i) => Color::Indexed(i),
            Paint::Default if generated.is_faint(token) => Theme::FAINT,
            Paint::Default => Color::Reset,
        };
        Theme {
            name: system_theme::NAME.into(),
            accent: color("accent"),
            border: color("border"),
            border_muted: color("borderMuted"),
            muted: color("muted"),
            dim: color("dim"),
            text: color("text"),
            success: color("success"),
            error: color("error"),
            warning: color("warning"),
            user_bg: color("userMessageBg"),
            tool_bg: color("toolSuccessBg"),
            tool_pending_bg: Some(color("toolPendingBg")),
            tool_error_bg: color("toolErrorBg"),
            thinking: color("thinkingText"),
            md_heading: color("mdHeading"),
            md_code: color("mdCode"),
            md_link: color("mdLink"),
            syntax_keyword: color("syntaxKeyword"),
            syntax_string: color("syntaxString"),
            syntax_comment: color("syntaxComment"),
            syntax_number: color("syntaxNumber"),
            selected_bg: color("selectedBg"),
            thinking_levels: Some(
                [
                    "thinkingOff",
                    "thinkingMinimal",
                    "thinkingLow",
                    "thinkingMedium",
                    "thinkingHigh",
                    "thinkingXhigh",
                    "thinkingMax",
                ]
                .map(color),
            ),
        }
    }

    /// The editor border for a thinking level (0 off … 6 max): the theme's own colours for
    /// them, else picked from its other roles.
    pub fn thinking_border(&self, level: usize) -> Color {
        if let Some(levels) = &self.thinking_levels {
            return levels[level.min(6)];
        }
        match level {
            0 => self.border_muted,
            1 | 2 => self.dim,
            3 => self.border,
            4 => self.accent,
            _ => self.warning,
        }
    }

    /// A running tool's background.
    pub fn tool_pending_bg(&self) -> Color {
        self.tool_pending_bg.unwrap_or(self.tool_bg)
    }

    /// `system` (also for no name), `dark`, `light`, a JSON theme from
    /// `<agent-dir>/themes/<name>.json`, or the theme named `name` among `extra` (theme
    /// files and directories of them, as extensions contributed them); unknown names fall
    /// back to `system` with a warning. `system` is reserved: a theme file of that name is
    /// not read.
    pub fn load(name: &str, agent_dir: &Path, extra: &[PathBuf]) -> (Theme, Option<String>) {
        match name {
            system_theme::NAME | "" => (Theme::system(), None),
            "dark" => (Theme::dark(), None),
            "light" => (Theme::light(), None),
            other => {
                let path = agent_dir.join("themes").join(format!("{other}.json"));
                if !path.exists() {
                    if let Some(found) = find_named(other, extra) {
                        return (found, None);
                    }
                }
                match std::fs::read_to_string(&path)
                    .map_err(|e| e.to_string())
                    .and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string()))
                {
                    Ok(v) => (Theme::from_json(&v), None),
                    Err(e) => (
                        Theme::system(),
                        Some(format!("theme {other}: {e}; using system")),
                    ),
                }
            }
        }
    }

    /// A JSON theme over the dark defaults: every colour it names replaces the default.
    pub fn from_json(v: &Value) -> Theme {
        let mut t = Theme::dark();
        if let Some(name) = v.get("name").and_then(Value::as_str) {
            t.name = name.to_string();
        }
        let vars = v.get("vars").cloned().unwrap_or(Value::Null);
        let Some(colors) = v.get("colors").and_then(Value::as_object) else {
            return t;
        };
        for (key, value) in colors {
            let Some(c) = resolve_color(value, &vars, 0) else {
                continue;
            };
            let slot = match key.as_str() {
                "accent" => &mut t.accent,
                "border" => &mut t.border,
                "borderMuted" => &mut t.border_muted,
                "muted" => &mut t.muted,
                "dim" => &mut t.dim,
                "text" => &mut t.text,
                "success" => &mut t.success,
                "error" => &mut t.error,
                "warning" => &mut t.warning,
                "userMessageBg" => &mut t.user_bg,
                "toolSuccessBg" | "toolPendingBg" => &mut t.tool_bg,
                "toolErrorBg" => &mut t.tool_error_bg,
                "thinkingText" => &mut t.thinking,
                "mdHeading" => &mut t.md_heading,
                "mdCode" | "mdCodeBlock" => &mut t.md_code,
                "mdLink" => &mut t.md_link,
                "syntaxKeyword" => &mut t.syntax_keyword,
                "syntaxString" => &mut t.syntax_string,
                "syntaxComment" => &mut t.syntax_comment,
                "syntaxNumber" => &mut t.syntax_number,
                "selectedBg" => &mut t.selected_bg,
                _ => continue,
            };
            *slot = c;
        }
        t
    }

    /// Text in `c` ([`Theme::FAINT`]: the default colour, faint).
    pub fn fg(&self, c: Color) -> Style {
        if c == Theme::FAINT {
            return Style::default()
                .fg(Color::Reset)
                .add_modifier(Modifier::DIM);
        }
        Style::default().fg(c)
    }

    pub fn bold(&self, c: Color) -> Style {
        self.fg(c).add_modifier(Modifier::BOLD)
    }
}

/// The JSON theme files under `paths`: a `.json` file as given, a directory's `.json` files
/// (not recursive, in name order), as Pi's resource loader reads theme paths.
fn theme_files(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            let Ok(read) = std::fs::read_dir(path) else {
                continue;
            };
            let mut files: Vec<PathBuf> = read
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "json"))
                .collect();
            files.sort();
            out.extend(files);
        } else if path.is_file() && path.extension().is_some_and(|e| e == "json") {
            out.push(path.clone());
        }
    }
    out
}

/// The theme files under `paths` that parse, with their names (the JSON's `name`, else the
/// file's stem), first of each name.
fn named_themes(paths: &[PathBuf]) -> Vec<(String, Value)> {
    named_theme_files(paths)
        .into_iter()
        .map(|(n, v, _)| (n, v))
        .collect()
}

/// [`named_themes`] with the file each came from.
fn named_theme_files(paths: &[PathBuf]) -> Vec<(String, Value, PathBuf)> {
    let mut out: Vec<(String, Value, PathBuf)> = Vec::new();
    for file in theme_files(paths) {
        let Some(v) = std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        else {
            continue;
        };
        let name = match v.get("name").and_then(Value::as_str) {
            Some(n) => n.to_string(),
            None => file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        if !name.is_empty() && !out.iter().any(|(n, _, _)| *n == name) {
            out.push((name, v, file));
        }
    }
    out
}

/// The theme named `name` under `paths`.
pub fn find_named(name: &str, paths: &[PathBuf]) -> Option<Theme> {
    named_themes(paths)
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(n, v)| Theme {
            name: n,
            ..Theme::from_json(&v)
        })
}

/// The names of the themes under `paths`, in the order they were found.
pub fn theme_names(paths: &[PathBuf]) -> Vec<String> {
    named_themes(paths).into_iter().map(|(n, _)| n).collect()
}

/// Every theme [`Theme::load`] can show, first of each name, with its file (none for the
/// built-in `system`, `dark` and `light`): the built-ins, `<agent-dir>/themes/<name>.json`,
/// then the themes under `paths`. Pi's `getAvailableThemesWithPaths()` before its sorting
/// (`system` first, the rest by name).
pub fn available(agent_dir: &Path, paths: &[PathBuf]) -> Vec<(String, Option<PathBuf>)> {
    let mut out: Vec<(String, Option<PathBuf>)> = vec![
        (system_theme::NAME.into(), None),
        ("dark".into(), None),
        ("light".into(), None),
    ];
    let mut add = |name: String, path: PathBuf| {
        if !out.iter().any(|(n, _)| *n == name) {
            out.push((name, Some(path)));
        }
    };
    // Found there by their file name (the ones that parse).
    for (_, _, file) in named_theme_files(&[agent_dir.join("themes")]) {
        if let Some(stem) = file.file_stem().map(|s| s.to_string_lossy().into_owned()) {
            add(stem, file);
        }
    }
    for (name, _, file) in named_theme_files(paths) {
        add(name, file);
    }
    out
}

/// Tells the extensions which themes there are ([`available`]), for their synchronous
/// `ctx.ui.getAllThemes()` and `getTheme()`.
pub fn publish(agent_dir: &Path, paths: &[PathBuf]) {
    let list: Vec<Value> = available(agent_dir, paths)
        .into_iter()
        .map(|(name, path)| {
            serde_json::json!({"name": name, "path": path.map(|p| p.display().to_string())})
        })
        .collect();
    pi_agent::extensions::set_ui_themes(Value::Array(list));
}

/// `"#rrggbb"`, a 256-colour index, `""` (terminal default) or a var name (depth-limited,
/// since a theme may name vars in a cycle).
fn resolve_color(v: &Value, vars: &Value, depth: u8) -> Option<Color> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .and_then(|i| u8::try_from(i).ok())
            .map(Color::Indexed),
        Value::String(s) if s.is_empty() => Some(Color::Reset),
        Value::String(s) if s.starts_with('#') && s.len() == 7 => {
            let p = |i: usize| u8::from_str_radix(s.get(i..i + 2)?, 16).ok();
            Some(Color::Rgb(p(1)?, p(3)?, p(5)?))
        }
        Value::String(s) if depth < 8 => resolve_color(vars.get(s)?, vars, depth + 1),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_theme_resolves_vars_and_indices() {
        let v = serde_json::json!({
            "name": "mine",
            "vars": {"blue": "#0000ff", "alias": "blue", "loop": "loop"},
            "colors": {"accent": "alias", "border": 39, "text": "", "muted": "loop"}
        });
        let t = Theme::from_json(&v);
        assert_eq!(t.name, "mine");
        assert_eq!(t.accent, Color::Rgb(0, 0, 255));
        assert_eq!(t.border, Color::Indexed(39));
        assert_eq!(t.text, Color::Reset);
        assert_eq!(t.muted, Theme::dark().muted);
    }

    #[test]
    fn contributed_themes_are_found_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let themes = dir.path().join("themes");
        std::fs::create_dir_all(&themes).unwrap();
        std::fs::write(
            themes.join("a.json"),
            r##"{"name": "ocean", "colors": {"accent": "#010203"}}"##,
        )
        .unwrap();
        std::fs::write(themes.join("notes.txt"), "not a theme").unwrap();
        let single = dir.path().join("forest.json");
        std::fs::write(&single, r##"{"colors": {"accent": 2}}"##).unwrap();
        let paths = vec![themes, single];
        assert_eq!(theme_names(&paths), ["ocean", "forest"]);
        let agent = dir.path().join("agent");
        let (t, warning) = Theme::load("ocean", &agent, &paths);
        assert_eq!((t.accent, warning), (Color::Rgb(1, 2, 3), None));
        let (t, warning) = Theme::load("forest", &agent, &paths);
        assert_eq!((t.accent, warning), (Color::Indexed(2), None));
        // Every theme there is: built-ins, the user's by file name, then the contributed.
        std::fs::create_dir_all(agent.join("themes")).unwrap();
        std::fs::write(agent.join("themes/mine.json"), r#"{"colors": {}}"#).unwrap();
        std::fs::write(agent.join("themes/broken.json"), "{").unwrap();
        let names: Vec<(String, bool)> = available(&agent, &paths)
            .into_iter()
            .map(|(n, p)| (n, p.is_some()))
            .collect();
        let expected = [
            ("system", false),
            ("dark", false),
            ("light", false),
            ("mine", true),
        ]
        .into_iter()
        .chain([("ocean", true), ("forest", true)]);
        assert_eq!(
            names,
            expected
                .map(|(n, p)| (n.to_string(), p))
                .collect::<Vec<_>>()
        );
        // Not found: the default theme, `system`, with a warning.
        let (t, warning) = Theme::load("ocean", &agent, &[]);
        assert_eq!(t.name, "system");
        assert!(warning.is_some_and(|w| w.contains("using system")));
    }
}
