//! Skills (Agent Skills format): `SKILL.md` files with `name` / `description` frontmatter,
//! listed in the system prompt and expanded by `/skill:name args`.
//!
//! Discovery in a directory follows Pi: a directory holding `SKILL.md` is one skill and is not
//! searched further; otherwise its subdirectories are searched, and in a `.pi/skills` root,
//! loose `*.md` files with a description are skills too (in `.agents/skills` trees, loose
//! files below the root are). Dot entries and `node_modules` are skipped, and so is anything
//! a `.gitignore`, `.ignore` or `.fdignore` inside the tree excludes.

use std::path::Path;
use std::path::PathBuf;

use super::frontmatter::parse_frontmatter;
use super::paths::canonicalize_or_normalize;
use super::resources::Diagnostic;

const MAX_NAME_LENGTH: usize = 64;
const MAX_DESCRIPTION_LENGTH: usize = 1024;

/// One skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its name (frontmatter `name`, else the directory name).
    pub name: String,
    /// What it is for; required.
    pub description: String,
    /// The skill file.
    pub file_path: PathBuf,
    /// The directory its relative references resolve against.
    pub base_dir: PathBuf,
    /// `disable-model-invocation: true`: not listed in the prompt, only `/skill:name` works.
    pub disable_model_invocation: bool,
}

/// How loose `.md` files in a skill tree are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillDirMode {
    /// `.pi/skills`, settings and CLI paths: loose files at the root are candidates.
    Pi,
    /// `.agents/skills`: loose files below the root are candidates.
    Agents,
}

/// Loads skills from `sources` in order (files or directories). The first skill of a name
/// wins; later ones are reported as collisions. The same file reached twice (symlinks) is
/// loaded once.
pub fn load_skills(
    sources: &[(PathBuf, SkillDirMode)],
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<Skill> {
    let mut skills: Vec<Skill> = Vec::new();
    let mut seen_files = Vec::new();
    for (path, mode) in sources {
        let mut found = Vec::new();
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => collect(path, path, *mode, &mut found),
            Ok(meta) if meta.is_file() && path.extension().is_some_and(|e| e == "md") => {
                found.push(path.clone())
            }
            Ok(_) => {
                diagnostics.push(Diagnostic::warning(
                    "skill path is not a markdown file",
                    path,
                ));
                continue;
            }
            Err(_) => continue,
        }
        for file in found {
            let key = canonicalize_or_normalize(&file);
            if seen_files.contains(&key) {
                continue;
            }
            let Some(skill) = load_skill_file(&file, diagnostics) else {
                continue;
            };
            if let Some(winner) = skills.iter().find(|s| s.name == skill.name) {
                diagnostics.push(Diagnostic::collision(
                    format!("name \"{}\" collision", skill.name),
                    &skill.file_path,
                    &winner.file_path,
                ));
                continue;
            }
            seen_files.push(key);
            skills.push(skill);
        }
    }
    skills
}

fn sorted_entries(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut entries: Vec<(String, PathBuf)> = read
        .filter_map(Result::ok)
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    // Node's readdir order is the file system's; sorting makes ours reproducible.
    entries.sort();
    entries
}

/// The ignore files met on the way down; the deepest match decides, as in git.
struct IgnoreStack(Vec<ignore::gitignore::Gitignore>);

impl IgnoreStack {
    fn push_dir(&mut self, dir: &Path) -> bool {
        let mut builder = ignore::gitignore::GitignoreBuilder::new(dir);
        let mut any = false;
        for name in [".gitignore", ".ignore", ".fdignore"] {
            let file = dir.join(name);
            if file.is_file() {
                // A malformed line only loses that line.
                let _ = builder.add(&file);
                any = true;
            }
        }
        match builder.build() {
            Ok(matcher) if any => {
                self.0.push(matcher);
                true
            }
            _ => false,
        }
    }

    fn ignores(&self, path: &Path, is_dir: bool) -> bool {
        for matcher in self.0.iter().rev() {
            let m = matcher.matched(path, is_dir);
            if m.is_ignore() {
                return true;
            }
            if m.is_whitelist() {
                return false;
            }
        }
        false
    }
}

fn collect(dir: &Path, root: &Path, mode: SkillDirMode, out: &mut Vec<PathBuf>) {
    collect_with(dir, root, mode, out, &mut IgnoreStack(Vec::new()));
}

