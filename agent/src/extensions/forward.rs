//! The agent's events for the extensions' notification handlers (`turn_start`,
//! `message_end`, `tool_execution_end`, `agent_end`, …).
//!
//! The agent loop must not wait for them (Pi's notification handlers do not hold up a run),
//! so [`Forwarder::observe`] only queues the event; one task sends the queue to the sidecar
//! in order. Only events some extension handles are queued, so a run without such handlers
//! pays nothing. [`Forwarder::drain`] delivers what is queued before the session ends.
//!
//! `turn_end` is not forwarded: it is an actionable boundary the loop awaits (see
//! `Extensions::boundary`), which first lets the queue catch up ([`Forwarder::flush`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::{lock, Extensions};
use crate::protocol::Event;

/// The events forwarded, by Pi's extension event names.
const FORWARDED: &[&str] = &[
    "agent_start",
    "agent_end",
    "agent_settled",
    "turn_start",
    "message_start",
    "message_update",
    "message_end",
    "tool_execution_start",
    "tool_execution_update",
    "tool_execution_end",
    "session_info_changed",
];

/// How long the end of a session waits for queued events to reach the handlers.
const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// What the delivering task is handed: an event, or a flush waiting for those before it.
enum Queued {
    Event(String, Value),
    Flush(oneshot::Sender<()>),
}

#[derive(Default)]
pub(super) struct Forwarder {
    queue: Mutex<Option<UnboundedSender<Queued>>>,
    task: Mutex<Option<JoinHandle<()>>>,
    /// The turn index within the current run (`turnIndex` of `turn_start`/`turn_end`).
    turn: AtomicU64,
}

impl Forwarder {
    /// Starts the task that delivers queued events to `extensions`.
    pub(super) fn start(&self, extensions: &Arc<Extensions>) {
        let (tx, mut rx) = unbounded_channel::<Queued>();
        let target = Arc::downgrade(extensions);
        let task = tokio::spawn(async move {
            while let Some(queued) = rx.recv().await {
                let (name, payload) = match queued {
                    Queued::Event(name, payload) => (name, payload),
                    Queued::Flush(done) => {
                        let _ = done.send(());
                        continue;
                    }
                };
                let Some(extensions) = target.upgrade() else {
                    break;
                };
                extensions.notify(&name, payload).await;
            }
        });
        *lock(&self.queue) = Some(tx);
        *lock(&self.task) = Some(task);
    }

    /// Queues `event` when `handled(name)` says an extension listens for it.
    pub(super) fn observe(&self, event: &Event, handled: impl Fn(&str) -> bool) {
        let name = event.kind();
        if matches!(event, Event::AgentStart) {
            self.turn.store(0, Ordering::SeqCst);
        }
        let index = match event {
            Event::TurnStart => Some(self.turn.fetch_add(1, Ordering::SeqCst)),
            Event::TurnEnd { .. } => Some(self.turn.load(Ordering::SeqCst).saturating_sub(1)),
            _ => None,
        };
        if !FORWARDED.contains(&name) || !handled(name) {
            return;
        }
        let Ok(Value::Object(mut payload)) = serde_json::to_value(event) else {
            return;
        };
        payload.shift_remove("type");
        if let Some(index) = index {
            payload.insert("turnIndex".into(), index.into());
            payload.insert("timestamp".into(), pi_formats::time::now_millis().into());
        }
        if let Some(queue) = lock(&self.queue).as_ref() {
            let _ = queue.send(Queued::Event(name.to_string(), Value::Object(payload)));
        }
    }

    /// Waits until the events queued so far reached the handlers.
    pub(super) async fn flush(&self) {
        let (done, delivered) = oneshot::channel();
        let sent = lock(&self.queue)
            .as_ref()
            .is_some_and(|q| q.send(Queued::Flush(done)).is_ok());
        if sent {
            let _ = delivered.await;
        }
    }

    /// The index of the turn under way (`turnIndex` of its `turn_start`).
    pub(super) fn turn_index(&self) -> u64 {
        self.turn.load(Ordering::SeqCst).saturating_sub(1)
    }

    /// Delivers what is queued (bounded), then stops forwarding.
    pub(super) async fn drain(&self) {
        lock(&self.queue).take();
        let task = lock(&self.task).take();
        if let Some(task) = task {
            let _ = tokio::time::timeout(DRAIN_LIMIT, task).await;
        }
    }
}
