//! Compaction against real Pi 1.6.0.
//!
//! For every session file real Pi loads (fixtures/realpi sessions and tricky inputs,
//! generated sessions in fixtures/expected/generated, and the two large pi-mono
//! sessions), the oracle recorded what Pi's own functions return: token estimates,
//! `prepareCompaction` for four settings (with the serialized conversations), and
//! the entry-based `findCutPoint`. This test loads the same file with
//! `Session::open` and requires identical answers.
//!
//! Migrated v1/v2 files get random ids in Pi, so ids are compared after mapping ours
//! to Pi's by position on the branch. Large values in trimmed oracle reports are
//! stored as `<key>Hash` (FNV-1a 64 of `JSON.stringify`) and `<key>Length`.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pi_engine::compaction::{
    collect_entries_for_branch_summary, estimate_context_tokens, estimate_tokens, find_cut_point,
    last_assistant_usage, no_preparation_reason, prepare_branch_entries, prepare_compaction,
    serialize_conversation, CompactionSettings,
};
use pi_engine::context::{convert_to_llm, project};
use pi_engine::js;
use pi_engine::session::Session;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A session file and the oracle report for it.
struct Case {
    name: String,
    session: PathBuf,
    oracle: PathBuf,
}

fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    files
}

fn stem(p: &Path) -> String {
    p.file_stem().unwrap().to_string_lossy().into_owned()
}

fn cases() -> Vec<Case> {
    let fixtures = root().join("fixtures");
    let mut cases = Vec::new();
    let mut add = |group: &str, session: PathBuf, oracle: PathBuf| {
        if oracle.exists() {
            cases.push(Case {
                name: format!("{group}/{}", stem(&session)),
                session,
                oracle,
            });
        }
    };
    let sessions = fixtures.join("realpi/sessions");
    for s in jsonl_files(&sessions) {
        let o = sessions.join(format!("{}.oracle.json", stem(&s)));
        add("sessions", s, o);
    }
    let tricky = fixtures.join("realpi/tricky");
    for s in jsonl_files(&tricky.join("inputs")) {
        let o = tricky.join(format!("{}.oracle.json", stem(&s)));
        add("tricky", s, o);
    }
    let generated = fixtures.join("expected/generated");
    for s in jsonl_files(&generated) {
        let o = generated.join(format!("{}.oracle.json", stem(&s)));
        add("generated", s, o);
    }
    // More generated sessions, e.g. `python3 fixtures/expected/generated/make.py` run
    // elsewhere: PI_COMPACTION_EXTRA_DIR=/tmp/more cargo test --test compaction_conformance
    if let Some(dir) = std::env::var_os("PI_COMPACTION_EXTRA_DIR") {
        let dir = PathBuf::from(dir);
        for s in jsonl_files(&dir) {
            let o = dir.join(format!("{}.oracle.json", stem(&s)));
            add("extra", s, o);
        }
    }
    for name in ["large-session", "before-compaction"] {
        add(
            "pi-mono-repo",
            fixtures.join(format!("pi-mono-repo/{name}.jsonl")),
            fixtures.join(format!("expected/pi-mono-repo/{name}.oracle.json")),
        );
    }
    cases
}

