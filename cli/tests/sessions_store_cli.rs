//! `pi sessions list | export | import | migrate` end to end: the real binary on real JSONL
//! files, redb and SQLite databases in temp dirs.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::{json, Value};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A temp home with its own agent dir; every run of `pi` is isolated from the machine's.
struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("agent")).unwrap();
        fs::create_dir_all(dir.path().join("work")).unwrap();
        Env { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::cargo_bin("pi").unwrap();
        cmd.current_dir(self.path("work"))
            .env("HOME", self.dir.path())
            .env("PI_CODING_AGENT_DIR", self.path("agent"))
            .env_remove("PI_SESSION_STORE")
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .arg("sessions")
            .args(args);
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// Runs and requires success; returns stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "pi sessions {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn ok_bytes(&self, args: &[&str]) -> Vec<u8> {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "pi sessions {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }
}

fn header(id: &str, ts: &str, cwd: &str) -> Value {
    json!({"type": "session", "version": 3, "id": id, "timestamp": ts, "cwd": cwd})
}

fn user(id: &str, parent: Option<&str>, ts: &str, text: &str) -> Value {
    json!({"type": "message", "id": id, "parentId": parent, "timestamp": ts,
        "message": {"role": "user", "content": text, "timestamp": ms(ts)}})
}

fn assistant(id: &str, parent: &str, ts: &str, text: &str) -> Value {
    json!({"type": "message", "id": id, "parentId": parent, "timestamp": ts,
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}],
            "api": "openai-completions", "provider": "p", "model": "m",
            "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "stop", "timestamp": ms(ts)}})
}

fn ms(ts: &str) -> i64 {
    // 2026-01-01T00:00:SS.000Z only: enough for ordering tests.
    let secs: i64 = ts[17..19].parse().unwrap();
    let mins: i64 = ts[14..16].parse().unwrap();
    1_767_225_600_000 + (mins * 60 + secs) * 1000
}

fn write_session(path: &Path, lines: &[Value]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for l in lines {
        bytes.extend_from_slice(serde_json::to_string(l).unwrap().as_bytes());
        bytes.push(b'\n');
    }
    fs::write(path, &bytes).unwrap();
    bytes
}

/// Three sessions in two directories, one named, with known activity times.
fn three_sessions(env: &Env) -> Vec<PathBuf> {
    let src = env.path("src");
    fs::create_dir_all(&src).unwrap();
    let specs = [
        (
            "aaaa1111-0000-7000-8000-000000000001",
            "/proj/a",
            "00:10",
            "older question",
            None,
        ),
        (
            "aaaa2222-0000-7000-8000-000000000002",
            "/proj/a",
            "00:30",
            "newest question",
            Some("the named one"),
        ),
        (
            "bbbb3333-0000-7000-8000-000000000003",
            "/proj/b",
            "00:20",
            "other dir question",
            None,
        ),
    ];
    let mut files = Vec::new();
    for (id, cwd, at, text, name) in specs {
        let ts = format!("2026-01-01T00:{at}.000Z");
        let mut lines = vec![
            header(id, "2026-01-01T00:00:00.000Z", cwd),
            user("e1", None, &ts, text),
            assistant("e2", "e1", &ts, "answer"),
        ];
        if let Some(name) = name {
            lines.push(json!({"type": "session_info", "id": "e3", "parentId": "e2",
                "timestamp": ts, "name": name}));
        }
        let file = src.join(format!("{id}.jsonl"));
        write_session(&file, &lines);
        files.push(file);
    }
    files
}

