//! `/api/v1/presence`: members' availability and the dashboard's heartbeat.

use axum::Json;
use axum::extract::State;
use parley_domain::user::MemberPresence;
use parley_domain::validation::Parsed;
use parley_services::tenancy::presence::{self, Heartbeat, PresenceFrame};
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, JsonBody, ListQuery, NoFilter};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_presence, heartbeat))
}

impl FromBody for Heartbeat {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        presence::parse_heartbeat(body)
    }
}

/// Every member of the workspace and their availability: `online` or
/// `away` while their dashboard's heartbeat beats, `offline` a minute after
/// it stops.
#[utoipa::path(
    get, path = "/api/v1/presence", tag = "Members",
    params(PageParams),
    responses((status = 200, body = Items<MemberPresence>), (status = 422, body = ValidationErrorBody))
)]
async fn list_presence(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<MemberPresence>>, ApiError> {
    let all = presence::list(&s.services, auth.scope()).await?;
    let total = all.len() as i64;
    let page: Vec<MemberPresence> = all.into_iter().skip(q.page.offset as usize).take(q.page.limit as usize).collect();
    Ok(Json(Items::new((page, total), q.page)))
}

/// The signed-in member's heartbeat (the dashboard sends one every 20 s,
/// and when they open a conversation or type in it). The scope's live
/// streams get it as an `event: presence` frame without an id (never
/// replayed): `{user_id, email, status, conversation_id, activity, at}`.
/// With an API key: 403.
#[utoipa::path(
    post, path = "/api/v1/presence", tag = "Members",
    request_body = Heartbeat,
    responses(
        (status = 200, body = PresenceFrame),
        (status = 403, body = ErrorBody, description = "An API key or MCP grant: only members have a presence"),
        (status = 404, body = ErrorBody, description = "No such conversation in this workspace and mode"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn heartbeat(
    auth: Auth,
    State(s): State<AppState>,
    body: JsonBody<Heartbeat>,
) -> Result<Json<PresenceFrame>, ApiError> {
    Ok(Json(presence::beat(&s.services, &auth.0, body.value).await?))
}
