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
mod email;
mod inbound;
pub mod markup;
mod telegram;
mod twilio;
mod voice;
mod webchat;

use futures::future::BoxFuture;
use parley_domain::channel::{Channel, ChannelType};
use parley_domain::conversation::{ApprovedTemplate, Message, MessageDetails};
use parley_domain::validation::{FieldError, LocPart, Parsed};
use parley_events::signing::WebhookSecret;
use serde_json::{Map, Value};

pub use api::INBOUND_TOLERANCE_S;
pub use email::{parse_mail, trim_reply};
pub use inbound::{Consent, FileSource, Inbound, InboundContact, InboundFile, InboundGroup, StatusReport};
pub use telegram::{TELEGRAM_API, webhook_secret as telegram_webhook_secret};

/// The longest a connector's poll asks its provider to wait for news.
pub const LONGEST_POLL: std::time::Duration = telegram::POLL_WAIT;
pub use twilio::TWILIO_API;

/// What one channel type contributes.
pub trait Connector: Send + Sync {
    fn kind(&self) -> ChannelType;
    /// Names of settings whose values are write-only.
    fn secret_settings(&self) -> &'static [&'static str];
    /// Settings the channel cannot work without: forms ask for them. The
    /// API still stores a channel without them (they may come in a later
    /// PATCH), and checking its credentials says what is missing.
    fn needed_settings(&self) -> &'static [&'static str] {
        &[]
    }
    /// Checks one setting; `None` for a name the type does not know.
    fn parse_setting(&self, name: &str, value: Value, at: &[LocPart]) -> Option<Parsed<Value>>;
    /// The OpenAPI schema of the settings object: each setting `parse_setting`
    /// takes, with its constraints (null removes a setting).
    fn settings_schema(&self) -> utoipa::openapi::Object;
    /// Whether traffic is signed (Standard Webhooks) with a generated `whsec_` secret.
    fn signs_traffic(&self) -> bool;
    /// Prefix of the channel's public id (and address).
    fn public_prefix(&self) -> &'static str;
    /// The addresses a provider must be given, as `(what, path)` with
    /// `{public_id}` or `{id}` in the path: what an operator pastes into the
    /// provider's console (the dashboard shows them under the server's
    /// public URL).
    fn webhook_paths(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
    /// The settings that are URLs Parley will call (checked against SSRF).
    fn outbound_url_settings(&self) -> &'static [&'static str] {
        &[]
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
    /// What the channel adds to a message with this text (SMS segments).
    fn details(&self, _text: &str) -> MessageDetails {
        MessageDetails::default()
    }
    /// How long after the contact's last message free-form messages may be
    /// sent (WhatsApp's 24-hour customer-service window); outside it only
    /// a template may be sent. `None`: always.
    fn service_window(&self) -> Option<std::time::Duration> {
        None
    }
    /// Whether a reply names the conversation's last message (email's
    /// threading headers): only then is `previous` read for
    /// [`Connector::outbound_details`], a statement saved on every other send.
    fn threads(&self) -> bool {
        false
    }
    /// What the channel adds to a message queued with this text: the
    /// details of [`Connector::details`], and for email the threading
    /// headers (a reply to `previous`, the conversation's last message).
    fn outbound_details(
        &self,
        text: &str,
        _config: &Map<String, Value>,
        _previous: Option<&MessageDetails>,
        _subject: Option<&str>,
        _channel_name: &str,
    ) -> MessageDetails {
        self.details(text)
    }
    /// Whether a send may set a `subject` (email).
    fn takes_subject(&self) -> bool {
        false
    }
    /// Whether the provider takes a message's files themselves (email
    /// attachments) rather than links to them: the courier then reads
    /// them from storage into [`Delivery::files`].
    fn embeds_files(&self) -> bool {
        false
    }
    /// Whether the channel sends approved templates (`template` on a send).
    fn takes_templates(&self) -> bool {
        false
    }
    /// The approved templates the provider keeps for the channel (WhatsApp
    /// through Twilio's Content API), or why they cannot be had. Only
    /// channels that [`Connector::takes_templates`] are asked.
    fn templates<'a>(&'a self, _c: Check<'a>) -> BoxFuture<'a, Result<Vec<ApprovedTemplate>, String>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    /// How a channel that shows formatting renders the message's markup
    /// (its HTML), as [`Connector::deliver`] sends it; `None`: it is sent,
    /// and shown, as the text it is.
    fn formatted(&self, _text: &str) -> Option<String> {
        None
    }
    /// Sends one outbound message.
    fn deliver<'a>(&'a self, d: Delivery<'a>) -> BoxFuture<'a, Delivered>;
    /// Whether an earlier attempt to send this message may already have
    /// reached the provider (its answer was never recorded: the process died
    /// or the request timed out): the provider's ids of sent messages that
    /// match it, oldest first, for the courier to take instead of sending
    /// again. `None` when the provider offers no way to look (a retry may
    /// repeat the message; docs/channels.md lists which channels).
    fn look_up_sent<'a>(&'a self, _d: Delivery<'a>) -> BoxFuture<'a, Option<Result<Vec<String>, String>>> {
        Box::pin(async { None })
    }
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
    /// Fetches a file an inbound message names at the provider
    /// ([`FileSource::Remote`]), with the channel's credentials: its bytes
    /// and, when the provider says, its type.
    fn fetch_file<'a>(&'a self, _f: FetchFile<'a>) -> BoxFuture<'a, Result<Fetched, String>> {
        Box::pin(async { Err("this channel type names no remote files".to_owned()) })
    }
    /// Whether the channel's check also tells the provider where to call
    /// (Telegram's `setWebhook`): it then runs after every settings change.
    fn registers_hooks(&self) -> bool {
        false
    }
    /// Whether a channel with these settings takes its inbound traffic by
    /// polling the provider ([`Connector::poll`], run as a job) rather
    /// than by webhook.
    fn polls(&self, _config: &Map<String, Value>) -> bool {
        false
    }
    /// Asks the provider for what arrived since `cursor` (waiting a while
    /// for something to arrive); the messages and the next cursor. An
    /// `Err` says, as for a send, whether to try again or that the
    /// credentials were refused.
    fn poll<'a>(&'a self, _p: Poll<'a>) -> BoxFuture<'a, Result<Polled, Delivered>> {
        Box::pin(async { Err(Delivered::Failed { error: "this channel type does not poll".to_owned() }) })
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
    /// Whether [`Connector::authenticate`] decides on the headers alone (a
    /// shared secret, not a signature over the body): the request is then
    /// checked before its body is read, so a refusal costs no body.
    fn authenticates_by_headers(&self) -> bool {
        false
    }
    /// Reads an authenticated request that arrived on `hook`, for a
    /// channel with the public settings `config`.
    fn read(&self, _hook: Hook, _req: &InboundRequest<'_>, _config: &Map<String, Value>) -> Parsed<Incoming> {
        Err(vec![FieldError::new(
            parley_domain::validation::loc(&["body"]),
            "value_error",
            "this channel type takes no inbound requests",
        )])
    }
}

/// Everything a connector needs to send one message.
#[derive(Clone, Copy)]
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
    /// The message's files, read from storage, for connectors that embed them.
    pub files: &'a [OutboundFile],
}

