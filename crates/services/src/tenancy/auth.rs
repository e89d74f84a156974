//! Who is calling: API keys today, user sessions later.

use parley_domain::api_key::{ApiKey, hash_key};
use parley_domain::{Mode, Scope, Timestamp};
use parley_store::repo::api_keys;
use parley_store::repo::versions::Snapshot;

use parley_domain::user::Role;

use crate::{ServiceError, ServiceResult, Services};

/// An authenticated caller and the scope it may touch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub scope: Scope,
    pub credential: Credential,
    /// The scope's change counters when the request was authenticated; a
    /// cached list page built at these counters is still current.
    pub versions: Snapshot,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    ApiKey {
        key_id: i64,
        workspace_locked: bool,
        /// Set when an unlocked key acts on another of its creator's
        /// workspaces: there the key has the creator's role, not its own
        /// workspace's full powers.
        acting_for: Option<Member>,
    },
    /// A dashboard session (Bearer JWT).
    User { user_id: i64, role: Role },
    /// An MCP client's OAuth access token: acts for the user who consented,
    /// with the user's current role, on the MCP endpoint only.
    OAuth {
        grant_id: i64,
        user_id: i64,
        role: Role,
        workspace_locked: bool,
        /// `mcp:write` was granted (otherwise read-only tools only).
        write: bool,
    },
}

/// A user and their role in the scope's workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    pub user_id: i64,
    pub role: Role,
}

impl Principal {
    /// The same caller acting in `scope`, a workspace where its user is a
    /// `member`: user sessions and grants take the role they have there,
    /// and an API key acts for its creator with theirs. Every role check
    /// then gives the answer it gives that user over REST.
    pub fn acting_in(&self, scope: Scope, member: Member) -> Principal {
        let credential = match self.credential {
            Credential::ApiKey { key_id, workspace_locked, .. } => {
                Credential::ApiKey { key_id, workspace_locked, acting_for: Some(member) }
            }
            Credential::User { user_id, .. } => Credential::User { user_id, role: member.role },
            Credential::OAuth { grant_id, user_id, workspace_locked, write, .. } => {
                Credential::OAuth { grant_id, user_id, role: member.role, workspace_locked, write }
            }
        };
        Principal { scope, credential, versions: Snapshot::default() }
    }

    /// The role that limits this caller, if one does: none for an API key in
    /// its own workspace (a key has the workspace's full API powers).
    pub fn role(&self) -> Option<Role> {
        match self.credential {
            Credential::ApiKey { acting_for, .. } => acting_for.map(|m| m.role),
            Credential::User { role, .. } | Credential::OAuth { role, .. } => Some(role),
        }
    }

    /// The signed-in user behind a session; `None` for an API key.
    pub fn user_id(&self) -> Option<i64> {
        match self.credential {
            Credential::User { user_id, .. } | Credential::OAuth { user_id, .. } => Some(user_id),
            Credential::ApiKey { .. } => None,
        }
    }

    /// For operations only owners and admins may perform with a dashboard
    /// session (managing keys and webhooks): API keys and members get 403.
    pub fn require_administrator(&self, what: &str) -> Result<(i64, Role), ServiceError> {
        match self.credential {
            Credential::User { user_id, role } | Credential::OAuth { user_id, role, .. } if role.can_administer() => {
                Ok((user_id, role))
            }
            Credential::User { .. } | Credential::OAuth { .. } => {
                Err(ServiceError::Forbidden(format!("Only owners and admins can {what}")))
            }
            Credential::ApiKey { .. } => Err(ServiceError::Forbidden(format!(
                "API keys cannot {what}; sign in and send the session's Bearer token"
            ))),
        }
    }

