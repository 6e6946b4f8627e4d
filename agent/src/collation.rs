//! String order of Node's `a.localeCompare(b)` (ICU root collation), approximated for the
//! names Pi sorts with it: file names in `ls`, provider and model ids in `--list-models`.
//!
//! Primary level: whitespace, then punctuation and symbols in the root collation's order,
//! then digits, then letters by base letter (case and accents ignored). Ties are broken by
//! accents, then by case with lowercase first, as ICU's tertiary level does, and finally by
//! code points so the order is total.

use std::cmp::Ordering;

use unicode_normalization::UnicodeNormalization;

/// Punctuation and symbols in the order of the Unicode root collation, which sorts them before
/// digits and letters.
const SYMBOL_ORDER: &str = "_-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$";

/// Primary collation weight of a character.
fn primary_weight(c: char) -> (u8, u32) {
    if c.is_whitespace() {
        return (0, c as u32);
    }
    if let Some(position) = SYMBOL_ORDER.find(c) {
        return (1, position as u32);
    }
    if c.is_ascii_digit() {
        return (3, c as u32);
    }
    if c.is_alphabetic() {
        // Accented letters sort with their base letter at the primary level.
        let base = c.nfd().next().unwrap_or(c);
        return (4, base.to_lowercase().next().unwrap_or(base) as u32);
    }
    if c.is_ascii() {
        return (2, c as u32);
    }
    (5, c as u32)
}

/// `a.localeCompare(b)`, approximated (see the module docs).
pub fn locale_compare(a: &str, b: &str) -> Ordering {
    let primary = |s: &str| s.chars().map(primary_weight).collect::<Vec<_>>();
    let accents = |s: &str| s.to_lowercase().nfd().collect::<String>();
    // Tertiary: lowercase sorts before uppercase at the first position where case differs.
    let case = |s: &str| s.chars().map(char::is_uppercase).collect::<Vec<_>>();
    primary(a)
        .cmp(&primary(b))
        .then_with(|| accents(a).cmp(&accents(b)))
        .then_with(|| case(a).cmp(&case(b)))
        .then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(mut names: Vec<&str>) -> Vec<&str> {
        names.sort_by(|a, b| locale_compare(a, b));
        names
    }

    #[test]
    fn orders_like_node_locale_compare() {
        // Orders checked against Node 22's `localeCompare` (real Pi's --list-models).
        assert_eq!(
            sorted(vec![
                "Qwen/Qwen3-8B",
                "MiniMaxAI/MiniMax-M2",
                "moonshotai/Kimi-K2",
                "zai-org/GLM-5"
            ]),
            [
                "MiniMaxAI/MiniMax-M2",
                "moonshotai/Kimi-K2",
                "Qwen/Qwen3-8B",
                "zai-org/GLM-5"
            ]
        );
        assert_eq!(
            sorted(vec!["a-b", "a_b", "a.b", "ab", "a1"]),
            ["a_b", "a-b", "a.b", "a1", "ab"]
        );
        assert_eq!(sorted(vec!["B", "b", "a"]), ["a", "b", "B"]);
    }
}
