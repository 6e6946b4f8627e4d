//! A fake OAuth authorization server for the subscription-login tests, on 127.0.0.1. It
//! speaks the endpoints of Pi's three login flows (the client points at it with
//! `PI_TEST_OAUTH_ORIGIN`, which keeps each endpoint's path):
//!
//! * `GET /oauth/authorize` (Anthropic and OpenAI): the "browser" — answers 302 to the
//!   request's `redirect_uri` with a fresh code and the request's `state`, remembering the
//!   PKCE challenge;
//! * `POST /v1/oauth/token` (Anthropic, JSON) and `POST /oauth/token` (OpenAI, form):
//!   `authorization_code` grants (code, redirect URI and PKCE verifier checked) and
//!   `refresh_token` grants (the refresh token must be the latest issued: rotation);
//! * `POST /api/accounts/deviceauth/usercode` and `…/deviceauth/token` (OpenAI device code);
//! * `POST /login/device/code`, `POST /login/oauth/access_token` (GitHub device flow) and
//!   `GET /copilot_internal/v2/token` (Copilot token exchange; the token names
//!   `proxy-ep=<copilot_proxy>` so requests go to the fake LLM);
//! * `GET /auth` and `POST /api/v1/auth/keys` (OpenRouter: PKCE, a permanent key);
//! * `POST /oauth2/device/code`, `POST /oauth2/token` (xAI device flow and refresh, form) and
//!   `POST /api/oauth/device_authorization`, `POST /api/oauth/token` (Kimi Code, the same);
//! * `POST /oidc/device/authorization/`, `POST /oidc/device/token/` (Meta's identity token)
//!   and `POST /muse-code/key` (a Model API key minted for that identity token);
//! * `GET /api/accounts/authorize` and `POST /api/accounts/oauth/token` (Sign in with
//!   ChatGPT: the authorize redirect also carries the client id registered for this login,
//!   which the token requests must use; tokens are for the `resource` api.openai.com/v1 and
//!   grant `chatgpt.tokens.use.direct`);
//! * Radius (client `pi-gateway`): `GET /v1/oauth` (discovery naming `/radius/authorize`
//!   here), `GET /radius/authorize`, `POST /v1/oauth/device` and form posts to
//!   `/v1/oauth/token` (code, device and refresh grants), and `GET /v1/config` (the
//!   account's catalog, served at the `copilot_proxy` address, i.e. the fake LLM).
//!
//! Device codes are approved by [`FakeAuthServer::approve`], as a user would on the page.
//! Issued access tokens start with `fake-access-token-` (the fake LLM keeps such bearer
//! tokens in its request log) and refresh tokens with `fake-refresh-`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Map, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::{form_decode, read_request, Request};

/// Anthropic's (Claude Code's) client id, which the fake expects.
pub const ANTHROPIC_CLIENT_ID: &str = "9d1c250a-e61b-44d9-88ed-5944d1962f5e";
/// The Codex CLI's client id.
pub const OPENAI_CLIENT_ID: &str = "app_EMoamEEZ73f0CkXaXp7hrann";
/// The Copilot plugin's client id.
pub const GITHUB_CLIENT_ID: &str = "Iv1.b507a08c87ecfe98";
/// The ChatGPT account id inside issued OpenAI tokens.
pub const CHATGPT_ACCOUNT_ID: &str = "acct-fake-123";
/// xAI's client id (Pi's).
pub const XAI_CLIENT_ID: &str = "b1a00492-073a-47ea-816f-4c329264a828";
/// Meta's client id (Pi's).
pub const META_CLIENT_ID: &str = "1031625952748946";
/// The dynamic-registration client id of Sign in with ChatGPT (Pi's).
pub const CHATGPT_DYNAMIC_CLIENT_ID: &str = "dynamic_agent_client";
/// The scopes a ChatGPT sign-in asks for (Pi's).
pub const CHATGPT_SCOPE: &str =
    "openid profile email offline_access resource.invoke chatgpt.tokens.use.direct";
