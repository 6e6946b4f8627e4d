#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The exposure metadata of extension tools (`namespace`, `annotations`, `defaultActive`,
//! `reachesTools`, `prepareLoadout`), compared with what real Pi 1.6.0 did in the same cases:
//! fixtures/extensions/tool-metadata.ts run with `pi -p` against the fake LLM for each case
//! of fixtures/extensions/tool-metadata-cases.json; real Pi's answers are in
//! fixtures/extensions/tool-metadata-realpi.json (recorded by scripts/tool-cases-record.sh tool-metadata).
//!
//! - `codemode` (`--tools +codemode`): the `defaultActive: false` tool is not declared;
//!   codemode's description lists the `my-docs` namespace under one heading with its
//!   description; `describeNamespace()` answers by alias and by identifier with the
//!   instructions; `searchTools(q, {namespace})` keeps to it; `pi.getAllTools()` reports
//!   namespaces, annotations and `reachesTools` functions, which the extension's `tool_call`
//!   handler evaluates for codemode scripts and for its own tool.
//! - `loadout` (`TOOL_META_LOADOUT=1`, `--tools +ext_quiet`): `ext_router`'s `prepareLoadout`
//!   sees the declared, callable and registered tools with their namespaces and guidelines,
//!   rewrites its own and `read`'s descriptions, and hides `write`, which leaves the
//!   requests and the system prompt's tool list and rules but stays active and callable.
//! - An extension tool with `reachesTools` waits for the MCP servers its call may reach.

mod extensions_common;
mod mcp_common;

use extensions_common::*;
use serde_json::Value;

/// `pi.getAllTools()` as the extension wrote it, less Windows' `powershell` (not ours) and
/// the built-in tools' prompt guidelines (our system prompt words its rules its own way).
fn all_tools(seen: &Value) -> Vec<Value> {
    seen["all"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] != "powershell")
        .map(|t| {
            let mut t = t.clone();
            let builtin = [
                "read", "bash", "edit", "write", "grep", "find", "ls", "codemode",
            ]
            .contains(&t["name"].as_str().unwrap());
            if builtin {
                t.as_object_mut().unwrap().remove("promptGuidelines");
            }
            t
        })
        .collect()
}

/// The lines of one `<name>` section of the system prompt.
fn prompt_section(prompt: &str, name: &str) -> Vec<String> {
    let open = format!("<{name}>\n");
    let close = format!("\n</{name}>");
    let start = prompt.find(&open).expect("section") + open.len();
    let end = start + prompt[start..].find(&close).unwrap();
    prompt[start..end].lines().map(str::to_string).collect()
}

fn system_prompt(body: &Value) -> String {
    body["messages"][0]["content"].as_str().unwrap().to_string()
}

struct Run {
    setup: Setup,
    real: Value,
}

