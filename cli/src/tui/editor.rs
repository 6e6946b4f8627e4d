//! The prompt editor: a multi-line buffer with a cursor and prompt history.
//!
//! Positions are (row, column in chars); every method keeps the cursor inside the text, so
//! callers never have to clamp.

#[derive(Debug, Clone, PartialEq)]
pub struct Editor {
    lines: Vec<String>,
    row: usize,
    col: usize,
    history: Vec<String>,
    /// Index into `history` while browsing; `None` when editing a fresh prompt.
    history_pos: Option<usize>,
    /// The unsent text kept while browsing history.
    draft: String,
    /// The kill ring (Emacs, as Pi's editor): what ctrl+w / ctrl+u / ctrl+k removed, oldest
    /// first; ctrl+y puts back the last, alt+y right after it swaps in the one before.
    kills: Vec<String>,
    /// The previous key killed or yanked: another kill joins the same ring entry, alt+y
    /// works only after a yank.
    last_kill: Option<KillStep>,
    /// States to go back to with undo: (lines, row, col), oldest first.
    undo: Vec<(Vec<String>, usize, usize)>,
    /// The last change typed a word character: more typing joins the same undo step.
    typing: bool,
}

impl Default for Editor {
    fn default() -> Self {
        Editor {
            lines: vec![String::new()],
            row: 0,
            col: 0,
            history: Vec::new(),
            history_pos: None,
            draft: String::new(),
            kills: Vec::new(),
            last_kill: None,
            undo: Vec::new(),
            typing: false,
        }
    }
}

/// What the previous key did to the kill ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KillStep {
    Kill,
    Yank,
}

/// Kills kept (older ones are dropped).
const KILL_RING_LEN: usize = 60;

fn char_to_byte(s: &str, col: usize) -> usize {
    s.char_indices().nth(col).map(|(i, _)| i).unwrap_or(s.len())
}

fn char_len(s: &str) -> usize {
    s.chars().count()
}

impl Editor {
    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    pub fn cursor(&self) -> (usize, usize) {
        (self.row, self.col)
    }

    pub fn is_empty(&self) -> bool {
        self.lines.len() == 1 && self.lines[0].is_empty()
    }

    /// Replaces the text and puts the cursor at its end.
    pub fn set_text(&mut self, text: &str) {
        self.lines = text.split('\n').map(str::to_string).collect();
        if self.lines.is_empty() {
            self.lines.push(String::new());
        }
        self.row = self.lines.len() - 1;
        self.col = char_len(&self.lines[self.row]);
    }

    /// Takes the text out (for submitting), remembering it in history.
    pub fn take(&mut self) -> String {
        let text = self.text();
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        self.history_pos = None;
        self.draft.clear();
        self.set_text("");
        text
    }

    pub fn clear(&mut self) {
        self.history_pos = None;
        self.set_text("");
    }

    pub fn history(&self) -> &[String] {
        &self.history
    }

    pub fn set_history(&mut self, history: Vec<String>) {
        self.history = history;
    }

    pub fn insert_str(&mut self, s: &str) {
        // Terminals send \r in pasted text; the buffer only knows \n.
        let s = s.replace("\r\n", "\n").replace('\r', "\n");
        for (i, part) in s.split('\n').enumerate() {
            if i > 0 {
                self.newline();
            }
            let line = &mut self.lines[self.row];
            let at = char_to_byte(line, self.col);
            line.insert_str(at, part);
            self.col += char_len(part);
        }
    }

    pub fn insert_char(&mut self, c: char) {
        let line = &mut self.lines[self.row];
        let at = char_to_byte(line, self.col);
        line.insert(at, c);
        self.col += 1;
    }

    pub fn newline(&mut self) {
        let line = &mut self.lines[self.row];
        let at = char_to_byte(line, self.col);
        let rest = line.split_off(at);
        self.row += 1;
        self.lines.insert(self.row, rest);
        self.col = 0;
    }

    pub fn backspace(&mut self) {
        if self.col > 0 {
            let line = &mut self.lines[self.row];
            let at = char_to_byte(line, self.col - 1);
            line.remove(at);
            self.col -= 1;
        } else if self.row > 0 {
            let line = self.lines.remove(self.row);
            self.row -= 1;
            self.col = char_len(&self.lines[self.row]);
            self.lines[self.row].push_str(&line);
        }
    }

    pub fn delete(&mut self) {
        let len = char_len(&self.lines[self.row]);
        if self.col < len {
            let line = &mut self.lines[self.row];
            let at = char_to_byte(line, self.col);
            line.remove(at);
        } else if self.row + 1 < self.lines.len() {
            let next = self.lines.remove(self.row + 1);
            self.lines[self.row].push_str(&next);
        }
    }

    pub fn left(&mut self) {
        if self.col > 0 {
            self.col -= 1;
        } else if self.row > 0 {
            self.row -= 1;
            self.col = char_len(&self.lines[self.row]);
        }
    }

