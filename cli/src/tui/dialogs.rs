//! Dialog states: the model picker, scoped models, settings, the /resume picker, the /fork
//! message picker, the three-way branch-summary prompt, yes/no confirmations and the hotkeys
//! list. Plain data; keys are handled in
//! `app.rs`, drawing in `render.rs`.

use super::driver::ModelInfo;
use super::tree::TreeNav;

/// Case-insensitive fuzzy match: every query character in order. Lower scores are better
/// (consecutive runs and early matches win); `None` when it does not match.
pub fn fuzzy_score(query: &str, candidate: &str) -> Option<i64> {
    if query.is_empty() {
        return Some(0);
    }
    let cand: Vec<char> = candidate.to_lowercase().chars().collect();
    let mut score = 0i64;
    let mut pos = 0usize;
    let mut last: Option<usize> = None;
    for q in query.to_lowercase().chars().filter(|c| !c.is_whitespace()) {
        let found = cand[pos..].iter().position(|&c| c == q)? + pos;
        score += match last {
            Some(l) if found == l + 1 => 0,
            _ => 1 + found as i64 / 4,
        };
        last = Some(found);
        pos = found + 1;
    }
    // Shorter candidates win ties: `main.rs` before `src/domain/main_test.rs`.
    Some(score * 1000 + cand.len() as i64)
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelPicker {
    pub models: Vec<ModelInfo>,
    pub query: String,
    pub selected: usize,
    pub current: Option<String>,
    /// Pi's line under the list about the catalog refresh the picker started.
    pub refresh_status: Option<RefreshStatus>,
}

/// Where the model picker's catalog refresh is, in Pi's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefreshStatus {
    Running,
    Refreshed,
    /// Some catalog could not be refreshed; the picker lists the models it had.
    Failed(String),
}

impl RefreshStatus {
    /// The status once `refresh` ended: refreshed, or which catalogs kept their models.
    pub fn after(refresh: &pi_agent::extensions::ModelRefresh) -> RefreshStatus {
        let failed = &refresh.failed;
        if refresh.timed_out {
            RefreshStatus::Failed("Model refresh timed out; showing cached models.".into())
        } else if let [only] = failed.as_slice() {
            RefreshStatus::Failed(format!("Could not refresh {only}; showing cached models."))
        } else if !failed.is_empty() {
            RefreshStatus::Failed(format!(
                "Could not refresh {} model catalogs ({}); showing cached models.",
                failed.len(),
                failed.join(", ")
            ))
        } else {
            RefreshStatus::Refreshed
        }
    }

    pub fn text(&self) -> &str {
        match self {
            RefreshStatus::Running => "Refreshing model catalogs…",
            RefreshStatus::Refreshed => "Model catalogs refreshed.",
            RefreshStatus::Failed(text) => text,
        }
    }
}

impl ModelPicker {
    pub fn filtered(&self) -> Vec<&ModelInfo> {
        let mut scored: Vec<(i64, usize, &ModelInfo)> = self
            .models
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                fuzzy_score(&self.query, &format!("{} {}", m.provider, m.id)).map(|s| (s, i, m))
            })
            .collect();
        if !self.query.is_empty() {
            scored.sort_by_key(|&(s, i, _)| (s, i));
        }
        scored.into_iter().map(|(_, _, m)| m).collect()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ScopedModels {
    pub models: Vec<ModelInfo>,
    pub enabled: Vec<bool>,
    pub selected: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    /// settings.json key.
    pub key: &'static str,
    pub label: &'static str,
    pub options: Vec<String>,
    pub value: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SettingsDialog {
    pub items: Vec<Setting>,
    pub selected: usize,
}

/// One session in the /resume list.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    /// Store session id (what delete acts on).
    pub id: String,
    /// Store location (a file path for JSONL), what resume/delete act on.
    pub location: String,
    pub cwd: String,
    pub name: Option<String>,
    pub modified_ms: i64,
    pub message_count: u64,
    pub first_message: String,
}

impl SessionRow {
    pub fn from_summary(s: &pi_storage::summary::SessionSummary) -> SessionRow {
        SessionRow {
            id: s.id.as_str().to_string(),
            location: s.location.clone(),
            cwd: s.cwd.clone(),
            name: s.name.clone(),
            modified_ms: s.modified_ms,
            message_count: s.message_count,
            first_message: s.first_message.clone().unwrap_or_default(),
        }
    }

