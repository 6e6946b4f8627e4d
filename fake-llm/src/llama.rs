//! A fake llama.cpp router on the fake LLM's port ([`crate::FakeLlm::start_router`]): the
//! management endpoints of `llama serve` in router mode, with model states that change as a
//! router's do, and chat on `/v1/chat/completions` answered from the script once the named
//! model is (or may be) loaded.
//!
//! * `GET /health` → `{"status":"ok"}`; `GET /props` → `{"role":"router","models_autoload"}`,
//!   with `?model=ID` the model's `chat_template`.
//! * `GET /models` → `{"object":"list","data":[{id, status{value,args,failed?,exit_code?},
//!   architecture{input_modalities,output_modalities}, source, meta{n_ctx}}]}`.
//! * `POST /models/load` `{"model"}`: the model is `loading` for one more listing, then
//!   `loaded` (or, for a model set to fail, `unloaded` with `failed` and `exit_code: 1`);
//!   `POST /models/unload` `{"model"}`: `unloaded` at once. Unknown models: 404.
//! * Chat for an unloaded model: 400 unless autoload is on (then it loads); a sleeping model
//!   wakes.
//! * [`crate::FakeLlm::set_router_down`]: connections are closed without an answer, as a
//!   router that went away.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::Request;

/// One model the fake router knows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RouterModelSpec {
    pub id: String,
    /// `loaded`, `unloaded`, `sleeping`, `loading`.
    pub status: String,
    /// `preset`, `models_dir`, … (absent by default).
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub input_modalities: Vec<String>,
    /// `["decisions"]` for a decision model.
    #[serde(default)]
    pub output_modalities: Vec<String>,
    #[serde(default)]
    pub n_ctx: Option<u64>,
    #[serde(default)]
    pub chat_template: Option<String>,
    /// Loading fails (the model's process exits with code 1).
    #[serde(default)]
    pub fail_load: bool,
    #[serde(default)]
    pub failed: bool,
    /// Listings left before a `loading` model settles.
    #[serde(skip)]
    pub polls_left: u32,
}

impl RouterModelSpec {
    /// A model in `status`.
    pub fn new(id: &str, status: &str) -> RouterModelSpec {
        RouterModelSpec {
            id: id.into(),
            status: status.into(),
            ..RouterModelSpec::default()
        }
    }
}

/// One management request the fake router answered.
#[derive(Debug, Clone, PartialEq)]
pub struct RouterCall {
    pub method: String,
    /// Path with query.
    pub path: String,
    /// The JSON body (`Null` for GET).
    pub body: Value,
    /// The `authorization` header as sent.
    pub authorization: Option<String>,
}

/// The router's state.
#[derive(Debug, Default)]
pub(crate) struct RouterState {
    pub(crate) models: Vec<RouterModelSpec>,
    pub(crate) autoload: bool,
    pub(crate) down: bool,
    pub(crate) calls: Vec<RouterCall>,
}

/// What to do with a request.
pub(crate) enum Reply {
    /// Close the connection without answering.
    Drop,
    Json(u16, Value),
}

fn model_json(m: &RouterModelSpec) -> Value {
    let mut status = json!({"value": m.status, "args": ["--ctx-size", "4096"]});
    if m.failed {
        status["failed"] = Value::Bool(true);
        status["exit_code"] = Value::from(1);
    }
    let mut v = json!({
        "id": m.id, "object": "model", "owned_by": "llamacpp", "status": status,
        "architecture": {
            "input_modalities": if m.input_modalities.is_empty() { vec!["text".to_string()] } else { m.input_modalities.clone() },
            "output_modalities": if m.output_modalities.is_empty() { vec!["text".to_string()] } else { m.output_modalities.clone() },
        },
    });
    if let Some(s) = &m.source {
        v["source"] = Value::from(s.clone());
    }
    if let Some(n) = m.n_ctx {
        v["meta"] = json!({"n_ctx": n});
    }
    v
}

