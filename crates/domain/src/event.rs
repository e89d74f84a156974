//! The event log: every change to a resource, in order.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::Timestamp;

string_enum!(
    /// Every event type Parley emits. Webhook subscriptions name these (or `*`).
    EventType {
        AgentCreated = "agent.created",
        AgentUpdated = "agent.updated",
        AgentRunCompleted = "agent.run.completed",
        AgentRunFailed = "agent.run.failed",
        PromptBlockCreated = "prompt_block.created",
        PromptBlockUpdated = "prompt_block.updated",
        PromptBlockDeleted = "prompt_block.deleted",
        ContactCreated = "contact.created",
        ContactUpdated = "contact.updated",
        ContactMerged = "contact.merged",
        ConversationCreated = "conversation.created",
        ConversationUpdated = "conversation.updated",
        MessageReceived = "message.received",
        MessageSent = "message.sent",
        MessageDelivered = "message.delivered",
        MessageRead = "message.read",
        MessageFailed = "message.failed",
        CallQueued = "call.queued",
        CallRinging = "call.ringing",
        CallStarted = "call.started",
        CallCompleted = "call.completed",
        CallRecordingReady = "call.recording.ready",
        CallTranscriptReady = "call.transcript.ready",
        HandoffRequested = "handoff.requested",
        HandoffAccepted = "handoff.accepted",
        HandoffCompleted = "handoff.completed",
        HandoffCanceled = "handoff.canceled",
        BalanceLow = "balance.low",
        WebhookTest = "webhook.test",
    }
);

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
    pub kind: EventType,
    pub livemode: bool,
    /// The resource as the API returns it, at the time of the event.
    #[schema(value_type = Object)]
    pub data: Value,
    pub created_at: Timestamp,
}
