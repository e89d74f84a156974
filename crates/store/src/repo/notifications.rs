//! Members' notifications.

use parley_domain::user::{Notification, NotificationKind};
use parley_domain::validation::Page;
use parley_domain::{Scope, Timestamp};

use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_one};

const COLUMNS: &str = "id, kind, conversation_id, actor_user_id, text, read_at, created_at";

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    kind: NotificationKind,
    conversation_id: i64,
    actor_user_id: Option<i64>,
    text: String,
    read_at: Option<Timestamp>,
    created_at: Timestamp,
}

impl From<Row> for Notification {
    fn from(r: Row) -> Notification {
        Notification {
            id: r.id,
            kind: r.kind,
            conversation_id: r.conversation_id,
            actor_user_id: r.actor_user_id,
            text: r.text,
            read_at: r.read_at,
            created_at: r.created_at,
        }
    }
}

/// One notification for member `user_id`.
pub async fn insert(
    c: &mut impl AsHandle,
    scope: Scope,
    user_id: i64,
    kind: NotificationKind,
    conversation_id: i64,
    actor_user_id: Option<i64>,
    text: &str,
) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "INSERT INTO notifications (workspace_id, livemode, user_id, kind, conversation_id, actor_user_id, text, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
        )
        .bind_scope(scope)
        .bind(user_id)
        .bind(kind)
        .bind(conversation_id)
        .bind(actor_user_id)
        .bind(text)
        .bind(Timestamp::now())
    )?;
    Ok(())
}

/// Member `user_id`'s notifications, newest first (`unread_only`: those
/// not read), how many match, and how many are unread.
pub async fn page(
    c: &mut impl AsHandle,
    scope: Scope,
    user_id: i64,
    unread_only: bool,
    page: Page,
) -> StoreResult<(Vec<Notification>, i64, i64)> {
    let (total, unread): (i64, i64) = fetch_one!(
        c,
        sqlx::query_as(
            "SELECT COUNT(*), COUNT(*) - COUNT(read_at) FROM notifications
             WHERE workspace_id = $1 AND livemode = $2 AND user_id = $3"
        )
        .bind_scope(scope)
        .bind(user_id)
    )?;
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM notifications WHERE workspace_id = $1 AND livemode = $2 AND user_id = $3
           AND ($4 = FALSE OR read_at IS NULL)
         ORDER BY created_at DESC, id DESC LIMIT $5 OFFSET $6"
    ));
    let rows: Vec<Row> = fetch_all!(
        c,
        sqlx::query_as(sql).bind_scope(scope).bind(user_id).bind(unread_only).bind(page.limit).bind(page.offset)
    )?;
    let matching = if unread_only { unread } else { total };
    Ok((rows.into_iter().map(Notification::from).collect(), matching, unread))
}

/// Marks notification `id` of member `user_id` read; false if they have
/// no such notification.
pub async fn mark_read(c: &mut impl AsHandle, scope: Scope, user_id: i64, id: i64) -> StoreResult<bool> {
    let found: Option<(i64,)> = crate::fetch_optional!(
        c,
        sqlx::query_as(
            "UPDATE notifications SET read_at = COALESCE(read_at, $5)
             WHERE workspace_id = $1 AND livemode = $2 AND user_id = $3 AND id = $4 RETURNING id"
        )
        .bind_scope(scope)
        .bind(user_id)
        .bind(id)
        .bind(Timestamp::now())
    )?;
    Ok(found.is_some())
}

/// Marks every notification of member `user_id` read.
pub async fn mark_all_read(c: &mut impl AsHandle, scope: Scope, user_id: i64) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "UPDATE notifications SET read_at = $4 WHERE workspace_id = $1 AND livemode = $2 AND user_id = $3 AND read_at IS NULL"
        )
        .bind_scope(scope)
        .bind(user_id)
        .bind(Timestamp::now())
    )?;
    Ok(())
}
