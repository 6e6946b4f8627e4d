//! `/login`'s provider list and API-key dialog, as Pi 1.6.0 shows them: "Select provider to
//! configure:" with a search line, then "Login to <provider>" asking the provider's questions
//! one by one (the flows of [`crate::commands::api_key_flow`]; Vertex and Bedrock first ask
//! for a method in a selector titled by the question). As in Pi's dialog the typed answer is
//! shown as typed (only `pi auth login` hides secrets), and an answered question stays above
//! the next as `> answer`. Both are drawn as the question widget ([`Confirm`]), as is a
//! running extension login's question ([`LoginQuestion`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use pi_agent::llm::oauth::LoginPrompt;
use serde_json::Value;
use tokio::sync::oneshot;

use super::app::Effect;
use super::dialogs::Confirm;
use super::keys::Keymap;
use crate::commands::api_key_flow::{Answers, Choice, Step, Target};

/// Rows the provider list shows at once (Pi's selector shows eight).
const VISIBLE_ROWS: usize = 8;

/// What a key did to a login dialog.
#[derive(Debug, Clone, PartialEq)]
pub enum LoginKey {
    /// Still open.
    Open,
    /// Escape: closed without doing anything.
    Closed,
    /// Escape at a text question: closed, with Pi's error for the abandoned login.
    Failed(String),
    /// A provider was chosen: what to do next.
    Run(Effect),
    /// Every question is answered: store this credential.
    Save {
        provider: String,
        name: String,
        credential: Value,
    },
}

/// One provider of the list.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderRow {
    pub name: String,
    pub id: String,
    /// What choosing it does.
    pub effect: Effect,
}

/// "Select provider to configure:": a search line over the providers.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderPicker {
    pub rows: Vec<ProviderRow>,
    pub query: String,
    pub selected: usize,
}

/// Pi's preferred partner providers, most preferred first: its provider lists show them
/// first, marked, then every other provider by name.
const PREFERRED_PROVIDERS: [&str; 2] = ["radius", "openrouter"];

/// Where a provider sorts among the preferred ones (all others share the last rank).
fn preferred_rank(id: &str) -> usize {
    PREFERRED_PROVIDERS
        .iter()
        .position(|p| *p == id)
        .unwrap_or(PREFERRED_PROVIDERS.len())
}

impl ProviderPicker {
    pub fn new(mut rows: Vec<ProviderRow>) -> ProviderPicker {
        // Stable, as Pi's sort: rows of one provider keep their order.
        rows.sort_by(|a, b| {
            preferred_rank(&a.id)
                .cmp(&preferred_rank(&b.id))
                .then_with(|| pi_agent::collation::locale_compare(&a.name, &b.name))
        });
        ProviderPicker {
            rows,
            query: String::new(),
            selected: 0,
        }
    }

    /// The rows whose name or id contains the query, ignoring case.
    fn filtered(&self) -> Vec<&ProviderRow> {
        let q = self.query.to_lowercase();
        self.rows
            .iter()
            .filter(|r| r.name.to_lowercase().contains(&q) || r.id.to_lowercase().contains(&q))
            .collect()
    }

    fn key(&mut self, keys: &Keymap, k: &KeyEvent) -> LoginKey {
        let len = self.filtered().len();
        if keys.matches("tui.select.cancel", k) {
            // Back to "Select authentication method:", which opened the list.
            return LoginKey::Run(Effect::OpenLoginMethods);
        }
        if keys.matches("tui.select.confirm", k) {
            return match self.filtered().get(self.selected) {
                Some(row) => LoginKey::Run(row.effect.clone()),
                None => LoginKey::Open,
            };
        }
        if len > 0 && keys.matches("tui.select.up", k) {
            self.selected = (self.selected + len - 1) % len;
        } else if len > 0 && keys.matches("tui.select.down", k) {
            self.selected = (self.selected + 1) % len;
        } else if edit_text(&mut self.query, k) {
            self.selected = 0;
        }
        LoginKey::Open
    }

