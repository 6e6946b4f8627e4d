//! One session's totals, counted exactly as the history index counts them for
//! `pi sessions stats`: the same [`extract`] of each line, the same rows (messages and
//! entries with usage), the same model attribution (a `model_change` names the model of the
//! entries after it). The HTML export shows these, so its figures and `stats` agree.

use std::collections::BTreeMap;

use serde::Serialize;

use super::extract::extract;

/// Counts and sums over one session's entry lines.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionFigures {
    /// `message` entries (every role), as `stats` counts `messages`.
    pub messages: u64,
    /// Messages by role as the index names them: `user`, `assistant`, `tool`, `bash`,
    /// `summary`, `custom`, `system`, `other`.
    pub roles: BTreeMap<String, u64>,
    /// The models of assistant messages, `provider/model` (or `model`), first use first.
    pub models: Vec<String>,
    /// Tool calls in assistant messages.
    pub tool_calls: u64,
    /// Tool results flagged `isError`.
    pub tool_errors: u64,
    /// Assistant messages that ended in an error.
    pub errors: u64,
    /// Input tokens.
    pub input: i64,
    /// Output tokens.
    pub output: i64,
    /// Cache-read tokens.
    pub cache_read: i64,
    /// Cache-write tokens.
    pub cache_write: i64,
    /// `usage.cost.total` summed.
    pub cost: f64,
}

/// Folds the entry lines (header excluded) of one session.
pub fn session_figures<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> SessionFigures {
    let mut f = SessionFigures::default();
    // The model in force, as the index's scan keeps it between lines.
    let mut current: (Option<String>, Option<String>) = (None, None);
    for line in lines {
        let Some(x) = extract(line) else { continue };
        if let Some((p, m)) = &x.model_change {
            current = (Some(p.clone()), Some(m.clone()));
        }
        let provider = x.provider.clone().or_else(|| current.0.clone());
        let model = x.model.clone().or_else(|| current.1.clone());
        if x.message_role == Some("assistant") {
            if x.model.is_some() {
                current = (provider.clone(), model.clone());
            }
            // The index's `by model` key: provider/model, else model.
            let key = match (&provider, &model) {
                (Some(p), Some(m)) => Some(format!("{p}/{m}")),
                (None, Some(m)) => Some(m.clone()),
                _ => None,
            };
            if let Some(key) = key.filter(|k| !f.models.contains(k)) {
                f.models.push(key);
            }
        }
        if !x.has_stats() {
            continue;
        }
        if let Some(role) = x.message_role {
            f.messages += 1;
            *f.roles.entry(role.to_string()).or_default() += 1;
        }
        f.tool_calls += u64::from(x.tool_calls);
        f.tool_errors += u64::from(x.tool_errors);
        f.errors += u64::from(x.error);
        let u = x.usage.unwrap_or_default();
        f.input += u.input;
        f.output += u.output;
        f.cache_read += u.cache_read;
        f.cache_write += u.cache_write;
        f.cost += u.cost;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_roles_usage_and_models_like_the_index() {
        let lines: Vec<&[u8]> = vec![
            br#"{"type":"model_change","id":"m","provider":"p","modelId":"a"}"#,
            br#"{"type":"message","id":"u","message":{"role":"user","content":"hi"}}"#,
            br#"{"type":"message","id":"x","message":{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"bash","arguments":{}}],"usage":{"input":10,"output":2,"cacheRead":1,"cacheWrite":0,"cost":{"total":0.25}},"stopReason":"toolUse"}}"#,
            br#"{"type":"message","id":"t","message":{"role":"toolResult","isError":true,"content":[]}}"#,
            br#"{"type":"message","id":"y","message":{"role":"assistant","provider":"q","model":"b","content":"ok","usage":{"input":5,"output":1,"cost":{"total":0.5}},"stopReason":"error"}}"#,
            br#"{"type":"compaction","id":"c","summary":"s","usage":{"input":3,"output":4}}"#,
            b"{broken",
        ];
        let f = session_figures(lines);
        assert_eq!(f.messages, 4);
        assert_eq!(f.roles.get("assistant"), Some(&2));
        assert_eq!(f.roles.get("tool"), Some(&1));
        assert_eq!(f.models, vec!["p/a".to_string(), "q/b".to_string()]);
        assert_eq!((f.tool_calls, f.tool_errors, f.errors), (1, 1, 1));
        assert_eq!((f.input, f.output, f.cache_read), (18, 7, 1));
        assert!((f.cost - 0.75).abs() < 1e-12);
    }
}
