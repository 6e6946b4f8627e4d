//! Terminal input: bytes from the tty decoded into crossterm key and paste events.
//!
//! crossterm 0.28 drops xterm's `modifyOtherKeys` sequences (`ESC [ 27 ; mod ; code ~`),
//! which is what tmux 3.2–3.4 sends with `extended-keys on` — the set-up Pi documents in
//! tmux.md — so shift+enter, ctrl+enter and alt+enter were lost there. This decoder reads
//! those, the CSI-u form (`ESC [ code ; mod u`, tmux 3.5's `extended-keys-format csi-u` and
//! the kitty protocol) and the legacy encodings, and yields the same `KeyEvent`s crossterm
//! would, so the keymap and the update function do not change.
//!
//! [`Decoder`] is pure (bytes in, events out) and unit-tested; [`TtyInput`] reads the
//! terminal without a thread, only when the loop polls, so an external editor started
//! from the UI gets every key.
//!
//! The terminal's answers to questions (OSC colour replies, DA1) come in on the same
//! stream: they are taken out as [`Reply`]s ([`Decoder::take_replies`]) and never become
//! keys, so they cannot reach the editor as typed text.

use super::term_colors::{self, Reply};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::time::Duration;

/// Turns on what the decoder understands: the kitty keyboard protocol's "disambiguate"
/// level where the terminal has it, else xterm's modifyOtherKeys level 2 (tmux forwards
/// extended keys only to a pane that asked for them). Terminals ignore what they lack.
pub const ENABLE_EXTENDED_KEYS: &str = "\x1b[>1u\x1b[>4;2m";
/// Undoes [`ENABLE_EXTENDED_KEYS`] on the way out.
pub const DISABLE_EXTENDED_KEYS: &str = "\x1b[<u\x1b[>4;0m";

/// An incremental decoder: feed it what the terminal sent, get the events it completes.
#[derive(Debug, Default)]
pub struct Decoder {
    pending: Vec<u8>,
    /// Inside a bracketed paste: the text so far.
    paste: Option<Vec<u8>>,
    /// The terminal's answers found so far.
    replies: Vec<Reply>,
}

const PASTE_END: &[u8] = b"\x1b[201~";

impl Decoder {
    /// Decodes `bytes` after what is pending. An escape sequence cut off at the end waits
    /// for the next call; [`Decoder::flush`] settles it when no more bytes come.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Event> {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut at = 0;
        loop {
            if let Some(paste) = self.paste.as_mut() {
                let rest = &self.pending[at..];
                match find(rest, PASTE_END) {
                    Some(end) => {
                        paste.extend_from_slice(&rest[..end]);
                        let text = String::from_utf8_lossy(paste).into_owned();
                        out.push(Event::Paste(text));
                        self.paste = None;
                        at += end + PASTE_END.len();
                        continue;
                    }
                    None => {
                        // Keep a possible partial end marker for the next call.
                        let keep = partial_suffix(rest, PASTE_END);
                        paste.extend_from_slice(&rest[..rest.len() - keep]);
                        at = self.pending.len() - keep;
                        break;
                    }
                }
            }
            if at >= self.pending.len() {
                break;
            }
            match parse(&self.pending[at..]) {
                Parsed::Event(used, ev) => {
                    at += used;
                    if let Some(ev) = ev {
                        out.push(ev);
                    }
                }
                Parsed::PasteStart(used) => {
                    at += used;
                    self.paste = Some(Vec::new());
                }
                Parsed::Reply(used, reply) => {
                    at += used;
                    if let Some(reply) = reply {
                        self.replies.push(reply);
                    }
                }
                Parsed::Incomplete => break,
            }
        }
        self.pending.drain(..at);
        out
    }

    /// No more bytes came: a lone escape is the escape key, `ESC x` cut short is alt+x,
    /// and whatever else is pending is dropped (a broken sequence must not stall input).
    pub fn flush(&mut self) -> Vec<Event> {
        if self.paste.is_some() || self.pending.is_empty() {
            return Vec::new();
        }
        let pending = std::mem::take(&mut self.pending);
        let mut out = Vec::new();
        if pending == [0x1b] {
            out.push(key(KeyCode::Esc, KeyModifiers::NONE));
        } else if pending.len() == 2 && pending[0] == 0x1b {
            // `ESC [` or `ESC O` with nothing after: alt+[ / alt+O.
            if let Some(Event::Key(mut k)) = single_byte(pending[1]) {
                k.modifiers |= KeyModifiers::ALT;
                out.push(Event::Key(k));
            }
        }
        out
    }

    /// Whether bytes wait for the rest of their sequence.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty() && self.paste.is_none()
    }

    /// The terminal's answers decoded since the last call.
    pub fn take_replies(&mut self) -> Vec<Reply> {
        std::mem::take(&mut self.replies)
    }
}

