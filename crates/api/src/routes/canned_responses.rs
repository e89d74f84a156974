//! `/api/v1/canned-responses`: the team's saved replies.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use parley_domain::conversation::CannedResponse;
use parley_domain::ids::CannedResponseId;
use parley_domain::validation::{Parsed, QueryReader};
use parley_services::messaging::canned_responses::{
    self as canned, CannedFilter, CreateCannedResponse, UpdateCannedResponse,
};
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, FromQuery, Ids, JsonBody, ListQuery};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_canned, create_canned)).routes(routes!(
        get_canned,
        update_canned,
        delete_canned
    ))
}

impl FromBody for CreateCannedResponse {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        canned::parse_create(body)
    }
}

impl FromBody for UpdateCannedResponse {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        canned::parse_update(body)
    }
}

impl FromQuery for CannedFilter {
    fn from_query(q: &mut QueryReader) -> Self {
        canned::parse_filter(q)
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `canned_responses::parse_filter`
struct CannedListParams {
    /// Only those whose short code or content contains this (any case).
    #[param(min_length = 1, max_length = 100)]
    q: Option<String>,
}

const MANAGE: &str = "create, change or delete canned responses";

/// The workspace's canned responses, by short code.
#[utoipa::path(
    get, path = "/api/v1/canned-responses", tag = "Conversations",
    params(PageParams, CannedListParams),
    responses((status = 200, body = Items<CannedResponse>), (status = 422, body = ValidationErrorBody))
)]
async fn list_canned(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<CannedFilter>,
) -> Result<Json<Items<CannedResponse>>, ApiError> {
    Ok(Json(Items::new(canned::list(&s.services, auth.scope(), &q.filter, q.page).await?, q.page)))
}

/// Save a canned response (owners, admins and API keys; a member gets
/// 403). Emits `canned_response.created`.
#[utoipa::path(
    post, path = "/api/v1/canned-responses", tag = "Conversations",
    request_body = CreateCannedResponse,
    responses(
        (status = 201, body = CannedResponse),
        (status = 403, body = ErrorBody, description = "A member"),
        (status = 409, body = ErrorBody, description = "The short code is taken (in any case), or the workspace has 200"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn create_canned(
    auth: Auth,
    State(s): State<AppState>,
    body: JsonBody<CreateCannedResponse>,
) -> Result<Response, ApiError> {
    auth.0.refuse_member(MANAGE)?;
    let (scope, input) = (auth.scope(), body.value);
    let saved = s.services.transaction(async move |work| canned::create(work, scope, input).await).await?;
    Ok((StatusCode::CREATED, Json(saved)).into_response())
}

/// Get a canned response.
#[utoipa::path(
    get, path = "/api/v1/canned-responses/{canned_response_id}", tag = "Conversations",
    params(("canned_response_id" = i64, Path)),
    responses((status = 200, body = CannedResponse), (status = 404, body = ErrorBody))
)]
async fn get_canned(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<CannedResponse>, ApiError> {
    let [id] = path.0.map(CannedResponseId);
    Ok(Json(canned::get(&s.services, auth.scope(), id).await?))
}

/// Change a canned response's short code or content (owners and admins).
/// Emits `canned_response.updated`.
#[utoipa::path(
    patch, path = "/api/v1/canned-responses/{canned_response_id}", tag = "Conversations",
    params(("canned_response_id" = i64, Path)),
    request_body = UpdateCannedResponse,
    responses(
        (status = 200, body = CannedResponse),
        (status = 403, body = ErrorBody, description = "A member"),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The new short code is taken"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn update_canned(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<UpdateCannedResponse>,
) -> Result<Json<CannedResponse>, ApiError> {
    auth.0.refuse_member(MANAGE)?;
    let [id] = path.0.map(CannedResponseId);
    let (scope, input) = (auth.scope(), body.value);
    Ok(Json(s.services.transaction(async move |work| canned::update(work, scope, id, input).await).await?))
}

/// Delete a canned response (owners and admins). Emits `canned_response.deleted`.
#[utoipa::path(
    delete, path = "/api/v1/canned-responses/{canned_response_id}", tag = "Conversations",
    params(("canned_response_id" = i64, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, body = ErrorBody, description = "A member"),
        (status = 404, body = ErrorBody),
    )
)]
async fn delete_canned(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<StatusCode, ApiError> {
    auth.0.refuse_member(MANAGE)?;
    let [id] = path.0.map(CannedResponseId);
    let scope = auth.scope();
    s.services.transaction(async move |work| canned::delete(work, scope, id).await).await?;
    Ok(StatusCode::NO_CONTENT)
}
