//! PKCE (RFC 7636) verifier and S256 challenge, and random OAuth `state` values.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;

/// A PKCE pair: the secret verifier kept by the client and the challenge sent with the
/// authorize request.
#[derive(Debug, Clone)]
pub struct Pkce {
    /// base64url of 32 random bytes.
    pub verifier: String,
    /// base64url(SHA-256(verifier)).
    pub challenge: String,
}

impl Pkce {
    /// A fresh pair.
    pub fn generate() -> Pkce {
        let mut bytes = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut bytes);
        let verifier = URL_SAFE_NO_PAD.encode(bytes);
        let challenge = challenge_for(&verifier);
        Pkce {
            verifier,
            challenge,
        }
    }
}

/// The S256 challenge of `verifier`.
pub fn challenge_for(verifier: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    URL_SAFE_NO_PAD.encode(digest.as_ref())
}

/// `n` random bytes as lowercase hex (OpenAI's `state`).
pub fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7636_example_and_fresh_pairs() {
        // RFC 7636 appendix B.
        assert_eq!(
            challenge_for("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let p = Pkce::generate();
        assert_eq!(p.verifier.len(), 43);
        assert_eq!(p.challenge, challenge_for(&p.verifier));
        assert_ne!(p.verifier, Pkce::generate().verifier);
        assert_eq!(random_hex(16).len(), 32);
    }
}
