//! Tree navigation (Pi's `AgentSession.navigateTree`): moving the session leaf to another
//! entry, optionally summarizing the branch being left.
//!
//! The leaf is in-memory state, as in Pi: a plain navigation writes nothing, and the next
//! appended entry records the new position as its parent. With a summary, a
//! `branch_summary` entry is appended at the new position (its `fromId` is the leaf that
//! was left), so the summary becomes part of the context from there on.

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use pi_formats::entry::NewEntry;
use pi_storage::record::StoredEntry;

use super::summarizer::{self, RetryEvents};
use super::{append_locked, lock, AgentError, AgentSession, Persistence, State};
use pi_engine::compaction::{
    collect_entries_for_branch_summary, generate_branch_summary, navigation_target,
    BranchSummaryOutcome, FileLists, SummaryOptions, NO_CONTENT_SUMMARY,
};

/// Pi's refusal while a compaction or another navigation runs.
const BUSY: &str = "Wait for the current compaction or tree navigation to finish before navigating the session tree.";

/// How to navigate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NavigateOptions {
    /// Summarize the branch being left.
    pub summarize: bool,
    /// Extra focus for the summary.
    pub custom_instructions: Option<String>,
    /// The custom instructions replace the default summary prompt instead of adding to it
    /// (`None`: not said, which `session_before_tree` shows as Pi does, as undefined).
    pub replace_instructions: Option<bool>,
    /// A label for the summary entry (or, without a summary, for the target).
    pub label: Option<String>,
}

/// What a navigation did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NavigateOutcome {
    /// Nothing changed (the summary was aborted).
    pub cancelled: bool,
    /// The branch summary was aborted (`cancelled` is set too).
    pub aborted: bool,
    /// Text for the editor: the target was the user's own message, to edit and resend.
    pub editor_text: Option<String>,
    /// The `branch_summary` entry that was appended.
    pub summary_entry: Option<Value>,
}

/// Frees the navigation slot when the navigation ends, however it ends. Only the
/// navigation that filled the slot holds one of these.
struct Running<'a> {
    agent: &'a AgentSession,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        *lock(&self.agent.shared.branch_summary) = None;
    }
}

