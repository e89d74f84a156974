//! Conversations and messages.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::Timestamp;

/// How many characters of the last message a conversation shows.
pub const PREVIEW_CHARS: usize = 140;

/// The first 140 characters of a message, as sent (line breaks and markup kept).
pub fn preview(text: &str) -> String {
    text.chars().take(PREVIEW_CHARS).collect()
}

string_enum!(
    /// open → pending|snoozed|resolved → … ; closed is final.
    ConversationStatus { Open = "open", Pending = "pending", Snoozed = "snoozed", Resolved = "resolved", Closed = "closed" }
);
string_enum!(
    /// Who answers the conversation now.
    Handler { Agent = "agent", Human = "human", None = "none" }
);
string_enum!(
    /// An inbox view: everything, the caller's, nobody's (and no agent's),
    /// or those whose handoff to a person waits.
    InboxViewName { All = "all", Mine = "mine", Unassigned = "unassigned", Handoffs = "handoffs" }
);
string_enum!(
    /// The inbox's order: `recent` (last activity first) or `waiting` (who
    /// has waited longest first).
    InboxSortName { Recent = "recent", Waiting = "waiting" }
);
string_enum!(ConversationKind { Direct = "direct", Group = "group", Call = "call" });
string_enum!(Direction { Inbound = "inbound", Outbound = "outbound" });
string_enum!(AuthorType { Contact = "contact", Agent = "agent", User = "user", System = "system" });
string_enum!(
    /// Outbound: queued → sent → delivered → read, or failed. Inbound: received.
    MessageStatus { Queued = "queued", Sent = "sent", Delivered = "delivered", Read = "read", Failed = "failed", Received = "received" }
);

string_enum!(
    /// requested → accepted → completed, or canceled (from requested or accepted).
    HandoffStatus { Requested = "requested", Accepted = "accepted", Completed = "completed", Canceled = "canceled" }
);
string_enum!(
    /// Who takes the conversation over.
    HandoffTarget { Human = "human", Agent = "agent" }
);

/// A conversation changing hands between an agent and a human.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Handoff {
    pub id: i64,
    pub conversation_id: i64,
    /// `human` or `agent`.
    pub to: HandoffTarget,
    /// The agent taking over (`to: agent`).
    pub agent_id: Option<i64>,
    /// The user asked to take over, or who accepted.
    pub user_id: Option<i64>,
    pub reason: String,
    pub note: Option<String>,
    pub status: HandoffStatus,
    /// A signed-in user, an agent, or `system` (an API key).
    pub requested_by: Author,
    pub created_at: Timestamp,
    pub accepted_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    pub canceled_at: Option<Timestamp>,
    pub updated_at: Timestamp,
    /// To a person: the member it was last offered to (the named `user_id`,
    /// else an available member in turn); null when offered to everyone
    /// because nobody was online.
    pub offered_user_id: Option<i64>,
    /// When it was last offered; offered again to the next member while
    /// nobody accepts (`inbox.reoffer_seconds`).
    pub offered_at: Option<Timestamp>,
    /// How many times it has been offered.
    pub offers: i64,
}

/// A private note on a conversation, for the team: never sent on a
/// channel, and given to an agent only when shared with it (`for_agent`).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Note {
    pub id: i64,
    pub conversation_id: i64,
    /// The member who wrote it; null when written with an API key.
    pub author_user_id: Option<i64>,
    pub text: String,
    /// The members it @mentions (user ids), in the order first mentioned.
    pub mentions: Vec<i64>,
    /// Shared with the conversation's agent: its answers read it as the
    /// team's guidance. Other notes no agent reads.
    pub for_agent: bool,
    pub created_at: Timestamp,
}

/// A label a team puts on conversations (`/api/v1/labels`).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Label {
    pub id: i64,
    /// Unique in the workspace and mode whatever its case.
    pub name: String,
    /// `#rrggbb`.
    pub color: String,
    pub description: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A saved reply the team picks in the composer by its short code
/// (`/api/v1/canned-responses`).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct CannedResponse {
    pub id: i64,
    /// Unique in the workspace and mode whatever its case; typed after `/`.
    pub short_code: String,
    /// The reply; `{{contact.name}}`, `{{contact.first_name}}`,
    /// `{{contact.email}}` and `{{contact.phone}}` are filled from the
    /// conversation's contact when it is picked.
    pub content: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A conversation as listed: exactly the documented fields.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ConversationItem {
    pub id: i64,
    pub title: String,
    /// `sms|whatsapp|email|webchat|telegram|voice|api`.
    pub channel: String,
    pub kind: ConversationKind,
    /// `<channel>:<address>`, e.g. `sms:+14155550100`.
    pub channel_ref: String,
    pub last_message_ts: Option<Timestamp>,
    /// The first 140 characters of the last message, as sent.
    pub last_message_preview: Option<String>,
    /// Inbound messages not yet marked read.
    pub unread_count: i64,
    pub created_at: Timestamp,
}

