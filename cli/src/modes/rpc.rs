//! `--mode rpc`: JSON commands on stdin, responses and events on stdout (Pi's rpc.md).
//!
//! Framing is strict LF: a record ends at `\n` only (a trailing `\r` is dropped), so U+2028
//! and U+2029 inside JSON strings are content, not separators. Each command gets one response
//! carrying its `id`; a line that is not JSON gets a `parse` error response and the loop
//! goes on. Long commands (prompt runs, compaction, bash) run on tasks so `abort`,
//! `steer` and state queries are answered while they work.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

pub mod command;

use pi_engine::agent::AgentSession;
use pi_engine::llm::Model;
use pi_engine::session::Session;
use pi_formats::header::NewHeader;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use self::command::{Decoded, Request, RpcCommand, StreamingBehavior};
use super::{build_agent, stdout_sink, Env};
use crate::RunArgs;

/// One output line (responses and events share stdout, each written whole).
fn output(v: &Value) {
    (stdout_sink())(v.clone());
}

fn success(id: &Option<Value>, command: &str, data: Option<Value>) -> Value {
    let mut m = Map::new();
    if let Some(id) = id {
        m.insert("id".into(), id.clone());
    }
    m.insert("type".into(), "response".into());
    m.insert("command".into(), command.into());
    m.insert("success".into(), true.into());
    if let Some(d) = data {
        m.insert("data".into(), d);
    }
    Value::Object(m)
}

fn error(id: &Option<Value>, command: &str, message: impl Into<String>) -> Value {
    let mut m = Map::new();
    if let Some(id) = id {
        m.insert("id".into(), id.clone());
    }
    m.insert("type".into(), "response".into());
    m.insert("command".into(), command.into());
    m.insert("success".into(), false.into());
    m.insert("error".into(), message.into().into());
    Value::Object(m)
}

/// A model as Pi's RPC shows it.
pub fn model_json(m: &Model) -> Value {
    json!({
        "id": m.id, "name": m.name, "api": m.api, "provider": m.provider, "baseUrl": m.base_url,
        "reasoning": m.reasoning, "input": m.input,
        "cost": {"input": m.cost.input, "output": m.cost.output,
                 "cacheRead": m.cost.cache_read, "cacheWrite": m.cost.cache_write},
        "contextWindow": m.context_window, "maxTokens": m.max_tokens,
    })
}

struct Rpc {
    agent: AgentSession,
    env: Env,
    /// `--models` patterns for `cycle_model`.
    scoped: Vec<Model>,
    bash_cancel: Arc<Mutex<Option<CancellationToken>>>,
}

/// Runs the RPC loop until stdin closes, then waits for running work to finish.
pub async fn run(args: RunArgs) -> anyhow::Result<i32> {
    let env = Env::new(&args)?;
    let agent = build_agent(&args, &env, stdout_sink())?;
    let scoped: Vec<Model> = super::scoped_models(&args, &env)
        .into_iter()
        .map(|s| s.model)
        .collect();
    let rpc = Arc::new(Rpc {
        agent,
        env,
        scoped,
        bash_cancel: Arc::new(Mutex::new(None)),
    });
    let mut tasks = JoinSet::new();
    let mut reader = BufReader::new(tokio::io::stdin());
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // read_until splits on the byte 0x0A only: U+2028/U+2029 never end a record.
        let n = match reader.read_until(b'\n', &mut buf).await {
            Ok(n) => n,
            Err(e) => {
                eprintln!("pi: cannot read stdin: {e}");
                break;
            }
        };
        if n == 0 {
            break;
        }
        match command::decode_record(&buf) {
            Decoded::Blank => continue,
            Decoded::Rejected(r) => output(&error(&r.id, &r.command, r.message)),
            Decoded::Command(request) => rpc.clone().handle(request, &mut tasks).await,
        }
        // Reap finished tasks so the set does not grow over a long session.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    // Let a run that was started last finish and settle.
    while rpc.agent.is_streaming() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    Ok(0)
}

