//! `pi sessions query` and `pi sessions export --format parquet` through the real binary, over
//! the real Pi sessions in fixtures/realpi/sessions (Pi's per-cwd layout). The Parquet files
//! are read back by pyarrow (PyPI), installed once into `target/parquet-test-venv` (by
//! `.ci/run`, or by the first test here that needs it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::sync::Mutex;

use assert_cmd::Command;
use serde_json::Value;

const PYARROW_VERSION: &str = "21.0.0";

fn fixture_sessions() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/realpi/sessions")
}

/// An agent dir holding every fixture session under one per-cwd directory.
fn agent_dir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("agent/sessions/--work-fixtures--");
    fs::create_dir_all(&dir).unwrap();
    for item in fs::read_dir(fixture_sessions()).unwrap() {
        let path = item.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
        }
    }
    let agent = tmp.path().join("agent");
    (tmp, agent)
}

fn pi(agent: &Path) -> Command {
    let mut cmd = Command::cargo_bin("pi").unwrap();
    cmd.env("PI_CODING_AGENT_DIR", agent)
        .env_remove("PI_SESSION_STORE")
        .env_remove("PI_CODING_AGENT_SESSION_DIR");
    cmd
}

/// Runs a query with `--json`; the rows as objects.
fn query(agent: &Path, sql: &str) -> Vec<Value> {
    let out = pi(agent)
        .args(["sessions", "query", "--json", sql])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn the_views_add_up_to_the_statistics() {
    let (_tmp, agent) = agent_dir();
    let out = pi(&agent)
        .args(["sessions", "stats", "--json", "--by", "model"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &stats["total"];

    let rows = query(
        &agent,
        "SELECT count(DISTINCT file) AS sessions, count(role) AS messages,
                sum(tool_calls) AS tool_calls, sum(tool_errors) AS tool_errors,
                sum(is_error) AS errors, sum(input_tokens) AS input,
                sum(output_tokens) AS output, sum(cache_read_tokens) AS cache_read,
                sum(cache_write_tokens) AS cache_write, sum(cost) AS cost
         FROM entries",
    );
    let v = &rows[0];
    for (view_key, stats_key) in [
        ("sessions", "sessions"),
        ("messages", "messages"),
        ("tool_calls", "toolCalls"),
        ("tool_errors", "toolErrors"),
        ("errors", "errors"),
        ("input", "input"),
        ("output", "output"),
        ("cache_read", "cacheRead"),
        ("cache_write", "cacheWrite"),
    ] {
        assert_eq!(v[view_key], t[stats_key], "{view_key}");
    }
    assert!((v["cost"].as_f64().unwrap() - t["cost"].as_f64().unwrap()).abs() < 1e-12);
    assert_eq!(t["sessions"], 16, "the fixture history changed");

    // Each view agrees with the others and with the statistics.
    let rows = query(
        &agent,
        "SELECT (SELECT count(*) FROM messages) AS messages,
                (SELECT count(*) FROM tool_calls) AS calls,
                (SELECT count(*) FROM tool_calls WHERE is_error) AS failed,
                (SELECT sum(cost) FROM usage) AS usage_cost,
                (SELECT count(*) FROM sessions) AS sessions",
    );
    assert_eq!(rows[0]["messages"], t["messages"]);
    assert_eq!(rows[0]["calls"], t["toolCalls"]);
    assert_eq!(rows[0]["failed"], t["toolErrors"]);
    assert!((rows[0]["usage_cost"].as_f64().unwrap() - t["cost"].as_f64().unwrap()).abs() < 1e-12);
    let listed = pi(&agent)
        .args(["sessions", "list", "--all", "--json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(rows[0]["sessions"], listed.as_array().unwrap().len());

    // Grouped by model, as `stats --by model` groups.
    let by_model = query(
        &agent,
        "SELECT coalesce(provider || '/' || model, model, '(unknown)') AS key,
                sum(input_tokens) AS input, count(role) AS messages
         FROM entries GROUP BY 1",
    );
    for group in stats["groups"].as_array().unwrap() {
        let row = by_model
            .iter()
            .find(|r| r["key"] == group["key"])
            .unwrap_or_else(|| panic!("no {} in {by_model:?}", group["key"]));
        assert_eq!(row["input"], group["input"]);
        assert_eq!(row["messages"], group["messages"]);
    }
}

#[test]
fn json_csv_and_plain_shapes() {
    let (_tmp, agent) = agent_dir();
    let sql = "SELECT tool, path, is_error, duration_ms FROM tool_calls
               WHERE tool IN ('edit', 'write') ORDER BY ts_ms, call_id";
    let rows = query(&agent, sql);
    assert_eq!(rows.len(), 3);
    let keys: Vec<&String> = rows[0].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["tool", "path", "is_error", "duration_ms"]);
    assert_eq!(rows[0]["tool"], "write");
    assert_eq!(rows[0]["path"], "notes.txt");
    assert!(rows[0]["duration_ms"].as_i64().unwrap() >= 0);
    assert!(rows.iter().any(|r| r["is_error"] == 1));

    let csv = pi(&agent)
        .args(["sessions", "query", "--csv", sql])
        .output()
        .unwrap();
    let csv = String::from_utf8(csv.stdout).unwrap();
    let lines: Vec<&str> = csv.split_terminator("\r\n").collect();
    assert_eq!(lines.len(), 4, "{csv:?}");
    assert_eq!(lines[0], "tool,path,is_error,duration_ms");
    assert!(lines[1].starts_with("write,notes.txt,0,"), "{csv:?}");

    // A value with a comma, a quote and a line break is quoted; control characters go out as
    // they are in CSV and JSON (data formats) and visibly in plain output.
    let odd = r#"SELECT 'a,"b"' || char(10) || 'c' AS x, char(27) || '[2J' AS esc, NULL AS n"#;
    let csv = pi(&agent)
        .args(["sessions", "query", "--csv", odd])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(csv.stdout).unwrap(),
        "x,esc,n\r\n\"a,\"\"b\"\"\nc\",\u{1b}[2J,\r\n"
    );
    let rows = query(&agent, odd);
    assert_eq!(rows[0]["x"], "a,\"b\"\nc");
    assert_eq!(rows[0]["n"], Value::Null);
    let plain = pi(&agent)
        .args(["sessions", "query", odd])
        .output()
        .unwrap();
    let plain = String::from_utf8(plain.stdout).unwrap();
    assert_eq!(plain, "x\tesc\tn\na,\"b\" c\t^[[2J\t\n");

    // No rows: an empty array, a header line.
    assert!(query(&agent, "SELECT * FROM usage WHERE 0").is_empty());
}

#[test]
fn queries_cannot_change_the_index_and_bad_sql_is_one_line() {
    let (_tmp, agent) = agent_dir();
    let before = query(&agent, "SELECT count(*) AS n FROM entries")[0]["n"].clone();
    for (sql, says) in [
        (
            "INSERT INTO tool_uses(sid) VALUES (1)",
            "refused: INSERT into tool_uses",
        ),
        ("DELETE FROM main.entries", "refused: DELETE from entries"),
        ("DROP TABLE main.entries", "refused: changing the schema"),
        ("ATTACH 'other.db' AS o", "refused: ATTACH"),
        ("PRAGMA user_version = 99", "refused: PRAGMA user_version"),
        (
            "SELECT 1; DELETE FROM main.entries",
            "refused: one statement at a time",
        ),
        ("SELEC * FROM usage", "syntax error"),
        ("SELECT nope FROM usage", "no such column: nope"),
        ("SELECT * FROM nowhere", "no such table: nowhere"),
    ] {
        let out = pi(&agent)
            .args(["sessions", "query", sql])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{sql}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{sql}: {stderr}");
        assert!(
            stderr.starts_with("pi sessions query: ") && stderr.contains(says),
            "{sql}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{sql}");
    }
    assert!(!agent.join("other.db").exists());
    assert_eq!(
        query(&agent, "SELECT count(*) AS n FROM entries")[0]["n"],
        before
    );
    let stats = pi(&agent)
        .args(["sessions", "stats", "--json"])
        .output()
        .unwrap();
    assert!(stats.status.success());
}

static VENV: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Python with pyarrow, from `target/parquet-test-venv` (made here when `.ci/run` did not).
fn python() -> PathBuf {
    let mut ready = VENV.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(python) = ready.as_ref() {
        return python.clone();
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/parquet-test-venv");
    let python = venv.join("bin/python");
    let marker = venv.join(format!("installed-pyarrow-{PYARROW_VERSION}"));
    if !marker.exists() {
        let status = StdCommand::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap_or_else(|e| panic!("the Parquet tests read the files with pyarrow and need python3 (with venv): {e}"));
        assert!(
            status.success(),
            "`python3 -m venv {}` failed: install python3-venv",
            venv.display()
        );
        let status = StdCommand::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .arg(format!("pyarrow=={PYARROW_VERSION}"))
            .status()
            .unwrap();
        assert!(
            status.success(),
            "pip install pyarrow=={PYARROW_VERSION} failed (network? PyPI?)"
        );
        fs::write(&marker, "").unwrap();
    }
    *ready = Some(python.clone());
    python
}

/// Reads each Parquet file with pyarrow: rows, column names and types, and sums.
const READ_PY: &str = r#"
import json, sys
import pyarrow.compute as pc
import pyarrow.parquet as pq
out = {}
for view in ["sessions", "entries", "messages", "usage", "tool_calls"]:
    t = pq.read_table(f"{sys.argv[1]}/{view}.parquet")
    info = {"rows": t.num_rows, "columns": [[f.name, str(f.type)] for f in t.schema]}
    for name in ["cost", "input_tokens", "total_tokens", "is_error", "duration_ms"]:
        if name in t.column_names:
            v = pc.sum(t[name]).as_py()
            info[name] = v
    out[view] = info
out["first_session"] = pq.read_table(f"{sys.argv[1]}/sessions.parquet").sort_by("session_id").slice(0, 1).to_pylist()[0]
print(json.dumps(out))
"#;

#[test]
fn parquet_files_read_back_with_pyarrow_equal_the_views() {
    let (tmp, agent) = agent_dir();
    let dir = tmp.path().join("export");
    let out = pi(&agent)
        .args(["sessions", "export", "--format", "parquet", "-o"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 5, "{stdout}");

    let script = tmp.path().join("read.py");
    fs::write(&script, READ_PY).unwrap();
    let read = StdCommand::new(python())
        .arg(&script)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    let parquet: Value = serde_json::from_slice(&read.stdout).unwrap();

    for view in ["sessions", "entries", "messages", "usage", "tool_calls"] {
        let n = &query(&agent, &format!("SELECT count(*) AS n FROM {view}"))[0]["n"];
        assert_eq!(&parquet[view]["rows"], n, "{view}");
        assert!(
            stdout.contains(&format!("{view}.parquet ({n} rows)")),
            "{stdout}"
        );
    }
    let sums = &query(
        &agent,
        "SELECT (SELECT sum(cost) FROM entries) AS cost,
                (SELECT sum(input_tokens) FROM entries) AS input,
                (SELECT sum(total_tokens) FROM usage) AS usage_tokens,
                (SELECT sum(is_error) FROM tool_calls) AS failed,
                (SELECT sum(duration_ms) FROM tool_calls) AS duration",
    )[0];
    let close = |a: &Value, b: &Value| (a.as_f64().unwrap() - b.as_f64().unwrap()).abs() < 1e-12;
    assert!(close(&parquet["entries"]["cost"], &sums["cost"]));
    assert_eq!(parquet["entries"]["input_tokens"], sums["input"]);
    assert_eq!(parquet["usage"]["total_tokens"], sums["usage_tokens"]);
    assert_eq!(parquet["tool_calls"]["is_error"], sums["failed"]);
    assert_eq!(parquet["tool_calls"]["duration_ms"], sums["duration"]);
    // Types: text as strings, counts as int64, cost as double, flags as bool.
    let types: Vec<(String, String)> =
        serde_json::from_value(parquet["entries"]["columns"].clone()).unwrap();
    for (name, ty) in [
        ("session_id", "string"),
        ("ts_ms", "int64"),
        ("cost", "double"),
        ("is_error", "bool"),
    ] {
        assert!(
            types.contains(&(name.into(), ty.into())),
            "{name}: {types:?}"
        );
    }
    // A whole row equals the view's.
    let first = &query(&agent, "SELECT * FROM sessions ORDER BY session_id LIMIT 1")[0];
    assert_eq!(&parquet["first_session"], first);

    // The files are the owner's only, like the index.
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(dir.join("entries.parquet"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // A session argument or no directory is a clear error.
    let out = pi(&agent)
        .args(["sessions", "export", "--format", "parquet"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-o DIR"));
}
