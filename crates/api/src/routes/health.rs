//! Operations: liveness and readiness probes (no authentication) and the
//! Prometheus metrics (behind `metrics.token`, or on their own address).

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
    OpenApiRouter::new().routes(routes!(healthz)).routes(routes!(readyz)).routes(routes!(metrics))
}

/// `/metrics` alone, without a token: for `metrics.listen`, an address
/// only the operator's network reaches.
pub fn metrics_only(services: parley_services::Services) -> axum::Router {
    axum::Router::new()
        .route("/metrics", axum::routing::get(async |State(s): State<parley_services::Services>| exposition(&s).await))
        .with_state(services)
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

/// Readiness: the database answers (within 2 s). A load balancer sends
/// traffic only to ready instances; the 503 says why this one is not.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "Operations",
    responses(
        (status = 200, body = Health),
        (status = 503, body = ErrorBody, description = "The database does not answer; `detail` says why, e.g. \
            \"The database is unavailable: the connection was refused\""),
    )
)]
async fn readyz(State(state): State<AppState>) -> Response {
    match state.services.readiness(std::time::Duration::from_secs(2)).await {
        Ok(()) => axum::Json(Health { status: "ready" }).into_response(),
        Err(why) => {
            tracing::warn!(reason = why, "readiness check failed: the database is unavailable");
            detail(StatusCode::SERVICE_UNAVAILABLE, format!("The database is unavailable: {why}"))
        }
    }
}

const METRICS_OFF: &str = "Metrics are not served here: configure metrics.token, or read them at metrics.listen";

/// The instance's metrics in Prometheus's text format (docs/operations.md).
///
/// Served here when `metrics.token` is configured, to `Authorization:
/// Bearer <metrics.token>`; a server without one answers 404 (it may
/// serve them on the private `metrics.listen` address instead).
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "Operations",
    security(("metrics_token" = [])),
    responses(
        (status = 200, content_type = "text/plain; version=0.0.4; charset=utf-8", body = String,
            description = "Prometheus text exposition format"),
        (status = 401, body = ErrorBody, description = "Missing or wrong metrics token"),
        (status = 404, body = ErrorBody, description = "No metrics.token is configured"),
    )
)]
async fn metrics(State(state): State<AppState>, headers: axum::http::HeaderMap) -> Response {
    let Some(expected) = state.config.metrics_token.as_deref() else {
        return detail(StatusCode::NOT_FOUND, METRICS_OFF);
    };
    let presented = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if !presented.is_some_and(|p| same_secret(p, expected)) {
        let mut r = detail(StatusCode::UNAUTHORIZED, "Send the metrics token as Authorization: Bearer <token>");
        r.headers_mut().insert(axum::http::header::WWW_AUTHENTICATE, axum::http::HeaderValue::from_static("Bearer"));
        return r;
    }
    exposition(&state.services).await
}

async fn exposition(services: &parley_services::Services) -> Response {
    let text = parley_services::metrics::scrape(services).await;
    ([(axum::http::header::CONTENT_TYPE, parley_telemetry::Metrics::CONTENT_TYPE)], text).into_response()
}

/// Compares digests, so the time taken says nothing about the token.
fn same_secret(presented: &str, expected: &str) -> bool {
    use sha2::{Digest, Sha256};
    Sha256::digest(presented.as_bytes()) == Sha256::digest(expected.as_bytes())
}
