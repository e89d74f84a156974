//! Conversations and their messages.

use parley_domain::conversation::{
    Attachment, Author, AuthorType, Conversation, ConversationItem, ConversationKind, ConversationStatus, Direction,
    Handler, Message, MessageDetails, MessageStatus, preview,
};
use parley_domain::validation::Page;
use parley_domain::{Scope, Timestamp};
use serde_json::Value;
use sqlx::types::Json;

use super::{Arg, Where, bind_args, versions};
use crate::db::{Absent, forget_absent, known_absent, note_absent};
use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

pub const VERSION_KEY: &str = "conversations";

const COLUMNS: &str = "id, title, channel, kind, channel_ref, last_message_ts, last_message_preview, unread_count, \
    created_at, status, channel_id, contact_id, agent_id, handler, assignee_user_id, waiting_since, snoozed_until, updated_at, \
    unverified_sender, labels";

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    title: String,
    channel: String,
    kind: ConversationKind,
    channel_ref: String,
    last_message_ts: Option<Timestamp>,
    last_message_preview: Option<String>,
    unread_count: i64,
    created_at: Timestamp,
    status: ConversationStatus,
    channel_id: i64,
    contact_id: Option<i64>,
    agent_id: Option<i64>,
    handler: Handler,
    assignee_user_id: Option<i64>,
    waiting_since: Option<Timestamp>,
    snoozed_until: Option<Timestamp>,
    updated_at: Timestamp,
    unverified_sender: bool,
    labels: Json<Vec<String>>,
}

impl TryFrom<Row> for Conversation {
    type Error = crate::StoreError;

    fn try_from(r: Row) -> Result<Self, Self::Error> {
        Ok(Conversation {
            item: ConversationItem {
                id: r.id,
                title: r.title,
                channel: r.channel,
                kind: r.kind,
                channel_ref: r.channel_ref,
                last_message_ts: r.last_message_ts,
                last_message_preview: r.last_message_preview,
                unread_count: r.unread_count,
                created_at: r.created_at,
            },
            status: r.status,
            channel_id: r.channel_id,
            contact_id: r.contact_id,
            agent_id: r.agent_id,
            handler: r.handler,
            assignee_user_id: r.assignee_user_id,
            waiting_since: r.waiting_since,
            snoozed_until: r.snoozed_until,
            updated_at: r.updated_at,
            unverified_sender: r.unverified_sender,
            labels: r.labels.0,
        })
    }
}

/// A conversation to open.
#[derive(Debug, Clone)]
pub struct NewConversation<'a> {
    pub channel_id: i64,
    pub channel: &'a str,
    pub kind: ConversationKind,
    pub channel_ref: &'a str,
    pub title: &'a str,
    pub contact_id: Option<i64>,
    pub sender_name: Option<&'a str>,
    /// Opened by an email sender that was not authenticated (see migration 0029).
    pub unverified_sender: bool,
}

pub async fn insert(c: &mut impl AsHandle, scope: Scope, n: &NewConversation<'_>) -> StoreResult<Conversation> {
    let sql = sqlx::AssertSqlSafe(format!(
        "INSERT INTO conversations (workspace_id, livemode, channel_id, channel, kind, channel_ref, title, status,
            contact_id, sender_name, handler, unread_count, created_at, updated_at, unverified_sender)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'open', $8, $9, 'agent', 0, $10, $10, $11) RETURNING {COLUMNS}"
    ));
    let row: Row = fetch_one!(
        c,
        sqlx::query_as(sql)
            .bind_scope(scope)
            .bind(n.channel_id)
            .bind(n.channel)
            .bind(n.kind.as_str())
            .bind(n.channel_ref)
            .bind(n.title)
            .bind(n.contact_id)
            .bind(n.sender_name)
            .bind(Timestamp::now())
            .bind(n.unverified_sender)
    )?;
    forget_absent(c, &open_key(scope, n.channel_id, n.channel_ref));
    versions::bump(c, scope, VERSION_KEY).await?;
    row.try_into()
}

/// The conversation on this channel connection and address that is not closed.
pub async fn find_open(
    c: &mut impl AsHandle,
    scope: Scope,
    channel_id: i64,
    channel_ref: &str,
) -> StoreResult<Option<Conversation>> {
    find_open_for(c, scope, channel_id, channel_ref, false).await
}

/// [`find_open`], of an unverified sender's conversations when
/// `unverified_sender` (the lookahead notes only the others: those are
/// always looked up).
pub async fn find_open_for(
    c: &mut impl AsHandle,
    scope: Scope,
    channel_id: i64,
    channel_ref: &str,
    unverified_sender: bool,
) -> StoreResult<Option<Conversation>> {
    if !unverified_sender && known_absent(c, &open_key(scope, channel_id, channel_ref)) {
        return Ok(None);
    }
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM conversations
         WHERE workspace_id = $1 AND livemode = $2 AND channel_id = $3 AND channel_ref = $4 AND status <> 'closed'
           AND kind <> 'call' AND unverified_sender = $5"
    ));
    let row: Option<Row> = fetch_optional!(
        c,
        sqlx::query_as(sql).bind_scope(scope).bind(channel_id).bind(channel_ref).bind(unverified_sender)
    )?;
    row.map(Conversation::try_from).transpose()
}

