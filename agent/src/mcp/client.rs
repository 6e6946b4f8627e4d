//! One configured server's connection (Pi's `McpServerConnection`), on the official SDK `rmcp`.
//!
//! stdio servers are spawned here, not by the SDK, so the server gets its own process group:
//! stopping it closes its stdin, gives it 500 ms to exit, then sends SIGTERM and after 2 s
//! SIGKILL to the whole group, which also stops servers started through `npx` or `uvx`.
//! A dropped connection shows as disconnected and is opened again by the next call. Requests
//! time out after the server's `timeout` without a progress notification.
//!
//! The SDK marks roots and logging deprecated (a future protocol revision drops them); Pi
//! 1.6.0 speaks protocol 2025-11-25, where both exist, so this module uses them.
#![allow(deprecated)]

use std::path::Path;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::CallToolRequest;
use rmcp::model::CallToolRequestParams;
use rmcp::model::CallToolResult;
use rmcp::model::CancelledNotificationParam;
use rmcp::model::ClientCapabilities;
use rmcp::model::ClientRequest;
use rmcp::model::Implementation;
use rmcp::model::InitializeRequestParams;
use rmcp::model::ListRootsResult;
use rmcp::model::LoggingMessageNotificationParam;
use rmcp::model::ProgressNotificationParam;
use rmcp::model::ProtocolVersion;
use rmcp::model::Root;
use rmcp::model::RootsCapabilities;
use rmcp::model::ServerResult;
use rmcp::service::NotificationContext;
use rmcp::service::PeerRequestOptions;
use rmcp::service::RequestContext;
use rmcp::service::RunningService;
use rmcp::ClientHandler;
use rmcp::ErrorData;
use rmcp::Peer;
use rmcp::RoleClient;
use rmcp::ServiceError;
use rmcp::ServiceExt;
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use super::config::Exposure;
use super::config::ServerEntry;
use super::config::Transport;
use super::guard::KnownResponsesOnly;
use super::http::HttpError;
use super::http::HttpTransport;
use super::http::TokenSource;
use super::log::McpLog;
use super::oauth::ServerAuth;
use super::provider_login::ProviderLogin;
use crate::llm::resolve_config_value;

/// Characters of a failed stdio server's stderr kept for its error.
const STDERR_TAIL_CHARS: usize = 2000;
/// How long a server may take to exit after its stdin closed, before SIGTERM.
const STDIN_CLOSE_GRACE: Duration = Duration::from_millis(500);
/// How long after SIGTERM before SIGKILL.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// Waits before the second and third attempt to connect to an HTTP server (Pi's).
const CONNECT_RETRY_DELAYS: [Duration; 2] = [Duration::from_millis(250), Duration::from_secs(1)];

/// Connection state, as `pi mcp list` and `/mcp` show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnState {
    /// Not connected yet, or connecting.
    Connecting,
    /// Connected; tools are listed.
    Connected,
    /// The last connect failed (see the error).
    Failed,
    /// The connection dropped; the next call reconnects.
    Disconnected,
    /// Shut down.
    Closed,
    /// An OAuth server without usable credentials: the user has to sign in.
    NeedsAuth,
}

impl ConnState {
    /// Pi's word for the state.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnState::Connecting => "connecting",
            ConnState::Connected => "connected",
            ConnState::Failed => "failed",
            ConnState::Disconnected => "disconnected",
            ConnState::Closed => "closed",
            ConnState::NeedsAuth => "needs-auth",
        }
    }
}

/// What is known about a server now.
#[derive(Clone, Debug)]
pub struct ServerStatus {
    /// The connection state.
    pub state: ConnState,
    /// Why it is not connected (with the tail of a stdio server's stderr).
    pub error: Option<String>,
    /// The tools of the last `tools/list`.
    pub tools: Vec<rmcp::model::Tool>,
    /// The server's `instructions` from `initialize`.
    pub instructions: Option<String>,
    /// Whether the server offers resources.
    pub has_resources: bool,
}

/// Receives a server's progress notifications of one call.
pub type ProgressFn = Arc<dyn Fn(&ProgressNotificationParam) + Send + Sync>;

/// The SDK's callbacks for one connection: log messages go to `mcp.log`, a changed tool list
/// is listed again, progress reaches the call that asked for it.
#[derive(Clone)]
struct Handler {
    server: String,
    log: Arc<McpLog>,
    roots: Vec<Root>,
    tools_changed: Arc<tokio::sync::Notify>,
    tool_refreshes: Arc<tokio::sync::watch::Sender<usize>>,
    progress: Arc<Mutex<Vec<(rmcp::model::ProgressToken, ProgressFn)>>>,
}

