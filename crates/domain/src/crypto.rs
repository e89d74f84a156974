//! Encryption of secrets at rest (ChaCha20-Poly1305 under a master key).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use rand::RngCore;

/// Seals and opens secrets with one 32-byte master key. A sealed value is
/// `v1:` + base64(nonce ‖ ciphertext ‖ tag); the tag makes any tampering,
/// or the wrong key, fail to open.
#[derive(Clone)]
pub struct SecretBox {
    cipher: ChaCha20Poly1305,
    /// Root of the keys derived for other purposes (never the master key itself).
    derivation_root: [u8; 32],
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(***)")
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CryptoError {
    #[error("the master key must be 32 bytes, base64-encoded")]
    BadKey,
    #[error("the sealed value is malformed or was sealed with another key")]
    CannotOpen,
}

impl SecretBox {
    pub fn new(key: [u8; 32]) -> Self {
        use hmac::{Hmac, Mac};
        let mut root = <Hmac<sha2::Sha256> as Mac>::new_from_slice(&key).expect("HMAC takes any key length");
        root.update(b"parley key derivation v1");
        Self { cipher: ChaCha20Poly1305::new(&Key::from(key)), derivation_root: root.finalize().into_bytes().into() }
    }

    /// A 32-byte key for `purpose` (e.g. signing download URLs), derived from
    /// the master key: the same on every instance, independent per purpose.
    pub fn derive_key(&self, purpose: &str) -> [u8; 32] {
        use hmac::{Hmac, Mac};
        let mut mac =
            <Hmac<sha2::Sha256> as Mac>::new_from_slice(&self.derivation_root).expect("HMAC takes any key length");
        mac.update(purpose.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// Reads a base64 master key (standard or URL-safe alphabet).
    pub fn from_base64(encoded: &str) -> Result<Self, CryptoError> {
        let bytes = STANDARD
            .decode(encoded.trim())
            .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(encoded.trim()))
            .map_err(|_| CryptoError::BadKey)?;
        let key: [u8; 32] = bytes.try_into().map_err(|_| CryptoError::BadKey)?;
        Ok(Self::new(key))
    }

    /// A fresh random master key, base64-encoded.
    pub fn generate_key() -> String {
        let mut key = [0u8; 32];
        rand::rng().fill_bytes(&mut key);
        STANDARD.encode(key)
    }

    pub fn seal(&self, plaintext: &[u8]) -> String {
        let mut nonce = [0u8; 12];
        rand::rng().fill_bytes(&mut nonce);
        let ciphertext =
            self.cipher.encrypt(&Nonce::from(nonce), plaintext).expect("ChaCha20-Poly1305 sealing cannot fail");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&ciphertext);
        format!("v1:{}", STANDARD.encode(out))
    }

    pub fn open(&self, sealed: &str) -> Result<Vec<u8>, CryptoError> {
        let body = sealed.strip_prefix("v1:").ok_or(CryptoError::CannotOpen)?;
        let bytes = STANDARD.decode(body).map_err(|_| CryptoError::CannotOpen)?;
        if bytes.len() < 12 + 16 {
            return Err(CryptoError::CannotOpen);
        }
        let (nonce, ciphertext) = bytes.split_at(12);
        let nonce: [u8; 12] = nonce.try_into().map_err(|_| CryptoError::CannotOpen)?;
        self.cipher.decrypt(&Nonce::from(nonce), ciphertext).map_err(|_| CryptoError::CannotOpen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_with_their_key_and_unchanged() {
        let k = SecretBox::from_base64(&SecretBox::generate_key()).unwrap();
        let sealed = k.seal(b"signing secret");
        assert!(!sealed.contains("signing"));
        assert_eq!(k.open(&sealed).unwrap(), b"signing secret");
        let other = SecretBox::from_base64(&SecretBox::generate_key()).unwrap();
        assert_eq!(other.open(&sealed), Err(CryptoError::CannotOpen));
        let mut tampered = sealed.clone();
        tampered.replace_range(10..11, if &sealed[10..11] == "A" { "B" } else { "A" });
        assert_eq!(k.open(&tampered), Err(CryptoError::CannotOpen));
        assert_eq!(SecretBox::from_base64("short").unwrap_err(), CryptoError::BadKey);
    }

    #[test]
    fn derived_keys_depend_on_the_master_key_and_the_purpose() {
        let a = SecretBox::new([1; 32]);
        assert_eq!(a.derive_key("files"), SecretBox::new([1; 32]).derive_key("files"));
        assert_ne!(a.derive_key("files"), a.derive_key("other"));
        assert_ne!(a.derive_key("files"), SecretBox::new([2; 32]).derive_key("files"));
        assert_ne!(a.derive_key("files"), [1; 32]);
    }
}