/// A file sent with a message, as stored.
#[derive(Debug, Clone)]
pub struct OutboundFile {
    pub filename: String,
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// What a poll needs.
pub struct Poll<'a> {
    pub client: &'a reqwest::Client,
    /// For the request itself; the connector adds the time it asks the provider to wait.
    pub timeout: std::time::Duration,
    pub allow_private: bool,
    pub channel: &'a Channel,
    /// The channel's secret settings, opened.
    pub secrets: &'a Map<String, Value>,
    /// Where the last poll stopped (none at first).
    pub cursor: Option<&'a str>,
}

/// What a poll brought.
#[derive(Debug, Clone, PartialEq)]
pub struct Polled {
    /// Messages (and, for email, bounces) that arrived.
    pub incoming: Vec<Incoming>,
    /// Where the next poll starts: everything before it is taken.
    pub cursor: Option<String>,
}

/// What fetching a provider's file needs.
pub struct FetchFile<'a> {
    pub client: &'a reqwest::Client,
    pub timeout: std::time::Duration,
    pub allow_private: bool,
    pub channel: &'a Channel,
    /// The channel's secret settings, opened.
    pub secrets: &'a Map<String, Value>,
    /// The file's URL or id, as the connector read it.
    pub reference: &'a str,
    /// Files larger than this are refused.
    pub max_bytes: usize,
}

