//! `/login` and `/logout` in the interactive mode: the provider picker, the sign-in running
//! off the UI thread (its authorize URL, device code and progress shown as notices), and the
//! credential saved to auth.json. Requests read auth.json when they are made, so a login
//! takes effect with the next prompt.
//!
//! After `/login radius` the account's catalog is fetched and replaces the `radius` models,
//! and, unless a global MCP server already uses the login, a dialog asks whether to
//! configure the Radius MCP server in `mcp.json` (Pi's question; "Yes" writes it, as
//! `pi auth login radius` does without asking, and reloads).
//!
//! `/login` opens Pi's "Select authentication method:" (an account, an API key, Radius),
//! then the providers of that kind; `/login <provider>` asks the method first when the
//! provider takes both. API keys are asked in [`super::api_key_login`]'s dialog and stored
//! as `pi auth login` stores them.
//!
//! Differences from Pi: the sign-in method is the provider's default (browser; device code
//! for Copilot, which has no other); `/login github-copilot <domain>` gives a GitHub
//! Enterprise domain instead of a prompt; a redirect URL cannot be pasted into the editor
//! (use `pi auth login` for headless logins); the browser is not opened for you; after
//! `/login radius` the default model is chosen once the catalog is read, so the "Logged in"
//! notice comes after the catalog refresh rather than before it. What a login shows is also
//! given as notices; only an extension login's questions open Pi's login dialog.

use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use pi_agent::llm::llama_cpp;
use pi_agent::llm::oauth::{self, Interaction, LoginEvent, OAuthProvider};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::api_key_login::{
    ApiKeyForm, LoginDialog, LoginQuestion, LoginReply, ProviderPicker, ProviderRow,
};
use super::app::{App, Effect, Msg};
use super::dialogs::{Confirm, Dialog};
use super::driver::{AgentDriver, ModelInfo};
use super::transcript::Item;
use crate::commands::api_key_flow;

/// `/login` without a provider: Pi's "Select authentication method:" (an account, an API
/// key, or Radius directly).
pub fn picker() -> Dialog {
    Dialog::Confirm(Confirm {
        title: "Select authentication method:".into(),
        message: String::new(),
        options: vec![
            (
                ACCOUNT_LABEL.into(),
                Some(Effect::LoginProviders { api_key: false }),
            ),
            (
                API_KEY_LABEL.into(),
                Some(Effect::LoginProviders { api_key: true }),
            ),
            (
                format!("Sign in with {}", OAuthProvider::Radius.name()),
                Some(Effect::AccountLogin(OAuthProvider::Radius.id().into())),
            ),
        ],
        cancelled: String::new(),
        selected: 0,
    })
}

const ACCOUNT_LABEL: &str = "Sign in with an account";
const API_KEY_LABEL: &str = "Sign in with an API key";

/// The account option's label for a provider that also takes an API key (Pi's
/// `loginLabel`, else "Sign in with an account").
fn account_label(id: &str) -> &'static str {
    match id {
        "kimi-coding" => "Sign in with Kimi Code",
        "openrouter" => "Sign in with OpenRouter",
        "meta" => "Sign in with Meta",
        "xai" => "Sign in with SuperGrok or X Premium",
        "openai" => "Sign in with ChatGPT",
        _ => ACCOUNT_LABEL,
    }
}

/// "Select provider to configure:": the account sign-ins, or the providers that take an
/// API key (with the llama.cpp router, whose login is its URL and optional key).
pub fn open_providers(app: &mut App, api_key: bool) {
    let rows = if api_key {
        pi_agent::llm::catalog::builtin_catalog()
            .providers
            .iter()
            .filter(|p| p.api_key_login.is_some())
            .map(|p| ProviderRow {
                name: p.name.clone(),
                id: p.id.clone(),
                effect: Effect::ApiKeyLogin {
                    provider: p.id.clone(),
                    from_list: true,
                },
            })
            .chain([ProviderRow {
                name: llama_cpp::PROVIDER_ID.into(),
                id: llama_cpp::PROVIDER_ID.into(),
                effect: Effect::Login(llama_cpp::PROVIDER_ID.into()),
            }])
            .collect()
    } else {
        OAuthProvider::ALL
            .iter()
            .map(|p| ProviderRow {
                name: p.name().into(),
                id: p.id().into(),
                effect: Effect::AccountLogin(p.id().into()),
            })
            // Providers extensions register with `oauth` (Pi lists them with the accounts).
            .chain(
                oauth::extension::registered()
                    .into_iter()
                    .map(|(id, name)| ProviderRow {
                        name,
                        effect: Effect::AccountLogin(id.clone()),
                        id,
                    }),
            )
            .collect()
    };
    app.dialog = Some(Dialog::Login(Box::new(LoginDialog::Providers(
        ProviderPicker::new(rows),
    ))));
}

