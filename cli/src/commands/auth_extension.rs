//! `pi auth login <provider>` for a provider an extension registers with `oauth`
//! (`pi.registerProvider(name, {oauth: {name, login, refreshToken, getApiKey}})`): the
//! global extensions are loaded without a session, the extension's `login(callbacks)` runs in
//! their process, the authorize URL, device code and progress go to stderr and its prompts
//! are answered from stdin, one line each, as for the built-in logins.

use std::io::BufRead;
use std::sync::Arc;

use pi_agent::extensions::{extension_paths, DiscoverOptions, Extensions, StartOptions, UiMode};
use pi_agent::llm::oauth::{self, extension, Interaction, LoginEvent, LoginMethod};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Signs in through an extension's login; `None` when no loaded extension registers a
/// login for `reference` (matched by provider id or display name, ignoring case).
pub(super) fn login(reference: &str) -> Option<Result<(), String>> {
    let dir = super::auth::agent_dir();
    let cwd = std::env::current_dir().ok()?;
    let paths = extension_paths(&DiscoverOptions {
        agent_dir: &dir,
        cwd: &cwd,
        project_trusted: false,
        no_extensions: false,
        cli_paths: &[],
        global_setting: None,
        project_setting: None,
    });
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
        let outcome = run_login(&id, &name, &dir).await;
        ext.shutdown().await;
        Some(outcome)
    })
}

async fn run_login(id: &str, name: &str, dir: &std::path::Path) -> Result<(), String> {
    let flow = extension::lookup(id).ok_or("the extension's login is gone")?;
    // stdin lines answer the login's prompts (a pasted code or redirect URL).
    let (tx, rx) = mpsc::channel::<String>(4);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    let notify = Arc::new(|event: LoginEvent| match event {
        LoginEvent::AuthUrl { url, instructions } => {
            eprintln!("Open this URL to sign in:\n{url}");
            if !instructions.is_empty() {
                eprintln!("{instructions}");
            }
        }
        LoginEvent::DeviceCode {
            user_code,
            verification_uri,
        } => eprintln!("Enter code {user_code} at {verification_uri}"),
        LoginEvent::Progress(message) => eprintln!("{message}"),
    });
    let credential = flow
        .login(Interaction {
            method: LoginMethod::Browser,
            enterprise_domain: None,
            notify,
            manual_input: Some(rx),
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
