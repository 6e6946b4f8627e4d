//! The Node sidecar process and the line-delimited JSON-RPC over its stdin/stdout.
//!
//! Requests carry numeric ids; the sidecar answers `{id, result}` or `{id, error}`. What the
//! sidecar sends on its own (notifications, and dialog requests with string ids) goes to the
//! [`Inbound`] handler. When the process exits every waiting request fails at once and
//! later requests fail without waiting: a dead sidecar never blocks the agent.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

/// What the sidecar sends that is not an answer: `(method, params, id)`; `id` is set for
/// requests the host must answer with [`Sidecar::answer`].
pub type Inbound = Arc<dyn Fn(&str, Value, Option<Value>) + Send + Sync>;

type Waiter = oneshot::Sender<Result<Value, String>>;

/// A running sidecar.
pub struct Sidecar {
    stdin: tokio::sync::Mutex<ChildStdin>,
    pending: Mutex<HashMap<u64, Waiter>>,
    next_id: AtomicU64,
    exited: AtomicBool,
    /// Set by [`Sidecar::shutdown`]: the exit that follows is expected, not reported.
    closing: AtomicBool,
    /// Dialogs waiting for the user: hook time limits stop counting while one is open.
    pub(crate) open_dialogs: AtomicUsize,
    child: Mutex<Option<Child>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl std::fmt::Debug for Sidecar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sidecar").finish_non_exhaustive()
    }
}

impl Sidecar {
    /// Starts `node <script>` in `cwd`. `on_exit` is called once when the process ends
    /// with its exit description.
    pub fn spawn(
        node: &str,
        script: &Path,
        cwd: &Path,
        inbound: Inbound,
        on_exit: Box<dyn FnOnce(String) + Send>,
    ) -> Result<Arc<Sidecar>, String> {
        let mut command = Command::new(node);
        command.arg(script).current_dir(cwd);
        // For pi-cli.cjs: extensions that start Pi again start this binary.
        if let Ok(exe) = std::env::current_exe() {
            command.env("PI_EXECUTABLE", exe);
        }
        let mut child = command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                format!(
                    "Extensions need Node.js 20 or newer on PATH (could not run \"{node}\": {e})"
                )
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("could not open the extension process's pipes".into());
        };
        let sidecar = Arc::new(Sidecar {
            stdin: tokio::sync::Mutex::new(stdin),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            exited: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            open_dialogs: AtomicUsize::new(0),
            child: Mutex::new(Some(child)),
        });
        let reader = sidecar.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                reader.dispatch(&line, &inbound);
            }
            reader.exited.store(true, Ordering::SeqCst);
            let status = {
                let child = lock(&reader.child).take();
                match child {
                    Some(mut c) => c.wait().await.ok(),
                    None => None,
                }
            };
            let why = match status.and_then(|s| s.code()) {
                Some(code) => format!("exit code {code}"),
                None => "killed by a signal".to_string(),
            };
            for (_, waiter) in lock(&reader.pending).drain() {
                let _ = waiter.send(Err(format!("the extension process exited ({why})")));
            }
            if !reader.closing.load(Ordering::SeqCst) {
                on_exit(why);
            }
        });
        Ok(sidecar)
    }

    fn dispatch(&self, line: &str, inbound: &Inbound) {
        let Ok(Value::Object(mut record)) = serde_json::from_str::<Value>(line) else {
            return;
        };
        let method = record
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string);
        match method {
            Some(method) => {
                let params = record.remove("params").unwrap_or(Value::Null);
                inbound(&method, params, record.remove("id"));
            }
            None => {
                let Some(id) = record.get("id").and_then(Value::as_u64) else {
                    return;
                };
                let Some(waiter) = lock(&self.pending).remove(&id) else {
                    return;
                };
                let outcome = match record.remove("error") {
                    Some(e) => Err(e.as_str().map(str::to_string).unwrap_or(e.to_string())),
                    None => Ok(record.remove("result").unwrap_or(Value::Null)),
                };
                let _ = waiter.send(outcome);
            }
        }
    }

    /// Whether the process has ended.
    pub fn exited(&self) -> bool {
        self.exited.load(Ordering::SeqCst)
    }

    async fn write(&self, record: &Value) -> Result<(), String> {
        let mut line = record.to_string();
        line.push('\n');
        let mut stdin = self.stdin.lock().await;
        stdin
            .write_all(line.as_bytes())
            .await
            .map_err(|e| format!("the extension process is not running ({e})"))?;
        stdin.flush().await.map_err(|e| e.to_string())
    }

    /// Sends a request and waits for its answer, without a time limit.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, String> {
        if self.exited() {
            return Err("the extension process is not running".into());
        }
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        if let Err(e) = self
            .write(&json!({"id": id, "method": method, "params": params}))
            .await
        {
            lock(&self.pending).remove(&id);
            return Err(e);
        }
        rx.await
            .unwrap_or_else(|_| Err("the extension process exited".into()))
    }

    /// [`Sidecar::request`] that gives up after `limit` of waiting, not counting time while
    /// an extension dialog waits for the user.
    pub async fn request_bounded(
        &self,
        method: &str,
        params: Value,
        limit: Duration,
    ) -> Result<Value, String> {
        let call = self.request(method, params);
        tokio::pin!(call);
        let tick = Duration::from_millis(50);
        let mut waited = Duration::ZERO;
        loop {
            tokio::select! {
                outcome = &mut call => return outcome,
                _ = tokio::time::sleep(tick) => {
                    if self.open_dialogs.load(Ordering::SeqCst) == 0 {
                        waited += tick;
                    }
                    if waited >= limit {
                        return Err(format!(
                            "did not finish within {} ms",
                            limit.as_millis()
                        ));
                    }
                }
            }
        }
    }

    /// Answers a request the sidecar made (a dialog).
    pub async fn answer(&self, id: Value, result: Value) {
        let _ = self.write(&json!({"id": id, "result": result})).await;
    }

    /// Sends a notification-style request and does not wait for its answer.
    pub async fn tell(&self, method: &str, params: Value) {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let _ = self
            .write(&json!({"id": id, "method": method, "params": params}))
            .await;
    }

    /// [`Sidecar::tell`] with parameters that are already JSON text (large state updates
    /// are written without being parsed into values first).
    pub async fn tell_raw(&self, method: &str, params_json: &str) {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let mut line = format!(
            "{{\"id\":{id},\"method\":{},\"params\":",
            Value::from(method)
        );
        line.push_str(params_json);
        line.push_str("}\n");
        let mut stdin = self.stdin.lock().await;
        if stdin.write_all(line.as_bytes()).await.is_ok() {
            let _ = stdin.flush().await;
        }
    }

    /// Stops the process (closing stdin ends it; a kill follows if it lingers).
    pub async fn shutdown(&self) {
        self.closing.store(true, Ordering::SeqCst);
        {
            let mut stdin = self.stdin.lock().await;
            let _ = stdin.shutdown().await;
        }
        let child = lock(&self.child).take();
        if let Some(mut child) = child {
            if tokio::time::timeout(Duration::from_secs(2), child.wait())
                .await
                .is_err()
            {
                let _ = child.kill().await;
            }
        }
    }
}
