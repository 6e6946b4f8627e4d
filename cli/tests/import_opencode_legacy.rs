//! `pi sessions import --from opencode` of OpenCode's older JSON storage (one file per session,
//! message and part under `storage/`), recorded by `fixtures/import/opencode-legacy/make.sh`
//! from the real `opencode-ai` 1.1.65: every source file accounted for, the messages, tool calls
//! and results of the source all in the import, a second import writes nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod import_common;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use import_common::{import_all_into_sqlite, lines, sorted, texts, Env};
use serde_json::Value;

fn storage() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/import/opencode-legacy/storage")
        .canonicalize()
        .unwrap()
}

/// The JSON files under `dir`, by their path inside it.
fn json_files(dir: &Path) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                let rel = p.strip_prefix(dir).unwrap().to_str().unwrap().to_string();
                out.push((rel, serde_json::from_slice(&fs::read(&p).unwrap()).unwrap()));
            }
        }
    }
    out
}

/// One OpenCode session as its files hold it.
struct SrcSession {
    info: Value,
    /// Its records' paths inside the storage folder.
    keys: HashSet<String>,
    messages: Vec<Value>,
    parts: Vec<Value>,
}

fn sessions() -> HashMap<String, SrcSession> {
    let dir = storage();
    let mut out: HashMap<String, SrcSession> = HashMap::new();
    for (rel, v) in json_files(&dir.join("session")) {
        out.insert(
            v["id"].as_str().unwrap().to_string(),
            SrcSession {
                keys: HashSet::from([format!("session/{rel}")]),
                info: v,
                messages: Vec::new(),
                parts: Vec::new(),
            },
        );
    }
    let mut session_of = HashMap::new();
    for (rel, v) in json_files(&dir.join("message")) {
        let s = out.get_mut(v["sessionID"].as_str().unwrap()).unwrap();
        s.keys.insert(format!("message/{rel}"));
        session_of.insert(
            v["id"].as_str().unwrap().to_string(),
            v["sessionID"].clone(),
        );
        s.messages.push(v);
    }
    for (rel, v) in json_files(&dir.join("part")) {
        let session = session_of[v["messageID"].as_str().unwrap()]
            .as_str()
            .unwrap();
        let s = out.get_mut(session).unwrap();
        s.keys.insert(format!("part/{rel}"));
        s.parts.push(v);
    }
    out
}

