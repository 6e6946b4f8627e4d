//! `pi sessions import --from codex`: real Codex rollouts (recorded by
//! `fixtures/import/codex/make.sh` from the npm CLI) into real stores, every source record
//! accounted for, the chain and the context checked through `pi sessions inspect`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod import_common;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use import_common::{import_all_into_sqlite, inspect_field, lines, sorted, texts, Env};

const MAIN_ID: &str = "01a237bc-c8f2-74e3-a621-ecee6134b3c6";
const FORK_ID: &str = "01a237bd-23c5-77f3-b17a-db758ef8d726";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/import/codex/sessions")
}

/// The fixture rollout whose file name ends with `id`.
fn rollout(id: &str) -> PathBuf {
    let dir = fixtures().join("2026/12/02");
    fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_str().unwrap().ends_with(&format!("{id}.jsonl")))
        .unwrap()
}

/// A source: its file, and its records as (1-based line, record).
type Source = (PathBuf, Vec<(u64, Value)>);

fn source(file: &Path, upto: Option<u64>) -> Source {
    let recs = lines(file)
        .into_iter()
        .enumerate()
        .map(|(i, r)| (i as u64 + 1, r))
        .filter(|(n, _)| upto.is_none_or(|u| *n <= u))
        .collect();
    (file.to_path_buf(), recs)
}

fn items<'a>(src: &'a [Source], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    src.iter()
        .flat_map(|(_, r)| r)
        .map(|(_, r)| r)
        .filter(move |r| r["type"] == "response_item" && r["payload"]["type"] == kind)
        .map(|r| &r["payload"])
}

fn call_part(id: &Value) -> String {
    id.as_str().unwrap().split('|').next().unwrap().to_string()
}

