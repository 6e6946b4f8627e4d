//! The built-in provider catalog against real Pi 1.6.0: `pi --list-models` with a dummy key in
//! every provider variable (fixtures/realpi-providers/env.txt) must list every provider real
//! Pi listed and at least 90% of its models (issue #17), and in fact lists the same table.

// A test fails by panicking: unwrapping is how it reports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use assert_cmd::Command;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/realpi-providers");

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}/{name}"))
        .unwrap_or_else(|e| panic!("read {FIXTURES}/{name}: {e}"))
}

/// `pi --list-models [args]` in a clean environment holding only `vars`.
fn list_models(vars: &[(String, String)], args: &[&str]) -> String {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = Command::cargo_bin("pi")
        .expect("pi binary")
        .env_clear()
        .env("HOME", tmp.path())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("PI_CODING_AGENT_DIR", tmp.path().join("agent"))
        .envs(vars.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(tmp.path())
        .arg("--list-models")
        .args(args)
        .output()
        .expect("run pi");
    assert!(
        out.status.success(),
        "pi failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn fixture_env() -> Vec<(String, String)> {
    fixture("env.txt")
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// provider → model ids of a `--list-models` table.
fn table(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let mut cols = line.split_whitespace();
        if let (Some(provider), Some(model)) = (cols.next(), cols.next()) {
            out.entry(provider.into()).or_default().insert(model.into());
        }
    }
    out
}

#[test]
fn list_models_matches_real_pi_with_every_provider_key() {
    let expected_text = fixture("list-models.txt");
    let ours_text = list_models(&fixture_env(), &[]);
    let expected = table(&expected_text);
    let ours = table(&ours_text);

    let missing: Vec<&String> = expected.keys().filter(|p| !ours.contains_key(*p)).collect();
    assert!(
        missing.is_empty(),
        "providers real Pi lists but we do not: {missing:?}"
    );
    let extra: Vec<&String> = ours.keys().filter(|p| !expected.contains_key(*p)).collect();
    assert!(
        extra.is_empty(),
        "providers we list but real Pi does not: {extra:?}"
    );

    let total: usize = expected.values().map(BTreeSet::len).sum();
    let found: usize = expected
        .iter()
        .map(|(p, ids)| ids.intersection(&ours[p]).count())
        .sum();
    assert_eq!(total, 1688, "fixture: real Pi's model count");
    assert!(
        found * 10 >= total * 9,
        "only {found} of real Pi's {total} models listed"
    );

    // The whole table agrees: facts (context, max-out, thinking, images) and Pi's order.
    if ours_text != expected_text {
        let diff: Vec<String> = expected_text
            .lines()
            .zip(ours_text.lines())
            .filter(|(a, b)| a != b)
            .take(5)
            .map(|(a, b)| format!("pi:   {a}\nours: {b}"))
            .collect();
        panic!(
            "--list-models differs from real Pi ({} vs {} lines):\n{}",
            expected_text.lines().count(),
            ours_text.lines().count(),
            diff.join("\n")
        );
    }
}

#[test]
fn providers_needing_more_than_a_key_are_listed_only_when_configured() {
    // Issue #17's environment: the 36 providers whose key alone is enough.
    let needs_more = [
        "AZURE_OPENAI_RESOURCE_NAME",
        "CLOUDFLARE_ACCOUNT_ID",
        "CLOUDFLARE_GATEWAY_ID",
        "CLOUDFLARE_API_KEY",
        "AZURE_OPENAI_API_KEY",
        "AWS_BEARER_TOKEN_BEDROCK",
        "GOOGLE_CLOUD_API_KEY",
    ];
    let vars: Vec<(String, String)> = fixture_env()
        .into_iter()
        .filter(|(k, _)| !needs_more.contains(&k.as_str()))
        .collect();
    let ours = table(&list_models(&vars, &[]));
    assert_eq!(ours.len(), 36, "{:?}", ours.keys().collect::<Vec<_>>());
    assert_eq!(ours.values().map(BTreeSet::len).sum::<usize>(), 1332);
    assert!(!ours.contains_key("cloudflare-workers-ai"));

    // Cloudflare's key without its account id is not enough; with it, Workers AI appears.
    let key_only = vec![("CLOUDFLARE_API_KEY".to_string(), "k".to_string())];
    assert!(table(&list_models(&key_only, &[])).is_empty());
    let mut with_account = key_only.clone();
    with_account.push(("CLOUDFLARE_ACCOUNT_ID".into(), "a".into()));
    let listed = table(&list_models(&with_account, &[]));
    assert_eq!(listed.keys().collect::<Vec<_>>(), ["cloudflare-workers-ai"]);
}
