//! Extension tools registered after start-up (fixtures/extensions/late-tools.ts: four at
//! `session_start`, one more from a tool the model calls mid-run), end to end with our `pi`
//! in print mode against the fake LLM on 127.0.0.1:
//!
//! - `codemode` and `deferred` ones are callable from codemode scripts (`tools.x()`), listed
//!   in `ALL_TOOLS` and found by `searchTools()`, and `tool_search` loads them;
//! - the tool options filter and activate them as they do the start-up tools: `--tools`
//!   (an allowlist; a name activates any exposure but `hidden`, a pattern only `direct`
//!   and `model-only` ones), `--exclude-tools`, `--no-tools`.
//!
//! Needs `node` (>= 20) on PATH, as CI installs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

mod extensions_common;

/// A tool result's text blocks, one after another (codemode puts its output after a header
/// block).
fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

use extensions_common::*;

/// A script reporting the late tools it sees in `ALL_TOOLS` and through `searchTools()`
/// (sorted), then what calling each one gives.
const SCRIPT: &str = r#"const late = (names) => names.filter((n) => n.startsWith("late")).sort().join(", ");
const out = ["ALL: " + late(ALL_TOOLS.map((t) => t.name))];
out.push("SEARCH: " + late((await searchTools("late tool")).map((t) => t.name)));
for (const name of ["late_direct", "late_inactive", "late_codemode", "late_deferred", "later_deferred"]) {
  try { out.push(`${name}: ${await tools[name]({})}`); } catch (e) { out.push(`${name}: error`); }
}
return out.join("\n");"#;

fn call(name: &str, id: &str, arguments: Value) -> Value {
    json!({"name": name, "id": id, "arguments": arguments})
}

fn codemode_call(id: &str) -> Value {
    call("codemode", id, json!({"code": SCRIPT}))
}

/// Runs the session; returns the tool result texts in order and the provider requests.
async fn run(turns: Value, options: &[&str]) -> (Vec<String>, Vec<Value>) {
    let s = Setup::new(turns).await;
    let fixture = fixture("late-tools.ts");
    let mut args = vec!["-e", fixture.as_str()];
    args.extend(options);
    args.extend(["-p", "go"]);
    let (code, _stdout, stderr) = s.pi(&args);
    assert_eq!(code, 0, "{stderr}");
    let entries = s.session_entries();
    let texts = tool_results(&entries).iter().map(|r| text_of(r)).collect();
    (texts, s.requests())
}

/// The script's report: its lines from `ALL:` on, without trailing blanks.
fn report(text: &str) -> Vec<String> {
    let start = text.find("ALL:").unwrap_or_else(|| panic!("{text}"));
    text[start..]
        .lines()
        .map(|l| l.trim_end().to_string())
        .collect()
}

/// The tool names a request declares.
fn declared_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn late_codemode_and_deferred_tools_reach_codemode_scripts() {
    let turns = json!([
        {"tool_calls": [call("register_more", "r1", json!({}))]},
        {"tool_calls": [codemode_call("c1")]},
        {"text": "done"}
    ]);
    let (texts, requests) = run(turns, &["--tools", "+codemode"]).await;
    assert_eq!(texts[0], "registered");
    assert_eq!(
        report(&texts[1]),
        [
            "ALL: late_codemode, late_deferred, late_direct, later_deferred",
            "SEARCH: late_codemode, late_deferred, late_direct, later_deferred",
            "late_direct: late_direct ran",
            // Registered inactive (`defaultActive: false`) and `direct`: not callable.
            "late_inactive: error",
            "late_codemode: late_codemode ran",
            "late_deferred: late_deferred ran",
            "later_deferred: later_deferred ran",
        ]
    );
    // `direct` ones are declared, the others are not.
    let first = declared_names(&requests[0]);
    assert!(first.contains(&"late_direct".to_string()), "{first:?}");
    for name in ["late_inactive", "late_codemode", "late_deferred"] {
        assert!(!first.contains(&name.to_string()), "{name} in {first:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_search_loads_late_codemode_and_deferred_tools() {
    let turns = json!([
        {"tool_calls": [call("tool_search", "s1", json!({"query": "late"}))]},
        {"tool_calls": [
            call("late_deferred", "d1", json!({})),
            call("late_codemode", "d2", json!({}))
        ]},
        {"text": "done"}
    ]);
    let (texts, requests) = run(turns, &["--tools", "+tool_search"]).await;
    assert!(texts[0].starts_with("Loaded 2 tools."), "{}", texts[0]);
    assert!(
        texts[0].contains("- late_codemode: A late tool"),
        "{}",
        texts[0]
    );
    assert!(
        texts[0].contains("- late_deferred: A late tool"),
        "{}",
        texts[0]
    );
    assert_eq!(texts[1..], ["late_deferred ran", "late_codemode ran"]);
    let second = declared_names(&requests[1]);
    assert!(second.contains(&"late_deferred".to_string()), "{second:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn excluded_late_tools_are_not_registered() {
    let turns = json!([
        {"tool_calls": [call("late_direct", "x1", json!({})), codemode_call("c1")]},
        {"text": "done"}
    ]);
    let options = [
        "--tools",
        "+codemode",
        "--exclude-tools",
        "late_deferred,late_dir*",
    ];
    let (texts, requests) = run(turns, &options).await;
    assert_eq!(texts[0], "Tool late_direct not found");
    assert_eq!(
        report(&texts[1]),
        [
            "ALL: late_codemode",
            "SEARCH: late_codemode",
            "late_direct: error",
            "late_inactive: error",
            "late_codemode: late_codemode ran",
            "late_deferred: error",
            "later_deferred: error",
        ]
    );
    assert!(!declared_names(&requests[0]).contains(&"late_direct".to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allowlist_filters_and_activates_late_tools() {
    let turns = json!([
        {"tool_calls": [call("late_direct", "x1", json!({})), codemode_call("c1")]},
        {"text": "done"}
    ]);
    // `late_c*` matches a `codemode` tool: registered, not declared; `late_deferred` is
    // named: declared although `deferred`; `late_direct` is not listed: not registered.
    let (texts, requests) = run(turns, &["--tools", "codemode,late_c*,late_deferred"]).await;
    assert_eq!(texts[0], "Tool late_direct not found");
    assert_eq!(
        report(&texts[1]),
        [
            "ALL: late_codemode, late_deferred",
            "SEARCH: late_codemode, late_deferred",
            "late_direct: error",
            "late_inactive: error",
            "late_codemode: late_codemode ran",
            "late_deferred: late_deferred ran",
            "later_deferred: error",
        ]
    );
    let mut first = declared_names(&requests[0]);
    first.sort();
    assert_eq!(first, ["codemode", "late_deferred"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn no_tools_keeps_late_tools_out() {
    let turns = json!([
        {"tool_calls": [call("late_direct", "x1", json!({})), codemode_call("c1")]},
        {"text": "done"}
    ]);
    let (texts, requests) = run(turns, &["--no-tools", "--tools", "+codemode"]).await;
    assert_eq!(texts[0], "Tool late_direct not found");
    assert_eq!(report(&texts[1])[..2], ["ALL:", "SEARCH:"]);
    assert_eq!(declared_names(&requests[0]), ["codemode"]);
}
