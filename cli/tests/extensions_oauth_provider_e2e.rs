//! `pi.registerProvider(name, {oauth: {name, login, refreshToken, getApiKey}})` end to end
//! with fixtures/extensions/oauth-provider.ts: `pi auth login corp-sso` runs the
//! extension's `login(callbacks)` in the sidecar (its `onAuth` URL on stderr, its `onPrompt`
//! answered from stdin, the test acting as the browser against the fake authorization
//! server), the credentials land in auth.json (0600) as Pi stores them, the first prompt
//! refreshes the expired token once through `refreshToken`, and the fake LLM receives
//! `getApiKey(credentials)` as the bearer.
//!
//! Real Pi 1.6.0 with the same extension (login through `/login` → "Sign in with an
//! account" → "Corp SSO", listed among the built-in accounts; its `pi auth login corp-sso`
//! answers `Unknown provider "corp-sso".` since that command loads no extensions) stored
//! `{"corp-sso": {"access": "fake-access-token-corp-1", "refresh": "fake-refresh-1",
//! "expires": …, "tenant": "corp", "type": "oauth"}}` with mode 0600; the next `-p` prompt
//! made one refresh_token grant, rewrote the entry the same way with the new tokens, and sent
//! `Authorization: Bearer fake-access-token-corp-2.via-getApiKey`; a second prompt did not
//! refresh again.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use pi_fake_llm::oauth::FakeAuthServer;
use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

fn auth_json(s: &Setup) -> Value {
    serde_json::from_str(&std::fs::read_to_string(s.agent.join("auth.json")).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_login_is_stored_refreshed_once_and_its_key_sent() {
    let s = Setup::new(json!([{"text": "Hello from corp."}, {"text": "Again."}])).await;
    let auth = FakeAuthServer::start("127.0.0.1:1").await.unwrap();
    // The login's token is issued already inside Pi's five-minute margin: the first request
    // must refresh it.
    auth.set_expires_in(60);
    let extensions = s.agent.join("extensions");
    std::fs::create_dir_all(&extensions).unwrap();
    std::fs::copy(
        fixture("oauth-provider.ts"),
        extensions.join("oauth-provider.ts"),
    )
    .unwrap();
    let llm_url = s.fake_url();
    let envs = [
        ("CORP_AUTH_ORIGIN", auth.origin()),
        ("CORP_LLM_URL", llm_url.clone()),
    ];

    // Sign in: read the authorize URL the extension shows, follow it like a browser, paste
    // where it lands.
    let mut login = std::process::Command::new(pi_bin());
    login
        .args(["auth", "login", "corp-sso"])
        .current_dir(&s.cwd)
        .env("PI_CODING_AGENT_DIR", &s.agent)
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = login.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut shown = String::new();
    let url = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "no authorize URL in: {shown}"
        );
        shown.push_str(&line);
        if let Some(at) = line.find("http://") {
            break line[at..].trim().to_string();
        }
    };
    let resp = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(&url)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 302);
    let landed = resp.headers()["location"].to_str().unwrap().to_string();
    assert!(landed.starts_with("http://127.0.0.1:9/corp/callback?code="));
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{landed}").unwrap();
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    shown.push_str(&rest);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "login failed: {stdout}\n{shown}");
    assert!(stdout.starts_with("Logged in to Corp SSO."), "{stdout}");
    assert!(shown.contains("Paste the redirect URL:"), "{shown}");
    assert!(
        shown.contains("Exchanging the code for tokens..."),
        "{shown}"
    );
    assert_eq!(auth.stats().logins.get("radius"), Some(&1));

    // Stored as Pi stores it: the extension's object with the type last, 0600.
    let mode = std::fs::metadata(s.agent.join("auth.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let stored = auth_json(&s)["corp-sso"].clone();
    let keys: Vec<&str> = stored
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["access", "refresh", "expires", "tenant", "type"]);
    assert_eq!(stored["type"], "oauth");
    assert_eq!(stored["tenant"], "corp");
    let first_access = stored["access"].as_str().unwrap().to_string();
    assert!(first_access.starts_with("fake-access-token-radius-"));
    for token in auth.stats().issued {
        assert!(!stdout.contains(&token) && !shown.contains(&token));
    }

    // The first prompt refreshes once and sends getApiKey's key.
    auth.set_expires_in(3600);
    let mut prompt = s.command_without_model(&["--model", "corp-sso/corp-model", "-p", "hi"]);
    let out = prompt
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Hello from corp."), "{stdout}");
    assert_eq!(auth.stats().refreshes.get("radius"), Some(&1));
    let refreshed = auth_json(&s)["corp-sso"].clone();
    let access = refreshed["access"].as_str().unwrap().to_string();
    assert_ne!(access, first_access);
    assert_eq!(refreshed["tenant"], "corp");
    assert_eq!(
        refreshed.as_object().unwrap().keys().next_back().unwrap(),
        "type"
    );
    let sent = s.fake.requests();
    assert_eq!(
        sent[0].headers["authorization"],
        format!("Bearer {access}.via-getApiKey")
    );

    // Still valid: the next prompt does not refresh.
    let mut again = s.command_without_model(&["--model", "corp-sso/corp-model", "-p", "again"]);
    let out = again
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(auth.stats().refreshes.get("radius"), Some(&1));
    let sent = s.fake.requests();
    assert_eq!(
        sent[1].headers["authorization"],
        format!("Bearer {access}.via-getApiKey")
    );
}

