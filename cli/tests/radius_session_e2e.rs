//! Radius in a session, end to end against the fake Radius gateway
//! (pi_fake_llm::oauth::FakeAuthServer, whose `/v1/config` names the fake LLM as the
//! gateway's base URL and offers `balanced` and `org-only`):
//!
//! * `/login radius` in the TUI (tmux, gated on `PI_TUI_E2E=1`) does what
//!   `pi auth login radius` does: the account's catalog is kept in models-store.json and
//!   offered by `/model` at once (`org-only` is a model only the gateway names, answered
//!   through the fake LLM speaking `pi-messages`), and Pi's question "Configure Radius MCP in
//!   …?" adds the Radius MCP server to mcp.json once.
//! * At start-up an RPC session starts from the kept catalog and refreshes it from the
//!   gateway in the background, as Pi 1.6.0 does; with `PI_OFFLINE` it keeps the cache.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod pty_common;
mod tmux_common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use pi_fake_llm::oauth::FakeAuthServer;
use pi_fake_llm::{FakeLlm, Script, Turn};
use serde_json::{json, Value};
use tmux_common::{enabled, shell_quote, Tmux};

struct Home {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    agent: PathBuf,
    sessions: PathBuf,
    origin: String,
}

impl Home {
    fn new(auth: &FakeAuthServer) -> Home {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().to_path_buf();
        let agent = home.join("agent");
        let sessions = home.join("sessions");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(&sessions).unwrap();
        Home {
            _tmp: tmp,
            home,
            agent,
            sessions,
            origin: auth.origin(),
        }
    }

    /// The environment every run gets: the fake's origin for Radius's endpoints, and any
    /// other HTTPS request (the Radius MCP server at radius.pi.dev) sent to a closed port.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("HOME", self.home.display().to_string()),
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("PI_CODING_AGENT_DIR", self.agent.display().to_string()),
            ("PI_TEST_OAUTH_ORIGIN", self.origin.clone()),
            ("HTTPS_PROXY", "http://127.0.0.1:9".into()),
            ("NO_PROXY", "127.0.0.1,localhost".into()),
        ]
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pi"));
        cmd.env_clear().envs(self.env()).current_dir(&self.home);
        cmd
    }

    /// `pi auth login radius --no-browser`, the device code approved as a user would.
    fn device_login(&self, auth: &FakeAuthServer) {
        // In a terminal, as Pi requires.
        let mut child =
            pty_common::spawn(
                self.command()
                    .args(["auth", "login", "radius", "--no-browser"]),
            );
        let stderr = BufReader::new(child.stderr.take().unwrap());
        for line in stderr.lines() {
            let line = line.unwrap();
            if let Some(rest) = line.strip_prefix("Enter code ") {
                auth.approve(rest.split_whitespace().next().unwrap());
                break;
            }
        }
        let out = child.finish();
        assert_eq!(out.code, 0, "{}", out.stdout);
    }

    fn read_json(&self, file: &str) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.agent.join(file)).unwrap()).unwrap()
    }

    fn store_ids(&self) -> Vec<String> {
        self.read_json("models-store.json")["radius"]["models"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_string())
            .collect()
    }
}

/// The gateway answers from the fake LLM (`/v1/config` names it as `baseUrl`).
async fn gateway(turns: Vec<Turn>) -> (FakeLlm, FakeAuthServer) {
    let llm = FakeLlm::start(Script::turns(turns)).await.unwrap();
    let proxy = llm.base_url().trim_start_matches("http://").to_string();
    let auth = FakeAuthServer::start(&proxy).await.unwrap();
    (llm, auth)
}

