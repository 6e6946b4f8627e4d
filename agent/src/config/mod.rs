//! Configuration and resources, as Pi 1.6.0 finds and applies them: paths, `settings.json`,
//! project trust, context files (`AGENTS.md`), the structured system prompt, skills, prompt
//! templates, `auth.json` and CLI model resolution.
//!
//! Everything here is synchronous and takes its environment explicitly (agent dir, cwd, an
//! env lookup, a home dir), so callers and tests never mutate the process environment.
//!
//! # How the pieces fit at startup
//!
//! ```no_run
//! use pi_agent::config::*;
//! # fn demo(tools: &[std::sync::Arc<dyn pi_agent::tools::Tool>]) -> ConfigResult<()> {
//! let env = |k: &str| std::env::var(k).ok();
//! let cwd = std::env::current_dir().unwrap();
//! let agent_dir = agent_dir(&env, home().as_deref());
//!
//! // 1. Trust: decided before anything project-local is read.
//! let global = Settings::load_global(&agent_dir);
//! let store = TrustStore::new(&agent_dir);
//! let decision = resolve_trust(&cwd, &store, TrustInputs {
//!     override_: None, // --approve / --no-approve
//!     default: global.default_project_trust(),
//!     interactive: false,
//!     home: home(),
//! })?;
//! let trusted = decision.trusted();
//!
//! // 2. Settings: global deep-merged with project (project only when trusted).
//! let settings = Settings::load(&agent_dir, &cwd, trusted);
//! for problem in settings.errors() { eprintln!("Warning: {problem}"); }
//!
//! // 3. Resources and the system prompt.
//! let resources =
//!     Resources::load(&ResourceOptions::new(&agent_dir, &cwd, trusted).with_settings(&settings));
//! let system = build_system_message(&SystemPromptInput {
//!     tools,
//!     cwd: &cwd,
//!     resources: &resources,
//!     docs: None,
//!     timestamp_ms: 0,
//! });
//! # let _ = system; Ok(()) }
//! ```
//!
//! * [`Settings`]: merged view with typed getters ([`Settings::compaction`],
//!   [`Settings::retry`], …); [`Settings::set_global`] / [`Settings::set_project`] write one
//!   key back, keeping everything else in the file, through a temp file and a rename.
//! * [`resolve_trust`] / [`TrustStore`]: `trust.json`, `defaultProjectTrust`,
//!   `--approve`/`--no-approve`. A [`TrustDecision::Ask`] is returned only in interactive mode;
//!   the caller offers [`TrustChoice::options`] and records the answer with
//!   [`TrustChoice::record`].
//! * [`Resources::load`]: context files, skills, prompt templates, `SYSTEM.md` and
//!   `APPEND_SYSTEM.md` (project-local ones only when trusted), `--system-prompt` and
//!   `--append-system-prompt`.
//! * [`build_system_message`]: the session's `system` message (`content`, ordered
//!   `sections`, `toolsAdded`), ready to be stored as a `message` entry. It replaces the
//!   interim `agent::prompt` builder (same shape, plus context files, skills, SYSTEM.md /
//!   APPEND_SYSTEM.md as Pi's `addendum` section, and Pi's per-tool `constrainedSampling`).
//! * [`expand_skill_command`], [`expand_prompt_template`]: what Pi does to `/skill:x` and
//!   `/template args` input before sending it.
//! * [`AuthStore`], [`resolve_api_key`]: `auth.json` (0600) and the key precedence
//!   `--api-key` > `auth.json` > env var > `models.json`.
//! * [`resolve_cli_model`], [`resolve_model_scope`], [`find_initial_model`],
//!   [`format_model_list`]: `--provider`, `--model`, `--thinking`, `--models`,
//!   `--list-models`.

mod auth;
mod builtins;
mod context_files;
pub(crate) mod error;
mod frontmatter;
mod models;
pub(crate) mod paths;
mod prompts;
mod resources;
mod settings;
mod skills;
mod source_info;
mod system_prompt;
mod trust;

#[cfg(test)]
mod tests;

pub use auth::api_key_env_vars;
pub use auth::env_api_key;
pub use auth::has_configured_auth;
pub use auth::resolve_api_key;
pub use auth::AuthStore;
pub use auth::Credential;
pub use builtins::builtin_enabled;
pub use builtins::BUILTIN_COMMANDS;
pub use context_files::load_context_files;
pub use context_files::ContextFile;
pub use error::ConfigError;
pub use error::ConfigResult;
pub use frontmatter::parse_frontmatter;
pub use frontmatter::Frontmatter;
pub use models::default_model_for_provider;
pub use models::find_initial_model;
pub use models::format_model_list;
pub use models::resolve_cli_model;
pub use models::resolve_model_scope;
pub use models::CliModelRequest;
pub use models::CliModelResolution;
pub use models::InitialModel;
pub use models::ScopedModel;
pub use models::DEFAULT_THINKING_LEVEL;
pub use paths::agent_dir;
pub use paths::expand_tilde;
pub use paths::home;
pub use paths::project_config_dir;
pub use paths::resolve_path;
pub use paths::CONFIG_DIR_NAME;
pub use prompts::expand_prompt_template;
pub use prompts::load_prompt_templates;
pub use prompts::parse_command_args;
pub use prompts::substitute_args;
pub use prompts::PromptTemplate;
pub use resources::Diagnostic;
pub use resources::ResourceOptions;
pub use resources::Resources;
pub use settings::BranchSummarySettings;
pub use settings::CompactionSettings;
pub use settings::DefaultProjectTrust;
pub use settings::RetrySettings;
pub use settings::Scope;
pub use settings::Settings;
pub use skills::expand_skill_command;
pub use skills::format_skills_for_prompt;
pub use skills::load_skills;
pub use skills::Skill;
pub use skills::SkillDirMode;
pub use source_info::Provenance;
pub use source_info::SourceInfo;
pub use source_info::SourceOrigin;
pub use source_info::SourceScope;
pub use system_prompt::build_system_message;
pub use system_prompt::build_system_sections;
pub use system_prompt::diff_system_sections;
pub use system_prompt::DocsPaths;
pub use system_prompt::SystemPromptInput;
pub use trust::has_trust_requiring_resources;
pub use trust::resolve_trust;
pub use trust::TrustChoice;
pub use trust::TrustDecision;
pub use trust::TrustInputs;
pub use trust::TrustStore;
