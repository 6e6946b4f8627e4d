//! Extensions' `ctx.ui` in the interactive mode (Pi's extension UI context).
//!
//! The extensions' records (`extension_ui_request`, the same sub-protocol RPC clients get,
//! rpc-extension-ui.md) reach the UI as [`super::app::Msg::Extension`]. Dialogs
//! (`confirm`, `select`, `input`, `editor`) open as an [`ExtDialog`]; its answer goes back as
//! an `extension_ui_response` ([`super::app::Effect::ExtensionAnswer`]). `notify` becomes a
//! notice; `setStatus`, `setWidget`, `setHeader`, `setFooter` keep text lines the screen
//! draws around the editor; `setTitle` sets the terminal title.

use std::collections::VecDeque;

use serde_json::{json, Value};

use super::app::{App, Command};
use super::dialogs::{Confirm, ConfirmOutcome};
use super::keys::Keymap;
use super::transcript::Item;

/// What extensions keep on the screen, and dialogs waiting for the one open to close.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExtUi {
    /// `setStatus` texts by key, in the order first set (Pi shows them in the footer).
    pub statuses: Vec<(String, String)>,
    /// `setWidget` lines by key, above the editor.
    pub above: Vec<(String, Vec<String>)>,
    /// `setWidget` lines by key with `placement: "belowEditor"`.
    pub below: Vec<(String, Vec<String>)>,
    /// `setHeader` lines, above the transcript.
    pub header: Vec<String>,
    /// `setFooter` lines, under the footer.
    pub footer: Vec<String>,
    /// A `setTitle` the driver loop has not sent to the terminal yet.
    pub title: Option<String>,
    /// Dialogs asked for while another dialog was open.
    pub waiting: VecDeque<ExtDialog>,
    /// Keys extensions registered (`pi.registerShortcut`): the key and the shortcut as
    /// registered, which names it to the sidecar.
    pub shortcuts: Vec<(super::keys::KeySpec, String)>,
    /// The names of the slash commands extensions registered, as last listed.
    pub commands: Vec<String>,
}

impl ExtUi {
    /// The running extensions were replaced (a reload, a new session): what they put on
    /// the screen goes with them, as Pi's `resetExtensionUI` removes it. Their keys and
    /// commands are replaced once the new ones are loaded ([`refresh_registrations`]).
    pub fn clear_drawn(&mut self) {
        self.statuses.clear();
        self.above.clear();
        self.below.clear();
        self.header.clear();
        self.footer.clear();
        // The host's own questions (project trust) are not the extensions'.
        self.waiting.retain(|d| {
            d.id.starts_with(crate::modes::extensions::tui_relay::TRUST_DIALOG_ID)
        });
    }
}

/// The loaded extensions' shortcuts and slash commands replace those of the extensions
/// before them. `commands` are the extensions' commands now.
pub fn refresh_registrations(app: &mut App, shortcuts: &[String], commands: Vec<Command>) {
    let (keys, skipped) = shortcuts_of(shortcuts, &app.keys);
    app.ext_ui.shortcuts = keys;
    for warning in skipped {
        app.notice(format!("Warning: {warning}"));
    }
    let old = std::mem::take(&mut app.ext_ui.commands);
    app.commands
        .retain(|c| !old.contains(&c.name) && !commands.iter().any(|n| n.name == c.name));
    app.ext_ui.commands = commands.iter().map(|c| c.name.clone()).collect();
    app.commands.extend(commands);
}

/// Pi's editor-global actions an extension shortcut may not take over (its
/// `RESERVED_KEYBINDINGS_FOR_EXTENSION_CONFLICTS`); other built-in keys yield to extensions.
const RESERVED_ACTIONS: [&str; 18] = [
    "app.interrupt",
    "app.clear",
    "app.exit",
    "app.suspend",
    "app.thinking.cycle",
    "app.model.cycleForward",
    "app.model.cycleBackward",
    "app.model.select",
    "app.tools.expand",
    "app.thinking.toggle",
    "app.editor.external",
    "app.message.copy",
    "app.message.followUp",
    "tui.input.submit",
    "tui.select.confirm",
    "tui.select.cancel",
    "tui.input.copy",
    "tui.editor.deleteToLineEnd",
];

/// The extensions' shortcuts the screen takes: parsed, without those a reserved action
/// binds, the last registration of a key winning (as Pi). The skipped ones are returned
/// as warnings.
pub fn shortcuts_of(
    registered: &[String],
    keys: &Keymap,
) -> (Vec<(super::keys::KeySpec, String)>, Vec<String>) {
    let mut taken: Vec<(super::keys::KeySpec, String)> = Vec::new();
    let mut warnings = Vec::new();
    for shortcut in registered {
        let Some(spec) = super::keys::KeySpec::parse(shortcut) else {
            warnings.push(format!(
                "Extension shortcut '{shortcut}' is not a key. Skipping."
            ));
            continue;
        };
        if RESERVED_ACTIONS.iter().any(|a| keys.binds(a, &spec)) {
            warnings.push(format!(
                "Extension shortcut '{shortcut}' conflicts with built-in shortcut. Skipping."
            ));
            continue;
        }
        taken.retain(|(k, _)| *k != spec);
        taken.push((spec, shortcut.clone()));
    }
    (taken, warnings)
}

