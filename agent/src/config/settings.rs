//! `settings.json`: the global file in the agent dir and the project file in `<cwd>/.pi/`,
//! deep-merged with the project winning (Pi's `SettingsManager`).
//!
//! The merged settings stay a JSON object so keys this crate does not know survive; typed
//! getters apply Pi's defaults and validation. Writes change one key in one file: the file is
//! read again, the key set (nested keys merged into the object on disk), and the whole file
//! replaced atomically, so edits made meanwhile by another Pi process or by hand survive.

use std::path::Path;
use std::path::PathBuf;

use serde_json::Map;
use serde_json::Value;

use super::error::parse_json;
use super::error::read_optional;
use super::error::write_atomic;
use super::error::ConfigError;
use super::error::ConfigResult;
use super::paths::home;
use super::paths::normalize_lexically;
use super::paths::project_config_dir;
use pi_engine::compaction::CompactionSettingsFile;
use pi_engine::compaction::InvalidSetting;

pub use pi_engine::compaction::BranchSummarySettings;
pub use pi_engine::compaction::CompactionSettings;
pub use pi_engine::compaction::RetrySettings;

/// Which settings file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `<agent dir>/settings.json`.
    Global,
    /// `<cwd>/.pi/settings.json`.
    Project,
}

/// `defaultProjectTrust`: what to do with an unknown project that has project-local files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DefaultProjectTrust {
    /// Ask in interactive mode; elsewhere treat as untrusted.
    #[default]
    Ask,
    /// Trust without asking.
    Always,
    /// Never trust.
    Never,
}

/// Global and project settings and their merge.
#[derive(Debug, Clone)]
pub struct Settings {
    global_path: Option<PathBuf>,
    project_path: Option<PathBuf>,
    global: Map<String, Value>,
    project: Map<String, Value>,
    merged: Map<String, Value>,
    overrides: Map<String, Value>,
    project_trusted: bool,
    global_broken: bool,
    project_broken: bool,
    // Shared so `Settings` stays `Clone` (io errors are not).
    errors: std::sync::Arc<Vec<ConfigError>>,
}

impl Settings {
    /// Loads both files. The project file is read only when `project_trusted`. A missing file
    /// is empty; a malformed one is treated as empty, recorded in [`Settings::errors`] (with
    /// line and column) and never written back, so a typo is not "fixed" by data loss.
    pub fn load(agent_dir: &Path, cwd: &Path, project_trusted: bool) -> Settings {
        let global_path = agent_dir.join("settings.json");
        let project_path = project_config_dir(cwd).join("settings.json");
        let mut errors = Vec::new();
        let (global, global_broken) = load_file(&global_path, &mut errors);
        let (project, project_broken) = if project_trusted {
            load_file(&project_path, &mut errors)
        } else {
            (Map::new(), false)
        };
        let mut settings = Settings {
            global_path: Some(global_path),
            project_path: Some(project_path),
            global,
            project,
            merged: Map::new(),
            overrides: Map::new(),
            project_trusted,
            global_broken,
            project_broken,
            errors: std::sync::Arc::new(errors),
        };
        settings.remerge();
        settings
    }

    /// Loads only the global file (for decisions made before trust is known, such as
    /// `defaultProjectTrust`).
    pub fn load_global(agent_dir: &Path) -> Settings {
        let mut settings = Settings::load(agent_dir, Path::new("/nonexistent"), false);
        settings.project_path = None;
        settings
    }

    /// Settings held in memory only (tests, SDK use); writes change memory only.
    pub fn in_memory(global: Value, project: Value) -> Settings {
        let to_map = |v: Value| match v {
            Value::Object(map) => migrate(map),
            _ => Map::new(),
        };
        let mut settings = Settings {
            global_path: None,
            project_path: None,
            global: to_map(global),
            project: to_map(project),
            merged: Map::new(),
            overrides: Map::new(),
            project_trusted: true,
            global_broken: false,
            project_broken: false,
            errors: Default::default(),
        };
        settings.remerge();
        settings
    }

    /// Problems met while loading (malformed JSON, unreadable files).
    pub fn errors(&self) -> &[ConfigError] {
        &self.errors
    }

