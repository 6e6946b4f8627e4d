//! Pi packages end to end with real processes and no network: `pi install` from a local npm
//! tarball (`npm pack` of a fixture package, `npm:<name>@file:<tarball>`), from local git
//! repositories (reached through git's `url.<base>.insteadOf`, so the source is spelled
//! `git:example.test/user/<repo>` exactly as for a hosted repository) pinned and unpinned, and
//! from a local path; `pi list`, `pi update`, `pi remove`, `pi config`, resource filters in
//! settings, and project packages (`-l`) behind project trust. A run against the fake LLM
//! shows the package's extension tool, skill and prompt template loaded. Needs `node`, `npm`
//! and `git` on PATH (CI installs them).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use pi_fake_llm::{FakeLlm, Script};
use serde_json::{json, Value};

const REALPI: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/realpi");

const EXTENSION: &str = r#"import { Type } from "@earendil-works/pi-ai";
import { defineTool } from "@earendil-works/pi-coding-agent";

export default function (pi) {
	pi.registerTool(defineTool({
		name: "TOOL",
		label: "Package tool",
		description: "A tool from a package",
		parameters: Type.Object({}),
		async execute() {
			return { content: [{ type: "text", text: "ok" }], details: {} };
		},
	}));
}
"#;

struct Setup {
    tmp: tempfile::TempDir,
    agent: PathBuf,
    cwd: PathBuf,
    home: PathBuf,
    fake: FakeLlm,
}

