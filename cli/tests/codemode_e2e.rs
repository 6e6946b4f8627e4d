//! Codemode end to end: our `pi` binary, the fake LLM scripted to call `codemode`, and a
//! script that calls tools of the real MCP reference server
//! `@modelcontextprotocol/server-everything` (installed with npm into
//! `target/mcp-test-servers` by `mcp_common`, as for `mcp_e2e.rs`; without npm the test fails saying so).
//!
//! The expectations are what real Pi 1.6.0 did with the same fake-LLM script and server
//! (`fixtures/realpi/codemode/codemode_everything.json`, recorded from
//! `/tmp/hcli-realpi` as docs/mcp.md describes): the tool declarations of the first
//! request and the `codemode` tool result the second request carries.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};

use pi_fake_llm::{FakeLlm, Script};
use serde_json::{json, Value};

mod mcp_common;

use mcp_common::{everything_script, FIXTURES};

fn recorded() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(format!("{FIXTURES}/codemode/codemode_everything.json")).unwrap(),
    )
    .unwrap()
}

/// Real Pi 1.6.0 without MCP servers: `store()` over `pi -p` + `pi -c -p`, nested calls and
/// `models`, and the first request's tools under `codemode.*` settings.
fn recorded_settings_and_store() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(format!("{FIXTURES}/codemode/codemode_settings_store.json"))
            .unwrap(),
    )
    .unwrap()
}

/// The docs directory our binary points at (next to its directory, as installed).
fn our_docs_dir() -> String {
    std::path::Path::new(env!("CARGO_BIN_EXE_pi"))
        .parent()
        .and_then(std::path::Path::parent)
        .unwrap()
        .join("docs")
        .display()
        .to_string()
}

struct Setup {
    _tmp: tempfile::TempDir,
    agent: PathBuf,
    cwd: PathBuf,
    sessions: PathBuf,
    fake: FakeLlm,
}