#[test]
fn legacy_storage_imports_every_record_message_call_and_result() {
    let src = sessions();
    assert_eq!(src.len(), 3, "main, its subagent, the fork");
    let child = src
        .values()
        .find(|s| s.info["parentID"].is_string())
        .unwrap();
    let parent_id = child.info["parentID"].as_str().unwrap().to_string();
    let env = Env::new();
    let dir = storage();
    let out = env.ok(&["import", "--from", "opencode", dir.to_str().unwrap()]);
    assert!(
        out.contains("2 imported, 0 updated, 0 already there, 0 failed"),
        "{out}"
    );
    let imported = env.imported();
    assert_eq!(
        sorted(imported.keys().cloned().collect()),
        sorted(
            src.values()
                .filter(|s| !s.info["parentID"].is_string())
                .map(|s| s.info["id"].as_str().unwrap().to_string())
                .collect()
        )
    );

    for (id, file) in &imported {
        let all = lines(file);
        assert_eq!(all[0]["cwd"], src[id].info["directory"]);
        let entries = &all[1..];
        // The unit: the session, and for the main one its subagent's session.
        let unit: Vec<&SrcSession> = if *id == parent_id {
            vec![&src[id], child]
        } else {
            vec![&src[id]]
        };

        // Every file is named by exactly one entry.
        let mut got = HashSet::new();
        for e in entries {
            assert_eq!(e["importedFrom"]["format"], "opencode");
            assert_eq!(e["importedFrom"]["file"], dir.to_str().unwrap());
            for k in e["importedFrom"]["keys"].as_array().unwrap() {
                assert!(got.insert(k.as_str().unwrap().to_string()), "{k} twice");
            }
        }
        let want: HashSet<String> = unit.iter().flat_map(|s| s.keys.clone()).collect();
        assert_eq!(got, want, "{id}: every record accounted for");

        let msgs: Vec<&Value> = entries
            .iter()
            .filter(|e| e["type"] == "message")
            .map(|e| &e["message"])
            .collect();
        let messages: Vec<&Value> = unit.iter().flat_map(|s| &s.messages).collect();
        let parts: Vec<&Value> = unit.iter().flat_map(|s| &s.parts).collect();

        // Prompts: every user message but the compaction requests, with their texts.
        let compaction_requests: HashSet<&str> = parts
            .iter()
            .filter(|p| p["type"] == "compaction")
            .map(|p| p["messageID"].as_str().unwrap())
            .collect();
        let prompts = messages
            .iter()
            .filter(|m| m["role"] == "user")
            .filter(|m| !compaction_requests.contains(m["id"].as_str().unwrap()))
            .count();
        let users: Vec<&&Value> = msgs.iter().filter(|m| m["role"] == "user").collect();
        assert_eq!(users.len(), prompts, "{id}: user messages");

        // Responses: one Pi message per model request (step), an error without steps as one.
        let summaries: HashSet<&str> = messages
            .iter()
            .filter(|m| m["summary"] == true)
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        let steps = messages
            .iter()
            .filter(|m| m["role"] == "assistant" && !summaries.contains(m["id"].as_str().unwrap()))
            .map(|m| {
                let n = parts
                    .iter()
                    .filter(|p| p["messageID"] == m["id"] && p["type"] == "step-start")
                    .count();
                n.max(1)
            })
            .sum::<usize>();
        let answers = msgs.iter().filter(|m| m["role"] == "assistant").count();
        assert_eq!(answers, steps, "{id}: assistant messages");

        // Tool calls: one per tool part, same ids, names and inputs; one result each, an
        // error exactly where OpenCode's call failed.
        let tools: Vec<&&Value> = parts.iter().filter(|p| p["type"] == "tool").collect();
        let src_calls: Vec<(String, String, Value)> = tools
            .iter()
            .map(|p| {
                (
                    p["callID"].as_str().unwrap().to_string(),
                    p["tool"].as_str().unwrap().to_string(),
                    p["state"]["input"].clone(),
                )
            })
            .collect();
        let calls: Vec<(String, String, Value)> = msgs
            .iter()
            .flat_map(|m| m["content"].as_array().into_iter().flatten())
            .filter(|b| b["type"] == "toolCall")
            .map(|b| {
                (
                    b["id"].as_str().unwrap().to_string(),
                    b["name"].as_str().unwrap().to_string(),
                    b["arguments"].clone(),
                )
            })
            .collect();
        assert_eq!(
            sorted(calls.iter().map(|c| c.0.clone()).collect()),
            sorted(src_calls.iter().map(|c| c.0.clone()).collect()),
            "{id}: tool calls"
        );
        for c in &src_calls {
            assert!(calls.contains(c), "{id}: {c:?}");
        }
        let results: Vec<&&Value> = msgs.iter().filter(|m| m["role"] == "toolResult").collect();
        assert_eq!(results.len(), tools.len(), "{id}: tool results");
        let failed: HashSet<&str> = tools
            .iter()
            .filter(|p| p["state"]["status"] != "completed")
            .map(|p| p["callID"].as_str().unwrap())
            .collect();
        let flagged: HashSet<&str> = results
            .iter()
            .filter(|m| m["isError"] == true)
            .map(|m| m["toolCallId"].as_str().unwrap())
            .collect();
        assert_eq!(flagged, failed, "{id}: failed calls");
        for t in &tools {
            if let Some(output) = t["state"]["output"].as_str() {
                let r = results
                    .iter()
                    .find(|m| m["toolCallId"] == t["callID"])
                    .unwrap();
                assert!(texts(&r["content"]).contains(output.trim()), "{id}");
            }
        }
        assert_eq!(
            entries.iter().filter(|e| e["type"] == "compaction").count(),
            compaction_requests.len(),
            "{id}: compactions"
        );
    }
    let main = &imported[&parent_id];
    let verify = env.ok(&["verify", main.to_str().unwrap()]);
    assert!(verify.contains(": ok"), "{verify}");
    let failed_read = lines(main)
        .iter()
        .filter(|e| e["message"]["role"] == "toolResult" && e["message"]["isError"] == true)
        .count();
    assert!(failed_read >= 1, "the missing file's read failed");

    // Same files, same sessions: nothing new, nothing rewritten.
    let before: Vec<Vec<u8>> = imported.values().map(|f| fs::read(f).unwrap()).collect();
    let again = env.ok(&["import", "--from", "opencode", dir.to_str().unwrap()]);
    assert!(
        again.contains("0 imported, 0 updated, 2 already there"),
        "{again}"
    );
    let after: Vec<Vec<u8>> = imported.values().map(|f| fs::read(f).unwrap()).collect();
    assert_eq!(after, before);
}

#[test]
fn opencode_all_reads_the_database_and_the_older_storage() {
    // OpenCode's data folder with both: the database of the current fixture and the older
    // storage folder.
    let env = Env::new();
    let data = env.path("xdg/opencode");
    fs::create_dir_all(&data).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/import");
    fs::copy(
        fixtures.join("opencode/opencode.db"),
        data.join("opencode.db"),
    )
    .unwrap();
    copy_dir(&storage(), &data.join("storage"));
    let xdg = env.path("xdg");
    let store = format!("sqlite:{}", env.path("s.sqlite").display());
    let args = ["--store", &store, "import", "--from", "opencode", "--all"];
    let out = String::from_utf8(env.run_with(&args, &[("XDG_DATA_HOME", &xdg)]).stdout).unwrap();
    assert!(out.contains("4 imported"), "{out}");
    let out = String::from_utf8(env.run_with(&args, &[("XDG_DATA_HOME", &xdg)]).stdout).unwrap();
    assert!(out.contains("4 already there"), "{out}");

    // Without the database, the storage alone (and through the helper every agent uses).
    fs::remove_file(data.join("opencode.db")).unwrap();
    let env2 = Env::new();
    let data2 = env2.path(".local/share/opencode");
    fs::create_dir_all(&data2).unwrap();
    copy_dir(&storage(), &data2.join("storage"));
    let ids = import_all_into_sqlite(&env2, "opencode", 2);
    assert_eq!(ids.len(), 2, "{ids:?}");
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &dest);
        } else {
            fs::copy(&p, &dest).unwrap();
        }
    }
}