enum Parsed {
    /// Bytes used and the event they make (`None`: understood but nothing to report).
    Event(usize, Option<Event>),
    PasteStart(usize),
    /// Bytes used by an answer from the terminal (`None`: one nobody asked about).
    Reply(usize, Option<Reply>),
    Incomplete,
}

/// The longest OSC string waited for; a longer one without its end is dropped.
const MAX_OSC: usize = 4096;

/// `ESC ] … (BEL | ESC \)`: an operating system command, here the terminal's reply to a
/// colour question. Cut off at the end, it waits for the rest; an escape that does not
/// start ST ends it early (dropped) so a key pressed after a broken reply still counts.
fn parse_osc(buf: &[u8]) -> Parsed {
    let body_start = 2;
    let mut i = body_start;
    while i < buf.len() {
        match buf[i] {
            0x07 => {
                return Parsed::Reply(i + 1, osc_reply(&buf[body_start..i]));
            }
            0x1b => {
                return match buf.get(i + 1) {
                    Some(b'\\') => Parsed::Reply(i + 2, osc_reply(&buf[body_start..i])),
                    Some(_) => Parsed::Reply(i, None),
                    None => Parsed::Incomplete,
                };
            }
            _ => i += 1,
        }
        if i > MAX_OSC {
            return Parsed::Reply(i, None);
        }
    }
    Parsed::Incomplete
}

fn osc_reply(body: &[u8]) -> Option<Reply> {
    term_colors::parse_osc(std::str::from_utf8(body).ok()?)
}

