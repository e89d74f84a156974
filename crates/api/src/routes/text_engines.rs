//! `/api/v1/text-engines`: the language models agents can name.

use axum::Json;
use axum::extract::State;
use parley_domain::agent::TextEngineInfo;
use parley_services::agents;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::ApiError;
use crate::extract::{Auth, ListQuery, NoFilter};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_text_engines))
}

/// List the configured text engines.
///
/// What agents may name in `text_engine`: `builtin` (always there: offline,
/// it answers from the agent's knowledge) and each `[text_engines.NAME]` of
/// the server's configuration, with its kind and default model. Engine
/// settings such as base URLs and keys are never shown.
#[utoipa::path(
    get, path = "/api/v1/text-engines", tag = "Agents",
    params(PageParams),
    responses((status = 200, body = Items<TextEngineInfo>))
)]
async fn list_text_engines(
    _auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<TextEngineInfo>>, ApiError> {
    Ok(Json(Items::new(agents::text_engines(&s.services, q.page), q.page)))
}
