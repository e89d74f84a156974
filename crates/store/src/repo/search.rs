//! Full-text search over messages, conversations and contacts: scoped,
//! filtered, counted up to a cap and read newest first (the service ranks
//! what it reads).
//!
//! SQLite: FTS5 holds each message's words and, in a second column, tokens
//! for its scope, conversation, channel and month (migration 0013). The scope
//! and the filters become part of the MATCH expression, so FTS5 intersects
//! them with the words and never walks matches of other workspaces.
//! Conversations (title, address) and contacts (name, email, phone) have
//! indexes of their own (0014) and take the filters in SQL.
//! PostgreSQL: GIN-indexed tsvectors with the scope and filters in SQL.

use parley_domain::search::Query;
use parley_domain::{Scope, Timestamp};

use super::{Arg, Where, bind_args};
use crate::{AsHandle, StoreResult, fetch_all, fetch_one};

#[derive(Debug, Clone, Default)]
pub struct SearchFilter {
    pub channel: Option<String>,
    pub conversation_id: Option<i64>,
    pub contact_id: Option<i64>,
    pub after: Option<Timestamp>,
    pub before: Option<Timestamp>,
}

/// What is searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Messages,
    Conversations,
    Contacts,
}

/// A match: its conversation (none for a contact), title and searched text.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Match {
    pub id: i64,
    pub conversation_id: Option<i64>,
    pub title: String,
    pub text: String,
    pub created_at: Timestamp,
}

/// A contact with more conversations than this is filtered through a join
/// rather than by listing its conversations in the MATCH expression.
const MAX_LISTED_CONVERSATIONS: usize = 500;
/// A date range over more months than this is checked row by row only.
const MAX_LISTED_MONTHS: i32 = 36;

/// The scope and filters of a search, resolved once for the queries that
/// count and read its matches.
#[derive(Debug, Clone)]
pub struct Resolved {
    scope: Scope,
    filter: SearchFilter,
    /// SQLite: `"s<workspace>x<livemode>"`, the scope's token.
    scope_token: String,
    /// SQLite: the message MATCH expression's `search_tags` part.
    tags: String,
    /// The message contact filter could not be listed as conversations.
    join_contact: bool,
    /// The filters exclude every message (a channel type the scope has no
    /// channel of, a contact without conversations, an empty date range).
    no_messages: bool,
}

/// Resolves the filters, for messages on SQLite into index tokens.
pub async fn resolve(c: &mut impl AsHandle, scope: Scope, filter: &SearchFilter) -> StoreResult<Resolved> {
    let scope_token = format!("\"s{}x{}\"", scope.workspace_id, scope.livemode() as i64);
    let mut resolved = Resolved {
        scope,
        filter: filter.clone(),
        tags: scope_token.clone(),
        scope_token,
        join_contact: false,
        no_messages: false,
    };
    if !c.is_postgres() {
        resolved.no_messages = !resolve_message_tags(c, &mut resolved).await?;
    }
    Ok(resolved)
}

