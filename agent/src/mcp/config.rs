//! `mcp.json`: the `mcpServers` shape other MCP clients share, read from `<agentDir>/mcp.json`
//! and, for a trusted project only, `<cwd>/.pi/mcp.json` (Pi 1.6.0's `loadMcpConfig`).
//!
//! A project entry replaces a user entry of the same name. A project entry with none of
//! `command`, `url`, `type` is an override: it may set only `enabled`, `exposure` and
//! `toolExposure` of the user entry and keeps the rest (credentials a project must not set).
//! Every invalid entry becomes one error line (`<file>: <problem>`) and is skipped; the other
//! servers still load.

use std::path::Path;
use std::path::PathBuf;

use serde_json::Map;
use serde_json::Value;

/// How a server's tools reach the model (`exposure` / `toolExposure`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposure {
    /// Callable from codemode scripts only (the default).
    Codemode,
    /// Declared once `tool_search` loads it.
    Deferred,
    /// Declared to the model like a built-in tool.
    Direct,
    /// Registered but unreachable.
    Hidden,
}

impl Exposure {
    /// The configuration word, with Pi's alias `codemode-deferred` for `codemode`.
    pub fn parse(word: &str) -> Option<Exposure> {
        match word {
            "codemode" | "codemode-deferred" => Some(Exposure::Codemode),
            "deferred" => Some(Exposure::Deferred),
            "direct" => Some(Exposure::Direct),
            "hidden" => Some(Exposure::Hidden),
            _ => None,
        }
    }

    /// The configuration word.
    pub fn as_str(self) -> &'static str {
        match self {
            Exposure::Codemode => "codemode",
            Exposure::Deferred => "deferred",
            Exposure::Direct => "direct",
            Exposure::Hidden => "hidden",
        }
    }
}

const EXPOSURE_CHOICES: &str = "\"codemode\", \"deferred\", \"direct\", \"hidden\"";

/// Where a server is connected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio {
        /// One executable (not a shell string).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment; values may be `${VAR}` templates or `!command`.
        env: Vec<(String, String)>,
        /// Working directory, relative to the session directory.
        cwd: Option<String>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Extra headers; values may be `${VAR}` templates or `!command`.
        headers: Vec<(String, String)>,
    },
}

/// One validated `mcpServers` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerConfig {
    /// The entry as written (exposure aliases resolved), for `pi mcp add` to store.
    pub raw: Map<String, Value>,
    /// stdio or HTTP.
    pub transport: Transport,
    /// `enabled` (default true).
    pub enabled: bool,
    /// `description`.
    pub description: Option<String>,
    /// `timeout` in seconds (default 60): per request, reset by progress notifications.
    pub timeout_secs: f64,
    /// `exposure`, when set (the default is codemode).
    pub exposure: Option<Exposure>,
    /// `toolExposure` in file order: exact tool names or `*` patterns.
    pub tool_exposure: Vec<(String, Exposure)>,
}

/// Seconds a request may wait without progress when `timeout` is not set.
pub const DEFAULT_TIMEOUT_SECS: f64 = 60.0;

impl ServerConfig {
    /// The server's exposure (`codemode` when not set).
    pub fn exposure(&self) -> Exposure {
        self.exposure.unwrap_or(Exposure::Codemode)
    }

    /// One tool's exposure: an exact `toolExposure` key wins, then the first matching pattern,
    /// then the server's exposure.
    pub fn tool_exposure(&self, tool: &str) -> Exposure {
        self.tool_exposure_over(tool, self.exposure())
    }

    /// [`ServerConfig::tool_exposure`] with `server` as the server's exposure (one `/mcp`
    /// changed during the run).
    pub fn tool_exposure_over(&self, tool: &str, server: Exposure) -> Exposure {
        if let Some((_, exposure)) = self.tool_exposure.iter().find(|(key, _)| key == tool) {
            return *exposure;
        }
        self.tool_exposure
            .iter()
            .find(|(key, _)| key.contains('*') && wildcard_match(key, tool))
            .map(|(_, exposure)| *exposure)
            .unwrap_or(server)
    }

