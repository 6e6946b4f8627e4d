//! Pi's `getContextUsage()`: how full the context window of the model in use is, as the
//! footer and `ctx.getContextUsage()` report it.

use pi_engine::compaction::{calculate_context_tokens, estimate_projected_context_tokens};
use pi_engine::context::{self, EntrySource, SessionPath};
use pi_engine::session::Mark;
use serde_json::Value;

use super::{lock, route::limits_model, AgentSession};

/// Context usage of the active branch (Pi's `ContextUsage`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextUsage {
    /// Estimated tokens in context; `None` after a compaction until a response reports
    /// usage again (the last usage then measured the context before it).
    pub tokens: Option<u64>,
    /// The window of the model whose limits apply (for a virtual model, the physical one
    /// that answered last).
    pub context_window: u64,
    /// `tokens` as a percentage of the window.
    pub percent: Option<f64>,
}

/// Whether `message` is a response whose usage measures a real request.
fn has_usable_usage(message: &Value) -> bool {
    let stop = message.get("stopReason").and_then(Value::as_str);
    message.get("role").and_then(Value::as_str) == Some("assistant")
        && stop != Some("aborted")
        && stop != Some("error")
        && message
            .get("usage")
            .is_some_and(|u| calculate_context_tokens(u) > 0)
}

impl AgentSession {
    /// Pi's `getContextUsage()`: `None` without a model or with an unknown window; else
    /// the last usable response's usage plus an estimate of what followed it.
    pub fn context_usage(&self) -> Option<ContextUsage> {
        let st = lock(&self.shared.state);
        let context_window = limits_model(&st)?.context_window;
        if context_window == 0 {
            return None;
        }
        let s = &st.session;
        let branch = s.branch_path();
        let path = SessionPath::of(s, &branch);
        let projection = context::project(&path);
        if let Some(compaction) = path.last_mark(Mark::Compaction) {
            let answered_since = projection
                .entries
                .iter()
                .any(|e| e.pos > compaction && e.messages.iter().any(has_usable_usage));
            if !answered_since {
                return Some(ContextUsage {
                    tokens: None,
                    context_window,
                    percent: None,
                });
            }
        }
        let tokens = estimate_projected_context_tokens(&projection, &path).tokens;
        Some(ContextUsage {
            tokens: Some(tokens),
            context_window,
            percent: Some(tokens as f64 / context_window as f64 * 100.0),
        })
    }
}
