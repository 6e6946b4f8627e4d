//! Asking the terminal for its colours, for the `system` theme: the default foreground
//! (OSC 10), the default background (OSC 11) and ANSI colours 0–15 (OSC 4), followed by a
//! primary device attributes request (DA1). Terminals answer in order and every terminal
//! answers DA1, so its reply ends the colour replies, also for terminals that ignore the
//! colour queries (tmux without a client that reports colours does exactly that).
//!
//! The replies come in on the input stream; [`super::input::Decoder`] takes them out (they
//! never reach the editor) as [`Reply`]s, and a [`ColorQuery`] collects them. A query that
//! hears nothing within [`TIMEOUT`] settles with what it has; replies that arrive later
//! still complete it.

use std::time::{Duration, Instant};

use super::okcolor::Rgb;
use super::system_theme::TerminalColors;

/// How long the theme stays grey before it settles for the palette-index fallback.
pub const TIMEOUT: Duration = Duration::from_millis(100);

const PALETTE: usize = 16;
/// OSC 10 and 11, and OSC 4 for each palette colour.
const REPLY_COUNT: usize = 2 + PALETTE;

/// The bytes to write: the colour questions and DA1.
pub fn query() -> String {
    let mut q = String::from("\x1b]10;?\x07\x1b]11;?\x07");
    for i in 0..PALETTE {
        q.push_str(&format!("\x1b]4;{i};?\x07"));
    }
    q.push_str("\x1b[c");
    q
}

/// Which colour a reply is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Foreground,
    Background,
    Palette(u8),
}

/// A terminal's answer found in the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// An OSC 10/11/4 reply; `None` when the colour in it is not understood.
    Color(Target, Option<Rgb>),
    /// A DA1 reply (`CSI ? … c`).
    DeviceAttributes,
}

/// An OSC string's body (between `ESC ]` and BEL or ST) as a colour reply, if it is one:
/// `10;<colour>`, `11;<colour>` or `4;<index>;<colour>`.
pub fn parse_osc(body: &str) -> Option<Reply> {
    let (code, rest) = body.split_once(';')?;
    let (target, value) = match code {
        "10" => (Target::Foreground, rest),
        "11" => (Target::Background, rest),
        "4" => {
            let (index, value) = rest.split_once(';')?;
            if index.is_empty() || index.len() > 3 || !index.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (
                Target::Palette(index.parse::<u16>().ok()?.min(255) as u8),
                value,
            )
        }
        _ => return None,
    };
    Some(Reply::Color(target, parse_color(value)))
}

/// A colour as terminals report it: `rgb:r/g/b` (1–4 hex digits a channel, scaled),
/// `rgba:r/g/b/a`, `#rrggbb` or `#rrrrggggbbbb`.
pub fn parse_color(value: &str) -> Option<Rgb> {
    let value = value.trim();
    let channel = |digits: &str| -> Option<u8> {
        if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let max = 16f64.powi(digits.len() as i32) - 1.0;
        let v = f64::from(u32::from_str_radix(digits, 16).ok()?);
        Some((v / max * 255.0).round() as u8)
    };
    if let Some(hex) = value.strip_prefix('#') {
        let width = match hex.len() {
            6 => 2,
            12 => 4,
            _ => return None,
        };
        return Some(Rgb::new(
            channel(hex.get(0..width)?)?,
            channel(hex.get(width..2 * width)?)?,
            channel(hex.get(2 * width..3 * width)?)?,
        ));
    }
    let lower = value.to_ascii_lowercase();
    let spec = lower
        .strip_prefix("rgba:")
        .or_else(|| lower.strip_prefix("rgb:"))
        .unwrap_or(&lower);
    let mut parts = spec.split('/');
    let (r, g, b) = (parts.next()?, parts.next()?, parts.next()?);
    Some(Rgb::new(channel(r)?, channel(g)?, channel(b)?))
}

/// One round of questions and the answers so far.
#[derive(Debug, Clone)]
pub struct ColorQuery {
    sent: Instant,
    foreground: Option<Rgb>,
    background: Option<Rgb>,
    palette: [Option<Rgb>; PALETTE],
    replied: Vec<Target>,
    /// Timed out: what it had was delivered, and a completion later delivers again.
    timed_out: bool,
    /// Completed (DA1, or every colour answered): later replies are ignored.
    done: bool,
}

