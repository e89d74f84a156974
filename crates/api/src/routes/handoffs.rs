//! Handoffs between agents and humans: `POST /api/v1/conversations/{id}/handoff`
//! and `/api/v1/handoffs`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use parley_domain::conversation::Conversation;
use parley_domain::conversation::{Author, AuthorType, Handoff};
use parley_domain::ids::{ConversationId, HandoffId};
use parley_domain::validation::{Parsed, QueryReader};
use parley_services::messaging::handoffs::HandoffFilter;
use parley_services::messaging::handoffs::{self, AcceptHandoff, Assign, CompleteHandoff, CreateHandoff, GiveBack};
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, FromQuery, Ids, JsonBody, ListQuery};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(request_handoff))
        .routes(routes!(list_handoffs))
        .routes(routes!(get_handoff))
        .routes(routes!(accept_handoff))
        .routes(routes!(complete_handoff))
        .routes(routes!(cancel_handoff))
        .routes(routes!(assign_conversation))
        .routes(routes!(give_back))
}

impl FromBody for CreateHandoff {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        handoffs::parse_create(body)
    }
}

impl FromBody for AcceptHandoff {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        handoffs::parse_accept(body)
    }
}

impl FromBody for CompleteHandoff {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        handoffs::parse_complete(body)
    }
}

impl FromBody for Assign {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        handoffs::parse_assign(body)
    }
}

impl FromBody for GiveBack {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        handoffs::parse_give_back(body)
    }
}

impl FromQuery for HandoffFilter {
    fn from_query(q: &mut QueryReader) -> Self {
        handoffs::parse_filter(q)
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `handoffs::parse_filter`
struct HandoffListParams {
    #[param(inline)]
    status: Option<parley_domain::conversation::HandoffStatus>,
    #[param(minimum = 1)]
    conversation_id: Option<i64>,
}

/// Hand a conversation to a human or an agent.
///
/// `to: human` waits for a user to accept (meanwhile `handler` is `none` and
/// no agent writes); `to: agent` takes effect at once (the handoff is
/// completed and `agent_id` answers). Emits `handoff.requested` (and
/// `handoff.completed` for agents) and `conversation.updated`.
#[utoipa::path(
    post, path = "/api/v1/conversations/{conversation_id}/handoff", tag = "Handoffs",
    params(("conversation_id" = i64, Path)),
    request_body = CreateHandoff,
    responses(
        (status = 201, body = Handoff),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The conversation is closed or already has an open handoff"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn request_handoff(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<CreateHandoff>,
) -> Result<Response, ApiError> {
    let [id] = path.0.map(ConversationId);
    let scope = auth.scope();
    let requested_by = match auth.0.user_id() {
        Some(user) => Author { kind: AuthorType::User, id: Some(user) },
        None => Author { kind: AuthorType::System, id: None },
    };
    let input = body.value;
    let handoff =
        s.services.transaction(async move |work| handoffs::request(work, scope, id, requested_by, input).await).await?;
    Ok((StatusCode::CREATED, Json(handoff)).into_response())
}

/// List handoffs, newest first.
#[utoipa::path(
    get, path = "/api/v1/handoffs", tag = "Handoffs",
    params(PageParams, HandoffListParams),
    responses((status = 200, body = Items<Handoff>), (status = 422, body = ValidationErrorBody))
)]
async fn list_handoffs(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<HandoffFilter>,
) -> Result<Json<Items<Handoff>>, ApiError> {
    let found = handoffs::list(&s.services, auth.scope(), &q.filter, q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}

/// Get a handoff.
#[utoipa::path(
    get, path = "/api/v1/handoffs/{handoff_id}", tag = "Handoffs",
    params(("handoff_id" = i64, Path)),
    responses((status = 200, body = Handoff), (status = 404, body = ErrorBody, example = json!({"detail": "Handoff 42 not found"})))
)]
async fn get_handoff(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<Handoff>, ApiError> {
    let [id] = path.0.map(HandoffId);
    Ok(Json(handoffs::get(&s.services, auth.scope(), id).await?))
}

/// Accept a requested handoff: the user (`user_id`, or the signed-in user)
/// handles the conversation (`handler: human`). Emits `handoff.accepted`.
#[utoipa::path(
    post, path = "/api/v1/handoffs/{handoff_id}/accept", tag = "Handoffs",
    params(("handoff_id" = i64, Path)),
    request_body = AcceptHandoff,
    responses(
        (status = 200, body = Handoff),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Not requested (already accepted, completed or canceled)"),
        (status = 422, body = ValidationErrorBody, description = "No user_id with an API key (`value_error.user.required_with_key`), or not a user of this workspace"),
    )
)]
async fn accept_handoff(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<AcceptHandoff>,
) -> Result<Json<Handoff>, ApiError> {
    let [id] = path.0.map(HandoffId);
    let (scope, user, input) = (auth.scope(), auth.0.user_id(), body.value);
    Ok(Json(s.services.transaction(async move |work| handoffs::accept(work, scope, id, user, input).await).await?))
}

