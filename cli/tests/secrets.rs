//! API keys never leave the process except in the provider's auth header: not in session
//! files, exports, listings, error messages or anything else a run writes. The test runs
//! real `pi` processes against the fake LLM with a recognisable key from each source
//! (`--api-key`, auth.json, the environment, models.json) and greps every byte produced.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pi_fake_llm::{FakeLlm, Script};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/realpi");

const CLI_KEY: &str = "sk-cli-SECRET-4f1d9a7c2b6e8d0f";
const AUTH_KEY: &str = "sk-auth-SECRET-9a8b7c6d5e4f3a2b";
const ENV_KEY: &str = "sk-env-SECRET-0a1b2c3d4e5f6a7b";
const MODELS_KEY: &str = "sk-models-SECRET-13579bdf02468ace";

struct Run {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    agent: PathBuf,
    cwd: PathBuf,
    sessions: PathBuf,
    fake: FakeLlm,
    outputs: Vec<u8>,
}

impl Run {
    async fn new(models_key: &str) -> Run {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let (agent, cwd, sessions) = (root.join("agent"), root.join("cwd"), root.join("sessions"));
        for d in [&agent, &cwd, &sessions] {
            std::fs::create_dir_all(d).unwrap();
        }
        let script: Script = serde_json::from_value(json!({"turns": [
            {"tool_calls": [{"name": "bash", "arguments": {"command": "echo tool ran; env | grep -c SECRET || true"}}]},
            {"text": "Done."},
            {"text": "Second."},
            {"text": "Third."}
        ]}))
        .unwrap();
        let fake = FakeLlm::start(script).await.unwrap();
        let models = std::fs::read_to_string(format!("{FIXTURES}/tricky/agent/models.json"))
            .unwrap()
            .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()))
            .replace("\"fake-key\"", &format!("\"{models_key}\""));
        let mut models: serde_json::Value = serde_json::from_str(&models).unwrap();
        // A provider nobody listens for: its connection error must not quote the key.
        let mut dead = models["providers"]["fakeoai"].clone();
        dead["baseUrl"] = json!("http://127.0.0.1:1/v1");
        models["providers"]["dead"] = dead;
        std::fs::write(agent.join("models.json"), models.to_string()).unwrap();
        Run {
            _tmp: tmp,
            root,
            agent,
            cwd,
            sessions,
            fake,
            outputs: Vec::new(),
        }
    }

    fn pi(&mut self, args: &[&str], envs: &[(&str, &str)]) -> std::process::Output {
        let out = Command::new(env!("CARGO_BIN_EXE_pi"))
            .arg("--session-dir")
            .arg(&self.sessions)
            .args(args)
            .current_dir(&self.cwd)
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .env_remove("PI_SESSION_STORE")
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        self.outputs.extend_from_slice(&out.stdout);
        self.outputs.extend_from_slice(&out.stderr);
        out
    }

    fn sessions_cmd(&mut self, args: &[&str]) -> std::process::Output {
        let out = Command::new(env!("CARGO_BIN_EXE_pi"))
            .arg("sessions")
            .args(args)
            .current_dir(&self.cwd)
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .output()
            .unwrap();
        self.outputs.extend_from_slice(&out.stdout);
        self.outputs.extend_from_slice(&out.stderr);
        out
    }

    /// Every file under the run's root (agent dir with auth.json excluded), plus all output.
    fn assert_no_secret(&self, secrets: &[&str]) {
        let mut files = Vec::new();
        collect(&self.root, &mut files);
        for secret in secrets {
            let needle = secret.as_bytes();
            assert!(
                !contains(&self.outputs, needle),
                "{secret} appeared in pi's output"
            );
            for f in &files {
                if f.file_name()
                    .is_some_and(|n| n == "auth.json" || n == "models.json")
                {
                    continue; // where the user put it
                }
                let bytes = std::fs::read(f).unwrap_or_default();
                assert!(
                    !contains(&bytes, needle),
                    "{secret} written to {}",
                    f.display()
                );
            }
        }
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_never_leave_the_process() {
    let mut run = Run::new(MODELS_KEY).await;
    // auth.json, owner-only, as `pi` itself writes it.
    let auth = run.agent.join("auth.json");
    std::fs::write(
        &auth,
        json!({"fakeoai": {"type": "api_key", "key": AUTH_KEY}}).to_string(),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&auth, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    // A tool-using turn with every key source present at once.
    let out = run.pi(
        &[
            "--model",
            "fakeoai/fake-model",
            "--api-key",
            CLI_KEY,
            "-p",
            "run the tool",
        ],
        &[("OPENAI_API_KEY", ENV_KEY)],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The run reached the provider and ran the tool, so the checks below are not vacuous.
    assert!(run.fake.requests().len() >= 2);
    let session = std::fs::read_dir(&run.sessions)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();

    // More runs: JSON mode continuing the session, and an unreachable provider (error text).
    let out = run.pi(
        &[
            "--model",
            "fakeoai/fake-model",
            "--api-key",
            CLI_KEY,
            "--mode",
            "json",
            "-c",
            "again",
        ],
        &[],
    );
    assert!(out.status.success());
    let out = run.pi(
        &[
            "--model",
            "dead/fake-model",
            "--api-key",
            CLI_KEY,
            "-p",
            "fails",
        ],
        &[],
    );
    assert!(!out.status.success(), "an unreachable provider is an error");
    assert!(!out.stderr.is_empty());

    // Everything that reads sessions back.
    let file = session.to_string_lossy().to_string();
    for args in [
        vec!["inspect", "--json", file.as_str()],
        vec!["show", file.as_str()],
        vec!["verify", file.as_str()],
        vec!["list", "--all", "--json"],
    ] {
        run.sessions_cmd(&args);
    }
    for format in ["jsonl", "html", "md"] {
        let out_file = run.root.join(format!("export.{format}"));
        let out_path = out_file.to_string_lossy().to_string();
        let out = run.sessions_cmd(&["export", file.as_str(), "--format", format, "-o", &out_path]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    run.assert_no_secret(&[CLI_KEY, AUTH_KEY, ENV_KEY, MODELS_KEY]);
}
