//! Telegram's webhook for `telegram` channels.

use axum::extract::State;
use axum::http::StatusCode;
use parley_domain::channel::ChannelType;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::channels::PublicHook;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// Largest update taken (updates are a few KiB; files come by `getFile`).
const MAX_UPDATE_BYTES: usize = 256 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(update))
}

/// An update for a `telegram` channel (Parley registers this URL with
/// `setWebhook` when the channel is created or its settings change, and on
/// `POST /api/v1/channels/{id}/check`).
///
/// Checked against `X-Telegram-Bot-Api-Secret-Token` (the `secret_token`
/// Parley gave `setWebhook`) before anything is read. A message becomes
/// (or finds) the contact `telegram:<user id>` and is stored in their
/// conversation, or in the group's (`kind: group`); photos and documents
/// are fetched with `getFile`. A repeated update is stored once; updates
/// Parley does not take (edits, member changes) are acknowledged.
#[utoipa::path(
    post, path = "/hooks/telegram/{public_id}", tag = "Channels", operation_id = "telegram_webhook",
    params(
        ("public_id" = String, Path, description = "The channel's public id (`tg_…`)"),
        ("X-Telegram-Bot-Api-Secret-Token" = Option<String>, Header, description = "The secret token given to setWebhook"),
    ),
    request_body(content = serde_json::Value, description = "A Telegram `Update` object", content_type = "application/json"),
    responses(
        (status = 200, description = "Taken (or seen before, or not a message Parley takes)"),
        (status = 401, body = ErrorBody, description = "Missing or wrong secret token, or no telegram channel has this id; nothing was written"),
        (status = 403, body = ErrorBody, description = "The channel is disabled"),
        (status = 413, body = ErrorBody, description = "The update is over 256 KiB"),
        (status = 422, body = crate::error::ValidationErrorBody, description = "The body is not an update"),
    )
)]
async fn update(State(s): State<AppState>, hook: PublicHook) -> Result<StatusCode, ApiError> {
    hook.take_message(&s, &[ChannelType::Telegram], MAX_UPDATE_BYTES).await?;
    Ok(StatusCode::OK)
}