/// `pi auth login` with a login that asks (fixtures/extensions/oauth-questions.ts): the
/// `onPrompt` question in Pi's form `<message> (<placeholder>): ` answered from stdin, and
/// the `onSelect` taken as Pi takes a choice of sign-in method: the first option by default,
/// with `--no-browser` a numbered question among the others (asked again after an answer
/// that is not one of the numbers).
#[test]
fn an_extension_login_asks_its_questions_on_the_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let cwd = tmp.path().join("project");
    std::fs::create_dir_all(agent.join("extensions")).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::copy(
        fixture("oauth-questions.ts"),
        agent.join("extensions").join("oauth-questions.ts"),
    )
    .unwrap();
    let login = |args: &[&str], input: &str| {
        let mut child = std::process::Command::new(pi_bin())
            .args(["auth", "login", "corp-pick"])
            .args(args)
            .current_dir(&cwd)
            .env("PI_CODING_AGENT_DIR", &agent)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(stdout.starts_with("Logged in to Corp Pick."), "{stdout}");
        let auth: Value =
            serde_json::from_str(&std::fs::read_to_string(agent.join("auth.json")).unwrap())
                .unwrap();
        (stderr, auth["corp-pick"].clone())
    };

    let (shown, stored) = login(&[], "555\n");
    assert!(!shown.contains("Choose a workspace:"), "{shown}");
    assert!(
        shown.contains("Enter the one-time code: (123456): "),
        "{shown}"
    );
    assert_eq!(stored["access"], "pick-ws-main-555");
    assert_eq!(stored["workspace"], "ws-main");

    let (shown, stored) = login(&["--no-browser"], "9\n2\n777\n");
    for line in [
        "Choose a workspace:\n",
        "  1. Lab workspace\n",
        "  2. Ops workspace - on call\n",
        "Select 1-2: Enter a number from 1 to 2.\n",
        "Enter the one-time code: (123456): ",
    ] {
        assert!(shown.contains(line), "{line:?} missing:\n{shown}");
    }
    assert_eq!(stored["access"], "pick-ws-ops-777");
    assert_eq!(stored["workspace"], "ws-ops");
}

/// `oauth.modifyModels(models, credentials)` (fixtures/extensions/oauth-modify-models.ts):
/// as Pi's start-up refresh does with a stored OAuth credential, the provider's models
/// (whole: provider and `baseUrl` included) go through it before a model is chosen, so the
/// account's endpoint answers (the declared one listens nowhere) and RPC lists the name it
/// gave. Without a stored credential (or with an API key) the declared models stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modify_models_projects_the_providers_models_for_the_stored_login() {
    let s = Setup::new(json!([{"text": "From the account endpoint."}])).await;
    let ext = fixture("oauth-modify-models.ts");
    let llm_url = s.fake_url();
    let names = |s: &Setup| -> Vec<String> {
        let mut rpc = Rpc::start_with_env(s, &["-e", &ext], &[]);
        rpc.send(json!({"type": "get_available_models", "id": "l"}));
        let listed = rpc.response("l");
        assert!(rpc.finish());
        listed["data"]["models"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["provider"] == "acct")
            .map(|m| format!("{} @ {}", m["name"].as_str().unwrap(), m["baseUrl"]))
            .collect()
    };

    // An API key only: the declared model as it is.
    std::fs::write(
        s.agent.join("auth.json"),
        json!({"acct": {"type": "api_key", "key": "k"}}).to_string(),
    )
    .unwrap();
    assert_eq!(names(&s), ["Acct Model @ \"http://127.0.0.1:9/v1\""]);

    std::fs::write(
        s.agent.join("auth.json"),
        json!({"acct": {
            "access": "fake-access-token-acct-t1", "refresh": "r", "expires": 4_000_000_000_000u64,
            "tenant": "t1", "endpoint": llm_url, "type": "oauth"}})
        .to_string(),
    )
    .unwrap();
    assert_eq!(
        names(&s),
        [format!(
            "Acct Model for t1 (was acct at http://127.0.0.1:9/v1) @ \"{llm_url}\""
        )]
    );
    let out = s
        .command_without_model(&["-e", &ext, "--model", "acct/acct-model", "-p", "hi"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout, "From the account endpoint.\n");
    let sent = s.fake.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].headers["authorization"],
        "Bearer fake-access-token-acct-t1"
    );
}
