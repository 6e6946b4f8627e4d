//! Subscription logins (`/login`, `pi auth login`): OAuth flows for Anthropic (Claude
//! Pro/Max), OpenAI Codex (ChatGPT Plus/Pro), GitHub Copilot, OpenRouter, Kimi Code, xAI,
//! Meta, OpenAI API access through ChatGPT and Radius, as in Pi 1.6.0's `pi-ai/auth/oauth`.
//!
//! A login returns the credential object stored in `auth.json` under the provider id:
//! `{"type": "oauth", "access", "refresh", "expires", …}` plus provider extras (`accountId`
//! for Codex, `enterpriseUrl` / `availableModelIds` for Copilot). [`store`] hands out access
//! tokens for requests and refreshes them, under a lock, when they expire within five
//! minutes.
//!
//! Endpoints are Pi's. For tests only, `PI_TEST_OAUTH_ORIGIN=http://127.0.0.1:PORT`
//! replaces the scheme and host of every authorization endpoint (authorize, token, device
//! code, Copilot token exchange) while keeping the path; Pi has no such knob. Pi's own
//! `PI_OAUTH_CALLBACK_HOST` picks the interface the loopback callback listens on.

pub mod anthropic;
mod callback;
mod device;
pub mod extension;
pub mod github_copilot;
mod kimi_coding;
mod meta;
mod openai_chatgpt;
pub mod openai_codex;
mod openrouter;
pub mod pkce;
pub mod radius;
pub mod store;
mod xai;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use store::{
    oauth_access_token, refresh_if_expiring, refresh_if_expiring_within, remove_credential,
    save_credential, RefreshOutcome,
};

/// A provider with a subscription login.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OAuthProvider {
    /// `anthropic`: Claude Pro/Max.
    Anthropic,
    /// `openai-codex`: ChatGPT Plus/Pro through the Codex backend.
    OpenAiCodex,
    /// `github-copilot`.
    GitHubCopilot,
    /// `openrouter`: a permanent API key from a browser sign-in.
    OpenRouter,
    /// `kimi-coding`: Kimi Code subscription.
    KimiCoding,
    /// `xai`: SuperGrok or X Premium.
    Xai,
    /// `meta`: Muse subscription (a day-long Model API key minted from an identity token).
    Meta,
    /// `openai`: OpenAI API access through a ChatGPT account ("Sign in with ChatGPT").
    OpenAiChatGpt,
    /// `radius`: Earendil's Radius gateway.
    Radius,
}

impl OAuthProvider {
    /// Every provider, in the order `/login` lists them.
    pub const ALL: [OAuthProvider; 9] = [
        OAuthProvider::Anthropic,
        OAuthProvider::OpenAiCodex,
        OAuthProvider::GitHubCopilot,
        OAuthProvider::OpenRouter,
        OAuthProvider::KimiCoding,
        OAuthProvider::Xai,
        OAuthProvider::Meta,
        OAuthProvider::OpenAiChatGpt,
        OAuthProvider::Radius,
    ];

