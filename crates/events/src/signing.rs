//! Standard Webhooks signatures (<https://www.standardwebhooks.com>).
//!
//! The signed content is `"{id}.{timestamp}.{body}"`, the key is the secret's
//! base64 part after `whsec_`, and the header carries space-separated
//! `v1,<base64 HMAC-SHA256>` values (several during a secret rotation).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

/// A signing secret: `whsec_` + base64 of random bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret {
    key: Vec<u8>,
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(***)")
    }
}

impl WebhookSecret {
    /// 24 random bytes, as Svix and the Standard Webhooks libraries use.
    pub fn generate() -> Self {
        let mut key = vec![0u8; 24];
        rand::rng().fill_bytes(&mut key);
        Self { key }
    }

    pub fn parse(s: &str) -> Option<Self> {
        let key = STANDARD.decode(s.strip_prefix("whsec_")?).ok()?;
        (!key.is_empty()).then_some(Self { key })
    }

    /// The `whsec_…` form, shown to the user and sealed for storage.
    pub fn expose(&self) -> String {
        format!("whsec_{}", STANDARD.encode(&self.key))
    }

    /// `v1,<base64 HMAC-SHA256 of "{msg_id}.{timestamp}.{body}">`.
    pub fn sign(&self, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key).expect("HMAC takes keys of any length");
        mac.update(msg_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// The `webhook-signature` value for `secrets` (the current one first).
pub fn signature_header(secrets: &[WebhookSecret], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets.iter().map(|s| s.sign(msg_id, timestamp, body)).collect::<Vec<_>>().join(" ")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("missing webhook-id, webhook-timestamp or webhook-signature")]
    MissingHeaders,
    #[error("the webhook-timestamp is too old or too far in the future")]
    Stale,
    #[error("no signature matches")]
    NoMatch,
}

/// The signature headers of an inbound message, present and fresh; what
/// can be checked before knowing (or revealing) which secret applies.
#[derive(Debug, Clone, Copy)]
pub struct SignedHeaders<'a> {
    msg_id: &'a str,
    timestamp: i64,
    signatures: &'a str,
}

impl<'a> SignedHeaders<'a> {
    /// Refuses missing headers and timestamps more than `tolerance_s` away from `now`.
    pub fn check(
        msg_id: Option<&'a str>,
        timestamp: Option<&'a str>,
        signatures: Option<&'a str>,
        now: i64,
        tolerance_s: i64,
    ) -> Result<Self, VerifyError> {
        let (Some(msg_id), Some(ts), Some(signatures)) = (msg_id, timestamp, signatures) else {
            return Err(VerifyError::MissingHeaders);
        };
        let timestamp: i64 = ts.trim().parse().map_err(|_| VerifyError::Stale)?;
        if now.saturating_sub(timestamp).abs() > tolerance_s {
            return Err(VerifyError::Stale);
        }
        Ok(Self { msg_id, timestamp, signatures })
    }

    /// Whether one of the signatures is `secret`'s over `body`; constant-time.
    pub fn matches(&self, secret: &WebhookSecret, body: &[u8]) -> bool {
        let expected = secret.sign(self.msg_id, self.timestamp, body);
        let expected = expected.as_bytes();
        self.signatures.split_whitespace().any(|candidate| {
            let c = candidate.as_bytes();
            c.len() == expected.len() && c.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
        })
    }
}

/// Verifies an inbound message signed with `secret`, refusing timestamps more
/// than `tolerance_s` away from `now`. Comparison is constant-time.
pub fn verify(
    secret: &WebhookSecret,
    msg_id: Option<&str>,
    timestamp: Option<&str>,
    signatures: Option<&str>,
    body: &[u8],
    now: i64,
    tolerance_s: i64,
) -> Result<(), VerifyError> {
    let signed = SignedHeaders::check(msg_id, timestamp, signatures, now, tolerance_s)?;
    if signed.matches(secret, body) { Ok(()) } else { Err(VerifyError::NoMatch) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproduces_the_standard_webhooks_test_vector() {
        let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let sig = secret.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, br#"{"test": 2432232314}"#);
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn verification_accepts_any_listed_signature_and_refuses_stale_or_forged_ones() {
        let old = WebhookSecret::generate();
        let new = WebhookSecret::generate();
        let body = br#"{"type":"webhook.test"}"#;
        let header = signature_header(&[new.clone(), old.clone()], "evt_1", 1000, body);
        assert_eq!(header.split(' ').count(), 2);
        for s in [&old, &new] {
            assert_eq!(verify(s, Some("evt_1"), Some("1000"), Some(&header), body, 1100, 300), Ok(()));
        }
        assert_eq!(verify(&old, Some("evt_1"), Some("1000"), Some(&header), body, 2000, 300), Err(VerifyError::Stale));
        assert_eq!(
            verify(&old, Some("evt_2"), Some("1000"), Some(&header), body, 1000, 300),
            Err(VerifyError::NoMatch)
        );
        let other = WebhookSecret::generate();
        assert_eq!(
            verify(&other, Some("evt_1"), Some("1000"), Some(&header), body, 1000, 300),
            Err(VerifyError::NoMatch)
        );
        assert_eq!(verify(&old, None, Some("1000"), Some(&header), body, 1000, 300), Err(VerifyError::MissingHeaders));
        assert_eq!(WebhookSecret::parse(&old.expose()), Some(old));
        assert!(WebhookSecret::parse("sk_nope").is_none());
    }
}
