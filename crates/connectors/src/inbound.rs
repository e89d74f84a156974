//! What inbound requests carry, whatever the channel: messages from
//! contacts and delivery reports. The api channel's wire format is exactly
//! these shapes; other connectors translate their provider's into them.

use parley_domain::conversation::MessageStatus;
use parley_domain::validation::{Parsed, loc, object, one_of, parse_object, string};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

/// A message arriving on a channel.
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"from": "user-42", "text": "Hello, where is my order?", "external_id": "m-1", "contact": {"display_name": "Ana"}}))]
pub struct Inbound {
    /// The sender's address on the channel (for the api channel, your id
    /// for the person); 1–255 characters.
    #[schema(min_length = 1, max_length = 255)]
    pub from: String,
    /// 1–10,000 characters.
    #[schema(min_length = 1, max_length = 10000)]
    pub text: String,
    /// Your id for the message (1–255 characters); a message sent twice with one id is stored once.
    #[schema(min_length = 1, max_length = 255)]
    pub external_id: String,
    /// What you know of the sender, used when Parley creates their contact.
    #[schema(nullable = false)]
    pub contact: Option<InboundContact>,
    /// Files the message carries (providers' media; not part of the api
    /// channel's body).
    #[serde(skip)]
    #[schema(ignore)]
    pub attachments: Vec<InboundFile>,
    /// A keyword by which the sender stops or resumes messages (SMS `STOP`,
    /// `START`); not part of the api channel's body.
    #[serde(skip)]
    #[schema(ignore)]
    pub consent: Option<Consent>,
    /// The group the message was written in (a Telegram group): the
    /// conversation is the group's, `from` its member's.
    #[serde(skip)]
    #[schema(ignore)]
    pub group: Option<InboundGroup>,
    /// What the provider adds (an email's headers).
    #[serde(skip)]
    #[schema(ignore)]
    pub details: parley_domain::conversation::MessageDetails,
    /// The provider did not vouch for `from` (an email whose `From` no
    /// trusted server authenticated): the sender is kept apart from the
    /// address's proven contact and conversations.
    #[serde(skip)]
    #[schema(ignore)]
    pub unverified_sender: bool,
    /// Provider ids of the messages this one answers (an email's
    /// `In-Reply-To` and `References`), newest first: the conversation is
    /// found by them before the sender's address.
    #[serde(skip)]
    #[schema(ignore)]
    pub answers: Vec<String>,
}

/// A group chat a message arrived in.
#[derive(Debug, Clone, PartialEq)]
pub struct InboundGroup {
    /// The group's address on the channel.
    pub address: String,
    pub title: String,
}

/// A file arriving with a message.
#[derive(Debug, Clone, PartialEq)]
pub struct InboundFile {
    pub filename: String,
    pub content_type: String,
    pub source: FileSource,
}

/// Where an arriving file's bytes are.
#[derive(Debug, Clone, PartialEq)]
pub enum FileSource {
    /// In the request (an email's MIME part).
    Inline(Vec<u8>),
    /// At the provider, to fetch with the channel's credentials
    /// ([`crate::Connector::fetch_file`]): a URL or the provider's file id.
    Remote(String),
}

/// The sender stops or resumes messages from the channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consent {
    /// `STOP` and its synonyms: the keyword, upper-cased.
    OptOut(&'static str),
    /// `START` and its synonyms.
    OptIn,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InboundContact {
    /// 1–200 characters.
    #[schema(nullable = false, min_length = 1, max_length = 200)]
    pub display_name: Option<String>,
}

impl Inbound {
    /// Reads the api channel's inbound body (`POST /api/v1/channels/{id}/inbound`).
    pub fn parse(body: Value) -> Parsed<Inbound> {
        parse_object(body, loc(&["body"]), |r| {
            let from = r.required("from", string(1, 255));
            let text = r.required("text", string(1, 10_000));
            let external_id = r.required("external_id", string(1, 255));
            let contact = r.optional(
                "contact",
                object(|r| Some(InboundContact { display_name: r.optional("display_name", string(1, 200)) })),
            );
            Some(Inbound {
                from: from?,
                text: text?,
                external_id: external_id?,
                contact,
                attachments: Vec::new(),
                consent: None,
                group: None,
                details: Default::default(),
                unverified_sender: false,
                answers: Vec::new(),
            })
        })
    }
}

/// A delivery report for an outbound message (`POST /api/v1/channels/{id}/status`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusReport {
    /// The id your system gave the message (in its reply to Parley's POST); 1–255 characters.
    #[schema(min_length = 1, max_length = 255)]
    pub external_id: String,
    /// `sent|delivered|read|failed`.
    #[schema(schema_with = parley_domain::schema::reported_status)]
    pub status: MessageStatus,
    /// Why it failed (with `failed`); 1–1,000 characters.
    #[schema(nullable = false, min_length = 1, max_length = 1000)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl StatusReport {
    /// Reads the api channel's status body.
    pub fn parse(body: Value) -> Parsed<StatusReport> {
        parse_object(body, loc(&["body"]), |r| {
            let external_id = r.required("external_id", string(1, 255));
            let status = r
                .required("status", one_of(&["sent", "delivered", "read", "failed"]))
                .and_then(|s| MessageStatus::parse(&s));
            let error = r.optional("error", string(1, 1000));
            Some(StatusReport { external_id: external_id?, status: status?, error })
        })
    }
}
