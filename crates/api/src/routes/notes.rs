//! `/api/v1/conversations/{id}/notes`: private notes for the team.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use parley_domain::conversation::Note;
use parley_domain::ids::ConversationId;
use parley_domain::validation::Parsed;
use parley_services::messaging::notes::{self, CreateNote};
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, Ids, JsonBody, ListQuery, NoFilter};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_notes, create_note))
}

impl FromBody for CreateNote {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        notes::parse_create(body)
    }
}

/// A conversation's private notes, oldest first.
#[utoipa::path(
    get, path = "/api/v1/conversations/{conversation_id}/notes", tag = "Conversations",
    params(("conversation_id" = i64, Path), PageParams),
    responses((status = 200, body = Items<Note>), (status = 404, body = ErrorBody), (status = 422, body = ValidationErrorBody))
)]
async fn list_notes(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<Note>>, ApiError> {
    let [id] = path.0.map(ConversationId);
    Ok(Json(Items::new(notes::list(&s.services, auth.scope(), id, q.page).await?, q.page)))
}

/// Add a private note to a conversation.
///
/// Notes are for the team: they are never sent on the conversation's
/// channel and never shown to an agent. `@` followed by a member's email
/// address mentions them (`mentions` lists who). The author is the
/// signed-in member (null with an API key). Emits `note.created`.
#[utoipa::path(
    post, path = "/api/v1/conversations/{conversation_id}/notes", tag = "Conversations",
    params(("conversation_id" = i64, Path)),
    request_body = CreateNote,
    responses(
        (status = 201, body = Note),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn create_note(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<CreateNote>,
) -> Result<Response, ApiError> {
    let [id] = path.0.map(ConversationId);
    let (scope, author, input) = (auth.scope(), auth.0.user_id(), body.value);
    let note = s.services.transaction(async move |work| notes::create(work, scope, id, author, input).await).await?;
    Ok((StatusCode::CREATED, Json(note)).into_response())
}
