//! Commands answered at once: state, stats, models, the tree and the other read-only views,
//! plus the settings toggles. Their JSON is Pi's RPC `data`.

use std::path::PathBuf;

use pi_engine::session::Session;
use serde_json::{json, Map, Value};

use super::Host;
use crate::llm::Model;
use crate::protocol::{Command, Outcome};
use pi_formats::message::ThinkingLevel;

/// The commands Pi lists after the extensions' own (`get_commands`, `pi.getCommands()`):
/// the enabled built-in extensions' commands, prompt templates, then skills as
/// `skill:<name>`, each with its `sourceInfo`.
pub fn host_commands(resources: &crate::config::Resources) -> Vec<Value> {
    let builtins = crate::config::BUILTIN_COMMANDS
        .iter()
        .filter(|(extension, _, _)| resources.builtin_extensions.iter().any(|e| e == extension))
        .map(|(extension, name, description)| {
            json!({"name": name, "description": description, "source": "extension",
                   "sourceInfo": crate::config::SourceInfo::builtin_json(extension)})
        });
    let templates = resources.prompt_templates.iter().map(|t| {
        json!({"name": t.name, "description": t.description, "source": "prompt",
               "sourceInfo": resources.provenance.json(&t.file_path)})
    });
    let skills = resources.skills.iter().map(|s| {
        json!({"name": format!("skill:{}", s.name), "description": s.description,
               "source": "skill", "sourceInfo": resources.provenance.json(&s.file_path)})
    });
    builtins.chain(templates).chain(skills).collect()
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

/// `thinking_level_select` (`level`, `previousLevel`) when the level is not what it was.
fn thinking_event(before: ThinkingLevel, now: ThinkingLevel) -> Vec<(&'static str, Value)> {
    if before == now {
        return Vec::new();
    }
    vec![(
        "thinking_level_select",
        json!({"level": now.as_str(), "previousLevel": before.as_str()}),
    )]
}

/// Pi's events after a model change: `thinking_level_select` when the change moved the
/// level (a clamp included), then `model_select` (`model`, `previousModel`, `source`: `set`
/// or `cycle`). None when the model is the one selected before, as Pi skips equal models.
pub(crate) fn model_select_events(
    before: (Option<Model>, ThinkingLevel),
    now: (&Model, ThinkingLevel),
    source: &str,
) -> Vec<(&'static str, Value)> {
    let (previous, previous_level) = before;
    let (model, level) = now;
    let same = |m: &Model| m.provider == model.provider && m.id == model.id;
    if previous.as_ref().is_some_and(same) {
        return thinking_event(previous_level, level);
    }
    let mut events = thinking_event(previous_level, level);
    let mut payload = json!({"model": model_json(model), "source": source});
    if let Some(previous) = previous {
        payload["previousModel"] = model_json(&previous);
    }
    events.push(("model_select", payload));
    events
}

impl Host {
    /// Pi's `model_select` after a model change (`source`: `set` or `cycle`), preceded by
    /// `thinking_level_select` when the change moved the level (a clamp included).
    pub fn model_selected(&self, before: (Option<Model>, ThinkingLevel), source: &str) {
        let Some(ext) = self.extensions() else { return };
        let Some(model) = self.agent.model() else {
            return;
        };
        ext.notify_later(model_select_events(
            before,
            (&model, self.agent.thinking_level()),
            source,
        ));
    }

    /// Pi's model switch when cycling (ctrl+p, RPC `cycle_model`): the level is `explicit`
    /// (a scoped pattern's `:level`), else the model's own setting, the default setting or
    /// the current level, clamped to the model; extensions see `model_select` with
    /// `source: "cycle"`.
    pub fn cycle_to(
        &self,
        model: Model,
        explicit: Option<ThinkingLevel>,
    ) -> Result<ThinkingLevel, crate::agent::AgentError> {
        let a = &self.agent;
        let settings = self.setup().settings;
        let level = explicit
            .or_else(|| settings.model_thinking_level(&model.provider, &model.id))
            .or_else(|| settings.default_thinking_level())
            .unwrap_or_else(|| a.thinking_level());
        let before = (a.model(), a.thinking_level());
        let level = a.switch_model(model, level)?;
        self.model_selected(before, "cycle");
        Ok(level)
    }

    /// Pi's `thinking_level_select` when the level changed.
    pub fn thinking_selected(&self, before: ThinkingLevel) {
        if let Some(ext) = self.extensions() {
            ext.notify_later(thinking_event(before, self.agent.thinking_level()));
        }
    }

    /// Answers a command that needs no task. `prompt`, `compact` and `bash` go through
    /// [`Host::handle`].
    pub(super) fn answer(&self, cmd: &Command) -> Outcome {
        let a = &self.agent;
        let e = |e: crate::agent::AgentError| e.to_string();
        match cmd {
            Command::Steer { message } | Command::FollowUp { message } => {
                let message = self.expand(message)?;
                if matches!(cmd, Command::Steer { .. }) {
                    a.steer(message);
                } else {
                    a.follow_up(message);
                }
                Ok(Some(json!({"disposition": "queued"})))
            }
            Command::Abort => {
                a.abort();
                Ok(None)
            }
            Command::ClearQueue => {
                let (steering, follow_up) = a.clear_queue();
                Ok(Some(json!({"steering": steering, "followUp": follow_up})))
            }
            Command::NewSession { parent_session } => {
                self.new_session(parent_session.clone())
                    .map_err(|e| e.to_string())?;
                Ok(Some(json!({"cancelled": false})))
            }
            Command::GetState => Ok(Some(self.state())),
            Command::SetModel { provider, model_id } => {
                let m = a
                    .registry()
                    .find(provider, model_id)
                    .cloned()
                    .ok_or_else(|| format!("Model not found: {provider}/{model_id}"))?;
                let before = (a.model(), a.thinking_level());
                a.set_model(m.clone()).map_err(e)?;
                self.model_selected(before, "set");
                Ok(Some(model_json(&m)))
            }
            Command::CycleModel => {
                // Pi's cycleModel: the scope (only its models that have credentials) with
                // each pattern's level, else every available model.
                let setup = self.setup();
                let available = self.available_models();
                let is_scoped = !setup.scoped.is_empty();
                let list: Vec<(Model, Option<ThinkingLevel>)> = if is_scoped {
                    setup
                        .scoped
                        .iter()
                        .filter(|s| {
                            available
                                .iter()
                                .any(|m| m.provider == s.model.provider && m.id == s.model.id)
                        })
                        .map(|s| (s.model.clone(), s.thinking_level))
                        .collect()
                } else {
                    available.into_iter().map(|m| (m, None)).collect()
                };
                let cur = a.model();
                let pos = cur.and_then(|c| {
                    list.iter()
                        .position(|(m, _)| m.provider == c.provider && m.id == c.id)
                });
                let next = match pos {
                    _ if list.is_empty() => return Ok(None),
                    None => 0,
                    Some(_) if list.len() == 1 => return Ok(None),
                    Some(p) => (p + 1) % list.len(),
                };
                let (model, explicit) = list[next].clone();
                self.cycle_to(model.clone(), explicit).map_err(e)?;
                Ok(Some(json!({"model": model_json(&model),
                    "thinkingLevel": a.thinking_level().as_str(),
                    "isScoped": is_scoped})))
            }
            Command::GetAvailableModels => Ok(Some(json!({"models":
                self.available_models().iter().map(model_json).collect::<Vec<_>>()}))),
            Command::SetThinkingLevel { level } => {
                let before = a.thinking_level();
                a.set_thinking_level(*level).map_err(e)?;
                self.thinking_selected(before);
                Ok(None)
            }
            Command::CycleThinkingLevel => {
                let levels = a.available_thinking_levels();
                if levels.len() < 2 {
                    return Ok(None);
                }
                let cur = a.thinking_level();
                let pos = levels.iter().position(|l| *l == cur).unwrap_or(0);
                let next = levels[(pos + 1) % levels.len()];
                a.set_thinking_level(next).map_err(e)?;
                self.thinking_selected(cur);
                Ok(Some(json!({"level": next.as_str()})))
            }
            Command::GetAvailableThinkingLevels => Ok(Some(json!({"levels":
                a.available_thinking_levels().iter().map(|l| l.as_str()).collect::<Vec<_>>()}))),
            Command::SetSteeringMode { mode } => {
                a.set_steering_mode(*mode);
                Ok(None)
            }
            Command::SetFollowUpMode { mode } => {
                a.set_follow_up_mode(*mode);
                Ok(None)
            }
            Command::SetAutoCompaction { enabled } => {
                a.set_auto_compaction(*enabled);
                Ok(None)
            }
            Command::SetAutoRetry { enabled } => {
                a.set_auto_retry(*enabled);
                Ok(None)
            }
            Command::AbortRetry => {
                a.abort_retry();
                Ok(None)
            }
            Command::AbortBash => {
                self.abort_bash();
                Ok(None)
            }
            Command::GetSessionStats => Ok(Some(self.stats())),
            Command::ExportHtml { output_path } => {
                let path = match output_path {
                    Some(p) => PathBuf::from(p),
                    None => PathBuf::from(format!("pi-session-{}.html", a.session_id())),
                };
                // The same page as `pi sessions export --format html`, `--export` and `/export`.
                let html = a.with_session(|s| {
                    pi_engine::export::render(s, pi_engine::export::Format::Html)
                });
                pi_storage::atomic::write_atomically(&path, &html).map_err(|e| e.to_string())?;
                Ok(Some(json!({"path": path.display().to_string()})))
            }
            Command::SwitchSession { session_path } => {
                self.switch_session(session_path, super::MissingCwd::Continue)
                    .map_err(|e| e.to_string())?;
                Ok(Some(json!({"cancelled": false})))
            }
            Command::Fork { entry_id } => {
                let text = self.fork(entry_id).map_err(|e| e.to_string())?;
                Ok(Some(json!({"text": text, "cancelled": false})))
            }
            Command::Clone => {
                self.clone_session().map_err(|e| e.to_string())?;
                Ok(Some(json!({"cancelled": false})))
            }
            Command::GetForkMessages => {
                let messages: Vec<Value> = self
                    .fork_messages()
                    .into_iter()
                    .map(|(id, text)| json!({"entryId": id, "text": text}))
                    .collect();
                Ok(Some(json!({"messages": messages})))
            }
            Command::GetEntries { since } => a.with_session(|s| {
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
            Command::GetTree => Ok(Some(
                a.with_session(|s| json!({"tree": tree_json(s), "leafId": s.leaf_id()})),
            )),
            Command::GetLastAssistantText => Ok(Some(json!({"text": a.last_assistant_text()}))),
            Command::SetSessionName { name } => {
                a.set_session_name(name).map_err(e)?;
                Ok(None)
            }
            // (RPC streams it with `write_messages_response`; this is the same answer whole.)
            Command::GetMessages => Ok(Some(json!({"messages": a.messages()}))),
            // Extension commands, then built-in extensions' commands, prompt templates and
            // skills, in Pi's order.
            Command::GetCommands => {
                let mut commands: Vec<Value> = Vec::new();
                if let Some(ext) = self.extensions() {
                    commands.extend(ext.commands.iter().map(|(name, description)| {
                        let mut command = json!({"name": name, "source": "extension"});
                        if let Some(description) = description {
                            command["description"] = description.as_str().into();
                        }
                        if let Some(info) = ext.command_sources.get(name) {
                            command["sourceInfo"] = info.clone();
                        }
                        command
                    }));
                }
                commands.extend(host_commands(&self.setup().resources));
                Ok(Some(json!({"commands": commands})))
            }
            // Answered on tasks by `handle`, never here.
            Command::Prompt { .. } | Command::Compact { .. } | Command::Bash { .. } => {
                Err(format!("{} is not answered at once", cmd.kind()))
            }
        }
    }

    /// The `get_messages` response record written as it is projected: each message is
    /// serialized and dropped in turn, so a huge uncompacted session costs one entry's
    /// values, not all of them. Bytes equal to `response(id, "get_messages", …)` + `\n`.
    pub fn write_messages_response(
        &self,
        id: &Option<Value>,
        out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        let head = crate::protocol::response(id, "get_messages", Ok(None)).to_string();
        // The session lock is taken before the output's: the order of every event emitted
        // while the session is locked.
        self.agent.with_session(|s| {
            let branch = s.branch_path();
            let path = pi_engine::context::SessionPath::of(s, &branch);
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
                        .and_then(|()| serde_json::to_writer(&mut *out, m).map_err(Into::into));
                }
            });
            result
                .and_then(|()| out.write_all(b"]}}\n"))
                .and_then(|()| out.flush())
        })
    }

    /// Pi's `get_state`.
    pub fn state(&self) -> Value {
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
    pub fn stats(&self) -> Value {
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
            let path = pi_engine::context::SessionPath::of(s, &branch);
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

    /// The user messages of the active branch that a fork can start from: (entry id, text),
    /// every entry of the path, so repeated ids are all offered.
    pub fn fork_messages(&self) -> Vec<(String, String)> {
        self.agent.with_session(|s| {
            s.branch_path()
                .entries
                .iter()
                .map(|&i| s.entry_value(i))
                .filter(|v| v["type"] == "message" && v["message"]["role"] == "user")
                .map(|v| {
                    let text = pi_engine::js::content_text(v.pointer("/message/content"), "");
                    (v["id"].as_str().unwrap_or_default().to_string(), text)
                })
                .collect()
        })
    }
}

/// The session tree as Pi's `getTree()`: nodes `{entry, children, label?, labelTimestamp?}`.
pub fn tree_json(s: &Session) -> Value {
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