impl ColorQuery {
    /// A query whose questions went out at `sent`.
    pub fn new(sent: Instant) -> ColorQuery {
        ColorQuery {
            sent,
            foreground: None,
            background: None,
            palette: [None; PALETTE],
            replied: Vec::new(),
            timed_out: false,
            done: false,
        }
    }

    /// Neither completed nor timed out: the theme still waits (grey).
    pub fn waiting(&self) -> bool {
        !self.done && !self.timed_out
    }

    /// What was reported; the palette only when all 16 colours came.
    pub fn result(&self) -> TerminalColors {
        let palette = self
            .palette
            .iter()
            .all(Option::is_some)
            .then(|| self.palette.iter().flatten().copied().collect());
        TerminalColors {
            foreground: self.foreground,
            background: self.background,
            palette,
        }
    }

    /// Takes in a reply; returns the colours when this reply completes the query.
    pub fn on_reply(&mut self, reply: &Reply) -> Option<TerminalColors> {
        if self.done {
            return None;
        }
        match reply {
            Reply::DeviceAttributes => {
                self.done = true;
                Some(self.result())
            }
            Reply::Color(target, rgb) => {
                if self.replied.contains(target) {
                    return None;
                }
                self.replied.push(*target);
                match target {
                    Target::Foreground => self.foreground = *rgb,
                    Target::Background => self.background = *rgb,
                    Target::Palette(i) if usize::from(*i) < PALETTE => {
                        self.palette[usize::from(*i)] = *rgb
                    }
                    Target::Palette(_) => {}
                }
                if self.replied.len() == REPLY_COUNT {
                    self.done = true;
                    return Some(self.result());
                }
                None
            }
        }
    }

    /// Returns the colours so far once, when the query has waited [`TIMEOUT`] by `now`.
    pub fn on_tick(&mut self, now: Instant) -> Option<TerminalColors> {
        if !self.waiting() || now.duration_since(self.sent) < TIMEOUT {
            return None;
        }
        self.timed_out = true;
        Some(self.result())
    }
}

