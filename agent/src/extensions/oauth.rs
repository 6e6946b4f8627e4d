//! `pi.registerProvider(name, {oauth: {name, login, refreshToken, getApiKey}})`: the
//! provider's login runs in the sidecar. Each such provider gets a
//! [`crate::llm::oauth::extension::ExtensionFlow`] whose calls become sidecar requests
//! (`oauth_login`, `oauth_refresh`, `oauth_api_key`). While a login runs, what it shows comes
//! back as `oauth_event` notifications (the authorize URL, a device code, progress) and what
//! it asks (`onPrompt`, `onManualCodeInput`, `onSelect`) as `oauth_prompt` requests, which
//! the front end's [`Interaction::ask`] answers (`/login`'s dialog, `pi auth login`'s
//! questions).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::{lock, Shared};
use crate::llm::oauth::extension::{self, ExtensionFlow};
use crate::llm::oauth::{AskFn, Interaction, LoginEvent, LoginOption, LoginPrompt};

/// A login in progress: where its events go and where its answers come from.
struct RunningLogin {
    notify: Arc<dyn Fn(LoginEvent) + Send + Sync>,
    input: Option<Arc<tokio::sync::Mutex<mpsc::Receiver<String>>>>,
    ask: Option<AskFn>,
}

/// The logins running in the sidecar and the providers registered for them.
#[derive(Default)]
pub(super) struct OAuthLogins {
    next: AtomicU64,
    running: Mutex<HashMap<String, RunningLogin>>,
    /// The providers this process registered with [`extension::register`].
    providers: Mutex<Vec<String>>,
}

impl OAuthLogins {
    /// An `oauth_event` notification: shown through its login's front end.
    pub(super) fn event(&self, params: &Value) {
        let text = |k: &str| {
            params
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let Some(notify) = lock(&self.running)
            .get(&text("loginId"))
            .map(|l| l.notify.clone())
        else {
            return;
        };
        let event = match text("kind").as_str() {
            "auth" => LoginEvent::AuthUrl {
                url: text("url"),
                instructions: text("instructions"),
            },
            "device" => LoginEvent::DeviceCode {
                user_code: text("userCode"),
                verification_uri: text("verificationUri"),
            },
            _ => LoginEvent::Progress(text("message")),
        };
        notify(event);
    }

    /// An `oauth_prompt` request (`onPrompt`, `onManualCodeInput`, `onSelect`): the front
    /// end's [`Interaction::ask`] answers it; without one the question is shown as progress
    /// and the next non-empty line answers it (a `select` takes its first choice). `null`
    /// answers a cancelled question, which fails the login.
    pub(super) fn prompt(&self, shared: &Arc<Shared>, params: &Value, id: Value) {
        let login = params.get("loginId").and_then(Value::as_str).unwrap_or("");
        let (notify, input, ask) = match lock(&self.running).get(login) {
            Some(l) => (Some(l.notify.clone()), l.input.clone(), l.ask.clone()),
            None => (None, None, None),
        };
        let prompt = prompt_of(params);
        let shared = shared.clone();
        shared.runtime.clone().spawn(async move {
            let answer = match ask {
                Some(ask) => ask(prompt).await,
                None if prompt.kind == "select" => prompt.options.first().map(|o| o.id.clone()),
                None => {
                    if let (Some(notify), false) = (notify, prompt.message.is_empty()) {
                        notify(LoginEvent::Progress(prompt.message.clone()));
                    }
                    let mut answer = None;
                    if let Some(input) = input {
                        let mut rx = input.lock().await;
                        while let Some(line) = rx.recv().await {
                            if !line.trim().is_empty() {
                                answer = Some(line.trim().to_string());
                                break;
                            }
                        }
                    }
                    answer
                }
            };
            shared.answer_sidecar(id, answer.map_or(Value::Null, Value::String));
        });
    }
}

/// The question of an `oauth_prompt` request.
fn prompt_of(params: &Value) -> LoginPrompt {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    LoginPrompt {
        kind: text(params, "type").unwrap_or_else(|| "text".to_string()),
        message: text(params, "message").unwrap_or_default(),
        placeholder: text(params, "placeholder").filter(|p| !p.is_empty()),
        options: params
            .get("options")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|o| {
                Some(LoginOption {
                    id: text(o, "id")?,
                    label: text(o, "label").or_else(|| text(o, "id"))?,
                    description: text(o, "description"),
                })
            })
            .collect(),
    }
}

