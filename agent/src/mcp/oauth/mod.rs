//! OAuth for streamable HTTP servers without an `Authorization` header (Pi 1.6.0's MCP
//! sign-in, MCP authorization spec 2025-11-25).
//!
//! Connections never start a browser on their own: [`ServerAuth::token`] sends the stored
//! access token (refreshing it first when it expires within 30 s) and after a 401
//! [`ServerAuth::on_unauthorized`] tries the refresh token. When that is impossible the
//! server needs sign-in, which the user starts with `pi mcp login <server>` (or `/mcp login`)
//! through [`ServerAuth::sign_in`]: discovery of the protected resource metadata (RFC 9728)
//! and the authorization server metadata with its issuer checked (RFC 8414), a client from
//! the configuration, Pi's Client ID Metadata Document or dynamic registration (RFC 7591),
//! the authorization code flow with PKCE S256 and a loopback redirect on 127.0.0.1 (RFC
//! 8252), and the code exchange. Tokens live in `<agent dir>/mcp-auth.json` ([`store`]),
//! mode 0600, and never reach output.

mod loopback;
pub mod session;
pub mod store;

use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine;
use serde_json::Map;
use serde_json::Value;

pub use loopback::response_from_redirect_url;
pub use loopback::AuthorizationResponse;
pub use store::CredentialStore;
pub use store::ServerState;
pub use store::Tokens;

use crate::llm::error_chain;
use loopback::CallbackServer;

/// Access tokens this close to expiry are refreshed before they are sent.
const REFRESH_SKEW_MS: f64 = 30_000.0;
/// Each request to the authorization server gives up after this.
const OAUTH_REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// The protocol version sent with metadata requests.
const PROTOCOL_VERSION: &str = "2025-11-25";
/// The redirect URI when nothing else decides it.
const CALLBACK_HOST: &str = "127.0.0.1";
const CALLBACK_PATH: &str = "/callback";
/// Pi's Client ID Metadata Documents.
const CLIENT_DOCUMENTS_BASE: &str = "https://pi.dev/oauth";
/// The client name sent when registering.
const CLIENT_NAME: &str = "pi";

/// How the client identifies itself to the authorization server (`oauth.clientRegistration`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Registration {
    /// Pi's Client ID Metadata Document when the server supports it, else registration.
    Auto,
    /// Always dynamic client registration.
    Dcr,
    /// Always the Client ID Metadata Document.
    Cimd,
}

/// A server's `oauth` settings.
#[derive(Clone, Debug, PartialEq)]
pub struct OAuthSettings {
    /// `clientId`: a pre-registered client.
    pub client_id: Option<String>,
    /// `clientSecret` as written (`${VAR}` or `!command` resolved when used).
    pub client_secret: Option<String>,
    /// `callbackPort`.
    pub callback_port: Option<u16>,
    /// `callbackUrl`.
    pub callback_url: Option<String>,
    /// `scope`: space-separated scopes for servers that advertise none.
    pub scope: Option<String>,
    /// `clientName` sent when registering.
    pub client_name: Option<String>,
    /// `clientRegistration`.
    pub registration: Registration,
    /// `authServerMetadataUrl`: the authorization server metadata to use instead of discovery.
    pub auth_server_metadata_url: Option<String>,
}

impl OAuthSettings {
    /// The settings of an `oauth` object (absent: all defaults).
    pub fn from_config(oauth: Option<&Value>) -> OAuthSettings {
        let text = |key: &str| {
            oauth
                .and_then(|o| o.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        OAuthSettings {
            client_id: text("clientId"),
            client_secret: text("clientSecret"),
            callback_port: oauth
                .and_then(|o| o.get("callbackPort"))
                .and_then(Value::as_u64)
                .and_then(|p| u16::try_from(p).ok()),
            callback_url: text("callbackUrl"),
            scope: text("scope"),
            client_name: text("clientName"),
            registration: match text("clientRegistration").as_deref() {
                Some("dcr") => Registration::Dcr,
                Some("cimd") => Registration::Cimd,
                _ => Registration::Auto,
            },
            auth_server_metadata_url: text("authServerMetadataUrl"),
        }
    }

    /// Where the loopback callback listens and the redirect URI it implies.
    fn loopback(&self) -> Loopback {
        let configured = self
            .callback_url
            .clone()
            .unwrap_or_else(|| format!("http://{CALLBACK_HOST}{CALLBACK_PATH}"));
        let parsed = reqwest::Url::parse(&configured).ok();
        let host = parsed
            .as_ref()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_else(|| CALLBACK_HOST.into());
        let explicit_port = parsed.as_ref().and_then(|u| u.port());
        let port = explicit_port.or(self.callback_port);
        let path = parsed
            .as_ref()
            .map(|u| u.path().to_string())
            .unwrap_or_else(|| CALLBACK_PATH.into());
        // A configured URI with a port is sent exactly as written: servers compare strings.
        let fixed_redirect_url = if explicit_port.is_some() {
            self.callback_url.clone()
        } else {
            port.and_then(|p| {
                let mut url = parsed.clone()?;
                url.set_port(Some(p)).ok()?;
                Some(url.to_string())
            })
        };
        let bare = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        Loopback {
            listen_host: if bare == "localhost" {
                CALLBACK_HOST.into()
            } else {
                bare
            },
            redirect_host: host,
            port,
            path,
            fixed_redirect_url,
        }
    }

    /// Whether the client may identify with Pi's Client ID Metadata Document for a redirect
    /// URI: `cimd`, or `auto` without a configured client or client name and with the
    /// `/callback` path on `localhost` or 127.0.0.1.
    fn offers_client_document(&self, redirect_url: &str) -> bool {
        match self.registration {
            Registration::Dcr => false,
            Registration::Cimd => true,
            Registration::Auto => {
                self.client_id.is_none()
                    && self.client_name.is_none()
                    && documents_list(redirect_url)
            }
        }
    }

    fn resolved_secret(&self, server: &str) -> Result<Option<String>, String> {
        self.client_secret
            .as_deref()
            .map(|s| {
                super::client::resolve_value(
                    s,
                    &format!("MCP server \"{server}\" oauth.clientSecret"),
                )
            })
            .transpose()
    }
}

/// Whether Pi's documents on pi.dev list a redirect URI.
fn documents_list(redirect_url: &str) -> bool {
    reqwest::Url::parse(redirect_url)
        .is_ok_and(|u| u.host_str() != Some("[::1]") && u.path() == CALLBACK_PATH)
}

struct Loopback {
    listen_host: String,
    redirect_host: String,
    port: Option<u16>,
    path: String,
    fixed_redirect_url: Option<String>,
}

/// A server's `WWW-Authenticate: Bearer` challenge.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Challenge {
    /// `resource_metadata`: where the protected resource metadata is.
    pub resource_metadata_url: Option<String>,
    /// `scope`: what the server wants.
    pub scope: Option<String>,
    /// `error`, like `insufficient_scope`.
    pub error: Option<String>,
}

/// Reads a `Bearer` (or `DPoP`) challenge; other schemes carry nothing for OAuth.
pub fn parse_www_authenticate(header: &str) -> Challenge {
    let scheme = header
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    if scheme != "bearer" && scheme != "dpop" {
        return Challenge::default();
    }
    let field = |name: &str| -> Option<String> {
        let lower = header.to_ascii_lowercase();
        let needle = format!("{name}=");
        let mut from = 0;
        while let Some(at) = lower[from..].find(&needle) {
            let start = from + at;
            let boundary = start == 0 || matches!(lower.as_bytes()[start - 1], b',' | b' ' | b'\t');
            let value_start = start + needle.len();
            if boundary {
                let rest = &header[value_start..];
                let value = if let Some(quoted) = rest.strip_prefix('"') {
                    quoted.split('"').next().unwrap_or("")
                } else {
                    rest.split([',', ' ', '\t']).next().unwrap_or("")
                };
                return (!value.is_empty()).then(|| value.to_string());
            }
            from = value_start;
        }
        None
    };
    Challenge {
        resource_metadata_url: field("resource_metadata")
            .filter(|u| reqwest::Url::parse(u).is_ok()),
        scope: field("scope"),
        error: field("error"),
    }
}

/// Why a connection cannot authenticate.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The user has to sign in (again).
    #[error("MCP OAuth authorization requires user interaction")]
    NeedsSignIn,
    /// A refresh failed for another reason (network, server error).
    #[error("{0}")]
    Failed(String),
}

