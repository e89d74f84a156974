//! Webhook endpoints (subscriptions), their delivery log, and the event log.
//!
//! API keys may manage webhooks; among signed-in users, owners and admins.

use parley_domain::event::{Event, EventType};
use parley_domain::ids::{AttemptId, EndpointId};
use parley_domain::validation::{
    FieldError, LocPart, Page, Parsed, QueryReader, boolean, list_of, loc, parse_object, string,
};
use parley_domain::webhook::{DeliveryAttempt, EndpointStatus, WebhookEndpoint};
use parley_domain::{Scope, Timestamp};
use parley_events::signing::WebhookSecret;
use parley_events::ssrf;
use parley_store::Tx;
use parley_store::repo::events;
use parley_store::repo::webhooks::{self as repo, EndpointChanges, EndpointRow};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::tenancy::auth::Principal;
use crate::{ServiceError, ServiceResult, Services};

/// After a rotation the old secret keeps signing this long.
pub const PREVIOUS_SECRET_GRACE_S: i64 = 24 * 3600;

/// `POST /api/v1/webhooks`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"url": "https://example.com/hooks/parley", "events": ["message.received", "call.completed"], "description": "Production"}))]
pub struct CreateWebhook {
    /// An http(s) URL without credentials (up to 2,048 characters) that
    /// resolves to public addresses.
    #[schema(format = "uri", min_length = 1, max_length = 2048)]
    pub url: String,
    /// Event types to deliver (1–64 of them), or `["*"]` for all.
    #[schema(schema_with = parley_domain::schema::webhook_events)]
    pub events: Vec<String>,
    /// Up to 500 characters, or null.
    #[schema(nullable, max_length = 500)]
    pub description: Option<String>,
}

/// `PATCH /api/v1/webhooks/{webhook_id}`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"enabled": false}))]
pub struct UpdateWebhook {
    /// An http(s) URL without credentials that resolves to public addresses.
    #[schema(nullable = false, format = "uri", min_length = 1, max_length = 2048)]
    pub url: Option<String>,
    /// Replaces the whole list.
    #[schema(schema_with = parley_domain::schema::webhook_events)]
    pub events: Option<Vec<String>>,
    /// Up to 500 characters, or null to clear it.
    #[schema(value_type = Option<String>, nullable, max_length = 500)]
    pub description: Option<Option<String>>,
    /// `false` disables the endpoint; `true` re-enables it (and forgets its failure streak).
    #[schema(nullable = false)]
    pub enabled: Option<bool>,
}

/// An endpoint with its signing secret: returned at creation and rotation only.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WebhookWithSecret {
    #[serde(flatten)]
    pub endpoint: WebhookEndpoint,
    /// `whsec_…`: verify signatures with it. Shown only now.
    pub secret: String,
}

fn event_list() -> impl FnOnce(Value, &[LocPart]) -> Parsed<Vec<String>> {
    |v, l| {
        let items = list_of(64, |v, l| string(1, 100)(v, l))(v, l)?;
        let mut errors = Vec::new();
        for (i, name) in items.iter().enumerate() {
            if name != "*" && EventType::parse(name).is_none() {
                let mut at = l.to_vec();
                at.push(LocPart::Index(i));
                let mut permitted = vec!["*"];
                permitted.extend_from_slice(EventType::ALL);
                errors.push(FieldError::not_enum(at, &permitted));
            }
        }
        if items.is_empty() {
            errors.push(FieldError::new(
                l.to_vec(),
                "value_error.list.min_items",
                "ensure this value has at least 1 items",
            ));
        }
        if errors.is_empty() { Ok(items) } else { Err(errors) }
    }
}

fn target_url() -> impl FnOnce(Value, &[LocPart]) -> Parsed<String> {
    |v, l| {
        let raw = string(1, 2048)(v, l)?;
        ssrf::parse_target(&raw)
            .map(|u| u.to_string())
            .map_err(|e| vec![FieldError::new(l.to_vec(), "value_error.url", e.to_string())])
    }
}

pub fn parse_create(body: Value) -> Parsed<CreateWebhook> {
    parse_object(body, loc(&["body"]), |r| {
        let url = r.required("url", target_url());
        let events = r.required("events", event_list());
        let description = r.nullable("description", string(0, 500)).flatten();
        Some(CreateWebhook { url: url?, events: events?, description })
    })
}

pub fn parse_update(body: Value) -> Parsed<UpdateWebhook> {
    parse_object(body, loc(&["body"]), |r| {
        Some(UpdateWebhook {
            url: r.optional("url", target_url()),
            events: r.optional("events", event_list()),
            description: r.nullable("description", string(0, 500)),
            enabled: r.optional("enabled", boolean()),
        })
    })
}

