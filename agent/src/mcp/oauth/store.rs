//! `<agent dir>/mcp-auth.json`: each OAuth server's state (its registered client, tokens,
//! discovered metadata and the pending sign-in's PKCE verifier and `state`), in Pi's shape so
//! the file is shared with Pi 1.6.0.
//!
//! Keys are `<namespace>|<url>` (`mcp__<server>|https://host/mcp`): servers with the same URL
//! under different names sign in separately, the same name and URL in two `mcp.json` files
//! share one sign-in. A key of the URL alone (older Pi versions) is taken over by the first
//! server that loads it. Every change re-reads the file under an exclusive lock on the agent
//! directory and writes it atomically with mode 0600, so two processes never lose each other's
//! sign-ins.

use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde::Serialize;
use serde_json::Map;
use serde_json::Value;

use crate::config::error::write_atomic;

/// The name of the credentials file in the agent directory.
pub const AUTH_FILE_NAME: &str = "mcp-auth.json";

/// How long to wait for another process refreshing the same server's tokens.
const REFRESH_LOCK_WAIT: Duration = Duration::from_secs(25);
const REFRESH_LOCK_RETRY: Duration = Duration::from_millis(100);

/// Tokens from a token response (RFC 6749 §5.1); other fields are kept as received.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tokens {
    /// The access token sent as `Authorization: Bearer`.
    pub access_token: String,
    /// Usually `Bearer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_type: Option<String>,
    /// Lifetime in seconds, as the server said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_in: Option<f64>,
    /// The refresh token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// The granted scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Anything else the server sent (`id_token`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl std::fmt::Display for Tokens {
    /// Never the tokens themselves: they must not reach a terminal or a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<tokens>")
    }
}

/// One server's state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerState {
    /// The exact server URL the state belongs to; state of another URL is ignored.
    #[serde(default)]
    pub server_url: String,
    /// The client registered dynamically (RFC 7591 response: `client_id`, `redirect_uris`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_information: Option<Map<String, Value>>,
    /// The current tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    /// When the access token expires, epoch milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_expire_at: Option<f64>,
    /// The PKCE verifier of the latest authorization request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_verifier: Option<String>,
    /// The `state` of the latest authorization request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth_state: Option<String>,
    /// Discovered authorization server and protected resource metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<Value>,
    /// Fields written by other versions.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The credentials file.
#[derive(Clone, Debug)]
pub struct CredentialStore {
    dir: PathBuf,
}

impl CredentialStore {
    /// The store of an agent directory.
    pub fn new(agent_dir: &Path) -> CredentialStore {
        CredentialStore {
            dir: agent_dir.to_path_buf(),
        }
    }

    /// `<agent dir>/mcp-auth.json`.
    pub fn path(&self) -> PathBuf {
        self.dir.join(AUTH_FILE_NAME)
    }

    /// The server's state, taking over state stored under its URL alone; `None` when there is
    /// none for this exact URL.
    pub fn load(&self, name: &str, server_url: &str) -> Result<Option<ServerState>, String> {
        let (key, legacy) = store_keys(name, server_url);
        let url = normalize_url(server_url);
        let found = self.update(|states| {
            if !states.contains_key(&key) {
                if let Some(old) = states.shift_remove(&legacy) {
                    states.insert(key.clone(), old);
                    return (states.get(&key).cloned(), true);
                }
            }
            (states.get(&key).cloned(), false)
        })?;
        Ok(found
            .and_then(|v| serde_json::from_value::<ServerState>(v).ok())
            .filter(|s| s.server_url == url))
    }

    /// Replaces the server's state.
    pub fn save(&self, name: &str, server_url: &str, state: &ServerState) -> Result<(), String> {
        let (key, _) = store_keys(name, server_url);
        let mut state = state.clone();
        state.server_url = normalize_url(server_url);
        let value = serde_json::to_value(&state).map_err(|e| e.to_string())?;
        self.update(|states| {
            states.insert(key.clone(), value);
            ((), true)
        })
    }

    /// Changes the server's state (a fresh one when none is stored) and returns the result.
    pub fn modify(
        &self,
        name: &str,
        server_url: &str,
        change: impl FnOnce(&mut ServerState),
    ) -> Result<ServerState, String> {
        let mut state = self.load(name, server_url)?.unwrap_or_else(|| ServerState {
            server_url: normalize_url(server_url),
            ..ServerState::default()
        });
        change(&mut state);
        self.save(name, server_url, &state)?;
        Ok(state)
    }

    /// Deletes the server's state; whether there was any.
    pub fn remove(&self, name: &str, server_url: &str) -> Result<bool, String> {
        let (key, legacy) = store_keys(name, server_url);
        self.update(|states| {
            let removed =
                states.shift_remove(&key).is_some() || states.shift_remove(&legacy).is_some();
            (removed, removed)
        })
    }