    /// For operations that only a workspace owner may perform.
    pub fn require_owner(&self, what: &str) -> Result<i64, ServiceError> {
        match self.credential {
            Credential::User { user_id, role: Role::Owner } => Ok(user_id),
            Credential::User { .. } => Err(ServiceError::Forbidden(format!("Only owners can {what}"))),
            Credential::ApiKey { .. } | Credential::OAuth { .. } => Err(ServiceError::Forbidden(format!(
                "API keys and MCP grants cannot {what}; sign in and send the session's Bearer token"
            ))),
        }
    }

    /// For what a team's owners and admins set up and members only use
    /// (labels, canned responses): a member's session gets 403; API keys
    /// and MCP grants act for the workspace and may.
    pub fn refuse_member(&self, what: &str) -> Result<(), ServiceError> {
        match self.role() {
            Some(Role::Member) => Err(ServiceError::Forbidden(format!("Only owners and admins can {what}"))),
            _ => Ok(()),
        }
    }

    /// The signed-in user, for operations that need a dashboard session.
    pub fn require_user(&self) -> Result<(i64, Role), ServiceError> {
        match self.credential {
            Credential::User { user_id, role } => Ok((user_id, role)),
            Credential::ApiKey { .. } | Credential::OAuth { .. } => Err(ServiceError::Forbidden(
                "This needs a signed-in user's Bearer token, not an API key or MCP grant".into(),
            )),
        }
    }
}

/// Verifies a dashboard access token; `None` if it is invalid, expired,
/// tampered with, for another audience, or its user left the workspace.
pub async fn authenticate_bearer(svc: &Services, token: &str) -> ServiceResult<Option<Principal>> {
    Ok(crate::tenancy::identity::authenticate_jwt(svc, token).await?.map(|(user_id, role, scope, versions)| {
        Principal { scope, credential: Credential::User { user_id, role }, versions }
    }))
}

/// Why a presented key was refused. Both give the same 401 text, so a caller
/// cannot tell a made-up key from a revoked one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRejection {
    Malformed,
    Unknown,
    Revoked,
    Expired,
}

/// `last_used_at` is written at most this often per key.
const LAST_USED_INTERVAL_S: i64 = 60;

/// Checks a presented API key against the database, on every request: no
/// cache, so a revocation takes effect on the very next request everywhere.
pub async fn authenticate_api_key(svc: &crate::Services, raw: &str) -> ServiceResult<Result<Principal, KeyRejection>> {
    // The checksum rejects typos and guesses without a database round trip.
    let Some(key) = ApiKey::parse(raw) else { return Ok(Err(KeyRejection::Malformed)) };
    let mut c = svc.db.read().await?;
    let Some(found) = api_keys::find_for_auth(&mut c, &hash_key(key.expose())).await? else {
        return Ok(Err(KeyRejection::Unknown));
    };
    drop(c);
    let now = Timestamp::now();
    if found.revoked_at.is_some() {
        return Ok(Err(KeyRejection::Revoked));
    }
    if found.expires_at.is_some_and(|t| t <= now) {
        return Ok(Err(KeyRejection::Expired));
    }
    if found.livemode != key.mode().is_live() {
        // The stored mode and the prefix always agree; anything else is tampering.
        return Ok(Err(KeyRejection::Unknown));
    }
    if found.last_used_at.is_none_or(|t| t < now.plus_seconds(-LAST_USED_INTERVAL_S)) {
        // Off the request path: the write must not slow or fail the request.
        let svc = svc.clone();
        tokio::spawn(async move {
            let result = svc
                .transaction(async |work| {
                    Ok(api_keys::touch_last_used(work, found.id, now, LAST_USED_INTERVAL_S).await?)
                })
                .await;
            if let Err(e) = result {
                tracing::warn!(error = %e, key_id = found.id, "could not record API key use");
            }
        });
    }
    Ok(Ok(Principal {
        scope: Scope::new(found.workspace_id, Mode::from_livemode(found.livemode)),
        credential: Credential::ApiKey { key_id: found.id, workspace_locked: found.workspace_locked, acting_for: None },
        versions: found.versions,
    }))
}
