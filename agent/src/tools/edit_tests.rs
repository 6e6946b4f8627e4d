//! End-to-end edit tool cases; the expected texts, diffs and patches were produced by real
//! Pi 1.6.0's edit tool on the same inputs.

use serde_json::json;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::tools::ignore_updates;
use crate::tools::run_tool_call;

struct Case {
    dir: tempfile::TempDir,
    ctx: ToolContext,
}

impl Case {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path());
        Case { dir, ctx }
    }

    async fn edit(
        &self,
        name: &str,
        content: &str,
        edits: Value,
    ) -> (Result<ToolOutput, ToolError>, String) {
        let path = self.dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        let args = json!({"path": name, "edits": edits});
        let result = EditTool
            .execute(
                "1",
                args,
                &self.ctx,
                CancellationToken::new(),
                &ignore_updates,
            )
            .await;
        (result, std::fs::read_to_string(&path).unwrap())
    }
}

fn error_of(result: Result<ToolOutput, ToolError>) -> String {
    result
        .err()
        .map(|e| e.message)
        .unwrap_or_else(|| "no error".to_string())
}

#[tokio::test]
async fn multi_edit_diff_and_patch_match_pi() {
    let case = Case::new();
    let content: String = (1..=30).map(|i| format!("line {i}\n")).collect();
    let edits = json!([
        {"oldText": "line 3\n", "newText": "LINE three\nextra\n"},
        {"oldText": "line 20", "newText": "L20"}
    ]);
    let (result, after) = case.edit("multi.txt", &content, edits).await;
    let out = result.unwrap();
    assert_eq!(
        out.first_text(),
        "Successfully replaced 2 block(s) in multi.txt."
    );
    let expected = json!({
        "diff": "  1 line 1\n  2 line 2\n- 3 line 3\n+ 3 LINE three\n+ 4 extra\n  4 line 4\n  5 line 5\n  6 line 6\n  7 line 7\n    ...\n 16 line 16\n 17 line 17\n 18 line 18\n 19 line 19\n-20 line 20\n+21 L20\n 21 line 21\n 22 line 22\n 23 line 23\n 24 line 24\n    ...",
        "patch": "--- multi.txt\n+++ multi.txt\n@@ -1,7 +1,8 @@\n line 1\n line 2\n-line 3\n+LINE three\n+extra\n line 4\n line 5\n line 6\n line 7\n@@ -16,9 +17,9 @@\n line 16\n line 17\n line 18\n line 19\n-line 20\n+L20\n line 21\n line 22\n line 23\n line 24\n",
        "firstChangedLine": 3
    });
    assert_eq!(out.details, Some(expected));
    assert!(after.starts_with("line 1\nline 2\nLINE three\nextra\nline 4\n"));
    assert!(after.contains("\nL20\nline 21\n"));
}

#[tokio::test]
async fn crlf_line_endings_are_preserved() {
    let case = Case::new();
    let (result, after) = case
        .edit(
            "crlf.txt",
            "a\r\nb\r\nc\r\n",
            json!([{"oldText": "b\nc", "newText": "B\nC\nD"}]),
        )
        .await;
    let out = result.unwrap();
    assert_eq!(after, "a\r\nB\r\nC\r\nD\r\n");
    assert_eq!(
        out.details.unwrap()["diff"],
        " 1 a\n-2 b\n-3 c\n+2 B\n+3 C\n+4 D"
    );
}

#[tokio::test]
async fn bom_is_kept_and_no_newline_marked_in_patch() {
    let case = Case::new();
    let (result, after) = case
        .edit(
            "bom.txt",
            "\u{FEFF}hello\nworld",
            json!([{"oldText": "world", "newText": "there"}]),
        )
        .await;
    let details = result.unwrap().details.unwrap();
    assert_eq!(after, "\u{FEFF}hello\nthere");
    assert_eq!(
        details["patch"],
        "--- bom.txt\n+++ bom.txt\n@@ -1,2 +1,2 @@\n hello\n-world\n\\ No newline at end of file\n+there\n\\ No newline at end of file\n"
    );
    assert_eq!(details["diff"], " 1 hello\n-2 world\n+2 there");
}

#[tokio::test]
async fn fuzzy_match_rewrites_only_touched_lines() {
    let case = Case::new();
    let content = "say \u{201C}hi\u{201D}   \nkeep   \nend\n";
    let (result, after) = case
        .edit(
            "fuzzy.txt",
            content,
            json!([{"oldText": "say \"hi\"\n", "newText": "say 'yo'\n"}]),
        )
        .await;
    let details = result.unwrap().details.unwrap();
    // "keep   " keeps its trailing spaces: only the matched line came from the fuzzy view.
    assert_eq!(after, "say 'yo'\nkeep   \nend\n");
    assert_eq!(
        details["diff"],
        "-1 say \u{201C}hi\u{201D}   \n+1 say 'yo'\n 2 keep   \n 3 end"
    );
}

