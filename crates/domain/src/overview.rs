//! The home page's figures (`GET /api/v1/overview`): a workspace's last days
//! at a glance, in the reader's days.

use serde::Serialize;
use utoipa::ToSchema;

use crate::Timestamp;
use crate::call::CallLatency;

/// Per day, oldest first; the last day is today so far.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(example = json!({
    "utc_offset_minutes": 60,
    "days": [{"date": "2026-11-26", "calls": 12, "call_seconds": 1830, "messages_in": 140, "messages_out": 152,
              "agent_runs": 160, "agent_runs_failed": 2, "spend_cents": 412}],
    "voice_to_voice_today": {"turns": 40, "voice_to_voice_p50_ms": 820, "voice_to_voice_p95_ms": 1400},
    "voice_to_voice": {"turns": 310, "voice_to_voice_p50_ms": 790, "voice_to_voice_p95_ms": 1510},
    "open_handoffs": 3,
    "failing_webhook_endpoints": [],
    "balance_cents": 4588
}))]
pub struct Overview {
    /// The offset the days were cut at (minutes east of UTC), as asked.
    pub utc_offset_minutes: i64,
    pub days: Vec<DayFigures>,
    /// Voice-to-voice latency over the answered turns of today's calls.
    pub voice_to_voice_today: Option<CallLatency>,
    /// The same over every day shown.
    pub voice_to_voice: Option<CallLatency>,
    /// Handoffs waiting for a person or being worked (`requested`, `accepted`).
    pub open_handoffs: i64,
    /// Endpoints whose deliveries fail since their last success, or that
    /// were disabled; at most 20, the longest failing first.
    pub failing_webhook_endpoints: Vec<FailingEndpoint>,
    /// The mode's balance now.
    pub balance_cents: i64,
}

/// One day's figures; counts are of what was created that day.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct DayFigures {
    /// `YYYY-MM-DD` in the reader's offset.
    pub date: String,
    pub calls: i64,
    /// The day's calls' talk time, in whole seconds.
    pub call_seconds: i64,
    pub messages_in: i64,
    pub messages_out: i64,
    pub agent_runs: i64,
    pub agent_runs_failed: i64,
    /// Charges less refunds on the ledger.
    pub spend_cents: i64,
}

/// A webhook endpoint that needs attention.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FailingEndpoint {
    pub id: i64,
    pub url: String,
    /// `active` (still retrying) or `disabled`.
    pub status: String,
    pub failing_since: Option<Timestamp>,
    pub disabled_reason: Option<String>,
}

/// What agents cost, per day (`GET /api/v1/billing/usage`).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Usage {
    /// The offset the days were cut at (minutes east of UTC), as asked.
    pub utc_offset_minutes: i64,
    /// Oldest first; the last day is today so far.
    pub days: Vec<UsageDay>,
}

/// One day's cost by agent: their runs (model tokens) and calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct UsageDay {
    /// `YYYY-MM-DD` in the reader's offset.
    pub date: String,
    pub total_cents: i64,
    /// The agents that cost something that day, the most first.
    pub agents: Vec<AgentUsage>,
}

/// An agent's cost on a day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct AgentUsage {
    pub agent_id: i64,
    pub cents: i64,
}