#[test]
fn list_orders_newest_first_and_filters_by_cwd() {
    let env = Env::new();
    let files = three_sessions(&env);
    let mut args = vec!["import"];
    let paths: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    args.extend(paths.iter().map(String::as_str));
    env.ok(&args);

    let all: Value = serde_json::from_str(&env.ok(&["list", "--all", "--json"])).unwrap();
    let ids: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "aaaa2222-0000-7000-8000-000000000002",
            "bbbb3333-0000-7000-8000-000000000003",
            "aaaa1111-0000-7000-8000-000000000001"
        ]
    );
    let newest = &all[0];
    assert_eq!(newest["name"], "the named one");
    assert_eq!(newest["firstMessage"], "newest question");
    assert_eq!(newest["messageCount"], 2);
    assert_eq!(newest["entryCount"], 3);
    assert_eq!(newest["modified"], "2026-01-01T00:00:30.000Z");
    assert_eq!(newest["cwd"], "/proj/a");

    let in_a: Value =
        serde_json::from_str(&env.ok(&["list", "--cwd", "/proj/a", "--json"])).unwrap();
    assert_eq!(in_a.as_array().unwrap().len(), 2);
    assert!(in_a
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["cwd"] == "/proj/a"));

    let limited = env.ok(&["list", "--all", "--jsonl", "--limit", "1"]);
    assert_eq!(limited.lines().count(), 1);
    let one: Value = serde_json::from_str(limited.trim()).unwrap();
    assert_eq!(one["id"], "aaaa2222-0000-7000-8000-000000000002");

    // The current directory holds no sessions; piped tables keep full ids.
    assert_eq!(env.ok(&["list"]), "");
    let table = env.ok(&["list", "--all"]);
    let first = table.lines().next().unwrap();
    assert!(first.starts_with("aaaa2222-0000-7000-8000-000000000002\t2026-01-01 00:00\t2\t3\t"));
    assert!(
        first.ends_with("the named one — newest question"),
        "{first}"
    );
}

