//! Text from session files shown to a person, with control characters made visible.
//!
//! A session file is data anyone can hand you (a cloned repository, a shared export), and its
//! names, messages, labels, ids and cwd reach the terminal in `pi sessions …` and the TUI. A raw
//! ESC there is a command to the terminal: OSC 52 writes the clipboard, CSI 2J clears the
//! screen, OSC 0 retitles the window, OSC 8 hides a link behind innocent text. So every
//! human-readable output passes session text through this module, which prints each control
//! character the way `cat -v` does: ESC as `^[`, DEL as `^?`, the C1 controls as `M-^[` and so
//! on. Machine-readable output (JSON) needs nothing: its encoder escapes controls itself.

use std::borrow::Cow;

/// Appends the visible form of the control character `c` (`cat -v` notation).
fn push_caret(out: &mut String, c: char) {
    let code = c as u32;
    match code {
        0x00..=0x1f => {
            out.push('^');
            out.push(char::from(code as u8 + 0x40));
        }
        0x7f => out.push_str("^?"),
        0x80..=0x9f => {
            out.push_str("M-^");
            out.push(char::from((code - 0x80) as u8 + 0x40));
        }
        // `char::is_control` is exactly the ranges above.
        _ => out.push(c),
    }
}

fn escape(s: &str, keep: impl Fn(char) -> Option<char>) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !c.is_control() {
            out.push(c);
        } else if let Some(kept) = keep(c) {
            out.push(kept);
        } else {
            push_caret(&mut out, c);
        }
    }
    Cow::Owned(out)
}

/// One line of text (a name, an id, a cwd, a preview): tabs and line feeds become spaces,
/// every other control character is shown (`^[`, `^M`, …).
pub fn visible_line(s: &str) -> Cow<'_, str> {
    escape(s, |c| matches!(c, '\n' | '\t').then_some(' '))
}

/// Text of several lines (a message in the TUI): line feeds and tabs stay, every other
/// control character is shown, carriage returns included (a bare CR would let a line
/// overwrite what came before it).
pub fn visible_text(s: &str) -> Cow<'_, str> {
    escape(s, |c| matches!(c, '\n' | '\t').then_some(c))
}

/// The one-column form of a control character, for a screen cell whose width is already
/// laid out (the TUI's last line of defence): the Unicode control pictures `␛`, `␡`, and
/// `�` for the C1 controls, which have no picture. Non-controls are returned unchanged.
pub fn control_picture(c: char) -> char {
    match c as u32 {
        code @ 0x00..=0x1f => char::from_u32(0x2400 + code).unwrap_or('\u{fffd}'),
        0x7f => '\u{2421}',
        0x80..=0x9f => '\u{fffd}',
        _ => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_become_visible() {
        // OSC 52 (clipboard), CSI 2J (clear), OSC 0 (title), OSC 8 (hyperlink), C1 CSI.
        let hostile =
            "a\x1b]52;c;ZWNobw==\x07b\x1b[2Jc\x1b]0;t\x1b\\d\x1b]8;;http://x\x1b\\e\u{9b}2J\x7f";
        let shown = visible_line(hostile);
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        assert_eq!(
            shown,
            "a^[]52;c;ZWNobw==^Gb^[[2Jc^[]0;t^[\\d^[]8;;http://x^[\\eM-^[2J^?"
        );
    }

    #[test]
    fn layout_whitespace_depends_on_the_kind_of_text() {
        assert_eq!(visible_line("a\tb\nc\rd"), "a b c^Md");
        assert_eq!(visible_text("a\tb\nc\rd"), "a\tb\nc^Md");
        assert!(matches!(visible_line("plain — ü"), Cow::Borrowed(_)));
    }

    #[test]
    fn pictures_take_one_cell() {
        assert_eq!(control_picture('\x1b'), '␛');
        assert_eq!(control_picture('\x7f'), '␡');
        assert_eq!(control_picture('\u{9b}'), '\u{fffd}');
        assert_eq!(control_picture('a'), 'a');
    }
}
