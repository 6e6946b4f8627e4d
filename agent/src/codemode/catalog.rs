//! The `codemode` description and how the session's tools are presented with codemode
//! active (Pi's `prepareCodemodeLoadout` and `createCodemodeDescription`), following the
//! `codemode.mode` and `codemode.inlineBudget` settings:
//!
//! - `on` (default): declared tools stay declared with a note on calling them from scripts;
//!   the description lists only callable tools that are not declared and not deferred, which
//!   here is none (MCP tools with `codemode` exposure count as deferred, as in Pi).
//! - `only`: the declared tools are hidden from the model and listed in the description
//!   instead, grouped by namespace (tools without one first), within the inline budget.
//!
//! Listed declarations share a budget of estimated tokens (characters / 4, default 3000): in
//! each round every group places its cheapest remaining tool, a group whose next tool does
//! not fit drops out, so every namespace is represented before any is complete.

use std::sync::Arc;

use serde_json::json;
use serde_json::Value;

use super::declarations;
use super::declarations::ToolDeclaration;
use super::globals::Namespace;
use crate::tools::Tool;
use crate::tools::ToolExposure;

/// `codemode.mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CodemodeMode {
    /// Declared tools stay declared, with a note on calling them from scripts.
    #[default]
    On,
    /// Only `codemode` is declared; the other tools are listed in its description.
    Only,
}

/// The `codemode.*` settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CodemodeOptions {
    pub mode: CodemodeMode,
    /// `codemode.inlineBudget` in estimated tokens; `None` for the default.
    pub inline_budget: Option<u64>,
}

impl CodemodeOptions {
    /// From the merged settings: `mode` is `only` or else `on`; `inlineBudget` counts when it
    /// is a finite number not below zero (a fraction fits as its floor would).
    pub fn from_settings(codemode: Option<&Value>) -> CodemodeOptions {
        let field = |key: &str| codemode.and_then(|c| c.get(key));
        CodemodeOptions {
            mode: if field("mode").and_then(Value::as_str) == Some("only") {
                CodemodeMode::Only
            } else {
                CodemodeMode::On
            },
            inline_budget: field("inlineBudget")
                .and_then(Value::as_f64)
                .filter(|b| b.is_finite() && *b >= 0.0)
                .map(|b| b.floor() as u64),
        }
    }
}

/// Default of `codemode.inlineBudget`.
pub const DEFAULT_INLINE_BUDGET: u64 = 3000;
const CHARS_PER_TOKEN: u64 = 4;

pub(super) const DESCRIPTION_INTRO: &str = "Run JavaScript that calls other tools. The input is raw JavaScript (not JSON, no code fence), run as an async function body in a QuickJS sandbox: top-level `await` and `return` work. No Node, file system, network, or timers.
- `await tools.<name>({ ...args })` resolves to a string, or an object if the tool's declaration says so, and rejects with an Error on failure. A tool whose declaration returns an object resolves on failure too when it returned that object; check its fields. Calls still running when the script ends are cancelled.
- Optional first line: `// @options: {\"max_output_tokens\": 10000, \"timeout_ms\": 60000}`";

const DESCRIPTION_GLOBALS: &str = "Globals:
- `text(value)`, `image(dataUrlOrImageBlock)`, `console.log(...)`, and top-level `return` add output; `exit()` ends the script. With several text items, each starts with a `==> text N/M <==` line, and `console` lines follow the other output in one `<console_output>` block. `image()` also saves the image to a temp file and the result names its path.
- `store(key, value)` and `load(key)` keep JSON values across codemode calls.
- `ALL_TOOLS`, `await searchTools(query, { limit?, namespace? })`, `await describeTool(name)`, `await describeNamespace(name)`: find unlisted tools, such as MCP tools.";

/// Where `docs/codemode.md` is installed: the docs the system prompt points at.
pub fn codemode_docs_path() -> String {
    crate::config::DocsPaths::default()
        .docs
        .join("codemode.md")
        .display()
        .to_string()
}

/// A tool the description may list.
pub struct ListedTool<'a> {
    pub tool: &'a dyn Tool,
    pub namespace: Option<Namespace>,
}

/// What a script sees of a tool: its description followed by its prompt guidelines (the
/// system prompt has them only for declared tools), and its declaration.
pub fn tool_sample(tool: &dyn Tool) -> String {
    let bullets: Vec<String> = tool
        .prompt_guidelines()
        .iter()
        .map(|g| g.trim())
        .filter(|g| !g.is_empty())
        .map(|g| format!("- {g}"))
        .collect();
    let description = if bullets.is_empty() {
        tool.description().to_string()
    } else {
        format!("{}\n\n{}", tool.description().trim(), bullets.join("\n"))
    };
    declarations::render_tool_sample(&ToolDeclaration {
        name: tool.name().to_string(),
        description,
        input_schema: tool.parameters().clone(),
        output_schema: tool
            .output_schema()
            .cloned()
            .unwrap_or_else(|| json!({"type": "string"})),
    })
}