    /// `url`, or the command line, as `pi mcp list` shows it.
    pub fn describe_transport(&self) -> String {
        match &self.transport {
            Transport::Http { url, .. } => url.clone(),
            Transport::Stdio { command, args, .. } => std::iter::once(command.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// Whether a config file is the user's or the project's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `<agentDir>/mcp.json`.
    Global,
    /// `<cwd>/.pi/mcp.json`.
    Project,
}

impl Scope {
    /// `global` or `project`, as Pi prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Project => "project",
        }
    }
}

/// A configured server and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerEntry {
    /// The server name (letters, digits, `_`, `-`).
    pub name: String,
    /// Its validated configuration (with a project override applied).
    pub config: ServerConfig,
    /// The file that defines it.
    pub source: PathBuf,
    /// Which kind of file that is.
    pub scope: Scope,
    /// The project file that overrides `enabled`/`exposure`/`toolExposure`, if any.
    pub override_source: Option<PathBuf>,
}

/// Everything the config files say.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct McpConfig {
    /// Valid servers, in file order (a project entry takes the place of the user entry).
    pub servers: Vec<ServerEntry>,
    /// One line per invalid file or entry.
    pub errors: Vec<String>,
    /// `autoEnableCodemode` (the project's value wins).
    pub auto_enable_codemode: Option<bool>,
    /// The project file, when the project is trusted (read or not).
    pub project_config: Option<PathBuf>,
}

/// `<agentDir>/mcp.json`.
pub fn global_config_path(agent_dir: &Path) -> PathBuf {
    agent_dir.join("mcp.json")
}

/// `<cwd>/.pi/mcp.json`.
pub fn project_config_path(cwd: &Path) -> PathBuf {
    cwd.join(".pi").join("mcp.json")
}

/// Reads the user file and, when `project_trusted`, the project file.
pub fn load_mcp_config(agent_dir: &Path, cwd: &Path, project_trusted: bool) -> McpConfig {
    let mut config = McpConfig::default();
    read_config_file(&global_config_path(agent_dir), Scope::Global, &mut config);
    if project_trusted {
        let path = project_config_path(cwd);
        read_config_file(&path, Scope::Project, &mut config);
        config.project_config = Some(path);
    }
    config
}

const OVERRIDE_KEYS: [&str; 3] = ["enabled", "exposure", "toolExposure"];

/// Whether an entry overrides a server defined elsewhere: no `command`, `url` or `type`.
pub fn is_override(entry: &Map<String, Value>) -> bool {
    !entry.contains_key("command") && !entry.contains_key("url") && !entry.contains_key("type")
}

fn read_config_file(path: &Path, scope: Scope, state: &mut McpConfig) {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            state.errors.push(format!("{}: {e}", path.display()));
            return;
        }
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let parsed: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => {
            state.errors.push(format!("{}: {e}", path.display()));
            return;
        }
    };
    let servers = match parsed.as_object() {
        Some(object) => match object.get("mcpServers") {
            None => None,
            Some(Value::Object(servers)) => Some(servers),
            Some(_) => {
                state.errors.push(format!(
                    "{}: expected an object with an \"mcpServers\" object",
                    path.display()
                ));
                return;
            }
        },
        None => {
            state.errors.push(format!(
                "{}: expected an object with an \"mcpServers\" object",
                path.display()
            ));
            return;
        }
    };
    match parsed.get("autoEnableCodemode") {
        None => {}
        Some(Value::Bool(value)) => state.auto_enable_codemode = Some(*value),
        Some(_) => state.errors.push(format!(
            "{}: autoEnableCodemode must be a boolean",
            path.display()
        )),
    }
    let Some(servers) = servers else { return };
    for (name, value) in servers {
        if scope == Scope::Project {
            if let Some(entry) = value.as_object().filter(|entry| is_override(entry)) {
                apply_override(path, name, entry, state);
                continue;
            }
        }
        let config = match validate_server_config(name, value) {
            Ok(config) => config,
            Err(error) => {
                state.errors.push(format!("{}: {error}", path.display()));
                continue;
            }
        };
        // Names that differ only in `-` and `_` would share a namespace.
        let namespace = mcp_namespace(name);
        if let Some(clash) = state
            .servers
            .iter()
            .find(|other| &other.name != name && mcp_namespace(&other.name) == namespace)
        {
            state.errors.push(format!(
                "{}: server \"{name}\" conflicts with \"{}\"",
                path.display(),
                clash.name
            ));
            continue;
        }
        let entry = ServerEntry {
            name: name.clone(),
            config,
            source: path.to_path_buf(),
            scope,
            override_source: None,
        };
        match state.servers.iter_mut().find(|other| &other.name == name) {
            Some(existing) => *existing = entry,
            None => state.servers.push(entry),
        }
    }
}

