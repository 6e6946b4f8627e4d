//! Subscription logins end to end: `pi auth login` against the fake authorization server
//! (pi_fake_llm::oauth) on 127.0.0.1, the test playing the browser (following the
//! authorize URL to Pi's loopback callback) or the user approving a device code; then print
//! mode prompts through the fake LLM carry the token and the provider's OAuth headers, an
//! expiring token is refreshed exactly once, and `pi auth logout` removes it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod pty_common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use pi_fake_llm::oauth::{FakeAuthServer, CHATGPT_ACCOUNT_ID};
use pi_fake_llm::{FakeLlm, Script, Turn};
use pty_common::PtyChild;
use serde_json::Value;

/// OpenAI's sign-ins share the loopback port 1455 (Codex and ChatGPT); their browser logins
/// take turns.
static PORT_1455: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Home {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    agent: PathBuf,
    origin: String,
    /// Set after the defaults, so an entry can replace one.
    extra_env: Vec<(String, String)>,
}

impl Home {
    fn new(auth: &FakeAuthServer, models_json: &str) -> Home {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().to_path_buf();
        let agent = home.join("agent");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::write(agent.join("models.json"), models_json).unwrap();
        Home {
            _tmp: tmp,
            home,
            agent,
            origin: auth.origin(),
            extra_env: Vec::new(),
        }
    }

    fn command(&self) -> StdCommand {
        let mut cmd = StdCommand::new(env!("CARGO_BIN_EXE_pi"));
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .env("PI_TEST_OAUTH_ORIGIN", &self.origin)
            .envs(self.extra_env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.home);
        cmd
    }

    /// Starts `pi auth login <args>` in a terminal (Pi requires one); stderr lines arrive
    /// on the returned channel.
    fn start_login(&self, args: &[&str]) -> (PtyChild, mpsc::Receiver<String>) {
        let mut child = pty_common::spawn(self.command().arg("auth").arg("login").args(args));
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        (child, rx)
    }

    fn auth_json(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.agent.join("auth.json")).unwrap())
            .unwrap()
    }

    /// The access token stored for `provider`.
    fn access(&self, provider: &str) -> String {
        self.auth_json()[provider]["access"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// `pi auth logout` succeeds and the provider's credential is gone.
    fn assert_logged_out(&self, provider: &str) {
        assert!(self.logout(provider).status.success());
        assert!(self.auth_json().get(provider).is_none());
    }

    fn set_expired(&self, provider: &str) {
        let mut auth = self.auth_json();
        auth[provider]["expires"] = serde_json::json!(0);
        std::fs::write(
            self.agent.join("auth.json"),
            serde_json::to_string_pretty(&auth).unwrap(),
        )
        .unwrap();
    }

    fn prompt(&self, model: &str) -> std::process::Output {
        self.command()
            .args(["--no-session", "--model", model, "-p", "Say hello"])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// `pi auth <args>`: exit code, stdout, stderr.
    fn auth(&self, args: &[&str]) -> (i32, String, String) {
        let out = self
            .command()
            .arg("auth")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }

    fn logout(&self, provider: &str) -> std::process::Output {
        self.command()
            .args(["auth", "logout", provider])
            .output()
            .unwrap()
    }
}

/// Waits for a stderr line satisfying `pick` (the lines before it are collected too).
fn wait_line(
    rx: &mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    pick: impl Fn(&str) -> bool,
) -> String {
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no matching line; stderr so far: {seen:#?}"));
        seen.push(line.clone());
        if pick(&line) {
            return line;
        }
    }
}

/// Finishes a login: the exit status, its stdout and all stderr.
fn finish(
    child: PtyChild,
    rx: mpsc::Receiver<String>,
    mut seen: Vec<String>,
) -> (bool, String, String) {
    let out = child.finish();
    seen.extend(rx.iter());
    (out.code == 0, out.stdout, seen.join("\n"))
}

/// The browser: follows the authorize URL through the fake's redirect to Pi's callback.
async fn browse(url: &str) -> String {
    let resp = reqwest::Client::new().get(url).send().await.unwrap();
    assert!(
        resp.status().is_success(),
        "callback answered {}",
        resp.status()
    );
    resp.text().await.unwrap()
}

/// The "browser" on another machine: the authorize redirect is not followed, the URL it
/// points at is pasted into the running login, which is then finished.
async fn login_by_pasting_the_redirect(home: &Home, provider: &str) -> (bool, String, String) {
    let (mut child, rx) = home.start_login(&[provider]);
    let mut seen = Vec::new();
    let url = wait_line(&rx, &mut seen, |l| l.starts_with("http"));
    let resp = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(&url)
        .send()
        .await
        .unwrap();
    let location = resp.headers()["location"].to_str().unwrap().to_string();
    writeln!(child.stdin.as_mut().unwrap(), "{location}").unwrap();
    finish(child, rx, seen)
}

fn assert_private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", path.display());
}

/// No token the fake issued appears in `text`.
fn assert_no_secrets(auth: &FakeAuthServer, text: &str) {
    for token in auth.stats().issued {
        assert!(!text.contains(&token), "a token leaked: {text}");
    }
}

fn ok_output(auth: &FakeAuthServer, out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "pi failed: {stderr}");
    assert_no_secrets(auth, &stdout);
    assert_no_secrets(auth, &stderr);
    stdout
}

