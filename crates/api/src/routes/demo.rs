//! `POST /api/v1/demo`: a demo to look at, in test mode.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use parley_services::demo::{self, Demo};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody};
use crate::extract::Auth;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(seed_demo))
}

/// Seed a demo in test mode: an agent ("Ava (demo)") that answers from a
/// knowledge collection, a webchat channel with three visitors' chats (the
/// agent answers them within seconds), and a test
/// call on the simulated line (it ends within a minute). Nothing reaches a
/// provider and nothing costs live money. 403 in live mode; 409 while the
/// demo agent exists (archive it to seed again).
#[utoipa::path(
    post, path = "/api/v1/demo", tag = "Overview",
    responses(
        (status = 201, body = Demo, description = "Seeded"),
        (status = 402, body = ErrorBody, description = "The test balance cannot pay for the agent"),
        (status = 403, body = ErrorBody, description = "Live mode"),
        (status = 409, body = ErrorBody, description = "The demo is already here"),
    )
)]
async fn seed_demo(auth: Auth, State(s): State<AppState>) -> Result<(StatusCode, Json<Demo>), ApiError> {
    Ok((StatusCode::CREATED, Json(demo::seed(&s.services, auth.scope()).await?)))
}
