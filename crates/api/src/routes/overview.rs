//! `GET /api/v1/overview`: the home page's figures.

use axum::Json;
use axum::extract::State;
use parley_domain::overview::Overview;
use parley_domain::validation::QueryReader;
use parley_services::overview::{self, OverviewQuery};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ValidationErrorBody};
use crate::extract::{Auth, FromQuery, Params};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_overview))
}

impl FromQuery for OverviewQuery {
    fn from_query(q: &mut QueryReader) -> Self {
        overview::parse_query(q)
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `overview::parse_query`
struct OverviewParams {
    /// How many days, ending today (default 7).
    #[param(minimum = 1, maximum = 31)]
    days: Option<i64>,
    /// Where the reader's days start: minutes east of UTC (default 0; the
    /// dashboard sends the browser's offset, e.g. 60 for Paris in winter).
    #[param(minimum = -840, maximum = 840)]
    utc_offset_minutes: Option<i64>,
}

/// The workspace's last days at a glance, in the key's mode: per day the
/// calls (count, talk time), messages in and out, agent runs and failures,
/// and spend; voice-to-voice latency (p50/p95) today and over the days;
/// open handoffs, failing webhook endpoints and the balance now. Days are
/// cut at the caller's midnight (`utc_offset_minutes`); a day's figures
/// count what was created that day.
#[utoipa::path(
    get, path = "/api/v1/overview", tag = "Overview",
    params(OverviewParams),
    responses((status = 200, body = Overview), (status = 422, body = ValidationErrorBody))
)]
async fn get_overview(
    auth: Auth,
    State(s): State<AppState>,
    Params(q): Params<OverviewQuery>,
) -> Result<Json<Overview>, ApiError> {
    Ok(Json(overview::overview(&s.services, auth.scope(), q).await?))
}
