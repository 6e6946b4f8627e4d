//! Everything the system prompt and input expansion draw from, loaded in one pass (Pi's
//! `DefaultResourceLoader.reload` without extensions and themes).

use std::path::Path;
use std::path::PathBuf;

use serde_json::Value;

use super::context_files::load_context_files;
use super::context_files::ContextFile;
use super::paths::canonicalize_or_normalize;
use super::paths::home;
use super::paths::project_config_dir;
use super::paths::resolve_path;
use super::prompts::load_prompt_templates;
use super::prompts::PromptTemplate;
use super::settings::Settings;
use super::skills::load_skills;
use super::skills::Skill;
use super::skills::SkillDirMode;
use super::source_info::Provenance;
use super::source_info::SourceInfo;
use super::source_info::SourceScope;

/// A non-fatal problem found while loading resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// `"warning"`, `"error"` or `"collision"`.
    pub kind: &'static str,
    /// What happened.
    pub message: String,
    /// The file concerned.
    pub path: PathBuf,
    /// For a collision: the file that won.
    pub winner: Option<PathBuf>,
}

impl Diagnostic {
    pub(crate) fn warning(message: impl Into<String>, path: &Path) -> Diagnostic {
        Diagnostic {
            kind: "warning",
            message: message.into(),
            path: path.to_path_buf(),
            winner: None,
        }
    }

    pub(crate) fn error(message: impl Into<String>, path: &Path) -> Diagnostic {
        Diagnostic {
            kind: "error",
            ..Diagnostic::warning(message, path)
        }
    }

    pub(crate) fn collision(message: String, loser: &Path, winner: &Path) -> Diagnostic {
        Diagnostic {
            kind: "collision",
            message,
            path: loser.to_path_buf(),
            winner: Some(winner.to_path_buf()),
        }
    }
}

/// What to load; mirrors the CLI flags that shape resources.
#[derive(Debug, Clone)]
pub struct ResourceOptions {
    /// The agent dir.
    pub agent_dir: PathBuf,
    /// The project directory.
    pub cwd: PathBuf,
    /// Whether project-local resources (`.pi/skills`, `.pi/prompts`, `.agents/skills`,
    /// `.pi/SYSTEM.md`, `.pi/APPEND_SYSTEM.md`, project settings paths) are used.
    pub project_trusted: bool,
    /// The home dir (for `~/.agents/skills` and `~` in paths).
    pub home: Option<PathBuf>,
    /// `--no-context-files` / `-nc`.
    pub no_context_files: bool,
    /// `--no-skills`: only `--skill` paths load.
    pub no_skills: bool,
    /// `--no-prompt-templates`: only `--prompt-template` paths load.
    pub no_prompt_templates: bool,
    /// `--skill <path>` (repeatable), relative to the cwd.
    pub skill_paths: Vec<String>,
    /// `--prompt-template <path>` (repeatable), relative to the cwd.
    pub prompt_template_paths: Vec<String>,
    /// `--system-prompt`: text, or a file path whose content is used.
    pub system_prompt: Option<String>,
    /// `--append-system-prompt` (repeatable): text or file paths.
    pub append_system_prompt: Vec<String>,
    /// `skills` paths from global settings (relative to the agent dir).
    pub global_skill_paths: Vec<String>,
    /// `skills` paths from project settings (relative to `<cwd>/.pi`).
    pub project_skill_paths: Vec<String>,
    /// `prompts` paths from global settings.
    pub global_prompt_paths: Vec<String>,
    /// `prompts` paths from project settings.
    pub project_prompt_paths: Vec<String>,
    /// Enabled skill files of installed packages (lowest precedence, as in Pi), each with
    /// its package.
    pub package_skill_paths: Vec<(PathBuf, SourceInfo)>,
    /// Enabled prompt-template files of installed packages.
    pub package_prompt_paths: Vec<(PathBuf, SourceInfo)>,
    /// Skill files of the packages `-e` named: first, and also with `--no-skills`.
    pub temporary_skill_paths: Vec<(PathBuf, SourceInfo)>,
    /// Prompt-template files of the packages `-e` named (as the skills).
    pub temporary_prompt_paths: Vec<(PathBuf, SourceInfo)>,
}