/// Checks one imported session against its source: every source line is in exactly one
/// entry's `importedFrom`, every message, tool call and result is there once, the entries
/// form one chain.
fn check_accounted(src: &[Source], entries: &[Value]) {
    let want: HashSet<(String, u64)> = src
        .iter()
        .flat_map(|(f, recs)| recs.iter().map(move |(n, _)| (f.display().to_string(), *n)))
        .collect();
    let mut got = HashSet::new();
    for e in entries {
        let from = &e["importedFrom"];
        assert_eq!(from["format"], "codex");
        for l in from["lines"].as_array().unwrap() {
            let key = (
                from["file"].as_str().unwrap().to_string(),
                l.as_u64().unwrap(),
            );
            assert!(got.insert(key.clone()), "line {key:?} imported twice");
        }
    }
    assert_eq!(got, want, "every source line is accounted for");

    // One chain, in order.
    for pair in entries.windows(2) {
        assert_eq!(pair[1]["parentId"], pair[0]["id"]);
    }

    let msgs: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| &e["message"])
        .collect();
    let role = |r: &'static str| msgs.iter().copied().filter(move |m| m["role"] == r);

    // Messages: user texts, assistant texts and developer messages (kept as custom entries).
    let messages: Vec<&Value> = items(src, "message").collect();
    let src_user: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| texts(&m["content"]))
        .collect();
    let user: Vec<String> = role("user").map(|m| texts(&m["content"])).collect();
    assert!(!src_user.is_empty());
    assert_eq!(user, src_user, "user messages");
    let src_said: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| texts(&m["content"]))
        .collect();
    let said: Vec<String> = role("assistant")
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter(|b| b["type"] == "text")
        .map(|b| b["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(said, src_said, "assistant texts");
    let developer = messages.iter().filter(|m| m["role"] == "developer").count();
    let kept = entries
        .iter()
        .filter(|e| e["customType"] == "codex/response_item/message")
        .count();
    assert_eq!(kept, developer, "developer messages kept as custom entries");
    let src_reasoning: Vec<String> = items(src, "reasoning")
        .map(|r| texts(&r["summary"]))
        .collect();
    let reasoning: Vec<String> = role("assistant")
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter(|b| b["type"] == "thinking")
        .map(|b| b["thinking"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(reasoning, src_reasoning, "reasoning");

    // Tool calls and results: the same call ids, once each, results named after their call.
    let src_calls: Vec<(String, String)> = items(src, "function_call")
        .chain(items(src, "custom_tool_call"))
        .map(|c| {
            (
                c["call_id"].as_str().unwrap().into(),
                c["name"].as_str().unwrap().into(),
            )
        })
        .collect();
    let calls: Vec<(String, String)> = role("assistant")
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter(|b| b["type"] == "toolCall")
        .map(|b| (call_part(&b["id"]), b["name"].as_str().unwrap().into()))
        .collect();
    assert!(!src_calls.is_empty());
    assert_eq!(sorted(calls), sorted(src_calls.clone()), "tool calls");
    let src_results: Vec<String> = items(src, "function_call_output")
        .chain(items(src, "custom_tool_call_output"))
        .map(|o| o["call_id"].as_str().unwrap().to_string())
        .collect();
    let results: Vec<String> = role("toolResult")
        .map(|m| call_part(&m["toolCallId"]))
        .collect();
    assert_eq!(sorted(results), sorted(src_results), "tool results");
    let names: HashMap<String, String> = src_calls.into_iter().collect();
    for m in role("toolResult") {
        assert_eq!(m["toolName"], names[&call_part(&m["toolCallId"])].as_str());
    }
}

fn context_texts(llm: &[Value]) -> Vec<String> {
    llm.iter().map(|m| texts(&m["content"])).collect()
}

#[test]
fn codex_rollouts_import_with_tools_errors_compactions_forks_and_context() {
    let env = Env::new();
    let out = env.ok(&["import", "--from", "codex", fixtures().to_str().unwrap()]);
    assert!(
        out.contains("2 Codex rollout(s) into")
            && out.contains("2 imported, 0 updated, 0 already there, 0 failed"),
        "{out}"
    );
    let imported = env.imported();
    assert_eq!(imported.len(), 2, "{imported:?}");

    // The fork continues all 103 records of the main rollout (forked_from_ordinal_exclusive).
    let main_src = vec![source(&rollout(MAIN_ID), None)];
    let fork_src = vec![
        source(&rollout(MAIN_ID), Some(103)),
        source(&rollout(FORK_ID), None),
    ];
    for (id, src) in [(MAIN_ID, &main_src), (FORK_ID, &fork_src)] {
        let all = lines(&imported[id]);
        assert_eq!(all[0]["type"], "session");
        assert_eq!(all[0]["id"], id);
        assert_eq!(all[0]["cwd"], "/var/tmp/pi-import-codex/project");
        check_accounted(src, &all[1..]);
        let verify = env.ok(&["verify", imported[id].to_str().unwrap()]);
        assert!(verify.contains(": ok"), "{verify}");
    }

    // The main session: the image, the failed command, the patch, the model switches, the
    // refused request, three compactions (two on model switches, one mid-turn).
    let file = &imported[MAIN_ID];
    let entries = lines(file);
    let msgs: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| &e["message"])
        .collect();
    let first_user = msgs
        .iter()
        .find(|m| texts(&m["content"]).contains("[[s1]]"))
        .unwrap();
    assert!(first_user["content"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["type"] == "image" && b["mimeType"] == "image/png"));
    let first = msgs
        .iter()
        .find(|m| texts(&m["content"]) == "Let me look at the folder.")
        .unwrap();
    let content = first["content"].as_array().unwrap();
    assert_eq!(content[0]["type"], "thinking");
    assert!(content[0]["thinkingSignature"]
        .as_str()
        .unwrap()
        .contains("fake-encrypted-1"));
    assert_eq!(content[2]["type"], "toolCall");
    assert_eq!(content[2]["id"], "call_fake_1_0|fc_fake_1_0");
    assert_eq!(content[2]["arguments"]["cmd"], "ls");
    assert_eq!(first["stopReason"], "toolUse");
    assert_eq!(first["model"], "gpt-5.5");
    assert_eq!(first["provider"], "openai");
    assert_eq!(first["api"], "openai-responses");
    assert_eq!(first["responseId"], "resp_fake_1");
    assert_eq!(first["usage"]["input"], 1978 - 989);
    assert_eq!(first["usage"]["cacheRead"], 989);
    assert!(
        first["usage"]["cost"]["total"].as_f64().unwrap() > 0.0,
        "priced from the catalog"
    );
    let results: Vec<&&Value> = msgs.iter().filter(|m| m["role"] == "toolResult").collect();
    let failed: Vec<String> = results
        .iter()
        .filter(|m| m["isError"] == true)
        .map(|m| texts(&m["content"]))
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].contains("does-not-exist.txt: No such file"));
    let patch = msgs
        .iter()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .find(|b| b["type"] == "toolCall" && b["name"] == "apply_patch")
        .unwrap();
    assert!(patch["arguments"]["input"]
        .as_str()
        .unwrap()
        .contains("+hello from the notes"));
    let patched = results
        .iter()
        .find(|m| m["toolName"] == "apply_patch")
        .unwrap();
    assert!(texts(&patched["content"]).contains("Success. Updated the following files"));
    assert_eq!(patched["isError"], false);
    let models: Vec<&str> = entries
        .iter()
        .filter(|e| e["type"] == "model_change")
        .map(|e| e["modelId"].as_str().unwrap())
        .collect();
    assert_eq!(models, ["gpt-5.5", "gpt-6.2-sol", "gpt-5.5"]);
    let fixed = msgs
        .iter()
        .find(|m| texts(&m["content"]) == "Fixed the typo.")
        .unwrap();
    assert_eq!(fixed["model"], "gpt-6.2-sol");
    let error = msgs.iter().find(|m| m["stopReason"] == "error").unwrap();
    assert_eq!(
        error["errorMessage"],
        "The fake server refuses this prompt."
    );
    let compactions: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "compaction")
        .collect();
    assert_eq!(compactions.len(), 3);
    let last = compactions[2];
    assert!(last["summary"]
        .as_str()
        .unwrap()
        .contains("Count the lines of notes.txt [[s4]]"));
    assert_eq!(last["tokensBefore"], 90030, "the response before it");

    // What the engine makes of it: the summary of the last compaction, then what came after.
    let inspect = env.ok(&["inspect", file.to_str().unwrap(), "--json"]);
    assert_eq!(
        inspect_field(&inspect, "leafId"),
        entries.last().unwrap()["id"]
    );
    let llm = inspect_field(&inspect, "llmMessages");
    let texts_in_context = context_texts(llm.as_array().unwrap());
    assert!(
        texts_in_context[0].contains("encrypted"),
        "{texts_in_context:?}"
    );
    assert_eq!(
        texts_in_context.last().unwrap(),
        "This answer comes after the compaction."
    );
    assert!(texts_in_context
        .iter()
        .any(|t| t == "notes.txt has 2 lines."));
    assert!(
        !texts_in_context
            .iter()
            .any(|t| t == "Let me look at the folder."),
        "compacted away"
    );

    // The fork: the parent's history, then its own turn.
    let fork = lines(&imported[FORK_ID]);
    let inspect = env.ok(&["inspect", imported[FORK_ID].to_str().unwrap(), "--json"]);
    let llm = inspect_field(&inspect, "llmMessages");
    let fork_context = context_texts(llm.as_array().unwrap());
    assert_eq!(fork_context.last().unwrap(), "Forked and done.");
    assert!(fork_context.iter().any(|t| t == "Fork it [[s6]]"));
    assert!(fork_context
        .iter()
        .any(|t| t == "This answer comes after the compaction."));
    assert_eq!(fork.iter().filter(|e| e["type"] == "compaction").count(), 3);

    // Same source, same sessions: nothing new, nothing duplicated.
    let before = fs::read(file).unwrap();
    let again = env.ok(&["import", "--from", "codex", fixtures().to_str().unwrap()]);
    assert!(
        again.contains("0 imported, 0 updated, 2 already there"),
        "{again}"
    );
    assert_eq!(env.imported().len(), 2);
    assert_eq!(fs::read(file).unwrap(), before);
}