fn assert_bearer(req: &pi_fake_llm::RecordedRequest, token: &str) {
    assert_eq!(header(req, "authorization"), format!("Bearer {token}"));
}

fn assert_no_rejections(auth: &FakeAuthServer) {
    let rejected = auth.stats().rejected;
    assert!(rejected.is_empty(), "{rejected:?}");
}

/// Expires `provider`'s token; the next prompt refreshes it once (counted by the fake as
/// `stats_key`), answers `answer` and sends the new token. Returns the new token.
fn prompt_refreshes_once(
    auth: &FakeAuthServer,
    home: &Home,
    llm: &FakeLlm,
    (provider, model, stats_key): (&str, &str, &str),
    answer: &str,
    old_access: &str,
) -> String {
    home.set_expired(provider);
    assert_eq!(ok_output(auth, &home.prompt(model)), answer);
    assert_eq!(auth.stats().refreshes.get(stats_key), Some(&1));
    let refreshed = home.access(provider);
    assert_ne!(refreshed, old_access);
    assert_bearer(llm.requests().last().unwrap(), &refreshed);
    refreshed
}

fn header<'a>(req: &'a pi_fake_llm::RecordedRequest, name: &str) -> &'a str {
    req.headers
        .get(&name.to_ascii_lowercase())
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no {name} header in {:?}", req.headers))
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_browser_login_headers_refresh_and_logout() {
    let llm = FakeLlm::start(Script::turns(vec![
        Turn::text("one"),
        Turn::text("two"),
        Turn::text("three"),
    ]))
    .await
    .unwrap();
    let auth = FakeAuthServer::start("127.0.0.1:1").await.unwrap();
    let home = Home::new(
        &auth,
        &format!(
            r#"{{"providers": {{"anthropic": {{"baseUrl": "{}"}}}}}}"#,
            llm.base_url()
        ),
    );

    let (child, rx) = home.start_login(&["anthropic"]);
    let mut seen = Vec::new();
    wait_line(&rx, &mut seen, |l| l.starts_with("Open this URL"));
    let url = wait_line(&rx, &mut seen, |l| l.starts_with("http"));
    let page = browse(&url).await;
    assert!(page.contains("Signed in to Anthropic"), "{page}");
    let (ok, stdout, stderr) = finish(child, rx, seen);
    assert!(ok, "login failed: {stderr}");
    assert!(
        stdout.contains("Logged in to Anthropic (Claude Pro/Max)"),
        "{stdout}"
    );
    assert_no_secrets(&auth, &stdout);
    assert_no_secrets(&auth, &stderr);

    // The authorize request as Pi builds it.
    let authz = &auth.stats().authorizations[0];
    assert_eq!(authz["code"], "true");
    assert_eq!(authz["code_challenge_method"], "S256");
    assert_eq!(authz["state"].as_str().unwrap().len(), 43);
    assert!(authz["redirect_uri"]
        .as_str()
        .unwrap()
        .starts_with("http://localhost:"));
    assert!(authz["scope"].as_str().unwrap().contains("user:inference"));
    assert_eq!(auth.stats().logins["anthropic"], 1);

    let auth_path = home.agent.join("auth.json");
    assert_private(&auth_path);
    let stored = home.auth_json();
    assert_eq!(stored["anthropic"]["type"], "oauth");
    let access = stored["anthropic"]["access"].as_str().unwrap().to_string();
    assert!(access.contains("sk-ant-oat"));
    assert!(stored["anthropic"]["expires"].as_f64().unwrap() > 0.0);

    // A prompt carries the token as Claude Code would send it.
    assert_eq!(
        ok_output(&auth, &home.prompt("anthropic/claude-haiku-4-5")),
        "one\n"
    );
    let req = &llm.requests()[0];
    assert_bearer(req, &access);
    assert!(!req.headers.contains_key("x-api-key"));
    assert!(header(req, "anthropic-beta").starts_with("claude-code-20250219,oauth-2025-04-20"));
    assert_eq!(header(req, "user-agent"), "claude-cli/2.1.322");
    assert_eq!(header(req, "x-app"), "cli");
    assert_eq!(
        req.body["system"][0]["text"],
        "You are Claude Code, Anthropic's official CLI for Claude."
    );
    let tools: Vec<&str> = req.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"Read") && tools.contains(&"Bash"),
        "{tools:?}"
    );

    // An expired token is refreshed once, before the request, and the new one is stored.
    let refreshed = prompt_refreshes_once(
        &auth,
        &home,
        &llm,
        ("anthropic", "anthropic/claude-haiku-4-5", "anthropic"),
        "two\n",
        &access,
    );
    assert_eq!(
        ok_output(&auth, &home.prompt("anthropic/claude-haiku-4-5")),
        "three\n"
    );
    assert_eq!(auth.stats().refreshes.get("anthropic"), Some(&1));
    assert_no_rejections(&auth);
    assert_bearer(&llm.requests()[2], &refreshed);
    assert_private(&auth_path);
    assert!(!home.agent.join("auth.json.lock").exists());

    // Logout removes it; a prompt then has no credentials.
    let out = home.logout("anthropic");
    assert!(out.status.success());
    assert!(home.auth_json().get("anthropic").is_none());
    let out = home.prompt("anthropic/claude-haiku-4-5");
    assert!(!out.status.success());
    assert_eq!(llm.requests().len(), 3);
    // Logging out again is not an error (Pi exits 0).
    assert!(home.logout("anthropic").status.success());
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_pasted_redirect_url_when_the_browser_is_elsewhere() {
    let auth = FakeAuthServer::start("127.0.0.1:1").await.unwrap();
    let home = Home::new(&auth, "{}");
    let (ok, stdout, stderr) = login_by_pasting_the_redirect(&home, "anthropic").await;
    assert!(ok, "{stderr}");
    assert!(stdout.contains("Logged in"), "{stdout}");
    assert_eq!(home.auth_json()["anthropic"]["type"], "oauth");
    assert_no_secrets(&auth, &stderr);
}

