//! The loopback redirect listener of the browser sign-in flows: a tiny HTTP server on
//! 127.0.0.1 that waits for `GET <path>?code=…&state=…`, answers the browser with a short
//! page and hands the code to the login.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::query_param;

/// A bound callback listener.
pub struct CallbackServer {
    /// The redirect URI to send in the authorize request.
    pub redirect_uri: String,
    /// The code and the whole callback query.
    rx: mpsc::Receiver<Result<(String, String), String>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CallbackServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Where to listen and what to accept.
pub struct CallbackSpec<'a> {
    /// The provider's display name, for the browser page and errors.
    pub provider_name: &'a str,
    /// Interface to bind (`PI_OAUTH_CALLBACK_HOST`, default 127.0.0.1).
    pub host: &'a str,
    /// Port (0 = any free port).
    pub port: u16,
    /// Callback path (`/callback`, `/auth/callback`).
    pub path: &'a str,
    /// Host name written into the redirect URI (`localhost` for Anthropic).
    pub redirect_host: &'a str,
    /// The `state` the callback must carry; `None` for providers that send none (OpenRouter,
    /// whose random callback path stands in for it).
    pub state: Option<&'a str>,
}

/// The interface callbacks listen on: `PI_OAUTH_CALLBACK_HOST` (Pi's knob, e.g. `0.0.0.0`
/// inside a container), else 127.0.0.1.
pub fn callback_host() -> String {
    std::env::var("PI_OAUTH_CALLBACK_HOST")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .unwrap_or_else(|| "127.0.0.1".into())
}

impl CallbackServer {
    /// Binds the listener; an error when the port is taken.
    pub async fn start(spec: CallbackSpec<'_>) -> std::io::Result<CallbackServer> {
        let listener = TcpListener::bind((spec.host, spec.port)).await?;
        let port = listener.local_addr()?.port();
        let host = if spec.redirect_host.contains(':') {
            format!("[{}]", spec.redirect_host)
        } else {
            spec.redirect_host.to_string()
        };
        let redirect_uri = format!("http://{host}:{port}{}", spec.path);
        let (tx, rx) = mpsc::channel(1);
        let path = spec.path.to_string();
        let state = spec.state.map(str::to_string);
        let name = spec.provider_name.to_string();
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    continue;
                };
                if let Some(result) = serve_one(sock, &path, state.as_deref(), &name).await {
                    let _ = tx.send(result).await;
                    return;
                }
            }
        });
        Ok(CallbackServer {
            redirect_uri,
            rx,
            task,
        })
    }

    /// The authorization code, once the browser has come back (an error when the provider
    /// reported one).
    pub async fn wait(&mut self) -> Result<String, String> {
        self.wait_with_query().await.map(|(code, _)| code)
    }

    /// [`CallbackServer::wait`] with the callback's whole query string, for providers that
    /// send more than the code back (the client id OpenAI issues for ChatGPT sign-ins).
    pub async fn wait_with_query(&mut self) -> Result<(String, String), String> {
        self.rx
            .recv()
            .await
            .unwrap_or_else(|| Err("OAuth callback server closed".into()))
    }
}

/// Handles one connection; `Some` when it settled the login.
async fn serve_one(
    mut sock: TcpStream,
    path: &str,
    state: Option<&str>,
    name: &str,
) -> Option<Result<(String, String), String>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    // The request line and headers; a browser sends no body with GET.
    loop {
        let read = tokio::time::timeout(Duration::from_secs(10), sock.read(&mut chunk)).await;
        match read {
            Ok(Ok(0)) | Err(_) | Ok(Err(_)) => break,
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.len() > 64 * 1024 {
            break;
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let mut parts = text.lines().next().unwrap_or("").split(' ');
    let method = parts.next().unwrap_or("");
    let target = parts.next().unwrap_or("");
    let (req_path, query) = target.split_once('?').unwrap_or((target, ""));
    let (status, page, result) = if method != "GET" || req_path != path {
        (404, "Callback route not found.".to_string(), None)
    } else if state.is_some_and(|state| query_param(query, "state").as_deref() != Some(state)) {
        (400, "State mismatch.".to_string(), None)
    } else if let Some(error) = query_param(query, "error") {
        let description = query_param(query, "error_description").unwrap_or(error);
        (
            400,
            format!("{name} authorization failed."),
            Some(Err(format!("{name} authorization failed: {description}"))),
        )
    } else if let Some(code) = query_param(query, "code").filter(|c| !c.is_empty()) {
        (
            200,
            format!("Signed in to {name}. You may now close this page."),
            Some(Ok((code, query.to_string()))),
        )
    } else {
        (400, "Missing authorization code.".to_string(), None)
    };
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>pi</title></head>\
         <body><p>{}</p></body></html>",
        html_escape(&page)
    );
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        _ => "Not Found",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/html; charset=utf-8\r\n\
         cache-control: no-store\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = sock.write_all(head.as_bytes()).await;
    let _ = sock.write_all(body.as_bytes()).await;
    let _ = sock.shutdown().await;
    result
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
