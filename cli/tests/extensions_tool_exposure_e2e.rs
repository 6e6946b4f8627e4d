#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Extension tools under the tool options and their `exposure`, compared with what real Pi
//! 1.6.0 did in the same cases: fixtures/extensions/tool-exposure.ts (one tool per exposure
//! and a `defaultActive: false` one) run with `pi -p` against the fake LLM for each case of
//! fixtures/extensions/tool-exposure-cases.json; real Pi's answers are in
//! fixtures/extensions/tool-exposure-realpi.json (recorded by scripts/tool-cases-record.sh tool-exposure).
//!
//! Compared per case: the tool names of every provider request (in order), the tool result
//! texts of the last request (codemode's wall time left out), the declarations of the first
//! request (descriptions, codemode's docs path left out) and what the extension saw at
//! `session_start` (`pi.getActiveTools()`, and `pi.getAllTools()` with exposures, less
//! Windows' `powershell`, which we do not register).
//!
//! What real Pi does, per option (see also docs/extensions.md):
//! - no option: the `direct` and `model-only` extension tools are active (declared), except
//!   `defaultActive: false` ones; `codemode`, `deferred` and `hidden` ones are registered only.
//! - `--tools a,b` (names, `*` patterns): an allowlist for extension tools too. A tool it does
//!   not match is not registered (`Tool x not found`); a match of a pattern is activated when
//!   it is `direct`/`model-only` (`defaultActive: false` too); a name activates any exposure
//!   but `hidden`.
//! - `--tools +x` / `defaultTools`: the named tool is activated as well; `--tools -x` does not
//!   deactivate an extension tool (only the default built-in list changes).
//! - `--exclude-tools`: the matched extension tools are not registered.
//! - `--no-tools`: no extension tool is registered (unless `--tools +x` names it);
//!   `--no-builtin-tools`: extension tools are registered and active as without options.
//! - codemode scripts call the active `direct` tools and every registered `codemode` and
//!   `deferred` tool; `tool_search` loads `codemode` and `deferred` ones.

mod extensions_common;

use extensions_common::*;
use serde_json::Value;

/// What real Pi registers that we do not (see the module documentation).
fn without_pi_only_tools(all: &Value) -> Vec<String> {
    all.as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .filter(|t| !t.starts_with("powershell:"))
        .collect()
}

/// Runs one case with our `pi` and compares it with real Pi's record.
async fn check(case: &Value, real: &Value) {
    let name = case["name"].as_str().unwrap();
    let setup = Setup::new(case["turns"].clone()).await;
    if let Some(settings) = case.get("settings") {
        std::fs::write(setup.agent.join("settings.json"), settings.to_string()).unwrap();
    }
    let fixture = fixture("tool-exposure.ts");
    let mut args: Vec<&str> = vec!["-e", &fixture];
    args.extend(
        case["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap()),
    );
    args.extend(["-p", "go"]);
    let (code, _out, err) = setup.pi(&args);
    assert_eq!(code, 0, "{name}: {err}");

    let requests = setup.requests();
    assert_same_requests(name, &requests, real);

    for (tool, description) in real["declarations"].as_object().unwrap() {
        let ours = declared(&requests[0], tool).expect("declared");
        assert_eq!(
            normalized_codemode(ours["description"].as_str().unwrap()),
            normalized_codemode(description.as_str().unwrap()),
            "{name}: description of {tool}"
        );
    }

    let seen: Value =
        serde_json::from_str(&std::fs::read_to_string(setup.cwd.join("tools.json")).unwrap())
            .unwrap();
    let active = |tools: &Value| -> Vec<String> {
        let mut names: Vec<String> = serde_json::from_value(tools["active"].clone()).unwrap();
        // With codemode mode `only` the tools codemode presents stay active, as in Pi, but
        // ours lists them before the declared ones instead of in activation order.
        if case["settings"]["codemode"]["mode"] == "only" {
            names.sort();
        }
        names
    };
    assert_eq!(
        active(&seen),
        active(&real["tools"]),
        "{name}: pi.getActiveTools()"
    );
    assert_eq!(
        without_pi_only_tools(&seen["all"]),
        without_pi_only_tools(&real["tools"]["all"]),
        "{name}: pi.getAllTools()"
    );
}

/// Every recorded case whose name starts with `prefix`.
async fn check_cases(prefix: &str) {
    let cases = fixture_json("tool-exposure-cases.json");
    let records = fixture_json("tool-exposure-realpi.json");
    let mut checked = 0;
    for case in cases
        .iter()
        .filter(|c| c["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
    {
        let real = records
            .iter()
            .find(|r| r["name"] == case["name"])
            .expect("a record of real Pi for every case");
        check(case, real).await;
        checked += 1;
    }
    assert!(checked > 0, "no case named {prefix}*");
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_options_register_and_activate_extension_tools_as_real_pi_does() {
    check_cases("flags/").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn undeclared_extension_tools_are_not_found_when_the_model_calls_them() {
    check_cases("calls/").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn codemode_scripts_reach_codemode_and_deferred_extension_tools() {
    check_cases("codemode/").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tool_search_loads_codemode_and_deferred_extension_tools() {
    check_cases("tool_search/").await;
}
