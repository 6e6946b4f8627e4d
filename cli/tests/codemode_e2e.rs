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

/// Pi's codemode description ends with a line on `models` (classifiers and image
/// generation) that points at its installed docs; this build has no `models` global.
fn without_models_line(description: &str) -> String {
    match description.rfind("\n- `models`:") {
        Some(i) => description[..i].to_string(),
        None => description.to_string(),
    }
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
            theirs["function"]["description"] = Value::from(without_models_line(&description));
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