    fn view(&self) -> Confirm {
        let list = self.filtered();
        let start = self
            .selected
            .saturating_sub(VISIBLE_ROWS - 1)
            .min(list.len().saturating_sub(VISIBLE_ROWS));
        let mut options: Vec<(String, Option<Effect>)> = list
            .iter()
            .skip(start)
            .take(VISIBLE_ROWS)
            .map(|r| {
                let mark = if preferred_rank(&r.id) < PREFERRED_PROVIDERS.len() {
                    " ✦"
                } else {
                    ""
                };
                (format!("{}{mark}", r.name), None)
            })
            .collect();
        if list.is_empty() {
            options.push(("No matching providers".into(), None));
        } else if list.len() > VISIBLE_ROWS {
            options.push((format!("({}/{})", self.selected + 1, list.len()), None));
        }
        Confirm {
            title: "Select provider to configure:".into(),
            message: format!("> {}█", self.query),
            options,
            cancelled: String::new(),
            selected: self.selected - start,
        }
    }
}

/// The question on screen.
#[derive(Debug, Clone, PartialEq)]
enum Current {
    Ask {
        message: String,
        into: Target,
    },
    Choose {
        message: String,
        options: Vec<Choice>,
    },
}

/// "Login to <provider>": the questions of its API-key login, one at a time.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiKeyForm {
    provider: String,
    name: String,
    /// Steps not reached yet.
    pending: VecDeque<Step>,
    current: Option<Current>,
    answers: Answers,
    /// Information and answered questions, shown above the current question.
    shown: Vec<String>,
    input: String,
    selected: usize,
    /// What escape at a choice of method reopens: the provider list the form was picked
    /// from (Pi's `onBack`); `None` closes the form.
    back: Option<Effect>,
}

impl ApiKeyForm {
    /// The form for `provider`'s `steps`, at its first question.
    pub fn new(provider: &str, name: &str, steps: Vec<Step>, back: Option<Effect>) -> ApiKeyForm {
        let mut form = ApiKeyForm {
            back,
            provider: provider.to_string(),
            name: name.to_string(),
            pending: steps.into(),
            current: None,
            answers: Answers::default(),
            shown: Vec::new(),
            input: String::new(),
            selected: 0,
        };
        // Pi's Bedrock dialog opens with where else its credentials can come from.
        if provider == "amazon-bedrock" {
            form.shown.push(
                "You can also use an AWS profile, IAM keys, or role-based credentials.".into(),
            );
        }
        form.advance();
        form
    }

    /// Moves to the next question, showing information on the way.
    fn advance(&mut self) {
        self.current = None;
        self.input.clear();
        self.selected = 0;
        while let Some(step) = self.pending.pop_front() {
            match step {
                Step::Info { message, links } => {
                    self.shown.push(message);
                    self.shown.extend(
                        links
                            .into_iter()
                            .map(|(label, url)| format!("{label}: {url}")),
                    );
                }
                Step::Ask { message, into, .. } => {
                    self.current = Some(Current::Ask { message, into });
                    return;
                }
                Step::Choose { message, options } => {
                    self.current = Some(Current::Choose { message, options });
                    return;
                }
            }
        }
    }