/// "Login to <provider>" with its API-key questions; `from_list` when it was picked from
/// the provider list (escape at a choice of method goes back to it, as in Pi).
pub fn open_api_key_form(app: &mut App, id: &str, from_list: bool) {
    let Some(provider) = pi_agent::llm::catalog::builtin_catalog().provider(id) else {
        return;
    };
    let Some(steps) = api_key_flow::flow(provider) else {
        app.transcript.push(Item::Error(format!(
            "{} has no API key login.",
            provider.name
        )));
        return;
    };
    let back = from_list.then_some(Effect::LoginProviders { api_key: true });
    let form = ApiKeyForm::new(&provider.id, &provider.name, steps, back);
    app.dialog = Some(Dialog::Login(Box::new(LoginDialog::Form(Box::new(form)))));
}

/// Stores an answered API-key login (auth.json, 0600, under the lock), then completes it
/// as Pi does ([`finish_login`]); the next request reads it.
pub fn save_api_key(
    app: &mut App,
    driver: &mut dyn AgentDriver,
    agent_dir: &Path,
    provider: &str,
    name: &str,
    credential: Value,
) {
    match oauth::save_credential(agent_dir, provider, credential) {
        Ok(()) => finish_login(
            app,
            driver,
            agent_dir,
            provider,
            &format!("Saved API key for {name}"),
        ),
        Err(e) => app.transcript.push(Item::Error(format!(
            "Failed to save API key for {name}: {e}"
        ))),
    }
}

/// After a login was stored (Pi's `completeProviderAuthentication`): the model list now
/// includes the provider; when no model was selected yet, the provider's default model is
/// selected and saved as the default (`defaultProvider`/`defaultModel`), and the notice
/// names it. A model already selected is kept, as in Pi.
pub fn finish_login(
    app: &mut App,
    driver: &mut dyn AgentDriver,
    agent_dir: &Path,
    provider: &str,
    action: &str,
) {
    let had_model = app.model.is_some();
    app.models = driver.models();
    let saved_to = agent_dir.join("auth.json");
    let saved_to = saved_to.display();
    if had_model {
        app.notice(format!("{action}. Credentials saved to {saved_to}"));
        return;
    }
    match default_model(app, provider, action) {
        Ok(model) => {
            let id = model.id.clone();
            let mut effects = Vec::new();
            app.set_model(model.clone(), &mut effects);
            driver.set_model(&model);
            let saved = crate::tui::save_setting(agent_dir, "defaultProvider", provider.into())
                .and_then(|()| {
                    crate::tui::save_setting(agent_dir, "defaultModel", id.clone().into())
                });
            app.notice(format!(
                "{action}. Selected {id}. Credentials saved to {saved_to}"
            ));
            if let Err(e) = saved {
                app.transcript.push(Item::Error(format!(
                    "Failed to save the default model: {e}"
                )));
            }
        }
        Err(problem) => {
            app.notice(format!("{action}. Credentials saved to {saved_to}"));
            app.transcript.push(Item::Error(problem));
        }
    }
}

/// The model a login selects (Pi's `defaultModelPerProvider`; Radius catalogs vary by
/// account, so its first model stands in for "balanced"), or Pi's reason why there is none.
fn default_model(app: &App, provider: &str, action: &str) -> Result<ModelInfo, String> {
    let Some(default_id) = pi_agent::config::default_model_for_provider(provider) else {
        return Err(format!(
            "{action}, but no default model is configured for provider \"{provider}\". Use /model to select a model."
        ));
    };
    let mut models = app.models.iter().filter(|m| m.provider == provider);
    let Some(first) = models.clone().next() else {
        return Err(format!(
            "{action}, but no models are available for that provider. Use /model to select a model."
        ));
    };
    match models.find(|m| m.id == default_id) {
        Some(m) => Ok(m.clone()),
        None if provider == OAuthProvider::Radius.id() => Ok(first.clone()),
        None => Err(format!(
            "{action}, but its default model \"{default_id}\" is not available. Use /model to select a model."
        )),
    }
}

