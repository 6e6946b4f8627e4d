//! OAuth credentials in `auth.json`: saving a login, removing it (`/logout`), and handing out
//! access tokens for requests, refreshed when they expire within five minutes.
//!
//! A refresh happens under the same lock Pi takes (a `auth.json.lock` directory next to the
//! file, as `proper-lockfile` makes it, stale after 30 s), and the expiry is checked again
//! once the lock is held: when two processes (or two requests) find the token expiring, one
//! refreshes and the other uses its result. Providers may rotate refresh tokens, so a second
//! refresh with the old one would fail.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use super::{now_ms, OAuthProvider};
use crate::config::AuthStore;

/// Tokens with less than this left are refreshed before a request (Pi's five minutes).
pub const MIN_VALIDITY_MS: f64 = 5.0 * 60.0 * 1000.0;
/// A lock older than this is left over from a crashed process.
const LOCK_STALE: Duration = Duration::from_secs(30);
/// How long to wait for another holder.
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// What [`refresh_if_expiring`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum RefreshOutcome {
    /// No OAuth credential is stored for the provider.
    NotStored,
    /// The stored token is valid long enough (possibly refreshed by someone else meanwhile).
    Valid(String),
    /// This call refreshed it; the new access token.
    Refreshed(String),
}

/// Stores a login's credential for `provider` (0600, atomically, under the lock).
pub fn save_credential(agent_dir: &Path, provider: &str, credential: Value) -> Result<(), String> {
    let path = agent_dir.join("auth.json");
    let _lock = AuthLock::acquire(&path)?;
    let mut store = AuthStore::load(agent_dir).map_err(|e| e.to_string())?;
    store.set(provider, credential).map_err(|e| e.to_string())
}

/// Removes `provider`'s stored credential; `false` when none was stored.
pub fn remove_credential(agent_dir: &Path, provider: &str) -> Result<bool, String> {
    let path = agent_dir.join("auth.json");
    let _lock = AuthLock::acquire(&path)?;
    let mut store = AuthStore::load(agent_dir).map_err(|e| e.to_string())?;
    if store.get(provider).is_none() {
        return Ok(false);
    }
    store.remove(provider).map_err(|e| e.to_string())?;
    Ok(true)
}

/// The access token for a request to `provider`: `None` when no OAuth credential is stored.
/// An expiring token is refreshed first. When the refresh fails the old token is returned, so
/// the provider's answer (usually 401) says what is wrong, and the error is returned beside
/// it for the caller to show.
pub fn oauth_access_token(agent_dir: &Path, provider: &str) -> (Option<String>, Option<String>) {
    match refresh_if_expiring(agent_dir, provider) {
        Ok(RefreshOutcome::NotStored) => (None, None),
        Ok(RefreshOutcome::Valid(t) | RefreshOutcome::Refreshed(t)) => {
            match super::extension::lookup(provider) {
                // An extension's login: its getApiKey(credentials) makes the key.
                Some(flow) => match stored_oauth(agent_dir, provider) {
                    Ok(Some(credential)) => {
                        match super::extension::block_on(flow.api_key(credential)) {
                            Ok(key) => (Some(key), None),
                            Err(e) => (Some(t), Some(format!("getApiKey failed: {e}"))),
                        }
                    }
                    _ => (Some(t), None),
                },
                None => (Some(t), None),
            }
        }
        Err(e) => {
            let stale = stored_oauth(agent_dir, provider)
                .ok()
                .flatten()
                .and_then(|c| c.get("access").and_then(Value::as_str).map(str::to_string));
            (stale, Some(e))
        }
    }
}

/// Refreshes `provider`'s token when it expires within [`MIN_VALIDITY_MS`]. Blocking: the
/// refresh runs on its own thread and runtime, so this may be called from sync code inside
/// or outside an async runtime.
pub fn refresh_if_expiring(agent_dir: &Path, provider: &str) -> Result<RefreshOutcome, String> {
    refresh_if_expiring_within(agent_dir, provider, MIN_VALIDITY_MS)
}

