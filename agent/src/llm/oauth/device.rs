//! RFC 8628 device-code polling, shared by the Copilot and Codex device logins.

use std::future::Future;
use std::time::{Duration, Instant};

/// What one poll found.
pub(crate) enum Poll<T> {
    /// Signed in.
    Complete(T),
    /// Not yet approved.
    Pending,
    /// Poll less often: the server's new interval, else 5 s more (RFC 8628 §3.5).
    SlowDown(Option<f64>),
    /// Denied, expired or broken: stop with this message.
    Failed(String),
}

/// RFC 8628 §3.2: without `interval` the client waits 5 s between polls.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
/// Never poll faster than once a second, whatever the server says.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

fn interval_of(seconds: Option<f64>) -> Duration {
    match seconds.filter(|s| s.is_finite() && *s > 0.0) {
        Some(s) => Duration::from_secs_f64(s).max(MIN_INTERVAL),
        None => DEFAULT_INTERVAL,
    }
}

/// Polls until `poll` completes or fails, or `expires_in` seconds pass. `wait_first`
/// sleeps one interval before the first poll (GitHub answers an immediate poll with
/// `authorization_pending` anyway).
pub(crate) async fn poll_device_flow<T, F, Fut>(
    interval_seconds: Option<f64>,
    expires_in_seconds: Option<f64>,
    wait_first: bool,
    mut poll: F,
) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Poll<T>, String>>,
{
    let deadline = expires_in_seconds
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(|s| Instant::now() + Duration::from_secs_f64(s));
    let remaining = || deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let mut interval = interval_of(interval_seconds);
    let mut slow_downs = 0u32;
    if wait_first {
        tokio::time::sleep(remaining().map_or(interval, |r| r.min(interval))).await;
    }
    while !matches!(remaining(), Some(r) if r.is_zero()) {
        match poll().await? {
            Poll::Complete(value) => return Ok(value),
            Poll::Failed(message) => return Err(message),
            Poll::Pending => {}
            Poll::SlowDown(server) => {
                slow_downs += 1;
                interval = match server.filter(|s| s.is_finite() && *s > 0.0) {
                    Some(s) => interval_of(Some(s)),
                    None => interval + Duration::from_secs(5),
                };
            }
        }
        let wait = remaining().map_or(interval, |r| r.min(interval));
        if wait.is_zero() {
            break;
        }
        tokio::time::sleep(wait).await;
    }
    Err(if slow_downs > 0 {
        "Device flow timed out after one or more slow_down responses. This is often caused by \
         clock drift in WSL or VM environments. Please sync or restart the VM clock and try \
         again."
            .into()
    } else {
        "Device flow timed out".into()
    })
}
