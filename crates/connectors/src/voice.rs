//! The `voice` channel: phone calls. Its `number` (an E.164 number or a
//! SIP user, as the trunk dials it) is the channel's address: inbound
//! calls to it land on this channel and are routed by `call.inbound`
//! triggers. Calls carry speech; messages are not sent on it.

use futures::future::BoxFuture;
use parley_domain::channel::ChannelType;
use parley_domain::validation::{FieldError, LocPart, Parsed, string};
use serde_json::{Map, Value};

use crate::{Connector, Delivered, Delivery};

pub(crate) struct VoiceConnector;

/// What a number may look like: `+` and 8–15 digits, or a SIP user
/// (letters, digits, `.`, `_`, `-`).
pub const NUMBER_PATTERN: &str = r"^(\+[0-9]{8,15}|[A-Za-z0-9._-]{1,64})$";

fn is_number(s: &str) -> bool {
    match s.strip_prefix('+') {
        Some(digits) => (8..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()),
        None => (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
    }
}

impl Connector for VoiceConnector {
    fn kind(&self) -> ChannelType {
        ChannelType::Voice
    }
    fn secret_settings(&self) -> &'static [&'static str] {
        &[]
    }
    fn parse_setting(&self, name: &str, value: Value, at: &[LocPart]) -> Option<Parsed<Value>> {
        Some(match name {
            "number" => string(1, 65)(value, at).and_then(|n| {
                if is_number(&n) {
                    Ok(Value::String(n))
                } else {
                    Err(vec![FieldError::new(
                        at.to_vec(),
                        "value_error.voice_number",
                        "not a number in E.164 form (+14155550100) nor a SIP user (letters, digits, . _ -)",
                    )])
                }
            }),
            _ => return None,
        })
    }
    fn settings_schema(&self) -> utoipa::openapi::Object {
        use parley_domain::schema::{nullable, string};
        parley_domain::schema::closed_object(vec![(
            "number",
            nullable(string(1, 65).pattern(Some(NUMBER_PATTERN)).build()).into(),
            "The number (E.164) or SIP user that inbound calls dial to reach this channel; unique among live voice channels.",
        )])
    }
    fn webhook_paths(&self) -> &'static [(&'static str, &'static str)] {
        &[("Twilio: A call comes in (HTTP POST)", "/hooks/twilio/voice")]
    }
    fn signs_traffic(&self) -> bool {
        false
    }
    fn public_prefix(&self) -> &'static str {
        "voice"
    }
    fn address(&self, config: &Map<String, Value>) -> Option<String> {
        config.get("number").and_then(Value::as_str).map(str::to_owned)
    }
    fn cannot_send(&self, _config: &Map<String, Value>) -> Option<String> {
        Some("a voice channel carries calls; messages cannot be sent on it".to_owned())
    }
    fn deliver<'a>(&'a self, _: Delivery<'a>) -> BoxFuture<'a, Delivered> {
        Box::pin(async { Delivered::Failed { error: "a voice channel carries calls, not messages".to_owned() } })
    }
}

#[cfg(test)]
mod tests {
    use super::is_number;

    #[test]
    fn numbers_are_e164_or_sip_users() {
        for ok in ["+14155550100", "support", "sales.eu", "+4930123456"] {
            assert!(is_number(ok), "{ok}");
        }
        for bad in ["+1415", "14155550100 ", "+1-415-555", "a b", "", "sip:x@y"] {
            assert!(!is_number(bad), "{bad}");
        }
    }
}