/// `/login <provider> [domain]`: the provider by id or name (ignoring case); one that takes
/// both an account and an API key asks which first, as Pi does.
pub fn start(app: &mut App, agent_dir: &Path, arg: &str, tx: mpsc::Sender<Msg>) {
    let mut words = arg.split_whitespace();
    let reference = words.next().unwrap_or("");
    if reference == llama_cpp::PROVIDER_ID {
        let rest: Vec<&str> = words.collect();
        super::llama_view::login(app, agent_dir, &rest, tx);
        return;
    }
    let wanted = reference.to_lowercase();
    let provider = pi_agent::llm::catalog::builtin_catalog()
        .providers
        .iter()
        .find(|p| p.id.to_lowercase() == wanted || p.name.to_lowercase() == wanted);
    let Some(provider) = provider else {
        return start_account(app, agent_dir, arg, tx);
    };
    let account = OAuthProvider::from_id(&provider.id).filter(|_| provider.oauth);
    let api_key = provider.api_key_login.is_some();
    let rest: Vec<&str> = words.collect();
    let account_arg = std::iter::once(provider.id.as_str())
        .chain(rest)
        .collect::<Vec<_>>()
        .join(" ");
    match (account, api_key) {
        (Some(_), true) => {
            app.dialog = Some(Dialog::Confirm(Confirm {
                title: format!("Select authentication method for {}:", provider.name),
                message: String::new(),
                options: vec![
                    (
                        account_label(&provider.id).into(),
                        Some(Effect::AccountLogin(account_arg)),
                    ),
                    (
                        API_KEY_LABEL.into(),
                        Some(Effect::ApiKeyLogin {
                            provider: provider.id.clone(),
                            from_list: false,
                        }),
                    ),
                ],
                cancelled: String::new(),
                selected: 0,
            }))
        }
        (Some(_), false) => start_account(app, agent_dir, &account_arg, tx),
        (None, true) => open_api_key_form(app, &provider.id, false),
        (None, false) => app.transcript.push(Item::Error(format!(
            "{} is configured outside pi.",
            provider.name
        ))),
    }
}

/// Signs in to an account (`<provider id> [enterprise domain]`), off the UI thread.
pub fn start_account(app: &mut App, agent_dir: &Path, arg: &str, tx: mpsc::Sender<Msg>) {
    let mut words = arg.split_whitespace();
    let id = words.next().unwrap_or("");
    if OAuthProvider::from_id(id).is_none() {
        if let Some(flow) = oauth::extension::lookup(id) {
            start_extension_login(app, agent_dir, id, flow, tx);
            return;
        }
    }
    let Some(provider) = OAuthProvider::from_id(id) else {
        let known: Vec<&str> = OAuthProvider::ALL.iter().map(|p| p.id()).collect();
        app.transcript.push(Item::Error(format!(
            "Unknown provider \"{id}\" for account sign-in. Available: {}",
            known.join(", ")
        )));
        return;
    };
    let enterprise_domain = words.next().map(str::to_string);
    app.notice(format!("Logging in to {}…", provider.name()));
    let agent_dir = agent_dir.to_path_buf();
    std::thread::spawn(move || {
        let say = tx.clone();
        let notify = Arc::new(move |event: LoginEvent| {
            let text = match event {
                LoginEvent::AuthUrl { url, instructions } => format!("{instructions}\n{url}"),
                LoginEvent::DeviceCode {
                    user_code,
                    verification_uri,
                } => format!("Enter code {user_code} at {verification_uri}"),
                LoginEvent::Progress(message) => message,
            };
            let _ = say.send(Msg::Notice(text));
        });
        let result = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
            .and_then(|rt| {
                rt.block_on(provider.login(Interaction {
                    method: provider.methods()[0],
                    enterprise_domain,
                    notify,
                    manual_input: None,
                    ask: None,
                    cancel: CancellationToken::new(),
                }))
            })
            .and_then(|credential| oauth::save_credential(&agent_dir, provider.id(), credential));
        match result {
            Ok(()) => {
                // Radius's catalog comes first, so the default model can be chosen from it.
                if provider == OAuthProvider::Radius {
                    let _ = tx.send(Msg::Radius(after_radius_login(&agent_dir)));
                }
                let _ = tx.send(Msg::LoggedIn {
                    provider: provider.id().into(),
                    action: format!("Logged in to {}", provider.name()),
                });
            }
            Err(e) => {
                let _ = tx.send(Msg::Notice(format!("Login failed: {e}")));
            }
        }
    });
}

