//! `/api/v1/inbox`: conversations as a team works them.

use axum::Json;
use axum::extract::State;
use parley_domain::validation::QueryReader;
use parley_services::messaging::inbox::{self, InboxConversation, InboxQuery, InboxSummary};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ValidationErrorBody};
use crate::extract::{Auth, FromQuery, ListQuery};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_inbox)).routes(routes!(inbox_summary))
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