/// Runs the named case with our `pi` and checks what every case compares: the declared
/// tools of each request, the tool results, `pi.getAllTools()`/`pi.getActiveTools()` and
/// the `tool_call` handler's record.
async fn run(name: &str) -> Run {
    let case = fixture_json("tool-metadata-cases.json")
        .into_iter()
        .find(|c| c["name"] == name)
        .unwrap();
    let real = fixture_json("tool-metadata-realpi.json")
        .into_iter()
        .find(|r| r["name"] == name)
        .unwrap();
    let setup = Setup::new(case["turns"].clone()).await;
    let fixture = fixture("tool-metadata.ts");
    let mut args: Vec<&str> = vec!["--model", "fakeoai/fake-model", "-e", &fixture];
    args.extend(
        case["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap()),
    );
    args.extend(["-p", "go"]);
    let mut command = setup.command_without_model(&args);
    for (key, value) in case["env"].as_object().unwrap() {
        command.env(key, value.as_str().unwrap());
    }
    let out = command.stdin(std::process::Stdio::null()).output().unwrap();
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let requests = setup.requests();
    assert_same_requests(name, &requests, &real);

    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(setup.cwd.join("tools.json")).unwrap())
            .unwrap();
    assert_eq!(
        seen["active"], real["tools"]["active"],
        "{name}: pi.getActiveTools()"
    );
    assert_eq!(
        all_tools(&seen),
        all_tools(&real["tools"]),
        "{name}: pi.getAllTools()"
    );
    let calls: Vec<Value> = std::fs::read_to_string(setup.cwd.join("calls.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        Value::Array(calls),
        real["calls"],
        "{name}: reachesTools(input) and annotations in tool_call"
    );
    Run { setup, real }
}

#[tokio::test(flavor = "multi_thread")]
async fn namespaces_annotations_and_reach_of_extension_tools_match_real_pi() {
    let Run { setup, real } = run("codemode").await;
    let requests = setup.requests();
    // `ext_quiet` (`defaultActive: false`) is registered, not declared.
    assert!(declared(&requests[0], "ext_quiet").is_none());
    for tool in ["codemode", "ext_router"] {
        let ours = declared(&requests[0], tool).unwrap()["description"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            normalized_codemode(&ours),
            normalized_codemode(real["declarations"][tool].as_str().unwrap()),
            "description of {tool}"
        );
    }
    let codemode = declared(&requests[0], "codemode").unwrap()["description"]
        .as_str()
        .unwrap();
    assert!(
        codemode.contains("## my-docs\nProject documentation pages.\n\n### `docs_search`"),
        "{codemode}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn prepare_loadout_rewrites_descriptions_and_hides_declarations_as_real_pi_does() {
    let Run { setup, real } = run("loadout").await;
    let requests = setup.requests();
    for body in &requests {
        for tool in ["read", "ext_router"] {
            assert_eq!(
                declared(body, tool).unwrap()["description"],
                real["declarations"][tool],
                "description of {tool}"
            );
        }
        // The hidden `write` is left out of the system prompt's tool list and rules.
        let prompt = system_prompt(body);
        let tools = prompt_section(&prompt, "tools");
        assert!(
            tools.iter().any(|l| l.starts_with("- ext_router:")),
            "{tools:?}"
        );
        assert!(
            !tools.iter().any(|l| l.starts_with("- write:")),
            "{tools:?}"
        );
        let rules = prompt_section(&prompt, "rules");
        assert!(
            rules.contains(&"- Use ext_router to route requests.".to_string()),
            "{rules:?}"
        );
        assert!(!rules.iter().any(|l| l.contains("Use write")), "{rules:?}");
    }
    // Still active and callable: the model's `write` call ran.
    assert_eq!(
        std::fs::read_to_string(setup.cwd.join("out.txt")).unwrap(),
        "hidden but callable"
    );
}

/// An extension tool that declares `reachesTools` waits for the MCP servers its call may
/// reach: the server here starts answering only after 3 s (its tools are `codemode`, so
/// start-up does not wait for it), and the tool's nested call of the server's `echo` still
/// finds it.
#[tokio::test(flavor = "multi_thread")]
async fn an_extension_tool_that_reaches_mcp_tools_waits_for_their_server() {
    let setup = Setup::new(serde_json::json!([
        {"tool_calls": [tc("mcp_router", serde_json::json!({"tool": "mcp__slow__echo"}))]},
        {"text": "done"}
    ]))
    .await;
    let server = format!(
        "sleep 3; exec node '{}' stdio",
        mcp_common::everything_script()
    );
    std::fs::write(
        setup.agent.join("mcp.json"),
        serde_json::json!({"mcpServers": {"slow": {
            "command": "sh", "args": ["-c", server], "exposure": "codemode"
        }}})
        .to_string(),
    )
    .unwrap();
    let fixture = fixture("mcp-router.ts");
    let (code, _out, err) = setup.pi(&["-e", &fixture, "-p", "go"]);
    assert_eq!(code, 0, "{err}");
    let results = tool_messages(setup.requests().last().unwrap());
    assert_eq!(results, vec!["ok: Echo: hi".to_string()]);
}
