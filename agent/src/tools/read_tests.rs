//! Read tool cases; expected texts and counts come from real Pi 1.6.0 on the same files.

use serde_json::json;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::tools::ignore_updates;
use crate::tools::ToolModelInfo;

struct Files {
    dir: tempfile::TempDir,
    ctx: ToolContext,
}

impl Files {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path());
        Files { dir, ctx }
    }

    fn write(&self, name: &str, content: impl AsRef<[u8]>) {
        std::fs::write(self.dir.path().join(name), content).unwrap();
    }

    async fn read(&self, args: Value) -> Result<ToolOutput, ToolError> {
        ReadTool
            .execute(
                "1",
                args,
                &self.ctx,
                CancellationToken::new(),
                &ignore_updates,
            )
            .await
    }
}

#[tokio::test]
async fn truncates_at_the_line_limit_with_notice() {
    let files = Files::new();
    let content: String = (1..=3000).map(|i| format!("line {i}\n")).collect();
    files.write("many.txt", &content);
    let out = files.read(json!({"path": "many.txt"})).await.unwrap();
    let text = out.first_text();
    assert!(text.starts_with("line 1\nline 2\n"));
    assert!(
        text.ends_with("line 2000\n\n[Showing lines 1-2000 of 3001. Use offset=2001 to continue.]")
    );
    let truncation = &out.details.as_ref().unwrap()["truncation"];
    assert_eq!(truncation["truncatedBy"], "lines");
    assert_eq!(truncation["totalLines"], 3000);
    assert_eq!(truncation["totalBytes"], 28893);
    assert_eq!(truncation["outputLines"], 2000);
    assert_eq!(truncation["outputBytes"], 18892);
}

#[tokio::test]
async fn truncates_at_the_byte_limit_with_notice() {
    let files = Files::new();
    let content: Vec<String> = (1..=100)
        .map(|i| format!("{i}:{}", "x".repeat(1000)))
        .collect();
    files.write("wide.txt", content.join("\n"));
    let out = files.read(json!({"path": "wide.txt"})).await.unwrap();
    assert!(out
        .first_text()
        .ends_with("\n\n[Showing lines 1-51 of 100 (50.0KB limit). Use offset=52 to continue.]"));
    assert_eq!(out.first_text().len(), 51266);
    let truncation = &out.details.as_ref().unwrap()["truncation"];
    assert_eq!(truncation["truncatedBy"], "bytes");
    assert_eq!(truncation["totalBytes"], 100391);
    assert_eq!(truncation["outputBytes"], 51194);
    // From an offset the rest fits: no notice, no details.
    let out = files
        .read(json!({"path": "wide.txt", "offset": 60}))
        .await
        .unwrap();
    assert!(out.first_text().starts_with("60:xxx"));
    assert_eq!(out.first_text().len(), 41164);
    assert_eq!(out.details, None);
}

#[tokio::test]
async fn over_long_line_points_to_bash() {
    let files = Files::new();
    files.write("long.txt", format!("short\n{}\nafter\n", "y".repeat(60000)));
    let out = files
        .read(json!({"path": "long.txt", "offset": 2}))
        .await
        .unwrap();
    assert_eq!(
        out.first_text(),
        "[Line 2 is 58.6KB, exceeds 50.0KB limit. Use bash: sed -n '2p' long.txt | head -c 51200]"
    );
    let truncation = &out.details.as_ref().unwrap()["truncation"];
    assert_eq!(truncation["firstLineExceedsLimit"], true);
    assert_eq!(truncation["totalLines"], 2);
    assert_eq!(truncation["totalBytes"], 60007);
    let out = files.read(json!({"path": "long.txt"})).await.unwrap();
    assert_eq!(
        out.first_text(),
        "short\n\n[Showing lines 1-1 of 4 (50.0KB limit). Use offset=2 to continue.]"
    );
}

