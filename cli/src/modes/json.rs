//! `--mode json`: the session header, then every agent event, one JSON object per line.
//!
//! The engine already emits events in Pi's JSON form (`message_update` without the
//! cumulative partial), so this mode only frames them.

use pi_agent::agent::AgentSession;

/// The header line Pi prints first (the session header as stored).
pub fn header_line(agent: &AgentSession) -> Option<String> {
    agent.with_session(|s| {
        s.header_line()
            .map(|b| String::from_utf8_lossy(b).into_owned())
    })
}
