use super::*;
use crate::compaction::{prepare_compaction, CompactionSettings};
use serde_json::json;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Mutex;

/// A model that answers from a script and records what it was asked.
#[derive(Default)]
struct Scripted {
    answers: Mutex<VecDeque<SummaryResponse>>,
    requests: Mutex<Vec<SummaryRequest>>,
    delays: Mutex<Vec<Duration>>,
    /// Retry callbacks heard, in order.
    heard: Mutex<Vec<String>>,
    /// Cancel during the next backoff.
    cancel_in_backoff: std::sync::atomic::AtomicBool,
    cancelled: std::sync::atomic::AtomicBool,
}

impl Scripted {
    fn new(answers: impl IntoIterator<Item = SummaryResponse>) -> Self {
        Scripted {
            answers: Mutex::new(answers.into_iter().collect()),
            ..Default::default()
        }
    }
    fn requests(&self) -> Vec<SummaryRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl Summarizer for Scripted {
    async fn summarize(&self, request: &SummaryRequest) -> Result<SummaryResponse, SummarizeError> {
        self.requests.lock().unwrap().push(request.clone());
        self.answers
            .lock()
            .unwrap()
            .pop_front()
            .ok_or_else(|| SummarizeError::Unavailable("script exhausted".into()))
    }
    fn is_retryable(&self, response: &SummaryResponse) -> bool {
        response
            .error_message
            .as_deref()
            .is_some_and(|m| m.contains("overloaded"))
    }
    async fn backoff(&self, delay: Duration) {
        use std::sync::atomic::Ordering;
        self.delays.lock().unwrap().push(delay);
        if self.cancel_in_backoff.load(Ordering::SeqCst) {
            self.cancelled.store(true, Ordering::SeqCst);
        }
    }
    fn is_cancelled(&self) -> bool {
        self.cancelled.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn on_retry_scheduled(&self, attempt: u32, max: u32, delay: Duration, message: &str) {
        self.heard.lock().unwrap().push(format!(
            "scheduled {attempt}/{max} {}ms {message}",
            delay.as_millis()
        ));
    }
    fn on_retry_attempt_start(&self) {
        self.heard.lock().unwrap().push("attempt".into());
    }
    fn on_retry_finished(&self) {
        self.heard.lock().unwrap().push("finished".into());
    }
}

fn ok(text: &str) -> SummaryResponse {
    SummaryResponse {
        text: text.into(),
        stop_reason: StopReason::Stop,
        error_message: None,
        has_tool_call: false,
        usage: Some(
            json!({"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15,
            "cost":{"input":0.1,"output":0.2,"cacheRead":0,"cacheWrite":0,"total":0.3,"totalFromProvider":true}}),
        ),
    }
}

fn failed(stop: StopReason, message: &str) -> SummaryResponse {
    SummaryResponse {
        text: String::new(),
        stop_reason: stop,
        error_message: Some(message.into()),
        has_tool_call: false,
        usage: None,
    }
}

/// Polls a future that never waits on anything external (the scripted model).
fn run<F: Future>(future: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Noop;
    impl Wake for Noop {
        fn wake(self: std::sync::Arc<Self>) {}
    }
    let waker = Waker::from(std::sync::Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

fn entry(id: &str, parent: Option<&str>, message: Value) -> Value {
    json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-01-01T00:00:00.000Z","message":message})
}

fn split_turn_path() -> Vec<Value> {
    let big = "x".repeat(400);
    vec![
        entry(
            "u1",
            None,
            json!({"role":"user","content":big,"timestamp":1}),
        ),
        entry(
            "a1",
            Some("u1"),
            json!({"role":"assistant","content":[{"type":"text","text":big}],"timestamp":2}),
        ),
        entry(
            "u2",
            Some("a1"),
            json!({"role":"user","content":"do it","timestamp":3}),
        ),
        entry(
            "a2",
            Some("u2"),
            json!({"role":"assistant","content":[
            {"type":"toolCall","id":"t","name":"edit","arguments":{"path":"src/lib.rs"}}],"timestamp":4}),
        ),
        entry(
            "r2",
            Some("a2"),
            json!({"role":"toolResult","toolCallId":"t","toolName":"edit","content":[{"type":"text","text":big}],"timestamp":5}),
        ),
        entry(
            "a3",
            Some("r2"),
            json!({"role":"assistant","content":[{"type":"text","text":big}],"timestamp":6}),
        ),
    ]
}

#[test]
fn split_turn_makes_two_requests_and_joins_them() {
    let settings = CompactionSettings {
        keep_recent_tokens: 100,
        ..Default::default()
    };
    let prep = prepare_compaction(&split_turn_path(), &settings).unwrap();
    assert!(prep.is_split_turn);
    assert_eq!(prep.first_kept_entry_id, "a3");
    let model = Scripted::new([ok("HISTORY"), ok("PREFIX")]);
    let options = SummaryOptions {
        custom_instructions: Some("tests".into()),
        ..Default::default()
    };
    let result = run(compact(&prep.input(), &model, &options)).unwrap();
    assert_eq!(
        result.summary,
        "HISTORY\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX\n\n<modified-files>\nsrc/lib.rs\n</modified-files>"
    );
    assert_eq!(result.details.modified_files, ["src/lib.rs"]);
    assert_eq!(result.usage.as_ref().unwrap()["totalTokens"], 30);
    assert_eq!(
        result.usage.as_ref().unwrap()["cost"]["totalFromProvider"],
        true
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[0]
        .prompt
        .starts_with("<conversation>\n[User]: xxx"));
    assert!(requests[1].prompt.starts_with(
        "# Conversation\n[User]: do it\n\n[Assistant tool calls]: edit(path=\"src/lib.rs\")"
    ));
    assert!(requests
        .iter()
        .all(|r| r.prompt.ends_with("Additional focus: tests")));
    assert!(requests
        .iter()
        .all(|r| r.system_prompt == SUMMARIZATION_SYSTEM_PROMPT));
}

#[test]
fn transient_errors_are_retried_with_backoff() {
    let model = Scripted::new([
        failed(StopReason::Error, "overloaded"),
        failed(StopReason::Error, "overloaded"),
        ok("S"),
    ]);
    let req = SummaryRequest {
        system_prompt: "s".into(),
        prompt: "p".into(),
        max_tokens: None,
        reasoning: None,
    };
    let r = run(summarize_with_retry(
        &model,
        &req,
        &RetrySettings::default(),
    ))
    .unwrap();
    assert_eq!(r.text, "S");
    assert_eq!(
        *model.delays.lock().unwrap(),
        [Duration::from_millis(2000), Duration::from_millis(4000)]
    );
    // Deterministic errors fail at once; disabled retries return the first answer.
    let model = Scripted::new([failed(StopReason::Error, "invalid api key"), ok("never")]);
    let r = run(summarize_with_retry(
        &model,
        &req,
        &RetrySettings::default(),
    ))
    .unwrap();
    assert_eq!(r.stop_reason, StopReason::Error);
    let model = Scripted::new([failed(StopReason::Error, "overloaded"), ok("never")]);
    let off = RetrySettings {
        enabled: false,
        ..Default::default()
    };
    let r = run(summarize_with_retry(&model, &req, &off)).unwrap();
    assert_eq!(r.stop_reason, StopReason::Error);
    // The budget runs out after max_retries retries.
    let model = Scripted::new((0..5).map(|_| failed(StopReason::Error, "overloaded")));
    run(summarize_with_retry(
        &model,
        &req,
        &RetrySettings::default(),
    ))
    .unwrap();
    assert_eq!(model.requests().len(), 4);
}

#[test]
fn retry_callbacks_follow_pis_order() {
    let req = SummaryRequest {
        system_prompt: "s".into(),
        prompt: "p".into(),
        max_tokens: None,
        reasoning: None,
    };
    let heard = |m: &Scripted| m.heard.lock().unwrap().clone();
    // Success after two retries: each retry is scheduled and started; one `finished`.
    let model = Scripted::new([
        failed(StopReason::Error, "overloaded"),
        failed(StopReason::Error, "overloaded"),
        ok("S"),
    ]);
    run(summarize_with_retry(
        &model,
        &req,
        &RetrySettings::default(),
    ))
    .unwrap();
    assert_eq!(
        heard(&model),
        [
            "scheduled 1/3 2000ms overloaded",
            "attempt",
            "scheduled 2/3 4000ms overloaded",
            "attempt",
            "finished"
        ]
    );
    // No retry: no callbacks at all.
    let model = Scripted::new([ok("S")]);
    run(summarize_with_retry(
        &model,
        &req,
        &RetrySettings::default(),
    ))
    .unwrap();
    assert!(heard(&model).is_empty());
    // An abort during the backoff ends the loop with an aborted answer.
    let model = Scripted::new([failed(StopReason::Error, "overloaded"), ok("never")]);
    model
        .cancel_in_backoff
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let r = run(summarize_with_retry(
        &model,
        &req,
        &RetrySettings::default(),
    ))
    .unwrap();
    assert_eq!(r.stop_reason, StopReason::Aborted);
    assert_eq!(r.error_message, None);
    assert_eq!(model.requests().len(), 1);
    assert_eq!(
        heard(&model),
        ["scheduled 1/3 2000ms overloaded", "finished"]
    );
}

#[test]
fn truncated_and_tool_calling_summaries_are_refused() {
    let settings = CompactionSettings {
        keep_recent_tokens: 100,
        ..Default::default()
    };
    let prep = prepare_compaction(&split_turn_path(), &settings).unwrap();
    let model = Scripted::new([SummaryResponse {
        stop_reason: StopReason::Length,
        ..ok("partial")
    }]);
    let err = run(compact(&prep.input(), &model, &SummaryOptions::default())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Summarization failed: generation hit the token cap and the summary is incomplete"
    );
    let model = Scripted::new([
        ok("H"),
        SummaryResponse {
            has_tool_call: true,
            ..ok("x")
        },
    ]);
    let err = run(compact(&prep.input(), &model, &SummaryOptions::default())).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Turn prefix summarization attempted to call a tool"
    );
    let model = Scripted::new([failed(StopReason::Error, "")]);
    let err = run(compact(&prep.input(), &model, &SummaryOptions::default())).unwrap_err();
    assert_eq!(err.to_string(), "Summarization failed: Unknown error");
}

#[test]
fn previous_summary_switches_to_the_update_prompt() {
    let mut path = split_turn_path();
    path.push(
        json!({"type":"compaction","id":"c1","parentId":"a3","timestamp":"2026-01-01T00:00:01.000Z",
        "summary":"OLD","firstKeptEntryId":"a3","tokensBefore":500,
        "details":{"readFiles":["old.txt"],"modifiedFiles":[]}}),
    );
    path.push(entry(
        "u4",
        Some("c1"),
        json!({"role":"user","content":"y".repeat(800),"timestamp":7}),
    ));
    path.push(entry("a4", Some("u4"), json!({"role":"assistant","content":[{"type":"text","text":"z".repeat(800)}],"timestamp":8})));
    let settings = CompactionSettings {
        keep_recent_tokens: 100,
        ..Default::default()
    };
    let prep = prepare_compaction(&path, &settings).unwrap();
    assert_eq!(prep.previous_summary.as_deref(), Some("OLD"));
    let model = Scripted::new([ok("NEW"), ok("P")]);
    let result = run(compact(&prep.input(), &model, &SummaryOptions::default())).unwrap();
    let prompt = &model.requests()[0].prompt;
    assert!(
        prompt.contains("\n</conversation>\n\n<previous-summary>\nOLD\n</previous-summary>\n\n")
    );
    assert!(result
        .summary
        .contains("<read-files>\nold.txt\n</read-files>"));
}

#[test]
fn branch_summary_has_preamble_and_file_lists() {
    let path = split_turn_path();
    let model = Scripted::new([ok("B")]);
    let out = run(generate_branch_summary(
        &path,
        &model,
        Some(200_000),
        &BranchSummarySettings::default(),
        &SummaryOptions::default(),
        false,
    ))
    .unwrap();
    let BranchSummaryOutcome::Summary {
        summary, details, ..
    } = out
    else {
        panic!("{out:?}")
    };
    assert_eq!(
        summary,
        format!("{BRANCH_SUMMARY_PREAMBLE}B\n\n<modified-files>\nsrc/lib.rs\n</modified-files>")
    );
    assert_eq!(details.modified_files, ["src/lib.rs"]);
    // Tool results are left out of branch summaries.
    assert!(!model.requests()[0].prompt.contains("[Tool result]"));
    let model = Scripted::new([failed(StopReason::Aborted, "")]);
    let out = run(generate_branch_summary(
        &path,
        &model,
        None,
        &BranchSummarySettings::default(),
        &SummaryOptions::default(),
        false,
    ))
    .unwrap();
    assert_eq!(out, BranchSummaryOutcome::Aborted);
    let empty = run(generate_branch_summary(
        &[],
        &model,
        None,
        &BranchSummarySettings::default(),
        &SummaryOptions::default(),
        false,
    ))
    .unwrap();
    assert_eq!(empty, BranchSummaryOutcome::NothingToSummarize);
    let _ = RefCell::new(0);
}
