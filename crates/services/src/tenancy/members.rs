//! A workspace's members, invitations to join it, and password resets.
//!
//! Invitations and resets are one-time links: a random token shown once
//! (to the inviter, or printed by the CLI: Parley sends no mail of its own),
//! stored only as SHA-256, used up by the request that acts on it, and
//! lapsing after a while. The link's token travels in the URL's fragment,
//! which browsers never send to a server or in a Referer.
//!
//! Role rules: owners and admins manage members and invitations; only an
//! owner grants, changes or removes the owner role; a workspace always keeps
//! one owner. Anyone may leave a workspace, except its last owner.

use parley_domain::Timestamp;
use parley_domain::ids::{InvitationId, UserId, WorkspaceId};
use parley_domain::user::{Invitation, Member, Role};
use parley_domain::validation::{Parsed, email_address, loc, one_of, parse_object, string};
use parley_store::Tx;
use parley_store::repo::invitations::{self as repo, NewInvitation};
use parley_store::repo::{sessions, users, workspaces};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::auth::Principal;
use super::identity::{self, PASSWORD_MAX, PASSWORD_MIN, Session};
use crate::{ServiceError, ServiceResult, Services};

const WHAT: &str = "manage members";
/// How long an invitation link works.
pub const INVITATION_TTL_S: i64 = 7 * 24 * 3600;
/// How long a password-reset link works.
pub const RESET_TTL_S: i64 = 3600;

/// `POST /api/v1/invitations`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"email": "sam@example.com", "role": "member"}))]
pub struct InviteRequest {
    /// Who to invite (1–320 characters).
    #[schema(min_length = 1, max_length = 320)]
    pub email: String,
    /// `owner` (owners only), `admin` or `member`.
    pub role: Role,
}

/// `PATCH /api/v1/members/{user_id}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMember {
    /// `owner` (owners only), `admin` or `member`.
    pub role: Role,
}

/// `POST /api/v1/auth/invitations/lookup`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkToken {
    /// The token from the link (after its `#`).
    #[schema(min_length = 1, max_length = 200)]
    pub token: String,
}

/// `POST /api/v1/auth/invitations/accept` and `POST /api/v1/auth/password-reset`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkRequest {
    /// The token from the link (after its `#`).
    #[schema(min_length = 1, max_length = 200)]
    pub token: String,
    /// Accepting: a new account's password, or the existing account's.
    /// Resetting: the new password. 8–1,024 characters.
    #[schema(min_length = 8, max_length = 1024)]
    pub password: String,
}

pub fn parse_invite(body: Value) -> Parsed<InviteRequest> {
    parse_object(body, loc(&["body"]), |r| {
        let email = r.required("email", email_address());
        let role = r.required("role", one_of(Role::ALL));
        Some(InviteRequest { email: email?, role: Role::parse(&role?)? })
    })
}

pub fn parse_update(body: Value) -> Parsed<UpdateMember> {
    parse_object(body, loc(&["body"]), |r| {
        let role = r.required("role", one_of(Role::ALL));
        Some(UpdateMember { role: Role::parse(&role?)? })
    })
}

pub fn parse_link_token(body: Value) -> Parsed<LinkToken> {
    parse_object(body, loc(&["body"]), |r| Some(LinkToken { token: r.required("token", string(1, 200))? }))
}

pub fn parse_link(body: Value) -> Parsed<LinkRequest> {
    parse_object(body, loc(&["body"]), |r| {
        let token = r.required("token", string(1, 200));
        let password = r.required("password", string(PASSWORD_MIN, PASSWORD_MAX));
        Some(LinkRequest { token: token?, password: password? })
    })
}

/// An invitation as created: its record and the link, shown only this once.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CreatedInvitation {
    #[serde(flatten)]
    pub invitation: Invitation,
    /// The one-time link to give the invitee. Parley sends no email: pass
    /// it on yourself. It cannot be shown again.
    pub accept_url: String,
}

/// What an invitation link offers, for the page that accepts it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct InvitationPreview {
    pub workspace_name: String,
    pub email: String,
    pub role: Role,
    pub expires_at: Timestamp,
    /// Whether an account with this email exists: accepting then takes its
    /// password, else it sets one.
    pub account_exists: bool,
}

/// A password-reset link, printed by `parley user reset-password`.
#[derive(Debug, Clone, Serialize)]
pub struct ResetLink {
    pub email: String,
    pub reset_url: String,
    pub expires_at: Timestamp,
}

fn link_gone(what: &'static str) -> ServiceError {
    ServiceError::NotFound { kind: what, id: "link".into() }
}

fn no_member(user_id: i64) -> ServiceError {
    ServiceError::not_found("Member", user_id)
}

/// Owners alone touch the owner role.
fn require_owner_for(caller: Role, from: Option<Role>, to: Option<Role>) -> ServiceResult<()> {
    if caller != Role::Owner && (from == Some(Role::Owner) || to == Some(Role::Owner)) {
        return Err(ServiceError::Forbidden("Only owners can grant, change or remove the owner role".into()));
    }
    Ok(())
}

