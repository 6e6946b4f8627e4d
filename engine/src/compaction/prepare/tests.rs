use super::*;
use serde_json::json;

fn entry(id: &str, parent: Option<&str>, message: Value) -> Value {
    json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-01-01T00:00:00.000Z","message":message})
}

fn user(id: &str, parent: Option<&str>, chars: usize) -> Value {
    entry(
        id,
        parent,
        json!({"role":"user","content":"u".repeat(chars),"timestamp":1}),
    )
}

fn assistant(id: &str, parent: Option<&str>, chars: usize) -> Value {
    entry(
        id,
        parent,
        json!({"role":"assistant","content":[{"type":"text","text":"a".repeat(chars)}],"timestamp":1}),
    )
}

fn settings(keep: u64) -> CompactionSettings {
    CompactionSettings {
        keep_recent_tokens: keep,
        ..Default::default()
    }
}

#[test]
fn never_cuts_at_a_tool_result() {
    let path = vec![
        user("u", None, 40),
        entry(
            "a",
            Some("u"),
            json!({"role":"assistant","content":[{"type":"toolCall","id":"t","name":"bash","arguments":{}}],"timestamp":1}),
        ),
        entry(
            "r",
            Some("a"),
            json!({"role":"toolResult","toolCallId":"t","content":[{"type":"text","text":"x".repeat(400)}],"timestamp":1}),
        ),
    ];
    let cut = find_cut_point(&path, 0, path.len(), 10);
    assert_eq!(cut.first_kept_entry_index, 1);
    assert!(cut.is_split_turn);
    assert_eq!(cut.turn_start_index, Some(0));
    let prep = prepare_compaction(&path, &settings(10)).unwrap();
    assert_eq!(prep.first_kept_entry_id, "a");
    assert!(prep.messages_to_summarize.is_empty());
    assert_eq!(prep.turn_prefix_messages.len(), 1);
}

#[test]
fn metadata_before_the_cut_is_kept() {
    let path = vec![
        user("u1", None, 400),
        assistant("a1", Some("u1"), 400),
        json!({"type":"label","id":"l","parentId":"a1","timestamp":"2026-01-01T00:00:00.000Z","targetId":"u1","label":"x"}),
        json!({"type":"model_change","id":"m","parentId":"l","timestamp":"2026-01-01T00:00:00.000Z","provider":"p","modelId":"m"}),
        user("u2", Some("m"), 400),
    ];
    // Checked against Pi 1.6.0: the label is not a turn start, so the cut splits the turn.
    let prep = prepare_compaction(&path, &settings(50)).unwrap();
    assert_eq!(prep.first_kept_entry_id, "l");
    assert!(prep.is_split_turn);
    assert!(prep.messages_to_summarize.is_empty());
    assert_eq!(prep.turn_prefix_messages.len(), 2);
    assert_eq!(prep.tokens_before, 300);
}

#[test]
fn too_small_and_already_compacted() {
    let path = vec![user("u1", None, 4), assistant("a1", Some("u1"), 4)];
    assert!(prepare_compaction(&path, &settings(20000)).is_none());
    assert_eq!(no_preparation_reason(&path), REASON_TOO_SMALL);
    let mut compacted = path.clone();
    compacted.push(json!({"type":"compaction","id":"c","parentId":"a1","timestamp":"2026-01-01T00:00:00.000Z","summary":"s","firstKeptEntryId":"a1","tokensBefore":1}));
    assert!(prepare_compaction(&compacted, &settings(1)).is_none());
    assert_eq!(no_preparation_reason(&compacted), REASON_ALREADY_COMPACTED);
    assert!(prepare_compaction(&[] as &[Value], &settings(1)).is_none());
}

#[test]
fn recovery_omission_suffix_moves_the_cut_past_the_hidden_attempt() {
    // An overflowed attempt a2 hidden by a context edit: keeping from u2 would keep
    // only the edit, so Pi moves the cut onto the hidden attempt.
    let path = vec![
        user("u1", None, 400),
        assistant("a1", Some("u1"), 400),
        user("u2", Some("a1"), 400),
        assistant("a2", Some("u2"), 400),
        json!({"type":"context_edit","id":"e","parentId":"a2","timestamp":"2026-01-01T00:00:00.000Z","targetId":"a2","replacement":null}),
    ];
    // Checked against Pi 1.6.0.
    let prep = prepare_compaction(&path, &settings(50)).unwrap();
    assert_eq!(prep.first_kept_entry_id, "a2");
    assert!(prep.is_split_turn);
    assert_eq!(prep.messages_to_summarize.len(), 2);
    assert_eq!(prep.turn_prefix_messages.len(), 1);
}

#[test]
fn serializes_to_the_oracle_shape() {
    let path = vec![
        user("u1", None, 400),
        assistant("a1", Some("u1"), 400),
        user("u2", Some("a1"), 400),
    ];
    let prep = prepare_compaction(&path, &settings(50)).unwrap();
    let v = serde_json::to_value(&prep).unwrap();
    assert_eq!(v["firstKeptEntryId"], "u2");
    assert_eq!(v["messagesToSummarizeRoles"], json!(["user", "assistant"]));
    assert_eq!(v["fileOps"], json!({"read":[],"written":[],"edited":[]}));
    assert_eq!(v["fileLists"], json!({"readFiles":[],"modifiedFiles":[]}));
    assert_eq!(v["previousSummary"], Value::Null);
    assert_eq!(v["tokensBefore"], 300);
}
