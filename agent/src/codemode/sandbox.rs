//! The QuickJS sandbox one codemode script runs in (Pi's `CodemodeSandbox`, on `rquickjs`).
//!
//! Each script gets its own QuickJS runtime on its own thread, with a 256 MB heap limit and no
//! timers, network or file system (rquickjs' intrinsics only: no `std`/`os` modules). The
//! prelude (`prelude.js`) defines the globals and reports everything through one bridge
//! function; tool calls and global calls go to the host ([`SandboxHost`]) as messages, run
//! there on the async runtime, and their results come back to the VM thread, which then runs
//! the script until it waits again.
//!
//! The first terminal event wins: the script's `done`, a crash, the deadline, or the caller's
//! cancellation. The VM is then interrupted (QuickJS polls the interrupt handler while it
//! runs) and calls still running are cancelled.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::FuturesUnordered;
use futures::StreamExt;
use rquickjs::function::Opt;
use rquickjs::CatchResultExt;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Heap limit of one script's VM (Pi's `CODEMODE_MEMORY_LIMIT_BYTES`).
pub const MEMORY_LIMIT_BYTES: usize = 256 * 1024 * 1024;
/// Native stack the VM may use before a deep recursion throws a catchable `RangeError`.
const MAX_STACK_BYTES: usize = 1024 * 1024;
/// Promise jobs run between two checks of the stop flag (a `while (true) await null` loop is
/// many small jobs, each too short for QuickJS' own interrupt polling).
const JOBS_PER_POLL: usize = 50;

const PRELUDE: &str = include_str!("prelude.js");

/// A tool as the script sees it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SandboxTool {
    /// The registered name, e.g. `mcp__docs__search`; `tools[name]` calls it too.
    pub name: String,
    /// The identifier scripts use (`tools.<jsName>`).
    #[serde(rename = "jsName")]
    pub js_name: String,
    /// What `ALL_TOOLS` shows for it.
    pub description: String,
}

/// A host function the script calls as a global (`searchTools`, `describeTool`, …).
#[derive(Clone, Debug, serde::Serialize)]
pub struct SandboxGlobal {
    /// A plain identifier or `namespace.member`.
    pub name: String,
    /// Whether the host receives the whole argument list (else only the first argument).
    pub spread: bool,
}

/// One output item, in the order the script produced it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutputItem {
    /// `text()`, or a `console.*` line when `console` is set.
    Text { text: String, console: bool },
    /// `image()`: base64 data and the detected MIME type.
    Image { data: String, mime_type: String },
}

/// Why a script failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScriptFailure {
    /// The script threw (or was rejected): `name`, `message`, and the stack text as the
    /// prelude renders it (`Name: message` followed by the frames).
    Script {
        name: Option<String>,
        message: String,
        stack: Option<String>,
    },
    /// The `timeout_ms` deadline passed.
    Timeout(String),
    /// The caller cancelled the call.
    Aborted(String),
    /// The sandbox itself failed (VM creation, a malformed bridge message, a crash).
    Sandbox(String),
}

/// What a script left behind.
#[derive(Clone, Debug, PartialEq)]
pub struct SandboxOutcome {
    /// Output items, also of a failed script.
    pub output: Vec<OutputItem>,
    /// Success: the returned value (`None` for `undefined`) and the store writes
    /// (`None` deletes the key); else why it failed.
    pub result: Result<ScriptSuccess, ScriptFailure>,
}

/// A script that finished.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ScriptSuccess {
    /// The top-level `return` value.
    pub value: Option<Value>,
    /// `store()` writes in order: a value, or `None` for a deleted key.
    pub writes: Vec<(String, Option<Value>)>,
}

/// Runs what the script calls.
#[async_trait::async_trait]
pub trait SandboxHost: Send + Sync {
    /// Calls the tool registered as `name`; `Err` carries the text the script's `Error` gets.
    async fn call_tool(
        &self,
        name: &str,
        args: Value,
        cancel: CancellationToken,
    ) -> Result<Value, String>;

    /// Runs a global (`args` is the argument array for spread globals); `Ok(None)` is
    /// `undefined`.
    async fn call_global(&self, name: &str, args: Value) -> Result<Option<Value>, String>;
}

/// One script run.
#[derive(Clone, Debug)]
pub struct SandboxRequest {
    /// The script body (without its options line).
    pub code: String,
    pub tools: Vec<SandboxTool>,
    pub globals: Vec<SandboxGlobal>,
    /// Values `load()` returns, by key.
    pub store: serde_json::Map<String, Value>,
    /// The deadline for the whole script.
    pub timeout: Option<Duration>,
    pub memory_limit_bytes: usize,
}