/// The first place two JSON values differ; numbers compare by value (`5` = `5.0`),
/// since JS prints integral floats without a fraction.
fn first_diff(path: &str, ours: &Value, pi: &Value) -> Option<String> {
    match (ours, pi) {
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => None,
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                return Some(format!("{path}: length {} vs Pi {}", a.len(), b.len()));
            }
            a.iter()
                .zip(b)
                .enumerate()
                .find_map(|(i, (x, y))| first_diff(&format!("{path}[{i}]"), x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            let keys_a: Vec<&String> = a.keys().collect();
            let keys_b: Vec<&String> = b.keys().collect();
            let mut sa = keys_a.clone();
            let mut sb = keys_b.clone();
            sa.sort();
            sb.sort();
            if sa != sb {
                return Some(format!("{path}: keys {keys_a:?} vs Pi {keys_b:?}"));
            }
            b.iter()
                .find_map(|(k, v)| first_diff(&format!("{path}.{k}"), &a[k], v))
        }
        (a, b) if a == b => None,
        (a, b) => Some(format!("{path}: {} vs Pi {}", short(a), short(b))),
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 300 {
        format!("{}…", s.chars().take(300).collect::<String>())
    } else {
        s
    }
}

/// Whether serde_json parses decimal floats correctly rounded, as JS does.
fn floats_parse_exactly() -> bool {
    let text = "0.010668750000000001";
    let parsed: f64 = serde_json::from_str(text).unwrap_or(0.0);
    parsed == text.parse::<f64>().unwrap_or(1.0)
}

/// FNV-1a 64 over UTF-8, as `fixtures/expected/trim.mjs` computes it.
fn fnv(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Compares `ours` with `pi[key]`, or with `pi[keyHash]`/`pi[keyLength]` when the
/// oracle stored a hash. `text` is `JSON.stringify(ours)` (or the string itself).
fn check_value(errors: &mut Vec<String>, what: &str, pi: &Value, key: &str, ours: &Value) {
    if let Some(hash) = pi.get(format!("{key}Hash")) {
        let text = match ours {
            Value::String(s) => s.clone(),
            other => js::stringify(other),
        };
        let len = js::utf16_len(&text) as u64;
        let want_len = pi[format!("{key}Length")].as_u64();
        if Some(len) != want_len || hash.as_str() != Some(fnv(&text).as_str()) {
            errors.push(format!(
                "{what}.{key}: hash/length {}/{len} vs Pi {hash}/{want_len:?}",
                fnv(&text)
            ));
        }
        return;
    }
    let want = pi.get(key).cloned().unwrap_or(Value::Null);
    if let Some(d) = first_diff(&format!("{what}.{key}"), ours, &want) {
        errors.push(d);
    }
}

fn check_case(case: &Case) -> Result<bool, Vec<String>> {
    let oracle: Value = serde_json::from_str(&std::fs::read_to_string(&case.oracle).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", case.oracle.display()));
    let loads = oracle["load"]["ok"] == Value::Bool(true);
    if !loads || oracle.get("leafPathCycle").is_some() {
        return Ok(false);
    }
    let mut errors = Vec::new();
    let session = Session::open(&case.session).map_err(|e| vec![format!("open: {e}")])?;
    let walk = session.branch_path();
    let branch: Vec<Value> = walk
        .entries
        .iter()
        .map(|&i| session.entry_value(i))
        .collect();
    let our_ids: Vec<Option<String>> = branch
        .iter()
        .map(|e| e.get("id").and_then(Value::as_str).map(str::to_string))
        .collect();
    let pi_ids: Vec<Value> = oracle["branch"].as_array().cloned().unwrap_or_default();
    if our_ids.len() != pi_ids.len() {
        return Err(vec![format!(
            "branch length {} vs Pi {}",
            our_ids.len(),
            pi_ids.len()
        )]);
    }
    // Ours → Pi's, by position (identity unless Pi migrated the file with fresh ids).
    let id_map: HashMap<String, Value> = our_ids
        .iter()
        .zip(&pi_ids)
        .filter_map(|(o, p)| Some((o.clone()?, p.clone())))
        .collect();
    let map_id = |id: &Value| -> Value {
        id.as_str()
            .and_then(|s| id_map.get(s))
            .cloned()
            .unwrap_or_else(|| id.clone())
    };

    // Token estimates over the projected context.
    let projection = project(branch.as_slice());
    let messages: Vec<&Value> = projection.messages().collect();
    let te = &oracle["tokenEstimates"];
    let per_message: Vec<Value> = messages
        .iter()
        .map(|m| Value::from(estimate_tokens(m)))
        .collect();
    check_value(
        &mut errors,
        "tokenEstimates",
        te,
        "perMessage",
        &Value::Array(per_message),
    );
    let ect = serde_json::to_value(estimate_context_tokens(messages.iter().copied())).unwrap();
    check_value(
        &mut errors,
        "tokenEstimates",
        te,
        "estimateContextTokens",
        &ect,
    );
    let usage = last_assistant_usage(&branch).unwrap_or(Value::Null);
    check_value(
        &mut errors,
        "tokenEstimates",
        te,
        "lastAssistantUsage",
        &usage,
    );

    // prepareCompaction for each recorded setting.
    let compaction = oracle["compaction"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    if compaction.is_empty() {
        errors.push("oracle has no compaction section".into());
    }
    for (key, pi) in &compaction {
        let what = format!("compaction[{key}]");
        let settings: CompactionSettings = serde_json::from_value(pi["settings"].clone()).unwrap();
        match (
            prepare_compaction(&branch, &settings),
            pi.get("preparation"),
        ) {
            (None, Some(Value::Null)) => {
                let reason = no_preparation_reason(&branch);
                if pi["reason"] != reason {
                    errors.push(format!("{what}.reason: {reason:?} vs Pi {}", pi["reason"]));
                }
            }
            (Some(prep), Some(want @ Value::Object(_))) => {
                let mut ours = serde_json::to_value(&prep).unwrap();
                ours["firstKeptEntryId"] = map_id(&ours["firstKeptEntryId"]);
                for field in [
                    "firstKeptEntryId",
                    "isSplitTurn",
                    "tokensBefore",
                    "previousSummary",
                    "fileOps",
                    "fileLists",
                    "messagesToSummarizeRoles",
                    "turnPrefixMessagesRoles",
                    "messagesToSummarize",
                    "turnPrefixMessages",
                ] {
                    check_value(&mut errors, &what, want, field, &ours[field]);
                }
                let serialized = |msgs: &[Value]| {
                    let llm = convert_to_llm(msgs);
                    if llm.is_empty() {
                        Value::Null
                    } else {
                        Value::String(serialize_conversation(&llm))
                    }
                };
                let conv = serialized(&prep.messages_to_summarize);
                check_value(&mut errors, &what, pi, "serializedConversation", &conv);
                let prefix = serialized(&prep.turn_prefix_messages);
                check_value(&mut errors, &what, pi, "serializedTurnPrefix", &prefix);
            }
            (ours, want) => errors.push(format!(
                "{what}: ours {} vs Pi {}",
                ours.map_or("no preparation".into(), |p| format!(
                    "cut at {}",
                    p.first_kept_entry_id
                )),
                want.map_or("error".into(), short)
            )),
        }
    }

    // The exported entry-based findCutPoint.
    let fcp = oracle["findCutPoint"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (key, want) in &fcp {
        let keep: u64 = key.trim_start_matches("keepRecentTokens=").parse().unwrap();
        let cut = find_cut_point(&branch, 0, branch.len(), keep);
        let mut ours = serde_json::to_value(cut).unwrap();
        let id = our_ids
            .get(cut.first_kept_entry_index)
            .cloned()
            .flatten()
            .map_or(Value::Null, Value::String);
        ours["firstKeptEntryId"] = map_id(&id);
        if let Some(d) = first_diff(&format!("findCutPoint[{key}]"), &ours, want) {
            errors.push(d);
        }
    }
    if errors.is_empty() {
        Ok(true)
    } else {
        Err(errors)
    }
}

#[test]
fn compaction_matches_real_pi() {
    let cases = cases();
    let mut checked = 0;
    let mut failures = Vec::new();
    for case in &cases {
        match check_case(case) {
            Ok(true) => checked += 1,
            Ok(false) => {}
            Err(errors) => failures.push(format!(
                "{} ({} differences), first: {}",
                case.name,
                errors.len(),
                errors[0]
            )),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from Pi:\n{}",
        failures.len(),
        checked + failures.len(),
        failures.join("\n")
    );
    // Guard against a silently empty corpus.
    assert!(checked >= 100, "only {checked} cases checked");
    eprintln!("{checked} sessions match real Pi 1.6.0");
}

/// Pi keeps every float of a message exactly; a session we re-serialize must too.
/// serde_json's default float parser can be off by one ulp (`0.010668750000000001`
/// comes back as `0.01066875`), which changes cost fields in the large pi-mono
/// sessions. The workspace enables `float_roundtrip` on serde_json for this.
#[test]
fn floats_are_parsed_exactly() {
    assert!(floats_parse_exactly());
}

#[test]
fn corpus_reaches_every_kind_of_answer() {
    // The corpus must exercise plain cuts, split turns, iterative compaction and
    // both refusal reasons, or the conformance test proves less than it claims.
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for case in cases() {
        let oracle: Value =
            serde_json::from_str(&std::fs::read_to_string(&case.oracle).unwrap()).unwrap();
        for v in oracle["compaction"]
            .as_object()
            .into_iter()
            .flat_map(|m| m.values())
        {
            let kind = match &v["preparation"] {
                Value::Object(p) if p["isSplitTurn"] == true => "split",
                Value::Object(p) if !p["previousSummary"].is_null() => "iterative",
                Value::Object(_) => "plain",
                _ if v["reason"] == "Already compacted" => "already",
                _ => "small",
            };
            *seen.entry(kind).or_default() += 1;
        }
    }
    for kind in ["split", "iterative", "plain", "already", "small"] {
        assert!(
            seen.get(kind).copied().unwrap_or(0) > 0,
            "no {kind} case in {seen:?}"
        );
    }
}

/// Branch summaries: the entries collected when navigating from the leaf to a
/// target, and the messages, file lists and token total chosen for three budgets
/// (`fixtures/expected/branch_oracle.mjs`).
#[test]
fn branch_summary_preparation_matches_real_pi() {
    let dir = root().join("fixtures/expected/generated");
    let oracle: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("branch.oracle.json")).unwrap())
            .unwrap();
    let mut checked = 0;
    let mut failures = Vec::new();
    for (file, cases) in oracle.as_object().unwrap() {
        let session = Session::open(&dir.join(file)).unwrap();
        for (n, case) in cases.as_array().unwrap().iter().enumerate() {
            let what = format!("{file}#{n}");
            let collected = collect_entries_for_branch_summary(
                &session,
                case["oldLeafId"].as_str(),
                case["targetId"].as_str().unwrap(),
            );
            let ids: Vec<Value> = collected.entries.iter().map(|e| e["id"].clone()).collect();
            if let Some(d) = first_diff(
                &format!("{what}.entryIds"),
                &Value::from(ids),
                &case["entryIds"],
            ) {
                failures.push(d);
                continue;
            }
            let ancestor = collected
                .common_ancestor_id
                .map_or(Value::Null, Value::String);
            if let Some(d) = first_diff(
                &format!("{what}.commonAncestorId"),
                &ancestor,
                &case["commonAncestorId"],
            ) {
                failures.push(d);
            }
            for (budget, want) in case["budgets"].as_object().unwrap() {
                let prepared = prepare_branch_entries(&collected.entries, budget.parse().unwrap());
                let roles: Vec<Value> = prepared
                    .messages
                    .iter()
                    .map(|m| m["role"].clone())
                    .collect();
                let ours = serde_json::json!({
                    "roles": roles,
                    "messagesHash": fnv(&js::stringify(&Value::Array(prepared.messages.clone()))),
                    "fileLists": prepared.file_ops.file_lists(),
                    "totalTokens": prepared.total_tokens,
                });
                if let Some(d) = first_diff(&format!("{what}.budget[{budget}]"), &ours, want) {
                    failures.push(d);
                }
            }
            checked += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} differences from Pi:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked >= 100, "only {checked} navigations checked");
}
