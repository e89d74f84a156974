//! Twilio's request signature (`X-Twilio-Signature`), which signs the
//! webhooks Twilio sends: voice calls (the `twilio` telephony provider) and
//! messages and their status (the `sms` and `whatsapp` channels).

use base64::Engine as _;
use hmac::{Hmac, Mac};

/// `X-Twilio-Signature` for a request to `url` with form `params`: base64
/// of HMAC-SHA1, keyed by the auth token, over the URL followed by each
/// parameter's name and value, sorted by name (then value).
pub fn signature(auth_token: &str, url: &str, params: &[(String, String)]) -> String {
    base64::engine::general_purpose::STANDARD.encode(signing_mac(auth_token, url, params).finalize().into_bytes())
}

/// Whether `given` is the signature of that request (in constant time).
pub fn signature_valid(auth_token: &str, url: &str, params: &[(String, String)], given: &str) -> bool {
    let Ok(given) = base64::engine::general_purpose::STANDARD.decode(given.trim()) else {
        return false;
    };
    signing_mac(auth_token, url, params).verify_slice(&given).is_ok()
}

fn signing_mac(auth_token: &str, url: &str, params: &[(String, String)]) -> Hmac<sha1::Sha1> {
    let mut sorted: Vec<&(String, String)> = params.iter().collect();
    sorted.sort();
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(auth_token.as_bytes()).expect("HMAC takes any key");
    mac.update(url.as_bytes());
    for (name, value) in sorted {
        mac.update(name.as_bytes());
        mac.update(value.as_bytes());
    }
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_signature_is_twilios_documented_example() {
        // Twilio's security documentation: this URL, these parameters and
        // the token `12345` sign as `0/KCTR6DLpKmkAf8muzZqo1nDgQ=`.
        let url = "https://mycompany.com/myapp.php?foo=1&bar=2";
        let params = form(&[
            ("CallSid", "CA1234567890ABCDE"),
            ("Caller", "+12349013030"),
            ("Digits", "1234"),
            ("From", "+12349013030"),
            ("To", "+18005551212"),
        ]);
        assert_eq!(signature("12345", url, &params), "0/KCTR6DLpKmkAf8muzZqo1nDgQ=");
        assert!(signature_valid("12345", url, &params, "0/KCTR6DLpKmkAf8muzZqo1nDgQ="));
        assert!(!signature_valid("12346", url, &params, "0/KCTR6DLpKmkAf8muzZqo1nDgQ="));
        assert!(!signature_valid("12345", "https://mycompany.com/myapp.php", &params, "0/KCTR6DLpKmkAf8muzZqo1nDgQ="));
        assert!(!signature_valid("12345", url, &params, "not base64!"));
    }
}

/// The token that names an inbound call's media stream in the TwiML Parley
/// answers: HMAC-SHA256 of the CallSid under the auth token (hex, 160
/// bits), so a repeat of the voice webhook gets the same TwiML on any
/// instance without it being stored, and nobody without the token can
/// derive it.
pub fn stream_token(auth_token: &str, call_sid: &str) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(auth_token.as_bytes()).expect("HMAC takes any key length");
    mac.update(b"parley-stream:");
    mac.update(call_sid.as_bytes());
    mac.finalize().into_bytes().iter().take(20).map(|b| format!("{b:02x}")).collect()
}
