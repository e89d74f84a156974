//! `/api/v1/messages`: sending messages and reading one.

use axum::Json;
use axum::extract::State;
use axum::response::Response;
use parley_domain::conversation::Message;
use parley_domain::ids::MessageId;
use parley_domain::validation::Parsed;
use parley_services::messaging::messages::{self, SendMessage, Sender};
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, Idempotency, Ids, JsonBody, answer_response};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(send_message)).routes(routes!(get_message))
}

impl FromBody for SendMessage {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        messages::parse_send(body)
    }
}

/// Send a message.
///
/// Address it by `conversation_id`; by `channel_id` and `to` (the
/// conversation at that address is found or opened); or by `contact_id` and
/// `channel` (their open conversation on that channel type, or their
/// address on its oldest active connection). Answers 202 with the message
/// `queued`: it is stored and will be sent from a durable queue with
/// retries; follow it with `GET /api/v1/messages/{id}` or the
/// `message.sent`, `message.delivered` and `message.failed` events.
///
/// With a session (Bearer JWT) the author is that user (`author.type:
/// user`); with an API key it is the conversation's agent, which may not
/// write while a human handles the conversation (409).
#[utoipa::path(
    post, path = "/api/v1/messages", tag = "Messages",
    params(("Idempotency-Key" = Option<String>, Header, description = "A retry with the same key and body replays the first response instead of sending twice.")),
    request_body = SendMessage,
    responses(
        (status = 202, body = Message, description = "Queued"),
        (status = 404, body = ErrorBody, description = "No such conversation"),
        (status = 409, body = ErrorBody, description = "The conversation is closed or handled by a human (API keys), the channel is disabled or cannot send, or the key was used with another body"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn send_message(
    auth: Auth,
    State(s): State<AppState>,
    idem: Idempotency,
    body: JsonBody<SendMessage>,
) -> Result<Response, ApiError> {
    let scope = auth.scope();
    let sender = auth.0.user_id().map_or(Sender::Agent, Sender::User);
    let JsonBody { value, canonical } = body;
    Ok(answer_response(messages::send_answered(&s.services, scope, idem.for_body(&canonical), sender, value).await?))
}

/// Get a message.
#[utoipa::path(
    get, path = "/api/v1/messages/{message_id}", tag = "Messages",
    params(("message_id" = i64, Path)),
    responses((status = 200, body = Message), (status = 404, body = ErrorBody, example = json!({"detail": "Message 42 not found"})))
)]
async fn get_message(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<Message>, ApiError> {
    let [id] = path.0;
    Ok(Json(messages::get(&s.services, auth.scope(), MessageId(id)).await?))
}
