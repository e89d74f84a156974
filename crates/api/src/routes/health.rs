//! Liveness and readiness probes (no authentication).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ErrorBody, detail};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(healthz)).routes(routes!(readyz))
}

#[derive(Serialize, ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    status: &'static str,
}

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "Operations", responses((status = 200, body = Health)))]
async fn healthz() -> axum::Json<Health> {
    axum::Json(Health { status: "ok" })
}

/// Readiness: the database answers.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "Operations",
    responses((status = 200, body = Health), (status = 503, body = ErrorBody, description = "The database does not answer"))
)]
async fn readyz(State(state): State<AppState>) -> Response {
    match state.services.ping().await {
        Ok(()) => axum::Json(Health { status: "ready" }).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check failed");
            detail(StatusCode::SERVICE_UNAVAILABLE, "The database is unavailable")
        }
    }
}