/// [`refresh_if_expiring`] with another margin: the token is refreshed when less than
/// `min_validity_ms` of it is left (`pi auth print-bearer-token --min-expiry`).
pub fn refresh_if_expiring_within(
    agent_dir: &Path,
    provider: &str,
    min_validity_ms: f64,
) -> Result<RefreshOutcome, String> {
    let expiring = |c: &Value| {
        c.get("expires").and_then(Value::as_f64).unwrap_or(0.0) <= now_ms() + min_validity_ms
    };
    let access = |c: &Value| {
        c.get("access")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    // The cheap check without the lock first.
    let Some(current) = stored_oauth(agent_dir, provider)? else {
        return Ok(RefreshOutcome::NotStored);
    };
    if !expiring(&current) {
        return Ok(RefreshOutcome::Valid(access(&current)));
    }
    let builtin = OAuthProvider::from_id(provider);
    let from_extension = super::extension::lookup(provider).filter(|_| builtin.is_none());
    if builtin.is_none() && from_extension.is_none() {
        // A credential from a login this build has no flow for: use it as it is.
        return Ok(RefreshOutcome::Valid(access(&current)));
    }
    let path = agent_dir.join("auth.json");
    let _lock = AuthLock::acquire(&path)?;
    // The authoritative check: another process may have refreshed (or logged out) meanwhile.
    let Some(current) = stored_oauth(agent_dir, provider)? else {
        return Ok(RefreshOutcome::NotStored);
    };
    if !expiring(&current) {
        return Ok(RefreshOutcome::Valid(access(&current)));
    }
    let credential = current.clone();
    let refreshed = match (builtin, from_extension) {
        (None, Some(flow)) => refresh_with_extension(flow.as_ref(), credential)
            .map_err(|e| format!("OAuth refresh failed for {provider}: {e}"))?,
        (Some(flow), _) => refresh_builtin(flow, credential)
            .map_err(|e| format!("OAuth refresh failed for {provider}: {e}"))?,
        (None, None) => return Ok(RefreshOutcome::Valid(access(&current))),
    };
    let token = access(&refreshed);
    let mut store = AuthStore::load(agent_dir).map_err(|e| e.to_string())?;
    store.set(provider, refreshed).map_err(|e| e.to_string())?;
    Ok(RefreshOutcome::Refreshed(token))
}

/// An extension's refreshToken: what it returns is stored as Pi stores a login
/// (`{"type": "oauth", …credentials}`).
fn refresh_with_extension(
    flow: &dyn super::extension::ExtensionFlow,
    credential: Value,
) -> Result<Value, String> {
    let mut plain = credential;
    if let Some(map) = plain.as_object_mut() {
        map.remove("type");
    }
    let refreshed = super::extension::block_on(flow.refresh(plain))?;
    Ok(super::extension::stored_form(refreshed))
}

/// A built-in flow's refresh, on its own thread and runtime (callers may be sync code inside
/// a runtime).
fn refresh_builtin(flow: OAuthProvider, credential: Value) -> Result<Value, String> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        runtime.block_on(async move {
            tokio::time::timeout(Duration::from_secs(15), flow.refresh(&credential))
                .await
                .unwrap_or_else(|_| Err("timed out".into()))
        })
    })
    .join()
    .map_err(|_| "the refresh thread panicked".to_string())?
}

/// The raw OAuth credential object stored for `provider`, read from disk now.
fn stored_oauth(agent_dir: &Path, provider: &str) -> Result<Option<Value>, String> {
    let store = AuthStore::load(agent_dir).map_err(|e| e.to_string())?;
    Ok(store
        .raw(provider)
        .filter(|v| v.get("type").and_then(Value::as_str) == Some("oauth"))
        .cloned())
}

/// `<auth.json>.lock`, a directory created atomically (Pi's `proper-lockfile` layout, so
/// the two implementations exclude each other).
struct AuthLock {
    dir: PathBuf,
}

impl AuthLock {
    fn acquire(file: &Path) -> Result<AuthLock, String> {
        let file = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
        if let Some(parent) = file.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let mut dir = file.clone().into_os_string();
        dir.push(".lock");
        let dir = PathBuf::from(dir);
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(AuthLock { dir }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let stale = std::fs::metadata(&dir)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| SystemTime::now().duration_since(t).ok())
                        .is_some_and(|age| age > LOCK_STALE);
                    if stale {
                        let _ = std::fs::remove_dir(&dir);
                        continue;
                    }
                    if Instant::now() >= deadline {
                        return Err(format!(
                            "{} is locked by another process (remove {} if none runs)",
                            file.display(),
                            dir.display()
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(25));
                }
                Err(e) => return Err(format!("cannot lock {}: {e}", file.display())),
            }
        }
    }
}

impl Drop for AuthLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_tokens_are_used_and_logout_removes_them() {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path();
        let far = now_ms() + 3_600_000.0;
        save_credential(
            agent,
            "anthropic",
            serde_json::json!({"type": "oauth", "access": "a1", "refresh": "r1", "expires": far}),
        )
        .unwrap();
        assert_eq!(
            refresh_if_expiring(agent, "anthropic").unwrap(),
            RefreshOutcome::Valid("a1".into())
        );
        assert_eq!(
            refresh_if_expiring(agent, "openai-codex").unwrap(),
            RefreshOutcome::NotStored
        );
        // The lock is released after each step.
        assert!(!agent.join("auth.json.lock").exists());
        assert!(remove_credential(agent, "anthropic").unwrap());
        assert!(!remove_credential(agent, "anthropic").unwrap());
        assert_eq!(oauth_access_token(agent, "anthropic"), (None, None));
    }

    #[test]
    fn a_stale_lock_is_taken_over() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("auth.json");
        let dir = tmp.path().join("auth.json.lock");
        std::fs::create_dir(&dir).unwrap();
        let old = SystemTime::now() - Duration::from_secs(120);
        std::fs::File::open(&dir)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let lock = AuthLock::acquire(&file).unwrap();
        assert!(dir.exists());
        drop(lock);
        assert!(!dir.exists());
    }
}
