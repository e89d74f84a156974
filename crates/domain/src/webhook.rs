//! Webhook endpoints and their delivery attempts.

use serde::Serialize;
use utoipa::ToSchema;

use crate::Timestamp;

string_enum!(
    EndpointStatus {
        Active = "active",
        Disabled = "disabled",
    }
);

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
