//! The `api` channel: your own system, over signed HTTP both ways. Parley
//! POSTs outbound messages to the channel's `url`, signed with its `whsec_`
//! secret (Standard Webhooks); your system signs inbound messages and
//! delivery reports with the same secret.

use futures::future::BoxFuture;
use parley_domain::channel::ChannelType;
use parley_domain::validation::{FieldError, LocPart, Parsed, header_value, string};
use parley_events::signing::SignedHeaders;
use serde_json::{Map, Value};

use crate::{
    Connector, Credentials, Delivered, Delivery, Hook, Inbound, InboundRequest, Incoming, Refused, StatusReport,
};

/// How far an inbound request's `webhook-timestamp` may be from now.
pub const INBOUND_TOLERANCE_S: i64 = 5 * 60;

/// Bytes of an api channel's reply read for its `external_id`.
const REPLY_LIMIT: usize = 16 * 1024;

pub(crate) struct ApiConnector;

impl Connector for ApiConnector {
    fn kind(&self) -> ChannelType {
        ChannelType::Api
    }
    fn secret_settings(&self) -> &'static [&'static str] {
        &["authorization"]
    }
    fn parse_setting(&self, name: &str, value: Value, at: &[LocPart]) -> Option<Parsed<Value>> {
        Some(match name {
            // Where outbound messages are POSTed; without it the channel only receives.
            "url" => string(1, 2048)(value, at).and_then(|u| {
                parley_events::ssrf::parse_target(&u)
                    .map(|u| Value::String(u.to_string()))
                    .map_err(|e| vec![FieldError::new(at.to_vec(), "value_error.url", e.to_string())])
            }),
            // Sent as the Authorization header of outbound requests.
            "authorization" => header_value(1, 1000)(value, at).map(Value::String),
            _ => return None,
        })
    }
    fn settings_schema(&self) -> utoipa::openapi::Object {
        use parley_domain::schema::{nullable, string};
        parley_domain::schema::closed_object(vec![
            (
                "url",
                parley_domain::schema::nullable_url().into(),
                "Where outbound messages are POSTed (http or https, no credentials); without it the channel only receives.",
            ),
            (
                "authorization",
                nullable(string(1, 1000).pattern(Some("^[ -~]+$")).build()).into(),
                "Secret, write-only: sent as the Authorization header of outbound requests (printable ASCII).",
            ),
        ])
    }
    fn webhook_paths(&self) -> &'static [(&'static str, &'static str)] {
        &[("Inbound messages (POST, signed with the channel's secret)", "/api/v1/channels/{id}/inbound")]
    }
    fn signs_traffic(&self) -> bool {
        true
    }
    fn public_prefix(&self) -> &'static str {
        "api"
    }
    fn outbound_url_settings(&self) -> &'static [&'static str] {
        &["url"]
    }
    fn cannot_send(&self, config: &serde_json::Map<String, Value>) -> Option<String> {
        (!config.contains_key("url")).then(|| "it has no `url` to send to (set config.url)".to_owned())
    }
    fn deliver<'a>(&'a self, d: Delivery<'a>) -> BoxFuture<'a, Delivered> {
        Box::pin(deliver(d))
    }
    fn hooks(&self) -> &'static [Hook] {
        &[Hook::Message, Hook::Status]
    }
    /// Standard Webhooks: `webhook-id`, a `webhook-timestamp` within five
    /// minutes of now, and a `webhook-signature` by the channel's secret.
    fn authenticate(&self, req: &InboundRequest<'_>, creds: &Credentials<'_>, now_s: i64) -> Result<(), Refused> {
        let refused = |e: parley_events::signing::VerifyError| Refused(format!("Invalid signature: {e}"));
        let header = |name: &str| req.headers.get(name).and_then(|v| v.to_str().ok());
        let signed = SignedHeaders::check(
            header("webhook-id"),
            header("webhook-timestamp"),
            header("webhook-signature"),
            now_s,
            INBOUND_TOLERANCE_S,
        )
        .map_err(refused)?;
        match creds.signing {
            Some(secret) if signed.matches(secret, req.body) => Ok(()),
            _ => Err(refused(parley_events::signing::VerifyError::NoMatch)),
        }
    }
    fn read(&self, hook: Hook, req: &InboundRequest<'_>, _config: &Map<String, Value>) -> Parsed<Incoming> {
        let value: Value = serde_json::from_slice(req.body).map_err(|_| vec![FieldError::invalid_json()])?;
        match hook {
            Hook::Message => Inbound::parse(value).map(Incoming::Message),
            Hook::Status => StatusReport::parse(value).map(Incoming::Status),
        }
    }
}

/// POSTs the message to the channel's `url`, signed with its secret. The
/// reply may name the message: `{"external_id": "…"}`. Timeouts, 408, 425,
/// 429 and 5xx are retried; any other 4xx fails the message.
async fn deliver(d: Delivery<'_>) -> Delivered {
    let Some(Value::String(url)) = d.channel.config.get("url") else {
        return Delivered::Failed { error: "the channel has no url".to_owned() };
    };
    let Some(signing) = d.signing else {
        return Delivered::Failed { error: "the channel has no signing secret".to_owned() };
    };
    let m = d.message;
    let body = serde_json::json!({
        "type": "message",
        "livemode": d.livemode,
        "data": {
            "id": m.id,
            "conversation_id": m.conversation_id,
            "channel_id": d.channel.id,
            "to": d.to,
            "author": m.author,
            "text": m.text,
            "attachments": m.attachments,
            "created_at": m.created_at,
        },
    });
    let body = match serde_json::to_vec(&body) {
        Ok(body) => body,
        Err(e) => return Delivered::Failed { error: format!("the message cannot be serialised: {e}") },
    };
    let post = parley_events::post::SignedPost {
        url,
        secrets: std::slice::from_ref(signing),
        id: &format!("msg_{}", m.id),
        body,
        authorization: d.secrets.get("authorization").and_then(Value::as_str),
        headers: &[],
        allow_private: d.allow_private,
        read_limit: REPLY_LIMIT,
    };
    match parley_events::post::send(d.client, d.timeout, post).await {
        Err(error) => Delivered::Retry { error, after: None },
        Ok(reply) if reply.succeeded() => {
            let external_id =
                serde_json::from_str::<Value>(&reply.body).ok().and_then(|v| match v.get("external_id") {
                    Some(Value::String(s)) if !s.is_empty() && s.len() <= 255 => Some(s.clone()),
                    Some(Value::Number(n)) => Some(n.to_string()),
                    _ => None,
                });
            Delivered::Sent { external_id }
        }
        Ok(reply) => {
            let mut error = reply.error().unwrap_or_default();
            // The receiver's own words, when it gave some.
            let said: String = reply.body.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(200).collect();
            if !said.is_empty() {
                error = format!("{error}: {said}");
            }
            match reply.status {
                408 | 425 | 429 | 500..=599 => Delivered::Retry { error, after: reply.retry_after },
                _ => Delivered::Failed { error },
            }
        }
    }
}