pub async fn get(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<Option<Conversation>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM conversations WHERE workspace_id = $1 AND livemode = $2 AND id = $3"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(id))?;
    row.map(Conversation::try_from).transpose()
}

/// Reads conversation `id` and, on PostgreSQL, locks its row until the
/// transaction ends: a concurrent change of its handler (a person taking
/// it over) either waits for this transaction or is seen by this read.
/// SQLite has one writer: nothing changes it meanwhile.
pub async fn get_locked(tx: &mut crate::Tx, scope: Scope, id: i64) -> StoreResult<Option<Conversation>> {
    let lock = if tx.is_sole_writer() { "" } else { " FOR UPDATE" };
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM conversations WHERE workspace_id = $1 AND livemode = $2 AND id = $3{lock}"
    ));
    let row: Option<Row> = fetch_optional!(tx, sqlx::query_as(sql).bind_scope(scope).bind(id))?;
    row.map(Conversation::try_from).transpose()
}

pub async fn set_status(c: &mut impl AsHandle, scope: Scope, id: i64, status: ConversationStatus) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "UPDATE conversations SET status = $4, snoozed_until = NULL, updated_at = $5
             WHERE workspace_id = $1 AND livemode = $2 AND id = $3",
        )
        .bind_scope(scope)
        .bind(id)
        .bind(status.as_str())
        .bind(Timestamp::now())
    )?;
    versions::bump(c, scope, VERSION_KEY).await
}

/// Filters of the conversation list.
#[derive(Debug, Clone, Default)]
pub struct ConversationFilter {
    pub channel: Option<String>,
    pub kind: Option<ConversationKind>,
    pub status: Option<ConversationStatus>,
    pub contact_id: Option<i64>,
    pub agent_id: Option<i64>,
    pub handler: Option<Handler>,
    pub updated_since: Option<Timestamp>,
}

/// Conversations newest first (the documented list fields), and how many match.
pub async fn list(
    c: &mut impl AsHandle,
    scope: Scope,
    filter: &ConversationFilter,
    page: Page,
) -> StoreResult<(Vec<ConversationItem>, i64)> {
    let mut w = Where::scoped(scope, "c");
    if let Some(ch) = &filter.channel {
        w.and("c.channel = ?", [Arg::Text(ch.clone())]);
    }
    if let Some(k) = filter.kind {
        w.and("c.kind = ?", [Arg::Text(k.as_str().to_owned())]);
    }
    if let Some(st) = filter.status {
        w.and("c.status = ?", [Arg::Text(st.as_str().to_owned())]);
    }
    if let Some(id) = filter.contact_id {
        w.and("c.contact_id = ?", [Arg::I64(id)]);
    }
    if let Some(id) = filter.agent_id {
        w.and("c.agent_id = ?", [Arg::I64(id)]);
    }
    if let Some(h) = filter.handler {
        w.and("c.handler = ?", [Arg::Text(h.as_str().to_owned())]);
    }
    if let Some(t) = filter.updated_since {
        w.and("c.updated_at >= ?", [Arg::Time(t)]);
    }
    let (rows, total): (Vec<Row>, i64) = super::newest_page(c, "conversations c", COLUMNS, &w, page).await?;
    let items = rows.into_iter().map(|r| Conversation::try_from(r).map(|c| c.item)).collect::<Result<_, _>>()?;
    Ok((items, total))
}

/// Which conversations an inbox view shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxView {
    All,
    /// Assigned to this member.
    Mine(i64),
    /// Nobody's, and no agent answers them.
    Unassigned,
    /// A handoff to a person waits to be accepted.
    Handoffs,
}

/// The inbox's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxSort {
    /// Last activity first.
    Recent,
    /// Who has waited longest first (then those not waiting).
    Waiting,
}

/// The inbox's view, filters and order.
#[derive(Debug, Clone)]
pub struct InboxFilter {
    pub view: InboxView,
    pub status: Option<ConversationStatus>,
    pub channel: Option<String>,
    pub handler: Option<Handler>,
    pub agent_id: Option<i64>,
    pub assignee_user_id: Option<i64>,
    pub contact_id: Option<i64>,
    /// A label's name (any case).
    pub label: Option<String>,
    pub sort: InboxSort,
}

/// `c.id` among a subquery's few ids: SQLite runs `IN (…)` as probes into
/// the primary key; PostgreSQL can plan the same as a hash join over every
/// conversation (24 ms at 100k), so it gets an array it must probe with.
macro_rules! id_among {
    ($pg:expr, $sub:literal) => {
        if $pg { concat!("c.id = ANY(ARRAY(", $sub, "))") } else { concat!("c.id IN (", $sub, ")") }
    };
}

fn inbox_where(scope: Scope, view: InboxView, pg: bool) -> Where {
    let mut w = Where::scoped(scope, "c");
    match view {
        InboxView::All => {}
        InboxView::Mine(user_id) => {
            w.and("c.assignee_user_id = ?", [Arg::I64(user_id)]);
        }
        InboxView::Unassigned => {
            // `IN`, not `<> 'agent'`: two seeks into `conversations_triage`.
            w.and("c.handler IN ('human', 'none') AND c.assignee_user_id IS NULL", []);
        }
        InboxView::Handoffs => {
            // Driven from the few waiting handoffs (their partial index), not
            // a probe per conversation; `$1`/`$2` are the scope.
            w.and(
                id_among!(
                    pg,
                    "SELECT h.conversation_id FROM handoffs h
                       WHERE h.workspace_id = $1 AND h.livemode = $2 AND h.status = 'requested' AND h.target = 'human'"
                ),
                [],
            );
        }
    }
    w
}

