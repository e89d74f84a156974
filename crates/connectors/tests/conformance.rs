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
    Request {
        url: format!("{}/api/v1/channels/{}/inbound", conformance::PUBLIC_URL, channel.channel.id),
        headers,
        body,
    }
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

/// SMS and WhatsApp: Twilio's Messages API and its signed webhooks.
struct Twilio(ChannelType);

/// `X-Twilio-Signature` as Twilio documents it (HMAC-SHA1 of the URL and
/// the sorted parameters, base64), written here apart from Parley's own.
fn twilio_signature(token: &str, url: &str, params: &[(&str, String)]) -> String {
    use base64::Engine as _;
    use hmac::Mac;
    let mut sorted: Vec<_> = params.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0).then(a.1.cmp(&b.1)));
    let mut data = url.to_owned();
    for (k, v) in sorted {
        data.push_str(k);
        data.push_str(v);
    }
    let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(token.as_bytes()).unwrap();
    mac.update(data.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

impl Twilio {
    fn wire(&self, address: &str) -> String {
        if self.0 == ChannelType::Whatsapp { format!("whatsapp:{address}") } else { address.to_owned() }
    }

    /// A webhook to the channel's `hook`, signed with its auth token.
    fn webhook(&self, channel: &TestChannel, hook: &str, params: Vec<(&str, String)>) -> Request {
        let url = format!("{}/hooks/twilio/{}/{hook}", conformance::PUBLIC_URL, channel.channel.address);
        let token = channel.secrets["auth_token"].as_str().unwrap();
        let mut headers = http::HeaderMap::new();
        headers.insert("x-twilio-signature", twilio_signature(token, &url, &params).parse().unwrap());
        headers.insert("content-type", "application/x-www-form-urlencoded".parse().unwrap());
        let body = serde_urlencoded::to_string(&params).unwrap().into_bytes();
        Request { url, headers, body }
    }
}

impl Fixture for Twilio {
    fn connector(&self) -> &'static dyn Connector {
        connector(self.0).unwrap()
    }
    fn channel(&self, provider_url: &str) -> TestChannel {
        let sid = format!("AC{:032x}", rand::random::<u128>());
        let config = Map::from_iter([
            ("account_sid".to_owned(), json!(sid)),
            ("from".to_owned(), json!("+14155550100")),
            ("base_url".to_owned(), json!(provider_url)),
        ]);
        let secrets = Map::from_iter([("auth_token".to_owned(), json!(format!("{:032x}", rand::random::<u128>())))]);
        TestChannel::new(self.connector(), config, secrets)
    }
    fn accepted(&self) -> Option<(Reply, Option<String>)> {
        let sid = "SM0123456789abcdef0123456789abcdef";
        Some((Reply::new(201, json!({"sid": sid, "status": "queued"}).to_string()), Some(sid.to_owned())))
    }
    fn check_sent(&self, sent: &Recorded, channel: &TestChannel, message: &Message, to: &str) -> Result<(), String> {
        use base64::Engine as _;
        let config = &channel.channel.config;
        let sid = config["account_sid"].as_str().unwrap();
        let path = format!("/2010-04-01/Accounts/{sid}/Messages.json");
        if (sent.method.as_str(), sent.path.as_str()) != ("POST", path.as_str()) {
            return Err(format!("sent {} {}, not POST {path}", sent.method, sent.path));
        }
        let token = channel.secrets["auth_token"].as_str().unwrap();
        let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{sid}:{token}")));
        if sent.headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(basic.as_str()) {
            return Err("not basic auth with the account SID and auth token".into());
        }
        let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&sent.body).map_err(|e| e.to_string())?;
        let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let callback = format!("{}/hooks/twilio/{}/status", conformance::PUBLIC_URL, channel.channel.address);
        let expected = [
            ("To", self.wire(to)),
            ("From", self.wire("+14155550100")),
            ("Body", message.text.clone()),
            ("StatusCallback", callback),
        ];
        for (k, v) in expected {
            if get(k).as_deref() != Some(v.as_str()) {
                return Err(format!("{k} is {:?}, not {v:?}", get(k)));
            }
        }
        Ok(())
    }
    fn inbound_message(&self, channel: &TestChannel, message: &Inbound, _: i64) -> Option<Request> {
        let config = &channel.channel.config;
        let mut params = vec![
            ("MessageSid", message.external_id.clone()),
            ("AccountSid", config["account_sid"].as_str().unwrap().to_owned()),
            ("From", self.wire(&message.from)),
            ("To", self.wire("+14155550100")),
            ("Body", message.text.clone()),
            ("NumMedia", "0".to_owned()),
        ];
        if let Some(name) = message.contact.as_ref().and_then(|c| c.display_name.clone()) {
            params.push(("ProfileName", name));
        }
        Some(self.webhook(channel, "inbound", params))
    }
    fn status_callback(&self, channel: &TestChannel, report: &StatusReport, _: i64) -> Option<Request> {
        let mut params = vec![
            ("MessageSid", report.external_id.clone()),
            ("AccountSid", channel.channel.config["account_sid"].as_str().unwrap().to_owned()),
            ("MessageStatus", report.status.to_string()),
        ];
        if let Some(error) = &report.error {
            params.push(("ErrorMessage", error.clone()));
        }
        Some(self.webhook(channel, "status", params))
    }
}