impl Setup {
    async fn new(script: Value, servers: Value) -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let cwd = tmp.path().join("cwd");
        let sessions = tmp.path().join("sessions");
        for d in [&agent, &cwd, &sessions] {
            std::fs::create_dir_all(d).unwrap();
        }
        let script: Script = serde_json::from_value(script).unwrap();
        let fake = FakeLlm::start(script).await.unwrap();
        let models = std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
            .unwrap()
            .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
        std::fs::write(agent.join("models.json"), models).unwrap();
        std::fs::write(
            agent.join("mcp.json"),
            json!({"mcpServers": servers}).to_string(),
        )
        .unwrap();
        Setup {
            _tmp: tmp,
            agent,
            cwd,
            sessions,
            fake,
        }
    }

    fn prompt(&self, extra: &[&str], message: &str) -> std::process::Output {
        let sessions = self.sessions.display().to_string();
        let mut args = vec!["--session-dir", &sessions, "--model", "fakeoai/fake-model"];
        args.extend_from_slice(extra);
        args.extend(["-p", message]);
        Command::new(env!("CARGO_BIN_EXE_pi"))
            .args(&args)
            .current_dir(&self.cwd)
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .env_remove("PI_SESSION_STORE")
            .stdin(Stdio::null())
            .output()
            .expect("run pi")
    }

    fn write_settings(&self, settings: &Value) {
        std::fs::write(self.agent.join("settings.json"), settings.to_string()).unwrap();
    }

    fn requests(&self) -> Vec<Value> {
        self.fake.requests().into_iter().map(|r| r.body).collect()
    }

    fn session_entries(&self) -> Vec<Value> {
        let file = std::fs::read_dir(&self.sessions)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .expect("a session file");
        std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn tool_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// `Wall time 1.4 seconds` varies from run to run.
fn without_wall_time(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.starts_with("Wall time ") && l.ends_with(" seconds") {
                "Wall time N seconds"
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Pi's codemode description points at its installed docs; ours at ours.
fn with_our_docs(description: &str) -> String {
    description
        .replace(
            "/tmp/hcli-realpi/pi/node_modules/@earendil-works/pi-coding-agent/docs",
            &our_docs_dir(),
        )
        .replace("<PI_DOCS>", &our_docs_dir())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codemode_script_calls_real_mcp_tools_like_pi() {
    let pi = recorded();
    let s = Setup::new(
        pi["script"].clone(),
        json!({"everything": {"command": "node", "args": [everything_script(), "stdio"]}}),
    )
    .await;
    let out = s.prompt(&[], "use codemode");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
    let requests = s.requests();
    assert_eq!(requests.len(), 2);

    // The declarations: read, bash, edit and write with Pi's codemode note, then codemode.
    let ours = requests[0]["tools"].as_array().unwrap().clone();
    let theirs = pi["tools"].as_array().unwrap().clone();
    let names = |tools: &[Value]| -> Vec<String> {
        tools
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&ours), names(&theirs));
    for (ours, theirs) in ours.iter().zip(&theirs) {
        let mut theirs = theirs.clone();
        if theirs["function"]["name"] == "codemode" {
            let description = theirs["function"]["description"]
                .as_str()
                .unwrap()
                .to_string();
            theirs["function"]["description"] = Value::from(with_our_docs(&description));
        }
        assert_eq!(
            serde_json::to_string(ours).unwrap(),
            serde_json::to_string(&theirs).unwrap()
        );
    }

    // The script's result as the model sees it, byte for byte but for the wall time.
    let results = tool_messages(&requests[1]);
    assert_eq!(results.len(), 1);
    assert_eq!(
        without_wall_time(&results[0]),
        without_wall_time(pi["tool_result"].as_str().unwrap())
    );

    // The session records one ordinary codemode call; nested calls are in its details.
    let entries = s.session_entries();
    let result = entries
        .iter()
        .find(|e| e["message"]["role"] == "toolResult")
        .expect("a toolResult");
    assert_eq!(result["message"]["toolName"], "codemode");
    assert_eq!(result["message"]["isError"], false);
    let calls: Vec<(String, String, String)> = result["message"]["details"]["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["name"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let pi_calls: Vec<(String, String, String)> = pi["tool_result_entry"]["details"]["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                c["name"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(calls, pi_calls);
    // The declaration recorded in the system message carries Pi's grammar.
    let added = entries
        .iter()
        .filter_map(|e| e["message"]["toolsAdded"].as_array())
        .flatten()
        .find(|t| t["name"] == "codemode")
        .expect("codemode in toolsAdded");
    assert_eq!(
        added["constrainedSampling"],
        pi["toolsAdded_codemode"]["constrainedSampling"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_nested_call_is_reported_and_codemode_follows_tool_options() {
    let pi = recorded();
    let s = Setup::new(
        pi["failing_call"]["script"].clone(),
        json!({"everything": {"command": "node", "args": [everything_script(), "stdio"]}}),
    )
    .await;
    let out = s.prompt(&[], "go");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Invalid arguments reject with the validation error; the failure keeps the output.
    let results = tool_messages(&s.requests()[1]);
    assert_eq!(
        without_wall_time(&results[0]),
        without_wall_time(pi["failing_call"]["tool_result"].as_str().unwrap())
    );

    // `--tools read` keeps only read; `--tools +codemode` without MCP adds it to the defaults.
    s.fake
        .set_script(serde_json::from_value(json!({"turns": [{"text": "ok"}]})).unwrap());
    let out = s.prompt(&["--tools", "read"], "hi");
    assert_eq!(out.status.code(), Some(0));
    let declared = |body: &Value| -> Vec<String> {
        body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(declared(&s.requests().pop().unwrap()), ["read"]);
    s.fake
        .set_script(serde_json::from_value(json!({"turns": [{"text": "ok"}]})).unwrap());
    let out = s.prompt(&["--no-mcp", "--tools", "+codemode"], "hi");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        declared(&s.requests().pop().unwrap()),
        ["read", "bash", "edit", "write", "codemode"]
    );
    s.fake
        .set_script(serde_json::from_value(json!({"turns": [{"text": "ok"}]})).unwrap());
    let out = s.prompt(&["--exclude-tools", "codemode"], "hi");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        declared(&s.requests().pop().unwrap()),
        ["read", "bash", "edit", "write"]
    );
}

fn codemode_turn(id: &str, code: &str) -> Value {
    json!({"tool_calls": [{"name": "codemode", "id": id, "arguments": {"code": code}}]})
}

fn store_entries(entries: &[Value]) -> Vec<Value> {
    entries
        .iter()
        .filter(|e| e["type"] == "custom" && e["customType"] == "codemode-store")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_values_survive_continue_and_load_from_a_session_pi_wrote() {
    let pi = recorded_settings_and_store();
    let pi_lines = pi["store"]["session_lines"].as_array().unwrap().clone();
    let pi_stores = store_entries(&pi_lines);
    assert_eq!(pi_stores.len(), 2);
    // The same two scripts Pi ran: the first stores, the second (after `-c`) deletes and loads.
    let codes: Vec<String> = pi_lines
        .iter()
        .filter(|e| e["message"]["role"] == "assistant")
        .flat_map(|e| {
            e["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|b| b["type"] == "toolCall")
        .map(|b| b["arguments"]["code"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(codes.len(), 2);
    let s = Setup::new(
        json!({"turns": [
            codemode_turn("call_s1", &codes[0]), {"text": "stored"},
            codemode_turn("call_s2", &codes[1]), {"text": "loaded"},
        ]}),
        json!({}),
    )
    .await;
    s.write_settings(&pi["store"]["settings"]);
    let out = s.prompt(&[], "store it");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = s.prompt(&["-c"], "load it");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "loaded\n");

    // What the scripts returned, as in Pi's session.
    let results = |lines: &[Value]| -> Vec<Value> {
        lines
            .iter()
            .filter(|e| e["message"]["role"] == "toolResult")
            .map(|e| e["message"]["content"][1]["text"].clone())
            .collect()
    };
    let entries = s.session_entries();
    assert_eq!(results(&entries), results(&pi_lines));
    assert_eq!(results(&entries)[1], "[{\"page\":2},null]");
    // One `codemode-store` entry per script with writes, Pi's shape, before its result.
    let ours = store_entries(&entries);
    let shape =
        |e: &Value| json!({"type": e["type"], "customType": e["customType"], "data": e["data"]});
    assert_eq!(
        ours.iter().map(shape).collect::<Vec<_>>(),
        pi_stores.iter().map(shape).collect::<Vec<_>>()
    );
    for store in &ours {
        let next = entries
            .iter()
            .find(|e| e["parentId"] == store["id"])
            .expect("an entry after the store entry");
        assert_eq!(next["message"]["role"], "toolResult");
    }

    // A session file real Pi wrote: its store entries are what `load()` sees here.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pi-written.jsonl");
    let mut lines = pi_lines.clone();
    lines[0]["cwd"] = Value::from(s.cwd.display().to_string());
    std::fs::write(
        &file,
        lines
            .iter()
            .map(|l| l.to_string() + "\n")
            .collect::<String>(),
    )
    .unwrap();
    s.fake.set_script(
        serde_json::from_value(json!({"turns": [
            codemode_turn("call_r", "return [load(\"cursor\"), load(\"tmp\"), load(\"never\") === undefined]"),
            {"text": "read"},
        ]}))
        .unwrap(),
    );
    let out = s.prompt(&["--session", &file.display().to_string()], "read it");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = s.requests().pop().unwrap();
    let texts = tool_messages(&last);
    assert!(
        texts
            .last()
            .unwrap()
            .ends_with("\n[{\"page\":2},null,true]"),
        "{texts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_calls_and_the_models_catalog_are_recorded_like_pi() {
    let pi = recorded_settings_and_store();
    let code = pi["nested"]["code"].as_str().unwrap();
    let s = Setup::new(
        json!({"turns": [codemode_turn("call_n1", code), {"text": "ok"}]}),
        json!({}),
    )
    .await;
    s.write_settings(&json!({"defaultTools": ["+codemode"]}));
    let out = s.prompt(&[], "go");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entries = s.session_entries();
    let ours = &entries
        .iter()
        .find(|e| e["message"]["role"] == "toolResult")
        .unwrap()["message"];
    let theirs = pi["nested"]["tool_result"].clone();
    let localize = |v: &Value| -> Value {
        serde_json::from_str(
            &v.to_string()
                .replace("/tmp/cm-real/nested/cwd", &s.cwd.display().to_string())
                .replace("127.0.0.1:18799", &format!("127.0.0.1:{}", s.fake.port())),
        )
        .unwrap()
    };
    let theirs = localize(&theirs);

    // The script's value: bash's structured result, read's error, the catalog.
    let value = |m: &Value| -> Value {
        let text = m["content"][1]["text"].as_str().unwrap();
        let mut v: Value = serde_json::from_str(text).unwrap();
        v["a"]["wall_time_seconds"] = Value::Null;
        v
    };
    assert_eq!(value(ours), value(&theirs));

    // `details.calls`: Pi's rows, with a duration in milliseconds.
    let rows = |m: &Value| -> Vec<Value> {
        m["details"]["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                assert!(c["durationMs"].is_number(), "{c}");
                let mut c = c.clone();
                c["durationMs"] = Value::Null;
                c
            })
            .collect()
    };
    assert_eq!(rows(ours), rows(&theirs));

    // `nestedCalls` on the result message: ids, names, statuses, arguments, errors.
    let nested = |m: &Value| -> Value {
        let mut n = m["nestedCalls"].clone();
        for c in n["calls"].as_array_mut().unwrap() {
            assert!(c["durationMs"].is_u64(), "{c}");
            c["durationMs"] = Value::Null;
        }
        n
    };
    assert_eq!(nested(ours), nested(&theirs));
    let keys = |m: &Value| -> Vec<String> { m.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(keys(ours), keys(&theirs));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codemode_settings_declare_tools_like_pi() {
    let pi = recorded_settings_and_store();
    let s = Setup::new(json!({"turns": [{"text": "ok"}]}), json!({})).await;
    for scenario in [
        "tools_ontools",
        "tools_only",
        "tools_budget",
        "tools_budget0",
    ] {
        let recorded = &pi[scenario];
        s.fake
            .set_script(serde_json::from_value(json!({"turns": [{"text": "ok"}]})).unwrap());
        s.write_settings(&recorded["settings"]);
        let out = s.prompt(&[], "go");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ours = s.requests().pop().unwrap()["tools"].clone();
        let mut theirs = recorded["tools"].clone();
        for tool in theirs.as_array_mut().unwrap() {
            let description = tool["function"]["description"]
                .as_str()
                .unwrap()
                .to_string();
            tool["function"]["description"] = Value::from(with_our_docs(&description));
        }
        assert_eq!(
            serde_json::to_string_pretty(&ours).unwrap(),
            serde_json::to_string_pretty(&theirs).unwrap(),
            "{scenario}"
        );
    }
}

/// Pi's worker limit (`PI_CODEMODE_MAX_WORKERS`): the model sends two scripts in one turn;
/// with one worker the second waits for the first, and fails without running when its own
/// `timeout_ms` passes first; with Pi's default of two both run. (Pi's result has two text
/// items, the header and the error, which reach the model joined by a newline.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_beyond_the_worker_limit_wait_and_fail_at_their_deadline() {
    let busy = "const t = Date.now(); while (Date.now() - t < 1500) {} return 'busy done';";
    let quick = "// @options: {\"timeout_ms\": 300}\nreturn 'quick done';";
    let turn = json!({"tool_calls": [
        {"name": "codemode", "id": "c1", "arguments": {"code": busy}},
        {"name": "codemode", "id": "c2", "arguments": {"code": quick}},
    ]});
    let script = json!({"turns": [turn.clone(), {"text": "ok"}]});
    let s = Setup::new(script, json!({})).await;
    let run = |workers: &str| {
        let sessions = s.sessions.display().to_string();
        Command::new(env!("CARGO_BIN_EXE_pi"))
            .args(["--session-dir", &sessions, "--model", "fakeoai/fake-model"])
            .args(["--no-mcp", "--tools", "+codemode", "-p", "go"])
            .current_dir(&s.cwd)
            .env("PI_CODING_AGENT_DIR", &s.agent)
            .env("PI_CODEMODE_MAX_WORKERS", workers)
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .env_remove("PI_SESSION_STORE")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };

    let out = run("1");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = tool_messages(&s.requests()[1]);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].starts_with("Script completed"), "{}", results[0]);
    assert!(results[0].contains("busy done"), "{}", results[0]);
    assert_eq!(
        without_wall_time(&results[1]),
        "Script failed\nWall time N seconds\nOutput:\n\nScript error:\nScript timed out: Execution \
         timed out after 300 ms while waiting for a free codemode worker\n\nThe script did not start."
    );

    s.fake
        .set_script(serde_json::from_value(json!({"turns": [turn, {"text": "ok"}]})).unwrap());
    let out = run("not a number");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = tool_messages(&s.requests()[3]);
    assert!(results[0].contains("busy done"), "{}", results[0]);
    assert!(results[1].contains("quick done"), "{}", results[1]);
}