#[test]
fn store_comes_from_flag_env_or_settings() {
    let env = Env::new();
    let files = three_sessions(&env);
    let db = env.path("s.db");
    let spec = format!("sqlite:{}", db.display());
    let file = files[0].display().to_string();
    env.ok(&["--session-store", &spec, "import", &file]);
    assert!(db.exists());
    // Env var.
    let out = env
        .cmd(&["list", "--all", "--jsonl"])
        .env("PI_SESSION_STORE", &spec)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    // Settings file.
    fs::write(
        env.path("agent/settings.json"),
        json!({"sessionStore": spec}).to_string(),
    )
    .unwrap();
    assert_eq!(env.ok(&["list", "--all", "--jsonl"]).lines().count(), 1);
    // The flag wins over the setting.
    let other = format!("redb:{}", env.path("r.redb").display());
    assert_eq!(env.ok(&["--store", &other, "list", "--all", "--jsonl"]), "");
    // A broken settings file is named.
    fs::write(env.path("agent/settings.json"), "{nope").unwrap();
    let out = env.run(&["list", "--all"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("settings.json"));
}

/// Every clean v3 fixture Pi wrote, plus hand-broken ones the stores must keep as they are.
fn v3_fixtures() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(repo().join("fixtures/realpi/sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    for name in [
        "crlf_line_endings",
        "duplicate_ids",
        "orphan_parent_leaf",
        "parent_cycle",
        "unknown_entry_type_and_role",
        "compaction_on_other_branch",
    ] {
        files.push(repo().join(format!("fixtures/realpi/tricky/inputs/{name}.jsonl")));
    }
    files.sort();
    files
}

fn header_id(file: &Path) -> String {
    let bytes = fs::read(file).unwrap();
    let first = bytes.split(|&b| b == b'\n').next().unwrap();
    let v: Value = serde_json::from_slice(first).unwrap();
    v["id"].as_str().unwrap().to_string()
}

#[test]
fn migrate_round_trip_is_byte_identical_and_idempotent() {
    let env = Env::new();
    let start = env.path("start");
    fs::create_dir_all(&start).unwrap();
    let fixtures = v3_fixtures();
    for f in &fixtures {
        fs::copy(f, start.join(f.file_name().unwrap())).unwrap();
    }
    let stores = [
        format!("jsonl:{}", start.display()),
        format!("sqlite:{}", env.path("s.db").display()),
        format!("redb:{}", env.path("r.redb").display()),
        format!("jsonl:{}", env.path("end").display()),
    ];
    let n = fixtures.len();
    for pair in stores.windows(2) {
        let out = env.ok(&["migrate", "--from", &pair[0], "--to", &pair[1]]);
        assert!(
            out.contains(&format!(
                "{n} session(s); copied {n}, extended 0, 0 already there, 0 problem(s)"
            )),
            "{out}"
        );
        assert!(out.contains("verified"), "{out}");
        // Again: nothing to do.
        let again = env.ok(&["migrate", "--from", &pair[0], "--to", &pair[1]]);
        assert!(
            again.contains(&format!(
                "copied 0, extended 0, {n} already there, 0 problem(s)"
            )),
            "{again}"
        );
    }
    for f in &fixtures {
        let id = header_id(f);
        let original = fs::read(f).unwrap();
        for store in &stores {
            let exported = env.ok_bytes(&["--store", store, "export", &id]);
            assert!(exported == original, "{} differs in {store}", f.display());
        }
    }
    // The final JSONL directory holds Pi-named files with the original bytes.
    let end_files = fs::read_dir(env.path("end")).unwrap().count();
    assert_eq!(end_files, n);

    // A dry run into a new store writes nothing.
    let fresh = format!("sqlite:{}", env.path("dry.db").display());
    let out = env.ok(&["migrate", "--from", &stores[0], "--to", &fresh, "--dry-run"]);
    assert!(out.contains(&format!("would copy {n}")), "{out}");
    let listed = env.ok(&["--store", &fresh, "list", "--all", "--jsonl"]);
    assert_eq!(listed, "");
    // Same store twice is refused.
    let out = env.run(&["migrate", "--from", &stores[1], "--to", &stores[1]]);
    assert!(!out.status.success());
}

#[test]
fn export_jsonl_gives_the_stored_bytes_and_resolves_ids_safely() {
    let env = Env::new();
    let files = three_sessions(&env);
    let file = files[1].display().to_string();
    let original = fs::read(&files[1]).unwrap();
    // A file path.
    assert_eq!(env.ok_bytes(&["export", &file]), original);
    env.ok(&["import", &file, &files[0].display().to_string()]);
    // Full id, unique prefix, name.
    assert_eq!(
        env.ok_bytes(&["export", "aaaa2222-0000-7000-8000-000000000002"]),
        original
    );
    assert_eq!(env.ok_bytes(&["export", "aaaa2"]), original);
    assert_eq!(env.ok_bytes(&["export", "the named one"]), original);
    // -o writes the same bytes.
    let out = env.path("out.jsonl");
    env.ok(&["export", "aaaa2", "-o", &out.display().to_string()]);
    assert_eq!(fs::read(&out).unwrap(), original);
    // Ambiguous and unknown prefixes, and traversal, are refused with a message.
    for (arg, says) in [
        ("aaaa", "matches 2 sessions"),
        ("zzzz", "no session"),
        ("..", "not a session id"),
        ("../../etc/passwd", "cannot read"),
    ] {
        let out = env.run(&["export", arg]);
        assert!(!out.status.success(), "{arg}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{arg}: {err}");
    }
}

/// Exports stream from the (mapped) file to the output instead of building the page or
/// document in memory: the bytes are still exactly what the engine renders, on stdout
/// and with `-o`, for a session large enough to be mapped and to span many buffers.
#[test]
fn streamed_exports_are_the_rendered_bytes() {
    let env = Env::new();
    let f = env.path("big.jsonl");
    let mut lines = vec![header(
        "bbbb0000-0000-7000-8000-000000000001",
        "2026-01-01T00:00:00.000Z",
        "/proj/big",
    )];
    let mut parent: Option<String> = None;
    for i in 0..400 {
        let (u, a) = (format!("u{i}"), format!("a{i}"));
        // Text with markup, a CR and controls, so the escaping of every writer is crossed.
        let text = format!("<b>question {i}</b>\r\u{1b}[31m & {}", "x".repeat(4000));
        lines.push(user(
            &u,
            parent.as_deref(),
            "2026-01-01T00:01:00.000Z",
            &text,
        ));
        lines.push(assistant(
            &a,
            &u,
            "2026-01-01T00:01:01.000Z",
            &"answer ".repeat(600),
        ));
        parent = Some(a);
    }
    let original = write_session(&f, &lines);
    assert!(original.len() > 2 << 20, "large enough to be mapped");
    let file = f.display().to_string();
    let session = pi_engine::session::Session::open(&f).unwrap();
    for (format, engine) in [
        ("html", pi_engine::export::Format::Html),
        ("md", pi_engine::export::Format::Markdown),
        ("jsonl", pi_engine::export::Format::Jsonl),
    ] {
        let rendered = pi_engine::export::render(&session, engine);
        let stdout = env.ok_bytes(&["export", &file, "--format", format]);
        assert!(stdout == rendered, "{format} on stdout");
        let out = env.path(&format!("out.{format}"));
        env.ok(&[
            "export",
            &file,
            "--format",
            format,
            "-o",
            &out.display().to_string(),
        ]);
        assert!(fs::read(&out).unwrap() == rendered, "{format} with -o");
    }
    assert!(env.ok_bytes(&["export", &file]) == original);
}

/// A session that cannot be read is reported before any output exists: `-o` leaves an
/// existing file as it was and creates none.
#[test]
fn a_failed_export_leaves_the_output_alone() {
    let env = Env::new();
    let bad = env.path("bad.jsonl");
    fs::write(&bad, b"not a session\n").unwrap();
    let kept = env.path("kept.html");
    fs::write(&kept, b"before").unwrap();
    for (format, out) in [("html", &kept), ("md", &env.path("new.md"))] {
        let run = env.run(&[
            "export",
            &bad.display().to_string(),
            "--format",
            format,
            "-o",
            &out.display().to_string(),
        ]);
        assert!(!run.status.success(), "{format}");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains("bad.jsonl"), "{format}: {err}");
    }
    assert_eq!(fs::read(&kept).unwrap(), b"before");
    assert!(!env.path("new.md").exists());
    // Only the files written above are there: no temp file was left behind.
    let mut names: Vec<String> = fs::read_dir(env.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["agent", "bad.jsonl", "kept.html", "work"]);
}

