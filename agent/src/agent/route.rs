//! Virtual models (Pi's `pi.registerVirtualModel`): the session selects one, and before
//! every request made with it the router its extension registered picks the physical model
//! and thinking level that answer. The selection stays in `model_change` /
//! `thinking_level_change` entries; each assistant message names the physical model; the
//! router's own state is kept on the branch in `pi.virtual-model-state` custom entries.

use pi_engine::context::{EntrySource, SessionPath};
use pi_formats::message::{AgentMessage, AssistantMessage, StopReason, ThinkingLevel};
use serde_json::{json, Value};

use super::{lock, AgentSession};
use crate::llm::Model;

/// The custom entry type that keeps router state on the session branch.
pub const VIRTUAL_MODEL_STATE_ENTRY: &str = "pi.virtual-model-state";

/// Why a request is made (`request.reason`), which decides what a router may keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteReason {
    /// The first request after a message the user wrote (prompt, steering, follow-up).
    User,
    /// Any other request of the agent loop (after tool results, extension messages).
    Continuation,
    /// An automatic retry after a failed request, also after an overflow compaction.
    Retry,
    /// A request outside the agent loop (a compaction summary): no router state.
    Direct,
}

impl RouteReason {
    fn as_str(self) -> &'static str {
        match self {
            RouteReason::User => "user",
            RouteReason::Continuation => "continuation",
            RouteReason::Retry => "retry",
            RouteReason::Direct => "direct",
        }
    }
}

/// The physical model and level a request goes to.
#[derive(Debug, Clone)]
pub struct Dispatch {
    /// A physical model with credentials.
    pub model: Model,
    /// The router's level, clamped to what the model supports.
    pub level: ThinkingLevel,
}

/// The latest router state stored on `path` for the virtual model `provider/id`.
fn stored_state<S: EntrySource + ?Sized>(path: &S, provider: &str, id: &str) -> Option<Value> {
    (0..path.len()).rev().find_map(|i| {
        if path.kind(i) != pi_formats::entry::kind::CUSTOM {
            return None;
        }
        let entry = path.value(i);
        if entry.get("customType").and_then(Value::as_str) != Some(VIRTUAL_MODEL_STATE_ENTRY) {
            return None;
        }
        let data = entry.get("data")?;
        (data.get("provider").and_then(Value::as_str) == Some(provider)
            && data.get("modelId").and_then(Value::as_str) == Some(id))
        .then(|| data.get("state").cloned())
        .flatten()
    })
}

/// The latest successful response among `messages` (Pi's `findLatestResponse`).
fn latest_response(messages: &[AgentMessage]) -> Option<&AssistantMessage> {
    messages.iter().rev().find_map(|m| match m {
        AgentMessage::Assistant(a)
            if !matches!(a.stop_reason, StopReason::Error | StopReason::Aborted) =>
        {
            Some(a)
        }
        _ => None,
    })
}

/// The model whose limits (context window, output tokens) apply to the session's context.
/// For a virtual model that is the physical model of the latest response on the branch,
/// even one from before the switch to it; without one, the virtual model's own declared
/// limits (0: unknown, which never triggers a compaction).
pub(super) fn limits_model(st: &super::State) -> Option<Model> {
    let selected = st.opts.model.as_ref()?;
    if !selected.is_virtual() {
        return Some(selected.clone());
    }
    let s = &st.session;
    let branch = s.branch_path();
    let path = SessionPath::of(s, &branch);
    let answered = path
        .last_mark(pi_engine::session::Mark::AssistantMessage)
        .and_then(|i| {
            let entry = path.value(i);
            let message = entry.get("message")?;
            let text = |k: &str| message.get(k).and_then(Value::as_str).map(str::to_string);
            Some((text("provider")?, text("model")?))
        })
        .and_then(|(provider, id)| st.opts.registry.find(&provider, &id).cloned())
        .filter(|m| !m.is_virtual());
    Some(answered.unwrap_or_else(|| selected.clone()))
}

