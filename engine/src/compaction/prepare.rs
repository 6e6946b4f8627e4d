//! Deciding what a compaction summarizes and what it keeps (Pi 1.6's
//! `prepareCompaction` and `findCutPoint`).
//!
//! Pi 1.6 cuts over the *projected* context (`buildSessionProjection`: the latest
//! compaction, its kept tail, context edits applied), not over raw path entries.
//! The cut walks back from the newest entry until `keepRecentTokens` are kept,
//! then moves to the nearest entry that may start the kept part: one holding a
//! user-like or assistant message, never a lone tool result (it must follow its
//! call). A cut inside a turn splits it: the turn's beginning is summarized
//! separately as the "turn prefix".

use super::file_ops::{FileLists, FileOps};
use super::tokens::{estimate_projected_context_tokens, estimate_tokens};
use super::CompactionSettings;
use crate::context::{entry_messages, project, EntrySource};
use crate::js;
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::Value;

/// Pi's reason when there is no preparation because the leaf is a compaction.
pub const REASON_ALREADY_COMPACTED: &str = "Already compacted";
/// Pi's reason in every other case.
pub const REASON_TOO_SMALL: &str = "Nothing to compact (session too small)";

/// Where to cut, as indices into the entries searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutPoint {
    /// First entry kept verbatim.
    pub first_kept_entry_index: usize,
    /// The entry starting the turn that the cut splits (only for split turns).
    pub turn_start_index: Option<usize>,
    pub is_split_turn: bool,
}

impl Serialize for CutPoint {
    /// Pi's `CutPointResult`, with `-1` for "no turn start".
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("CutPoint", 3)?;
        st.serialize_field("firstKeptEntryIndex", &self.first_kept_entry_index)?;
        let turn_start = self.turn_start_index.map_or(-1, |i| i as i64);
        st.serialize_field("turnStartIndex", &turn_start)?;
        st.serialize_field("isSplitTurn", &self.is_split_turn)?;
        st.end()
    }
}

/// Everything a compaction needs before the summarizer runs.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionPreparation {
    /// The entry the compaction keeps from (its `firstKeptEntryId`).
    pub first_kept_entry_id: String,
    /// Messages summarized into the history summary (system messages left out:
    /// the compaction entry carries its own replay of them).
    pub messages_to_summarize: Vec<Value>,
    /// The beginning of a split turn, summarized on its own.
    pub turn_prefix_messages: Vec<Value>,
    pub is_split_turn: bool,
    /// Context size before compacting.
    pub tokens_before: u64,
    /// The summary of the compaction this one builds on, if any.
    pub previous_summary: Option<String>,
    pub file_ops: FileOps,
    pub settings: CompactionSettings,
}

fn roles(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .map(|m| m.get("role").cloned().unwrap_or(Value::Null))
        .collect()
}

impl Serialize for CompactionPreparation {
    /// The shape the conformance oracle records: the preparation plus its file
    /// lists and the roles of both message lists (settings are reported apart).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("CompactionPreparation", 10)?;
        st.serialize_field("firstKeptEntryId", &self.first_kept_entry_id)?;
        st.serialize_field("isSplitTurn", &self.is_split_turn)?;
        st.serialize_field("tokensBefore", &self.tokens_before)?;
        st.serialize_field("previousSummary", &self.previous_summary)?;
        st.serialize_field("fileOps", &self.file_ops)?;
        st.serialize_field("fileLists", &self.file_lists())?;
        st.serialize_field(
            "messagesToSummarizeRoles",
            &roles(&self.messages_to_summarize),
        )?;
        st.serialize_field(
            "turnPrefixMessagesRoles",
            &roles(&self.turn_prefix_messages),
        )?;
        st.serialize_field("messagesToSummarize", &self.messages_to_summarize)?;
        st.serialize_field("turnPrefixMessages", &self.turn_prefix_messages)?;
        st.end()
    }
}

impl CompactionPreparation {
    pub fn file_lists(&self) -> FileLists {
        self.file_ops.file_lists()
    }
}

fn role_of(message: &Value) -> Option<&str> {
    message.get("role").and_then(Value::as_str)
}

