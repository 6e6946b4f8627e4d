//! The tool calls a tool makes while it runs (codemode's `tools.x()`), recorded for the
//! model-issued call's result message as Pi records them in `nestedCalls`:
//! `{calls: [{id, name, status, arguments | argumentsBytes, durationMs, error?}], complete}`.
//! Arguments over 8 KiB for one call or 32 KiB in all are left out (their size is kept),
//! calls past 256 are dropped, and either makes the record incomplete.

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
}
