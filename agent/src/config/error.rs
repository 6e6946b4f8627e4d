//! The configuration layer's error type.

use std::path::Path;
use std::path::PathBuf;

/// What went wrong while reading or writing configuration. Every variant names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A file could not be read.
    #[error("failed to read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The io error.
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("failed to write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The io error.
        source: std::io::Error,
    },
    /// A JSON file is not valid JSON; `line` and `column` are 1-based.
    #[error("invalid JSON in {path} at line {line}, column {column}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Line of the error.
        line: usize,
        /// Column of the error.
        column: usize,
        /// serde_json's description.
        message: String,
    },
    /// The file is JSON but not of the expected shape.
    #[error("invalid {path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A write to project settings while the project is not trusted.
    #[error("project is not trusted; refusing to write project settings {path}")]
    Untrusted {
        /// The project settings file.
        path: PathBuf,
    },
}

/// Result alias of this module.
pub type ConfigResult<T> = Result<T, ConfigError>;

/// Parses JSON text from `path`, turning a syntax error into [`ConfigError::Parse`] with its
/// line and column. A leading byte order mark is ignored, as Pi does.
pub(crate) fn parse_json(text: &str, path: &Path) -> ConfigResult<serde_json::Value> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_json::from_str(text).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    })
}

/// serde_json appends " at line L column C" to its messages; the error carries them already.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// Reads a file that may be missing: `Ok(None)` when it does not exist.
pub(crate) fn read_optional(path: &Path) -> ConfigResult<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ConfigError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes `bytes` to `path` durably: a temp file in the same directory, `sync_data`, then a
/// rename, so a crash leaves either the old or the new file, never half of one. `mode` sets
/// the permission bits of the new file on Unix (the temp file is created with them, so the
/// secret is never briefly world-readable).
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], mode: Option<u32>) -> ConfigResult<()> {
    use std::io::Write;
    let err = |source| ConfigError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    std::fs::create_dir_all(dir).map_err(err)?;
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{file_name}.{}.{}.tmp",
        std::process::id(),
        rand::random::<u32>()
    ));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::fs::PermissionsExt;
        // Keep an existing file's permissions: a user who tightened settings.json keeps that.
        let existing = std::fs::metadata(path)
            .ok()
            .map(|m| m.permissions().mode() & 0o7777);
        options.mode(mode.or(existing).unwrap_or(0o644));
    }
    #[cfg(not(unix))]
    let _ = mode;
    let result = (|| {
        let mut file = options.open(&tmp)?;
        file.write_all(bytes)?;
        file.sync_data()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(err)
}