/// Radius's client id (Pi's).
pub const RADIUS_CLIENT_ID: &str = "pi-gateway";
/// Kimi Code's client id (Pi's).
pub const KIMI_CLIENT_ID: &str = "17e5f671-d194-4dfb-9706-5516cb48c098";

/// What the fake saw and issued.
#[derive(Debug, Default, Clone)]
pub struct AuthStats {
    /// Authorize requests (their query parameters).
    pub authorizations: Vec<Map<String, Value>>,
    /// Successful `authorization_code` / device grants, by provider (`anthropic`, `openai`,
    /// `github`).
    pub logins: HashMap<String, u32>,
    /// Successful refreshes (Copilot: token exchanges after the first), by provider.
    pub refreshes: HashMap<String, u32>,
    /// Rejected token requests, with the reason.
    pub rejected: Vec<String>,
    /// Every token issued (access and refresh), so tests can look for leaks.
    pub issued: Vec<String>,
    /// Requests for the Radius catalog (`GET /v1/config`) received.
    pub config_requests: u32,
}

#[derive(Default)]
struct State {
    seq: u64,
    /// Lifetime of issued access tokens, seconds.
    expires_in: u64,
    copilot_proxy: String,
    /// How long `GET /v1/config` waits before answering (a slow gateway).
    config_delay: std::time::Duration,
    /// code → (challenge, redirect_uri, provider)
    codes: HashMap<String, (String, String, String)>,
    /// provider → the refresh token that is currently valid.
    refresh: HashMap<String, String>,
    /// user_code → approved?
    device: HashMap<String, bool>,
    /// OpenAI device flow: user_code → (code, verifier) to hand out once approved.
    openai_device: HashMap<String, (String, String)>,
    /// GitHub device_code → user_code.
    github_device: HashMap<String, String>,
    /// xAI and Kimi device_code → (user_code, provider).
    rfc8628_device: HashMap<String, (String, String)>,
    github_tokens: Vec<String>,
    /// ChatGPT sign-ins: code → the client id registered for it; the latest issued client.
    chatgpt_clients: HashMap<String, String>,
    chatgpt_client: String,
    /// `http://127.0.0.1:PORT`, for pages the fake names itself.
    origin: String,
    stats: AuthStats,
}

/// A running fake authorization server; stops when dropped.
pub struct FakeAuthServer {
    port: u16,
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl Drop for FakeAuthServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl FakeAuthServer {
    /// Starts on an ephemeral port. Copilot tokens name `copilot_proxy` (`127.0.0.1:PORT`
    /// of the fake LLM) as their API endpoint.
    pub async fn start(copilot_proxy: &str) -> std::io::Result<FakeAuthServer> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let port = listener.local_addr()?.port();
        let state = Arc::new(Mutex::new(State {
            expires_in: 3600,
            copilot_proxy: copilot_proxy.to_string(),
            origin: format!("http://127.0.0.1:{port}"),
            ..State::default()
        }));
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    continue;
                };
                let st = st.clone();
                tokio::spawn(async move {
                    let _ = handle(sock, st).await;
                });
            }
        });
        Ok(FakeAuthServer { port, state, task })
    }

    /// `http://127.0.0.1:PORT` (the value for `PI_TEST_OAUTH_ORIGIN`).
    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Lifetime of access tokens issued from now on.
    pub fn set_expires_in(&self, seconds: u64) {
        lock(&self.state).expires_in = seconds;
    }

    /// Makes the Radius catalog (`GET /v1/config`) answer only after `delay`.
    pub fn set_config_delay(&self, delay: std::time::Duration) {
        lock(&self.state).config_delay = delay;
    }

    /// Approves a device code, as the user would on the verification page.
    pub fn approve(&self, user_code: &str) {
        lock(&self.state).device.insert(user_code.to_string(), true);
    }

    /// What happened so far.
    pub fn stats(&self) -> AuthStats {
        lock(&self.state).stats.clone()
    }
}

