#![allow(clippy::unwrap_used, clippy::expect_used)]
//! OAuth for streamable HTTP MCP servers, end to end: our `pi` binary against an
//! OAuth-protected FastMCP server whose authorization server is the official Python SDK's
//! (`mcp.server.auth`: metadata, dynamic client registration, authorize and token endpoints
//! with PKCE and redirect URI checks), in `cli/tests/mcp_common/oauth_server.py`, started here
//! on 127.0.0.1. The "browser" is an `xdg-open` first on `PATH` that records the URL it was
//! given and follows it with an HTTP client (httpx from the SDK's venv), which the SDK's
//! authorize endpoint redirects to pi's loopback callback, as a user approving would be.
//!
//! Covered: needs-sign-in in `pi mcp list` (exit 1) and once at session start; `pi mcp login`
//! (URL printed and opened, discovery, registration, PKCE, code exchange, tokens stored 0600
//! and never printed); a session calling a tool of the protected server through the fake LLM;
//! a refresh before expiry and a refresh after a 401, each once, with the rotated refresh
//! token stored; `pi mcp logout` and needs-sign-in again; login/logout errors.

mod mcp_common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_common::*;
use serde_json::{json, Value};

const SERVER_PY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/mcp_common/oauth_server.py"
);

/// Follows a URL and its redirects like a browser, printing the final status and page.
const BROWSER_PY: &str = r#"
import sys, httpx
r = httpx.get(sys.argv[1], follow_redirects=True, timeout=30)
print(r.status_code)
print(r.text)
"#;