const M: &str = "pwn7e3";

fn payloads() -> Vec<String> {
    vec![
        format!("<script>alert('{M}')</script>"),
        format!("</script><script>alert('{M}')</script>"),
        format!("<img src=x onerror=alert('{M}')>"),
        format!("<a href=\"javascript:alert('{M}')\">x</a>"),
        format!("<svg onload=alert('{M}')>"),
        format!("\u{2028}</script><script>{M}()</script>"),
        format!("<iframe src=\"javascript:{M}\"></iframe><!--"),
        format!("<style>body{{background:url(javascript:{M})}}</style>"),
    ]
}

/// A session whose every text field is an injection attempt.
fn hostile_session(path: &Path) {
    let mut lines = vec![header(
        "0190a000-0000-7000-8000-0000000000ff",
        "2026-01-01T00:00:00.000Z",
        "/p",
    )];
    let mut parent: Option<String> = None;
    for (i, p) in payloads().iter().enumerate() {
        let u = format!("u{i}");
        let a = format!("a{i}");
        let t = format!("t{i}");
        lines.push(json!({"type": "message", "id": u, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": [{"type": "text", "text": p},
                {"type": "image", "mimeType": p, "data": p}], "timestamp": 1}}));
        lines.push(json!({"type": "message", "id": a, "parentId": u, "timestamp": "2026-01-01T00:00:02.000Z",
            "message": {"role": "assistant", "content": [{"type": "thinking", "thinking": p},
                {"type": "text", "text": p},
                {"type": "toolCall", "id": p, "name": p, "arguments": {"command": p}}],
                "provider": p, "model": p, "stopReason": "error", "errorMessage": p, "timestamp": 2}}));
        lines.push(json!({"type": "message", "id": t, "parentId": a, "timestamp": "2026-01-01T00:00:03.000Z",
            "message": {"role": "toolResult", "toolCallId": p, "toolName": p,
                "content": [{"type": "text", "text": p}], "isError": true, "timestamp": 3}}));
        parent = Some(t);
    }
    let last = parent.unwrap();
    let p0 = &payloads()[0];
    lines.push(json!({"type": "label", "id": "l1", "parentId": last, "timestamp": "2026-01-01T00:00:04.000Z",
        "targetId": "u0", "label": p0}));
    lines.push(json!({"type": "session_info", "id": "n1", "parentId": "l1", "timestamp": "2026-01-01T00:00:04.000Z",
        "name": payloads()[2]}));
    lines.push(json!({"type": "compaction", "id": "c1", "parentId": "n1", "timestamp": "2026-01-01T00:00:05.000Z",
        "summary": p0, "firstKeptEntryId": p0, "tokensBefore": 5}));
    lines.push(json!({"type": "branch_summary", "id": "b1", "parentId": "u0", "timestamp": "2026-01-01T00:00:06.000Z",
        "summary": payloads()[3], "fromId": payloads()[4]}));
    lines.push(json!({"type": "custom", "id": "x1", "parentId": "b1", "timestamp": "2026-01-01T00:00:07.000Z",
        "customType": p0, "data": {"html": payloads()[1]}}));
    lines.push(json!({"type": payloads()[4], "id": "y1", "parentId": "x1"}));
    lines.push(json!({"type": "message", "id": "z1", "parentId": "c1", "timestamp": "2026-01-01T00:00:08.000Z",
        "message": {"role": "bashExecution", "command": p0, "output": payloads()[5], "exitCode": 1, "timestamp": 8}}));
    write_session(path, &lines);
}

