//! `/api/v1/webhooks` and `/api/v1/events`: subscriptions, their delivery
//! log, and the event log they deliver from.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use parley_domain::event::Event;
use parley_domain::ids::{AttemptId, EndpointId};
use parley_domain::validation::{Parsed, QueryReader};
use parley_domain::webhook::{DeliveryAttempt, WebhookEndpoint};
use parley_services::webhooks::{self, CreateWebhook, RetryQueued, UpdateWebhook, WebhookWithSecret};
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, FromQuery, Idempotency, Ids, JsonBody, ListQuery, NoFilter, PathText, write};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_webhooks, create_webhook))
        .routes(routes!(get_webhook, update_webhook, delete_webhook))
        .routes(routes!(rotate_secret))
        .routes(routes!(send_test))
        .routes(routes!(list_deliveries))
        .routes(routes!(retry_delivery))
        .routes(routes!(list_events))
        .routes(routes!(get_event))
        .routes(routes!(list_event_types))
}

/// One event type a webhook endpoint can subscribe to.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct EventTypeInfo {
    /// e.g. `message.received`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// What happened, in a sentence.
    pub description: &'static str,
}

/// The list of event types.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct EventTypeList {
    pub items: Vec<EventTypeInfo>,
}

/// List every event type Parley emits, with what each means (for
/// webhook subscriptions; `["*"]` subscribes to all).
#[utoipa::path(
    get, path = "/api/v1/event-types", tag = "Webhooks",
    responses((status = 200, body = EventTypeList))
)]
async fn list_event_types(_auth: Auth) -> Json<EventTypeList> {
    let items = parley_domain::event::EventType::ALL
        .iter()
        .filter_map(|t| parley_domain::event::EventType::parse(t))
        .map(|t| EventTypeInfo { kind: t.as_str(), description: t.description() })
        .collect();
    Json(EventTypeList { items })
}

impl FromBody for CreateWebhook {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        webhooks::parse_create(body)
    }
}

impl FromBody for UpdateWebhook {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        webhooks::parse_update(body)
    }
}

/// The `type` filter of the event log.
pub struct EventFilter(Option<String>);

impl FromQuery for EventFilter {
    fn from_query(q: &mut QueryReader) -> Self {
        EventFilter(webhooks::parse_event_filter(q))
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `webhooks::parse_event_filter`
struct EventListParams {
    /// Only events of this type, e.g. `agent.created` (1–100 characters).
    #[param(min_length = 1, max_length = 100)]
    r#type: Option<String>,
}

/// List webhook endpoints, newest first.
#[utoipa::path(
    get, path = "/api/v1/webhooks", tag = "Webhooks",
    params(PageParams),
    responses((status = 200, body = Items<WebhookEndpoint>), (status = 403, body = ErrorBody))
)]
async fn list_webhooks(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<WebhookEndpoint>>, ApiError> {
    let found = webhooks::list(&s.services, &auth.0, q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}

/// Create a webhook endpoint. The response carries its `whsec_…` secret, shown only now.
///
/// The URL must be http(s) and resolve only to public addresses (checked now
/// and at every delivery). Unknown event types are a 422 listing the permitted ones.
#[utoipa::path(
    post, path = "/api/v1/webhooks", tag = "Webhooks",
    params(("Idempotency-Key" = Option<String>, Header, description = "Optional; a retry replays the first response.")),
    request_body = CreateWebhook,
    responses((status = 201, body = WebhookWithSecret), (status = 403, body = ErrorBody), (status = 422, body = ValidationErrorBody))
)]
async fn create_webhook(
    auth: Auth,
    State(s): State<AppState>,
    idem: Idempotency,
    body: JsonBody<CreateWebhook>,
) -> Result<Response, ApiError> {
    let JsonBody { value, canonical } = body;
    webhooks::prepare_create(&s.services, &auth.0, &value).await?;
    let scope = auth.scope();
    let svc = s.services.clone();
    write(&s, scope, idem, &canonical, StatusCode::CREATED, async move |work| {
        webhooks::create(work, &svc, scope, value).await
    })
    .await
}

/// Get a webhook endpoint.
#[utoipa::path(
    get, path = "/api/v1/webhooks/{webhook_id}", tag = "Webhooks",
    params(("webhook_id" = i64, Path)),
    responses((status = 200, body = WebhookEndpoint), (status = 404, body = ErrorBody))
)]
async fn get_webhook(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<WebhookEndpoint>, ApiError> {
    let [id] = path.0.map(EndpointId);
    Ok(Json(webhooks::get(&s.services, &auth.0, id).await?))
}

/// Change an endpoint's URL, events or description, or enable/disable it.
#[utoipa::path(
    patch, path = "/api/v1/webhooks/{webhook_id}", tag = "Webhooks",
    params(("webhook_id" = i64, Path)),
    request_body = UpdateWebhook,
    responses((status = 200, body = WebhookEndpoint), (status = 404, body = ErrorBody), (status = 422, body = ValidationErrorBody))
)]
async fn update_webhook(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<UpdateWebhook>,
) -> Result<Json<WebhookEndpoint>, ApiError> {
    let [id] = path.0.map(EndpointId);
    let input = body.value;
    webhooks::prepare_update(&s.services, &auth.0, &input).await?;
    let scope = auth.scope();
    Ok(Json(s.services.transaction(async move |work| webhooks::update(work, scope, id, input).await).await?))
}

