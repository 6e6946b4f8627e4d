//! The `llama.cpp` provider in the modes: its models are asked of the router when the run
//! starts (and on `/reload`, and after `/llama` changes something), so `--list-models`,
//! `--model` and `/model` see what the router has loaded now.

use std::path::Path;
use std::time::Duration;

use pi_agent::llm::llama_cpp;
use pi_agent::llm::ModelRegistry;

use super::Settings;
use crate::RunArgs;

/// How long start-up waits for the router per request: a refused connection fails at once,
/// a router on an unreachable host must not hold the start for long.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether `builtin:llama.cpp` is on for this run (settings, `--no-extensions`, `-e`).
pub fn enabled(args: &RunArgs, settings: &Settings) -> bool {
    pi_agent::config::builtin_enabled(
        &settings.config,
        llama_cpp::BUILTIN_NAME,
        args.no_extensions,
        &args.extensions,
    )
}

/// Adds the router's chat models to `registry` when the provider is on and configured; a
/// router that cannot be asked leaves a warning and no models.
pub fn add_router_models(
    registry: &mut ModelRegistry,
    args: &RunArgs,
    settings: &Settings,
    agent_dir: &Path,
    warnings: &mut Vec<String>,
) {
    if !enabled(args, settings) {
        return;
    }
    let Some(conn) = llama_cpp::current_connection(agent_dir) else {
        return;
    };
    match llama_cpp::discover_blocking(&conn, DISCOVERY_TIMEOUT) {
        Ok(models) => llama_cpp::replace_models(registry, models),
        Err(e) => warnings.push(format!(
            "llama.cpp: could not list the models of {}: {e}",
            conn.server_url
        )),
    }
}