    /// Whether project settings were loaded.
    pub fn is_project_trusted(&self) -> bool {
        self.project_trusted
    }

    /// The merged settings: global, then project, then [`Settings::apply_overrides`].
    pub fn merged(&self) -> &Map<String, Value> {
        &self.merged
    }

    /// The global file's settings as loaded.
    pub fn global(&self) -> &Map<String, Value> {
        &self.global
    }

    /// The project file's settings as loaded (empty when untrusted).
    pub fn project(&self) -> &Map<String, Value> {
        &self.project
    }

    /// A merged value by dotted path (`"compaction.enabled"`).
    pub fn get(&self, dotted: &str) -> Option<&Value> {
        let mut parts = dotted.split('.');
        let mut value = self.merged.get(parts.next()?)?;
        for part in parts {
            value = value.as_object()?.get(part)?;
        }
        Some(value)
    }

    /// Layers `overrides` over the merged settings for this run only (CLI flags such as
    /// `--theme`); they are never saved.
    pub fn apply_overrides(&mut self, overrides: Value) {
        if let Value::Object(map) = overrides {
            self.overrides = deep_merge(&self.overrides, &map);
            self.remerge();
        }
    }

    /// Sets (or with `None` removes) the key at `key_path` in the global file and saves it.
    pub fn set_global(&mut self, key_path: &[&str], value: Option<Value>) -> ConfigResult<()> {
        self.set(Scope::Global, key_path, value)
    }

    /// Like [`Settings::set_global`] for the project file; refused when the project is not
    /// trusted.
    pub fn set_project(&mut self, key_path: &[&str], value: Option<Value>) -> ConfigResult<()> {
        self.set(Scope::Project, key_path, value)
    }

    /// Sets one key in one scope, in memory and on disk. Only that key changes in the file:
    /// the file is re-read first, so other keys written meanwhile are kept.
    pub fn set(
        &mut self,
        scope: Scope,
        key_path: &[&str],
        value: Option<Value>,
    ) -> ConfigResult<()> {
        if key_path.is_empty() {
            return Ok(());
        }
        let (path, broken) = match scope {
            Scope::Global => (self.global_path.clone(), self.global_broken),
            Scope::Project => {
                if !self.project_trusted {
                    return Err(ConfigError::Untrusted {
                        path: self.project_path.clone().unwrap_or_default(),
                    });
                }
                (self.project_path.clone(), self.project_broken)
            }
        };
        let memory = match scope {
            Scope::Global => &mut self.global,
            Scope::Project => &mut self.project,
        };
        set_in(memory, key_path, value.clone());
        self.remerge();
        let Some(path) = path else { return Ok(()) };
        if broken {
            return Err(ConfigError::Invalid {
                path,
                message: "the file failed to load, so it is not overwritten; fix it first".into(),
            });
        }
        let mut on_disk = match read_optional(&path)? {
            Some(text) if !text.trim().is_empty() => match parse_json(&text, &path)? {
                Value::Object(map) => migrate(map),
                _ => {
                    return Err(ConfigError::Invalid {
                        path,
                        message: "expected a JSON object".into(),
                    })
                }
            },
            _ => Map::new(),
        };
        set_in(&mut on_disk, key_path, value);
        // Pi writes `JSON.stringify(settings, null, 2)`: two-space indent, no final newline.
        let text = serde_json::to_string_pretty(&Value::Object(on_disk)).unwrap_or_default();
        write_atomic(&path, text.as_bytes(), None)
    }

    fn remerge(&mut self) {
        let merged = deep_merge_settings(&self.global, &self.project);
        self.merged = deep_merge_settings(&merged, &self.overrides);
    }

    fn str(&self, key: &str) -> Option<&str> {
        self.merged.get(key).and_then(Value::as_str)
    }

    fn bool_at(&self, dotted: &str) -> Option<bool> {
        self.get(dotted).and_then(Value::as_bool)
    }

    fn num_at(&self, dotted: &str) -> Option<f64> {
        self.get(dotted).and_then(Value::as_f64)
    }