fn apply_override(path: &Path, name: &str, entry: &Map<String, Value>, state: &mut McpConfig) {
    let Some(base) = state.servers.iter_mut().find(|other| other.name == name) else {
        state.errors.push(format!(
            "{}: server \"{name}\" needs \"command\" or \"url\", or a global server to override",
            path.display()
        ));
        return;
    };
    if entry
        .keys()
        .any(|key| !OVERRIDE_KEYS.contains(&key.as_str()))
    {
        state.errors.push(format!(
            "{}: server \"{name}\": an override can only set {}",
            path.display(),
            OVERRIDE_KEYS.join(", ")
        ));
        return;
    }
    let mut merged = base.config.raw.clone();
    for (key, value) in entry {
        merged.insert(key.clone(), value.clone());
    }
    match validate_server_config(name, &Value::Object(merged)) {
        Ok(config) => {
            base.config = config;
            base.override_source = Some(path.to_path_buf());
        }
        Err(error) => state.errors.push(format!("{}: {error}", path.display())),
    }
}

fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn string_pairs(value: Option<&Value>) -> Option<Vec<(String, String)>> {
    match value {
        None => Some(Vec::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
            .collect(),
        Some(_) => None,
    }
}

/// Validates one entry (Pi's `validateMcpServerConfig`): the error texts are Pi's.
pub fn validate_server_config(name: &str, raw: &Value) -> Result<ServerConfig, String> {
    if !valid_server_name(name) {
        return Err(format!(
            "invalid server name \"{name}\" (use letters, digits, \"_\" and \"-\")"
        ));
    }
    let Some(entry) = raw.as_object() else {
        return Err(format!("server \"{name}\" must be an object"));
    };
    let mut entry = entry.clone();
    resolve_exposure_aliases(&mut entry);
    let bad = |problem: &str| Err(format!("server \"{name}\": {problem}"));
    let enabled = match entry.get("enabled") {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return bad("enabled must be a boolean"),
    };
    let description = match entry.get("description") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return bad("description must be a string"),
    };
    let timeout_secs = match entry.get("timeout") {
        None => DEFAULT_TIMEOUT_SECS,
        Some(v) => match v.as_f64().filter(|t| *t > 0.0 && t.is_finite()) {
            Some(t) => t,
            None => return bad("timeout must be a positive number of seconds"),
        },
    };
    let kind = entry.get("type");
    if kind.and_then(Value::as_str) == Some("sse") {
        return bad("legacy SSE transport is not supported; use the streamable HTTP URL");
    }
    let type_is = |allowed: &[&str]| match kind {
        None => true,
        Some(Value::String(t)) => allowed.contains(&t.as_str()),
        Some(_) => false,
    };
    let transport = match (entry.get("url"), entry.get("command")) {
        (Some(Value::String(url)), _) if type_is(&["http", "streamable-http"]) => {
            let parsed = reqwest::Url::parse(url).ok();
            if !parsed.is_some_and(|u| u.scheme() == "http" || u.scheme() == "https") {
                return bad("url must be an http or https URL");
            }
            let Some(headers) = string_pairs(entry.get("headers")) else {
                return bad("headers must map names to strings");
            };
            if let Some(oauth) = entry.get("oauth") {
                if !oauth.is_object() {
                    return bad("oauth must be an object");
                }
            }
            // `auth.provider`: the provider login sent as the bearer token.
            if let Some(auth) = entry.get("auth") {
                if !auth.is_object() {
                    return bad("auth must be an object");
                }
                if auth.get("provider").is_some_and(|p| !p.is_string()) {
                    return bad("auth.provider must be a string");
                }
            }
            Transport::Http {
                url: url.clone(),
                headers,
            }
        }
        (_, Some(Value::String(command))) if type_is(&["stdio"]) => {
            let args = match entry.get("args") {
                None => Vec::new(),
                Some(Value::Array(items)) => {
                    match items
                        .iter()
                        .map(|a| a.as_str().map(str::to_string))
                        .collect()
                    {
                        Some(args) => args,
                        None => return bad("args must be an array of strings"),
                    }
                }
                Some(_) => return bad("args must be an array of strings"),
            };
            let Some(env) = string_pairs(entry.get("env")) else {
                return bad("env must map names to strings");
            };
            let cwd = match entry.get("cwd") {
                None => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => return bad("cwd must be a string"),
            };
            Transport::Stdio {
                command: command.clone(),
                args,
                env,
                cwd,
            }
        }
        _ => {
            return Err(format!(
                "server \"{name}\" needs either \"command\" (stdio) or \"url\" (streamable HTTP)"
            ))
        }
    };
    let exposure = match entry.get("exposure") {
        None => None,
        Some(v) => match v.as_str().and_then(Exposure::parse) {
            Some(e) => Some(e),
            None => return bad(&format!("exposure must be one of {EXPOSURE_CHOICES}")),
        },
    };
    let tool_exposure = match entry.get("toolExposure") {
        None => Vec::new(),
        Some(Value::Object(map)) => {
            let mut out = Vec::new();
            for (tool, value) in map {
                match value.as_str().and_then(Exposure::parse) {
                    Some(e) => out.push((tool.clone(), e)),
                    None => {
                        return bad(&format!(
                            "toolExposure \"{tool}\" must be one of {EXPOSURE_CHOICES}"
                        ))
                    }
                }
            }
            out
        }
        Some(_) => return bad("toolExposure must map tool names to exposures"),
    };
    Ok(ServerConfig {
        raw: entry,
        transport,
        enabled,
        description,
        timeout_secs,
        exposure,
        tool_exposure,
    })
}

