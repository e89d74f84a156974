//! The inbound-mail webhook of `email` channels.

use axum::extract::State;
use axum::http::StatusCode;
use parley_domain::channel::ChannelType;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::channels::PublicHook;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// Largest message taken (attachments included).
const MAX_MESSAGE_BYTES: usize = 25 * 1024 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(inbound))
}

/// A raw email for an `email` channel, as inbound-parse services forward
/// it: the message itself as the body (`message/rfc822`), or a
/// `multipart/form-data` form whose field `email` (SendGrid's "POST the raw,
/// full MIME message") or `body-mime` (Mailgun's MIME forward) holds it.
///
/// Authenticated by the channel's `inbound_secret` (`Authorization: Bearer
/// …`, or basic auth with it as the password) before anything is read.
/// The sender becomes (or finds) the contact `email:<address>`; a reply is
/// matched to its conversation by `In-Reply-To`/`References`, then by the
/// address. A repeated `Message-ID` is stored once. A delivery status
/// notification (bounce) fails the message it names.
#[utoipa::path(
    post, path = "/hooks/email/{public_id}", tag = "Channels", operation_id = "email_inbound_webhook",
    params(
        ("public_id" = String, Path, description = "The channel's public id (`em_…`)"),
        ("Authorization" = Option<String>, Header, description = "`Bearer <inbound_secret>`, or basic auth with it as the password"),
    ),
    request_body(content = String, description = "The raw RFC 5322 message (sent as `message/rfc822`, `text/plain` or `application/octet-stream`: the body is read as it is), or a `multipart/form-data` form carrying it in its `email` or `body-mime` field", content_type = "text/plain"),
    responses(
        (status = 200, description = "Taken (or seen before, or a message Parley does not take: an auto-reply, a bounce of mail it did not send)"),
        (status = 401, body = ErrorBody, description = "Missing or wrong secret, or no email channel has this id; nothing was written"),
        (status = 403, body = ErrorBody, description = "The channel is disabled"),
        (status = 413, body = ErrorBody, description = "The message is over 25 MiB"),
        (status = 422, body = crate::error::ValidationErrorBody, description = "The body is not an email message, or has no From address"),
    )
)]
async fn inbound(State(s): State<AppState>, hook: PublicHook) -> Result<StatusCode, ApiError> {
    hook.take_message(&s, &[ChannelType::Email], MAX_MESSAGE_BYTES).await?;
    Ok(StatusCode::OK)
}
