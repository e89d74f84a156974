//! Domain types for Parley.
//!
//! Everything here is pure: raw input is parsed into types that cannot hold an
//! invalid value (`ApiKey`, `Slug`, `IdempotencyKey`, …), state machines decide
//! which moves are allowed, and `validation` turns untrusted JSON into typed
//! input while collecting every fault in the SPEC's 422 shape.

pub mod agent;
pub mod api_key;
pub mod billing;
pub mod channel;
pub mod contact;
pub mod conversation;
pub mod crypto;
pub mod email;
pub mod event;
pub mod idempotency;
pub mod jwt;
pub mod prompt;
pub mod scope;
pub mod slug;
pub mod time;
pub mod user;
pub mod validation;
pub mod webhook;
pub mod workspace;

pub use scope::{Mode, Scope};
pub use time::Timestamp;
