use super::*;

fn spec(old: &str, new: &str) -> EditSpec {
    EditSpec {
        old_text: old.to_string(),
        new_text: new.to_string(),
    }
}

#[test]
fn fuzzy_view_normalizes_quotes_dashes_spaces_and_trailing_whitespace() {
    assert_eq!(
        normalize_for_fuzzy_match(
            "\u{2018}a\u{2019} \u{201C}b\u{201D} c\u{2014}d e\u{00A0}f  \ng\t"
        ),
        "'a' \"b\" c-d e f\ng"
    );
    // NFKC folds compatibility forms such as the "ﬁ" ligature.
    assert_eq!(normalize_for_fuzzy_match("\u{FB01}le"), "file");
}

#[test]
fn line_endings_of_the_original_are_used_for_new_text() {
    let original = "a\r\nb\r\nc";
    let normalized = normalize_to_lf(original);
    let applied =
        apply_edits_to_normalized_content(&normalized, &[spec("b", "x\ny")], "f").unwrap();
    assert_eq!(
        apply_replacements_to_original(original, &applied.replacements),
        "a\r\nx\r\ny\r\nc"
    );
    // Classic Mac line endings (lone CR) are kept too.
    let mac = "a\rb\rc";
    let applied =
        apply_edits_to_normalized_content(&normalize_to_lf(mac), &[spec("b", "x\ny")], "f")
            .unwrap();
    assert_eq!(
        apply_replacements_to_original(mac, &applied.replacements),
        "a\rx\ry\rc"
    );
}

#[test]
fn edits_match_the_original_not_each_other() {
    // The second edit's oldText only exists in the original, not after the first edit.
    let applied =
        apply_edits_to_normalized_content("ab cd", &[spec("ab", "cd!"), spec("cd", "x")], "f")
            .unwrap();
    assert_eq!(applied.new_content, "cd! x");
}

#[test]
fn diff_skips_distant_context_with_one_marker() {
    let base: String = (1..=100).map(|i| format!("l{i}\n")).collect();
    let applied = apply_edits_to_normalized_content(
        &base,
        &[spec("l10\n", "X\n"), spec("l90\n", "Y\n")],
        "f",
    )
    .unwrap();
    let diff = generate_edit_diff(
        "f",
        &applied.base_content,
        &applied.new_content,
        &applied.replacements,
    );
    assert_eq!(diff.first_changed_line, Some(10));
    assert_eq!(diff.diff.matches("    ...").count(), 3, "{}", diff.diff);
    assert!(diff.diff.contains("- 10 l10\n+ 10 X\n"), "{}", diff.diff);
    assert!(diff.diff.contains("- 90 l90\n+ 90 Y\n"));
    assert!(diff.patch.contains("@@ -6,9 +6,9 @@\n"), "{}", diff.patch);
    assert!(diff.patch.contains("@@ -86,9 +86,9 @@\n"), "{}", diff.patch);
}

#[test]
fn pure_insertion_patch_uses_empty_range_quirk() {
    let applied = apply_edits_to_normalized_content("a\n", &[spec("a\n", "a\nb\n")], "f").unwrap();
    let diff = generate_edit_diff(
        "f",
        &applied.base_content,
        &applied.new_content,
        &applied.replacements,
    );
    assert_eq!(diff.patch, "--- f\n+++ f\n@@ -1,1 +1,2 @@\n a\n+b\n");
    let applied = apply_edits_to_normalized_content("a\nb\n", &[spec("a\nb\n", "")], "f").unwrap();
    let diff = generate_edit_diff(
        "f",
        &applied.base_content,
        &applied.new_content,
        &applied.replacements,
    );
    assert_eq!(diff.patch, "--- f\n+++ f\n@@ -1,2 +0,0 @@\n-a\n-b\n");
}

/// Found by fuzz/fuzz_targets/edit_matcher.rs: a match ending in a multi-byte character made the
/// diff window search start inside that character, and slicing there panicked.
#[test]
fn diff_of_a_match_ending_in_a_multi_byte_character() {
    for (content, old) in [
        ("a\n\u{FFFD}\nb", "\u{FFFD}"),
        ("x\u{e9}", "\u{e9}"),
        ("\u{1F600}\n", "\u{1F600}"),
    ] {
        let applied =
            apply_edits_to_normalized_content(content, &[spec(old, "y\nz")], "f").unwrap();
        let diff = generate_edit_diff(
            "f",
            &applied.base_content,
            &applied.new_content,
            &applied.replacements,
        );
        assert!(diff.diff.contains("+"), "{content:?}: {}", diff.diff);
    }
}
