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

    /// The interactive mode's theme files and directories, before the ones extensions
    /// contribute, in Pi's order: the trusted project's `themes` setting paths (relative to
    /// its `.pi`) and `.pi/themes`, the global `themes` setting paths (relative to the agent
    /// dir) and `<agent>/themes`, installed packages' themes — none of these with
    /// `--no-themes` — then the `--theme` paths (relative to the cwd).
    fn theme_paths(
        &self,
        agent_dir: &Path,
        cwd: &Path,
        args: &RunArgs,
        packages: &pi_agent::packages::Resolved,
    ) -> Vec<std::path::PathBuf> {
        use pi_agent::config::{home, project_config_dir, resolve_path};
        let home = home();
        let setting = |map: &serde_json::Map<String, serde_json::Value>, base: &Path| {
            map.get("themes")
                .and_then(serde_json::Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_str)
                .map(|p| resolve_path(p, base, home.as_deref()))
                .collect::<Vec<_>>()
        };
        let mut paths = Vec::new();
        if !args.no_themes {
            if self.trusted {
                let project = project_config_dir(cwd);
                paths.extend(setting(self.config.project(), &project));
                paths.push(project.join("themes"));
            }
            paths.extend(setting(self.config.global(), agent_dir));
            paths.push(agent_dir.join("themes"));
            paths.extend(packages.enabled(Kind::Themes));
        }
        for given in &args.themes {
            let path = resolve_path(given, cwd, home.as_deref());
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
        paths
    }

    /// Context files, skills, SYSTEM.md / APPEND_SYSTEM.md and the prompt flags.
    pub fn resources(&self, agent_dir: &Path, cwd: &Path, args: &RunArgs) -> Resources {
        let mut options =
            ResourceOptions::new(agent_dir, cwd, self.trusted).with_settings(&self.config);
        options.system_prompt = args.system_prompt.clone();
        options.append_system_prompt = args.append_system_prompt.clone();
        options.no_context_files = args.no_context_files;
        options.no_skills = args.no_skills;
        options.skill_paths = args.skills.clone();
        options.no_prompt_templates = args.no_prompt_templates;
        options.prompt_template_paths = args.prompt_templates.clone();
        let packages = crate::commands::packages::startup_resources(agent_dir, cwd, self.trusted);
        // Packages `-e` named, and `-e` directories (packages too, to Pi): their skills and
        // templates load first, also with `--no-skills` / `--no-prompt-templates`.
        let temporary = crate::commands::packages::temporary_resources(
            agent_dir,
            cwd,
            self.trusted,
            &super::extensions::package_sources(args, cwd),
        );
        options.temporary_skill_paths = temporary.enabled_with_sources(Kind::Skills);
        options.temporary_prompt_paths = temporary.enabled_with_sources(Kind::Prompts);
        options.package_skill_paths = packages.enabled_with_sources(Kind::Skills);
        options.package_prompt_paths = packages.enabled_with_sources(Kind::Prompts);
        let mut resources = Resources::load(&options);
        resources.package_extensions = packages.enabled_with_sources(Kind::Extensions);
        resources.theme_paths = self.theme_paths(agent_dir, cwd, args, &packages);
        resources
            .theme_paths
            .extend(temporary.enabled(Kind::Themes));
        // A `-e` directory's extension files are found by discovery, as `-e` files are.
        resources.temporary_extensions = temporary
            .enabled_with_sources(Kind::Extensions)
            .into_iter()
            .filter(|(_, info)| !Path::new(&info.source).is_absolute())
            .collect();
        resources.builtin_extensions = pi_agent::config::BUILTIN_COMMANDS
            .iter()
            .map(|(extension, _, _)| extension.to_string())
            .filter(|extension| {
                !(args.no_mcp && extension == "mcp")
                    && pi_agent::config::builtin_enabled(
                        &self.config,
                        extension,
                        args.no_extensions,
                        &args.extensions,
                    )
            })
            .collect();
        let home = pi_agent::config::home();
        for given in &args.themes {
            let path = pi_agent::config::resolve_path(given, cwd, home.as_deref());
            if !path.exists() {
                resources.diagnostics.push(pi_agent::config::Diagnostic {
                    kind: "error",
                    message: "Theme path does not exist".into(),
                    path,
                    winner: None,
                });
            }
        }
        for failure in packages.failures.iter().chain(&temporary.failures) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The theme paths in Pi's order: the trusted project's `themes` setting and
    /// `.pi/themes`, the global setting and `<agent>/themes`, then `--theme` paths; with
    /// `--no-themes` only the given ones.
    #[test]
    fn theme_paths_follow_settings_and_flags() {
        let tmp = tempfile::tempdir().unwrap();
        let (agent, cwd) = (tmp.path().join("agent"), tmp.path().join("work"));
        std::fs::create_dir_all(cwd.join(".pi")).unwrap();
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::write(
            agent.join("settings.json"),
            r#"{"themes": ["mine/dark.json"]}"#,
        )
        .unwrap();
        std::fs::write(
            cwd.join(".pi/settings.json"),
            r#"{"themes": ["../team-themes"]}"#,
        )
        .unwrap();
        let args = RunArgs {
            approve: true,
            themes: vec!["given.json".into()],
            ..RunArgs::default()
        };
        let settings = Settings::load_quiet(&agent, &cwd, &args).unwrap();
        let resources = settings.resources(&agent, &cwd, &args);
        assert_eq!(
            resources.theme_paths,
            [
                cwd.join("team-themes"),
                cwd.join(".pi/themes"),
                agent.join("mine/dark.json"),
                agent.join("themes"),
                cwd.join("given.json"),
            ]
        );
        assert!(resources
            .diagnostics
            .iter()
            .any(|d| d.message == "Theme path does not exist" && d.path == cwd.join("given.json")));

        let only_given = RunArgs {
            no_themes: true,
            ..args
        };
        let resources = settings.resources(&agent, &cwd, &only_given);
        assert_eq!(resources.theme_paths, [cwd.join("given.json")]);
    }
}
