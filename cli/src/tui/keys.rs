//! Keybindings: Pi's namespaced action ids, their defaults, and overrides from
//! `<agent-dir>/keybindings.json` (a key or a list of keys per action).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::HashMap;

/// One key with its modifiers, normalised so `shift+l` from the config and the terminal's
/// `Char('L')` + SHIFT compare equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeySpec {
    pub code: KeyCode,
    pub mods: KeyModifiers,
}

impl KeySpec {
    pub fn from_event(ev: &KeyEvent) -> KeySpec {
        let mut mods = ev.modifiers
            & (KeyModifiers::CONTROL
                | KeyModifiers::ALT
                | KeyModifiers::SHIFT
                | KeyModifiers::SUPER);
        let code = match ev.code {
            KeyCode::Char(c) if c.is_ascii_uppercase() => {
                mods |= KeyModifiers::SHIFT;
                KeyCode::Char(c.to_ascii_lowercase())
            }
            // Terminals report shift+tab as BackTab, sometimes with SHIFT set, sometimes not.
            KeyCode::BackTab => {
                mods |= KeyModifiers::SHIFT;
                KeyCode::Tab
            }
            // Printable symbols carry their shift in the character itself (`?`, `!`).
            KeyCode::Char(c) if !c.is_ascii_alphanumeric() && c != ' ' => {
                mods -= KeyModifiers::SHIFT;
                KeyCode::Char(c)
            }
            other => other,
        };
        KeySpec { code, mods }
    }

    /// Parses Pi's key syntax: `ctrl+shift+p`, `alt+enter`, `pageUp`, `escape`, `ctrl+-`.
    pub fn parse(text: &str) -> Option<KeySpec> {
        let lower = text.trim().to_ascii_lowercase();
        let mut mods = KeyModifiers::NONE;
        // The key itself may be `+` or `-`, so split the modifiers off the front only.
        let mut rest = lower.as_str();
        loop {
            let mut matched = false;
            for (name, m) in [
                ("ctrl+", KeyModifiers::CONTROL),
                ("shift+", KeyModifiers::SHIFT),
                ("alt+", KeyModifiers::ALT),
                ("super+", KeyModifiers::SUPER),
            ] {
                if let Some(r) = rest.strip_prefix(name) {
                    if !r.is_empty() {
                        mods |= m;
                        rest = r;
                        matched = true;
                    }
                }
            }
            if !matched {
                break;
            }
        }
        let code = match rest {
            "escape" | "esc" => KeyCode::Esc,
            "enter" | "return" => KeyCode::Enter,
            "tab" => KeyCode::Tab,
            "space" => KeyCode::Char(' '),
            "backspace" => KeyCode::Backspace,
            "delete" => KeyCode::Delete,
            "insert" => KeyCode::Insert,
            "home" => KeyCode::Home,
            "end" => KeyCode::End,
            "pageup" => KeyCode::PageUp,
            "pagedown" => KeyCode::PageDown,
            "up" => KeyCode::Up,
            "down" => KeyCode::Down,
            "left" => KeyCode::Left,
            "right" => KeyCode::Right,
            f if f.len() > 1 && f.starts_with('f') && f[1..].parse::<u8>().is_ok() => {
                KeyCode::F(f[1..].parse().ok()?)
            }
            s => {
                let mut chars = s.chars();
                let c = chars.next()?;
                if chars.next().is_some() {
                    return None;
                }
                KeyCode::Char(c)
            }
        };
        Some(KeySpec { code, mods })
    }
}

