//! Replacing the session as extensions see it (Pi's "Session Events"): `/new`, `/resume`,
//! `/fork` and `/clone` first ask the `session_before_switch` / `session_before_fork`
//! handlers, which may cancel; then the session being left gets `session_shutdown`, and the
//! one entered starts with extensions loaded afresh for it, as Pi builds a new extension
//! runtime for every session: the front end's [`ExtensionLoader`] finds the extension files
//! for the session's directory and starts them in a new process (module state starts
//! afresh, the old process turns stale), which then hear `session_start` with the file that
//! was left and `resources_discover`.

use futures::future::BoxFuture;
use pi_engine::session::Session;
use serde_json::{json, Value};
use std::sync::Arc;

use super::lifecycle::Staged;
use super::{Host, HostError, MissingCwd};

/// A change of the current session that extensions may veto.
#[derive(Debug, Clone)]
pub enum Replacement {
    /// `/new`, RPC `new_session`, optionally naming the parent session file.
    New { parent: Option<String> },
    /// `/resume`, RPC `switch_session`: the session at a store location.
    Resume {
        location: String,
        missing_cwd: MissingCwd,
    },
    /// `/fork`, RPC `fork`: continues from before a user message.
    Fork { entry_id: String },
    /// `/clone`, RPC `clone`: continues in a copy of the active path.
    Clone,
    /// A command's `ctx.fork(entryId, {position: "at"})`: continues in a copy of the path
    /// through any entry of the session.
    ForkAt { entry_id: String },
}

/// The `session_start` a replaced (or reloaded) session's extensions hear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStart {
    /// `new`, `resume`, `fork` or `reload`.
    pub reason: &'static str,
    /// `previousSessionFile`: the file of the session left.
    pub previous: Option<String>,
}

/// Loads the extensions for the session the host has just entered, in a new process that
/// replaces the running one ([`Host::replace_extensions`]), and starts them
/// ([`Host::start_extensions`]) — Pi's new extension runtime per session. Set by the front
/// end, which knows where extensions are configured ([`Host::set_extension_loader`]).
pub type ExtensionLoader = Arc<dyn Fn(SessionStart) -> BoxFuture<'static, ()> + Send + Sync>;

/// Reads settings and resources again for the session the host has just entered and
/// applies them: the part of Pi's new runtime per session that needs no extensions, run on
/// its own for a replacement made while no extensions run (the [`ExtensionLoader`] does it
/// first otherwise). Set by the front end ([`Host::set_session_refresh`]).
pub type SessionRefresh = Arc<dyn Fn() + Send + Sync>;

/// What became of a [`Replacement`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replaced {
    /// An extension's `session_before_*` handler cancelled it; nothing changed.
    Cancelled,
    /// Done. A fork carries the text of the message forked from (for the editor).
    Done { text: Option<String> },
}

impl Replacement {
    /// The `reason` of `session_shutdown` and `session_start`.
    fn reason(&self) -> &'static str {
        match self {
            Replacement::New { .. } => "new",
            Replacement::Resume { .. } => "resume",
            Replacement::Fork { .. } | Replacement::Clone | Replacement::ForkAt { .. } => "fork",
        }
    }
}

impl Host {
    /// Carries out `change` unless an extension cancels it, with Pi's events around it.
    /// Without extensions or a loader this is exactly the plain operation.
    pub async fn replace_session(&self, change: Replacement) -> Result<Replaced, HostError> {
        let ext = self.extensions();
        let loader = self.extension_loader();
        if ext.is_none() && loader.is_none() {
            return self.replace_now(&change);
        }
        if self.agent.is_streaming() {
            // The plain operation refuses with Pi's message; no handler should be asked.
            return self.replace_now(&change);
        }
        if let Some(ext) = &ext {
            let (event, payload) = self.gate_event(&change)?;
            if let Some(result) = ext.before(event, payload).await {
                if result.get("cancel").and_then(Value::as_bool) == Some(true) {
                    return Ok(Replaced::Cancelled);
                }
            }
        }
        // As Pi: the next session is made or opened first (a fork's file is written), so a
        // failure leaves the session and its extensions as they were; then the session left
        // hears `session_shutdown` naming the next one's file, and the switch happens.
        let previous = self.current_file();
        let (staged, text) = self.stage(&change)?;
        if let Some(ext) = &ext {
            ext.session_shutdown(change.reason(), staged.file().as_deref())
                .await;
        }
        let outcome = self.commit(staged).map(|()| Replaced::Done { text });
        let start = SessionStart {
            reason: change.reason(),
            previous,
        };
        match (&outcome, loader) {
            (Ok(_), Some(load)) => load(start).await,
            // The extensions were told the old session ended, so they hear of the session
            // that is current now even when the change failed (the old one again).
            _ => {
                if let Some(ext) = &ext {
                    ext.session_start(start.reason, start.previous.as_deref())
                        .await;
                }
            }
        }
        outcome
    }

    /// The operation itself, synchronous, without asking anyone.
    fn replace_now(&self, change: &Replacement) -> Result<Replaced, HostError> {
        let (staged, text) = self.stage(change)?;
        self.commit(staged)?;
        Ok(Replaced::Done { text })
    }

    /// The session `change` leads to, made or opened but not current yet, and for a fork
    /// the text of the message forked from.
    fn stage(&self, change: &Replacement) -> Result<(Staged, Option<String>), HostError> {
        Ok(match change {
            Replacement::New { parent } => (self.stage_new_session(parent.clone())?, None),
            Replacement::Resume {
                location,
                missing_cwd,
            } => (self.stage_switch_session(location, *missing_cwd)?, None),
            Replacement::Fork { entry_id } => {
                let (staged, text) = self.stage_fork(entry_id)?;
                (staged, Some(text))
            }
            Replacement::Clone => (self.stage_clone()?, None),
            Replacement::ForkAt { entry_id } => (self.stage_clone_at(entry_id)?, None),
        })
    }

    /// The gate event of `change` and its payload (extensions.md: `session_before_switch`
    /// has `reason` and, for a resume, `targetSessionFile`; `session_before_fork` has the
    /// entry and `position`, `before` for a fork and `at` for a clone).
    fn gate_event(&self, change: &Replacement) -> Result<(&'static str, Value), HostError> {
        Ok(match change {
            Replacement::New { .. } => ("session_before_switch", json!({"reason": "new"})),
            Replacement::Resume { location, .. } => (
                "session_before_switch",
                json!({"reason": "resume", "targetSessionFile": location}),
            ),
            Replacement::Fork { entry_id } => (
                "session_before_fork",
                json!({"entryId": entry_id, "position": "before"}),
            ),
            Replacement::ForkAt { entry_id } => (
                "session_before_fork",
                json!({"entryId": entry_id, "position": "at"}),
            ),
            Replacement::Clone => {
                let leaf = self
                    .agent
                    .with_session(|s: &Session| s.leaf_id().map(str::to_string))
                    .ok_or_else(|| {
                        HostError::Failed("Cannot clone session: no current entry selected".into())
                    })?;
                (
                    "session_before_fork",
                    json!({"entryId": leaf, "position": "at"}),
                )
            }
        })
    }

    /// The current session's file, as `previousSessionFile` names it.
    fn current_file(&self) -> Option<String> {
        self.agent.session_file().map(|p| p.display().to_string())
    }
}
