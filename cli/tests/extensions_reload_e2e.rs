//! End to end: Pi's reload loads the extensions again, as real Pi 1.6.0 does. A command's
//! `ctx.reload()` (RPC) and the interactive `/reload` (tmux) stop the extension process
//! after `session_shutdown` and load the extension files again in a new one: an edited file
//! is read again (its tool, as the model sees it and runs it, and its commands, as
//! `get_commands` lists them), a file added to `~/.pi/agent/extensions` or a trusted
//! `.pi/extensions` joins, a removed one leaves, and a file that now throws while loading is
//! reported as an `extension_error` while the agent goes on.
//!
//! The extensions are written by the tests into the agent dir and the project, as a user
//! edits them between start-up and the reload.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod extensions_common;
mod tmux_common;

use std::path::Path;

use extensions_common::*;
use serde_json::{json, Value};

/// An extension registering the tool `name` (unless empty; described as `description`,
/// answering `answer`) and the commands in `commands` (`(name, description)`): each
/// notifies its description, except `reload-now`, which runs `ctx.reload()`.
fn extension(name: &str, description: &str, answer: &str, commands: &[(&str, &str)]) -> String {
    let mut text = String::from(
        "import type { ExtensionAPI } from \"@earendil-works/pi-coding-agent\";\n\
         import { Type } from \"typebox\";\n\n\
         export default function (pi: ExtensionAPI) {\n",
    );
    if !name.is_empty() {
        text.push_str(&format!(
            "  pi.registerTool({{ name: {name:?}, label: {name:?}, description: {description:?},\n    \
             parameters: Type.Object({{}}),\n    \
             async execute() {{ return {{ content: [{{ type: \"text\", text: {answer:?} }}], details: {{}} }}; }},\n  \
             }} as any);\n"
        ));
    }
    for (command, about) in commands {
        text.push_str(&format!(
            "  pi.registerCommand({command:?}, {{ description: {about:?}, handler: async (_args: string, ctx: any) => {{\n    \
             if ({command:?} === \"reload-now\") {{ await ctx.reload(); return; }}\n    \
             ctx.ui.notify({about:?}, \"info\");\n  }} }});\n"
        ));
    }
    text.push_str("}\n");
    text
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The extension commands `get_commands` lists: `(name, description)`.
fn extension_commands(rpc: &mut Rpc, id: &str) -> Vec<(String, String)> {
    rpc.send(json!({"id": id, "type": "get_commands"}));
    let response = rpc.response(id);
    assert_eq!(response["success"], true, "{response}");
    response["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        // The extensions' own commands; Pi's built-in `/llama` and `/mcp` follow them.
        .filter(|c| c["source"] == "extension" && c["sourceInfo"]["source"] != "builtin")
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["description"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn names(commands: &[(String, String)]) -> Vec<&str> {
    commands.iter().map(|(n, _)| n.as_str()).collect()
}

/// Runs `/reload-now` and waits for its answer.
fn reload_now(rpc: &mut Rpc, id: &str) -> Vec<Value> {
    rpc.send(json!({"id": id, "type": "prompt", "message": "/reload-now"}));
    let (response, seen) = rpc.until(|r| r["type"] == "response" && r["id"] == id);
    assert_eq!(response["success"], true, "{response}");
    seen
}

/// An extension file edited between start-up and a command's `ctx.reload()`: after the
/// reload the model sees the new tool declaration, calling the tool runs the new code, and
/// `get_commands` lists the new commands (the old version's are gone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_extension_is_read_again_by_ctx_reload() {
    let s = Setup::new(json!([
        {"text": "First."},
        {"text": "Probing.", "tool_calls": [tc("probe", json!({}))]},
        {"text": "Probed."},
    ]))
    .await;
    let file = s.agent.join("extensions/live.ts");
    write(
        &file,
        &extension(
            "probe",
            "Probe, version one.",
            "probe answered v1",
            &[
                ("reload-now", "Reload"),
                ("only-one", "Only in version one"),
            ],
        ),
    );
    let mut rpc = Rpc::start(&s, &[]);
    let before = extension_commands(&mut rpc, "c0");
    assert_eq!(names(&before), ["reload-now", "only-one"]);
    rpc.send(json!({"id": "p0", "type": "prompt", "message": "hi"}));
    rpc.until(|r| r["type"] == "agent_settled");

    write(
        &file,
        &extension(
            "probe",
            "Probe, version two.",
            "probe answered v2",
            &[
                ("reload-now", "Reload"),
                ("only-two", "Only in version two"),
            ],
        ),
    );
    reload_now(&mut rpc, "r");
    let after = extension_commands(&mut rpc, "c1");
    assert_eq!(
        after,
        [
            ("reload-now".to_string(), "Reload".to_string()),
            ("only-two".to_string(), "Only in version two".to_string())
        ]
    );
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "probe it"}));
    rpc.until(|r| r["type"] == "agent_settled");
    assert!(rpc.finish());

    let requests = s.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        declared(&requests[0], "probe").unwrap()["description"],
        "Probe, version one."
    );
    assert_eq!(
        declared(&requests[1], "probe").unwrap()["description"],
        "Probe, version two."
    );
    assert_eq!(tool_messages(&requests[2]), ["probe answered v2"]);
}