    fn title(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.first_message)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeSort {
    Recent,
    Relevance,
}

/// Which sessions /resume lists (tab switches, as in Pi).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeScope {
    /// Sessions started in the current folder (the default).
    Current,
    /// Every session of the store.
    All,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ResumeMode {
    Browse,
    Rename(String),
    ConfirmDelete,
}

/// One search term of the /resume query: a word, or a `"quoted phrase"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchTerm {
    pub phrase: bool,
    /// Lower-cased; a phrase with its inner whitespace folded to single spaces.
    pub value: String,
}

impl SearchTerm {
    /// The history index query for this term's message text: a phrase as a phrase, a word
    /// as a prefix (Pi matches words anywhere in the text; the index matches word starts).
    pub fn index_query(&self) -> String {
        if self.phrase {
            format!("\"{}\"", self.value)
        } else {
            format!("{}*", self.value)
        }
    }
}

/// Pi's query syntax: whitespace-separated words, `"phrases"` matched as written; with an
/// unbalanced quote every whitespace-separated piece is a word.
pub fn parse_terms(query: &str) -> Vec<SearchTerm> {
    let fold = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    if query.matches('"').count() % 2 == 1 {
        return query
            .split_whitespace()
            .map(|w| SearchTerm {
                phrase: false,
                value: w.to_lowercase(),
            })
            .collect();
    }
    let mut out = Vec::new();
    for (i, piece) in query.split('"').enumerate() {
        if i % 2 == 1 {
            let value = fold(piece);
            if !value.is_empty() {
                out.push(SearchTerm {
                    phrase: true,
                    value,
                });
            }
        } else {
            out.extend(piece.split_whitespace().map(|w| SearchTerm {
                phrase: false,
                value: w.to_lowercase(),
            }));
        }
    }
    out
}

/// Sessions whose message text contains a term, per index query (see
/// [`SearchTerm::index_query`]), filled in by the loop from the history index.
pub type TextHits = std::collections::HashMap<String, std::collections::HashSet<String>>;

#[derive(Debug, Clone, PartialEq)]
pub struct ResumePicker {
    pub sessions: Vec<SessionRow>,
    pub query: String,
    pub selected: usize,
    pub show_path: bool,
    pub sort: ResumeSort,
    pub scope: ResumeScope,
    /// The current folder, resolved (what [`ResumeScope::Current`] keeps).
    pub cwd: String,
    pub named_only: bool,
    pub mode: ResumeMode,
    /// Milliseconds "now", for relative ages; fixed in tests.
    pub now_ms: i64,
    /// The session being worked in (its id), which cannot be deleted.
    pub current: Option<String>,
    /// The last action's error, shown until the next key.
    pub error: Option<String>,
    /// Message-text matches from the history index, by term.
    pub text_hits: TextHits,
}

/// Pi's match tiers, best first; a tier outweighs any fuzzy score.
const TIER_NAME: i64 = 0;
const TIER_TEXT: i64 = 1;
const TIER_FUZZY: i64 = 2;
const TIER_WEIGHT: i64 = 1_000_000_000;

impl ResumePicker {
    pub fn new(sessions: Vec<SessionRow>, now_ms: i64) -> ResumePicker {
        ResumePicker {
            sessions,
            query: String::new(),
            selected: 0,
            show_path: false,
            sort: ResumeSort::Recent,
            scope: ResumeScope::Current,
            cwd: String::new(),
            named_only: false,
            mode: ResumeMode::Browse,
            now_ms,
            current: None,
            error: None,
            text_hits: TextHits::new(),
        }
    }

    /// The index queries the current search needs that the loop has not answered yet.
    pub fn pending_text_queries(&self) -> Vec<String> {
        parse_terms(&self.query)
            .iter()
            .map(SearchTerm::index_query)
            .filter(|q| !self.text_hits.contains_key(q))
            .collect()
    }

