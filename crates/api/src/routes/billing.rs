//! `/api/v1/billing`: the balance, the ledger, owner credits and the
//! test-mode reset.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use parley_domain::billing::{Balance, Balances, EntryType, LedgerEntry};
use parley_domain::ids::WorkspaceId;
use parley_domain::overview::Usage;
use parley_domain::validation::{Parsed, QueryReader};
use parley_services::billing::EntryFilter;
use parley_services::billing::{self, AddCredit};
use parley_services::overview::{self, UsageQuery};
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, FromQuery, Idempotency, JsonBody, ListQuery, Params, write};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_balance))
        .routes(routes!(get_balances))
        .routes(routes!(get_usage))
        .routes(routes!(list_transactions))
        .routes(routes!(add_credit))
        .routes(routes!(reset_test_balance))
}

impl FromBody for AddCredit {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        billing::parse_credit(body)
    }
}

impl FromQuery for EntryFilter {
    fn from_query(q: &mut QueryReader) -> Self {
        billing::parse_filter(q)
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `billing::parse_filter`
struct TransactionListParams {
    /// Only entries of this type.
    #[param(inline)]
    r#type: Option<EntryType>,
    /// Only entries created after this instant (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    created_after: Option<String>,
    /// Only entries created before this instant (RFC 3339).
    #[param(value_type = Option<String>, format = DateTime)]
    created_before: Option<String>,
}

/// The balance of the key's workspace and mode.
///
/// `available_cents` is the balance less what calls in progress hold.
#[utoipa::path(
    get, path = "/api/v1/billing/balance", tag = "Billing",
    responses((status = 200, body = Balance))
)]
async fn get_balance(auth: Auth, State(s): State<AppState>) -> Result<Json<Balance>, ApiError> {
    Ok(Json(billing::balance(&s.services, auth.scope()).await?))
}

/// The balance of the session's workspace in both modes, live and test.
///
/// For a signed-in person, who may switch between the modes (the
/// dashboard's Billing page shows both). An API key or MCP grant is bound to
/// one mode and reads that mode's balance at `/api/v1/billing/balance`: 403.
#[utoipa::path(
    get, path = "/api/v1/billing/balances", tag = "Billing",
    responses(
        (status = 200, body = Balances),
        (status = 403, body = ErrorBody, description = "An API key or MCP grant"),
    )
)]
async fn get_balances(auth: Auth, State(s): State<AppState>) -> Result<Json<Balances>, ApiError> {
    auth.0.require_user()?;
    Ok(Json(billing::balances(&s.services, WorkspaceId(auth.scope().workspace_id)).await?))
}

impl FromQuery for UsageQuery {
    fn from_query(q: &mut QueryReader) -> Self {
        overview::parse_usage_query(q)
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `overview::parse_usage_query`
struct UsageParams {
    /// How many days, ending today (default 30).
    #[param(minimum = 1, maximum = 90)]
    days: Option<i64>,
    /// Where the reader's days start: minutes east of UTC (default 0).
    #[param(minimum = -840, maximum = 840)]
    utc_offset_minutes: Option<i64>,
}

/// What agents cost per day, by agent: their runs (model tokens) and
/// their calls, in the key's mode. Days are cut at the caller's midnight
/// (`utc_offset_minutes`).
#[utoipa::path(
    get, path = "/api/v1/billing/usage", tag = "Billing",
    params(UsageParams),
    responses((status = 200, body = Usage), (status = 422, body = ValidationErrorBody))
)]
async fn get_usage(
    auth: Auth,
    State(s): State<AppState>,
    Params(q): Params<UsageQuery>,
) -> Result<Json<Usage>, ApiError> {
    Ok(Json(overview::usage(&s.services, auth.scope(), q).await?))
}

/// The ledger, newest first. Entries are never changed or removed, and the
/// balance is always their sum.
#[utoipa::path(
    get, path = "/api/v1/billing/transactions", tag = "Billing",
    params(PageParams, TransactionListParams),
    responses((status = 200, body = Items<LedgerEntry>), (status = 422, body = ValidationErrorBody))
)]
async fn list_transactions(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<EntryFilter>,
) -> Result<Json<Items<LedgerEntry>>, ApiError> {
    let found = billing::transactions(&s.services, auth.scope(), &q.filter, q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}

/// Add credit to the balance of the session's workspace and mode.
///
/// Only a workspace owner, signed in (Bearer JWT), can add credit: admins,
/// members and API keys get 403.
#[utoipa::path(
    post, path = "/api/v1/billing/credits", tag = "Billing",
    params(("Idempotency-Key" = Option<String>, Header, description = "Optional; a retry replays the first response and credits once.")),
    request_body = AddCredit,
    responses(
        (status = 201, body = LedgerEntry, description = "The credit entry"),
        (status = 403, body = ErrorBody, description = "Not an owner's session"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn add_credit(
    auth: Auth,
    State(s): State<AppState>,
    idem: Idempotency,
    body: JsonBody<AddCredit>,
) -> Result<Response, ApiError> {
    auth.0.require_owner("add credit")?;
    let JsonBody { value, canonical } = body;
    let scope = auth.scope();
    let config = s.services.config().clone();
    write(&s, scope, idem, &canonical, StatusCode::CREATED, async move |work| {
        let description = value.description.as_deref().unwrap_or("Credit");
        billing::credit(work, scope, &config.billing, value.amount_cents, description).await
    })
    .await
}

/// Set the test balance back to its starting amount (test mode only).
///
/// The ledger is not rewritten: one `adjustment` entry brings the balance back.
/// Owners' and admins' sessions and API keys may; a member's session gets 403
/// (billing is managed by owners and admins).
#[utoipa::path(
    post, path = "/api/v1/billing/reset", tag = "Billing",
    responses(
        (status = 200, body = Balance),
        (status = 403, body = ErrorBody, description = "A live-mode key or session, or a member's session"),
    )
)]
async fn reset_test_balance(auth: Auth, State(s): State<AppState>) -> Result<Json<Balance>, ApiError> {
    auth.0.refuse_member("reset the test balance")?;
    let scope = auth.scope();
    let config = s.services.config().clone();
    let balance = s
        .services
        .transaction(async move |work| billing::reset_test_balance(work, scope, &config.billing).await)
        .await?;
    Ok(Json(balance))
}