    /// The provider id (the `auth.json` key).
    pub fn id(self) -> &'static str {
        match self {
            OAuthProvider::Anthropic => "anthropic",
            OAuthProvider::OpenAiCodex => "openai-codex",
            OAuthProvider::GitHubCopilot => "github-copilot",
            OAuthProvider::OpenRouter => "openrouter",
            OAuthProvider::KimiCoding => "kimi-coding",
            OAuthProvider::Xai => "xai",
            OAuthProvider::Meta => "meta",
            OAuthProvider::OpenAiChatGpt => "openai",
            OAuthProvider::Radius => "radius",
        }
    }

    /// The name `/login` shows.
    pub fn name(self) -> &'static str {
        match self {
            OAuthProvider::Anthropic => "Anthropic (Claude Pro/Max)",
            OAuthProvider::OpenAiCodex => "OpenAI (ChatGPT Plus/Pro)",
            OAuthProvider::GitHubCopilot => "GitHub Copilot",
            OAuthProvider::OpenRouter => "OpenRouter OAuth",
            OAuthProvider::KimiCoding => "Kimi Code (subscription)",
            OAuthProvider::Xai => "xAI (Grok/X subscription)",
            OAuthProvider::Meta => "Meta (Muse subscription)",
            OAuthProvider::OpenAiChatGpt => "OpenAI (ChatGPT subscription)",
            OAuthProvider::Radius => "Radius",
        }
    }

    /// The provider with this id.
    pub fn from_id(id: &str) -> Option<OAuthProvider> {
        OAuthProvider::ALL.into_iter().find(|p| p.id() == id)
    }

    /// The sign-in methods offered (the first is the default). Copilot has one.
    pub fn methods(self) -> &'static [LoginMethod] {
        match self {
            OAuthProvider::Anthropic => &[LoginMethod::Browser, LoginMethod::CopyCode],
            OAuthProvider::OpenAiCodex | OAuthProvider::Radius => {
                &[LoginMethod::Browser, LoginMethod::DeviceCode]
            }
            OAuthProvider::OpenRouter | OAuthProvider::OpenAiChatGpt => &[LoginMethod::Browser],
            OAuthProvider::GitHubCopilot
            | OAuthProvider::KimiCoding
            | OAuthProvider::Xai
            | OAuthProvider::Meta => &[LoginMethod::DeviceCode],
        }
    }

    /// Runs the login and returns the credential to store.
    pub async fn login(self, interaction: Interaction) -> Result<Value, String> {
        let cancel = interaction.cancel.clone();
        let run = async {
            match self {
                OAuthProvider::Anthropic => anthropic::login(interaction).await,
                OAuthProvider::OpenAiCodex => openai_codex::login(interaction).await,
                OAuthProvider::GitHubCopilot => github_copilot::login(interaction).await,
                OAuthProvider::OpenRouter => openrouter::login(interaction).await,
                OAuthProvider::KimiCoding => kimi_coding::login(interaction).await,
                OAuthProvider::Xai => xai::login(interaction).await,
                OAuthProvider::Meta => meta::login(interaction).await,
                OAuthProvider::OpenAiChatGpt => openai_chatgpt::login(interaction).await,
                OAuthProvider::Radius => radius::login(interaction).await,
            }
        };
        tokio::select! {
            r = run => r,
            _ = cancel.cancelled() => Err("Login cancelled".into()),
        }
    }

    /// Exchanges the stored credential's refresh token for a new credential.
    pub async fn refresh(self, credential: &Value) -> Result<Value, String> {
        let refresh = credential
            .get("refresh")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match self {
            OAuthProvider::Anthropic => anthropic::refresh(refresh).await,
            OAuthProvider::OpenAiCodex => openai_codex::refresh(refresh).await,
            OAuthProvider::GitHubCopilot => {
                let enterprise = credential.get("enterpriseUrl").and_then(Value::as_str);
                github_copilot::refresh(refresh, enterprise).await
            }
            // The key does not expire; there is nothing to refresh.
            OAuthProvider::OpenRouter => Ok(credential.clone()),
            OAuthProvider::KimiCoding => kimi_coding::refresh(refresh).await,
            OAuthProvider::Xai => xai::refresh(refresh).await,
            OAuthProvider::Meta => meta::refresh(refresh).await,
            OAuthProvider::OpenAiChatGpt => openai_chatgpt::refresh(credential).await,
            OAuthProvider::Radius => radius::refresh(refresh).await,
        }
    }
}

/// How to sign in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginMethod {
    /// Open the authorize URL; the browser comes back to a loopback listener (or the user
    /// pastes the redirect URL).
    Browser,
    /// Anthropic's headless login: the user pastes the `code#state` Anthropic shows.
    CopyCode,
    /// A device code entered on the provider's page while Pi polls.
    DeviceCode,
}

impl LoginMethod {
    /// The label in the method picker (Pi's wording).
    pub fn label(self) -> &'static str {
        match self {
            LoginMethod::Browser => "Browser login (default)",
            LoginMethod::CopyCode => "Copy code login (headless)",
            LoginMethod::DeviceCode => "Device code login (headless)",
        }
    }
}

/// What a login tells the user while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginEvent {
    /// Open this URL in a browser.
    AuthUrl {
        /// The authorize URL.
        url: String,
        /// What to do there.
        instructions: String,
    },
    /// Enter this code at this page.
    DeviceCode {
        /// The code to type.
        user_code: String,
        /// The page to type it at.
        verification_uri: String,
    },
    /// A step in progress.
    Progress(String),
}

/// A question a login asks the user (an extension login's `onPrompt`, `onManualCodeInput`
/// and `onSelect`, Pi's `text`, `manual_code` and `select` prompts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginPrompt {
    /// Pi's prompt type: `text`, `manual_code` or `select`.
    pub kind: String,
    /// The question.
    pub message: String,
    /// An example answer (`text`).
    pub placeholder: Option<String>,
    /// The choices of a `select`: the answer is the chosen one's `id`.
    pub options: Vec<LoginOption>,
}

