//! `/changelog`: this build's CHANGELOG.md (embedded at compile time), shown as Pi shows its
//! own: every release section, oldest first so the newest ends next to the editor.

/// The repository's changelog, as built.
pub const CHANGELOG: &str = include_str!("../../../CHANGELOG.md");

/// Pi's rule for a release header: `## ` then an optional `[`, then `major.minor.patch`.
fn is_release_header(line: &str) -> bool {
    let Some(rest) = line.strip_prefix("## ") else {
        return false;
    };
    let rest = rest.trim_start();
    let rest = rest.strip_prefix('[').unwrap_or(rest);
    let version: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let parts: Vec<&str> = version.split('.').collect();
    parts.len() >= 3 && parts[..3].iter().all(|p| !p.is_empty())
}

/// The release sections of `text` in file order, each from its `## ` header to the next
/// `## ` header, trimmed. Sections whose header names no version (`## [Unreleased]`) and
/// the text before the first release are left out, as in Pi.
pub fn entries(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in text.lines() {
        if line.starts_with("## ") {
            if let Some(lines) = current.take() {
                out.push(lines.join("\n").trim().to_string());
            }
            if is_release_header(line) {
                current = Some(vec![line]);
            }
        } else if let Some(lines) = current.as_mut() {
            lines.push(line);
        }
    }
    if let Some(lines) = current {
        out.push(lines.join("\n").trim().to_string());
    }
    out
}

/// What `/changelog` shows: the releases oldest first, or Pi's note when there are none.
pub fn markdown(text: &str) -> String {
    let mut all = entries(text);
    if all.is_empty() {
        return "No changelog entries found.".into();
    }
    all.reverse();
    all.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_oldest_first_without_unreleased() {
        let text = "# Changelog\n\nintro\n\n## [Unreleased]\n\n- wip\n\n## [1.2.0] - 2026-02-01\n\n- new\n\n## 1.1.0\n\n- old\n";
        assert_eq!(
            entries(text),
            vec!["## [1.2.0] - 2026-02-01\n\n- new", "## 1.1.0\n\n- old"]
        );
        assert_eq!(
            markdown(text),
            "## 1.1.0\n\n- old\n\n## [1.2.0] - 2026-02-01\n\n- new"
        );
        assert_eq!(markdown("# nothing\n"), "No changelog entries found.");
    }

    #[test]
    fn the_shipped_changelog_has_a_release() {
        assert!(!entries(CHANGELOG).is_empty());
        assert!(markdown(CHANGELOG).contains(env!("CARGO_PKG_VERSION")));
    }
}