/// Reported colours over earlier ones: what a reply left out keeps its earlier value (a
/// query that timed out with nothing does not erase what an earlier one found).
pub fn merge(previous: Option<&TerminalColors>, reported: TerminalColors) -> TerminalColors {
    let Some(previous) = previous else {
        return reported;
    };
    TerminalColors {
        foreground: reported.foreground.or(previous.foreground),
        background: reported.background.or(previous.background),
        palette: reported.palette.or_else(|| previous.palette.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_asks_for_every_colour_then_da1() {
        let q = query();
        assert!(q.starts_with("\x1b]10;?\x07\x1b]11;?\x07\x1b]4;0;?\x07"));
        assert!(q.contains("\x1b]4;15;?\x07"));
        assert!(q.ends_with("\x07\x1b[c"));
        assert_eq!(q.matches("\x1b]").count(), REPLY_COUNT);
    }

    #[test]
    fn colour_values_in_every_reported_form() {
        assert_eq!(
            parse_color("rgb:1e1e/1e1e/2e2e"),
            Some(Rgb::new(0x1e, 0x1e, 0x2e))
        );
        assert_eq!(parse_color("rgb:ff/80/00"), Some(Rgb::new(255, 128, 0)));
        // One digit a channel: f is the maximum.
        assert_eq!(parse_color("rgb:f/0/8"), Some(Rgb::new(255, 0, 136)));
        assert_eq!(
            parse_color("rgba:ffff/0000/0000/ffff"),
            Some(Rgb::new(255, 0, 0))
        );
        assert_eq!(parse_color("#102030"), Some(Rgb::new(0x10, 0x20, 0x30)));
        assert_eq!(parse_color("#ffff00000000"), Some(Rgb::new(255, 0, 0)));
        assert_eq!(parse_color("rgb:zz/00/00"), None);
        assert_eq!(parse_color("rgb:00/00"), None);
        assert_eq!(parse_color("#12345"), None);
    }

    #[test]
    fn osc_bodies() {
        assert_eq!(
            parse_osc("11;rgb:0000/0000/0000"),
            Some(Reply::Color(Target::Background, Some(Rgb::BLACK)))
        );
        assert_eq!(
            parse_osc("10;rgb:ffff/ffff/ffff"),
            Some(Reply::Color(Target::Foreground, Some(Rgb::WHITE)))
        );
        assert_eq!(
            parse_osc("4;12;rgb:5c5c/5c5c/ffff"),
            Some(Reply::Color(
                Target::Palette(12),
                Some(Rgb::new(0x5c, 0x5c, 0xff))
            ))
        );
        // A reply with a colour we cannot read still counts as a reply.
        assert_eq!(
            parse_osc("11;?"),
            Some(Reply::Color(Target::Background, None))
        );
        // Other OSC strings are not colour replies.
        assert_eq!(parse_osc("52;c;aGVsbG8="), None);
        assert_eq!(parse_osc("4;x;rgb:0/0/0"), None);
    }

    fn all_replies() -> Vec<Reply> {
        let mut out = vec![
            Reply::Color(Target::Foreground, Some(Rgb::WHITE)),
            Reply::Color(Target::Background, Some(Rgb::BLACK)),
        ];
        for i in 0..16u8 {
            out.push(Reply::Color(Target::Palette(i), Some(Rgb::new(i, i, i))));
        }
        out
    }

    #[test]
    fn a_query_completes_on_da1_or_every_colour() {
        let start = Instant::now();
        let mut q = ColorQuery::new(start);
        let replies = all_replies();
        for r in &replies[..17] {
            assert_eq!(q.on_reply(r), None);
        }
        assert!(q.waiting());
        let done = q.on_reply(&replies[17]).expect("complete");
        assert_eq!(done.background, Some(Rgb::BLACK));
        assert_eq!(done.palette.as_ref().map(Vec::len), Some(16));
        assert!(!q.waiting());
        // Nothing more after completion, not even at the timeout.
        assert_eq!(q.on_reply(&Reply::DeviceAttributes), None);
        assert_eq!(q.on_tick(start + TIMEOUT * 2), None);

        // A terminal that answers only DA1 (tmux): complete, with nothing.
        let mut q = ColorQuery::new(start);
        assert_eq!(
            q.on_reply(&Reply::DeviceAttributes),
            Some(TerminalColors::default())
        );
        // Background only: no palette unless all 16 came.
        let mut q = ColorQuery::new(start);
        q.on_reply(&replies[1]);
        q.on_reply(&replies[2]);
        let got = q.on_reply(&Reply::DeviceAttributes).unwrap();
        assert_eq!(
            (got.background, got.palette),
            (Some(Rgb::BLACK), None::<Vec<Rgb>>)
        );
    }

    #[test]
    fn a_silent_terminal_times_out_and_late_replies_still_count() {
        let start = Instant::now();
        let mut q = ColorQuery::new(start);
        assert_eq!(q.on_tick(start + TIMEOUT / 2), None);
        assert_eq!(q.on_tick(start + TIMEOUT), Some(TerminalColors::default()));
        assert!(!q.waiting());
        // Only once.
        assert_eq!(q.on_tick(start + TIMEOUT * 3), None);
        // The replies arrive over a slow link after all.
        q.on_reply(&Reply::Color(Target::Background, Some(Rgb::WHITE)));
        let late = q.on_reply(&Reply::DeviceAttributes).unwrap();
        assert_eq!(late.background, Some(Rgb::WHITE));
    }

    #[test]
    fn merging_keeps_earlier_colours() {
        let earlier = TerminalColors {
            foreground: Some(Rgb::WHITE),
            background: Some(Rgb::BLACK),
            palette: None,
        };
        let merged = merge(
            Some(&earlier),
            TerminalColors {
                background: Some(Rgb::new(1, 2, 3)),
                ..Default::default()
            },
        );
        assert_eq!(merged.foreground, Some(Rgb::WHITE));
        assert_eq!(merged.background, Some(Rgb::new(1, 2, 3)));
        assert_eq!(
            merge(None, TerminalColors::default()),
            TerminalColors::default()
        );
    }
}
