//! The codemode tool end to end inside the crate: real QuickJS, real built-in tools (read,
//! bash) in a temp directory.

use super::*;
use crate::tools::BashTool;
use crate::tools::ReadTool;

fn tool() -> CodemodeTool {
    CodemodeTool::new(
        vec![Arc::new(ReadTool), Arc::new(BashTool)],
        Vec::new(),
        None,
        &CodemodeOptions::default(),
    )
}

async fn run_in(dir: &std::path::Path, code: &str) -> ToolOutput {
    let mut ctx = ToolContext::new(dir);
    ctx.temp_dir = Some(dir.to_path_buf());
    tool()
        .execute(
            "call_1",
            json!({ "code": code }),
            &ctx,
            CancellationToken::new(),
            &crate::tools::ignore_updates,
        )
        .await
        .unwrap_or_else(|e| e.into_output())
}

async fn run(code: &str) -> (ToolOutput, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), code).await;
    let text = texts(&out);
    (out, text)
}

fn texts(out: &ToolOutput) -> String {
    out.content
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect::<Vec<_>>()
        .join("")
}

/// The result text without the wall-time line, which varies.
fn body(text: &str) -> String {
    let mut lines = text.splitn(3, '\n');
    let first = lines.next().unwrap_or("");
    let wall = lines.next().unwrap_or("");
    assert!(
        wall.starts_with("Wall time ") && wall.ends_with(" seconds"),
        "{text}"
    );
    format!("{first}\n{}", lines.next().unwrap_or(""))
}