struct Entry {
    name: String,
    section: String,
    cost: u64,
}

struct Group {
    namespace: Option<Namespace>,
    entries: Vec<Entry>,
}

/// The `codemode` description listing `listed` within `budget` tokens.
pub fn codemode_description(listed: &[ListedTool<'_>], budget: Option<u64>) -> String {
    let head = format!(
        "{DESCRIPTION_INTRO}\n\n{DESCRIPTION_GLOBALS}\n- `models`: classifiers and image generation. Read {} first.",
        codemode_docs_path()
    );
    if listed.is_empty() {
        return head;
    }
    let mut groups: Vec<Group> = vec![Group {
        namespace: None,
        entries: Vec::new(),
    }];
    for item in listed {
        let section = tool_section(item.tool);
        let entry = Entry {
            name: item.tool.name().to_string(),
            cost: (section.encode_utf16().count() as u64).div_ceil(CHARS_PER_TOKEN),
            section,
        };
        let position = groups.iter().position(|g| {
            g.namespace.as_ref().map(|n| &n.name) == item.namespace.as_ref().map(|n| &n.name)
        });
        match position {
            Some(i) => groups[i].entries.push(entry),
            None => groups.push(Group {
                namespace: item.namespace.clone(),
                entries: vec![entry],
            }),
        }
    }
    // Tools without a namespace first, then namespaces by name.
    groups[1..].sort_by(|a, b| {
        let name = |g: &Group| g.namespace.as_ref().map(|n| n.name.to_lowercase());
        name(a).cmp(&name(b))
    });
    let shown = select_catalog(&groups, budget.unwrap_or(DEFAULT_INLINE_BUDGET));
    let mut sections = vec!["Nested tools:".to_string()];
    for group in &groups {
        let visible: Vec<&Entry> = group
            .entries
            .iter()
            .filter(|e| shown.contains(&e.name))
            .collect();
        if let Some(namespace) = &group.namespace {
            let listing = if visible.len() == group.entries.len() {
                ""
            } else if visible.is_empty() {
                " (tools not listed)"
            } else {
                " (some tools not listed)"
            };
            let description = namespace
                .description
                .as_deref()
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(|d| format!("\n{d}"))
                .unwrap_or_default();
            sections.push(format!("## {}{listing}{description}", namespace.name));
        }
        sections.extend(visible.iter().map(|e| e.section.clone()));
    }
    format!("{head}\n\n{}", sections.join("\n\n"))
}

/// `### \`id\`` (with the raw name when it differs) over the tool's sample.
fn tool_section(tool: &dyn Tool) -> String {
    let id = declarations::js_identifier(tool.name());
    let heading = if id == tool.name() {
        format!("### `{id}`")
    } else {
        format!("### `{id}` (`{}`)", tool.name())
    };
    format!("{heading}\n{}", tool_sample(tool).trim())
}

/// The names of the tools that fit `budget` (see the module documentation).
fn select_catalog(groups: &[Group], budget: u64) -> Vec<String> {
    let mut queues: Vec<Vec<&Entry>> = groups
        .iter()
        .map(|g| {
            let mut entries: Vec<&Entry> = g.entries.iter().collect();
            entries.sort_by_key(|e| e.cost);
            entries.reverse();
            entries
        })
        .filter(|q| !q.is_empty())
        .collect();
    let mut shown = Vec::new();
    let mut remaining = budget;
    while !queues.is_empty() {
        queues.retain_mut(|queue| {
            let Some(next) = queue.last() else {
                return false;
            };
            if next.cost > remaining {
                return false;
            }
            remaining -= next.cost;
            shown.push(next.name.clone());
            queue.pop();
            !queue.is_empty()
        });
    }
    shown
}

/// The tools a session declares with codemode active over `tools` (the declared tools) and
/// the `codemode` tool built for them: with mode `on` the callable ones carry the script-call
/// note; with `only` the callable `direct` ones are left to the codemode description.
pub fn present_tools(
    tools: Vec<Arc<dyn Tool>>,
    codemode: Arc<dyn Tool>,
    mode: CodemodeMode,
) -> Vec<Arc<dyn Tool>> {
    let callable = |tool: &Arc<dyn Tool>| super::is_script_callable(tool.as_ref());
    match mode {
        CodemodeMode::On => tools
            .into_iter()
            .map(|tool| {
                if callable(&tool) {
                    super::with_script_call_note(tool)
                } else {
                    tool
                }
            })
            .chain(std::iter::once(codemode))
            .collect(),
        CodemodeMode::Only => tools
            .into_iter()
            .filter(|tool| !(callable(tool) && tool.exposure() == ToolExposure::Direct))
            .chain(std::iter::once(codemode))
            .collect(),
    }
}
