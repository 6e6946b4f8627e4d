//! `pi mcp add|remove|list|login|logout`: configure and check MCP servers and sign in to
//! OAuth servers without a session (Pi 1.6.0's `pi mcp`, same options, messages and exit
//! codes). The OAuth flow itself is `pi_agent::mcp::oauth`.
//!
//! The arguments are parsed here, not by clap, because Pi's parser ends the options at the
//! command of `add <server> <command> --its-flags`, which clap cannot express.

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;

use clap::Args;
use pi_agent::mcp::config::{self, Scope};
use pi_agent::mcp::{ConnState, McpManager};
use serde_json::{json, Map, Value};

/// `pi mcp …`: the raw arguments.
#[derive(Debug, Args)]
#[command(disable_help_flag = true)]
pub struct McpArgs {
    /// add, remove or list, and their options.
    #[arg(allow_hyphen_values = true, trailing_var_arg = true, num_args = 0..)]
    pub args: Vec<String>,
}

const HELP: &str = "Usage:
  pi mcp add <server> [options] -- <command> [args...]
  pi mcp add <server> [options] --url <url>
  pi mcp remove <server> [-l]
  pi mcp list [--json]
  pi mcp login <server> [-l] [--timeout <seconds>]
  pi mcp logout <server> [-l]

Configure and check MCP servers and sign in to OAuth servers without starting a session.
Reads ~/.pi/agent/mcp.json and, in trusted projects, .pi/mcp.json.

Commands:
  add <server>            Add or replace a server in mcp.json
  remove <server>         Remove a server from mcp.json
  list                    Show state, tools, and errors (exits 1 on failure)
  login <server>          Sign in through the browser
  logout <server>         Delete the stored OAuth credentials

Options for add, remove, login, and logout:
  -l, --local             Use .pi/mcp.json in the current project instead of the global file

Options for add:
  --url <url>             Streamable HTTP server URL (instead of a command)
  --env <KEY=VALUE>       Environment variable for a stdio server (repeatable)
  --cwd <dir>             Working directory for a stdio server
  --header <KEY=VALUE>    HTTP header (repeatable)
  --bearer-token-env-var <NAME>
                          Send \"Authorization: Bearer ${NAME}\"
  --oauth-client-id <id>  Pre-registered OAuth client id
  --oauth-client-secret <secret>
                          OAuth client secret (may be ${NAME} or !command)
  --oauth-callback-port <port>
                          Fixed OAuth callback port
  --oauth-client-name <name>
                          Client name sent when registering with the OAuth server
  --oauth-client-registration <mode>
                          auto (default), cimd, or dcr
  --exposure <mode>       codemode (default), deferred, direct, or hidden
  --description <text>    What the server offers, shown in the system prompt

Other options:
  --json                  Print the list as JSON
  --timeout <seconds>     Time limit for the whole sign-in (default: 300)";

pub(super) const HELP_HINT: &str = "Use \"pi mcp --help\" for usage.";

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Flag,
    Value,
    List,
}

#[derive(Default)]
pub(super) struct Parsed {
    pub(super) positional: Vec<String>,
    pub(super) values: BTreeMap<String, String>,
    pub(super) flags: Vec<String>,
    lists: BTreeMap<String, Vec<String>>,
}

/// Pi's option parser: `--` or reaching `max_positionals` ends the options.
pub(super) fn parse_options(
    args: &[String],
    known: &[(&str, Kind)],
    max_positionals: usize,
) -> Result<Parsed, String> {
    let mut parsed = Parsed::default();
    let mut index = 0;
    while index < args.len() {
        let typed = &args[index];
        let arg = if typed == "-l" {
            "--local"
        } else {
            typed.as_str()
        };
        if arg == "--" || parsed.positional.len() >= max_positionals {
            let from = if arg == "--" { index + 1 } else { index };
            parsed.positional.extend(args[from..].iter().cloned());
            break;
        }
        let Some(name) = arg.strip_prefix("--") else {
            parsed.positional.push(arg.to_string());
            index += 1;
            continue;
        };
        let Some((_, kind)) = known.iter().find(|(k, _)| *k == name) else {
            return Err(format!("Unknown option {typed}.\n{HELP_HINT}"));
        };
        if *kind == Kind::Flag {
            parsed.flags.push(name.to_string());
            index += 1;
            continue;
        }
        let Some(value) = args.get(index + 1) else {
            return Err(format!("{arg} needs a value."));
        };
        if *kind == Kind::List {
            parsed
                .lists
                .entry(name.to_string())
                .or_default()
                .push(value.clone());
        } else {
            parsed.values.insert(name.to_string(), value.clone());
        }
        index += 2;
    }
    Ok(parsed)
}