impl AgentSession {
    /// Pi's `navigateTree`: moves the leaf to `target_id` (a user or custom message puts
    /// the leaf on its parent and hands its text back for the editor), after summarizing
    /// the branch being left when asked. Selecting the current leaf does nothing.
    ///
    /// [`AgentSession::abort_branch_summary`] (or [`AgentSession::abort`]) cancels a
    /// summary in progress; the outcome is then `cancelled` and `aborted`, and the session
    /// is unchanged. Summary requests retry transient provider errors, emitting
    /// `summarization_retry_*` events with `source: "branchSummary"`.
    pub async fn navigate_tree(
        &self,
        target_id: &str,
        options: NavigateOptions,
    ) -> Result<NavigateOutcome, AgentError> {
        if self.is_streaming() {
            return Err(AgentError::Other(
                "Wait for the current response to finish before navigating the session tree."
                    .into(),
            ));
        }
        if self.is_compacting() {
            return Err(AgentError::Other(BUSY.into()));
        }
        let (target, entries, old_leaf, common_ancestor) = {
            let st = lock(&self.shared.state);
            let s = &st.session;
            let old_leaf = s.leaf_id().map(str::to_string);
            if old_leaf.as_deref() == Some(target_id) {
                return Ok(NavigateOutcome::default());
            }
            if options.summarize && st.opts.model.is_none() {
                return Err(AgentError::Other(
                    "No model available for summarization".into(),
                ));
            }
            let Some(idx) = s.find(target_id) else {
                return Err(AgentError::Other(format!("Entry {target_id} not found")));
            };
            let collected = collect_entries_for_branch_summary(s, old_leaf.as_deref(), target_id);
            (
                s.entry_value(idx),
                collected.entries,
                old_leaf,
                collected.common_ancestor_id,
            )
        };
        let token = CancellationToken::new();
        {
            let mut slot = lock(&self.shared.branch_summary);
            if slot.is_some() {
                return Err(AgentError::Other(BUSY.into()));
            }
            *slot = Some(token.clone());
        }
        let _running = Running { agent: self };

        // Pi's `session_before_tree`: extensions may cancel, supply the summary or change
        // the instructions and the label.
        let mut options = options;
        let hooks = self.hooks().filter(|h| h.wants_tree());
        let mut from_extension = false;
        let mut extension_summary = None;
        if let Some(hooks) = &hooks {
            let preparation = json!({
                "targetId": target_id,
                "oldLeafId": old_leaf,
                "commonAncestorId": common_ancestor,
                "entriesToSummarize": entries,
                "userWantsSummary": options.summarize,
                "customInstructions": options.custom_instructions,
                "replaceInstructions": options.replace_instructions,
                "label": options.label,
            });
            if let Some(result) = hooks
                .before_tree(json!({ "preparation": preparation }))
                .await
            {
                if result.get("cancel").and_then(Value::as_bool) == Some(true) {
                    return Ok(NavigateOutcome {
                        cancelled: true,
                        ..Default::default()
                    });
                }
                extension_summary = supplied_summary(&result).filter(|_| options.summarize);
                from_extension = extension_summary.is_some();
                apply_overrides(&mut options, &result);
            }
        }

        let summary = if extension_summary.is_some() {
            extension_summary
        } else if options.summarize && !entries.is_empty() {
            match self.summarize_branch(&entries, &options, &token).await? {
                Some((text, details, usage)) => Some((text, Some(details), usage)),
                None => {
                    return Ok(NavigateOutcome {
                        cancelled: true,
                        aborted: true,
                        ..Default::default()
                    })
                }
            }
        } else {
            None
        };

        // An empty summary (an extension's) records none, as in Pi.
        let summary = summary.filter(|(text, _, _)| !text.is_empty());
        let nav = navigation_target(&target);
        let summarized = summary.is_some();
        let written = summary.map(|(text, details, usage)| WrittenSummary {
            text,
            details,
            usage,
            from_hook: from_extension,
        });
        let (summary_entry, new_leaf) =
            self.move_leaf(target_id, nav.new_leaf_id.as_deref(), written, &options)?;
        if let Some(hooks) = &hooks {
            let mut payload = json!({"newLeafId": new_leaf, "oldLeafId": old_leaf});
            if let Some(entry) = &summary_entry {
                payload["summaryEntry"] = entry.clone();
            }
            if summarized {
                payload["fromExtension"] = from_extension.into();
            }
            hooks.tree_done(payload).await;
        }
        Ok(NavigateOutcome {
            cancelled: false,
            aborted: false,
            editor_text: nav.editor_text,
            summary_entry,
        })
    }

    /// Moves the leaf to `new_leaf_id`, recording the summary there when there is one and
    /// the label (on the summary, else on the target): the summary entry and the new leaf.
    fn move_leaf(
        &self,
        target_id: &str,
        new_leaf_id: Option<&str>,
        summary: Option<WrittenSummary>,
        options: &NavigateOptions,
    ) -> Result<(Option<Value>, Option<String>), AgentError> {
        let mut st = lock(&self.shared.state);
        let label = options.label.as_ref().filter(|l| !l.is_empty());
        let summary_entry = match summary {
            Some(written) => {
                let id = branch_with_summary(&mut st, new_leaf_id, written)?;
                let value = st.session.find(&id).map(|i| st.session.entry_value(i));
                if let Some(label) = label {
                    append_locked(
                        &mut st,
                        &NewEntry::Label {
                            target_id: id.clone(),
                            label: Some(label.clone()),
                        },
                    )?;
                }
                value
            }
            None => {
                match new_leaf_id {
                    Some(id) => st
                        .session
                        .branch(id)
                        .map_err(|e| AgentError::Other(e.to_string()))?,
                    None => st.session.reset_leaf(),
                }
                if let Some(label) = label {
                    append_locked(
                        &mut st,
                        &NewEntry::Label {
                            target_id: target_id.to_string(),
                            label: Some(label.clone()),
                        },
                    )?;
                }
                None
            }
        };
        Ok((summary_entry, st.session.leaf_id().map(str::to_string)))
    }

    /// Cancels a branch summary in progress.
    pub fn abort_branch_summary(&self) {
        if let Some(t) = lock(&self.shared.branch_summary).as_ref() {
            t.cancel();
        }
    }

    /// Whether a tree navigation (and its branch summary) is in progress.
    pub fn is_navigating(&self) -> bool {
        lock(&self.shared.branch_summary).is_some()
    }