impl ExtUi {
    /// Lines drawn above the editor.
    pub fn above_lines(&self) -> Vec<String> {
        self.above.iter().flat_map(|(_, l)| l.clone()).collect()
    }

    /// Lines drawn under the editor: widgets placed there, then the status line.
    pub fn below_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.below.iter().flat_map(|(_, l)| l.clone()).collect();
        if !self.statuses.is_empty() {
            let texts: Vec<&str> = self.statuses.iter().map(|(_, t)| t.as_str()).collect();
            lines.push(texts.join("  "));
        }
        lines
    }
}

/// Which dialog an extension asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum DialogKind {
    /// `ctx.ui.confirm`: Yes / No.
    Confirm,
    /// `ctx.ui.select`: one of the options.
    Select(Vec<String>),
    /// `ctx.ui.input`: one line (the placeholder shows while it is empty).
    Input { placeholder: String },
    /// `ctx.ui.editor`: several lines, prefilled.
    Editor,
}

/// An open extension dialog.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtDialog {
    /// The request id the answer must carry.
    pub id: String,
    pub title: String,
    pub message: String,
    pub kind: DialogKind,
    /// The highlighted option (confirm, select).
    pub selected: usize,
    /// The text typed so far (input, editor).
    pub text: String,
}

impl ExtDialog {
    /// The dialog an `extension_ui_request` asks for, if it is one.
    pub fn from_request(request: &Value) -> Option<ExtDialog> {
        let text = |k: &str| {
            request
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let kind = match request.get("method").and_then(Value::as_str)? {
            "confirm" => DialogKind::Confirm,
            "select" => DialogKind::Select(
                request
                    .get("options")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|o| match o {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect(),
            ),
            "input" => DialogKind::Input {
                placeholder: text("placeholder"),
            },
            "editor" => DialogKind::Editor,
            _ => return None,
        };
        Some(ExtDialog {
            id: text("id"),
            title: text("title"),
            message: text("message"),
            text: if kind == DialogKind::Editor {
                text("prefill")
            } else {
                String::new()
            },
            kind,
            selected: 0,
        })
    }

    /// The answer for the extension: `confirmed`, `value` or `cancelled` (RPC's shapes).
    fn answer(&self, fields: Value) -> Value {
        let mut answer = json!({"type": "extension_ui_response", "id": self.id});
        if let (Value::Object(a), Value::Object(f)) = (&mut answer, fields) {
            a.extend(f);
        }
        answer
    }

    /// Handles one key; `Some(answer)` when the dialog is done.
    pub fn key(&mut self, keys: &Keymap, k: &crossterm::event::KeyEvent) -> Option<Value> {
        use crossterm::event::{KeyCode, KeyModifiers};
        match &self.kind {
            DialogKind::Confirm | DialogKind::Select(_) => {
                let mut view = self.view();
                let outcome = view.key(keys, k);
                self.selected = view.selected;
                match (outcome, &self.kind) {
                    (ConfirmOutcome::Open, _) => None,
                    (ConfirmOutcome::Chosen(i), DialogKind::Confirm) => {
                        Some(self.answer(json!({"confirmed": i == 0})))
                    }
                    (ConfirmOutcome::Chosen(i), DialogKind::Select(options)) => {
                        let value = options.get(i).cloned().unwrap_or_default();
                        Some(self.answer(json!({ "value": value })))
                    }
                    _ => Some(self.answer(json!({"cancelled": true}))),
                }
            }
            DialogKind::Input { .. } | DialogKind::Editor => {
                if keys.matches("tui.select.cancel", k) {
                    return Some(self.answer(json!({"cancelled": true})));
                }
                let editor = self.kind == DialogKind::Editor;
                if editor && keys.matches("tui.input.newLine", k) {
                    self.text.push('\n');
                    return None;
                }
                if keys.matches("tui.input.submit", k) || keys.matches("tui.select.confirm", k) {
                    return Some(self.answer(json!({ "value": self.text })));
                }
                match k.code {
                    KeyCode::Backspace => {
                        self.text.pop();
                    }
                    KeyCode::Char(c)
                        if !k
                            .modifiers
                            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
                    {
                        self.text.push(c)
                    }
                    _ => {}
                }
                None
            }
        }
    }

    /// Pasted text goes into an input or editor dialog.
    pub fn paste(&mut self, text: &str) {
        match self.kind {
            DialogKind::Input { .. } => self.text.push_str(&text.replace(['\r', '\n'], " ")),
            DialogKind::Editor => self.text.push_str(text),
            _ => {}
        }
    }

    /// The dialog as the question widget draws it: the options of a choice, or the text
    /// typed so far (with a cursor) under the message.
    pub fn view(&self) -> Confirm {
        let mut message = self.message.clone();
        let options: Vec<(String, Option<super::app::Effect>)> = match &self.kind {
            DialogKind::Confirm => vec![("Yes".into(), None), ("No".into(), None)],
            DialogKind::Select(options) => options.iter().map(|o| (o.clone(), None)).collect(),
            DialogKind::Input { placeholder } => {
                let shown = if self.text.is_empty() && !placeholder.is_empty() {
                    placeholder.clone()
                } else {
                    format!("> {}█", self.text)
                };
                push_line(&mut message, &shown);
                Vec::new()
            }
            DialogKind::Editor => {
                push_line(&mut message, &format!("{}█", self.text));
                push_line(&mut message, "(enter to submit, escape to cancel)");
                Vec::new()
            }
        };
        Confirm {
            title: self.title.clone(),
            message,
            options,
            cancelled: String::new(),
            selected: self.selected,
        }
    }
}

fn push_line(message: &mut String, line: &str) {
    if !message.is_empty() {
        message.push('\n');
    }
    message.push_str(line);
}

/// Text lines from `setWidget`/`setHeader`/`setFooter` content (string lines; `null`
/// clears).
fn lines_of(v: Option<&Value>) -> Option<Vec<String>> {
    let lines: Vec<String> = v?
        .as_array()?
        .iter()
        .map(|l| l.as_str().unwrap_or("").to_string())
        .collect();
    Some(lines)
}

/// Sets (or with `None` removes) `key`'s value in an ordered list.
fn set_keyed<T>(list: &mut Vec<(String, T)>, key: &str, value: Option<T>) {
    match (list.iter().position(|(k, _)| k == key), value) {
        (Some(i), Some(v)) => list[i].1 = v,
        (Some(i), None) => {
            list.remove(i);
        }
        (None, Some(v)) => list.push((key.to_string(), v)),
        (None, None) => {}
    }
}

/// Applies one extension record to the screen.
pub fn apply(app: &mut App, record: &Value) {
    let text = |k: &str| record.get(k).and_then(Value::as_str).unwrap_or("");
    if record.get("type").and_then(Value::as_str)
        == Some(crate::modes::extensions::EXTENSIONS_REPLACED)
    {
        app.ext_ui.clear_drawn();
        return;
    }
    if record.get("type").and_then(Value::as_str) == Some("extension_error") {
        let path = record
            .get("extensionPath")
            .and_then(Value::as_str)
            .unwrap_or("extension");
        let error = record
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("failed");
        app.notice(format!("Extension error ({path}): {error}"));
        return;
    }
    match text("method") {
        "notify" => match text("notifyType") {
            "error" => app
                .transcript
                .push(Item::Error(text("message").to_string())),
            _ => app.notice(text("message").to_string()),
        },
        "setStatus" => {
            let status = record
                .get("statusText")
                .and_then(Value::as_str)
                .map(str::to_string);
            set_keyed(&mut app.ext_ui.statuses, text("statusKey"), status);
        }
        "setWidget" => {
            let key = text("widgetKey").to_string();
            let lines = lines_of(record.get("widgetLines"));
            // A key lives in one place: moving it removes it from the other.
            set_keyed(&mut app.ext_ui.above, &key, None);
            set_keyed(&mut app.ext_ui.below, &key, None);
            if text("widgetPlacement") == "belowEditor" {
                set_keyed(&mut app.ext_ui.below, &key, lines);
            } else {
                set_keyed(&mut app.ext_ui.above, &key, lines);
            }
        }
        "setHeader" => app.ext_ui.header = lines_of(record.get("lines")).unwrap_or_default(),
        "setFooter" => app.ext_ui.footer = lines_of(record.get("lines")).unwrap_or_default(),
        "setTitle" => app.ext_ui.title = Some(text("title").to_string()),
        "set_editor_text" => app.editor.set_text(text("text")),
        _ => {
            if let Some(dialog) = ExtDialog::from_request(record) {
                app.ext_ui.waiting.push_back(dialog);
            }
        }
    }
}

/// Opens the next waiting extension dialog when no other dialog is open.
pub fn open_next(app: &mut App) {
    if app.dialog.is_none() {
        if let Some(d) = app.ext_ui.waiting.pop_front() {
            app.dialog = Some(super::dialogs::Dialog::Extension(Box::new(d)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::app::{update, Effect, Msg};
    use crate::tui::dialogs::Dialog;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use std::path::PathBuf;

    fn key(app: &mut App, code: KeyCode) -> Vec<Effect> {
        update(app, Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)))
    }

    fn ask(app: &mut App, request: Value) {
        update(app, Msg::Extension(request));
        open_next(app);
    }

    #[test]
    fn a_select_answers_the_chosen_option_and_the_next_dialog_waits_its_turn() {
        let mut app = App::new(PathBuf::from("/tmp"));
        ask(
            &mut app,
            json!({"type": "extension_ui_request", "id": "a", "method": "select",
                   "title": "Pick", "options": ["red", "green"]}),
        );
        ask(
            &mut app,
            json!({"type": "extension_ui_request", "id": "b", "method": "input",
                   "title": "Name", "placeholder": "who"}),
        );
        assert!(matches!(&app.dialog, Some(Dialog::Extension(d)) if d.id == "a"));
        key(&mut app, KeyCode::Down);
        let out = key(&mut app, KeyCode::Enter);
        assert_eq!(
            out,
            [Effect::ExtensionAnswer(
                json!({"type": "extension_ui_response", "id": "a", "value": "green"})
            )]
        );
        open_next(&mut app);
        assert!(matches!(&app.dialog, Some(Dialog::Extension(d)) if d.id == "b"));
        for c in "Ada".chars() {
            key(&mut app, KeyCode::Char(c));
        }
        key(&mut app, KeyCode::Backspace);
        let out = key(&mut app, KeyCode::Enter);
        assert_eq!(
            out,
            [Effect::ExtensionAnswer(
                json!({"type": "extension_ui_response", "id": "b", "value": "Ad"})
            )]
        );
    }

    #[test]
    fn escape_cancels_and_a_confirm_answers_yes_or_no() {
        let mut app = App::new(PathBuf::from("/tmp"));
        let confirm = json!({"type": "extension_ui_request", "id": "c", "method": "confirm",
                             "title": "Sure?", "message": "Really"});
        ask(&mut app, confirm.clone());
        key(&mut app, KeyCode::Down);
        let out = key(&mut app, KeyCode::Enter);
        assert_eq!(
            out,
            [Effect::ExtensionAnswer(
                json!({"type": "extension_ui_response", "id": "c", "confirmed": false})
            )]
        );
        ask(&mut app, confirm);
        let out = key(&mut app, KeyCode::Esc);
        assert_eq!(
            out,
            [Effect::ExtensionAnswer(
                json!({"type": "extension_ui_response", "id": "c", "cancelled": true})
            )]
        );
        assert!(app.dialog.is_none());
    }

    #[test]
    fn status_widgets_header_and_footer_are_kept_by_key_and_cleared() {
        let mut app = App::new(PathBuf::from("/tmp"));
        let rec = Msg::Extension;
        update(
            &mut app,
            rec(json!({"method": "setStatus", "statusKey": "a", "statusText": "A"})),
        );
        update(
            &mut app,
            rec(json!({"method": "setStatus", "statusKey": "b", "statusText": "B"})),
        );
        update(
            &mut app,
            rec(json!({"method": "setWidget", "widgetKey": "w", "widgetLines": ["one", "two"]})),
        );
        update(
            &mut app,
            rec(
                json!({"method": "setWidget", "widgetKey": "v", "widgetLines": ["low"],
                                    "widgetPlacement": "belowEditor"}),
            ),
        );
        update(
            &mut app,
            rec(json!({"method": "setHeader", "lines": ["head"]})),
        );
        update(
            &mut app,
            rec(json!({"method": "setFooter", "lines": ["foot"]})),
        );
        assert_eq!(app.ext_ui.above_lines(), ["one", "two"]);
        assert_eq!(app.ext_ui.below_lines(), ["low", "A  B"]);
        assert_eq!(app.ext_ui.header, ["head"]);
        assert_eq!(app.ext_ui.footer, ["foot"]);
        update(
            &mut app,
            rec(json!({"method": "setStatus", "statusKey": "a"})),
        );
        update(
            &mut app,
            rec(json!({"method": "setWidget", "widgetKey": "v"})),
        );
        assert_eq!(app.ext_ui.below_lines(), ["B"]);
        // Drawn: every line is on the screen.
        let area = ratatui::layout::Rect::new(0, 0, 60, 20);
        let mut buf = ratatui::buffer::Buffer::empty(area);
        crate::tui::render::draw_into(&app, area, &mut buf);
        let screen: String = (0..area.height)
            .map(|y| {
                (0..area.width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
                    + "\n"
            })
            .collect();
        for text in ["one", "two", "B", "head", "foot"] {
            assert!(screen.contains(text), "{text} missing:\n{screen}");
        }
    }
}
