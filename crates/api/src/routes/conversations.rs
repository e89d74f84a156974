//! `/api/v1/conversations`: conversations and their messages.

use axum::Json;
use axum::extract::State;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use parley_domain::call::Analysis;
use parley_domain::conversation::{Conversation, ConversationItem, Message};
use parley_domain::ids::ConversationId;
use parley_domain::validation::{Parsed, QueryReader};
use parley_services::messaging::conversations;
use parley_services::messaging::conversations::UpdateConversation;
use parley_services::messaging::conversations::{ConversationFilter, VERSION_KEY};
use parley_services::messaging::messages::{self, PreviewReply, ReplyPreview};
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams, to_json};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, FromQuery, Ids, JsonBody, ListQuery};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_conversations))
        .routes(routes!(get_conversation, update_conversation))
        .routes(routes!(mark_read))
        .routes(routes!(reply_preview))
        .routes(routes!(list_messages))
        .routes(routes!(analyze_conversation, get_conversation_analysis))
}

impl FromQuery for ConversationFilter {
    fn from_query(q: &mut QueryReader) -> Self {
        conversations::parse_filter(q)
    }
}

impl FromBody for PreviewReply {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        messages::parse_preview(body)
    }
}

impl FromBody for UpdateConversation {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        conversations::parse_update(body)
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `conversations::parse_filter`
struct ConversationListParams {
    /// `sms|whatsapp|email|webchat|telegram|voice|api`.
    #[param(schema_with = parley_domain::schema::channel)]
    channel: Option<String>,
    #[param(inline)]
    kind: Option<parley_domain::conversation::ConversationKind>,
    #[param(inline)]
    status: Option<parley_domain::conversation::ConversationStatus>,
    #[param(minimum = 1)]
    contact_id: Option<i64>,
    #[param(minimum = 1)]
    agent_id: Option<i64>,
    #[param(inline)]
    handler: Option<parley_domain::conversation::Handler>,
    /// Only conversations changed at or after this instant (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    updated_since: Option<String>,
}

/// The order of a message list.
pub struct MessageOrder(bool);

impl FromQuery for MessageOrder {
    fn from_query(q: &mut QueryReader) -> Self {
        MessageOrder(conversations::parse_message_order(q))
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `conversations::parse_message_order`
struct MessageListParams {
    /// `asc` (default: oldest first) or `desc`.
    #[param(schema_with = parley_domain::schema::sort_order)]
    order: Option<String>,
}

/// List conversations, newest first, with exactly the documented item fields.
#[utoipa::path(
    get, path = "/api/v1/conversations", tag = "Conversations",
    params(PageParams, ConversationListParams),
    responses((status = 200, body = Items<ConversationItem>), (status = 422, body = ValidationErrorBody))
)]
async fn list_conversations(
    auth: Auth,
    State(s): State<AppState>,
    uri: Uri,
    q: ListQuery<ConversationFilter>,
) -> Result<Response, ApiError> {
    let scope = auth.scope();
    // An inbox is read far more often than it changes: pages are kept until
    // any conversation of the scope changes (see `ListCache`).
    crate::cache::respond(&s.lists, &auth.0.versions, scope, VERSION_KEY, uri.query().unwrap_or_default(), || async {
        let found = conversations::list(&s.services, scope, &q.filter, q.page).await?;
        to_json(&Items::new(found, q.page))
    })
    .await
}

/// Get a conversation (the full object).
#[utoipa::path(
    get, path = "/api/v1/conversations/{conversation_id}", tag = "Conversations",
    params(("conversation_id" = i64, Path)),
    responses((status = 200, body = Conversation), (status = 404, body = ErrorBody, example = json!({"detail": "Conversation 42 not found"})))
)]
async fn get_conversation(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<Conversation>, ApiError> {
    let [id] = path.0.map(ConversationId);
    Ok(Json(conversations::get(&s.services, auth.scope(), id).await?))
}

/// Analyse a conversation so far with its agent's `analysis` plan (as a
/// call is after it ends): a summary, the facts of `analysis.schema`, a
/// success evaluation. Answers 202 with the conversation; the result is
/// at `GET …/analysis` when done (`conversation.analyzed`). Billed as a
/// run (`analysis`). 409 without an agent.
#[utoipa::path(
    post, path = "/api/v1/conversations/{conversation_id}/analysis", tag = "Conversations",
    params(("conversation_id" = i64, Path)),
    responses(
        (status = 202, body = Conversation, description = "Queued"),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The conversation has no agent"),
    )
)]
async fn analyze_conversation(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Response, ApiError> {
    let [id] = path.0.map(ConversationId);
    let conversation = conversations::analyze(&s.services, auth.scope(), id).await?;
    Ok((axum::http::StatusCode::ACCEPTED, Json(conversation)).into_response())
}

/// A conversation's latest analysis; 404 before the first.
#[utoipa::path(
    get, path = "/api/v1/conversations/{conversation_id}/analysis", tag = "Conversations",
    params(("conversation_id" = i64, Path)),
    responses((status = 200, body = Analysis), (status = 404, body = ErrorBody))
)]
async fn get_conversation_analysis(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
) -> Result<Json<Analysis>, ApiError> {
    let [id] = path.0.map(ConversationId);
    Ok(Json(conversations::analysis(&s.services, auth.scope(), id).await?))
}

