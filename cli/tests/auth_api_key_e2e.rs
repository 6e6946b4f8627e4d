//! `pi auth login <provider> --api-key` (and providers without account sign-in) end to end,
//! compared with real Pi 1.6.0 run by hand in tmux: the same prompts (`Enter Groq API key: `,
//! Cloudflare's account id), messages, exit codes and auth.json entries (mode 0600). The key
//! is then sent by a print-mode prompt through the fake LLM. In tmux (gated on
//! `PI_TUI_E2E=1`), the key typed at the prompt never appears on the screen and Ctrl+C
//! cancels with Pi's "Login cancelled.".

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod pty_common;
mod tmux_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use pi_fake_llm::{FakeLlm, Script, Turn};
use serde_json::{json, Value};
use tmux_common::{enabled, shell_quote, Tmux};

struct Home {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    agent: PathBuf,
}

impl Home {
    fn new() -> Home {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().to_path_buf();
        let agent = home.join("agent");
        std::fs::create_dir_all(&agent).unwrap();
        Home {
            _tmp: tmp,
            home,
            agent,
        }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_pi"));
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .current_dir(&self.home);
        cmd
    }

    /// `pi auth login <args>` in a terminal, each question answered when it appears:
    /// exit code, stdout, stderr.
    fn login(&self, args: &[&str], dialogue: &[(&str, &str)]) -> (i32, String, String) {
        let mut child = pty_common::spawn(self.command().args(["auth", "login"]).args(args));
        child.answer(dialogue);
        let out = child.finish();
        (out.code, out.stdout, out.stderr)
    }

