//! Conformance with real Pi 1.6.0: for every recorded session and tricky input in
//! `fixtures/realpi`, what we build equals what Pi's own SessionManager built
//! (`NAME.oracle.json`). A failure names the case and the first difference.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pi_engine::session::Session;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const KEYS: &[&str] = &[
    "leafId",
    "sessionName",
    "labels",
    "tree",
    "branch",
    "contextEntryIds",
    "context",
    "llmMessages",
    "entryCount",
    "header",
    "tokenEstimates",
];

/// Preparation fields compared for each compaction setting.
const PREPARATION_FIELDS: &[&str] = &[
    "firstKeptEntryId",
    "isSplitTurn",
    "tokensBefore",
    "previousSummary",
    "fileLists",
    "messagesToSummarizeRoles",
    "turnPrefixMessagesRoles",
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/realpi")
}

struct Case {
    name: String,
    input: PathBuf,
    oracle: Value,
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for (dir, inputs) in [("sessions", "sessions"), ("tricky", "tricky/inputs")] {
        let dir = fixtures().join(dir);
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                name.strip_suffix(".oracle.json").map(str::to_string)
            })
            .collect();
        names.sort();
        for name in names {
            let oracle: Value = serde_json::from_slice(
                &std::fs::read(dir.join(format!("{name}.oracle.json"))).unwrap(),
            )
            .unwrap();
            let input = fixtures().join(inputs).join(format!("{name}.jsonl"));
            out.push(Case {
                name,
                input,
                oracle,
            });
        }
    }
    assert!(out.len() >= 40, "fixtures missing: {}", out.len());
    out
}

fn first_diff(ours: &Value, pi: &Value, path: &str) -> Option<String> {
    match (ours, pi) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| match (a.get(k), b.get(k)) {
                (None, _) => Some(format!("{path}.{k}: missing in ours")),
                (_, None) => Some(format!("{path}.{k}: extra in ours")),
                (Some(x), Some(y)) => first_diff(x, y, &format!("{path}.{k}")),
            })
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                return Some(format!("{path}: length ours {} vs pi {}", a.len(), b.len()));
            }
            a.iter()
                .zip(b)
                .enumerate()
                .find_map(|(i, (x, y))| first_diff(x, y, &format!("{path}[{i}]")))
        }
        _ if ours == pi => None,
        _ => Some(format!("{path}: ours {ours} vs pi {pi}")),
    }
}

/// Migration gives fresh random ids (in Pi and here): rename ids by tree order.
fn canonical_ids(report: &Value) -> Value {
    fn walk(nodes: &Value, order: &mut Vec<String>) {
        for n in nodes.as_array().into_iter().flatten() {
            order.push(n["id"].as_str().unwrap_or_default().to_string());
            walk(&n["children"], order);
        }
    }
    let mut order = Vec::new();
    walk(&report["tree"], &mut order);
    let map: HashMap<String, String> = order
        .into_iter()
        .enumerate()
        .map(|(i, id)| (id, format!("id{i}")))
        .collect();
    fn sub(v: &Value, map: &HashMap<String, String>) -> Value {
        match v {
            Value::String(s) => Value::String(map.get(s).cloned().unwrap_or(s.clone())),
            Value::Array(a) => Value::Array(a.iter().map(|x| sub(x, map)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, x)| (map.get(k).cloned().unwrap_or(k.clone()), sub(x, map)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    sub(report, &map)
}

fn report(session: &Session) -> Value {
    let mut buf = Vec::new();
    pi_cli::commands::sessions::inspect::Report::build(session)
        .with_compaction_plans(&[2000, 200, 50])
        .write(&mut buf)
        .unwrap();
    serde_json::from_slice(&buf).unwrap()
}

/// The compaction plans: the same reasons, and the same preparation fields.
fn compaction_diff(ours: &Value, pi: &Value) -> Option<String> {
    let pi_plans = pi.as_object()?;
    for (key, want) in pi_plans {
        let got = &ours[key];
        if !want.is_object() {
            if got != want {
                return Some(format!("compaction.{key}: ours {got} vs pi {want}"));
            }
            continue;
        }
        if got["reason"] != want["reason"] {
            return Some(format!(
                "compaction.{key}.reason: ours {} vs pi {}",
                got["reason"], want["reason"]
            ));
        }
        if want["preparation"].is_null() != got["preparation"].is_null() {
            return Some(format!(
                "compaction.{key}.preparation: ours {} vs pi {}",
                got["preparation"], want["preparation"]
            ));
        }
        for field in PREPARATION_FIELDS
            .iter()
            .filter(|_| !want["preparation"].is_null())
        {
            let (g, w) = (&got["preparation"][field], &want["preparation"][field]);
            if g != w {
                return Some(format!(
                    "compaction.{key}.preparation.{field}: ours {g} vs pi {w}"
                ));
            }
        }
    }
    None
}

#[test]
fn every_case_matches_real_pi() {
    let mut failures = Vec::new();
    let mut compared = 0;
    for case in cases() {
        let before = std::fs::read(&case.input).unwrap();
        let loaded = Session::open(&case.input);
        assert_eq!(
            std::fs::read(&case.input).unwrap(),
            before,
            "{}: opening changed the file",
            case.name
        );
        let pi_loads = case.oracle["load"]["ok"].as_bool().unwrap_or(true);
        let session = match (loaded, pi_loads) {
            (Ok(s), true) => s,
            (Err(_), false) => continue,
            (Ok(_), false) => {
                failures.push(format!("{}: Pi refuses this file, we opened it", case.name));
                continue;
            }
            (Err(e), true) => {
                failures.push(format!("{}: Pi opens it, we failed: {e}", case.name));
                continue;
            }
        };
        let mut ours = report(&session);
        let cyclic = case.oracle.get("leafPathCycle").is_some()
            || case.oracle.get("treeCycle").is_some_and(|t| !t.is_null());
        if cyclic {
            // Pi loops forever; ours must stop with a path that names the cycle.
            let warnings = ours["warnings"].as_array().unwrap();
            if case.oracle.get("leafPathCycle").is_some()
                && !warnings
                    .iter()
                    .any(|w| w.as_str().unwrap().contains("cycle"))
            {
                failures.push(format!("{}: cycle not reported", case.name));
            }
            continue;
        }
        let mut pi = case.oracle.clone();
        let rewritten = case.oracle["fileAfterOpen"]["kind"] == "rewritten";
        if rewritten {
            ours = canonical_ids(&ours);
            pi = canonical_ids(&pi);
        }
        for key in KEYS {
            let Some(expected) = pi.get(*key) else {
                continue;
            };
            // A fresh header of an empty file has a random id and time.
            if *key == "header" && (rewritten || case.oracle["fileAfterOpen"]["changed"] == true) {
                continue;
            }
            let got = ours.get(*key).unwrap_or(&Value::Null);
            if let Some(d) = first_diff(got, expected, key) {
                failures.push(format!("{}: {d}", case.name));
                break;
            }
        }
        if let Some(d) = compaction_diff(&ours["compaction"], &pi["compaction"]) {
            failures.push(format!("{}: {d}", case.name));
        }
        compared += 1;
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(compared >= 35, "only {compared} cases compared");
}

#[test]
fn refused_files_give_one_line_errors() {
    for case in cases() {
        if case.oracle["load"]["ok"].as_bool().unwrap_or(true) {
            continue;
        }
        let err = Session::open(&case.input).unwrap_err().to_string();
        assert!(!err.contains('\n'), "{}: multi-line error {err}", case.name);
        assert!(
            err.contains(&case.input.display().to_string()),
            "{}: error does not name the file: {err}",
            case.name
        );
    }
}