    /// `compaction`, with per-model overrides for `provider/id`. An invalid token count is an
    /// error with Pi's message, as Pi refuses to compact with it.
    pub fn compaction(
        &self,
        model: Option<(&str, &str)>,
    ) -> Result<CompactionSettings, InvalidSetting> {
        let file: CompactionSettingsFile = self
            .merged
            .get("compaction")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default();
        let key = model.map(|(p, id)| format!("{p}/{id}"));
        file.resolve(key.as_deref())
    }

    /// `branchSummary`.
    pub fn branch_summary(&self) -> BranchSummarySettings {
        let d = BranchSummarySettings::default();
        BranchSummarySettings {
            reserve_tokens: self
                .num_at("branchSummary.reserveTokens")
                .map_or(d.reserve_tokens, |n| n.max(0.0) as u64),
            skip_prompt: self
                .bool_at("branchSummary.skipPrompt")
                .unwrap_or(d.skip_prompt),
        }
    }

    /// `retry` (agent-level retries).
    pub fn retry(&self) -> RetrySettings {
        let d = RetrySettings::default();
        let n = |key: &str| self.num_at(key).map(|n| n.max(0.0));
        RetrySettings {
            enabled: self.bool_at("retry.enabled").unwrap_or(d.enabled),
            max_retries: n("retry.maxRetries").map_or(d.max_retries, |n| n as u32),
            base_delay_ms: n("retry.baseDelayMs").map_or(d.base_delay_ms, |n| n as u64),
            max_agent_delay_ms: n("retry.maxAgentDelayMs")
                .map_or(d.max_agent_delay_ms, |n| n as u64),
        }
    }

    /// `retry.provider.maxRetryDelayMs` (default 60000).
    pub fn provider_max_retry_delay_ms(&self) -> u64 {
        self.num_at("retry.provider.maxRetryDelayMs")
            .map_or(60_000, |n| n.max(0.0) as u64)
    }

    /// `defaultProvider`.
    pub fn default_provider(&self) -> Option<&str> {
        self.str("defaultProvider")
    }

    /// `defaultModel`.
    pub fn default_model(&self) -> Option<&str> {
        self.str("defaultModel")
    }

    /// `defaultThinkingLevel`, when it is a valid level.
    pub fn default_thinking_level(&self) -> Option<pi_formats::message::ThinkingLevel> {
        self.str("defaultThinkingLevel")
            .and_then(pi_formats::message::ThinkingLevel::parse)
    }

    /// `modelThinkingLevels["provider/id"]`.
    pub fn model_thinking_level(
        &self,
        provider: &str,
        id: &str,
    ) -> Option<pi_formats::message::ThinkingLevel> {
        self.get("modelThinkingLevels")
            .and_then(|m| m.get(format!("{provider}/{id}")))
            .and_then(Value::as_str)
            .and_then(pi_formats::message::ThinkingLevel::parse)
    }

    /// `steeringMode`: `"all"` or `"one-at-a-time"` (default).
    pub fn steering_mode(&self) -> &str {
        self.str("steeringMode")
            .filter(|s| !s.is_empty())
            .unwrap_or("one-at-a-time")
    }

    /// `followUpMode`: `"all"` or `"one-at-a-time"` (default).
    pub fn follow_up_mode(&self) -> &str {
        self.str("followUpMode")
            .filter(|s| !s.is_empty())
            .unwrap_or("one-at-a-time")
    }

    /// `sessionDir`, `~` expanded.
    pub fn session_dir(&self) -> Option<PathBuf> {
        self.str("sessionDir")
            .filter(|s| !s.is_empty())
            .map(|s| super::paths::expand_tilde(s, home().as_deref()))
    }

    /// `sessionStore`: the storage backend name (`jsonl`, `redb`, `sqlite`); ours, not Pi's.
    pub fn session_store(&self) -> Option<&str> {
        self.str("sessionStore")
    }

    /// `shellPath`, `~` expanded.
    pub fn shell_path(&self) -> Option<PathBuf> {
        self.str("shellPath")
            .filter(|s| !s.is_empty())
            .map(|s| super::paths::expand_tilde(s, home().as_deref()))
    }

