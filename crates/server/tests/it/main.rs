//! End-to-end tests: the real server on 127.0.0.1:0, driven over HTTP.
//! Every test in `both_backends!` runs once on SQLite and once on PostgreSQL.

#[macro_use]
mod support;
mod receiver;

mod agents;
mod analysis;
mod auth;
mod backup;
mod billing;
mod calls;
mod channels;
mod cli;
mod contacts;
mod conversations;
mod dashboard;
mod delivery_processes;
mod email;
mod errors;
mod handoffs;
mod hardening;
mod idempotency;
mod identity;
mod imap;
mod isolation;
mod knowledge;
mod labels;
mod mcp;
mod members;
mod messages;
mod metrics;
mod notes;
mod oauth;
mod operations;
mod outages;
mod overview;
mod presence;
mod prompt_blocks;
mod runtime;
mod scale_out;
mod search;
mod second_pass;
mod sms;
mod stream;
mod telegram;
mod tools;
mod traces;
mod twilio_voice;
mod voice;
mod web_calls;
mod webchat;
mod webhooks;
