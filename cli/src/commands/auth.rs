//! `pi auth login <provider> [--no-browser]` and `pi auth logout <provider>`: subscription
//! logins from the shell, without a session (Pi 1.6.0's `pi auth`). The flows live in
//! `pi_agent::llm::oauth`; this is their terminal front end: the authorize URL or device code
//! goes to stderr, answers (a GitHub Enterprise domain, a pasted redirect URL or code) are
//! read from stdin, one per line.
//!
//! `--api-key` (and providers without account sign-in) ask for an API key instead:
//! [`super::auth_api_key`]. `print-api-key` / `print-bearer-token` / `check` are
//! [`super::auth_credentials`]. As in Pi, stdin and stdout must be a terminal (the tests run
//! the command in a pseudo-terminal); `pi auth login llama.cpp` reads its answers from any
//! stdin.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use pi_agent::llm::catalog::BuiltinProvider;
use pi_agent::llm::llama_cpp;
use pi_agent::llm::oauth::{self, Interaction, LoginEvent, LoginMethod, OAuthProvider};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// `pi auth …`: the raw arguments.
#[derive(Debug, Args)]
#[command(disable_help_flag = true)]
pub struct AuthArgs {
    /// login or logout, and their options.
    #[arg(allow_hyphen_values = true, trailing_var_arg = true, num_args = 0..)]
    pub args: Vec<String>,
}

const HELP: &str = "Usage:
  pi auth login <provider> [--api-key] [--no-browser]
  pi auth logout <provider>
  pi auth print-api-key [--provider <provider>] [--model <model>]
  pi auth print-bearer-token [--provider <provider>] [--model <model>] [--min-expiry <duration>]
  pi auth check [--provider <provider>] [--model <model>] [--json] [--credentials] [--no-refresh]

Log in to and out of model providers, print their credentials for external clients, or check that they are ready.
Credentials are stored in ~/.pi/agent/auth.json.

Commands:
  login <provider>        Sign in with an account in the browser, or save an API key, then exit
  logout <provider>       Remove the stored credentials; environment variables and models.json stay
  print-api-key           Print the resolved API key
  print-bearer-token      Print a resolved OAuth bearer token (refreshes if expired)
  check                   Print ready, not_ready, or invalid; exit with 0, 1, or 2

Options for print-api-key, print-bearer-token, and check (at least one is required):
  --provider <provider>   Resolve credentials for a provider
  --model <model>         Resolve credentials from a model

Options for login:
  --api-key               Save an API key instead of signing in with an account
  --no-browser            Do not open a browser; use another sign-in method, e.g. device code

Other options:
  --min-expiry <duration> Minimum remaining token lifetime for print-bearer-token, e.g. 30m or 1h
  --json                  Print the check result as JSON
  --credentials           Emit the credential from check, or include it in JSON output
  --no-refresh            Do not refresh expired OAuth credentials during check";

pub(super) fn agent_dir() -> PathBuf {
    pi_agent::config::agent_dir(
        &|k| std::env::var(k).ok(),
        pi_agent::config::home().as_deref(),
    )
}

/// Runs `pi auth <args>`; returns the exit code.
pub fn run(args: AuthArgs) -> anyhow::Result<i32> {
    let args = args.args;
    let Some(command) = args.first() else {
        println!("{HELP}");
        return Ok(0);
    };
    if command == "help" || args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{HELP}");
        return Ok(0);
    }
    if let Some(kind) = super::auth_credentials::Kind::from_word(command) {
        return Ok(super::auth_credentials::run(kind, &args[1..]));
    }
    let outcome = match command.as_str() {
        "login" => parse_login(&args[1..]).and_then(|request| login(&request)),
        "logout" => match args[1..].iter().find(|a| !a.starts_with("--")) {
            Some(p) => logout(p),
            None => Err("Usage: pi auth logout <provider>".to_string()),
        },
        other => Err(format!(
            "Error: Unknown auth command \"{other}\". Use \"pi auth login\", \"pi auth logout\", \
             \"pi auth print-api-key\", \"pi auth print-bearer-token\", or \"pi auth check\"."
        )),
    };
    Ok(match outcome {
        Ok(()) => 0,
        Err(message) => {
            eprintln!("{message}");
            1
        }
    })
}

const LOGIN_SYNOPSIS: &str = "pi auth login <provider> [--api-key] [--no-browser]";

fn login_usage() -> String {
    format!("Usage: {LOGIN_SYNOPSIS}")
}

