use super::*;
use serde_json::json;

fn msg(id: &str, parent: Option<&str>, role: &str, text: &str) -> Value {
    json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-01-01T00:00:00.000Z",
           "message":{"role":role,"content":[{"type":"text","text":text}],"timestamp":1}})
}

#[test]
fn no_compaction_keeps_the_whole_path() {
    let path = vec![
        msg("a", None, "user", "q"),
        msg("b", Some("a"), "assistant", "r"),
    ];
    assert_eq!(context_entry_positions(path.as_slice()), vec![0, 1]);
    let p = project(path.as_slice());
    assert_eq!(p.messages().count(), 2);
    assert_eq!(p.thinking_level, Some(json!("off")));
    assert_eq!(p.model, Some(json!({})));
}

#[test]
fn compaction_keeps_from_first_kept_and_skips_system_messages() {
    let path = vec![
        msg("s", None, "system", ""),
        msg("a", Some("s"), "user", "old"),
        msg("b", Some("a"), "user", "kept"),
        json!({"type":"compaction","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:00.000Z",
               "summary":"S","firstKeptEntryId":"b","tokensBefore":10}),
        msg("d", Some("c"), "user", "after"),
    ];
    assert_eq!(context_entry_positions(path.as_slice()), vec![3, 2, 4]);
    let roles: Vec<_> = project(path.as_slice())
        .messages()
        .map(|m| m["role"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(roles, ["compactionSummary", "user", "user"]);
}

#[test]
fn retained_tail_compaction_is_a_checkpoint() {
    // The seeds' session format: the compaction carries the kept messages; entries before
    // it are not walked, even when `firstKeptEntryId` names one of them.
    let path = vec![
        msg("a", None, "user", "old"),
        msg("b", Some("a"), "assistant", "old reply"),
        json!({"type":"compaction","id":"c","parentId":"b","timestamp":"2026-01-01T00:00:00.000Z",
               "summary":"S","firstKeptEntryId":"a","tokensBefore":10,
               "retainedTail":[{"role":"user","content":"latest request"},
                               {"role":"assistant","content":[{"type":"text","text":"latest reply"}],"stopReason":"stop"}]}),
        msg("d", Some("c"), "user", "after"),
    ];
    assert_eq!(context_entry_positions(path.as_slice()), vec![2, 3]);
    let messages: Vec<Value> = project(path.as_slice()).messages().cloned().collect();
    let roles: Vec<_> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["compactionSummary", "user", "assistant", "user"]);
    assert_eq!(messages[1]["content"], json!("latest request"));
    assert_eq!(messages[3]["content"][0]["text"], json!("after"));
}

#[test]
fn dangling_first_kept_drops_everything_before() {
    let path = vec![
        msg("a", None, "user", "old"),
        json!({"type":"compaction","id":"c","parentId":"a","summary":"S","firstKeptEntryId":"zz","tokensBefore":1}),
    ];
    assert_eq!(context_entry_positions(path.as_slice()), vec![1]);
}

#[test]
fn context_edit_replaces_or_removes() {
    let path = vec![
        msg("a", None, "assistant", "long"),
        json!({"type":"context_edit","id":"e","parentId":"a","targetId":"a","replacement":{"content":"short"}}),
    ];
    let p = project(path.as_slice());
    let first = p.messages().next().unwrap();
    assert_eq!(first["content"], json!([{"type":"text","text":"short"}]));
    let path = vec![
        msg("a", None, "user", "x"),
        json!({"type":"context_edit","id":"e","parentId":"a","targetId":"a","replacement":null}),
    ];
    assert_eq!(project(path.as_slice()).messages().count(), 0);
}

#[test]
fn convert_wraps_summaries_and_drops_excluded_bash() {
    let msgs = vec![
        json!({"role":"branchSummary","summary":"B","fromId":"x","timestamp":5}),
        json!({"role":"bashExecution","command":"ls","output":"","exitCode":2,"cancelled":false,"truncated":false,"timestamp":1}),
        json!({"role":"bashExecution","command":"ls","output":"x","excludeFromContext":true,"timestamp":1}),
    ];
    let out = convert_to_llm(&msgs);
    assert_eq!(out.len(), 2);
    assert_eq!(
        out[0]["content"][0]["text"],
        format!("{BRANCH_SUMMARY_PREFIX}B{BRANCH_SUMMARY_SUFFIX}")
    );
    assert_eq!(
        out[1]["content"][0]["text"],
        "Ran `ls`\n(no output)\n\nCommand exited with code 2"
    );
}

#[test]
fn appended_entries_project_as_if_they_were_on_the_path() {
    // A compaction and a context edit proposed after the path: split anywhere, the
    // projection is the one of the whole list.
    let whole = vec![
        msg("a", None, "user", "old"),
        msg("b", Some("a"), "assistant", "kept"),
        msg("c", Some("b"), "user", "latest"),
        json!({"type":"compaction","id":"k","parentId":"c","timestamp":"2026-01-01T00:00:00.000Z",
               "summary":"S","firstKeptEntryId":"b","tokensBefore":10}),
        json!({"type":"context_edit","id":"e","parentId":"k","timestamp":"2026-01-01T00:00:00.000Z",
               "targetId":"c","replacement":{"content":"edited"}}),
        json!({"type":"custom_message","id":"m","parentId":"e","timestamp":"2026-01-01T00:00:00.000Z",
               "customType":"note","content":"extra","display":false}),
    ];
    let expected = project(whole.as_slice());
    for split in 0..=whole.len() {
        let (path, appended) = whole.split_at(split);
        let source = WithAppended { path, appended };
        assert_eq!(
            context_entry_positions(&source),
            context_entry_positions(whole.as_slice())
        );
        assert_eq!(project(&source), expected, "split at {split}");
    }
    let texts: Vec<Value> = expected.messages().map(|m| m["content"].clone()).collect();
    assert_eq!(texts.len(), 4, "summary, kept, edited, custom: {texts:?}");
    assert_eq!(texts[2], json!("edited"));
}