    fn auth_json(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.agent.join("auth.json")).unwrap())
            .unwrap()
    }

    fn auth_path(&self) -> String {
        self.agent.join("auth.json").display().to_string()
    }
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn wrong_arguments_and_providers_fail_as_in_pi() {
    let home = Home::new();
    let usage = "Usage: pi auth login <provider> [--api-key] [--no-browser]\n";
    for args in [&[][..], &["groq", "extra"][..], &["groq", "--nope"][..]] {
        assert_eq!(
            home.login(args, &[]),
            (1, String::new(), usage.into()),
            "{args:?}"
        );
    }
    assert_eq!(
        home.login(&["groq", "--api-key", "--no-browser"], &[]),
        (
            1,
            String::new(),
            "--no-browser only applies to account sign-in; omit it with --api-key.\n".into()
        )
    );
    assert_eq!(
        home.login(&["openai-codex", "--api-key"], &[]),
        (
            1,
            String::new(),
            "OpenAI Codex has no API key login. Omit --api-key to sign in.\n".into()
        )
    );
    let (code, out, err) = home.login(&["nope"], &[]);
    assert_eq!((code, out.as_str()), (1, ""));
    let mut lines = err.lines();
    assert_eq!(lines.next(), Some("Unknown provider \"nope\"."));
    let providers = lines.next().unwrap().strip_prefix("Providers: ").unwrap();
    // Pi's list: every provider with an account or API-key login, sorted.
    let ids: Vec<&str> = providers.split(", ").collect();
    for id in [
        "amazon-bedrock",
        "anthropic",
        "groq",
        "openai-codex",
        "radius",
        "zai",
    ] {
        assert!(ids.contains(&id), "{id} missing from {providers}");
    }
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted);
    assert!(!home.agent.join("auth.json").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_api_key_login_is_saved_private_and_used_for_requests() {
    let llm = FakeLlm::start(Script::turns(vec![Turn::text("groq says hi")]))
        .await
        .unwrap();
    let home = Home::new();
    // Groq's requests go to the fake LLM; the key comes from the login only.
    std::fs::write(
        home.agent.join("models.json"),
        json!({"providers": {"groq": {"baseUrl": format!("{}/v1", llm.base_url())}}}).to_string(),
    )
    .unwrap();

    // Groq has no account sign-in: Pi asks for its API key without --api-key too.
    let (code, out, err) = home.login(&["groq"], &[("Enter Groq API key: ", "gsk-test-key-1")]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (
            0,
            format!(
                "Enter Groq API key: \nSaved API key for Groq. Credentials saved to {}\n",
                home.auth_path()
            )
            .as_str(),
            ""
        )
    );
    assert_eq!(
        home.auth_json(),
        json!({"groq": {"type": "api_key", "key": "gsk-test-key-1"}})
    );
    assert_eq!(mode(&home.agent.join("auth.json")), 0o600);

    let out = home
        .command()
        .args([
            "--no-session",
            "--model",
            "groq/llama-3.3-70b-versatile",
            "-p",
            "hello",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "groq says hi\n");
    // The fake redacts keys it did not issue; the request carried one, and it is the
    // stored one (without the login there is no Groq key at all).
    assert_eq!(llm.requests()[0].headers["authorization"], "<redacted>");
    let out = home
        .command()
        .args(["auth", "print-api-key", "--provider", "groq"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "gsk-test-key-1\n");

    // --api-key for a provider with an account sign-in (Anthropic): the key, not OAuth.
    let (code, out, _) = home.login(
        &["Anthropic", "--api-key"],
        &[("Enter Anthropic API key: ", "sk-ant-api-key")],
    );
    assert_eq!(code, 0);
    assert!(
        out.starts_with("Enter Anthropic API key: \nSaved API key for Anthropic."),
        "{out}"
    );
    assert_eq!(
        home.auth_json()["anthropic"],
        json!({"type": "api_key", "key": "sk-ant-api-key"})
    );
    // The earlier login is kept.
    assert_eq!(home.auth_json()["groq"]["key"], "gsk-test-key-1");

    // Cloudflare Workers AI: the key, then the account id into the credential's env.
    let (code, out, _) = home.login(
        &["cloudflare-workers-ai"],
        &[
            ("Enter Cloudflare API key: ", "cf-key"),
            ("Enter Cloudflare account ID: ", "acc-123"),
        ],
    );
    assert_eq!(code, 0);
    assert!(
        out.starts_with(
            "Enter Cloudflare API key: \nEnter Cloudflare account ID: Saved API key for \
             Cloudflare Workers AI."
        ),
        "{out}"
    );
    assert_eq!(
        home.auth_json()["cloudflare-workers-ai"],
        json!({"type": "api_key", "key": "cf-key", "env": {"CLOUDFLARE_ACCOUNT_ID": "acc-123"}})
    );

    // Ctrl+C at the key's prompt cancels and stores nothing.
    let (code, _, err) = home.login(&["mistral"], &[("Enter Mistral API key: ", "\x03")]);
    assert_eq!((code, err.as_str()), (1, "Login cancelled.\n"));
    assert!(home.auth_json().get("mistral").is_none());

    // Logout removes it again.
    let out = home
        .command()
        .args(["auth", "logout", "groq"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(home.auth_json().get("groq").is_none());
}

/// As in Pi, `pi auth login` needs a terminal on stdin and stdout; it says so after finding
/// the provider (an unknown one is still reported) and stores nothing.
#[test]
fn without_a_terminal_login_fails_as_in_pi() {
    let home = Home::new();
    let needs_terminal = "\"pi auth login <provider> [--api-key] [--no-browser]\" requires an \
                          interactive terminal\n";
    for args in [
        &["groq"][..],
        &["anthropic"][..],
        &["anthropic", "--api-key"][..],
    ] {
        assert_cmd::Command::from_std(home.command())
            .args(["auth", "login"])
            .args(args)
            .write_stdin("gsk-piped-key\n")
            .assert()
            .code(1)
            .stdout("")
            .stderr(needs_terminal);
    }
    let unknown = assert_cmd::Command::from_std(home.command())
        .args(["auth", "login", "nope"])
        .write_stdin("x\n")
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&unknown.get_output().stderr).into_owned();
    assert!(
        stderr.starts_with("Unknown provider \"nope\".\nProviders: "),
        "{stderr}"
    );
    assert!(!home.agent.join("auth.json").exists());
}

/// Google Vertex AI and Amazon Bedrock start with Pi's choice of method; each method asks
/// its questions and stores Pi's credential.
#[test]
fn vertex_and_bedrock_logins_start_with_a_choice_of_method() {
    let home = Home::new();
    let saved = |name: &str| {
        format!(
            "Saved API key for {name}. Credentials saved to {}\n",
            home.auth_path()
        )
    };
    let (code, out, err) = home.login(
        &["google-vertex"],
        &[
            ("Select 1-3: ", "4"),
            ("Enter a number from 1 to 3.\nSelect 1-3: ", "2"),
            ("Enter Google Cloud project ID: ", "my-proj"),
            ("Enter Google Cloud location: ", "us-central1"),
        ],
    );
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        out,
        format!(
            "Select Google Vertex AI authentication method:\n  1. Google Cloud API key\n  2. \
             Application Default Credentials\n  3. Service account credentials file\nSelect 1-3: \
             Enter a number from 1 to 3.\nSelect 1-3: Run `gcloud auth application-default \
             login`, then provide the project and location.\n  Application Default Credentials: \
             https://cloud.google.com/docs/authentication/provide-credentials-adc\nEnter Google \
             Cloud project ID: Enter Google Cloud location: {}",
            saved("Google Vertex AI")
        )
    );
    assert_eq!(
        home.auth_json()["google-vertex"],
        json!({"type": "api_key", "env": {
            "GOOGLE_CLOUD_PROJECT": "my-proj", "GOOGLE_CLOUD_LOCATION": "us-central1"}})
    );

    // The key method: the key is read as a secret.
    let (code, out, _) = home.login(
        &["google-vertex"],
        &[
            ("Select 1-3: ", "1"),
            ("Enter Google Cloud API key: ", "gcp-secret-key"),
        ],
    );
    assert_eq!(code, 0);
    assert!(!out.contains("gcp-secret-key"), "{out}");
    assert_eq!(
        home.auth_json()["google-vertex"],
        json!({"type": "api_key", "key": "gcp-secret-key"})
    );

    let (code, out, _) = home.login(
        &["amazon-bedrock"],
        &[("Select 1-3: ", "2"), ("Enter AWS profile name: ", "dev")],
    );
    assert_eq!(code, 0);
    assert!(
        out.contains(
            "Select 1-3: Amazon Bedrock supports AWS profiles, IAM credentials, and role-based \
             credentials.\n  AWS credential provider chain: \
             https://docs.aws.amazon.com/sdkref/latest/guide/standardized-credentials.html\n\
             Enter AWS profile name: Saved API key for Amazon Bedrock."
        ),
        "{out}"
    );
    assert_eq!(
        home.auth_json()["amazon-bedrock"],
        json!({"type": "api_key", "env": {"AWS_PROFILE": "dev"}})
    );
    // The credential chain as it is: only Enter, and an empty credential.
    let (code, _, _) = home.login(
        &["amazon-bedrock"],
        &[
            ("Select 1-3: ", "3"),
            (
                "Configure AWS credentials, then press Enter to continue: ",
                "",
            ),
        ],
    );
    assert_eq!(code, 0);
    assert_eq!(
        home.auth_json()["amazon-bedrock"],
        json!({"type": "api_key"})
    );
    assert_eq!(mode(&home.agent.join("auth.json")), 0o600);
}

/// In a terminal the key is typed without echo; Ctrl+C cancels.
#[test]
fn the_key_is_not_echoed_in_a_terminal_and_ctrl_c_cancels() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let home = Home::new();
    let run = |provider: &str| {
        format!(
            "env -i HOME={home} PATH=/usr/bin:/bin PI_CODING_AGENT_DIR={agent} {pi} auth login \
             {provider} --api-key; echo EXITED-$?; sleep 30",
            home = shell_quote(&home.home),
            agent = shell_quote(&home.agent),
            pi = shell_quote(Path::new(env!("CARGO_BIN_EXE_pi"))),
        )
    };
    let name = format!("pi-api-key-e2e-{}", std::process::id());
    let tmux = Tmux::start(&name, &home.home, &run("xai"));
    tmux.wait_for("Enter xAI API key:");
    tmux.keys(&["-l", "xai-hidden-4242"]);
    // Backspace edits the hidden value, as in Pi.
    tmux.keys(&["BSpace"]);
    tmux.submit("3");
    let screen = tmux.wait_for("EXITED-0");
    assert!(!screen.contains("hidden"), "{screen}");
    assert!(
        screen.contains(&format!(
            "Saved API key for xAI. Credentials saved to {}",
            home.auth_path()
        )) || screen.contains("Saved API key for xAI."),
        "{screen}"
    );
    assert_eq!(
        home.auth_json()["xai"],
        json!({"type": "api_key", "key": "xai-hidden-4243"})
    );
    assert_eq!(mode(&home.agent.join("auth.json")), 0o600);
    drop(tmux);

    let name = format!("pi-api-key-e2e-cancel-{}", std::process::id());
    let tmux = Tmux::start(&name, &home.home, &run("groq"));
    tmux.wait_for("Enter Groq API key:");
    tmux.keys(&["-l", "gsk-never"]);
    tmux.keys(&["C-c"]);
    let screen = tmux.wait_for("EXITED-1");
    assert!(screen.contains("Login cancelled."), "{screen}");
    assert!(!screen.contains("gsk-never"), "{screen}");
    assert!(home.auth_json().get("groq").is_none());
}

/// `/login` in the TUI: "Sign in with an API key", Groq picked by searching, the key typed
/// into Pi's "Login to Groq" dialog, stored as `pi auth login` stores it (0600), and the next
/// prompt answered through the fake LLM with it. Then Vertex's choice of method in the
/// same session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_login_saves_an_api_key_that_the_next_prompt_uses() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let llm = FakeLlm::start(Script::turns(vec![Turn::text("groq answers via tui")]))
        .await
        .unwrap();
    let home = Home::new();
    std::fs::write(
        home.agent.join("models.json"),
        json!({"providers": {"groq": {"baseUrl": format!("{}/v1", llm.base_url())}}}).to_string(),
    )
    .unwrap();
    let command = format!(
        "env -i HOME={home} PATH=/usr/bin:/bin PI_CODING_AGENT_DIR={agent} {pi} --no-session \
         --model groq/llama-3.3-70b-versatile; echo EXITED-$?; sleep 30",
        home = shell_quote(&home.home),
        agent = shell_quote(&home.agent),
        pi = shell_quote(Path::new(env!("CARGO_BIN_EXE_pi"))),
    );
    let name = format!("pi-api-key-tui-e2e-{}", std::process::id());
    let tmux = Tmux::start(&name, &home.home, &command);
    tmux.wait_for("to interrupt");

    tmux.submit("/login");
    tmux.wait_for("Select authentication method:");
    tmux.keys(&["Down"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("Select provider to configure:");
    tmux.keys(&["-l", "groq"]);
    tmux.wait_for("> groq");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Login to Groq");
    tmux.wait_for("Enter Groq API key");
    tmux.submit("gsk-tui-key-5");
    tmux.wait_for(&format!(
        "Saved API key for Groq. Credentials saved to {}",
        home.auth_path()
    ));
    assert_eq!(
        home.auth_json(),
        json!({"groq": {"type": "api_key", "key": "gsk-tui-key-5"}})
    );
    assert_eq!(mode(&home.agent.join("auth.json")), 0o600);

    tmux.submit("hello");
    tmux.wait_for("groq answers via tui");
    let requests = llm.requests();
    assert_eq!(requests.len(), 1);
    // The fake redacts keys it did not issue: the request carried the stored one.
    assert_eq!(requests[0].headers["authorization"], "<redacted>");

    // Vertex starts with Pi's choice of method; Application Default Credentials asks for
    // the project and location and stores them as the credential's env.
    tmux.submit("/login google-vertex");
    tmux.wait_for("Select Google Vertex AI authentication method:");
    tmux.keys(&["Down"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("Enter Google Cloud project ID");
    tmux.submit("my-proj");
    tmux.wait_for("Enter Google Cloud location");
    tmux.submit("us-central1");
    tmux.wait_for("Saved API key for Google Vertex AI.");
    assert_eq!(
        home.auth_json()["google-vertex"],
        json!({"type": "api_key", "env": {
            "GOOGLE_CLOUD_PROJECT": "my-proj", "GOOGLE_CLOUD_LOCATION": "us-central1"}})
    );
    assert_eq!(home.auth_json()["groq"]["key"], "gsk-tui-key-5");
}

/// Pi 1.6.0 in tmux, by hand: `/login`'s provider list puts its partners Radius and
/// OpenRouter first (marked ✦), then the rest by name; escape in the list goes back to
/// "Select authentication method:", escape at Bedrock's choice of method goes back to the
/// list, escape at a key prompt ends the login with "Failed to save API key for Groq: This
/// operation was aborted". Started without any model, a saved key selects the provider's
/// default model (Groq: openai/gpt-oss-120b), says so, saves it as the default and the next
/// prompt uses it; a later login keeps the selected model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_login_without_a_model_selects_the_providers_default_and_escape_goes_back() {
    if !enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let llm = FakeLlm::start(Script::turns(vec![Turn::text("default model answers")]))
        .await
        .unwrap();
    let home = Home::new();
    std::fs::write(
        home.agent.join("models.json"),
        json!({"providers": {"groq": {"baseUrl": format!("{}/v1", llm.base_url())}}}).to_string(),
    )
    .unwrap();
    let command = format!(
        "env -i HOME={home} PATH=/usr/bin:/bin PI_CODING_AGENT_DIR={agent} {pi} --no-session; \
         echo EXITED-$?; sleep 30",
        home = shell_quote(&home.home),
        agent = shell_quote(&home.agent),
        pi = shell_quote(Path::new(env!("CARGO_BIN_EXE_pi"))),
    );
    let name = format!("pi-login-default-model-{}", std::process::id());
    let tmux = Tmux::start(&name, &home.home, &command);
    tmux.wait_for("to interrupt");

    tmux.submit("/login");
    tmux.wait_for("Select authentication method:");
    tmux.keys(&["Down"]);
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Select provider to configure:");
    let row = |text: &str| {
        screen
            .find(text)
            .unwrap_or_else(|| panic!("no {text:?} in\n{screen}"))
    };
    assert!(row("Radius ✦") < row("OpenRouter ✦"), "{screen}");
    assert!(row("OpenRouter ✦") < row("Amazon Bedrock"), "{screen}");
    assert!(row("Amazon Bedrock") < row("Anthropic"), "{screen}");

    // Escape in the list: back to the method selector.
    tmux.keys(&["Escape"]);
    tmux.wait_until(
        |s| s.contains("Select authentication method:") && !s.contains("Select provider"),
        "the method selector again",
    );
    tmux.keys(&["Down"]);
    tmux.keys(&["Enter"]);
    tmux.wait_for("Select provider to configure:");
    // Escape at Bedrock's choice of method: back to the list.
    tmux.keys(&["-l", "bedrock"]);
    tmux.wait_for("> bedrock");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Select Amazon Bedrock authentication method:");
    tmux.keys(&["Escape"]);
    tmux.wait_until(
        |s| s.contains("Select provider to configure:") && !s.contains("Amazon Bedrock auth"),
        "the provider list again",
    );
    // Escape at the key prompt: the login ends as a failure, nothing stored.
    tmux.keys(&["-l", "groq"]);
    tmux.wait_for("> groq");
    tmux.keys(&["Enter"]);
    tmux.wait_for("Enter Groq API key");
    tmux.keys(&["-l", "gsk-dropped"]);
    tmux.keys(&["Escape"]);
    let screen = tmux.wait_for("Failed to save API key for Groq: This operation was aborted");
    assert!(!screen.contains("Select provider"), "{screen}");
    assert!(!home.agent.join("auth.json").exists());

    // A saved key selects the provider's default model.
    tmux.submit("/login groq");
    tmux.wait_for("Enter Groq API key");
    tmux.submit("gsk-default-7");
    // The line is wider than the pane: the path wraps onto the next line.
    let screen =
        tmux.wait_for("Saved API key for Groq. Selected openai/gpt-oss-120b. Credentials saved to");
    assert!(screen.contains(&home.auth_path()), "{screen}");
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(home.agent.join("settings.json")).unwrap())
            .unwrap();
    assert_eq!(settings["defaultProvider"], "groq");
    assert_eq!(settings["defaultModel"], "openai/gpt-oss-120b");

    tmux.submit("hello");
    tmux.wait_for("default model answers");
    let requests = llm.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["model"], "openai/gpt-oss-120b");

    // With a model selected, a login keeps it.
    tmux.submit("/login cerebras");
    tmux.wait_for("Enter Cerebras API key");
    tmux.submit("csk-other");
    tmux.wait_for(&format!(
        "Saved API key for Cerebras. Credentials saved to {}",
        home.auth_path()
    ));
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(home.agent.join("settings.json")).unwrap())
            .unwrap();
    assert_eq!(settings["defaultProvider"], "groq");
}
