//! Repositories. Every function on workspace-owned data takes a `Scope`.

pub mod agent_runs;
pub mod agents;
pub mod api_keys;
pub mod billing;
pub mod calls;
pub mod canned_responses;
pub mod channels;
pub mod contacts;
pub mod conversations;
pub mod events;
pub mod handoffs;
pub mod idempotency;
pub mod invitations;
pub mod jobs;
pub mod knowledge;
pub mod labels;
pub mod notes;
pub mod notifications;
pub mod oauth;
pub mod overview;
pub mod presence;
pub mod prompt_blocks;
pub mod search;
pub mod sessions;
pub mod settings;
pub mod staged_objects;
pub mod triggers;
pub mod users;
pub mod versions;
pub mod webchat;
pub mod webhooks;
pub mod workspaces;

/// A bind value for SQL assembled from static fragments (optional filters).
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    I64(i64),
    Text(String),
    Bool(bool),
    Time(parley_domain::Timestamp),
}

/// `WHERE` clauses built from static fragments; `?` in a fragment becomes the
/// next `$N`. Values are always bound, never spliced into the text.
#[derive(Debug, Default)]
pub(crate) struct Where {
    sql: String,
    pub(crate) args: Vec<Arg>,
}

impl Where {
    /// Starts with the scope filter every workspace-owned query needs.
    pub(crate) fn scoped(scope: parley_domain::Scope, table_alias: &'static str) -> Self {
        let mut w = Where::default();
        w.sql.push_str(" WHERE ");
        w.sql.push_str(table_alias);
        w.sql.push_str(".workspace_id = $1 AND ");
        w.sql.push_str(table_alias);
        w.sql.push_str(".livemode = $2");
        w.args.push(Arg::I64(scope.workspace_id));
        w.args.push(Arg::Bool(scope.livemode()));
        w
    }

    /// Adds ` AND <clause>`, binding one `Arg` per `?`.
    pub(crate) fn and(&mut self, clause: &'static str, args: impl IntoIterator<Item = Arg>) -> &mut Self {
        self.sql.push_str(" AND ");
        let mut args = args.into_iter();
        for ch in clause.chars() {
            if ch == '?' {
                self.args.push(args.next().expect("one arg per placeholder"));
                self.sql.push('$');
                self.sql.push_str(&self.args.len().to_string());
            } else {
                self.sql.push(ch);
            }
        }
        debug_assert!(args.next().is_none(), "more args than placeholders");
        self
    }

    pub(crate) fn sql(&self) -> &str {
        &self.sql
    }

    /// Binds `args` as the next placeholders; returns "$3, $4, …" (for an `IN` list).
    pub(crate) fn list(&mut self, args: impl IntoIterator<Item = Arg>) -> String {
        let mut list = Vec::new();
        for a in args {
            list.push(format!("${}", self.next_placeholder()));
            self.args.push(a);
        }
        list.join(", ")
    }

    /// The `$N` that the next bound argument will take.
    pub(crate) fn next_placeholder(&self) -> usize {
        self.args.len() + 1
    }
}

/// Binds `Arg`s to a sqlx query in order.
macro_rules! bind_args {
    ($q:expr, $args:expr) => {{
        let mut q = $q;
        for a in $args {
            q = match a {
                $crate::repo::Arg::I64(v) => q.bind(v),
                $crate::repo::Arg::Text(v) => q.bind(v),
                $crate::repo::Arg::Bool(v) => q.bind(v),
                $crate::repo::Arg::Time(v) => q.bind(v),
            };
        }
        q
    }};
}
pub(crate) use bind_args;

