//! The `Idempotency-Key` header value.

use sha2::{Digest, Sha256};

/// 1–255 printable ASCII characters; surrounding RFC 8941 quotes are stripped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn parse(raw: &str) -> Option<Self> {
        let trimmed = raw.trim();
        // `""` is not an empty key in quotes but the two characters themselves.
        let unquoted =
            trimmed.strip_prefix('"').and_then(|s| s.strip_suffix('"')).filter(|s| !s.is_empty()).unwrap_or(trimmed);
        let ok = (1..=255).contains(&unquoted.len()) && unquoted.bytes().all(|b| (0x20..=0x7e).contains(&b));
        ok.then(|| Self(unquoted.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What makes two requests "the same": method, path and canonical JSON body.
pub fn fingerprint(method: &str, path: &str, canonical_body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(method.as_bytes());
    h.update(b" ");
    h.update(path.as_bytes());
    h.update(b"\n");
    h.update(canonical_body);
    hex::encode(h.finalize())
}

/// JSON with object keys sorted at every level and no whitespace, so that
/// equal documents give equal bytes whatever order their keys were sent in.
pub fn canonical_json(v: &serde_json::Value) -> Vec<u8> {
    use serde_json::Value;
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_vec(&sorted(v)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_printable_ascii_and_unquoted() {
        assert_eq!(IdempotencyKey::parse("\"abc\"").unwrap().as_str(), "abc");
        assert_eq!(IdempotencyKey::parse("order 42").unwrap().as_str(), "order 42");
        assert!(IdempotencyKey::parse("").is_none());
        // `""` is the two characters, not an empty key in quotes.
        assert_eq!(IdempotencyKey::parse("\"\"").unwrap().as_str(), "\"\"");
        assert!(IdempotencyKey::parse(&"x".repeat(256)).is_none());
        assert!(IdempotencyKey::parse("caf\u{e9}").is_none());
    }

    #[test]
    fn canonical_json_ignores_key_order() {
        let a = serde_json::json!({"b": 1, "a": {"y": [1, {"d": 0, "c": 1}], "x": null}});
        let b: serde_json::Value = serde_json::from_str(r#"{"a":{"x":null,"y":[1,{"c":1,"d":0}]},"b":1}"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_json(&a), br#"{"a":{"x":null,"y":[1,{"c":1,"d":0}]},"b":1}"#.to_vec());
    }
}
