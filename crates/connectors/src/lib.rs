//! Channel connectors: what each channel type (api, webchat; later email,
//! SMS, WhatsApp, Telegram) contributes behind one [`Connector`] trait.
//!
//! A connector reads and checks its own settings and says which are
//! secret; sends one outbound message ([`Connector::deliver`]); and, for
//! types whose provider calls back, authenticates each inbound request
//! before anything is read ([`Connector::authenticate`]) and reads it into
//! an [`Incoming`] message or status report ([`Connector::read`]).
//! Connectors know nothing of the database: the services open the
//! channel's credentials, deduplicate by the provider's id and store.
//!
//! Every connector passes the conformance kit ([`conformance`], behind the
//! `conformance` feature): send, retry and failure, the SSRF guard, the
//! signature check, stable provider ids for inbound dedupe, and status
//! callbacks.

mod api;
#[cfg(feature = "conformance")]
pub mod conformance;
mod inbound;
mod twilio;
mod voice;
mod webchat;

use futures::future::BoxFuture;
use parley_domain::channel::{Channel, ChannelType};
use parley_domain::conversation::Message;
use parley_domain::validation::{FieldError, LocPart, Parsed};
use parley_events::signing::WebhookSecret;
use serde_json::{Map, Value};

pub use api::INBOUND_TOLERANCE_S;
pub use inbound::{Inbound, InboundContact, StatusReport};
pub use twilio::TWILIO_API;

/// What one channel type contributes.
pub trait Connector: Send + Sync {
    fn kind(&self) -> ChannelType;
    /// Names of settings whose values are write-only.
    fn secret_settings(&self) -> &'static [&'static str];
    /// Checks one setting; `None` for a name the type does not know.
    fn parse_setting(&self, name: &str, value: Value, at: &[LocPart]) -> Option<Parsed<Value>>;
    /// The OpenAPI schema of the settings object: each setting `parse_setting`
    /// takes, with its constraints (null removes a setting).
    fn settings_schema(&self) -> utoipa::openapi::Object;
    /// Whether traffic is signed (Standard Webhooks) with a generated `whsec_` secret.
    fn signs_traffic(&self) -> bool;
    /// Prefix of the channel's public id (and address).
    fn public_prefix(&self) -> &'static str;
    /// A setting that is a URL Parley will call (checked against SSRF).
    fn outbound_url_setting(&self) -> Option<&'static str> {
        None
    }
    /// The channel's address from its settings (a voice channel's
    /// number); its public id when `None`.
    fn address(&self, _config: &Map<String, Value>) -> Option<String> {
        None
    }
    /// Why a channel with these settings cannot send, if it cannot.
    fn cannot_send(&self, _config: &Map<String, Value>) -> Option<String> {
        None
    }
    /// Whether sending reaches a third party's servers (in test mode such
    /// messages never leave the process). The api and webchat channels
    /// reach only the customer's own systems, so they send in both modes.
    fn reaches_third_party(&self) -> bool {
        false
    }
    /// Why the provider would refuse a message with this text (too long),
    /// if it would: the send is refused up front (422).
    fn refuse_text(&self, _text: &str) -> Option<String> {
        None
    }
    /// Sends one outbound message.
    fn deliver<'a>(&'a self, d: Delivery<'a>) -> BoxFuture<'a, Delivered>;
    /// Asks the provider whether the channel's credentials work
    /// (`POST /api/v1/channels/{id}/check`).
    fn check<'a>(&'a self, _c: Check<'a>) -> BoxFuture<'a, Checked> {
        Box::pin(async { Checked::NothingToCheck("this channel type has no provider credentials to check".to_owned()) })
    }
    /// Whether the provider may report a message's status before its
    /// answer to the send (naming the message) is stored: such early
    /// reports are kept and applied then, instead of answering 404.
    fn reports_may_precede_send(&self) -> bool {
        false
    }
    /// The inbound webhooks the provider calls; none when the channel takes
    /// no inbound requests (the webchat widget talks over its socket).
    fn hooks(&self) -> &'static [Hook] {
        &[]
    }
    /// Checks that a request comes from the channel's provider (a
    /// signature or shared secret), before anything in it is read.
    fn authenticate(&self, _req: &InboundRequest<'_>, _creds: &Credentials<'_>, _now_s: i64) -> Result<(), Refused> {
        Err(Refused("this channel type takes no inbound requests".to_owned()))
    }
    /// Reads an authenticated request that arrived on `hook`.
    fn read(&self, _hook: Hook, _req: &InboundRequest<'_>) -> Parsed<Incoming> {
        Err(vec![FieldError::new(
            parley_domain::validation::loc(&["body"]),
            "value_error",
            "this channel type takes no inbound requests",
        )])
    }
}

