//! Tenancy and identity: workspaces and their members, users, sessions and
//! JWTs, API keys, and authenticating each request.

pub mod api_keys;
pub mod auth;
pub mod identity;
pub mod members;
pub mod oauth;
pub mod presence;
pub mod reach;
pub mod workspaces;
