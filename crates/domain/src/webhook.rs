//! Webhook endpoints and their delivery attempts.

use serde::Serialize;
use utoipa::ToSchema;

use crate::Timestamp;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EndpointStatus {
    Active,
    Disabled,
}

impl EndpointStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EndpointStatus::Active => "active",
            EndpointStatus::Disabled => "disabled",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(EndpointStatus::Active),
            "disabled" => Some(EndpointStatus::Disabled),
            _ => None,
        }
    }
}

/// A webhook endpoint as the API returns it (never with its secret).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct WebhookEndpoint {
    pub id: i64,
    pub url: String,
    /// Event types delivered here, or `["*"]` for all.
    pub events: Vec<String>,
    pub description: Option<String>,
    pub status: EndpointStatus,
    /// Why the endpoint was disabled (by a user, a 410 answer, or 5 days of failures).
    pub disabled_reason: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// One attempt to deliver an event to an endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct DeliveryAttempt {
    pub id: i64,
    /// Also the `webhook-id` header: the same on every attempt of one event.
    pub event_id: String,
    pub event_type: String,
    /// 1 for the first attempt.
    pub attempt: i64,
    /// The endpoint's HTTP status, if it answered.
    pub status_code: Option<i64>,
    /// What went wrong, if the attempt failed.
    pub error: Option<String>,
    pub duration_ms: i64,
    /// The first 1 KiB of the endpoint's answer.
    pub response_body_excerpt: Option<String>,
    pub created_at: Timestamp,
    /// When the next attempt is due, if the delivery will be retried.
    pub next_attempt_at: Option<Timestamp>,
}
