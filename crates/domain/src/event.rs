//! The event log: every change to a resource, in order.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::Timestamp;

/// Every event type Parley emits. Webhook subscriptions name these (or `*`).
pub const EVENT_TYPES: &[&str] = &[
    "agent.created",
    "agent.updated",
    "prompt_block.created",
    "prompt_block.updated",
    "prompt_block.deleted",
    "contact.created",
    "contact.updated",
    "contact.merged",
    "conversation.created",
    "conversation.updated",
    "message.received",
    "message.sent",
    "message.delivered",
    "message.read",
    "message.failed",
    "call.queued",
    "call.ringing",
    "call.started",
    "call.completed",
    "call.recording.ready",
    "call.transcript.ready",
    "handoff.requested",
    "handoff.accepted",
    "handoff.completed",
    "handoff.canceled",
    "balance.low",
    "webhook.test",
];

/// A new event id: `evt_` and a ULID, so ids sort by creation time.
pub fn new_event_id() -> String {
    format!("evt_{}", ulid::Ulid::new())
}

/// One logged event.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Event {
    /// `evt_<ulid>`.
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub livemode: bool,
    /// The resource as the API returns it, at the time of the event.
    #[schema(value_type = Object)]
    pub data: Value,
    pub created_at: Timestamp,
}