/// A page of the inbox: full conversations in the view's order, and how
/// many match.
pub async fn inbox(
    c: &mut impl AsHandle,
    scope: Scope,
    filter: &InboxFilter,
    page: Page,
) -> StoreResult<(Vec<Conversation>, i64)> {
    let pg = c.is_postgres();
    let mut w = inbox_where(scope, filter.view, pg);
    if let Some(st) = filter.status {
        w.and("c.status = ?", [Arg::Text(st.as_str().to_owned())]);
    }
    if let Some(ch) = &filter.channel {
        w.and("c.channel = ?", [Arg::Text(ch.clone())]);
    }
    if let Some(h) = filter.handler {
        w.and("c.handler = ?", [Arg::Text(h.as_str().to_owned())]);
    }
    if let Some(id) = filter.agent_id {
        w.and("c.agent_id = ?", [Arg::I64(id)]);
    }
    if let Some(id) = filter.assignee_user_id {
        w.and("c.assignee_user_id = ?", [Arg::I64(id)]);
    }
    if let Some(id) = filter.contact_id {
        w.and("c.contact_id = ?", [Arg::I64(id)]);
    }
    if let Some(name) = &filter.label {
        // From the label to its conversations (`conversation_labels_label`).
        w.and(
            id_among!(
                pg,
                "SELECT cl.conversation_id FROM labels l JOIN conversation_labels cl ON cl.label_id = l.id
                   WHERE l.workspace_id = $1 AND l.livemode = $2 AND lower(l.name) = lower(?)"
            ),
            [Arg::Text(name.clone())],
        );
    }
    // Each order as its backend's index on it (migration 0036) reads it.
    let order = match (filter.sort, pg) {
        (InboxSort::Recent, _) => "c.last_message_ts DESC NULLS LAST, c.id DESC",
        (InboxSort::Waiting, false) => "COALESCE(c.waiting_since, 9223372036854775807), c.id",
        (InboxSort::Waiting, true) => "c.waiting_since ASC NULLS LAST, c.id ASC",
    };
    let n = w.next_placeholder();
    let count_sql = sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM conversations c{}", w.sql()));
    let page_sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM conversations c{} ORDER BY {order} LIMIT ${n} OFFSET ${}",
        w.sql(),
        n + 1
    ));
    let (total,): (i64,) = fetch_one!(c, bind_args!(sqlx::query_as(count_sql), w.args.clone()))?;
    let rows: Vec<Row> =
        fetch_all!(c, bind_args!(sqlx::query_as(page_sql), w.args.clone()).bind(page.limit).bind(page.offset))?;
    let items = rows.into_iter().map(Conversation::try_from).collect::<Result<_, _>>()?;
    Ok((items, total))
}

/// How many open conversations each inbox view holds (`user_id`'s for
/// Mine), and the unread messages in the member's own.
#[derive(Debug, Clone, Copy, Default)]
pub struct InboxCounts {
    pub all: i64,
    pub mine: i64,
    pub unassigned: i64,
    pub handoffs: i64,
    pub unread_mine: i64,
}

pub async fn inbox_counts(c: &mut impl AsHandle, scope: Scope, user_id: Option<i64>) -> StoreResult<InboxCounts> {
    let mut counts = InboxCounts::default();
    let pg = c.is_postgres();
    let views =
        [InboxView::All, InboxView::Unassigned, InboxView::Handoffs].into_iter().chain(user_id.map(InboxView::Mine));
    // One count per view, each a range of an index (`conversations_triage`,
    // `conversations_assignee`, `handoffs_requested`): four short scans beat
    // one scan computing four conditions per row (bench/inbox.sh).
    for view in views {
        // Open ones, as the dashboard lists them (a resolved conversation's
        // waiting handoff is not counted where it is not shown).
        let mut w = inbox_where(scope, view, pg);
        w.and("c.status = 'open'", []);
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*), CAST(COALESCE(SUM(c.unread_count), 0) AS BIGINT) FROM conversations c{}",
            w.sql()
        ));
        let (n, unread): (i64, i64) = fetch_one!(c, bind_args!(sqlx::query_as(sql), w.args))?;
        match view {
            InboxView::All => counts.all = n,
            InboxView::Mine(_) => (counts.mine, counts.unread_mine) = (n, unread),
            InboxView::Unassigned => counts.unassigned = n,
            InboxView::Handoffs => counts.handoffs = n,
        }
    }
    Ok(counts)
}

/// The fields a user may change.
#[derive(Debug, Clone)]
pub struct ConversationChanges {
    pub title: String,
    pub status: ConversationStatus,
    pub snoozed_until: Option<Timestamp>,
    pub agent_id: Option<i64>,
}

pub async fn update(c: &mut impl AsHandle, scope: Scope, id: i64, ch: &ConversationChanges) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "UPDATE conversations SET title = $4, status = $5, snoozed_until = $6, agent_id = $7, updated_at = $8
             WHERE workspace_id = $1 AND livemode = $2 AND id = $3",
        )
        .bind_scope(scope)
        .bind(id)
        .bind(&ch.title)
        .bind(ch.status.as_str())
        .bind(ch.snoozed_until)
        .bind(ch.agent_id)
        .bind(Timestamp::now())
    )?;
    versions::bump(c, scope, VERSION_KEY).await
}

