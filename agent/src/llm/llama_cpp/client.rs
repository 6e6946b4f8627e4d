//! HTTP calls to the llama.cpp router's management endpoints: the model list with states,
//! server properties, load and unload (and waiting for them to finish by polling the list,
//! as Pi does; the router's `/models/sse` events only speed Pi's progress display up).

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

/// A management call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RouterError {
    /// The router could not be reached (refused, reset, timed out).
    #[error("Could not connect to the llama.cpp server: {0}")]
    Connection(String),
    /// The router answered with an error status (its `error.message` when it gave one).
    #[error("{0}")]
    Http(String),
    /// The answer is not what a router sends.
    #[error("{0}")]
    Invalid(String),
}

impl RouterError {
    /// Whether the router was unreachable (the UI offers Retry then).
    pub fn is_connection(&self) -> bool {
        matches!(self, RouterError::Connection(_))
    }
}

/// A model's state as the router reports it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct RouterStatus {
    /// `unloaded`, `loading`, `loaded`, `sleeping`, `downloading` (newer routers may add more).
    pub value: String,
    /// The arguments the model's server process runs with (`-c 32768`, …).
    #[serde(default)]
    pub args: Vec<String>,
    /// The last load failed.
    #[serde(default)]
    pub failed: bool,
    /// The exit code of a failed model process.
    #[serde(default)]
    pub exit_code: Option<i64>,
}

/// What the model takes and produces.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Architecture {
    /// `text`, `image`, ….
    #[serde(default)]
    pub input_modalities: Vec<String>,
    /// `text`; `decisions` for decision (classifier) models (llama.cpp 0.6.0 and later).
    #[serde(default)]
    pub output_modalities: Vec<String>,
}

/// Facts from the GGUF and the running process.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Meta {
    /// The context the model runs with.
    #[serde(default)]
    pub n_ctx: Option<u64>,
    /// The context it was trained with.
    #[serde(default)]
    pub n_ctx_train: Option<u64>,
}

/// One entry of `GET /models`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RouterModel {
    /// The id chat requests name.
    pub id: String,
    /// The state.
    pub status: RouterStatus,
    #[serde(default)]
    pub architecture: Option<Architecture>,
    /// `preset` for models from `--models-preset`, `cache`, `models_dir`, ….
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub meta: Option<Meta>,
}

impl RouterModel {
    /// Loaded or sleeping: in memory (a sleeping model wakes on its next request).
    pub fn is_loaded(&self) -> bool {
        matches!(self.status.value.as_str(), "loaded" | "sleeping")
    }
}

/// A client for one router.
#[derive(Debug, Clone)]
pub struct RouterClient {
    server_url: String,
    api_key: Option<String>,
    http: reqwest::Client,
}

/// How often the waits poll the model list (Pi: 250 ms while loading, 100 ms unloading).
const LOAD_POLL: Duration = Duration::from_millis(250);
const UNLOAD_POLL: Duration = Duration::from_millis(100);

impl RouterClient {
    /// A client for the router at `server_url` (already normalized), sending `api_key` as a
    /// bearer token; each request gives up after `timeout`.
    pub fn new(server_url: &str, api_key: Option<String>, timeout: Duration) -> RouterClient {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .unwrap_or_default();
        RouterClient {
            server_url: server_url.trim_end_matches('/').to_string(),
            api_key,
            http,
        }
    }

    /// The router's root URL.
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    async fn request(&self, post: Option<Value>, path: &str) -> Result<Value, RouterError> {
        let url = format!("{}{path}", self.server_url);
        let mut req = match &post {
            Some(body) => self.http.post(&url).json(body),
            None => self.http.get(&url),
        };
        if let Some(key) = self.api_key.as_deref().filter(|k| !k.is_empty()) {
            req = req.bearer_auth(key);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| RouterError::Connection(crate::llm::error_chain(&e)))?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| RouterError::Connection(e.to_string()))?;
        let payload: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if !status.is_success() {
            let message = payload
                .pointer("/error/message")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .map(str::to_string)
                .unwrap_or_else(|| format!("llama.cpp returned HTTP {}", status.as_u16()));
            return Err(RouterError::Http(message));
        }
        Ok(payload)
    }

    /// `GET /models`: every model the router knows, with its state.
    pub async fn list(&self) -> Result<Vec<RouterModel>, RouterError> {
        let payload = self.request(None, "/models").await?;
        let Some(data) = payload.get("data").and_then(Value::as_array) else {
            return Err(RouterError::Invalid(
                "llama.cpp returned an invalid model catalog".into(),
            ));
        };
        // A single-model server lists its model without a status: not a router.
        data.iter()
            .map(|v| serde_json::from_value::<RouterModel>(v.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| {
                RouterError::Invalid("Server is not running in llama.cpp router mode".into())
            })
    }

    /// `GET /props`: whether the router loads unloaded models on first use
    /// (`models_autoload`).
    pub async fn autoload(&self) -> Result<bool, RouterError> {
        let payload = self.request(None, "/props").await?;
        Ok(payload.get("models_autoload").and_then(Value::as_bool) == Some(true))
    }

    /// `GET /props?model=ID&autoload=false`: the model's chat template (without loading it).
    pub async fn chat_template(&self, model: &str) -> Result<Option<String>, RouterError> {
        let mut url = reqwest::Url::parse(&format!("{}/props", self.server_url))
            .map_err(|e| RouterError::Invalid(e.to_string()))?;
        url.query_pairs_mut()
            .append_pair("model", model)
            .append_pair("autoload", "false");
        let path = format!("/props?{}", url.query().unwrap_or(""));
        let payload = self.request(None, &path).await?;
        Ok(payload
            .get("chat_template")
            .and_then(Value::as_str)
            .map(str::to_string))
    }

    /// `POST /models/load` with `{"model": id}`.
    pub async fn load(&self, model: &str) -> Result<(), RouterError> {
        self.request(Some(json!({ "model": model })), "/models/load")
            .await
            .map(drop)
    }

    /// `POST /models/unload` with `{"model": id}`.
    pub async fn unload(&self, model: &str) -> Result<(), RouterError> {
        self.request(Some(json!({ "model": model })), "/models/unload")
            .await
            .map(drop)
    }

    /// Loads `model` and waits until the router reports it loaded; a failed load (the
    /// model's process exited) is an error.
    pub async fn load_and_wait(&self, model: &str) -> Result<(), RouterError> {
        self.load(model).await?;
        loop {
            let list = self.list().await?;
            match list.iter().find(|m| m.id == model) {
                Some(m) if m.status.value == "loaded" => return Ok(()),
                Some(m) if m.status.failed => {
                    return Err(RouterError::Http(match m.status.exit_code {
                        Some(code) => format!("Model exited with code {code}"),
                        None => "Model failed to load".into(),
                    }))
                }
                None => return Err(RouterError::Http(format!("{model} is no longer listed"))),
                Some(_) => tokio::time::sleep(LOAD_POLL).await,
            }
        }
    }

    /// Unloads `model` and waits until the router reports it unloaded (or drops it).
    pub async fn unload_and_wait(&self, model: &str) -> Result<(), RouterError> {
        self.unload(model).await?;
        loop {
            let list = self.list().await?;
            match list.iter().find(|m| m.id == model) {
                None => return Ok(()),
                Some(m) if m.status.value == "unloaded" => return Ok(()),
                Some(_) => tokio::time::sleep(UNLOAD_POLL).await,
            }
        }
    }
}
