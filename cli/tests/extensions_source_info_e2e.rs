//! End to end, side by side with real Pi 1.6.0: where tools, commands, prompt templates and
//! skills come from (`sourceInfo`: `builtin`, `auto`, `local`, `cli` or a package's source;
//! `user`/`project`/`temporary`; `top-level`/`package`; base dir and changelog), as
//! `pi.getAllTools()` and `pi.getCommands()` give it to extensions and RPC's `get_commands`
//! to clients, and the order Pi loads extensions in (`-e` first, then project settings,
//! project discovery, user settings, user discovery, packages).
//!
//! The layout (fixtures/extensions/source-info/layout) has a resource of every provenance;
//! real Pi's answers were recorded by scripts/source-info-record.sh into realpi.json, with
//! the run's directory written as "W".

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

const LAYOUT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../fixtures/extensions/source-info"
);

/// The fixture directory without `..` (as paths in the answers are).
fn layout() -> std::path::PathBuf {
    Path::new(LAYOUT).canonicalize().unwrap()
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// A run's set-up with the layout beside the agent dir and cwd (`W/agent`, `W/cwd`, `W/pkg`…).
async fn setup() -> Setup {
    let s = Setup::new(json!([{"text": "done"}])).await;
    copy_tree(&Path::new(LAYOUT).join("layout"), s.cwd.parent().unwrap());
    s
}

/// The arguments of the recording: a `-e` file and directory, `--skill`, `--prompt-template`.
fn args(recorder: &str) -> Vec<&str> {
    vec![
        "--approve",
        "-e",
        recorder,
        "-e",
        "./../pkg2",
        "--skill",
        "./cli-skill",
        "--prompt-template",
        "./cli-prompt.md",
    ]
}

/// `value` with the run's directory written as real Pi's recording writes it.
fn normalized(value: &Value, s: &Setup) -> Value {
    let root = s.cwd.parent().unwrap().display().to_string();
    let text = serde_json::to_string(value)
        .unwrap()
        .replace(&root, "W")
        .replace(&layout().display().to_string(), "FIXTURE");
    serde_json::from_str(&text).unwrap()
}

fn recorded() -> Value {
    let text = std::fs::read_to_string(format!("{LAYOUT}/realpi.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extensions_see_where_every_tool_and_command_comes_from() {
    let s = setup().await;
    let recorder = layout().join("recorder.ts").display().to_string();
    let mut all = args(&recorder);
    all.extend(["-p", "hi"]);
    let (code, _, err) = s.pi(&all);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(s.cwd.join("source-info.json")).unwrap();
    let ours = normalized(&serde_json::from_str(&text).unwrap(), &s);
    let mut pi = recorded()["print"].clone();
    // Pi lists its Windows-only `powershell` tool everywhere; this build has none.
    pi["tools"]
        .as_array_mut()
        .unwrap()
        .retain(|t| t["name"] != "powershell");
    let names = |v: &Value, key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    // The extensions' tools and commands in Pi's load order.
    assert_eq!(names(&ours, "tools"), names(&pi, "tools"));
    assert_eq!(names(&ours, "commands"), names(&pi, "commands"));
    for key in ["tools", "commands"] {
        for (ours, pi) in ours[key]
            .as_array()
            .unwrap()
            .iter()
            .zip(pi[key].as_array().unwrap())
        {
            assert_eq!(ours, pi, "{key}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_get_commands_gives_each_commands_source_info() {
    let s = setup().await;
    let recorder = layout().join("recorder.ts").display().to_string();
    let mut rpc = Rpc::start(&s, &args(&recorder));
    rpc.send(json!({"id": "c", "type": "get_commands"}));
    let commands = rpc.response("c")["data"]["commands"].clone();
    assert!(rpc.finish());
    let ours = normalized(&commands, &s);
    let pi = recorded()["rpc"].clone();
    assert_eq!(ours.as_array().unwrap().len(), pi.as_array().unwrap().len());
    for (ours, pi) in ours.as_array().unwrap().iter().zip(pi.as_array().unwrap()) {
        assert_eq!(ours, pi);
    }
}