#[test]
fn html_export_renders_hostile_content_as_text() {
    let env = Env::new();
    let file = env.path("hostile.jsonl");
    hostile_session(&file);
    let out = env.path("hostile.html");
    env.ok(&[
        "export",
        &file.display().to_string(),
        "--format",
        "html",
        "-o",
        &out.display().to_string(),
    ]);
    let html = fs::read_to_string(&out).unwrap();
    let doc = scraper::Html::parse_document(&html);

    // Two scripts: the inert JSON block holding the session's lines intact, and ours.
    let scripts: Vec<_> = doc
        .select(&scraper::Selector::parse("script").unwrap())
        .collect();
    assert_eq!(scripts.len(), 2, "unexpected script elements");
    assert_eq!(scripts[0].value().attr("type"), Some("application/json"));
    assert_eq!(scripts[1].value().attrs().count(), 0);
    let data: Value = serde_json::from_str(&scripts[0].text().collect::<String>()).unwrap();
    assert_eq!(
        data["lines"][1]["message"]["content"][0]["text"],
        payloads()[0]
    );
    assert_eq!(
        data["lines"].as_array().unwrap().len(),
        payloads().len() * 3 + 8
    );

    // No session value anywhere in the markup: the payloads exist only in the data block.
    let block_start = html.find("<script id=\"session-data\"").unwrap();
    let block_end = block_start + html[block_start..].find("</script>").unwrap();
    assert!(!html[..block_start].contains(M) && !html[block_end..].contains(M));
    assert_eq!(html[block_start + 1..block_end].matches('<').count(), 0);

    // No element the payloads would have created; no handler or script URL anywhere.
    for tag in [
        "iframe", "svg", "object", "embed", "form", "base", "link", "img", "a",
    ] {
        let sel = scraper::Selector::parse(tag).unwrap();
        assert_eq!(doc.select(&sel).count(), 0, "found {tag}");
    }
    let styles = doc
        .select(&scraper::Selector::parse("style").unwrap())
        .count();
    assert_eq!(styles, 1, "only our stylesheet");
    let all = scraper::Selector::parse("*").unwrap();
    for el in doc.select(&all) {
        for (name, value) in el.value().attrs() {
            assert!(
                !name.starts_with("on"),
                "handler {name} on <{}>",
                el.value().name()
            );
            let v = value.trim().to_ascii_lowercase();
            assert!(!v.starts_with("javascript:"), "script URL in {name}");
        }
    }
    // Strict CSP: our script and style by hash, nothing inline by permission, no HTML sinks.
    let csp = doc
        .select(&scraper::Selector::parse("meta[http-equiv='Content-Security-Policy']").unwrap())
        .next()
        .expect("CSP meta tag");
    let policy = csp.value().attr("content").unwrap();
    assert!(policy.contains("default-src 'none'") && policy.contains("script-src 'sha256-"));
    assert!(policy.contains("require-trusted-types-for 'script'"));
    assert!(!policy.contains("unsafe"), "{policy}");
}