    /// How well `row` matches one term (lower is better), `None` when it does not: the name
    /// contains it, else its id, message text (history index, or the first message when the
    /// index had no answer) or folder does, else (words only) its letters appear in order in
    /// the name or folder.
    fn term_score(&self, row: &SessionRow, term: &SearchTerm) -> Option<i64> {
        let norm = |s: &str| {
            if term.phrase {
                s.split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
                    .to_lowercase()
            } else {
                s.to_lowercase()
            }
        };
        let name = norm(row.name.as_deref().unwrap_or(""));
        if name.contains(&term.value) {
            let fuzzy = fuzzy_score(&term.value, &name).unwrap_or(0);
            return Some(TIER_NAME * TIER_WEIGHT + fuzzy);
        }
        let in_messages = match self.text_hits.get(&term.index_query()) {
            Some(hits) => hits.contains(&row.location),
            None => norm(&row.first_message).contains(&term.value),
        };
        if row.id.to_lowercase().contains(&term.value)
            || in_messages
            || norm(&row.cwd).contains(&term.value)
        {
            return Some(TIER_TEXT * TIER_WEIGHT);
        }
        if term.phrase {
            return None;
        }
        [row.name.as_deref().unwrap_or(""), row.cwd.as_str()]
            .iter()
            .filter_map(|field| fuzzy_score(&term.value, field))
            .min()
            .map(|s| TIER_FUZZY * TIER_WEIGHT + s)
    }

    fn in_scope(&self, row: &SessionRow) -> bool {
        match self.scope {
            ResumeScope::All => true,
            ResumeScope::Current => pi_storage::paths::resolve_cwd(&row.cwd) == self.cwd,
        }
    }

    pub fn filtered(&self) -> Vec<&SessionRow> {
        let terms = parse_terms(&self.query);
        let mut rows: Vec<(i64, &SessionRow)> = self
            .sessions
            .iter()
            .filter(|s| self.in_scope(s))
            .filter(|s| !self.named_only || s.name.as_deref().is_some_and(|n| !n.trim().is_empty()))
            .filter_map(|s| {
                terms
                    .iter()
                    .map(|t| self.term_score(s, t))
                    .sum::<Option<i64>>()
                    .map(|sc| (sc, s))
            })
            .collect();
        match self.sort {
            ResumeSort::Recent => rows.sort_by_key(|(_, s)| std::cmp::Reverse(s.modified_ms)),
            ResumeSort::Relevance => {
                rows.sort_by_key(|(sc, s)| (*sc, std::cmp::Reverse(s.modified_ms)))
            }
        }
        rows.into_iter().map(|(_, s)| s).collect()
    }

    pub fn selected_row(&self) -> Option<&SessionRow> {
        self.filtered().get(self.selected).copied()
    }

    pub fn clamp(&mut self) {
        let n = self.filtered().len();
        self.selected = self.selected.min(n.saturating_sub(1));
    }

    pub fn title_of(row: &SessionRow) -> &str {
        row.title()
    }
}

/// "Summarize the branch you are leaving?"
#[derive(Debug, Clone, PartialEq)]
pub struct BranchPrompt {
    /// The leaf to move to (None: before the first entry).
    pub target: Option<String>,
    /// Text for the editor afterwards (a re-edited user message).
    pub editor_text: Option<String>,
    pub selected: usize,
    /// The custom-focus input, once the third option is chosen.
    pub focus: Option<String>,
    /// The navigator to go back to on escape.
    pub nav: Box<TreeNav>,
}

pub const BRANCH_OPTIONS: [&str; 3] = ["No summary", "Summarize", "Summarize with custom prompt"];

/// One user message /fork can start from.
#[derive(Debug, Clone, PartialEq)]
pub struct ForkRow {
    /// The message's entry id.
    pub id: String,
    pub text: String,
}

/// /fork: pick a user message; the new session holds everything before it.
#[derive(Debug, Clone, PartialEq)]
pub struct ForkPicker {
    /// Every user message with text, in file order (Pi's `getUserMessagesForForking`).
    pub rows: Vec<ForkRow>,
    pub selected: usize,
}

impl ForkPicker {
    /// Starts on the last message, as Pi does.
    pub fn new(rows: Vec<ForkRow>) -> ForkPicker {
        let selected = rows.len().saturating_sub(1);
        ForkPicker { rows, selected }
    }
}

/// A question with a few answers (Pi's `ExtensionSelectorComponent`): yes/no confirmations,
/// the missing-cwd prompt of /import and /resume, and the start-up trust prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirm {
    pub title: String,
    /// Lines under the title (may be empty).
    pub message: String,
    /// The answers, each with what it does; `None` cancels.
    pub options: Vec<(String, Option<super::app::Effect>)>,
    /// Shown when the answer cancels (an option without an effect, or escape).
    pub cancelled: String,
    pub selected: usize,
}

