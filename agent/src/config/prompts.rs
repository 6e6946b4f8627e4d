//! Prompt templates: `.md` files invoked as `/name args`, with bash-like argument
//! placeholders (Pi's `prompt-templates`).

use std::path::Path;
use std::path::PathBuf;

use super::frontmatter::parse_frontmatter;
use super::resources::Diagnostic;

/// One prompt template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptTemplate {
    /// The file name without `.md`; invoked as `/name`.
    pub name: String,
    /// Frontmatter `description`, else the first non-empty body line (60 characters, then
    /// `...`).
    pub description: String,
    /// Frontmatter `argument-hint`.
    pub argument_hint: Option<String>,
    /// The body after the frontmatter.
    pub content: String,
    /// The file.
    pub file_path: PathBuf,
}

/// Loads templates from files and directories (directories non-recursively, `*.md` only).
/// The first template of a name wins; later ones are reported as collisions.
pub fn load_prompt_templates(
    paths: &[PathBuf],
    diagnostics: &mut Vec<Diagnostic>,
) -> Vec<PromptTemplate> {
    let mut templates: Vec<PromptTemplate> = Vec::new();
    for path in paths {
        let files = match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                let mut files: Vec<PathBuf> = std::fs::read_dir(path)
                    .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect())
                    .unwrap_or_default();
                files.sort();
                files
                    .into_iter()
                    .filter(|f| f.extension().is_some_and(|e| e == "md") && f.is_file())
                    .collect()
            }
            Ok(meta) if meta.is_file() && path.extension().is_some_and(|e| e == "md") => {
                vec![path.clone()]
            }
            _ => Vec::new(),
        };
        for file in files {
            let Some(template) = load_file(&file, diagnostics) else {
                continue;
            };
            if let Some(winner) = templates.iter().find(|t| t.name == template.name) {
                diagnostics.push(Diagnostic::collision(
                    format!("name \"/{}\" collision", template.name),
                    &template.file_path,
                    &winner.file_path,
                ));
                continue;
            }
            templates.push(template);
        }
    }
    templates
}

fn load_file(path: &Path, diagnostics: &mut Vec<Diagnostic>) -> Option<PromptTemplate> {
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
            diagnostics.push(Diagnostic::warning(e, path));
            return None;
        }
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().trim_end_matches(".md").to_string())
        .unwrap_or_default();
    let mut description = fm.str("description").unwrap_or("").to_string();
    if description.is_empty() {
        if let Some(first) = fm.body.split('\n').find(|l| !l.trim().is_empty()) {
            // Pi counts UTF-16 units; for the BMP text of a first line that is characters.
            description = first.chars().take(60).collect();
            if first.chars().count() > 60 {
                description.push_str("...");
            }
        }
    }
    Some(PromptTemplate {
        name,
        description,
        argument_hint: fm
            .str("argument-hint")
            .filter(|h| !h.is_empty())
            .map(str::to_string),
        content: fm.body,
        file_path: path.to_path_buf(),
    })
}

/// Splits arguments like a shell: whitespace separates, `"..."` and `'...'` group (only at
/// the start of an argument, so apostrophes inside words stay), `\"` inside double quotes (or
/// `\'` inside single) is the quote itself, `""` is an empty argument, and an unclosed quote
/// is read as a literal character.
pub fn parse_command_args(input: &str) -> Vec<String> {
    let chars: Vec<char> = input.chars().collect();
    let mut args = Vec::new();
    let mut current = String::new();
    let mut has_token = false;
    let mut in_quote: Option<char> = None;
    let mut quote_start = 0;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if let Some(q) = in_quote {
            if c == '\\' && chars.get(i + 1) == Some(&q) {
                current.push(q);
                i += 1;
            } else if c == q {
                in_quote = None;
            } else {
                current.push(c);
            }
        } else if (c == '"' || c == '\'') && !has_token {
            in_quote = Some(c);
            quote_start = i;
            has_token = true;
        } else if c.is_whitespace() {
            if has_token {
                args.push(std::mem::take(&mut current));
                has_token = false;
            }
        } else {
            current.push(c);
            has_token = true;
        }
        if in_quote.is_some() && i == chars.len() - 1 {
            // Unclosed: keep the quote as text and read on from just after it.
            in_quote = None;
            current = chars[quote_start].to_string();
            i = quote_start;
        }
        i += 1;
    }
    if has_token {
        args.push(current);
    }
    args
}

/// Replaces placeholders in `content`: `$1`…, `$@` / `$ARGUMENTS` (all, space-joined),
/// `${N:-default}` / `${@:-default}` / `${ARGUMENTS:-default}` (default when missing or
/// empty), `${@:N}` (from the Nth on) and `${@:N:L}` (L from the Nth). Substituted values are
/// not scanned again.
pub fn substitute_args(content: &str, args: &[String]) -> String {
    let all = args.join(" ");
    let bytes = content.as_bytes();
    let mut out = String::with_capacity(content.len());
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' {
            i += 1;
            continue;
        }
        if let Some((replacement, len)) = placeholder(&content[i..], args, &all) {
            out.push_str(&content[copied..i]);
            out.push_str(&replacement);
            i += len;
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&content[copied..]);
    out
}

