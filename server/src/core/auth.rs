//! The password check every protocol uses (RESP AUTH and HELLO, the binary protocol's AUTH
//! token, memcached's SASL-less `auth` data): one comparison in constant time (the `subtle`
//! crate), so how long a wrong guess takes tells an attacker nothing about how much of it
//! matched. Both sides are hashed first (SHA-256, the `sha2` crate, as Redis does since
//! 6.0), so not even the password's length leaks.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The configured password, kept as its digest.
#[derive(Clone)]
pub struct Password([u8; 32]);

impl Password {
    pub fn new(password: &str) -> Password {
        Password(Sha256::digest(password.as_bytes()).into())
    }

    /// Whether `given` is the password, compared in constant time: both sides are
    /// equal-length digests, so the time depends on neither input's length or content.
    pub fn matches(&self, given: &[u8]) -> bool {
        let given: [u8; 32] = Sha256::digest(given).into();
        self.0.ct_eq(&given).into()
    }
}

#[cfg(test)]
mod tests {
    use super::Password;

    fn password_matches(p: &str, given: &[u8]) -> bool {
        Password::new(p).matches(given)
    }

    #[test]
    fn matches_only_the_password() {
        assert!(password_matches("s3cret", b"s3cret"));
        assert!(!password_matches("s3cret", b"s3cre"));
        assert!(!password_matches("s3cret", b"s3cret!"));
        assert!(!password_matches("s3cret", b"S3cret"));
        assert!(!password_matches("s3cret", b""));
        assert!(password_matches("", b""));
    }
}
