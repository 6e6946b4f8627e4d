//! Find tool cases on real directory trees.

use std::path::Path;

use serde_json::json;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::tools::ignore_updates;

fn write(root: &Path, name: &str) {
    let path = root.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, "x").unwrap();
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join(".gitignore"), "ignored.rs\ntarget/\n").unwrap();
    for name in [
        "a.rs",
        "ignored.rs",
        "target/t.rs",
        "sub/b.rs",
        "sub/B.RS",
        "other/sub/c.rs",
        ".config/d.rs",
        "notes.txt",
    ] {
        write(root, name);
    }
    dir
}

async fn find(root: &Path, args: Value) -> Result<ToolOutput, ToolError> {
    let ctx = ToolContext::new(root);
    FindTool
        .execute("1", args, &ctx, CancellationToken::new(), &ignore_updates)
        .await
}

#[tokio::test]
async fn name_patterns_match_at_any_depth_and_respect_gitignore() {
    // Not a repository: Pi passes --no-require-git, so .gitignore applies anyway.
    let dir = project();
    let out = find(dir.path(), json!({"pattern": "*.rs"})).await.unwrap();
    // All-lowercase pattern: smart case matches B.RS too; hidden directories are searched.
    assert_eq!(
        out.first_text(),
        ".config/d.rs\na.rs\nother/sub/c.rs\nsub/B.RS\nsub/b.rs"
    );
    assert_eq!(out.details, None);
    let out = find(dir.path(), json!({"pattern": "*.RS"})).await.unwrap();
    assert_eq!(out.first_text(), "sub/B.RS");
}

#[tokio::test]
async fn path_patterns_are_anchored_at_the_search_directory() {
    let dir = project();
    let out = find(dir.path(), json!({"pattern": "sub/*.rs"}))
        .await
        .unwrap();
    assert_eq!(out.first_text(), "sub/B.RS\nsub/b.rs");
    let out = find(dir.path(), json!({"pattern": "./sub/*.rs"}))
        .await
        .unwrap();
    assert_eq!(out.first_text(), "sub/B.RS\nsub/b.rs");
    let out = find(dir.path(), json!({"pattern": "**/sub/*.rs"}))
        .await
        .unwrap();
    assert_eq!(out.first_text(), "other/sub/c.rs\nsub/B.RS\nsub/b.rs");
    // `*` does not cross directories in a path pattern.
    let out = find(dir.path(), json!({"pattern": "*/c.rs"}))
        .await
        .unwrap();
    assert_eq!(out.first_text(), "No files found matching pattern");
}

#[tokio::test]
async fn directories_have_a_trailing_slash_and_git_is_skipped() {
    let dir = project();
    std::fs::create_dir_all(dir.path().join(".git/sub")).unwrap();
    let out = find(dir.path(), json!({"pattern": "sub"})).await.unwrap();
    assert_eq!(out.first_text(), "other/sub/\nsub/");
}

#[tokio::test]
async fn inside_a_repository_gitignore_applies() {
    let dir = project();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    let out = find(dir.path(), json!({"pattern": "*.rs", "path": "."}))
        .await
        .unwrap();
    assert!(!out.first_text().contains("ignored.rs") && !out.first_text().contains("t.rs"));
    assert!(out.first_text().contains("a.rs"));
}

#[tokio::test]
async fn limit_notice_errors_and_empty_results() {
    let dir = project();
    let out = find(dir.path(), json!({"pattern": "*.rs", "limit": 2}))
        .await
        .unwrap();
    assert_eq!(
        out.first_text(),
        ".config/d.rs\na.rs\n\n[2 results limit reached. Use limit=4 for more, or refine pattern]"
    );
    assert_eq!(out.details, Some(json!({"resultLimitReached": 2})));
    let out = find(dir.path(), json!({"pattern": "*.rs", "limit": 5}))
        .await
        .unwrap();
    assert!(!out.first_text().contains("limit reached"));
    let out = find(dir.path(), json!({"pattern": "*.zip"})).await.unwrap();
    assert_eq!(out.first_text(), "No files found matching pattern");
    let err = find(dir.path(), json!({"pattern": "*", "path": "notes.txt"}))
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "[fd error]: Search path '{}' is not a directory.",
            dir.path().join("notes.txt").display()
        )
    );
}