/// After a reload an extension added to `~/.pi/agent/extensions` and one added to the
/// project's (trusted) `.pi/extensions` are loaded, and one deleted from the agent dir is
/// gone: its tool is no longer declared and its command no longer listed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_extensions_join_and_removed_ones_leave_on_reload() {
    let s = Setup::new(json!([{"text": "First."}, {"text": "Second."}])).await;
    let extensions = s.agent.join("extensions");
    write(
        &extensions.join("keeper.ts"),
        &extension("", "", "", &[("reload-now", "Reload")]),
    );
    write(
        &extensions.join("gone.ts"),
        &extension(
            "gone_tool",
            "Goes away.",
            "gone",
            &[("gone-cmd", "Goes away")],
        ),
    );
    let mut rpc = Rpc::start(&s, &["--approve"]);
    rpc.send(json!({"id": "p0", "type": "prompt", "message": "hi"}));
    rpc.until(|r| r["type"] == "agent_settled");

    std::fs::remove_file(extensions.join("gone.ts")).unwrap();
    write(
        &extensions.join("fresh.ts"),
        &extension(
            "fresh_tool",
            "Just added.",
            "fresh",
            &[("fresh-cmd", "New")],
        ),
    );
    write(
        &s.cwd.join(".pi/extensions/project.ts"),
        &extension(
            "project_tool",
            "From the project.",
            "project",
            &[("project-cmd", "Project")],
        ),
    );
    reload_now(&mut rpc, "r");
    let mut listed = names(&extension_commands(&mut rpc, "c"))
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
    listed.sort();
    assert_eq!(listed, ["fresh-cmd", "project-cmd", "reload-now"]);
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "again"}));
    rpc.until(|r| r["type"] == "agent_settled");
    assert!(rpc.finish());

    let requests = s.requests();
    assert_eq!(requests.len(), 2);
    assert!(declared(&requests[0], "gone_tool").is_some());
    assert!(declared(&requests[0], "fresh_tool").is_none());
    assert!(declared(&requests[1], "gone_tool").is_none());
    assert_eq!(
        declared(&requests[1], "fresh_tool").unwrap()["description"],
        "Just added."
    );
    assert_eq!(
        declared(&requests[1], "project_tool").unwrap()["description"],
        "From the project."
    );
    // The built-in tools stay.
    assert!(declared(&requests[1], "read").is_some());
}