fn kind_of(entry: &Value) -> &str {
    entry.get("type").and_then(Value::as_str).unwrap_or("")
}

/// A message the kept part may start with: anything but a tool result (and
/// roles Pi does not know).
fn is_cut_point_message(message: &Value) -> bool {
    matches!(
        role_of(message),
        Some(
            "user"
                | "assistant"
                | "bashExecution"
                | "custom"
                | "branchSummary"
                | "compactionSummary"
        )
    )
}

/// A message that begins a turn: user input or something standing in for it.
fn is_turn_start_message(message: &Value) -> bool {
    matches!(
        role_of(message),
        Some("user" | "bashExecution" | "custom" | "branchSummary" | "compactionSummary")
    )
}

/// Token estimate of a list of messages.
fn messages_tokens(messages: &[Value]) -> u64 {
    messages.iter().map(estimate_tokens).sum()
}

/// The view of an entry the cut search needs; implemented over raw path
/// entries (the exported `findCutPoint`) and over projected ones (what
/// `prepareCompaction` uses).
trait CutEntry {
    fn is_compaction(&self) -> bool;
    /// The messages this entry contributes.
    fn messages(&self) -> std::borrow::Cow<'_, [Value]>;
}

struct Raw<'a>(&'a Value);

impl CutEntry for Raw<'_> {
    fn is_compaction(&self) -> bool {
        kind_of(self.0) == "compaction"
    }
    fn messages(&self) -> std::borrow::Cow<'_, [Value]> {
        std::borrow::Cow::Owned(entry_messages(self.0))
    }
}

/// A projected entry: where its source is on the path, the source's type, and
/// the messages it contributes. The source itself is parsed only where a rule
/// needs more than its type (see [`is_recovery_omission_suffix`]).
struct Projected<'a> {
    pos: usize,
    kind: &'a str,
    messages: &'a [Value],
}

impl CutEntry for Projected<'_> {
    fn is_compaction(&self) -> bool {
        self.kind == "compaction"
    }
    fn messages(&self) -> std::borrow::Cow<'_, [Value]> {
        std::borrow::Cow::Borrowed(self.messages)
    }
}

fn is_turn_start<E: CutEntry>(entry: &E) -> bool {
    !entry.is_compaction() && entry.messages().iter().any(is_turn_start_message)
}

fn find_turn_start<E: CutEntry>(entries: &[E], from: usize, start: usize) -> Option<usize> {
    (start..=from).rev().find(|&i| is_turn_start(&entries[i]))
}

/// The search shared by both cut finders, up to (not including) the final
/// metadata scan: the cut candidates and the first chosen cut, plus whether the
/// kept tokens reached the budget.
fn initial_cut<E: CutEntry>(
    entries: &[E],
    start: usize,
    end: usize,
    keep_recent_tokens: u64,
) -> Option<(usize, bool)> {
    let cut_points: Vec<usize> = (start..end)
        .filter(|&i| {
            !entries[i].is_compaction() && entries[i].messages().iter().any(is_cut_point_message)
        })
        .collect();
    let (&first, &last) = (cut_points.first()?, cut_points.last()?);
    let mut accumulated = 0u64;
    for i in (start..end).rev() {
        let tokens = messages_tokens(&entries[i].messages());
        if tokens == 0 {
            continue;
        }
        accumulated += tokens;
        if accumulated >= keep_recent_tokens {
            // The nearest candidate at or after this entry; when only tool results
            // follow, keep their call (the last candidate) rather than everything.
            let cut = cut_points.iter().copied().find(|&c| c >= i).unwrap_or(last);
            return Some((cut, true));
        }
    }
    Some((first, false))
}

/// Moves the cut back over entries that contribute nothing (labels, model
/// changes…), so they stay with the kept part; stops at a compaction.
fn include_metadata<E: CutEntry>(entries: &[E], mut cut: usize, start: usize) -> usize {
    while cut > start {
        let previous = &entries[cut - 1];
        if previous.is_compaction() || !previous.messages().is_empty() {
            break;
        }
        cut -= 1;
    }
    cut
}