fn challenge_of(verifier: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    URL_SAFE_NO_PAD.encode(digest.as_ref())
}

fn parse_query(q: &str) -> Map<String, Value> {
    q.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (form_decode(k), Value::String(form_decode(v)))
        })
        .collect()
}

fn header<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

async fn reply(
    sock: &mut TcpStream,
    status: u16,
    body: &Value,
    extra: &str,
) -> std::io::Result<()> {
    let data = body.to_string();
    let reason = match status {
        200 => "OK",
        302 => "Found",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        _ => "Not Found",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        data.len()
    );
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(data.as_bytes()).await?;
    sock.flush().await
}

fn s<'a>(m: &'a Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or("")
}

/// An OpenAI-style access token: a JWT whose claim names the ChatGPT account.
fn openai_jwt(seq: u64) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
    let claims = json!({"https://api.openai.com/auth": {"chatgpt_account_id": CHATGPT_ACCOUNT_ID}, "n": seq});
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    format!("fake-access-token-{header}.{payload}.sig{seq}")
}

/// Issues an access/refresh pair for `provider` and makes the refresh token the valid one.
fn issue(st: &mut State, provider: &str) -> Value {
    st.seq += 1;
    let seq = st.seq;
    let access = match provider {
        "anthropic" => format!("fake-access-token-sk-ant-oat01-{seq}"),
        "openai" => openai_jwt(seq),
        other => format!("fake-access-token-{other}-{seq}"),
    };
    let refresh = format!("fake-refresh-{provider}-{seq}");
    st.refresh.insert(provider.to_string(), refresh.clone());
    st.stats.issued.push(access.clone());
    st.stats.issued.push(refresh.clone());
    json!({"access_token": access, "refresh_token": refresh, "expires_in": st.expires_in,
        "token_type": "Bearer"})
}