/// Adds the message filters to `r.tags`; false when they exclude every message.
async fn resolve_message_tags(c: &mut impl AsHandle, r: &mut Resolved) -> StoreResult<bool> {
    let (scope, filter) = (r.scope, r.filter.clone());
    let mut conversations: Option<Vec<i64>> = filter.conversation_id.map(|id| vec![id]);
    if let Some(contact) = filter.contact_id {
        let mut w = Where::scoped(scope, "c");
        w.and("c.contact_id = ?", [Arg::I64(contact)]);
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT c.id FROM conversations c{} LIMIT {}",
            w.sql(),
            MAX_LISTED_CONVERSATIONS + 1
        ));
        let ids: Vec<(i64,)> = fetch_all!(c, bind_args!(sqlx::query_as(sql), w.args.clone()))?;
        if ids.len() > MAX_LISTED_CONVERSATIONS {
            r.join_contact = true;
        } else {
            let ids: Vec<i64> = ids.into_iter().map(|(id,)| id).collect();
            conversations = Some(match conversations {
                Some(given) => given.into_iter().filter(|id| ids.contains(id)).collect(),
                None => ids,
            });
        }
    }
    if let Some(ids) = conversations {
        if ids.is_empty() {
            return Ok(false);
        }
        r.tags.push_str(&any_of('c', &ids));
    }
    if let Some(kind) = &filter.channel {
        let mut w = Where::scoped(scope, "ch");
        w.and("ch.type = ?", [Arg::Text(kind.clone())]);
        let sql = sqlx::AssertSqlSafe(format!("SELECT ch.id FROM channels ch{}", w.sql()));
        let ids: Vec<(i64,)> = fetch_all!(c, bind_args!(sqlx::query_as(sql), w.args.clone()))?;
        if ids.is_empty() {
            return Ok(false);
        }
        r.tags.push_str(&any_of('h', &ids.into_iter().map(|(id,)| id).collect::<Vec<_>>()));
    }
    if let Some(months) = months(filter.after, filter.before) {
        if months.is_empty() {
            return Ok(false);
        }
        r.tags.push_str(&any_of('t', &months));
    }
    Ok(true)
}

/// ` AND ("c1" OR "c2")`: one of the tokens.
fn any_of(prefix: char, values: &[impl std::fmt::Display]) -> String {
    let tokens: Vec<String> = values.iter().map(|v| format!("\"{prefix}{v}\"")).collect();
    format!(" AND ({})", tokens.join(" OR "))
}

/// The months (`yyyymm`) a date range touches, when it is short enough to
/// list. Messages are stamped when stored, so none is dated after now.
fn months(after: Option<Timestamp>, before: Option<Timestamp>) -> Option<Vec<i32>> {
    let after = after?;
    let latest = Timestamp::now().plus_seconds(86_400);
    let last = match before {
        Some(b) if b.unix_micros() < latest.unix_micros() => Timestamp::from_unix_micros(b.unix_micros() - 1)?,
        _ => latest,
    };
    let month = |t: Timestamp| {
        let d = t.as_datetime();
        d.year() * 12 + (u8::from(d.month()) as i32 - 1)
    };
    let (from, to) = (month(after), month(last));
    if to - from >= MAX_LISTED_MONTHS {
        return None;
    }
    Some((from..=to).map(|m| (m / 12) * 100 + m % 12 + 1).collect())
}

/// How a target is read: FROM, columns and the newest-first order, per backend.
struct Shape {
    from: &'static str,
    columns: &'static str,
    newest: &'static str,
}

fn shape(target: Target, pg: bool) -> Shape {
    match (target, pg) {
        (Target::Messages, true) => Shape {
            from: "messages m JOIN conversations c ON c.id = m.conversation_id",
            columns: "m.id, m.conversation_id, c.title, m.text, m.created_at",
            newest: "m.id",
        },
        // The index drives the join and yields rowids newest first, so the
        // order costs no sort; the rest checks each match.
        (Target::Messages, false) => Shape {
            from: "messages_fts CROSS JOIN messages m ON m.id = messages_fts.rowid \
                   JOIN conversations c ON c.id = m.conversation_id",
            columns: "m.id, m.conversation_id, c.title, m.text, m.created_at",
            newest: "messages_fts.rowid",
        },
        (Target::Conversations, pg) => Shape {
            from: if pg {
                "conversations c"
            } else {
                "conversations_fts CROSS JOIN conversations c ON c.id = conversations_fts.rowid"
            },
            columns: "c.id, c.id AS conversation_id, c.title, c.title || ' · ' || c.channel_ref AS text, c.created_at",
            newest: if pg { "c.id" } else { "conversations_fts.rowid" },
        },
        (Target::Contacts, pg) => Shape {
            from: if pg { "contacts k" } else { "contacts_fts CROSS JOIN contacts k ON k.id = contacts_fts.rowid" },
            columns: "k.id, CAST(NULL AS BIGINT) AS conversation_id, k.display_name AS title, \
                      k.display_name || coalesce(' · ' || k.normalized_email, '') || coalesce(' · ' || k.normalized_phone, '') \
                      AS text, k.created_at",
            newest: if pg { "k.id" } else { "contacts_fts.rowid" },
        },
    }
}

