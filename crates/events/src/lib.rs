//! Delivering Parley's events to the outside world.
//!
//! - [`signing`]: Standard Webhooks (`webhook-id`, `webhook-timestamp`,
//!   `webhook-signature: v1,<base64 HMAC-SHA256>`), both signing and verifying.
//! - [`ssrf`]: outbound HTTP to user-given URLs only reaches public addresses.
//! - [`post`]: one signed POST to a user-given URL, shared by webhooks and
//!   outbound channel messages.
//! - [`dispatcher`]: the durable outbox worker that delivers, retries and
//!   records webhook attempts, safe to run on several instances at once.

pub mod dispatcher;
pub mod post;
pub mod signing;
pub mod ssrf;
