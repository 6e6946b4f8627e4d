//! The HTML export in a real browser: headless Chromium (Debian's `chromium` package) driven
//! over the DevTools protocol by `tests/browser/cdp.py`; every decision and assertion is here.
//!
//! Needs `chromium` (or `PI_CHROMIUM=/path`) and `python3`. `.ci/run` installs chromium and sets
//! `PI_BROWSER_E2E=1`; with that set a missing browser fails the test, without it the test
//! says clearly that it did not run. Screenshots of every state go to
//! `target/html-export-screenshots/<test>/` (not committed).

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PI_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// The browser, or `None` after saying why the test cannot run here.
fn browser_or_report(test: &str) -> Option<PathBuf> {
    let found = chromium().filter(|_| {
        Command::new("python3")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        let msg = format!(
            "{test}: NOT RUN — needs headless Chromium (apt-get install chromium, or PI_CHROMIUM=path) and python3"
        );
        assert!(
            std::env::var("PI_BROWSER_E2E").map_or(true, |v| v != "1"),
            "{msg} (PI_BROWSER_E2E=1 says it must run)"
        );
        eprintln!("{msg}");
    }
    found
}

struct Browser {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    shots: PathBuf,
}

impl Browser {
    fn start(chromium: &Path, test: &str) -> Browser {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/cdp.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(chromium)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the browser driver");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let shots = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/html-export-screenshots")
            .join(test);
        std::fs::create_dir_all(&shots).unwrap();
        let mut b = Browser {
            child,
            stdin,
            stdout,
            shots,
        };
        let hello = b.read();
        assert_eq!(hello["ready"], true, "driver did not start: {hello}");
        b
    }

    fn read(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("driver output");
        assert!(!line.is_empty(), "the browser driver exited");
        serde_json::from_str(&line).expect("driver JSON")
    }

    fn call(&mut self, cmd: Value) -> Value {
        writeln!(self.stdin, "{cmd}").unwrap();
        self.stdin.flush().unwrap();
        let r = self.read();
        assert_eq!(r["ok"], true, "{cmd} failed: {}", r["error"]);
        r["value"].clone()
    }

    fn open(&mut self, page: &Path) {
        let url = format!("file://{}", page.display());
        self.call(json!({"cmd": "open", "url": url}));
        self.wait("document.body.dataset.ready === '1'");
    }

    fn eval(&mut self, expr: &str) -> Value {
        self.call(json!({"cmd": "eval", "expr": expr}))
    }

    /// Waits (in the page, frame by frame, up to 10 s) until `cond` holds.
    fn wait(&mut self, cond: &str) {
        let expr = format!(
            "new Promise(function (ok) {{ var t0 = Date.now(); (function poll() {{ \
               var v = false; try {{ v = !!({cond}); }} catch (e) {{}} \
               if (v || Date.now() - t0 > 10000) ok(v); else requestAnimationFrame(poll); }})(); }})"
        );
        assert_eq!(self.eval(&expr), true, "timed out waiting for {cond}");
    }

    fn key(&mut self, key: &str) {
        self.call(json!({"cmd": "key", "key": key}));
    }

    fn click(&mut self, selector: &str) {
        self.call(json!({"cmd": "click", "selector": selector}));
    }

    fn shot(&mut self, name: &str) {
        let path = self.shots.join(format!("{name}.png"));
        self.call(json!({"cmd": "shot", "path": path}));
    }

    /// The tree rows shown, as text.
    fn rows(&mut self) -> Vec<String> {
        let v = self.eval(
            "Array.prototype.map.call(document.querySelectorAll('#tree .row'), function (r) { return r.textContent; })",
        );
        serde_json::from_value(v).unwrap()
    }

    /// No console error, no exception, no policy violation, no dialog, no probed call.
    fn assert_clean(&mut self, when: &str) {
        let events = self.call(json!({"cmd": "events"}));
        for kind in ["console", "exceptions", "log", "dialogs"] {
            assert_eq!(events[kind], json!([]), "{when}: {kind} {}", events[kind]);
        }
        let probe = self.eval("window.__probe");
        assert_eq!(probe["violations"], json!([]), "{when}: policy violations");
        assert_eq!(probe["calls"], json!([]), "{when}: a dialog function ran");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"cmd": "quit"}));
        let _ = self.stdin.flush();
        let _ = self.child.wait();
    }
}