/// The full conversation.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Conversation {
    #[serde(flatten)]
    pub item: ConversationItem,
    pub status: ConversationStatus,
    /// The channel connection it runs on.
    pub channel_id: i64,
    pub contact_id: Option<i64>,
    pub agent_id: Option<i64>,
    pub handler: Handler,
    pub assignee_user_id: Option<i64>,
    /// Since when the contact has waited for an answer, if they are waiting.
    pub waiting_since: Option<Timestamp>,
    pub snoozed_until: Option<Timestamp>,
    pub updated_at: Timestamp,
    /// Opened by an email whose sender the receiving server did not
    /// authenticate: kept apart from the proven address's conversations and
    /// contact (the `From` may be forged).
    pub unverified_sender: bool,
    /// The names of its labels, sorted.
    pub labels: Vec<String>,
}

/// Who wrote a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct Author {
    #[serde(rename = "type")]
    pub kind: AuthorType,
    /// The contact's, agent's or user's id; null for system messages.
    pub id: Option<i64>,
}

/// A file sent with a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Attachment {
    pub filename: String,
    pub content_type: String,
    /// Bytes.
    pub size: i64,
    /// Where storage keeps it; never shown.
    #[serde(default, skip_serializing)]
    #[schema(ignore)]
    pub key: String,
    /// A download link that works until `expires_at`.
    #[serde(default, skip_deserializing)]
    pub url: Option<String>,
    #[serde(default, skip_deserializing)]
    #[schema(value_type = Option<String>)]
    pub expires_at: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Message {
    pub id: i64,
    pub conversation_id: i64,
    pub direction: Direction,
    pub author: Author,
    pub text: String,
    pub attachments: Vec<Attachment>,
    pub status: MessageStatus,
    pub error: Option<String>,
    /// The provider's (or your system's) id for the message.
    pub external_id: Option<String>,
    pub created_at: Timestamp,
    pub sent_at: Option<Timestamp>,
    pub delivered_at: Option<Timestamp>,
    pub read_at: Option<Timestamp>,
    /// What the channel's provider adds (SMS segments, a WhatsApp template).
    #[serde(flatten)]
    pub details: MessageDetails,
}

/// Channel-specific facts of a message, shown only where they apply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MessageDetails {
    /// SMS channels: the text's alphabet and the segments (billed parts) it takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub segments: Option<crate::sms::Segments>,
    /// WhatsApp: the approved template the message was sent with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub template: Option<Template>,
    /// Email: the headers that thread the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub email: Option<EmailHeaders>,
}

/// An email's subject and threading headers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EmailHeaders {
    pub subject: String,
    /// `<…@…>`: the message's `Message-ID` (also its `external_id`).
    pub message_id: String,
    /// The `Message-ID` it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub in_reply_to: Option<String>,
    /// The thread's `Message-ID`s, oldest first.
    #[serde(default)]
    pub references: Vec<String>,
    /// Inbound: the whole body, when `text` shows only the new part (the
    /// quoted reply and the signature trimmed for the conversation and the agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub full_text: Option<String>,
}

impl MessageDetails {
    pub fn is_empty(&self) -> bool {
        self == &MessageDetails::default()
    }
}

/// An approved WhatsApp message template (Twilio Content API).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Template {
    /// The template's content SID (`HX` and 32 hex digits).
    #[schema(pattern = "^HX[0-9a-fA-F]{32}$")]
    pub content_sid: String,
    /// The template's placeholders and their values (`{"1": "Ana"}`).
    pub variables: std::collections::BTreeMap<String, String>,
}

/// A message template the provider approved (WhatsApp, through Twilio's
/// Content API): what may be sent outside the customer-service window.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ApprovedTemplate {
    /// Its content SID (`HX` and 32 hex digits): `template.content_sid` on a send.
    pub content_sid: String,
    /// Its name in the provider's console.
    pub name: String,
    /// Its language (`en`, `pt_BR`…).
    pub language: String,
    /// Its text, with `{{1}}`-style placeholders (empty for a template of
    /// rich content without a body).
    pub body: String,
    /// Its placeholders and the sample values registered with it.
    pub variables: std::collections::BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previews_keep_the_first_140_characters_as_sent() {
        let text = format!("**Hi**\nline two {}", "é".repeat(200));
        let p = preview(&text);
        assert_eq!(p.chars().count(), 140);
        assert!(p.starts_with("**Hi**\nline two é"));
        assert_eq!(preview("short\n"), "short\n");
    }

    #[test]
    fn enums_round_trip() {
        for s in ConversationStatus::ALL {
            assert_eq!(ConversationStatus::parse(s).map(ConversationStatus::as_str), Some(*s));
        }
        assert_eq!(MessageStatus::parse("lost"), None);
    }
}