/// Defaults from Pi's keybindings documentation, for the actions this UI implements.
const DEFAULTS: &[(&str, &[&str])] = &[
    ("tui.editor.cursorUp", &["up"]),
    ("tui.editor.cursorDown", &["down"]),
    ("tui.editor.historyPrevious", &[]),
    ("tui.editor.historyNext", &[]),
    ("tui.editor.cursorLeft", &["left", "ctrl+b"]),
    ("tui.editor.cursorRight", &["right", "ctrl+f"]),
    (
        "tui.editor.cursorWordLeft",
        &["alt+left", "ctrl+left", "alt+b"],
    ),
    (
        "tui.editor.cursorWordRight",
        &["alt+right", "ctrl+right", "alt+f"],
    ),
    ("tui.editor.cursorLineStart", &["home", "ctrl+a"]),
    ("tui.editor.cursorLineEnd", &["end", "ctrl+e"]),
    ("tui.editor.deleteCharBackward", &["backspace"]),
    ("tui.editor.deleteCharForward", &["delete", "ctrl+d"]),
    (
        "tui.editor.deleteWordBackward",
        &["ctrl+w", "alt+backspace"],
    ),
    ("tui.editor.deleteWordForward", &["alt+d", "alt+delete"]),
    ("tui.editor.deleteToLineStart", &["ctrl+u"]),
    ("tui.editor.deleteToLineEnd", &["ctrl+k"]),
    ("tui.editor.yank", &["ctrl+y"]),
    ("tui.editor.yankPop", &["alt+y"]),
    ("tui.editor.undo", &["ctrl+-"]),
    ("tui.editor.jumpForward", &["ctrl+]"]),
    ("tui.editor.jumpBackward", &["ctrl+alt+]"]),
    ("tui.input.newLine", &["shift+enter", "ctrl+j"]),
    ("tui.input.submit", &["enter"]),
    ("tui.input.tab", &["tab"]),
    ("tui.select.up", &["up"]),
    ("tui.select.down", &["down"]),
    ("tui.select.pageUp", &["pageUp"]),
    ("tui.select.pageDown", &["pageDown"]),
    ("tui.select.confirm", &["enter"]),
    ("tui.select.cancel", &["escape", "ctrl+c"]),
    ("tui.altScreen.pageUp", &["pageUp"]),
    ("tui.altScreen.pageDown", &["pageDown"]),
    ("tui.altScreen.halfPageUp", &[]),
    ("tui.altScreen.halfPageDown", &[]),
    ("tui.altScreen.lineUp", &[]),
    ("tui.altScreen.lineDown", &[]),
    ("tui.altScreen.top", &["ctrl+home"]),
    ("tui.altScreen.bottom", &["ctrl+end"]),
    ("app.interrupt", &["escape"]),
    ("app.clear", &["ctrl+c"]),
    ("app.exit", &["ctrl+d"]),
    ("app.suspend", &["ctrl+z"]),
    ("app.editor.external", &["ctrl+g"]),
    ("app.clipboard.pasteImage", &["ctrl+v"]),
    ("app.session.new", &[]),
    ("app.session.tree", &[]),
    ("app.session.fork", &[]),
    ("app.session.resume", &[]),
    ("app.session.togglePath", &["ctrl+p"]),
    ("app.session.toggleSort", &["ctrl+s"]),
    ("app.session.toggleNamedFilter", &["ctrl+n"]),
    ("app.session.rename", &["ctrl+r"]),
    ("app.session.delete", &["ctrl+d"]),
    ("app.model.select", &["ctrl+l"]),
    ("app.model.cycleForward", &["ctrl+p"]),
    ("app.model.cycleBackward", &["shift+ctrl+p"]),
    ("app.thinking.cycle", &["shift+tab"]),
    ("app.thinking.toggle", &["ctrl+t"]),
    ("app.tools.expand", &["ctrl+o"]),
    ("app.message.copy", &["ctrl+x"]),
    ("app.message.followUp", &["alt+enter"]),
    ("app.message.dequeue", &["alt+up"]),
    ("app.tree.foldOrUp", &["ctrl+left", "alt+left"]),
    ("app.tree.unfoldOrDown", &["ctrl+right", "alt+right"]),
    ("app.tree.editLabel", &["shift+l"]),
    ("app.tree.toggleLabelTimestamp", &["shift+t"]),
    ("app.tree.filter.default", &["ctrl+d"]),
    ("app.tree.filter.noTools", &["ctrl+t"]),
    ("app.tree.filter.userOnly", &["ctrl+u"]),
    ("app.tree.filter.labeledOnly", &["ctrl+l"]),
    ("app.tree.filter.all", &["ctrl+a"]),
    ("app.tree.filter.cycleForward", &["ctrl+o"]),
    ("app.tree.filter.cycleBackward", &["shift+ctrl+o"]),
];

/// Action id → keys. Several actions may share a key (ctrl+p is model cycling in the
/// editor and path display in /resume); the context that asks decides.
#[derive(Debug, Clone)]
pub struct Keymap {
    bindings: HashMap<String, Vec<KeySpec>>,
}

impl Default for Keymap {
    fn default() -> Self {
        let bindings = DEFAULTS
            .iter()
            .map(|(id, keys)| {
                (
                    id.to_string(),
                    keys.iter().filter_map(|k| KeySpec::parse(k)).collect(),
                )
            })
            .collect();
        Keymap { bindings }
    }
}

impl Keymap {
    /// Defaults overridden by a keybindings.json object; returns the map and one warning per
    /// value that could not be understood (shown as notices, never fatal).
    pub fn with_overrides(json: &serde_json::Value) -> (Keymap, Vec<String>) {
        let mut map = Keymap::default();
        let mut warnings = Vec::new();
        let Some(obj) = json.as_object() else {
            warnings.push("keybindings.json: expected an object".to_string());
            return (map, warnings);
        };
        for (id, value) in obj {
            let texts: Vec<&str> = match value {
                serde_json::Value::String(s) => vec![s.as_str()],
                serde_json::Value::Array(a) => a.iter().filter_map(|v| v.as_str()).collect(),
                _ => {
                    warnings.push(format!("keybindings.json: {id}: expected a key or a list"));
                    continue;
                }
            };
            let mut keys = Vec::new();
            for t in texts {
                match KeySpec::parse(t) {
                    Some(k) => keys.push(k),
                    None => warnings.push(format!("keybindings.json: {id}: unknown key {t:?}")),
                }
            }
            map.bindings.insert(id.clone(), keys);
        }
        (map, warnings)
    }

