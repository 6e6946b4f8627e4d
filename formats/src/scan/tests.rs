use super::*;
use crate::head::EntryHead;
use proptest::prelude::*;
use serde_json::{json, Value};

fn head_of(line: &str) -> EntryHead<'_> {
    match scan(line.as_bytes()).unwrap() {
        Scanned::Object(h) => h,
        other => panic!("not an object: {other:?}"),
    }
}

#[test]
fn reads_pi_lines() {
    let h = head_of(
        r#"{"type":"message","id":"ab12cd34","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":[{"type":"text","text":"x \"q\" \\ é"}],"timestamp":1}}"#,
    );
    assert_eq!(h.kind.as_deref(), Some("message"));
    assert_eq!(h.id.as_deref(), Some("ab12cd34"));
    assert_eq!(h.parent, ParentRef::Null);
    assert_eq!(h.role.as_deref(), Some("user"));
    let h = head_of(
        r#"{"type":"custom","customType":"x","data":{"role":"no","id":"no"},"id":"e1","parentId":"p1","timestamp":"t"}"#,
    );
    assert_eq!(h.id.as_deref(), Some("e1"));
    assert_eq!(h.role, None);
    assert_eq!(h.parent, ParentRef::Id("p1".into()));
}

#[test]
fn last_duplicate_key_wins_and_escapes_decode() {
    let h = head_of(r#"{"id":"a","id":"b\u0063","type":7,"label":"x","label":null}"#);
    assert_eq!(h.id.as_deref(), Some("bc"));
    assert_eq!(h.kind, None);
    assert_eq!(h.label, None);
}

#[test]
fn rejects_what_json_parse_rejects() {
    for bad in [
        "",
        "{",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\":1,}",
        "[1,]",
        "{\"a\":01}",
        "{\"a\":1.}",
        "{\"a\":-}",
        "{\"a\":1e}",
        "{\"a\":tru}",
        "{\"a\":\"\u{1}\"}",
        "{\"a\":\"\\x\"}",
        "{\"a\":\"\\u12g4\"}",
        "{} x",
        "{\"a\":1}}",
        "\u{feff}{}",
        "{'a':1}",
        "{\"a\" 1}",
        "[1 2]",
        "{\"a\":[}",
    ] {
        assert!(scan(bad.as_bytes()).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn accepts_what_json_parse_accepts_but_serde_does_not() {
    // A lone surrogate escape is a valid JavaScript string.
    assert!(scan(br#"{"a":"\ud800"}"#).is_ok());
    // Invalid UTF-8 inside a string is decoded to U+FFFD by Node before parsing.
    assert!(scan(b"{\"a\":\"\xff\"}").is_ok());
    // Deep nesting is refused where the payload parser would refuse it, without recursion.
    let deep = format!("{{\"a\":{}{}}}", "[".repeat(10_000), "]".repeat(10_000));
    assert!(scan(deep.as_bytes()).is_err());
}

#[test]
fn top_level_non_objects() {
    assert_eq!(scan(b"null").unwrap(), Scanned::Other { falsy: true });
    assert_eq!(scan(b" 0 ").unwrap(), Scanned::Other { falsy: true });
    assert_eq!(scan(b"-0.0e5").unwrap(), Scanned::Other { falsy: true });
    assert_eq!(scan(b"\"\"").unwrap(), Scanned::Other { falsy: true });
    assert_eq!(scan(b"[0]").unwrap(), Scanned::Other { falsy: false });
    assert_eq!(scan(b"\"x\"").unwrap(), Scanned::Other { falsy: false });
}

#[test]
fn swar_finds_every_special_byte_position() {
    for pos in 0..24 {
        for special in [b'"', b'\\', 0x00, 0x1f, b'\n'] {
            let mut body = vec![b'a'; 24];
            body[pos] = special;
            let mut line = b"{\"k\":\"".to_vec();
            line.extend_from_slice(&body);
            line.extend_from_slice(b"\"}");
            let ours = scan(&line).is_ok();
            let theirs = serde_json::from_slice::<Value>(&line).is_ok();
            assert_eq!(
                ours,
                theirs,
                "special {special:#x} at {pos}: {:?}",
                String::from_utf8_lossy(&line)
            );
        }
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        "[ -~é😀\\\\\"\n\t\u{1}]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("type".to_string()),
                        Just("id".to_string()),
                        Just("parentId".to_string()),
                        Just("message".to_string()),
                        Just("role".to_string()),
                        Just("label".to_string()),
                        "[a-z]{1,4}"
                    ],
                    inner
                ),
                0..6
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    /// On serde-valid JSON the scanner agrees, and reads the same head as a full parse.
    #[test]
    fn agrees_with_a_full_parse(value in arb_json()) {
        let line = serde_json::to_string(&value).unwrap();
        let scanned = scan(line.as_bytes());
        prop_assert!(scanned.is_ok(), "{line}");
        if let (Ok(Scanned::Object(h)), Value::Object(_)) = (scanned, &value) {
            let mut expected = EntryHead::from_value(&value);
            // JSON.parse keeps the last duplicate; serde's map does too.
            expected.falsy = false;
            prop_assert_eq!(h, expected);
        }
    }

    /// Corrupting bytes never makes the scanner accept what serde_json rejects, or the
    /// reverse, outside the documented corners (surrogate escapes, invalid UTF-8).
    #[test]
    fn accepts_exactly_what_serde_accepts(value in arb_json(), cuts in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
        let mut line = serde_json::to_vec(&value).unwrap();
        for (pos, byte) in cuts {
            if line.is_empty() { break; }
            let pos = pos % line.len();
            if byte % 3 == 0 { line.truncate(pos); } else { { let pool = b" ,:{}[]\"\\0-e.tnf"; line[pos] = pool[byte as usize % pool.len()]; } }
        }
        // JSON.parse reads an out-of-range number as ±Infinity; serde_json stops
        // there, so it cannot tell what else is wrong with the line: no verdict.
        let (theirs, comparable) = match serde_json::from_slice::<Value>(&line) {
            Ok(_) => (true, true),
            Err(e) => (false, !e.to_string().contains("out of range")),
        };
        let lone_surrogate = String::from_utf8_lossy(&line).contains("\\u");
        let ours = scan(&line).is_ok();
        if comparable && !lone_surrogate && line.is_ascii() {
            prop_assert_eq!(ours, theirs, "{}", String::from_utf8_lossy(&line));
        }
    }
}
