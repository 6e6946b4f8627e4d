//! The tool calls a tool makes while it runs (codemode's `tools.x()`), recorded for the
//! model-issued call's result message as Pi records them in `nestedCalls`:
//! `{calls: [{id, name, status, arguments | argumentsBytes, durationMs, error?}], complete}`.
//! Arguments over 8 KiB for one call or 32 KiB in all are left out (their size is kept),
//! calls past 256 are dropped, and either makes the record incomplete. The `usage` of every
//! nested result (dropped calls' included) is summed for the result message's `usage`.

use std::sync::Mutex;
use std::time::Instant;

use serde_json::json;
use serde_json::Map;
use serde_json::Value;

const MAX_CALLS: usize = 256;
const MAX_ARGUMENT_BYTES_PER_CALL: usize = 8 * 1024;
const MAX_ARGUMENT_BYTES_TOTAL: usize = 32 * 1024;
const MAX_ERROR_CHARS: usize = 500;

/// The nested calls of one model-issued tool call.
#[derive(Debug, Default)]
pub struct NestedCallRecorder {
    state: Mutex<Recorded>,
}

#[derive(Debug, Default)]
struct Recorded {
    calls: Vec<(Map<String, Value>, Option<Instant>)>,
    argument_bytes: usize,
    incomplete: bool,
    usage: Option<Value>,
}

/// A started call, to finish with [`NestedCallRecorder::finish`]; `None` when it was dropped.
#[derive(Debug, Clone, Copy)]
pub struct NestedCallSlot(Option<usize>);

impl NestedCallRecorder {
    /// Records a call as it starts.
    pub fn start(&self, id: &str, name: &str, arguments: &Value) -> NestedCallSlot {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.calls.len() >= MAX_CALLS {
            st.incomplete = true;
            return NestedCallSlot(None);
        }
        let mut record = Map::new();
        record.insert("id".into(), id.into());
        record.insert("name".into(), name.into());
        record.insert("status".into(), "unfinished".into());
        let bytes = arguments.to_string().len();
        if bytes > MAX_ARGUMENT_BYTES_PER_CALL
            || st.argument_bytes + bytes > MAX_ARGUMENT_BYTES_TOTAL
        {
            record.insert("argumentsBytes".into(), bytes.into());
            st.incomplete = true;
        } else {
            record.insert("arguments".into(), arguments.clone());
            st.argument_bytes += bytes;
        }
        st.calls.push((record, Some(Instant::now())));
        NestedCallSlot(Some(st.calls.len() - 1))
    }

    /// Records how a started call ended; `error` is its error text.
    pub fn finish(&self, slot: NestedCallSlot, is_error: bool, error: &str) {
        let Some(index) = slot.0 else { return };
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some((record, started)) = st.calls.get_mut(index) else {
            return;
        };
        record.insert(
            "status".into(),
            if is_error { "error" } else { "ok" }.into(),
        );
        let millis = started
            .take()
            .map(|s| s.elapsed().as_millis() as u64)
            .unwrap_or_default();
        record.insert("durationMs".into(), millis.into());
        if is_error && !error.is_empty() {
            record.insert(
                "error".into(),
                error
                    .chars()
                    .take(MAX_ERROR_CHARS)
                    .collect::<String>()
                    .into(),
            );
        }
    }

    /// Adds the `usage` of a nested result.
    pub fn add_usage(&self, usage: &Value) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.usage = Some(match st.usage.take() {
            Some(total) => combine_usage(&total, usage),
            None => usage.clone(),
        });
    }

    /// The summed usage of the nested results, when any reported one.
    pub fn total_usage(&self) -> Option<Value> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .usage
            .clone()
    }

    /// The record so far, or `None` when no call was made.
    pub fn snapshot(&self) -> Option<Value> {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.calls.is_empty() && !st.incomplete {
            return None;
        }
        let finished = st.calls.iter().all(|(r, _)| r["status"] != "unfinished");
        let calls: Vec<Value> = st
            .calls
            .iter()
            .map(|(r, _)| Value::Object(r.clone()))
            .collect();
        Some(json!({"calls": calls, "complete": !st.incomplete && finished}))
    }
}