/// One choice of a `select` login prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginOption {
    pub id: String,
    pub label: String,
    pub description: Option<String>,
}

/// How a front end answers a [`LoginPrompt`]: the answer, or `None` when the user cancelled
/// (the login then fails with "Login cancelled").
pub type AskFn = Arc<dyn Fn(LoginPrompt) -> AskFuture + Send + Sync>;

/// A [`LoginPrompt`]'s answer to come.
pub type AskFuture = BoxFuture<'static, Option<String>>;

/// The front end's side of a login: where to report, the user's choices and pasted input.
pub struct Interaction {
    /// The chosen method (one of [`OAuthProvider::methods`]).
    pub method: LoginMethod,
    /// Copilot: a GitHub Enterprise URL or domain (`None` or blank: github.com).
    pub enterprise_domain: Option<String>,
    /// Receives progress, URLs and device codes.
    pub notify: Arc<dyn Fn(LoginEvent) + Send + Sync>,
    /// Lines the user pastes: the redirect URL or code when the browser cannot reach the
    /// loopback listener. `None` when the front end cannot ask.
    pub manual_input: Option<mpsc::Receiver<String>>,
    /// Answers an extension login's questions; without it they take the next pasted line
    /// (a `select` its first choice).
    pub ask: Option<AskFn>,
    /// Cancels the login.
    pub cancel: CancellationToken,
}

impl Interaction {
    fn notify(&self, event: LoginEvent) {
        (self.notify)(event)
    }

    /// The next pasted line, or `None` when nothing can be pasted.
    async fn next_input(&mut self) -> Option<String> {
        match self.manual_input.as_mut() {
            Some(rx) => rx.recv().await,
            None => None,
        }
    }
}

/// `url` with its scheme and host replaced by `PI_TEST_OAUTH_ORIGIN` when that is set
/// (tests only; see the module docs).
pub(crate) fn endpoint(url: &str) -> String {
    let Some(origin) = std::env::var("PI_TEST_OAUTH_ORIGIN")
        .ok()
        .filter(|o| !o.trim().is_empty())
    else {
        return url.to_string();
    };
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let path = rest.find('/').map(|i| &rest[i..]).unwrap_or("");
    format!("{}{path}", origin.trim_end_matches('/'))
}

/// A decoded query parameter of `query` (`a=1&b=2`, no leading `?`).
pub(crate) fn query_param(query: &str, name: &str) -> Option<String> {
    let url = reqwest::Url::parse(&format!("http://x/?{query}")).ok()?;
    url.query_pairs()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// `base?k=v&…` with the pairs URL-encoded.
pub(crate) fn with_query(base: &str, pairs: &[(&str, &str)]) -> String {
    match reqwest::Url::parse(base) {
        Ok(mut url) => {
            url.query_pairs_mut().extend_pairs(pairs.iter().copied());
            url.to_string()
        }
        Err(_) => base.to_string(),
    }
}

/// What a user pasted: a redirect URL, `code#state`, a query string, or a bare code.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct PastedCode {
    pub code: Option<String>,
    pub state: Option<String>,
}

pub(crate) fn parse_pasted(input: &str) -> PastedCode {
    let value = input.trim();
    if value.is_empty() {
        return PastedCode::default();
    }
    if let Ok(url) = reqwest::Url::parse(value) {
        if url.has_host() {
            let get = |name: &str| {
                url.query_pairs()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.into_owned())
            };
            return PastedCode {
                code: get("code"),
                state: get("state"),
            };
        }
    }
    if let Some((code, state)) = value.split_once('#') {
        return PastedCode {
            code: Some(code.to_string()),
            state: Some(state.to_string()),
        };
    }
    if value.contains("code=") {
        return PastedCode {
            code: query_param(value, "code"),
            state: query_param(value, "state"),
        };
    }
    PastedCode {
        code: Some(value.to_string()),
        state: None,
    }
}

/// The HTTP client of the flows (30 s per request, as Pi bounds its token requests).
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap_or_default()
}

/// Reads a JSON response, or an error naming the step, status and body.
pub(crate) async fn read_json(resp: reqwest::Response, what: &str) -> Result<Value, String> {
    let status = resp.status();
    let text = resp
        .text()
        .await
        .map_err(|e| format!("{what} failed: {e}"))?;
    if !status.is_success() {
        return Err(format!("{what} failed ({}): {text}", status.as_u16()));
    }
    serde_json::from_str(&text).map_err(|e| format!("{what} returned invalid JSON: {e}"))
}