fn collect_with(
    dir: &Path,
    root: &Path,
    mode: SkillDirMode,
    out: &mut Vec<PathBuf>,
    ignores: &mut IgnoreStack,
) {
    let pushed = ignores.push_dir(dir);
    let entries = sorted_entries(dir);
    let declared = entries
        .iter()
        .find(|(name, path)| name == "SKILL.md" && path.is_file() && !ignores.ignores(path, false));
    if let Some((_, skill)) = declared {
        out.push(skill.clone());
    } else {
        for (name, path) in entries {
            if name.starts_with('.') || name == "node_modules" {
                continue;
            }
            // `metadata` follows symlinks; a broken link is skipped.
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if ignores.ignores(&path, meta.is_dir()) {
                continue;
            }
            if meta.is_dir() {
                collect_with(&path, root, mode, out, ignores);
            } else if meta.is_file() && name.ends_with(".md") {
                let at_root = dir == root;
                let wanted = match mode {
                    SkillDirMode::Pi => at_root,
                    SkillDirMode::Agents => !at_root,
                };
                if wanted {
                    out.push(path);
                }
            }
        }
    }
    if pushed {
        ignores.0.pop();
    }
}

fn load_skill_file(path: &Path, diagnostics: &mut Vec<Diagnostic>) -> Option<Skill> {
    let declared = path.file_name().is_some_and(|n| n == "SKILL.md");
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) => {
            diagnostics.push(Diagnostic::warning(e.to_string(), path));
            return None;
        }
    };
    let fm = match parse_frontmatter(&text) {
        Ok(fm) => fm,
        Err(e) => {
            if declared {
                diagnostics.push(Diagnostic::warning(e, path));
            }
            return None;
        }
    };
    let description = fm.str("description").filter(|d| !d.trim().is_empty());
    if !declared && description.is_none() {
        return None;
    }
    let base_dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    match description {
        None => diagnostics.push(Diagnostic::warning("description is required", path)),
        Some(d) if d.chars().count() > MAX_DESCRIPTION_LENGTH => {
            diagnostics.push(Diagnostic::warning(
                format!(
                    "description exceeds {MAX_DESCRIPTION_LENGTH} characters ({})",
                    d.chars().count()
                ),
                path,
            ))
        }
        Some(_) => {}
    }
    let dir_name = base_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = fm
        .str("name")
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .unwrap_or(dir_name);
    for problem in name_problems(&name) {
        diagnostics.push(Diagnostic::warning(problem, path));
    }
    // Invalid names still load (with warnings); a missing description does not.
    Some(Skill {
        name,
        description: description?.to_string(),
        file_path: path.to_path_buf(),
        base_dir,
        disable_model_invocation: fm.fields.get("disable-model-invocation")
            == Some(&serde_json::Value::Bool(true)),
    })
}

fn name_problems(name: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if name.chars().count() > MAX_NAME_LENGTH {
        problems.push(format!(
            "name exceeds {MAX_NAME_LENGTH} characters ({})",
            name.chars().count()
        ));
    }
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        problems.push(
            "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)".into(),
        );
    }
    if name.starts_with('-') || name.ends_with('-') {
        problems.push("name must not start or end with a hyphen".into());
    }
    if name.contains("--") {
        problems.push("name must not contain consecutive hyphens".into());
    }
    problems
}

fn escape_xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// The body of the prompt's `skills` section: a short instruction naming the tool that loads
/// skill files (`read`, `bash`, or none for an indirect reader), then Pi's
/// `<available_skills>` list. Empty when no skill is visible to the model.
pub fn format_skills_for_prompt(skills: &[Skill], reader: Option<&str>) -> String {
    let visible: Vec<&Skill> = skills
        .iter()
        .filter(|s| !s.disable_model_invocation)
        .collect();
    if visible.is_empty() {
        return String::new();
    }
    let how = match reader {
        Some("read") => {
            "When a task fits a skill's description, open its file with the read tool first."
        }
        Some("bash") => "When a task fits a skill's description, print its file with bash first.",
        _ => "When a task fits a skill's description, load its file first.",
    };
    let mut lines = vec![
        "Skills below carry instructions for particular kinds of work.".to_string(),
        how.to_string(),
        "Paths inside a skill are relative to the folder holding its file; pass absolute paths to tools.".to_string(),
        String::new(),
        "<available_skills>".to_string(),
    ];
    for skill in visible {
        lines.push("  <skill>".into());
        lines.push(format!("    <name>{}</name>", escape_xml(&skill.name)));
        lines.push(format!(
            "    <description>{}</description>",
            escape_xml(&skill.description)
        ));
        lines.push(format!(
            "    <location>{}</location>",
            escape_xml(&skill.file_path.to_string_lossy())
        ));
        lines.push("  </skill>".into());
    }
    lines.push("</available_skills>".into());
    lines.join("\n")
}

