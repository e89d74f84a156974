//! `/api/v1/inbox`: conversations as a team works them.

use axum::Json;
use axum::extract::State;
use parley_domain::validation::{Parsed, QueryReader};
use parley_services::messaging::inbox::{self, BulkUpdate, BulkUpdated, InboxConversation, InboxQuery, InboxSummary};
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, FromQuery, JsonBody, ListQuery};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_inbox)).routes(routes!(inbox_summary)).routes(routes!(bulk_update))
}

impl FromBody for BulkUpdate {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        inbox::parse_bulk(body)
    }
}

impl FromQuery for InboxQuery {
    fn from_query(q: &mut QueryReader) -> Self {
        inbox::parse_query(q)
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `inbox::parse_query`
struct InboxParams {
    /// `all` (default), `mine` (assigned to the signed-in member; 422 with an
    /// API key), `unassigned` (nobody's, and no agent answers), `handoffs`
    /// (a handoff to a person waits to be accepted).
    #[param(inline)]
    view: Option<parley_domain::conversation::InboxViewName>,
    #[param(inline)]
    status: Option<parley_domain::conversation::ConversationStatus>,
    /// `sms|whatsapp|email|webchat|telegram|voice|api`.
    #[param(schema_with = parley_domain::schema::channel)]
    channel: Option<String>,
    #[param(inline)]
    handler: Option<parley_domain::conversation::Handler>,
    #[param(minimum = 1)]
    agent_id: Option<i64>,
    #[param(minimum = 1)]
    assignee_user_id: Option<i64>,
    #[param(minimum = 1)]
    contact_id: Option<i64>,
    /// A label's name (any case); a name no label has matches nothing.
    #[param(min_length = 1, max_length = 50)]
    label: Option<String>,
    /// `recent` (default: last activity first) or `waiting` (who has waited
    /// longest first, then those not waiting).
    #[param(inline)]
    sort: Option<parley_domain::conversation::InboxSortName>,
}

/// The inbox: full conversations by view, filtered and sorted, each with
/// its open handoff (`null` when none).
#[utoipa::path(
    get, path = "/api/v1/inbox/conversations", tag = "Conversations",
    params(PageParams, InboxParams),
    responses((status = 200, body = Items<InboxConversation>), (status = 422, body = ValidationErrorBody))
)]
async fn list_inbox(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<InboxQuery>,
) -> Result<Json<Items<InboxConversation>>, ApiError> {
    let found = inbox::list(&s.services, auth.scope(), auth.0.user_id(), &q.filter, q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}

/// How many open conversations each view holds (`handoffs`: those
/// waiting) and the unread messages in the caller's own (`mine` and
/// `unread_mine` are null with an API key).
#[utoipa::path(
    get, path = "/api/v1/inbox/summary", tag = "Conversations",
    responses((status = 200, body = InboxSummary))
)]
async fn inbox_summary(auth: Auth, State(s): State<AppState>) -> Result<Json<InboxSummary>, ApiError> {
    Ok(Json(inbox::summary(&s.services, auth.scope(), auth.0.user_id()).await?))
}

/// Change many conversations at once: a status (as `PATCH
/// /conversations/{id}`), an assignee (as `POST /conversations/{id}/assign`),
/// or both, for 1–100 conversations.
///
/// All or none: an unknown id is a 422 naming its place in
/// `conversation_ids`, a closed conversation the 409 its own change would
/// give, and then nothing changed. Each conversation emits what its single
/// change emits (`conversation.updated`; an assignment notifies the member).
#[utoipa::path(
    post, path = "/api/v1/conversations/bulk", tag = "Conversations",
    request_body = BulkUpdate,
    responses(
        (status = 200, body = BulkUpdated),
        (status = 409, body = ErrorBody, description = "A conversation is closed"),
        (status = 422, body = ValidationErrorBody, description = "An unknown conversation or member, or `snoozed_until` missing"),
    )
)]
async fn bulk_update(
    auth: Auth,
    State(s): State<AppState>,
    body: JsonBody<BulkUpdate>,
) -> Result<Json<BulkUpdated>, ApiError> {
    let (scope, actor, input) = (auth.scope(), auth.0.user_id(), body.value);
    Ok(Json(s.services.transaction(async move |work| inbox::bulk(work, scope, actor, input).await).await?))
}
