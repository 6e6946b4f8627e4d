//! The few settings the modes need, read from `<agentDir>/settings.json` and
//! `<cwd>/.pi/settings.json` (project wins, objects merge key by key).
//!
//! Interim: `engine::config` (being written) will own settings; until it lands this reads
//! only the keys the agent runtime needs and ignores everything else.

use std::path::Path;

use anyhow::Context as _;
use pi_engine::compaction::{CompactionSettings, CompactionSettingsFile, RetrySettings};
use serde_json::{Map, Value};

/// Settings used by the agent runtime.
#[derive(Debug, Clone, Default)]
pub struct Settings {
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

fn read(path: &Path) -> anyhow::Result<Map<String, Value>> {
    match std::fs::read_to_string(path) {
        Ok(text) => match serde_json::from_str::<Value>(&text)
            .with_context(|| format!("{}: invalid JSON", path.display()))?
        {
            Value::Object(m) => Ok(m),
            _ => anyhow::bail!("{}: expected a JSON object", path.display()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn merge(base: &mut Map<String, Value>, over: Map<String, Value>) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(Value::Object(b)), Value::Object(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

impl Settings {
    /// Global then project settings.
    pub fn load(agent_dir: &Path, cwd: &Path) -> anyhow::Result<Settings> {
        let mut all = read(&agent_dir.join("settings.json"))?;
        merge(&mut all, read(&cwd.join(".pi").join("settings.json"))?);
        let s = |k: &str| all.get(k).and_then(Value::as_str).map(str::to_string);
        let mut out = Settings {
            default_provider: s("defaultProvider"),
            default_model: s("defaultModel"),
            default_thinking_level: s("defaultThinkingLevel"),
            session_dir: s("sessionDir"),
            session_store: s("sessionStore"),
            steering_mode: s("steeringMode"),
            follow_up_mode: s("followUpMode"),
            ..Default::default()
        };
        if let Some(r) = all.get("retry").and_then(Value::as_object) {
            if let Some(b) = r.get("enabled").and_then(Value::as_bool) {
                out.retry.enabled = b;
            }
            if let Some(n) = r.get("maxRetries").and_then(Value::as_u64) {
                out.retry.max_retries = n.min(u64::from(u32::MAX)) as u32;
            }
            if let Some(n) = r.get("baseDelayMs").and_then(Value::as_u64) {
                out.retry.base_delay_ms = n;
            }
            if let Some(n) = r.get("maxDelayMs").and_then(Value::as_u64) {
                out.retry.max_agent_delay_ms = n;
            }
        }
        if let Some(c) = all.get("compaction") {
            let file: CompactionSettingsFile = serde_json::from_value(c.clone())
                .context("settings.json: invalid compaction settings")?;
            out.compaction = file.resolve(None).map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        Ok(out)
    }
}