/// Expands `/skill:name args` into the skill's body wrapped in a `<skill>` block, followed by
/// the arguments. Other text, unknown skills and unreadable files come back unchanged (`Err`
/// carries the read error for the caller to report, as Pi emits it as an error event).
pub fn expand_skill_command(text: &str, skills: &[Skill]) -> Result<String, String> {
    let Some(rest) = text.strip_prefix("/skill:") else {
        return Ok(text.to_string());
    };
    let (name, args) = match rest.find(' ') {
        Some(i) => (&rest[..i], rest[i + 1..].trim()),
        None => (rest, ""),
    };
    let Some(skill) = skills.iter().find(|s| s.name == name) else {
        return Ok(text.to_string());
    };
    let content = std::fs::read_to_string(&skill.file_path)
        .map_err(|e| format!("{}: {e}", skill.file_path.display()))?;
    let body = match parse_frontmatter(&content) {
        Ok(fm) => fm.body.trim().to_string(),
        Err(_) => content.trim().to_string(),
    };
    let block = format!(
        "<skill name=\"{}\" location=\"{}\">\nRelative paths in this skill resolve against {}.\n\n{body}\n</skill>",
        skill.name,
        skill.file_path.display(),
        skill.base_dir.display()
    );
    Ok(if args.is_empty() {
        block
    } else {
        format!("{block}\n\n{args}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn discovery_validation_and_collisions() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tmp.path().join("a");
        write(
            &a.join("pdf/SKILL.md"),
            "---\nname: pdf\ndescription: PDFs\n---\nUse pdftotext.",
        );
        // Below a SKILL.md nothing more is searched.
        write(
            &a.join("pdf/sub/SKILL.md"),
            "---\nname: hidden\ndescription: x\n---\n",
        );
        write(
            &a.join("loose.md"),
            "---\ndescription: loose one\n---\nbody",
        );
        write(&a.join("notes.md"), "no frontmatter, not a skill");
        write(&a.join("Bad_Name/SKILL.md"), "---\ndescription: d\n---\n");
        write(&a.join("nodesc/SKILL.md"), "---\nname: nodesc\n---\n");
        write(
            &a.join(".hidden/SKILL.md"),
            "---\nname: dot\ndescription: d\n---\n",
        );
        let b = tmp.path().join("b");
        write(
            &b.join("pdf/SKILL.md"),
            "---\nname: pdf\ndescription: other\n---\n",
        );
        write(
            &b.join("x/deep.md"),
            "---\ndescription: agents-mode loose\n---\n",
        );
        write(
            &b.join("top.md"),
            "---\ndescription: not at agents root\n---\n",
        );
        let mut diags = Vec::new();
        let skills = load_skills(
            &[
                (a.clone(), SkillDirMode::Pi),
                (b.clone(), SkillDirMode::Agents),
            ],
            &mut diags,
        );
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, vec!["Bad_Name", "a", "pdf", "x"]);
        assert_eq!(skills[2].description, "PDFs");
        assert_eq!(skills[2].base_dir, a.join("pdf"));
        let messages: Vec<&str> = diags.iter().map(|d| d.message.as_str()).collect();
        assert!(messages.contains(&"description is required"));
        assert!(messages.contains(
            &"name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)"
        ));
        assert!(messages.contains(&"name \"pdf\" collision"));
    }

    #[test]
    fn skill_command_expansion_and_prompt_list() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("s/SKILL.md");
        write(
            &file,
            "---\nname: s\ndescription: A <b> & 'c'\n---\n\nDo things.\n",
        );
        let skills = load_skills(
            &[(tmp.path().to_path_buf(), SkillDirMode::Pi)],
            &mut Vec::new(),
        );
        let out = expand_skill_command("/skill:s fix it", &skills).unwrap();
        assert_eq!(
            out,
            format!(
                "<skill name=\"s\" location=\"{}\">\nRelative paths in this skill resolve against {}.\n\nDo things.\n</skill>\n\nfix it",
                file.display(),
                file.parent().unwrap().display()
            )
        );
        assert_eq!(
            expand_skill_command("/skill:nope x", &skills).unwrap(),
            "/skill:nope x"
        );
        assert_eq!(expand_skill_command("hello", &skills).unwrap(), "hello");
        let listed = format_skills_for_prompt(&skills, Some("read"));
        assert!(listed.contains("<description>A &lt;b&gt; &amp; &apos;c&apos;</description>"));
        assert!(listed.ends_with("</available_skills>"));
        let mut hidden = skills.clone();
        hidden[0].disable_model_invocation = true;
        assert_eq!(format_skills_for_prompt(&hidden, Some("read")), "");
    }
}
