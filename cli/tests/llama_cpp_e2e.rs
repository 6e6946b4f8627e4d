//! The `llama.cpp` provider against a fake llama.cpp router on 127.0.0.1
//! (`pi_fake_llm::llama`): which router models `--list-models` shows per state, a print-mode
//! prompt to a loaded model, the load/unload requests, `pi auth login llama.cpp`, and the
//! `-builtin:llama.cpp` switch.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use pi_agent::llm::llama_cpp::RouterClient;
use pi_fake_llm::llama::RouterModelSpec;
use pi_fake_llm::{FakeLlm, Script, Turn};
use serde_json::json;

/// The router's models: one per state, a decision model, and an unloaded preset.
fn router_models() -> Vec<RouterModelSpec> {
    let mut qwen = RouterModelSpec::new("qwen-loaded", "loaded");
    qwen.n_ctx = Some(32768);
    qwen.chat_template = Some("{% if enable_thinking %}<think>{% endif %}".into());
    let mut gemma = RouterModelSpec::new("gemma-sleeping", "sleeping");
    gemma.input_modalities = vec!["text".into(), "image".into()];
    let mut preset = RouterModelSpec::new("preset-unloaded", "unloaded");
    preset.source = Some("preset".into());
    let mut dir = RouterModelSpec::new("dir-unloaded", "unloaded");
    dir.source = Some("models_dir".into());
    let mut jev = RouterModelSpec::new("jev-decision", "loaded");
    jev.output_modalities = vec!["decisions".into()];
    vec![qwen, gemma, preset, dir, jev]
}

/// A fresh agent dir (and home) for one run.
struct Home {
    tmp: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("agent")).unwrap();
        Home { tmp }
    }

    fn agent(&self) -> std::path::PathBuf {
        self.tmp.path().join("agent")
    }

    fn pi(&self, vars: &[(&str, &str)]) -> Command {
        let mut cmd = Command::cargo_bin("pi").unwrap();
        cmd.env_clear()
            .env("HOME", self.tmp.path())
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PI_CODING_AGENT_DIR", self.agent())
            .envs(vars.iter().copied())
            .current_dir(self.tmp.path())
            .timeout(Duration::from_secs(60));
        cmd
    }
}

/// The `llama.cpp` rows of `--list-models`: (model, context, thinking, images).
fn llama_rows(stdout: &[u8]) -> Vec<Vec<String>> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter(|l| l.starts_with("llama.cpp "))
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            vec![cols[1], cols[2], cols[4], cols[5]]
                .into_iter()
                .map(str::to_string)
                .collect()
        })
        .collect()
}