/// Messages from the VM thread.
enum VmEvent {
    Call {
        id: String,
        global: bool,
        name: String,
        args: Option<String>,
    },
    Output(OutputItem),
    Done {
        ok: bool,
        payload: Option<String>,
        writes: Option<String>,
    },
    Crash(String),
}

/// Messages to the VM thread.
enum VmReply {
    Settle {
        id: String,
        ok: bool,
        payload: Option<String>,
    },
}

/// Runs one script to its end and returns what it produced.
pub async fn run_script(
    request: SandboxRequest,
    host: Arc<dyn SandboxHost>,
    cancel: CancellationToken,
) -> SandboxOutcome {
    let (event_tx, mut events) = mpsc::unbounded_channel::<VmEvent>();
    let (reply_tx, reply_rx) = std_mpsc::channel::<VmReply>();
    let stop = Arc::new(AtomicBool::new(false));
    let thread_stop = stop.clone();
    let timeout = request.timeout;
    let spawned = std::thread::Builder::new()
        .name("codemode".into())
        .spawn(move || run_vm(request, event_tx, reply_rx, thread_stop));
    let vm_thread = match spawned {
        Ok(handle) => handle,
        Err(error) => {
            return SandboxOutcome {
                output: Vec::new(),
                result: Err(ScriptFailure::Sandbox(format!(
                    "could not start the codemode thread: {error}"
                ))),
            }
        }
    };

    let calls_cancel = cancel.child_token();
    let mut calls = FuturesUnordered::new();
    let mut output = Vec::new();
    let deadline = async {
        match timeout {
            Some(limit) => tokio::time::sleep(limit).await,
            None => futures::future::pending::<()>().await,
        }
    };
    tokio::pin!(deadline);
    let result = loop {
        tokio::select! {
            event = events.recv() => match event {
                Some(VmEvent::Call { id, global, name, args }) => {
                    let host = host.clone();
                    let cancel = calls_cancel.child_token();
                    calls.push(async move {
                        let args = match args.as_deref().map(serde_json::from_str::<Value>) {
                            None => Ok(Value::Null),
                            Some(Ok(value)) => Ok(value),
                            Some(Err(_)) => Err("the call's arguments are not valid JSON".to_string()),
                        };
                        let outcome = match args {
                            Err(e) => Err(e),
                            Ok(args) if global => host.call_global(&name, args).await,
                            Ok(args) => host.call_tool(&name, args, cancel).await.map(Some),
                        };
                        (id, outcome)
                    });
                }
                Some(VmEvent::Output(item)) => output.push(item),
                Some(VmEvent::Done { ok, payload, writes }) => break decode_done(ok, payload, writes),
                Some(VmEvent::Crash(message)) => break Err(ScriptFailure::Sandbox(message)),
                None => break Err(ScriptFailure::Sandbox("the codemode VM stopped without a result".into())),
            },
            Some((id, outcome)) = calls.next(), if !calls.is_empty() => {
                let reply = match outcome {
                    Ok(value) => VmReply::Settle {
                        id,
                        ok: true,
                        payload: value.map(|v| v.to_string()),
                    },
                    Err(message) => VmReply::Settle { id, ok: false, payload: Some(message) },
                };
                let _ = reply_tx.send(reply);
            }
            _ = &mut deadline => {
                let ms = timeout.map(|t| t.as_millis()).unwrap_or_default();
                break Err(ScriptFailure::Timeout(format!("Execution timed out after {ms} ms")));
            }
            _ = cancel.cancelled() => {
                break Err(ScriptFailure::Aborted("This operation was aborted".into()));
            }
        }
    };
    // Stop the VM (interrupting a running script) and cancel the calls still running; their
    // results are discarded, as are unawaited promises.
    stop.store(true, Ordering::SeqCst);
    drop(reply_tx);
    calls_cancel.cancel();
    drop(calls);
    let _ = tokio::task::spawn_blocking(move || vm_thread.join()).await;
    // Output the VM produced before it noticed the stop.
    while let Ok(event) = events.try_recv() {
        if let VmEvent::Output(item) = event {
            if result.is_ok() {
                output.push(item);
            }
        }
    }
    SandboxOutcome { output, result }
}