/// Why a sign-in did not complete.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignInError {
    /// The time limit passed or the user gave up.
    #[error("Sign-in cancelled")]
    Cancelled,
    /// Anything else, with the reason.
    #[error("{0}")]
    Failed(String),
}

/// How a sign-in talks to the user.
pub trait SignInPrompt: Send + Sync {
    /// Shows the authorization URL (and opens a browser where that makes sense).
    fn show_authorization_url(&self, url: &str);
    /// A redirect URL the user pastes, for browsers that cannot reach this machine; `None`
    /// when this front end cannot ask.
    fn pasted_redirect_url(&self) -> Option<tokio::sync::oneshot::Receiver<String>> {
        None
    }
}

/// An error answer of a token endpoint (RFC 6749 §5.2).
#[derive(Debug)]
enum TokenError {
    OAuth { code: String, description: String },
    Other(String),
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenError::OAuth { description, .. } => f.write_str(description),
            TokenError::Other(message) => f.write_str(message),
        }
    }
}

/// Discovered metadata, as stored in the state's `discovery`.
#[derive(Clone, Debug)]
struct Discovered {
    authorization_server_url: String,
    metadata: Option<Value>,
    resource: Option<Value>,
}

impl Discovered {
    fn to_value(&self) -> Value {
        let mut out = Map::new();
        out.insert(
            "authorizationServerUrl".into(),
            Value::from(self.authorization_server_url.as_str()),
        );
        if let Some(m) = &self.metadata {
            out.insert("authorizationServerMetadata".into(), m.clone());
        }
        if let Some(r) = &self.resource {
            out.insert("resourceMetadata".into(), r.clone());
        }
        Value::Object(out)
    }

    fn from_value(value: &Value) -> Option<Discovered> {
        Some(Discovered {
            authorization_server_url: value.get("authorizationServerUrl")?.as_str()?.to_string(),
            metadata: value
                .get("authorizationServerMetadata")
                .filter(|v| v.is_object())
                .cloned(),
            resource: value
                .get("resourceMetadata")
                .filter(|v| v.is_object())
                .cloned(),
        })
    }

    fn meta_str(&self, key: &str) -> Option<&str> {
        self.metadata.as_ref()?.get(key)?.as_str()
    }

    fn meta_list(&self, key: &str) -> Option<Vec<String>> {
        list(self.metadata.as_ref()?.get(key)?)
    }
}

fn list(value: &Value) -> Option<Vec<String>> {
    value.as_array().map(|items| {
        items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_string))
            .collect()
    })
}

/// The client the flow authenticates as.
#[derive(Clone, Debug)]
struct Client {
    id: String,
    secret: Option<String>,
    /// `token_endpoint_auth_method` the registration chose.
    auth_method: Option<String>,
}

impl Client {
    fn from_information(info: &Map<String, Value>) -> Option<Client> {
        Some(Client {
            id: info.get("client_id")?.as_str()?.to_string(),
            secret: info
                .get("client_secret")
                .and_then(Value::as_str)
                .map(str::to_string),
            auth_method: info
                .get("token_endpoint_auth_method")
                .and_then(Value::as_str)
                .map(str::to_string),
        })
    }
}

/// One OAuth server's authentication: the store, settings and one refresh at a time.
pub struct ServerAuth {
    name: String,
    url: String,
    settings: OAuthSettings,
    store: CredentialStore,
    http: reqwest::Client,
    refreshing: tokio::sync::Mutex<()>,
    challenge: Mutex<Option<Challenge>>,
}

impl std::fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerAuth")
            .field("url", &self.url)
            .finish()
    }
}

fn now_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as f64)
        .unwrap_or(0.0)
}

fn random_token() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

/// A PKCE S256 verifier and its challenge (RFC 7636).
fn pkce() -> (String, String) {
    let verifier = random_token();
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref());
    (verifier, challenge)
}