#[test]
fn html_export_shows_every_branch_and_md_the_active_one() {
    let env = Env::new();
    let file = env.path("branched.jsonl");
    write_session(
        &file,
        &[
            header(
                "0190b000-0000-7000-8000-000000000001",
                "2026-01-01T00:00:00.000Z",
                "/p",
            ),
            user("a", None, "2026-01-01T00:00:01.000Z", "the question"),
            assistant("b", "a", "2026-01-01T00:00:02.000Z", "abandoned answer"),
            user(
                "c",
                Some("b"),
                "2026-01-01T00:00:03.000Z",
                "abandoned follow-up",
            ),
            assistant("d", "a", "2026-01-01T00:00:04.000Z", "kept answer"),
            json!({"type": "label", "id": "l", "parentId": "d", "timestamp": "2026-01-01T00:00:05.000Z",
                "targetId": "b", "label": "checkpoint"}),
            json!({"type": "message", "id": "e", "parentId": "l", "timestamp": "2026-01-01T00:00:06.000Z",
                "message": {"role": "user", "content": [{"type": "text", "text": "look"},
                    {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}], "timestamp": 6}}),
        ],
    );
    let f = file.display().to_string();
    let html = env.ok(&["export", &f, "--format", "html"]);
    let doc = scraper::Html::parse_document(&html);
    // Every branch is in the page's data; the page's script shows them (see
    // html_export_browser.rs for what a browser makes of it).
    let data: Value = serde_json::from_str(
        &doc.select(&scraper::Selector::parse("#session-data").unwrap())
            .next()
            .unwrap()
            .text()
            .collect::<String>(),
    )
    .unwrap();
    let text = data["lines"].to_string();
    for want in [
        "the question",
        "abandoned answer",
        "abandoned follow-up",
        "kept answer",
        "checkpoint",
    ] {
        assert!(text.contains(want), "html lacks {want}");
    }
    assert_eq!(data["meta"]["labels"], json!([[1, "checkpoint"]]));
    assert_eq!(data["meta"]["parent"], json!([-1, 0, 1, 0, 3, 4]));

    let md = env.ok(&["export", &f, "--format", "md"]);
    assert!(
        md.contains("the question") && md.contains("kept answer"),
        "{md}"
    );
    assert!(!md.contains("abandoned"), "{md}");
    assert!(md.contains("## Assistant (p/m)"));
}