/// What a key did to a [`Confirm`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfirmOutcome {
    /// Still open.
    Open,
    /// The option at this index was chosen.
    Chosen(usize),
    /// Escape (or ctrl+c): no answer.
    Cancelled,
}

impl Confirm {
    /// Yes / No, where yes carries out `yes`.
    pub fn yes_no(
        title: impl Into<String>,
        message: impl Into<String>,
        yes: super::app::Effect,
        cancelled: impl Into<String>,
    ) -> Confirm {
        Confirm {
            title: title.into(),
            message: message.into(),
            options: vec![("Yes".into(), Some(yes)), ("No".into(), None)],
            cancelled: cancelled.into(),
            selected: 0,
        }
    }

    /// Handles one key: ↑/↓ move (wrapping), enter chooses, escape cancels.
    pub fn key(
        &mut self,
        keys: &super::keys::Keymap,
        k: &crossterm::event::KeyEvent,
    ) -> ConfirmOutcome {
        let len = self.options.len();
        if keys.matches("tui.select.confirm", k) {
            if len == 0 {
                return ConfirmOutcome::Cancelled;
            }
            ConfirmOutcome::Chosen(self.selected.min(len - 1))
        } else if keys.matches("tui.select.cancel", k) {
            ConfirmOutcome::Cancelled
        } else {
            if len > 0 && keys.matches("tui.select.up", k) {
                self.selected = (self.selected + len - 1) % len;
            } else if len > 0 && keys.matches("tui.select.down", k) {
                self.selected = (self.selected + 1) % len;
            }
            ConfirmOutcome::Open
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Dialog {
    ModelPicker(ModelPicker),
    ScopedModels(ScopedModels),
    Settings(SettingsDialog),
    Tree(Box<TreeNav>),
    Resume(ResumePicker),
    BranchPrompt(BranchPrompt),
    Fork(ForkPicker),
    Confirm(Confirm),
    /// A dialog an extension opened (`ctx.ui.confirm`, `select`, `input`, `editor`).
    Extension(Box<super::ext_ui::ExtDialog>),
    /// /hotkeys, scrolled down by this many rows.
    Hotkeys(usize),
    /// `/login`'s provider list or API-key questions.
    Login(Box<super::api_key_login::LoginDialog>),
}

/// The hotkeys list for /hotkeys: (action id, description).
pub const HOTKEYS: &[(&str, &str)] = &[
    ("tui.input.submit", "send (steers while working)"),
    ("app.message.followUp", "queue a follow-up"),
    ("tui.input.newLine", "new line"),
    ("app.interrupt", "abort / restore queued messages"),
    ("app.message.dequeue", "pull queued messages back"),
    ("app.clear", "clear editor (twice: quit)"),
    ("app.exit", "quit (empty editor)"),
    ("app.suspend", "suspend"),
    ("app.model.select", "pick a model"),
    ("app.model.cycleForward", "next scoped model"),
    ("app.model.cycleBackward", "previous scoped model"),
    ("app.thinking.cycle", "cycle thinking level"),
    ("app.thinking.toggle", "show/hide thinking blocks"),
    ("app.tools.expand", "expand/collapse tool output"),
    ("app.editor.external", "external editor"),
    ("tui.input.tab", "complete paths and commands"),
    ("app.message.copy", "copy the last answer"),
    ("tui.editor.cursorLineStart", "start of line"),
    ("tui.editor.cursorLineEnd", "end of line"),
    ("tui.editor.deleteWordBackward", "delete word backward"),
    ("tui.editor.deleteToLineStart", "delete to line start"),
    ("tui.editor.deleteToLineEnd", "delete to line end"),
    ("tui.altScreen.pageUp", "scroll the transcript up a page"),
    (
        "tui.altScreen.pageDown",
        "scroll the transcript down a page",
    ),
    ("tui.altScreen.top", "scroll to the beginning"),
    ("tui.altScreen.bottom", "scroll to the end and follow"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuzzy_prefers_tight_short_matches() {
        assert!(fuzzy_score("mrs", "main.rs").is_some());
        assert!(fuzzy_score("xyz", "main.rs").is_none());
        let a = fuzzy_score("main", "src/main.rs").unwrap_or(i64::MAX);
        let b = fuzzy_score("main", "src/m_a_i_n.rs").unwrap_or(i64::MAX);
        assert!(a < b);
    }
}
