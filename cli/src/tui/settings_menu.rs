//! The /settings entries beyond the UI's own (theme, thinking blocks, quiet start-up,
//! auto-compaction): Pi's entries for the settings this build honours, each saved to the
//! global settings.json under Pi's key with Pi's value type.
//!
//! Entries for settings this build does not act on (transport, cache warming, Mermaid,
//! images shown inline, editor padding, fullscreen options…) are left out rather than offered
//! without effect; docs/tui.md lists them.

use super::dialogs::Setting;

/// Values of the entries below, read from settings at start-up and on /reload.
#[derive(Debug, Clone, PartialEq)]
pub struct Prefs {
    /// `steeringMode`: `one-at-a-time` or `all`.
    pub steering_mode: String,
    /// `followUpMode`: `one-at-a-time` or `all`.
    pub follow_up_mode: String,
    /// `treeFilterMode`: the filter /tree opens with.
    pub tree_filter: String,
    /// `httpIdleTimeoutMs` (0: no limit).
    pub http_idle_timeout_ms: u64,
    /// `images.blockImages`.
    pub block_images: bool,
    /// `enableSkillCommands`.
    pub skill_commands: bool,
}

impl Default for Prefs {
    fn default() -> Prefs {
        Prefs {
            steering_mode: "one-at-a-time".into(),
            follow_up_mode: "one-at-a-time".into(),
            tree_filter: "default".into(),
            http_idle_timeout_ms: 300_000,
            block_images: false,
            skill_commands: true,
        }
    }
}

impl Prefs {
    pub fn from_settings(cfg: &pi_agent::config::Settings) -> Prefs {
        Prefs {
            steering_mode: cfg.steering_mode().to_string(),
            follow_up_mode: cfg.follow_up_mode().to_string(),
            tree_filter: cfg.tree_filter_mode().to_string(),
            // An invalid value is reported at start-up; the menu shows the default.
            http_idle_timeout_ms: cfg.http_idle_timeout_ms().unwrap_or(300_000),
            block_images: cfg.block_images(),
            skill_commands: cfg.enable_skill_commands(),
        }
    }
}

/// Pi's choices for the HTTP idle timeout, as labelled in its menu.
pub const HTTP_IDLE_TIMEOUTS: [(&str, u64); 5] = [
    ("30 sec", 30_000),
    ("1 min", 60_000),
    ("2 min", 120_000),
    ("5 min", 300_000),
    ("disabled", 0),
];

/// Pi's label for a timeout (a value set by hand shows as seconds).
fn timeout_label(ms: u64) -> String {
    HTTP_IDLE_TIMEOUTS
        .iter()
        .find(|(_, v)| *v == ms)
        .map(|(l, _)| l.to_string())
        .unwrap_or_else(|| format!("{} sec", ms as f64 / 1000.0))
}

fn choice(key: &'static str, label: &'static str, options: &[&str], current: &str) -> Setting {
    let mut options: Vec<String> = options.iter().map(|o| o.to_string()).collect();
    let value = match options.iter().position(|o| o == current) {
        Some(i) => i,
        // A value from settings.json that is no choice stays selectable as it is.
        None => {
            options.push(current.to_string());
            options.len() - 1
        }
    };
    Setting {
        key,
        label,
        options,
        value,
    }
}

fn flag(key: &'static str, label: &'static str, on: bool) -> Setting {
    choice(
        key,
        label,
        &["true", "false"],
        if on { "true" } else { "false" },
    )
}

/// The entries, in Pi's order.
pub fn items(p: &Prefs) -> Vec<Setting> {
    let timeouts: Vec<&str> = HTTP_IDLE_TIMEOUTS.iter().map(|(l, _)| *l).collect();
    vec![
        flag("images.blockImages", "Block images", p.block_images),
        flag("enableSkillCommands", "Skill commands", p.skill_commands),
        choice(
            "steeringMode",
            "Steering mode",
            &["one-at-a-time", "all"],
            &p.steering_mode,
        ),
        choice(
            "followUpMode",
            "Follow-up mode",
            &["one-at-a-time", "all"],
            &p.follow_up_mode,
        ),
        choice(
            "httpIdleTimeoutMs",
            "HTTP idle timeout",
            &timeouts,
            &timeout_label(p.http_idle_timeout_ms),
        ),
    ]
}

/// The entries that belong after "Quiet startup" in Pi's order.
pub fn late_items(p: &Prefs, double_escape: &str) -> Vec<Setting> {
    vec![
        choice(
            "doubleEscapeAction",
            "Double-escape action",
            &["tree", "fork", "none"],
            double_escape,
        ),
        choice(
            "treeFilterMode",
            "Tree filter mode",
            &["default", "no-tools", "user-only", "labeled-only", "all"],
            &p.tree_filter,
        ),
    ]
}

/// The settings.json value Pi writes for `text` chosen in entry `key`: booleans and the
/// timeout as JSON booleans and numbers, the rest as strings. `None` for a timeout label
/// that is no number.
pub fn json_value(key: &str, text: &str) -> Option<serde_json::Value> {
    match key {
        "images.blockImages" | "enableSkillCommands" => Some((text == "true").into()),
        "httpIdleTimeoutMs" => HTTP_IDLE_TIMEOUTS
            .iter()
            .find(|(l, _)| *l == text)
            .map(|(_, ms)| *ms)
            .or_else(|| {
                let secs: f64 = text.strip_suffix(" sec")?.parse().ok()?;
                Some((secs * 1000.0) as u64)
            })
            .map(Into::into),
        _ => Some(text.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_saved_with_pis_types() {
        assert_eq!(json_value("images.blockImages", "true"), Some(true.into()));
        assert_eq!(
            json_value("enableSkillCommands", "false"),
            Some(false.into())
        );
        assert_eq!(
            json_value("httpIdleTimeoutMs", "2 min"),
            Some(120_000.into())
        );
        assert_eq!(json_value("httpIdleTimeoutMs", "disabled"), Some(0.into()));
        assert_eq!(
            json_value("httpIdleTimeoutMs", "45 sec"),
            Some(45_000.into())
        );
        assert_eq!(json_value("steeringMode", "all"), Some("all".into()));
    }

    #[test]
    fn current_values_are_selected_and_odd_ones_kept() {
        let p = Prefs {
            http_idle_timeout_ms: 45_000,
            steering_mode: "all".into(),
            ..Prefs::default()
        };
        let items = items(&p);
        let shown = |key: &str| {
            let i = items.iter().find(|i| i.key == key).expect(key);
            i.options[i.value].clone()
        };
        assert_eq!(shown("httpIdleTimeoutMs"), "45 sec");
        assert_eq!(shown("steeringMode"), "all");
        assert_eq!(shown("images.blockImages"), "false");
        assert_eq!(shown("enableSkillCommands"), "true");
    }
}