/// `/login` for a provider an extension registered with `oauth`: its `login(callbacks)`
/// runs in the extension process; what it shows becomes notices, and what it asks
/// (`onPrompt`, `onManualCodeInput`, `onSelect`) opens Pi's login dialog over the editor
/// with what the login showed so far ([`LoginQuestion`]). Escape there cancels the login
/// (nothing is reported, as in Pi); a failure is Pi's "Failed to login to <provider>: …".
fn start_extension_login(
    app: &mut App,
    agent_dir: &Path,
    id: &str,
    flow: Arc<dyn oauth::extension::ExtensionFlow>,
    tx: mpsc::Sender<Msg>,
) {
    let name = flow.name();
    app.notice(format!("Logging in to {name}…"));
    let agent_dir = agent_dir.to_path_buf();
    let id = id.to_string();
    std::thread::spawn(move || {
        // What Pi's login dialog holds: an authorize URL or device code replaces what was
        // shown, progress and answered questions are added.
        let shown: Arc<Mutex<Vec<String>>> = Arc::default();
        let say = tx.clone();
        let notify = {
            let shown = shown.clone();
            Arc::new(move |event: LoginEvent| {
                let mut lines = shown.lock().unwrap_or_else(|e| e.into_inner());
                let text = match event {
                    LoginEvent::AuthUrl { url, instructions } => {
                        *lines = vec![url.clone()];
                        if !instructions.is_empty() {
                            lines.push(instructions.clone());
                        }
                        format!("{instructions}\n{url}")
                    }
                    LoginEvent::DeviceCode {
                        user_code,
                        verification_uri,
                    } => {
                        *lines = vec![verification_uri.clone(), format!("Enter code: {user_code}")];
                        format!("Enter code {user_code} at {verification_uri}")
                    }
                    LoginEvent::Progress(message) => {
                        lines.push(message.clone());
                        message
                    }
                };
                let _ = say.send(Msg::Notice(text));
            })
        };
        let ask: oauth::AskFn = {
            let title = format!("Login to {name}");
            let tx = tx.clone();
            Arc::new(move |prompt: oauth::LoginPrompt| -> oauth::AskFuture {
                let (reply, answer) = LoginReply::channel();
                let question = LoginQuestion {
                    title: title.clone(),
                    shown: shown.lock().unwrap_or_else(|e| e.into_inner()).clone(),
                    prompt: prompt.clone(),
                    input: String::new(),
                    selected: 0,
                    reply,
                };
                let _ = tx.send(Msg::LoginQuestion(Box::new(question)));
                let shown = shown.clone();
                Box::pin(async move {
                    let answer = answer.await.ok().flatten()?;
                    // As Pi's dialog, an answered question stays above what comes next.
                    if prompt.kind != "select" {
                        let mut lines = shown.lock().unwrap_or_else(|e| e.into_inner());
                        lines.push(prompt.message.clone());
                        lines.push(format!("> {answer}"));
                    }
                    Some(answer)
                })
            })
        };
        let result = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
            .and_then(|rt| {
                rt.block_on(flow.login(Interaction {
                    method: oauth::LoginMethod::Browser,
                    enterprise_domain: None,
                    notify,
                    manual_input: None,
                    ask: Some(ask),
                    cancel: CancellationToken::new(),
                }))
            })
            .and_then(|credential| oauth::save_credential(&agent_dir, &id, credential));
        let text = match &result {
            Ok(()) => format!(
                "Logged in to {name}. Credentials saved to {}",
                agent_dir.join("auth.json").display()
            ),
            Err(e) if is_cancelled(e) => return,
            Err(e) => format!("Failed to login to {name}: {e}"),
        };
        let _ = tx.send(Msg::Notice(text));
        if result.is_ok()
            && crate::modes::extensions::refresh_models_blocking(
                &agent_dir,
                Some(std::slice::from_ref(&id)),
                crate::modes::radius_refresh::network_allowed(),
            )
            .changed
        {
            // Pi refreshes the provider's catalog after a login, without network under
            // `PI_OFFLINE` (its `refreshModels` and `oauth.modifyModels` now see the
            // credential).
            let _ = tx.send(Msg::ModelsChanged);
        }
    });
}