impl ResourceOptions {
    /// Defaults: everything on, no CLI paths, no settings paths, `HOME` from the environment.
    pub fn new(agent_dir: &Path, cwd: &Path, project_trusted: bool) -> ResourceOptions {
        ResourceOptions {
            agent_dir: agent_dir.to_path_buf(),
            cwd: cwd.to_path_buf(),
            project_trusted,
            home: home(),
            no_context_files: false,
            no_skills: false,
            no_prompt_templates: false,
            skill_paths: Vec::new(),
            prompt_template_paths: Vec::new(),
            system_prompt: None,
            append_system_prompt: Vec::new(),
            global_skill_paths: Vec::new(),
            project_skill_paths: Vec::new(),
            global_prompt_paths: Vec::new(),
            project_prompt_paths: Vec::new(),
            package_skill_paths: Vec::new(),
            package_prompt_paths: Vec::new(),
            temporary_skill_paths: Vec::new(),
            temporary_prompt_paths: Vec::new(),
        }
    }

    /// Takes the `skills` and `prompts` paths of both settings layers.
    pub fn with_settings(mut self, settings: &Settings) -> ResourceOptions {
        let list = |map: &serde_json::Map<String, Value>, key: &str| -> Vec<String> {
            map.get(key)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        self.global_skill_paths = list(settings.global(), "skills");
        self.global_prompt_paths = list(settings.global(), "prompts");
        self.project_skill_paths = list(settings.project(), "skills");
        self.project_prompt_paths = list(settings.project(), "prompts");
        self
    }
}

/// The loaded resources.
#[derive(Debug, Clone, Default)]
pub struct Resources {
    /// Context files in prompt order (empty with `--no-context-files`).
    pub context_files: Vec<ContextFile>,
    /// Skills, first of each name.
    pub skills: Vec<Skill>,
    /// Prompt templates, first of each name.
    pub prompt_templates: Vec<PromptTemplate>,
    /// The replacement system prompt (`--system-prompt`, else `.pi/SYSTEM.md` when trusted,
    /// else `<agent>/SYSTEM.md`).
    pub system_prompt: Option<String>,
    /// Where it came from, when it was a file.
    pub system_prompt_path: Option<PathBuf>,
    /// Text appended to the prompt (`--append-system-prompt`, else `.pi/APPEND_SYSTEM.md`
    /// when trusted, else `<agent>/APPEND_SYSTEM.md`), joined with blank lines by the builder.
    pub append_system_prompt: Vec<String>,
    /// Problems found.
    pub diagnostics: Vec<Diagnostic>,
    /// Enabled extension files of installed packages (filled by the caller that resolved
    /// the packages; [`Resources::load`] leaves it empty).
    pub package_extensions: Vec<(PathBuf, SourceInfo)>,
    /// Extension files of the packages `-e` named (`npm:…`, `git:…`), which load even with
    /// `--no-extensions` (filled by the caller, as [`Resources::package_extensions`]).
    pub temporary_extensions: Vec<(PathBuf, SourceInfo)>,
    /// Theme files and directories for the interactive mode's themes: the ones the caller
    /// found (the project's, the user's, packages'), then the ones extensions contributed
    /// (`resources_discover`'s `themePaths`).
    pub theme_paths: Vec<PathBuf>,
    /// Where the skills and prompt templates come from (Pi's `sourceInfo`); extensions'
    /// files are added by the caller that resolves them.
    pub provenance: Provenance,
    /// The built-in extensions on for the run (`mcp`, `llama.cpp`), whose commands
    /// `get_commands` lists (filled by the caller, which knows the flags).
    pub builtin_extensions: Vec<String>,
}

impl Resources {
    /// Loads everything `options` asks for. Never fails: problems become diagnostics.
    pub fn load(options: &ResourceOptions) -> Resources {
        let mut diagnostics = Vec::new();
        let home = options.home.as_deref();
        let project_dir = project_config_dir(&options.cwd);
        let trusted = options.project_trusted;

        let mut warnings = Vec::new();
        let context_files = if options.no_context_files {
            Vec::new()
        } else {
            load_context_files(&options.agent_dir, &options.cwd, &mut warnings)
        };
        diagnostics.extend(
            warnings
                .into_iter()
                .map(|w| Diagnostic::warning(w, &options.cwd)),
        );

        let cli_skills: Vec<(PathBuf, SkillDirMode)> = options
            .skill_paths
            .iter()
            .map(|p| (resolve_path(p, &options.cwd, home), SkillDirMode::Pi))
            .collect();
        for (path, _) in &cli_skills {
            if !path.exists() {
                diagnostics.push(Diagnostic::error("Skill path does not exist", path));
            }
        }
        // Pi's precedence: `-e` packages' skills, project settings paths, project
        // auto-discovery, user settings paths, user auto-discovery, packages; `--skill`
        // paths come last. Each source is recorded with where it comes from.
        let mut provenance = Provenance::new(&options.agent_dir, &options.cwd);
        let mut skill_sources = Vec::new();
        let mut add_skills =
            |root: PathBuf, mode: SkillDirMode, info: SourceInfo, sources: &mut Vec<_>| {
                provenance.add(&root, info);
                sources.push((root, mode));
            };
        for (path, info) in &options.temporary_skill_paths {
            add_skills(
                path.clone(),
                SkillDirMode::Pi,
                info.clone(),
                &mut skill_sources,
            );
        }
        if !options.no_skills {
            if trusted {
                for p in &options.project_skill_paths {
                    let root = resolve_path(p, &project_dir, home);
                    let info = SourceInfo::setting(SourceScope::Project);
                    add_skills(root, SkillDirMode::Pi, info, &mut skill_sources);
                }
                let info = SourceInfo::auto(SourceScope::Project, &project_dir);
                add_skills(
                    project_dir.join("skills"),
                    SkillDirMode::Pi,
                    info,
                    &mut skill_sources,
                );
                let user_agents =
                    home.map(|h| canonicalize_or_normalize(&h.join(".agents/skills")));
                for dir in ancestor_agents_skill_dirs(&options.cwd) {
                    if Some(canonicalize_or_normalize(&dir)) != user_agents {
                        // Each `.agents` directory is its skills' base.
                        let base = dir.parent().unwrap_or(&dir).to_path_buf();
                        let info = SourceInfo::auto(SourceScope::Project, &base);
                        add_skills(dir, SkillDirMode::Agents, info, &mut skill_sources);
                    }
                }
            }
            for p in &options.global_skill_paths {
                let root = resolve_path(p, &options.agent_dir, home);
                let info = SourceInfo::setting(SourceScope::User);
                add_skills(root, SkillDirMode::Pi, info, &mut skill_sources);
            }
            let info = SourceInfo::auto(SourceScope::User, &options.agent_dir);
            add_skills(
                options.agent_dir.join("skills"),
                SkillDirMode::Pi,
                info,
                &mut skill_sources,
            );
            if let Some(h) = home {
                let info = SourceInfo::auto(SourceScope::User, &h.join(".agents"));
                add_skills(
                    h.join(".agents/skills"),
                    SkillDirMode::Agents,
                    info,
                    &mut skill_sources,
                );
            }
            for (path, info) in &options.package_skill_paths {
                add_skills(
                    path.clone(),
                    SkillDirMode::Pi,
                    info.clone(),
                    &mut skill_sources,
                );
            }
        }
        skill_sources.extend(cli_skills);
        let skills = load_skills(&skill_sources, &mut diagnostics);

        let cli_prompts: Vec<PathBuf> = options
            .prompt_template_paths
            .iter()
            .map(|p| resolve_path(p, &options.cwd, home))
            .collect();
        for path in &cli_prompts {
            if !path.exists() {
                diagnostics.push(Diagnostic::error(
                    "Prompt template path does not exist",
                    path,
                ));
            }
        }
        let mut prompt_sources = Vec::new();
        let mut add_prompts = |root: PathBuf, info: SourceInfo, sources: &mut Vec<PathBuf>| {
            provenance.add(&root, info);
            sources.push(root);
        };
        for (path, info) in &options.temporary_prompt_paths {
            add_prompts(path.clone(), info.clone(), &mut prompt_sources);
        }
        if !options.no_prompt_templates {
            if trusted {
                for p in &options.project_prompt_paths {
                    let root = resolve_path(p, &project_dir, home);
                    add_prompts(
                        root,
                        SourceInfo::setting(SourceScope::Project),
                        &mut prompt_sources,
                    );
                }
                let info = SourceInfo::auto(SourceScope::Project, &project_dir);
                add_prompts(project_dir.join("prompts"), info, &mut prompt_sources);
            }
            for p in &options.global_prompt_paths {
                let root = resolve_path(p, &options.agent_dir, home);
                add_prompts(
                    root,
                    SourceInfo::setting(SourceScope::User),
                    &mut prompt_sources,
                );
            }
            let info = SourceInfo::auto(SourceScope::User, &options.agent_dir);
            add_prompts(options.agent_dir.join("prompts"), info, &mut prompt_sources);
            for (path, info) in &options.package_prompt_paths {
                add_prompts(path.clone(), info.clone(), &mut prompt_sources);
            }
        }
        prompt_sources.extend(cli_prompts);
        let prompt_templates = load_prompt_templates(&prompt_sources, &mut diagnostics);

        let pick = |name: &str| -> Option<PathBuf> {
            let project = project_dir.join(name);
            if trusted && project.exists() {
                return Some(project);
            }
            let global = options.agent_dir.join(name);
            global.exists().then_some(global)
        };
        let system_source = options
            .system_prompt
            .clone()
            .or_else(|| pick("SYSTEM.md").map(|p| p.to_string_lossy().into_owned()));
        let (system_prompt, system_prompt_path) = match system_source {
            Some(source) => {
                let (text, path) = text_or_file(&source, &mut diagnostics);
                (Some(text), path)
            }
            None => (None, None),
        };
        let append_sources = if options.append_system_prompt.is_empty() {
            pick("APPEND_SYSTEM.md")
                .map(|p| vec![p.to_string_lossy().into_owned()])
                .unwrap_or_default()
        } else {
            options.append_system_prompt.clone()
        };
        let append_system_prompt = append_sources
            .iter()
            .map(|s| text_or_file(s, &mut diagnostics).0)
            .collect();

        Resources {
            context_files,
            skills,
            prompt_templates,
            system_prompt,
            system_prompt_path,
            append_system_prompt,
            diagnostics,
            package_extensions: Vec::new(),
            temporary_extensions: Vec::new(),
            theme_paths: Vec::new(),
            provenance,
            builtin_extensions: Vec::new(),
        }
    }
}

impl Resources {
    /// Adds the theme files and directories extensions contributed (`resources_discover`'s
    /// `themePaths`), each once; a path that does not exist is a warning, as in Pi. Whether
    /// any was new.
    pub fn add_discovered_themes(&mut self, theme_paths: &[PathBuf]) -> bool {
        let mut added = false;
        for path in theme_paths {
            if self.theme_paths.contains(path) {
                continue;
            }
            if !path.exists() {
                self.diagnostics
                    .push(Diagnostic::warning("theme path does not exist", path));
                continue;
            }
            self.theme_paths.push(path.clone());
            added = true;
        }
        added
    }

