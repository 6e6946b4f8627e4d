//! `pi sessions import --from gemini`: a real Gemini CLI chat recording (recorded by
//! `fixtures/import/gemini/make.sh` from the npm CLI) into real stores, every source record
//! accounted for, the tree and the context checked through `pi sessions inspect`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod import_common;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use import_common::{inspect_field, lines, sorted, Env};
use serde_json::Value;

const ID: &str = "8a15e141-8c4c-4545-a53e-641efb2e9a97";
const CWD: &str = "/var/tmp/pi-import-gemini/project";

/// `.gemini/tmp` as Gemini CLI left it.
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/import/gemini/sessions/tmp")
}

fn recording() -> PathBuf {
    let chats = fixtures().join("project/chats");
    fs::read_dir(&chats)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_str().unwrap().ends_with(".jsonl"))
        .unwrap()
}

/// What the recording holds, read the way Gemini CLI reads it: the last record with a message
/// id is that message.
struct Source {
    lines: usize,
    /// Message records by id, in the order the ids first appear.
    messages: Vec<Value>,
}

fn source(file: &Path) -> Source {
    let recs = lines(file);
    let mut order = Vec::new();
    let mut last: HashMap<String, Value> = HashMap::new();
    for r in &recs {
        if let Some(id) = r["id"].as_str() {
            if last.insert(id.to_string(), r.clone()).is_none() {
                order.push(id.to_string());
            }
        }
    }
    Source {
        lines: recs.len(),
        messages: order
            .into_iter()
            .map(|id| last.remove(&id).unwrap())
            .collect(),
    }
}

fn texts(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        _ => content
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
    }
}

