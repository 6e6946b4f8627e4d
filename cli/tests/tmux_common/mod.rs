//! The tmux driver the interactive-mode end-to-end tests share: a session running the real
//! `pi` binary in a 100x30 pane, keys sent with `send-keys`, the screen read with
//! `capture-pane`. Gated on `PI_TUI_E2E=1` and tmux on PATH ([`enabled`]).
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// Whether the tmux tests run: `PI_TUI_E2E=1` and tmux on PATH.
pub fn enabled() -> bool {
    std::env::var("PI_TUI_E2E").is_ok_and(|v| v == "1")
        && Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success())
}

/// A tmux session running one command, killed on drop.
pub struct Tmux {
    /// The tmux session name (a target for `-t`).
    pub name: String,
    /// A private tmux server (`-L`), for tests that change server options.
    socket: Option<String>,
}

impl Tmux {
    pub fn start(name: &str, cwd: &Path, command: &str) -> Tmux {
        Tmux::start_on(None, name, cwd, command)
    }

    /// A tmux command on this session's server.
    pub fn tmux(&self) -> Command {
        tmux_on(self.socket.as_deref())
    }

    pub fn start_on(socket: Option<&str>, name: &str, cwd: &Path, command: &str) -> Tmux {
        let new_session = || {
            tmux_on(socket)
                .args([
                    "new-session",
                    "-d",
                    "-s",
                    name,
                    "-x",
                    "100",
                    "-y",
                    "30",
                    "-c",
                ])
                .arg(cwd)
                .arg(command)
                .status()
                .expect("tmux new-session")
        };
        // The previous test's last session going away shuts its server down; a client that
        // connects meanwhile gets "server exited unexpectedly". Asking again starts a new one.
        let mut status = new_session();
        for _ in 0..5 {
            if status.success() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
            status = new_session();
        }
        assert!(status.success());
        Tmux {
            name: name.to_string(),
            socket: socket.map(str::to_string),
        }
    }

    pub fn keys(&self, keys: &[&str]) {
        let status = self
            .tmux()
            .args(["send-keys", "-t", &self.name])
            .args(keys)
            .status()
            .expect("send-keys");
        assert!(status.success());
    }

    /// Types `text` literally and presses Enter.
    pub fn submit(&self, text: &str) {
        self.keys(&["-l", text]);
        self.keys(&["Enter"]);
    }

    pub fn capture(&self) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-t", &self.name])
            .output()
            .expect("capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The screen with its colours (SGR escapes).
    pub fn capture_ansi(&self) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-e", "-t", &self.name])
            .output()
            .expect("capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn alive(&self) -> bool {
        self.tmux()
            .args(["has-session", "-t", &self.name])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Waits until the screen contains `text`; the screen is in the panic message otherwise.
    pub fn wait_for(&self, text: &str) -> String {
        self.wait_until(|screen| screen.contains(text), text)
    }

    /// Waits until the screen satisfies `done` (`what` names it in the panic message).
    pub fn wait_until(&self, done: impl Fn(&str) -> bool, what: &str) -> String {
        self.wait_on(Tmux::capture, done, what)
    }

    /// Waits until the screen with its colours satisfies `done`.
    pub fn wait_until_ansi(&self, done: impl Fn(&str) -> bool, what: &str) -> String {
        self.wait_on(Tmux::capture_ansi, done, what)
    }

    fn wait_on(
        &self,
        capture: fn(&Tmux) -> String,
        done: impl Fn(&str) -> bool,
        what: &str,
    ) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = capture(self);
            if done(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what:?}; screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        // A private server goes with its session (it holds nothing else of use).
        let args: &[&str] = if self.socket.is_some() {
            &["kill-server"]
        } else {
            &["kill-session", "-t", &self.name]
        };
        let _ = self.tmux().args(args).status();
    }
}

/// A tmux command, on a private server (`-L`) when `socket` is given.
pub fn tmux_on(socket: Option<&str>) -> Command {
    let mut c = Command::new("tmux");
    if let Some(s) = socket {
        c.args(["-L", s, "-f", "/dev/null"]);
    }
    c
}

/// `p` quoted for `sh`.
pub fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}