    /// Adds the skills and prompt templates at paths extensions contributed
    /// (`resources_discover`), after everything loaded so far: a name already taken keeps
    /// its first definition and the newcomer is reported as a collision. Whether anything
    /// was added.
    pub fn add_discovered(&mut self, skill_paths: &[PathBuf], prompt_paths: &[PathBuf]) -> bool {
        let before = (self.skills.len(), self.prompt_templates.len());
        for path in skill_paths.iter().chain(prompt_paths) {
            if !path.exists() {
                self.diagnostics.push(Diagnostic::error(
                    "Extension resource path does not exist",
                    path,
                ));
            }
        }
        let sources: Vec<(PathBuf, SkillDirMode)> = skill_paths
            .iter()
            .map(|p| (p.clone(), SkillDirMode::Pi))
            .collect();
        for skill in load_skills(&sources, &mut self.diagnostics) {
            match self.skills.iter().find(|s| s.name == skill.name) {
                Some(winner) => self.diagnostics.push(Diagnostic::collision(
                    format!("name \"{}\" collision", skill.name),
                    &skill.file_path,
                    &winner.file_path,
                )),
                None => self.skills.push(skill),
            }
        }
        for template in load_prompt_templates(prompt_paths, &mut self.diagnostics) {
            match self
                .prompt_templates
                .iter()
                .find(|t| t.name == template.name)
            {
                Some(winner) => self.diagnostics.push(Diagnostic::collision(
                    format!("name \"{}\" collision", template.name),
                    &template.file_path,
                    &winner.file_path,
                )),
                None => self.prompt_templates.push(template),
            }
        }
        before != (self.skills.len(), self.prompt_templates.len())
    }
}

/// Pi's `resolvePromptInput`: an existing file's content, else the text itself.
fn text_or_file(source: &str, diagnostics: &mut Vec<Diagnostic>) -> (String, Option<PathBuf>) {
    let path = Path::new(source);
    if !source.is_empty() && !source.contains('\n') && path.exists() {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let text = text
                    .strip_prefix('\u{feff}')
                    .map(str::to_string)
                    .unwrap_or(text);
                return (text, Some(canonicalize_or_normalize(path)));
            }
            Err(e) => diagnostics.push(Diagnostic::warning(
                format!("Could not read file: {e}"),
                path,
            )),
        }
    }
    (source.to_string(), None)
}

