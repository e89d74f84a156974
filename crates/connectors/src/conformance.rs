//! The conformance kit: what every connector must do, checked against a
//! stand-in for its provider on 127.0.0.1. A connector's test implements
//! [`Fixture`] (its provider's wire format) and calls [`check`]:
//!
//! - **send**: an accepted send is `Sent` with the provider's id, and the
//!   request the provider saw is checked by the fixture (format, auth);
//! - **retry and failure**: 429 (honouring `Retry-After`), 5xx and an
//!   unreachable provider are retried, other 4xx fail the message;
//! - **SSRF**: with private addresses not allowed, nothing reaches a
//!   provider on loopback;
//! - **signature check**: a request authenticated with the channel's
//!   credentials passes; a tampered body, another channel's credentials or
//!   missing headers are refused;
//! - **inbound dedupe**: a repeated request names the same provider id, a
//!   different message a different one;
//! - **status callback**: each reported status reads back as sent.
//!
//! A connector with no inbound webhooks must refuse every request.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use parley_domain::Timestamp;
use parley_domain::channel::{Channel, ChannelStatus};
use parley_domain::conversation::{Author, AuthorType, Direction, Message, MessageStatus};
use parley_events::signing::WebhookSecret;
use serde_json::{Map, Value};

use crate::{
    Connector, Credentials, Delivered, Delivery, Hook, Inbound, InboundContact, InboundRequest, Incoming, StatusReport,
};

/// One request the provider stand-in received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Path and query.
    pub path: String,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

/// How the provider stand-in answers.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
}

impl Reply {
    pub fn new(status: u16, body: impl Into<String>) -> Self {
        Self { status, headers: vec![("content-type", "application/json".to_owned())], body: body.into() }
    }
}

/// A provider stand-in on 127.0.0.1 that records what it receives.
pub struct Provider {
    pub url: String,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    reply: Arc<Mutex<Reply>>,
    task: tokio::task::JoinHandle<()>,
}

