//! `pi auth login <provider>` for a provider an extension registers with `oauth`
//! (`pi.registerProvider(name, {oauth: {name, login, refreshToken, getApiKey}})`): the
//! global extensions are loaded without a session, the extension's `login(callbacks)` runs in
//! their process, the authorize URL, device code and progress go to stderr and its questions
//! are asked there in Pi's `pi auth login` form (`<message> (<placeholder>): `), answered
//! from stdin one line each. An `onSelect` is Pi's choice of sign-in method: its first option
//! unless `--no-browser`, which takes the only other one or asks among the others by number.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pi_agent::extensions::{extension_paths, DiscoverOptions, Extensions, StartOptions, UiMode};
use pi_agent::llm::oauth::{
    self, extension, AskFn, AskFuture, Interaction, LoginEvent, LoginMethod, LoginPrompt,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Signs in through an extension's login; `None` when no loaded extension registers a
/// login for `reference` (matched by provider id or display name, ignoring case).
pub(super) fn login(reference: &str, browser: bool) -> Option<Result<(), String>> {
    let dir = super::auth::agent_dir();
    let cwd = std::env::current_dir().ok()?;
    let paths = extension_paths(&DiscoverOptions {
        agent_dir: &dir,
        cwd: &cwd,
        project_trusted: false,
        no_extensions: false,
        cli_paths: &[],
        cli_packages: &[],
        global_setting: None,
        project_setting: None,
    });
    let paths: Vec<PathBuf> = paths.into_iter().map(|(path, _)| path).collect();
    if paths.is_empty() {
        return None;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .ok()?;
    let wanted = reference.trim().to_lowercase();
    runtime.block_on(async move {
        let ext = Extensions::start(StartOptions {
            paths,
            provenance: Default::default(),
            cwd,
            mode: UiMode::Print,
            records: None,
            active_tools: Vec::new(),
            flags: Vec::new(),
        })
        .await
        .ok()?;
        ext.register_logins();
        let found = extension::registered()
            .into_iter()
            .find(|(id, name)| id.to_lowercase() == wanted || name.to_lowercase() == wanted);
        let Some((id, name)) = found else {
            ext.shutdown().await;
            return None;
        };
        let outcome = run_login(&id, &name, &dir, browser).await;
        if outcome.is_ok() {
            // As Pi after a login: the provider's catalog refresh (its `refreshModels`).
            ext.refresh_models(&dir, true, Some(std::slice::from_ref(&id)))
                .await;
        }
        ext.shutdown().await;
        Some(outcome)
    })
}

async fn run_login(
    id: &str,
    name: &str,
    dir: &std::path::Path,
    browser: bool,
) -> Result<(), String> {
    let flow = extension::lookup(id).ok_or("the extension's login is gone")?;
    // stdin lines answer the login's questions.
    let (tx, rx) = mpsc::channel::<String>(4);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    let lines = Arc::new(tokio::sync::Mutex::new(rx));
    // The methods a browser sign-in skipped, named after the authorize URL as Pi does.
    let skipped: Arc<Mutex<Vec<String>>> = Arc::default();
    let rerun = format!("\"pi auth login {id} --no-browser\"");
    let notify = {
        let skipped = skipped.clone();
        Arc::new(move |event: LoginEvent| match event {
            LoginEvent::AuthUrl { url, instructions } => {
                eprintln!("Open this URL to sign in:\n{url}");
                if !instructions.is_empty() {
                    eprintln!("{instructions}");
                }
                let skipped = skipped.lock().unwrap_or_else(|e| e.into_inner()).clone();
                match skipped.as_slice() {
                    [] => {}
                    [only] => eprintln!("To use \"{only}\" instead, run {rerun}"),
                    more => {
                        let labels: Vec<String> = more.iter().map(|l| format!("\"{l}\"")).collect();
                        eprintln!(
                            "Other sign-in methods: {}. Run {rerun} to choose one.",
                            labels.join(", ")
                        );
                    }
                }
            }
            LoginEvent::DeviceCode {
                user_code,
                verification_uri,
            } => eprintln!("Enter code {user_code} at {verification_uri}"),
            LoginEvent::Progress(message) => eprintln!("{message}"),
        })
    };
    let ask: AskFn = Arc::new(move |prompt: LoginPrompt| -> AskFuture {
        let lines = lines.clone();
        let skipped = skipped.clone();
        Box::pin(async move { answer(prompt, &lines, &skipped, browser).await })
    });
    let credential = flow
        .login(Interaction {
            method: LoginMethod::Browser,
            enterprise_domain: None,
            notify,
            manual_input: None,
            ask: Some(ask),
            cancel: CancellationToken::new(),
        })
        .await?;
    oauth::save_credential(dir, id, credential)?;
    println!(
        "Logged in to {name}. Credentials saved to {}",
        dir.join("auth.json").display()
    );
    Ok(())
}

type Lines = tokio::sync::Mutex<mpsc::Receiver<String>>;

/// One question asked on stderr and answered from stdin (`None` at the end of the input).
async fn question(message: &str, lines: &Lines) -> Option<String> {
    eprint!("{message}");
    let _ = std::io::stderr().flush();
    lines.lock().await.recv().await
}

/// The answer to one of the login's questions.
async fn answer(
    prompt: LoginPrompt,
    lines: &Lines,
    skipped: &Mutex<Vec<String>>,
    browser: bool,
) -> Option<String> {
    if prompt.kind != "select" {
        let placeholder = prompt
            .placeholder
            .map(|p| format!(" ({p})"))
            .unwrap_or_default();
        return question(&format!("{}{placeholder}: ", prompt.message), lines).await;
    }
    let (first, others) = prompt.options.split_first()?;
    if browser {
        *skipped.lock().unwrap_or_else(|e| e.into_inner()) =
            others.iter().map(|o| o.label.clone()).collect();
        return Some(first.id.clone());
    }
    match others {
        // Only the browser sign-in: it is still taken.
        [] => Some(first.id.clone()),
        [only] => {
            eprintln!("{} {}", prompt.message, only.label);
            Some(only.id.clone())
        }
        more => {
            eprintln!("{}", prompt.message);
            for (i, option) in more.iter().enumerate() {
                let description = option
                    .description
                    .as_deref()
                    .map(|d| format!(" - {d}"))
                    .unwrap_or_default();
                eprintln!("  {}. {}{description}", i + 1, option.label);
            }
            loop {
                let reply = question(&format!("Select 1-{}: ", more.len()), lines).await?;
                let chosen = reply
                    .trim()
                    .parse::<usize>()
                    .ok()
                    .and_then(|n| n.checked_sub(1))
                    .and_then(|i| more.get(i));
                match chosen {
                    Some(option) => return Some(option.id.clone()),
                    None => eprintln!("Enter a number from 1 to {}.", more.len()),
                }
            }
        }
    }
}
