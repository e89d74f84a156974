//! `/api/v1/labels` and `/api/v1/conversations/{id}/labels`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use parley_domain::conversation::{Conversation, Label};
use parley_domain::ids::{ConversationId, LabelId};
use parley_domain::validation::Parsed;
use parley_services::messaging::labels::{self, CreateLabel, SetLabels, UpdateLabel};
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, Ids, JsonBody, ListQuery, NoFilter};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_labels, create_label))
        .routes(routes!(get_label, update_label, delete_label))
        .routes(routes!(set_conversation_labels))
}

impl FromBody for CreateLabel {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        labels::parse_create(body)
    }
}

impl FromBody for UpdateLabel {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        labels::parse_update(body)
    }
}

impl FromBody for SetLabels {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        labels::parse_set(body)
    }
}

const MANAGE: &str = "create, change or delete labels";

/// The workspace's labels, by name.
#[utoipa::path(
    get, path = "/api/v1/labels", tag = "Conversations",
    params(PageParams),
    responses((status = 200, body = Items<Label>), (status = 422, body = ValidationErrorBody))
)]
async fn list_labels(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<Label>>, ApiError> {
    Ok(Json(Items::new(labels::list(&s.services, auth.scope(), q.page).await?, q.page)))
}

/// Create a label (owners and admins; a member gets 403). Emits `label.created`.
#[utoipa::path(
    post, path = "/api/v1/labels", tag = "Conversations",
    request_body = CreateLabel,
    responses(
        (status = 201, body = Label),
        (status = 403, body = ErrorBody, description = "A member"),
        (status = 409, body = ErrorBody, description = "The name is taken (in any case), or the workspace has 200 labels"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn create_label(
    auth: Auth,
    State(s): State<AppState>,
    body: JsonBody<CreateLabel>,
) -> Result<Response, ApiError> {
    auth.0.refuse_member(MANAGE)?;
    let (scope, input) = (auth.scope(), body.value);
    let label = s.services.transaction(async move |work| labels::create(work, scope, input).await).await?;
    Ok((StatusCode::CREATED, Json(label)).into_response())
}

/// Get a label.
#[utoipa::path(
    get, path = "/api/v1/labels/{label_id}", tag = "Conversations",
    params(("label_id" = i64, Path)),
    responses((status = 200, body = Label), (status = 404, body = ErrorBody))
)]
async fn get_label(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<Label>, ApiError> {
    let [id] = path.0.map(LabelId);
    Ok(Json(labels::get(&s.services, auth.scope(), id).await?))
}

/// Rename, recolour or describe a label (owners and admins); a new name
/// shows on every conversation it is on. Emits `label.updated`.
#[utoipa::path(
    patch, path = "/api/v1/labels/{label_id}", tag = "Conversations",
    params(("label_id" = i64, Path)),
    request_body = UpdateLabel,
    responses(
        (status = 200, body = Label),
        (status = 403, body = ErrorBody, description = "A member"),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The new name is taken"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn update_label(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<UpdateLabel>,
) -> Result<Json<Label>, ApiError> {
    auth.0.refuse_member(MANAGE)?;
    let [id] = path.0.map(LabelId);
    let (scope, input) = (auth.scope(), body.value);
    Ok(Json(s.services.transaction(async move |work| labels::update(work, scope, id, input).await).await?))
}

/// Delete a label (owners and admins): it comes off every conversation.
/// Emits `label.deleted`.
#[utoipa::path(
    delete, path = "/api/v1/labels/{label_id}", tag = "Conversations",
    params(("label_id" = i64, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, body = ErrorBody, description = "A member"),
        (status = 404, body = ErrorBody),
    )
)]
async fn delete_label(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<StatusCode, ApiError> {
    auth.0.refuse_member(MANAGE)?;
    let [id] = path.0.map(LabelId);
    let scope = auth.scope();
    s.services.transaction(async move |work| labels::delete(work, scope, id).await).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Set a conversation's labels (replacing those it had; `[]` clears them).
/// Any member may. Emits `conversation.updated` when they change.
#[utoipa::path(
    put, path = "/api/v1/conversations/{conversation_id}/labels", tag = "Conversations",
    params(("conversation_id" = i64, Path)),
    request_body = SetLabels,
    responses(
        (status = 200, body = Conversation),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody, description = "A name no label has, or a name twice"),
    )
)]
async fn set_conversation_labels(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<SetLabels>,
) -> Result<Json<Conversation>, ApiError> {
    let [id] = path.0.map(ConversationId);
    let (scope, input) = (auth.scope(), body.value);
    Ok(Json(s.services.transaction(async move |work| labels::set_on_conversation(work, scope, id, input).await).await?))
}