/// Clears the unread count (the workspace has read up to now).
pub async fn mark_read(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "UPDATE conversations SET unread_count = 0, updated_at = $4 WHERE workspace_id = $1 AND livemode = $2 AND id = $3",
        )
        .bind_scope(scope)
        .bind(id)
        .bind(Timestamp::now())
    )?;
    versions::bump(c, scope, VERSION_KEY).await
}

/// The contact's most recently active conversation on a channel type that is not closed.
pub async fn newest_open_for_contact(
    c: &mut impl AsHandle,
    scope: Scope,
    contact_id: i64,
    channel: &str,
) -> StoreResult<Option<Conversation>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM conversations
         WHERE workspace_id = $1 AND livemode = $2 AND contact_id = $3 AND channel = $4 AND status <> 'closed'
         ORDER BY updated_at DESC, id DESC LIMIT 1"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(contact_id).bind(channel))?;
    row.map(Conversation::try_from).transpose()
}

/// Whether any conversation runs on channel connection `channel_id`.
pub async fn exist_on_channel(c: &mut impl AsHandle, scope: Scope, channel_id: i64) -> StoreResult<bool> {
    let row: Option<(i64,)> = fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT id FROM conversations WHERE workspace_id = $1 AND livemode = $2 AND channel_id = $3 LIMIT 1"
        )
        .bind_scope(scope)
        .bind(channel_id)
    )?;
    Ok(row.is_some())
}

/// Gives `from`'s conversations to `to` (a contact merge).
pub async fn move_contact(c: &mut impl AsHandle, scope: Scope, from: i64, to: i64) -> StoreResult<()> {
    // An unverified sender's conversations are not moved: they would bring
    // whoever writes as that address to `to`. `from`'s deletion detaches them.
    execute!(
        c,
        sqlx::query(
            "UPDATE conversations SET contact_id = $4
             WHERE workspace_id = $1 AND livemode = $2 AND contact_id = $3 AND NOT unverified_sender",
        )
        .bind_scope(scope)
        .bind(from)
        .bind(to)
    )?;
    versions::bump(c, scope, VERSION_KEY).await
}

/// Detaches a deleted contact from its conversations (they become
/// discoverable again).
pub async fn clear_contact(c: &mut impl AsHandle, scope: Scope, contact_id: i64) -> StoreResult<()> {
    super::repoint_contact(c, scope, "conversations", contact_id, None).await?;
    versions::bump(c, scope, VERSION_KEY).await
}

/// Sets the contact of every conversation at `channel_ref` that has none.
pub async fn link_address(
    c: &mut impl AsHandle,
    scope: Scope,
    channel_ref: &str,
    unverified_sender: bool,
    contact_id: i64,
) -> StoreResult<u64> {
    let n = execute!(
        c,
        sqlx::query(
            "UPDATE conversations SET contact_id = $4
             WHERE workspace_id = $1 AND livemode = $2 AND channel_ref = $3 AND contact_id IS NULL
               AND unverified_sender = $5",
        )
        .bind_scope(scope)
        .bind(channel_ref)
        .bind(contact_id)
        .bind(unverified_sender)
    )?;
    versions::bump(c, scope, VERSION_KEY).await?;
    Ok(n)
}

/// An address seen in conversations that belong to no contact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnlinkedAddress {
    pub channel_ref: String,
    /// Its conversations were opened by an unverified email sender.
    pub unverified_sender: bool,
    pub name_guess: Option<String>,
    pub conversation_count: i64,
    pub last_seen_at: Timestamp,
}

/// Addresses of conversations without a contact, most recently seen first.
pub async fn unlinked_addresses(c: &mut impl AsHandle, scope: Scope) -> StoreResult<Vec<UnlinkedAddress>> {
    let rows: Vec<(String, bool, Option<String>, i64, Timestamp)> = fetch_all!(
        c,
        sqlx::query_as(
            "SELECT channel_ref, unverified_sender, MAX(sender_name), COUNT(*),
                    MAX(COALESCE(last_message_ts, created_at)) AS seen
             FROM conversations WHERE workspace_id = $1 AND livemode = $2 AND contact_id IS NULL
             GROUP BY channel_ref, unverified_sender ORDER BY seen DESC, channel_ref, unverified_sender",
        )
        .bind_scope(scope)
    )?;
    Ok(rows
        .into_iter()
        .map(|(channel_ref, unverified_sender, name_guess, conversation_count, last_seen_at)| UnlinkedAddress {
            channel_ref,
            unverified_sender,
            name_guess,
            conversation_count,
            last_seen_at,
        })
        .collect())
}

// --- Messages ---------------------------------------------------------------

const MESSAGE_COLUMNS: &str = "id, conversation_id, direction, author_type, author_id, text, attachments, status, error, \
    external_id, created_at, sent_at, delivered_at, read_at, details";