fn pi(agent: &Path, cwd: &Path, args: &[&str]) -> String {
    let out = assert_cmd::Command::cargo_bin("pi")
        .unwrap()
        .current_dir(cwd)
        .env("HOME", agent.parent().unwrap())
        .env("PI_CODING_AGENT_DIR", agent)
        .env_remove("PI_SESSION_STORE")
        .env_remove("PI_CODING_AGENT_SESSION_DIR")
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pi {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn write_lines(path: &Path, lines: &[Value]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for l in lines {
        bytes.extend_from_slice(l.to_string().as_bytes());
        bytes.push(b'\n');
    }
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, &bytes).unwrap();
    bytes
}

fn msg(id: &str, parent: Option<&str>, second: u32, message: Value) -> Value {
    json!({"type": "message", "id": id, "parentId": parent,
        "timestamp": format!("2026-03-01T10:00:{second:02}.000Z"), "message": message})
}

fn usage(input: u64, output: u64, cost: f64) -> Value {
    json!({"input": input, "output": output, "cacheRead": 5, "cacheWrite": 1, "totalTokens": input + output,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost}})
}

/// A session with two branches and one of everything the page shows.
fn rich_session() -> Vec<Value> {
    let long_output: String = (1..=40).map(|i| format!("line {i} nebula\n")).collect();
    vec![
        json!({"type": "session", "version": 3, "id": "0190c000-0000-7000-8000-0000000000aa",
            "timestamp": "2026-03-01T10:00:00.000Z", "cwd": "/home/user/proj"}),
        json!({"type": "model_change", "id": "m1", "parentId": null, "timestamp": "2026-03-01T10:00:00.500Z",
            "provider": "fakeoai", "modelId": "fake-model"}),
        msg(
            "s1",
            Some("m1"),
            1,
            json!({"role": "system", "content": "",
            "sections": {"preamble": "You are a careful assistant.", "tools": "<tools>bash</tools>"}, "timestamp": 1}),
        ),
        msg(
            "u1",
            Some("s1"),
            2,
            json!({"role": "user", "content": "Please list the files", "timestamp": 2}),
        ),
        msg(
            "a1",
            Some("u1"),
            3,
            json!({"role": "assistant", "provider": "fakeoai", "model": "fake-model",
            "content": [{"type": "thinking", "thinking": "pondering quasar things"},
                        {"type": "text", "text": "I will look around with zephyr. See https://example.com/docs and [bad](javascript:alert(1))."},
                        {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "ls"}}],
            "usage": usage(100, 20, 0.0125), "stopReason": "toolUse", "timestamp": 3}),
        ),
        msg(
            "t1",
            Some("a1"),
            4,
            json!({"role": "toolResult", "toolCallId": "c1", "toolName": "bash",
            "content": [{"type": "text", "text": long_output}], "isError": false, "timestamp": 4}),
        ),
        msg(
            "a2",
            Some("t1"),
            5,
            json!({"role": "assistant", "provider": "fakeoai", "model": "fake-model",
            "content": [{"type": "text", "text": "Done: kumquat"}], "usage": usage(150, 10, 0.02),
            "stopReason": "stop", "timestamp": 5}),
        ),
        // The other branch, from the first answer's tool result.
        msg(
            "u2",
            Some("t1"),
            6,
            json!({"role": "user", "content": "other branch question", "timestamp": 6}),
        ),
        msg(
            "a3",
            Some("u2"),
            7,
            json!({"role": "assistant", "provider": "other", "model": "second-model",
            "content": [{"type": "text", "text": "other branch answer"}], "usage": usage(30, 3, 0.001),
            "stopReason": "stop", "timestamp": 7}),
        ),
        // Back on the first branch.
        msg(
            "b1",
            Some("a2"),
            8,
            json!({"role": "bashExecution", "command": "echo hi", "output": "hi\n",
            "exitCode": 0, "cancelled": false, "truncated": false, "timestamp": 8}),
        ),
        json!({"type": "compaction", "id": "c9", "parentId": "b1", "timestamp": "2026-03-01T10:00:09.000Z",
            "summary": "Compacted: the files were listed", "firstKeptEntryId": "a2", "tokensBefore": 1234}),
        json!({"type": "branch_summary", "id": "bs", "parentId": "c9", "timestamp": "2026-03-01T10:00:10.000Z",
            "fromId": "a3", "summary": "The other branch asked a question"}),
        json!({"type": "label", "id": "l1", "parentId": "bs", "timestamp": "2026-03-01T10:00:11.000Z",
            "targetId": "a2", "label": "milestone"}),
        json!({"type": "custom_message", "id": "cm", "parentId": "l1", "timestamp": "2026-03-01T10:00:12.000Z",
            "customType": "note", "content": "secret hidden note", "display": false}),
        json!({"type": "session_info", "id": "n1", "parentId": "cm", "timestamp": "2026-03-01T10:00:13.000Z",
            "name": "Browser test session"}),
        msg(
            "u3",
            Some("n1"),
            14,
            json!({"role": "user", "content": "last question", "timestamp": 14}),
        ),
    ]
}

