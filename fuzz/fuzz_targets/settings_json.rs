//! settings.json (global and project) as a user might leave them: loaded from
//! files like the CLI does (errors with line and column), merged, migrated, and
//! read through every typed getter; then the same documents held in memory and
//! written to, which must not touch the disk.
//!
//! Input: `global \0 project` (the project file is absent without a `\0`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use pi_agent::config::{project_config_dir, Settings};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::OnceLock;

fn dirs() -> &'static (PathBuf, PathBuf) {
    static DIRS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    DIRS.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("pi-fuzz-settings-{}", std::process::id()));
        let agent = base.join("agent");
        let cwd = base.join("project");
        std::fs::create_dir_all(&agent).expect("agent dir");
        std::fs::create_dir_all(project_config_dir(&cwd)).expect("project dir");
        (agent, cwd)
    })
}

fn read_all(s: &Settings) {
    let _ = s.errors().len();
    let _ = s.merged().len();
    let _ = s.compaction(None);
    let _ = s.compaction(Some(("anthropic", "claude-sonnet-4-5")));
    let _ = s.branch_summary();
    let _ = s.retry();
    let _ = s.provider_max_retry_delay_ms();
    let _ = s.default_provider();
    let _ = s.default_model();
    let _ = s.default_thinking_level();
    let _ = s.model_thinking_level("anthropic", "claude-sonnet-4-5");
    let _ = s.steering_mode();
    let _ = s.follow_up_mode();
    let _ = s.session_dir();
    let _ = s.session_store();
    let _ = s.shell_path();
    let _ = s.shell_command_prefix();
    let _ = s.quiet_startup();
    let _ = s.theme();
    let _ = s.tree_filter_mode();
    let _ = s.enabled_models();
    let _ = s.block_images();
    let _ = s.image_auto_resize();
    let _ = s.hide_thinking_block();
    let _ = s.enable_skill_commands();
    let _ = s.skill_paths();
    let _ = s.prompt_paths();
    let _ = s.default_tools();
    let _ = s.default_project_trust();
    let _ = s.get("compaction.keepRecentTokens");
}

fuzz_target!(|data: &[u8]| {
    let (global, project) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    let (agent, cwd) = dirs();
    let project_file = project_config_dir(cwd).join("settings.json");
    std::fs::write(agent.join("settings.json"), global).expect("write global");
    match project {
        Some(p) => std::fs::write(&project_file, p).expect("write project"),
        None => {
            let _ = std::fs::remove_file(&project_file);
        }
    }
    let loaded = Settings::load(agent, cwd, true);
    read_all(&loaded);

    let parse = |b: &[u8]| serde_json::from_slice::<Value>(b).unwrap_or(Value::Null);
    let project_value = project.map(parse).unwrap_or(Value::Null);
    let mut memory = Settings::in_memory(parse(global), project_value.clone());
    read_all(&memory);
    memory.apply_overrides(project_value);
    let _ = memory.set_global(&["compaction", "keepRecentTokens"], Some(Value::from(1)));
    let _ = memory.set_project(&["theme"], None);
    read_all(&memory);
});
