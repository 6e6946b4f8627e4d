//! The structured system prompt Pi 1.6 stores as a session `system` message.
//!
//! Structure (kept identical to Pi's, because replay, compaction and section diffs work on
//! it): `content` is empty and `sections` holds, in this order, `preamble` (bare text), then
//! each further section wrapped as `<name>\n…\n</name>`: `tools`, `rules`, `docs` (these three
//! only without a custom prompt), `addendum` (append text), `project_context` (context
//! files), `skills`, and always `cwd`. `toolsAdded` declares the tools, after `timestamp`.
//!
//! The tool list lines are the tools' own snippets and the rules start with the tools' own
//! guidelines, as in Pi. The fixed prose (preamble, docs pointer, generic rules, skills
//! intro) is this project's wording.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Map;
use serde_json::Value;

use super::resources::Resources;
use super::skills::format_skills_for_prompt;
use crate::tools::tool_declaration;
use crate::tools::Tool;

/// Where the harness's own documentation lives (named in the `docs` section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocsPaths {
    /// The main README.
    pub readme: PathBuf,
    /// The docs directory.
    pub docs: PathBuf,
    /// The examples directory.
    pub examples: PathBuf,
}

impl DocsPaths {
    /// `README.md`, `docs/` and `examples/` under `root`.
    pub fn under(root: &Path) -> DocsPaths {
        DocsPaths {
            readme: root.join("README.md"),
            docs: root.join("docs"),
            examples: root.join("examples"),
        }
    }
}

impl Default for DocsPaths {
    /// Next to the running executable's directory (an installed package layout).
    fn default() -> Self {
        let root = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().and_then(Path::parent).map(Path::to_path_buf))
            .unwrap_or_default();
        DocsPaths::under(&root)
    }
}

/// What the prompt is built from.
#[derive(Clone)]
pub struct SystemPromptInput<'a> {
    /// The active tools, in declaration order.
    pub tools: &'a [Arc<dyn Tool>],
    /// The session's working directory.
    pub cwd: &'a Path,
    /// Context files, skills, custom and appended prompt text.
    pub resources: &'a Resources,
    /// Documentation paths for the `docs` section; `None` leaves the section out (for an
    /// installation that ships no docs, pointing the model at missing files only misleads).
    pub docs: Option<DocsPaths>,
    /// The message timestamp (epoch ms).
    pub timestamp_ms: i64,
}

const PREAMBLE: &str =
    "You are an expert coding assistant working inside pi, a coding agent harness. \
You help by reading files, running commands and changing code.";

/// The ordered sections (Pi's `buildSystemPromptSections`).
pub fn build_system_sections(input: &SystemPromptInput<'_>) -> Map<String, Value> {
    // Tools whose declarations a `prepareLoadout` hook hides are left out of the tool list,
    // the rules and the skills hint (the tool that hides them presents them itself).
    let shown: Vec<Arc<dyn Tool>> = input
        .tools
        .iter()
        .filter(|t| !t.hidden_declaration())
        .cloned()
        .collect();
    let input = &SystemPromptInput {
        tools: &shown,
        cwd: input.cwd,
        resources: input.resources,
        docs: input.docs.clone(),
        timestamp_ms: input.timestamp_ms,
    };
    let names: Vec<&str> = input.tools.iter().map(|t| t.name()).collect();
    let mut sections: Vec<(&str, String)> = Vec::new();
    match input
        .resources
        .system_prompt
        .as_deref()
        .filter(|p| !p.is_empty())
    {
        Some(custom) => sections.push(("preamble", custom.to_string())),
        None => {
            sections.push(("preamble", PREAMBLE.to_string()));
            let listed: Vec<String> = input
                .tools
                .iter()
                .filter_map(|t| {
                    t.prompt_snippet()
                        .filter(|s| !s.is_empty())
                        .map(|s| format!("- {}: {s}", t.name()))
                })
                .collect();
            let list = if listed.is_empty() {
                "(none)".to_string()
            } else {
                listed.join("\n")
            };
            sections.push((
                "tools",
                format!("{list}\n\nFurther tools may be offered during the session."),
            ));
            sections.push(("rules", rules(input.tools, &names)));
            if let Some(paths) = &input.docs {
                sections.push(("docs", docs(paths)));
            }
        }
    }
    let append = input.resources.append_system_prompt.join("\n\n");
    if !append.is_empty() {
        sections.push(("addendum", append));
    }
    if !input.resources.context_files.is_empty() {
        let mut parts = vec!["Instructions for this project:".to_string()];
        for file in &input.resources.context_files {
            parts.push(format!(
                "<project_instructions path=\"{}\">\n{}\n</project_instructions>",
                file.path.display(),
                file.content
            ));
        }
        sections.push(("project_context", parts.join("\n\n")));
    }
    let reader = ["read", "bash"].into_iter().find(|r| names.contains(r));
    if reader.is_some() && !input.resources.skills.is_empty() {
        let skills = format_skills_for_prompt(&input.resources.skills, reader);
        if !skills.trim().is_empty() {
            sections.push(("skills", skills.trim().to_string()));
        }
    }
    sections.push(("cwd", input.cwd.to_string_lossy().replace('\\', "/")));

    let mut out = Map::new();
    for (name, content) in sections {
        let value = if name == "preamble" {
            content
        } else {
            format!("<{name}>\n{content}\n</{name}>")
        };
        out.insert(name.to_string(), Value::String(value));
    }
    out
}