/// The authorize URL shown in the TUI (the pane is wide enough to hold it on one line).
fn authorize_url(screen: &str, origin: &str) -> String {
    let start = format!("{origin}/radius/authorize?");
    let line = screen
        .lines()
        .find(|l| l.contains(&start))
        .unwrap_or_else(|| panic!("no authorize URL on screen:\n{screen}"));
    let from = line.find(&start).unwrap();
    line[from..]
        .split(|c: char| c.is_whitespace() || c == '│')
        .next()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_login_radius_keeps_the_catalog_and_offers_the_mcp_server() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let (llm, auth) = gateway(vec![Turn::text("gateway says hi")]).await;
    let home = Home::new(&auth);
    // The session starts on another provider's model; Radius has no login yet.
    std::fs::write(
        home.agent.join("models.json"),
        json!({"providers": {"fakeoai": {
            "baseUrl": format!("{}/v1", llm.base_url()), "api": "openai-completions",
            "apiKey": "fake-key", "models": [{"id": "fake-model"}]}}})
        .to_string(),
    )
    .unwrap();
    let env: Vec<String> = home
        .env()
        .into_iter()
        .map(|(k, v)| format!("{k}={}", shell_quote(Path::new(&v))))
        .collect();
    let command = format!(
        "env -i {} {} --session-dir {} --model fakeoai/fake-model; echo EXITED-$?; sleep 30",
        env.join(" "),
        shell_quote(Path::new(env!("CARGO_BIN_EXE_pi"))),
        shell_quote(&home.sessions)
    );
    let name = format!("pi-radius-tui-e2e-{}", std::process::id());
    let tmux = Tmux::start(&name, &home.home, &command);
    // Wide enough for the authorize URL on one line.
    let resized = tmux
        .tmux()
        .args(["resize-window", "-t", &name, "-x", "400", "-y", "40"])
        .status()
        .unwrap();
    assert!(resized.success());
    tmux.wait_for("to interrupt");

    tmux.submit("/login radius");
    // Radius takes an account or an API key: Pi asks which first.
    tmux.wait_for("Select authentication method for Radius:");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("/radius/authorize?");
    let url = authorize_url(&screen, &auth.origin());
    let page = reqwest::get(&url).await.unwrap().text().await.unwrap();
    assert!(page.contains("Signed in to Radius"), "{page}");
    tmux.wait_for("Logged in to Radius");
    let screen = tmux.wait_for("Configure Radius MCP in ");
    assert!(
        screen.contains(&format!(
            "Configure Radius MCP in {}?",
            home.agent.join("mcp.json").display()
        )),
        "{screen}"
    );
    // The catalog is kept as `pi auth login radius` keeps it.
    assert_eq!(home.store_ids(), ["balanced", "org-only"]);
    assert_eq!(home.read_json("auth.json")["radius"]["type"], "oauth");
    assert!(!home.agent.join("mcp.json").exists());

    // "Yes" (the first option): the server is added, using the login.
    tmux.keys(&["Enter"]);
    tmux.wait_for("Added MCP server \"radius\"");
    assert_eq!(
        home.read_json("mcp.json"),
        json!({"mcpServers": {"radius": {"url": "https://radius.pi.dev/mcp", "auth": {"provider": "radius"}}}})
    );

    // The gateway-only model is offered now and answers through the gateway.
    tmux.submit("/model radius/org-only");
    tmux.submit("Say hi");
    tmux.wait_for("gateway says hi");
    let req = llm.requests().pop().unwrap();
    assert_eq!(
        (req.path.as_str(), req.api.as_str()),
        ("/messages", "pi-messages")
    );
    assert_eq!(req.body["model"], "org-only");
    assert_eq!(auth.stats().logins["radius"], 1);
}

/// One RPC command and its response (other records before it are skipped).
fn rpc_call(
    stdin: &mut impl Write,
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    id: &str,
    command: Value,
) -> Value {
    let mut command = command;
    command["id"] = json!(id);
    writeln!(stdin, "{command}").unwrap();
    stdin.flush().unwrap();
    loop {
        let line = lines.next().expect("rpc closed").unwrap();
        let record: Value = serde_json::from_str(&line).unwrap();
        if record["type"] == "response" && record["id"] == id {
            return record;
        }
    }
}