    /// `shellCommandPrefix`.
    pub fn shell_command_prefix(&self) -> Option<&str> {
        self.str("shellCommandPrefix")
    }

    /// `quietStartup`: `Some("header")`, `Some("true")` or `None` (false), as Pi accepts
    /// `true` or `"header"`.
    pub fn quiet_startup(&self) -> Option<&'static str> {
        match self.merged.get("quietStartup") {
            Some(Value::Bool(true)) => Some("true"),
            Some(Value::String(s)) if s == "header" => Some("header"),
            _ => None,
        }
    }

    /// `theme` (a name; values containing `/` are paths and not names).
    pub fn theme(&self) -> Option<&str> {
        self.str("theme").filter(|t| !t.contains('/'))
    }

    /// `treeFilterMode`, falling back to `"default"` for unknown values.
    pub fn tree_filter_mode(&self) -> &str {
        const VALID: [&str; 5] = ["default", "no-tools", "user-only", "labeled-only", "all"];
        self.str("treeFilterMode")
            .filter(|m| VALID.contains(m))
            .unwrap_or("default")
    }

    /// The external editor: `externalEditor`, else `$VISUAL`, `$EDITOR`, else `nano`.
    pub fn external_editor(&self, env: &dyn Fn(&str) -> Option<String>) -> String {
        if let Some(e) = self.str("externalEditor").filter(|e| !e.trim().is_empty()) {
            return e.to_string();
        }
        env("VISUAL")
            .filter(|v| !v.is_empty())
            .or_else(|| env("EDITOR").filter(|v| !v.is_empty()))
            .unwrap_or_else(|| "nano".to_string())
    }

    /// `enabledModels` patterns for model cycling.
    pub fn enabled_models(&self) -> Option<Vec<String>> {
        strings(self.merged.get("enabledModels")?)
    }

    /// `images.blockImages` (default false).
    pub fn block_images(&self) -> bool {
        self.bool_at("images.blockImages").unwrap_or(false)
    }

    /// `images.autoResize` (default true).
    pub fn image_auto_resize(&self) -> bool {
        self.bool_at("images.autoResize").unwrap_or(true)
    }

    /// `hideThinkingBlock` (default false).
    pub fn hide_thinking_block(&self) -> bool {
        self.merged
            .get("hideThinkingBlock")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// `enableSkillCommands` (default true).
    pub fn enable_skill_commands(&self) -> bool {
        self.merged
            .get("enableSkillCommands")
            .and_then(Value::as_bool)
            .unwrap_or(true)
    }

    /// `skills` paths (after migration of the old object form).
    pub fn skill_paths(&self) -> Vec<String> {
        self.merged
            .get("skills")
            .and_then(strings)
            .unwrap_or_default()
    }

    /// `prompts` paths.
    pub fn prompt_paths(&self) -> Vec<String> {
        self.merged
            .get("prompts")
            .and_then(strings)
            .unwrap_or_default()
    }

    /// `defaultTools` resolved like Pi: plain names replace the default set, then `+name` adds
    /// and `-name` removes, in order. `None` when no layer sets it.
    pub fn default_tools(&self) -> Option<Vec<String>> {
        let entries: Vec<String> = match self.merged.get("defaultTools")? {
            Value::Array(items) => items
                .iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect(),
            _ => Vec::new(),
        };
        let is_modifier = |e: &str| e.starts_with('+') || e.starts_with('-');
        let plain: Vec<String> = entries
            .iter()
            .filter(|e| !is_modifier(e))
            .cloned()
            .collect();
        let mut tools = if !plain.is_empty() || entries.is_empty() {
            plain
        } else {
            crate::tools::DEFAULT_TOOL_NAMES
                .iter()
                .map(|s| s.to_string())
                .collect()
        };
        for entry in entries.iter().filter(|e| is_modifier(e)) {
            let name = &entry[1..];
            let index = tools.iter().position(|t| t == name);
            match (entry.starts_with('+'), index) {
                (true, None) if !name.is_empty() => tools.push(name.to_string()),
                (false, Some(i)) => {
                    tools.remove(i);
                }
                _ => {}
            }
        }
        Some(tools)
    }

    /// `transport`: `auto` (default), `sse`, `websocket` or `websocket-cached`.
    pub fn transport(&self) -> &str {
        self.str("transport").unwrap_or("auto")
    }

    /// `thinkingBudgets` (token budgets per level; unset levels use the provider default).
    pub fn thinking_budgets(&self) -> Option<crate::llm::ThinkingBudgets> {
        let budgets = self.merged.get("thinkingBudgets")?.as_object()?;
        let level = |k: &str| {
            budgets
                .get(k)
                .and_then(Value::as_f64)
                .map(|n| n.max(0.0) as u64)
        };
        Some(crate::llm::ThinkingBudgets {
            minimal: level("minimal"),
            low: level("low"),
            medium: level("medium"),
            high: level("high"),
        })
    }

    /// `httpIdleTimeoutMs`: a number of ms, `0` or `"disabled"` to disable; default 300000.
    /// An unusable value is an error naming it, as in Pi.
    pub fn http_idle_timeout_ms(&self) -> Result<u64, String> {
        match self.merged.get("httpIdleTimeoutMs") {
            None => Ok(300_000),
            Some(value) => parse_timeout(value).ok_or_else(|| {
                format!(
                    "Invalid httpIdleTimeoutMs setting: {}",
                    pi_engine::js::to_js_string(Some(value))
                )
            }),
        }
    }

    /// `doubleEscapeAction`: `fork`, `tree` (default) or `none`.
    pub fn double_escape_action(&self) -> &str {
        self.str("doubleEscapeAction").unwrap_or("tree")
    }

    /// `lastChangelogVersion`.
    pub fn last_changelog_version(&self) -> Option<&str> {
        self.str("lastChangelogVersion")
    }

    /// `collapseChangelog` (default false).
    pub fn collapse_changelog(&self) -> bool {
        self.merged
            .get("collapseChangelog")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// `editorPaddingX` (default 0).
    pub fn editor_padding_x(&self) -> u64 {
        self.num_at("editorPaddingX")
            .map_or(0, |n| n.max(0.0) as u64)
    }

    /// `outputPad`: 0 or 1 (default).
    pub fn output_pad(&self) -> u64 {
        if self.num_at("outputPad") == Some(0.0) {
            0
        } else {
            1
        }
    }

    /// `autocompleteMaxVisible` (default 5).
    pub fn autocomplete_max_visible(&self) -> u64 {
        self.num_at("autocompleteMaxVisible")
            .map_or(5, |n| n.max(0.0) as u64)
    }

    /// `terminal.showImages` (default true).
    pub fn show_images(&self) -> bool {
        self.bool_at("terminal.showImages").unwrap_or(true)
    }

    /// `terminal.imageWidthCells` (default 60, at least 1).
    pub fn image_width_cells(&self) -> u64 {
        self.num_at("terminal.imageWidthCells")
            .filter(|n| n.is_finite())
            .map_or(60, |n| n.floor().max(1.0) as u64)
    }

    /// `terminal.clearOnShrink`, else `PI_CLEAR_ON_SHRINK=1`, else false.
    pub fn clear_on_shrink(&self, env: &dyn Fn(&str) -> Option<String>) -> bool {
        self.bool_at("terminal.clearOnShrink")
            .unwrap_or_else(|| env("PI_CLEAR_ON_SHRINK").as_deref() == Some("1"))
    }

    /// `showHardwareCursor`, else `PI_HARDWARE_CURSOR=1`.
    pub fn show_hardware_cursor(&self, env: &dyn Fn(&str) -> Option<String>) -> bool {
        self.merged
            .get("showHardwareCursor")
            .and_then(Value::as_bool)
            .unwrap_or_else(|| env("PI_HARDWARE_CURSOR").as_deref() == Some("1"))
    }

    /// `markdown.codeBlockIndent` (default two spaces).
    pub fn code_block_indent(&self) -> &str {
        self.get("markdown.codeBlockIndent")
            .and_then(Value::as_str)
            .unwrap_or("  ")
    }

    /// `tuiMode`: `regular` or `fullscreen` (default).
    pub fn tui_mode(&self) -> &str {
        if self.str("tuiMode") == Some("regular") {
            "regular"
        } else {
            "fullscreen"
        }
    }

    /// `defaultProjectTrust`, read from the global file only: a project must not be able to
    /// vouch for itself.
    pub fn default_project_trust(&self) -> DefaultProjectTrust {
        match self
            .global
            .get("defaultProjectTrust")
            .and_then(Value::as_str)
        {
            Some("always") => DefaultProjectTrust::Always,
            Some("never") => DefaultProjectTrust::Never,
            _ => DefaultProjectTrust::Ask,
        }
    }
}

/// Pi's `parseHttpIdleTimeoutMs`: a non-negative number (floored), a numeric string, or
/// `"disabled"` (0).
fn parse_timeout(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n
            .as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0)
            .map(|f| f.floor() as u64),
        Value::String(s) => {
            let t = s.trim();
            if t.eq_ignore_ascii_case("disabled") {
                Some(0)
            } else if t.is_empty() {
                None
            } else {
                t.parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite() && *f >= 0.0)
                    .map(|f| f.floor() as u64)
            }
        }
        _ => None,
    }
}