/// Every source line in exactly one entry's `importedFrom.lines`; every user message, answer,
/// thought, tool call and result there once, results named after their call.
fn check_accounted(file: &Path, src: &Source, entries: &[Value]) {
    let mut got = HashSet::new();
    for e in entries {
        let from = &e["importedFrom"];
        assert_eq!(from["format"], "gemini");
        assert_eq!(from["file"], file.to_str().unwrap());
        for l in from["lines"].as_array().unwrap() {
            assert!(got.insert(l.as_u64().unwrap()), "line {l} imported twice");
        }
    }
    let want: HashSet<u64> = (1..=src.lines as u64).collect();
    assert_eq!(got, want, "every source line is accounted for");

    let msgs: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| &e["message"])
        .collect();
    let role = |r: &'static str| msgs.iter().copied().filter(move |m| m["role"] == r);
    let of_type = |t: &'static str| src.messages.iter().filter(move |m| m["type"] == t);

    let src_user: Vec<String> = of_type("user")
        .map(|m| texts(&m["content"]))
        .filter(|t| !t.is_empty())
        .collect();
    assert_eq!(src_user.len(), 4, "{src_user:?}");
    let user: Vec<String> = role("user").map(|m| texts(&m["content"])).collect();
    assert_eq!(user, src_user, "user messages");

    let src_said: Vec<String> = of_type("gemini")
        .map(|m| texts(&m["content"]))
        .filter(|t| !t.is_empty())
        .collect();
    let said: Vec<String> = role("assistant")
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter(|b| b["type"] == "text")
        .map(|b| b["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(said, src_said, "assistant texts");
    assert_eq!(
        role("assistant").count(),
        of_type("gemini").count(),
        "one assistant message per Gemini message"
    );

    let src_thoughts: Vec<String> = of_type("gemini")
        .flat_map(|m| m["thoughts"].as_array().unwrap())
        .map(|t| {
            format!(
                "**{}** {}",
                t["subject"].as_str().unwrap(),
                t["description"].as_str().unwrap()
            )
        })
        .collect();
    let thoughts: Vec<String> = role("assistant")
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter(|b| b["type"] == "thinking")
        .map(|b| b["thinking"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(thoughts, src_thoughts, "thoughts");

    let src_calls: Vec<(String, String)> = of_type("gemini")
        .flat_map(|m| m["toolCalls"].as_array().into_iter().flatten())
        .map(|c| {
            (
                c["id"].as_str().unwrap().into(),
                c["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(src_calls.len(), 6, "{src_calls:?}");
    let calls: Vec<(String, String)> = role("assistant")
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter(|b| b["type"] == "toolCall")
        .map(|b| {
            (
                b["id"].as_str().unwrap().into(),
                b["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(sorted(calls), sorted(src_calls.clone()), "tool calls");

    let src_results: Vec<String> = of_type("user")
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .filter_map(|p| p["functionResponse"]["id"].as_str().map(str::to_string))
        .collect();
    let results: Vec<String> = role("toolResult")
        .map(|m| m["toolCallId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(sorted(results), sorted(src_results), "tool results");
    let names: HashMap<String, String> = src_calls.into_iter().collect();
    for m in role("toolResult") {
        assert_eq!(
            m["toolName"],
            names[m["toolCallId"].as_str().unwrap()].as_str()
        );
    }
}

#[test]
fn gemini_recording_imports_with_tools_errors_resumes_and_context() {
    let env = Env::new();
    let out = env.ok(&["import", "--from", "gemini", fixtures().to_str().unwrap()]);
    assert!(
        out.contains("1 Gemini CLI session(s) into")
            && out.contains("1 imported, 0 updated, 0 already there, 0 failed")
            && out.contains("6 tool call(s), 6 tool result(s)"),
        "{out}"
    );
    let imported = env.imported();
    assert_eq!(imported.len(), 1, "{imported:?}");
    let file = &imported[ID];
    let all = lines(file);
    assert_eq!(all[0]["type"], "session");
    assert_eq!(all[0]["id"], ID);
    assert_eq!(all[0]["cwd"], CWD);
    let entries = &all[1..];
    check_accounted(&recording(), &source(&recording()), entries);
    let verify = env.ok(&["verify", file.to_str().unwrap()]);
    assert!(verify.contains(": ok"), "{verify}");

    let msgs: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| &e["message"])
        .collect();
    let first = msgs
        .iter()
        .find(|m| texts(&m["content"]) == "Let me look at the folder.")
        .unwrap();
    let content = first["content"].as_array().unwrap();
    assert_eq!(content[0]["type"], "thinking");
    assert_eq!(content[2]["type"], "toolCall");
    assert_eq!(content[2]["name"], "list_directory");
    assert_eq!(content[2]["arguments"]["dir_path"], CWD);
    assert_eq!(first["stopReason"], "toolUse");
    assert_eq!(
        (first["provider"].as_str(), first["api"].as_str()),
        (Some("google"), Some("google-generative-ai"))
    );
    assert_eq!(first["model"], "gemini-2.5-pro");
    assert_eq!(first["usage"]["input"], 1200 - 300);
    assert_eq!(first["usage"]["cacheRead"], 300);
    assert_eq!(
        first["usage"]["output"],
        45 + 9,
        "thought tokens count as output"
    );
    assert_eq!(first["usage"]["totalTokens"], 1254);
    assert!(
        first["usage"]["cost"]["total"].as_f64().unwrap() > 0.0,
        "priced from the catalog"
    );

    // The failed read, the edit, the shell command.
    let results: Vec<&&Value> = msgs.iter().filter(|m| m["role"] == "toolResult").collect();
    let failed: Vec<String> = results
        .iter()
        .filter(|m| m["isError"] == true)
        .map(|m| texts(&m["content"]))
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].contains("File not found"), "{failed:?}");
    let edit = msgs
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .find(|b| b["type"] == "toolCall" && b["name"] == "replace")
        .unwrap();
    assert_eq!(edit["arguments"]["new_string"], "hello from the notes");
    let edited = results.iter().find(|m| m["toolName"] == "replace").unwrap();
    assert!(texts(&edited["content"]).contains("Successfully modified file"));
    assert!(results
        .iter()
        .any(|m| m["toolName"] == "run_shell_command"
            && texts(&m["content"]).contains("Exit Code: 1")));

    // The model switch on the last resume, and a session record for each run.
    let models: Vec<&str> = entries
        .iter()
        .filter(|e| e["type"] == "model_change")
        .map(|e| e["modelId"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["gemini-2.5-pro", "gemini-2.5-flash"]);
    let runs = entries
        .iter()
        .filter(|e| e["customType"] == "gemini/session")
        .count();
    assert_eq!(runs, 4, "the first run and three resumes");

    // The refused prompt is not in Gemini's history any more: a branch of its own, and the
    // context goes from the turn before it to the last answer.
    let inspect = env.ok(&["inspect", file.to_str().unwrap(), "--json"]);
    assert_eq!(
        inspect_field(&inspect, "leafId"),
        entries.last().unwrap()["id"]
    );
    let llm = inspect_field(&inspect, "llmMessages");
    let context: Vec<String> = llm
        .as_array()
        .unwrap()
        .iter()
        .map(|m| texts(&m["content"]))
        .collect();
    assert_eq!(context[0], "List the folder and read notes.txt [[s1]]");
    assert!(context.iter().any(|t| t == "Fixed the typo."));
    assert!(context
        .iter()
        .any(|t| t == "Count the lines of notes.txt [[s4]]"));
    assert_eq!(context.last().unwrap(), "notes.txt has 2 lines.");
    assert!(
        !context.iter().any(|t| t.contains("[[s3]]")),
        "the refused prompt is off the branch: {context:?}"
    );
    assert!(entries
        .iter()
        .any(|e| texts(&e["message"]["content"]).contains("[[s3]]")));

    // Same source, same session: nothing new, nothing duplicated.
    let before = fs::read(file).unwrap();
    let again = env.ok(&["import", "--from", "gemini", recording().to_str().unwrap()]);
    assert!(
        again.contains("0 imported, 0 updated, 1 already there"),
        "{again}"
    );
    assert_eq!(env.imported().len(), 1);
    assert_eq!(fs::read(file).unwrap(), before);
}

#[test]
fn gemini_all_reads_gemini_cli_home_or_home_and_goes_through_any_store() {
    let env = Env::new();
    let copy = |to: &Path| {
        let chats = to.join(".gemini/tmp/project/chats");
        fs::create_dir_all(&chats).unwrap();
        fs::copy(
            fixtures().join("project/.project_root"),
            chats.join("../.project_root"),
        )
        .unwrap();
        fs::copy(recording(), chats.join(recording().file_name().unwrap())).unwrap();
    };
    // $GEMINI_CLI_HOME/.gemini/tmp, into a SQLite store.
    let gemini_home = env.path("gemini-home");
    copy(&gemini_home);
    let db = env.path("s.sqlite");
    let store = format!("sqlite:{}", db.display());
    let args = ["--store", &store, "import", "--from", "gemini", "--all"];
    let vars = [("GEMINI_CLI_HOME", gemini_home.as_path())];
    let out = env.run_with(&args, &vars);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 imported"),
        "{stdout}"
    );
    let out = env.run_with(&args, &vars);
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 already there"));
    let list = env.ok(&["--store", &store, "list", "--all", "--json"]);
    let list: Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list[0]["id"], ID);

    // Without it, ~/.gemini/tmp; nothing there is an error that says where it looked.
    let out = env.run(&["import", "--from", "gemini", "--all"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(".gemini/tmp"));
    copy(env.dir.path());
    let out = env.ok(&["import", "--from", "gemini", "--all"]);
    assert!(out.contains("1 imported"), "{out}");
    assert_eq!(lines(&env.imported()[ID])[0]["cwd"], CWD);
}

#[test]
fn bad_gemini_input_is_one_line_naming_the_file() {
    let env = Env::new();
    let good = fs::read_to_string(recording()).unwrap();
    let mut torn: Vec<&str> = good.lines().collect();
    torn[4] = "{\"id\":\"x\",\"type\":";
    let cases = vec![
        (
            "session-torn.jsonl",
            torn.join("\n"),
            "session-torn.jsonl:5:",
        ),
        (
            "session-array.jsonl",
            "[1,2]\n".to_string(),
            "session-array.jsonl:1:",
        ),
        (
            "session-binary.jsonl",
            "\u{0}\u{1}\u{2}\n".to_string(),
            "session-binary.jsonl:1:",
        ),
        (
            "session-noid.json",
            "{\"messages\": []}".to_string(),
            "session-noid.json: no session id",
        ),
    ];
    for (name, text, want) in cases {
        let path = env.path(name);
        fs::write(&path, text).unwrap();
        let out = env.run(&["import", "--from", "gemini", path.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
        assert_eq!(errors.len(), 1, "{name}: one line: {stderr}");
        assert!(errors[0].contains(want), "{name}: names the file: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    assert!(!env.path("agent/sessions").exists() || env.imported().is_empty());
}
