//! Every connector passes the conformance kit.

use parley_connectors::conformance::{self, Fixture, Recorded, Reply, Request, TestChannel};
use parley_connectors::{Connector, Inbound, StatusReport, connector};
use parley_domain::channel::ChannelType;
use parley_domain::conversation::Message;
use serde_json::{Map, Value, json};

/// The api channel: your system, Standard Webhooks both ways.
struct Api;

fn signed(channel: &TestChannel, id: &str, now_s: i64, body: Vec<u8>) -> Request {
    let secret = channel.signing.as_ref().expect("api channels sign their traffic");
    let mut headers = http::HeaderMap::new();
    headers.insert("webhook-id", id.parse().unwrap());
    headers.insert("webhook-timestamp", now_s.to_string().parse().unwrap());
    headers.insert("webhook-signature", secret.sign(id, now_s, &body).parse().unwrap());
    Request { headers, body }
}

impl Fixture for Api {
    fn connector(&self) -> &'static dyn Connector {
        connector(ChannelType::Api).unwrap()
    }
    fn channel(&self, provider_url: &str) -> TestChannel {
        let config = Map::from_iter([("url".to_owned(), Value::String(format!("{provider_url}/parley/inbox")))]);
        let secrets = Map::from_iter([("authorization".to_owned(), Value::String("Bearer s3cret".to_owned()))]);
        TestChannel::new(self.connector(), config, secrets)
    }
    fn accepted(&self) -> Option<(Reply, Option<String>)> {
        Some((Reply::new(200, r#"{"external_id": "ext-1"}"#), Some("ext-1".to_owned())))
    }
    fn check_sent(&self, sent: &Recorded, channel: &TestChannel, message: &Message, to: &str) -> Result<(), String> {
        let header = |name: &str| sent.headers.get(name).and_then(|v| v.to_str().ok());
        if (sent.method.as_str(), sent.path.as_str()) != ("POST", "/parley/inbox") {
            return Err(format!("sent {} {}, not POST /parley/inbox", sent.method, sent.path));
        }
        if header("authorization") != Some("Bearer s3cret") {
            return Err("the authorization setting was not sent".into());
        }
        let now = parley_domain::Timestamp::now().unix_micros() / 1_000_000;
        parley_events::signing::verify(
            channel.signing.as_ref().unwrap(),
            header("webhook-id"),
            header("webhook-timestamp"),
            header("webhook-signature"),
            &sent.body,
            now,
            60,
        )
        .map_err(|e| format!("the signature does not verify: {e}"))?;
        if header("webhook-id") != Some(&format!("msg_{}", message.id)) {
            return Err("the webhook-id is not the message's, so receivers cannot deduplicate".into());
        }
        let body: Value = serde_json::from_slice(&sent.body).map_err(|e| e.to_string())?;
        let expected = json!({"id": message.id, "conversation_id": message.conversation_id,
            "channel_id": channel.channel.id, "to": to, "text": message.text});
        for (k, v) in expected.as_object().unwrap() {
            if &body["data"][k] != v {
                return Err(format!("data.{k} is {}, not {v}", body["data"][k]));
            }
        }
        if body["type"] != "message" || body["livemode"] != true {
            return Err(format!("type and livemode wrong in {body}"));
        }
        Ok(())
    }
    fn inbound_message(&self, channel: &TestChannel, message: &Inbound, now_s: i64) -> Option<Request> {
        let body = json!({"from": message.from, "text": message.text, "external_id": message.external_id,
            "contact": {"display_name": message.contact.as_ref().and_then(|c| c.display_name.clone())}});
        Some(signed(channel, &format!("in_{}", message.external_id), now_s, serde_json::to_vec(&body).unwrap()))
    }
    fn status_callback(&self, channel: &TestChannel, report: &StatusReport, now_s: i64) -> Option<Request> {
        let body = serde_json::to_vec(report).unwrap();
        Some(signed(channel, &format!("st_{}_{}", report.external_id, report.status), now_s, body))
    }
}

/// The webchat widget: messages are shown over its socket; no webhooks.
struct Webchat;

impl Fixture for Webchat {
    fn connector(&self) -> &'static dyn Connector {
        connector(ChannelType::Webchat).unwrap()
    }
    fn channel(&self, _: &str) -> TestChannel {
        TestChannel::new(self.connector(), Map::new(), Map::new())
    }
    fn accepted(&self) -> Option<(Reply, Option<String>)> {
        None
    }
    fn check_sent(&self, _: &Recorded, _: &TestChannel, _: &Message, _: &str) -> Result<(), String> {
        Err("the webchat connector never calls out".into())
    }
    fn inbound_message(&self, _: &TestChannel, _: &Inbound, _: i64) -> Option<Request> {
        None
    }
    fn status_callback(&self, _: &TestChannel, _: &StatusReport, _: i64) -> Option<Request> {
        None
    }
}

#[tokio::test]
async fn the_api_connector_conforms() {
    conformance::check(&Api).await;
}

#[tokio::test]
async fn the_webchat_connector_conforms() {
    conformance::check(&Webchat).await;
}

/// The kit catches a connector that breaks a rule: one that accepts any signature.
#[tokio::test]
#[should_panic(expected = "a tampered body is refused")]
async fn the_kit_fails_a_connector_that_skips_the_signature_check() {
    struct Lax;
    impl Connector for Lax {
        fn kind(&self) -> ChannelType {
            ChannelType::Api
        }
        fn secret_settings(&self) -> &'static [&'static str] {
            &[]
        }
        fn parse_setting(
            &self,
            n: &str,
            v: Value,
            at: &[parley_domain::validation::LocPart],
        ) -> Option<parley_domain::validation::Parsed<Value>> {
            Api.connector().parse_setting(n, v, at)
        }
        fn settings_schema(&self) -> utoipa::openapi::Object {
            Api.connector().settings_schema()
        }
        fn signs_traffic(&self) -> bool {
            true
        }
        fn public_prefix(&self) -> &'static str {
            "api"
        }
        fn deliver<'a>(
            &'a self,
            d: parley_connectors::Delivery<'a>,
        ) -> futures::future::BoxFuture<'a, parley_connectors::Delivered> {
            Api.connector().deliver(d)
        }
        fn hooks(&self) -> &'static [parley_connectors::Hook] {
            Api.connector().hooks()
        }
        fn authenticate(
            &self,
            _: &parley_connectors::InboundRequest<'_>,
            _: &parley_connectors::Credentials<'_>,
            _: i64,
        ) -> Result<(), parley_connectors::Refused> {
            Ok(())
        }
        fn read(
            &self,
            hook: parley_connectors::Hook,
            req: &parley_connectors::InboundRequest<'_>,
        ) -> parley_domain::validation::Parsed<parley_connectors::Incoming> {
            Api.connector().read(hook, req)
        }
    }
    static LAX: Lax = Lax;
    struct LaxApi;
    impl Fixture for LaxApi {
        fn connector(&self) -> &'static dyn Connector {
            &LAX
        }
        fn channel(&self, url: &str) -> TestChannel {
            Api.channel(url)
        }
        fn accepted(&self) -> Option<(Reply, Option<String>)> {
            Api.accepted()
        }
        fn check_sent(&self, s: &Recorded, c: &TestChannel, m: &Message, to: &str) -> Result<(), String> {
            Api.check_sent(s, c, m, to)
        }
        fn inbound_message(&self, c: &TestChannel, m: &Inbound, now: i64) -> Option<Request> {
            Api.inbound_message(c, m, now)
        }
        fn status_callback(&self, c: &TestChannel, r: &StatusReport, now: i64) -> Option<Request> {
            Api.status_callback(c, r, now)
        }
    }
    conformance::checks_signatures(&LaxApi);
}
