//! Runs a command with a pseudo-terminal as its stdin and stdout (stderr stays a pipe), for
//! commands that, as in Pi, refuse to run without a terminal (`pi auth login`). The
//! terminal does not echo input, so what the test types is never part of the output, and
//! does not turn `\n` into `\r\n` on output; secrets typed in raw mode still work.
#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running child on a pseudo-terminal; its terminal output is collected as it comes.
pub struct PtyChild {
    pub child: Child,
    /// Typing into the terminal (dropping it does not end the input: send `\x04` at the
    /// start of a line, or `\x03` to a raw-mode prompt).
    pub stdin: Option<File>,
    pub stderr: Option<ChildStderr>,
    output: Arc<Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// The terminal's output side; the end of the child's output reads as the end of input
/// (Linux reports it as EIO once every terminal handle of the child is closed).
struct PtyOutput(File);

impl Read for PtyOutput {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.0.read(buf) {
            Err(e) if e.raw_os_error() == Some(libc::EIO) => Ok(0),
            other => other,
        }
    }
}

/// The exit code and both outputs of a finished child.
pub struct PtyOutputs {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Spawns `cmd` with a fresh pseudo-terminal as stdin and stdout and piped stderr.
pub fn spawn(cmd: &mut Command) -> PtyChild {
    spawn_on(cmd, false)
}

/// Spawns `cmd` with a fresh pseudo-terminal as stdin, stdout and stderr: both outputs
/// are collected together, as [`PtyOutputs::stdout`].
pub fn spawn_all_on_terminal(cmd: &mut Command) -> PtyChild {
    spawn_on(cmd, true)
}

/// [`spawn`] on a terminal of `rows` × `cols` (full-screen programs need a size; the
/// others get a 0 × 0 terminal).
pub fn spawn_sized(cmd: &mut Command, rows: u16, cols: u16) -> PtyChild {
    spawn_on_sized(cmd, false, Some((rows, cols)))
}

fn spawn_on(cmd: &mut Command, stderr_on_terminal: bool) -> PtyChild {
    spawn_on_sized(cmd, stderr_on_terminal, None)
}

fn spawn_on_sized(
    cmd: &mut Command,
    stderr_on_terminal: bool,
    size: Option<(u16, u16)>,
) -> PtyChild {
    let (master, slave) = open_pty(size);
    let stdout_side = slave.try_clone().unwrap();
    let stderr_side = if stderr_on_terminal {
        Stdio::from(slave.try_clone().unwrap())
    } else {
        Stdio::piped()
    };
    let mut child = cmd
        .stdin(Stdio::from(slave))
        .stdout(Stdio::from(stdout_side))
        .stderr(stderr_side)
        .spawn()
        .unwrap();
    // `cmd` still holds the terminal's child side: replace it, so the output ends with the
    // child.
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let master = File::from(master);
    let output = Arc::new(Mutex::new(Vec::new()));
    let mut source = PtyOutput(master.try_clone().unwrap());
    let sink = output.clone();
    let reader = std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = source.read(&mut chunk) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&chunk[..n]);
        }
    });
    PtyChild {
        stderr: child.stderr.take(),
        stdin: Some(master),
        output,
        reader: Some(reader),
        child,
    }
}

impl PtyChild {
    /// Types `text` into the terminal.
    pub fn type_text(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// What the child wrote to the terminal so far.
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap()).into_owned()
    }

    /// Waits until `needle` appears in the output at or after byte `from`; returns the
    /// byte after it (panics with the output after 30 s).
    pub fn wait_for(&self, needle: &str, from: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = self.output();
            if let Some(at) = out.get(from..).and_then(|rest| rest.find(needle)) {
                return from + at + needle.len();
            }
            assert!(
                Instant::now() < deadline,
                "{needle:?} never appeared; output: {out:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Answers each question when it appears: `(question, answer)`, the answer typed with
    /// Enter.
    pub fn answer(&mut self, dialogue: &[(&str, &str)]) {
        let mut at = 0;
        for (question, answer) in dialogue {
            at = self.wait_for(question, at);
            self.type_text(&format!("{answer}\r"));
        }
    }

    pub fn wait(&mut self) -> ExitStatus {
        self.child.wait().unwrap()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// Waits for the child, collecting what it wrote.
    pub fn finish(mut self) -> PtyOutputs {
        let mut err = Vec::new();
        if let Some(mut stderr) = self.stderr.take() {
            stderr.read_to_end(&mut err).unwrap();
        }
        let status = self.child.wait().unwrap();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        PtyOutputs {
            code: status.code().unwrap_or(-1),
            stdout: self.output(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
        }
    }
}

/// A pseudo-terminal pair with echo and output newline translation turned off, of
/// `size` (rows, columns) if given.
fn open_pty(size: Option<(u16, u16)>) -> (OwnedFd, File) {
    let mut master = -1;
    let mut slave = -1;
    let winsize = size.map(|(rows, cols)| libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    });
    let winsize_ptr = winsize
        .as_ref()
        .map_or(std::ptr::null(), |w| w as *const libc::winsize);
    // SAFETY: openpty writes two new descriptors into the given ints; the name and
    // termios pointers may be null, the window size is null or a live winsize.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            winsize_ptr,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned by nothing else.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), File::from_raw_fd(slave)) };
    // SAFETY: termios is plain data, filled in by tcgetattr before it is read.
    unsafe {
        use std::os::fd::AsRawFd;
        let mut t: libc::termios = std::mem::zeroed();
        assert_eq!(libc::tcgetattr(slave.as_raw_fd(), &mut t), 0);
        t.c_lflag &= !(libc::ECHO | libc::ECHONL);
        t.c_oflag &= !libc::ONLCR;
        assert_eq!(libc::tcsetattr(slave.as_raw_fd(), libc::TCSANOW, &t), 0);
    }
    (master, slave)
}