impl ClientHandler for Handler {
    fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> impl std::future::Future<Output = Result<ListRootsResult, ErrorData>> + Send + '_ {
        std::future::ready(Ok(ListRootsResult::new(self.roots.clone())))
    }

    fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        let level = serde_json::to_value(params.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "info".to_string());
        self.log
            .write(&self.server, &level, params.logger.as_deref(), &params.data);
        std::future::ready(())
    }

    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        let listeners = self.progress.lock().unwrap_or_else(|e| e.into_inner());
        for (token, listener) in listeners.iter() {
            if *token == params.progress_token {
                listener(&params);
            }
        }
        std::future::ready(())
    }

    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        // Counted before the list is fetched again, so a call whose server announced the
        // change before answering waits for the new list (see `McpServer::call_tool`).
        self.tool_refreshes.send_modify(|n| *n += 1);
        self.tools_changed.notify_one();
        std::future::ready(())
    }

    fn get_info(&self) -> InitializeRequestParams {
        let mut capabilities = ClientCapabilities::default();
        #[allow(deprecated)]
        {
            capabilities.roots = Some(RootsCapabilities::default());
        }
        let mut params = InitializeRequestParams::new(
            capabilities,
            Implementation::new("pi", env!("CARGO_PKG_VERSION")),
        );
        params.protocol_version = ProtocolVersion::V_2025_11_25;
        params
    }
}

/// A spawned stdio server: its process group and the tail of its stderr.
struct ChildProcess {
    child: tokio::process::Child,
    pgid: Option<i32>,
    stderr: Arc<Mutex<String>>,
}

impl ChildProcess {
    fn stderr_tail(&self) -> Option<String> {
        let text = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        let trimmed = text.trim();
        (!trimmed.is_empty()).then(|| tail_chars(trimmed, STDERR_TAIL_CHARS))
    }

    fn signal_group(&self, signal: i32) {
        if let Some(pgid) = self.pgid {
            // SAFETY: kill(2) with a negative pid signals the process group we created.
            #[allow(unsafe_code)]
            unsafe {
                libc::kill(-pgid, signal);
            }
        }
    }

    /// stdin is already closed (the transport is gone): wait, then SIGTERM, then SIGKILL.
    async fn stop(mut self) {
        let exited = tokio::time::timeout(STDIN_CLOSE_GRACE, self.child.wait()).await;
        if exited.is_err() {
            self.signal_group(libc::SIGTERM);
            if tokio::time::timeout(CLOSE_TIMEOUT, self.child.wait())
                .await
                .is_err()
            {
                self.signal_group(libc::SIGKILL);
                let _ = self.child.wait().await;
            }
        }
        // Children of the server that ignored stdin closing would otherwise outlive it.
        self.signal_group(libc::SIGTERM);
    }
}

fn tail_chars(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_string();
    }
    text.chars().skip(count - max).collect()
}

/// An open connection.
struct Live {
    service: RunningService<RoleClient, Handler>,
    child: Option<ChildProcess>,
}

impl Live {
    fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }

    fn is_open(&self) -> bool {
        !self.service.is_closed() && !self.service.peer().is_transport_closed()
    }

    async fn close(self) {
        let Live { service, child } = self;
        // Cancelling the service drops the transport, which closes the server's stdin.
        let _ = service.cancel().await;
        if let Some(child) = child {
            child.stop().await;
        }
    }
}

/// One configured server, connected lazily and again after a drop.
pub struct McpServer {
    /// The configuration.
    pub entry: ServerEntry,
    cwd: PathBuf,
    log: Arc<McpLog>,
    live: tokio::sync::Mutex<Option<Live>>,
    status: Mutex<ServerStatus>,
    tools_changed: Arc<tokio::sync::Notify>,
    /// `notifications/tools/list_changed` received whose new list is not in yet.
    tool_refreshes: Arc<tokio::sync::watch::Sender<usize>>,
    progress: Arc<Mutex<Vec<(rmcp::model::ProgressToken, ProgressFn)>>>,
    closed: CancellationToken,
    /// Where an HTTP server's bearer token comes from (none for stdio servers and HTTP
    /// servers with their own `Authorization` header).
    auth: Option<TokenSource>,
    /// Set when the first connection attempt starts (see [`McpServer::settled`]).
    attempted: std::sync::atomic::AtomicBool,
    /// `enabled` and `exposure` now: the configuration's, until `/mcp` changes them.
    settings: Mutex<LiveSettings>,
}

