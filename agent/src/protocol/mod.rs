//! The one seam between the runtime and every front end: a [`Command`] goes in (Pi's RPC
//! command names and fields), a response and events come out.
//!
//! RPC decodes stdin records into [`Request`]s and prints what the host answers; the TUI
//! sends the same commands for its effects. Responses are Pi's wire JSON
//! (`{"id"?, "type": "response", "command", "success", "data"? | "error"}`).

pub mod command;
pub mod event;

use serde_json::{Map, Value};

pub use command::{Command, Decoded, Rejected, Request, StreamingBehavior};
pub use event::Event;

/// What a command answers: `data` on success (none for commands that answer nothing),
/// the error text otherwise.
pub type Outcome = Result<Option<Value>, String>;

/// Pi's response record for a command of type `command`.
pub fn response(id: &Option<Value>, command: &str, outcome: Outcome) -> Value {
    let mut m = Map::new();
    if let Some(id) = id {
        m.insert("id".into(), id.clone());
    }
    m.insert("type".into(), "response".into());
    m.insert("command".into(), command.into());
    match outcome {
        Ok(data) => {
            m.insert("success".into(), true.into());
            if let Some(d) = data {
                m.insert("data".into(), d);
            }
        }
        Err(message) => {
            m.insert("success".into(), false.into());
            m.insert("error".into(), message.into());
        }
    }
    Value::Object(m)
}