/// A fetched file.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub bytes: Vec<u8>,
    pub content_type: Option<String>,
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

impl Delivered {
    /// Why it did not go, unless it went.
    pub fn error(&self) -> Option<&str> {
        match self {
            Delivered::Sent { .. } => None,
            Delivered::Retry { error, .. } | Delivered::Failed { error } | Delivered::CredentialsRefused { error } => {
                Some(error)
            }
        }
    }
}

/// What a credentials check needs.
pub struct Check<'a> {
    pub client: &'a reqwest::Client,
    pub timeout: std::time::Duration,
    pub allow_private: bool,
    pub channel: &'a Channel,
    /// The channel's secret settings, opened.
    pub secrets: &'a Map<String, Value>,
    /// This server's public root and the channel's public id (its hooks
    /// are under `{public_url}/hooks/…/{public_id}`).
    pub public_url: &'a str,
    pub public_id: &'a str,
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
    /// Something the provider reports that Parley does not take (an edited
    /// message, a member joining): acknowledged, nothing stored.
    Ignored,
}

impl Incoming {
    /// Every text of it with NUL replaced (see
    /// [`parley_domain::validation::without_nul`]): what arrived from a
    /// provider is stored the same way on SQLite and PostgreSQL.
    pub fn without_nul(mut self) -> Self {
        use parley_domain::validation::replace_nul as fix;
        match &mut self {
            Incoming::Message(m) => {
                for s in [&mut m.from, &mut m.text, &mut m.external_id] {
                    fix(s);
                }
                if let Some(name) = m.contact.as_mut().and_then(|c| c.display_name.as_mut()) {
                    fix(name);
                }
                if let Some(group) = &mut m.group {
                    fix(&mut group.address);
                    fix(&mut group.title);
                }
                for file in &mut m.attachments {
                    fix(&mut file.filename);
                    fix(&mut file.content_type);
                    if let FileSource::Remote(reference) = &mut file.source {
                        fix(reference);
                    }
                }
                m.answers.iter_mut().for_each(fix);
                if let Some(email) = &mut m.details.email {
                    fix(&mut email.subject);
                    fix(&mut email.message_id);
                    email.in_reply_to.iter_mut().for_each(fix);
                    email.references.iter_mut().for_each(fix);
                    email.full_text.iter_mut().for_each(fix);
                }
            }
            Incoming::Status(report) => {
                fix(&mut report.external_id);
                report.error.iter_mut().for_each(fix);
            }
            Incoming::Ignored => {}
        }
        self
    }
}

pub use parley_extract::extension_for;

/// The connector for `kind`, if this version has one.
pub fn connector(kind: ChannelType) -> Option<&'static dyn Connector> {
    match kind {
        ChannelType::Api => Some(&api::ApiConnector),
        ChannelType::Webchat => Some(&webchat::WebchatConnector),
        ChannelType::Voice => Some(&voice::VoiceConnector),
        ChannelType::Sms => Some(&twilio::SMS),
        ChannelType::Whatsapp => Some(&twilio::WHATSAPP),
        ChannelType::Telegram => Some(&telegram::TelegramConnector),
        ChannelType::Email => Some(&email::EmailConnector),
    }
}

/// The channel types this version connects.
pub const AVAILABLE: &[&str] = &["api", "webchat", "voice", "sms", "whatsapp", "telegram", "email"];