/// What `/mcp` can change for the running session (it also saves it to `mcp.json`).
#[derive(Clone, Copy, Debug)]
struct LiveSettings {
    enabled: bool,
    exposure: Exposure,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.entry.name)
            .finish()
    }
}

impl McpServer {
    /// A server of `entry`; relative `cwd` entries resolve against `cwd`. Nothing connects yet.
    pub fn new(entry: ServerEntry, cwd: &Path, log: Arc<McpLog>) -> Arc<McpServer> {
        McpServer::with_credentials(entry, cwd, log, None)
    }

    /// Like [`McpServer::new`]; an HTTP server without an `Authorization` header sends the
    /// login of its `auth.provider`, or else uses OAuth, with the credentials stored in
    /// `agent_dir` (when given).
    pub fn with_credentials(
        entry: ServerEntry,
        cwd: &Path,
        log: Arc<McpLog>,
        agent_dir: Option<&Path>,
    ) -> Arc<McpServer> {
        let auth = match (&entry.config.transport, agent_dir) {
            (Transport::Http { url, headers }, Some(dir))
                if !headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("authorization")) =>
            {
                Some(match ProviderLogin::from_entry(&entry.config.raw, dir) {
                    Some(login) => TokenSource::Provider(Arc::new(login)),
                    None => TokenSource::OAuth(Arc::new(ServerAuth::new(
                        &entry.name,
                        url,
                        entry.config.raw.get("oauth"),
                        dir,
                    ))),
                })
            }
            _ => None,
        };
        let settings = LiveSettings {
            enabled: entry.config.enabled,
            exposure: entry.config.exposure(),
        };
        Arc::new(McpServer {
            auth,
            entry,
            cwd: cwd.to_path_buf(),
            log,
            live: tokio::sync::Mutex::new(None),
            status: Mutex::new(ServerStatus {
                state: ConnState::Connecting,
                error: None,
                tools: Vec::new(),
                instructions: None,
                has_resources: false,
            }),
            tools_changed: Arc::new(tokio::sync::Notify::new()),
            tool_refreshes: Arc::new(tokio::sync::watch::channel(0).0),
            progress: Arc::new(Mutex::new(Vec::new())),
            closed: CancellationToken::new(),
            attempted: std::sync::atomic::AtomicBool::new(false),
            settings: Mutex::new(settings),
        })
    }

    /// The server name.
    pub fn name(&self) -> &str {
        &self.entry.name
    }

    fn settings(&self) -> LiveSettings {
        *self.settings.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the server is enabled now (`enabled` in `mcp.json`, or as `/mcp` set it).
    pub fn enabled(&self) -> bool {
        self.settings().enabled
    }

    /// The server's exposure now (`exposure` in `mcp.json`, or as `/mcp` set it).
    pub fn exposure(&self) -> Exposure {
        self.settings().exposure
    }

    /// One tool's exposure now: `toolExposure` first, then the server's exposure.
    pub fn tool_exposure(&self, tool: &str) -> Exposure {
        self.entry.config.tool_exposure_over(tool, self.exposure())
    }

    /// Exposures the server can give its tools now: the server's and every `toolExposure`
    /// value.
    pub fn configured_exposures(&self) -> Vec<Exposure> {
        let mut out = vec![self.exposure()];
        out.extend(self.entry.config.tool_exposure.iter().map(|(_, e)| *e));
        out
    }

    /// Applies a `/mcp` exposure change to the running session: the next request declares
    /// (or stops declaring) the server's tools accordingly.
    pub fn set_exposure(&self, exposure: Exposure) {
        self.settings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .exposure = exposure;
    }

    /// Applies a `/mcp` enable or disable to the running session, as Pi does at once:
    /// disabling closes the connection (its tools leave the next request), enabling
    /// connects (the outcome is the server's state and error).
    pub async fn set_enabled(self: &Arc<Self>, enabled: bool) {
        self.settings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .enabled = enabled;
        if enabled {
            let _ = self.connect().await;
        } else {
            if let Some(old) = self.live.lock().await.take() {
                old.close().await;
            }
            self.set_status(|s| {
                s.state = ConnState::Connecting;
                s.error = None;
                s.tools.clear();
            });
        }
    }

    /// The server's OAuth, when it uses OAuth (an HTTP server without an `Authorization`
    /// header): what `pi mcp login|logout` and `/mcp login|logout` act on.
    pub fn oauth(&self) -> Option<&Arc<ServerAuth>> {
        match &self.auth {
            Some(TokenSource::OAuth(auth)) => Some(auth),
            _ => None,
        }
    }

    /// The provider login the server authenticates with (`auth.provider`), if any.
    pub fn provider_login(&self) -> Option<&Arc<ProviderLogin>> {
        match &self.auth {
            Some(TokenSource::Provider(login)) => Some(login),
            _ => None,
        }
    }

    /// Drops the connection and connects again (`/mcp reconnect`, and with fresh
    /// credentials after a sign-in).
    pub async fn reconnect(self: &Arc<Self>) -> Result<Peer<RoleClient>, String> {
        if let Some(old) = self.live.lock().await.take() {
            old.close().await;
        }
        self.connect().await
    }

    /// Disconnects after the stored credentials were removed; the server then needs sign-in.
    pub async fn signed_out(self: &Arc<Self>) {
        if let Some(old) = self.live.lock().await.take() {
            old.close().await;
        }
        self.mark_needs_auth();
    }

    fn mark_needs_auth(&self) {
        self.set_status(|s| {
            s.state = ConnState::NeedsAuth;
            s.error = None;
        });
    }

    /// Pi's message for a server that needs sign-in: with `/login <provider>` for a
    /// provider login, else `/mcp`.
    pub fn sign_in_required(&self) -> String {
        match self.provider_login() {
            Some(login) => login.sign_in_message(&self.entry.name),
            None => format!(
                "MCP server \"{}\" requires sign-in. Run /mcp to sign in.",
                self.entry.name
            ),
        }
    }

    /// A snapshot of the state, error and tools.
    pub fn status(&self) -> ServerStatus {
        self.status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_status(&self, f: impl FnOnce(&mut ServerStatus)) {
        f(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.entry.config.timeout_secs)
    }

    /// Connects when not connected (or the connection dropped); the error says why not.
    pub async fn connect(self: &Arc<Self>) -> Result<Peer<RoleClient>, String> {
        if self.closed.is_cancelled() {
            return Err(format!("MCP server \"{}\" is shut down", self.entry.name));
        }
        self.attempted
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let mut live = self.live.lock().await;
        if let Some(open) = live.as_ref() {
            if open.is_open() {
                return Ok(open.peer());
            }
        }
        if let Some(old) = live.take() {
            old.close().await;
        }
        self.set_status(|s| s.state = ConnState::Connecting);
        // HTTP servers get two more attempts after network errors and transient statuses.
        let retries: &[Duration] = match self.entry.config.transport {
            Transport::Http { .. } => &CONNECT_RETRY_DELAYS,
            Transport::Stdio { .. } => &[],
        };
        let mut attempt = 0;
        let opened = loop {
            match self.open().await {
                Err(failure) if failure.transient && attempt < retries.len() => {
                    tokio::select! {
                        _ = tokio::time::sleep(retries[attempt]) => {}
                        _ = self.closed.cancelled() => break Err(failure),
                    }
                    attempt += 1;
                }
                other => break other,
            }
        };
        match opened {
            Ok(opened) => {
                let peer = opened.peer();
                *live = Some(opened);
                Ok(peer)
            }
            Err(OpenFailure {
                needs_sign_in: true,
                ..
            }) => {
                self.mark_needs_auth();
                Err(self.sign_in_required())
            }
            Err(OpenFailure {
                message, stderr, ..
            }) => {
                let error = match stderr {
                    Some(tail) => format!("{message}\n{tail}"),
                    None => message,
                };
                self.set_status(|s| {
                    s.state = ConnState::Failed;
                    s.error = Some(error.clone());
                });
                Err(format!(
                    "MCP server \"{}\" failed to connect: {error}",
                    self.entry.name
                ))
            }
        }
    }

    /// Spawns or dials the server, initializes and lists its tools.
    async fn open(self: &Arc<Self>) -> Result<Live, OpenFailure> {
        let handler = Handler {
            server: self.entry.name.clone(),
            log: self.log.clone(),
            roots: vec![Root::new(file_url(&self.cwd)).with_name(
                self.cwd
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            )],
            tools_changed: self.tools_changed.clone(),
            tool_refreshes: self.tool_refreshes.clone(),
            progress: self.progress.clone(),
        };
        let (service, child) = match &self.entry.config.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut child = self
                    .spawn(command, args, env, cwd.as_deref())
                    .map_err(|e| OpenFailure::new(e, None))?;
                // `spawn` pipes both; a child without them cannot be spoken to.
                let (Some(stdin), Some(stdout)) =
                    (child.child.stdin.take(), child.child.stdout.take())
                else {
                    return Err(OpenFailure::new(
                        "the server's stdin and stdout are not pipes".into(),
                        None,
                    ));
                };
                let transport = KnownResponsesOnly::new(
                    rmcp::transport::async_rw::AsyncRwTransport::new_client(stdout, stdin),
                );
                let served = tokio::time::timeout(self.timeout(), handler.serve(transport)).await;
                match served {
                    Ok(Ok(service)) => (service, Some(child)),
                    Ok(Err(e)) => {
                        // Give a dying server a moment to finish its stderr.
                        let _ =
                            tokio::time::timeout(Duration::from_millis(200), child.child.wait())
                                .await;
                        let tail = child.stderr_tail();
                        child.stop().await;
                        return Err(OpenFailure::new(initialize_error(&e), tail));
                    }
                    Err(_) => {
                        let tail = child.stderr_tail();
                        child.stop().await;
                        return Err(OpenFailure::new(timeout_message(self.timeout()), tail));
                    }
                }
            }
            Transport::Http { url, headers } => {
                let mut resolved = Vec::new();
                for (key, value) in headers {
                    let what = format!("MCP server \"{}\" header \"{key}\"", self.entry.name);
                    let value =
                        resolve_value(value, &what).map_err(|e| OpenFailure::new(e, None))?;
                    resolved.push((key.clone(), value));
                }
                let transport = KnownResponsesOnly::new(HttpTransport::with_auth(
                    http_client(),
                    url,
                    resolved,
                    self.auth.clone(),
                ));
                match tokio::time::timeout(self.timeout(), handler.serve(transport)).await {
                    Ok(Ok(service)) => (service, None),
                    Ok(Err(e)) => {
                        let http = init_http_error(&e);
                        let transient = http.is_some_and(HttpError::is_transient);
                        let mut failure =
                            OpenFailure::new(initialize_error(&e), None).transient_if(transient);
                        failure.needs_sign_in = self.needs_sign_in(http);
                        return Err(failure);
                    }
                    Err(_) => return Err(OpenFailure::new(timeout_message(self.timeout()), None)),
                }
            }
        };
        let info = service.peer_info();
        let has_tools = info
            .as_ref()
            .is_some_and(|i| i.capabilities.tools.is_some());
        let tools = if has_tools {
            let listed =
                tokio::time::timeout(self.timeout(), service.peer().list_all_tools()).await;
            match listed {
                Ok(Ok(tools)) => tools,
                Ok(Err(e)) => {
                    let live = Live { service, child };
                    let tail = live.child.as_ref().and_then(ChildProcess::stderr_tail);
                    live.close().await;
                    let mut failure =
                        OpenFailure::new(service_error_message(&e, self.timeout()), tail)
                            .transient_if(is_transient(&e));
                    failure.needs_sign_in = self.needs_sign_in(service_http_error(&e));
                    return Err(failure);
                }
                Err(_) => {
                    let live = Live { service, child };
                    let tail = live.child.as_ref().and_then(ChildProcess::stderr_tail);
                    live.close().await;
                    return Err(OpenFailure::new(timeout_message(self.timeout()), tail));
                }
            }
        } else {
            Vec::new()
        };
        let instructions = info
            .as_ref()
            .and_then(|i| i.instructions.clone())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        let has_resources = info
            .as_ref()
            .is_some_and(|i| i.capabilities.resources.is_some());
        self.set_status(|s| {
            s.state = ConnState::Connected;
            s.error = None;
            s.tools = tools;
            s.instructions = instructions;
            s.has_resources = has_resources;
        });
        self.watch_tool_list(service.peer().clone());
        Ok(Live { service, child })
    }

    /// Lists the tools again whenever the server announces a change, while this peer lives.
    fn watch_tool_list(self: &Arc<Self>, peer: Peer<RoleClient>) {
        let server = Arc::downgrade(self);
        let changed = self.tools_changed.clone();
        let refreshes = self.tool_refreshes.clone();
        let closed = self.closed.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = changed.notified() => {}
                    _ = closed.cancelled() => return,
                }
                if peer.is_transport_closed() {
                    // A newer connection's watcher may be the one this change was for.
                    changed.notify_one();
                    return;
                }
                let Some(server) = server.upgrade() else {
                    return;
                };
                let announced = *refreshes.borrow();
                match peer.list_all_tools().await {
                    Ok(tools) => server.set_status(|s| s.tools = tools),
                    Err(e) => server.set_status(|s| {
                        s.error = Some(format!("Failed to refresh tools: {e}"));
                    }),
                }
                refreshes.send_modify(|n| *n = n.saturating_sub(announced));
            }
        });
    }

    fn spawn(
        &self,
        command: &str,
        args: &[String],
        env: &[(String, String)],
        cwd: Option<&str>,
    ) -> Result<ChildProcess, String> {
        let name = &self.entry.name;
        let mut resolved_env = Vec::new();
        for (key, value) in env {
            resolved_env.push((
                key.clone(),
                resolve_value(value, &format!("MCP server \"{name}\" env \"{key}\""))?,
            ));
        }
        let dir = self.cwd.join(expand_home(cwd.unwrap_or(".")));
        let mut cmd = tokio::process::Command::new(expand_home(command));
        cmd.args(args.iter().map(|a| expand_home(a)))
            .current_dir(&dir)
            .envs(resolved_env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            // Should pi die without closing it, the server must not linger.
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| spawn_error(command, &e))?;
        let pgid = child.id().map(|id| id as i32);
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(mut pipe) = child.stderr.take() {
            let sink = stderr.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let mut text = sink.lock().unwrap_or_else(|e| e.into_inner());
                    text.push_str(&String::from_utf8_lossy(&buf[..n]));
                    if text.len() > 4 * STDERR_TAIL_CHARS {
                        let keep = tail_chars(&text, STDERR_TAIL_CHARS);
                        *text = keep;
                    }
                }
            });
        }
        Ok(ChildProcess {
            child,
            pgid,
            stderr,
        })
    }

    /// Calls a tool. `on_progress` sees the server's progress notifications, each of which
    /// restarts the timeout. Cancelling sends `notifications/cancelled`. A dropped connection
    /// is reported and reopened by the next call.
    ///
    /// A streamable HTTP server that forgot the session (a restart, a deploy) did not run the
    /// call: it is retried once on a new session. Nothing else is retried, since a call may
    /// have had effects.
    pub async fn call_tool(
        self: &Arc<Self>,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        cancel: CancellationToken,
        on_progress: ProgressFn,
    ) -> Result<CallToolResult, String> {
        let first = self
            .call_tool_once(tool, arguments.clone(), cancel.clone(), on_progress.clone())
            .await;
        // A server that changed its tools during the call (and said so before answering)
        // has them declared in the next request: the new list is waited for, within the
        // server's timeout.
        let mut refreshes = self.tool_refreshes.subscribe();
        let _ = tokio::time::timeout(self.timeout(), refreshes.wait_for(|n| *n == 0)).await;
        match first {
            Err(CallFailure::SessionExpired(_)) => {
                if let Some(old) = self.live.lock().await.take() {
                    // Other calls on the old session fail the same way and retry likewise.
                    tokio::spawn(old.close());
                }
                self.call_tool_once(tool, arguments, cancel, on_progress)
                    .await
                    .map_err(CallFailure::into_message)
            }
            other => other.map_err(CallFailure::into_message),
        }
    }

    async fn call_tool_once(
        self: &Arc<Self>,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        cancel: CancellationToken,
        on_progress: ProgressFn,
    ) -> Result<CallToolResult, CallFailure> {
        let peer = tokio::select! {
            peer = self.connect() => peer.map_err(CallFailure::Other)?,
            _ = cancel.cancelled() => return Err(CallFailure::Other("MCP request aborted".to_string())),
        };
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let mut options = PeerRequestOptions::with_timeout(self.timeout());
        options.reset_timeout_on_progress = true;
        let handle = match peer.send_request_with_option(request, options).await {
            Ok(handle) => handle,
            Err(e) => return Err(self.call_failure(&e).await),
        };
        let token = handle.progress_token.clone();
        let id = handle.id.clone();
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((token.clone(), on_progress));
        let outcome = tokio::select! {
            response = handle.await_response() => Some(response),
            _ = cancel.cancelled() => None,
            _ = self.closed.cancelled() => None,
        };
        self.progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(t, _)| *t != token);
        match outcome {
            None => {
                let _ = peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(id),
                        Some("Aborted".to_string()),
                    ))
                    .await;
                Err(CallFailure::Other("MCP request aborted".to_string()))
            }
            Some(Ok(ServerResult::CallToolResult(result))) => Ok(result),
            Some(Ok(_)) => Err(CallFailure::Other(
                "Invalid MCP tools/call result".to_string(),
            )),
            Some(Err(e)) => Err(self.call_failure(&e).await),
        }
    }

    /// Whether a failure means the user has to sign in: a rejection after a refresh, or any
    /// 401 of a server that uses OAuth or a provider login.
    fn needs_sign_in(&self, error: Option<&HttpError>) -> bool {
        matches!(error, Some(HttpError::SignInRequired))
            || (self.auth.is_some() && matches!(error, Some(HttpError::AuthRequired)))
    }

    async fn call_failure(self: &Arc<Self>, error: &ServiceError) -> CallFailure {
        if self.needs_sign_in(service_http_error(error)) {
            if let Some(old) = self.live.lock().await.take() {
                tokio::spawn(old.close());
            }
            self.mark_needs_auth();
            return CallFailure::Other(self.sign_in_required());
        }
        let expired = matches!(error, ServiceError::TransportSend(e)
            if matches!(HttpError::find(e), Some(HttpError::SessionExpired)));
        let message = self.request_failed(error).await;
        if expired {
            CallFailure::SessionExpired(message)
        } else {
            CallFailure::Other(message)
        }
    }

    /// The message for a failed request; a closed transport marks the server disconnected.
    async fn request_failed(self: &Arc<Self>, error: &ServiceError) -> String {
        let message = service_error_message(error, self.timeout());
        // An HTTP server that answered with an error is still connected.
        let dropped = match error {
            ServiceError::TransportClosed => true,
            ServiceError::TransportSend(e) => {
                HttpError::find(e).is_none_or(|h| matches!(h, HttpError::Closed))
            }
            _ => false,
        };
        if dropped {
            let tail = {
                let live = self.live.lock().await;
                live.as_ref()
                    .and_then(|l| l.child.as_ref())
                    .and_then(ChildProcess::stderr_tail)
            };
            self.set_status(|s| {
                s.state = ConnState::Disconnected;
                s.error = Some(match &tail {
                    Some(tail) => format!("Connection closed\n{tail}"),
                    None => "Connection closed".to_string(),
                });
            });
        }
        message
    }

    /// Waits until the connection attempt under way has settled (connected or failed),
    /// without starting another: a failed server is not tried again by waiting for it.
    pub async fn settled(self: &Arc<Self>) {
        if !self.attempted.load(std::sync::atomic::Ordering::SeqCst) {
            // Nothing started it yet: this is the first attempt.
            let _ = self.connect().await;
            return;
        }
        loop {
            drop(self.live.lock().await);
            if self.status().state != ConnState::Connecting || self.closed.is_cancelled() {
                return;
            }
            // The attempt's task has not taken the connection lock yet.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the server (stdin, SIGTERM, SIGKILL for stdio) and refuses further calls.
    pub async fn close(&self) {
        self.closed.cancel();
        let live = self.live.lock().await.take();
        if let Some(live) = live {
            live.close().await;
        }
        self.set_status(|s| s.state = ConnState::Closed);
    }
}

fn file_url(path: &Path) -> String {
    let mut out = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// `~` and `~/…` name the home directory.
fn expand_home(value: &str) -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match (value, home) {
        ("~", Some(home)) => home,
        (v, Some(home)) if v.starts_with("~/") => home.join(&v[2..]),
        (v, _) => PathBuf::from(v),
    }
}

/// A `${VAR}` template or `!command` value, or Pi's error naming what could not be resolved.
pub(crate) fn resolve_value(value: &str, what: &str) -> Result<String, String> {
    let env = |k: &str| std::env::var(k).ok();
    if let Some(resolved) = resolve_config_value(value, &env) {
        return Ok(resolved);
    }
    if let Some(command) = value.strip_prefix('!') {
        return Err(format!(
            "Failed to resolve {what} from shell command: {command}"
        ));
    }
    let missing: Vec<String> = env_names(value)
        .into_iter()
        .filter(|name| std::env::var(name).map_or(true, |v| v.is_empty()))
        .collect();
    Err(match missing.len() {
        0 => format!("Failed to resolve {what}"),
        1 => format!(
            "Failed to resolve {what} from environment variable: {}",
            missing[0]
        ),
        _ => format!(
            "Failed to resolve {what} from environment variables: {}",
            missing.join(", ")
        ),
    })
}

/// The variable names a template refers to (`$NAME`, `${NAME}`), in order, once each.
fn env_names(value: &str) -> Vec<String> {
    // A fixed pattern, checked by the tests: it compiles.
    #[allow(clippy::expect_used)]
    let re =
        regex::Regex::new(r"\$\$|\$!|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
            .expect("valid regex");
    let mut names: Vec<String> = Vec::new();
    for caps in re.captures_iter(value) {
        if let Some(name) = caps.get(1).or_else(|| caps.get(2)) {
            if !names.iter().any(|n| n == name.as_str()) {
                names.push(name.as_str().to_string());
            }
        }
    }
    names
}

/// Node's wording, as Pi reports a server that cannot start: `spawn <command> ENOENT`.
fn spawn_error(command: &str, error: &std::io::Error) -> String {
    let code = match error.raw_os_error() {
        Some(libc::ENOENT) => "ENOENT".to_string(),
        Some(libc::EACCES) => "EACCES".to_string(),
        Some(libc::ENOTDIR) => "ENOTDIR".to_string(),
        Some(libc::ENOEXEC) => "ENOEXEC".to_string(),
        _ => error.to_string(),
    };
    format!("spawn {command} {code}")
}

/// The HTTP failure behind a failed `initialize`.
fn init_http_error(error: &rmcp::service::ClientInitializeError) -> Option<&HttpError> {
    match error {
        rmcp::service::ClientInitializeError::TransportError { error, .. } => {
            HttpError::find(error)
        }
        other => HttpError::find(other),
    }
}

/// The HTTP failure behind a failed request.
fn service_http_error(error: &ServiceError) -> Option<&HttpError> {
    match error {
        ServiceError::TransportSend(e) => HttpError::find(e),
        _ => None,
    }
}

/// Whether a failed request is worth another connect: an HTTP network error or transient status.
pub(crate) fn is_transient(error: &ServiceError) -> bool {
    match error {
        ServiceError::TransportSend(e) => HttpError::find(e).is_some_and(HttpError::is_transient),
        _ => false,
    }
}

/// Why a tool call failed; an expired HTTP session is worth one retry.
enum CallFailure {
    SessionExpired(String),
    Other(String),
}

impl CallFailure {
    fn into_message(self) -> String {
        match self {
            CallFailure::SessionExpired(m) | CallFailure::Other(m) => m,
        }
    }
}

/// Why a connect failed: the message, a stdio server's stderr tail, and whether another
/// attempt may succeed.
struct OpenFailure {
    message: String,
    stderr: Option<String>,
    transient: bool,
    needs_sign_in: bool,
}

impl OpenFailure {
    fn new(message: String, stderr: Option<String>) -> Self {
        OpenFailure {
            message,
            stderr,
            transient: false,
            needs_sign_in: false,
        }
    }

    fn transient_if(mut self, transient: bool) -> Self {
        self.transient = transient;
        self
    }
}

/// The HTTP client of every MCP server: one pool for the process.
fn http_client() -> reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .user_agent(concat!("pi-rust/", env!("CARGO_PKG_VERSION")))
                .build()
                .unwrap_or_default()
        })
        .clone()
}