fn is_loopback(host: &str) -> bool {
    matches!(host, "localhost" | "127.0.0.1" | "[::1]" | "::1")
}

/// Only HTTPS endpoints get credentials, except on loopback.
fn secure_endpoint(url: &str) -> Result<reqwest::Url, String> {
    let parsed = reqwest::Url::parse(url).map_err(|_| format!("Invalid OAuth endpoint {url}"))?;
    if parsed.scheme() != "https" && !parsed.host_str().is_some_and(is_loopback) {
        return Err(format!(
            "Refusing to send OAuth credentials to non-HTTPS endpoint {parsed}"
        ));
    }
    Ok(parsed)
}

/// `/.well-known/<kind><path>` needs the path without a trailing slash.
fn path_suffix(path: &str) -> &str {
    path.strip_suffix('/').unwrap_or(path)
}

fn origin(url: &reqwest::Url) -> String {
    url.origin().ascii_serialization()
}

/// Scopes of all lists, each once, in order; `None` when there are none.
fn merge_scopes(lists: &[Option<&str>]) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for scope in lists.iter().flatten() {
        for s in scope.split_whitespace() {
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    (!out.is_empty()).then(|| out.join(" "))
}

/// Whether an HTTP status means "not here", so discovery tries the next URL.
fn is_discovery_miss(status: u16) -> bool {
    (400..500).contains(&status) || status == 502
}

impl ServerAuth {
    /// The authentication of server `name` at `url` with its `oauth` settings; credentials
    /// live in `agent_dir`.
    pub fn new(
        name: &str,
        url: &str,
        oauth: Option<&Value>,
        agent_dir: &std::path::Path,
    ) -> ServerAuth {
        ServerAuth {
            name: name.to_string(),
            url: url.to_string(),
            settings: OAuthSettings::from_config(oauth),
            store: CredentialStore::new(agent_dir),
            http: reqwest::Client::builder()
                .user_agent(concat!("pi-rust/", env!("CARGO_PKG_VERSION")))
                .timeout(OAUTH_REQUEST_TIMEOUT)
                .build()
                .unwrap_or_default(),
            refreshing: tokio::sync::Mutex::new(()),
            challenge: Mutex::new(None),
        }
    }

    /// The server URL credentials belong to.
    pub fn server_url(&self) -> &str {
        &self.url
    }

    /// The credentials file.
    pub fn store(&self) -> &CredentialStore {
        &self.store
    }

    fn load(&self) -> Option<ServerState> {
        self.store.load(&self.name, &self.url).ok().flatten()
    }

    /// The stored access token, refreshed first when it expires within 30 s. A failed
    /// refresh sends the old token: the server's 401 then decides.
    pub async fn token(&self) -> Option<String> {
        let state = self.load()?;
        let tokens = state.tokens?;
        let expiring = state
            .tokens_expire_at
            .is_some_and(|at| at - REFRESH_SKEW_MS <= now_ms());
        if !expiring || tokens.refresh_token.is_none() {
            return Some(tokens.access_token);
        }
        let _ = self.refresh(Some(&tokens.access_token)).await;
        self.load()?.tokens.map(|t| t.access_token)
    }

    /// After a 401: records the challenge and refreshes the tokens, or says the user has to
    /// sign in (also when the server wants more scope).
    pub async fn on_unauthorized(
        &self,
        www_authenticate: Option<&str>,
        sent: Option<&str>,
    ) -> Result<(), AuthError> {
        let challenge = parse_www_authenticate(www_authenticate.unwrap_or(""));
        let insufficient = challenge.error.as_deref() == Some("insufficient_scope");
        let resource_metadata_url = challenge.resource_metadata_url.clone();
        *self.challenge.lock().unwrap_or_else(|e| e.into_inner()) = Some(challenge);
        if insufficient {
            return Err(AuthError::NeedsSignIn);
        }
        self.refresh_with(sent, resource_metadata_url.as_deref())
            .await
    }

    async fn refresh(&self, stale: Option<&str>) -> Result<(), AuthError> {
        let rm = self
            .challenge
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|c| c.resource_metadata_url.clone());
        self.refresh_with(stale, rm.as_deref()).await
    }

    /// Replaces `stale`, the access token that expired or was rejected: once per process at a
    /// time and under the store's refresh lock, so a rotating refresh token is used once.
    /// Tokens that changed meanwhile (another refresh, a sign-in) are kept as they are.
    async fn refresh_with(
        &self,
        stale: Option<&str>,
        resource_metadata_url: Option<&str>,
    ) -> Result<(), AuthError> {
        // Tokens replaced meanwhile, or nothing to refresh: no need to take (and create) the
        // lock file.
        let tokens = self.load().and_then(|s| s.tokens);
        let current = tokens.as_ref().map(|t| t.access_token.as_str());
        if current.is_some() && current != stale {
            return Ok(());
        }
        if tokens
            .as_ref()
            .and_then(|t| t.refresh_token.as_ref())
            .is_none()
        {
            return Err(AuthError::NeedsSignIn);
        }
        let _one = self.refreshing.lock().await;
        let locked = self
            .store
            .with_refresh_lock(
                &self.name,
                &self.url,
                self.refresh_locked(stale, resource_metadata_url),
            )
            .await;
        match locked {
            Ok(result) => result,
            Err(busy) => Err(AuthError::Failed(busy)),
        }
    }

    /// The refresh itself, under the refresh lock.
    async fn refresh_locked(
        &self,
        stale: Option<&str>,
        resource_metadata_url: Option<&str>,
    ) -> Result<(), AuthError> {
        let state = self
            .store
            .load(&self.name, &self.url)
            .map_err(AuthError::Failed)?
            .unwrap_or_default();
        let current = state.tokens.as_ref().map(|t| t.access_token.as_str());
        if current.is_some() && current != stale {
            return Ok(());
        }
        let Some(refresh_token) = state.tokens.as_ref().and_then(|t| t.refresh_token.clone())
        else {
            return Err(AuthError::NeedsSignIn);
        };
        let client = match self.client(&state).map_err(AuthError::Failed)? {
            Some(client) => client,
            None => return Err(AuthError::NeedsSignIn),
        };
        let discovered = self
            .discovery(&state, resource_metadata_url)
            .await
            .map_err(AuthError::Failed)?;
        let resource =
            select_resource(&self.url, discovered.resource.as_ref()).map_err(AuthError::Failed)?;
        let params = vec![
            ("grant_type".to_string(), "refresh_token".to_string()),
            ("refresh_token".to_string(), refresh_token.clone()),
        ];
        match self
            .token_request(&discovered, &client, resource.as_deref(), params)
            .await
        {
            Ok(mut tokens) => {
                if tokens.refresh_token.is_none() {
                    tokens.refresh_token = Some(refresh_token);
                }
                let granted = state.tokens.as_ref().and_then(|t| t.scope.clone());
                self.save_tokens(tokens, granted).map_err(AuthError::Failed)
            }
            Err(TokenError::OAuth { code, .. }) if code == "invalid_grant" => {
                let _ = self.store.modify(&self.name, &self.url, |s| {
                    s.tokens = None;
                    s.tokens_expire_at = None;
                });
                Err(AuthError::NeedsSignIn)
            }
            Err(TokenError::OAuth { code, .. })
                if code == "invalid_client" || code == "unauthorized_client" =>
            {
                let _ = self.store.modify(&self.name, &self.url, |s| {
                    s.client_information = None;
                    s.tokens = None;
                    s.tokens_expire_at = None;
                    s.discovery = None;
                });
                Err(AuthError::NeedsSignIn)
            }
            Err(e) => Err(AuthError::Failed(format!("Token refresh failed: {e}"))),
        }
    }

    /// The configured client, else the stored registration, else (for tokens obtained with
    /// it) Pi's client document.
    fn client(&self, state: &ServerState) -> Result<Option<Client>, String> {
        if let Some(id) = &self.settings.client_id {
            return Ok(Some(Client {
                id: id.clone(),
                secret: self.settings.resolved_secret(&self.name)?,
                auth_method: None,
            }));
        }
        if let Some(info) = &state.client_information {
            return Ok(Client::from_information(info));
        }
        let document = state
            .discovery
            .as_ref()
            .and_then(|d| d.get("clientId"))
            .and_then(Value::as_str);
        Ok(document.map(|id| Client {
            id: id.to_string(),
            secret: None,
            auth_method: Some("none".into()),
        }))
    }

    fn save_tokens(&self, tokens: Tokens, scope: Option<String>) -> Result<(), String> {
        let expires = tokens.expires_in.map(|s| now_ms() + s * 1000.0);
        self.store
            .modify(&self.name, &self.url, |s| {
                let mut tokens = tokens;
                if tokens.scope.is_none() {
                    tokens.scope = scope;
                }
                s.tokens = Some(tokens);
                s.tokens_expire_at = expires;
            })
            .map(|_| ())
    }

    /// Discovery, cached in the state unless the authorization server metadata is configured.
    async fn discovery(
        &self,
        state: &ServerState,
        resource_metadata_url: Option<&str>,
    ) -> Result<Discovered, String> {
        if self.settings.auth_server_metadata_url.is_none() {
            if let Some(cached) = state.discovery.as_ref().and_then(Discovered::from_value) {
                if cached.metadata.is_some() {
                    return Ok(cached);
                }
            }
        }
        self.discover(resource_metadata_url).await
    }

    async fn fetch_metadata(&self, url: &str) -> Result<(u16, Option<Value>), String> {
        let response = self
            .http
            .get(url)
            .header("accept", "application/json")
            .header("mcp-protocol-version", PROTOCOL_VERSION)
            .send()
            .await
            .map_err(|e| format!("fetch failed: {}", error_chain(&e)))?;
        let status = response.status().as_u16();
        if !response.status().is_success() {
            return Ok((status, None));
        }
        let body = response
            .json::<Value>()
            .await
            .map_err(|e| format!("Invalid metadata from {url}: {e}"))?;
        Ok((status, Some(body)))
    }

    /// RFC 9728 then RFC 8414 (or OpenID Connect) discovery.
    async fn discover(&self, resource_metadata_url: Option<&str>) -> Result<Discovered, String> {
        let server = reqwest::Url::parse(&self.url).map_err(|e| e.to_string())?;
        let base = origin(&server);
        let first = match resource_metadata_url {
            Some(u) => u.to_string(),
            None => format!(
                "{base}/.well-known/oauth-protected-resource{}",
                path_suffix(server.path())
            ),
        };
        let (status, mut body) = self.fetch_metadata(&first).await?;
        if body.is_none()
            && resource_metadata_url.is_none()
            && server.path() != "/"
            && is_discovery_miss(status)
        {
            body = self
                .fetch_metadata(&format!("{base}/.well-known/oauth-protected-resource"))
                .await?
                .1;
        }
        let resource = body.filter(|b| b.get("resource").and_then(Value::as_str).is_some());
        if let Some(configured) = &self.settings.auth_server_metadata_url {
            let url = secure_endpoint(configured)?;
            let (status, body) = self.fetch_metadata(url.as_str()).await?;
            let metadata = body.ok_or_else(|| {
                format!("HTTP {status} loading authorization server metadata from {url}")
            })?;
            let issuer = metadata
                .get("issuer")
                .and_then(Value::as_str)
                .ok_or("Invalid authorization server metadata")?
                .to_string();
            return Ok(Discovered {
                authorization_server_url: issuer,
                metadata: Some(metadata),
                resource,
            });
        }
        let authorization_server_url = resource
            .as_ref()
            .and_then(|r| r.get("authorization_servers"))
            .and_then(list)
            .and_then(|l| l.into_iter().next())
            .unwrap_or_else(|| format!("{base}/"));
        let issuer = reqwest::Url::parse(&authorization_server_url).map_err(|e| e.to_string())?;
        let path = path_suffix(issuer.path());
        let issuer_origin = origin(&issuer);
        let mut candidates = vec![
            format!("{issuer_origin}/.well-known/oauth-authorization-server{path}"),
            format!("{issuer_origin}/.well-known/openid-configuration{path}"),
        ];
        if !path.is_empty() {
            candidates.push(format!(
                "{issuer_origin}{path}/.well-known/openid-configuration"
            ));
        }
        let mut metadata = None;
        for candidate in candidates {
            let (status, body) = self.fetch_metadata(&candidate).await?;
            let Some(found) = body else {
                if is_discovery_miss(status) {
                    continue;
                }
                return Err(format!(
                    "HTTP {status} loading authorization server metadata from {candidate}"
                ));
            };
            let trim = |s: &str| s.strip_suffix('/').unwrap_or(s).to_string();
            let named = found.get("issuer").and_then(Value::as_str).unwrap_or("");
            if trim(named) != trim(&authorization_server_url) {
                return Err(format!(
                    "OAuth issuer mismatch: expected {:?}, received {:?}",
                    authorization_server_url, named
                ));
            }
            metadata = Some(found);
            break;
        }
        Ok(Discovered {
            authorization_server_url,
            metadata,
            resource,
        })
    }

    /// A token request with the client's authentication (RFC 6749 §2.3).
    async fn token_request(
        &self,
        discovered: &Discovered,
        client: &Client,
        resource: Option<&str>,
        mut params: Vec<(String, String)>,
    ) -> Result<Tokens, TokenError> {
        let endpoint = discovered
            .meta_str("token_endpoint")
            .map(str::to_string)
            .unwrap_or_else(|| {
                format!(
                    "{}/token",
                    discovered.authorization_server_url.trim_end_matches('/')
                )
            });
        let url = secure_endpoint(&endpoint).map_err(TokenError::Other)?;
        if let Some(resource) = resource {
            params.push(("resource".into(), resource.into()));
        }
        let supported = discovered
            .meta_list("token_endpoint_auth_methods_supported")
            .unwrap_or_default();
        let mut request = self.http.post(url).header("accept", "application/json");
        match client_auth_method(client, &supported) {
            "client_secret_basic" => {
                let credentials = base64::engine::general_purpose::STANDARD.encode(format!(
                    "{}:{}",
                    client.id,
                    client.secret.as_deref().unwrap_or("")
                ));
                request = request.header("authorization", format!("Basic {credentials}"));
            }
            method => {
                params.push(("client_id".into(), client.id.clone()));
                if method == "client_secret_post" {
                    if let Some(secret) = &client.secret {
                        params.push(("client_secret".into(), secret.clone()));
                    }
                }
            }
        }
        let response = request
            .form(&params)
            .send()
            .await
            .map_err(|e| TokenError::Other(format!("fetch failed: {}", error_chain(&e))))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let value: Option<Value> = serde_json::from_str(&text).ok();
        // Servers report OAuth errors with any status.
        if let Some(code) = value
            .as_ref()
            .and_then(|v| v.get("error"))
            .and_then(Value::as_str)
        {
            let description = value
                .as_ref()
                .and_then(|v| v.get("error_description"))
                .and_then(Value::as_str)
                .unwrap_or(code)
                .to_string();
            return Err(TokenError::OAuth {
                code: code.to_string(),
                description,
            });
        }
        if !status.is_success() {
            return Err(TokenError::OAuth {
                code: "server_error".into(),
                description: format!("HTTP {}: {text}", status.as_u16()),
            });
        }
        value
            .and_then(|v| serde_json::from_value::<Tokens>(v).ok())
            .filter(|t| !t.access_token.is_empty())
            .ok_or_else(|| TokenError::Other("Invalid OAuth token response".into()))
    }

    /// Deletes the stored credentials; whether there were any.
    pub fn sign_out(&self) -> Result<bool, String> {
        self.store.remove(&self.name, &self.url)
    }

    /// Whether tokens are stored.
    pub fn has_tokens(&self) -> bool {
        self.load().is_some_and(|s| s.tokens.is_some())
    }

    /// Signs in: refreshes the stored tokens when possible, else runs the browser flow with a
    /// loopback callback (or a pasted redirect URL), all within `limit`.
    pub async fn sign_in(
        &self,
        prompt: &dyn SignInPrompt,
        limit: Duration,
    ) -> Result<(), SignInError> {
        match tokio::time::timeout(limit, self.sign_in_now(prompt)).await {
            Ok(result) => result,
            Err(_) => Err(SignInError::Cancelled),
        }
    }

    async fn sign_in_now(&self, prompt: &dyn SignInPrompt) -> Result<(), SignInError> {
        let fail = SignInError::Failed;
        let challenge = self
            .challenge
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_default();
        let step_up = challenge.error.as_deref() == Some("insufficient_scope");
        let stored = self.store.load(&self.name, &self.url).map_err(fail)?;
        if !step_up {
            let current = stored
                .as_ref()
                .and_then(|s| s.tokens.as_ref())
                .filter(|t| t.refresh_token.is_some())
                .map(|t| t.access_token.clone());
            let replaceable = !(self.settings.registration == Registration::Cimd
                && self.settings.client_id.is_none()
                && stored
                    .as_ref()
                    .is_some_and(|s| s.client_information.is_some()));
            if let (Some(current), true) = (current, replaceable) {
                if self.refresh(Some(&current)).await.is_ok() {
                    return Ok(());
                }
            }
        }
        let stored = self.store.load(&self.name, &self.url).map_err(fail)?;

        // The loopback listener decides the redirect URI.
        let loopback = self.settings.loopback();
        let registered_port = stored
            .as_ref()
            .and_then(|s| registered_redirect_urls(s).into_iter().next())
            .and_then(|u| reqwest::Url::parse(&u).ok())
            .and_then(|u| u.port());
        let port = loopback.port.or(registered_port);
        let base_path = loopback.path.clone();
        let default_redirect = loopback
            .fixed_redirect_url
            .clone()
            .unwrap_or_else(|| format!("http://{}:0{}", loopback.redirect_host, base_path));
        let specific_path = format!(
            "{}/{}",
            base_path.trim_end_matches('/'),
            callback_id(&self.url)
        );
        let mut paths = vec![base_path.clone()];
        if self.settings.offers_client_document(&default_redirect) {
            paths.push(specific_path.clone());
        }
        let first = CallbackServer::listen(
            &loopback.listen_host,
            &loopback.redirect_host,
            port.unwrap_or(0),
            paths.clone(),
        )
        .await;
        let callback = match first {
            Ok(server) => server,
            // A configured port is required; the stored client's port only preferred.
            Err(_) if loopback.port.is_none() && port.is_some() => CallbackServer::listen(
                &loopback.listen_host,
                &loopback.redirect_host,
                0,
                paths.clone(),
            )
            .await
            .map_err(|e| fail(format!("cannot listen for the OAuth callback: {e}")))?,
            Err(e) => {
                return Err(fail(format!(
                    "cannot listen for the OAuth callback on port {}: {e}",
                    port.unwrap_or(0)
                )))
            }
        };
        let mut redirect_url = loopback
            .fixed_redirect_url
            .clone()
            .unwrap_or_else(|| callback.redirect_url.clone());

        // A registered client cannot use another redirect URI, and its tokens belong to it.
        let settings = &self.settings;
        let state = self
            .store
            .modify(&self.name, &self.url, |s| {
                s.oauth_state = None;
                let keep = settings.client_id.is_some()
                    || match &s.client_information {
                        Some(_) => {
                            settings.registration != Registration::Cimd
                                && registered_redirect_urls(s).contains(&redirect_url)
                        }
                        None => settings.offers_client_document(&redirect_url),
                    };
                if !keep {
                    s.client_information = None;
                    s.tokens = None;
                    s.tokens_expire_at = None;
                }
            })
            .map_err(fail)?;

        let discovered = if self.settings.auth_server_metadata_url.is_some() {
            self.discover(challenge.resource_metadata_url.as_deref())
                .await
        } else {
            self.discovery(&state, challenge.resource_metadata_url.as_deref())
                .await
        }
        .map_err(fail)?;
        let resource = select_resource(&self.url, discovered.resource.as_ref()).map_err(fail)?;
        let challenged = if step_up {
            merge_scopes(&[
                state.tokens.as_ref().and_then(|t| t.scope.as_deref()),
                challenge.scope.as_deref(),
            ])
        } else {
            challenge.scope.clone()
        };
        let scope =
            merge_scopes(&[self.settings.scope.as_deref(), challenged.as_deref()]).or_else(|| {
                discovered
                    .resource
                    .as_ref()
                    .and_then(|r| r.get("scopes_supported"))
                    .and_then(list)
                    .filter(|l| !l.is_empty())
                    .map(|l| l.join(" "))
            });

        // Who the client is: configured, registered before, Pi's document, or registered now.
        let mut document_id = None;
        let client = match self.client(&state).map_err(fail)? {
            Some(client) if state.client_information.is_some() || settings.client_id.is_some() => {
                client
            }
            _ => {
                if self.settings.offers_client_document(&redirect_url) {
                    if !documents_list(&redirect_url) {
                        return Err(fail(format!("oauth.clientRegistration \"cimd\" needs Client ID Metadata Documents that list the redirect URI {redirect_url}")));
                    }
                    let supported = discovered
                        .metadata
                        .as_ref()
                        .and_then(|m| m.get("client_id_metadata_document_supported"))
                        .and_then(Value::as_bool)
                        == Some(true)
                        && discovered
                            .meta_list("token_endpoint_auth_methods_supported")
                            .is_some_and(|l| l.iter().any(|m| m == "none"));
                    if supported {
                        let iss_supported = discovered
                            .metadata
                            .as_ref()
                            .and_then(|m| m.get("authorization_response_iss_parameter_supported"))
                            .and_then(Value::as_bool)
                            == Some(true);
                        let id = if iss_supported {
                            format!("{CLIENT_DOCUMENTS_BASE}/client.json")
                        } else {
                            // Without `iss`, a server-specific document and redirect path keep
                            // responses of different authorization servers apart.
                            let mut url = reqwest::Url::parse(&redirect_url)
                                .map_err(|e| fail(e.to_string()))?;
                            url.set_path(&specific_path);
                            redirect_url = url.to_string();
                            format!(
                                "{CLIENT_DOCUMENTS_BASE}/{}/client.json",
                                callback_id(&self.url)
                            )
                        };
                        document_id = Some(id.clone());
                        Client {
                            id,
                            secret: None,
                            auth_method: Some("none".into()),
                        }
                    } else if self.settings.registration == Registration::Cimd {
                        return Err(fail("The authorization server does not support Client ID Metadata Documents for public clients; remove oauth.clientRegistration \"cimd\"".into()));
                    } else {
                        self.register(&discovered, &redirect_url, scope.as_deref())
                            .await
                            .map_err(fail)?
                    }
                } else {
                    self.register(&discovered, &redirect_url, scope.as_deref())
                        .await
                        .map_err(fail)?
                }
            }
        };

        // The authorization request.
        let metadata = discovered.metadata.as_ref();
        if let Some(types) = discovered.meta_list("response_types_supported") {
            if !types.iter().any(|t| t == "code") {
                return Err(fail(
                    "Authorization server does not support authorization codes".into(),
                ));
            }
        }
        if let Some(methods) = discovered.meta_list("code_challenge_methods_supported") {
            if !methods.iter().any(|m| m == "S256") {
                return Err(fail(
                    "Authorization server does not support PKCE S256".into(),
                ));
            }
        }
        let endpoint = discovered
            .meta_str("authorization_endpoint")
            .map(str::to_string)
            .unwrap_or_else(|| {
                format!(
                    "{}/authorize",
                    discovered.authorization_server_url.trim_end_matches('/')
                )
            });
        let mut authorization_url = reqwest::Url::parse(&endpoint)
            .ok()
            .filter(|u| u.scheme() == "http" || u.scheme() == "https")
            .ok_or_else(|| fail(format!("Invalid authorization endpoint {endpoint}")))?;
        let (verifier, code_challenge) = pkce();
        let oauth_state = hex_token();
        {
            let mut query = authorization_url.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &client.id)
                .append_pair("code_challenge", &code_challenge)
                .append_pair("code_challenge_method", "S256")
                .append_pair("redirect_uri", &redirect_url)
                .append_pair("state", &oauth_state);
            if let Some(scope) = &scope {
                query.append_pair("scope", scope);
                if scope.split_whitespace().any(|s| s == "offline_access") {
                    query.append_pair("prompt", "consent");
                }
            }
            if let Some(resource) = &resource {
                query.append_pair("resource", resource);
            }
        }
        let mut discovery = discovered.to_value();
        if let (Some(id), Value::Object(map)) = (&document_id, &mut discovery) {
            map.insert("clientId".into(), Value::from(id.as_str()));
        }
        let remember_discovery = self.settings.auth_server_metadata_url.is_none();
        self.store
            .modify(&self.name, &self.url, |s| {
                s.code_verifier = Some(verifier.clone());
                s.oauth_state = Some(oauth_state.clone());
                if remember_discovery || document_id.is_some() {
                    s.discovery = Some(discovery);
                }
            })
            .map_err(fail)?;
        prompt.show_authorization_url(authorization_url.as_str());

        // The browser's redirect, or the URL the user pastes.
        let redirect_path = reqwest::Url::parse(&redirect_url)
            .map(|u| u.path().to_string())
            .unwrap_or_else(|_| base_path.clone());
        let pasted = prompt.pasted_redirect_url();
        let response = tokio::select! {
            r = callback.wait(&oauth_state, &redirect_path) => r.map_err(fail)?,
            Some(text) = async {
                match pasted {
                    Some(rx) => rx.await.ok(),
                    None => std::future::pending().await,
                }
            } => {
                if text.trim().is_empty() {
                    return Err(SignInError::Cancelled);
                }
                response_from_redirect_url(&text, &redirect_url, &oauth_state).map_err(fail)?
            }
        };
        drop(callback);
        let current = self.store.load(&self.name, &self.url).map_err(fail)?;
        if current.as_ref().and_then(|s| s.oauth_state.as_deref()) != Some(oauth_state.as_str()) {
            return Err(fail(
                "Another sign-in to this MCP server started since; sign in again".into(),
            ));
        }
        // RFC 9207: a code from another authorization server is never sent to this one.
        let issuer = metadata
            .and_then(|m| m.get("issuer"))
            .and_then(Value::as_str);
        let iss_promised = metadata
            .and_then(|m| m.get("authorization_response_iss_parameter_supported"))
            .and_then(Value::as_bool)
            == Some(true);
        if (response.iss.is_some() || iss_promised) && response.iss.as_deref() != issuer {
            return Err(fail(format!(
                "OAuth issuer mismatch: expected {}, received {}",
                issuer.map_or("none".into(), |i| format!("{i:?}")),
                response
                    .iss
                    .as_deref()
                    .map_or("none".into(), |i| format!("{i:?}"))
            )));
        }
        let params = vec![
            ("grant_type".to_string(), "authorization_code".to_string()),
            ("code".to_string(), response.code),
            ("code_verifier".to_string(), verifier),
            ("redirect_uri".to_string(), redirect_url),
        ];
        let tokens = match self
            .token_request(&discovered, &client, resource.as_deref(), params)
            .await
        {
            Ok(tokens) => tokens,
            Err(e) => {
                // A client the server no longer knows is dropped, so the next sign-in
                // registers a new one.
                if matches!(&e, TokenError::OAuth { code, .. }
                    if code == "invalid_client" || code == "unauthorized_client")
                {
                    let _ = self.store.modify(&self.name, &self.url, |s| {
                        s.client_information = None;
                        s.tokens = None;
                        s.tokens_expire_at = None;
                    });
                }
                return Err(fail(e.to_string()));
            }
        };
        // A response without `scope` grants the requested one (RFC 6749 §5.1).
        self.save_tokens(tokens, scope).map_err(fail)?;
        *self.challenge.lock().unwrap_or_else(|e| e.into_inner()) = None;
        Ok(())
    }

    /// Dynamic client registration (RFC 7591) as a native public client.
    async fn register(
        &self,
        discovered: &Discovered,
        redirect_url: &str,
        scope: Option<&str>,
    ) -> Result<Client, String> {
        let endpoint = match discovered.meta_str("registration_endpoint") {
            Some(e) => e.to_string(),
            None if discovered.metadata.is_some() => {
                return Err(
                    "Authorization server does not support dynamic client registration".into(),
                )
            }
            None => format!(
                "{}/register",
                discovered.authorization_server_url.trim_end_matches('/')
            ),
        };
        let secret = self.settings.resolved_secret(&self.name)?;
        let mut body = serde_json::json!({
            "client_name": self.settings.client_name.as_deref().unwrap_or(CLIENT_NAME),
            "redirect_uris": [redirect_url],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": if secret.is_some() { "client_secret_post" } else { "none" },
            "application_type": "native",
        });
        if let (Some(scope), Value::Object(map)) = (scope, &mut body) {
            map.insert("scope".into(), Value::from(scope));
        }
        let response = self
            .http
            .post(&endpoint)
            .header("accept", "application/json")
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("fetch failed: {}", error_chain(&e)))?;
        let status = response.status().as_u16();
        let text = response.text().await.unwrap_or_default();
        if !(200..300).contains(&status) {
            return Err(format!(
                "OAuth dynamic client registration failed with status {status}: {text}"
            ));
        }
        let info: Map<String, Value> = serde_json::from_str(&text)
            .map_err(|_| "Invalid OAuth client information".to_string())?;
        let client = Client::from_information(&info)
            .ok_or_else(|| "Invalid OAuth client information".to_string())?;
        self.store
            .modify(&self.name, &self.url, |s| s.client_information = Some(info))?;
        Ok(client)
    }
}

