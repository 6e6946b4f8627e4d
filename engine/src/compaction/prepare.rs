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
use super::serialize::{serialize_conversation, ConversationText};
use super::tokens::{estimate_tokens, ProjectedTokensAcc};
use super::CompactionSettings;
use crate::context::{
    convert_to_llm, entry_messages, project_each, project_each_where, EntrySource,
};
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
    /// The preparation as Pi hands it to `session_before_compact` handlers (its
    /// `CompactionPreparation`): `firstKeptEntryId`, `messagesToSummarize`,
    /// `turnPrefixMessages`, `isSplitTurn`, `tokensBefore`, `previousSummary` (left out
    /// when there is none), `fileOps` (`read`, `written`, `edited`, which the extension
    /// host turns into Sets) and `settings`.
    pub fn extension_view(&self) -> Value {
        let mut view = serde_json::json!({
            "firstKeptEntryId": self.first_kept_entry_id,
            "messagesToSummarize": self.messages_to_summarize,
            "turnPrefixMessages": self.turn_prefix_messages,
            "isSplitTurn": self.is_split_turn,
            "tokensBefore": self.tokens_before,
            "fileOps": self.file_ops,
            "settings": self.settings,
        });
        if let Some(previous) = &self.previous_summary {
            view["previousSummary"] = previous.clone().into();
        }
        view
    }

    pub fn file_lists(&self) -> FileLists {
        self.file_ops.file_lists()
    }

    /// What the summarizer reads for this preparation.
    pub fn input(&self) -> CompactionInput {
        let conversation = |messages: &[Value]| {
            (!messages.is_empty()).then(|| serialize_conversation(&convert_to_llm(messages)))
        };
        CompactionInput {
            first_kept_entry_id: self.first_kept_entry_id.clone(),
            history: conversation(&self.messages_to_summarize),
            turn_prefix: conversation(&self.turn_prefix_messages),
            is_split_turn: self.is_split_turn,
            tokens_before: self.tokens_before,
            previous_summary: self.previous_summary.clone(),
            file_lists: self.file_lists(),
        }
    }
}

/// What [`super::compact`] needs: the summarized spans already flattened to the text the
/// summarizer reads. Built from a [`CompactionPreparation`], or streamed from the path by
/// [`CompactionPlan::input`] so a huge span is never held as messages.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionInput {
    pub first_kept_entry_id: String,
    /// The summarized history as conversation text; `None` when it holds no message.
    pub history: Option<String>,
    /// The split turn's beginning as conversation text; `None` when it holds no message.
    pub turn_prefix: Option<String>,
    pub is_split_turn: bool,
    pub tokens_before: u64,
    pub previous_summary: Option<String>,
    pub file_lists: FileLists,
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

/// What the cut search needs of one entry: not its messages, only a few facts
/// about them, so a plan over a huge context holds a few words per entry.
#[derive(Debug, Clone, Copy)]
struct CutEntry {
    /// Position of the entry's source on the path (projected entries only).
    pos: usize,
    is_compaction: bool,
    /// The entry's `type` is `context_edit` / `message` (the recovery-suffix rule).
    is_context_edit: bool,
    is_message: bool,
    /// How many messages it contributes, and how many of them a summary takes
    /// (none from a compaction, no system messages).
    messages: usize,
    summarizable: usize,
    tokens: u64,
    /// One of its messages may start the kept part / begins a turn.
    has_cut_point: bool,
    has_turn_start: bool,
}

impl CutEntry {
    fn new(pos: usize, kind: &str, messages: &[Value]) -> CutEntry {
        let is_compaction = kind == "compaction";
        CutEntry {
            pos,
            is_compaction,
            is_context_edit: kind == "context_edit",
            is_message: kind == "message",
            messages: messages.len(),
            summarizable: if is_compaction {
                0
            } else {
                messages
                    .iter()
                    .filter(|m| role_of(m) != Some("system"))
                    .count()
            },
            tokens: messages.iter().map(estimate_tokens).sum(),
            has_cut_point: messages.iter().any(is_cut_point_message),
            has_turn_start: messages.iter().any(is_turn_start_message),
        }
    }

    fn is_turn_start(&self) -> bool {
        !self.is_compaction && self.has_turn_start
    }
}