/// Whether a login failed because its question was cancelled (Pi reports nothing then).
fn is_cancelled(error: &str) -> bool {
    error == "Login cancelled" || error.ends_with(": Login cancelled")
}

/// What the UI thread does after a Radius sign-in or catalog refresh.
#[derive(Debug, Clone, PartialEq)]
pub struct RadiusUpdate {
    /// The gateway's catalog, when it was read.
    models: Option<Vec<pi_agent::llm::Model>>,
    /// A catalog refresh that failed: said as a notice.
    error: Option<String>,
    /// The mcp.json to offer the Radius MCP server in.
    offer_mcp: Option<std::path::PathBuf>,
}

impl RadiusUpdate {
    /// A fresh catalog, nothing to ask.
    pub fn catalog(models: Vec<pi_agent::llm::Model>) -> RadiusUpdate {
        RadiusUpdate {
            models: Some(models),
            error: None,
            offer_mcp: None,
        }
    }
}

/// Off the UI thread, after `/login radius`: the catalog (the same refresh as
/// `pi auth login radius`) and whether mcp.json lacks a server using the login.
fn after_radius_login(agent_dir: &Path) -> RadiusUpdate {
    let (models, error) = match pi_agent::llm::radius_catalog::refresh_blocking(agent_dir) {
        Ok(models) => (models, None),
        Err(e) => (
            None,
            Some(format!("Could not refresh the Radius model catalog: {e}")),
        ),
    };
    let offer_mcp = crate::commands::radius_mcp::plan(
        OAuthProvider::Radius.id(),
        oauth::radius::MCP_URL,
        agent_dir,
    )
    .map(|(path, _, _)| path);
    RadiusUpdate {
        models,
        error,
        offer_mcp,
    }
}

/// On the UI thread: the catalog goes to the driver, the MCP question opens.
pub fn on_radius(app: &mut App, update: RadiusUpdate) -> Vec<Effect> {
    if let Some(error) = update.error {
        app.notice(error);
    }
    if let Some(path) = update.offer_mcp {
        app.dialog = Some(Dialog::Confirm(Confirm {
            title: format!("Configure Radius MCP in {}?", path.display()),
            message: String::new(),
            options: vec![
                ("Yes".into(), Some(Effect::ConfigureRadiusMcp)),
                ("No".into(), None),
            ],
            cancelled: String::new(),
            selected: 0,
        }));
    }
    update
        .models
        .map(Effect::SetRadiusModels)
        .into_iter()
        .collect()
}

/// "Yes": the Radius MCP server in the global mcp.json, planned again now (the file may
/// have changed while the question was open). `true` when mcp.json was written.
pub fn configure_radius_mcp(app: &mut App, agent_dir: &Path) -> bool {
    let provider = OAuthProvider::Radius;
    let Some(plan) =
        crate::commands::radius_mcp::plan(provider.id(), oauth::radius::MCP_URL, agent_dir)
    else {
        return false;
    };
    match crate::commands::radius_mcp::write(plan, provider.name()) {
        Ok(line) => {
            app.notice(line);
            true
        }
        Err(line) => {
            app.transcript.push(Item::Error(line));
            false
        }
    }
}