#[derive(sqlx::FromRow)]
struct MessageRow {
    id: i64,
    conversation_id: i64,
    direction: Direction,
    author_type: AuthorType,
    author_id: Option<i64>,
    text: String,
    attachments: Json<Vec<Attachment>>,
    status: MessageStatus,
    error: Option<String>,
    external_id: Option<String>,
    created_at: Timestamp,
    sent_at: Option<Timestamp>,
    delivered_at: Option<Timestamp>,
    read_at: Option<Timestamp>,
    details: Json<MessageDetails>,
}

impl TryFrom<MessageRow> for Message {
    type Error = crate::StoreError;

    fn try_from(r: MessageRow) -> Result<Self, Self::Error> {
        Ok(Message {
            id: r.id,
            conversation_id: r.conversation_id,
            direction: r.direction,
            author: Author { kind: r.author_type, id: r.author_id },
            text: r.text,
            attachments: r.attachments.0,
            status: r.status,
            error: r.error,
            external_id: r.external_id,
            created_at: r.created_at,
            sent_at: r.sent_at,
            delivered_at: r.delivered_at,
            read_at: r.read_at,
            details: r.details.0,
        })
    }
}

/// A message to store.
#[derive(Debug, Clone)]
pub struct NewMessage<'a> {
    pub conversation_id: i64,
    pub channel_id: i64,
    pub direction: Direction,
    pub author: Author,
    pub text: &'a str,
    pub status: MessageStatus,
    pub external_id: Option<&'a str>,
    pub attachments: &'a [Attachment],
    pub details: &'a MessageDetails,
}

/// Attachments as stored: with their storage keys.
fn stored_attachments(attachments: &[Attachment]) -> Value {
    Value::Array(
        attachments
            .iter()
            .map(|a| {
                serde_json::json!({"filename": a.filename, "content_type": a.content_type, "size": a.size, "key": a.key})
            })
            .collect(),
    )
}

/// Stores a message and notes it on its conversation, in one round trip:
/// the last message and its preview, and for an inbound message one more
/// unread and the contact waiting since now (if not already); an outbound
/// one ends the wait.
pub async fn insert_message(c: &mut impl AsHandle, scope: Scope, m: &NewMessage<'_>) -> StoreResult<Message> {
    if let (Direction::Inbound, Some(external_id)) = (m.direction, m.external_id) {
        forget_absent(c, &inbound_key(scope, m.channel_id, external_id));
    }
    let insert = format!(
        "INSERT INTO messages (workspace_id, livemode, conversation_id, channel_id, direction, author_type, author_id,
            text, status, external_id, created_at, attachments, details)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING {MESSAGE_COLUMNS}"
    );
    let noted = match m.direction {
        Direction::Inbound => "unread_count = unread_count + 1, waiting_since = COALESCE(waiting_since, $11)",
        Direction::Outbound => "waiting_since = NULL",
    };
    let update = format!(
        "UPDATE conversations SET last_message_ts = $11, last_message_preview = $14, {noted}, updated_at = $11
         WHERE workspace_id = $1 AND livemode = $2 AND id = $3"
    );
    // Two statements, one trip to the database: SQLite runs both in one
    // call (the insert first, so that a refused message changes nothing);
    // PostgreSQL takes the update as a data-modifying WITH.
    let sql = sqlx::AssertSqlSafe(if c.is_postgres() {
        format!("WITH noted AS ({update}) {insert}")
    } else {
        format!("{insert};\n{update}")
    });
    let rows: Vec<MessageRow> = fetch_all!(
        c,
        sqlx::query_as(sql)
            .bind_scope(scope)
            .bind(m.conversation_id)
            .bind(m.channel_id)
            .bind(m.direction.as_str())
            .bind(m.author.kind.as_str())
            .bind(m.author.id)
            .bind(m.text)
            .bind(m.status.as_str())
            .bind(m.external_id)
            .bind(Timestamp::now())
            .bind(Json(stored_attachments(m.attachments)))
            .bind(Json(m.details))
            .bind(preview(m.text))
    )?;
    let row = rows.into_iter().next().ok_or_else(|| crate::StoreError::Corrupt("an insert returned no row".into()))?;
    versions::bump(c, scope, VERSION_KEY).await?;
    row.try_into()
}

/// The message a channel knows by the provider's id, in one direction (the
/// newest, should a provider reuse ids). Inbound ids are unique per channel.
pub async fn by_external_id(
    c: &mut impl AsHandle,
    scope: Scope,
    channel_id: i64,
    direction: Direction,
    external_id: &str,
) -> StoreResult<Option<Message>> {
    // The direction is written into the SQL, not bound: only then can the
    // planner use the partial indexes (`WHERE direction = 'inbound'`, …).
    if direction == Direction::Inbound && known_absent(c, &inbound_key(scope, channel_id, external_id)) {
        return Ok(None);
    }
    let direction = direction.as_str();
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages
         WHERE workspace_id = $1 AND livemode = $2 AND channel_id = $3 AND external_id = $4 AND direction = '{direction}'
         ORDER BY id DESC LIMIT 1"
    ));
    let row: Option<MessageRow> =
        fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(channel_id).bind(external_id))?;
    row.map(Message::try_from).transpose()
}