#[tokio::test]
async fn error_texts_match_pi() {
    let case = Case::new();
    let (result, after) = case
        .edit(
            "dup.txt",
            "x\nx\n",
            json!([{"oldText": "x", "newText": "y"}]),
        )
        .await;
    assert_eq!(error_of(result), "Found 2 occurrences of the text in dup.txt. The text must be unique. Please provide more context to make it unique.");
    assert_eq!(after, "x\nx\n");
    let (result, _) = case
        .edit(
            "none.txt",
            "abc",
            json!([{"oldText": "zzz", "newText": "y"}]),
        )
        .await;
    assert_eq!(error_of(result), "Could not find the exact text in none.txt. The old text must match exactly including all whitespace and newlines.");
    let (result, _) = case
        .edit(
            "overlap.txt",
            "abcdef",
            json!([{"oldText": "abcd", "newText": "1"}, {"oldText": "cdef", "newText": "2"}]),
        )
        .await;
    assert_eq!(error_of(result), "edits[0] and edits[1] overlap in overlap.txt. Merge them into one edit or target disjoint regions.");
    let (result, _) = case
        .edit(
            "nochange.txt",
            "abc",
            json!([{"oldText": "b", "newText": "b"}]),
        )
        .await;
    assert_eq!(error_of(result), "No changes made to nochange.txt. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected.");
    let (result, _) = case
        .edit(
            "spaces.txt",
            "a   \nb\n",
            json!([{"oldText": "   ", "newText": "x"}]),
        )
        .await;
    assert_eq!(error_of(result), "Found 3 occurrences of the text in spaces.txt. The text must be unique. Please provide more context to make it unique.");
    let (result, _) = case
        .edit(
            "multi.txt",
            "a b",
            json!([{"oldText": "a", "newText": "1"}, {"oldText": "q", "newText": "2"}]),
        )
        .await;
    assert_eq!(error_of(result), "Could not find edits[1] in multi.txt. The oldText must match exactly including all whitespace and newlines.");
    let (result, _) = case
        .edit(
            "empty.txt",
            "a",
            json!([{"oldText": "a", "newText": "1"}, {"oldText": "", "newText": "2"}]),
        )
        .await;
    assert_eq!(
        error_of(result),
        "edits[1].oldText must not be empty in empty.txt."
    );
    let (result, _) = case.edit("zero.txt", "a", json!([])).await;
    assert_eq!(
        error_of(result),
        "Edit tool input is invalid. edits must contain at least one replacement."
    );
}

#[tokio::test]
async fn missing_file_reports_error_code() {
    let case = Case::new();
    let args = json!({"path": "nope.txt", "edits": [{"oldText": "a", "newText": "b"}]});
    let err = EditTool
        .execute(
            "1",
            args,
            &case.ctx,
            CancellationToken::new(),
            &ignore_updates,
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "Could not edit file: nope.txt. Error code: ENOENT."
    );
}

#[tokio::test]
async fn legacy_and_stringified_arguments_are_prepared() {
    let case = Case::new();
    std::fs::write(case.dir.path().join("f.txt"), "one two three").unwrap();
    let tools = vec![std::sync::Arc::new(EditTool) as std::sync::Arc<dyn Tool>];
    // Legacy top-level oldText/newText.
    let args = json!({"path": "f.txt", "oldText": "one", "newText": "1"});
    let out = run_tool_call(
        &tools,
        "1",
        "edit",
        args,
        &case.ctx,
        CancellationToken::new(),
        &ignore_updates,
    )
    .await;
    assert!(!out.is_error, "{}", out.first_text());
    // edits as a JSON string.
    let args = json!({"path": "f.txt", "edits": "[{\"oldText\":\"two\",\"newText\":\"2\"}]"});
    let out = run_tool_call(
        &tools,
        "2",
        "edit",
        args,
        &case.ctx,
        CancellationToken::new(),
        &ignore_updates,
    )
    .await;
    assert!(!out.is_error, "{}", out.first_text());
    assert_eq!(
        std::fs::read_to_string(case.dir.path().join("f.txt")).unwrap(),
        "1 2 three"
    );
    // Missing edits altogether fails validation with Pi's format.
    let out = run_tool_call(
        &tools,
        "3",
        "edit",
        json!({"path": "f.txt"}),
        &case.ctx,
        CancellationToken::new(),
        &ignore_updates,
    )
    .await;
    assert!(out.is_error);
    assert_eq!(out.first_text(), "Validation failed for tool \"edit\":\n  - edits: missing\n\nReceived arguments:\n{\n  \"path\": \"f.txt\"\n}");
}
