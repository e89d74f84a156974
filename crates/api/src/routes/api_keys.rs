//! `/api/v1/api-keys`: key management for signed-in owners and admins
//! (Bearer JWT). API keys themselves cannot manage keys.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use parley_domain::Mode;
use parley_domain::ids::ApiKeyId;
use parley_domain::validation::{Parsed, QueryReader};
use parley_domain::workspace::ApiKeyInfo;
use parley_services::tenancy::api_keys::{self, CreateApiKey, UpdateApiKey};
use serde::Serialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, FromQuery, Idempotency, Ids, JsonBody, ListQuery, write};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_keys, create_key)).routes(routes!(get_key, update_key, revoke_key))
}

impl FromBody for CreateApiKey {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        api_keys::parse_create(body)
    }
}

impl FromBody for UpdateApiKey {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        api_keys::parse_update(body)
    }
}

/// The `mode` filter of the key list.
pub struct KeyFilter(Option<Mode>);

impl FromQuery for KeyFilter {
    fn from_query(q: &mut QueryReader) -> Self {
        KeyFilter(api_keys::parse_filter(q))
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `api_keys::parse_filter`
struct KeyListParams {
    /// Only keys of this mode.
    #[param(inline)]
    mode: Option<Mode>,
}

/// A key as created: its record and the full key, shown only this once.
#[derive(Serialize, ToSchema)]
pub struct CreatedApiKey {
    #[serde(flatten)]
    pub info: ApiKeyInfo,
    /// The full key. Store it now: it cannot be shown again.
    pub key: String,
}

/// List the workspace's API keys (never their secrets), newest first.
#[utoipa::path(
    get, path = "/api/v1/api-keys", tag = "API keys",
    params(PageParams, KeyListParams),
    responses((status = 200, body = Items<ApiKeyInfo>), (status = 403, body = ErrorBody, description = "An API key, or a member"))
)]
async fn list_keys(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<KeyFilter>,
) -> Result<Json<Items<ApiKeyInfo>>, ApiError> {
    let found = api_keys::list(&s.services, &auth.0, q.filter.0, q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}

/// Create an API key. The full key is in this response only.
#[utoipa::path(
    post, path = "/api/v1/api-keys", tag = "API keys",
    params(("Idempotency-Key" = Option<String>, Header, description = "Optional; a retry replays the first response.")),
    request_body = CreateApiKey,
    responses((status = 201, body = CreatedApiKey), (status = 403, body = ErrorBody), (status = 422, body = ValidationErrorBody))
)]
async fn create_key(
    auth: Auth,
    State(s): State<AppState>,
    idem: Idempotency,
    body: JsonBody<CreateApiKey>,
) -> Result<Response, ApiError> {
    // Check the role before claiming the idempotency key.
    auth.0.require_administrator("manage API keys")?;
    let scope = auth.scope();
    let who = auth.0;
    let JsonBody { value, canonical } = body;
    write(&s, scope, idem, &canonical, StatusCode::CREATED, async move |work| {
        let created = api_keys::create(work, &who, value).await?;
        Ok(CreatedApiKey { key: created.key.expose().to_owned(), info: created.info })
    })
    .await
}

/// Get one API key (without its secret).
#[utoipa::path(
    get, path = "/api/v1/api-keys/{key_id}", tag = "API keys",
    params(("key_id" = i64, Path)),
    responses((status = 200, body = ApiKeyInfo), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody))
)]
async fn get_key(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<ApiKeyInfo>, ApiError> {
    let [id] = path.0;
    Ok(Json(api_keys::get(&s.services, &auth.0, ApiKeyId(id)).await?))
}

/// Rename a key or change `workspace_locked`.
#[utoipa::path(
    patch, path = "/api/v1/api-keys/{key_id}", tag = "API keys",
    params(("key_id" = i64, Path)),
    request_body = UpdateApiKey,
    responses((status = 200, body = ApiKeyInfo), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody))
)]
async fn update_key(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<UpdateApiKey>,
) -> Result<Json<ApiKeyInfo>, ApiError> {
    let [id] = path.0;
    let who = auth.0;
    let input = body.value;
    Ok(Json(s.services.transaction(async move |work| api_keys::update(work, &who, ApiKeyId(id), input).await).await?))
}

/// Revoke a key. It fails on its very next use, on every instance.
#[utoipa::path(
    delete, path = "/api/v1/api-keys/{key_id}", tag = "API keys",
    params(("key_id" = i64, Path)),
    responses((status = 204, description = "Revoked"), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody))
)]
async fn revoke_key(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<StatusCode, ApiError> {
    let [id] = path.0;
    let who = auth.0;
    s.services.transaction(async move |work| api_keys::revoke(work, &who, ApiKeyId(id)).await).await?;
    Ok(StatusCode::NO_CONTENT)
}