/// Change a conversation's title, status, snooze or agent.
///
/// Status rules: a `closed` conversation never changes again (409);
/// `snoozed` needs `snoozed_until`. Snoozed and resolved conversations
/// reopen on the contact's next message. Emits `conversation.updated`.
#[utoipa::path(
    patch, path = "/api/v1/conversations/{conversation_id}", tag = "Conversations",
    params(("conversation_id" = i64, Path)),
    request_body = UpdateConversation,
    responses(
        (status = 200, body = Conversation),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The conversation is closed"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn update_conversation(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<UpdateConversation>,
) -> Result<Json<Conversation>, ApiError> {
    let [id] = path.0.map(ConversationId);
    let scope = auth.scope();
    let input = body.value;
    Ok(Json(s.services.transaction(async move |work| conversations::update(work, scope, id, input).await).await?))
}

/// Mark a conversation read: its `unread_count` goes to 0.
#[utoipa::path(
    post, path = "/api/v1/conversations/{conversation_id}/read", tag = "Conversations",
    params(("conversation_id" = i64, Path)),
    responses((status = 200, body = Conversation), (status = 404, body = ErrorBody))
)]
async fn mark_read(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<Conversation>, ApiError> {
    let [id] = path.0.map(ConversationId);
    let scope = auth.scope();
    Ok(Json(s.services.transaction(async move |work| conversations::mark_read(work, scope, id).await).await?))
}

/// How a reply would go out on the conversation's channel now, as the
/// send would work it out: SMS segments and encoding, the email subject
/// and threading, the formatting a channel renders (email, Telegram),
/// whether the channel would refuse the text's length, and whether only a
/// template may be sent (WhatsApp outside its 24-hour window). Nothing is
/// stored or sent; the dashboard's composer asks as a member types.
#[utoipa::path(
    post, path = "/api/v1/conversations/{conversation_id}/reply-preview", tag = "Conversations",
    params(("conversation_id" = i64, Path)),
    request_body = PreviewReply,
    responses(
        (status = 200, body = ReplyPreview),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The conversation's channel is of a type this version cannot send on"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn reply_preview(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<PreviewReply>,
) -> Result<Json<ReplyPreview>, ApiError> {
    let [id] = path.0.map(ConversationId);
    Ok(Json(messages::preview(&s.services, auth.scope(), id, body.value).await?))
}

/// A conversation's messages, oldest first unless `order=desc`.
#[utoipa::path(
    get, path = "/api/v1/conversations/{conversation_id}/messages", tag = "Conversations",
    params(("conversation_id" = i64, Path), PageParams, MessageListParams),
    responses((status = 200, body = Items<Message>), (status = 404, body = ErrorBody), (status = 422, body = ValidationErrorBody))
)]
async fn list_messages(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    q: ListQuery<MessageOrder>,
) -> Result<Json<Items<Message>>, ApiError> {
    let [id] = path.0.map(ConversationId);
    let found = conversations::messages(&s.services, auth.scope(), id, q.filter.0, q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}
