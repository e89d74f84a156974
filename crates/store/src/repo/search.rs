//! Full-text search over messages, scoped, ranked, filtered.

use parley_domain::search::Query;
use parley_domain::validation::Page;
use parley_domain::{Scope, Timestamp};

use super::{Arg, Where, bind_args};
use crate::{AsHandle, Handle, StoreResult, fetch_all, fetch_one};

#[derive(Debug, Clone, Default)]
pub struct SearchFilter {
    pub channel: Option<String>,
    pub conversation_id: Option<i64>,
    pub contact_id: Option<i64>,
    pub after: Option<Timestamp>,
    pub before: Option<Timestamp>,
}

/// A matching message, with its conversation's title and its rank (higher is better).
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct MessageHit {
    pub id: i64,
    pub conversation_id: i64,
    pub title: String,
    pub text: String,
    pub created_at: Timestamp,
    pub score: f64,
}

/// Messages of the scope matching `query`, best first, and how many match.
pub async fn messages(
    c: &mut impl AsHandle,
    scope: Scope,
    query: &Query,
    filter: &SearchFilter,
    page: Page,
) -> StoreResult<(Vec<MessageHit>, i64)> {
    let pg = matches!(c.handle(), Handle::Postgres(_));
    let mut w = Where::scoped(scope, "m");
    if pg {
        w.and("m.search @@ to_tsquery('simple', ?)", [Arg::Text(query.to_tsquery())]);
    } else {
        w.and("messages_fts MATCH ?", [Arg::Text(query.to_fts5())]);
    }
    if let Some(ch) = &filter.channel {
        w.and("c.channel = ?", [Arg::Text(ch.clone())]);
    }
    if let Some(id) = filter.conversation_id {
        w.and("m.conversation_id = ?", [Arg::I64(id)]);
    }
    if let Some(id) = filter.contact_id {
        w.and("c.contact_id = ?", [Arg::I64(id)]);
    }
    if let Some(t) = filter.after {
        w.and("m.created_at >= ?", [Arg::Time(t)]);
    }
    if let Some(t) = filter.before {
        w.and("m.created_at < ?", [Arg::Time(t)]);
    }
    // The index drives the join; the scope and filters check each match.
    let (from, score) = if pg {
        (
            "messages m JOIN conversations c ON c.id = m.conversation_id",
            "ts_rank_cd(m.search, to_tsquery('simple', $3))",
        )
    } else {
        (
            "messages_fts CROSS JOIN messages m ON m.id = messages_fts.rowid JOIN conversations c ON c.id = m.conversation_id",
            "-bm25(messages_fts)",
        )
    };
    let n = w.next_placeholder();
    let count_sql = sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {from}{}", w.sql()));
    let page_sql = sqlx::AssertSqlSafe(format!(
        "SELECT m.id, m.conversation_id, c.title, m.text, m.created_at, CAST({score} AS DOUBLE PRECISION) AS score
         FROM {from}{} ORDER BY score DESC, m.id DESC LIMIT ${} OFFSET ${}",
        w.sql(),
        n,
        n + 1
    ));
    let (total,): (i64,) = fetch_one!(c, bind_args!(sqlx::query_as(count_sql), w.args.clone()))?;
    let hits: Vec<MessageHit> =
        fetch_all!(c, bind_args!(sqlx::query_as(page_sql), w.args.clone()).bind(page.limit).bind(page.offset))?;
    Ok((hits, total))
}
