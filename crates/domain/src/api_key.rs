//! API keys: `parley_live_<secret>` / `parley_test_<secret>`.
//!
//! `<secret>` is 30 random base62 characters followed by a 6-character base62
//! CRC32 of those 30, as in GitHub's token format. The checksum lets us reject
//! mistyped or made-up keys before touching the database. Only the SHA-256 of
//! the whole key is ever stored.

use std::fmt;

use rand::Rng;
use sha2::{Digest, Sha256};

use crate::Mode;

const PREFIX: &str = "parley";
const RANDOM_LEN: usize = 30;
const CHECKSUM_LEN: usize = 6;
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A syntactically valid API key with a correct checksum. Its `Debug` never
/// prints the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    full: String,
    mode: Mode,
}

impl ApiKey {
    /// Creates a fresh random key for `mode`.
    pub fn generate(mode: Mode) -> Self {
        let mut rng = rand::rng();
        let random: String = (0..RANDOM_LEN).map(|_| BASE62[rng.random_range(0..BASE62.len())] as char).collect();
        let full = format!("{PREFIX}_{}_{random}{}", mode.as_str(), checksum(&random));
        Self { full, mode }
    }

    /// Parses a presented key, checking prefix, mode, length, alphabet and checksum.
    pub fn parse(raw: &str) -> Option<Self> {
        let rest = raw.strip_prefix(PREFIX)?.strip_prefix('_')?;
        let (mode, secret) = rest.split_once('_')?;
        let mode = Mode::parse(mode)?;
        if secret.len() != RANDOM_LEN + CHECKSUM_LEN || !secret.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return None;
        }
        let (random, check) = secret.split_at(RANDOM_LEN);
        if checksum(random) != check {
            return None;
        }
        Some(Self { full: raw.to_owned(), mode })
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The full key. Shown to the user once, at creation; never logged.
    pub fn expose(&self) -> &str {
        &self.full
    }

    /// Hex SHA-256 of the whole key: what the database stores and looks up.
    pub fn hash(&self) -> String {
        hash_key(&self.full)
    }

    /// First 12 and last 4 characters, for recognising a key in a list.
    pub fn hint(&self) -> String {
        format!("{}…{}", &self.full[..12], &self.full[self.full.len() - 4..])
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKey({}, ***)", self.mode.as_str())
    }
}

pub fn hash_key(full: &str) -> String {
    hex::encode(Sha256::digest(full.as_bytes()))
}

fn checksum(random: &str) -> String {
    let mut n = crc32fast::hash(random.as_bytes()) as u64;
    let mut out = [b'0'; CHECKSUM_LEN];
    for slot in out.iter_mut().rev() {
        *slot = BASE62[(n % 62) as usize];
        n /= 62;
    }
    // 62^6 > 2^32, so every CRC32 fits in six digits.
    String::from_utf8(out.to_vec()).expect("base62 is ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_and_keep_their_mode() {
        for mode in [Mode::Live, Mode::Test] {
            let key = ApiKey::generate(mode);
            assert!(key.expose().starts_with(&format!("parley_{}_", mode.as_str())));
            assert_eq!(key.expose().len(), "parley_".len() + mode.as_str().len() + 1 + 36);
            let parsed = ApiKey::parse(key.expose()).expect("round trip");
            assert_eq!(parsed.mode(), mode);
            assert_eq!(parsed.hash(), key.hash());
        }
    }

    #[test]
    fn a_single_changed_character_fails_the_checksum() {
        let key = ApiKey::generate(Mode::Live);
        let mut bytes = key.expose().as_bytes().to_vec();
        let i = 15;
        bytes[i] = if bytes[i] == b'a' { b'b' } else { b'a' };
        assert!(ApiKey::parse(std::str::from_utf8(&bytes).unwrap()).is_none());
    }

    #[test]
    fn malformed_keys_are_rejected() {
        for raw in
            ["", "parley_live_", "parley_prod_abc", "sk_live_123", "parley_live_!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"]
        {
            assert!(ApiKey::parse(raw).is_none(), "{raw}");
        }
    }

    #[test]
    fn debug_and_hint_do_not_reveal_the_secret() {
        let key = ApiKey::generate(Mode::Test);
        assert!(!format!("{key:?}").contains(&key.expose()[12..]));
        let hint = key.hint();
        assert!(hint.starts_with("parley_test_"));
        assert!(hint.ends_with(&key.expose()[key.expose().len() - 4..]));
        assert_eq!(key.hash().len(), 64);
    }
}
