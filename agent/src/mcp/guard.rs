//! Responses nobody asked for are dropped before they reach the SDK.
//!
//! A server that writes a response with an id the client never sent (a stray line, a bug)
//! would otherwise break the SDK's `initialize` handshake, which takes the first response it
//! sees for the answer ("conflict initialized response id"). Pi's client ignores such
//! responses; so does this wrapper, for any transport. Lines that are not JSON-RPC at all
//! are skipped by the transports themselves.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::Mutex;

use rmcp::model::ClientJsonRpcMessage;
use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::Transport;
use rmcp::RoleClient;

/// Wraps a transport, passing on only responses to requests it sent.
pub struct KnownResponsesOnly<T> {
    inner: T,
    pending: Arc<Mutex<HashSet<String>>>,
}

impl<T> KnownResponsesOnly<T> {
    /// Guards `inner`.
    pub fn new(inner: T) -> Self {
        KnownResponsesOnly {
            inner,
            pending: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for KnownResponsesOnly<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl std::future::Future<Output = Result<(), T::Error>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(request) = &item {
            self.pending().insert(request.id.to_string());
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            let message = self.inner.receive().await?;
            let id = match &message {
                ServerJsonRpcMessage::Response(response) => Some(response.id.to_string()),
                ServerJsonRpcMessage::Error(error) => error.id.as_ref().map(|id| id.to_string()),
                _ => None,
            };
            if let Some(id) = id {
                if !self.pending().remove(&id) {
                    continue;
                }
            }
            return Some(message);
        }
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), T::Error>> + Send {
        self.inner.close()
    }
}