    /// Runs `change` on the parsed file under the lock; writes the file when it says so.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut Map<String, Value>) -> (T, bool),
    ) -> Result<T, String> {
        let path = self.path();
        create_private_dir(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        let _lock = FileLock::acquire_blocking(&self.dir)
            .map_err(|e| format!("cannot lock {}: {e}", self.dir.display()))?;
        let mut states = match std::fs::read_to_string(&path) {
            Ok(text) if text.trim().is_empty() => Map::new(),
            Ok(text) => match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(map)) => map,
                Ok(_) => Map::new(),
                Err(e) => return Err(format!("{}: invalid JSON: {e}", path.display())),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Map::new(),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let (result, write) = change(&mut states);
        if write {
            let mut text =
                serde_json::to_string_pretty(&Value::Object(states)).map_err(|e| e.to_string())?;
            text.push('\n');
            write_atomic(&path, text.as_bytes(), Some(0o600)).map_err(|e| e.to_string())?;
        }
        Ok(result)
    }

    /// Holds the server's refresh lock while `run` runs, so two processes never refresh with
    /// the same (rotating) refresh token. Fails when another process holds it for 25 s.
    pub async fn with_refresh_lock<T>(
        &self,
        name: &str,
        server_url: &str,
        run: impl std::future::Future<Output = T>,
    ) -> Result<T, String> {
        let (key, _) = store_keys(name, server_url);
        let digest = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
        let hash: String = digest.as_ref()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        create_private_dir(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        let path = self.dir.join(format!("mcp-auth-refresh-{hash}"));
        let waited = std::time::Instant::now();
        let _lock = loop {
            match FileLock::try_acquire(&path) {
                Ok(Some(lock)) => break lock,
                Ok(None) if waited.elapsed() < REFRESH_LOCK_WAIT => {
                    tokio::time::sleep(REFRESH_LOCK_RETRY).await
                }
                Ok(None) => {
                    return Err("Another process is refreshing the MCP server's tokens".into())
                }
                Err(e) => return Err(format!("cannot lock {}: {e}", path.display())),
            }
        };
        Ok(run.await)
    }
}

/// The store keys of a server: by namespace and URL, and the legacy one by URL alone.
fn store_keys(name: &str, server_url: &str) -> (String, String) {
    let url = normalize_url(server_url);
    (
        format!("{}|{url}", super::super::config::mcp_namespace(name)),
        url,
    )
}

/// The URL as a WHATWG URL serializes it (`http://host` gains its `/`).
pub fn normalize_url(url: &str) -> String {
    reqwest::Url::parse(url)
        .map(|u| u.to_string())
        .unwrap_or_else(|_| url.to_string())
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.exists() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}

/// An exclusive `flock` on a file or directory, released when dropped (or when the process
/// dies, so a killed process never leaves a stale lock).
struct FileLock {
    file: std::fs::File,
}

impl FileLock {
    /// Waits for the lock on `path` (a directory: the file itself is replaced on every write).
    fn acquire_blocking(path: &Path) -> std::io::Result<FileLock> {
        let file = std::fs::File::open(path)?;
        flock(&file, libc::LOCK_EX)?;
        Ok(FileLock { file })
    }

    /// The lock on `path` (created when missing), or `None` when another holder has it.
    fn try_acquire(path: &Path) -> std::io::Result<Option<FileLock>> {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).truncate(false).write(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options.open(path)?;
        match flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
            Ok(()) => Ok(Some(FileLock { file })),
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = flock(&self.file, libc::LOCK_UN);
    }
}

fn flock(file: &std::fs::File, operation: i32) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock(2) on a descriptor this function borrows for the call.
        #[allow(unsafe_code)]
        let result = unsafe { libc::flock(file.as_raw_fd(), operation) };
        if result == 0 {
            return Ok(());
        }
        let error = std::io::Error::last_os_error();
        if error.kind() != std::io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn states_are_kept_per_name_and_url_in_a_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::new(dir.path());
        let url = "http://127.0.0.1:9/mcp";
        assert_eq!(store.load("a-b", url).unwrap(), None);
        let state = store
            .modify("a-b", url, |s| {
                s.tokens = Some(Tokens {
                    access_token: "t1".into(),
                    ..Tokens::default()
                })
            })
            .unwrap();
        assert_eq!(store.load("a-b", url).unwrap(), Some(state));
        // Another name with the same URL signs in separately.
        assert_eq!(store.load("other", url).unwrap(), None);
        let text = std::fs::read_to_string(store.path()).unwrap();
        let file: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            file["mcp__a_b|http://127.0.0.1:9/mcp"]["tokens"]["access_token"],
            "t1"
        );
        assert_eq!(
            file["mcp__a_b|http://127.0.0.1:9/mcp"]["serverUrl"],
            "http://127.0.0.1:9/mcp"
        );
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        assert!(store.remove("a-b", url).unwrap());
        assert!(!store.remove("a-b", url).unwrap());
        assert_eq!(store.load("a-b", url).unwrap(), None);
    }

    #[test]
    fn legacy_state_under_the_url_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let url = "http://h.example/mcp";
        std::fs::write(
            dir.path().join(AUTH_FILE_NAME),
            serde_json::json!({url: {"serverUrl": url, "tokens": {"access_token": "old"}}})
                .to_string(),
        )
        .unwrap();
        let store = CredentialStore::new(dir.path());
        let state = store.load("s", url).unwrap().unwrap();
        assert_eq!(state.tokens.unwrap().access_token, "old");
        let file: Value =
            serde_json::from_str(&std::fs::read_to_string(store.path()).unwrap()).unwrap();
        assert!(file.get(url).is_none());
        assert!(file.get("mcp__s|http://h.example/mcp").is_some());
    }

    #[test]
    fn a_broken_file_is_reported_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(AUTH_FILE_NAME), "{broken").unwrap();
        let store = CredentialStore::new(dir.path());
        let error = store
            .save("s", "http://h/", &ServerState::default())
            .unwrap_err();
        assert!(error.contains("mcp-auth.json: invalid JSON"), "{error}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join(AUTH_FILE_NAME)).unwrap(),
            "{broken"
        );
    }
}
