//! `pi sessions import --from opencode`: real OpenCode sessions (recorded by
//! `fixtures/import/opencode/make.sh` from the npm CLI: its database and `opencode export`s of
//! it) into real stores, every source record accounted for, checked through
//! `pi sessions inspect`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod import_common;

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use import_common::{import_all_into_sqlite, inspect_field, lines, sorted, texts, Env};
use serde_json::Value;

const MAIN_ID: &str = "ses_dc7697713ffeYc2Bh2DVLx3dX5";
const CHILD_ID: &str = "ses_dc768cc81ffeHz1bFZGbIJY5zw";
const FORK_ID: &str = "ses_dc768b6c1ffeStKQy6zClhi8O2";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/import/opencode")
}

/// `opencode export <id>` of a fixture session, as OpenCode wrote it.
fn export(id: &str) -> Value {
    let path = fixtures().join(format!("export/{id}.json"));
    serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap()
}

/// The parts of the given exported sessions.
fn parts(sessions: &[&Value]) -> Vec<Value> {
    sessions
        .iter()
        .flat_map(|s| s["messages"].as_array().unwrap())
        .flat_map(|m| m["parts"].as_array().unwrap().clone())
        .collect()
}

/// Checks one imported session against the exports of it and its subagents: every session,
/// message and part record is named by exactly one entry's `importedFrom.keys` (the database's
/// `table/id`), every message, tool call and result is there once, and the parts' texts came
/// through.
fn check_accounted(src: &[&Value], entries: &[Value], db: &Path) {
    let mut want = HashSet::new();
    for s in src {
        want.insert(format!("session/{}", s["info"]["id"].as_str().unwrap()));
        for m in s["messages"].as_array().unwrap() {
            want.insert(format!("message/{}", m["info"]["id"].as_str().unwrap()));
            for p in m["parts"].as_array().unwrap() {
                want.insert(format!("part/{}", p["id"].as_str().unwrap()));
            }
        }
    }
    let mut got = HashSet::new();
    for e in entries {
        let from = &e["importedFrom"];
        assert_eq!(from["format"], "opencode");
        assert_eq!(from["file"], db.display().to_string());
        for k in from["keys"].as_array().unwrap() {
            let k = k.as_str().unwrap().to_string();
            assert!(got.insert(k.clone()), "{k} imported twice");
        }
    }
    assert_eq!(got, want, "every source record is accounted for");

    let msgs: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| &e["message"])
        .collect();
    let role = |r: &'static str| msgs.iter().copied().filter(move |m| m["role"] == r);
    let parts = parts(src);

    // Tool calls: one per tool part, with OpenCode's call id and tool name; one result each,
    // an error exactly when OpenCode's call state is `error`.
    let src_calls: Vec<(String, String)> = parts
        .iter()
        .filter(|p| p["type"] == "tool")
        .map(|p| {
            (
                p["callID"].as_str().unwrap().into(),
                p["tool"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(!src_calls.is_empty());
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
    let results: Vec<(String, String)> = role("toolResult")
        .map(|m| {
            (
                m["toolCallId"].as_str().unwrap().into(),
                m["toolName"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(sorted(results), sorted(src_calls), "tool results");
    let src_errors: usize = parts
        .iter()
        .filter(|p| p["type"] == "tool" && p["state"]["status"] == "error")
        .count();
    assert_eq!(
        role("toolResult").filter(|m| m["isError"] == true).count(),
        src_errors
    );

    // Texts and reasoning (summary messages become the compaction's summary); a subagent's
    // come where it was launched, so compared without order.
    let src_texts = |kind: &str| -> Vec<String> {
        src.iter()
            .flat_map(|s| s["messages"].as_array().unwrap())
            .filter(|m| m["info"]["summary"] != true && m["info"]["role"] == "assistant")
            .flat_map(|m| m["parts"].as_array().unwrap())
            .filter(|p| p["type"] == kind)
            .map(|p| p["text"].as_str().unwrap().to_string())
            .collect()
    };
    let said = |kind: &str, field: &str| -> Vec<String> {
        role("assistant")
            .flat_map(|m| m["content"].as_array().unwrap())
            .filter(|b| b["type"] == kind)
            .map(|b| b[field].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        sorted(said("text", "text")),
        sorted(src_texts("text")),
        "assistant texts"
    );
    assert_eq!(
        sorted(said("thinking", "thinking")),
        sorted(src_texts("reasoning")),
        "reasoning"
    );
    let src_user: usize = src
        .iter()
        .flat_map(|s| s["messages"].as_array().unwrap())
        .filter(|m| m["info"]["role"] == "user")
        .filter(|m| {
            !m["parts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["type"] == "compaction")
        })
        .count();
    assert_eq!(role("user").count(), src_user, "user messages");
}

#[test]
fn opencode_database_imports_with_tools_errors_compaction_subagent_and_context() {
    let env = Env::new();
    let db = env.path("opencode.db");
    fs::copy(fixtures().join("opencode.db"), &db).unwrap();
    let out = env.ok(&["import", "--from", "opencode", db.to_str().unwrap()]);
    assert!(
        out.contains("2 OpenCode session(s) into")
            && out.contains("2 imported, 0 updated, 0 already there, 0 failed"),
        "{out}"
    );
    let imported = env.imported();
    assert_eq!(
        imported.len(),
        2,
        "the subagent's session is part of its parent's: {imported:?}"
    );

    let (main, child, fork) = (export(MAIN_ID), export(CHILD_ID), export(FORK_ID));
    assert_eq!(child["info"]["parentID"], MAIN_ID);
    for (id, src) in [(MAIN_ID, vec![&main, &child]), (FORK_ID, vec![&fork])] {
        let all = lines(&imported[id]);
        assert_eq!(all[0]["type"], "session");
        assert_eq!(all[0]["id"], id);
        assert_eq!(all[0]["cwd"], "/var/tmp/pi-import-opencode/project");
        check_accounted(&src, &all[1..], &db);
        let verify = env.ok(&["verify", imported[id].to_str().unwrap()]);
        assert!(verify.contains(": ok"), "{verify}");
    }

    let file = &imported[MAIN_ID];
    let entries = lines(file);
    assert_eq!(entries[1]["type"], "session_info");
    assert_eq!(entries[1]["name"], "Notes session");
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
    assert_eq!(content[2]["name"], "glob");
    assert_eq!(content[2]["arguments"]["pattern"], "*");
    assert_eq!(first["stopReason"], "toolUse");
    assert_eq!(
        (first["provider"].as_str(), first["model"].as_str()),
        (Some("fake"), Some("fake-coder"))
    );
    assert_eq!(first["api"], "openai-completions");
    // OpenCode's step-finish: input without the cached part, output without reasoning.
    let finish = parts(&[&main])
        .into_iter()
        .find(|p| p["type"] == "step-finish")
        .unwrap();
    let t = &finish["tokens"];
    assert_eq!(first["usage"]["input"], t["input"]);
    assert_eq!(first["usage"]["cacheRead"], t["cache"]["read"]);
    assert_eq!(
        first["usage"]["output"].as_u64(),
        Some(t["output"].as_u64().unwrap() + t["reasoning"].as_u64().unwrap())
    );
    assert_eq!(first["usage"]["cost"]["total"], finish["cost"]);

    let failed: Vec<&&Value> = msgs
        .iter()
        .filter(|m| m["role"] == "toolResult" && m["isError"] == true)
        .collect();
    assert_eq!(failed.len(), 1);
    assert!(texts(&failed[0]["content"]).starts_with("File not found"));
    let bash = msgs.iter().find(|m| m["toolName"] == "bash").unwrap();
    assert_eq!(bash["details"]["exit"], 1, "OpenCode's metadata kept");
    let edit = msgs.iter().find(|m| m["toolName"] == "edit").unwrap();
    assert_eq!(texts(&edit["content"]), "Edit applied successfully.");
    assert!(entries.iter().any(|e| e["customType"] == "opencode/patch"));
    assert!(entries.iter().any(|e| e["customType"] == "opencode/file"));
    let error = msgs.iter().find(|m| m["stopReason"] == "error").unwrap();
    assert_eq!(
        error["errorMessage"],
        "The fake server refuses this prompt."
    );

    // The subagent: a branch off the message whose `task` call launched it, written before
    // the main line goes on.
    let task = entries
        .iter()
        .find(|e| {
            e["message"]["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["name"] == "task"))
        })
        .unwrap();
    let children: Vec<&Value> = entries
        .iter()
        .filter(|e| e["parentId"] == task["id"])
        .collect();
    assert_eq!(
        children.len(),
        2,
        "the subagent's branch and the task's result"
    );
    assert_eq!(children[0]["customType"], "opencode/session");
    assert_eq!(children[0]["data"]["id"], CHILD_ID);
    assert_eq!(children[1]["message"]["role"], "toolResult");

    let compaction = entries.iter().find(|e| e["type"] == "compaction").unwrap();
    assert!(compaction["summary"]
        .as_str()
        .unwrap()
        .starts_with("Summary: the user listed"));
    assert!(compaction["tokensBefore"].as_u64().unwrap() > 190_000);

    // What the engine makes of it: the summary, then what came after; the leaf is the main
    // line's last message.
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
    assert!(
        context[0].contains("Summary: the user listed"),
        "{context:?}"
    );
    assert_eq!(
        context.last().unwrap(),
        "This answer comes after the compaction."
    );
    assert!(
        !context.iter().any(|t| t == "Let me look at the folder."),
        "compacted away"
    );

    // The fork is OpenCode's copy of the messages before it, then its own turn.
    let inspect = env.ok(&["inspect", imported[FORK_ID].to_str().unwrap(), "--json"]);
    let llm = inspect_field(&inspect, "llmMessages");
    let context: Vec<String> = llm
        .as_array()
        .unwrap()
        .iter()
        .map(|m| texts(&m["content"]))
        .collect();
    assert_eq!(context.last().unwrap(), "Forked and done.");
    assert!(context
        .iter()
        .any(|t| t == "Fix the typo in notes.txt [[s2]]"));

    // Same source, same sessions: nothing new, nothing duplicated.
    let before = fs::read(file).unwrap();
    let again = env.ok(&["import", "--from", "opencode", db.to_str().unwrap()]);
    assert!(
        again.contains("0 imported, 0 updated, 2 already there"),
        "{again}"
    );
    assert_eq!(env.imported().len(), 2);
    assert_eq!(fs::read(file).unwrap(), before);

    // The exports give the same entries (ids included), only `importedFrom` says where from.
    let other = Env::new();
    let out = other.ok(&[
        "import",
        "--from",
        "opencode",
        fixtures().join("export").to_str().unwrap(),
    ]);
    assert!(out.contains("2 imported"), "{out}");
    let strip = |mut v: Vec<Value>| -> Vec<Value> {
        for e in &mut v {
            e.as_object_mut().unwrap().remove("importedFrom");
            // The session record itself: a database row there, OpenCode's session object here.
            if e["customType"] == "opencode/session" {
                e["data"] = Value::Null;
            }
        }
        v
    };
    let from_exports = other.imported();
    for id in [MAIN_ID, FORK_ID] {
        assert_eq!(
            strip(lines(&from_exports[id])),
            strip(lines(&imported[id])),
            "{id}"
        );
    }
}

#[test]
fn opencode_all_reads_the_data_dir_and_goes_through_any_store() {
    let env = Env::new();
    // ~/.local/share/opencode (XDG_DATA_HOME unset), into a SQLite store.
    let data = env.path(".local/share/opencode");
    fs::create_dir_all(&data).unwrap();
    fs::copy(fixtures().join("opencode.db"), data.join("opencode.db")).unwrap();
    let ids = import_all_into_sqlite(&env, "opencode", 2);
    assert_eq!(
        ids,
        HashSet::from([MAIN_ID.to_string(), FORK_ID.to_string()])
    );

    // $XDG_DATA_HOME wins; an empty one there is a clear error.
    let xdg = env.path("xdg");
    fs::create_dir_all(&xdg).unwrap();
    let out = env.run_with(
        &["import", "--from", "opencode", "--all"],
        &[("XDG_DATA_HOME", &xdg)],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no OpenCode sessions at") && stderr.contains("xdg/opencode/opencode.db"),
        "{stderr}"
    );
    fs::create_dir_all(xdg.join("opencode")).unwrap();
    fs::copy(
        fixtures().join("opencode.db"),
        xdg.join("opencode/opencode.db"),
    )
    .unwrap();
    let out = env.run_with(
        &["import", "--from", "opencode", "--all"],
        &[("XDG_DATA_HOME", &xdg)],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("xdg/opencode/opencode.db#"),
        "{stdout}"
    );
}

#[test]
fn bad_opencode_input_is_one_line_naming_the_file() {
    let env = Env::new();
    let good = fs::read_to_string(fixtures().join(format!("export/{FORK_ID}.json"))).unwrap();
    let mut wrong_part: Value = serde_json::from_str(&good).unwrap();
    wrong_part["messages"][1]["parts"][0] = Value::from(3);
    let cases = vec![
        (
            "torn.json",
            good[..good.len() / 2].to_string(),
            "not an OpenCode export",
        ),
        (
            "array.json",
            "[1,2]".to_string(),
            "no `info` with a session id",
        ),
        ("part.json", wrong_part.to_string(), "/messages/1/parts/0"),
        (
            "text.db",
            "not a database at all, just text".to_string(),
            "text.db: ",
        ),
        ("empty.db", String::new(), "not an OpenCode database"),
    ];
    for (name, text, says) in cases {
        let path = env.path(name);
        fs::write(&path, text).unwrap();
        let out = env.run(&["import", "--from", "opencode", path.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        let errors: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("error: "))
            .collect();
        assert_eq!(errors.len(), 1, "{name}: one line: {stderr}");
        assert!(
            errors[0].contains(name) && errors[0].contains(says),
            "{name}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    assert!(!env.path("agent/sessions").exists() || env.imported().is_empty());
}
