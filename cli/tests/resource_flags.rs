//! End to end: Pi's resource flags (cli.md "Resources"): `--skill` and `--prompt-template`
//! add files or directories for the run, `-ns`/`--no-skills` and
//! `-np`/`--no-prompt-templates` drop the discovered and configured ones while the given
//! paths still load, and a given path that does not exist is reported.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

mod extensions_common;

use extensions_common::*;

/// A skill directory `dir/name` with its SKILL.md.
fn skill(dir: &std::path::Path, name: &str) {
    let at = dir.join(name);
    std::fs::create_dir_all(&at).unwrap();
    std::fs::write(
        at.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: The {name} skill.\n---\nDo {name}.\n"),
    )
    .unwrap();
}

fn template(path: &std::path::Path, description: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        format!("---\ndescription: {description}\n---\nDo it.\n"),
    )
    .unwrap();
}

fn system_prompt(request: &Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The prompt templates `get_commands` lists in an RPC run with `args`.
fn templates(s: &Setup, args: &[&str]) -> Vec<String> {
    let mut rpc = Rpc::start(s, args);
    rpc.send(json!({"id": "c", "type": "get_commands"}));
    let names = rpc.response("c")["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["source"] == "prompt")
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect();
    assert!(rpc.finish());
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skill_flags_add_paths_and_no_skills_keeps_only_them() {
    let s = Setup::new(json!([{"text": "one"}, {"text": "two"}, {"text": "three"}])).await;
    skill(&s.agent.join("skills"), "discovered");
    let extra = s.cwd.parent().unwrap().join("extra-skills");
    skill(&extra, "given");
    let given = extra.display().to_string();

    let (code, _, err) = s.pi(&["--skill", &given, "-p", "hi"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = s.pi(&["-ns", "--skill", &given, "-p", "hi"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = s.pi(&["--no-skills", "-p", "hi"]);
    assert_eq!(code, 0, "{err}");

    let prompts: Vec<String> = s.requests().iter().map(system_prompt).collect();
    assert!(
        prompts[0].contains("The discovered skill."),
        "{}",
        prompts[0]
    );
    assert!(prompts[0].contains("The given skill."), "{}", prompts[0]);
    assert!(
        !prompts[1].contains("The discovered skill."),
        "{}",
        prompts[1]
    );
    assert!(prompts[1].contains("The given skill."), "{}", prompts[1]);
    assert!(!prompts[2].contains("skill."), "{}", prompts[2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_template_flags_add_paths_and_no_prompt_templates_keeps_only_them() {
    let s = Setup::new(json!([])).await;
    template(&s.agent.join("prompts/found.md"), "Discovered");
    let given = s.cwd.parent().unwrap().join("given.md");
    template(&given, "Given");
    let given = given.display().to_string();

    assert_eq!(templates(&s, &[]), ["found"]);
    assert_eq!(
        templates(&s, &["--prompt-template", &given]),
        ["found", "given"]
    );
    assert_eq!(
        templates(&s, &["-np", "--prompt-template", &given]),
        ["given"]
    );
    assert!(templates(&s, &["--no-prompt-templates"]).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_given_path_that_does_not_exist_is_reported() {
    let s = Setup::new(json!([{"text": "ok"}])).await;
    let (code, out, err) = s.pi(&["--skill", "nowhere/skills", "-p", "hi"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "ok\n");
    assert!(err.contains("Skill path does not exist"), "{err}");
    assert!(err.contains("nowhere/skills"), "{err}");
}

/// `--offline` is `PI_OFFLINE=1` for the run, extension processes included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_flag_sets_pi_offline_for_extensions() {
    let s = Setup::new(json!([{"text": "ok"}, {"text": "ok"}])).await;
    let ext = s.cwd.parent().unwrap().join("offline-probe.ts");
    let out = s.cwd.parent().unwrap().join("offline.txt");
    std::fs::write(
        &ext,
        "import { appendFileSync } from \"node:fs\";\n\
         export default function () {\n  \
         appendFileSync(process.env.PROBE_OUT!, `${process.env.PI_OFFLINE ?? \"unset\"}\\n`);\n}\n",
    )
    .unwrap();
    let ext = ext.display().to_string();
    for extra in [&[][..], &["--offline"][..]] {
        let mut args = vec!["-e", ext.as_str()];
        args.extend(extra);
        args.extend(["-p", "hi"]);
        let result = s
            .command(&args)
            .env_remove("PI_OFFLINE")
            .env("PROBE_OUT", &out)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(
            result.status.success(),
            "{}",
            String::from_utf8_lossy(&result.stderr)
        );
    }
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "unset\n1\n");
}
