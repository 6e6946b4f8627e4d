//! A whole session file, hostile, through everything that reads it: load, tree,
//! branch and context paths, projection, conversion for the LLM, compaction and
//! branch-summary preparation, serialization for the summarizer, and verify.
//!
//! The first byte picks the compaction budget so that small inputs still cut.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pi_engine::compaction::{
    collect_entries_for_branch_summary, prepare_branch_entries, prepare_compaction,
    serialize_conversation, CompactionSettings,
};
use pi_engine::context::{convert_to_llm, project, SessionPath};
use pi_engine::session::{verify::verify_bytes, LeafChoice, Session};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Some((&knob, file)) = data.split_first() else {
        return;
    };
    let path = Path::new("fuzz.jsonl");
    let problems = verify_bytes(file, path);
    let Ok(session) = Session::from_bytes(file.to_vec(), path) else {
        assert!(!problems.is_empty(), "a refused file has a problem");
        return;
    };

    let tree = session.tree();
    assert_eq!(tree.children.len(), session.entries().len());
    let branch = session.branch_path();
    let context_walk = session.context_path(LeafChoice::Current);
    assert_eq!(branch, context_walk);
    if let Some(id) = session.entries().first().and_then(|e| e.id.as_deref()) {
        let _ = session.context_path(LeafChoice::Id(id));
    }
    let _ = session.session_name();
    let _ = session.labels().count();

    let source = SessionPath::new(&session, &branch.entries);
    let projection = project(&source);
    let llm = convert_to_llm(projection.messages());
    let _ = serde_json::to_vec(&llm).expect("serializable");
    let _ = projection.context_value();

    let values = source.values();
    let settings = CompactionSettings {
        enabled: true,
        reserve_tokens: 16384,
        keep_recent_tokens: u64::from(knob) * 4,
    };
    if let Some(prep) = prepare_compaction(&values, &settings) {
        let _ = serialize_conversation(&prep.messages_to_summarize);
        let _ = serialize_conversation(&prep.turn_prefix_messages);
        let _ = prep.file_lists();
        let _ = serde_json::to_vec(&prep).expect("serializable");
    }

    // Navigating from the leaf to the first entry summarizes the abandoned branch.
    if let Some(target) = session.entries().first().and_then(|e| e.id.as_deref()) {
        let collected = collect_entries_for_branch_summary(&session, session.leaf_id(), target);
        let _ = prepare_branch_entries(&collected.entries, u64::from(knob) * 8);
    }

    // What we write back must load again, with the same entries.
    let again = Session::from_bytes(session.to_jsonl(), path).expect("our own output loads");
    assert_eq!(again.entries().len(), session.entries().len());
});