/// A form POST's answer, read whatever the status (device-flow token endpoints answer "still
/// pending" with an error status).
pub(crate) struct FormReply {
    pub status: reqwest::StatusCode,
    /// The body as received.
    pub text: String,
}

impl FormReply {
    /// The body as JSON, `Null` when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }
}

/// POSTs a form with `accept: application/json`; `what` names the step in errors.
pub(crate) async fn post_form(
    url: &str,
    fields: &[(&str, &str)],
    what: &str,
) -> Result<FormReply, String> {
    let resp = client()
        .post(url)
        .header("accept", "application/json")
        .form(fields)
        .send()
        .await
        .map_err(|e| format!("{what} failed: {e}"))?;
    let status = resp.status();
    let text = resp
        .text()
        .await
        .map_err(|e| format!("{what} failed: {e}"))?;
    Ok(FormReply { status, text })
}

/// An http(s) URL a server sent, normalized; anything else (a `file:` URL, a custom scheme)
/// is refused, since the user is sent there.
pub(crate) fn web_url(raw: &str) -> Option<String> {
    reqwest::Url::parse(raw)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .map(|u| u.to_string())
}

/// Milliseconds since the epoch.
pub(crate) fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as f64)
        .unwrap_or(0.0)
}

/// Waits for the browser's callback or a pasted line, whichever comes first; without a
/// listener only the pasted line counts. Returns `(code, state)`; the state is `None`
/// when it came back through the listener (which checked it).
pub(crate) async fn callback_or_paste(
    interaction: &mut Interaction,
    server: Option<&mut callback::CallbackServer>,
) -> Result<PastedCode, String> {
    enum Got {
        Callback(Result<String, String>),
        Line(Option<String>),
    }
    let Some(server) = server else {
        loop {
            match interaction.next_input().await {
                Some(line) if line.trim().is_empty() => continue,
                Some(line) => return Ok(parse_pasted(&line)),
                None => {
                    return Err(
                        "The OAuth callback port is in use and no code can be pasted".into(),
                    )
                }
            }
        }
    };
    let mut input_open = interaction.manual_input.is_some();
    loop {
        let got = tokio::select! {
            code = server.wait() => Got::Callback(code),
            line = interaction.next_input(), if input_open => Got::Line(line),
        };
        match got {
            Got::Callback(code) => {
                return Ok(PastedCode {
                    code: Some(code?),
                    state: None,
                })
            }
            Got::Line(Some(line)) if line.trim().is_empty() => {}
            Got::Line(Some(line)) => return Ok(parse_pasted(&line)),
            // The front end stopped offering input: only the browser can finish now.
            Got::Line(None) => input_open = false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pasted_codes_in_every_shape() {
        let p = parse_pasted("http://localhost:53692/callback?code=abc&state=xyz");
        assert_eq!(p.code.as_deref(), Some("abc"));
        assert_eq!(p.state.as_deref(), Some("xyz"));
        let p = parse_pasted("abc#xyz");
        assert_eq!(
            (p.code.as_deref(), p.state.as_deref()),
            (Some("abc"), Some("xyz"))
        );
        let p = parse_pasted("code=a%20b&state=s");
        assert_eq!(
            (p.code.as_deref(), p.state.as_deref()),
            (Some("a b"), Some("s"))
        );
        assert_eq!(parse_pasted("  plain ").code.as_deref(), Some("plain"));
        assert_eq!(parse_pasted(" "), PastedCode::default());
    }

    #[test]
    fn query_helpers_round_trip() {
        let url = with_query(
            "https://claude.ai/oauth/authorize",
            &[("scope", "a b"), ("x", "&")],
        );
        assert_eq!(url, "https://claude.ai/oauth/authorize?scope=a+b&x=%26");
        let q = url.split_once('?').map(|(_, q)| q).unwrap_or("");
        assert_eq!(query_param(q, "scope").as_deref(), Some("a b"));
        assert_eq!(query_param(q, "x").as_deref(), Some("&"));
        assert_eq!(
            OAuthProvider::from_id("openai-codex"),
            Some(OAuthProvider::OpenAiCodex)
        );
        assert_eq!(
            OAuthProvider::from_id("openai"),
            Some(OAuthProvider::OpenAiChatGpt)
        );
        assert_eq!(OAuthProvider::from_id("openai-chatgpt"), None);
    }
}