#[tokio::test(flavor = "multi_thread")]
async fn return_text_and_console_are_laid_out_as_pi_does() {
    let (out, text) =
        run("text('a'); console.log('x', 1, {b: 2}); text({n: 1}); return [1, 2]").await;
    assert!(!out.is_error);
    assert_eq!(
        body(&text),
        "Script completed\nOutput:\n==> text 1/3 <==\na\n==> text 2/3 <==\n{\"n\":1}\n==> text 3/3 <==\n[1,2]\n<console_output>\nx 1 {\"b\":2}\n</console_output>"
    );
    // The header is its own block, as in Pi.
    assert!(out.content[0].as_text().unwrap().ends_with("Output:\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_single_returned_string_is_the_output() {
    let (_, text) = run("const x = await Promise.resolve(41); return `answer ${x + 1}`").await;
    assert_eq!(body(&text), "Script completed\nOutput:\nanswer 42");
}

#[tokio::test(flavor = "multi_thread")]
async fn built_in_tools_resolve_to_text_or_structured_results() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.txt"), "hello file").unwrap();
    let out = run_in(
        dir.path(),
        "const [file, sh] = await Promise.all([tools.read({path: 'f.txt'}), tools.bash({command: 'echo hi; exit 3'})]);\nreturn {file, out: sh.output, code: sh.exit_code, keys: Object.keys(sh).sort()}",
    )
    .await;
    let text = texts(&out);
    assert!(!out.is_error, "{text}");
    let json_part = body(&text);
    let value: Value =
        serde_json::from_str(json_part.trim_start_matches("Script completed\nOutput:\n")).unwrap();
    assert_eq!(value["file"], "hello file");
    assert_eq!(value["out"], "hi\n");
    assert_eq!(value["code"], 3);
    assert_eq!(
        value["keys"],
        json!(["exit_code", "output", "truncated", "wall_time_seconds"])
    );
    assert_eq!(
        out.details.as_ref().unwrap()["calls"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_call_rejects_and_the_failure_keeps_partial_output() {
    let (out, text) = run("text('before');\nawait tools.read({path: 'missing.txt'});").await;
    assert!(out.is_error);
    let body = body(&text);
    assert!(
        body.starts_with("Script failed\nOutput:\nbefore\nScript error:\nError: ENOENT"),
        "{body}"
    );
    assert!(
        body.ends_with(
            "\n\nTool calls made before the failure (they are not undone): read (error)"
        ),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn thrown_errors_report_name_message_and_no_calls() {
    let (out, text) = run("throw new TypeError('bad thing')").await;
    assert!(out.is_error);
    let body = body(&text);
    assert!(
        body.starts_with("Script failed\nOutput:\nScript error:\nTypeError: bad thing"),
        "{body}"
    );
    assert!(body.ends_with("\n\nNo tool calls were made."), "{body}");
    let (_, syntax) = run("let = ;").await;
    assert!(
        body_contains(&syntax, "Script error:\nSyntaxError"),
        "{syntax}"
    );
}

fn body_contains(text: &str, part: &str) -> bool {
    text.contains(part)
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_tools_name_close_matches() {
    let (_, text) = run("await tools.reed({path: 'x'})").await;
    assert!(
        text.contains("TypeError: tools.reed does not exist. Available: read, bash. ALL_TOOLS lists every tool; searchTools(query) finds tools by topic. Check for a member with \"reed\" in tools."),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_ends_successfully_and_keeps_output() {
    let (out, text) = run("text('kept'); exit(); text('never')").await;
    assert!(!out.is_error);
    assert_eq!(body(&text), "Script completed\nOutput:\nkept");
}

#[tokio::test(flavor = "multi_thread")]
async fn store_works_within_a_script_and_keeps_pis_limits() {
    // Across scripts the values live in the session (`store.rs`, `cli/tests/codemode_e2e.rs`);
    // without one a script starts empty, as in Pi.
    let (_, text) = run(
        "store('cursor', {page: 2}); store('gone', 1); store('gone', undefined); return [load('cursor'), load('gone')]",
    )
    .await;
    assert!(text.ends_with("Output:\n[{\"page\":2},null]"), "{text}");
    let (_, text) = run("return load('cursor') === undefined").await;
    assert!(text.ends_with("Output:\ntrue"), "{text}");
    let (_, text) = run("store('big', 'x'.repeat(300000))").await;
    assert!(text.contains("RangeError: store(\"big\") value has 300002 characters of JSON, more than the limit of 262144."));
}

#[tokio::test(flavor = "multi_thread")]
async fn discovery_globals_find_and_describe_tools() {
    let (out, text) = run(
        "const found = await searchTools('shell command'); const d = await describeTool('read');\nreturn {names: ALL_TOOLS.map(t => t.name), first: found[0].name, d: d.split('\\n')[0], none: await describeTool('nope'), ns: await describeNamespace('x')}",
    )
    .await;
    assert!(!out.is_error, "{text}");
    let value: Value =
        serde_json::from_str(body(&text).trim_start_matches("Script completed\nOutput:\n"))
            .unwrap();
    assert_eq!(value["names"], json!(["read", "bash"]));
    assert_eq!(value["first"], "bash");
    assert!(value["d"]
        .as_str()
        .unwrap()
        .starts_with("Read the contents of a file."));
    assert!(value.get("none").is_none());
    let (_, sample) = run("return await describeTool('bash')").await;
    assert!(
        sample.contains("codemode tool declaration:\n```ts\ndeclare const tools: { bash(args: {\n"),
        "{sample}"
    );
    assert!(
        sample.contains(
            "}): Promise<{\n  exit_code: number;\n  // Full output, when truncated\n  full_output_path?: string;\n  // Combined stdout and stderr, possibly truncated\n  output: string;\n  truncated: boolean;\n  wall_time_seconds: number;\n}>; };"
        ),
        "{sample}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn options_line_errors_fail_the_call_before_the_script_runs() {
    let (out, text) = run("text(1)\n// @options: {\"timeout_ms\": 5}").await;
    assert!(out.is_error);
    assert_eq!(
        text,
        "The // @options: line must be the first line of the input; found one on line 2"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn timeout_interrupts_a_busy_script() {
    let (out, text) =
        run("// @options: {\"timeout_ms\": 200}\ntext('started'); while (true) {}").await;
    assert!(out.is_error);
    assert_eq!(
        body(&text),
        "Script failed\nOutput:\nstarted\nScript error:\nScript timed out: Execution timed out after 200 ms\n\nNo tool calls were made."
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_promise_that_can_never_settle_fails_at_once() {
    let (out, text) = run("await new Promise(() => {}); text('never')").await;
    assert!(out.is_error);
    assert!(text.contains("Script error:\nError: The script is waiting on a promise that can never settle: no tool call is pending, and timers do not exist here."), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_timers_network_or_modules_exist() {
    let (_, text) = run(
        "return [typeof setTimeout, typeof fetch, typeof require, typeof process, typeof std, typeof os].join(',')",
    )
    .await;
    assert_eq!(
        body(&text),
        "Script completed\nOutput:\nundefined,undefined,undefined,undefined,undefined,undefined"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn memory_is_limited_to_256_mb() {
    let (out, text) =
        run("const a = []; while (true) a.push('x'.repeat(1 << 20) + a.length);").await;
    assert!(out.is_error);
    assert!(
        text.contains("Script error:\nInternalError: out of memory"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn long_output_keeps_start_and_end_and_spills_to_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(
        dir.path(),
        "// @options: {\"max_output_tokens\": 10}\ntext('START' + 'x'.repeat(100) + 'END')",
    )
    .await;
    let text = texts(&out);
    let path = out.details.as_ref().unwrap()["fullOutputPath"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        body(&text),
        format!("Script completed\nOutput:\nWarning: truncated output (original token count: 27)\nTotal output lines: 1\n\nSTARTxxxxxxxxxxxxxxx…17 tokens truncated…xxxxxxxxxxxxxxxxxEND\n\n[Full output: {path} (read with offset/limit)]")
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        format!("START{}END", "x".repeat(100))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn too_much_output_fails_the_script() {
    let (out, text) = run("for (let i = 0; i < 100001; i++) console.log('')").await;
    assert!(out.is_error);
    assert!(text.contains("RangeError: script output exceeded the limit of 16777216 characters or 100000 text(), image(), and console calls."), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn images_are_shown_and_saved() {
    // A 1x1 PNG.
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(
        dir.path(),
        &format!("image('data:image/png;base64,{png}'); text('after')"),
    )
    .await;
    assert!(!out.is_error, "{}", texts(&out));
    assert!(
        matches!(&out.content[2], ContentBlock::Image { mime_type, .. } if mime_type == "image/png")
    );
    let label = out.content[1].as_text().unwrap();
    assert!(
        label.starts_with("[Image saved to ") && label.ends_with(" (image/png, 70B)]"),
        "{label}"
    );
    let (_, bad) = run("image('https://example.com/x.png')").await;
    assert!(bad.contains("TypeError: remote image URLs are not supported in tool outputs. Pass a base64 data URI instead"));
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_stops_the_script() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new(dir.path());
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        trigger.cancel();
    });
    let out = tool()
        .execute(
            "c",
            json!({"code": "await tools.bash({command: 'sleep 30'})"}),
            &ctx,
            cancel,
            &crate::tools::ignore_updates,
        )
        .await
        .unwrap();
    let text = texts(&out);
    assert!(text.contains("Script error:\nScript aborted: This operation was aborted\n\nTool calls made before the failure (they are not undone): bash (cancelled)"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_updates_list_the_calls_as_they_start_and_end() {
    let dir = tempfile::tempdir().unwrap();
    let updates = Mutex::new(Vec::new());
    let on_update = |partial: ToolOutput| {
        updates.lock().unwrap().push(partial.details.unwrap());
    };
    let out = tool()
        .execute(
            "call_p",
            json!({"code": "await tools.bash({command: 'true'}); return 1"}),
            &ToolContext::new(dir.path()),
            CancellationToken::new(),
            &on_update,
        )
        .await
        .unwrap();
    let updates = updates.into_inner().unwrap();
    assert_eq!(updates.first().unwrap(), &json!({"calls": []}));
    let last = &updates.last().unwrap()["calls"][0];
    assert_eq!(last["id"], "call_p/1");
    assert_eq!(last["status"], "ok");
    assert!(last["durationMs"].as_f64().unwrap() >= 0.0);
    assert!(updates.iter().any(|u| u["calls"][0]["status"] == "running"));
    assert_eq!(out.details.unwrap()["calls"][0]["name"], "bash");
}
