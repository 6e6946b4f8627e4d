//! The sidecar's JavaScript, embedded in the binary and written out once per content hash, so
//! a `pi` binary needs nothing but Node.js to run extensions.

use std::io;
use std::path::PathBuf;

/// Every file of the sidecar, by its path under the install directory.
const FILES: &[(&str, &[u8])] = &[
    ("sidecar.cjs", include_bytes!("../../js/sidecar.cjs")),
    ("pi-cli.cjs", include_bytes!("../../js/pi-cli.cjs")),
    (
        "shims/typebox.cjs",
        include_bytes!("../../js/shims/typebox.cjs"),
    ),
    (
        "shims/pi-ai.cjs",
        include_bytes!("../../js/shims/pi-ai.cjs"),
    ),
    (
        "shims/pi-tui.cjs",
        include_bytes!("../../js/shims/pi-tui.cjs"),
    ),
    (
        "shims/pi-coding-agent.cjs",
        include_bytes!("../../js/shims/pi-coding-agent.cjs"),
    ),
    (
        "shims/conversation.cjs",
        include_bytes!("../../js/shims/conversation.cjs"),
    ),
    (
        "vendor/jiti/package.json",
        include_bytes!("../../js/vendor/jiti/package.json"),
    ),
    (
        "vendor/jiti/LICENSE",
        include_bytes!("../../js/vendor/jiti/LICENSE"),
    ),
    (
        "vendor/jiti/lib/jiti.cjs",
        include_bytes!("../../js/vendor/jiti/lib/jiti.cjs"),
    ),
    (
        "vendor/jiti/dist/jiti.cjs",
        include_bytes!("../../js/vendor/jiti/dist/jiti.cjs"),
    ),
    (
        "vendor/jiti/dist/babel.cjs",
        include_bytes!("../../js/vendor/jiti/dist/babel.cjs"),
    ),
];

/// Writes the sidecar into `<cache>/pi/extensions-<hash>/` (`$XDG_CACHE_HOME`, else
/// `~/.cache`: a directory only the user writes, so no one else can plant code there) unless it is already there,
/// and returns the path of `sidecar.cjs`. The directory is filled under a temporary name and
/// renamed, so concurrent runs never see half-written files.
pub fn install() -> io::Result<PathBuf> {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for (name, bytes) in FILES {
        ctx.update(name.as_bytes());
        ctx.update(&(bytes.len() as u64).to_le_bytes());
        ctx.update(bytes);
    }
    let hash: String = ctx
        .finish()
        .as_ref()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    let base = cache_dir().join("pi");
    std::fs::create_dir_all(&base)?;
    let dir = base.join(format!("extensions-{hash}"));
    let entry = dir.join("sidecar.cjs");
    if entry.is_file() {
        return Ok(entry);
    }
    let staging = base.join(format!("extensions-{hash}.{}.tmp", std::process::id()));
    for (name, bytes) in FILES {
        let path = staging.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, bytes)?;
    }
    match std::fs::rename(&staging, &dir) {
        Ok(()) => {}
        // Another run installed the same files first.
        Err(_) if entry.is_file() => {
            let _ = std::fs::remove_dir_all(&staging);
        }
        Err(e) => return Err(e),
    }
    Ok(entry)
}

fn cache_dir() -> PathBuf {
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("XDG_CACHE_HOME") {
        return PathBuf::from(dir);
    }
    match non_empty("HOME") {
        Some(home) => PathBuf::from(home).join(".cache"),
        None => std::env::temp_dir(),
    }
}