/// The WHERE of the matches of `query` among `target` in `r`.
fn matches(target: Target, pg: bool, r: &Resolved, query: &Query) -> Where {
    let f = &r.filter;
    let scope_token = &r.scope_token;
    match target {
        Target::Messages => message_matches(pg, r, query),
        Target::Conversations => {
            let mut w = Where::scoped(r.scope, "c");
            if pg {
                w.and("c.search @@ to_tsquery('simple', ?)", [Arg::Text(query.to_tsquery())]);
            } else {
                let expr = format!("search_tags : {scope_token} AND {{title channel_ref}} : ({})", query.to_fts5());
                w.and("conversations_fts MATCH ?", [Arg::Text(expr)]);
            }
            if let Some(ch) = &f.channel {
                w.and("c.channel = ?", [Arg::Text(ch.clone())]);
            }
            if let Some(id) = f.conversation_id {
                w.and("c.id = ?", [Arg::I64(id)]);
            }
            if let Some(id) = f.contact_id {
                w.and("c.contact_id = ?", [Arg::I64(id)]);
            }
            created_between(&mut w, ("c.created_at >= ?", "c.created_at < ?"), f);
            w
        }
        Target::Contacts => {
            let mut w = Where::scoped(r.scope, "k");
            if pg {
                w.and("k.search @@ to_tsquery('simple', ?)", [Arg::Text(query.to_tsquery())]);
            } else {
                let expr = format!(
                    "search_tags : {scope_token} AND {{display_name normalized_email normalized_phone}} : ({})",
                    query.to_fts5()
                );
                w.and("contacts_fts MATCH ?", [Arg::Text(expr)]);
            }
            if let Some(ch) = &f.channel {
                w.and(
                    "EXISTS (SELECT 1 FROM contact_identities ci WHERE ci.contact_id = k.id AND ci.channel = ?)",
                    [Arg::Text(ch.clone())],
                );
            }
            if let Some(id) = f.conversation_id {
                // k is in scope, so a conversation of another scope names no contact here.
                w.and("k.id IN (SELECT cv.contact_id FROM conversations cv WHERE cv.id = ?)", [Arg::I64(id)]);
            }
            if let Some(id) = f.contact_id {
                w.and("k.id = ?", [Arg::I64(id)]);
            }
            created_between(&mut w, ("k.created_at >= ?", "k.created_at < ?"), f);
            w
        }
    }
}

/// `after`/`before` on a table's `created_at`: the two clauses, spelled out
/// per table because `Where` takes only static SQL.
fn created_between(w: &mut Where, clauses: (&'static str, &'static str), f: &SearchFilter) {
    if let Some(t) = f.after {
        w.and(clauses.0, [Arg::Time(t)]);
    }
    if let Some(t) = f.before {
        w.and(clauses.1, [Arg::Time(t)]);
    }
}

/// The MATCH expression for messages on SQLite. Only the text column holds
/// the user's words; the tags column holds the scope and the listed filters.
fn message_fts_expr(r: &Resolved, query: &Query) -> String {
    format!("search_tags : ({}) AND text : ({})", r.tags, query.to_fts5())
}

/// Whether the listed tokens say all the filters do (no row needs reading).
fn tokens_suffice(r: &Resolved) -> bool {
    r.filter.after.is_none() && r.filter.before.is_none() && !r.join_contact
}

fn message_matches(pg: bool, r: &Resolved, query: &Query) -> Where {
    let mut w = Where::scoped(r.scope, "m");
    if pg {
        w.and("m.search @@ to_tsquery('simple', ?)", [Arg::Text(query.to_tsquery())]);
        if let Some(id) = r.filter.conversation_id {
            w.and("m.conversation_id = ?", [Arg::I64(id)]);
        }
        if let Some(ch) = &r.filter.channel {
            w.and("c.channel = ?", [Arg::Text(ch.clone())]);
        }
        if let Some(id) = r.filter.contact_id {
            w.and("c.contact_id = ?", [Arg::I64(id)]);
        }
    } else {
        w.and("messages_fts MATCH ?", [Arg::Text(message_fts_expr(r, query))]);
        if r.join_contact {
            w.and("c.contact_id = ?", [Arg::I64(r.filter.contact_id.unwrap_or_default())]);
        }
    }
    created_between(&mut w, ("m.created_at >= ?", "m.created_at < ?"), &r.filter);
    w
}