fn key(code: KeyCode, mods: KeyModifiers) -> Event {
    Event::Key(KeyEvent::new(code, mods))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// How many bytes at the end of `hay` start `needle` (so the rest may follow).
fn partial_suffix(hay: &[u8], needle: &[u8]) -> usize {
    (1..needle.len())
        .rev()
        .find(|&n| hay.len() >= n && hay[hay.len() - n..] == needle[..n])
        .unwrap_or(0)
}

/// One control byte or ASCII character as a key (as crossterm maps them in raw mode).
fn single_byte(b: u8) -> Option<Event> {
    let none = KeyModifiers::NONE;
    let ctrl = KeyModifiers::CONTROL;
    Some(match b {
        b'\r' => key(KeyCode::Enter, none),
        b'\t' => key(KeyCode::Tab, none),
        0x7f => key(KeyCode::Backspace, none),
        0x08 => key(KeyCode::Backspace, ctrl),
        0x1b => key(KeyCode::Esc, none),
        0 => key(KeyCode::Char(' '), ctrl),
        // ctrl+a … ctrl+z (`\n` is ctrl+j in raw mode).
        0x01..=0x1a => key(KeyCode::Char((b - 1 + b'a') as char), ctrl),
        // The legacy encodings of ctrl+\ ctrl+] ctrl+^ and ctrl+_ (which is also ctrl+-
        // and ctrl+/ on most keyboards: Pi binds undo to ctrl+-).
        0x1c => key(KeyCode::Char('\\'), ctrl),
        0x1d => key(KeyCode::Char(']'), ctrl),
        0x1e => key(KeyCode::Char('^'), ctrl),
        0x1f => key(KeyCode::Char('-'), ctrl),
        c if c.is_ascii() => {
            let ch = c as char;
            let mods = if ch.is_ascii_uppercase() {
                KeyModifiers::SHIFT
            } else {
                none
            };
            key(KeyCode::Char(ch), mods)
        }
        _ => return None,
    })
}

fn parse(buf: &[u8]) -> Parsed {
    let b = buf[0];
    if b == 0x1b {
        return parse_escape(buf);
    }
    if b < 0x80 {
        return Parsed::Event(1, single_byte(b));
    }
    // UTF-8: a whole character, or wait for the rest of it.
    let len = match b {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => return Parsed::Event(1, None),
    };
    if buf.len() < len {
        return Parsed::Incomplete;
    }
    match std::str::from_utf8(&buf[..len])
        .ok()
        .and_then(|s| s.chars().next())
    {
        Some(c) => {
            let mods = if c.is_uppercase() {
                KeyModifiers::SHIFT
            } else {
                KeyModifiers::NONE
            };
            Parsed::Event(len, Some(key(KeyCode::Char(c), mods)))
        }
        None => Parsed::Event(1, None),
    }
}

fn parse_escape(buf: &[u8]) -> Parsed {
    let Some(&next) = buf.get(1) else {
        return Parsed::Incomplete;
    };
    match next {
        b'[' => parse_csi(buf),
        b']' => parse_osc(buf),
        b'O' => {
            let Some(&fin) = buf.get(2) else {
                return Parsed::Incomplete;
            };
            let code = match fin {
                b'A' => KeyCode::Up,
                b'B' => KeyCode::Down,
                b'C' => KeyCode::Right,
                b'D' => KeyCode::Left,
                b'H' => KeyCode::Home,
                b'F' => KeyCode::End,
                b'M' => KeyCode::Enter,
                b'P'..=b'S' => KeyCode::F(1 + fin - b'P'),
                _ => return Parsed::Event(3, None),
            };
            Parsed::Event(3, Some(key(code, KeyModifiers::NONE)))
        }
        // ESC ESC: the first is the escape key; the second starts what follows.
        0x1b => Parsed::Event(1, Some(key(KeyCode::Esc, KeyModifiers::NONE))),
        _ => {
            // alt + a key: the key is the next byte or UTF-8 character.
            match parse(&buf[1..]) {
                Parsed::Event(used, Some(Event::Key(mut k))) => {
                    k.modifiers |= KeyModifiers::ALT;
                    Parsed::Event(used + 1, Some(Event::Key(k)))
                }
                Parsed::Event(used, _) => Parsed::Event(used + 1, None),
                _ => Parsed::Incomplete,
            }
        }
    }
}

/// Modifier parameter (1 + bits: shift 1, alt 2, ctrl 4, super 8) as crossterm flags.
fn modifiers(param: u32) -> KeyModifiers {
    let bits = param.saturating_sub(1);
    let mut m = KeyModifiers::NONE;
    if bits & 1 != 0 {
        m |= KeyModifiers::SHIFT;
    }
    if bits & 2 != 0 {
        m |= KeyModifiers::ALT;
    }
    if bits & 4 != 0 {
        m |= KeyModifiers::CONTROL;
    }
    if bits & 8 != 0 {
        m |= KeyModifiers::SUPER;
    }
    m
}

/// A key given by its code point (modifyOtherKeys and CSI-u).
fn codepoint_key(code: u32, mut mods: KeyModifiers) -> Option<Event> {
    let code = match code {
        13 => KeyCode::Enter,
        9 if mods.contains(KeyModifiers::SHIFT) => KeyCode::BackTab,
        9 => KeyCode::Tab,
        27 => KeyCode::Esc,
        127 | 8 => KeyCode::Backspace,
        // The kitty protocol's private-use codes for keypad and function keys are not bound
        // to anything here.
        57344.. => return None,
        c => {
            let ch = char::from_u32(c)?;
            if ch.is_uppercase() {
                mods |= KeyModifiers::SHIFT;
            }
            KeyCode::Char(ch)
        }
    };
    Some(Event::Key(KeyEvent::new(code, mods)))
}

fn parse_csi(buf: &[u8]) -> Parsed {
    // Parameters and intermediates run up to the final byte (0x40..=0x7e).
    let Some(end) = buf[2..]
        .iter()
        .position(|b| (0x40..=0x7e).contains(b))
        .map(|i| i + 2)
    else {
        // A CSI longer than any key sequence is garbage: drop its introducer.
        return if buf.len() > 64 {
            Parsed::Event(2, None)
        } else {
            Parsed::Incomplete
        };
    };
    let used = end + 1;
    let fin = buf[end];
    let params_text = std::str::from_utf8(&buf[2..end]).unwrap_or("");
    if params_text.starts_with('?') && fin == b'c' {
        // Primary device attributes: the end of the colour replies.
        return Parsed::Reply(used, Some(Reply::DeviceAttributes));
    }
    if params_text.starts_with(['<', '?', '>', '=']) {
        // Mouse reports and replies to queries: nothing to show.
        return Parsed::Event(used, None);
    }
    // `code:shifted:base;mods:event` — keep the first sub-parameter of each.
    let params: Vec<u32> = params_text
        .split(';')
        .map(|p| p.split(':').next().unwrap_or("").parse().unwrap_or(0))
        .collect();
    let event_type = params_text
        .split(';')
        .nth(1)
        .and_then(|p| p.split(':').nth(1))
        .and_then(|t| t.parse::<u32>().ok())
        .unwrap_or(1);
    let p = |i: usize| params.get(i).copied().unwrap_or(0);
    let mods = modifiers(p(1));
    let ev = match fin {
        b'A' => key(KeyCode::Up, mods),
        b'B' => key(KeyCode::Down, mods),
        b'C' => key(KeyCode::Right, mods),
        b'D' => key(KeyCode::Left, mods),
        b'H' => key(KeyCode::Home, mods),
        b'F' => key(KeyCode::End, mods),
        b'P' => key(KeyCode::F(1), mods),
        b'Q' => key(KeyCode::F(2), mods),
        b'R' => key(KeyCode::F(3), mods),
        b'S' => key(KeyCode::F(4), mods),
        b'Z' => key(KeyCode::BackTab, KeyModifiers::SHIFT | mods),
        b'u' => {
            // Key releases (event type 3) are not keys pressed.
            if event_type == 3 {
                return Parsed::Event(used, None);
            }
            match codepoint_key(p(0), mods) {
                Some(ev) => ev,
                None => return Parsed::Event(used, None),
            }
        }
        b'~' => {
            let code = match p(0) {
                200 => return Parsed::PasteStart(used),
                // xterm modifyOtherKeys: `27 ; mods ; code ~`.
                27 => {
                    return Parsed::Event(used, codepoint_key(p(2), modifiers(p(1))));
                }
                1 | 7 => KeyCode::Home,
                2 => KeyCode::Insert,
                3 => KeyCode::Delete,
                4 | 8 => KeyCode::End,
                5 => KeyCode::PageUp,
                6 => KeyCode::PageDown,
                v @ 11..=15 => KeyCode::F((v - 10) as u8),
                v @ 17..=21 => KeyCode::F((v - 11) as u8),
                v @ 23..=26 => KeyCode::F((v - 12) as u8),
                _ => return Parsed::Event(used, None),
            };
            key(code, mods)
        }
        // Focus in/out and anything else: nothing to do.
        _ => return Parsed::Event(used, None),
    };
    if let Event::Key(k) = &ev {
        if k.kind != KeyEventKind::Press {
            return Parsed::Event(used, None);
        }
    }
    Parsed::Event(used, Some(ev))
}

/// Reads the terminal (stdin when it is a tty, else `/dev/tty`) on demand.
pub struct TtyInput {
    fd: std::os::fd::RawFd,
    _tty: Option<std::fs::File>,
    decoder: Decoder,
}

// The raw terminal reader: isatty, poll and read on the tty's descriptor, each with its
// SAFETY note.
#[allow(unsafe_code)]
impl TtyInput {
    pub fn open() -> std::io::Result<TtyInput> {
        use std::os::fd::AsRawFd;
        // SAFETY: isatty only inspects the descriptor.
        if unsafe { libc::isatty(0) } == 1 {
            return Ok(TtyInput {
                fd: 0,
                _tty: None,
                decoder: Decoder::default(),
            });
        }
        let tty = std::fs::File::open("/dev/tty")?;
        Ok(TtyInput {
            fd: tty.as_raw_fd(),
            _tty: Some(tty),
            decoder: Decoder::default(),
        })
    }

    fn ready(&self, timeout: Duration) -> std::io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            // A signal (window resize) interrupts the wait; that is no error.
            return if e.kind() == std::io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        Ok(n > 0)
    }

    /// Waits up to `timeout` for input and returns the events it completes (none on
    /// timeout). An escape sequence split across reads gets a short grace period before a
    /// lone escape counts as the escape key.
    pub fn read(&mut self, timeout: Duration) -> std::io::Result<Vec<Event>> {
        if !self.ready(timeout)? {
            return Ok(Vec::new());
        }
        let mut events = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            // SAFETY: `buf` is valid for `buf.len()` bytes.
            let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                break;
            }
            events.extend(self.decoder.feed(&buf[..n as usize]));
            if !self.ready(if self.decoder.has_pending() {
                Duration::from_millis(25)
            } else {
                Duration::ZERO
            })? {
                break;
            }
        }
        events.extend(self.decoder.flush());
        Ok(events)
    }

    /// The terminal's answers read so far (see [`Decoder::take_replies`]).
    pub fn take_replies(&mut self) -> Vec<Reply> {
        self.decoder.take_replies()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(bytes: &[u8]) -> Vec<(KeyCode, KeyModifiers)> {
        let mut d = Decoder::default();
        let mut evs = d.feed(bytes);
        evs.extend(d.flush());
        evs.into_iter()
            .filter_map(|e| match e {
                Event::Key(k) => Some((k.code, k.modifiers)),
                _ => None,
            })
            .collect()
    }

    const SHIFT: KeyModifiers = KeyModifiers::SHIFT;
    const CTRL: KeyModifiers = KeyModifiers::CONTROL;
    const ALT: KeyModifiers = KeyModifiers::ALT;
    const NONE: KeyModifiers = KeyModifiers::NONE;

    #[test]
    fn modify_other_keys_forms() {
        // tmux 3.2–3.4 with `extended-keys on`, and xterm with modifyOtherKeys=2.
        assert_eq!(keys(b"\x1b[27;2;13~"), [(KeyCode::Enter, SHIFT)]);
        assert_eq!(keys(b"\x1b[27;5;13~"), [(KeyCode::Enter, CTRL)]);
        assert_eq!(keys(b"\x1b[27;3;13~"), [(KeyCode::Enter, ALT)]);
        assert_eq!(keys(b"\x1b[27;5;99~"), [(KeyCode::Char('c'), CTRL)]);
        assert_eq!(keys(b"\x1b[27;5;45~"), [(KeyCode::Char('-'), CTRL)]);
        assert_eq!(keys(b"\x1b[27;2;9~"), [(KeyCode::BackTab, SHIFT)]);
        // CSI-u: tmux 3.5 `extended-keys-format csi-u` and the kitty protocol.
        assert_eq!(keys(b"\x1b[13;2u"), [(KeyCode::Enter, SHIFT)]);
        assert_eq!(keys(b"\x1b[27u"), [(KeyCode::Esc, NONE)]);
        assert_eq!(keys(b"\x1b[112;6u"), [(KeyCode::Char('p'), CTRL | SHIFT)]);
        // A key release (kitty event type 3) is no key press.
        assert_eq!(keys(b"\x1b[13;2:3u"), []);
    }

    #[test]
    fn legacy_keys() {
        assert_eq!(
            keys(b"a\r\x7f\t"),
            [
                (KeyCode::Char('a'), NONE),
                (KeyCode::Enter, NONE),
                (KeyCode::Backspace, NONE),
                (KeyCode::Tab, NONE)
            ]
        );
        assert_eq!(keys(b"\n"), [(KeyCode::Char('j'), CTRL)]);
        assert_eq!(keys(b"\x1b"), [(KeyCode::Esc, NONE)]);
        assert_eq!(keys(b"\x1b\r"), [(KeyCode::Enter, ALT)]);
        assert_eq!(keys(b"\x1bb"), [(KeyCode::Char('b'), ALT)]);
        assert_eq!(
            keys(b"\x1b[A\x1bOB"),
            [(KeyCode::Up, NONE), (KeyCode::Down, NONE)]
        );
        assert_eq!(keys(b"\x1b[1;3A"), [(KeyCode::Up, ALT)]);
        assert_eq!(keys(b"\x1b[1;5D"), [(KeyCode::Left, CTRL)]);
        assert_eq!(
            keys(b"\x1b[5~\x1b[6~"),
            [(KeyCode::PageUp, NONE), (KeyCode::PageDown, NONE)]
        );
        assert_eq!(
            keys(b"\x1b[H\x1b[4~"),
            [(KeyCode::Home, NONE), (KeyCode::End, NONE)]
        );
        assert_eq!(keys(b"\x1b[Z"), [(KeyCode::BackTab, SHIFT)]);
        assert_eq!(
            keys(b"\x1d\x1f"),
            [(KeyCode::Char(']'), CTRL), (KeyCode::Char('-'), CTRL)]
        );
        assert_eq!(keys("é".as_bytes()), [(KeyCode::Char('é'), NONE)]);
        assert_eq!(keys(b"P"), [(KeyCode::Char('P'), SHIFT)]);
        // Focus reports and mouse reports are skipped.
        assert_eq!(keys(b"\x1b[I\x1b[<0;1;1Mx"), [(KeyCode::Char('x'), NONE)]);
    }

    /// The terminal's answers to the colour query are replies, never keys: typed text
    /// around them arrives intact, in whatever pieces the reads cut.
    #[test]
    fn colour_replies_are_taken_out_of_the_input() {
        use crate::tui::okcolor::Rgb;
        use crate::tui::term_colors::Target;
        let stream = b"a\x1b]11;rgb:1e1e/1e1e/2e2e\x07\x1b]10;rgb:cdcd/d6d6/f4f4\x1b\\\
            \x1b]4;1;rgb:f3/8b/a8\x07\x1b[?62;22c\x1b]52;c;?\x07b";
        let want = vec![
            Reply::Color(Target::Background, Some(Rgb::new(0x1e, 0x1e, 0x2e))),
            Reply::Color(Target::Foreground, Some(Rgb::new(0xcd, 0xd6, 0xf4))),
            Reply::Color(Target::Palette(1), Some(Rgb::new(0xf3, 0x8b, 0xa8))),
            Reply::DeviceAttributes,
        ];
        for cut in 0..stream.len() {
            let mut d = Decoder::default();
            let mut evs = d.feed(&stream[..cut]);
            evs.extend(d.feed(&stream[cut..]));
            evs.extend(d.flush());
            let typed: Vec<KeyCode> = evs
                .into_iter()
                .filter_map(|e| match e {
                    Event::Key(k) => Some(k.code),
                    _ => None,
                })
                .collect();
            assert_eq!(
                typed,
                [KeyCode::Char('a'), KeyCode::Char('b')],
                "cut at {cut}"
            );
            assert_eq!(d.take_replies(), want, "cut at {cut}");
            assert!(d.take_replies().is_empty());
        }
        // A reply cut short by a key's escape sequence: the key still counts.
        let mut d = Decoder::default();
        let evs = d.feed(b"\x1b]11;rgb:00/00\x1b[A");
        assert_eq!(evs, vec![Event::Key(KeyEvent::new(KeyCode::Up, NONE))]);
        assert!(d.take_replies().is_empty());
        // alt+] alone is still alt+].
        assert_eq!(keys(b"\x1b]"), [(KeyCode::Char(']'), ALT)]);
    }

    #[test]
    fn sequences_split_across_reads_and_pastes() {
        let mut d = Decoder::default();
        assert!(d.feed(b"\x1b[27;2").is_empty());
        assert!(d.has_pending());
        let evs = d.feed(b";13~");
        assert_eq!(evs, vec![Event::Key(KeyEvent::new(KeyCode::Enter, SHIFT))]);
        // A paste in three pieces, its end marker split too.
        assert!(d.feed(b"\x1b[200~line 1\nli").is_empty());
        assert!(d.feed(b"ne 2\x1b[20").is_empty());
        let evs = d.feed(b"1~z");
        assert_eq!(
            evs,
            vec![
                Event::Paste("line 1\nline 2".into()),
                Event::Key(KeyEvent::new(KeyCode::Char('z'), NONE))
            ]
        );
        // A split UTF-8 character.
        assert!(d.feed(&"ü".as_bytes()[..1]).is_empty());
        assert_eq!(
            d.feed(&"ü".as_bytes()[1..]),
            vec![Event::Key(KeyEvent::new(KeyCode::Char('ü'), NONE))]
        );
    }
}