#[test]
fn the_page_searches_filters_toggles_navigates_and_totals_like_stats() {
    let Some(chromium) = browser_or_report("html export browser test") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let work = tmp.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    // In the default store, so `pi sessions stats` counts exactly this session.
    let file = agent
        .join("sessions/--home-user-proj--")
        .join("2026-03-01T10-00-00-000Z_0190c000-0000-7000-8000-0000000000aa.jsonl");
    let bytes = write_lines(&file, &rich_session());
    let f = file.display().to_string();

    // Every export path writes the same page.
    let page = work.join("page.html");
    pi(&agent, &work, &["--export", &f, "page.html"]);
    let via_sessions = pi(
        &agent,
        &work,
        &["sessions", "export", &f, "--format", "html"],
    );
    assert!(
        std::fs::read_to_string(&page).unwrap() == via_sessions,
        "--export and sessions export differ"
    );

    let mut b = Browser::start(&chromium, "rich");
    b.call(json!({"cmd": "downloads", "dir": tmp.path().join("dl")}));
    b.open(&page);
    b.assert_clean("after load");
    b.shot("01-loaded");
    assert_eq!(b.eval("document.title"), json!("Browser test session · pi"));

    // The active branch is shown, from the start; the tree marks it.
    let shown = |b: &mut Browser| -> Vec<String> {
        serde_json::from_value(b.eval(
            "Array.prototype.map.call(document.querySelectorAll('#messages .entry'), function (e) { return e.querySelector('.eid') ? e.querySelector('.eid').textContent : ''; })",
        ))
        .unwrap()
    };
    let active = shown(&mut b);
    assert!(active.contains(&"#u3".to_string()) && active.contains(&"#a2".to_string()));
    assert!(!active.contains(&"#u2".to_string()), "{active:?}");

    // Search: a word of an assistant message, then one of a tool result.
    b.click("#search");
    b.call(json!({"cmd": "type", "text": "zephyr"}));
    b.wait("document.getElementById('tree-status').textContent.indexOf('zephyr') >= 0");
    let rows = b.rows();
    assert_eq!(rows.len(), 2, "{rows:?}"); // the match, and the selected leaf that always shows
    assert!(rows
        .iter()
        .any(|r| r.contains("assistant: I will look around with zephyr")));
    b.shot("02-search-assistant");
    b.key("Escape");
    b.click("#search");
    b.call(json!({"cmd": "type", "text": "nebula"}));
    b.wait("document.getElementById('tree-status').textContent.indexOf('nebula') >= 0");
    let rows = b.rows();
    assert!(
        rows.iter()
            .any(|r| r.starts_with("tool bash: line 1 nebula")),
        "{rows:?}"
    );
    b.shot("03-search-tool-result");
    b.key("Escape");
    b.wait("document.getElementById('tree-status').textContent.indexOf('match') < 0");
    b.eval("document.activeElement.blur()");

    // Filters: each one changes what the tree holds.
    let mut seen = Vec::new();
    for (filter, must, must_not) in [
        (
            "default",
            "assistant: Done: kumquat",
            "model: fakeoai/fake-model",
        ),
        ("no-tools", "assistant: Done: kumquat", "tool bash:"),
        ("user", "user: other branch question", "assistant:"),
        ("labeled", "milestone", "user: Please list"),
        ("all", "model: fakeoai/fake-model", "\u{0}"),
    ] {
        b.click(&format!(".filter[data-filter='{filter}']"));
        let rows = b.rows();
        assert!(rows.iter().any(|r| r.contains(must)), "{filter}: {rows:?}");
        assert!(
            !rows
                .iter()
                .any(|r| r.contains(must_not) && !r.contains("last question")),
            "{filter}: {rows:?}"
        );
        assert!(
            !seen.contains(&rows),
            "{filter} shows what another filter showed"
        );
        seen.push(rows);
        b.shot(&format!("04-filter-{filter}"));
    }
    b.click(".filter[data-filter='default']");

    // Toggles by their keys: thinking (shown by default), tool output, hidden messages.
    let display = |b: &mut Browser, sel: &str| -> String {
        b.eval(&format!(
            "getComputedStyle(document.querySelector(\"{sel}\")).display"
        ))
        .as_str()
        .unwrap()
        .to_string()
    };
    let height = |b: &mut Browser| -> f64 {
        b.eval("document.querySelector('pre.out.long').getBoundingClientRect().height")
            .as_f64()
            .unwrap()
    };
    assert_ne!(display(&mut b, ".thinking .body"), "none");
    b.key("t");
    assert_eq!(display(&mut b, ".thinking .body"), "none");
    assert_ne!(display(&mut b, ".thinking .folded"), "none");
    b.shot("05-thinking-hidden");
    b.key("t");
    assert_ne!(display(&mut b, ".thinking .body"), "none");
    let folded = height(&mut b);
    b.key("o");
    let unfolded = height(&mut b);
    assert!(unfolded > folded * 2.0, "O: {folded} → {unfolded}");
    b.shot("06-tool-output-open");
    b.key("o");
    assert_eq!(height(&mut b), folded);
    assert_eq!(display(&mut b, ".hidden-msg"), "none");
    b.key("h");
    assert_eq!(display(&mut b, ".hidden-msg"), "block");
    assert!(b
        .eval("document.getElementById('messages').innerText.indexOf('secret hidden note') >= 0")
        .as_bool()
        .unwrap());
    b.shot("07-hidden-shown");
    b.key("h");
    assert_eq!(display(&mut b, ".hidden-msg"), "none");

    // Choosing a tree entry shows its path: the other branch, not the active one.
    b.click(".filter[data-filter='all']");
    b.eval("(function(){var t=document.getElementById('tree'); var rows=document.querySelectorAll('#tree .row'); for (var i=0;i<rows.length;i++) if (rows[i].textContent.indexOf('other branch question')>=0) rows[i].scrollIntoView();})()");
    let row = b.eval("(function(){var rows=document.querySelectorAll('#tree .row'); for (var i=0;i<rows.length;i++) if (rows[i].textContent.indexOf('other branch question')>=0) return rows[i].dataset.idx; return null;})()");
    assert!(row.is_string(), "no tree row for the other branch");
    b.click(&format!("#tree .row[data-idx='{}']", row.as_str().unwrap()));
    b.wait("document.querySelector('#messages .entry.target') !== null");
    let path = shown(&mut b);
    for want in ["#m1", "#s1", "#u1", "#a1", "#t1", "#u2", "#a3"] {
        assert!(path.contains(&want.to_string()), "{want} not on {path:?}");
    }
    for not in ["#a2", "#u3", "#b1"] {
        assert!(!path.contains(&not.to_string()), "{not} on {path:?}");
    }
    let selected = b.eval("document.querySelector('#tree .row.selected').textContent");
    assert!(selected.as_str().unwrap().contains("other branch question"));
    b.shot("08-other-branch");

    // Totals: what `pi sessions stats` counts for this one session.
    let stats: Value =
        serde_json::from_str(&pi(&agent, &work, &["sessions", "stats", "--json"])).unwrap();
    let t = &stats["total"];
    let text = |b: &mut Browser, id: &str| -> String {
        b.eval(&format!("document.getElementById('{id}').textContent"))
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(text(&mut b, "total-messages").starts_with(&format!("{} (", t["messages"])));
    assert!(text(&mut b, "total-tool-calls")
        .starts_with(&format!("{} ({} failed)", t["toolCalls"], t["toolErrors"])));
    assert_eq!(
        text(&mut b, "total-tokens"),
        format!(
            "input {} · output {} · cache read {} · cache write {}",
            t["input"], t["output"], t["cacheRead"], t["cacheWrite"]
        )
    );
    assert_eq!(
        text(&mut b, "total-cost"),
        format!("${:.4}", t["cost"].as_f64().unwrap())
    );
    let by_model: Value = serde_json::from_str(&pi(
        &agent,
        &work,
        &["sessions", "stats", "--by", "model", "--json"],
    ))
    .unwrap();
    let models = text(&mut b, "total-models");
    for g in by_model["groups"].as_array().unwrap() {
        let key = g["key"].as_str().unwrap();
        if key != "(unknown)" {
            assert!(models.contains(key), "{key} not in {models}");
        }
    }
    assert_eq!(models, "fakeoai/fake-model, other/second-model");

    // Links: only http(s), never opener or referrer; the javascript: one stays text.
    let links = b.eval("Array.prototype.map.call(document.querySelectorAll('a'), function (a) { return [a.getAttribute('href'), a.rel]; })");
    assert_eq!(
        links,
        json!([["https://example.com/docs", "noopener noreferrer"]])
    );

    // The download button gives back the session's lines.
    b.click("#download");
    let dl = tmp
        .path()
        .join("dl/0190c000-0000-7000-8000-0000000000aa.jsonl");
    for _ in 0..200 {
        if std::fs::metadata(&dl).is_ok_and(|m| m.len() == bytes.len() as u64) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(std::fs::read(&dl).expect("downloaded JSONL"), bytes);

    // A deep link as Pi's page takes it (?targetId=) opens on that entry's path.
    let url = format!("file://{}?targetId=a3", page.display());
    b.call(json!({"cmd": "open", "url": url}));
    b.wait("document.body.dataset.ready === '1'");
    let path = shown(&mut b);
    assert!(
        path.contains(&"#a3".to_string()) && !path.contains(&"#u3".to_string()),
        "{path:?}"
    );
    b.assert_clean("after every interaction");
}

const M: &str = "pwn7e3";

#[test]
fn a_hostile_session_runs_no_script() {
    let Some(chromium) = browser_or_report("html export hostile-session browser test") else {
        return;
    };
    let payloads = [
        format!("<script>alert('{M}')</script>"),
        format!("</script><script>alert('{M}')</script>"),
        format!("<img src=x onerror=alert('{M}')>"),
        format!("<a href=\"javascript:alert('{M}')\">x</a> [click](javascript:alert('{M}'))"),
        format!("<svg onload=alert('{M}')>"),
        format!("\u{2028}</script><script>{M}()</script><!--"),
        format!("<iframe src=\"javascript:alert('{M}')\"></iframe>"),
        format!("\u{1b}[2J\u{1b}]0;{M}\u{7}\u{1b}[31mred\u{1b}[0m"),
    ];
    let mut lines = vec![json!({"type": "session", "version": 3, "id": payloads[0],
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": payloads[2]})];
    let mut parent: Option<String> = None;
    for (i, p) in payloads.iter().enumerate() {
        for (j, role) in ["user", "assistant", "toolResult"].iter().enumerate() {
            let id = format!("{i:02}{j}");
            let m = match *role {
                "user" => json!({"role": "user", "content": p, "timestamp": 1}),
                "assistant" => json!({"role": "assistant", "provider": p, "model": p,
                    "content": [{"type": "text", "text": p}, {"type": "thinking", "thinking": p},
                        {"type": "toolCall", "id": p, "name": p, "arguments": {"command": p}},
                        {"type": "image", "mimeType": "image/svg+xml", "data": p}],
                    "stopReason": "error", "errorMessage": p, "timestamp": 1}),
                _ => json!({"role": "toolResult", "toolCallId": p, "toolName": p, "isError": true,
                    "content": [{"type": "text", "text": p}, {"type": "image", "mimeType": "image/png", "data": p}],
                    "timestamp": 1}),
            };
            lines.push(json!({"type": "message", "id": id, "parentId": parent,
                "timestamp": "2026-01-01T00:00:01.000Z", "message": m}));
            parent = Some(id);
        }
    }
    let last = parent.unwrap();
    lines.push(json!({"type": "label", "id": "lab", "parentId": last, "timestamp": "2026-01-01T00:00:02.000Z",
        "targetId": "000", "label": payloads[1]}));
    lines
        .push(json!({"type": "session_info", "id": "nam", "parentId": "lab", "name": payloads[2]}));
    lines.push(
        json!({"type": "custom_message", "id": "cus", "parentId": "nam", "customType": payloads[4],
        "content": payloads[3], "display": false}),
    );
    lines.push(json!({"type": payloads[6], "id": "unk", "parentId": "cus", "data": payloads[5]}));
    lines.push(json!({"type": "message", "id": "bsh", "parentId": "unk", "message": {"role": "bashExecution",
        "command": payloads[0], "output": payloads[7], "exitCode": 1}}));

    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let file = tmp.path().join("hostile.jsonl");
    write_lines(&file, &lines);
    let page = tmp.path().join("hostile.html");
    pi(
        &agent,
        tmp.path(),
        &[
            "--export",
            &file.display().to_string(),
            &page.display().to_string(),
        ],
    );

    let mut b = Browser::start(&chromium, "hostile");
    b.open(&page);
    // Everything folded or hidden unfolds, so every payload is rendered.
    b.click(".filter[data-filter='all']");
    b.key("h");
    b.key("o");
    b.shot("01-hostile-all-shown");
    b.assert_clean("hostile session");

    // DOM scan: only our elements, no handler attributes, no script URLs, images only data:.
    let scan = b.eval(
        r#"(function () {
          var bad = [];
          var scripts = document.querySelectorAll('script');
          if (scripts.length !== 2) bad.push(scripts.length + ' script elements');
          ['iframe', 'svg', 'object', 'embed', 'form', 'base', 'link', 'meta[http-equiv=refresh]'].forEach(function (t) {
            if (document.querySelector(t)) bad.push('a ' + t + ' element');
          });
          Array.prototype.forEach.call(document.querySelectorAll('*'), function (el) {
            Array.prototype.forEach.call(el.attributes, function (a) {
              if (/^on/i.test(a.name)) bad.push(el.tagName + ' has ' + a.name);
              if (/^\s*javascript:/i.test(a.value)) bad.push(el.tagName + ' ' + a.name + '=' + a.value);
              if (a.value.indexOf('pwn7e3') >= 0 && a.name !== 'title') bad.push(el.tagName + ' ' + a.name + ' holds the payload');
            });
          });
          Array.prototype.forEach.call(document.querySelectorAll('img'), function (i) {
            if (i.getAttribute('src').indexOf('data:image/') !== 0) bad.push('img ' + i.getAttribute('src'));
          });
          return bad;
        })()"#,
    );
    assert_eq!(scan, json!([]), "DOM scan");
    // The payloads are there as text a reader sees, control characters made visible.
    let text = b.eval("document.getElementById('messages').textContent");
    let text = text.as_str().unwrap();
    assert!(text.contains(&format!("<script>alert('{M}')</script>")));
    assert!(text.contains(&format!("<img src=x onerror=alert('{M}')>")));
    assert!(
        text.contains("␛]0;pwn7e3␇red"),
        "terminal escapes not made visible"
    );
    assert!(!text.contains('\u{1b}'));
    let title = b.eval("document.getElementById('title').textContent");
    assert_eq!(title, json!(payloads[2]));
    b.shot("02-hostile-checked");
    b.assert_clean("after the scan");
}

/// A large session: the page is not much bigger than the session, and it opens with a
/// working tree (a virtual list: only the visible rows exist).
#[test]
fn a_large_session_page_is_small_and_usable() {
    let Some(chromium) = browser_or_report("html export large-session browser test") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("large.jsonl");
    let mut lines = vec![
        json!({"type": "session", "version": 3, "id": "0190d000-0000-7000-8000-000000000001",
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}),
    ];
    let body: String = "fn main() { println!(\"<b>hello</b>\"); } // some code & text\n".repeat(40);
    let mut parent: Option<String> = None;
    let n = 6000;
    for i in 0..n {
        let id = format!("e{i:05}");
        let m = match i % 3 {
            0 => json!({"role": "user", "content": format!("question {i}"), "timestamp": i}),
            1 => json!({"role": "assistant", "provider": "p", "model": "m",
                "content": [{"type": "text", "text": format!("answer {i}")},
                    {"type": "toolCall", "id": format!("c{i}"), "name": "read", "arguments": {"path": "src/main.rs"}}],
                "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.001}},
                "stopReason": "toolUse", "timestamp": i}),
            _ => json!({"role": "toolResult", "toolCallId": format!("c{i}"), "toolName": "read",
                "content": [{"type": "text", "text": format!("{body}marker-{i}")}], "isError": false, "timestamp": i}),
        };
        lines.push(json!({"type": "message", "id": id, "parentId": parent,
            "timestamp": "2026-01-01T00:00:01.000Z", "message": m}));
        parent = Some(id);
    }
    let bytes = write_lines(&file, &lines);
    let page = tmp.path().join("large.html");
    let agent = tmp.path().join("agent");
    pi(
        &agent,
        tmp.path(),
        &[
            "sessions",
            "export",
            &file.display().to_string(),
            "--format",
            "html",
            "-o",
            &page.display().to_string(),
        ],
    );
    let size = std::fs::metadata(&page).unwrap().len() as f64;
    let ratio = size / bytes.len() as f64;
    eprintln!(
        "large session: {} bytes, page {} bytes, ratio {ratio:.3}",
        bytes.len(),
        size
    );
    assert!(ratio <= 1.2, "page is {ratio:.3}x the session");

    let mut b = Browser::start(&chromium, "large");
    b.open(&page);
    b.assert_clean("large session");
    // Every entry is in the tree, few rows exist; the conversation is rendered in part.
    let status = b.eval("document.getElementById('tree-status').textContent");
    assert!(
        status.as_str().unwrap().contains(&format!("/ {n} entries")),
        "{status}"
    );
    let row_nodes = b
        .eval("document.querySelectorAll('#tree .row').length")
        .as_u64()
        .unwrap();
    assert!(
        row_nodes > 0 && row_nodes < 200,
        "{row_nodes} tree rows in the DOM"
    );
    let cards = b
        .eval("document.querySelectorAll('#messages .entry').length")
        .as_u64()
        .unwrap();
    assert!(cards > 0 && cards < 500, "{cards} entries rendered");
    // Search reaches the far end; choosing the hit shows it.
    b.click("#search");
    b.call(json!({"cmd": "type", "text": format!("marker-{}", n - 1)}));
    b.key("Enter");
    b.wait(&format!(
        "document.getElementById('messages').textContent.indexOf('marker-{}') >= 0",
        n - 1
    ));
    b.shot("01-large-found");
    b.assert_clean("large session search");
}