/// `pi auth login`'s arguments.
struct LoginRequest {
    provider: String,
    api_key: bool,
    browser: bool,
}

/// Pi's rules: one provider, the two flags, nothing else; `--no-browser` only for accounts.
fn parse_login(args: &[String]) -> Result<LoginRequest, String> {
    let mut request = LoginRequest {
        provider: String::new(),
        api_key: false,
        browser: true,
    };
    for arg in args {
        match arg.as_str() {
            "--api-key" => request.api_key = true,
            "--no-browser" => request.browser = false,
            a if a.starts_with('-') || !request.provider.is_empty() => return Err(login_usage()),
            a => request.provider = a.to_string(),
        }
    }
    if request.provider.is_empty() {
        return Err(login_usage());
    }
    if request.api_key && !request.browser {
        return Err(
            "--no-browser only applies to account sign-in; omit it with --api-key.".to_string(),
        );
    }
    Ok(request)
}

/// How a provider is signed in to.
enum AuthType {
    Account(OAuthProvider),
    ApiKey,
}

/// Pi's choice: the account unless `--api-key` asks for a key; a provider without account
/// sign-in takes its API key.
fn select_auth_type(provider: &BuiltinProvider, api_key: bool) -> Result<AuthType, String> {
    let account = OAuthProvider::from_id(&provider.id).filter(|_| provider.oauth);
    match account {
        Some(account) if !api_key => return Ok(AuthType::Account(account)),
        _ => {}
    }
    if provider.api_key_login.is_some() {
        return Ok(AuthType::ApiKey);
    }
    if api_key && account.is_some() {
        return Err(format!(
            "{} has no API key login. Omit --api-key to sign in.",
            provider.name
        ));
    }
    Err(format!(
        "{} is configured outside pi (ambient credentials).",
        provider.name
    ))
}

/// Providers `pi auth login` knows, matched by id or display name, ignoring case.
fn find_provider(reference: &str) -> Option<&'static BuiltinProvider> {
    let wanted = reference.trim().to_lowercase();
    pi_agent::llm::catalog::builtin_catalog()
        .providers
        .iter()
        .find(|p| p.id.to_lowercase() == wanted || p.name.to_lowercase() == wanted)
}

fn unknown_provider(reference: &str) -> String {
    let mut ids: Vec<&str> = pi_agent::llm::catalog::builtin_catalog()
        .providers
        .iter()
        .filter(|p| p.oauth || p.api_key_login.is_some())
        .map(|p| p.id.as_str())
        .collect();
    ids.sort_unstable();
    let shown: String = reference
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    format!(
        "Unknown provider \"{shown}\".\nProviders: {}",
        ids.join(", ")
    )
}

fn logout(provider: &str) -> Result<(), String> {
    let dir = agent_dir();
    if oauth::remove_credential(&dir, provider)? {
        println!("Logged out of {provider}.");
    } else {
        println!("No stored credentials for {provider}.");
    }
    Ok(())
}

fn login(request: &LoginRequest) -> Result<(), String> {
    if request.provider == llama_cpp::PROVIDER_ID {
        return login_llama();
    }
    let Some(provider) = find_provider(&request.provider) else {
        // Not one of Pi's: an extension's `registerProvider({ oauth })` may sign in to it
        // (its prompts are answered from stdin, terminal or not).
        if !request.api_key {
            if let Some(done) = super::auth_extension::login(&request.provider, request.browser) {
                return done;
            }
        }
        return Err(unknown_provider(&request.provider));
    };
    // Pi checks this after finding the provider and before anything else: every login may
    // ask a question, and a secret is read in raw mode.
    if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
        return Err(format!(
            "\"{LOGIN_SYNOPSIS}\" requires an interactive terminal"
        ));
    }
    let dir = agent_dir();
    match select_auth_type(provider, request.api_key)? {
        AuthType::Account(account) => login_account(account, !request.browser)?,
        AuthType::ApiKey => {
            super::auth_api_key::login(provider, &dir)?;
            println!(
                "Saved API key for {}. Credentials saved to {}",
                provider.name,
                dir.join("auth.json").display()
            );
        }
    }
    if provider.id == pi_agent::llm::radius_catalog::PROVIDER_ID {
        refresh_radius_catalog(&dir);
        super::radius_mcp::configure(
            &provider.id,
            &provider.name,
            pi_agent::llm::oauth::radius::MCP_URL,
            &dir,
        );
    }
    Ok(())
}