/// Slugs in `table` (a table name from the code, never from input) in the
/// scope equal to `base` or of the form `base-N`, except row `except_id`'s.
pub(crate) async fn slugs_like(
    c: &mut impl crate::AsHandle,
    table: &'static str,
    scope: parley_domain::Scope,
    base: &str,
    except_id: Option<i64>,
) -> crate::StoreResult<Vec<String>> {
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT slug FROM {table} WHERE workspace_id = $1 AND livemode = $2 AND (slug = $3 OR slug LIKE $4) AND id <> $5"
    ));
    let rows: Vec<(String,)> = crate::fetch_all!(
        c,
        sqlx::query_as(sql).bind_scope(scope).bind(base).bind(format!("{base}-%")).bind(except_id.unwrap_or(-1))
    )?;
    Ok(rows.into_iter().map(|(s,)| s).collect())
}

/// One newest-first page of `from` (`"<table> <alias>"`) rows matching `w`,
/// and how many match in all: the count and the page share the filters.
pub(crate) async fn newest_page<R>(
    c: &mut impl crate::AsHandle,
    from: &str,
    columns: &str,
    w: &Where,
    page: parley_domain::validation::Page,
) -> crate::StoreResult<(Vec<R>, i64)>
where
    R: for<'r> sqlx::FromRow<'r, crate::sqlite::LiteRow> + for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow>,
    R: Send + Unpin,
{
    let alias = from.rsplit(' ').next().unwrap_or(from);
    let n = w.next_placeholder();
    let count_sql = sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {from}{}", w.sql()));
    let page_sql = sqlx::AssertSqlSafe(format!(
        "SELECT {columns} FROM {from}{} ORDER BY {alias}.created_at DESC, {alias}.id DESC LIMIT ${} OFFSET ${}",
        w.sql(),
        n,
        n + 1
    ));
    let (total,): (i64,) = crate::fetch_one!(c, bind_args!(sqlx::query_as(count_sql), w.args.clone()))?;
    let rows: Vec<R> =
        crate::fetch_all!(c, bind_args!(sqlx::query_as(page_sql), w.args.clone()).bind(page.limit).bind(page.offset))?;
    Ok((rows, total))
}

/// Points the rows of `table` (conversations, calls) that name contact
/// `from` at `to`: another contact (a merge) or none (a deletion).
pub(crate) async fn repoint_contact(
    c: &mut impl crate::AsHandle,
    scope: parley_domain::Scope,
    table: &'static str,
    from: i64,
    to: Option<i64>,
) -> crate::StoreResult<()> {
    let sql = sqlx::AssertSqlSafe(format!(
        "UPDATE {table} SET contact_id = $4 WHERE workspace_id = $1 AND livemode = $2 AND contact_id = $3"
    ));
    crate::execute!(c, sqlx::query(sql).bind_scope(scope).bind(from).bind(to))?;
    Ok(())
}

/// Escapes `%`, `_` and `\` for a `LIKE … ESCAPE '\'` pattern.
pub(crate) fn like_contains(term: &str) -> String {
    let mut out = String::with_capacity(term.len() + 2);
    out.push('%');
    for c in term.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

fn corrupt(what: &str, value: &str) -> crate::StoreError {
    crate::StoreError::Corrupt(format!("{what}: {value:?}"))
}

/// Binds a scope as the next two parameters (`workspace_id`, then
/// `livemode`). Scoped queries take them as `$1` and `$2`, so a query
/// without `.bind_scope(scope)` stands out in review.
pub(crate) trait BindScope: Sized {
    fn bind_scope(self, scope: parley_domain::Scope) -> Self;
}

impl<'q, DB: sqlx::Database> BindScope for sqlx::query::Query<'q, DB, <DB as sqlx::Database>::Arguments>
where
    i64: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    bool: for<'t> sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    fn bind_scope(self, scope: parley_domain::Scope) -> Self {
        self.bind(scope.workspace_id).bind(scope.livemode())
    }
}

impl<'q, DB: sqlx::Database, O> BindScope for sqlx::query::QueryAs<'q, DB, O, <DB as sqlx::Database>::Arguments>
where
    i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    bool: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    fn bind_scope(self, scope: parley_domain::Scope) -> Self {
        self.bind(scope.workspace_id).bind(scope.livemode())
    }
}