impl Rpc {
    async fn handle(self: Arc<Self>, request: Request, tasks: &mut JoinSet<()>) {
        let Request { id, command } = request;
        match command {
            RpcCommand::Prompt {
                message,
                images,
                streaming_behavior,
            } => self.prompt(&id, &message, images, streaming_behavior),
            RpcCommand::Compact {
                custom_instructions: instructions,
            } => {
                let this = self.clone();
                tasks.spawn(async move {
                    let r = match this.agent.compact(instructions).await {
                        Ok(result) => success(&id, "compact", Some(result)),
                        Err(e) => error(&id, "compact", e.to_string()),
                    };
                    output(&r);
                });
            }
            RpcCommand::Bash {
                command,
                exclude_from_context: exclude,
            } => {
                let cancel = CancellationToken::new();
                *self.bash_cancel.lock().unwrap_or_else(|e| e.into_inner()) = Some(cancel.clone());
                let this = self.clone();
                tasks.spawn(async move {
                    let delta_id = id.clone();
                    let r = this
                        .agent
                        .execute_bash(&command, exclude, cancel, |d| {
                            let mut ev = json!({"type": "bash_execution_update"});
                            if let (Some(i), Value::Object(m)) = (&delta_id, &mut ev) {
                                m.insert("id".into(), i.clone());
                            }
                            if let Value::Object(m) = &mut ev {
                                m.insert("delta".into(), d.into());
                            }
                            output(&ev);
                        })
                        .await;
                    output(&match r {
                        Ok(v) => success(&id, "bash", Some(v)),
                        Err(e) => error(&id, "bash", e.to_string()),
                    });
                });
            }
            RpcCommand::GetMessages => self.write_messages(&id),
            other => {
                let r = self.simple(&id, &other);
                output(&r);
            }
        }
    }

    /// `get_messages`, written as it is projected: the response line is the one
    /// [`success`] would build, but each message is serialized and dropped in turn,
    /// so a huge uncompacted session costs one entry's values, not all of them.
    fn write_messages(&self, id: &Option<Value>) {
        use std::io::Write;
        let mut head = Map::new();
        if let Some(id) = id {
            head.insert("id".into(), id.clone());
        }
        head.insert("type".into(), "response".into());
        head.insert("command".into(), "get_messages".into());
        head.insert("success".into(), true.into());
        let head = Value::Object(head).to_string();
        // The session lock is taken before stdout's: the order of every event
        // emitted while the session is locked.
        self.agent.with_session(|s| {
            let branch = s.branch_path();
            let path = pi_engine::context::SessionPath::new(s, &branch.entries);
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let mut result = out
                .write_all(&head.as_bytes()[..head.len() - 1])
                .and_then(|()| out.write_all(b",\"data\":{\"messages\":["));
            let mut first = true;
            pi_engine::context::project_each(&path, |_, messages| {
                for m in &messages {
                    if result.is_err() {
                        return;
                    }
                    let sep: &[u8] = if first { b"" } else { b"," };
                    first = false;
                    result = out
                        .write_all(sep)
                        .and_then(|()| serde_json::to_writer(&mut out, m).map_err(Into::into));
                }
            });
            // A closed stdout (reader gone) must not kill the agent, as for every line.
            let _ = result
                .and_then(|()| out.write_all(b"]}}\n"))
                .and_then(|()| out.flush());
        });
    }

    fn prompt(
        &self,
        id: &Option<Value>,
        message: &str,
        images: Vec<Value>,
        streaming_behavior: Option<StreamingBehavior>,
    ) {
        let message = match super::expand_input(&self.env, message) {
            Ok(m) => m,
            Err(e) => {
                output(&error(id, "prompt", format!("{e:#}")));
                return;
            }
        };
        if self.agent.is_streaming() {
            match streaming_behavior {
                Some(StreamingBehavior::Steer) => {
                    self.agent.steer(message);
                    output(&success(
                        id,
                        "prompt",
                        Some(json!({"disposition": "queued"})),
                    ));
                }
                Some(StreamingBehavior::FollowUp) => {
                    self.agent.follow_up(message);
                    output(&success(
                        id,
                        "prompt",
                        Some(json!({"disposition": "queued"})),
                    ));
                }
                None => output(&error(
                    id,
                    "prompt",
                    pi_engine::agent::AgentError::Busy.to_string(),
                )),
            }
            return;
        }
        let started_id = id.clone();
        let result = self.agent.spawn_prompt(message, images, move || {
            output(&success(
                &started_id,
                "prompt",
                Some(json!({"disposition": "started"})),
            ));
        });
        if let Err(e) = result {
            output(&error(id, "prompt", e.to_string()));
        }
    }