/// Replaces `codemode-deferred` by `codemode` in `exposure` and `toolExposure`.
fn resolve_exposure_aliases(entry: &mut Map<String, Value>) {
    let fix = |value: &mut Value| {
        if value.as_str() == Some("codemode-deferred") {
            *value = Value::from("codemode");
        }
    };
    if let Some(value) = entry.get_mut("exposure") {
        fix(value);
    }
    if let Some(Value::Object(map)) = entry.get_mut("toolExposure") {
        map.values_mut().for_each(fix);
    }
}

/// `*` matches any characters; everything else literally.
pub fn wildcard_match(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(index) => rest = &rest[index + part.len()..],
            None => return false,
        }
    }
    true
}

/// Provider tool names are at most 64 characters of `[A-Za-z0-9_-]`.
const MAX_TOOL_NAME_LENGTH: usize = 64;

/// `mcp__<server>__<tool>` with every character but `[A-Za-z0-9_]` replaced by `_`; a name
/// that is too long or `is_taken` (another tool sanitized to the same name) gets a hash suffix
/// of `sha256(server \0 tool)`, as Pi names them.
pub fn mcp_tool_name(server: &str, tool: &str, is_taken: &dyn Fn(&str) -> bool) -> String {
    let name: String = format!("mcp__{server}__{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.len() <= MAX_TOOL_NAME_LENGTH && !is_taken(&name) {
        return name;
    }
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{server}\0{tool}").as_bytes(),
    );
    let hash: String = digest.as_ref()[..4]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!(
        "{}_{hash}",
        &name[..name.len().min(MAX_TOOL_NAME_LENGTH - hash.len() - 1)]
    )
}

/// A server's namespace: `mcp__<server>` with `-` as `_`.
pub fn mcp_namespace(server: &str) -> String {
    format!("mcp__{}", server.replace('-', "_"))
}