/// `GET /api/v1/events` filter.
pub fn parse_event_filter(q: &mut QueryReader) -> Option<String> {
    q.string("type", 1, 100)
}

/// API keys in their own workspace, owners and admins (a member's session,
/// grant, or key acting in a workspace where its creator is a member: 403).
fn require_manager(who: &Principal) -> ServiceResult<()> {
    match who.role() {
        Some(role) if !role.can_administer() => {
            Err(ServiceError::Forbidden("Only owners and admins can manage webhooks".into()))
        }
        _ => Ok(()),
    }
}

fn not_found(id: i64) -> ServiceError {
    ServiceError::not_found("Webhook", id)
}

/// Refuses URLs that resolve to private addresses (unless allowed by configuration).
pub(crate) async fn check_url(svc: &Services, url: &str, at: &[&str]) -> ServiceResult<()> {
    check_url_at(svc, url, loc(at)).await.map_err(|e| ServiceError::Validation(vec![e]))
}

/// [`check_url`] at any location (an item of a list); the fault.
pub(crate) async fn check_url_at(svc: &Services, url: &str, at: Vec<LocPart>) -> Result<(), FieldError> {
    let parsed = ssrf::parse_target(url).map_err(|e| FieldError::new(at.clone(), "value_error.url", e.to_string()))?;
    ssrf::check_target(&parsed, svc.config.webhooks_allow_private).await.map_err(|e| match e {
        // A private target has a type of its own: the URL is well formed, but
        // where it leads is refused.
        ssrf::TargetError::Private(_) => FieldError::new(
            at,
            "value_error.url.private",
            format!("{e} (set webhooks.allow_private_targets for local development)"),
        ),
        e => FieldError::new(at, "value_error.url", e.to_string()),
    })
}

fn seal(svc: &Services, secret: &WebhookSecret) -> String {
    svc.keyring.secrets().seal(secret.expose().as_bytes())
}

/// Validates the target before any transaction (DNS can be slow).
pub async fn prepare_create(svc: &Services, who: &Principal, input: &CreateWebhook) -> ServiceResult<()> {
    require_manager(who)?;
    check_url(svc, &input.url, &["body", "url"]).await
}

pub async fn create(
    tx: &mut Tx,
    svc: &Services,
    scope: Scope,
    input: CreateWebhook,
) -> ServiceResult<WebhookWithSecret> {
    let secret = WebhookSecret::generate();
    let row =
        repo::insert_endpoint(tx, scope, &input.url, &input.events, input.description.as_deref(), &seal(svc, &secret))
            .await?;
    Ok(WebhookWithSecret { endpoint: row.to_api()?, secret: secret.expose() })
}

pub async fn list(svc: &Services, who: &Principal, page: Page) -> ServiceResult<(Vec<WebhookEndpoint>, i64)> {
    require_manager(who)?;
    let mut c = svc.db.read().await?;
    let (rows, total) = repo::list_endpoints(&mut c, who.scope, page).await?;
    Ok((rows.iter().map(EndpointRow::to_api).collect::<Result<_, _>>()?, total))
}

pub async fn get(svc: &Services, who: &Principal, id: EndpointId) -> ServiceResult<WebhookEndpoint> {
    let id = id.get();
    require_manager(who)?;
    let mut c = svc.db.read().await?;
    Ok(repo::get_endpoint(&mut c, who.scope, id).await?.ok_or_else(|| not_found(id))?.to_api()?)
}

/// Validates a changed target before any transaction.
pub async fn prepare_update(svc: &Services, who: &Principal, input: &UpdateWebhook) -> ServiceResult<()> {
    require_manager(who)?;
    match &input.url {
        Some(url) => check_url(svc, url, &["body", "url"]).await,
        None => Ok(()),
    }
}

pub async fn update(tx: &mut Tx, scope: Scope, id: EndpointId, input: UpdateWebhook) -> ServiceResult<WebhookEndpoint> {
    let id = id.get();
    let current = repo::get_endpoint(tx, scope, id).await?.ok_or_else(|| not_found(id))?;
    let (status, reason) = match input.enabled {
        Some(true) => (EndpointStatus::Active, None),
        Some(false) if current.status == EndpointStatus::Disabled => {
            (EndpointStatus::Disabled, current.disabled_reason.clone())
        }
        Some(false) => (EndpointStatus::Disabled, Some("Disabled by a user".to_owned())),
        None => (current.status, current.disabled_reason.clone()),
    };
    let url = input.url.unwrap_or_else(|| current.url.clone());
    let events = input.events.unwrap_or_else(|| current.events.0.clone());
    let description = input.description.unwrap_or_else(|| current.description.clone());
    let changes = EndpointChanges {
        url: &url,
        events: &events,
        description: description.as_deref(),
        status,
        disabled_reason: reason.as_deref(),
    };
    Ok(repo::update_endpoint(tx, scope, id, &changes).await?.ok_or_else(|| not_found(id))?.to_api()?)
}