    /// Commands answered at once.
    fn simple(&self, id: &Option<Value>, cmd: &RpcCommand) -> Value {
        let kind = cmd.kind();
        match self.simple_inner(cmd) {
            Ok(data) => success(id, kind, data),
            Err(msg) => error(id, kind, msg),
        }
    }

    fn simple_inner(&self, cmd: &RpcCommand) -> Result<Option<Value>, String> {
        let a = &self.agent;
        let e = |e: pi_engine::agent::AgentError| e.to_string();
        match cmd {
            RpcCommand::Steer { message: msg } | RpcCommand::FollowUp { message: msg } => {
                let msg = super::expand_input(&self.env, msg).map_err(|e| format!("{e:#}"))?;
                if matches!(cmd, RpcCommand::Steer { .. }) {
                    a.steer(msg);
                } else {
                    a.follow_up(msg);
                }
                Ok(Some(json!({"disposition": "queued"})))
            }
            RpcCommand::Abort => {
                a.abort();
                Ok(None)
            }
            RpcCommand::ClearQueue => {
                let (steering, follow_up) = a.clear_queue();
                Ok(Some(json!({"steering": steering, "followUp": follow_up})))
            }
            RpcCommand::NewSession { parent_session } => {
                if a.is_streaming() {
                    return Err("Cannot start a new session while the agent is running".into());
                }
                let (s, p) = self
                    .env
                    .new_session(parent_session.clone())
                    .map_err(|e| format!("{e:#}"))?;
                a.replace_session(s, p);
                a.start_new().map_err(e)?;
                Ok(Some(json!({"cancelled": false})))
            }
            RpcCommand::GetState => Ok(Some(self.state())),
            RpcCommand::SetModel { provider, model_id } => {
                let m = a
                    .registry()
                    .find(provider, model_id)
                    .cloned()
                    .ok_or_else(|| format!("Model not found: {provider}/{model_id}"))?;
                a.set_model(m.clone()).map_err(e)?;
                Ok(Some(model_json(&m)))
            }
            RpcCommand::CycleModel => {
                let list = if self.scoped.is_empty() {
                    a.registry().models
                } else {
                    self.scoped.clone()
                };
                if list.len() < 2 {
                    return Ok(None);
                }
                let cur = a.model();
                let pos = cur.and_then(|c| {
                    list.iter()
                        .position(|m| m.provider == c.provider && m.id == c.id)
                });
                let next = list[pos.map_or(0, |p| (p + 1) % list.len())].clone();
                a.set_model(next.clone()).map_err(e)?;
                Ok(Some(json!({"model": model_json(&next),
                    "thinkingLevel": a.thinking_level().as_str(),
                    "isScoped": !self.scoped.is_empty()})))
            }
            RpcCommand::GetAvailableModels => Ok(Some(json!({"models":
                a.registry().models.iter().map(model_json).collect::<Vec<_>>()}))),
            RpcCommand::SetThinkingLevel { level } => {
                a.set_thinking_level(*level).map_err(e)?;
                Ok(None)
            }
            RpcCommand::CycleThinkingLevel => {
                let levels = a.available_thinking_levels();
                if levels.len() < 2 {
                    return Ok(None);
                }
                let cur = a.thinking_level();
                let pos = levels.iter().position(|l| *l == cur).unwrap_or(0);
                let next = levels[(pos + 1) % levels.len()];
                a.set_thinking_level(next).map_err(e)?;
                Ok(Some(json!({"level": next.as_str()})))
            }
            RpcCommand::GetAvailableThinkingLevels => Ok(Some(json!({"levels":
                a.available_thinking_levels().iter().map(|l| l.as_str()).collect::<Vec<_>>()}))),
            RpcCommand::SetSteeringMode { mode } => {
                a.set_steering_mode(*mode);
                Ok(None)
            }
            RpcCommand::SetFollowUpMode { mode } => {
                a.set_follow_up_mode(*mode);
                Ok(None)
            }
            RpcCommand::SetAutoCompaction { enabled } => {
                a.set_auto_compaction(*enabled);
                Ok(None)
            }
            RpcCommand::SetAutoRetry { enabled } => {
                a.set_auto_retry(*enabled);
                Ok(None)
            }
            RpcCommand::AbortRetry => {
                a.abort_retry();
                Ok(None)
            }
            RpcCommand::AbortBash => {
                if let Some(t) = self
                    .bash_cancel
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_ref()
                {
                    t.cancel();
                }
                Ok(None)
            }
            RpcCommand::GetSessionStats => Ok(Some(self.stats())),
            RpcCommand::ExportHtml { output_path } => {
                let path = match output_path {
                    Some(p) => PathBuf::from(p),
                    None => PathBuf::from(format!("pi-session-{}.html", a.session_id())),
                };
                // The same whole-tree, script-free page as `pi sessions export --format html`.
                let html = a.with_session(pi_engine::export::html::render);
                std::fs::write(&path, html)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                Ok(Some(json!({"path": path.display().to_string()})))
            }
            RpcCommand::SwitchSession { session_path: path } => {
                if a.is_streaming() {
                    return Err("Cannot switch sessions while the agent is running".into());
                }
                let (s, p) = self
                    .env
                    .open_file(std::path::Path::new(path))
                    .map_err(|e| format!("{e:#}"))?;
                a.replace_session(s, p);
                a.restore_from_session();
                Ok(Some(json!({"cancelled": false})))
            }
            RpcCommand::Fork { entry_id } => {
                let (text, parent) = a
                    .with_session(|s| {
                        let idx = s.find(entry_id)?;
                        let v = s.entry_value(idx);
                        if v["type"] != "message" || v["message"]["role"] != "user" {
                            return None;
                        }
                        let text = pi_engine::context::transcript::content_text(
                            &v["message"]["content"],
                            "",
                        );
                        Some((text, v["parentId"].as_str().map(str::to_string)))
                    })
                    .ok_or_else(|| format!("Invalid entry ID for forking: {entry_id}"))?;
                self.branch_into_new(parent.as_deref())?;
                Ok(Some(json!({"text": text, "cancelled": false})))
            }
            RpcCommand::Clone => {
                let leaf = a
                    .with_session(|s| s.leaf_id().map(str::to_string))
                    .ok_or("Cannot clone session: no current entry selected")?;
                self.branch_into_new(Some(&leaf))?;
                Ok(Some(json!({"cancelled": false})))
            }
            RpcCommand::GetForkMessages => {
                let messages: Vec<Value> = a.with_session(|s| {
                    s.branch_path()
                        .entries
                        .iter()
                        .map(|&i| s.entry_value(i))
                        .filter(|v| v["type"] == "message" && v["message"]["role"] == "user")
                        .map(|v| json!({"entryId": v["id"],
                            "text": pi_engine::context::transcript::content_text(&v["message"]["content"], "")}))
                        .collect()
                });
                Ok(Some(json!({"messages": messages})))
            }
            RpcCommand::GetEntries { since } => a.with_session(|s| {
                let mut entries: Vec<Value> = (0..s.entries().len() as u32)
                    .map(|i| s.entry_value(i))
                    .collect();
                if let Some(since) = since {
                    let pos = entries
                        .iter()
                        .position(|e| e["id"] == since.as_str())
                        .ok_or_else(|| format!("Entry not found: {since}"))?;
                    entries.drain(..=pos);
                }
                Ok(Some(json!({"entries": entries, "leafId": s.leaf_id()})))
            }),
            RpcCommand::GetTree => Ok(Some(
                a.with_session(|s| json!({"tree": tree_json(s), "leafId": s.leaf_id()})),
            )),
            RpcCommand::GetLastAssistantText => Ok(Some(json!({"text": a.last_assistant_text()}))),
            RpcCommand::SetSessionName { name } => {
                a.set_session_name(name).map_err(e)?;
                Ok(None)
            }
            RpcCommand::GetMessages => Ok(Some(json!({"messages": a.messages()}))), // see write_messages
            // Prompt templates and skills (extensions are not supported).
            RpcCommand::GetCommands => {
                let r = &self.env.resources;
                let mut commands: Vec<Value> = r
                    .prompt_templates
                    .iter()
                    .map(|t| json!({"name": t.name, "description": t.description,
                        "source": "prompt", "sourceInfo": {"path": t.file_path.display().to_string()}}))
                    .collect();
                commands.extend(r.skills.iter().map(|s| {
                    json!({"name": format!("skill:{}", s.name),
                    "description": s.description, "source": "skill",
                    "sourceInfo": {"path": s.file_path.display().to_string()}})
                }));
                Ok(Some(json!({"commands": commands})))
            }
            // Answered on tasks by `handle`, never here.
            RpcCommand::Prompt { .. } | RpcCommand::Compact { .. } | RpcCommand::Bash { .. } => {
                Err(format!("{} is not answered at once", cmd.kind()))
            }
        }
    }

