//! Identifiers: 8-hex-char entry ids and session ids.

/// A fresh entry id: the first 8 hex chars of a random UUID, retried while `taken`
/// says it is in use (100 attempts, then a whole UUID), as Pi generates them.
pub fn entry_id(taken: impl Fn(&str) -> bool) -> String {
    for _ in 0..100 {
        let uuid = uuid::Uuid::new_v4().simple().to_string();
        let id = &uuid[..8];
        if !taken(id) {
            return id.to_string();
        }
    }
    uuid::Uuid::new_v4().hyphenated().to_string()
}

/// A fresh session id (UUIDv7, time-ordered, as Pi 1.6 creates them).
pub fn session_id() -> String {
    uuid::Uuid::now_v7().hyphenated().to_string()
}

/// Pi's rule for caller-chosen session ids.
pub fn is_valid_session_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            alnum(first)
                && alnum(last)
                && bytes
                    .iter()
                    .all(|b| alnum(b) || matches!(b, b'.' | b'_' | b'-'))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_ids_are_8_hex_and_avoid_taken() {
        let id = entry_id(|_| false);
        assert_eq!(id.len(), 8);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        let long = entry_id(|_| true);
        assert_eq!(long.len(), 36);
    }

    #[test]
    fn session_id_rules() {
        assert!(is_valid_session_id(&session_id()));
        assert!(is_valid_session_id("a.b_c-d"));
        assert!(!is_valid_session_id("-a"));
        assert!(!is_valid_session_id("../x"));
        assert!(!is_valid_session_id(""));
    }
}