/// Telegram: the Bot API's JSON methods and its secret-token webhook.
struct Telegram;

impl Fixture for Telegram {
    fn connector(&self) -> &'static dyn Connector {
        connector(ChannelType::Telegram).unwrap()
    }
    fn channel(&self, provider_url: &str) -> TestChannel {
        let token = format!("{}:{:032x}", rand::random::<u32>(), rand::random::<u128>());
        let config = Map::from_iter([("base_url".to_owned(), json!(provider_url))]);
        let secrets = Map::from_iter([("bot_token".to_owned(), json!(token))]);
        TestChannel::new(self.connector(), config, secrets)
    }
    fn accepted(&self) -> Option<(Reply, Option<String>)> {
        let result =
            json!({"ok": true, "result": {"message_id": 5, "date": 1, "chat": {"id": 4242, "type": "private"}}});
        Some((Reply::new(200, result.to_string()), Some("4242:5".to_owned())))
    }
    fn check_sent(&self, sent: &Recorded, channel: &TestChannel, message: &Message, to: &str) -> Result<(), String> {
        let token = channel.secrets["bot_token"].as_str().unwrap();
        let path = format!("/bot{token}/sendMessage");
        if (sent.method.as_str(), sent.path.as_str()) != ("POST", path.as_str()) {
            return Err(format!("sent {} {}, not POST /bot<token>/sendMessage", sent.method, sent.path));
        }
        let body: Value = serde_json::from_slice(&sent.body).map_err(|e| e.to_string())?;
        // The sample's `<markup>` and `&` must arrive escaped for parse_mode HTML.
        let text = message.text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
        let expected =
            json!({"chat_id": to, "text": text, "parse_mode": "HTML", "link_preview_options": {"is_disabled": true}});
        if body != expected { Err(format!("sent {body}, not {expected}")) } else { Ok(()) }
    }
    fn inbound_message(&self, channel: &TestChannel, message: &Inbound, _: i64) -> Option<Request> {
        let token = channel.secrets["bot_token"].as_str().unwrap();
        // Telegram numbers messages per chat; the kit names them p-1, p-2…
        let message_id: i64 = message.external_id.trim_start_matches("p-").parse().unwrap();
        let name = message.contact.as_ref().and_then(|c| c.display_name.clone()).unwrap_or_default();
        let from: i64 = message.from.parse().unwrap();
        let update = json!({"update_id": 9000 + message_id, "message": {"message_id": message_id, "date": 1,
            "from": {"id": from, "is_bot": false, "first_name": name}, "chat": {"id": from, "type": "private"},
            "text": message.text}});
        let mut headers = http::HeaderMap::new();
        headers.insert(
            "x-telegram-bot-api-secret-token",
            parley_connectors::telegram_webhook_secret(token).parse().unwrap(),
        );
        headers.insert("content-type", "application/json".parse().unwrap());
        let url = format!("{}/hooks/telegram/{}", conformance::PUBLIC_URL, channel.channel.address);
        Some(Request { url, headers, body: update.to_string().into_bytes() })
    }
    fn status_callback(&self, _: &TestChannel, _: &StatusReport, _: i64) -> Option<Request> {
        // The Bot API reports no delivery: a sent message is as far as it goes.
        None
    }
    fn signs_bodies(&self) -> bool {
        false
    }
}