    /// A new session holding the path to `leaf` (Pi's `createBranchedSession`), switched to.
    fn branch_into_new(&self, leaf: Option<&str>) -> Result<(), String> {
        let a = &self.agent;
        if a.is_streaming() {
            return Err("Cannot fork while the agent is running".into());
        }
        // The parent is the file the session lives in (a new session has no path of its own).
        let parent = a.session_file().map(|p| p.display().to_string());
        let lines = a.with_session(|s| {
            let header = NewHeader::new(
                pi_formats::id::session_id(),
                pi_formats::time::now_iso(),
                self.env.cwd.clone(),
                parent.or_else(|| s.path().map(|p| p.display().to_string())),
            );
            match leaf {
                Some(l) => s.branched_lines(l, &header).map_err(|e| e.to_string()),
                None => Ok(vec![header.to_line()]),
            }
        })?;
        let (s, p) = self
            .env
            .create_from_lines(lines)
            .map_err(|e| format!("{e:#}"))?;
        a.replace_session(s, p);
        a.restore_from_session();
        Ok(())
    }

    fn state(&self) -> Value {
        let a = &self.agent;
        let (steer, follow) = a.queue_modes();
        let mut m = Map::new();
        m.insert(
            "model".into(),
            a.model().as_ref().map_or(Value::Null, model_json),
        );
        m.insert("thinkingLevel".into(), a.thinking_level().as_str().into());
        m.insert("isStreaming".into(), a.is_streaming().into());
        m.insert("isCompacting".into(), a.is_compacting().into());
        m.insert("steeringMode".into(), steer.as_str().into());
        m.insert("followUpMode".into(), follow.as_str().into());
        if let Some(f) = a.session_file() {
            m.insert("sessionFile".into(), f.display().to_string().into());
        }
        m.insert("sessionId".into(), a.session_id().into());
        if let Some(name) = a.with_session(Session::session_name) {
            m.insert("sessionName".into(), name.into());
        }
        m.insert("autoCompactionEnabled".into(), a.auto_compaction().into());
        m.insert("messageCount".into(), a.message_count().into());
        m.insert("pendingMessageCount".into(), a.pending_count().into());
        Value::Object(m)
    }

