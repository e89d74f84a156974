//! What members are told, written in the same transaction as what caused
//! it: a handoff waiting for a person (to the member it names, else to
//! every member), a note that mentions them, a conversation assigned to
//! them by someone else. The dashboard's bell reads them; its live stream
//! says when to look again.

use parley_domain::Scope;
use parley_domain::ids::ConversationId;
use parley_domain::user::{Notification, NotificationKind};
use parley_domain::validation::{Page, QueryReader};
use parley_store::Tx;
use parley_store::repo::{notifications as repo, users};
use serde::Serialize;
use utoipa::ToSchema;

use crate::tenancy::auth::Principal;
use crate::{ServiceError, ServiceResult, Services};

/// Tells each of `users` (but the actor) about `conversation_id`.
pub(crate) async fn notify(
    tx: &mut Tx,
    scope: Scope,
    users: &[i64],
    kind: NotificationKind,
    conversation_id: i64,
    actor: Option<i64>,
    text: &str,
) -> ServiceResult<()> {
    for user in users.iter().filter(|u| Some(**u) != actor) {
        repo::insert(tx, scope, *user, kind, conversation_id, actor, text).await?;
    }
    Ok(())
}

/// Every member of the scope's workspace.
pub(crate) async fn everyone(tx: &mut Tx, scope: Scope) -> ServiceResult<Vec<i64>> {
    Ok(users::members(tx, scope.workspace_id).await?.into_iter().map(|m| m.user_id).collect())
}

/// `?unread=true`: only those not read.
pub struct NotificationFilter {
    pub unread: bool,
}

pub fn parse_filter(q: &mut QueryReader) -> NotificationFilter {
    NotificationFilter { unread: q.boolean("unread").unwrap_or(false) }
}

/// A page of the caller's notifications, with how many are unread.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Notifications {
    pub items: Vec<Notification>,
    /// All matching the filter.
    pub total: i64,
    /// The caller's unread notifications (whatever the filter).
    pub unread: i64,
    pub limit: i64,
    pub offset: i64,
}

fn member(caller: &Principal) -> ServiceResult<i64> {
    caller
        .user_id()
        .ok_or_else(|| ServiceError::Forbidden("Notifications are a signed-in member's; an API key has none".into()))
}

pub async fn list(
    svc: &Services,
    caller: &Principal,
    filter: &NotificationFilter,
    page: Page,
) -> ServiceResult<Notifications> {
    let user = member(caller)?;
    let mut c = svc.db.read().await?;
    let (items, total, unread) = repo::page(&mut c, caller.scope, user, filter.unread, page).await?;
    Ok(Notifications { items, total, unread, limit: page.limit, offset: page.offset })
}

pub async fn read(tx: &mut Tx, caller: &Principal, id: i64) -> ServiceResult<()> {
    let user = member(caller)?;
    if repo::mark_read(tx, caller.scope, user, id).await? {
        Ok(())
    } else {
        Err(ServiceError::not_found("Notification", id))
    }
}

pub async fn read_all(tx: &mut Tx, caller: &Principal) -> ServiceResult<()> {
    let user = member(caller)?;
    Ok(repo::mark_all_read(tx, caller.scope, user).await?)
}

/// The words for a conversation in a notification.
pub(crate) fn about(title: &str, id: ConversationId) -> String {
    if title.trim().is_empty() { format!("conversation #{id}") } else { title.to_owned() }
}
