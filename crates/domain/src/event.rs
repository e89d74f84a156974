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
        CallMachineDetected = "call.machine_detected",
        CallAnalyzed = "call.analyzed",
        ConversationAnalyzed = "conversation.analyzed",
        HandoffRequested = "handoff.requested",
        HandoffOffered = "handoff.offered",
        HandoffAccepted = "handoff.accepted",
        HandoffCompleted = "handoff.completed",
        HandoffCanceled = "handoff.canceled",
        NoteCreated = "note.created",
        LabelCreated = "label.created",
        LabelUpdated = "label.updated",
        LabelDeleted = "label.deleted",
        CannedResponseCreated = "canned_response.created",
        CannedResponseUpdated = "canned_response.updated",
        CannedResponseDeleted = "canned_response.deleted",
        BalanceLow = "balance.low",
        WebhookTest = "webhook.test",
    }
);

impl EventType {
    /// What happened, in a sentence (the event-type list and docs/webhooks.md).
    pub fn description(self) -> &'static str {
        use EventType::*;
        match self {
            AgentCreated => "An agent was created.",
            AgentUpdated => "An agent's settings or status changed.",
            AgentRunCompleted => {
                "An agent run (a reply, a playground turn or a call turn) finished; its figures are in `data`."
            }
            AgentRunFailed => "An agent run failed: its engine errored, or its job gave up after its retries.",
            PromptBlockCreated => "A prompt block was created.",
            PromptBlockUpdated => "A prompt block was changed (a new version).",
            PromptBlockDeleted => "A prompt block was deleted.",
            ContactCreated => "A contact was created (by the API, an import or an inbound message).",
            ContactUpdated => "A contact's fields or identities changed.",
            ContactMerged => "Two contacts were merged into one.",
            ConversationCreated => "A conversation started.",
            ConversationUpdated => "A conversation's status, handler or fields changed.",
            MessageReceived => "A contact's message arrived.",
            MessageSent => "A message was handed to its channel's provider.",
            MessageDelivered => "The provider reported a message delivered.",
            MessageRead => "The provider reported a message read.",
            MessageFailed => "A message could not be delivered.",
            CallQueued => "A call was placed and is waiting to dial.",
            CallRinging => "A call is ringing.",
            CallStarted => "A call was answered.",
            CallCompleted => "A call ended (any outcome: its status says which).",
            CallRecordingReady => "A call's recording can be downloaded.",
            CallTranscriptReady => "A call's full transcript is stored.",
            CallMachineDetected => "A machine (voicemail, a call screening service) answered an outbound call.",
            CallAnalyzed => "A call's post-call analysis is stored (its `analysis`: summary, extracted data, success).",
            ConversationAnalyzed => {
                "A conversation's analysis, asked for on demand, is stored (`conversation_id` and `analysis`)."
            }
            HandoffRequested => "A conversation was handed to a human (or an agent) and waits.",
            HandoffOffered => {
                "A handoff waiting for a person was offered to a member (`offered_user_id`; null: to everyone), or again because nobody took it."
            }
            HandoffAccepted => "Someone took a handoff.",
            HandoffCompleted => "A handoff was finished.",
            HandoffCanceled => "A handoff was withdrawn before anyone took it.",
            NoteCreated => "A private note was added to a conversation (its `mentions` name the members to tell).",
            LabelCreated => "A conversation label was created.",
            LabelUpdated => "A label was renamed or recoloured (a rename also updates each conversation it is on).",
            LabelDeleted => "A label was deleted (and taken off every conversation).",
            CannedResponseCreated => "A canned response was saved.",
            CannedResponseUpdated => "A canned response's short code or content changed.",
            CannedResponseDeleted => "A canned response was deleted.",
            BalanceLow => "A balance fell below its low-balance threshold.",
            WebhookTest => "A test delivery asked for from the API or the dashboard.",
        }
    }
}

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