/// Signs in to `provider`'s account and stores the tokens.
fn login_account(provider: OAuthProvider, no_browser: bool) -> Result<(), String> {
    let methods = provider.methods();
    let method = if no_browser {
        *methods.last().unwrap_or(&LoginMethod::DeviceCode)
    } else {
        methods[0]
    };
    // stdin lines: the enterprise domain first (Copilot), then any pasted code.
    let (tx, mut rx) = mpsc::channel::<String>(4);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    let interactive = std::io::stderr().is_terminal();
    let open_browser = interactive && method == LoginMethod::Browser;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let credential = runtime.block_on(async move {
        let enterprise_domain = if provider == OAuthProvider::GitHubCopilot {
            eprint!("GitHub Enterprise URL/domain (blank for github.com): ");
            let _ = std::io::stderr().flush();
            rx.recv().await
        } else {
            None
        };
        let notify = Arc::new(move |event: LoginEvent| match event {
            LoginEvent::AuthUrl { url, instructions } => {
                eprintln!("Open this URL to sign in:\n{url}\n{instructions}");
                if open_browser {
                    open_url(&url);
                }
            }
            LoginEvent::DeviceCode {
                user_code,
                verification_uri,
            } => eprintln!("Enter code {user_code} at {verification_uri}"),
            LoginEvent::Progress(message) => eprintln!("{message}"),
        });
        provider
            .login(Interaction {
                method,
                enterprise_domain,
                notify,
                manual_input: Some(rx),
                ask: None,
                cancel: CancellationToken::new(),
            })
            .await
    })?;
    let dir = agent_dir();
    oauth::save_credential(&dir, provider.id(), credential)?;
    println!(
        "Logged in to {}. Credentials saved to {}",
        provider.name(),
        dir.join("auth.json").display()
    );
    Ok(())
}

/// After a Radius login: the account's catalog from the gateway, kept for offline
/// start-ups; a failure is reported and the login stands.
fn refresh_radius_catalog(agent_dir: &std::path::Path) {
    match pi_agent::llm::radius_catalog::refresh_blocking(agent_dir) {
        Ok(_) => {}
        // Pi's words when its 15 s limit passes.
        Err(e) if e == pi_agent::llm::radius_catalog::TIMED_OUT => {
            println!("The Radius model catalog refresh timed out; pi refreshes it on next start.")
        }
        Err(e) => eprintln!("Could not refresh the Radius model catalog: {e}"),
    }
}

/// `pi auth login llama.cpp`: the router URL (blank: `LLAMA_BASE_URL`, else Pi's default)
/// and an optional key, one line each; the router must answer before anything is stored.
fn login_llama() -> Result<(), String> {
    let default = std::env::var("LLAMA_BASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| llama_cpp::DEFAULT_SERVER_URL.to_string());
    let mut lines = std::io::stdin().lock().lines();
    let mut ask = |prompt: &str| -> String {
        eprint!("{prompt}");
        let _ = std::io::stderr().flush();
        lines
            .next()
            .and_then(Result::ok)
            .map(|l| l.trim().to_string())
            .unwrap_or_default()
    };
    let entered = ask(&format!("llama.cpp server URL ({default}): "));
    let url = llama_cpp::normalize_server_url(if entered.is_empty() {
        &default
    } else {
        &entered
    })?;
    let key = ask("API key (optional): ");
    let key = (!key.is_empty()).then_some(key);
    let conn = llama_cpp::Connection {
        server_url: url.clone(),
        api_key: key.clone(),
        source: "stored credential",
    };
    let client = conn.client(std::time::Duration::from_secs(15));
    llama_cpp::block_on(move || Box::pin(async move { client.list().await.map(drop) }))
        .ok_or("the connection check did not run")?
        .map_err(|e| format!("Login failed: {e}"))?;
    let dir = agent_dir();
    pi_agent::config::AuthStore::load(&dir)
        .and_then(|mut store| {
            store.set(
                llama_cpp::PROVIDER_ID,
                llama_cpp::credential(&url, key.as_deref()),
            )
        })
        .map_err(|e| e.to_string())?;
    println!(
        "Logged in to llama.cpp at {url}. Credentials saved to {}",
        dir.join("auth.json").display()
    );
    Ok(())
}

/// Opens `url` in the desktop's browser, quietly doing nothing when none can be started.
fn open_url(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let _ = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}