fn agent_dir() -> PathBuf {
    pi_agent::config::agent_dir(
        &|k| std::env::var(k).ok(),
        pi_agent::config::home().as_deref(),
    )
}

/// Runs `pi mcp <args>`; returns the exit code.
pub fn run(args: McpArgs) -> anyhow::Result<i32> {
    let cwd = std::env::current_dir()?;
    let agent_dir = agent_dir();
    let args = args.args;
    let Some(command) = args.first() else {
        println!("{HELP}");
        return Ok(0);
    };
    if command == "help" || args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{HELP}");
        return Ok(0);
    }
    let rest = &args[1..];
    let outcome = match command.as_str() {
        "add" => add(rest, &agent_dir, &cwd),
        "remove" => remove(rest, &agent_dir, &cwd),
        "list" => list(rest, &agent_dir, &cwd),
        "login" | "logout" => super::mcp_login::run(command, rest, &agent_dir, &cwd),
        other => Err(format!("Unknown mcp command \"{other}\".\n{HELP_HINT}")),
    };
    Ok(match outcome {
        Ok(code) => code,
        Err(message) => {
            eprintln!("{message}");
            1
        }
    })
}

pub(super) fn project_trusted(agent_dir: &Path, cwd: &Path) -> bool {
    pi_agent::config::TrustStore::new(agent_dir)
        .get(cwd)
        .ok()
        .flatten()
        == Some(true)
}

fn parse_pairs(option: &str, pairs: Option<&Vec<String>>) -> Result<Map<String, Value>, String> {
    let mut record = Map::new();
    for pair in pairs.into_iter().flatten() {
        match pair.find('=') {
            Some(at) if at > 0 => {
                record.insert(pair[..at].to_string(), Value::from(&pair[at + 1..]));
            }
            _ => return Err(format!("--{option} expects KEY=VALUE, got \"{pair}\".")),
        }
    }
    Ok(record)
}

fn add(args: &[String], agent_dir: &Path, cwd: &Path) -> Result<i32, String> {
    let usage = format!(
        "Usage: pi mcp add <server> [options] (--url <url> | -- <command> [args...])\n{HELP_HINT}"
    );
    let known = [
        ("local", Kind::Flag),
        ("url", Kind::Value),
        ("env", Kind::List),
        ("cwd", Kind::Value),
        ("header", Kind::List),
        ("bearer-token-env-var", Kind::Value),
        ("oauth-client-id", Kind::Value),
        ("oauth-client-secret", Kind::Value),
        ("oauth-callback-port", Kind::Value),
        ("oauth-client-name", Kind::Value),
        ("oauth-client-registration", Kind::Value),
        ("exposure", Kind::Value),
        ("description", Kind::Value),
    ];
    let parsed = parse_options(args, &known, 2)?;
    let (name, command) = match parsed.positional.split_first() {
        Some((name, command)) => (name.clone(), command.to_vec()),
        None => return Err(usage),
    };
    let url = parsed.values.get("url").cloned();
    if url.is_none() == command.is_empty() {
        return Err(usage);
    }
    let has = |o: &str| parsed.values.contains_key(o) || parsed.lists.contains_key(o);
    let http_only = [
        "header",
        "bearer-token-env-var",
        "oauth-client-id",
        "oauth-client-secret",
        "oauth-callback-port",
        "oauth-client-name",
        "oauth-client-registration",
    ];
    let stdio_only = ["env", "cwd"];
    let misplaced = if url.is_none() {
        http_only.iter().find(|o| has(o))
    } else {
        stdio_only.iter().find(|o| has(o))
    };
    if let Some(option) = misplaced {
        return Err(format!(
            "--{option} only applies to {}.",
            if url.is_none() {
                "HTTP servers (--url)"
            } else {
                "stdio servers"
            }
        ));
    }
    let mut entry = Map::new();
    if let Some(url) = &url {
        let mut headers = parse_pairs("header", parsed.lists.get("header"))?;
        if let Some(var) = parsed.values.get("bearer-token-env-var") {
            headers.insert(
                "Authorization".into(),
                Value::from(format!("Bearer ${{{var}}}")),
            );
        }
        let mut oauth = Map::new();
        for (option, key) in [
            ("oauth-client-id", "clientId"),
            ("oauth-client-secret", "clientSecret"),
            ("oauth-client-name", "clientName"),
            ("oauth-client-registration", "clientRegistration"),
        ] {
            if let Some(v) = parsed.values.get(option) {
                oauth.insert(key.into(), Value::from(v.as_str()));
            }
        }
        if let Some(port) = parsed.values.get("oauth-callback-port") {
            let number = port.parse::<f64>().map(Value::from).unwrap_or(Value::Null);
            oauth.insert("callbackPort".into(), number);
        }
        entry.insert("url".into(), Value::from(url.as_str()));
        if !headers.is_empty() {
            entry.insert("headers".into(), Value::Object(headers));
        }
        if !oauth.is_empty() {
            entry.insert("oauth".into(), Value::Object(oauth));
        }
    } else {
        let env = parse_pairs("env", parsed.lists.get("env"))?;
        entry.insert("command".into(), Value::from(command[0].as_str()));
        if command.len() > 1 {
            entry.insert("args".into(), json!(command[1..]));
        }
        if !env.is_empty() {
            entry.insert("env".into(), Value::Object(env));
        }
        if let Some(dir) = parsed.values.get("cwd") {
            entry.insert("cwd".into(), Value::from(dir.as_str()));
        }
    }
    if let Some(exposure) = parsed.values.get("exposure") {
        entry.insert("exposure".into(), Value::from(exposure.as_str()));
    }
    if let Some(description) = parsed.values.get("description") {
        entry.insert("description".into(), Value::from(description.as_str()));
    }
    let validated = config::validate_server_config(&name, &Value::Object(entry))?;
    let project = parsed.flags.iter().any(|f| f == "local");
    let (path, scope) = if project {
        (config::project_config_path(cwd), "project")
    } else {
        (config::global_config_path(agent_dir), "global")
    };
    let replaced = config::add_server_config(&path, &name, validated.raw.clone())
        .map_err(|e| format!("Could not update {}: {e}", path.display()))?;
    println!(
        "{} {scope} MCP server \"{name}\" in {}.",
        if replaced { "Replaced" } else { "Added" },
        path.display()
    );
    if project && !project_trusted(agent_dir, cwd) {
        println!(
            "The project is not trusted, so {} is ignored until you start pi in the project and trust it.",
            path.display()
        );
    }
    let may_need_sign_in = matches!(&validated.transport, config::Transport::Http { headers, .. }
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("authorization")))
        && pi_agent::mcp::provider_login::configured_provider(&validated.raw).is_none();
    println!(
        "Check it with: pi mcp list{}",
        if may_need_sign_in {
            format!(". If it requires sign-in: pi mcp login {name}")
        } else {
            String::new()
        }
    );
    Ok(0)
}