fn strings(value: &Value) -> Option<Vec<String>> {
    value.as_array().map(|items| {
        items
            .iter()
            .filter_map(|v| v.as_str().map(String::from))
            .collect()
    })
}

/// Reads and migrates one settings file; `(settings, broken)`.
fn load_file(path: &Path, errors: &mut Vec<ConfigError>) -> (Map<String, Value>, bool) {
    let text = match read_optional(path) {
        Ok(Some(text)) => text,
        Ok(None) => return (Map::new(), false),
        Err(e) => {
            errors.push(e);
            return (Map::new(), true);
        }
    };
    if text.trim_start_matches('\u{feff}').trim().is_empty() {
        return (Map::new(), false);
    }
    match parse_json(&text, path) {
        Ok(Value::Object(map)) => (migrate(map), false),
        Ok(_) => {
            errors.push(ConfigError::Invalid {
                path: normalize_lexically(path),
                message: "expected a JSON object".into(),
            });
            (Map::new(), true)
        }
        Err(e) => {
            errors.push(e);
            (Map::new(), true)
        }
    }
}

/// Sets or removes a nested key, creating intermediate objects (and replacing non-objects on
/// the way, as Pi's setters do).
fn set_in(map: &mut Map<String, Value>, key_path: &[&str], value: Option<Value>) {
    let Some((last, parents)) = key_path.split_last() else {
        return;
    };
    let mut current = map;
    for key in parents {
        let entry = current
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        let Value::Object(next) = entry else { return };
        current = next;
    }
    match value {
        Some(v) => {
            current.insert(last.to_string(), v);
        }
        None => {
            current.shift_remove(*last);
        }
    }
}

