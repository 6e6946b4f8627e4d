//! v1/v2 sessions: the fuzzer writes the entries, the first byte picks the header
//! (none, v1, v2, or a version that is not a number). Migration runs twice: on the
//! parsed values directly and through `Session::from_bytes`, whose result must
//! be a v3 session that loads again unchanged in shape.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pi_engine::context::{convert_to_llm, project, SessionPath};
use pi_engine::session::Session;
use pi_formats::{jsonl, migrate};
use serde_json::Value;
use std::path::Path;

const HEADERS: [&str; 4] = [
    r#"{"type":"session","id":"fuzz-session","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
    r#"{"type":"session","version":1,"id":"fuzz-session","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
    r#"{"type":"session","version":2,"id":"fuzz-session","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#,
    r#"{"type":"session","version":"2","id":"fuzz-session","cwd":"/"}"#,
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let mut file = HEADERS[usize::from(pick) % HEADERS.len()]
        .as_bytes()
        .to_vec();
    file.push(b'\n');
    file.extend_from_slice(body);

    let mut values: Vec<Value> = jsonl::lines(&file)
        .filter(|l| !l.is_blank())
        .filter_map(|l| jsonl::parse_value(l.bytes).ok())
        .collect();
    let mut n = 0u32;
    let needed = migrate::needs_migration(&values);
    let migrated = migrate::migrate(&mut values, || {
        n += 1;
        format!("{n:08x}")
    });
    assert_eq!(needed, migrated);
    assert!(!migrate::needs_migration(&values), "migration reaches v3");

    let path = Path::new("fuzz.jsonl");
    let Ok(session) = Session::from_bytes(file, path) else {
        return;
    };
    let branch = session.branch_path();
    let source = SessionPath::new(&session, &branch.entries);
    let _ = convert_to_llm(project(&source).messages());
    let _ = session.tree();

    let written = session.to_jsonl();
    let again = Session::from_bytes(written, path).expect("migrated output loads");
    assert!(again.load_report().migrated_from.is_none(), "written as v3");
    assert_eq!(again.entries().len(), session.entries().len());
});