    /// Reads `<agent-dir>/keybindings.json`; a missing file means defaults.
    pub fn load(agent_dir: &std::path::Path) -> (Keymap, Vec<String>) {
        let path = agent_dir.join("keybindings.json");
        match std::fs::read_to_string(&path) {
            Ok(text) => match serde_json::from_str(&text) {
                Ok(v) => Keymap::with_overrides(&v),
                Err(e) => (Keymap::default(), vec![format!("{}: {e}", path.display())]),
            },
            Err(_) => (Keymap::default(), Vec::new()),
        }
    }

    pub fn matches(&self, action: &str, ev: &KeyEvent) -> bool {
        let spec = KeySpec::from_event(ev);
        self.bindings
            .get(action)
            .is_some_and(|keys| keys.contains(&spec))
    }

    /// Whether `action` is bound to `key`.
    pub fn binds(&self, action: &str, key: &KeySpec) -> bool {
        self.bindings
            .get(action)
            .is_some_and(|keys| keys.contains(key))
    }

    /// The first key of an action in Pi's spelling, for hints (`ctrl+l`).
    pub fn hint(&self, action: &str) -> String {
        self.bindings
            .get(action)
            .and_then(|k| k.first())
            .map(describe)
            .unwrap_or_default()
    }
}

pub fn describe(k: &KeySpec) -> String {
    let mut s = String::new();
    if k.mods.contains(KeyModifiers::CONTROL) {
        s.push_str("ctrl+");
    }
    if k.mods.contains(KeyModifiers::SHIFT) {
        s.push_str("shift+");
    }
    if k.mods.contains(KeyModifiers::ALT) {
        s.push_str("alt+");
    }
    match k.code {
        KeyCode::Char(' ') => s.push_str("space"),
        KeyCode::Char(c) => s.push(c),
        KeyCode::Esc => s.push_str("escape"),
        KeyCode::Enter => s.push_str("enter"),
        KeyCode::Tab => s.push_str("tab"),
        KeyCode::Backspace => s.push_str("backspace"),
        KeyCode::Up => s.push_str("up"),
        KeyCode::Down => s.push_str("down"),
        KeyCode::Left => s.push_str("left"),
        KeyCode::Right => s.push_str("right"),
        KeyCode::PageUp => s.push_str("pageUp"),
        KeyCode::PageDown => s.push_str("pageDown"),
        KeyCode::Home => s.push_str("home"),
        KeyCode::End => s.push_str("end"),
        KeyCode::F(n) => s.push_str(&format!("f{n}")),
        other => s.push_str(&format!("{other:?}").to_ascii_lowercase()),
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, mods)
    }

    #[test]
    fn shift_letters_and_backtab_normalise() {
        let map = Keymap::default();
        assert!(map.matches(
            "app.tree.editLabel",
            &ev(KeyCode::Char('L'), KeyModifiers::SHIFT)
        ));
        assert!(map.matches(
            "app.thinking.cycle",
            &ev(KeyCode::BackTab, KeyModifiers::NONE)
        ));
        assert!(map.matches(
            "app.model.cycleBackward",
            &ev(
                KeyCode::Char('P'),
                KeyModifiers::CONTROL | KeyModifiers::SHIFT
            )
        ));
        assert!(!map.matches(
            "app.model.cycleForward",
            &ev(
                KeyCode::Char('P'),
                KeyModifiers::CONTROL | KeyModifiers::SHIFT
            )
        ));
    }

    #[test]
    fn overrides_take_a_key_or_a_list() {
        let json = serde_json::json!({
            "tui.editor.historyPrevious": "ctrl+p",
            "tui.editor.deleteWordBackward": ["ctrl+w", "alt+backspace"],
            "app.exit": "ctrl+nonsense"
        });
        let (map, warnings) = Keymap::with_overrides(&json);
        assert!(map.matches(
            "tui.editor.historyPrevious",
            &ev(KeyCode::Char('p'), KeyModifiers::CONTROL)
        ));
        assert!(map.matches(
            "tui.editor.deleteWordBackward",
            &ev(KeyCode::Backspace, KeyModifiers::ALT)
        ));
        assert_eq!(warnings.len(), 1);
        assert!(KeySpec::parse("ctrl+-").is_some());
        assert_eq!(
            KeySpec::parse("pageUp").map(|k| k.code),
            Some(KeyCode::PageUp)
        );
    }
}