#[test]
fn import_migrates_old_versions_and_skips_reimports() {
    let env = Env::new();
    let inputs = repo().join("fixtures/realpi/tricky/inputs");
    let mut files: Vec<PathBuf> = fs::read_dir(&inputs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("v1_") || name == "v2_hookmessage.jsonl"
        })
        .collect();
    files.sort();
    assert_eq!(files.len(), 4);
    let mono = repo().join("fixtures/pi-mono-repo");
    let mut args: Vec<String> = vec!["import".into()];
    args.extend(files.iter().map(|f| f.display().to_string()));
    args.push(
        repo()
            .join("fixtures/realpi/sessions")
            .display()
            .to_string(),
    );
    for name in [
        "before-compaction.jsonl",
        "large-session.jsonl",
        "prompt-cache-replay-session.jsonl",
    ] {
        args.push(mono.join(name).display().to_string());
    }
    let db = format!("sqlite:{}", env.path("i.db").display());
    let mut with_store = vec!["--store".to_string(), db.clone()];
    with_store.extend(args.iter().cloned());
    let refs: Vec<&str> = with_store.iter().map(String::as_str).collect();

    let first = env.ok(&refs);
    let total = first.lines().filter(|l| l.starts_with("imported ")).count();
    assert!(total >= 20, "{first}");
    assert_eq!(
        first
            .lines()
            .filter(|l| l.contains("(migrated to version 3)"))
            .count(),
        // v1_* (3), v2_hookmessage, and the three pi-mono-repo files (v1/v2 era).
        7,
        "{first}"
    );
    assert!(first.contains(&format!(
        "{total} imported, 0 updated, 0 already there, 0 failed"
    )));

    let second = env.ok(&refs);
    assert_eq!(
        second.lines().filter(|l| l.starts_with("skipped ")).count(),
        total
    );
    assert!(second.contains(&format!(
        "0 imported, 0 updated, {total} already there, 0 failed"
    )));

    // Migrated on the way in: the stored v2 session is version 3 and keeps its id.
    let v2 = env.ok(&["--store", &db, "export", "v2-hook"]);
    let head: Value = serde_json::from_str(v2.lines().next().unwrap()).unwrap();
    assert_eq!(head["version"], 3);
    assert_eq!(head["id"], "v2-hook");
    // v3 files are stored byte for byte.
    let plain = repo().join("fixtures/realpi/sessions/print_plain.jsonl");
    let id = header_id(&plain);
    assert_eq!(
        env.ok_bytes(&["--store", &db, "export", &id]),
        fs::read(&plain).unwrap()
    );
}

