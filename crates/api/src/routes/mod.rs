//! One module per resource group, each exposing `router()`.

pub mod agent_runs;
pub mod agents;
pub mod api_keys;
pub mod auth;
pub mod billing;
pub mod calls;
pub mod canned_responses;
pub mod channels;
pub mod contacts;
pub mod conversations;
pub mod demo;
pub mod docs;
pub mod email;
pub mod files;
pub mod handoffs;
pub mod health;
pub mod inbox;
pub mod knowledge;
pub mod labels;
pub mod members;
pub mod messages;
pub mod notes;
pub mod notifications;
pub mod oauth;
mod oauth_pages;
pub mod overview;
pub mod presence;
pub mod prompt_blocks;
pub mod search;
pub mod speech_engines;
pub mod stream;
pub mod telegram;
pub mod text_engines;
pub mod twilio;
pub mod webchat;
pub mod webhooks;

use serde::Serialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(crate::openapi::base())
        .merge(health::router())
        .merge(docs::router())
        .merge(auth::router())
        .merge(api_keys::router())
        .merge(members::router())
        .merge(agents::router())
        .merge(agent_runs::router())
        .merge(prompt_blocks::router())
        .merge(webhooks::router())
        .merge(stream::router())
        .merge(billing::router())
        .merge(contacts::router())
        .merge(channels::router())
        .merge(conversations::router())
        .merge(messages::router())
        .merge(handoffs::router())
        .merge(notes::router())
        .merge(labels::router())
        .merge(canned_responses::router())
        .merge(inbox::router())
        .merge(presence::router())
        .merge(notifications::router())
        .merge(webchat::router())
        .merge(files::router())
        .merge(calls::router())
        .merge(overview::router())
        .merge(demo::router())
        .merge(twilio::router())
        .merge(telegram::router())
        .merge(email::router())
        .merge(search::router())
        .merge(text_engines::router())
        .merge(speech_engines::router())
        .merge(knowledge::router())
        .merge(oauth::router())
}

/// The items envelope of every list except agents.
#[derive(Debug, Serialize, ToSchema)]
pub struct Items<T> {
    pub items: Vec<T>,
    /// All items matching the filters.
    pub total: i64,
    /// Echo of the request's `limit`.
    pub limit: i64,
    /// Echo of the request's `offset`.
    pub offset: i64,
}

impl<T> Items<T> {
    pub fn new((items, total): (Vec<T>, i64), page: parley_domain::validation::Page) -> Self {
        Items { items, total, limit: page.limit, offset: page.offset }
    }

    /// A page of a list held whole in memory (a user's grants, a
    /// workspace's members: short by nature).
    pub fn paged(all: Vec<T>, page: parley_domain::validation::Page) -> Self {
        let total = all.len() as i64;
        let items = all.into_iter().skip(page.offset as usize).take(page.limit as usize).collect();
        Items::new((items, total), page)
    }
}

/// Pagination of every list endpoint. Out-of-range values are a 422, never clamped.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `ListQuery`
pub struct PageParams {
    /// Items per page, 1–200. Default 50.
    #[param(minimum = 1, maximum = 200, default = 50)]
    limit: Option<i64>,
    /// 0-based start position. Default 0.
    #[param(minimum = 0, default = 0)]
    offset: Option<i64>,
}

/// Serialises a response body (for handlers that build bytes, e.g. cached lists).
pub fn to_json<T: Serialize>(value: &T) -> Result<Vec<u8>, crate::ApiError> {
    serde_json::to_vec(value).map_err(|e| crate::ApiError::Internal(format!("could not serialise a response: {e}")))
}