    /// The summary text, details and usage for a `branch_summary` entry; `None` when
    /// the summary was aborted.
    async fn summarize_branch(
        &self,
        entries: &[Value],
        options: &NavigateOptions,
        token: &CancellationToken,
    ) -> Result<Option<(String, Value, Option<Value>)>, AgentError> {
        let routed = self.direct_route().await.map_err(AgentError::Other)?;
        let hooks = self.hooks();
        let (summarizer, summary_options, window, settings) = {
            let st = lock(&self.shared.state);
            let events = RetryEvents {
                sink: self.shared.sink.clone(),
                source: "branchSummary",
                reason: None,
            };
            let Some((summarizer, reasoning)) =
                summarizer::for_state(&st, routed, token, events, hooks)
            else {
                return Err(AgentError::Other(
                    "No model available for summarization".into(),
                ));
            };
            let window = summarizer.model.context_window;
            let summary_options = SummaryOptions {
                custom_instructions: options.custom_instructions.clone(),
                reasoning,
                retry: st.opts.retry,
            };
            (summarizer, summary_options, window, st.opts.branch_summary)
        };
        let outcome = generate_branch_summary(
            entries,
            &summarizer,
            Some(window),
            &settings,
            &summary_options,
            options.replace_instructions == Some(true),
        )
        .await;
        let to_value = |lists: &FileLists| {
            serde_json::to_value(lists).map_err(|e| AgentError::Other(e.to_string()))
        };
        match outcome {
            Ok(BranchSummaryOutcome::Aborted) => Ok(None),
            Ok(BranchSummaryOutcome::NothingToSummarize) => Ok(Some((
                NO_CONTENT_SUMMARY.to_string(),
                to_value(&FileLists::default())?,
                None,
            ))),
            Ok(BranchSummaryOutcome::Summary {
                summary,
                details,
                usage,
            }) => Ok(Some((summary, to_value(&details)?, usage))),
            // A cancelled request can come back as an error of the dropped stream.
            Err(_) if token.is_cancelled() => Ok(None),
            Err(e) => Err(AgentError::Other(e.to_string())),
        }
    }
}

/// A branch summary to record: the model's (`from_hook` false) or an extension's.
struct WrittenSummary {
    text: String,
    details: Option<Value>,
    usage: Option<Value>,
    from_hook: bool,
}

/// The summary a `session_before_tree` result supplies (`{summary: {summary, details?,
/// usage?}}`), if any.
fn supplied_summary(result: &Value) -> Option<(String, Option<Value>, Option<Value>)> {
    let supplied = result.get("summary").filter(|s| s.is_object())?;
    let text = supplied.get("summary").and_then(Value::as_str)?.to_string();
    let field = |k: &str| supplied.get(k).filter(|v| !v.is_null()).cloned();
    Some((text, field("details"), field("usage")))
}

/// The options a `session_before_tree` result overrides (a field it leaves out stays).
fn apply_overrides(options: &mut NavigateOptions, result: &Value) {
    if let Some(v) = result.get("customInstructions") {
        options.custom_instructions = v.as_str().map(str::to_string);
    }
    if let Some(v) = result.get("replaceInstructions") {
        options.replace_instructions = Some(v.as_bool().unwrap_or(false));
    }
    if let Some(v) = result.get("label") {
        options.label = v.as_str().map(str::to_string);
    }
}

/// Pi's `branchWithSummary` through the session writer: the leaf moves to `from` and the
/// `branch_summary` entry is appended there (`fromHook` true when an extension wrote it).
fn branch_with_summary(
    st: &mut State,
    from: Option<&str>,
    summary: WrittenSummary,
) -> Result<String, AgentError> {
    let WrittenSummary {
        text: summary,
        details,
        usage,
        from_hook,
    } = summary;
    let State {
        session, persist, ..
    } = st;
    let Persistence { store, lazy, .. } = persist;
    session
        .branch_with_summary_with(from, summary, details, Some(from_hook), usage, |p| {
            match (store.as_deref(), lazy.as_mut()) {
                (Some(store), Some(lazy)) => lazy.append(
                    store,
                    &[StoredEntry::from_line(p.line.clone().into_bytes())],
                ),
                _ => Ok(()),
            }
        })
        .map_err(|e| AgentError::Persist(format!("{e:#}")))
}

#[cfg(test)]
mod tests;