/// Registers a flow for every declared provider with `oauth`, and forgets those no longer
/// declared.
pub(super) fn register_flows(shared: &Arc<Shared>, declared: &[Value]) {
    let wanted: Vec<(String, String, bool)> = declared
        .iter()
        .filter_map(|p| {
            let name = p.get("name")?.as_str()?;
            let oauth = p.get("config")?.get("oauth")?;
            let display = oauth.get("name")?.as_str()?;
            let api_key = oauth.get("apiKey").and_then(Value::as_bool) == Some(true);
            Some((name.to_string(), display.to_string(), api_key))
        })
        .collect();
    let mut providers = lock(&shared.oauth_logins.providers);
    for gone in providers
        .iter()
        .filter(|p| !wanted.iter().any(|(w, _, _)| w == *p))
    {
        extension::unregister(gone);
    }
    for (provider, name, api_key) in &wanted {
        extension::register(
            provider,
            Arc::new(SidecarOAuth {
                shared: Arc::downgrade(shared),
                provider: provider.clone(),
                name: name.clone(),
                api_key: *api_key,
            }),
        );
    }
    *providers = wanted.into_iter().map(|(p, _, _)| p).collect();
}

/// One provider's `oauth` functions, called in the sidecar. With `api_key`, the login is a
/// provider object's `auth.apiKey.login(interaction)`: its credential is an API key one
/// (`{type: "api_key", key, env}`), stored as returned.
struct SidecarOAuth {
    shared: Weak<Shared>,
    provider: String,
    name: String,
    api_key: bool,
}

impl SidecarOAuth {
    /// Sends `method` on the sidecar's own runtime (callers may run on another one) and
    /// returns the answer.
    fn call(
        &self,
        method: &'static str,
        params: Value,
    ) -> BoxFuture<'static, Result<Value, String>> {
        let target = self.shared.upgrade().and_then(|s| {
            let sidecar = lock(&s.sidecar).clone();
            sidecar.map(|sidecar| (s, sidecar))
        });
        Box::pin(async move {
            let Some((shared, sidecar)) = target else {
                return Err("The extension that registered this login is not running".to_string());
            };
            let (tx, rx) = tokio::sync::oneshot::channel();
            shared.runtime.spawn(async move {
                let _ = tx.send(sidecar.request(method, params).await);
            });
            rx.await
                .map_err(|_| "the extension process stopped".to_string())?
        })
    }
}

/// An API-key login's credential as auth.json keeps it: `type`, then `key` and `env` when
/// given (Pi's `ApiKeyCredential`).
fn api_key_credential(credentials: Value) -> Value {
    let mut stored = serde_json::Map::new();
    stored.insert("type".into(), "api_key".into());
    for field in ["key", "env"] {
        if let Some(value) = credentials.get(field).filter(|v| !v.is_null()) {
            stored.insert(field.into(), value.clone());
        }
    }
    Value::Object(stored)
}

impl ExtensionFlow for SidecarOAuth {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn login(&self, interaction: Interaction) -> BoxFuture<'static, Result<Value, String>> {
        let Some(shared) = self.shared.upgrade() else {
            return Box::pin(async {
                Err("The extension that registered this login is not running".to_string())
            });
        };
        let logins = &shared.oauth_logins;
        let login_id = format!("l{}", logins.next.fetch_add(1, Ordering::SeqCst));
        lock(&logins.running).insert(
            login_id.clone(),
            RunningLogin {
                notify: interaction.notify.clone(),
                input: interaction
                    .manual_input
                    .map(|rx| Arc::new(tokio::sync::Mutex::new(rx))),
                ask: interaction.ask.clone(),
            },
        );
        let call = self.call(
            "oauth_login",
            json!({"provider": self.provider, "loginId": login_id}),
        );
        let cancel = interaction.cancel.clone();
        let abort = self.call("abort_oauth_login", json!({ "loginId": login_id }));
        let api_key = self.api_key;
        Box::pin(async move {
            let outcome = tokio::select! {
                r = call => r,
                _ = cancel.cancelled() => {
                    let _ = abort.await;
                    Err("Login cancelled".to_string())
                }
            };
            lock(&shared.oauth_logins.running).remove(&login_id);
            let credentials = outcome?
                .get("credentials")
                .cloned()
                .ok_or("login returned no credentials")?;
            if api_key {
                return Ok(api_key_credential(credentials));
            }
            Ok(extension::stored_form(credentials))
        })
    }

    fn refresh(&self, credential: Value) -> BoxFuture<'static, Result<Value, String>> {
        let call = self.call(
            "oauth_refresh",
            json!({"provider": self.provider, "credentials": credential}),
        );
        Box::pin(async move {
            call.await?
                .get("credentials")
                .cloned()
                .ok_or_else(|| "refreshToken returned no credentials".to_string())
        })
    }

    fn api_key(&self, credential: Value) -> BoxFuture<'static, Result<String, String>> {
        let call = self.call(
            "oauth_api_key",
            json!({"provider": self.provider, "credentials": credential}),
        );
        Box::pin(async move {
            call.await?
                .get("key")
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| "getApiKey returned no key".to_string())
        })
    }
}