fn hex_token() -> String {
    rand::random::<[u8; 32]>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Redirect URIs a stored client was registered with.
fn registered_redirect_urls(state: &ServerState) -> Vec<String> {
    state
        .client_information
        .as_ref()
        .and_then(|i| i.get("redirect_uris"))
        .and_then(list)
        .unwrap_or_default()
}

/// 12 characters naming a server URL in callback paths: SHA-256 of the URL (without
/// fragment), first 9 bytes, base64url.
fn callback_id(server_url: &str) -> String {
    let href = reqwest::Url::parse(server_url)
        .map(|mut u| {
            u.set_fragment(None);
            u.to_string()
        })
        .unwrap_or_else(|_| server_url.to_string());
    let digest = ring::digest::digest(&ring::digest::SHA256, href.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest.as_ref()[..9])
}

/// The client authentication method (RFC 7591 `token_endpoint_auth_method`): the one the
/// registration chose when the server supports it, else the best the server supports.
fn client_auth_method(client: &Client, supported: &[String]) -> &'static str {
    const KNOWN: [&str; 3] = ["client_secret_basic", "client_secret_post", "none"];
    if let Some(hinted) = client.auth_method.as_deref() {
        if let Some(known) = KNOWN.iter().find(|k| **k == hinted) {
            if supported.is_empty() || supported.iter().any(|s| s == hinted) {
                return known;
            }
        }
    }
    let has = |m: &str| supported.iter().any(|s| s == m);
    let secret = client.secret.is_some();
    if supported.is_empty() {
        return if secret {
            "client_secret_basic"
        } else {
            "none"
        };
    }
    if secret && has("client_secret_basic") {
        "client_secret_basic"
    } else if secret && has("client_secret_post") {
        "client_secret_post"
    } else if has("none") {
        "none"
    } else if secret {
        "client_secret_post"
    } else {
        "none"
    }
}