/// Refuses a change that would leave the workspace without an owner.
async fn keep_an_owner(tx: &mut Tx, workspace_id: i64, from: Role, to: Option<Role>) -> ServiceResult<()> {
    if from == Role::Owner && to != Some(Role::Owner) && users::lock_owner_count(tx, workspace_id).await? <= 1 {
        return Err(ServiceError::Conflict(
            "This is the workspace's last owner: make someone else an owner first".into(),
        ));
    }
    Ok(())
}

/// The workspace's members. Everyone in it may see who else is (to assign
/// conversations); API keys too.
pub async fn list(svc: &Services, who: &Principal) -> ServiceResult<Vec<Member>> {
    let mut c = svc.db.read().await?;
    Ok(users::members(&mut c, who.scope.workspace_id).await?)
}

pub async fn update_role(tx: &mut Tx, who: &Principal, user_id: UserId, input: UpdateMember) -> ServiceResult<Member> {
    let user_id = user_id.get();
    let (_, caller) = who.require_administrator(WHAT)?;
    let workspace_id = who.scope.workspace_id;
    let current = users::role_in(tx, user_id, workspace_id).await?.ok_or_else(|| no_member(user_id))?;
    require_owner_for(caller, Some(current), Some(input.role))?;
    keep_an_owner(tx, workspace_id, current, Some(input.role)).await?;
    users::set_membership(tx, user_id, workspace_id, input.role).await?;
    users::members(tx, workspace_id).await?.into_iter().find(|m| m.user_id == user_id).ok_or_else(|| no_member(user_id))
}

/// Removes a member (or the caller leaves). Their sessions in this
/// workspace stop working at their next request (a session moves to
/// another workspace of theirs, if any, at its next refresh), and the API
/// keys they created here are revoked: they may have copies.
pub async fn remove(tx: &mut Tx, who: &Principal, user_id: UserId) -> ServiceResult<()> {
    let user_id = user_id.get();
    let workspace_id = who.scope.workspace_id;
    let (caller_id, caller) = who.require_user().or_else(|_| who.require_administrator(WHAT))?;
    let current = users::role_in(tx, user_id, workspace_id).await?.ok_or_else(|| no_member(user_id))?;
    if caller_id != user_id {
        who.require_administrator(WHAT)?;
        require_owner_for(caller, Some(current), None)?;
    }
    keep_an_owner(tx, workspace_id, current, None).await?;
    users::remove_membership(tx, user_id, workspace_id).await?;
    parley_store::repo::api_keys::revoke_created_by(tx, workspace_id, user_id).await?;
    Ok(())
}

/// The workspace's invitations still waiting.
pub async fn invitations(svc: &Services, who: &Principal) -> ServiceResult<Vec<Invitation>> {
    who.require_administrator(WHAT)?;
    let mut c = svc.db.read().await?;
    Ok(repo::pending(&mut c, who.scope.workspace_id).await?)
}

/// Invites someone on behalf of a signed-in owner or admin.
pub async fn invite(
    tx: &mut Tx,
    svc: &Services,
    who: &Principal,
    input: InviteRequest,
) -> ServiceResult<CreatedInvitation> {
    let (user_id, caller) = who.require_administrator(WHAT)?;
    require_owner_for(caller, None, Some(input.role))?;
    create_invitation(tx, svc, WorkspaceId(who.scope.workspace_id), Some(user_id), input).await
}

/// Creates an invitation (also used by `parley user invite`); a waiting
/// one to the same email is replaced.
pub async fn create_invitation(
    tx: &mut Tx,
    svc: &Services,
    workspace_id: WorkspaceId,
    invited_by: Option<i64>,
    input: InviteRequest,
) -> ServiceResult<CreatedInvitation> {
    let workspace_id = workspace_id.get();
    if workspaces::get(tx, workspace_id).await?.is_none() {
        return Err(ServiceError::not_found("Workspace", workspace_id));
    }
    if let Some(user) = users::find_by_email(tx, &input.email).await?
        && users::role_in(tx, user.id, workspace_id).await?.is_some()
    {
        return Err(ServiceError::Conflict(format!("{} is already a member of this workspace", input.email)));
    }
    repo::revoke_pending_for(tx, workspace_id, &input.email).await?;
    let token = identity::new_link_token("inv");
    let invitation = repo::insert(
        tx,
        &NewInvitation {
            workspace_id,
            email: &input.email,
            role: input.role,
            token_hash: &identity::hash_token(&token),
            invited_by,
            expires_at: Timestamp::now().plus_seconds(INVITATION_TTL_S),
        },
    )
    .await?;
    Ok(CreatedInvitation { invitation, accept_url: format!("{}/invitation#{token}", svc.config.public_url()) })
}