#[tokio::test(flavor = "multi_thread")]
async fn openai_codex_logins_and_codex_responses_requests() {
    let llm = FakeLlm::start(Script::turns(vec![
        Turn::text("codex one"),
        Turn::text("codex two"),
    ]))
    .await
    .unwrap();
    let auth = FakeAuthServer::start("127.0.0.1:1").await.unwrap();
    let home = Home::new(
        &auth,
        &format!(
            r#"{{"providers": {{"openai-codex": {{"baseUrl": "{}"}}}}}}"#,
            llm.base_url()
        ),
    );

    // Device code login (headless): the user approves the code shown.
    let (child, rx) = home.start_login(&["openai-codex", "--no-browser"]);
    let mut seen = Vec::new();
    let line = wait_line(&rx, &mut seen, |l| l.starts_with("Enter code "));
    let code = line.split_whitespace().nth(2).unwrap().to_string();
    auth.approve(&code);
    let (ok, stdout, stderr) = finish(child, rx, seen);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("Logged in to OpenAI (ChatGPT Plus/Pro)"),
        "{stdout}"
    );
    assert_no_secrets(&auth, &format!("{stdout}{stderr}"));
    assert_private(&home.agent.join("auth.json"));
    let stored = home.auth_json();
    assert_eq!(stored["openai-codex"]["accountId"], CHATGPT_ACCOUNT_ID);
    let access = stored["openai-codex"]["access"]
        .as_str()
        .unwrap()
        .to_string();

    // The Codex backend request.
    assert_eq!(
        ok_output(&auth, &home.prompt("openai-codex/gpt-5.6-luna")),
        "codex one\n"
    );
    let req = &llm.requests()[0];
    assert_eq!(req.path, "/codex/responses");
    assert_bearer(req, &access);
    assert_eq!(header(req, "chatgpt-account-id"), CHATGPT_ACCOUNT_ID);
    assert_eq!(header(req, "originator"), "pi");
    assert_eq!(header(req, "openai-beta"), "responses=experimental");
    assert_eq!(req.body["store"], false);
    assert_eq!(req.body["text"]["verbosity"], "low");
    assert_eq!(req.body["parallel_tool_calls"], true);

    // Refresh once.
    prompt_refreshes_once(
        &auth,
        &home,
        &llm,
        ("openai-codex", "openai-codex/gpt-5.6-luna", "openai"),
        "codex two\n",
        &access,
    );

    // Browser login on the Codex CLI's port 1455 replaces the credential.
    let _port = PORT_1455.lock().await;
    let (child, rx) = home.start_login(&["openai-codex"]);
    let mut seen = Vec::new();
    let url = wait_line(&rx, &mut seen, |l| l.starts_with("http"));
    assert!(url.contains("codex_cli_simplified_flow=true"), "{url}");
    assert!(url.contains("originator=pi"), "{url}");
    browse(&url).await;
    let (ok, _, stderr) = finish(child, rx, seen);
    assert!(ok, "{stderr}");
    assert_eq!(auth.stats().logins["openai"], 2);
    assert_no_rejections(&auth);

    home.assert_logged_out("openai-codex");
}