fn radius_model_ids(response: &Value) -> Vec<String> {
    response["data"]["models"]
        .as_array()
        .unwrap_or_else(|| panic!("{response}"))
        .iter()
        .filter(|m| m["provider"] == "radius")
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

/// A kept catalog that differs from the gateway's: one model the gateway no longer offers.
fn write_stale_catalog(home: &Home) {
    let mut store = home.read_json("models-store.json");
    let mut stale = store["radius"]["models"][0].clone();
    stale["id"] = json!("retired-model");
    stale["name"] = json!("Retired");
    store["radius"] = json!({"models": [stale], "checkedAt": 1});
    std::fs::write(
        home.agent.join("models-store.json"),
        serde_json::to_string_pretty(&store).unwrap(),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_rpc_session_starts_from_the_kept_catalog_and_refreshes_it_in_the_background() {
    let (_llm, auth) = gateway(vec![]).await;
    let home = Home::new(&auth);
    home.device_login(&auth);
    write_stale_catalog(&home);

    // Offline (PI_OFFLINE): the kept catalog, no refresh.
    let mut child = home
        .command()
        .env("PI_OFFLINE", "1")
        .args(["--mode", "rpc", "--no-session"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let models = rpc_call(
        &mut stdin,
        &mut lines,
        "m1",
        json!({"type": "get_available_models"}),
    );
    assert_eq!(radius_model_ids(&models), ["retired-model"]);
    drop(stdin);
    assert!(child.wait().unwrap().success());
    assert_eq!(home.store_ids(), ["retired-model"]);

    // Online: the session's models become the gateway's, and the cache is rewritten.
    let mut child = home
        .command()
        .args(["--mode", "rpc", "--no-session"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ids = Vec::new();
    for attempt in 0..200 {
        let models = rpc_call(
            &mut stdin,
            &mut lines,
            &format!("m{attempt}"),
            json!({"type": "get_available_models"}),
        );
        ids = radius_model_ids(&models);
        if ids == ["balanced", "org-only"] {
            break;
        }
        // Until the refresh lands, the kept catalog is what the session has.
        assert_eq!(ids, ["retired-model"]);
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(ids, ["balanced", "org-only"]);
    assert_eq!(home.store_ids(), ["balanced", "org-only"]);
    assert!(
        home.read_json("models-store.json")["radius"]["checkedAt"]
            .as_f64()
            .unwrap()
            > 1.0
    );
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// Pi gives the start-up refresh 15 s, then abandons it and keeps the cached catalog; here
/// the limit is shortened (`PI_TEST_CATALOG_REFRESH_LIMIT_MS`) and the gateway answers
/// only after it: the session starts and answers at once, and the late catalog is neither
/// used nor kept.
#[tokio::test(flavor = "multi_thread")]
async fn a_slow_gateway_is_abandoned_at_the_refresh_limit() {
    let (_llm, auth) = gateway(vec![]).await;
    let home = Home::new(&auth);
    home.device_login(&auth);
    write_stale_catalog(&home);
    let before = auth.stats().config_requests;
    auth.set_config_delay(Duration::from_secs(2));

    let mut child = home
        .command()
        .env("PI_TEST_CATALOG_REFRESH_LIMIT_MS", "200")
        .args(["--mode", "rpc", "--no-session"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The session does not wait for the gateway: it answers with the kept catalog.
    let models = rpc_call(
        &mut stdin,
        &mut lines,
        "m0",
        json!({"type": "get_available_models"}),
    );
    assert_eq!(radius_model_ids(&models), ["retired-model"]);
    // The refresh did ask the gateway...
    for _ in 0..200 {
        if auth.stats().config_requests > before {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert_eq!(auth.stats().config_requests, before + 1);
    // ...and once the gateway has answered (late), the answer was dropped: the session and
    // the cache still have the kept catalog.
    std::thread::sleep(Duration::from_secs(3));
    let models = rpc_call(
        &mut stdin,
        &mut lines,
        "m1",
        json!({"type": "get_available_models"}),
    );
    assert_eq!(radius_model_ids(&models), ["retired-model"]);
    assert_eq!(home.store_ids(), ["retired-model"]);
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
