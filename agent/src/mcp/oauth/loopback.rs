//! The loopback redirect target of a sign-in (RFC 8252 §7.3): a tiny HTTP server on
//! 127.0.0.1 that the browser is redirected to with `?code=…&state=…`. It answers every
//! request with a short page and hands the first response carrying the sign-in's `state` to
//! the waiting sign-in. Requests with another path or `state` get 404 or 400 and change
//! nothing, so a stray request cannot end the sign-in.

use std::sync::Arc;
use std::sync::Mutex;

use tokio::io::AsyncReadExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Bytes of a request head read before giving up on it.
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// What the authorization server sent back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizationResponse {
    /// The authorization code.
    pub code: String,
    /// The `state` it carried.
    pub state: String,
    /// The issuer (RFC 9207), when sent.
    pub iss: Option<String>,
}

struct Pending {
    state: String,
    path: String,
    answer: oneshot::Sender<Result<AuthorizationResponse, String>>,
}

/// A listening callback server; stops when dropped.
pub struct CallbackServer {
    /// `http://<host>:<port><path>` as the listener sees it.
    pub redirect_url: String,
    pending: Arc<Mutex<Option<Pending>>>,
    stop: CancellationToken,
}

impl Drop for CallbackServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl CallbackServer {
    /// Listens on `host:port` (0: any free port) for requests to `paths` (the first is the
    /// redirect URI's path). `redirect_host` is the host written in the redirect URI.
    pub async fn listen(
        host: &str,
        redirect_host: &str,
        port: u16,
        paths: Vec<String>,
    ) -> std::io::Result<CallbackServer> {
        let listener = TcpListener::bind((host, port)).await?;
        let port = listener.local_addr()?.port();
        let path = paths.first().cloned().unwrap_or_else(|| "/callback".into());
        let redirect_url = format!("http://{redirect_host}:{port}{path}");
        let pending: Arc<Mutex<Option<Pending>>> = Arc::new(Mutex::new(None));
        let stop = CancellationToken::new();
        let (accept_pending, accept_stop) = (pending.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                let stream = tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => stream,
                        Err(_) => continue,
                    },
                    _ = accept_stop.cancelled() => return,
                };
                let (pending, paths) = (accept_pending.clone(), paths.clone());
                tokio::spawn(async move {
                    let _ = handle(stream, &pending, &paths).await;
                });
            }
        });
        Ok(CallbackServer {
            redirect_url,
            pending,
            stop,
        })
    }

    /// Waits for the response carrying `state` on `path`.
    pub async fn wait(&self, state: &str, path: &str) -> Result<AuthorizationResponse, String> {
        let (answer, response) = oneshot::channel();
        *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = Some(Pending {
            state: state.to_string(),
            path: path.to_string(),
            answer,
        });
        response
            .await
            .unwrap_or_else(|_| Err("OAuth callback server closed".into()))
    }
}

