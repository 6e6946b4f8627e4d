//! The startup sequence end to end on real files: trust, settings, resources, system message.

use std::path::Path;

use serde_json::Value;

use super::*;
use crate::tools::builtin_tool;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn startup(agent: &Path, cwd: &Path, override_: Option<bool>, interactive: bool) -> (bool, Value) {
    let global = Settings::load_global(agent);
    let decision = resolve_trust(
        cwd,
        &TrustStore::new(agent),
        TrustInputs {
            override_,
            default: global.default_project_trust(),
            interactive,
            home: Some(agent.join("no-home")),
        },
    )
    .unwrap();
    let trusted = decision.trusted();
    let settings = Settings::load(agent, cwd, trusted);
    assert!(settings.errors().is_empty());
    let mut options = ResourceOptions::new(agent, cwd, trusted).with_settings(&settings);
    options.home = Some(agent.join("no-home"));
    let resources = Resources::load(&options);
    let tools: Vec<_> = ["read", "bash"]
        .iter()
        .map(|n| builtin_tool(n).unwrap())
        .collect();
    let message = build_system_message(&SystemPromptInput {
        tools: &tools,
        cwd,
        resources: &resources,
        docs: None,
        timestamp_ms: 5,
    });
    (trusted, message)
}

#[test]
fn project_files_apply_only_once_trusted() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let cwd = tmp.path().join("proj");
    write(&agent.join("settings.json"), r#"{"theme":"dark"}"#);
    write(&cwd.join("AGENTS.md"), "Project rules.");
    write(
        &cwd.join(".pi/settings.json"),
        r#"{"skills":["../extra-skills"]}"#,
    );
    write(
        &cwd.join("extra-skills/lint/SKILL.md"),
        "---\nname: lint\ndescription: Lint the code\n---\nRun the linter.",
    );
    write(&cwd.join(".pi/APPEND_SYSTEM.md"), "Project addendum.");

    // Non-interactive with the default `ask`: not trusted, nothing project-local applies,
    // but context files do (Pi does not gate them).
    let (trusted, message) = startup(&agent, &cwd, None, false);
    assert!(!trusted);
    let keys: Vec<&String> = message["sections"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["preamble", "tools", "rules", "project_context", "cwd"]
    );

    // --approve: the project's skills path and addendum apply.
    let (trusted, message) = startup(&agent, &cwd, Some(true), false);
    assert!(trusted);
    let sections = message["sections"].as_object().unwrap();
    let keys: Vec<&String> = sections.keys().collect();
    assert_eq!(
        keys,
        [
            "preamble",
            "tools",
            "rules",
            "addendum",
            "project_context",
            "skills",
            "cwd"
        ]
    );
    assert_eq!(
        sections["addendum"],
        "<addendum>\nProject addendum.\n</addendum>"
    );
    assert!(sections["skills"]
        .as_str()
        .unwrap()
        .contains("<name>lint</name>"));
    assert_eq!(message["toolsAdded"].as_array().unwrap().len(), 2);

    // A remembered decision is used without flags.
    TrustChoice::Trust
        .record(&cwd, &TrustStore::new(&agent))
        .unwrap();
    assert!(startup(&agent, &cwd, None, false).0);
}

/// Skills and prompt templates extensions discovered join after the loaded ones: a name
/// already taken keeps its first definition (the newcomer is a collision), a missing path
/// is an error diagnostic.
#[test]
fn discovered_resources_join_after_the_loaded_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let agent = tmp.path().join("agent");
    let cwd = tmp.path().join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    let skill = |dir: &Path, name: &str, what: &str| {
        write(
            &dir.join(name).join("SKILL.md"),
            &format!("---\nname: {name}\ndescription: {what}\n---\nbody\n"),
        );
    };
    skill(&agent.join("skills"), "shared", "The user's own.");
    let found = tmp.path().join("found");
    skill(&found.join("skills"), "shared", "The extension's.");
    skill(&found.join("skills"), "extra", "Only the extension has it.");
    write(&found.join("prompts/greet.md"), "Hello $1.\n");
    let mut options = ResourceOptions::new(&agent, &cwd, true);
    options.home = Some(agent.join("no-home"));
    let mut resources = Resources::load(&options);
    assert_eq!(resources.skills.len(), 1);

    let missing = tmp.path().join("missing");
    assert!(resources.add_discovered(
        &[found.join("skills"), missing.clone()],
        &[found.join("prompts")]
    ));
    let names: Vec<_> = resources.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["shared", "extra"]);
    assert_eq!(resources.skills[0].description, "The user's own.");
    assert_eq!(resources.prompt_templates[0].name, "greet");
    let kinds: Vec<_> = resources
        .diagnostics
        .iter()
        .map(|d| {
            (
                d.kind,
                d.path.starts_with(&missing) || d.path.starts_with(&found),
            )
        })
        .collect();
    assert!(kinds.contains(&("collision", true)), "{kinds:?}");
    assert!(kinds.contains(&("error", true)), "{kinds:?}");
    // The same paths again add nothing.
    assert!(!resources.add_discovered(&[found.join("skills")], &[found.join("prompts")]));
}