/// Matches one placeholder at the start of `s` (which starts with `$`); the replacement and
/// the matched length.
fn placeholder(s: &str, args: &[String], all: &str) -> Option<(String, usize)> {
    let rest = &s[1..];
    let digits = |t: &str| t.bytes().take_while(u8::is_ascii_digit).count();
    let positional = |n: &str| -> Option<&String> {
        // `$0` or an absurd index names no argument.
        let index = n.parse::<usize>().ok()?.checked_sub(1)?;
        args.get(index)
    };
    if let Some(inner) = rest.strip_prefix('{') {
        let close = inner.find('}')?;
        let body = &inner[..close];
        let len = 1 + 1 + close + 1;
        // ${target:-default}
        for target in ["ARGUMENTS", "@"] {
            if let Some(default) = body.strip_prefix(target).and_then(|b| b.strip_prefix(":-")) {
                let value = if all.is_empty() { default } else { all };
                return Some((value.to_string(), len));
            }
        }
        let n = digits(body);
        if n > 0 {
            if let Some(default) = body[n..].strip_prefix(":-") {
                let value = positional(&body[..n]).filter(|v| !v.is_empty());
                return Some((value.map_or(default, String::as_str).to_string(), len));
            }
        }
        // ${@:N} and ${@:N:L}
        let slice = body.strip_prefix("@:")?;
        let n = digits(slice);
        if n == 0 {
            return None;
        }
        let start = slice[..n]
            .parse::<usize>()
            .unwrap_or(usize::MAX)
            .saturating_sub(1);
        let tail = &slice[n..];
        let length = if tail.is_empty() {
            None
        } else {
            let l = tail.strip_prefix(':')?;
            if digits(l) != l.len() || l.is_empty() {
                return None;
            }
            Some(l.parse::<usize>().unwrap_or(usize::MAX))
        };
        let from = start.min(args.len());
        let to = length.map_or(args.len(), |l| from.saturating_add(l).min(args.len()));
        return Some((args[from..to].join(" "), len));
    }
    if rest.starts_with("ARGUMENTS") {
        return Some((all.to_string(), 1 + "ARGUMENTS".len()));
    }
    if rest.starts_with('@') {
        return Some((all.to_string(), 2));
    }
    let n = digits(rest);
    if n > 0 {
        let value = positional(&rest[..n]).cloned().unwrap_or_default();
        return Some((value, 1 + n));
    }
    None
}

/// Expands `/name args` when `name` is a template; other text comes back unchanged.
pub fn expand_prompt_template(text: &str, templates: &[PromptTemplate]) -> String {
    let Some(rest) = text.strip_prefix('/') else {
        return text.to_string();
    };
    let name_len = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let name = &rest[..name_len];
    if name.is_empty() {
        return text.to_string();
    }
    let Some(template) = templates.iter().find(|t| t.name == name) else {
        return text.to_string();
    };
    let args = parse_command_args(rest[name_len..].trim_start());
    substitute_args(&template.content, &args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn argument_parsing_like_pi() {
        assert_eq!(
            parse_command_args(r#"a "b c" 'd e' f"#),
            args(&["a", "b c", "d e", "f"])
        );
        assert_eq!(
            parse_command_args(r#"say "he said \"hi\"""#),
            args(&["say", "he said \"hi\""])
        );
        assert_eq!(parse_command_args(r#""" x"#), args(&["", "x"]));
        assert_eq!(parse_command_args("don't stop"), args(&["don't", "stop"]));
        assert_eq!(parse_command_args("  "), args(&[]));
        // Unclosed quote: the quote is literal and the rest splits normally.
        assert_eq!(parse_command_args(r#"a "b c"#), args(&["a", "\"b", "c"]));
    }

    #[test]
    fn substitution_cases() {
        let a = args(&["one", "two", "three"]);
        let cases = [
            ("$1 and $2", "one and two"),
            ("$4|", "|"),
            ("all: $@", "all: one two three"),
            ("all: $ARGUMENTS", "all: one two three"),
            ("${2:-x} ${5:-dflt}", "two dflt"),
            ("${@:2}", "two three"),
            ("${@:2:1}", "two"),
            ("${@:0}", "one two three"),
            ("${@:9}", ""),
            ("$$1", "$one"),
            ("${x} $ cost $5.00", "${x} $ cost .00"),
            ("$10", ""),
        ];
        for (template, expected) in cases {
            assert_eq!(substitute_args(template, &a), expected, "{template}");
        }
        assert_eq!(
            substitute_args("${@:-none} ${ARGUMENTS:-none}", &[]),
            "none none"
        );
        assert_eq!(substitute_args("${1:-d}", &args(&[""])), "d");
        // Values are not substituted again.
        assert_eq!(substitute_args("$1 $2", &args(&["$2", "x"])), "$2 x");
    }

    #[test]
    fn templates_load_and_expand() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("prompts");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("review.md"),
            "---\ndescription: Review code\nargument-hint: <file>\n---\nReview $1 focusing on ${2:-bugs}.",
        )
        .unwrap();
        std::fs::write(dir.join("long.md"), format!("\n\n{}\nmore", "x".repeat(70))).unwrap();
        std::fs::write(dir.join("skip.txt"), "not a template").unwrap();
        let other = tmp.path().join("review.md");
        std::fs::write(&other, "dup").unwrap();
        let mut diags = Vec::new();
        let templates = load_prompt_templates(&[dir.clone(), other], &mut diags);
        assert_eq!(templates.len(), 2);
        assert_eq!(templates[0].name, "long");
        assert_eq!(templates[0].description, format!("{}...", "x".repeat(60)));
        assert_eq!(templates[1].argument_hint.as_deref(), Some("<file>"));
        assert_eq!(diags.len(), 1);
        assert_eq!(
            expand_prompt_template("/review src/main.rs", &templates),
            "Review src/main.rs focusing on bugs."
        );
        assert_eq!(
            expand_prompt_template("/review \"a b.rs\" perf", &templates),
            "Review a b.rs focusing on perf."
        );
        assert_eq!(
            expand_prompt_template("/unknown x", &templates),
            "/unknown x"
        );
        assert_eq!(expand_prompt_template("review x", &templates), "review x");
    }
}