    /// Pi's `getSessionStats` over every message entry of the session.
    fn stats(&self) -> Value {
        let a = &self.agent;
        let (mut user, mut assistant, mut calls, mut results, mut total) = (0, 0, 0, 0, 0);
        let (mut input, mut out, mut cr, mut cw, mut cost) = (0u64, 0u64, 0u64, 0u64, 0f64);
        a.with_session(|s| {
            for i in 0..s.entries().len() as u32 {
                let v = s.entry_value(i);
                if v["type"] != "message" {
                    continue;
                }
                total += 1;
                let m = &v["message"];
                match m["role"].as_str() {
                    Some("user") => user += 1,
                    Some("assistant") => {
                        assistant += 1;
                        calls += m["content"]
                            .as_array()
                            .map_or(0, |c| c.iter().filter(|b| b["type"] == "toolCall").count());
                        let u = &m["usage"];
                        input += u["input"].as_u64().unwrap_or(0);
                        out += u["output"].as_u64().unwrap_or(0);
                        cr += u["cacheRead"].as_u64().unwrap_or(0);
                        cw += u["cacheWrite"].as_u64().unwrap_or(0);
                        cost += u["cost"]["total"].as_f64().unwrap_or(0.0);
                    }
                    Some("toolResult") => results += 1,
                    _ => {}
                }
            }
        });
        let window = a.model().map_or(0, |m| m.context_window);
        let tokens = a.with_session(|s| {
            let branch = s.branch_path();
            let path = pi_engine::context::SessionPath::new(s, &branch.entries);
            let projection = pi_engine::context::project(&path);
            pi_engine::compaction::estimate_projected_context_tokens(&projection, &path)
        });
        let (tok, pct) = if tokens.last_usage_index.is_some() && window > 0 {
            (
                Value::from(tokens.tokens),
                Value::from(tokens.tokens as f64 / window as f64 * 100.0),
            )
        } else {
            (Value::Null, Value::Null)
        };
        let mut m = Map::new();
        if let Some(f) = a.session_file() {
            m.insert("sessionFile".into(), f.display().to_string().into());
        }
        m.insert("sessionId".into(), a.session_id().into());
        m.insert("userMessages".into(), user.into());
        m.insert("assistantMessages".into(), assistant.into());
        m.insert("toolCalls".into(), calls.into());
        m.insert("toolResults".into(), results.into());
        m.insert("totalMessages".into(), total.into());
        m.insert(
            "tokens".into(),
            json!({"input": input, "output": out, "cacheRead": cr, "cacheWrite": cw,
                   "total": input + out + cr + cw}),
        );
        m.insert("cost".into(), cost.into());
        m.insert(
            "contextUsage".into(),
            json!({"tokens": tok, "contextWindow": window, "percent": pct}),
        );
        Value::Object(m)
    }
}