/// The protected server; killed when dropped.
struct OAuthServer {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl OAuthServer {
    fn start(dir: &Path) -> OAuthServer {
        let port_file = dir.join("oauth-port");
        let log = dir.join("oauth-log.jsonl");
        let stderr_path = dir.join("oauth-stderr.txt");
        let mut child = Command::new(python())
            .arg(SERVER_PY)
            .arg(&port_file)
            .arg(&log)
            .arg("3600")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .expect("start the Python OAuth MCP server");
        let started = Instant::now();
        let port = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                break text.trim().parse().unwrap();
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!(
                    "the OAuth MCP server exited before listening: {status}\n{}",
                    std::fs::read_to_string(&stderr_path).unwrap_or_default()
                );
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the OAuth MCP server did not start listening within 60 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        OAuthServer { child, port, log }
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn url(&self) -> String {
        format!("{}/mcp", self.base())
    }

    /// The registrations and grants the server logged.
    fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn grants(&self, grant: &str) -> usize {
        self.events()
            .iter()
            .filter(|e| e["event"] == "token" && e["grant"] == grant)
            .count()
    }

    /// Makes the server forget every access token: the next request is a 401.
    fn expire_access_tokens(&self) {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            stream,
            "POST /test/expire-access-tokens HTTP/1.1\r\nhost: 127.0.0.1:{}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            self.port
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory with an `xdg-open` that records its URL in `opened-url` and follows it with
/// httpx, writing the status and page to `browser-page`.
fn fake_browser(dir: &Path) -> PathBuf {
    let bin = dir.join("browser-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let browser_py = dir.join("browser.py");
    std::fs::write(&browser_py, BROWSER_PY).unwrap();
    let script = bin.join("xdg-open");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s' \"$1\" > '{dir}/opened-url'\n'{python}' '{browser}' \"$1\" > '{dir}/browser-page.tmp' 2>&1 && mv '{dir}/browser-page.tmp' '{dir}/browser-page'\n",
            dir = dir.display(),
            python = python().display(),
            browser = browser_py.display(),
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// Waits (up to 60 s) for the fake browser to finish and returns its page.
fn browser_page(dir: &Path) -> String {
    let started = Instant::now();
    loop {
        if let Ok(page) = std::fs::read_to_string(dir.join("browser-page")) {
            return page;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the fake browser did not finish"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn stored(s: &Setup) -> Value {
    serde_json::from_str(&std::fs::read_to_string(s.agent.join("mcp-auth.json")).unwrap()).unwrap()
}

fn stored_state(s: &Setup, server: &OAuthServer) -> Value {
    stored(s)[format!("mcp__protected|{}", server.url())].clone()
}

fn login(s: &Setup) -> std::process::Output {
    let bin = fake_browser(s.tmp.path());
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    s.pi_with_env(&["mcp", "login", "protected"], &[("PATH", &path)])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_use_refresh_and_sign_out_against_a_real_authorization_server() {
    let s = Setup::new(Some(json!({"turns": [
        {"text": "Not signed in yet."},
        {"text": "Asking.", "tool_calls": [tc("mcp__protected__whoami", json!({}))]},
        {"text": "Done."},
    ]})))
    .await;
    let server = OAuthServer::start(s.tmp.path());
    let url = server.url();
    s.write_mcp_json(json!({"protected": {"url": url, "exposure": "direct"}}));

    // Not signed in: list says so and fails.
    let out = s.pi(&["mcp", "list"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert_eq!(
        stdout,
        format!(
            "protected: needs sign-in (direct, global)\n  {url}\n  sign in with: pi mcp login protected\n"
        )
    );
    let out = s.pi(&["mcp", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed["servers"][0]["state"], "needs-auth");
    assert!(listed["servers"][0].get("error").is_none(), "{listed}");
    // A session starts anyway and says so once.
    let out = s.prompt(&["--no-session"], "Hi.");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stdout, "Not signed in yet.\n");
    let warning = "MCP server \"protected\" needs sign-in: run pi mcp login protected";
    assert_eq!(stderr.matches(warning).count(), 1, "{stderr}");
    assert!(!s.agent.join("mcp-auth.json").exists());

    // Sign in: the URL is printed and opened; the browser's redirect completes it.
    let out = login(&s);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let opened = std::fs::read_to_string(s.tmp.path().join("opened-url")).unwrap();
    assert_eq!(
        stdout,
        format!(
            "Sign in to MCP server \"protected\" in your browser:\n{opened}\nSigned in to MCP server \"protected\" (1 tools).\n"
        )
    );
    let authorize = Parsed::new(&opened);
    assert_eq!(authorize.path, "/authorize");
    let q = |k: &str| authorize.get(k);
    assert_eq!(q("response_type").as_deref(), Some("code"));
    assert_eq!(q("code_challenge_method").as_deref(), Some("S256"));
    assert_eq!(q("scope").as_deref(), Some("mcp"));
    assert_eq!(q("resource").as_deref(), Some(url.as_str()));
    let redirect = q("redirect_uri").unwrap();
    assert!(
        redirect.starts_with("http://127.0.0.1:") && redirect.ends_with("/callback"),
        "{redirect}"
    );
    let page = browser_page(s.tmp.path());
    assert!(
        page.starts_with("200\n") && page.contains("Authentication successful"),
        "{page}"
    );
    // The SDK's registration saw a public native client named pi with that redirect URI.
    let events = server.events();
    let registered = events.iter().find(|e| e["event"] == "register").unwrap();
    assert_eq!(registered["client_name"], "pi");
    assert_eq!(registered["redirect_uris"], json!([redirect]));
    assert_eq!(registered["token_endpoint_auth_method"], "none");
    assert_eq!(server.grants("authorization_code"), 1);

    // Stored privately, never printed.
    let file = s.agent.join("mcp-auth.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let state = stored_state(&s, &server);
    let access = state["tokens"]["access_token"]
        .as_str()
        .unwrap()
        .to_string();
    let refresh = state["tokens"]["refresh_token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(state["serverUrl"], url);
    assert_eq!(state["tokens"]["scope"], "mcp");
    assert!(state["tokensExpireAt"].as_f64().is_some());
    for secret in [&access, &refresh] {
        assert!(!stdout.contains(secret.as_str()) && !stderr.contains(secret.as_str()));
    }

    // Signed in: list connects, a session calls the protected tool.
    let out = s.pi(&["mcp", "list"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stdout.starts_with("protected: connected, 1 tool (direct, global)\n"),
        "{stdout}"
    );
    let out = s.prompt(&[], "Who am I?");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(stdout, "Done.\n");
    assert!(!stderr.contains("needs sign-in"), "{stderr}");
    assert_eq!(
        s.tool_results(),
        [(
            "mcp__protected__whoami".to_string(),
            false,
            "signed-in user of the protected server".to_string()
        )]
    );
    for secret in [&access, &refresh] {
        assert!(!stdout.contains(secret.as_str()) && !stderr.contains(secret.as_str()));
    }
    assert_eq!(server.grants("refresh_token"), 0);

    // An access token about to expire is refreshed before it is sent, once.
    let mut file_json = stored(&s);
    let key = format!("mcp__protected|{url}");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64;
    file_json[&key]["tokensExpireAt"] = json!(now_ms + 5_000.0);
    std::fs::write(&file, serde_json::to_string_pretty(&file_json).unwrap()).unwrap();
    let out = s.pi(&["mcp", "list"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out).0);
    assert_eq!(server.grants("refresh_token"), 1);
    let state = stored_state(&s, &server);
    let access2 = state["tokens"]["access_token"]
        .as_str()
        .unwrap()
        .to_string();
    let refresh2 = state["tokens"]["refresh_token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(access2, access);
    // The server rotated the refresh token; the new one is kept.
    assert_ne!(refresh2, refresh);
    assert!(state["tokensExpireAt"].as_f64().unwrap() > now_ms + 3_000_000.0);

    // An access token the server rejects is refreshed after the 401, once, and the request
    // goes through.
    server.expire_access_tokens();
    let out = s.pi(&["mcp", "list"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("protected: connected, 1 tool"), "{stdout}");
    assert_eq!(server.grants("refresh_token"), 2);
    let access3 = stored_state(&s, &server)["tokens"]["access_token"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(access3, access2);
    assert_eq!(server.grants("authorization_code"), 1);

    // Signing in again while signed in does nothing.
    let out = s.pi(&["mcp", "login", "protected"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert_eq!(
        stdout,
        "Already signed in to MCP server \"protected\" (1 tools).\n"
    );

    // Sign out: the credentials are gone and the server needs sign-in again.
    let out = s.pi(&["mcp", "logout", "protected"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out).0, "Signed out of MCP server \"protected\".\n");
    assert!(stored(&s).get(&key).is_none());
    let out = s.pi(&["mcp", "logout", "protected"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out).0,
        "No stored credentials for MCP server \"protected\".\n"
    );
    let out = s.pi(&["mcp", "list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out)
            .0
            .starts_with("protected: needs sign-in (direct, global)\n"),
        "{}",
        text(&out).0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_mcp_login_and_logout_over_rpc_sign_in_and_reconnect_the_session() {
    let s = Setup::new(None).await;
    let server = OAuthServer::start(s.tmp.path());
    s.write_mcp_json(json!({"protected": {"url": server.url(), "exposure": "direct"}}));
    let bin = fake_browser(s.tmp.path());
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let prompt = |text: &str| json!({"type": "prompt", "message": text});
    // Without a name, the only OAuth server is the one signed in to.
    let records = rpc_session_with_env(
        &s,
        &[
            prompt("/mcp login"),
            prompt("/mcp"),
            prompt("/mcp logout protected"),
            prompt("/mcp"),
        ],
        &[("PATH", &path)],
    );
    let notices = notices(&records);
    let opened = std::fs::read_to_string(s.tmp.path().join("opened-url")).unwrap();
    let page = browser_page(s.tmp.path());
    assert!(page.contains("Authentication successful"), "{page}");
    // The start-up report names the server that needs sign-in (it may come at any point).
    let (reports, answers): (Vec<_>, Vec<_>) = notices.iter().partition(|(k, _)| k == "warning");
    assert_eq!(
        reports,
        [&(
            "warning".to_string(),
            "MCP servers need attention:\n  protected: needs-auth\nRun /mcp to fix.".to_string()
        )]
    );
    let answers: Vec<(&str, &str)> = answers
        .iter()
        .map(|(k, m)| (k.as_str(), m.as_str()))
        .collect();
    let url_notice = format!("Sign in to the MCP server in your browser:\n{opened}");
    assert_eq!(
        answers,
        [
            ("info", url_notice.as_str()),
            ("info", "Signed in to MCP server \"protected\" (1 tools)."),
            ("info", "protected: connected, 1 tools (direct)"),
            ("info", "Signed out of MCP server \"protected\"."),
            ("info", "protected: needs-auth (direct)"),
        ],
        "{notices:#?}"
    );
    assert_eq!(server.grants("authorization_code"), 1);
    // Signing out removed the stored tokens.
    assert!(stored_state(&s, &server).is_null(), "{}", stored(&s));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_and_logout_name_what_is_wrong() {
    let s = Setup::new(None).await;
    s.write_mcp_json(json!({
        "local-tool": {"command": "true"},
        "keyed": {"url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer x"}},
        "down": {"url": "http://127.0.0.1:1/mcp"}
    }));
    let cases: [(&[&str], &str); 6] = [
        (
            &["mcp", "login", "keyd"],
            "No MCP server named \"keyd\". Did you mean \"keyed\"? Configured: local-tool, keyed, down.\n",
        ),
        (
            &["mcp", "logout", "local-tool"],
            "MCP server \"local-tool\" does not use OAuth. Only HTTP servers without an Authorization header do.\n",
        ),
        (
            &["mcp", "login", "keyed"],
            "MCP server \"keyed\" does not use OAuth. Only HTTP servers without an Authorization header do.\n",
        ),
        (
            &["mcp", "login", "down", "--timeout", "0"],
            "--timeout must be a positive number of seconds.\n",
        ),
        (
            &["mcp", "logout"],
            "Usage: pi mcp logout <server> [-l]\nUse \"pi mcp --help\" for usage.\n",
        ),
        (
            &["mcp", "logout", "down", "-l"],
            "",
        ),
    ];
    for (args, expected) in cases {
        let out = s.pi(args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stdout}{stderr}");
        if expected.is_empty() {
            assert!(
                stderr.starts_with("MCP server \"down\" is defined in ")
                    && stderr.ends_with(", not in the project; omit --local.\n"),
                "{stderr}"
            );
        } else {
            assert_eq!(stderr, expected, "{args:?}");
        }
    }
    // A server that cannot be reached is not a sign-in problem.
    let out = s.pi(&["mcp", "login", "down"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stderr.starts_with("MCP server \"down\" failed to connect: fetch failed"),
        "{stderr}"
    );
}

/// The path and decoded query parameters of a URL.
struct Parsed {
    path: String,
    query: Vec<(String, String)>,
}

impl Parsed {
    fn new(url: &str) -> Parsed {
        let after_scheme = url.split_once("://").map_or(url, |(_, r)| r);
        let from_path = &after_scheme[after_scheme.find('/').unwrap_or(after_scheme.len())..];
        let (path, query) = from_path.split_once('?').unwrap_or((from_path, ""));
        let decode = |s: &str| {
            let bytes = s.replace('+', " ").into_bytes();
            let mut out = Vec::new();
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i] == b'%' && i + 2 < bytes.len() {
                    let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                    out.push(u8::from_str_radix(hex, 16).unwrap());
                    i += 3;
                } else {
                    out.push(bytes[i]);
                    i += 1;
                }
            }
            String::from_utf8(out).unwrap()
        };
        Parsed {
            path: path.to_string(),
            query: query
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|p| {
                    let (k, v) = p.split_once('=').unwrap_or((p, ""));
                    (decode(k), decode(v))
                })
                .collect(),
        }
    }

    fn get(&self, key: &str) -> Option<String> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }
}
