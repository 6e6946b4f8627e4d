//! `pi sessions import --from claude-code`: real Claude Code transcripts (recorded by
//! `fixtures/import/claude-code/make.sh` from the npm CLI) into real stores, every source
//! record accounted for, the tree and the context checked through `pi sessions inspect`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod import_common;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use import_common::{lines, Env};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/import/claude-code/sessions")
}

/// A Claude Code session and its subagent files, as (file, records).
fn source(main: &Path) -> Vec<(PathBuf, Vec<Value>)> {
    let mut files = vec![main.to_path_buf()];
    let sub = main.with_extension("").join("subagents");
    if sub.is_dir() {
        let mut subs: Vec<_> = fs::read_dir(sub)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .collect();
        subs.sort();
        files.extend(subs);
    }
    files.into_iter().map(|f| (f.clone(), lines(&f))).collect()
}

fn blocks<'a>(rec: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    rec.pointer("/message/content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |b| b["type"] == kind)
}

fn text_of(entry: &Value) -> String {
    let c = &entry["message"]["content"];
    match c {
        Value::String(s) => s.clone(),
        Value::Array(a) => a
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// Checks one imported session against its source: every source line is in exactly one entry's
/// `importedFrom`, every tool call and result is there once, parent links follow `parentUuid`.
fn check_accounted(src: &[(PathBuf, Vec<Value>)], entries: &[Value]) {
    // Every source line (file, line) ends up in an entry (a model_change shares its
    // response's lines).
    let mut want = HashSet::new();
    for (file, _) in src {
        let text = fs::read_to_string(file).unwrap();
        for (n, l) in text.split('\n').enumerate() {
            if !l.trim().is_empty() {
                want.insert((file.display().to_string(), n as u64 + 1));
            }
        }
    }
    let mut got = HashSet::new();
    for e in entries.iter().filter(|e| e["type"] != "model_change") {
        let from = &e["importedFrom"];
        assert_eq!(from["format"], "claude-code");
        for l in from["lines"].as_array().unwrap() {
            let key = (
                from["file"].as_str().unwrap().to_string(),
                l.as_u64().unwrap(),
            );
            assert!(got.insert(key.clone()), "line {key:?} imported twice");
        }
    }
    assert_eq!(got, want, "every source line is accounted for");

    // Tool calls and results: the same ids, once each.
    // Conversation records only: `api-request-blob` records also hold message copies, and
    // are kept whole as custom entries.
    let recs: Vec<&Value> = src
        .iter()
        .flat_map(|(_, r)| r)
        .filter(|r| r["type"] == "user" || r["type"] == "assistant")
        .collect();
    let src_calls: Vec<String> = recs
        .iter()
        .flat_map(|r| blocks(r, "tool_use"))
        .map(|b| b["id"].as_str().unwrap().to_string())
        .collect();
    let src_results: Vec<String> = recs
        .iter()
        .flat_map(|r| blocks(r, "tool_result"))
        .map(|b| b["tool_use_id"].as_str().unwrap().to_string())
        .collect();
    let msgs: Vec<&Value> = entries.iter().filter(|e| e["type"] == "message").collect();
    let mut calls: Vec<String> = msgs
        .iter()
        .filter(|e| e["message"]["role"] == "assistant")
        .flat_map(|e| e["message"]["content"].as_array().unwrap())
        .filter(|b| b["type"] == "toolCall")
        .map(|b| b["id"].as_str().unwrap().to_string())
        .collect();
    let mut results: Vec<String> = msgs
        .iter()
        .filter(|e| e["message"]["role"] == "toolResult")
        .map(|e| e["message"]["toolCallId"].as_str().unwrap().to_string())
        .collect();
    assert!(!src_calls.is_empty());
    let (mut src_calls, mut src_results) = (src_calls, src_results);
    for v in [&mut src_calls, &mut src_results, &mut calls, &mut results] {
        v.sort();
    }
    assert_eq!(calls, src_calls, "tool calls");
    assert_eq!(results, src_results, "tool results");
    // Every result names the tool of its call.
    let names: HashMap<String, String> = recs
        .iter()
        .flat_map(|r| blocks(r, "tool_use"))
        .map(|b| {
            (
                b["id"].as_str().unwrap().into(),
                b["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    for e in msgs.iter().filter(|e| e["message"]["role"] == "toolResult") {
        let m = &e["message"];
        assert_eq!(
            m["toolName"],
            names[m["toolCallId"].as_str().unwrap()].as_str()
        );
    }

    // Parent links: walking up from a record's entry over entries that are not conversation
    // (custom, model_change) reaches the entry of its parentUuid.
    let by_id: HashMap<&str, &Value> = entries
        .iter()
        .map(|e| (e["id"].as_str().unwrap(), e))
        .collect();
    assert_eq!(by_id.len(), entries.len(), "ids are unique");
    let mut entry_of: HashMap<String, &str> = HashMap::new();
    for e in entries.iter().filter(|e| e["type"] != "model_change") {
        let id = e["id"].as_str().unwrap();
        let uuids = e["importedFrom"]["records"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(std::iter::once(&e["data"]))
            .filter_map(|r| r["uuid"].as_str());
        for u in uuids {
            entry_of.entry(u.to_string()).or_insert(id);
        }
    }
    for e in entries {
        if let Some(p) = e["parentId"].as_str() {
            assert!(by_id.contains_key(p), "parent {p} exists");
        }
    }
    let mut checked = 0;
    for r in &recs {
        let (Some(u), Some(p)) = (r["uuid"].as_str(), r["parentUuid"].as_str()) else {
            continue;
        };
        let (Some(&mine), Some(&parent)) = (entry_of.get(u), entry_of.get(p)) else {
            continue;
        };
        if mine == parent {
            continue; // blocks of one response, merged
        }
        let mut at = by_id[mine]["parentId"].as_str();
        while let Some(id) = at {
            if id == parent {
                break;
            }
            let e = by_id[id];
            assert!(
                e["type"] == "custom" || e["type"] == "model_change" || e["type"] == "message",
                "{u}: walked into {e}"
            );
            at = e["parentId"].as_str();
        }
        assert_eq!(at, Some(parent), "{u} hangs under {p}");
        checked += 1;
    }
    assert!(checked > 5, "{checked} parent links checked");
}

#[test]
fn claude_code_transcripts_import_with_tree_tools_and_context() {
    let env = Env::new();
    let dir = fixtures().join("-tmp-pi-import-cc-project");
    let out = env.ok(&[
        "import",
        "--from",
        "claude-code",
        fixtures().to_str().unwrap(),
    ]);
    assert!(
        out.contains("2 imported, 0 updated, 0 already there, 0 failed"),
        "{out}"
    );
    let imported = env.imported();
    assert_eq!(imported.len(), 2, "{imported:?}");

    let main_id = "1af55bb2-26a2-4d11-9e86-3fe8afe65a49";
    let fork_id = "afa931a0-5e05-4a56-9ce0-7d71862d6fc9";
    for id in [main_id, fork_id] {
        let src = source(&dir.join(format!("{id}.jsonl")));
        let file = &imported[id];
        let all = lines(file);
        assert_eq!(all[0]["type"], "session");
        assert_eq!(all[0]["cwd"], "/tmp/pi-import-cc/project");
        check_accounted(&src, &all[1..]);
        let verify = env.ok(&["verify", file.to_str().unwrap()]);
        assert!(verify.contains(": ok"), "{verify}");
    }

    // The main session: the branch made by --resume-session-at, the subagent, the compaction,
    // model changes, thinking, an image and a failed tool.
    let file = &imported[main_id];
    let entries = lines(file);
    let find = |needle: &str| {
        entries
            .iter()
            .find(|e| e["type"] == "message" && text_of(e).contains(needle))
            .unwrap_or_else(|| panic!("no message with {needle}"))
    };
    let by_id: HashMap<&str, &Value> = entries[1..]
        .iter()
        .map(|e| (e["id"].as_str().unwrap(), e))
        .collect();
    let message_parent = |e: &Value| -> String {
        let mut at = e["parentId"].as_str().unwrap();
        while by_id[at]["type"] != "message" {
            at = by_id[at]["parentId"].as_str().unwrap();
        }
        at.to_string()
    };
    let fork_point = find("The file now reads correctly.")["id"]
        .as_str()
        .unwrap();
    assert_eq!(message_parent(find("Take another way [[s4]]")), fork_point);
    assert_eq!(
        message_parent(find("Ask a helper to count the lines")),
        fork_point
    );
    let agent_call = entries
        .iter()
        .find(|e| {
            e["message"]["content"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|b| b["type"] == "toolCall" && b["name"] == "Agent")
            })
        })
        .unwrap();
    assert_eq!(
        message_parent(find("Count the lines of notes.txt [[s7]]")),
        agent_call["id"].as_str().unwrap(),
        "the subagent hangs off the Agent call"
    );
    let first = find("Let me read it.");
    let content = first["message"]["content"].as_array().unwrap();
    assert_eq!(content[0]["type"], "thinking");
    assert_eq!(first["message"]["stopReason"], "toolUse");
    assert!(
        first["message"]["usage"]["cost"]["total"].as_f64().unwrap() > 0.0,
        "priced"
    );
    let results: Vec<&Value> = entries
        .iter()
        .filter(|e| e["message"]["role"] == "toolResult")
        .collect();
    assert!(results
        .iter()
        .any(|e| e["message"]["content"][0]["type"] == "image"
            && e["message"]["content"][0]["mimeType"] == "image/png"));
    assert!(results
        .iter()
        .any(|e| e["message"]["isError"] == true && text_of(e).contains("Exit code 1")));
    let models: Vec<&str> = entries
        .iter()
        .filter(|e| e["type"] == "model_change")
        .map(|e| e["modelId"].as_str().unwrap())
        .collect();
    assert!(
        models.starts_with(&["claude-sonnet-5-5", "claude-opus-5-5"]),
        "{models:?}"
    );
    let compaction = entries.iter().find(|e| e["type"] == "compaction").unwrap();
    assert!(compaction["summary"]
        .as_str()
        .unwrap()
        .starts_with("This session is being continued"));
    assert_eq!(compaction["tokensBefore"], 1486);
    assert_eq!(
        compaction["firstKeptEntryId"],
        find("Fixed the typo.")["id"],
        "Claude Code's preserved segment is Pi's kept part"
    );

    // What the engine makes of it: the active branch is the last one written (s4), after the
    // compaction; the other branch is not in the context.
    // The tree in this output nests deeper than serde_json's recursion limit, so only the
    // fields needed are read, each from where it starts.
    let inspect = env.ok(&["inspect", file.to_str().unwrap(), "--json"]);
    let field = |key: &str| -> Value {
        let at = inspect.find(&format!("\"{key}\":")).unwrap() + key.len() + 3;
        let mut values = serde_json::Deserializer::from_str(&inspect[at..]).into_iter::<Value>();
        values.next().unwrap().unwrap()
    };
    assert_eq!(field("leafId"), entries.last().unwrap()["id"]);
    let llm = field("llmMessages");
    let llm = llm.as_array().unwrap();
    let texts: Vec<String> = llm
        .iter()
        .map(|m| {
            m["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert!(
        texts[0].contains("compacted into the following summary"),
        "{texts:?}"
    );
    assert_eq!(texts[1], "Fixed the typo.");
    assert_eq!(
        texts.last().unwrap(),
        "This answer branches from an earlier point."
    );
    assert!(texts.iter().any(|t| t == "Take another way [[s4]]"));
    assert!(
        !texts.iter().any(|t| t.contains("[[s6]]")),
        "other branch left out"
    );
    assert!(llm.iter().any(|m| m["role"] == "toolResult"));

    // Same source, same session: nothing new, nothing duplicated.
    let before = fs::read(file).unwrap();
    let again = env.ok(&["import", "--from", "claude-code", dir.to_str().unwrap()]);
    assert!(
        again.contains("0 imported, 0 updated, 2 already there"),
        "{again}"
    );
    assert_eq!(env.imported().len(), 2);
    assert_eq!(fs::read(file).unwrap(), before);
}

#[test]
fn claude_code_import_goes_through_any_store_and_all_finds_the_projects() {
    let env = Env::new();
    // --all reads ~/.claude/projects (HOME is the temp dir).
    let projects = env.path(".claude/projects/-tmp-pi-import-cc-project");
    fs::create_dir_all(&projects).unwrap();
    let src = fixtures().join("-tmp-pi-import-cc-project");
    fs::copy(
        src.join("afa931a0-5e05-4a56-9ce0-7d71862d6fc9.jsonl"),
        projects.join("afa931a0-5e05-4a56-9ce0-7d71862d6fc9.jsonl"),
    )
    .unwrap();
    let db = env.path("s.sqlite");
    let store = format!("sqlite:{}", db.display());
    let out = env.ok(&[
        "--store",
        &store,
        "import",
        "--from",
        "claude-code",
        "--all",
    ]);
    assert!(out.contains("1 imported"), "{out}");
    let out = env.ok(&[
        "--store",
        &store,
        "import",
        "--from",
        "claude-code",
        "--all",
    ]);
    assert!(out.contains("1 already there"), "{out}");
    let list = env.ok(&["--store", &store, "list", "--all", "--json"]);
    let list: Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["id"], "afa931a0-5e05-4a56-9ce0-7d71862d6fc9");
}

#[test]
fn bad_claude_code_input_names_file_and_line() {
    let env = Env::new();
    let good = fs::read_to_string(
        fixtures().join("-tmp-pi-import-cc-project/afa931a0-5e05-4a56-9ce0-7d71862d6fc9.jsonl"),
    )
    .unwrap();
    let mut cases = vec![];
    let mut broken: Vec<&str> = good.lines().collect();
    broken[6] = "{\"type\":\"user\",\"uuid\":";
    cases.push(("torn.jsonl", broken.join("\n"), 7));
    cases.push(("array.jsonl", "{\"type\":\"mode\"}\n[1,2]\n".to_string(), 2));
    cases.push((
        "nomessage.jsonl",
        "\n{\"type\":\"assistant\",\"uuid\":\"x\",\"sessionId\":\"s1\"}\n".to_string(),
        2,
    ));
    cases.push(("binary.jsonl", "\u{0}\u{1}\u{2}\n".to_string(), 1));
    for (name, text, line) in cases {
        let path = env.path(name);
        fs::write(&path, text).unwrap();
        let out = env.run(&["import", "--from", "claude-code", path.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(
            stderr.contains(&format!("{name}:{line}:")),
            "{name}: names file and line: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    assert!(!env.path("agent/sessions").exists() || env.imported().is_empty());
}