/// Everything a connector needs to send one message.
pub struct Delivery<'a> {
    pub client: &'a reqwest::Client,
    pub timeout: std::time::Duration,
    pub allow_private: bool,
    pub channel: &'a Channel,
    /// The channel's secret settings, opened.
    pub secrets: &'a Map<String, Value>,
    /// The channel's `whsec_` secret, for types that sign traffic.
    pub signing: Option<&'a WebhookSecret>,
    pub message: &'a Message,
    /// The recipient's address on the channel.
    pub to: &'a str,
    pub livemode: bool,
    /// Where the provider's callbacks reach this server: its public root
    /// and the channel's public id (its hooks are under
    /// `{public_url}/hooks/…/{public_id}`).
    pub public_url: &'a str,
    pub public_id: &'a str,
}

/// How a send went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// Accepted; the provider's id for the message, if it gave one.
    Sent { external_id: Option<String> },
    /// Worth another try (after the provider's wish, if it said).
    Retry { error: String, after: Option<std::time::Duration> },
    /// Will never succeed as it stands.
    Failed { error: String },
    /// The provider refused the channel's credentials: the message fails
    /// and the channel goes to `error` until they work again.
    CredentialsRefused { error: String },
}

/// What a credentials check needs.
pub struct Check<'a> {
    pub client: &'a reqwest::Client,
    pub timeout: std::time::Duration,
    pub allow_private: bool,
    pub channel: &'a Channel,
    /// The channel's secret settings, opened.
    pub secrets: &'a Map<String, Value>,
}

/// What the provider said of the channel's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// They work; what the provider knows the account as.
    Works(String),
    /// The provider refused them, and why.
    Refused(String),
    /// The provider could not be asked (unreachable, failing).
    Unreachable(String),
    /// The channel has no provider credentials.
    NothingToCheck(String),
}

/// Which of a channel's inbound webhooks a request arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// Messages from contacts.
    Message,
    /// Delivery reports for messages Parley sent.
    Status,
}

/// An inbound request as it arrived.
#[derive(Debug, Clone, Copy)]
pub struct InboundRequest<'a> {
    /// The URL the provider requested (the public root, the path and the
    /// query): some providers sign it (Twilio).
    pub url: &'a str,
    pub headers: &'a http::HeaderMap,
    pub body: &'a [u8],
}

/// The channel's credentials, opened, for checking inbound requests.
#[derive(Debug, Clone, Copy)]
pub struct Credentials<'a> {
    pub secrets: &'a Map<String, Value>,
    pub signing: Option<&'a WebhookSecret>,
}

/// Why an inbound request was not accepted as the provider's (a 401).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What an inbound request carried.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A message from a contact; `external_id` is the provider's id for it,
    /// the same each time the provider repeats the request.
    Message(Inbound),
    /// A delivery report for a message Parley sent.
    Status(StatusReport),
}

/// The connector for `kind`, if this version has one.
pub fn connector(kind: ChannelType) -> Option<&'static dyn Connector> {
    match kind {
        ChannelType::Api => Some(&api::ApiConnector),
        ChannelType::Webchat => Some(&webchat::WebchatConnector),
        ChannelType::Voice => Some(&voice::VoiceConnector),
        ChannelType::Sms => Some(&twilio::SMS),
        ChannelType::Whatsapp => Some(&twilio::WHATSAPP),
        _ => None,
    }
}

/// The channel types this version connects.
pub const AVAILABLE: &[&str] = &["api", "webchat", "voice", "sms", "whatsapp"];