fn decode_done(
    ok: bool,
    payload: Option<String>,
    writes: Option<String>,
) -> Result<ScriptSuccess, ScriptFailure> {
    let bridge_error = |what: &str| ScriptFailure::Sandbox(format!("{what} is not valid JSON"));
    if !ok {
        let parsed: Value = serde_json::from_str(payload.as_deref().unwrap_or(""))
            .map_err(|_| bridge_error("script error"))?;
        let text = |key: &str| parsed.get(key).and_then(Value::as_str).map(str::to_string);
        let Some(message) = text("message") else {
            return Err(ScriptFailure::Sandbox("script error is malformed".into()));
        };
        return Err(ScriptFailure::Script {
            name: text("name"),
            message,
            stack: text("stack"),
        });
    }
    let value = match payload {
        None => None,
        Some(json) => Some(serde_json::from_str(&json).map_err(|_| bridge_error("result"))?),
    };
    let entries: Vec<Vec<String>> = serde_json::from_str(writes.as_deref().unwrap_or("[]"))
        .map_err(|_| bridge_error("store writes"))?;
    let mut out = Vec::new();
    for entry in entries {
        match entry.as_slice() {
            [key] => out.push((key.clone(), None)),
            [key, json] => {
                let value = serde_json::from_str(json).map_err(|_| bridge_error("store value"))?;
                out.push((key.clone(), Some(value)));
            }
            _ => {
                return Err(ScriptFailure::Sandbox(
                    "store writes contain a malformed entry".into(),
                ))
            }
        }
    }
    Ok(ScriptSuccess { value, writes: out })
}

/// The VM thread: sets up the runtime, runs the script until it waits, and applies results
/// until the script is done or the host stops it.
fn run_vm(
    request: SandboxRequest,
    events: mpsc::UnboundedSender<VmEvent>,
    replies: std_mpsc::Receiver<VmReply>,
    stop: Arc<AtomicBool>,
) {
    let crash = |events: &mpsc::UnboundedSender<VmEvent>, message: String| {
        let _ = events.send(VmEvent::Crash(message));
    };
    let runtime = match rquickjs::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => return crash(&events, format!("could not create the VM: {error}")),
    };
    runtime.set_memory_limit(request.memory_limit_bytes);
    runtime.set_max_stack_size(MAX_STACK_BYTES);
    let interrupt_stop = stop.clone();
    runtime.set_interrupt_handler(Some(Box::new(move || {
        interrupt_stop.load(Ordering::Relaxed)
    })));
    let context = match rquickjs::Context::full(&runtime) {
        Ok(context) => context,
        Err(error) => return crash(&events, format!("could not create the VM: {error}")),
    };
    let finished = Arc::new(AtomicBool::new(false));
    let api = context.with(|ctx| setup(&ctx, &request, &events, finished.clone()));
    let api = match api {
        Ok(Some(api)) => api,
        // The script did not compile: `done` already reported it.
        Ok(None) => return,
        Err(message) => return crash(&events, message),
    };
    loop {
        // Run the script until it waits on a tool call.
        let mut jobs = 0usize;
        while runtime.is_job_pending() {
            if runtime.execute_pending_job().is_err() {
                if !stop.load(Ordering::SeqCst) {
                    crash(&events, "Promise job failed".into());
                }
                return drop(api);
            }
            jobs += 1;
            if jobs.is_multiple_of(JOBS_PER_POLL) && stop.load(Ordering::SeqCst) {
                return drop(api);
            }
        }
        if finished.load(Ordering::SeqCst) || stop.load(Ordering::SeqCst) {
            return drop(api);
        }
        let stalled = context.with(|ctx| {
            let api = api.clone().restore(&ctx)?;
            let stalled: rquickjs::Function = api.get("stalled")?;
            stalled.call::<_, bool>(())
        });
        if !matches!(stalled, Ok(false)) {
            return drop(api);
        }
        let Ok(VmReply::Settle { id, ok, payload }) = replies.recv() else {
            return drop(api);
        };
        let settled = context.with(|ctx| {
            let api = api.clone().restore(&ctx)?;
            let settle: rquickjs::Function = api.get("settle")?;
            settle.call::<_, ()>((id, ok, payload))
        });
        if let Err(error) = settled {
            if !stop.load(Ordering::SeqCst) {
                crash(&events, format!("could not deliver a result: {error}"));
            }
            return drop(api);
        }
    }
}

type Api = rquickjs::Persistent<rquickjs::Object<'static>>;

