//! `/login`'s provider list and API-key dialog, as Pi 1.6.0 shows them: "Select provider to
//! configure:" with a search line, then "Login to <provider>" asking the provider's questions
//! one by one (the flows of [`crate::commands::api_key_flow`]; Vertex and Bedrock first ask
//! for a method in a selector titled by the question). As in Pi's dialog the typed answer is
//! shown as typed (only `pi auth login` hides secrets), and an answered question stays above
//! the next as `> answer`. Both are drawn as the question widget ([`Confirm`]).

use std::collections::VecDeque;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::Value;

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

/// `/login`'s dialogs after the method selector.
#[derive(Debug, Clone, PartialEq)]
pub enum LoginDialog {
    Providers(ProviderPicker),
    Form(Box<ApiKeyForm>),
}

impl LoginDialog {
    pub fn key(&mut self, keys: &Keymap, k: &KeyEvent) -> LoginKey {
        match self {
            LoginDialog::Providers(p) => p.key(keys, k),
            LoginDialog::Form(f) => f.key(keys, k),
        }
    }

    pub fn paste(&mut self, text: &str) {
        match self {
            LoginDialog::Providers(p) => {
                p.query.push_str(&text.replace(['\r', '\n'], ""));
                p.selected = 0;
            }
            LoginDialog::Form(f) => f.paste(text),
        }
    }

    /// The dialog as the question widget draws it.
    pub fn view(&self) -> Confirm {
        match self {
            LoginDialog::Providers(p) => p.view(),
            LoginDialog::Form(f) => f.view(),
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