fn rules(tools: &[Arc<dyn Tool>], names: &[&str]) -> String {
    let mut rules: Vec<String> = Vec::new();
    let mut add = |rule: &str| {
        let rule = rule.trim();
        if !rule.is_empty() && !rules.iter().any(|r| r == rule) {
            rules.push(rule.to_string());
        }
    };
    let has = |n: &str| names.contains(&n);
    if has("bash") && !has("grep") && !has("find") && !has("ls") {
        add("Use bash (ls, rg, find) to list, search and locate files");
    }
    for tool in tools {
        for guideline in tool.prompt_guidelines() {
            add(guideline);
        }
    }
    add("Keep responses short and to the point");
    add("Name file paths explicitly when working with files");
    rules
        .iter()
        .map(|r| format!("- {r}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn docs(paths: &DocsPaths) -> String {
    [
        "Documentation of pi itself (consult it only for questions about the harness: its SDK, extensions, themes, skills, prompt templates or TUI):".to_string(),
        format!("- Main documentation: {}", paths.readme.display()),
        format!("- Additional docs: {}", paths.docs.display()),
        format!("- Examples: {} (extensions, custom tools, SDK)", paths.examples.display()),
        "- Paths like docs/... and examples/... refer to the directories above, not to the working directory".to_string(),
        "- Read the relevant documents completely before changing the harness or writing extensions".to_string(),
    ]
    .join("\n")
}

/// The complete `system` message: `{role, content, sections, timestamp, toolsAdded}` (the
/// key order Pi writes). Append it as the `message` of a session `message` entry.
pub fn build_system_message(input: &SystemPromptInput<'_>) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), Value::from("system"));
    message.insert("content".into(), Value::from(""));
    message.insert(
        "sections".into(),
        Value::Object(build_system_sections(input)),
    );
    message.insert("timestamp".into(), Value::from(input.timestamp_ms));
    let tools: Vec<Value> = input
        .tools
        .iter()
        .map(|t| tool_declaration(t.as_ref()))
        .collect();
    if !tools.is_empty() {
        message.insert("toolsAdded".into(), Value::Array(tools));
    }
    Value::Object(message)
}

/// The `sections` patch that turns `previous` (replayed from the transcript) into `current`:
/// changed or new sections with their text, removed ones as `null`; `None` when nothing
/// changed (Pi's `diffSystemPromptSections`). A later `system` message carrying only this
/// patch updates the prompt without repeating it.
pub fn diff_system_sections(
    previous: &Map<String, Value>,
    current: &Map<String, Value>,
) -> Option<Map<String, Value>> {
    let mut patch = Map::new();
    for (name, text) in current {
        if previous.get(name) != Some(text) {
            patch.insert(name.clone(), text.clone());
        }
    }
    for name in previous.keys() {
        if !current.contains_key(name) {
            patch.insert(name.clone(), Value::Null);
        }
    }
    (!patch.is_empty()).then_some(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ContextFile;
    use crate::config::Skill;
    use crate::tools::builtin_tool;

    fn recorded_system_message() -> Value {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/realpi/sessions/rpc_tree_labels_nav.jsonl"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let line = text.lines().nth(3).unwrap();
        let entry: Value = serde_json::from_str(line).unwrap();
        entry["message"].clone()
    }

    fn default_tools() -> Vec<Arc<dyn Tool>> {
        ["read", "bash", "edit", "write"]
            .iter()
            .map(|n| builtin_tool(n).unwrap())
            .collect()
    }

    fn lines_of(section: &str, tag: &str) -> Vec<String> {
        section
            .strip_prefix(&format!("<{tag}>\n"))
            .and_then(|s| s.strip_suffix(&format!("\n</{tag}>")))
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn structure_matches_pi_recorded_system_message() {
        let recorded = recorded_system_message();
        let tools = default_tools();
        let cwd_section = recorded["sections"]["cwd"].as_str().unwrap();
        let cwd = lines_of(cwd_section, "cwd")[0].clone();
        let resources = Resources::default();
        let ours = build_system_message(&SystemPromptInput {
            tools: &tools,
            cwd: Path::new(&cwd),
            resources: &resources,
            docs: Some(DocsPaths::under(Path::new("/opt/pi"))),
            timestamp_ms: recorded["timestamp"].as_i64().unwrap(),
        });
        // Same message keys in the same order.
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&ours), keys(&recorded));
        assert_eq!(keys(&ours["sections"]), keys(&recorded["sections"]));
        assert_eq!(ours["sections"]["cwd"], recorded["sections"]["cwd"]);
        assert_eq!(ours["content"], "");
        // The tool list is identical, line for line.
        let tool_lines = |v: &Value| {
            lines_of(v.as_str().unwrap(), "tools")
                .into_iter()
                .filter(|l| l.starts_with("- "))
                .collect::<Vec<_>>()
        };
        let ours_listed = tool_lines(&ours["sections"]["tools"]);
        assert_eq!(ours_listed.len(), 4);
        assert_eq!(ours_listed, tool_lines(&recorded["sections"]["tools"]));
        // Every tool guideline appears, in Pi's order.
        let pi_rules = lines_of(recorded["sections"]["rules"].as_str().unwrap(), "rules");
        let our_rules = lines_of(ours["sections"]["rules"].as_str().unwrap(), "rules");
        assert_eq!(our_rules.len(), pi_rules.len());
        assert_eq!(
            our_rules[1..our_rules.len() - 2],
            pi_rules[1..pi_rules.len() - 2]
        );
        // The declarations are Pi's, byte for byte.
        assert_eq!(
            serde_json::to_string(&ours["toolsAdded"]).unwrap(),
            serde_json::to_string(&recorded["toolsAdded"]).unwrap()
        );
    }

    #[test]
    fn section_diffs() {
        let a: Map<String, Value> = serde_json::from_value(
            serde_json::json!({"preamble":"p","cwd":"<cwd>\n/a\n</cwd>","skills":"s"}),
        )
        .unwrap();
        let b: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"preamble":"p","cwd":"<cwd>\n/b\n</cwd>"}))
                .unwrap();
        assert_eq!(diff_system_sections(&a, &a), None);
        assert_eq!(
            Value::Object(diff_system_sections(&a, &b).unwrap()),
            serde_json::json!({"cwd":"<cwd>\n/b\n</cwd>","skills":null})
        );
    }

    #[test]
    fn optional_sections_in_pi_order() {
        let tools = default_tools();
        let resources = Resources {
            context_files: vec![ContextFile {
                path: PathBuf::from("/p/AGENTS.md"),
                content: "Use tabs.".into(),
            }],
            skills: vec![Skill {
                name: "pdf".into(),
                description: "PDFs".into(),
                file_path: PathBuf::from("/s/pdf/SKILL.md"),
                base_dir: PathBuf::from("/s/pdf"),
                disable_model_invocation: false,
            }],
            append_system_prompt: vec!["one".into(), "two".into()],
            ..Resources::default()
        };
        let input = SystemPromptInput {
            tools: &tools,
            cwd: Path::new("/p"),
            resources: &resources,
            docs: Some(DocsPaths::under(Path::new("/opt/pi"))),
            timestamp_ms: 1,
        };
        let sections = build_system_sections(&input);
        let keys: Vec<&str> = sections.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "preamble",
                "tools",
                "rules",
                "docs",
                "addendum",
                "project_context",
                "skills",
                "cwd"
            ]
        );
        assert_eq!(sections["addendum"], "<addendum>\none\n\ntwo\n</addendum>");
        assert!(sections["project_context"].as_str().unwrap().contains(
            "<project_instructions path=\"/p/AGENTS.md\">\nUse tabs.\n</project_instructions>"
        ));
        assert!(sections["skills"]
            .as_str()
            .unwrap()
            .contains("<name>pdf</name>"));

        // A custom prompt (SYSTEM.md / --system-prompt) replaces preamble, tools, rules, docs.
        let custom = Resources {
            system_prompt: Some("You are terse.".into()),
            ..resources.clone()
        };
        let sections = build_system_sections(&SystemPromptInput {
            resources: &custom,
            ..input.clone()
        });
        let keys: Vec<&str> = sections.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["preamble", "addendum", "project_context", "skills", "cwd"]
        );
        assert_eq!(sections["preamble"], "You are terse.");

        // Without read or bash, skills are not listed; without tools the list says so.
        let sections = build_system_sections(&SystemPromptInput {
            tools: &[],
            ..input.clone()
        });
        assert!(!sections.contains_key("skills"));
        assert_eq!(
            sections["tools"],
            "<tools>\n(none)\n\nFurther tools may be offered during the session.\n</tools>"
        );
        let sections = build_system_sections(&SystemPromptInput {
            docs: None,
            ..input.clone()
        });
        assert!(!sections.contains_key("docs"));
    }
}