impl Setup {
    async fn new(turns: Value) -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let cwd = tmp.path().join("cwd");
        let home = tmp.path().join("home");
        for d in [&agent, &cwd, &home, &tmp.path().join("sessions")] {
            std::fs::create_dir_all(d).unwrap();
        }
        let script: Script = serde_json::from_value(json!({ "turns": turns })).unwrap();
        let fake = FakeLlm::start(script).await.unwrap();
        let models = std::fs::read_to_string(format!("{REALPI}/tricky/agent/models.json"))
            .unwrap()
            .replace("127.0.0.1:18765", &format!("127.0.0.1:{}", fake.port()));
        std::fs::write(agent.join("models.json"), models).unwrap();
        Setup {
            tmp,
            agent,
            cwd,
            home,
            fake,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// `pi` with the test's agent dir and home; git reaches `https://example.test/…` in the
    /// temp dir's `repos/`, npm stays offline.
    fn pi(&self, args: &[&str]) -> (i32, String, String) {
        self.pi_in(&self.cwd, args)
    }

    fn pi_in(&self, cwd: &Path, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_pi"))
            .args(args)
            .current_dir(cwd)
            .env("PI_CODING_AGENT_DIR", &self.agent)
            .env("HOME", &self.home)
            .env("XDG_CACHE_HOME", self.agent.join("cache"))
            .env("npm_config_offline", "true")
            .env("npm_config_cache", self.path("npm-cache"))
            .env("npm_config_update_notifier", "false")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_COUNT", "1")
            .env(
                "GIT_CONFIG_KEY_0",
                format!("url.file://{}/.insteadOf", self.path("repos").display()),
            )
            .env("GIT_CONFIG_VALUE_0", "https://example.test/")
            .env_remove("PI_OFFLINE")
            .env_remove("PI_CODING_AGENT_SESSION_DIR")
            .env_remove("PI_SESSION_STORE")
            .stdin(Stdio::null())
            .output()
            .expect("run pi");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// A prompt run against the fake LLM; returns the provider request.
    fn prompt(&self, cwd: &Path, extra: &[&str], prompt: &str) -> Value {
        let before = self.fake.requests().len();
        let sessions = self.path("sessions");
        let mut args = vec![
            "--session-dir",
            sessions.to_str().unwrap(),
            "--model",
            "fakeoai/fake-model",
        ];
        args.extend_from_slice(extra);
        args.extend(["-p", prompt]);
        let (code, stdout, stderr) = self.pi_in(cwd, &args);
        assert_eq!(code, 0, "{stdout}{stderr}");
        self.fake.requests()[before].body.clone()
    }
}

/// A package with an extension tool, a skill and a prompt template.
fn make_package(dir: &Path, name: &str, tool: &str, skill_description: &str) {
    let write = |rel: &str, text: &str| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        "package.json",
        &json!({"name": name, "version": "1.0.0", "keywords": ["pi-package"]}).to_string(),
    );
    write("extensions/tool.ts", &EXTENSION.replace("TOOL", tool));
    write(
        "skills/greet/SKILL.md",
        &format!("---\nname: greet-{tool}\ndescription: {skill_description}\n---\nSay hello.\n"),
    );
    write(
        "prompts/review.md",
        "---\ndescription: Review something\n---\nPlease review $1 carefully.\n",
    );
}

/// The fixture package (tool `pkg_hello`, a skill "Greets people warmly", a template) packed
/// by npm into a tarball; its `npm:` source.
fn fixture_tarball(s: &Setup) -> String {
    let pkg = s.path("fixpkg");
    make_package(&pkg, "pi-fixture-pkg", "pkg_hello", "Greets people warmly");
    let packs = s.path("packs");
    std::fs::create_dir_all(&packs).unwrap();
    run(
        "npm",
        &[
            "pack",
            "--silent",
            "--pack-destination",
            packs.to_str().unwrap(),
        ],
        &pkg,
    );
    let tarball = packs.join("pi-fixture-pkg-1.0.0.tgz");
    assert!(tarball.exists());
    format!("npm:pi-fixture-pkg@file:{}", tarball.display())
}

fn run(cmd: &str, args: &[&str], cwd: &Path) -> String {
    let out = Command::new(cmd)
        .args(args)
        .current_dir(cwd)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("npm_config_offline", "true")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn commit(repo: &Path, message: &str) -> String {
    run("git", &["add", "-A"], repo);
    run(
        "git",
        &[
            "-c",
            "user.email=t@e.st",
            "-c",
            "user.name=t",
            "commit",
            "-qm",
            message,
        ],
        repo,
    );
    run("git", &["rev-parse", "HEAD"], repo)
}

fn git_repo(dir: &Path, name: &str, tool: &str, description: &str) -> String {
    make_package(dir, name, tool, description);
    run("git", &["init", "-q", "-b", "main"], dir);
    commit(dir, "one")
}

fn system_prompt(request: &Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn declares(request: &Value, tool: &str) -> bool {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["function"]["name"] == tool)
}

fn last_user_text(request: &Value) -> String {
    let m = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap();
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        other => other.to_string(),
    }
}

fn settings(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_tarball_install_list_load_filter_and_remove() {
    let s = Setup::new(json!([{"text": "one"}, {"text": "two"}])).await;
    let source = fixture_tarball(&s);

    let (code, stdout, stderr) = s.pi(&["install", &source]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.starts_with(&format!("Installing {source}...\n")),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(&format!("Installed {source}\n")),
        "{stdout}"
    );
    let installed = s.agent.join("npm/node_modules/pi-fixture-pkg");
    assert!(installed.join("extensions/tool.ts").exists());
    assert_eq!(
        std::fs::read_to_string(s.agent.join("npm/.gitignore")).unwrap(),
        "*\n!.gitignore\n"
    );
    assert_eq!(
        settings(&s.agent.join("settings.json"))["packages"],
        json!([source])
    );

    let (code, stdout, _) = s.pi(&["list"]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        format!("User packages:\n  {source}\n    {}\n", installed.display())
    );

    // Installing again changes nothing in the settings.
    let (code, _, _) = s.pi(&["install", &source]);
    assert_eq!(code, 0);
    assert_eq!(
        settings(&s.agent.join("settings.json"))["packages"],
        json!([source])
    );

    // The package's extension tool, skill and prompt template load.
    let request = s.prompt(&s.cwd, &[], "/review code");
    assert!(declares(&request, "pkg_hello"), "{request}");
    assert!(system_prompt(&request).contains("Greets people warmly"));
    assert_eq!(last_user_text(&request), "Please review code carefully.");

    // Without a terminal `pi config` prints its list in Pi's layout.
    let (code, stdout, _) = s.pi(&["config"]);
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        format!(
            "Global Resources\n~/.pi/agent/settings.json\n\n  {source} (user)\n    Extensions\n      [x] tool.ts\n    Skills\n      [x] greet\n    Prompts\n      [x] review.md\n"
        )
    );

    // The object form narrows the package: no skills, not this extension.
    std::fs::write(
        s.agent.join("settings.json"),
        json!({"packages": [{"source": source, "skills": [], "extensions": ["-extensions/tool.ts"]}]})
            .to_string(),
    )
    .unwrap();
    let (_, stdout, _) = s.pi(&["list"]);
    assert!(
        stdout.contains(&format!("  {source} (filtered)\n")),
        "{stdout}"
    );
    let (_, stdout, _) = s.pi(&["config"]);
    assert!(stdout.contains("[ ] tool.ts"), "{stdout}");
    assert!(stdout.contains("[ ] greet"), "{stdout}");
    assert!(stdout.contains("[x] review.md"), "{stdout}");
    let request = s.prompt(&s.cwd, &[], "/review it");
    assert!(!declares(&request, "pkg_hello"));
    assert!(!system_prompt(&request).contains("Greets people warmly"));
    assert_eq!(last_user_text(&request), "Please review it carefully.");

    let (code, stdout, stderr) = s.pi(&["remove", "npm:pi-fixture-pkg"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.ends_with("Removed npm:pi-fixture-pkg\n"), "{stdout}");
    assert!(!installed.exists());
    assert_eq!(
        settings(&s.agent.join("settings.json"))["packages"],
        json!([])
    );
    let (code, _, stderr) = s.pi(&["uninstall", "npm:pi-fixture-pkg"]);
    assert_eq!(code, 1);
    assert_eq!(stderr, "No matching package found for npm:pi-fixture-pkg\n");
    let (_, stdout, _) = s.pi(&["list"]);
    assert_eq!(stdout, "No packages installed.\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_packages_pinned_and_unpinned_update() {
    let s = Setup::new(json!([{"text": "ok"}])).await;
    let pinned_repo = s.path("repos/user/pinned");
    let moving_repo = s.path("repos/user/moving");
    let pinned_v1 = git_repo(
        &pinned_repo,
        "pinned",
        "pinned_tool",
        "Pinned skill version one",
    );
    run("git", &["tag", "v1"], &pinned_repo);
    let moving_v1 = git_repo(
        &moving_repo,
        "moving",
        "moving_tool",
        "Moving skill version one",
    );

    for source in [
        "git:example.test/user/pinned@v1",
        "git:example.test/user/moving",
    ] {
        let (code, stdout, stderr) = s.pi(&["install", source]);
        assert_eq!(code, 0, "{stdout}{stderr}");
        assert!(
            stdout.ends_with(&format!("Installed {source}\n")),
            "{stdout}"
        );
    }
    let pinned = s.agent.join("git/example.test/user/pinned");
    let moving = s.agent.join("git/example.test/user/moving");
    let head = |dir: &Path| run("git", &["rev-parse", "HEAD"], dir);
    assert_eq!(head(&pinned), pinned_v1);
    assert_eq!(head(&moving), moving_v1);
    let (_, stdout, _) = s.pi(&["list"]);
    assert_eq!(
        stdout,
        format!(
            "User packages:\n  git:example.test/user/pinned@v1\n    {}\n  git:example.test/user/moving\n    {}\n",
            pinned.display(),
            moving.display()
        )
    );

    // Both repositories move on; only the unpinned checkout follows.
    for (repo, name) in [(&pinned_repo, "pinned"), (&moving_repo, "moving")] {
        let skill = repo.join("skills/greet/SKILL.md");
        let text = std::fs::read_to_string(&skill)
            .unwrap()
            .replace("version one", "version two");
        std::fs::write(&skill, text).unwrap();
        commit(repo, &format!("{name} two"));
    }
    let moving_v2 = head(&moving_repo);
    let (code, stdout, stderr) = s.pi(&["update", "--extensions"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.ends_with(&format!(
            "Updated 1 package:\n  git:example.test/user/moving {} -> {}\n",
            &moving_v1[..7],
            &moving_v2[..7]
        )),
        "{stdout}"
    );
    assert_eq!(head(&moving), moving_v2);
    assert_eq!(head(&pinned), pinned_v1);
    let (code, stdout, _) = s.pi(&["update", "git:example.test/user/moving"]);
    assert_eq!(code, 0);
    assert!(stdout.ends_with("git:example.test/user/moving is already up to date\n"));
    let (code, _, stderr) = s.pi(&["update", "example.test/user/moving"]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "Error: No matching package found for example.test/user/moving. Did you mean git:example.test/user/moving?\n"
    );

    let request = s.prompt(&s.cwd, &[], "hi");
    let system = system_prompt(&request);
    assert!(system.contains("Moving skill version two"), "{system}");
    assert!(system.contains("Pinned skill version one"), "{system}");
    assert!(declares(&request, "moving_tool") && declares(&request, "pinned_tool"));

    let (code, _, _) = s.pi(&["remove", "git:example.test/user/moving"]);
    assert_eq!(code, 0);
    assert!(!moving.exists());
    assert!(pinned.exists());
    let (code, _, _) = s.pi(&["remove", "git:example.test/user/pinned"]);
    assert_eq!(code, 0);
    // Empty parents go too, up to the git root.
    assert!(!s.agent.join("git/example.test").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn project_packages_wait_for_trust() {
    let s = Setup::new(json!([{"text": "a"}, {"text": "b"}])).await;
    let pkg = s.path("localpkg");
    make_package(
        &pkg,
        "local-pkg",
        "local_tool",
        "Project skill from a package",
    );
    let project = s.path("project");
    std::fs::create_dir_all(&project).unwrap();

    // A project without local files is trusted, so `-l` may write its settings.
    let (code, stdout, stderr) = s.pi_in(&project, &["install", "-l", "../localpkg"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert_eq!(stdout, "Installing ../localpkg...\nInstalled ../localpkg\n");
    assert_eq!(
        settings(&project.join(".pi/settings.json"))["packages"],
        json!(["../../localpkg"])
    );

    // Now the project has settings, and nothing trusted it: they are ignored.
    let (_, stdout, _) = s.pi_in(&project, &["list"]);
    assert_eq!(stdout, "No packages installed.\n");
    let request = s.prompt(&project, &[], "hi");
    assert!(!system_prompt(&request).contains("Project skill from a package"));
    assert!(!declares(&request, "local_tool"));
    let (code, _, stderr) = s.pi_in(&project, &["install", "-l", "../localpkg"]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "Project is not trusted. Use --approve to modify local package config.\n"
    );

    // Trusted for one run, they load.
    let (_, stdout, _) = s.pi_in(&project, &["list", "--approve"]);
    assert_eq!(
        stdout,
        format!(
            "Project packages:\n  ../../localpkg\n    {}\n",
            pkg.display()
        )
    );
    let request = s.prompt(&project, &["--approve"], "hi");
    assert!(system_prompt(&request).contains("Project skill from a package"));
    assert!(declares(&request, "local_tool"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_errors_match_pi() {
    let s = Setup::new(json!([])).await;
    let (code, _, stderr) = s.pi(&["install"]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "Missing install source.\nUsage: pi install <source> [-l] [--approve|--no-approve]\n"
    );
    let (code, _, stderr) = s.pi(&["list", "--bogus"]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "Unknown option --bogus for \"list\".\nUse \"pi --help\" or \"pi list [--approve|--no-approve]\".\n"
    );
    let (code, _, stderr) = s.pi(&["install", "./missing"]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        format!(
            "Error: Path does not exist: {}\n",
            s.cwd.join("missing").display()
        )
    );
    let (code, _, stderr) = s.pi(&["update", "--all", "npm:x"]);
    assert_eq!(code, 1);
    assert!(stderr.starts_with("--all cannot be combined with a positional source\n"));
}

/// `-e` with a package source tries the package for one run, as Pi's does: installed under
/// `<agent>/tmp/extensions`, its extension, skill and template load (the extension also
/// with `--no-extensions`), and no settings file names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e_flag_tries_packages_for_one_run() {
    let s = Setup::new(json!([
        {"text": "one"},
        {"text": "two"},
        {"text": "three"},
        {"text": "four"}
    ]))
    .await;
    let source = fixture_tarball(&s);
    let request = s.prompt(&s.cwd, &["-e", &source], "hi");
    assert!(declares(&request, "pkg_hello"), "{request}");
    assert!(system_prompt(&request).contains("Greets people warmly"));
    let cached = s
        .agent
        .join("tmp/extensions/npm/node_modules/pi-fixture-pkg");
    assert!(cached.join("extensions/tool.ts").exists());
    assert!(!s.agent.join("settings.json").exists());
    assert!(!s.agent.join("npm").exists());

    // Its template expands as a `--prompt-template` would.
    let request = s.prompt(&s.cwd, &["-e", &source], "/review it");
    assert_eq!(last_user_text(&request), "Please review it carefully.");

    let repo = s.path("repos/user/tryme");
    git_repo(&repo, "tryme", "try_tool", "Tries things");
    let request = s.prompt(
        &s.cwd,
        &["--no-extensions", "-e", "git:example.test/user/tryme"],
        "again",
    );
    assert!(declares(&request, "try_tool"), "{request}");
    assert!(s
        .agent
        .join("tmp/extensions/git/example.test/user/tryme")
        .exists());
    assert!(!s.agent.join("settings.json").exists());

    // No `pi update` reaches a cached `-e` checkout: each run pulls it, as Pi does.
    make_package(&repo, "tryme", "try_tool_two", "Tries more things");
    commit(&repo, "two");
    let request = s.prompt(
        &s.cwd,
        &["--no-extensions", "-e", "git:example.test/user/tryme"],
        "once more",
    );
    assert!(declares(&request, "try_tool_two"), "{request}");
    assert!(!declares(&request, "try_tool"), "{request}");
}