fn row(cols: [&str; 4]) -> Vec<String> {
    cols.iter().map(|c| c.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn list_models_shows_loaded_and_sleeping_and_autoload_presets() {
    let fake = FakeLlm::start_router(Script::default(), router_models(), false)
        .await
        .unwrap();
    let url = format!("{}/v1", fake.base_url());
    let home = Home::new();
    let out = home
        .pi(&[("LLAMA_BASE_URL", &url)])
        .args(["--list-models", "llama"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Loaded and sleeping chat models; not the decision model, not unloaded or loading
    // ones (the router does not load on first use here).
    assert_eq!(
        llama_rows(&out.stdout),
        vec![
            row(["gemma-sleeping", "4.1K", "no", "yes"]),
            row(["qwen-loaded", "32.8K", "yes", "no"]),
        ]
    );
    // No key configured: Pi's placeholder goes to the router. Whether unloaded presets
    // count is the router's `/props` (`models_autoload`), asked once.
    let calls = fake.router_calls();
    assert_eq!(calls[0].path, "/models");
    assert_eq!(calls[0].authorization.as_deref(), Some("Bearer local"));
    assert!(calls.iter().filter(|c| c.path == "/props").count() <= 1);
    // Only the loaded model is asked for its chat template (a sleeping one would wake).
    assert!(calls
        .iter()
        .any(|c| c.path == "/props?model=qwen-loaded&autoload=false"));
    assert!(!calls.iter().any(|c| c.path.contains("gemma")));

    // With router autoload, unloaded presets are offered too (they load when used).
    let auto = FakeLlm::start_router(Script::default(), router_models(), true)
        .await
        .unwrap();
    let out = home
        .pi(&[("LLAMA_BASE_URL", &auto.base_url())])
        .args(["--list-models", "llama"])
        .output()
        .unwrap();
    let names: Vec<String> = llama_rows(&out.stdout)
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(names, ["gemma-sleeping", "preset-unloaded", "qwen-loaded"]);
    assert!(auto.router_calls().iter().any(|c| c.path == "/props"));

    // Without LLAMA_BASE_URL or a login the provider is not configured: no request.
    let quiet = FakeLlm::start_router(Script::default(), router_models(), true)
        .await
        .unwrap();
    let out = home
        .pi(&[])
        .args(["--list-models", "llama"])
        .output()
        .unwrap();
    assert!(llama_rows(&out.stdout).is_empty());
    assert!(quiet.router_calls().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn print_prompt_to_a_loaded_model_with_a_stored_login() {
    let fake = FakeLlm::start_router(
        Script::turns(vec![Turn::text("Hello from llama.cpp")]),
        router_models(),
        false,
    )
    .await
    .unwrap();
    let home = Home::new();
    // What `/login llama.cpp` stores (Pi's shape).
    std::fs::write(
        home.agent().join("auth.json"),
        json!({"llama.cpp": {"type": "api_key", "key": "router-secret",
            "env": {"LLAMA_BASE_URL": fake.base_url()}}})
        .to_string(),
    )
    .unwrap();
    let out = home
        .pi(&[])
        .args([
            "--no-session",
            "--provider",
            "llama.cpp",
            "--model",
            "qwen-loaded",
            "-p",
            "Say hello",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Hello from llama.cpp\n"
    );
    let chats = fake.requests();
    assert_eq!(chats.len(), 1);
    assert_eq!(chats[0].path, "/v1/chat/completions");
    assert_eq!(chats[0].body["model"], "qwen-loaded");
    assert_eq!(chats[0].body["stream"], true);
    assert!(
        chats[0].body.get("max_tokens").is_some(),
        "{}",
        chats[0].body
    );
    assert!(chats[0].headers.contains_key("authorization"));
    assert!(fake
        .router_calls()
        .iter()
        .all(|c| c.authorization.as_deref() == Some("Bearer router-secret")));

    // An unloaded model is not offered, so it is not found.
    let out = home
        .pi(&[])
        .args([
            "--no-session",
            "--provider",
            "llama.cpp",
            "--model",
            "dir-unloaded",
        ])
        .args(["-p", "hi"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
}

#[tokio::test(flavor = "multi_thread")]
async fn load_and_unload_send_the_model_and_wait_for_the_state() {
    let fake = FakeLlm::start_router(Script::default(), router_models(), false)
        .await
        .unwrap();
    let client = RouterClient::new(&fake.base_url(), None, Duration::from_secs(5));
    client.load_and_wait("dir-unloaded").await.unwrap();
    client.unload_and_wait("qwen-loaded").await.unwrap();
    let calls = fake.router_calls();
    let posts: Vec<(String, serde_json::Value)> = calls
        .iter()
        .filter(|c| c.method == "POST")
        .map(|c| (c.path.clone(), c.body.clone()))
        .collect();
    assert_eq!(
        posts,
        vec![
            ("/models/load".to_string(), json!({"model": "dir-unloaded"})),
            (
                "/models/unload".to_string(),
                json!({"model": "qwen-loaded"})
            ),
        ]
    );
    // The load was waited for: the list was read until the model left `loading`.
    let lists_after_load = calls
        .iter()
        .skip_while(|c| c.path != "/models/load")
        .take_while(|c| c.path != "/models/unload")
        .filter(|c| c.path == "/models")
        .count();
    assert_eq!(lists_after_load, 2);
    let states: Vec<(String, String)> = fake
        .router_models()
        .into_iter()
        .map(|m| (m.id, m.status))
        .filter(|(id, _)| id == "dir-unloaded" || id == "qwen-loaded")
        .collect();
    assert_eq!(
        states,
        [
            ("qwen-loaded".to_string(), "unloaded".to_string()),
            ("dir-unloaded".to_string(), "loaded".to_string())
        ]
    );

    // A model whose process exits: the wait ends with the router's failure.
    let mut broken = RouterModelSpec::new("broken", "unloaded");
    broken.fail_load = true;
    let fake = FakeLlm::start_router(Script::default(), vec![broken], false)
        .await
        .unwrap();
    let client = RouterClient::new(&fake.base_url(), None, Duration::from_secs(5));
    let err = client.load_and_wait("broken").await.unwrap_err();
    assert_eq!(err.to_string(), "Model exited with code 1");
    // An unknown model: the router's own message.
    let err = client.load("nope").await.unwrap_err();
    assert_eq!(err.to_string(), "model not found: nope");
}

fn write_settings(agent: &Path, settings: serde_json::Value) {
    std::fs::write(agent.join("settings.json"), settings.to_string()).unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn builtin_switch_removes_the_provider() {
    let fake = FakeLlm::start_router(Script::default(), router_models(), false)
        .await
        .unwrap();
    let home = Home::new();
    let url = fake.base_url();
    write_settings(&home.agent(), json!({"extensions": ["-builtin:llama.cpp"]}));
    let out = home
        .pi(&[("LLAMA_BASE_URL", &url)])
        .args(["--list-models", "llama"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(llama_rows(&out.stdout).is_empty());
    assert!(fake.router_calls().is_empty(), "the router is not asked");

    // `-e builtin:llama.cpp` loads it explicitly, whatever the settings say.
    let out = home
        .pi(&[("LLAMA_BASE_URL", &url)])
        .args([
            "--no-extensions",
            "-e",
            "builtin:llama.cpp",
            "--list-models",
            "llama",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(llama_rows(&out.stdout).len(), 2);

    // `--no-extensions` alone turns it off too.
    write_settings(&home.agent(), json!({}));
    let out = home
        .pi(&[("LLAMA_BASE_URL", &url)])
        .args(["--no-extensions", "--list-models", "llama"])
        .output()
        .unwrap();
    assert!(llama_rows(&out.stdout).is_empty());
}
