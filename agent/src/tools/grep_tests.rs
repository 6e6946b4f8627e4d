//! Grep tool cases on real directory trees.

use std::path::Path;

use serde_json::json;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::tools::ignore_updates;

fn write(root: &Path, name: &str, content: &str) {
    let path = root.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// A small project; `git` makes it a repository (an empty `.git` directory is enough for the
/// walker), which is when rg honors .gitignore.
fn project(git: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    if git {
        std::fs::create_dir(root.join(".git")).unwrap();
    }
    write(root, ".gitignore", "ignored.txt\nbuild/\n");
    write(root, "a.txt", "hello world\nfoo\n");
    write(root, "ignored.txt", "hello ignored\n");
    write(root, "build/x.txt", "hello build\n");
    write(root, ".hidden/h.txt", "hello hidden\n");
    write(root, "sub/b.rs", "Hello\nhello there\n");
    dir
}

async fn grep(root: &Path, args: Value) -> Result<ToolOutput, ToolError> {
    let ctx = ToolContext::new(root);
    GrepTool
        .execute("1", args, &ctx, CancellationToken::new(), &ignore_updates)
        .await
}

#[tokio::test]
async fn respects_gitignore_in_a_repository_and_searches_hidden_files() {
    let dir = project(true);
    let out = grep(dir.path(), json!({"pattern": "hello"})).await.unwrap();
    assert_eq!(
        out.first_text(),
        ".hidden/h.txt:1: hello hidden\na.txt:1: hello world\nsub/b.rs:2: hello there"
    );
    assert_eq!(out.details, None);
}

#[tokio::test]
async fn outside_a_repository_gitignore_does_not_apply() {
    // rg requires a git repository for .gitignore, and Pi's grep does not pass --no-require-git.
    let dir = project(false);
    let out = grep(dir.path(), json!({"pattern": "hello"})).await.unwrap();
    assert!(
        out.first_text().contains("ignored.txt:1: hello ignored"),
        "{}",
        out.first_text()
    );
    assert!(out.first_text().contains("build/x.txt:1: hello build"));
}

#[tokio::test]
async fn ignore_case_literal_and_glob() {
    let dir = project(true);
    let out = grep(
        dir.path(),
        json!({"pattern": "HELLO", "ignoreCase": true, "glob": "*.rs"}),
    )
    .await
    .unwrap();
    assert_eq!(
        out.first_text(),
        "sub/b.rs:1: Hello\nsub/b.rs:2: hello there"
    );
    let out = grep(
        dir.path(),
        json!({"pattern": "hello", "glob": "./sub/*.rs"}),
    )
    .await
    .unwrap();
    assert_eq!(out.first_text(), "sub/b.rs:2: hello there");
    let out = grep(dir.path(), json!({"pattern": "hello", "glob": "!*.txt"}))
        .await
        .unwrap();
    assert_eq!(out.first_text(), "sub/b.rs:2: hello there");
    write(dir.path(), "re.txt", "abc\na.c\n");
    let out = grep(
        dir.path(),
        json!({"pattern": "a.c", "literal": true, "glob": "re.txt"}),
    )
    .await
    .unwrap();
    assert_eq!(out.first_text(), "re.txt:2: a.c");
    let out = grep(dir.path(), json!({"pattern": "a.c", "glob": "re.txt"}))
        .await
        .unwrap();
    assert_eq!(out.first_text(), "re.txt:1: abc\nre.txt:2: a.c");
}

#[tokio::test]
async fn context_lines_and_single_file_paths() {
    let dir = project(true);
    write(dir.path(), "c.txt", "1\n2\nmatch\r\n4\n5\n");
    let out = grep(
        dir.path(),
        json!({"pattern": "match", "context": 1, "path": "c.txt"}),
    )
    .await
    .unwrap();
    // A single file shows its base name; CRLF is stripped as a line terminator.
    assert_eq!(out.first_text(), "c.txt-2- 2\nc.txt:3: match\nc.txt-4- 4");
}

#[tokio::test]
async fn match_limit_notice_and_details() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "m.txt", "x1\nx2\nx3\nx4\nx5\n");
    let out = grep(dir.path(), json!({"pattern": "x", "limit": 2}))
        .await
        .unwrap();
    assert_eq!(out.first_text(), "m.txt:1: x1\nm.txt:2: x2\n\n[2 matches limit reached. Use limit=4 for more, or refine pattern]");
    assert_eq!(out.details, Some(json!({"matchLimitReached": 2})));
    // Exactly as many matches as the limit: no notice.
    let out = grep(dir.path(), json!({"pattern": "x", "limit": 5}))
        .await
        .unwrap();
    assert!(!out.first_text().contains("limit reached"));
    // The last match's trailing context is still shown, and a match inside it shows as context.
    let out = grep(
        dir.path(),
        json!({"pattern": "x", "limit": 1, "context": 1}),
    )
    .await
    .unwrap();
    assert_eq!(out.first_text(), "m.txt:1: x1\nm.txt-2- x2\n\n[1 matches limit reached. Use limit=2 for more, or refine pattern]");
}

#[tokio::test]
async fn long_lines_are_cut_with_notice() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "long.txt",
        &format!("needle {}\n", "z".repeat(600)),
    );
    let out = grep(dir.path(), json!({"pattern": "needle"}))
        .await
        .unwrap();
    let expected_line = format!("long.txt:1: needle {}... [truncated]", "z".repeat(493));
    assert_eq!(
        out.first_text(),
        format!("{expected_line}\n\n[Some lines truncated to 500 chars. Use read tool to see full lines]")
    );
    assert_eq!(out.details, Some(json!({"linesTruncated": true})));
}

#[tokio::test]
async fn output_is_capped_at_50kb() {
    let dir = tempfile::tempdir().unwrap();
    let content: String = (0..1000)
        .map(|i| format!("hit {i:04} {}\n", "w".repeat(200)))
        .collect();
    write(dir.path(), "big.txt", &content);
    let out = grep(dir.path(), json!({"pattern": "hit", "limit": 1000}))
        .await
        .unwrap();
    assert!(
        out.first_text().ends_with("\n\n[50.0KB limit reached]"),
        "{}",
        &out.first_text()[out.first_text().len() - 80..]
    );
    let details = out.details.unwrap();
    assert_eq!(details["truncation"]["truncatedBy"], "bytes");
    assert_eq!(details["truncation"]["totalLines"], 1000);
}

#[tokio::test]
async fn errors_and_no_matches() {
    let dir = project(true);
    let out = grep(dir.path(), json!({"pattern": "absent-text"}))
        .await
        .unwrap();
    assert_eq!(out.first_text(), "No matches found");
    let err = grep(dir.path(), json!({"pattern": "x", "path": "missing"}))
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        format!("Path not found: {}", dir.path().join("missing").display())
    );
    let err = grep(dir.path(), json!({"pattern": "(unclosed"}))
        .await
        .unwrap_err();
    assert!(
        err.message.starts_with("rg: regex parse error"),
        "{}",
        err.message
    );
}