#[test]
fn import_errors_name_the_file() {
    let env = Env::new();
    let bad = repo().join("fixtures/realpi/tricky/inputs/not_json.jsonl");
    let out = env.run(&["import", &bad.display().to_string()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not_json.jsonl"), "{err}");
    let missing = env.run(&["import", "/nonexistent/x.jsonl"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/x.jsonl"));
}

#[test]
fn redact_masks_planted_keys() {
    let env = Env::new();
    let file = env.path("secret.jsonl");
    let key = "sk-ant-api03-PLANTEDsecretKEY0123456789abcdef";
    let gh = "ghp_0123456789abcdefghijABCDEFGHIJklmn";
    write_session(
        &file,
        &[
            header(
                "0190c000-0000-7000-8000-000000000001",
                "2026-01-01T00:00:00.000Z",
                "/p",
            ),
            user(
                "a",
                None,
                "2026-01-01T00:00:01.000Z",
                &format!("my key is {key}"),
            ),
            json!({"type": "message", "id": "b", "parentId": "a", "timestamp": "2026-01-01T00:00:02.000Z",
                "message": {"role": "toolResult", "toolCallId": "c", "toolName": "bash",
                    "content": [{"type": "text", "text": format!("GITHUB_TOKEN={gh}")}], "isError": false, "timestamp": 2}}),
        ],
    );
    let f = file.display().to_string();
    for format in ["jsonl", "html", "md"] {
        let out = env.ok(&["export", &f, "--format", format, "--redact"]);
        assert!(
            !out.contains("PLANTED") && !out.contains("0123456789abcdefghij"),
            "{format}"
        );
        assert!(
            out.contains("sk-ant-[REDACTED]") && out.contains("ghp_[REDACTED]"),
            "{format}"
        );
        let plain = env.ok(&["export", &f, "--format", format]);
        assert!(
            plain.contains(key),
            "{format} without --redact keeps the text"
        );
    }
    // Redacted JSONL is still a valid session with the same tree.
    let redacted = env.ok(&["export", &f, "--redact"]);
    for line in redacted.lines() {
        let _: Value = serde_json::from_str(line).unwrap();
    }
    assert_eq!(redacted.lines().count(), 3);
}

/// `pi sessions list` answers from the history index; its output equals the listing read
/// straight from the files (forced here by making the index path unusable), before and
/// after an append, for every fixture session Pi wrote.
#[test]
fn list_from_the_index_equals_list_from_the_files() {
    let env = Env::new();
    let sessions = env.path("agent/sessions/--work--");
    fs::create_dir_all(&sessions).unwrap();
    for item in fs::read_dir(repo().join("fixtures/realpi/sessions")).unwrap() {
        let path = item.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            fs::copy(&path, sessions.join(path.file_name().unwrap())).unwrap();
        }
    }
    let from_files = |env: &Env, args: &[&str]| {
        // A directory where the index file would be: the index cannot open, the store lists.
        let index = env.path("agent/history.sqlite");
        let moved = env.path("agent/history.sqlite.aside");
        if index.exists() {
            fs::rename(&index, &moved).unwrap();
        }
        fs::create_dir(&index).unwrap();
        let out = env.ok(args);
        fs::remove_dir(&index).unwrap();
        if moved.exists() {
            fs::rename(&moved, &index).unwrap();
        }
        out
    };
    for args in [
        &["list", "--all", "--json"][..],
        &["list", "--all", "--jsonl", "--limit", "5"][..],
        &["list", "--cwd", "/work", "--json"][..],
    ] {
        let files = from_files(&env, args);
        assert!(files.len() > 100, "{args:?}: {files}");
        assert_eq!(env.ok(args), files, "{args:?}, first listing (index built)");
        assert_eq!(env.ok(args), files, "{args:?}, warm listing");
    }
    assert!(env.path("agent/history.sqlite").is_file());

    // A session grows: the next listing shows it, as the files say.
    let grown = fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("print_plain"))
        .unwrap();
    let mut f = fs::OpenOptions::new().append(true).open(&grown).unwrap();
    std::io::Write::write_all(
        &mut f,
        b"{\"type\":\"session_info\",\"id\":\"zz000001\",\"parentId\":null,\"timestamp\":\"2030-01-01T00:00:00.000Z\",\"name\":\"renamed by an append\"}\n",
    )
    .unwrap();
    drop(f);
    let args = ["list", "--all", "--json"];
    let files = from_files(&env, &args);
    assert!(files.contains("renamed by an append"));
    assert_eq!(env.ok(&args), files);
}

#[test]
fn export_flag_writes_the_same_page_as_sessions_export_and_names_it_like_pi() {
    let env = Env::new();
    let file = env.path("work/2026-01-01_abc.jsonl");
    write_session(
        &file,
        &[
            header(
                "0190b000-0000-7000-8000-000000000009",
                "2026-01-01T00:00:00.000Z",
                "/p",
            ),
            user("a", None, "2026-01-01T00:00:01.000Z", "hello <b>there</b>"),
        ],
    );
    let run = |args: &[&str]| {
        let mut cmd = Command::cargo_bin("pi").unwrap();
        cmd.current_dir(env.path("work"))
            .env("HOME", env.dir.path())
            .env("PI_CODING_AGENT_DIR", env.path("agent"))
            .args(args)
            .output()
            .unwrap()
    };
    // No output named: pi-session-<file name without .jsonl>.html here, as Pi names it.
    let out = run(&["--export", "2026-01-01_abc.jsonl"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Exported to: pi-session-2026-01-01_abc.html\n"
    );
    let page = fs::read(env.path("work/pi-session-2026-01-01_abc.html")).unwrap();
    let f = file.display().to_string();
    assert!(page == env.ok_bytes(&["export", &f, "--format", "html"]));
    // A missing file is an error naming it by its absolute path (as Pi does), and nothing
    // is written.
    let out = run(&["--export", "missing.jsonl", "out.html"]);
    assert_eq!(out.status.code(), Some(1));
    let missing = env.path("work/missing.jsonl").display().to_string();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("File not found: {missing}")),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!env.path("work/out.html").exists());
}