/// Email: SMTP out (not HTTP: the kit checks its SSRF guard; sending is
/// tested against a real SMTP server), raw MIME in with the inbound secret.
struct Email;

impl Fixture for Email {
    fn connector(&self) -> &'static dyn Connector {
        connector(ChannelType::Email).unwrap()
    }
    fn channel(&self, provider_url: &str) -> TestChannel {
        // The stand-in's host and port, as an SMTP server.
        let url = reqwest::Url::parse(provider_url).unwrap();
        let config = Map::from_iter([
            ("address".to_owned(), json!("support@shop.example")),
            ("smtp_host".to_owned(), json!(url.host_str().unwrap())),
            ("smtp_port".to_owned(), json!(url.port().unwrap())),
            ("smtp_security".to_owned(), json!("none")),
        ]);
        let secrets =
            Map::from_iter([("inbound_secret".to_owned(), json!(format!("{:032x}", rand::random::<u128>())))]);
        TestChannel::new(self.connector(), config, secrets)
    }
    fn accepted(&self) -> Option<(Reply, Option<String>)> {
        Some((Reply::new(250, ""), None))
    }
    fn check_sent(&self, _: &Recorded, _: &TestChannel, _: &Message, _: &str) -> Result<(), String> {
        Ok(())
    }
    fn inbound_message(&self, channel: &TestChannel, message: &Inbound, _: i64) -> Option<Request> {
        let secret = channel.secrets["inbound_secret"].as_str().unwrap();
        let name = message.contact.as_ref().and_then(|c| c.display_name.clone()).unwrap_or_default();
        // The kit's sender is a bare id; as an email address it is <id>@customer.example.
        let raw = format!(
            "From: {name} <{}@customer.example>\r\nTo: support@shop.example\r\nSubject: Hello\r\nMessage-ID: <{}@customer.example>\r\n\r\n{}\r\n",
            message.from, message.external_id, message.text
        );
        let mut headers = http::HeaderMap::new();
        headers.insert("authorization", format!("Bearer {secret}").parse().unwrap());
        headers.insert("content-type", "message/rfc822".parse().unwrap());
        let url = format!("{}/hooks/email/{}", conformance::PUBLIC_URL, channel.channel.address);
        Some(Request { url, headers, body: raw.into_bytes() })
    }
    fn status_callback(&self, _: &TestChannel, _: &StatusReport, _: i64) -> Option<Request> {
        // Bounces arrive as messages (DSNs), tested with the MIME corpus.
        None
    }
    fn signs_bodies(&self) -> bool {
        false
    }
    fn over_http(&self) -> bool {
        false
    }
    fn address_of(&self, sender: &str) -> String {
        format!("{sender}@customer.example")
    }
}

#[tokio::test]
async fn the_email_connector_conforms() {
    conformance::check(&Email).await;
}

#[tokio::test]
async fn the_telegram_connector_conforms() {
    conformance::check(&Telegram).await;
}

#[tokio::test]
async fn the_sms_connector_conforms() {
    conformance::check(&Twilio(ChannelType::Sms)).await;
}

#[tokio::test]
async fn the_whatsapp_connector_conforms() {
    conformance::check(&Twilio(ChannelType::Whatsapp)).await;
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
            config: &serde_json::Map<String, serde_json::Value>,
        ) -> parley_domain::validation::Parsed<parley_connectors::Incoming> {
            Api.connector().read(hook, req, config)
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