impl AgentSession {
    /// Asks the router of `selected` (a virtual model) where this request goes. `failed` is
    /// the response a retry replaces. The router's new state is written before the request
    /// is sent, so it stays even when the request fails.
    pub(super) async fn route(
        &self,
        selected: &Model,
        level: ThinkingLevel,
        reason: RouteReason,
        failed: Option<&AssistantMessage>,
        messages: &[AgentMessage],
    ) -> Result<Dispatch, String> {
        let name = format!("{}/{}", selected.provider, selected.id);
        let Some(hooks) = self.hooks() else {
            return Err(format!(
                "Virtual model {name} has no router: its extension is not loaded"
            ));
        };
        let (request, registry) = {
            let st = lock(&self.shared.state);
            let registry = st.opts.registry.clone();
            let model_of = |provider: &str, id: &str, api: &str| match registry.find(provider, id) {
                Some(m) => crate::host::views::model_json(m),
                None => json!({"provider": provider, "id": id, "api": api}),
            };
            let mut request = json!({
                "model": crate::host::views::model_json(selected),
                "thinkingLevel": level.as_str(),
                "reason": reason.as_str(),
                "messages": messages
                    .iter()
                    .filter_map(|m| serde_json::to_value(m).ok())
                    .collect::<Vec<_>>(),
            });
            if let Some(previous) = latest_response(messages) {
                request["previous"] = json!({
                    "model": model_of(&previous.provider, &previous.model, &previous.api),
                    "thinkingLevel": previous.thinking_level.map(ThinkingLevel::as_str),
                });
            }
            if let Some(failed) = failed {
                request["failed"] = json!({
                    "model": model_of(&failed.provider, &failed.model, &failed.api),
                    "thinkingLevel": failed.thinking_level.map(ThinkingLevel::as_str),
                    "message": serde_json::to_value(failed).unwrap_or(Value::Null),
                });
            }
            if reason != RouteReason::Direct {
                let s = &st.session;
                let branch = s.branch_path();
                let path = SessionPath::of(s, &branch);
                if let Some(state) = stored_state(&path, &selected.provider, &selected.id) {
                    request["state"] = state;
                }
            }
            (request, registry)
        };
        let choice = hooks.route(request).await?;
        let text = |k: &str| choice.get(k).and_then(Value::as_str).unwrap_or("");
        let (provider, id) = (text("provider"), text("id"));
        let Some(model) = registry.find(provider, id).cloned() else {
            return Err(format!(
                "Router of {name} chose {provider}/{id}, which is not in the model catalog"
            ));
        };
        if model.is_virtual() {
            return Err(format!(
                "Router of {name} chose {provider}/{id}: a virtual model cannot route to another virtual model"
            ));
        }
        if !self.has_credentials(provider) {
            return Err(format!(
                "Router of {name} chose {provider}/{id}, but no API key is configured for {provider}"
            ));
        }
        let wanted = ThinkingLevel::parse(text("thinkingLevel")).unwrap_or(level);
        let level = if model.reasoning {
            model.clamp_thinking_level(wanted)
        } else {
            ThinkingLevel::Off
        };
        let changed = choice.get("stateChanged").and_then(Value::as_bool) == Some(true);
        if changed && reason != RouteReason::Direct {
            let data = json!({
                "provider": selected.provider,
                "modelId": selected.id,
                "state": choice.get("state").cloned().unwrap_or(Value::Null),
            });
            self.append_state(data)
                .map_err(|e| format!("cannot store the router state of {name}: {e}"))?;
        }
        Ok(Dispatch { model, level })
    }

    /// Where a request outside the agent loop goes (a compaction or branch summary): with a
    /// virtual model selected, its router's choice for a `direct` request, which has no
    /// router state; `None` for a physical model.
    pub(super) async fn direct_route(&self) -> Result<Option<Dispatch>, String> {
        let (model, level) = {
            let st = lock(&self.shared.state);
            (st.opts.model.clone(), st.opts.thinking)
        };
        let Some(model) = model.filter(Model::is_virtual) else {
            return Ok(None);
        };
        let messages: Vec<AgentMessage> = self
            .messages()
            .into_iter()
            .filter_map(|m| serde_json::from_value(m).ok())
            .collect();
        self.route(&model, level, RouteReason::Direct, None, &messages)
            .await
            .map(Some)
    }

    fn append_state(&self, data: Value) -> Result<(), super::AgentError> {
        self.append_custom_entry_data(VIRTUAL_MODEL_STATE_ENTRY, data)
    }

    /// The key and headers a request to `provider` is sent with (Pi's
    /// `modelRegistry.complete` resolves them for the extension).
    pub(crate) fn provider_auth(
        &self,
        provider: &str,
    ) -> (Option<String>, std::collections::BTreeMap<String, String>) {
        let st = lock(&self.shared.state);
        let key = st.opts.api_key_for(provider);
        let headers = st.opts.registry.resolve_headers(provider, key.as_deref());
        (key, headers)
    }

    /// Whether a request to `provider` can be sent: a key, or headers that authenticate.
    pub(super) fn has_credentials(&self, provider: &str) -> bool {
        // A provider object says itself whether it is configured (Pi's `checkAuth` before a
        // prompt): its `auth.apiKey.check`, not its key; `--api-key` and models.json's
        // `apiKey` still count. The request resolves the key afterwards.
        let owned = crate::llm::provider_auth::check_blocking(provider);
        let st = lock(&self.shared.state);
        if let Some(checked) = owned {
            return matches!(checked, Ok(true))
                || st.opts.api_key.is_some()
                || st.opts.registry.resolve_api_key(provider).is_some();
        }
        st.opts.api_key_for(provider).is_some()
            || !st.opts.registry.resolve_headers(provider, None).is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn custom(provider: &str, id: &str, state: Value) -> Value {
        json!({"type": "custom", "customType": VIRTUAL_MODEL_STATE_ENTRY, "id": "x",
               "data": {"provider": provider, "modelId": id, "state": state}})
    }

    #[test]
    fn the_latest_state_of_the_same_virtual_model_counts() {
        let path = vec![
            custom("router", "auto", json!({"n": 1})),
            custom("other", "auto", json!({"n": 9})),
            json!({"type": "custom", "customType": "todo", "data": {"n": 5}}),
            custom("router", "auto", json!({"n": 2})),
            custom("router", "phased", json!({"n": 3})),
        ];
        assert_eq!(
            stored_state(path.as_slice(), "router", "auto"),
            Some(json!({"n": 2}))
        );
        assert_eq!(
            stored_state(path.as_slice(), "router", "phased"),
            Some(json!({"n": 3}))
        );
        assert_eq!(stored_state(path.as_slice(), "router", "none"), None);
    }
}
