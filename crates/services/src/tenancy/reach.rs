//! Which workspaces a caller may act on besides the one its credential
//! names: the `workspace_locked` rule of the MCP endpoint.
//!
//! - A locked credential serves its own workspace only.
//! - An unlocked API key may act on any workspace of the user who created
//!   it (a key created without a user, by the CLI, serves its own only),
//!   in the key's mode; membership is checked on every call, so a user who
//!   leaves a workspace loses it at once.
//! - An unlocked OAuth grant may act on any workspace of the user who
//!   consented, in the grant's mode.

use parley_domain::Scope;
use parley_domain::user::Membership;
use parley_store::repo::{api_keys, users};

use crate::tenancy::auth::{Credential, Member, Principal};
use crate::{ServiceError, ServiceResult, Services};

/// Whether the caller may switch workspace at all.
pub fn may_switch(principal: &Principal) -> bool {
    matches!(
        principal.credential,
        Credential::ApiKey { workspace_locked: false, .. } | Credential::OAuth { workspace_locked: false, .. }
    )
}

/// The workspaces the caller may act on, its own first.
pub async fn workspaces(svc: &Services, principal: &Principal) -> ServiceResult<Vec<Membership>> {
    let mut c = svc.db.read().await?;
    let own = principal.scope.workspace_id;
    let mut found = match user_behind(&mut c, principal).await? {
        Some(user) if may_switch(principal) => users::memberships(&mut c, user).await?,
        _ => Vec::new(),
    };
    if let Some(i) = found.iter().position(|m| m.workspace_id == own) {
        let mine = found.remove(i);
        found.insert(0, mine);
    } else {
        let workspace = parley_store::repo::workspaces::get(&mut c, own).await?;
        let role = parley_domain::user::Role::Member;
        let name = workspace.map(|w| w.name).unwrap_or_default();
        found.insert(0, Membership { workspace_id: own, workspace_name: name, role });
    }
    Ok(found)
}

/// The caller as it acts on the workspace `workspace_id` names: itself for
/// its own (or none named); in another of its user's workspaces, when the
/// credential is unlocked, with the user's role there
/// ([`Principal::acting_in`]); refused otherwise, the same way whether the
/// workspace exists or not.
pub async fn principal_for(
    svc: &Services,
    principal: &Principal,
    workspace_id: Option<i64>,
) -> ServiceResult<Principal> {
    let own = principal.scope;
    let Some(wanted) = workspace_id.filter(|w| *w != own.workspace_id) else { return Ok(principal.clone()) };
    if !may_switch(principal) {
        return Err(ServiceError::Forbidden(format!(
            "This credential is locked to workspace {}; it cannot act on workspace {wanted}",
            own.workspace_id
        )));
    }
    let mut c = svc.db.read().await?;
    let member = match user_behind(&mut c, principal).await? {
        Some(user_id) => users::role_in(&mut c, user_id, wanted).await?.map(|role| Member { user_id, role }),
        None => None,
    };
    let Some(member) = member else {
        return Err(ServiceError::Forbidden(format!(
            "Workspace {wanted} is not one of this credential's workspaces (list_workspaces shows them)"
        )));
    };
    Ok(principal.acting_in(Scope::new(wanted, own.mode), member))
}

/// The user whose memberships an API key carries: its creator.
async fn user_behind(c: &mut impl parley_store::AsHandle, principal: &Principal) -> ServiceResult<Option<i64>> {
    Ok(match principal.credential {
        Credential::ApiKey { key_id, .. } => api_keys::get(c, key_id).await?.and_then(|k| k.created_by),
        Credential::User { user_id, .. } | Credential::OAuth { user_id, .. } => Some(user_id),
    })
}