pub async fn delete(tx: &mut Tx, who: &Principal, id: EndpointId) -> ServiceResult<()> {
    let id = id.get();
    require_manager(who)?;
    if repo::delete_endpoint(tx, who.scope, id).await? { Ok(()) } else { Err(not_found(id)) }
}

/// A new secret; the previous one keeps signing (alongside) for 24 hours.
pub async fn rotate_secret(
    tx: &mut Tx,
    svc: &Services,
    who: &Principal,
    id: EndpointId,
) -> ServiceResult<WebhookWithSecret> {
    let id = id.get();
    require_manager(who)?;
    let secret = WebhookSecret::generate();
    let until = Timestamp::now().plus_seconds(PREVIOUS_SECRET_GRACE_S);
    let row = repo::rotate_secret(tx, who.scope, id, &seal(svc, &secret), until).await?.ok_or_else(|| not_found(id))?;
    Ok(WebhookWithSecret { endpoint: row.to_api()?, secret: secret.expose() })
}

/// Queues a `webhook.test` event for this endpoint only.
pub async fn send_test(tx: &mut Tx, who: &Principal, id: EndpointId) -> ServiceResult<Event> {
    let id = id.get();
    require_manager(who)?;
    let endpoint = repo::get_endpoint(tx, who.scope, id).await?.ok_or_else(|| not_found(id))?;
    if endpoint.status != EndpointStatus::Active {
        return Err(ServiceError::Conflict(format!("Webhook {id} is disabled; enable it before sending a test event")));
    }
    let data = serde_json::json!({ "webhook_id": id, "message": "This is a test event from Parley." });
    let event = events::insert(tx, who.scope, EventType::WebhookTest, data).await?;
    repo::enqueue(tx, who.scope, id, &event.id, event.kind.as_str()).await?;
    Ok(event)
}

pub async fn list_attempts(
    svc: &Services,
    who: &Principal,
    id: EndpointId,
    page: Page,
) -> ServiceResult<(Vec<DeliveryAttempt>, i64)> {
    let id = id.get();
    require_manager(who)?;
    let mut c = svc.db.read().await?;
    repo::get_endpoint(&mut c, who.scope, id).await?.ok_or_else(|| not_found(id))?;
    Ok(repo::list_attempts(&mut c, who.scope, id, page).await?)
}

/// What a retry request queued.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RetryQueued {
    pub webhook_id: i64,
    /// The attempt whose delivery was queued again.
    pub delivery_id: i64,
    pub queued: bool,
}

pub async fn retry(tx: &mut Tx, who: &Principal, id: EndpointId, attempt_id: AttemptId) -> ServiceResult<RetryQueued> {
    let id = id.get();
    let attempt_id = attempt_id.get();
    require_manager(who)?;
    repo::get_endpoint(tx, who.scope, id).await?.ok_or_else(|| not_found(id))?;
    repo::retry_attempt(tx, who.scope, id, attempt_id)
        .await?
        .ok_or_else(|| ServiceError::not_found("Delivery", attempt_id))?;
    Ok(RetryQueued { webhook_id: id, delivery_id: attempt_id, queued: true })
}

pub async fn list_events(
    svc: &Services,
    scope: Scope,
    kind: Option<&str>,
    page: Page,
) -> ServiceResult<(Vec<Event>, i64)> {
    let mut c = svc.db.read().await?;
    Ok(events::page(&mut c, scope, kind, page).await?)
}

pub async fn get_event(svc: &Services, scope: Scope, id: &str) -> ServiceResult<Event> {
    let mut c = svc.db.read().await?;
    events::get(&mut c, scope, id).await?.ok_or_else(|| ServiceError::not_found("Event", id))
}

/// Delivers queued webhook events until `stop`: the dispatcher drains each
/// endpoint's queue as a `webhook.endpoint` job, woken by committed writes.
pub async fn dispatch(
    svc: Services,
    config: parley_events::dispatcher::DispatcherConfig,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let dispatcher = std::sync::Arc::new(parley_events::dispatcher::Dispatcher::new(
        svc.db.clone(),
        svc.keyring.secrets().clone(),
        config,
        svc.db.bell().subscribe(&[parley_store::repo::webhooks::DRAIN_KIND], None),
    ));
    std::sync::Arc::new(dispatcher.worker()).run(stop).await
}