fn find_turn_start(entries: &[CutEntry], from: usize, start: usize) -> Option<usize> {
    (start..=from).rev().find(|&i| entries[i].is_turn_start())
}

/// The search shared by both cut finders, up to (not including) the final
/// metadata scan: the cut candidates and the first chosen cut, plus whether the
/// kept tokens reached the budget.
fn initial_cut(
    entries: &[CutEntry],
    start: usize,
    end: usize,
    keep_recent_tokens: u64,
) -> Option<(usize, bool)> {
    let cut_points: Vec<usize> = (start..end)
        .filter(|&i| !entries[i].is_compaction && entries[i].has_cut_point)
        .collect();
    let (&first, &last) = (cut_points.first()?, cut_points.last()?);
    let mut accumulated = 0u64;
    for i in (start..end).rev() {
        let tokens = entries[i].tokens;
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
fn include_metadata(entries: &[CutEntry], mut cut: usize, start: usize) -> usize {
    while cut > start {
        let previous = &entries[cut - 1];
        if previous.is_compaction || previous.messages > 0 {
            break;
        }
        cut -= 1;
    }
    cut
}

fn finish_cut(entries: &[CutEntry], cut: usize, start: usize) -> CutPoint {
    let turn_start = if entries[cut].is_turn_start() {
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
    let no_cut = CutPoint {
        first_kept_entry_index: start,
        turn_start_index: None,
        is_split_turn: false,
    };
    if start >= end {
        return no_cut;
    }
    let entries: Vec<CutEntry> = path
        .iter()
        .enumerate()
        .map(|(pos, entry)| CutEntry::new(pos, kind_of(entry), &entry_messages(entry)))
        .collect();
    let Some((cut, _)) = initial_cut(&entries, start, end, keep_recent_tokens) else {
        return no_cut;
    };
    let cut = include_metadata(&entries, cut, start);
    finish_cut(&entries, cut, start)
}

/// Pi's `findProjectedCutPoint`.
fn find_projected_cut_point<S: EntrySource + ?Sized>(
    path: &S,
    entries: &[CutEntry],
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
fn is_recovery_omission_suffix<S: EntrySource + ?Sized>(path: &S, suffix: &[CutEntry]) -> bool {
    // The suffix is the kept part's tail: parsing its sources is cheap.
    let sources: Vec<std::borrow::Cow<'_, Value>> =
        suffix.iter().map(|e| path.value(e.pos)).collect();
    let intrinsically_visible =
        |n: usize| !suffix[n].is_context_edit && !entry_messages(&sources[n]).is_empty();
    let omitted = |n: usize| intrinsically_visible(n) && suffix[n].messages == 0;
    let id_of = |v: &Value| v.get("id").and_then(Value::as_str).map(str::to_string);
    let omitted_ids: Vec<Option<String>> = (0..suffix.len())
        .filter(|&n| omitted(n))
        .map(|n| id_of(&sources[n]))
        .collect();
    let has_external_replacement = (0..suffix.len()).any(|n| {
        suffix[n].is_context_edit
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
        suffix[n].is_message
            && sources[n].get("message").and_then(role_of) == Some("assistant")
            && omitted(n)
    });
    has_omitted_assistant
        && (0..suffix.len())
            .all(|n| !suffix[n].is_compaction && (!intrinsically_visible(n) || omitted(n)))
}

/// What a compaction of a branch summarizes, decided over the projected context
/// without holding its messages (Pi's `prepareCompaction` up to collecting them):
/// a few words per context entry while planning, nothing after. The messages are
/// read again from the path when the preparation is built
/// ([`CompactionPlan::preparation`]) or written out ([`CompactionPlan::write_json`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionPlan {
    pub first_kept_entry_id: String,
    pub is_split_turn: bool,
    pub tokens_before: u64,
    pub previous_summary: Option<String>,
    /// Path position of the compaction this one builds on (its file lists carry over).
    previous_pos: Option<usize>,
    /// Context entry indices summarized into the history / the turn prefix.
    summarize: std::ops::Range<usize>,
    turn_prefix: std::ops::Range<usize>,
    pub settings: CompactionSettings,
}

/// Pi's `prepareCompaction` over a root-first branch. `None` when there is
/// nothing to compact (see [`no_preparation_reason`] for Pi's wording).
pub fn prepare_compaction<S: EntrySource + ?Sized>(
    path: &S,
    settings: &CompactionSettings,
) -> Option<CompactionPreparation> {
    Some(plan_compaction(path, settings)?.preparation(path))
}

/// The plan of [`prepare_compaction`], its messages left on the path. One pass
/// over the context, one entry's values at a time.
pub fn plan_compaction<S: EntrySource + ?Sized>(
    path: &S,
    settings: &CompactionSettings,
) -> Option<CompactionPlan> {
    if !path.is_empty() && path.kind(path.len() - 1) == "compaction" {
        return None;
    }
    let mut tokens = ProjectedTokensAcc::default();
    let mut entries: Vec<CutEntry> = Vec::new();
    project_each(path, |pos, messages| {
        tokens.push(pos, &messages);
        entries.push(CutEntry::new(pos, path.kind(pos), &messages));
    });
    let tokens_before = tokens.finish(path).tokens;
    // The newest compaction is projected first; older ones inside its kept range
    // project to nothing.
    let previous = entries
        .iter()
        .position(|e| e.is_compaction && e.messages > 0);
    let previous_pos = previous.map(|i| entries[i].pos);
    let previous_summary = previous_pos.and_then(|pos| match path.value(pos).get("summary") {
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
    let span = |from: usize, to: usize| {
        let to = to.max(from).min(entries.len());
        from.min(to)..to
    };
    let summarize = span(boundary_start, history_end);
    let turn_prefix = if cut.is_split_turn {
        span(history_end, cut.first_kept_entry_index)
    } else {
        0..0
    };
    let summarizable = |r: &std::ops::Range<usize>| -> usize {
        entries[r.clone()].iter().map(|e| e.summarizable).sum()
    };
    if summarizable(&summarize) == 0 && summarizable(&turn_prefix) == 0 {
        return None;
    }
    Some(CompactionPlan {
        first_kept_entry_id,
        is_split_turn: cut.is_split_turn,
        tokens_before,
        previous_summary,
        previous_pos,
        summarize,
        turn_prefix,
        settings: *settings,
    })
}

impl CompactionPlan {
    /// The summarized messages of the context entries in `span`, in order.
    fn each_message<S: EntrySource + ?Sized>(
        &self,
        path: &S,
        span: &std::ops::Range<usize>,
        mut each: impl FnMut(Value),
    ) {
        if span.is_empty() {
            return;
        }
        project_each_where(
            path,
            |n| span.contains(&n),
            |pos, messages| {
                summarizable_messages(path.kind(pos) == "compaction", messages).for_each(&mut each)
            },
        );
    }

    /// The file operations: the previous summary's lists, then every summarized call.
    fn file_ops<S: EntrySource + ?Sized>(&self, path: &S) -> FileOps {
        let mut file_ops = FileOps::default();
        if let Some(pos) = self.previous_pos {
            file_ops.add_from_details(&path.value(pos));
        }
        for span in [&self.summarize, &self.turn_prefix] {
            self.each_message(path, span, |m| file_ops.add_from_message(&m));
        }
        file_ops
    }

    /// The summarizer's input read from `path` (the branch planned on), equal to
    /// `self.preparation(path).input()`: each summarized message is noted for the file
    /// lists and appended to its span's text, then dropped.
    pub fn input<S: EntrySource + ?Sized>(&self, path: &S) -> CompactionInput {
        let mut file_ops = FileOps::default();
        if let Some(pos) = self.previous_pos {
            file_ops.add_from_details(&path.value(pos));
        }
        let mut conversation = |span: &std::ops::Range<usize>| {
            let mut text = ConversationText::default();
            let mut any = false;
            self.each_message(path, span, |message| {
                any = true;
                file_ops.add_from_message(&message);
                convert_to_llm(std::iter::once(&message))
                    .iter()
                    .for_each(|m| text.push(m));
            });
            any.then(|| text.finish())
        };
        let history = conversation(&self.summarize);
        let turn_prefix = conversation(&self.turn_prefix);
        CompactionInput {
            first_kept_entry_id: self.first_kept_entry_id.clone(),
            history,
            turn_prefix,
            is_split_turn: self.is_split_turn,
            tokens_before: self.tokens_before,
            previous_summary: self.previous_summary.clone(),
            file_lists: file_ops.file_lists(),
        }
    }

    /// The whole preparation, its messages read from `path` (the branch planned on).
    pub fn preparation<S: EntrySource + ?Sized>(&self, path: &S) -> CompactionPreparation {
        let mut messages_to_summarize = Vec::new();
        self.each_message(path, &self.summarize, |m| messages_to_summarize.push(m));
        let mut turn_prefix_messages = Vec::new();
        self.each_message(path, &self.turn_prefix, |m| turn_prefix_messages.push(m));
        let mut file_ops = FileOps::default();
        if let Some(pos) = self.previous_pos {
            file_ops.add_from_details(&path.value(pos));
        }
        for message in messages_to_summarize.iter().chain(&turn_prefix_messages) {
            file_ops.add_from_message(message);
        }
        CompactionPreparation {
            first_kept_entry_id: self.first_kept_entry_id.clone(),
            messages_to_summarize,
            turn_prefix_messages,
            is_split_turn: self.is_split_turn,
            tokens_before: self.tokens_before,
            previous_summary: self.previous_summary.clone(),
            file_ops,
            settings: self.settings,
        }
    }

    /// Writes the preparation as its `Serialize` does, the messages one at a time
    /// as they are read from `path`: a plan over a huge context holds one entry's
    /// values at a time. Reads the summarized entries three times (file operations
    /// and roles, then each message list).
    pub fn write_json<S: EntrySource + ?Sized>(
        &self,
        path: &S,
        out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        let file_ops = self.file_ops(path);
        let roles = |span: &std::ops::Range<usize>| {
            let mut roles = Vec::new();
            self.each_message(path, span, |m| {
                roles.push(m.get("role").cloned().unwrap_or(Value::Null))
            });
            roles
        };
        let field = |out: &mut dyn std::io::Write, first: bool, key: &str| {
            out.write_all(if first { b"{" } else { b"," })?;
            serde_json::to_writer(&mut *out, key)?;
            out.write_all(b":")
        };
        field(out, true, "firstKeptEntryId")?;
        serde_json::to_writer(&mut *out, &self.first_kept_entry_id)?;
        field(out, false, "isSplitTurn")?;
        serde_json::to_writer(&mut *out, &self.is_split_turn)?;
        field(out, false, "tokensBefore")?;
        serde_json::to_writer(&mut *out, &self.tokens_before)?;
        field(out, false, "previousSummary")?;
        serde_json::to_writer(&mut *out, &self.previous_summary)?;
        field(out, false, "fileOps")?;
        serde_json::to_writer(&mut *out, &file_ops)?;
        field(out, false, "fileLists")?;
        serde_json::to_writer(&mut *out, &file_ops.file_lists())?;
        field(out, false, "messagesToSummarizeRoles")?;
        serde_json::to_writer(&mut *out, &roles(&self.summarize))?;
        field(out, false, "turnPrefixMessagesRoles")?;
        serde_json::to_writer(&mut *out, &roles(&self.turn_prefix))?;
        for (key, span) in [
            ("messagesToSummarize", &self.summarize),
            ("turnPrefixMessages", &self.turn_prefix),
        ] {
            field(out, false, key)?;
            out.write_all(b"[")?;
            let mut result = Ok(());
            let mut first = true;
            self.each_message(path, span, |m| {
                if result.is_ok() {
                    let sep: &[u8] = if first { b"" } else { b"," };
                    first = false;
                    result = out
                        .write_all(sep)
                        .and_then(|()| serde_json::to_writer(&mut *out, &m).map_err(Into::into));
                }
            });
            result?;
            out.write_all(b"]")?;
        }
        out.write_all(b"}")
    }
}

/// A projected entry's contribution to the summary: nothing from the compaction
/// itself (its summary travels as `previousSummary`), and no system messages.
/// The messages are moved out, not copied.
fn summarizable_messages(is_compaction: bool, messages: Vec<Value>) -> impl Iterator<Item = Value> {
    messages
        .into_iter()
        .filter(move |m| !is_compaction && role_of(m) != Some("system"))
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
