//! Conversations across channels: channel connections and their inbound
//! traffic, conversations and messages, the courier that sends them,
//! handoffs between agents and people, and the webchat widget.

pub mod canned_responses;
pub mod channels;
pub mod conversations;
pub mod courier;
pub mod handoffs;
pub mod inbox;
pub mod labels;
pub mod messages;
pub mod notes;
pub mod notifications;
pub mod offers;
pub mod polling;
pub mod webchat;
