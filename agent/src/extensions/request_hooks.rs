//! Pi's provider hooks: `before_provider_request` (handlers see the request body as the wire
//! API built it and may replace it, each seeing the previous one's result),
//! `after_provider_response` (status and headers, before the body is read) and
//! `provider_stream_event` (each parsed stream event, awaited in stream order as Pi awaits
//! it). They are handed to the model request only when some extension handles one of them,
//! and each stage runs only for the events handled, so a run without such handlers neither
//! copies payloads nor crosses to the sidecar.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};

use super::Extensions;

/// The hooks of one model request.
pub(super) struct RequestHooks {
    pub(super) extensions: Arc<Extensions>,
    pub(super) payload: bool,
    pub(super) response: bool,
    pub(super) stream: bool,
}

impl std::fmt::Debug for RequestHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestHooks")
            .field("payload", &self.payload)
            .field("response", &self.response)
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl crate::llm::ProviderHooks for RequestHooks {
    fn wants_payload(&self) -> bool {
        self.payload
    }

    async fn payload(&self, payload: Value) -> Option<Value> {
        // The sidecar answers `{payload}` only when a handler returned a replacement; a
        // handler that fails is reported and skipped, one that times out leaves the body.
        self.extensions
            .emit("before_provider_request", json!({ "payload": payload }))
            .await?
            .get_mut("payload")
            .map(Value::take)
    }

    fn wants_response(&self) -> bool {
        self.response
    }

    async fn response(&self, status: u16, headers: BTreeMap<String, String>) {
        self.extensions
            .notify(
                "after_provider_response",
                json!({ "status": status, "headers": headers }),
            )
            .await;
    }

    fn wants_stream_events(&self) -> bool {
        self.stream
    }

    async fn stream_event(&self, model: &crate::llm::Model, data: &Value) {
        self.extensions
            .notify(
                "provider_stream_event",
                json!({
                    "data": data,
                    "provider": model.provider,
                    "api": model.api,
                    "model": model.id,
                }),
            )
            .await;
    }
}