/// A conversation's messages, oldest first (or newest first with `newest_first`).
pub async fn messages(
    c: &mut impl AsHandle,
    scope: Scope,
    conversation_id: i64,
    newest_first: bool,
    page: Page,
) -> StoreResult<(Vec<Message>, i64)> {
    let (total,): (i64,) = fetch_one!(
        c,
        sqlx::query_as(
            "SELECT COUNT(*) FROM messages WHERE workspace_id = $1 AND livemode = $2 AND conversation_id = $3"
        )
        .bind_scope(scope)
        .bind(conversation_id)
    )?;
    let order = if newest_first { "DESC" } else { "ASC" };
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE workspace_id = $1 AND livemode = $2 AND conversation_id = $3
         ORDER BY id {order} LIMIT $4 OFFSET $5"
    ));
    let rows: Vec<MessageRow> =
        fetch_all!(c, sqlx::query_as(sql).bind_scope(scope).bind(conversation_id).bind(page.limit).bind(page.offset))?;
    Ok((rows.into_iter().map(Message::try_from).collect::<Result<_, _>>()?, total))
}

pub async fn get_message(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<Option<Message>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE workspace_id = $1 AND livemode = $2 AND id = $3"
    ));
    let row: Option<MessageRow> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(id))?;
    row.map(Message::try_from).transpose()
}

/// Moves an outbound message's status forward to `to` (never back):
/// the message so moved, or `None` when it did not move. Reaching a later
/// state fills the earlier timestamps it skipped; `failed` is reachable
/// only before delivery.
pub async fn advance_status(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
    to: MessageStatus,
    external_id: Option<&str>,
    error: Option<&str>,
) -> StoreResult<Option<Message>> {
    let (from, set) = match to {
        MessageStatus::Sent => ("'queued'", "sent_at = $5"),
        MessageStatus::Delivered => ("'queued', 'sent'", "sent_at = COALESCE(sent_at, $5), delivered_at = $5"),
        MessageStatus::Read => (
            "'queued', 'sent', 'delivered'",
            "sent_at = COALESCE(sent_at, $5), delivered_at = COALESCE(delivered_at, $5), read_at = $5",
        ),
        MessageStatus::Failed => ("'queued', 'sent'", "error = $7"),
        MessageStatus::Queued | MessageStatus::Received => return Ok(None),
    };
    // RETURNING: the caller's event needs the row (no re-read in the
    // courier's transaction).
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE messages SET status = $4, {set}, external_id = COALESCE($6, external_id)
         WHERE workspace_id = $1 AND livemode = $2 AND id = $3 AND direction = 'outbound' AND status IN ({from})
         RETURNING {MESSAGE_COLUMNS}"
    ));
    let row: Option<MessageRow> = fetch_optional!(
        c,
        sqlx::query_as(sql)
            .bind_scope(scope)
            .bind(id)
            .bind(to.as_str())
            .bind(Timestamp::now())
            .bind(external_id)
            .bind(error)
    )?;
    row.map(Message::try_from).transpose()
}

/// Stamps `read_at` on the conversation's inbound messages not yet read
/// (the read receipts a webchat visitor sees).
pub async fn mark_inbound_read(c: &mut impl AsHandle, scope: Scope, conversation_id: i64) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "UPDATE messages SET read_at = $4
             WHERE workspace_id = $1 AND livemode = $2 AND conversation_id = $3 AND direction = 'inbound'
               AND read_at IS NULL",
        )
        .bind_scope(scope)
        .bind(conversation_id)
        .bind(Timestamp::now())
    )?;
    Ok(())
}

/// Who handles a conversation now, and the user assigned to it.
pub async fn set_handler(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
    handler: Handler,
    assignee_user_id: Option<i64>,
    agent_id: Option<i64>,
) -> StoreResult<Option<Conversation>> {
    // RETURNING: the caller's `conversation.updated` event needs the row,
    // and a re-read would be one more statement in the writer's transaction.
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE conversations SET handler = $4, assignee_user_id = $5, agent_id = $6, updated_at = $7
         WHERE workspace_id = $1 AND livemode = $2 AND id = $3 RETURNING {COLUMNS}"
    ));
    let row: Option<Row> = fetch_optional!(
        c,
        sqlx::query_as(sql)
            .bind_scope(scope)
            .bind(id)
            .bind(handler.as_str())
            .bind(assignee_user_id)
            .bind(agent_id)
            .bind(Timestamp::now())
    )?;
    let Some(row) = row else { return Ok(None) };
    versions::bump(c, scope, VERSION_KEY).await?;
    Conversation::try_from(row).map(Some)
}

/// The conversation's latest `limit` messages, oldest first.
pub async fn recent_messages(
    c: &mut impl AsHandle,
    scope: Scope,
    conversation_id: i64,
    limit: i64,
) -> StoreResult<Vec<Message>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE workspace_id = $1 AND livemode = $2 AND conversation_id = $3
         ORDER BY id DESC LIMIT $4"
    ));
    let rows: Vec<MessageRow> = fetch_all!(c, sqlx::query_as(sql).bind_scope(scope).bind(conversation_id).bind(limit))?;
    let mut messages = rows.into_iter().map(Message::try_from).collect::<Result<Vec<_>, _>>()?;
    messages.reverse();
    Ok(messages)
}

/// What an answer in a conversation reads besides its messages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnswerFacts {
    pub workspace_name: String,
    /// When the conversation was last handed off.
    pub handed_off_at: Option<Timestamp>,
    /// Whether members shared notes with the agent in it.
    pub has_agent_notes: bool,
}