/// Whether a tool name is an MCP tool's.
pub fn is_mcp_tool_name(name: &str) -> bool {
    name.starts_with("mcp__")
}

/// Reads `path` (an empty object when missing), lets `edit` change its `mcpServers`, and
/// writes it back with its own indentation when `edit` returns true; other content is kept.
pub(crate) fn edit_mcp_servers(
    path: &Path,
    edit: impl FnOnce(&mut Map<String, Value>) -> bool,
) -> Result<(), String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e.to_string()),
    };
    let text = text.map(|t| t.strip_prefix('\u{feff}').unwrap_or(&t).to_string());
    let mut parsed: Value = match &text {
        Some(text) => serde_json::from_str(text).map_err(|e| e.to_string())?,
        None => Value::Object(Map::new()),
    };
    let shape_error = || {
        format!(
            "{}: expected an object with an \"mcpServers\" object",
            path.display()
        )
    };
    let object = parsed.as_object_mut().ok_or_else(shape_error)?;
    let servers = object
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(shape_error)?;
    if !edit(servers) {
        return Ok(());
    }
    let indent = text
        .as_deref()
        .and_then(|t| {
            t.lines().find_map(|line| {
                let ws: String = line
                    .chars()
                    .take_while(|c| *c == ' ' || *c == '\t')
                    .collect();
                (!ws.is_empty() && line.len() > ws.len()).then_some(ws)
            })
        })
        .unwrap_or_else(|| "  ".to_string());
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(&parsed, &mut serializer).map_err(|e| e.to_string())?;
    out.push(b'\n');
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    std::fs::write(path, out).map_err(|e| e.to_string())
}

/// Adds or replaces a server in an `mcp.json` (created when missing); true when replaced.
pub fn add_server_config(
    path: &Path,
    name: &str,
    config: Map<String, Value>,
) -> Result<bool, String> {
    let mut replaced = false;
    edit_mcp_servers(path, |servers| {
        replaced = servers
            .insert(name.to_string(), Value::Object(config))
            .is_some();
        true
    })?;
    Ok(replaced)
}