    fn key(&mut self, keys: &Keymap, k: &KeyEvent) -> LoginKey {
        if keys.matches("tui.select.cancel", k) {
            // As in Pi: escape at a choice cancels the login and goes back to where it was
            // started; at a text question it aborts the login, which Pi reports as a failure.
            return match (&self.current, &self.back) {
                (Some(Current::Choose { .. }), Some(back)) => LoginKey::Run(back.clone()),
                (Some(Current::Choose { .. }), None) => LoginKey::Closed,
                _ => LoginKey::Failed(format!(
                    "Failed to save API key for {}: This operation was aborted",
                    self.name
                )),
            };
        }
        match &self.current {
            Some(Current::Choose { options, .. }) => {
                let len = options.len();
                if keys.matches("tui.select.confirm", k) {
                    let Some(choice) = options.get(self.selected).cloned() else {
                        return LoginKey::Open;
                    };
                    for step in choice.steps.into_iter().rev() {
                        self.pending.push_front(step);
                    }
                    self.advance();
                } else if len > 0 && keys.matches("tui.select.up", k) {
                    self.selected = (self.selected + len - 1) % len;
                } else if len > 0 && keys.matches("tui.select.down", k) {
                    self.selected = (self.selected + 1) % len;
                }
            }
            Some(Current::Ask { message, into }) => {
                if keys.matches("tui.input.submit", k) || keys.matches("tui.select.confirm", k) {
                    let answer = std::mem::take(&mut self.input);
                    self.shown.push(message.clone());
                    self.shown.push(format!("> {answer}"));
                    let into = into.clone();
                    self.answers.record(&into, answer);
                    self.advance();
                } else {
                    edit_text(&mut self.input, k);
                }
            }
            None => {}
        }
        if self.current.is_none() {
            return LoginKey::Save {
                provider: self.provider.clone(),
                name: self.name.clone(),
                credential: std::mem::take(&mut self.answers).credential(),
            };
        }
        LoginKey::Open
    }

    pub fn paste(&mut self, text: &str) {
        if matches!(self.current, Some(Current::Ask { .. })) {
            self.input.push_str(&text.replace(['\r', '\n'], ""));
        }
    }

    fn view(&self) -> Confirm {
        match &self.current {
            Some(Current::Choose { message, options }) => Confirm {
                title: message.clone(),
                message: String::new(),
                options: options.iter().map(|o| (o.label.clone(), None)).collect(),
                cancelled: String::new(),
                selected: self.selected,
            },
            _ => {
                let mut lines = self.shown.clone();
                if let Some(Current::Ask { message, .. }) = &self.current {
                    lines.push(message.clone());
                    lines.push(format!("> {}█", self.input));
                    lines.push("(escape to cancel, enter to submit)".into());
                }
                Confirm {
                    title: format!("Login to {}", self.name),
                    message: lines.join("\n"),
                    options: Vec::new(),
                    cancelled: String::new(),
                    selected: 0,
                }
            }
        }
    }
}

/// Where the answer to a running login's question goes (once); dropping every copy
/// unanswered cancels the question.
#[derive(Clone)]
pub struct LoginReply(Arc<ReplySlot>);

/// The answer's way back until it is sent.
type ReplySlot = Mutex<Option<oneshot::Sender<Option<String>>>>;

impl LoginReply {
    /// A reply and the receiver its answer arrives at.
    pub fn channel() -> (LoginReply, oneshot::Receiver<Option<String>>) {
        let (tx, rx) = oneshot::channel();
        (LoginReply(Arc::new(Mutex::new(Some(tx)))), rx)
    }

    /// Answers the question (`None`: cancelled).
    fn send(&self, answer: Option<String>) {
        let tx = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(tx) = tx {
            let _ = tx.send(answer);
        }
    }
}

impl std::fmt::Debug for LoginReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoginReply")
    }
}

