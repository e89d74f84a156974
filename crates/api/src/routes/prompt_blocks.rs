//! `/api/v1/prompt-blocks`: reusable, versioned prompt templates.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use parley_domain::ids::PromptBlockId;
use parley_domain::prompt::{PromptBlock, PromptBlockVersion};
use parley_domain::validation::{Parsed, QueryReader};
use parley_services::agents::prompt_blocks::{self as block_repo, BlockFilter};
use parley_services::agents::prompt_blocks::{self, CreatePromptBlock, UpdatePromptBlock};
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams, to_json};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, FromQuery, Idempotency, Ids, JsonBody, ListQuery, NoFilter, write};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_blocks, create_block))
        .routes(routes!(get_block, update_block, delete_block))
        .routes(routes!(list_versions))
}

impl FromBody for CreatePromptBlock {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        prompt_blocks::parse_create(body)
    }
}

impl FromBody for UpdatePromptBlock {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        prompt_blocks::parse_update(body)
    }
}

impl FromQuery for BlockFilter {
    fn from_query(q: &mut QueryReader) -> Self {
        prompt_blocks::parse_filter(q)
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `prompt_blocks::parse_filter`
struct BlockListParams {
    /// Only blocks of this kind.
    #[param(schema_with = parley_domain::schema::block_kind)]
    kind: Option<String>,
    /// Case-insensitive text in the name or slug (1–200 characters).
    #[param(min_length = 1, max_length = 200)]
    q: Option<String>,
}

/// List prompt blocks, newest first.
#[utoipa::path(
    get, path = "/api/v1/prompt-blocks", tag = "Prompt blocks",
    params(PageParams, BlockListParams),
    responses((status = 200, body = Items<PromptBlock>), (status = 422, body = ValidationErrorBody))
)]
async fn list_blocks(
    auth: Auth,
    State(s): State<AppState>,
    uri: Uri,
    q: ListQuery<BlockFilter>,
) -> Result<Response, ApiError> {
    let scope = auth.scope();
    let query = uri.query().unwrap_or_default();
    crate::cache::respond(&s.lists, &auth.0.versions, scope, block_repo::VERSION_KEY, query, || async {
        let found = prompt_blocks::list(&s.services, scope, &q.filter, q.page).await?;
        to_json(&Items::new(found, q.page))
    })
    .await
}

/// Create a prompt block (version 1).
#[utoipa::path(
    post, path = "/api/v1/prompt-blocks", tag = "Prompt blocks",
    params(("Idempotency-Key" = Option<String>, Header, description = "Optional; retries with the same key replay the first response.")),
    request_body = CreatePromptBlock,
    responses((status = 201, body = PromptBlock), (status = 409, body = ErrorBody), (status = 422, body = ValidationErrorBody))
)]
async fn create_block(
    auth: Auth,
    State(s): State<AppState>,
    idem: Idempotency,
    body: JsonBody<CreatePromptBlock>,
) -> Result<Response, ApiError> {
    let scope = auth.scope();
    let JsonBody { value, canonical } = body;
    write(&s, scope, idem, &canonical, StatusCode::CREATED, async move |work| {
        prompt_blocks::create(work, scope, value).await
    })
    .await
}

/// Get a prompt block at its current version.
#[utoipa::path(
    get, path = "/api/v1/prompt-blocks/{block_id}", tag = "Prompt blocks",
    params(("block_id" = i64, Path)),
    responses((status = 200, body = PromptBlock), (status = 404, body = ErrorBody))
)]
async fn get_block(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<PromptBlock>, ApiError> {
    let [id] = path.0;
    Ok(Json(prompt_blocks::get(&s.services, auth.scope(), PromptBlockId(id)).await?))
}

/// Update a prompt block; any change saves a new version.
#[utoipa::path(
    patch, path = "/api/v1/prompt-blocks/{block_id}", tag = "Prompt blocks",
    params(("block_id" = i64, Path)),
    request_body = UpdatePromptBlock,
    responses((status = 200, body = PromptBlock), (status = 404, body = ErrorBody), (status = 422, body = ValidationErrorBody))
)]
async fn update_block(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<UpdatePromptBlock>,
) -> Result<Json<PromptBlock>, ApiError> {
    let [id] = path.0;
    let scope = auth.scope();
    let input = body.value;
    Ok(Json(
        s.services
            .transaction(async move |work| prompt_blocks::update(work, scope, PromptBlockId(id), input).await)
            .await?,
    ))
}

/// Delete a prompt block and its versions. A block an agent still uses is a 409.
#[utoipa::path(
    delete, path = "/api/v1/prompt-blocks/{block_id}", tag = "Prompt blocks",
    params(("block_id" = i64, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody, description = "Still used by an agent"))
)]
async fn delete_block(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<StatusCode, ApiError> {
    let [id] = path.0;
    let scope = auth.scope();
    s.services.transaction(async move |work| prompt_blocks::delete(work, scope, PromptBlockId(id)).await).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A prompt block's saved versions, newest first.
#[utoipa::path(
    get, path = "/api/v1/prompt-blocks/{block_id}/versions", tag = "Prompt blocks",
    params(("block_id" = i64, Path), PageParams),
    responses((status = 200, body = Items<PromptBlockVersion>), (status = 404, body = ErrorBody))
)]
async fn list_versions(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<PromptBlockVersion>>, ApiError> {
    let [id] = path.0;
    let found = prompt_blocks::list_versions(&s.services, auth.scope(), PromptBlockId(id), q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}
