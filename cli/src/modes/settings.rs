//! The settings the modes need, from `engine::config` (global `settings.json` deep-merged with
//! the project's when the project is trusted), plus the trust decision and the resources that
//! shape the system prompt.

use std::path::Path;
use std::sync::Arc;

use pi_agent::config::{
    self, home, resolve_trust, ResourceOptions, Resources, TrustDecision, TrustInputs, TrustStore,
};
use pi_agent::packages::Kind;
use pi_engine::compaction::{CompactionSettings, RetrySettings};

use crate::RunArgs;

/// Settings used by the agent runtime and the modes.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The merged settings (shared: `config::Settings` is not `Clone`).
    pub config: Arc<config::Settings>,
    pub trusted: bool,
    pub retry: RetrySettings,
    pub compaction: CompactionSettings,
    pub default_provider: Option<String>,
    pub default_model: Option<String>,
    pub default_thinking_level: Option<String>,
    pub session_dir: Option<String>,
    pub session_store: Option<String>,
    pub steering_mode: Option<String>,
    pub follow_up_mode: Option<String>,
}

impl Settings {
    /// Trust (print, json and rpc never prompt: `--approve`/`--no-approve` or the
    /// `defaultProjectTrust` setting decide), then the merged settings.
    pub fn load(agent_dir: &Path, cwd: &Path, args: &RunArgs) -> anyhow::Result<Settings> {
        let settings = Settings::load_quiet(agent_dir, cwd, args)?;
        for problem in settings.config.errors() {
            eprintln!("Warning: {problem}");
        }
        Ok(settings)
    }

    /// [`Settings::load`] without printing the problems (`config.errors()` has them), for
    /// the interactive mode's /reload, where stderr would write over the screen.
    pub fn load_quiet(agent_dir: &Path, cwd: &Path, args: &RunArgs) -> anyhow::Result<Settings> {
        let global = config::Settings::load_global(agent_dir);
        let override_ = if args.approve {
            Some(true)
        } else if args.no_approve {
            Some(false)
        } else {
            // A `project_trust` handler's answer (see `extensions::decide_trust`).
            args.project_trusted
                .or_else(|| super::extensions::decided_trust(cwd))
        };
        let decision = resolve_trust(
            cwd,
            &TrustStore::new(agent_dir),
            TrustInputs {
                override_,
                default: global.default_project_trust(),
                interactive: false,
                home: home(),
            },
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        let trusted = matches!(decision, TrustDecision::Trusted);
        let cfg = config::Settings::load(agent_dir, cwd, trusted);
        let compaction = cfg
            .compaction(None)
            .map_err(|e| anyhow::anyhow!("settings.json: {e}"))?;
        Ok(Settings {
            retry: cfg.retry(),
            compaction,
            default_provider: cfg.default_provider().map(str::to_string),
            default_model: cfg.default_model().map(str::to_string),
            default_thinking_level: cfg.default_thinking_level().map(|l| l.as_str().to_string()),
            session_dir: cfg.session_dir().map(|p| p.display().to_string()),
            session_store: cfg.session_store().map(str::to_string),
            steering_mode: Some(cfg.steering_mode().to_string()),
            follow_up_mode: Some(cfg.follow_up_mode().to_string()),
            config: Arc::new(cfg),
            trusted,
        })
    }

    /// Context files, skills, SYSTEM.md / APPEND_SYSTEM.md and the prompt flags.
    pub fn resources(&self, agent_dir: &Path, cwd: &Path, args: &RunArgs) -> Resources {
        let mut options =
            ResourceOptions::new(agent_dir, cwd, self.trusted).with_settings(&self.config);
        options.system_prompt = args.system_prompt.clone();
        options.append_system_prompt = args.append_system_prompt.clone();
        options.no_context_files = args.no_context_files;
        let packages = crate::commands::packages::startup_resources(agent_dir, cwd, self.trusted);
        options.package_skill_paths = packages.enabled(Kind::Skills);
        options.package_prompt_paths = packages.enabled(Kind::Prompts);
        let mut resources = Resources::load(&options);
        resources.package_extensions = packages.enabled(Kind::Extensions);
        // The interactive mode's themes, before the ones extensions contribute: the
        // project's `.pi/themes` (when trusted), `<agent>/themes`, installed packages' themes.
        if self.trusted {
            resources
                .theme_paths
                .push(pi_agent::config::project_config_dir(cwd).join("themes"));
        }
        resources.theme_paths.push(agent_dir.join("themes"));
        resources.theme_paths.extend(packages.enabled(Kind::Themes));
        for failure in &packages.failures {
            resources.diagnostics.push(pi_agent::config::Diagnostic {
                kind: "warning",
                message: format!("could not be installed: {}", failure.message),
                path: failure.source.clone().into(),
                winner: None,
            });
        }
        resources
    }
}