/// The sum of two usages as Pi's `combineUsage` builds it: the token counts, the optional
/// `cacheWrite1h` and `reasoning` when either side has them, `totalTokens`, and the cost
/// parts, whose total counts as provider-reported only when both are.
pub fn combine_usage(first: &Value, second: &Value) -> Value {
    let mut out = Map::new();
    for key in ["input", "output", "cacheRead", "cacheWrite"] {
        out.insert(key.into(), add_numbers(first.get(key), second.get(key)));
    }
    for key in ["cacheWrite1h", "reasoning"] {
        if first.get(key).is_some() || second.get(key).is_some() {
            out.insert(key.into(), add_numbers(first.get(key), second.get(key)));
        }
    }
    out.insert(
        "totalTokens".into(),
        add_numbers(first.get("totalTokens"), second.get("totalTokens")),
    );
    let (a, b) = (&first["cost"], &second["cost"]);
    let mut cost = Map::new();
    for key in ["input", "output", "cacheRead", "cacheWrite", "total"] {
        cost.insert(key.into(), add_numbers(a.get(key), b.get(key)));
    }
    let from_provider =
        a["totalFromProvider"] == Value::Bool(true) && b["totalFromProvider"] == Value::Bool(true);
    cost.insert("totalFromProvider".into(), from_provider.into());
    out.insert("cost".into(), Value::Object(cost));
    Value::Object(out)
}

/// `a + b` with a missing side as 0, written as JavaScript writes the number (a whole sum
/// without a fraction).
fn add_numbers(a: Option<&Value>, b: Option<&Value>) -> Value {
    let zero = Value::from(0);
    let (a, b) = (a.unwrap_or(&zero), b.unwrap_or(&zero));
    if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
        return Value::from(x + y);
    }
    let sum = a.as_f64().unwrap_or(0.0) + b.as_f64().unwrap_or(0.0);
    if sum.fract() == 0.0 && sum.abs() < 9_007_199_254_740_992.0 {
        Value::from(sum as i64)
    } else {
        Value::from(sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_calls_and_their_limits_as_pi_does() {
        let recorder = NestedCallRecorder::default();
        assert_eq!(recorder.snapshot(), None);
        let ok = recorder.start("c/1", "bash", &json!({"command": "ls"}));
        let failed = recorder.start("c/2", "read", &json!({"path": "x"}));
        let big = recorder.start("c/3", "write", &json!({"content": "x".repeat(9000)}));
        let open = recorder.start("c/4", "bash", &json!({}));
        recorder.finish(ok, false, "");
        recorder.finish(failed, true, &"e".repeat(600));
        recorder.finish(big, false, "");
        let snapshot = recorder.snapshot().unwrap();
        assert_eq!(snapshot["complete"], false);
        let calls = snapshot["calls"].as_array().unwrap();
        assert_eq!(calls[0]["status"], "ok");
        assert_eq!(calls[0]["arguments"], json!({"command": "ls"}));
        assert!(calls[0]["durationMs"].is_u64());
        assert_eq!(calls[1]["error"].as_str().unwrap().len(), 500);
        assert_eq!(calls[2]["argumentsBytes"], 9014);
        assert!(calls[2].get("arguments").is_none());
        assert_eq!(calls[3]["status"], "unfinished");
        let _ = open;
        let keys: Vec<&String> = calls[1].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            ["id", "name", "status", "arguments", "durationMs", "error"]
        );
    }

    #[test]
    fn sums_usages_as_pis_combine_usage() {
        let recorder = NestedCallRecorder::default();
        assert_eq!(recorder.total_usage(), None);
        let one = json!({"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0,
            "totalTokens": 15, "cost": {"input": 0.5, "output": 0.25, "cacheRead": 0,
            "cacheWrite": 0, "total": 0.75}});
        recorder.add_usage(&one);
        assert_eq!(recorder.total_usage(), Some(one.clone()));
        let two = json!({"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4,
            "reasoning": 1, "totalTokens": 10, "cost": {"input": 0.5, "output": 0.5,
            "cacheRead": 0, "cacheWrite": 0, "total": 1, "totalFromProvider": true}});
        recorder.add_usage(&two);
        let total = recorder.total_usage().unwrap();
        assert_eq!(
            total.to_string(),
            json!({"input": 11, "output": 7, "cacheRead": 3, "cacheWrite": 4, "reasoning": 1,
                "totalTokens": 25, "cost": {"input": 1, "output": 0.75, "cacheRead": 0,
                "cacheWrite": 0, "total": 1.75, "totalFromProvider": false}})
            .to_string()
        );
    }
}