    pub fn right(&mut self) {
        if self.col < char_len(&self.lines[self.row]) {
            self.col += 1;
        } else if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = 0;
        }
    }

    pub fn home(&mut self) {
        self.col = 0;
    }

    pub fn end(&mut self) {
        self.col = char_len(&self.lines[self.row]);
    }

    fn chars(&self) -> Vec<char> {
        self.lines[self.row].chars().collect()
    }

    fn word_left_col(&self) -> usize {
        let chars = self.chars();
        let mut c = self.col;
        while c > 0 && chars[c - 1].is_whitespace() {
            c -= 1;
        }
        while c > 0 && !chars[c - 1].is_whitespace() {
            c -= 1;
        }
        c
    }

    pub fn word_left(&mut self) {
        if self.col == 0 {
            self.left();
        } else {
            self.col = self.word_left_col();
        }
    }

    pub fn word_right(&mut self) {
        let chars = self.chars();
        if self.col >= chars.len() {
            self.right();
            return;
        }
        let mut c = self.col;
        while c < chars.len() && chars[c].is_whitespace() {
            c += 1;
        }
        while c < chars.len() && !chars[c].is_whitespace() {
            c += 1;
        }
        self.col = c;
    }

    pub fn delete_word_back(&mut self) {
        if self.col == 0 {
            self.backspace();
            return;
        }
        let to = self.word_left_col();
        let line = &mut self.lines[self.row];
        let (a, b) = (char_to_byte(line, to), char_to_byte(line, self.col));
        let killed = line[a..b].to_string();
        line.replace_range(a..b, "");
        self.col = to;
        self.push_kill(killed, true);
    }

    pub fn delete_to_line_start(&mut self) {
        let line = &mut self.lines[self.row];
        let b = char_to_byte(line, self.col);
        let killed = line[..b].to_string();
        line.replace_range(..b, "");
        self.col = 0;
        self.push_kill(killed, true);
    }

    pub fn delete_to_line_end(&mut self) {
        let line = &mut self.lines[self.row];
        let b = char_to_byte(line, self.col);
        let killed = line[b..].to_string();
        line.truncate(b);
        self.push_kill(killed, false);
    }

    /// Adds killed text to the ring; right after another kill it joins that entry (before
    /// it for backward deletions), so ctrl+w ctrl+w yanks back both words at once.
    fn push_kill(&mut self, text: String, backward: bool) {
        if text.is_empty() {
            return;
        }
        match self.kills.pop() {
            Some(last) if self.last_kill == Some(KillStep::Kill) => {
                self.kills
                    .push(if backward { text + &last } else { last + &text })
            }
            Some(last) => {
                self.kills.push(last);
                self.kills.push(text);
            }
            None => self.kills.push(text),
        }
        if self.kills.len() > KILL_RING_LEN {
            self.kills.remove(0);
        }
        self.last_kill = Some(KillStep::Kill);
    }

    /// ctrl+y: puts back the most recent kill.
    pub fn yank(&mut self) {
        let Some(text) = self.kills.last().cloned() else {
            return;
        };
        self.insert_str(&text);
        self.last_kill = Some(KillStep::Yank);
    }

    /// alt+y right after ctrl+y (or alt+y): replaces the text just yanked with the kill
    /// before it, cycling through the ring. Anything else in between makes it do nothing.
    pub fn yank_pop(&mut self) {
        if self.last_kill != Some(KillStep::Yank) || self.kills.len() < 2 {
            return;
        }
        let Some(yanked) = self.kills.pop() else {
            return;
        };
        // The yanked text ends at the cursor (a yank leaves the cursor after it).
        for _ in 0..char_len(&yanked) {
            self.backspace();
        }
        self.kills.insert(0, yanked);
        if let Some(text) = self.kills.last().cloned() {
            self.insert_str(&text);
        }
        self.last_kill = Some(KillStep::Yank);
    }

    /// A key that neither killed nor yanked: the next kill starts a new ring entry and
    /// alt+y does nothing until the next ctrl+y.
    pub fn end_kill_sequence(&mut self) {
        self.last_kill = None;
    }

    /// Remembers the state before an edit, for undo. Typing word characters in a row is
    /// one step (as in Pi), so undo takes back a word, not a letter.
    pub fn checkpoint(&mut self, typing_word: bool) {
        if typing_word && self.typing {
            return;
        }
        self.typing = typing_word;
        let state = (self.lines.clone(), self.row, self.col);
        if self.undo.last() != Some(&state) {
            self.undo.push(state);
            // Bounded: a long session of edits must not grow without end.
            if self.undo.len() > 200 {
                self.undo.remove(0);
            }
        }
    }

    /// ctrl+-: back to the state before the last edit step.
    pub fn undo(&mut self) -> bool {
        self.typing = false;
        match self.undo.pop() {
            Some((lines, row, col)) => {
                self.lines = lines;
                self.row = row;
                self.col = col;
                true
            }
            None => false,
        }
    }

    /// ctrl+] then a character: moves to its next occurrence on the line (backward with
    /// `forward` false); stays put when there is none.
    pub fn jump_to(&mut self, target: char, forward: bool) {
        let chars: Vec<char> = self.lines[self.row].chars().collect();
        let found = if forward {
            (self.col + 1..chars.len()).find(|&i| chars[i] == target)
        } else {
            (0..self.col).rev().find(|&i| chars[i] == target)
        };
        if let Some(i) = found {
            self.col = i;
        }
    }

    /// Up: moves within the text, and past the first line browses older prompts (Pi's
    /// cursorUp). Returns false when there is nothing older.
    pub fn up(&mut self) -> bool {
        if self.row > 0 {
            self.row -= 1;
            self.col = self.col.min(char_len(&self.lines[self.row]));
            return true;
        }
        self.history_prev()
    }

    pub fn down(&mut self) -> bool {
        if self.row + 1 < self.lines.len() {
            self.row += 1;
            self.col = self.col.min(char_len(&self.lines[self.row]));
            return true;
        }
        self.history_next()
    }

    pub fn history_prev(&mut self) -> bool {
        let pos = match self.history_pos {
            None if self.history.is_empty() => return false,
            None => {
                self.draft = self.text();
                self.history.len() - 1
            }
            Some(0) => return false,
            Some(p) => p - 1,
        };
        self.history_pos = Some(pos);
        let text = self.history[pos].clone();
        self.set_text(&text);
        true
    }

    pub fn history_next(&mut self) -> bool {
        let Some(pos) = self.history_pos else {
            return false;
        };
        if pos + 1 < self.history.len() {
            self.history_pos = Some(pos + 1);
            let text = self.history[pos + 1].clone();
            self.set_text(&text);
        } else {
            self.history_pos = None;
            let draft = std::mem::take(&mut self.draft);
            self.set_text(&draft);
        }
        true
    }

    /// The word under the cursor up to the cursor (what completion replaces).
    pub fn word_before_cursor(&self) -> String {
        let chars = self.chars();
        let mut c = self.col;
        while c > 0 && !chars[c - 1].is_whitespace() {
            c -= 1;
        }
        chars[c..self.col].iter().collect()
    }

    /// Replaces the word before the cursor with `with`.
    pub fn replace_word_before_cursor(&mut self, with: &str) {
        let n = char_len(&self.word_before_cursor());
        for _ in 0..n {
            self.backspace();
        }
        self.insert_str(with);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multiline_editing_and_joins() {
        let mut e = Editor::default();
        e.insert_str("héllo");
        e.newline();
        e.insert_str("wörld");
        assert_eq!(e.text(), "héllo\nwörld");
        e.home();
        e.backspace();
        assert_eq!(e.text(), "héllowörld");
        assert_eq!(e.cursor(), (0, 5));
        e.delete_word_back();
        assert_eq!(e.text(), "wörld");
        e.insert_str("a\r\nb");
        assert_eq!(e.lines().len(), 2);
    }

    #[test]
    fn history_keeps_the_draft() {
        let mut e = Editor::default();
        e.insert_str("one");
        e.take();
        e.insert_str("two");
        e.take();
        e.insert_str("dra");
        assert!(e.up());
        assert_eq!(e.text(), "two");
        assert!(e.up());
        assert_eq!(e.text(), "one");
        assert!(!e.up());
        assert!(e.down());
        assert!(e.down());
        assert_eq!(e.text(), "dra");
    }

    #[test]
    fn word_replacement() {
        let mut e = Editor::default();
        e.insert_str("look at @src/ma");
        assert_eq!(e.word_before_cursor(), "@src/ma");
        e.replace_word_before_cursor("@src/main.rs ");
        assert_eq!(e.text(), "look at @src/main.rs ");
    }

    #[test]
    fn kill_ring_accumulates_yanks_and_pops() {
        let mut e = Editor::default();
        e.insert_str("alpha beta gamma");
        // Two backward kills in a row are one entry.
        e.delete_word_back();
        e.delete_word_back();
        assert_eq!(e.text(), "alpha ");
        e.end_kill_sequence();
        e.insert_str("x");
        e.end_kill_sequence();
        e.delete_to_line_start();
        assert_eq!(e.text(), "");
        e.yank();
        assert_eq!(e.text(), "alpha x");
        // alt+y swaps in the previous kill, then cycles back round.
        e.yank_pop();
        assert_eq!(e.text(), "beta gamma");
        e.yank_pop();
        assert_eq!(e.text(), "alpha x");
        // Not right after a yank: nothing happens.
        e.end_kill_sequence();
        e.yank_pop();
        assert_eq!(e.text(), "alpha x");
    }
}