#[tokio::test]
async fn offset_and_limit() {
    let files = Files::new();
    files.write("small.txt", "a\nb\nc\nd\ne\n");
    let out = files
        .read(json!({"path": "small.txt", "offset": 2, "limit": 2}))
        .await
        .unwrap();
    assert_eq!(
        out.first_text(),
        "b\nc\n\n[3 more lines in file. Use offset=4 to continue.]"
    );
    let out = files
        .read(json!({"path": "small.txt", "offset": 4, "limit": 10}))
        .await
        .unwrap();
    assert_eq!(out.first_text(), "d\ne\n");
    let out = files
        .read(json!({"path": "small.txt", "offset": 6}))
        .await
        .unwrap();
    assert_eq!(out.first_text(), "");
    let err = files
        .read(json!({"path": "small.txt", "offset": 10}))
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "Offset 10 is beyond end of file (6 lines total)"
    );
    // A fractional range takes Pi's whole-file path, numbers and all.
    let out = files
        .read(json!({"path": "small.txt", "offset": 2.5, "limit": 1}))
        .await
        .unwrap();
    assert_eq!(
        out.first_text(),
        "b\n\n[3.5 more lines in file. Use offset=3.5 to continue.]"
    );
}

#[tokio::test]
async fn missing_file_directory_and_binary() {
    let files = Files::new();
    let err = files.read(json!({"path": "nope.txt"})).await.unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "ENOENT: no such file or directory, access '{}'",
            files.dir.path().join("nope.txt").display()
        )
    );
    std::fs::create_dir(files.dir.path().join("sub")).unwrap();
    let err = files.read(json!({"path": "sub"})).await.unwrap_err();
    assert_eq!(
        err.message,
        "EISDIR: illegal operation on a directory, read"
    );
    // Binary data is decoded as UTF-8 with replacement characters, as Node does.
    files.write("bin.dat", [0x00, 0x01, 0xff, 0x0a, 0x41]);
    let out = files.read(json!({"path": "bin.dat"})).await.unwrap();
    assert_eq!(out.first_text(), "\u{0}\u{1}\u{FFFD}\nA");
}

#[tokio::test]
async fn images_are_detected_by_content_not_extension() {
    let files = Files::new();
    files.write("picture.txt", crate::tools::image::tests::TINY_PNG);
    let out = files.read(json!({"path": "picture.txt"})).await.unwrap();
    assert_eq!(out.content.len(), 2);
    assert_eq!(out.first_text(), "Read image file [image/png]");
    match &out.content[1] {
        ContentBlock::Image { data, mime_type } => {
            assert_eq!(mime_type, "image/png");
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap();
            assert_eq!(decoded, crate::tools::image::tests::TINY_PNG);
        }
        other => panic!("expected an image block, got {other:?}"),
    }
    assert_eq!(out.details, None);
    // A model without image input gets a note in details.
    let mut ctx = files.ctx.clone();
    ctx.model = Some(ToolModelInfo {
        id: "text-only".to_string(),
        supports_images: false,
    });
    let args = json!({"path": "picture.txt"});
    let out = ReadTool
        .execute("1", args, &ctx, CancellationToken::new(), &ignore_updates)
        .await
        .unwrap();
    assert_eq!(
        out.details,
        Some(json!({"imageUnsupportedByModel": "text-only"}))
    );
}

#[tokio::test]
async fn bmp_is_sent_as_png() {
    let files = Files::new();
    files.write("a.bmp", crate::tools::bmp::tests::tiny_bmp());
    let out = files.read(json!({"path": "a.bmp"})).await.unwrap();
    assert_eq!(
        out.first_text(),
        "Read image file [image/png]\n[Image converted from image/bmp to image/png.]"
    );
    assert!(
        matches!(&out.content[1], ContentBlock::Image { mime_type, .. } if mime_type == "image/png")
    );
}

#[tokio::test]
async fn streaming_selection_agrees_with_whole_text_selection() {
    // The chunked selector must count exactly like splitting the whole text.
    let texts = [
        "",
        "\n",
        "a",
        "a\n",
        "a\n\nb",
        "a\nb\n\n",
        &"z\n".repeat(70_000),
    ];
    for text in texts {
        for (start, limit) in [
            (0usize, None),
            (1, None),
            (0, Some(1usize)),
            (1, Some(2)),
            (5, Some(0)),
        ] {
            let mut selector = LineSelector::new(start, limit);
            for chunk in text.as_bytes().chunks(7) {
                selector.feed(std::str::from_utf8(chunk).unwrap());
            }
            let streamed = selector.finish();
            let whole = select_from_text(text, start as f64, limit.map(|l| l as f64));
            assert_eq!(
                streamed.total_file_lines, whole.total_file_lines,
                "{text:?} {start} {limit:?}"
            );
            assert_eq!(
                streamed.truncation, whole.truncation,
                "{text:?} {start} {limit:?}"
            );
        }
    }
}
