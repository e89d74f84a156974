//! `/api/v1/members` and `/api/v1/invitations`: who belongs to the
//! workspace, with which role, and who has been invited. Changing them
//! takes a signed-in owner or admin; only owners touch the owner role.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use parley_domain::ids::{InvitationId, UserId};
use parley_domain::user::{Invitation, Member};
use parley_domain::validation::Parsed;
use parley_services::tenancy::members::{self, CreatedInvitation, InviteRequest, UpdateMember};
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, Idempotency, Ids, JsonBody, ListQuery, NoFilter, write};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_members))
        .routes(routes!(update_member, remove_member))
        .routes(routes!(list_invitations, create_invitation))
        .routes(routes!(revoke_invitation))
}

impl FromBody for InviteRequest {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        members::parse_invite(body)
    }
}

impl FromBody for UpdateMember {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        members::parse_update(body)
    }
}

/// List the workspace's members: owners first, then admins and members,
/// each by when they joined. Anyone in the workspace may read it.
#[utoipa::path(
    get, path = "/api/v1/members", tag = "Members",
    params(PageParams),
    responses((status = 200, body = Items<Member>))
)]
async fn list_members(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<Member>>, ApiError> {
    Ok(Json(Items::paged(members::list(&s.services, &auth.0).await?, q.page)))
}

/// Change a member's role.
///
/// Only owners grant or take away the owner role; the last owner cannot be
/// demoted (409).
#[utoipa::path(
    patch, path = "/api/v1/members/{user_id}", tag = "Members",
    params(("user_id" = i64, Path)),
    request_body = UpdateMember,
    responses(
        (status = 200, body = Member),
        (status = 403, body = ErrorBody, description = "Not an owner or admin; or an admin touching the owner role"),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The workspace's last owner"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn update_member(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<UpdateMember>,
) -> Result<Json<Member>, ApiError> {
    let [user_id] = path.0;
    let who = auth.0;
    let input = body.value;
    Ok(Json(
        s.services
            .transaction(async move |work| members::update_role(work, &who, UserId(user_id), input).await)
            .await?,
    ))
}

/// Remove a member, or leave the workspace (your own user id).
///
/// Their sessions in this workspace stop working at their next request.
/// Only owners remove owners; the last owner cannot leave (409).
#[utoipa::path(
    delete, path = "/api/v1/members/{user_id}", tag = "Members",
    params(("user_id" = i64, Path)),
    responses(
        (status = 204, description = "Removed"),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The workspace's last owner"),
    )
)]
async fn remove_member(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<StatusCode, ApiError> {
    let [user_id] = path.0;
    let who = auth.0;
    s.services.transaction(async move |work| members::remove(work, &who, UserId(user_id)).await).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// List the invitations still waiting to be accepted, newest first.
#[utoipa::path(
    get, path = "/api/v1/invitations", tag = "Members",
    params(PageParams),
    responses((status = 200, body = Items<Invitation>), (status = 403, body = ErrorBody))
)]
async fn list_invitations(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<Invitation>>, ApiError> {
    Ok(Json(Items::paged(members::invitations(&s.services, &auth.0).await?, q.page)))
}

/// Invite someone by email.
///
/// The answer holds `accept_url`, a one-time link valid for 7 days, shown
/// only in this response: Parley sends no email, so pass it on. A waiting
/// invitation to the same email is replaced. Only owners invite owners.
#[utoipa::path(
    post, path = "/api/v1/invitations", tag = "Members",
    params(("Idempotency-Key" = Option<String>, Header, description = "Optional; a retry replays the first response.")),
    request_body = InviteRequest,
    responses(
        (status = 201, body = CreatedInvitation),
        (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Already a member"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn create_invitation(
    auth: Auth,
    State(s): State<AppState>,
    idem: Idempotency,
    body: JsonBody<InviteRequest>,
) -> Result<Response, ApiError> {
    // Check the role before claiming the idempotency key.
    auth.0.require_administrator("manage members")?;
    let scope = auth.scope();
    let who = auth.0;
    let services = s.services.clone();
    let JsonBody { value, canonical } = body;
    write(&s, scope, idem, &canonical, StatusCode::CREATED, async move |work| {
        members::invite(work, &services, &who, value).await
    })
    .await
}

/// Revoke a waiting invitation: its link stops working.
#[utoipa::path(
    delete, path = "/api/v1/invitations/{invitation_id}", tag = "Members",
    params(("invitation_id" = i64, Path)),
    responses(
        (status = 204, description = "Revoked"),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Already accepted, revoked (or replaced by a newer invitation to the same email), or expired"),
    )
)]
async fn revoke_invitation(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<StatusCode, ApiError> {
    let [id] = path.0;
    let who = auth.0;
    s.services.transaction(async move |work| members::revoke_invitation(work, &who, InvitationId(id)).await).await?;
    Ok(StatusCode::NO_CONTENT)
}
