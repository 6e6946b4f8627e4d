#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Signing in to an OAuth MCP server from `/mcp` in the TUI with a pasted redirect URL, for
//! a browser that cannot reach this machine: the real `pi` binary in tmux (gated on
//! `PI_TUI_E2E=1`) against the Python MCP SDK's authorization server
//! (`mcp_common/oauth_server.py`, which approves at once). The "browser" only records the
//! URL it is given; the test follows it without the redirect and submits the URL it was
//! redirected to in the editor, which completes the sign-in (the loopback callback is
//! never called).

mod mcp_common;
mod tmux_common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcp_common::*;
use serde_json::{json, Value};
use tmux_common::{enabled, shell_quote, Tmux};

const SERVER_PY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/mcp_common/oauth_server.py"
);

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
        let child = Command::new(python())
            .arg(SERVER_PY)
            .arg(&port_file)
            .arg(&log)
            .arg("3600")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the Python OAuth MCP server");
        let started = Instant::now();
        let port = loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                break text.trim().parse().unwrap();
            }
            assert!(started.elapsed() < Duration::from_secs(60), "no port");
            std::thread::sleep(Duration::from_millis(50));
        };
        OAuthServer { child, port, log }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn authorization_code_grants(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["event"] == "token" && e["grant"] == "authorization_code")
            .count()
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An `xdg-open` that only writes its URL to `<dir>/opened-url`: a browser elsewhere.
fn recording_browser(dir: &Path) -> PathBuf {
    let bin = dir.join("browser-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("xdg-open");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s' \"$1\" > '{0}/opened-url.tmp' && mv '{0}/opened-url.tmp' '{0}/opened-url'\n",
            dir.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_mcp_sign_in_completes_with_a_redirect_url_submitted_in_the_editor() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let s = Setup::new(Some(json!({"turns": [{"text": "Answer one."}]}))).await;
    let server = OAuthServer::start(s.tmp.path());
    s.write_mcp_json(json!({"protected": {"url": server.url(), "exposure": "direct"}}));
    let bin = recording_browser(s.tmp.path());
    let command = format!(
        "env PATH={}:\"$PATH\" PI_CODING_AGENT_DIR={} {} --session-dir {} --model fakeoai/fake-model; echo EXITED-$?; sleep 30",
        shell_quote(&bin),
        shell_quote(&s.agent),
        shell_quote(Path::new(pi_bin())),
        shell_quote(&s.sessions)
    );
    let name = format!("pi-mcp-oauth-tui-e2e-{}", std::process::id());
    let tmux = Tmux::start(&name, &s.cwd, &command);
    tmux.wait_for("to interrupt");

    tmux.keys(&["/mcp", "Enter"]);
    tmux.wait_for("protected  needs");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Sign in");
    tmux.keys(&["Enter"]);
    tmux.wait_for("paste the URL it was redirected to");
    let opened = s.tmp.path().join("opened-url");
    let started = Instant::now();
    while !opened.exists() {
        assert!(started.elapsed() < Duration::from_secs(20), "no browser");
        std::thread::sleep(Duration::from_millis(50));
    }
    let authorize = std::fs::read_to_string(&opened).unwrap();
    // The authorization server approves at once and redirects to the loopback callback,
    // which this "browser" cannot reach: its URL is what the user copies.
    let resp = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(&authorize)
        .send()
        .await
        .unwrap();
    let location = resp.headers()["location"].to_str().unwrap().to_string();
    assert!(location.starts_with("http://127.0.0.1:"), "{location}");
    tmux.submit(&location);
    tmux.wait_for("Redirect URL received");
    tmux.wait_for("Signed in to MCP server \"protected\"");
    assert_eq!(server.authorization_code_grants(), 1);
    // The URL was not sent to the model.
    let requests = s.requests();
    assert!(
        requests.iter().all(|r| !r.to_string().contains("code=")),
        "{requests:?}"
    );
}
