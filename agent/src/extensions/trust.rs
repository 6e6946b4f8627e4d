//! Dialogs of `project_trust` handlers. Pi 1.6.0 gives those handlers a context of their
//! own (`cwd`, `mode`, `hasUI`, `ui.select` / `confirm` / `input` / `notify`); in the
//! interactive mode's start its dialogs are start-up screens shown before the session's
//! (`showStartupSelector`, `showStartupInput`); when a session replacement enters another
//! directory they are the running screen's dialogs and notices (its
//! `createProjectTrustContext`). The sidecar asks them as `trust_dialog` requests, answered
//! here through the front end's [`TrustDialog`].

use std::sync::Arc;

use serde_json::{json, Value};

use super::{lock, Shared};

/// A question of a `project_trust` handler: `select` (its options), `confirm` (its title
/// and message as the title, "Yes" / "No") or `input` (a line of text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustQuestion {
    pub title: String,
    /// The choices (`select`, `confirm`); empty for `input`.
    pub options: Vec<String>,
    /// A line of text is asked (`input`).
    pub input: bool,
    pub placeholder: Option<String>,
    /// `notify`: a notice of this type (`info`, `warning`, `error`) with `title` as its
    /// text, answered at once; the interactive screen shows it, a start-up screen does not
    /// (as in Pi).
    pub notify: Option<String>,
}

/// Asks a [`TrustQuestion`] (blocking, on the terminal): the chosen option or the text
/// typed, `None` when the user cancelled.
pub type TrustDialog = Arc<dyn Fn(TrustQuestion) -> Option<String> + Send + Sync>;

/// A `trust_dialog` request: asked off the runtime's threads, answered `{value}` (or `null`
/// when cancelled or when no dialog is set).
pub(super) fn dialog(shared: &Arc<Shared>, params: &Value, id: Value) {
    let text = |k: &str| params.get(k).and_then(Value::as_str).map(str::to_string);
    let question = TrustQuestion {
        title: text("title").unwrap_or_default(),
        options: params
            .get("options")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|o| o.as_str().map(str::to_string))
            .collect(),
        input: params.get("input").and_then(Value::as_bool) == Some(true),
        placeholder: text("placeholder"),
        notify: (params.get("notify").and_then(Value::as_bool) == Some(true))
            .then(|| text("type").unwrap_or_else(|| "info".into())),
    };
    let ask = lock(&shared.trust_dialog).clone();
    let shared = shared.clone();
    shared.runtime.clone().spawn(async move {
        let answer = match ask {
            Some(ask) => tokio::task::spawn_blocking(move || ask(question))
                .await
                .ok()
                .flatten(),
            None => None,
        };
        shared.answer_sidecar(id, answer.map_or(Value::Null, |v| json!({ "value": v })));
    });
}