impl PartialEq for LoginReply {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// A question an extension's login asks (`onPrompt`, `onManualCodeInput`, `onSelect`), in
/// Pi's login dialog: "Login to <provider>" with what the login showed so far (its
/// authorize URL and instructions, progress, earlier answers), then the question and its
/// input line; a `select` is a selector titled by the question. Enter answers, escape
/// cancels the login.
#[derive(Debug, Clone, PartialEq)]
pub struct LoginQuestion {
    pub title: String,
    pub shown: Vec<String>,
    pub prompt: LoginPrompt,
    pub input: String,
    pub selected: usize,
    pub reply: LoginReply,
}

impl LoginQuestion {
    fn key(&mut self, keys: &Keymap, k: &KeyEvent) -> LoginKey {
        if keys.matches("tui.select.cancel", k) {
            self.reply.send(None);
            return LoginKey::Closed;
        }
        if self.prompt.kind == "select" {
            let len = self.prompt.options.len();
            if keys.matches("tui.select.confirm", k) {
                let id = self.prompt.options.get(self.selected).map(|o| o.id.clone());
                self.reply.send(id);
                return LoginKey::Closed;
            }
            if len > 0 && keys.matches("tui.select.up", k) {
                self.selected = (self.selected + len - 1) % len;
            } else if len > 0 && keys.matches("tui.select.down", k) {
                self.selected = (self.selected + 1) % len;
            }
            return LoginKey::Open;
        }
        if keys.matches("tui.input.submit", k) || keys.matches("tui.select.confirm", k) {
            self.reply.send(Some(std::mem::take(&mut self.input)));
            return LoginKey::Closed;
        }
        edit_text(&mut self.input, k);
        LoginKey::Open
    }

    fn view(&self) -> Confirm {
        if self.prompt.kind == "select" {
            return Confirm {
                title: self.prompt.message.clone(),
                message: String::new(),
                options: self
                    .prompt
                    .options
                    .iter()
                    .map(|o| (o.label.clone(), None))
                    .collect(),
                cancelled: String::new(),
                selected: self.selected,
            };
        }
        let mut lines = self.shown.clone();
        lines.push(self.prompt.message.clone());
        if let Some(placeholder) = &self.prompt.placeholder {
            lines.push(format!("e.g., {placeholder}"));
        }
        lines.push(format!("> {}█", self.input));
        lines.push(if self.prompt.kind == "manual_code" {
            "(escape to cancel)".into()
        } else {
            "(escape to cancel, enter to submit)".into()
        });
        Confirm {
            title: self.title.clone(),
            message: lines.join("\n"),
            options: Vec::new(),
            cancelled: String::new(),
            selected: 0,
        }
    }
}

/// `/login`'s dialogs after the method selector.
#[derive(Debug, Clone, PartialEq)]
pub enum LoginDialog {
    Providers(ProviderPicker),
    Form(Box<ApiKeyForm>),
    /// A running extension login's question.
    Question(Box<LoginQuestion>),
}

impl LoginDialog {
    pub fn key(&mut self, keys: &Keymap, k: &KeyEvent) -> LoginKey {
        match self {
            LoginDialog::Providers(p) => p.key(keys, k),
            LoginDialog::Form(f) => f.key(keys, k),
            LoginDialog::Question(q) => q.key(keys, k),
        }
    }

    pub fn paste(&mut self, text: &str) {
        match self {
            LoginDialog::Providers(p) => {
                p.query.push_str(&text.replace(['\r', '\n'], ""));
                p.selected = 0;
            }
            LoginDialog::Form(f) => f.paste(text),
            LoginDialog::Question(q) => {
                if q.prompt.kind != "select" {
                    q.input.push_str(&text.replace(['\r', '\n'], ""));
                }
            }
        }
    }