fn finish_cut<E: CutEntry>(entries: &[E], cut: usize, start: usize) -> CutPoint {
    let starts_turn = is_turn_start(&entries[cut]);
    let turn_start = if starts_turn {
        None
    } else {
        find_turn_start(entries, cut, start)
    };
    CutPoint {
        first_kept_entry_index: cut,
        turn_start_index: turn_start,
        is_split_turn: turn_start.is_some(),
    }
}

/// Pi's exported, entry-based `findCutPoint` over `path[start..end]`. Kept for
/// extensions and tools; compaction itself uses the projected search.
pub fn find_cut_point(
    path: &[Value],
    start: usize,
    end: usize,
    keep_recent_tokens: u64,
) -> CutPoint {
    let end = end.min(path.len());
    let entries: Vec<Raw<'_>> = path.iter().map(Raw).collect();
    let no_cut = CutPoint {
        first_kept_entry_index: start,
        turn_start_index: None,
        is_split_turn: false,
    };
    if start >= end {
        return no_cut;
    }
    let Some((cut, _)) = initial_cut(&entries, start, end, keep_recent_tokens) else {
        return no_cut;
    };
    let cut = include_metadata(&entries, cut, start);
    finish_cut(&entries, cut, start)
}

/// Pi's `findProjectedCutPoint`.
fn find_projected_cut_point<S: EntrySource + ?Sized>(
    path: &S,
    entries: &[Projected<'_>],
    start: usize,
    end: usize,
    keep_recent_tokens: u64,
) -> CutPoint {
    let no_cut = CutPoint {
        first_kept_entry_index: start,
        turn_start_index: None,
        is_split_turn: false,
    };
    if start >= end {
        return no_cut;
    }
    let Some((mut cut, exceeded_budget)) = initial_cut(entries, start, end, keep_recent_tokens)
    else {
        return no_cut;
    };
    if exceeded_budget && is_recovery_omission_suffix(path, &entries[cut + 1..end]) {
        cut += 1;
    }
    let cut = include_metadata(entries, cut, start);
    finish_cut(entries, cut, start)
}

/// After an overflow, Pi hides the failed assistant attempt with context edits.
/// When everything after the cut is such a hidden attempt plus invisible
/// metadata, keeping it would keep nothing the model sees, so the cut moves one
/// entry on. Any visible input after the cut, an edit replacing something outside
/// the suffix, or a compaction keeps the cut where it is.
fn is_recovery_omission_suffix<S: EntrySource + ?Sized>(
    path: &S,
    suffix: &[Projected<'_>],
) -> bool {
    // The suffix is the kept part's tail: parsing its sources is cheap.
    let sources: Vec<std::borrow::Cow<'_, Value>> =
        suffix.iter().map(|e| path.value(e.pos)).collect();
    let intrinsically_visible =
        |n: usize| suffix[n].kind != "context_edit" && !entry_messages(&sources[n]).is_empty();
    let omitted = |n: usize| intrinsically_visible(n) && suffix[n].messages.is_empty();
    let id_of = |v: &Value| v.get("id").and_then(Value::as_str).map(str::to_string);
    let omitted_ids: Vec<Option<String>> = (0..suffix.len())
        .filter(|&n| omitted(n))
        .map(|n| id_of(&sources[n]))
        .collect();
    let has_external_replacement = (0..suffix.len()).any(|n| {
        suffix[n].kind == "context_edit"
            // A missing `replacement` is not `null` in Pi's strict comparison.
            && sources[n].get("replacement") != Some(&Value::Null)
            && !omitted_ids.contains(
                &sources[n].get("targetId").and_then(Value::as_str).map(str::to_string),
            )
    });
    if has_external_replacement {
        return false;
    }
    let has_omitted_assistant = (0..suffix.len()).any(|n| {
        suffix[n].kind == "message"
            && sources[n].get("message").and_then(role_of) == Some("assistant")
            && omitted(n)
    });
    has_omitted_assistant
        && (0..suffix.len())
            .all(|n| suffix[n].kind != "compaction" && (!intrinsically_visible(n) || omitted(n)))
}

/// A projected entry's contribution to the summary: nothing from the compaction
/// itself (its summary travels as `previousSummary`), and no system messages.
/// The messages are moved out, not copied.
fn summarizable_messages(is_compaction: bool, messages: Vec<Value>) -> impl Iterator<Item = Value> {
    messages
        .into_iter()
        .filter(move |m| !is_compaction && role_of(m) != Some("system"))
}

/// Pi's `prepareCompaction` over a root-first branch. `None` when there is
/// nothing to compact (see [`no_preparation_reason`] for Pi's wording).
pub fn prepare_compaction<S: EntrySource + ?Sized>(
    path: &S,
    settings: &CompactionSettings,
) -> Option<CompactionPreparation> {
    if !path.is_empty() && path.kind(path.len() - 1) == "compaction" {
        return None;
    }
    let projection = project(path);
    let tokens_before = estimate_projected_context_tokens(&projection, path).tokens;
    // Only the projected messages are held; sources are read from the path where a
    // rule needs them (the previous compaction, the kept tail's suffix check).
    let entries: Vec<Projected<'_>> = projection
        .entries
        .iter()
        .filter(|e| e.pos < path.len())
        .map(|e| Projected {
            pos: e.pos,
            kind: path.kind(e.pos),
            messages: &e.messages,
        })
        .collect();
    // The newest compaction is projected first; older ones inside its kept range
    // project to nothing.
    let previous = entries
        .iter()
        .position(|e| e.is_compaction() && !e.messages.is_empty());
    let previous_source = previous.map(|i| path.value(entries[i].pos));
    let previous_summary =
        previous_source
            .as_deref()
            .and_then(|source| match source.get("summary") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                other => Some(js::to_js_string(other)),
            });
    let boundary_start = previous.map_or(0, |i| i + 1);
    let boundary_end = entries.len();
    let cut = find_projected_cut_point(
        path,
        &entries,
        boundary_start,
        boundary_end,
        settings.keep_recent_tokens,
    );
    let first_kept = entries.get(cut.first_kept_entry_index)?;
    let first_kept_entry_id = path
        .id(first_kept.pos)
        .filter(|id| !id.is_empty())?
        .to_string();
    let history_end = match cut.turn_start_index {
        Some(turn_start) if cut.is_split_turn => turn_start,
        _ => cut.first_kept_entry_index,
    };
    let is_compaction: Vec<bool> = entries.iter().map(CutEntry::is_compaction).collect();
    drop(entries);
    // The summarized spans take their messages out of the projection.
    let mut owned: Vec<Vec<Value>> = projection
        .entries
        .into_iter()
        .filter(|e| e.pos < path.len())
        .map(|e| e.messages)
        .collect();
    let mut span = |from: usize, to: usize| -> Vec<Value> {
        let to = to.max(from).min(owned.len());
        let from = from.min(to);
        (from..to)
            .flat_map(|i| summarizable_messages(is_compaction[i], std::mem::take(&mut owned[i])))
            .collect()
    };
    let messages_to_summarize = span(boundary_start, history_end);
    let turn_prefix_messages = if cut.is_split_turn {
        span(history_end, cut.first_kept_entry_index)
    } else {
        Vec::new()
    };
    if messages_to_summarize.is_empty() && turn_prefix_messages.is_empty() {
        return None;
    }
    let mut file_ops = FileOps::default();
    if let Some(source) = &previous_source {
        file_ops.add_from_details(source);
    }
    for message in messages_to_summarize.iter().chain(&turn_prefix_messages) {
        file_ops.add_from_message(message);
    }
    Some(CompactionPreparation {
        first_kept_entry_id,
        messages_to_summarize,
        turn_prefix_messages,
        is_split_turn: cut.is_split_turn,
        tokens_before,
        previous_summary,
        file_ops,
        settings: *settings,
    })
}

/// Why [`prepare_compaction`] gave nothing, in Pi's words (what `/compact` reports).
pub fn no_preparation_reason<S: EntrySource + ?Sized>(path: &S) -> &'static str {
    if !path.is_empty() && path.kind(path.len() - 1) == "compaction" {
        REASON_ALREADY_COMPACTED
    } else {
        REASON_TOO_SMALL
    }
}

#[cfg(test)]
mod tests;