/// Serves one connection: one request, one answer.
async fn handle(
    mut stream: TcpStream,
    pending: &Mutex<Option<Pending>>,
    paths: &[String],
) -> std::io::Result<()> {
    let mut head = Vec::new();
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD_BYTES {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    let target = text
        .lines()
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .unwrap_or("/");
    let (status, page) = match reqwest::Url::parse(&format!("http://callback{target}")) {
        Ok(url) => answer(&url, pending, paths),
        Err(_) => (400, Page::failed("Bad request", None)),
    };
    let body = page.html();
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Bad Request",
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/html; charset=utf-8\r\ncache-control: no-store\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// The status and page for one request; resolves the pending sign-in when it is its answer.
fn answer(url: &reqwest::Url, pending: &Mutex<Option<Pending>>, paths: &[String]) -> (u16, Page) {
    if !paths.iter().any(|p| p == url.path()) {
        return (404, Page::failed("Not found", None));
    }
    let param = |name: &str| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    let mut slot = pending.lock().unwrap_or_else(|e| e.into_inner());
    let state = param("state");
    let matches = matches!((&state, slot.as_ref()), (Some(s), Some(p)) if *s == p.state);
    // Only the sign-in's own response ends it; anything else leaves it waiting.
    let Some(waiting) = slot.take_if(|_| matches) else {
        return (400, Page::failed("Invalid or expired OAuth state", None));
    };
    let state = state.unwrap_or_default();
    if url.path() != waiting.path {
        let _ = waiting.answer.send(Err(
            "The authorization response arrived on another redirect URI".into(),
        ));
        return (400, Page::failed("Unexpected redirect URI", None));
    }
    if let Some(error) = param("error") {
        let description = param("error_description").unwrap_or(error);
        let _ = waiting.answer.send(Err(description.clone()));
        return (
            200,
            Page::failed(
                "Authorization failed. You may close this window.",
                Some(description),
            ),
        );
    }
    let Some(code) = param("code") else {
        let _ = waiting.answer.send(Err(
            "OAuth callback did not include an authorization code".into()
        ));
        return (400, Page::failed("Missing authorization code", None));
    };
    let _ = waiting.answer.send(Ok(AuthorizationResponse {
        code,
        state,
        iss: param("iss"),
    }));
    (
        200,
        Page {
            ok: true,
            message: "Signed in to the MCP server. You may now close this page.".into(),
            details: None,
        },
    )
}

/// The authorization response in a redirect URL the user pasted from the browser's address
/// bar (when the browser cannot reach this machine's loopback).
pub fn response_from_redirect_url(
    input: &str,
    redirect_url: &str,
    state: &str,
) -> Result<AuthorizationResponse, String> {
    let url = reqwest::Url::parse(input.trim())
        .map_err(|_| "Expected the full redirect URL from the browser address bar".to_string())?;
    let expected = reqwest::Url::parse(redirect_url).map_err(|e| e.to_string())?;
    if url.origin() != expected.origin() || url.path() != expected.path() {
        return Err("The redirect URL does not match this sign-in's redirect URI".into());
    }
    let param = |name: &str| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    if let Some(error) = param("error") {
        return Err(param("error_description").unwrap_or(error));
    }
    if param("state").as_deref() != Some(state) {
        return Err("The redirect URL belongs to a different sign-in".into());
    }
    let code = param("code")
        .ok_or_else(|| "The redirect URL does not contain an authorization code".to_string())?;
    Ok(AuthorizationResponse {
        code,
        state: state.to_string(),
        iss: param("iss"),
    })
}

struct Page {
    ok: bool,
    message: String,
    details: Option<String>,
}

impl Page {
    fn failed(message: &str, details: Option<String>) -> Page {
        Page {
            ok: false,
            message: message.to_string(),
            details,
        }
    }

    fn html(&self) -> String {
        let heading = if self.ok {
            "Authentication successful"
        } else {
            "Authentication failed"
        };
        let details = self
            .details
            .as_deref()
            .map(|d| format!("<pre>{}</pre>", escape(d)))
            .unwrap_or_default();
        format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>{heading}</title></head><body><h1>{heading}</h1><p>{}</p>{details}</body></html>",
            escape(&self.message)
        )
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pasted_redirect_urls_are_checked() {
        let redirect = "http://127.0.0.1:5000/callback";
        assert_eq!(
            response_from_redirect_url(
                " http://127.0.0.1:5000/callback?code=c&state=s&iss=https%3A%2F%2Fa ",
                redirect,
                "s"
            )
            .unwrap(),
            AuthorizationResponse {
                code: "c".into(),
                state: "s".into(),
                iss: Some("https://a".into())
            }
        );
        assert!(response_from_redirect_url("nope", redirect, "s")
            .unwrap_err()
            .contains("full redirect URL"));
        assert!(response_from_redirect_url(
            "http://127.0.0.1:5001/callback?code=c&state=s",
            redirect,
            "s"
        )
        .unwrap_err()
        .contains("does not match"));
        assert!(response_from_redirect_url(
            "http://127.0.0.1:5000/callback?code=c&state=x",
            redirect,
            "s"
        )
        .unwrap_err()
        .contains("different sign-in"));
        assert_eq!(
            response_from_redirect_url(
                "http://127.0.0.1:5000/callback?error=access_denied&error_description=No",
                redirect,
                "s"
            )
            .unwrap_err(),
            "No"
        );
    }
}