/// Removes a server from an `mcp.json`; false when the file does not define it.
pub fn remove_server_config(path: &Path, name: &str) -> Result<bool, String> {
    if !path.exists() {
        return Ok(false);
    }
    let mut removed = false;
    edit_mcp_servers(path, |servers| {
        removed = servers.shift_remove(name).is_some();
        removed
    })?;
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(path: &Path, value: Value) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, value.to_string()).unwrap();
    }

    #[test]
    fn project_entries_replace_and_override_user_entries() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agent");
        let cwd = dir.path().join("proj");
        write(
            &agent.join("mcp.json"),
            json!({"mcpServers": {
                "a": {"command": "x", "env": {"TOKEN": "${T}"}},
                "b": {"url": "http://127.0.0.1:1/mcp"},
                "c": {"command": "y"}
            }}),
        );
        write(
            &cwd.join(".pi/mcp.json"),
            json!({"autoEnableCodemode": false, "mcpServers": {
                "a": {"enabled": false, "exposure": "codemode-deferred"},
                "b": {"command": "z"},
                "c": {"enabled": false, "args": ["no"]},
                "d": {"enabled": true}
            }}),
        );
        let config = load_mcp_config(&agent, &cwd, true);
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        let a = &config.servers[0];
        assert!(!a.config.enabled);
        assert_eq!(a.config.exposure, Some(Exposure::Codemode));
        assert_eq!(a.scope, Scope::Global);
        assert!(a.override_source.is_some());
        assert!(matches!(&a.config.transport, Transport::Stdio { env, .. } if env[0].1 == "${T}"));
        assert_eq!(config.servers[1].scope, Scope::Project);
        assert!(
            config.servers[2].config.enabled,
            "a bad override is skipped"
        );
        assert_eq!(config.auto_enable_codemode, Some(false));
        assert_eq!(config.errors.len(), 2, "{:?}", config.errors);
        assert!(config.errors[0]
            .ends_with("server \"c\": an override can only set enabled, exposure, toolExposure"));
        assert!(config.errors[1].ends_with(
            "server \"d\" needs \"command\" or \"url\", or a global server to override"
        ));
        // Untrusted: the project file is not read.
        let config = load_mcp_config(&agent, &cwd, false);
        assert!(config.servers[0].config.enabled);
        assert!(config.errors.is_empty());
    }

    #[test]
    fn invalid_entries_are_reported_and_skipped() {
        let dir = tempfile::tempdir().unwrap();
        write(
            &dir.path().join("mcp.json"),
            json!({"mcpServers": {
                "bad name": {"command": "x"},
                "sse": {"type": "sse", "url": "http://h/sse"},
                "none": {},
                "exp": {"command": "x", "exposure": "loud"},
                "tex": {"command": "x", "toolExposure": {"get_*": "nope"}},
                "dev-tools": {"command": "x"},
                "dev_tools": {"command": "x"},
                "t": {"command": "x", "timeout": 0},
                "ok": {"url": "https://example.com/mcp", "exposure": "direct",
                       "toolExposure": {"get_*": "hidden", "get_one": "deferred"}}
            }}),
        );
        let config = load_mcp_config(dir.path(), dir.path(), false);
        let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["dev-tools", "ok"]);
        let errors: Vec<String> = config
            .errors
            .iter()
            .map(|e| e.split_once(": ").unwrap().1.to_string())
            .collect();
        assert_eq!(
            errors,
            [
                "invalid server name \"bad name\" (use letters, digits, \"_\" and \"-\")",
                "server \"sse\": legacy SSE transport is not supported; use the streamable HTTP URL",
                "server \"none\" needs either \"command\" (stdio) or \"url\" (streamable HTTP)",
                "server \"exp\": exposure must be one of \"codemode\", \"deferred\", \"direct\", \"hidden\"",
                "server \"tex\": toolExposure \"get_*\" must be one of \"codemode\", \"deferred\", \"direct\", \"hidden\"",
                "server \"dev_tools\" conflicts with \"dev-tools\"",
                "server \"t\": timeout must be a positive number of seconds",
            ]
        );
        let ok = &config.servers[1].config;
        assert_eq!(ok.tool_exposure("get_one"), Exposure::Deferred);
        assert_eq!(ok.tool_exposure("get_two"), Exposure::Hidden);
        assert_eq!(ok.tool_exposure("put"), Exposure::Direct);
        // A file that is not JSON names itself.
        std::fs::write(dir.path().join("mcp.json"), "{oops").unwrap();
        let config = load_mcp_config(dir.path(), dir.path(), false);
        assert!(config.errors[0].starts_with(&dir.path().join("mcp.json").display().to_string()));
    }

    #[test]
    fn tool_names_are_sanitized_and_collisions_hashed() {
        let none = |_: &str| false;
        assert_eq!(
            mcp_tool_name("dev-radius", "search.v2", &none),
            "mcp__dev_radius__search_v2"
        );
        let taken = |n: &str| n == "mcp__s__a_b";
        let hashed = mcp_tool_name("s", "a-b", &taken);
        assert!(hashed.starts_with("mcp__s__a_b_") && hashed.len() == "mcp__s__a_b_".len() + 8);
        let long = mcp_tool_name("s", &"x".repeat(80), &none);
        assert_eq!(long.len(), 64);
        assert_eq!(mcp_namespace("dev-radius"), "mcp__dev_radius");
    }

    #[test]
    fn add_and_remove_keep_other_content_and_indentation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mcp.json");
        std::fs::write(&path, "{\n    \"other\": 1,\n    \"mcpServers\": {}\n}\n").unwrap();
        let config = json!({"command": "npx", "args": ["-y", "pkg"]});
        assert!(!add_server_config(&path, "fs", config.as_object().unwrap().clone()).unwrap());
        assert!(add_server_config(&path, "fs", config.as_object().unwrap().clone()).unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\n    \"other\": 1,"), "{text}");
        assert!(text.contains("\"fs\": {"), "{text}");
        assert!(remove_server_config(&path, "fs").unwrap());
        assert!(!remove_server_config(&path, "fs").unwrap());
        assert!(!remove_server_config(&dir.path().join("none.json"), "fs").unwrap());
    }
}