fn remove(args: &[String], agent_dir: &Path, cwd: &Path) -> Result<i32, String> {
    let parsed = parse_options(args, &[("local", Kind::Flag)], usize::MAX)?;
    let [name] = parsed.positional.as_slice() else {
        return Err(format!("Usage: pi mcp remove <server> [-l]\n{HELP_HINT}"));
    };
    let project = parsed.flags.iter().any(|f| f == "local");
    let (path, scope) = if project {
        (config::project_config_path(cwd), Scope::Project)
    } else {
        (config::global_config_path(agent_dir), Scope::Global)
    };
    let removed = config::remove_server_config(&path, name)
        .map_err(|e| format!("Could not update {}: {e}", path.display()))?;
    if removed {
        println!(
            "Removed {} MCP server \"{name}\" from {}.",
            scope.as_str(),
            path.display()
        );
        return Ok(0);
    }
    let all = config::load_mcp_config(agent_dir, cwd, true);
    let other = all
        .servers
        .iter()
        .find(|s| &s.name == name && s.scope != scope);
    let hint = other
        .map(|o| {
            format!(
                " It is defined in {}{}.",
                o.source.display(),
                if o.scope == Scope::Project {
                    "; use --local"
                } else {
                    "; omit --local"
                }
            )
        })
        .unwrap_or_default();
    Err(format!(
        "No {} MCP server named \"{name}\" in {}.{hint}",
        scope.as_str(),
        path.display()
    ))
}

