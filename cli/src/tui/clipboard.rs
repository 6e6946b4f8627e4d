//! ctrl+v: what the system clipboard holds, read as Pi 1.6.0 reads it on Linux.
//!
//! An image (PNG, JPEG, WebP or GIF, in that order of preference) is written to
//! `$TMPDIR/pi-clipboard-<uuid>.<ext>` and its path goes into the editor, where the model
//! can read it; otherwise the clipboard's text is pasted. Wayland's `wl-paste` is asked first
//! in a Wayland session, then `xclip`; text comes from `wl-paste`, `xclip` or `xsel`. With
//! none of them installed (or nothing on the clipboard) nothing happens, as in Pi.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What ctrl+v found.
#[derive(Debug, PartialEq, Eq)]
pub enum Pasted {
    /// An image, saved to this file.
    Image(PathBuf),
    Text(String),
    Nothing,
}

/// Image types the models take, best first (Pi's list).
const IMAGE_TYPES: [(&str, &str); 4] = [
    ("image/png", "png"),
    ("image/jpeg", "jpg"),
    ("image/webp", "webp"),
    ("image/gif", "gif"),
];

/// `image/png; charset=…` → `image/png`.
fn base_type(t: &str) -> String {
    t.split(';').next().unwrap_or(t).trim().to_lowercase()
}

/// The offered type to ask for and the file extension it gets, if any offered type is one
/// the models take.
fn preferred_image_type(offered: &str) -> Option<(String, &'static str)> {
    let types: Vec<&str> = offered
        .lines()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    IMAGE_TYPES.iter().find_map(|(mime, ext)| {
        types
            .iter()
            .find(|t| base_type(t) == *mime)
            .map(|t| (t.to_string(), *ext))
    })
}

/// Runs a clipboard tool; `None` when it is not installed, fails or takes too long.
fn run(program: &str, args: &[&str], timeout: Duration) -> Option<Vec<u8>> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdout = child.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        stdout.read_to_end(&mut bytes).map(|_| bytes)
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                // A tool that hangs (an X server that never answers) must not freeze the UI.
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    let bytes = reader.join().ok()?.ok()?;
    status.success().then_some(bytes)
}

const LIST_TIMEOUT: Duration = Duration::from_secs(1);
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// An image through one tool: `Err(())` when the tool could not be asked (try the next),
/// `Ok(None)` when the clipboard holds no image.
fn image_via(
    program: &str,
    list: &[&str],
    read: impl Fn(&str) -> Vec<String>,
) -> Result<Option<(Vec<u8>, &'static str)>, ()> {
    let offered = run(program, list, LIST_TIMEOUT).ok_or(())?;
    let Some((mime, ext)) = preferred_image_type(&String::from_utf8_lossy(&offered)) else {
        return Ok(None);
    };
    let args = read(&mime);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let bytes = run(program, &args, READ_TIMEOUT).ok_or(())?;
    Ok((!bytes.is_empty()).then_some((bytes, ext)))
}

fn clipboard_image(env: &dyn Fn(&str) -> Option<String>) -> Option<(Vec<u8>, &'static str)> {
    let wayland = env("WAYLAND_DISPLAY").is_some_and(|v| !v.is_empty())
        || env("XDG_SESSION_TYPE").as_deref() == Some("wayland");
    let mut found = Err(());
    if wayland {
        found = image_via("wl-paste", &["--list-types"], |t| {
            vec!["--type".into(), t.into(), "--no-newline".into()]
        });
    }
    if found.is_err() {
        found = image_via(
            "xclip",
            &["-selection", "clipboard", "-t", "TARGETS", "-o"],
            |t| {
                vec![
                    "-selection".into(),
                    "clipboard".into(),
                    "-t".into(),
                    t.into(),
                    "-o".into(),
                ]
            },
        );
    }
    found.ok().flatten()
}

fn clipboard_text(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let mut tools: Vec<(&str, &[&str])> = Vec::new();
    if env("WAYLAND_DISPLAY").is_some_and(|v| !v.is_empty()) {
        tools.push(("wl-paste", &["--no-newline", "--type", "text"]));
    }
    if env("DISPLAY").is_some_and(|v| !v.is_empty()) {
        tools.push(("xclip", &["-selection", "clipboard", "-out"]));
        tools.push(("xsel", &["--clipboard", "--output"]));
    }
    tools.into_iter().find_map(|(program, args)| {
        run(program, args, READ_TIMEOUT).map(|b| String::from_utf8_lossy(&b).into_owned())
    })
}

/// Reads the clipboard (an image first, then text), saving an image under `tmp`.
pub fn paste(
    env: &dyn Fn(&str) -> Option<String>,
    tmp: &std::path::Path,
) -> Result<Pasted, String> {
    if let Some((bytes, ext)) = clipboard_image(env) {
        let path = tmp.join(format!(
            "pi-clipboard-{}.{ext}",
            pi_formats::id::session_id()
        ));
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        return Ok(Pasted::Image(path));
    }
    Ok(match clipboard_text(env) {
        Some(text) if !text.is_empty() => Pasted::Text(text),
        _ => Pasted::Nothing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefers_png_then_other_model_types() {
        assert_eq!(
            preferred_image_type("TARGETS\nimage/jpeg\nimage/png\ntext/plain\n"),
            Some(("image/png".into(), "png"))
        );
        assert_eq!(
            preferred_image_type("image/gif; foo=bar\n"),
            Some(("image/gif; foo=bar".into(), "gif"))
        );
        assert_eq!(preferred_image_type("image/bmp\ntext/plain"), None);
    }

    #[test]
    fn a_missing_tool_is_no_answer() {
        assert_eq!(run("/nonexistent/xclip", &[], LIST_TIMEOUT), None);
        // No display named: no text tool is asked.
        assert_eq!(clipboard_text(&|_: &str| None), None);
    }
}