/// An extension that throws while loading after an edit: the reload reports it as an
/// `extension_error` naming the file and the error, the others load, and the agent goes on
/// answering prompts (without the broken extension's tool).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_broken_by_an_edit_is_reported_and_the_agent_goes_on() {
    let s = Setup::new(json!([{"text": "First."}, {"text": "Second."}])).await;
    let extensions = s.agent.join("extensions");
    write(
        &extensions.join("keeper.ts"),
        &extension("", "", "", &[("reload-now", "Reload")]),
    );
    let fragile = extensions.join("fragile.ts");
    write(
        &fragile,
        &extension("fragile_tool", "Fragile.", "fragile", &[]),
    );
    let mut rpc = Rpc::start(&s, &[]);
    rpc.send(json!({"id": "p0", "type": "prompt", "message": "hi"}));
    rpc.until(|r| r["type"] == "agent_settled");

    write(
        &fragile,
        "export default function () {\n  throw new Error(\"fragile broke on load\");\n}\n",
    );
    let seen = reload_now(&mut rpc, "r");
    let errors: Vec<&Value> = seen
        .iter()
        .filter(|r| r["type"] == "extension_error")
        .collect();
    assert_eq!(errors.len(), 1, "{seen:#?}");
    assert!(
        errors[0]["extensionPath"]
            .as_str()
            .unwrap()
            .ends_with("extensions/fragile.ts"),
        "{}",
        errors[0]
    );
    assert_eq!(errors[0]["event"], "load");
    assert!(
        errors[0]["error"]
            .as_str()
            .unwrap()
            .contains("fragile broke on load"),
        "{}",
        errors[0]
    );
    assert_eq!(names(&extension_commands(&mut rpc, "c")), ["reload-now"]);
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "again"}));
    let (_, seen) = rpc.until(|r| r["type"] == "agent_settled");
    assert!(
        seen.iter()
            .any(|r| r["type"] == "message_end" && r["message"]["role"] == "assistant"),
        "{seen:#?}"
    );
    assert!(rpc.finish());

    let requests = s.requests();
    assert_eq!(requests.len(), 2);
    assert!(declared(&requests[0], "fragile_tool").is_some());
    assert!(declared(&requests[1], "fragile_tool").is_none());
}

/// The interactive `/reload`: an edited extension's command shows its new text, a file
/// that now throws while loading is reported on screen, and the session goes on.
#[tokio::test(flavor = "multi_thread")]
async fn slash_reload_in_the_interactive_mode_loads_extensions_again() {
    if !tmux_common::enabled() {
        eprintln!("skipped: set PI_TUI_E2E=1 (needs tmux)");
        return;
    }
    let s = Setup::new(json!([{"text": "Answered after reload."}])).await;
    let extensions = s.agent.join("extensions");
    let greeter = extensions.join("greeter.ts");
    write(
        &greeter,
        &extension("", "", "", &[("greet", "Greeting from version one")]),
    );
    let fragile = extensions.join("fragile.ts");
    write(&fragile, &extension("", "", "", &[("fragile", "Fragile")]));
    let command = format!(
        "env PI_CODING_AGENT_DIR={} XDG_CACHE_HOME={} {} --session-dir {} --model fakeoai/fake-model; sleep 30",
        tmux_common::shell_quote(&s.agent),
        tmux_common::shell_quote(&s.agent.join("cache")),
        tmux_common::shell_quote(Path::new(pi_bin())),
        tmux_common::shell_quote(&s.sessions),
    );
    let tmux = tmux_common::Tmux::start(
        &format!("pi-ext-reload-{}", std::process::id()),
        &s.cwd,
        &command,
    );
    tmux.wait_for("fake-model");
    tmux.keys(&["/greet", "Enter"]);
    tmux.wait_for("Greeting from version one");

    write(
        &greeter,
        &extension("", "", "", &[("greet", "Greeting from version two")]),
    );
    write(
        &fragile,
        "export default function () {\n  throw new Error(\"KAPUTT\");\n}\n",
    );
    tmux.keys(&["/reload", "Enter"]);
    let screen = tmux.wait_for("KAPUTT");
    assert!(screen.contains("Extension error"), "{screen}");
    tmux.wait_for("Reloaded keybindings, extensions");
    tmux.keys(&["/greet", "Enter"]);
    tmux.wait_for("Greeting from version two");
    tmux.keys(&["hello", "Enter"]);
    tmux.wait_for("Answered after reload.");
    assert!(tmux.alive());
}
