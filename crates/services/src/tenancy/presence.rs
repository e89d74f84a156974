//! Members' presence: availability from the dashboard's heartbeat, and
//! what each is doing on a conversation (viewing, typing), passed to the
//! scope's live streams as `presence` frames without ids (a fact of the
//! moment, never replayed). Availability is kept per workspace; a member
//! whose heartbeat stopped more than `TTL` ago is offline.

use std::time::Duration;

use parley_domain::ids::ConversationId;
use parley_domain::user::{Activity, Availability, MemberPresence};
use parley_domain::validation::{Parsed, enum_value, integer, loc, parse_object};
use parley_domain::{Scope, Timestamp};
use parley_store::repo::{conversations, presence as repo, users};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::signals::Signal;
use crate::tenancy::auth::Principal;
use crate::{ServiceError, ServiceResult, Services};

/// A heartbeat older than this means the member is offline (the dashboard
/// beats every 20 s).
pub const TTL: Duration = Duration::from_secs(60);

/// `POST /api/v1/presence`: a heartbeat.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"status": "online", "conversation_id": 1, "activity": "typing"}))]
pub struct Heartbeat {
    /// `online`, `away` (the tab is hidden) or `offline` (signing out).
    pub status: Availability,
    /// The conversation the member has open, if any.
    #[schema(nullable, minimum = 1)]
    pub conversation_id: Option<i64>,
    /// What they are doing on it (with `conversation_id`): `viewing` by default.
    #[schema(nullable)]
    pub activity: Option<Activity>,
}

pub fn parse_heartbeat(body: Value) -> Parsed<Heartbeat> {
    parse_object(body, loc(&["body"]), |r| {
        let status = r.required("status", enum_value::<Availability>());
        let conversation_id = r.nullable("conversation_id", integer(1, i64::MAX)).flatten();
        let activity = r.nullable("activity", enum_value::<Activity>()).flatten();
        Some(Heartbeat { status: status?, conversation_id, activity })
    })
}

/// What the scope's streams are told (`event: presence`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PresenceFrame {
    pub user_id: i64,
    pub email: String,
    pub status: Availability,
    pub conversation_id: Option<i64>,
    pub activity: Option<Activity>,
    pub at: Timestamp,
}

/// Records `caller`'s heartbeat and tells the scope's streams (on every
/// instance). Only a signed-in member has a presence: an API key gets 403;
/// a conversation of another scope is a 404.
pub async fn beat(svc: &Services, caller: &Principal, input: Heartbeat) -> ServiceResult<PresenceFrame> {
    let (user_id, _) = caller.require_user()?;
    let scope: Scope = caller.scope;
    let now = Timestamp::now();
    let email = {
        let mut c = svc.db.read().await?;
        if let Some(id) = input.conversation_id
            && conversations::get(&mut c, scope, id).await?.is_none()
        {
            return Err(ServiceError::not_found("Conversation", ConversationId(id)));
        }
        users::members(&mut c, scope.workspace_id)
            .await?
            .into_iter()
            .find(|m| m.user_id == user_id)
            .map(|m| m.email)
            .ok_or_else(|| ServiceError::Forbidden("Only members of the workspace have a presence".into()))?
    };
    svc.transaction(async move |work| Ok(repo::beat(work, scope.workspace_id, user_id, input.status, now).await?))
        .await?;
    let frame = PresenceFrame {
        user_id,
        email,
        status: input.status,
        conversation_id: input.conversation_id,
        activity: input.conversation_id.map(|_| input.activity.unwrap_or(Activity::Viewing)),
        at: now,
    };
    let json = serde_json::to_string(&frame).map_err(|e| ServiceError::internal(e, "a presence frame"))?;
    svc.signals.send(Signal::Presence { workspace_id: scope.workspace_id, livemode: scope.livemode(), frame: json });
    Ok(frame)
}

/// Every member of the workspace and their availability now.
pub async fn list(svc: &Services, scope: Scope) -> ServiceResult<Vec<MemberPresence>> {
    let mut c = svc.db.read().await?;
    let members = users::members(&mut c, scope.workspace_id).await?;
    let beats = repo::all(&mut c, scope.workspace_id).await?;
    let fresh_after = Timestamp::now().minus_duration(TTL);
    Ok(members
        .into_iter()
        .map(|m| {
            let beat = beats.iter().find(|(user, _, _)| *user == m.user_id);
            let status = match beat {
                Some((_, status, at)) if *at >= fresh_after => *status,
                _ => Availability::Offline,
            };
            MemberPresence { user_id: m.user_id, email: m.email, status, last_seen_at: beat.map(|(_, _, at)| *at) }
        })
        .collect())
}