impl Provider {
    pub async fn start() -> Provider {
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let reply = Arc::new(Mutex::new(Reply::new(200, "{}")));
        let (r, a) = (recorded.clone(), reply.clone());
        let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
            let (recorded, reply) = (r.clone(), a.clone());
            async move {
                let (parts, body) = req.into_parts();
                let body = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default().to_vec();
                let path = parts.uri.path_and_query().map_or("/".to_owned(), |p| p.to_string());
                recorded.lock().unwrap().push(Recorded {
                    method: parts.method.to_string(),
                    path,
                    headers: parts.headers,
                    body,
                });
                let reply = reply.lock().unwrap().clone();
                let mut response = axum::response::Response::builder().status(reply.status);
                for (name, value) in reply.headers {
                    response = response.header(name, value);
                }
                response.body(axum::body::Body::from(reply.body)).unwrap()
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Provider { url, recorded, reply, task }
    }

    /// Answers every following request with `reply`.
    pub fn answer(&self, reply: Reply) {
        *self.reply.lock().unwrap() = reply;
    }

    /// The requests received so far, forgetting them.
    pub fn take(&self) -> Vec<Recorded> {
        std::mem::take(&mut self.recorded.lock().unwrap())
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A channel of the connector's type, with its opened credentials.
pub struct TestChannel {
    pub channel: Channel,
    pub secrets: Map<String, Value>,
    pub signing: Option<WebhookSecret>,
}

impl TestChannel {
    /// A channel of `connector`'s type with public settings `config`.
    pub fn new(connector: &dyn Connector, config: Map<String, Value>, secrets: Map<String, Value>) -> Self {
        let now = Timestamp::now();
        TestChannel {
            channel: Channel {
                id: 7,
                kind: connector.kind(),
                name: "Conformance".to_owned(),
                address: format!("{}_conformance", connector.public_prefix()),
                public_id: format!("{}_conformance", connector.public_prefix()),
                status: ChannelStatus::Active,
                status_reason: None,
                config,
                secrets_set: secrets.keys().cloned().collect(),
                created_at: now,
                updated_at: now,
            },
            secrets,
            signing: connector.signs_traffic().then(WebhookSecret::generate),
        }
    }

    pub fn credentials(&self) -> Credentials<'_> {
        Credentials { secrets: &self.secrets, signing: self.signing.as_ref() }
    }
}

/// An inbound request a fixture built, as its provider would send it.
#[derive(Debug, Clone)]
pub struct Request {
    /// The URL the provider requested.
    pub url: String,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl Request {
    pub fn inbound(&self) -> InboundRequest<'_> {
        InboundRequest { url: &self.url, headers: &self.headers, body: &self.body }
    }
}

/// Where the kit's server is reached from outside, for hook URLs.
pub const PUBLIC_URL: &str = "https://parley.example.com";

/// A connector's provider, as its test describes it.
pub trait Fixture: Sync {
    fn connector(&self) -> &'static dyn Connector;
    /// A channel whose provider is at `provider_url`, with working credentials.
    fn channel(&self, provider_url: &str) -> TestChannel;
    /// How the provider answers an accepted send, and the id that answer
    /// names; `None` for a connector that never calls out.
    fn accepted(&self) -> Option<(Reply, Option<String>)>;
    /// Checks the request that sent `message` to `to`: its format and its
    /// authentication with `channel`'s credentials.
    fn check_sent(&self, sent: &Recorded, channel: &TestChannel, message: &Message, to: &str) -> Result<(), String>;
    /// A request carrying `message`, as the provider sends it at `now_s`;
    /// `None` when the connector takes no inbound messages.
    fn inbound_message(&self, channel: &TestChannel, message: &Inbound, now_s: i64) -> Option<Request>;
    /// `report` as the provider sends it at `now_s`; `None` when the
    /// connector takes no status callbacks.
    fn status_callback(&self, channel: &TestChannel, report: &StatusReport, now_s: i64) -> Option<Request>;
    /// Whether the provider signs each request's body (Twilio, Standard
    /// Webhooks), rather than sending a shared secret (Telegram's secret
    /// token, over TLS): only then can a tampered body be told.
    fn signs_bodies(&self) -> bool {
        true
    }
    /// Whether the provider is an HTTP API (the send and retry checks run
    /// against the kit's HTTP stand-in); email speaks SMTP, tested against
    /// a real SMTP server instead. The SSRF check runs for every connector.
    fn over_http(&self) -> bool {
        true
    }
    /// The sender's address as the connector reads it back (email adds a domain).
    fn address_of(&self, sender: &str) -> String {
        sender.to_owned()
    }
}

/// Runs every check; panics with the first failure.
pub async fn check(fixture: &dyn Fixture) {
    sends(fixture).await;
    retries_and_fails(fixture).await;
    guards_against_ssrf(fixture).await;
    checks_signatures(fixture);
    dedupes_inbound(fixture);
    reads_status_callbacks(fixture);
}

fn now_s() -> i64 {
    Timestamp::now().unix_micros() / 1_000_000
}

/// A message as the courier hands it to a connector.
pub fn sample_message() -> Message {
    Message {
        id: 42,
        conversation_id: 9,
        direction: Direction::Outbound,
        author: Author { kind: AuthorType::Agent, id: Some(3) },
        text: "Your order ships today — ünïcode & <markup> kept.".to_owned(),
        attachments: Vec::new(),
        status: MessageStatus::Queued,
        error: None,
        external_id: None,
        created_at: Timestamp::now(),
        sent_at: None,
        delivered_at: None,
        read_at: None,
        details: Default::default(),
    }
}

const TO: &str = "user-42";

async fn deliver(fixture: &dyn Fixture, channel: &TestChannel, allow_private: bool) -> Delivered {
    let client = parley_events::ssrf::http_client(allow_private, Duration::from_secs(5));
    let message = sample_message();
    fixture
        .connector()
        .deliver(Delivery {
            client: &client,
            timeout: Duration::from_secs(5),
            allow_private,
            channel: &channel.channel,
            secrets: &channel.secrets,
            signing: channel.signing.as_ref(),
            message: &message,
            to: TO,
            livemode: true,
            public_url: PUBLIC_URL,
            public_id: &channel.channel.address,
            files: &[],
        })
        .await
}

/// An accepted send is `Sent` with the provider's id, in one request the fixture approves.
pub async fn sends(fixture: &dyn Fixture) {
    if !fixture.over_http() {
        return;
    }
    let provider = Provider::start().await;
    let channel = fixture.channel(&provider.url);
    let Some((reply, external_id)) = fixture.accepted() else {
        assert!(
            matches!(deliver(fixture, &channel, true).await, Delivered::Sent { external_id: None }),
            "a connector that never calls out reports the message sent"
        );
        assert!(provider.take().is_empty(), "a connector that never calls out sent a request");
        return;
    };
    provider.answer(reply);
    assert_eq!(deliver(fixture, &channel, true).await, Delivered::Sent { external_id }, "an accepted send");
    let sent = provider.take();
    assert_eq!(sent.len(), 1, "an accepted send is one request to the provider");
    if let Err(e) = fixture.check_sent(&sent[0], &channel, &sample_message(), TO) {
        panic!("the provider request is wrong: {e}");
    }
}

/// 429 (with its `Retry-After`), 5xx and an unreachable provider are
/// retried; other 4xx fail the message, keeping the provider's words.
pub async fn retries_and_fails(fixture: &dyn Fixture) {
    if fixture.accepted().is_none() || !fixture.over_http() {
        return;
    }
    let provider = Provider::start().await;
    let channel = fixture.channel(&provider.url);
    let mut busy = Reply::new(429, r#"{"message": "slow down"}"#);
    busy.headers.push(("retry-after", "7".to_owned()));
    provider.answer(busy);
    match deliver(fixture, &channel, true).await {
        Delivered::Retry { after, .. } => assert_eq!(after, Some(Duration::from_secs(7)), "Retry-After is honoured"),
        other => panic!("a 429 is retried, not {other:?}"),
    }
    provider.answer(Reply::new(503, r#"{"message": "down for maintenance"}"#));
    assert!(matches!(deliver(fixture, &channel, true).await, Delivered::Retry { .. }), "a 503 is retried");
    provider.answer(Reply::new(400, r#"{"message": "no such recipient"}"#));
    match deliver(fixture, &channel, true).await {
        Delivered::Failed { error } => {
            assert!(error.contains("no such recipient"), "the provider's reason is kept: {error}")
        }
        other => panic!("a 400 fails the message, not {other:?}"),
    }
    // A port nothing listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let unreachable = fixture.channel(&closed);
    assert!(
        matches!(deliver(fixture, &unreachable, true).await, Delivered::Retry { .. }),
        "an unreachable provider is retried"
    );
}

/// With private addresses refused (production), a provider URL on
/// loopback is never called.
pub async fn guards_against_ssrf(fixture: &dyn Fixture) {
    if fixture.accepted().is_none() {
        return;
    }
    let provider = Provider::start().await;
    let channel = fixture.channel(&provider.url);
    let delivered = deliver(fixture, &channel, false).await;
    assert!(!matches!(delivered, Delivered::Sent { .. }), "a send to loopback went through: {delivered:?}");
    assert!(provider.take().is_empty(), "a request reached a loopback address");
}

fn sample_inbound(external_id: &str, text: &str) -> Inbound {
    Inbound {
        from: "4242".to_owned(),
        text: text.to_owned(),
        external_id: external_id.to_owned(),
        contact: Some(InboundContact { display_name: Some("Ana".to_owned()) }),
        attachments: Vec::new(),
        consent: None,
        group: None,
        details: Default::default(),
        unverified_sender: false,
        answers: Vec::new(),
    }
}

/// Authenticated requests pass; tampered, foreign or unsigned ones do not.
pub fn checks_signatures(fixture: &dyn Fixture) {
    let connector = fixture.connector();
    let channel = fixture.channel("http://127.0.0.1:9");
    let now = now_s();
    let Some(request) = fixture.inbound_message(&channel, &sample_inbound("p-1", "Hello"), now) else {
        assert!(!connector.hooks().contains(&Hook::Message), "the connector has a message hook but no fixture for it");
        let anything = Request { url: PUBLIC_URL.to_owned(), headers: http::HeaderMap::new(), body: b"{}".to_vec() };
        assert!(
            connector.authenticate(&anything.inbound(), &channel.credentials(), now).is_err(),
            "a connector without inbound webhooks refuses every request"
        );
        return;
    };
    assert!(connector.hooks().contains(&Hook::Message), "the fixture sends messages the connector does not hook");
    let creds = channel.credentials();
    assert_eq!(connector.authenticate(&request.inbound(), &creds, now), Ok(()), "an authenticated request passes");

    if fixture.signs_bodies() {
        let mut tampered = request.clone();
        tampered.body.extend_from_slice(b" ");
        tampered.body.insert(0, b' ');
        assert!(connector.authenticate(&tampered.inbound(), &creds, now).is_err(), "a tampered body is refused");
    }

    let other = fixture.channel("http://127.0.0.1:9");
    assert!(
        connector.authenticate(&request.inbound(), &other.credentials(), now).is_err(),
        "another channel's credentials do not authenticate the request"
    );

    let bare = Request { url: request.url.clone(), headers: http::HeaderMap::new(), body: request.body.clone() };
    assert!(connector.authenticate(&bare.inbound(), &creds, now).is_err(), "a request without its headers is refused");
}

/// The same provider message read twice names the same id; another message another id.
pub fn dedupes_inbound(fixture: &dyn Fixture) {
    let connector = fixture.connector();
    let channel = fixture.channel("http://127.0.0.1:9");
    let now = now_s();
    let sent = sample_inbound("p-1", "Where is my order?");
    let Some(first) = fixture.inbound_message(&channel, &sent, now) else { return };
    let read = |r: &Request| match connector.read(Hook::Message, &r.inbound(), &channel.channel.config) {
        Ok(Incoming::Message(m)) => m,
        other => panic!("an inbound message reads as a message, not {other:?}"),
    };
    let got = read(&first);
    let from = fixture.address_of("4242");
    assert_eq!((got.from.as_str(), got.text.as_str()), (from.as_str(), "Where is my order?"), "sender and text");
    let again = fixture.inbound_message(&channel, &sent, now + 30).expect("the same message again");
    assert_eq!(read(&again).external_id, got.external_id, "a repeated delivery names the same provider id");
    let other = fixture.inbound_message(&channel, &sample_inbound("p-2", "Where is my order?"), now).unwrap();
    assert_ne!(read(&other).external_id, got.external_id, "another message names another provider id");
}

/// Every status the provider reports reads back, for the message it names.
pub fn reads_status_callbacks(fixture: &dyn Fixture) {
    let connector = fixture.connector();
    let channel = fixture.channel("http://127.0.0.1:9");
    let now = now_s();
    for status in [MessageStatus::Sent, MessageStatus::Delivered, MessageStatus::Read, MessageStatus::Failed] {
        let error = (status == MessageStatus::Failed).then(|| "mailbox full".to_owned());
        let sent = StatusReport { external_id: "p-77".to_owned(), status, error };
        let Some(request) = fixture.status_callback(&channel, &sent, now) else {
            assert!(
                !connector.hooks().contains(&Hook::Status),
                "the connector has a status hook but no fixture for it"
            );
            return;
        };
        assert_eq!(connector.authenticate(&request.inbound(), &channel.credentials(), now), Ok(()));
        match connector.read(Hook::Status, &request.inbound(), &channel.channel.config) {
            Ok(Incoming::Status(report)) => assert_eq!(report, sent, "the report as sent"),
            other => panic!("a status callback reads as a status report, not {other:?}"),
        }
    }
}