/// The `resource` parameter (RFC 8707): the protected resource metadata's `resource`, which
/// must be the server URL or a parent of it on the same origin.
fn select_resource(server_url: &str, metadata: Option<&Value>) -> Result<Option<String>, String> {
    let Some(resource) = metadata
        .and_then(|m| m.get("resource"))
        .and_then(Value::as_str)
    else {
        return Ok(None);
    };
    let mut requested = reqwest::Url::parse(server_url).map_err(|e| e.to_string())?;
    requested.set_fragment(None);
    let configured = reqwest::Url::parse(resource).map_err(|e| e.to_string())?;
    let with_slash = |p: &str| {
        if p.ends_with('/') {
            p.to_string()
        } else {
            format!("{p}/")
        }
    };
    if requested.origin() != configured.origin()
        || !with_slash(requested.path()).starts_with(&with_slash(configured.path()))
    {
        return Err(format!(
            "Protected resource {resource} does not match MCP server {requested}"
        ));
    }
    Ok(Some(resource.to_string()))
}

/// Opens a URL in the platform browser without a shell; failures are ignored because the
/// URL is printed too.
pub fn open_browser(url: &str) {
    let program = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let _ = std::process::Command::new(program)
        .arg(url)
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

/// A shared handle, as connections and sign-in use it.
pub type SharedAuth = Arc<ServerAuth>;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bearer_challenges_are_read() {
        assert_eq!(
            parse_www_authenticate(
                r#"Bearer error="invalid_token", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp", scope="a b""#
            ),
            Challenge {
                resource_metadata_url: Some(
                    "http://h/.well-known/oauth-protected-resource/mcp".into()
                ),
                scope: Some("a b".into()),
                error: Some("invalid_token".into()),
            }
        );
        assert_eq!(
            parse_www_authenticate("Basic realm=x"),
            Challenge::default()
        );
        assert_eq!(
            parse_www_authenticate("Bearer scope=\"\", error=insufficient_scope").error,
            Some("insufficient_scope".into())
        );
    }

    #[test]
    fn loopback_redirects_follow_the_settings() {
        let s = OAuthSettings::from_config(None);
        let l = s.loopback();
        assert_eq!(
            (l.listen_host.as_str(), l.port, l.path.as_str()),
            ("127.0.0.1", None, "/callback")
        );
        assert_eq!(l.fixed_redirect_url, None);
        let s = OAuthSettings::from_config(Some(&json!({"callbackPort": 8765})));
        assert_eq!(
            s.loopback().fixed_redirect_url.as_deref(),
            Some("http://127.0.0.1:8765/callback")
        );
        let s = OAuthSettings::from_config(Some(
            &json!({"callbackUrl": "http://localhost:9000/cb", "callbackPort": 1}),
        ));
        let l = s.loopback();
        assert_eq!(l.listen_host, "127.0.0.1");
        assert_eq!(l.port, Some(9000));
        assert_eq!(
            l.fixed_redirect_url.as_deref(),
            Some("http://localhost:9000/cb")
        );
        assert!(!s.offers_client_document("http://localhost:9000/cb"));
        let auto = OAuthSettings::from_config(None);
        assert!(auto.offers_client_document("http://127.0.0.1:5/callback"));
        let named = OAuthSettings::from_config(Some(&json!({"clientName": "Claude Code"})));
        assert!(!named.offers_client_document("http://127.0.0.1:5/callback"));
    }

    #[test]
    fn pkce_challenge_is_the_s256_of_the_verifier() {
        let (verifier, challenge) = pkce();
        assert_eq!(verifier.len(), 43);
        let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
        assert_eq!(
            challenge,
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref())
        );
    }

    #[test]
    fn resources_must_contain_the_server() {
        let meta = json!({"resource": "https://a.example/mcp"});
        assert_eq!(
            select_resource("https://a.example/mcp/x", Some(&meta)).unwrap(),
            Some("https://a.example/mcp".into())
        );
        assert!(select_resource("https://a.example/other", Some(&meta)).is_err());
        assert!(select_resource("https://b.example/mcp", Some(&meta)).is_err());
        assert_eq!(
            select_resource("https://a.example/mcp", None).unwrap(),
            None
        );
    }

    #[test]
    fn client_authentication_follows_the_server() {
        let public = Client {
            id: "c".into(),
            secret: None,
            auth_method: Some("none".into()),
        };
        let both = vec![
            "client_secret_post".to_string(),
            "client_secret_basic".to_string(),
        ];
        assert_eq!(client_auth_method(&public, &both), "none");
        let secret = Client {
            id: "c".into(),
            secret: Some("s".into()),
            auth_method: None,
        };
        assert_eq!(client_auth_method(&secret, &both), "client_secret_basic");
        assert_eq!(client_auth_method(&secret, &[]), "client_secret_basic");
        assert_eq!(
            client_auth_method(&secret, &["client_secret_post".to_string()]),
            "client_secret_post"
        );
    }

    #[test]
    fn callback_ids_are_twelve_url_safe_characters() {
        let id = callback_id("https://mcp.example/mcp#frag");
        assert_eq!(id.len(), 12);
        assert_eq!(id, callback_id("https://mcp.example/mcp"));
    }
}
