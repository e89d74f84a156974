//! `/api/v1/agent-runs`: what agents answered, how fast and at what cost.

use axum::Json;
use axum::extract::State;
use parley_domain::agent::{AgentRun, RunStatus};
use parley_domain::ids::RunId;
use parley_domain::validation::QueryReader;
use parley_services::agents::runs::{self, RunFilter};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromQuery, Ids, ListQuery};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_runs)).routes(routes!(get_run))
}

impl FromQuery for RunFilter {
    fn from_query(q: &mut QueryReader) -> Self {
        runs::parse_filter(q)
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `runs::parse_filter`
struct RunListParams {
    #[param(minimum = 1)]
    agent_id: Option<i64>,
    #[param(minimum = 1)]
    conversation_id: Option<i64>,
    /// `call_…`: the runs that answered the turns of one call.
    #[param(min_length = 1, max_length = 64)]
    call_id: Option<String>,
    #[param(inline)]
    status: Option<RunStatus>,
}

/// List agent runs, newest first.
///
/// Each inbound message an agent must answer queues a run; it records the
/// engine and model, tokens in and out, cost, time to the first token and
/// in total, the reply it wrote, and why it failed. Events
/// `agent.run.completed` and `agent.run.failed` carry the same object.
#[utoipa::path(
    get, path = "/api/v1/agent-runs", tag = "Agents",
    params(PageParams, RunListParams),
    responses((status = 200, body = Items<AgentRun>), (status = 422, body = ValidationErrorBody))
)]
async fn list_runs(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<RunFilter>,
) -> Result<Json<Items<AgentRun>>, ApiError> {
    let found = runs::list(&s.services, auth.scope(), &q.filter, q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}

/// Get an agent run.
#[utoipa::path(
    get, path = "/api/v1/agent-runs/{run_id}", tag = "Agents",
    params(("run_id" = i64, Path)),
    responses((status = 200, body = AgentRun), (status = 404, body = ErrorBody, example = json!({"detail": "Agent run 42 not found"})))
)]
async fn get_run(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<AgentRun>, ApiError> {
    let [id] = path.0;
    Ok(Json(runs::get(&s.services, auth.scope(), RunId(id)).await?))
}
