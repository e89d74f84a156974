//! `/api/v1/conversations`: conversations and their messages.

use axum::Json;
use axum::extract::State;
use parley_domain::conversation::{Conversation, ConversationItem, Message};
use parley_domain::validation::QueryReader;
use parley_services::conversations;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromQuery, Ids, ListQuery, NoFilter};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_conversations))
        .routes(routes!(get_conversation))
        .routes(routes!(list_messages))
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
    order: Option<String>,
}

/// List conversations, newest first, with exactly the seed's item fields.
#[utoipa::path(
    get, path = "/api/v1/conversations", tag = "Conversations",
    params(PageParams),
    responses((status = 200, body = Items<ConversationItem>), (status = 422, body = ValidationErrorBody))
)]
async fn list_conversations(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<ConversationItem>>, ApiError> {
    let found = conversations::list(&s.services, auth.scope(), q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}

/// Get a conversation (the full object).
#[utoipa::path(
    get, path = "/api/v1/conversations/{conversation_id}", tag = "Conversations",
    params(("conversation_id" = i64, Path)),
    responses((status = 200, body = Conversation), (status = 404, body = ErrorBody, example = json!({"detail": "Conversation 42 not found"})))
)]
async fn get_conversation(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<Conversation>, ApiError> {
    let [id] = path.0;
    Ok(Json(conversations::get(&s.services, auth.scope(), id).await?))
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
    let [id] = path.0;
    let found = conversations::messages(&s.services, auth.scope(), id, q.filter.0, q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}