/// Pi's deep merge: objects merge key by key, anything else (arrays included) is replaced.
fn deep_merge(base: &Map<String, Value>, over: &Map<String, Value>) -> Map<String, Value> {
    let mut out = base.clone();
    for (key, value) in over {
        let merged = match (base.get(key), value) {
            (Some(Value::Object(b)), Value::Object(o)) => Value::Object(deep_merge(b, o)),
            _ => value.clone(),
        };
        out.insert(key.clone(), merged);
    }
    out
}

/// [`deep_merge`] plus Pi's `defaultTools` rule: an overriding list made only of `+name` /
/// `-name` entries extends the inherited list instead of replacing it.
fn deep_merge_settings(base: &Map<String, Value>, over: &Map<String, Value>) -> Map<String, Value> {
    let mut merged = deep_merge(base, over);
    if let (Some(Value::Array(b)), Some(Value::Array(o))) =
        (base.get("defaultTools"), over.get("defaultTools"))
    {
        let all_modifiers = o.iter().all(|e| {
            e.as_str()
                .is_some_and(|s| s.starts_with('+') || s.starts_with('-'))
        });
        if all_modifiers {
            let mut list = b.clone();
            list.extend(o.iter().cloned());
            merged.insert("defaultTools".into(), Value::Array(list));
        }
    }
    merged
}