/// Complete an accepted handoff: the agent answers again, or with
/// `close: true` the conversation closes. Emits `handoff.completed`.
#[utoipa::path(
    post, path = "/api/v1/handoffs/{handoff_id}/complete", tag = "Handoffs",
    params(("handoff_id" = i64, Path)),
    request_body = CompleteHandoff,
    responses(
        (status = 200, body = Handoff),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Not accepted"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn complete_handoff(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<CompleteHandoff>,
) -> Result<Json<Handoff>, ApiError> {
    let [id] = path.0.map(HandoffId);
    let (scope, input) = (auth.scope(), body.value);
    Ok(Json(s.services.transaction(async move |work| handoffs::complete(work, scope, id, input).await).await?))
}

/// Cancel a requested or accepted handoff: the agent answers again. Emits `handoff.canceled`.
#[utoipa::path(
    post, path = "/api/v1/handoffs/{handoff_id}/cancel", tag = "Handoffs",
    params(("handoff_id" = i64, Path)),
    responses(
        (status = 200, body = Handoff),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Already completed or canceled"),
    )
)]
async fn cancel_handoff(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<Handoff>, ApiError> {
    let [id] = path.0.map(HandoffId);
    let scope = auth.scope();
    Ok(Json(s.services.transaction(async move |work| handoffs::cancel(work, scope, id).await).await?))
}

/// Assign a conversation to a member (`user_id`), or unassign it (`null`).
///
/// Assignment says who on the team owns the conversation; it does not
/// change who answers (`handler`): a person takes over from an agent by
/// accepting a handoff. Emits `conversation.updated`; the member assigned
/// is notified (unless they assigned themselves).
#[utoipa::path(
    post, path = "/api/v1/conversations/{conversation_id}/assign", tag = "Conversations",
    params(("conversation_id" = i64, Path)),
    request_body = Assign,
    responses(
        (status = 200, body = Conversation),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The conversation is closed"),
        (status = 422, body = ValidationErrorBody, description = "`user_id` missing, or not a user of this workspace"),
    )
)]
async fn assign_conversation(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<Assign>,
) -> Result<Json<Conversation>, ApiError> {
    let [id] = path.0.map(ConversationId);
    let (scope, actor, input) = (auth.scope(), auth.0.user_id(), body.value);
    Ok(Json(s.services.transaction(async move |work| handoffs::assign(work, scope, id, actor, input).await).await?))
}

/// Give a conversation back to an agent (`agent_id`, default its agent):
/// the agent answers the contact's next message. An open handoff ends (an
/// accepted one completes, a waiting one is canceled) and the assignee is
/// cleared. Emits `conversation.updated` and the handoff's event.
#[utoipa::path(
    post, path = "/api/v1/conversations/{conversation_id}/give-back", tag = "Handoffs",
    params(("conversation_id" = i64, Path)),
    request_body = GiveBack,
    responses(
        (status = 200, body = Conversation),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The conversation is closed, has no agent and none was named, or the agent is archived"),
        (status = 422, body = ValidationErrorBody, description = "No such agent"),
    )
)]
async fn give_back(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<GiveBack>,
) -> Result<Json<Conversation>, ApiError> {
    let [id] = path.0.map(ConversationId);
    let (scope, input) = (auth.scope(), body.value);
    Ok(Json(s.services.transaction(async move |work| handoffs::give_back(work, scope, id, input).await).await?))
}