pub async fn revoke_invitation(tx: &mut Tx, who: &Principal, id: InvitationId) -> ServiceResult<Invitation> {
    let id = id.get();
    who.require_administrator(WHAT)?;
    let workspace_id = who.scope.workspace_id;
    if let Some(revoked) = repo::revoke(tx, workspace_id, id).await? {
        return Ok(revoked);
    }
    // It exists but no longer waits: say why (only a missing one is a 404).
    let why = match repo::ended(tx, workspace_id, id).await? {
        None => return Err(ServiceError::not_found("Invitation", id)),
        Some(repo::Ended::Accepted) => "was accepted",
        Some(repo::Ended::Revoked) => "was already revoked (or replaced by a newer one to the same email)",
        Some(repo::Ended::Expired) => "has expired",
    };
    Err(ServiceError::Conflict(format!("Invitation {id} {why}")))
}

/// What a valid invitation link offers; a used, revoked or lapsed one is a 404.
pub async fn look_up(svc: &Services, token: &str) -> ServiceResult<InvitationPreview> {
    let mut c = svc.db.read().await?;
    let (invitation, workspace_name) =
        repo::find_pending(&mut c, &identity::hash_token(token)).await?.ok_or_else(|| link_gone("Invitation"))?;
    let account_exists = users::find_by_email(&mut c, &invitation.email).await?.is_some();
    Ok(InvitationPreview {
        workspace_name,
        email: invitation.email,
        role: invitation.role,
        expires_at: invitation.expires_at,
        account_exists,
    })
}

/// Accepts an invitation and signs the invitee in to its workspace. An
/// existing account proves itself with its password (the link alone does
/// not hand over an account); a new one is created with the password given.
pub async fn accept(svc: &Services, token: &str, password: &str) -> ServiceResult<Session> {
    let preview = look_up(svc, token).await?;
    let user_id = if preview.account_exists {
        Some(identity::verify_credentials(svc, &preview.email, password).await?.id)
    } else {
        None
    };
    // Hashed before the transaction: argon2 takes a while.
    let new_hash = match user_id {
        None => Some(identity::hash_password(password.to_owned()).await?),
        Some(_) => None,
    };
    let mut tx = svc.begin().await?;
    let (invitation, _) =
        repo::find_pending(&mut tx, &identity::hash_token(token)).await?.ok_or_else(|| link_gone("Invitation"))?;
    if !repo::mark_accepted(&mut tx, invitation.id).await? {
        return Err(link_gone("Invitation"));
    }
    let user_id = match (user_id, new_hash) {
        (Some(id), _) => id,
        (None, Some(hash)) => match users::insert(&mut tx, &invitation.email, &hash).await? {
            Some(user) => user.id,
            // Someone made the account since the lookup: try again with its password.
            None => {
                return Err(ServiceError::Conflict(
                    "An account with this email now exists; sign in with its password".into(),
                ));
            }
        },
        (None, None) => unreachable!("a new account always has a hash"),
    };
    // Someone already in the workspace keeps the role they have.
    if users::role_in(&mut tx, user_id, invitation.workspace_id).await?.is_none() {
        users::set_membership(&mut tx, user_id, invitation.workspace_id, invitation.role).await?;
    }
    let scope = parley_domain::Scope::new(invitation.workspace_id, parley_domain::Mode::Live);
    let session = identity::start_session(svc, &mut tx, user_id, scope).await?;
    svc.commit(tx).await?;
    Ok(session)
}

/// A one-time link to set a new password (`parley user reset-password`).
pub async fn reset_link(svc: &Services, email: &str) -> ServiceResult<ResetLink> {
    let normalised = parley_domain::email::Email::parse(email)
        .map_err(|e| ServiceError::BadRequest(format!("Invalid email: {e}")))?;
    let mut tx = svc.begin().await?;
    let user = users::find_by_email(&mut tx, normalised.as_str())
        .await?
        .ok_or_else(|| ServiceError::not_found("User", normalised.as_str()))?;
    let token = identity::new_link_token("pwr");
    let expires_at = Timestamp::now().plus_seconds(RESET_TTL_S);
    repo::insert_reset(&mut tx, user.id, &identity::hash_token(&token), expires_at).await?;
    svc.commit(tx).await?;
    Ok(ResetLink {
        email: user.email,
        reset_url: format!("{}/reset-password#{token}", svc.config.public_url()),
        expires_at,
    })
}

/// Sets a new password from a reset link, ends every other session of the
/// user, and signs them in to their first workspace.
pub async fn reset_password(svc: &Services, token: &str, password: &str) -> ServiceResult<Session> {
    // A dead link costs a read, not an argon2 hash: this route takes no credential.
    let token_hash = identity::hash_token(token);
    if !repo::reset_is_valid(&mut svc.db.read().await?, &token_hash).await? {
        return Err(link_gone("Password reset"));
    }
    let hash = identity::hash_password(password.to_owned()).await?;
    let mut tx = svc.begin().await?;
    let user_id = repo::take_reset(&mut tx, &token_hash).await?.ok_or_else(|| link_gone("Password reset"))?;
    users::set_password_hash(&mut tx, user_id, &hash).await?;
    sessions::revoke_user(&mut tx, user_id).await?;
    let scope = identity::first_workspace(&mut tx, user_id).await?;
    let session = identity::start_session(svc, &mut tx, user_id, scope).await?;
    svc.commit(tx).await?;
    Ok(session)
}
