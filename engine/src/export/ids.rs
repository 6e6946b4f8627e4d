//! Ids for exported records, derived rather than random, so the same session always exports
//! the same bytes.

/// A UUID-shaped id (version 8, "custom") hashed from a seed (a session id) and a position.
pub(crate) fn derived_uuid(seed: &str, n: u64) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, format!("{seed}:{n}").as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest.as_ref()[..16]);
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Whether `id` is a hyphenated UUID (8-4-4-4-12 hex digits), the only session id Codex
/// accepts.
pub(crate) fn is_uuid(id: &str) -> bool {
    let groups: Vec<&str> = id.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, len)| g.len() == len && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_stable_uuids() {
        let a = derived_uuid("s", 1);
        assert_eq!(a, derived_uuid("s", 1));
        assert_ne!(a, derived_uuid("s", 2));
        assert!(is_uuid(&a));
        assert!(is_uuid("01a22cb7-e229-7731-b674-70cd2bf891c5"));
        assert!(!is_uuid("my-session"));
        assert!(!is_uuid("01a22cb7-e229-7731-b674-70cd2bf891cz"));
    }
}