/// Evaluates the prelude and the script function and starts the script. `Ok(None)` when the
/// script does not compile (reported as a failed `done`).
fn setup(
    ctx: &rquickjs::Ctx<'_>,
    request: &SandboxRequest,
    events: &mpsc::UnboundedSender<VmEvent>,
    finished: Arc<AtomicBool>,
) -> Result<Option<Api>, String> {
    let sender = events.clone();
    let bridge = rquickjs::Function::new(
        ctx.clone(),
        // `undefined` (a missing value) arrives as `None`.
        move |kind: String,
              a: Opt<Option<String>>,
              b: Opt<Option<String>>,
              c: Opt<Option<String>>| {
            let (a, b, c) = (Opt(a.0.flatten()), Opt(b.0.flatten()), Opt(c.0.flatten()));
            let event = match kind.as_str() {
                "call" | "global" => VmEvent::Call {
                    id: a.0.unwrap_or_default(),
                    global: kind == "global",
                    name: b.0.unwrap_or_default(),
                    args: c.0,
                },
                "output" => {
                    let data = b.0.unwrap_or_default();
                    VmEvent::Output(match a.0.as_deref() {
                        Some("image") => OutputItem::Image {
                            data,
                            mime_type: c.0.unwrap_or_default(),
                        },
                        Some("console") => OutputItem::Text {
                            text: data,
                            console: true,
                        },
                        _ => OutputItem::Text {
                            text: data,
                            console: false,
                        },
                    })
                }
                _ => {
                    finished.store(true, Ordering::SeqCst);
                    VmEvent::Done {
                        ok: a.0.as_deref() == Some("1"),
                        payload: b.0,
                        writes: c.0,
                    }
                }
            };
            let _ = sender.send(event);
        },
    )
    .map_err(|e| format!("could not create the bridge: {e}"))?;
    let tools_json = serde_json::to_string(&request.tools).map_err(|e| e.to_string())?;
    let globals_json = serde_json::to_string(&request.globals).map_err(|e| e.to_string())?;
    let store: serde_json::Map<String, Value> = request
        .store
        .iter()
        .map(|(key, value)| (key.clone(), Value::from(value.to_string())))
        .collect();
    let store_json = Value::Object(store).to_string();

    let mut options = rquickjs::context::EvalOptions::default();
    options.strict = false;
    options.filename = Some("codemode-prelude.js".into());
    let factory: rquickjs::Function = ctx
        .eval_with_options(PRELUDE, options)
        .catch(ctx)
        .map_err(|e| format!("the prelude failed: {e}"))?;
    let api: rquickjs::Object = factory
        .call((bridge, tools_json, globals_json, store_json))
        .catch(ctx)
        .map_err(|e| format!("the prelude failed: {e}"))?;

    // The wrapper shares the first line with the script, so line numbers match the script.
    let source = format!("(async (tools, console) => {{{}\n}})", request.code);
    let mut options = rquickjs::context::EvalOptions::default();
    options.strict = false;
    options.filename = Some("codemode.js".into());
    let script: rquickjs::Function = match ctx.eval_with_options(source, options) {
        Ok(function) => function,
        Err(rquickjs::Error::Exception) => {
            let exception = ctx.catch();
            let _ = events.send(VmEvent::Done {
                ok: false,
                payload: Some(describe_exception(&exception)),
                writes: None,
            });
            return Ok(None);
        }
        Err(error) => return Err(format!("could not compile the script: {error}")),
    };
    let run: rquickjs::Function = api.get("run").map_err(|e| e.to_string())?;
    run.call::<_, ()>((script,))
        .catch(ctx)
        .map_err(|e| format!("the script could not start: {e}"))?;
    Ok(Some(rquickjs::Persistent::save(ctx, api)))
}

/// `{name, message, stack}` of a compile error, as the prelude describes thrown errors.
fn describe_exception(exception: &rquickjs::Value<'_>) -> String {
    let Some(object) = exception.as_object() else {
        let text = exception
            .as_string()
            .and_then(|s| s.to_string().ok())
            .unwrap_or_else(|| "The script threw a value that cannot be described".into());
        return serde_json::json!({ "message": text }).to_string();
    };
    let field = |key: &str| object.get::<_, Option<String>>(key).ok().flatten();
    let name = field("name").unwrap_or_else(|| "Error".into());
    let message = field("message").unwrap_or_default();
    let head = if message.is_empty() {
        name.clone()
    } else {
        format!("{name}: {message}")
    };
    let stack = match field("stack").map(|s| s.trim_end().to_string()) {
        Some(frames) if !frames.is_empty() => format!("{head}\n{frames}"),
        _ => head,
    };
    serde_json::json!({ "name": name, "message": message, "stack": stack }).to_string()
}
