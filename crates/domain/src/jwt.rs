//! Access tokens: compact JWS with HS256 only.
//!
//! Parley signs and verifies its own tokens, so one algorithm is enough; a
//! token whose header names any other algorithm (including `none`) is
//! refused before its signature is looked at. Keys are picked by `kid`.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::Mode;

/// The audience of dashboard access tokens.
pub const AUDIENCE: &str = "parley-api";
pub const ISSUER: &str = "parley";

/// What an access token says: who, which workspace and mode, until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The user id, as a string (RFC 7519).
    pub sub: String,
    /// The selected workspace.
    pub wid: i64,
    pub mode: Mode,
    pub aud: String,
    pub iss: String,
    pub iat: i64,
    pub exp: i64,
    pub jti: String,
    /// The session (refresh-token family) that issued the token: revoking
    /// the session stops its access tokens on their next request.
    pub sid: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    #[error("malformed token")]
    Malformed,
    #[error("unsupported algorithm")]
    Algorithm,
    #[error("bad signature")]
    Signature,
    #[error("expired")]
    Expired,
    #[error("wrong audience or issuer")]
    Audience,
}

#[derive(Serialize, Deserialize)]
struct Header {
    alg: String,
    typ: Option<String>,
    kid: String,
}

fn mac(secret: &[u8], signing_input: &[u8]) -> Hmac<Sha256> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).expect("HMAC takes keys of any length");
    m.update(signing_input);
    m
}

/// Signs `claims` with the key `kid`.
pub fn sign(claims: &Claims, kid: &str, secret: &[u8]) -> String {
    let header = Header { alg: "HS256".into(), typ: Some("JWT".into()), kid: kid.into() };
    let h = B64.encode(serde_json::to_vec(&header).expect("header serialises"));
    let p = B64.encode(serde_json::to_vec(claims).expect("claims serialise"));
    let input = format!("{h}.{p}");
    let sig = B64.encode(mac(secret, input.as_bytes()).finalize().into_bytes());
    format!("{input}.{sig}")
}

/// The `kid` a token names, to choose the verification key.
pub fn key_id(token: &str) -> Result<String, JwtError> {
    let header_b64 = token.split('.').next().ok_or(JwtError::Malformed)?;
    let header: Header = serde_json::from_slice(&B64.decode(header_b64).map_err(|_| JwtError::Malformed)?)
        .map_err(|_| JwtError::Malformed)?;
    if header.alg != "HS256" {
        return Err(JwtError::Algorithm);
    }
    Ok(header.kid)
}

/// Verifies signature, algorithm, expiry (at `now_unix`), audience and issuer.
pub fn verify(token: &str, secret: &[u8], now_unix: i64) -> Result<Claims, JwtError> {
    let parts: Vec<&str> = token.split('.').collect();
    let [h, p, s] = parts.as_slice() else { return Err(JwtError::Malformed) };
    key_id(token)?;
    let sig = B64.decode(s).map_err(|_| JwtError::Malformed)?;
    // verify_slice compares in constant time.
    mac(secret, format!("{h}.{p}").as_bytes()).verify_slice(&sig).map_err(|_| JwtError::Signature)?;
    let claims: Claims =
        serde_json::from_slice(&B64.decode(p).map_err(|_| JwtError::Malformed)?).map_err(|_| JwtError::Malformed)?;
    if claims.aud != AUDIENCE || claims.iss != ISSUER {
        return Err(JwtError::Audience);
    }
    if claims.exp <= now_unix {
        return Err(JwtError::Expired);
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(exp: i64) -> Claims {
        Claims {
            sub: "7".into(),
            wid: 3,
            mode: Mode::Live,
            aud: AUDIENCE.into(),
            iss: ISSUER.into(),
            iat: 100,
            exp,
            jti: "j".into(),
            sid: "s".into(),
        }
    }

    #[test]
    fn a_signed_token_verifies_and_names_its_key() {
        let t = sign(&claims(200), "k1", b"secret");
        assert_eq!(key_id(&t).unwrap(), "k1");
        assert_eq!(verify(&t, b"secret", 150).unwrap(), claims(200));
    }

    #[test]
    fn tampering_expiry_wrong_key_and_algorithms_are_refused() {
        let t = sign(&claims(200), "k1", b"secret");
        assert_eq!(verify(&t, b"other", 150), Err(JwtError::Signature));
        assert_eq!(verify(&t, b"secret", 200), Err(JwtError::Expired));
        // Change the payload, keep the signature.
        let mut c = claims(200);
        c.wid = 4;
        let forged = sign(&c, "k1", b"attacker");
        let mixed = format!("{}.{}", &forged[..forged.rfind('.').unwrap()], t.rsplit('.').next().unwrap());
        assert_eq!(verify(&mixed, b"secret", 150), Err(JwtError::Signature));
        // alg: none.
        let none_header = B64.encode(br#"{"alg":"none","kid":"k1"}"#);
        let parts: Vec<&str> = t.split('.').collect();
        assert_eq!(verify(&format!("{none_header}.{}.", parts[1]), b"secret", 150), Err(JwtError::Algorithm));
        assert_eq!(verify("a.b", b"secret", 150), Err(JwtError::Malformed));
        let mut wrong_aud = claims(200);
        wrong_aud.aud = "mcp".into();
        assert_eq!(verify(&sign(&wrong_aud, "k1", b"secret"), b"secret", 150), Err(JwtError::Audience));
    }
}