async fn handle(mut sock: TcpStream, state: Arc<Mutex<State>>) -> std::io::Result<()> {
    let Some(req) = read_request(&mut sock).await? else {
        return Ok(());
    };
    let (path, query) = req.path.split_once('?').unwrap_or((req.path.as_str(), ""));
    let body_text = String::from_utf8_lossy(&req.body).to_string();
    let form = parse_query(&body_text);
    let json_body: Map<String, Value> = serde_json::from_str(&body_text).unwrap_or_default();
    match (req.method.as_str(), path) {
        ("GET", "/oauth/authorize") => {
            let q = parse_query(query);
            let provider = match s(&q, "client_id") {
                ANTHROPIC_CLIENT_ID => "anthropic",
                OPENAI_CLIENT_ID => "openai",
                _ => return reply(&mut sock, 400, &json!({"error": "unknown client"}), "").await,
            };
            let location = {
                let mut st = lock(&state);
                st.seq += 1;
                let code = format!("code-{provider}-{}", st.seq);
                st.codes.insert(
                    code.clone(),
                    (
                        s(&q, "code_challenge").to_string(),
                        s(&q, "redirect_uri").to_string(),
                        provider.to_string(),
                    ),
                );
                st.stats.authorizations.push(q.clone());
                let state_param: String = s(&q, "state")
                    .bytes()
                    .map(|b| match b {
                        b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                            (b as char).to_string()
                        }
                        other => format!("%{other:02X}"),
                    })
                    .collect();
                format!("{}?code={code}&state={state_param}", s(&q, "redirect_uri"))
            };
            reply(
                &mut sock,
                302,
                &json!({}),
                &format!("Location: {location}\r\n"),
            )
            .await
        }
        ("POST", "/v1/oauth/token") if s(&form, "client_id") == RADIUS_CLIENT_ID => {
            let (status, body, _) = radius_token(&mut lock(&state), &form);
            reply(&mut sock, status, &body, "").await
        }
        ("POST", "/v1/oauth/token") | ("POST", "/oauth/token") => {
            let anthropic = path == "/v1/oauth/token";
            let (provider, params) = if anthropic {
                ("anthropic", json_body)
            } else {
                ("openai", form)
            };
            let (status, body) = {
                let mut st = lock(&state);
                let expected_client = if anthropic {
                    ANTHROPIC_CLIENT_ID
                } else {
                    OPENAI_CLIENT_ID
                };
                if s(&params, "client_id") != expected_client {
                    (
                        400,
                        reject_reason(&mut st, format!("{provider}: wrong client_id")),
                    )
                } else {
                    match s(&params, "grant_type") {
                        "authorization_code" => match st.codes.remove(s(&params, "code")) {
                            Some((challenge, redirect, p))
                                if p == provider
                                    && redirect == s(&params, "redirect_uri")
                                    && challenge == challenge_of(s(&params, "code_verifier")) =>
                            {
                                *st.stats.logins.entry(provider.into()).or_default() += 1;
                                (200, issue(&mut st, provider))
                            }
                            _ => (
                                400,
                                reject_reason(
                                    &mut st,
                                    format!("{provider}: bad code, redirect or verifier"),
                                ),
                            ),
                        },
                        "refresh_token" => {
                            if st.refresh.get(provider).map(String::as_str)
                                == Some(s(&params, "refresh_token"))
                            {
                                *st.stats.refreshes.entry(provider.into()).or_default() += 1;
                                (200, issue(&mut st, provider))
                            } else {
                                (
                                    400,
                                    reject_reason(
                                        &mut st,
                                        format!("{provider}: stale refresh token"),
                                    ),
                                )
                            }
                        }
                        other => (
                            400,
                            reject_reason(&mut st, format!("{provider}: grant {other}")),
                        ),
                    }
                }
            };
            reply(&mut sock, status, &body, "").await
        }
        ("POST", "/api/accounts/deviceauth/usercode") => {
            let body = {
                let mut st = lock(&state);
                st.seq += 1;
                let user_code = format!("OAI-{}", st.seq);
                let verifier = format!("device-verifier-{}", st.seq);
                let code = format!("code-openai-device-{}", st.seq);
                st.codes.insert(
                    code.clone(),
                    (
                        challenge_of(&verifier),
                        "https://auth.openai.com/deviceauth/callback".into(),
                        "openai".into(),
                    ),
                );
                st.openai_device.insert(user_code.clone(), (code, verifier));
                st.device.insert(user_code.clone(), false);
                json!({"device_auth_id": format!("dev-{}", st.seq), "user_code": user_code, "interval": "1"})
            };
            reply(&mut sock, 200, &body, "").await
        }
        ("POST", "/api/accounts/deviceauth/token") => {
            let user_code = s(&json_body, "user_code").to_string();
            let answer = {
                let st = lock(&state);
                match (st.device.get(&user_code), st.openai_device.get(&user_code)) {
                    (Some(true), Some((code, verifier))) => {
                        Some(json!({"authorization_code": code, "code_verifier": verifier}))
                    }
                    _ => None,
                }
            };
            match answer {
                Some(body) => reply(&mut sock, 200, &body, "").await,
                None => {
                    reply(
                        &mut sock,
                        403,
                        &json!({"error": {"code": "deviceauth_authorization_pending"}}),
                        "",
                    )
                    .await
                }
            }
        }
        ("POST", "/login/device/code") => {
            let body = {
                let mut st = lock(&state);
                if s(&form, "client_id") != GITHUB_CLIENT_ID {
                    json!({"error": "unknown client"})
                } else {
                    st.seq += 1;
                    let user_code = format!("GH-{}", st.seq);
                    let device_code = format!("device-{}", st.seq);
                    st.github_device
                        .insert(device_code.clone(), user_code.clone());
                    st.device.insert(user_code.clone(), false);
                    json!({"device_code": device_code, "user_code": user_code,
                        "verification_uri": "https://github.com/login/device",
                        "interval": 1, "expires_in": 900})
                }
            };
            reply(&mut sock, 200, &body, "").await
        }
        ("POST", "/login/oauth/access_token") => {
            let body = {
                let mut st = lock(&state);
                let approved = st
                    .github_device
                    .get(s(&form, "device_code"))
                    .and_then(|u| st.device.get(u))
                    .copied();
                match approved {
                    Some(true) => {
                        st.seq += 1;
                        let token = format!("fake-github-token-{}", st.seq);
                        st.github_tokens.push(token.clone());
                        st.stats.issued.push(token.clone());
                        *st.stats.logins.entry("github".into()).or_default() += 1;
                        json!({"access_token": token, "token_type": "bearer", "scope": "read:user"})
                    }
                    Some(false) => json!({"error": "authorization_pending"}),
                    None => {
                        json!({"error": "expired_token", "error_description": "unknown device code"})
                    }
                }
            };
            reply(&mut sock, 200, &body, "").await
        }
        ("GET", "/copilot_internal/v2/token") => {
            let bearer = header(&req, "authorization")
                .and_then(|v| v.strip_prefix("Bearer "))
                .unwrap_or("")
                .to_string();
            let (status, body) = {
                let mut st = lock(&state);
                if !st.github_tokens.contains(&bearer) {
                    (
                        401,
                        reject_reason(&mut st, "copilot: unknown GitHub token".into()),
                    )
                } else {
                    st.seq += 1;
                    let exchanges = st
                        .stats
                        .issued
                        .iter()
                        .filter(|t| t.contains("copilot"))
                        .count();
                    if exchanges > 0 {
                        *st.stats.refreshes.entry("github".into()).or_default() += 1;
                    }
                    let now = SystemTimeSecs::now();
                    let token = format!(
                        "fake-access-token-copilot-{};exp={};proxy-ep={}",
                        st.seq,
                        now + st.expires_in,
                        st.copilot_proxy
                    );
                    st.stats.issued.push(token.clone());
                    (
                        200,
                        json!({"token": token, "expires_at": now + st.expires_in}),
                    )
                }
            };
            reply(&mut sock, status, &body, "").await
        }
        (method, path) => {
            if (method, path) == ("GET", "/v1/config") {
                let delay = {
                    let mut st = lock(&state);
                    st.stats.config_requests += 1;
                    st.config_delay
                };
                tokio::time::sleep(delay).await;
            }
            let found = {
                let mut st = lock(&state);
                let bearer = header(&req, "authorization")
                    .and_then(|v| v.strip_prefix("Bearer "))
                    .unwrap_or("");
                more_flows(&mut st, bearer, method, path, query, &form, &json_body)
            };
            match found {
                Some((status, body, extra)) => reply(&mut sock, status, &body, &extra).await,
                None => {
                    reply(
                        &mut sock,
                        404,
                        &json!({"error": format!("unknown path {}", req.path)}),
                        "",
                    )
                    .await
                }
            }
        }
    }
}