/// The session tree as Pi's `getTree()`: nodes `{entry, children, label?, labelTimestamp?}`.
fn tree_json(s: &Session) -> Value {
    let tree = s.tree();
    // Iterative post-order build: trees can be deep, recursion could overflow.
    fn node(s: &Session, idx: u32, children: Vec<Value>) -> Value {
        let entry = s.entry_value(idx);
        let mut m = Map::new();
        m.insert("entry".into(), entry.clone());
        m.insert("children".into(), Value::Array(children));
        if let Some(label) = entry["id"].as_str().and_then(|id| s.label(id)) {
            m.insert("label".into(), label.text.to_string().into());
            if let Some(ts) = &label.timestamp {
                m.insert("labelTimestamp".into(), ts.to_string().into());
            }
        }
        Value::Object(m)
    }
    let mut built: std::collections::HashMap<u32, Value> = std::collections::HashMap::new();
    let mut stack: Vec<(u32, bool)> = tree.roots.iter().rev().map(|&r| (r, false)).collect();
    while let Some((idx, expanded)) = stack.pop() {
        let kids = tree.children.get(idx as usize).cloned().unwrap_or_default();
        if expanded {
            let children = kids.iter().filter_map(|k| built.remove(k)).collect();
            built.insert(idx, node(s, idx, children));
        } else {
            stack.push((idx, true));
            stack.extend(kids.iter().rev().map(|&k| (k, false)));
        }
    }
    Value::Array(tree.roots.iter().filter_map(|r| built.remove(r)).collect())
}