/// [`AnswerFacts`] of a conversation, in one statement (a statement is a
/// round trip; most conversations have no handoff and no notes).
pub async fn answer_facts(c: &mut impl AsHandle, scope: Scope, conversation_id: i64) -> StoreResult<AnswerFacts> {
    let (workspace_name, handed_off_at, has_agent_notes): (Option<String>, Option<Timestamp>, bool) = fetch_one!(
        c,
        sqlx::query_as(
            "SELECT (SELECT name FROM workspaces WHERE id = $1),
                    (SELECT created_at FROM handoffs
                     WHERE workspace_id = $1 AND livemode = $2 AND conversation_id = $3
                     ORDER BY created_at DESC LIMIT 1),
                    EXISTS (SELECT 1 FROM conversation_notes
                            WHERE workspace_id = $1 AND livemode = $2 AND conversation_id = $3 AND for_agent)"
        )
        .bind_scope(scope)
        .bind(conversation_id)
    )?;
    Ok(AnswerFacts { workspace_name: workspace_name.unwrap_or_default(), handed_off_at, has_agent_notes })
}

/// Keeps a delivery report for an outbound message whose provider id is
/// not recorded yet (the provider called back before its answer to the
/// send was stored).
pub async fn keep_early_report(
    c: &mut impl AsHandle,
    scope: Scope,
    channel_id: i64,
    external_id: &str,
    status: MessageStatus,
    error: Option<&str>,
) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "INSERT INTO early_status_reports (workspace_id, livemode, channel_id, external_id, status, error, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind_scope(scope)
        .bind(channel_id)
        .bind(external_id)
        .bind(status.as_str())
        .bind(error)
        .bind(Timestamp::now())
    )?;
    Ok(())
}

/// Removes and returns, in arrival order, the reports kept for the message
/// the provider calls `external_id` on the channel.
pub async fn take_early_reports(
    c: &mut impl AsHandle,
    scope: Scope,
    channel_id: i64,
    external_id: &str,
) -> StoreResult<Vec<(MessageStatus, Option<String>)>> {
    let rows: Vec<(i64, String, Option<String>)> = fetch_all!(
        c,
        sqlx::query_as(
            "DELETE FROM early_status_reports
             WHERE workspace_id = $1 AND livemode = $2 AND channel_id = $3 AND external_id = $4
             RETURNING id, status, error",
        )
        .bind_scope(scope)
        .bind(channel_id)
        .bind(external_id)
    )?;
    let mut rows = rows;
    rows.sort_by_key(|(id, _, _)| *id);
    Ok(rows.into_iter().filter_map(|(_, status, error)| Some((MessageStatus::parse(&status)?, error))).collect())
}

/// Forgets early reports no message claimed before `before`.
pub async fn purge_early_reports_before(c: &mut impl AsHandle, before: Timestamp) -> StoreResult<u64> {
    Ok(execute!(c, sqlx::query("DELETE FROM early_status_reports WHERE created_at < $1").bind(before))?)
}

/// The conversation's newest message.
pub async fn latest_message(c: &mut impl AsHandle, scope: Scope, conversation_id: i64) -> StoreResult<Option<Message>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {MESSAGE_COLUMNS} FROM messages WHERE workspace_id = $1 AND livemode = $2 AND conversation_id = $3
         ORDER BY id DESC LIMIT 1"
    ));
    let row: Option<MessageRow> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(conversation_id))?;
    row.map(Message::try_from).transpose()
}

fn inbound_key(scope: Scope, channel_id: i64, external_id: &str) -> Absent {
    Absent::InboundMessage { scope, channel_id, external_id: external_id.to_owned() }
}

fn open_key(scope: Scope, channel_id: i64, channel_ref: &str) -> Absent {
    Absent::OpenConversation { scope, channel_id, channel_ref: channel_ref.to_owned() }
}

/// Looks ahead for a batch of inbound messages on a channel (a
/// transaction's lookahead, see [`crate::Absences`]): which provider ids it
/// has not stored, in one statement, so that [`by_external_id`] answers
/// them without one.
pub async fn look_ahead_inbound(
    c: &mut impl AsHandle,
    scope: Scope,
    channel_id: i64,
    external_ids: &[&str],
) -> StoreResult<()> {
    look_ahead(c, scope, channel_id, external_ids, LookAhead::Inbound).await
}

/// Looks ahead for the conversations a batch of inbound messages goes to:
/// which `channel_ref`s have none that is not closed, so that
/// [`find_open`] answers them without a statement.
pub async fn look_ahead_open(
    c: &mut impl AsHandle,
    scope: Scope,
    channel_id: i64,
    channel_refs: &[&str],
) -> StoreResult<()> {
    look_ahead(c, scope, channel_id, channel_refs, LookAhead::Open).await
}

#[derive(Clone, Copy)]
enum LookAhead {
    Inbound,
    Open,
}