/// The OpenRouter, xAI and Kimi endpoints: `(status, body, extra headers)`, or `None` for an
/// unknown route.
fn more_flows(
    st: &mut State,
    bearer: &str,
    method: &str,
    path: &str,
    query: &str,
    form: &Map<String, Value>,
    json_body: &Map<String, Value>,
) -> Option<(u16, Value, String)> {
    let found = match (method, path) {
        // OpenRouter's authorize page: back to `callback_url` with a code (no state).
        ("GET", "/auth") => {
            let q = parse_query(query);
            st.seq += 1;
            let code = format!("code-openrouter-{}", st.seq);
            let callback = s(&q, "callback_url").to_string();
            st.codes.insert(
                code.clone(),
                (
                    s(&q, "code_challenge").to_string(),
                    callback.clone(),
                    "openrouter".into(),
                ),
            );
            st.stats.authorizations.push(q);
            (
                302,
                json!({}),
                format!("Location: {callback}?code={code}\r\n"),
            )
        }
        ("POST", "/api/v1/auth/keys") => match st.codes.remove(s(json_body, "code")) {
            Some((challenge, _, provider))
                if provider == "openrouter"
                    && s(json_body, "code_challenge_method") == "S256"
                    && challenge == challenge_of(s(json_body, "code_verifier")) =>
            {
                st.seq += 1;
                let key = format!("fake-access-token-openrouter-key-{}", st.seq);
                st.stats.issued.push(key.clone());
                *st.stats.logins.entry("openrouter".into()).or_default() += 1;
                (
                    200,
                    json!({"key": key, "user_id": "user-fake"}),
                    String::new(),
                )
            }
            _ => {
                st.stats
                    .rejected
                    .push("openrouter: bad code or verifier".into());
                (
                    400,
                    json!({"error": {"message": "Invalid code"}}),
                    String::new(),
                )
            }
        },
        ("POST", "/oauth2/device/code") => device_code(st, form, XAI_CLIENT_ID, "xai", "XAI")?,
        ("POST", "/api/oauth/device_authorization") => {
            device_code(st, form, KIMI_CLIENT_ID, "kimi", "KIMI")?
        }
        ("POST", "/oauth2/token") => device_token(st, form, XAI_CLIENT_ID, "xai"),
        ("POST", "/oidc/device/authorization/") => {
            device_code(st, form, META_CLIENT_ID, "meta", "META")?
        }
        ("POST", "/oidc/device/token/") => device_token(st, form, META_CLIENT_ID, "meta"),
        ("POST", "/muse-code/key") => mint_meta_key(st, bearer),
        ("GET", "/api/accounts/authorize") => chatgpt_authorize(st, query),
        ("GET", "/v1/oauth") => (
            200,
            json!({"authorizationEndpoint": format!("{}/radius/authorize", st.origin)}),
            String::new(),
        ),
        ("GET", "/radius/authorize") => radius_authorize(st, query),
        // The gateway's catalog: its models at the fake LLM (the `copilot_proxy` address).
        ("GET", "/v1/config") => {
            if !bearer.starts_with("fake-access-token-radius-") {
                let why = reject_reason(st, "radius: config without a Radius token".into());
                (401, why, String::new())
            } else {
                let model = |id: &str, name: &str| {
                    json!({"id": id, "name": name, "reasoning": true, "input": ["text"],
                        "cost": {"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0},
                        "contextWindow": 200000, "maxTokens": 32000})
                };
                (
                    200,
                    json!({"baseUrl": format!("http://{}", st.copilot_proxy),
                        "models": [model("balanced", "Balanced"), model("org-only", "Org Only")]}),
                    String::new(),
                )
            }
        }
        ("POST", "/v1/oauth/device") => {
            device_code(st, form, RADIUS_CLIENT_ID, "radius", "RADIUS")?
        }
        ("POST", "/api/accounts/oauth/token") => chatgpt_token(st, form),
        ("POST", "/api/oauth/token") => device_token(st, form, KIMI_CLIENT_ID, "kimi"),
        _ => return None,
    };
    Some(found)
}

/// An RFC 8628 device authorization for `provider`; its user code starts with `prefix`.
fn device_code(
    st: &mut State,
    form: &Map<String, Value>,
    client_id: &str,
    provider: &str,
    prefix: &str,
) -> Option<(u16, Value, String)> {
    if s(form, "client_id") != client_id {
        return Some((400, json!({"error": "invalid_client"}), String::new()));
    }
    st.seq += 1;
    let user_code = format!("{prefix}-{}", st.seq);
    let device_code = format!("device-{provider}-{}", st.seq);
    st.rfc8628_device
        .insert(device_code.clone(), (user_code.clone(), provider.into()));
    st.device.insert(user_code.clone(), false);
    let page = format!("https://{provider}.example/device");
    Some((
        200,
        json!({"device_code": device_code, "user_code": user_code,
            "verification_uri": page,
            "verification_uri_complete": format!("{page}?user_code={user_code}"),
            "interval": 1, "expires_in": 900}),
        String::new(),
    ))
}

/// The token endpoint of an RFC 8628 provider: device grants (pending until approved) and
/// refresh grants (the latest refresh token only).
fn device_token(
    st: &mut State,
    form: &Map<String, Value>,
    client_id: &str,
    provider: &str,
) -> (u16, Value, String) {
    let answer = |status, body| (status, body, String::new());
    if s(form, "client_id") != client_id {
        return answer(400, json!({"error": "invalid_client"}));
    }
    match s(form, "grant_type") {
        "urn:ietf:params:oauth:grant-type:device_code" => {
            let approved = st
                .rfc8628_device
                .get(s(form, "device_code"))
                .filter(|(_, p)| p == provider)
                .and_then(|(user_code, _)| st.device.get(user_code))
                .copied();
            match approved {
                Some(true) => {
                    st.rfc8628_device.remove(s(form, "device_code"));
                    *st.stats.logins.entry(provider.into()).or_default() += 1;
                    answer(200, issue(st, provider))
                }
                Some(false) => answer(400, json!({"error": "authorization_pending"})),
                None => answer(400, json!({"error": "expired_token"})),
            }
        }
        "refresh_token" => {
            if st.refresh.get(provider).map(String::as_str) == Some(s(form, "refresh_token")) {
                *st.stats.refreshes.entry(provider.into()).or_default() += 1;
                answer(200, issue(st, provider))
            } else {
                let why = reject_reason(st, format!("{provider}: stale refresh token"));
                answer(400, why)
            }
        }
        other => {
            let why = reject_reason(st, format!("{provider}: grant {other}"));
            answer(400, why)
        }
    }
}

/// Meta's key minting: only for the identity token the device flow issued last; every mint
/// after the first counts as a refresh.
fn mint_meta_key(st: &mut State, bearer: &str) -> (u16, Value, String) {
    let valid = st.stats.issued.iter().any(|t| t == bearer)
        && bearer.starts_with("fake-access-token-meta-")
        && !bearer.contains("-key-");
    if !valid {
        st.stats
            .rejected
            .push("meta: unknown identity token".into());
        return (
            401,
            json!({"detail": "Invalid identity token"}),
            String::new(),
        );
    }
    st.seq += 1;
    let key = format!("fake-access-token-meta-key-{}", st.seq);
    let minted_before = st.stats.issued.iter().any(|t| t.contains("-meta-key-"));
    if minted_before {
        *st.stats.refreshes.entry("meta".into()).or_default() += 1;
    }
    st.stats.issued.push(key.clone());
    (200, json!({"api_key": key}), String::new())
}

/// Sign in with ChatGPT's authorize page: registers a client for this login and redirects
/// with the code, the state and that client's id.
fn chatgpt_authorize(st: &mut State, query: &str) -> (u16, Value, String) {
    let q = parse_query(query);
    if s(&q, "client_id") != CHATGPT_DYNAMIC_CLIENT_ID || s(&q, "scope") != CHATGPT_SCOPE {
        let why = reject_reason(st, "chatgpt: wrong client or scope".into());
        return (400, why, String::new());
    }
    st.seq += 1;
    let code = format!("code-chatgpt-{}", st.seq);
    let client = format!("app_dyn_{}", st.seq);
    st.codes.insert(
        code.clone(),
        (
            s(&q, "code_challenge").to_string(),
            s(&q, "redirect_uri").to_string(),
            "chatgpt".into(),
        ),
    );
    st.chatgpt_clients.insert(code.clone(), client.clone());
    st.stats.authorizations.push(q.clone());
    let location = format!(
        "{}?code={code}&state={}&client_id={client}",
        s(&q, "redirect_uri"),
        s(&q, "state")
    );
    (302, json!({}), format!("Location: {location}\r\n"))
}

/// Sign in with ChatGPT's token endpoint: code grants (with the client registered for the
/// code) and refresh grants (the latest refresh token and the same client).
fn chatgpt_token(st: &mut State, form: &Map<String, Value>) -> (u16, Value, String) {
    let reject = |st: &mut State, why: &str| {
        let why = reject_reason(st, format!("chatgpt: {why}"));
        (400, why, String::new())
    };
    if s(form, "resource") != "https://api.openai.com/v1" {
        return reject(st, "wrong resource");
    }
    let granted = match s(form, "grant_type") {
        "authorization_code" => {
            let code = s(form, "code");
            let client = st.chatgpt_clients.remove(code);
            match st.codes.remove(code) {
                Some((challenge, redirect, p))
                    if p == "chatgpt"
                        && client.as_deref() == Some(s(form, "client_id"))
                        && redirect == s(form, "redirect_uri")
                        && challenge == challenge_of(s(form, "code_verifier")) =>
                {
                    st.chatgpt_client = s(form, "client_id").to_string();
                    *st.stats.logins.entry("chatgpt".into()).or_default() += 1;
                    true
                }
                _ => return reject(st, "bad code, client, redirect or verifier"),
            }
        }
        "refresh_token" => {
            let current = st.refresh.get("chatgpt").map(String::as_str);
            if current != Some(s(form, "refresh_token"))
                || st.chatgpt_client != s(form, "client_id")
            {
                return reject(st, "stale refresh token or wrong client");
            }
            *st.stats.refreshes.entry("chatgpt".into()).or_default() += 1;
            false
        }
        other => return reject(st, &format!("grant {other}")),
    };
    let mut body = issue(st, "chatgpt");
    body["scope"] = json!(CHATGPT_SCOPE);
    if granted {
        body["id_token"] = json!(format!("fake-id-token-{}", st.seq));
    }
    (200, body, String::new())
}

/// Radius's authorize page: back to `redirect_uri` with a code and the state.
fn radius_authorize(st: &mut State, query: &str) -> (u16, Value, String) {
    let q = parse_query(query);
    if s(&q, "client_id") != RADIUS_CLIENT_ID || s(&q, "scope") != "gateway offline_access" {
        let why = reject_reason(st, "radius: wrong client or scope".into());
        return (400, why, String::new());
    }
    st.seq += 1;
    let code = format!("code-radius-{}", st.seq);
    st.codes.insert(
        code.clone(),
        (
            s(&q, "code_challenge").to_string(),
            s(&q, "redirect_uri").to_string(),
            "radius".into(),
        ),
    );
    st.stats.authorizations.push(q.clone());
    let location = format!(
        "{}?code={code}&state={}",
        s(&q, "redirect_uri"),
        s(&q, "state")
    );
    (302, json!({}), format!("Location: {location}\r\n"))
}

/// Radius's token endpoint: code grants here, device and refresh grants as RFC 8628's.
fn radius_token(st: &mut State, form: &Map<String, Value>) -> (u16, Value, String) {
    if s(form, "grant_type") != "authorization_code" {
        let (status, mut body, extra) = device_token(st, form, RADIUS_CLIENT_ID, "radius");
        if status == 200 {
            body["scope"] = json!("gateway offline_access");
        }
        return (status, body, extra);
    }
    match st.codes.remove(s(form, "code")) {
        Some((challenge, redirect, p))
            if p == "radius"
                && redirect == s(form, "redirect_uri")
                && challenge == challenge_of(s(form, "code_verifier")) =>
        {
            *st.stats.logins.entry("radius".into()).or_default() += 1;
            let mut body = issue(st, "radius");
            body["scope"] = json!("gateway offline_access");
            (200, body, String::new())
        }
        _ => {
            let why = reject_reason(st, "radius: bad code, redirect or verifier".into());
            (400, why, String::new())
        }
    }
}

fn reject_reason(st: &mut State, why: String) -> Value {
    st.stats.rejected.push(why.clone());
    json!({"error": "invalid_grant", "error_description": why})
}

struct SystemTimeSecs;

impl SystemTimeSecs {
    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0)
    }
}
