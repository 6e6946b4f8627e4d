//! Print-mode prompts (`pi -p`) over wire APIs beyond the basic four, against pi-fake-llm on
//! 127.0.0.1, checking the request our binary sends.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use pi_fake_llm::{FakeLlm, Script, Turn};

/// Runs `pi -p` in a fresh agent dir whose models.json is `models_json`, with `vars` set.
fn print_prompt(models_json: &str, vars: &[(&str, &str)], model: &str) -> std::process::Output {
    let tmp = tempfile::tempdir().expect("tempdir");
    let agent = tmp.path().join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(agent.join("models.json"), models_json).unwrap();
    Command::cargo_bin("pi")
        .expect("pi binary")
        .env_clear()
        .env("HOME", tmp.path())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("PI_CODING_AGENT_DIR", &agent)
        .envs(vars.iter().copied())
        .current_dir(tmp.path())
        .args(["--no-session", "--model", model, "-p", "Say hello"])
        .output()
        .expect("run pi")
}

#[tokio::test(flavor = "multi_thread")]
async fn azure_openai_responses_prompt() {
    let fake = FakeLlm::start(Script::turns(vec![Turn::text("Hello from Azure")]))
        .await
        .expect("fake llm");
    // The built-in azure provider, routed to the fake resource through models.json.
    let models = format!(
        r#"{{"providers": {{"azure": {{"baseUrl": "http://127.0.0.1:{}/openai/v1"}}}}}}"#,
        fake.port()
    );
    let out = print_prompt(
        &models,
        &[
            ("AZURE_OPENAI_API_KEY", "azure-key"),
            ("AZURE_OPENAI_DEPLOYMENT_NAME_MAP", "gpt-4.1=my-gpt41"),
        ],
        "azure/gpt-4.1",
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pi failed: {stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Hello from Azure\n");

    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let req = &requests[0];
    // As the AzureOpenAI client real Pi uses: Responses path, api-version query, api-key
    // header (no bearer token), the deployment name as the model.
    assert_eq!(req.path, "/openai/v1/responses?api-version=v1");
    assert_eq!(req.api, "openai-responses");
    assert!(req.headers.contains_key("api-key"), "{:?}", req.headers);
    assert!(
        !req.headers.contains_key("authorization"),
        "{:?}",
        req.headers
    );
    assert_eq!(req.body["model"], "my-gpt41");
    assert_eq!(req.body["stream"], true);
    assert_eq!(req.body["store"], false);
    let input = req.body["input"].as_array().expect("input");
    assert_eq!(input.last().unwrap()["role"], "user");
    assert_eq!(input.last().unwrap()["content"][0]["text"], "Say hello");

    // The same request shape as real Pi 1.6.0 sent for the same prompt and environment
    // (fixtures/realpi-providers/requests): top-level fields and message roles.
    let pi = real_pi_request("azure-openai-responses");
    assert_eq!(req.path, pi["path"]);
    assert_eq!(keys(&req.body), keys(&pi["body"]));
    let roles = |body: &serde_json::Value| -> Vec<String> {
        body["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(roles(&req.body), roles(&pi["body"]));
    assert_eq!(
        req.body["max_output_tokens"],
        pi["body"]["max_output_tokens"]
    );
}

/// The first request real Pi sent in `fixtures/realpi-providers/requests/<name>.requests.jsonl`.
fn real_pi_request(name: &str) -> serde_json::Value {
    let path = format!(
        "{}/../fixtures/realpi-providers/requests/{name}.requests.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_json::from_str(text.lines().next().expect("one request")).expect("request json")
}

fn keys(v: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
    keys.sort();
    keys
}

#[tokio::test(flavor = "multi_thread")]
async fn azure_without_an_endpoint_is_a_clear_error() {
    let out = print_prompt(
        "{}",
        &[("AZURE_OPENAI_API_KEY", "azure-key")],
        "azure/gpt-4.1",
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Azure OpenAI base URL is required"),
        "{stderr}"
    );
    assert!(!stderr.contains("No API provider registered"), "{stderr}");
}

/// models.json's block for a built-in provider reaches its built-in models: `baseUrl` and
/// `compat` (real Pi 1.6.0 sent `max_tokens: 32768` to `groq/llama-3.3-70b-versatile` with
/// `"compat": {"maxTokensField": "max_tokens"}`, `max_completion_tokens` without). A
/// provider block that cannot be applied is a warning and the others still load (Pi:
/// `Warning: errors loading models.json:` then `Provider "foo": …`).
#[tokio::test(flavor = "multi_thread")]
async fn a_built_in_providers_compat_reaches_the_request() {
    let fake = FakeLlm::start(Script::turns(vec![Turn::text("Hello from groq")]))
        .await
        .expect("fake llm");
    let models = serde_json::json!({"providers": {
        "groq": {"baseUrl": format!("http://127.0.0.1:{}/v1", fake.port()), "apiKey": "k",
                 "compat": {"maxTokensField": "max_tokens"}},
        "foo": {"models": [{"id": "x"}]}
    }})
    .to_string();
    let out = print_prompt(&models, &[], "groq/llama-3.3-70b-versatile");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pi failed: {stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Hello from groq\n");
    assert!(
        stderr
            .contains("Warning: errors loading models.json:\nProvider \"foo\": foo/x: no \"api\""),
        "{stderr}"
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["max_tokens"], 32768);
    assert!(requests[0].body.get("max_completion_tokens").is_none());
}