    /// The dialog as the question widget draws it.
    pub fn view(&self) -> Confirm {
        match self {
            LoginDialog::Providers(p) => p.view(),
            LoginDialog::Form(f) => f.view(),
            LoginDialog::Question(q) => q.view(),
        }
    }
}

/// Typing and Backspace in a one-line field; `true` when the text changed.
fn edit_text(text: &mut String, k: &KeyEvent) -> bool {
    match k.code {
        KeyCode::Backspace => text.pop().is_some(),
        KeyCode::Char(c)
            if !k
                .modifiers
                .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT) =>
        {
            text.push(c);
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn press(form: &mut ApiKeyForm, keys: &Keymap, code: KeyCode) -> LoginKey {
        form.key(keys, &KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn type_in(form: &mut ApiKeyForm, keys: &Keymap, text: &str) {
        for c in text.chars() {
            assert_eq!(press(form, keys, KeyCode::Char(c)), LoginKey::Open);
        }
    }

    fn question(kind: &str) -> (LoginQuestion, oneshot::Receiver<Option<String>>) {
        let (reply, answer) = LoginReply::channel();
        let prompt = LoginPrompt {
            kind: kind.into(),
            message: "Enter the code:".into(),
            placeholder: Some("123456".into()),
            options: ["a", "b"]
                .iter()
                .map(|id| pi_agent::llm::oauth::LoginOption {
                    id: format!("id-{id}"),
                    label: format!("Option {id}"),
                    description: None,
                })
                .collect(),
        };
        let q = LoginQuestion {
            title: "Login to Corp".into(),
            shown: vec!["https://sso.example.test".into()],
            prompt,
            input: String::new(),
            selected: 0,
            reply,
        };
        (q, answer)
    }

    #[test]
    fn an_extension_logins_questions_are_answered_or_cancelled() {
        let keys = Keymap::default();
        let press =
            |q: &mut LoginQuestion, code| q.key(&keys, &KeyEvent::new(code, KeyModifiers::NONE));
        // A text question: the page shown before it, the placeholder, the typed answer.
        let (mut q, mut answer) = question("text");
        for c in "42".chars() {
            assert_eq!(press(&mut q, KeyCode::Char(c)), LoginKey::Open);
        }
        let view = q.view();
        assert_eq!(view.title, "Login to Corp");
        assert_eq!(
            view.message,
            "https://sso.example.test\nEnter the code:\ne.g., 123456\n> 42█\n(escape to cancel, enter to submit)"
        );
        assert_eq!(press(&mut q, KeyCode::Enter), LoginKey::Closed);
        assert_eq!(answer.try_recv().unwrap(), Some("42".to_string()));
        // A select answers the chosen option's id.
        let (mut q, mut answer) = question("select");
        assert_eq!(q.view().title, "Enter the code:");
        press(&mut q, KeyCode::Down);
        assert_eq!(press(&mut q, KeyCode::Enter), LoginKey::Closed);
        assert_eq!(answer.try_recv().unwrap(), Some("id-b".to_string()));
        // Escape cancels; a question dropped unanswered too.
        let (mut q, mut answer) = question("text");
        assert_eq!(press(&mut q, KeyCode::Esc), LoginKey::Closed);
        assert_eq!(answer.try_recv().unwrap(), None);
        let (q, mut answer) = question("text");
        drop(q);
        assert!(answer.try_recv().is_err());
    }

    #[test]
    fn a_bedrock_profile_is_asked_after_the_method() {
        let keys = Keymap::default();
        let provider = pi_agent::llm::catalog::builtin_catalog()
            .provider("amazon-bedrock")
            .unwrap();
        let steps = crate::commands::api_key_flow::flow(provider).unwrap();
        let mut form = ApiKeyForm::new("amazon-bedrock", "Amazon Bedrock", steps, None);
        assert_eq!(
            form.view().title,
            "Select Amazon Bedrock authentication method:"
        );
        press(&mut form, &keys, KeyCode::Down);
        assert_eq!(press(&mut form, &keys, KeyCode::Enter), LoginKey::Open);
        let view = form.view();
        assert_eq!(view.title, "Login to Amazon Bedrock");
        assert!(
            view.message.contains("Enter AWS profile name\n> █"),
            "{}",
            view.message
        );
        type_in(&mut form, &keys, "dev");
        assert_eq!(
            press(&mut form, &keys, KeyCode::Enter),
            LoginKey::Save {
                provider: "amazon-bedrock".into(),
                name: "Amazon Bedrock".into(),
                credential: json!({"type": "api_key", "env": {"AWS_PROFILE": "dev"}}),
            }
        );
    }
}