#[tokio::test(flavor = "multi_thread")]
async fn github_copilot_device_login_token_exchange_and_refresh() {
    let llm = FakeLlm::start(Script::turns(vec![
        Turn::text("copilot one"),
        Turn::text("copilot two"),
    ]))
    .await
    .unwrap();
    let auth = FakeAuthServer::start(&format!("127.0.0.1:{}", llm.port()))
        .await
        .unwrap();
    let home = Home::new(&auth, "{}");

    let (mut child, rx) = home.start_login(&["github-copilot"]);
    // Blank enterprise domain: github.com.
    writeln!(child.stdin.as_mut().unwrap()).unwrap();
    let mut seen = Vec::new();
    // The domain prompt has no newline: the code follows it on the same line.
    let line = wait_line(&rx, &mut seen, |l| l.contains("Enter code "));
    assert!(line.starts_with("GitHub Enterprise URL/domain"), "{line}");
    assert!(line.ends_with("https://github.com/login/device"), "{line}");
    let line = &line[line.find("Enter code ").unwrap()..];
    let code = line.split_whitespace().nth(2).unwrap().to_string();
    auth.approve(&code);
    let (ok, stdout, stderr) = finish(child, rx, seen);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("Logged in to GitHub Copilot"), "{stdout}");
    assert_no_secrets(&auth, &format!("{stdout}{stderr}"));
    assert_private(&home.agent.join("auth.json"));
    let stored = home.auth_json();
    let cred = &stored["github-copilot"];
    assert!(cred["refresh"]
        .as_str()
        .unwrap()
        .starts_with("fake-github-token-"));
    let access = cred["access"].as_str().unwrap().to_string();
    assert!(access.contains("proxy-ep="));

    // Requests go to the endpoint the Copilot token names, with Copilot's headers.
    assert_eq!(
        ok_output(&auth, &home.prompt("github-copilot/gpt-5.4-nano")),
        "copilot one\n"
    );
    let req = &llm.requests()[0];
    assert_eq!(req.path, "/responses");
    assert_bearer(req, &access);
    assert_eq!(header(req, "x-initiator"), "user");
    assert_eq!(header(req, "openai-intent"), "conversation-edits");
    assert_eq!(header(req, "editor-version"), "vscode/1.107.0");
    assert_eq!(header(req, "copilot-integration-id"), "vscode-chat");

    // An expired Copilot token is exchanged again with the stored GitHub token, once.
    prompt_refreshes_once(
        &auth,
        &home,
        &llm,
        ("github-copilot", "github-copilot/gpt-5.4-nano", "github"),
        "copilot two\n",
        &access,
    );

    home.assert_logged_out("github-copilot");
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_processes_refresh_once() {
    let llm = FakeLlm::start(Script::turns(vec![
        Turn::text("a"),
        Turn::text("b"),
        Turn::text("c"),
    ]))
    .await
    .unwrap();
    let auth = FakeAuthServer::start("127.0.0.1:1").await.unwrap();
    let home = Home::new(
        &auth,
        &format!(
            r#"{{"providers": {{"anthropic": {{"baseUrl": "{}"}}}}}}"#,
            llm.base_url()
        ),
    );
    let (child, rx) = home.start_login(&["anthropic"]);
    let mut seen = Vec::new();
    let url = wait_line(&rx, &mut seen, |l| l.starts_with("http"));
    browse(&url).await;
    let (ok, _, stderr) = finish(child, rx, seen);
    assert!(ok, "{stderr}");
    home.set_expired("anthropic");
    // Three processes find the token expired at once; the lock lets one refresh, the others
    // use its result (a second refresh with the rotated-out token would be rejected).
    let children: Vec<_> = (0..3)
        .map(|_| {
            home.command()
                .args([
                    "--no-session",
                    "--model",
                    "anthropic/claude-haiku-4-5",
                    "-p",
                    "hi",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        ok_output(&auth, &out);
    }
    assert_eq!(auth.stats().refreshes.get("anthropic"), Some(&1));
    assert_no_rejections(&auth);
}

#[tokio::test(flavor = "multi_thread")]
async fn anthropic_copy_code_login_without_a_browser() {
    let auth = FakeAuthServer::start("127.0.0.1:1").await.unwrap();
    let home = Home::new(&auth, "{}");
    let (mut child, rx) = home.start_login(&["anthropic", "--no-browser"]);
    let mut seen = Vec::new();
    let url = wait_line(&rx, &mut seen, |l| l.starts_with("http"));
    // Anthropic's copy-code page shows `code#state`; the user pastes it.
    let resp = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(&url)
        .send()
        .await
        .unwrap();
    let location = resp.headers()["location"].to_str().unwrap().to_string();
    assert!(
        location.starts_with("https://platform.claude.com/oauth/code/callback?"),
        "{location}"
    );
    let query = location.split_once('?').unwrap().1;
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .unwrap()
            .to_string()
    };
    writeln!(
        child.stdin.as_mut().unwrap(),
        "{}#{}",
        param("code"),
        param("state")
    )
    .unwrap();
    let (ok, stdout, stderr) = finish(child, rx, seen);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("Logged in"), "{stdout}");
    assert_eq!(auth.stats().logins["anthropic"], 1);
    assert_eq!(home.auth_json()["anthropic"]["type"], "oauth");
    assert_private(&home.agent.join("auth.json"));
    assert_no_secrets(&auth, &format!("{stdout}{stderr}"));
}

/// `models.json` sending `provider`'s requests to the fake LLM.
fn base_url_override(provider: &str, llm: &FakeLlm) -> String {
    format!(
        r#"{{"providers": {{"{provider}": {{"baseUrl": "{}"}}}}}}"#,
        llm.base_url()
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn openrouter_browser_login_stores_a_permanent_key() {
    let llm = FakeLlm::start(Script::turns(vec![Turn::text("routed")]))
        .await
        .unwrap();
    let auth = FakeAuthServer::start("127.0.0.1:1").await.unwrap();
    let home = Home::new(&auth, &base_url_override("openrouter", &llm));

    let (child, rx) = home.start_login(&["openrouter"]);
    let mut seen = Vec::new();
    wait_line(&rx, &mut seen, |l| l.starts_with("Open this URL"));
    let url = wait_line(&rx, &mut seen, |l| l.starts_with("http"));
    let page = browse(&url).await;
    assert!(page.contains("Signed in to OpenRouter"), "{page}");
    let (ok, stdout, stderr) = finish(child, rx, seen);
    assert!(ok, "login failed: {stderr}");
    assert!(stdout.contains("Logged in to OpenRouter OAuth"), "{stdout}");
    assert!(
        stderr.contains("Listening for OpenRouter OAuth callback on http://127.0.0.1:"),
        "{stderr}"
    );
    assert_no_secrets(&auth, &format!("{stdout}{stderr}"));

    // PKCE with S256, a loopback callback on a random path, no state.
    let authz = &auth.stats().authorizations[0];
    assert_eq!(authz["code_challenge_method"], "S256");
    assert!(authz.get("state").is_none());
    let callback = authz["callback_url"].as_str().unwrap();
    let path = callback.splitn(4, '/').nth(3).unwrap();
    assert!(
        path.starts_with("oauth/callback/") && path.len() > 30,
        "{callback}"
    );
    assert_eq!(auth.stats().logins["openrouter"], 1);

    // The key never expires and is sent like an API key.
    assert_private(&home.agent.join("auth.json"));
    let cred = &home.auth_json()["openrouter"];
    assert_eq!(cred["type"], "oauth");
    assert_eq!(cred["refresh"], "");
    assert_eq!(cred["expires"].as_f64().unwrap(), 9_007_199_254_740_991.0);
    let key = cred["access"].as_str().unwrap().to_string();
    assert!(key.starts_with("fake-access-token-openrouter-key-"));
    assert_eq!(
        ok_output(&auth, &home.prompt("openrouter/openai/gpt-4")),
        "routed\n"
    );
    let req = &llm.requests()[0];
    assert_eq!(req.path, "/chat/completions");
    assert_bearer(req, &key);
    assert!(auth.stats().refreshes.is_empty());

    home.assert_logged_out("openrouter");
}

#[tokio::test(flavor = "multi_thread")]
async fn openrouter_login_completes_with_a_pasted_redirect_url() {
    let auth = FakeAuthServer::start("127.0.0.1:1").await.unwrap();
    let home = Home::new(&auth, "{}");
    let (ok, stdout, stderr) = login_by_pasting_the_redirect(&home, "openrouter").await;
    assert!(ok, "login failed: {stderr}");
    assert!(stdout.contains("Logged in to OpenRouter OAuth"), "{stdout}");
    assert!(home.auth_json()["openrouter"]["access"]
        .as_str()
        .unwrap()
        .starts_with("fake-access-token-openrouter-key-"));
}

/// Runs a device-code login for `provider` and approves the code shown; returns the page
/// the code was shown for.
fn device_login(auth: &FakeAuthServer, home: &Home, provider: &str) -> String {
    let (child, rx) = home.start_login(&[provider]);
    let mut seen = Vec::new();
    let line = wait_line(&rx, &mut seen, |l| l.starts_with("Enter code "));
    let mut words = line.split_whitespace();
    let code = words.nth(2).unwrap().to_string();
    let page = words.nth(1).unwrap().to_string();
    auth.approve(&code);
    let (ok, stdout, stderr) = finish(child, rx, seen);
    assert!(ok, "{provider} login failed: {stderr}");
    assert!(stdout.contains("Logged in to "), "{stdout}");
    assert_no_secrets(auth, &format!("{stdout}{stderr}"));
    assert_private(&home.agent.join("auth.json"));
    page
}

/// Logs in with the device flow, prompts with the token, lets it expire and checks that the
/// next prompt refreshes it exactly once and sends the new one.
async fn device_login_then_refresh(
    provider: &str,
    stats_key: &str,
    model: &str,
    path: &str,
    auth_host_env: Option<&str>,
) {
    let llm = FakeLlm::start(Script::turns(vec![
        Turn::text("first"),
        Turn::text("second"),
    ]))
    .await
    .unwrap();
    let auth = FakeAuthServer::start("127.0.0.1:1").await.unwrap();
    let mut home = Home::new(&auth, &base_url_override(provider, &llm));
    if let Some(key) = auth_host_env {
        // The provider's own host setting instead of the test origin.
        home.extra_env
            .push(("PI_TEST_OAUTH_ORIGIN".into(), String::new()));
        home.extra_env.push((key.to_string(), auth.origin()));
    }
    let page = device_login(&auth, &home, provider);
    assert!(
        page.starts_with("https://") && page.contains("user_code="),
        "{page}"
    );
    assert_eq!(auth.stats().logins[stats_key], 1);
    let access = home.auth_json()[provider]["access"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(ok_output(&auth, &home.prompt(model)), "first\n");
    let req = &llm.requests()[0];
    assert_eq!(req.path, path);
    assert_bearer(req, &access);

    prompt_refreshes_once(
        &auth,
        &home,
        &llm,
        (provider, model, stats_key),
        "second\n",
        &access,
    );
    assert!(home.auth_json()[provider]["expires"].as_f64().unwrap() > 0.0);
    home.assert_logged_out(provider);
}

#[tokio::test(flavor = "multi_thread")]
async fn xai_device_login_and_refresh() {
    device_login_then_refresh("xai", "xai", "xai/grok-4.3", "/responses", None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kimi_code_device_login_and_refresh_through_its_host_setting() {
    // Pi's own knob for Kimi's authorization host, without the test origin.
    device_login_then_refresh(
        "kimi-coding",
        "kimi",
        "kimi-coding/k3",
        "/chat/completions",
        Some("KIMI_CODE_OAUTH_HOST"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn meta_device_login_mints_keys_from_the_identity_token() {
    // The stored `access` is a minted Model API key; "refreshing" mints another with the
    // identity token kept as `refresh`.
    device_login_then_refresh("meta", "meta", "meta/muse-spark-1.1", "/responses", None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn credential_commands_print_check_and_refresh_a_login() {
    let llm = FakeLlm::start(Script::turns(vec![Turn::text("printed")]))
        .await
        .unwrap();
    let auth = FakeAuthServer::start("127.0.0.1:1").await.unwrap();
    let mut home = Home::new(&auth, &base_url_override("xai", &llm));
    home.extra_env
        .push(("OPENAI_API_KEY".into(), "sk-from-env".into()));
    device_login(&auth, &home, "xai");
    let access = home.access("xai");

    // check: the status only, or JSON; the token only with --credentials.
    let (code, out, err) = home.auth(&["check", "--provider", "xai"]);
    assert_eq!((code, out.as_str()), (0, "ready\n"), "{err}");
    let (code, out, _) = home.auth(&["check", "--provider", "xai", "--json"]);
    assert_eq!(code, 0);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        report,
        serde_json::json!({"status": "ready", "provider": "xai", "authType": "oauth"})
    );
    assert_no_secrets(&auth, &format!("{out}{err}"));
    let (code, out, _) = home.auth(&["check", "--provider", "xai", "--credentials"]);
    assert_eq!((code, out.trim()), (0, access.as_str()));
    let (code, out, _) = home.auth(&["check", "--provider", "google", "--json"]);
    assert_eq!(code, 1);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["reason"],
        "credentials_not_configured"
    );
    let (code, out, _) = home.auth(&["check", "--provider", "nosuch"]);
    assert_eq!((code, out.as_str()), (1, "not_ready\n"));

    // The token is valid for 55 minutes: printed as stored, no refresh.
    let (code, out, err) = home.auth(&["print-bearer-token", "--provider", "xai"]);
    assert_eq!((code, out.trim()), (0, access.as_str()), "{err}");
    assert!(auth.stats().refreshes.is_empty());
    // An OAuth login is no API key; the error names no token.
    let (code, out, err) = home.auth(&["print-api-key", "--provider", "xai"]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert_eq!(
        err.trim(),
        "Error: Provider \"xai\" is configured with OAuth, not an API key"
    );
    assert_no_secrets(&auth, &err);
    // API keys come from the environment too; no bearer token there.
    let (code, out, _) = home.auth(&["print-api-key", "--provider", "openai"]);
    assert_eq!((code, out.as_str()), (0, "sk-from-env\n"));
    let (code, _, err) = home.auth(&["print-bearer-token", "--provider", "openai"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("not configured with an OAuth bearer token"),
        "{err}"
    );
    // Without --provider a model picks among the stored logins only, as in Pi.
    let (code, out, _) = home.auth(&["print-bearer-token", "--model", "grok-4.3"]);
    assert_eq!((code, out.trim()), (0, access.as_str()));
    let (code, _, err) = home.auth(&["print-api-key", "--model", "gpt-4o"]);
    assert_eq!(code, 1);
    assert!(err.contains("Model \"gpt-4o\" not found"), "{err}");

    // Asking for an hour left refreshes once; the new token is stored (0600) and used.
    let (code, out, err) = home.auth(&[
        "print-bearer-token",
        "--provider",
        "xai",
        "--min-expiry",
        "1h",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(auth.stats().refreshes.get("xai"), Some(&1));
    let refreshed = home.access("xai");
    assert_ne!(refreshed, access);
    assert_eq!(out.trim(), refreshed);
    assert_private(&home.agent.join("auth.json"));
    assert_eq!(ok_output(&auth, &home.prompt("xai/grok-4.3")), "printed\n");
    assert_bearer(&llm.requests()[0], &refreshed);

    // An expired login: --no-refresh reports it ready as stored; the default refreshes it.
    home.set_expired("xai");
    let (code, out, _) = home.auth(&["check", "--provider", "xai", "--no-refresh"]);
    assert_eq!((code, out.as_str()), (0, "ready\n"));
    assert_eq!(auth.stats().refreshes.get("xai"), Some(&1));
    let (code, out, _) = home.auth(&["check", "--model", "xai/grok-4.3"]);
    assert_eq!((code, out.as_str()), (0, "ready\n"));
    assert_eq!(auth.stats().refreshes.get("xai"), Some(&2));
    assert!(home.auth_json()["xai"]["expires"].as_f64().unwrap() > 0.0);
    assert_no_rejections(&auth);

    // Usage errors exit as Pi's do.
    assert_eq!(home.auth(&["check"]).0, 2);
    assert_eq!(home.auth(&["print-api-key"]).0, 1);
    assert_eq!(
        home.auth(&["check", "--provider", "xai", "--min-expiry", "1h"])
            .0,
        1
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn chatgpt_sign_in_calls_the_openai_api_with_its_token() {
    let llm = FakeLlm::start(Script::turns(vec![
        Turn::text("chat one"),
        Turn::text("chat two"),
    ]))
    .await
    .unwrap();
    let auth = FakeAuthServer::start("127.0.0.1:1").await.unwrap();
    let home = Home::new(&auth, &base_url_override("openai", &llm));
    let port = PORT_1455.lock().await;
    let (child, rx) = home.start_login(&["openai"]);
    let mut seen = Vec::new();
    let url = wait_line(&rx, &mut seen, |l| l.starts_with("http"));
    let page = browse(&url).await;
    assert!(page.contains("Signed in to ChatGPT"), "{page}");
    let (ok, stdout, stderr) = finish(child, rx, seen);
    drop(port);
    assert!(ok, "login failed: {stderr}");
    assert!(
        stdout.contains("Logged in to OpenAI (ChatGPT subscription)"),
        "{stdout}"
    );
    assert_no_secrets(&auth, &format!("{stdout}{stderr}"));
    assert_eq!(auth.stats().logins["chatgpt"], 1);

    // The installation is named by the device id kept in settings.json.
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(home.agent.join("settings.json")).unwrap())
            .unwrap();
    let device = settings["deviceId"].as_str().unwrap();
    let authz = &auth.stats().authorizations[0];
    assert_eq!(authz["ext_agent_host_id"], format!("urn:uuid:{device}"));
    assert_eq!(authz["agent_name_hint"], "Pi");
    assert_eq!(authz["code_challenge_method"], "S256");
    assert_eq!(authz["redirect_uri"], "http://127.0.0.1:1455/auth/callback");

    // The issued client is kept for refreshes; the token is sent as the API key.
    assert_private(&home.agent.join("auth.json"));
    let cred = home.auth_json()["openai"].clone();
    assert_eq!(cred["type"], "oauth");
    assert!(cred["clientId"].as_str().unwrap().starts_with("app_dyn_"));
    assert!(cred["scopes"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("chatgpt.tokens.use.direct")));
    let access = cred["access"].as_str().unwrap().to_string();
    assert_eq!(
        ok_output(&auth, &home.prompt("openai/gpt-4o")),
        "chat one\n"
    );
    let req = &llm.requests()[0];
    assert_eq!(req.path, "/responses");
    assert_bearer(req, &access);

    prompt_refreshes_once(
        &auth,
        &home,
        &llm,
        ("openai", "openai/gpt-4o", "chatgpt"),
        "chat two\n",
        &access,
    );
    assert_no_rejections(&auth);
    home.assert_logged_out("openai");
}

#[tokio::test(flavor = "multi_thread")]
async fn radius_logins_add_its_mcp_server_once_and_refresh() {
    let llm = FakeLlm::start(Script::turns(vec![
        Turn::text("gateway one"),
        Turn::text("gateway two"),
    ]))
    .await
    .unwrap();
    // The gateway's catalog names the fake LLM as its base URL.
    let proxy = llm.base_url().trim_start_matches("http://").to_string();
    let auth = FakeAuthServer::start(&proxy).await.unwrap();
    let home = Home::new(&auth, "{}");
    // A server of the user's already called `radius`: the login's server gets another name.
    std::fs::write(
        home.agent.join("mcp.json"),
        r#"{"mcpServers": {"radius": {"command": "true"}}}"#,
    )
    .unwrap();

    // Headless: the gateway's device flow.
    let (child, rx) = home.start_login(&["radius", "--no-browser"]);
    let mut seen = Vec::new();
    let line = wait_line(&rx, &mut seen, |l| l.starts_with("Enter code "));
    auth.approve(line.split_whitespace().nth(2).unwrap());
    let (ok, stdout, stderr) = finish(child, rx, seen);
    assert!(ok, "radius login failed: {stderr}");
    assert!(stdout.contains("Logged in to Radius"), "{stdout}");
    assert!(
        stdout.contains("Added MCP server \"radius-mcp\""),
        "{stdout}"
    );
    assert_no_secrets(&auth, &format!("{stdout}{stderr}"));
    assert_private(&home.agent.join("auth.json"));
    assert_eq!(auth.stats().logins["radius"], 1);
    let cred = home.auth_json()["radius"].clone();
    assert_eq!(cred["type"], "oauth");
    assert_eq!(cred["scope"], "gateway offline_access");
    let mcp: Value =
        serde_json::from_str(&std::fs::read_to_string(home.agent.join("mcp.json")).unwrap())
            .unwrap();
    assert_eq!(mcp["mcpServers"]["radius"]["command"], "true");
    assert_eq!(
        mcp["mcpServers"]["radius-mcp"],
        serde_json::json!({"url": "https://radius.pi.dev/mcp", "auth": {"provider": "radius"}})
    );

    // The browser login, through the gateway's discovered authorization page: the MCP
    // server already uses the login, so mcp.json stays as it is.
    let (child, rx) = home.start_login(&["radius"]);
    let mut seen = Vec::new();
    wait_line(&rx, &mut seen, |l| {
        l.contains("Listening for OAuth callback on http://127.0.0.1:1456/oauth/callback")
    });
    let url = wait_line(&rx, &mut seen, |l| l.starts_with("http"));
    assert!(
        url.starts_with(&format!("{}/radius/authorize?", auth.origin())),
        "{url}"
    );
    let page = browse(&url).await;
    assert!(page.contains("Signed in to Radius"), "{page}");
    let (ok, stdout, stderr) = finish(child, rx, seen);
    assert!(ok, "radius login failed: {stderr}");
    assert!(!stdout.contains("MCP server"), "{stdout}");
    assert_eq!(auth.stats().logins["radius"], 2);
    let authz = &auth.stats().authorizations[0];
    assert_eq!(authz["handoff"], "url");
    assert_eq!(authz["code_challenge_method"], "S256");
    let access = home.access("radius");

    // The account's catalog was kept at login; the next start uses it without a request
    // to the gateway, and its models speak Pi's own protocol with the login's token.
    let store: Value = serde_json::from_str(
        &std::fs::read_to_string(home.agent.join("models-store.json")).unwrap(),
    )
    .unwrap();
    let ids: Vec<&str> = store["radius"]["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["balanced", "org-only"]);
    assert!(store["radius"]["checkedAt"].as_f64().unwrap() > 0.0);
    assert_eq!(
        ok_output(&auth, &home.prompt("radius/org-only")),
        "gateway one\n"
    );
    let req = &llm.requests()[0];
    assert_eq!(
        (req.path.as_str(), req.api.as_str()),
        ("/messages", "pi-messages")
    );
    assert_bearer(req, &access);
    assert_eq!(req.body["model"], "org-only");
    // Pi's context as it is: the system prompt is a system message with its sections.
    let messages = req.body["context"]["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert!(messages
        .iter()
        .any(|m| m["role"] == "user" && m.to_string().contains("Say hello")));

    // The token, for the gateway's clients; a refresh when it must last longer.
    let (code, out, _) = home.auth(&["print-bearer-token", "--provider", "radius"]);
    assert_eq!((code, out.trim()), (0, access.as_str()));
    let (code, out, err) = home.auth(&[
        "print-bearer-token",
        "--provider",
        "radius",
        "--min-expiry",
        "2h",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(auth.stats().refreshes.get("radius"), Some(&1));
    let refreshed = home.access("radius");
    assert_ne!(refreshed, access);
    assert_eq!(out.trim(), refreshed);
    assert_eq!(
        ok_output(&auth, &home.prompt("radius/balanced")),
        "gateway two\n"
    );
    assert_bearer(&llm.requests()[1], &refreshed);
    assert_no_rejections(&auth);
    home.assert_logged_out("radius");
}
