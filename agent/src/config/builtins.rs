//! Whether one of Pi's built-in extensions (`builtin:mcp`, `builtin:llama.cpp`,
//! `builtin:codemode`, `builtin:tool-search`) is on for this run.
//!
//! settings.md: they load by default; an `extensions` entry `-builtin:<name>` turns one
//! off and `+builtin:<name>` (or a bare `builtin:<name>`) on, the project's entry
//! overriding the user's; `--no-extensions` turns them all off, and `-e builtin:<name>`
//! loads one explicitly whatever the settings say.

use serde_json::Value;

use super::settings::Settings;

/// The commands Pi's built-in extensions register: (extension, command, description).
pub const BUILTIN_COMMANDS: [(&str, &str, &str); 2] = [
    ("llama.cpp", "llama", "Manage llama.cpp router models"),
    (
        "mcp",
        "mcp",
        "Manage MCP servers: sign in, reconnect, enable or disable, and change exposure",
    ),
];

/// The last toggle for `name` in one settings file's `extensions`, if any.
fn toggle(extensions: Option<&Value>, name: &str) -> Option<bool> {
    let on = format!("builtin:{name}");
    extensions
        .and_then(Value::as_array)?
        .iter()
        .filter_map(Value::as_str)
        .rev()
        .find_map(|entry| match entry.strip_prefix(['+', '-']) {
            Some(rest) if rest == on => Some(entry.starts_with('+')),
            None if entry == on => Some(true),
            _ => None,
        })
}

/// Whether built-in extension `name` is enabled (see the module docs). `cli_extensions`
/// are the `-e` arguments.
pub fn builtin_enabled(
    settings: &Settings,
    name: &str,
    no_extensions: bool,
    cli_extensions: &[String],
) -> bool {
    let explicit = format!("builtin:{name}");
    if cli_extensions.contains(&explicit) {
        return true;
    }
    if no_extensions {
        return false;
    }
    toggle(settings.project().get("extensions"), name)
        .or_else(|| toggle(settings.global().get("extensions"), name))
        .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn toggles_follow_settings_md() {
        let s = |global: Value, project: Value| Settings::in_memory(global, project);
        let on = |st: &Settings, no_ext: bool, cli: &[&str]| {
            let cli: Vec<String> = cli.iter().map(|c| c.to_string()).collect();
            builtin_enabled(st, "llama.cpp", no_ext, &cli)
        };
        let none = s(json!({}), json!({}));
        assert!(on(&none, false, &[]));
        assert!(!on(&none, true, &[]));
        assert!(on(&none, true, &["builtin:llama.cpp"]));
        let off = s(
            json!({"extensions": ["./x.ts", "-builtin:llama.cpp"]}),
            json!({}),
        );
        assert!(!on(&off, false, &[]));
        assert!(on(&off, false, &["builtin:llama.cpp"]));
        let other = s(json!({"extensions": ["-builtin:mcp"]}), json!({}));
        assert!(on(&other, false, &[]));
        let project_on = s(
            json!({"extensions": ["-builtin:llama.cpp"]}),
            json!({"extensions": ["+builtin:llama.cpp"]}),
        );
        assert!(on(&project_on, false, &[]));
        let project_off = s(json!({}), json!({"extensions": ["-builtin:llama.cpp"]}));
        assert!(!on(&project_off, false, &[]));
    }
}