#[test]
fn codex_import_finds_the_forked_rollout_goes_through_any_store_and_all_reads_codex_home() {
    let env = Env::new();
    // ~/.codex/sessions (HOME is the temp dir, CODEX_HOME unset).
    let day = env.path(".codex/sessions/2026/12/02");
    fs::create_dir_all(&day).unwrap();
    for id in [MAIN_ID, FORK_ID] {
        let from = rollout(id);
        fs::copy(&from, day.join(from.file_name().unwrap())).unwrap();
    }
    // Only the fork named: the rollout it continues is found in the sessions folder.
    let fork = day.join(rollout(FORK_ID).file_name().unwrap());
    let out = env.ok(&["import", "--from", "codex", fork.to_str().unwrap()]);
    assert!(out.contains("1 imported"), "{out}");
    let imported = lines(&env.imported()[FORK_ID]);
    assert!(imported.iter().any(|e| {
        e["message"]["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["text"] == "Fixed the typo."))
    }));

    let ids = import_all_into_sqlite(&env, "codex", 2);
    assert_eq!(
        ids,
        HashSet::from([MAIN_ID.to_string(), FORK_ID.to_string()])
    );
}

#[test]
fn bad_codex_input_names_file_and_line() {
    let env = Env::new();
    let good = fs::read_to_string(rollout(FORK_ID)).unwrap();
    let mut broken: Vec<&str> = good.lines().collect();
    broken[5] = "{\"type\":\"response_item\",\"payload\":";
    let cases = vec![
        ("torn.jsonl", broken.join("\n"), 6),
        (
            "array.jsonl",
            "{\"type\":\"event_msg\"}\n[1,2]\n".to_string(),
            2,
        ),
        (
            "nopayload.jsonl",
            "\n{\"type\":\"response_item\",\"payload\":\"x\"}\n".to_string(),
            2,
        ),
        ("binary.jsonl", "\u{0}\u{1}\u{2}\n".to_string(), 1),
    ];
    for (name, text, line) in cases {
        let path = env.path(name);
        fs::write(&path, text).unwrap();
        let out = env.run(&["import", "--from", "codex", path.to_str().unwrap()]);
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