/// `/logout` without a provider: pick one of the stored credentials.
pub fn open_logout(app: &mut App, agent_dir: &Path) {
    let providers: Vec<String> = pi_agent::config::AuthStore::load(agent_dir)
        .map(|s| s.providers().into_iter().map(str::to_string).collect())
        .unwrap_or_default();
    if providers.is_empty() {
        app.notice("No stored credentials to remove");
        return;
    }
    app.dialog = Some(Dialog::Confirm(Confirm {
        title: "Select provider to logout:".into(),
        message: String::new(),
        options: providers
            .into_iter()
            .map(|p| (p.clone(), Some(Effect::Logout(p))))
            .collect(),
        cancelled: String::new(),
        selected: 0,
    }));
}

/// Removes `provider`'s stored credential.
pub fn logout(app: &mut App, agent_dir: &Path, provider: &str) {
    match oauth::remove_credential(agent_dir, provider) {
        Ok(true) => app.notice(format!("Logged out of {provider}")),
        Ok(false) => app.notice(format!("No stored credentials for {provider}")),
        Err(e) => app
            .transcript
            .push(Item::Error(format!("Logout failed: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::tui::app::update;
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn key(code: KeyCode) -> Msg {
        Msg::Key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn run(app: &mut App, line: &str) -> Vec<Effect> {
        for c in line.chars() {
            update(app, key(KeyCode::Char(c)));
        }
        update(app, key(KeyCode::Enter))
    }

    #[test]
    fn login_picker_lists_providers_and_logout_removes() {
        let mut app = App::new(std::path::PathBuf::from("/work/project"));
        assert!(run(&mut app, "/login").is_empty());
        // Pi's first question: the kind of login.
        match &app.dialog {
            Some(Dialog::Confirm(c)) => {
                let names: Vec<&str> = c.options.iter().map(|(n, _)| n.as_str()).collect();
                assert_eq!(c.title, "Select authentication method:");
                assert_eq!(
                    names,
                    [
                        "Sign in with an account",
                        "Sign in with an API key",
                        "Sign in with Radius"
                    ]
                );
            }
            other => panic!("no picker: {other:?}"),
        }
        update(&mut app, key(KeyCode::Down));
        assert_eq!(
            update(&mut app, key(KeyCode::Enter)),
            vec![Effect::LoginProviders { api_key: true }]
        );
        // The account providers: Pi's partners first (marked), then by name; the search
        // narrows them.
        open_providers(&mut app, false);
        let Some(Dialog::Login(d)) = &app.dialog else {
            panic!("no provider list")
        };
        let view = d.view();
        assert_eq!(view.title, "Select provider to configure:");
        assert_eq!(view.options[0].0, "Radius ✦");
        assert_eq!(view.options[1].0, "OpenRouter OAuth ✦");
        assert_eq!(view.options[2].0, "Anthropic (Claude Pro/Max)");
        assert_eq!(view.options.last().unwrap().0, "(1/9)");
        for c in "copilot".chars() {
            update(&mut app, key(KeyCode::Char(c)));
        }
        assert_eq!(
            update(&mut app, key(KeyCode::Enter)),
            vec![Effect::AccountLogin("github-copilot".into())]
        );
        assert_eq!(
            run(&mut app, "/login github-copilot ghe.example.com"),
            vec![Effect::Login("github-copilot ghe.example.com".into())]
        );
        assert_eq!(run(&mut app, "/logout"), vec![Effect::OpenLogout]);

        // The effects themselves, on a real auth.json.
        let tmp = tempfile::tempdir().unwrap();
        let (tx, _rx) = mpsc::channel();
        start(&mut app, tmp.path(), "nope", tx);
        open_logout(&mut app, tmp.path());
        assert!(app.dialog.is_none());
        oauth::save_credential(
            tmp.path(),
            "anthropic",
            serde_json::json!({"type": "oauth", "access": "a", "refresh": "r", "expires": 1}),
        )
        .unwrap();
        open_logout(&mut app, tmp.path());
        let Some(Dialog::Confirm(c)) = &app.dialog else {
            panic!("no logout picker")
        };
        assert_eq!(c.options[0].1, Some(Effect::Logout("anthropic".into())));
        logout(&mut app, tmp.path(), "anthropic");
        assert!(pi_agent::config::AuthStore::load(tmp.path())
            .unwrap()
            .providers()
            .is_empty());
    }
}