/// A search statement planned for its own values each time. PostgreSQL
/// would otherwise switch a reused statement to a generic plan, which cannot
/// tell a word in most messages from a rare one and picks the wrong index
/// for one of them (seconds instead of milliseconds). On SQLite such a
/// statement runs off the async worker thread (`crate::sqlite`).
macro_rules! unprepared {
    ($sql:expr) => {
        sqlx::query_as($sql).persistent(false)
    };
}

/// How many of `target` match, counting no further than `cap`.
pub async fn count(c: &mut impl AsHandle, target: Target, r: &Resolved, query: &Query, cap: i64) -> StoreResult<i64> {
    if target == Target::Messages && r.no_messages {
        return Ok(0);
    }
    let pg = c.is_postgres();
    if target == Target::Messages && !pg && tokens_suffice(r) {
        // Counted inside FTS5 without reading a row: the scope token is
        // derived from each message's own workspace and mode (a generated
        // column), so the MATCH alone is as scoped as the join would be.
        let (n,): (i64,) = fetch_one!(
            c,
            sqlx::query_as(
                "SELECT COUNT(*) FROM (SELECT 1 FROM messages_fts WHERE messages_fts MATCH $1 LIMIT $2) capped"
            )
            .bind(message_fts_expr(r, query))
            .bind(cap)
        )?;
        return Ok(n);
    }
    let (shape, w) = (shape(target, pg), matches(target, pg, r, query));
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM (SELECT 1 FROM {}{} LIMIT ${}) capped",
        shape.from,
        w.sql(),
        w.next_placeholder()
    ));
    let (n,): (i64,) = fetch_one!(c, bind_args!(unprepared!(sql), w.args.clone()).bind(cap))?;
    Ok(n)
}

/// The matches of `target` newest first, `offset` of them skipped.
pub async fn newest(
    c: &mut impl AsHandle,
    target: Target,
    r: &Resolved,
    query: &Query,
    offset: i64,
    limit: i64,
) -> StoreResult<Vec<Match>> {
    if target == Target::Messages && r.no_messages {
        return Ok(Vec::new());
    }
    let pg = c.is_postgres();
    if target == Target::Messages && !pg && tokens_suffice(r) {
        // The page's rowids come from FTS5 alone, so rows skipped by
        // `offset` are never read; only the page's rows are.
        let w = Where::scoped(r.scope, "m");
        let n = w.next_placeholder();
        let sql = sqlx::AssertSqlSafe(format!(
            "SELECT m.id, m.conversation_id, c.title, m.text, m.created_at
             FROM (SELECT rowid AS id FROM messages_fts WHERE messages_fts MATCH ${n}
                   ORDER BY rowid DESC LIMIT ${} OFFSET ${}) page
             JOIN messages m ON m.id = page.id JOIN conversations c ON c.id = m.conversation_id{}
             ORDER BY m.id DESC",
            n + 1,
            n + 2,
            w.sql()
        ));
        return Ok(fetch_all!(
            c,
            bind_args!(sqlx::query_as(sql), w.args.clone()).bind(message_fts_expr(r, query)).bind(limit).bind(offset)
        )?);
    }
    let (shape, w) = (shape(target, pg), matches(target, pg, r, query));
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {} FROM {}{} ORDER BY {} DESC LIMIT ${} OFFSET ${}",
        shape.columns,
        shape.from,
        w.sql(),
        shape.newest,
        w.next_placeholder(),
        w.next_placeholder() + 1
    ));
    Ok(fetch_all!(c, bind_args!(unprepared!(sql), w.args.clone()).bind(limit).bind(offset))?)
}