/// Pi's migrations of old settings layouts.
fn migrate(mut s: Map<String, Value>) -> Map<String, Value> {
    if s.contains_key("queueMode") && !s.contains_key("steeringMode") {
        if let Some(v) = s.shift_remove("queueMode") {
            s.insert("steeringMode".into(), v);
        }
    }
    if !s.contains_key("transport") {
        if let Some(Value::Bool(ws)) = s.get("websockets").cloned() {
            s.insert(
                "transport".into(),
                Value::from(if ws { "websocket" } else { "sse" }),
            );
            s.shift_remove("websockets");
        }
    }
    if let Some(Value::Object(skills)) = s.get("skills").cloned() {
        if let Some(enable) = skills.get("enableSkillCommands") {
            if !s.contains_key("enableSkillCommands") {
                s.insert("enableSkillCommands".into(), enable.clone());
            }
        }
        match skills.get("customDirectories") {
            Some(Value::Array(dirs)) if !dirs.is_empty() => {
                s.insert("skills".into(), Value::Array(dirs.clone()));
            }
            _ => {
                s.shift_remove("skills");
            }
        }
    }
    if let Some(Value::Object(retry)) = s.get_mut("retry") {
        if let Some(max_delay) = retry.shift_remove("maxDelayMs") {
            let provider_has = retry
                .get("provider")
                .and_then(|p| p.get("maxRetryDelayMs"))
                .is_some_and(|v| !v.is_null());
            if max_delay.is_number() && !provider_has {
                let mut provider = retry
                    .get("provider")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                provider.insert("maxRetryDelayMs".into(), max_delay);
                retry.insert("provider".into(), Value::Object(provider));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn deep_merge_project_wins_and_nested_objects_merge() {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let cwd = tmp.path().join("proj");
        write(
            &agent.join("settings.json"),
            r#"{"compaction":{"enabled":false,"reserveTokens":1000},"theme":"dark","enabledModels":["a","b"],"unknownKey":{"x":1}}"#,
        );
        write(
            &cwd.join(".pi/settings.json"),
            r#"{"compaction":{"reserveTokens":2000},"enabledModels":["c"],"defaultModel":"m"}"#,
        );
        let s = Settings::load(&agent, &cwd, true);
        assert!(s.errors().is_empty());
        let c = s.compaction(None).unwrap();
        assert!(!c.enabled);
        assert_eq!(c.reserve_tokens, 2000);
        assert_eq!(c.keep_recent_tokens, 20000);
        assert_eq!(s.enabled_models(), Some(vec!["c".to_string()]));
        assert_eq!(s.theme(), Some("dark"));
        assert_eq!(s.default_model(), Some("m"));
        assert_eq!(s.get("unknownKey.x"), Some(&json!(1)));

        // Untrusted: project settings are ignored.
        let s = Settings::load(&agent, &cwd, false);
        assert_eq!(s.compaction(None).unwrap().reserve_tokens, 1000);
        assert_eq!(s.default_model(), None);
    }

    #[test]
    fn save_changes_only_the_key_and_keeps_the_rest() {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let path = agent.join("settings.json");
        write(
            &path,
            r#"{"zeta":1,"compaction":{"enabled":true,"keepRecentTokens":5},"custom":[1,2]}"#,
        );
        let mut s = Settings::load(&agent, tmp.path(), false);
        // Someone edits the file after we loaded it.
        write(
            &path,
            r#"{"zeta":1,"compaction":{"enabled":true,"keepRecentTokens":5},"custom":[1,2],"later":true}"#,
        );
        s.set_global(&["compaction", "enabled"], Some(json!(false)))
            .unwrap();
        s.set_global(&["defaultModel"], Some(json!("x"))).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            json!({"zeta":1,"compaction":{"enabled":false,"keepRecentTokens":5},"custom":[1,2],"later":true,"defaultModel":"x"})
        );
        // Key order of the file is kept and the format is Pi's two-space JSON.
        assert!(text.starts_with("{\n  \"zeta\": 1,\n  \"compaction\""));
        let reloaded = Settings::load(&agent, tmp.path(), false);
        assert!(!reloaded.compaction(None).unwrap().enabled);
        assert_eq!(reloaded.default_model(), Some("x"));
        // Removing a key.
        s.set_global(&["defaultModel"], None).unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(v.get("defaultModel").is_none());
        // No temp files are left behind.
        let leftovers: Vec<_> = std::fs::read_dir(&agent)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn malformed_settings_name_file_line_and_column() {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let path = agent.join("settings.json");
        write(
            &path,
            "{\n  \"theme\": \"dark\",\n  \"compaction\": {enabled: true}\n}",
        );
        let mut s = Settings::load(&agent, tmp.path(), false);
        assert_eq!(s.errors().len(), 1);
        let text = s.errors()[0].to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("line 3, column 18"), "{text}");
        // Nothing from the broken file applies, and it is never overwritten.
        assert_eq!(s.theme(), None);
        assert!(s.set_global(&["theme"], Some(json!("x"))).is_err());
        assert!(std::fs::read_to_string(&path)
            .unwrap()
            .contains("enabled: true"));
        // Not an object.
        write(&path, "[1]");
        let s = Settings::load(&agent, tmp.path(), false);
        assert!(s.errors()[0].to_string().contains("expected a JSON object"));
    }

    #[test]
    fn project_writes_need_trust() {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = Settings::load(&tmp.path().join("a"), tmp.path(), false);
        assert!(matches!(
            s.set_project(&["theme"], Some(json!("x"))),
            Err(ConfigError::Untrusted { .. })
        ));
        let mut s = Settings::load(&tmp.path().join("a"), tmp.path(), true);
        s.set_project(&["theme"], Some(json!("x"))).unwrap();
        assert!(tmp.path().join(".pi/settings.json").exists());
    }

    #[test]
    fn defaults_migrations_and_default_tools() {
        let s = Settings::in_memory(json!({}), json!({}));
        assert!(s.retry().enabled);
        assert_eq!(s.retry().max_retries, 3);
        assert_eq!(s.branch_summary().reserve_tokens, 16384);
        assert_eq!(s.steering_mode(), "one-at-a-time");
        assert_eq!(s.tree_filter_mode(), "default");
        assert_eq!(s.default_project_trust(), DefaultProjectTrust::Ask);
        assert_eq!(s.default_tools(), None);

        let s = Settings::in_memory(
            json!({"queueMode":"all","retry":{"maxDelayMs":5},"skills":{"customDirectories":["x"]},
                   "defaultTools":["read","bash"],"defaultProjectTrust":"always"}),
            json!({"defaultTools":["+grep","-bash"],"defaultProjectTrust":"never","treeFilterMode":"bogus"}),
        );
        assert_eq!(s.steering_mode(), "all");
        assert_eq!(s.provider_max_retry_delay_ms(), 5);
        assert_eq!(s.skill_paths(), vec!["x".to_string()]);
        assert_eq!(s.default_tools().unwrap(), vec!["read", "grep"]);
        // Only the global file decides the default trust.
        assert_eq!(s.default_project_trust(), DefaultProjectTrust::Always);
        assert_eq!(s.tree_filter_mode(), "default");

        assert_eq!(s.http_idle_timeout_ms(), Ok(300_000));
        let s = Settings::in_memory(
            json!({"httpIdleTimeoutMs":"disabled","thinkingBudgets":{"low":1024},"outputPad":0}),
            json!({"terminal":{"imageWidthCells":0.5}}),
        );
        assert_eq!(s.http_idle_timeout_ms(), Ok(0));
        assert_eq!(s.thinking_budgets().unwrap().low, Some(1024));
        assert_eq!(s.output_pad(), 0);
        assert_eq!(s.image_width_cells(), 1);
        let s = Settings::in_memory(json!({"httpIdleTimeoutMs":"soon"}), json!({}));
        assert_eq!(
            s.http_idle_timeout_ms(),
            Err("Invalid httpIdleTimeoutMs setting: soon".to_string())
        );

        let s = Settings::in_memory(json!({"compaction":{"reserveTokens":-1}}), json!({}));
        assert_eq!(
            s.compaction(None).unwrap_err().to_string(),
            "Invalid compaction.reserveTokens setting: -1. Expected a non-negative safe integer."
        );
    }
}