fn list(args: &[String], agent_dir: &Path, cwd: &Path) -> Result<i32, String> {
    let parsed = parse_options(args, &[("json", Kind::Flag)], usize::MAX)?;
    if !parsed.positional.is_empty() {
        return Err(format!("Usage: pi mcp list [--json]\n{HELP_HINT}"));
    }
    let json_out = parsed.flags.iter().any(|f| f == "json");
    let trusted = project_trusted(agent_dir, cwd);
    let project_file = config::project_config_path(cwd);
    let untrusted_note = (!trusted && project_file.exists()).then(|| {
        format!(
            "{} is ignored because the project is not trusted. Start pi in the project to trust it.",
            project_file.display()
        )
    });
    let manager = McpManager::load(agent_dir, cwd, trusted);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    runtime.block_on(manager.connect_all());
    let mut reports = Vec::new();
    let mut failed = !manager.config().errors.is_empty();
    for server in &manager.servers() {
        let entry = &server.entry;
        let enabled = entry.config.enabled;
        let exposure = entry.config.exposure();
        let mut report = Map::new();
        report.insert("name".into(), Value::from(entry.name.as_str()));
        report.insert("scope".into(), Value::from(entry.scope.as_str()));
        report.insert(
            "source".into(),
            Value::from(entry.source.display().to_string()),
        );
        if let Some(o) = &entry.override_source {
            report.insert("override".into(), Value::from(o.display().to_string()));
        }
        report.insert("enabled".into(), Value::from(enabled));
        report.insert("exposure".into(), Value::from(exposure.as_str()));
        report.insert(
            "transport".into(),
            Value::from(entry.config.describe_transport()),
        );
        let status = server.status();
        let state = if enabled {
            status.state.as_str()
        } else {
            "disabled"
        };
        report.insert("state".into(), Value::from(state));
        if let Some(login) = server.provider_login() {
            report.insert("loginProvider".into(), Value::from(login.provider()));
        }
        let tools: Vec<String> = if enabled {
            status.tools.iter().map(|t| t.name.to_string()).collect()
        } else {
            Vec::new()
        };
        report.insert("tools".into(), json!(tools));
        let overrides: Map<String, Value> = tools
            .iter()
            .filter_map(|t| {
                let e = entry.config.tool_exposure(t);
                (e != exposure).then(|| (t.clone(), Value::from(e.as_str())))
            })
            .collect();
        if !overrides.is_empty() {
            report.insert("toolExposure".into(), Value::Object(overrides));
        }
        if enabled && status.has_resources {
            report.insert("resources".into(), Value::from(true));
        }
        if enabled && status.state != ConnState::Connected {
            failed = true;
            if let Some(error) = &status.error {
                report.insert("error".into(), Value::from(error.as_str()));
            }
        }
        reports.push(Value::Object(report));
    }
    runtime.block_on(manager.shutdown());
    if json_out {
        let mut out = Map::new();
        out.insert("servers".into(), Value::Array(reports));
        out.insert("errors".into(), json!(manager.config().errors));
        if let Some(note) = &untrusted_note {
            out.insert("note".into(), Value::from(note.as_str()));
        }
        println!(
            "{}",
            serde_json::to_string_pretty(&Value::Object(out)).unwrap_or_default()
        );
        return Ok(i32::from(failed));
    }
    if reports.is_empty() && manager.config().errors.is_empty() {
        println!(
            "No MCP servers configured. Add them to {} or .pi/mcp.json.",
            config::global_config_path(agent_dir).display()
        );
    }
    let text = |r: &Value, k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    for report in &reports {
        let tools: Vec<&str> = report["tools"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let state = match text(report, "state").as_str() {
            "connected" => format!(
                "connected, {} tool{}",
                tools.len(),
                if tools.len() == 1 { "" } else { "s" }
            ),
            "needs-auth" => "needs sign-in".to_string(),
            other => other.to_string(),
        };
        println!(
            "{}: {state} ({}, {})",
            text(report, "name"),
            text(report, "exposure"),
            text(report, "scope")
        );
        println!("  {}", text(report, "transport"));
        if let Some(o) = report.get("override").and_then(Value::as_str) {
            println!("  project override: {o}");
        }
        if text(report, "state") == "needs-auth" {
            // A provider login comes from `/login <provider>` (`pi auth login` in a shell).
            match report.get("loginProvider").and_then(Value::as_str) {
                Some(provider) => println!("  sign in with: pi auth login {provider}"),
                None => println!("  sign in with: pi mcp login {}", text(report, "name")),
            }
        }
        if !tools.is_empty() {
            let shown: Vec<String> = tools
                .iter()
                .map(
                    |t| match report.get("toolExposure").and_then(|m| m.get(*t)) {
                        Some(e) => format!("{t} [{}]", e.as_str().unwrap_or("")),
                        None => t.to_string(),
                    },
                )
                .collect();
            println!("  tools: {}", sanitize(&shown.join(", ")));
        }
        if report.get("resources").is_some() {
            println!("  offers resources");
        }
        if let Some(error) = report.get("error").and_then(Value::as_str) {
            println!("  {}", sanitize(&error.replace('\n', "\n  ")));
        }
    }
    for error in &manager.config().errors {
        println!("config error: {error}");
    }
    if let Some(note) = untrusted_note {
        println!("{note}");
    }
    Ok(i32::from(failed))
}

/// Server-supplied text (tool names, stderr) with control characters other than newlines
/// made visible, so a hostile server cannot drive the terminal.
pub(super) fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                char::from_u32(0x2400 + c as u32)
                    .filter(|_| (c as u32) < 0x20)
                    .unwrap_or('\u{FFFD}')
            } else {
                c
            }
        })
        .collect()
}