fn timeout_message(timeout: Duration) -> String {
    format!("MCP request timed out after {}ms", timeout.as_millis())
}

/// Pi's texts for request failures.
fn service_error_message(error: &ServiceError, timeout: Duration) -> String {
    match error {
        ServiceError::McpError(data) => data.message.to_string(),
        ServiceError::Timeout { .. } => timeout_message(timeout),
        ServiceError::TransportSend(e) => match HttpError::find(e) {
            Some(http) => http.to_string(),
            None => "MCP connection closed".to_string(),
        },
        ServiceError::TransportClosed => "MCP connection closed".to_string(),
        ServiceError::Cancelled { .. } => "MCP request aborted".to_string(),
        other => other.to_string(),
    }
}

fn initialize_error(error: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError as E;
    if let Some(http) = init_http_error(error) {
        return http.to_string();
    }
    match error {
        E::ConnectionClosed(_) => "MCP connection closed".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unresolved_values_name_what_is_missing() {
        std::env::set_var("PI_MCP_TEST_SET", "x");
        assert_eq!(resolve_value("a${PI_MCP_TEST_SET}", "v").unwrap(), "ax");
        assert_eq!(
            resolve_value("${PI_MCP_TEST_UNSET1}-$PI_MCP_TEST_UNSET2", "MCP server \"s\" env \"K\"")
                .unwrap_err(),
            "Failed to resolve MCP server \"s\" env \"K\" from environment variables: PI_MCP_TEST_UNSET1, PI_MCP_TEST_UNSET2"
        );
        assert_eq!(resolve_value("!echo hi", "v").unwrap(), "hi");
        assert_eq!(
            resolve_value("!false", "v").unwrap_err(),
            "Failed to resolve v from shell command: false"
        );
    }

    #[test]
    fn roots_are_file_urls() {
        assert_eq!(file_url(Path::new("/a b/c")), "file:///a%20b/c");
    }
}