async fn look_ahead(
    c: &mut impl AsHandle,
    scope: Scope,
    channel_id: i64,
    keys: &[&str],
    what: LookAhead,
) -> StoreResult<()> {
    if c.absences().is_none() {
        return Ok(());
    }
    for chunk in keys.chunks(500) {
        let mut w = Where::scoped(scope, "t");
        w.and("t.channel_id = ?", [Arg::I64(channel_id)]);
        let list = w.list(chunk.iter().map(|k| Arg::Text((*k).to_owned())));
        // The same conditions as by_external_id's and find_open's, on their indexes.
        let sql = sqlx::AssertSqlSafe(match what {
            LookAhead::Inbound => format!(
                "SELECT t.external_id FROM messages t{} AND t.direction = 'inbound' AND t.external_id IN ({list})",
                w.sql()
            ),
            LookAhead::Open => format!(
                "SELECT t.channel_ref FROM conversations t{} AND t.status <> 'closed' AND t.kind <> 'call'
                   AND t.channel_ref IN ({list})",
                w.sql()
            ),
        });
        let found: Vec<(String,)> = fetch_all!(c, bind_args!(sqlx::query_as(sql), w.args.clone()))?;
        let found: std::collections::HashSet<String> = found.into_iter().map(|(k,)| k).collect();
        for key in chunk.iter().filter(|k| !found.contains(**k)) {
            note_absent(
                c,
                match what {
                    LookAhead::Inbound => inbound_key(scope, channel_id, key),
                    LookAhead::Open => open_key(scope, channel_id, key),
                },
            );
        }
    }
    Ok(())
}

/// The conversation of the message the channel knows by one of these
/// provider ids (either direction), newest first: an email reply's thread.
pub async fn conversation_of_any(
    c: &mut impl AsHandle,
    scope: Scope,
    channel_id: i64,
    external_ids: &[String],
) -> StoreResult<Option<i64>> {
    // One lookup per direction, each on its partial index.
    for external_id in external_ids.iter().take(20) {
        for direction in [Direction::Inbound, Direction::Outbound] {
            if let Some(m) = by_external_id(c, scope, channel_id, direction, external_id).await? {
                return Ok(Some(m.conversation_id));
            }
        }
    }
    Ok(None)
}

/// When the contact last wrote in the conversation (WhatsApp's
/// customer-service window runs from there).
pub async fn last_inbound_at(
    c: &mut impl AsHandle,
    scope: Scope,
    conversation_id: i64,
) -> StoreResult<Option<Timestamp>> {
    let (at,): (Option<Timestamp>,) = fetch_one!(
        c,
        sqlx::query_as(
            "SELECT MAX(created_at) FROM messages
             WHERE workspace_id = $1 AND livemode = $2 AND conversation_id = $3 AND direction = 'inbound'"
        )
        .bind_scope(scope)
        .bind(conversation_id)
    )?;
    Ok(at)
}

// --- Opt-outs ------------------------------------------------------------------

/// Records that `address` asked the channel to stop writing (its keyword).
pub async fn opt_out(
    c: &mut impl AsHandle,
    scope: Scope,
    channel_id: i64,
    address: &str,
    keyword: &str,
) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "INSERT INTO channel_opt_outs (workspace_id, livemode, channel_id, address, keyword, created_at)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (channel_id, address) DO NOTHING",
        )
        .bind_scope(scope)
        .bind(channel_id)
        .bind(address)
        .bind(keyword)
        .bind(Timestamp::now())
    )?;
    Ok(())
}

/// Forgets an opt-out (the address wrote "START").
pub async fn opt_in(c: &mut impl AsHandle, scope: Scope, channel_id: i64, address: &str) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "DELETE FROM channel_opt_outs WHERE workspace_id = $1 AND livemode = $2 AND channel_id = $3 AND address = $4",
        )
        .bind_scope(scope)
        .bind(channel_id)
        .bind(address)
    )?;
    Ok(())
}

/// The keyword with which `address` opted out of the channel, if it did.
pub async fn opted_out(
    c: &mut impl AsHandle,
    scope: Scope,
    channel_id: i64,
    address: &str,
) -> StoreResult<Option<String>> {
    let row: Option<(String,)> = fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT keyword FROM channel_opt_outs
             WHERE workspace_id = $1 AND livemode = $2 AND channel_id = $3 AND address = $4",
        )
        .bind_scope(scope)
        .bind(channel_id)
        .bind(address)
    )?;
    Ok(row.map(|(k,)| k))
}

/// Stores conversation `id`'s latest analysis (replacing the one before).
pub async fn set_analysis(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
    analysis: &parley_domain::call::Analysis,
) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "INSERT INTO conversation_analyses (conversation_id, workspace_id, livemode, analysis)
             VALUES ($3, $1, $2, $4)
             ON CONFLICT (conversation_id) DO UPDATE SET analysis = excluded.analysis
             WHERE conversation_analyses.workspace_id = excluded.workspace_id
               AND conversation_analyses.livemode = excluded.livemode",
        )
        .bind_scope(scope)
        .bind(id)
        .bind(sqlx::types::Json(analysis))
    )?;
    Ok(())
}

/// Conversation `id`'s latest analysis, if it has one.
pub async fn analysis(
    c: &mut impl AsHandle,
    scope: Scope,
    id: i64,
) -> StoreResult<Option<parley_domain::call::Analysis>> {
    let row: Option<(sqlx::types::Json<parley_domain::call::Analysis>,)> = fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT analysis FROM conversation_analyses
             WHERE workspace_id = $1 AND livemode = $2 AND conversation_id = $3",
        )
        .bind_scope(scope)
        .bind(id)
    )?;
    Ok(row.map(|(a,)| a.0))
}