/// Settles models that were loading for long enough.
fn advance(st: &mut RouterState) {
    for m in st.models.iter_mut().filter(|m| m.status == "loading") {
        if m.polls_left > 0 {
            m.polls_left -= 1;
        } else if m.fail_load {
            m.status = "unloaded".into();
            m.failed = true;
        } else {
            m.status = "loaded".into();
        }
    }
}

fn not_found(id: &str) -> Reply {
    Reply::Json(
        404,
        json!({"error": {"code": 404, "message": format!("model not found: {id}"), "type": "not_found_error"}}),
    )
}

/// Answers router requests; `None` for what the chat server handles.
pub(crate) fn handle(st: &mut RouterState, req: &Request, path: &str) -> Option<Reply> {
    if st.down {
        return Some(Reply::Drop);
    }
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let management = matches!(
        (req.method.as_str(), path),
        ("GET", "/health" | "/props" | "/models") | ("POST", "/models/load" | "/models/unload")
    );
    if management {
        st.calls.push(RouterCall {
            method: req.method.clone(),
            path: req.path.clone(),
            body: body.clone(),
            authorization: req
                .headers
                .iter()
                .find(|(k, _)| k == "authorization")
                .map(|(_, v)| v.clone()),
        });
    }
    let model_of = |body: &Value| {
        body.get("model")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    match (req.method.as_str(), path) {
        ("GET", "/health") => Some(Reply::Json(200, json!({"status": "ok"}))),
        ("GET", "/props") => {
            let query = req.path.split_once('?').map(|(_, q)| q).unwrap_or("");
            let model = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("model="))
                .map(|m| m.replace("%2F", "/").replace("%3A", ":"));
            match model {
                Some(id) => match st.models.iter().find(|m| m.id == id) {
                    Some(m) => Some(Reply::Json(
                        200,
                        json!({"chat_template": m.chat_template.clone().unwrap_or_default(),
                            "default_generation_settings": {"n_ctx": m.n_ctx.unwrap_or(4096)}}),
                    )),
                    None => Some(not_found(&id)),
                },
                None => Some(Reply::Json(
                    200,
                    json!({"role": "router", "max_instances": 4, "models_autoload": st.autoload}),
                )),
            }
        }
        ("GET", "/models") | ("GET", "/v1/models") => {
            advance(st);
            let data: Vec<Value> = st.models.iter().map(model_json).collect();
            Some(Reply::Json(200, json!({"object": "list", "data": data})))
        }
        ("POST", "/models/load") => {
            let id = model_of(&body);
            match st.models.iter_mut().find(|m| m.id == id) {
                Some(m) if m.status == "loaded" => Some(Reply::Json(
                    400,
                    json!({"error": {"code": 400, "message": "model is already loaded"}}),
                )),
                Some(m) => {
                    m.status = "loading".into();
                    m.failed = false;
                    m.polls_left = 1;
                    Some(Reply::Json(200, json!({"success": true})))
                }
                None => Some(not_found(&id)),
            }
        }
        ("POST", "/models/unload") => {
            let id = model_of(&body);
            match st.models.iter_mut().find(|m| m.id == id) {
                Some(m) => {
                    m.status = "unloaded".into();
                    Some(Reply::Json(200, json!({"success": true})))
                }
                None => Some(not_found(&id)),
            }
        }
        ("POST", p) if p.ends_with("/chat/completions") => {
            let id = model_of(&body);
            let autoload = st.autoload;
            match st.models.iter_mut().find(|m| m.id == id) {
                None => Some(not_found(&id)),
                Some(m) if m.status == "sleeping" => {
                    m.status = "loaded".into();
                    None
                }
                Some(m) if m.status == "unloaded" && autoload => {
                    m.status = "loaded".into();
                    None
                }
                Some(m) if m.status != "loaded" => Some(Reply::Json(
                    400,
                    json!({"error": {"code": 400, "message": "model is not loaded"}}),
                )),
                Some(_) => None,
            }
        }
        _ => None,
    }
}
