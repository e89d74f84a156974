//! `/api/v1/notifications`: what the signed-in member is told.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use parley_domain::validation::QueryReader;
use parley_services::messaging::notifications::{self, NotificationFilter, Notifications};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::PageParams;
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromQuery, Ids, ListQuery};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_notifications))
        .routes(routes!(read_notification))
        .routes(routes!(read_all_notifications))
}

impl FromQuery for NotificationFilter {
    fn from_query(q: &mut QueryReader) -> Self {
        notifications::parse_filter(q)
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `notifications::parse_filter`
struct NotificationParams {
    /// Only those not read yet.
    unread: Option<bool>,
}

/// The signed-in member's notifications, newest first: a handoff waiting
/// for a person (sent to the member it names, else to every member), a
/// note that mentions them, a conversation assigned to them by someone
/// else. `unread` counts the unread ones whatever the filter. An API key
/// has none (403).
#[utoipa::path(
    get, path = "/api/v1/notifications", tag = "Members",
    params(PageParams, NotificationParams),
    responses(
        (status = 200, body = Notifications),
        (status = 403, body = ErrorBody, description = "An API key"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn list_notifications(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<NotificationFilter>,
) -> Result<Json<Notifications>, ApiError> {
    Ok(Json(notifications::list(&s.services, &auth.0, &q.filter, q.page).await?))
}

/// Mark one of the member's notifications read.
#[utoipa::path(
    post, path = "/api/v1/notifications/{notification_id}/read", tag = "Members",
    params(("notification_id" = i64, Path)),
    responses(
        (status = 204, description = "Read"),
        (status = 403, body = ErrorBody, description = "An API key"),
        (status = 404, body = ErrorBody, description = "Not one of the member's notifications"),
    )
)]
async fn read_notification(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<StatusCode, ApiError> {
    let [id] = path.0;
    let caller = auth.0.clone();
    s.services.transaction(async move |work| notifications::read(work, &caller, id).await).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Mark all the member's notifications read.
#[utoipa::path(
    post, path = "/api/v1/notifications/read-all", tag = "Members",
    responses((status = 204, description = "Read"), (status = 403, body = ErrorBody, description = "An API key"))
)]
async fn read_all_notifications(auth: Auth, State(s): State<AppState>) -> Result<StatusCode, ApiError> {
    let caller = auth.0.clone();
    s.services.transaction(async move |work| notifications::read_all(work, &caller).await).await?;
    Ok(StatusCode::NO_CONTENT)
}