/// Delete an endpoint and its queued deliveries.
#[utoipa::path(
    delete, path = "/api/v1/webhooks/{webhook_id}", tag = "Webhooks",
    params(("webhook_id" = i64, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody))
)]
async fn delete_webhook(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<StatusCode, ApiError> {
    let [id] = path.0.map(EndpointId);
    let who = auth.0;
    s.services.transaction(async move |work| webhooks::delete(work, &who, id).await).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Replace the signing secret. For 24 hours the old secret keeps signing
/// too (both signatures, space-separated), so receivers can switch without
/// dropping events.
#[utoipa::path(
    post, path = "/api/v1/webhooks/{webhook_id}/rotate-secret", tag = "Webhooks",
    params(("webhook_id" = i64, Path)),
    responses((status = 200, body = WebhookWithSecret), (status = 404, body = ErrorBody))
)]
async fn rotate_secret(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
) -> Result<Json<WebhookWithSecret>, ApiError> {
    let [id] = path.0.map(EndpointId);
    let who = auth.0;
    let svc = s.services.clone();
    Ok(Json(s.services.transaction(async move |work| webhooks::rotate_secret(work, &svc, &who, id).await).await?))
}

/// Send a `webhook.test` event to this endpoint only.
#[utoipa::path(
    post, path = "/api/v1/webhooks/{webhook_id}/test", tag = "Webhooks",
    params(("webhook_id" = i64, Path)),
    responses((status = 202, body = Event, description = "Queued"), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody, description = "The endpoint is disabled"))
)]
async fn send_test(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<(StatusCode, Json<Event>), ApiError> {
    let [id] = path.0.map(EndpointId);
    let who = auth.0;
    let event = s.services.transaction(async move |work| webhooks::send_test(work, &who, id).await).await?;
    Ok((StatusCode::ACCEPTED, Json(event)))
}

/// The endpoint's delivery attempts, newest first.
#[utoipa::path(
    get, path = "/api/v1/webhooks/{webhook_id}/deliveries", tag = "Webhooks",
    params(("webhook_id" = i64, Path), PageParams),
    responses((status = 200, body = Items<DeliveryAttempt>), (status = 404, body = ErrorBody))
)]
async fn list_deliveries(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<DeliveryAttempt>>, ApiError> {
    let [id] = path.0.map(EndpointId);
    let found = webhooks::list_attempts(&s.services, &auth.0, id, q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}

/// Deliver an attempt's event again, now (even if it succeeded or gave up).
#[utoipa::path(
    post, path = "/api/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/retry", tag = "Webhooks",
    params(("webhook_id" = i64, Path), ("delivery_id" = i64, Path, description = "An attempt's `id` from the deliveries list")),
    responses((status = 202, body = RetryQueued), (status = 404, body = ErrorBody))
)]
async fn retry_delivery(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<2>,
) -> Result<(StatusCode, Json<RetryQueued>), ApiError> {
    let (id, attempt_id) = (EndpointId(path.0[0]), AttemptId(path.0[1]));
    let who = auth.0;
    let queued = s.services.transaction(async move |work| webhooks::retry(work, &who, id, attempt_id).await).await?;
    Ok((StatusCode::ACCEPTED, Json(queued)))
}

/// The event log, newest first (events are kept 30 days).
#[utoipa::path(
    get, path = "/api/v1/events", tag = "Webhooks",
    params(PageParams, EventListParams),
    responses((status = 200, body = Items<Event>))
)]
async fn list_events(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<EventFilter>,
) -> Result<Json<Items<Event>>, ApiError> {
    let found = webhooks::list_events(&s.services, auth.scope(), q.filter.0.as_deref(), q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}

/// One event.
#[utoipa::path(
    get, path = "/api/v1/events/{event_id}", tag = "Webhooks",
    params(("event_id" = String, Path, description = "`evt_…`")),
    responses((status = 200, body = Event), (status = 404, body = ErrorBody))
)]
async fn get_event(
    auth: Auth,
    State(s): State<AppState>,
    PathText(event_id): PathText,
) -> Result<Json<Event>, ApiError> {
    Ok(Json(webhooks::get_event(&s.services, auth.scope(), &event_id).await?))
}