/// `.agents/skills` in the cwd and its ancestors, up to the git repository root when inside
/// one, else up to the file system root.
fn ancestor_agents_skill_dirs(cwd: &Path) -> Vec<PathBuf> {
    let start = super::paths::normalize_lexically(cwd);
    let git_root = start
        .ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf);
    let mut dirs = Vec::new();
    for dir in start.ancestors() {
        dirs.push(dir.join(".agents").join("skills"));
        if git_root.as_deref() == Some(dir) {
            break;
        }
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let agent = tmp.path().join("agent");
        let cwd = tmp.path().join("proj");
        std::fs::create_dir_all(cwd.join(".git")).unwrap();
        write(
            &agent.join("skills/g/SKILL.md"),
            "---\nname: shared\ndescription: global\n---\n",
        );
        write(
            &cwd.join(".pi/skills/p/SKILL.md"),
            "---\nname: shared\ndescription: project\n---\n",
        );
        write(
            &cwd.join(".agents/skills/a/SKILL.md"),
            "---\nname: agents\ndescription: a\n---\n",
        );
        write(&agent.join("prompts/hello.md"), "global hello");
        write(&cwd.join(".pi/prompts/hello.md"), "project hello");
        write(&agent.join("SYSTEM.md"), "global system");
        write(&cwd.join(".pi/SYSTEM.md"), "project system");
        write(&agent.join("APPEND_SYSTEM.md"), "global append");
        write(&cwd.join(".pi/APPEND_SYSTEM.md"), "project append");
        (tmp, agent, cwd)
    }

    #[test]
    fn trusted_project_resources_take_precedence() {
        let (tmp, agent, cwd) = setup();
        let mut o = ResourceOptions::new(&agent, &cwd, true);
        o.home = Some(tmp.path().join("home"));
        let r = Resources::load(&o);
        let skills: Vec<(&str, &str)> = r
            .skills
            .iter()
            .map(|s| (s.name.as_str(), s.description.as_str()))
            .collect();
        assert_eq!(skills, vec![("shared", "project"), ("agents", "a")]);
        assert_eq!(r.prompt_templates.len(), 1);
        assert_eq!(r.prompt_templates[0].content, "project hello");
        assert_eq!(r.system_prompt.as_deref(), Some("project system"));
        assert_eq!(r.append_system_prompt, vec!["project append".to_string()]);
        assert!(r.diagnostics.iter().any(|d| d.kind == "collision"));
    }

    #[test]
    fn untrusted_project_resources_are_ignored() {
        let (tmp, agent, cwd) = setup();
        let mut o = ResourceOptions::new(&agent, &cwd, false);
        o.home = Some(tmp.path().join("home"));
        let r = Resources::load(&o);
        let names: Vec<&str> = r.skills.iter().map(|s| s.description.as_str()).collect();
        assert_eq!(names, vec!["global"]);
        assert_eq!(r.prompt_templates[0].content, "global hello");
        assert_eq!(r.system_prompt.as_deref(), Some("global system"));
        assert_eq!(r.append_system_prompt, vec!["global append".to_string()]);
    }

    #[test]
    fn cli_flags_override_files() {
        let (tmp, agent, cwd) = setup();
        let file = tmp.path().join("sys.txt");
        write(&file, "from file");
        let mut o = ResourceOptions::new(&agent, &cwd, true);
        o.home = Some(tmp.path().join("home"));
        o.system_prompt = Some(file.to_string_lossy().into_owned());
        o.append_system_prompt = vec!["literal one".into(), "literal two".into()];
        o.no_skills = true;
        o.no_context_files = true;
        o.skill_paths = vec!["missing-dir".into()];
        let r = Resources::load(&o);
        assert_eq!(r.system_prompt.as_deref(), Some("from file"));
        assert_eq!(r.system_prompt_path, Some(file.canonicalize().unwrap()));
        assert_eq!(r.append_system_prompt, vec!["literal one", "literal two"]);
        assert!(r.skills.is_empty());
        assert!(r.context_files.is_empty());
        assert!(r
            .diagnostics
            .iter()
            .any(|d| d.kind == "error" && d.message == "Skill path does not exist"));
    }
}
