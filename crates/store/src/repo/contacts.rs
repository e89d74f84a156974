//! Contacts and their channel identities.

use std::collections::HashMap;

use parley_domain::contact::{Contact, Identity, Origin};
use parley_domain::validation::Page;
use parley_domain::{Scope, Timestamp};
use serde_json::{Map, Value};
use sqlx::types::Json;

use super::{Arg, Where, bind_args, versions};
use crate::db::{Absent, forget_absent, known_absent, note_absent};
use crate::repo::BindScope;
use crate::{AsHandle, StoreResult, execute, fetch_all, fetch_one, fetch_optional};

/// The `scope_versions` counter every contact write bumps.
pub const VERSION_KEY: &str = "contacts";

// Unqualified: SQLite's RETURNING does not accept table-qualified names.
const COLUMNS: &str = "id, display_name, canonical_name, normalized_phone, normalized_email, avatar_url, notes, \
    tags, origin, metadata, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    display_name: String,
    canonical_name: Option<String>,
    normalized_phone: Option<String>,
    normalized_email: Option<String>,
    avatar_url: Option<String>,
    notes: Option<String>,
    tags: Json<Vec<String>>,
    origin: Origin,
    metadata: Json<Map<String, Value>>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl Row {
    fn into_contact(self, identities: Vec<Identity>) -> StoreResult<Contact> {
        Ok(Contact {
            id: self.id,
            origin: self.origin,
            display_name: self.display_name,
            canonical_name: self.canonical_name,
            normalized_phone: self.normalized_phone,
            normalized_email: self.normalized_email,
            avatar_url: self.avatar_url,
            notes: self.notes,
            tags: self.tags.0,
            identities,
            metadata: self.metadata.0,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// Every stored field of a contact except its identities.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ContactFields {
    pub display_name: String,
    pub canonical_name: Option<String>,
    pub normalized_phone: Option<String>,
    pub normalized_email: Option<String>,
    pub avatar_url: Option<String>,
    pub notes: Option<String>,
    pub tags: Vec<String>,
    pub origin: Option<Origin>,
    pub metadata: Map<String, Value>,
}

impl From<&Contact> for ContactFields {
    fn from(c: &Contact) -> Self {
        ContactFields {
            display_name: c.display_name.clone(),
            canonical_name: c.canonical_name.clone(),
            normalized_phone: c.normalized_phone.clone(),
            normalized_email: c.normalized_email.clone(),
            avatar_url: c.avatar_url.clone(),
            notes: c.notes.clone(),
            tags: c.tags.clone(),
            origin: Some(c.origin),
            metadata: c.metadata.clone(),
        }
    }
}

impl ContactFields {
    /// The contact these fields make, as just inserted with `id` at `now`.
    fn into_contact(self, id: i64, now: Timestamp) -> Contact {
        Contact {
            id,
            display_name: self.display_name,
            canonical_name: self.canonical_name,
            normalized_phone: self.normalized_phone,
            normalized_email: self.normalized_email,
            avatar_url: self.avatar_url,
            notes: self.notes,
            tags: self.tags,
            origin: self.origin.unwrap_or(Origin::Manual),
            identities: Vec::new(),
            metadata: self.metadata,
            created_at: now,
            updated_at: now,
        }
    }

    /// What a `q` search matches: the canonical name, the email and the
    /// phone's digits. (A query that looks like a phone number is also
    /// searched as its digits, so "+1 415 555" and "(415) 555" both find
    /// +14155550100; kept short, since every character costs index work.)
    fn search_text(&self) -> String {
        let mut s = String::new();
        let digits = self.normalized_phone.as_deref().map(|p| p.trim_start_matches('+'));
        for part in [self.canonical_name.as_deref(), self.normalized_email.as_deref(), digits].into_iter().flatten() {
            s.push_str(part);
            s.push(' ');
        }
        s.pop();
        s.to_lowercase()
    }
}

/// The columns a new contact writes, in the order [`bind_new_contact!`] binds them.
const INSERT_COLUMNS: &str = "workspace_id, livemode, display_name, canonical_name, normalized_phone,
    normalized_email, avatar_url, notes, tags, origin, metadata, search_text, created_at";

/// Binds a new contact's values after its scope, in [`INSERT_COLUMNS`]
/// order, with `$bind` (`bind` on a query, `push_bind` on a row of a bulk
/// insert): one list for both, so they cannot drift apart.
macro_rules! bind_new_contact {
    ($q:expr, $bind:ident, $f:expr, $now:expr) => {
        $q.$bind(&$f.display_name)
            .$bind(&$f.canonical_name)
            .$bind(&$f.normalized_phone)
            .$bind(&$f.normalized_email)
            .$bind(&$f.avatar_url)
            .$bind(&$f.notes)
            .$bind(Json(&$f.tags))
            .$bind($f.origin.unwrap_or(Origin::Manual).as_str())
            .$bind(Json(&$f.metadata))
            .$bind($f.search_text())
            .$bind($now)
    };
}

/// Inserts a contact with its identities (which the caller has found to
/// be free) and returns it. The contact and its first identity (a
/// discovered sender's only one) go in one trip: two statements in one
/// call on SQLite, a data-modifying `WITH` on PostgreSQL.
pub async fn insert(
    c: &mut impl AsHandle,
    scope: Scope,
    f: &ContactFields,
    identities: &[Identity],
) -> StoreResult<Contact> {
    let now = Timestamp::now();
    let contact = format!(
        "INSERT INTO contacts ({INSERT_COLUMNS}, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)"
    );
    let identity =
        "INSERT INTO contact_identities (workspace_id, livemode, contact_id, channel, address, unverified, created_at)";
    let (first, rest) = match identities.split_first() {
        Some((first, rest)) => (Some(first), rest),
        None => (None, identities),
    };
    let sql = sqlx::AssertSqlSafe(match (first, c.is_postgres()) {
        (None, _) => format!("{contact} RETURNING {COLUMNS}"),
        // The contact's id is its rowid (`INTEGER PRIMARY KEY`); the search
        // index's trigger does not change `last_insert_rowid()` afterwards.
        (Some(_), false) => {
            format!(
                "{contact} RETURNING {COLUMNS};\n{identity} VALUES ($1, $2, last_insert_rowid(), $14, $15, $16, $13)"
            )
        }
        (Some(_), true) => format!(
            "WITH created AS ({contact} RETURNING {COLUMNS}),
                  identified AS ({identity} SELECT $1, $2, created.id, $14, $15, $16, $13 FROM created)
             SELECT * FROM created"
        ),
    });
    // The contact's columns, bound for either backend.
    macro_rules! contact_query {
        () => {
            bind_new_contact!(sqlx::query_as(sql).bind_scope(scope), bind, f, now)
        };
    }
    let rows: Vec<Row> = match first {
        Some(first) => {
            fetch_all!(c, contact_query!().bind(first.channel.as_str()).bind(&first.address).bind(first.unverified))?
        }
        None => fetch_all!(c, contact_query!())?,
    };
    let row = rows.into_iter().next().ok_or_else(|| crate::StoreError::Corrupt("an insert returned no row".into()))?;
    forget_addresses(c, scope, f);
    if let Some(first) = first {
        forget_absent(c, &Absent::Identity { scope, identity: first.clone() });
    }
    let mut contact = row.into_contact(Vec::new())?;
    for identity in rest {
        add_identity(c, scope, contact.id, identity).await?;
    }
    contact.identities = identities.to_vec();
    versions::bump(c, scope, VERSION_KEY).await?;
    Ok(contact)
}

/// Inserts several contacts (without identities), in order; for imports.
pub async fn insert_many(c: &mut impl AsHandle, scope: Scope, fields: &[ContactFields]) -> StoreResult<Vec<Contact>> {
    let now = Timestamp::now();
    let mut out = Vec::with_capacity(fields.len());
    // 14 binds a row, well under SQLite's limit on bound parameters.
    for chunk in fields.chunks(500) {
        let ids: Vec<(i64,)> = crate::dispatch!(c, conn => {
            let mut q = sqlx::QueryBuilder::new(format!("INSERT INTO contacts ({INSERT_COLUMNS}, updated_at) "));
            q.push_values(chunk, |mut b, f| {
                let row = b.push_bind(scope.workspace_id).push_bind(scope.livemode());
                bind_new_contact!(row, push_bind, f, now).push_bind(now);
            });
            q.push(" RETURNING id");
            q.build_query_as::<(i64,)>().fetch_all(conn).await
        })?;
        // RETURNING gives no order guarantee; ids follow insertion order.
        let mut ids: Vec<i64> = ids.into_iter().map(|(id,)| id).collect();
        ids.sort_unstable();
        out.extend(ids.into_iter().zip(chunk).map(|(id, f)| f.clone().into_contact(id, now)));
    }
    if !fields.is_empty() {
        for f in fields {
            forget_addresses(c, scope, f);
        }
        versions::bump(c, scope, VERSION_KEY).await?;
    }
    Ok(out)
}

/// Writes every field (the origin never changes); false if no such contact.
pub async fn update(c: &mut impl AsHandle, scope: Scope, id: i64, f: &ContactFields) -> StoreResult<bool> {
    let n = execute!(
        c,
        sqlx::query(
            "UPDATE contacts SET display_name = $4, canonical_name = $5, normalized_phone = $6, normalized_email = $7,
                avatar_url = $8, notes = $9, tags = $10, metadata = $11, search_text = $12, updated_at = $13
             WHERE workspace_id = $1 AND livemode = $2 AND id = $3",
        )
        .bind_scope(scope)
        .bind(id)
        .bind(&f.display_name)
        .bind(&f.canonical_name)
        .bind(&f.normalized_phone)
        .bind(&f.normalized_email)
        .bind(&f.avatar_url)
        .bind(&f.notes)
        .bind(Json(&f.tags))
        .bind(Json(&f.metadata))
        .bind(f.search_text())
        .bind(Timestamp::now())
    )?;
    if n > 0 {
        forget_addresses(c, scope, f);
        versions::bump(c, scope, VERSION_KEY).await?;
    }
    Ok(n > 0)
}

/// Forgets that no contact had `f`'s phone and email (one has now).
fn forget_addresses(c: &mut impl AsHandle, scope: Scope, f: &ContactFields) {
    if let Some(phone) = &f.normalized_phone {
        forget_absent(c, &address_key(scope, AddressColumn::Phone, phone));
    }
    if let Some(email) = &f.normalized_email {
        forget_absent(c, &address_key(scope, AddressColumn::Email, email));
    }
}

fn address_key(scope: Scope, column: AddressColumn, value: &str) -> Absent {
    match column {
        AddressColumn::Phone => Absent::Phone { scope, phone: value.to_owned() },
        AddressColumn::Email => Absent::Email { scope, email: value.to_owned() },
    }
}

/// Deletes a contact and its identities; false if there was none.
pub async fn delete(c: &mut impl AsHandle, scope: Scope, id: i64) -> StoreResult<bool> {
    execute!(
        c,
        sqlx::query("DELETE FROM contact_identities WHERE workspace_id = $1 AND livemode = $2 AND contact_id = $3")
            .bind_scope(scope)
            .bind(id)
    )?;
    let n = execute!(
        c,
        sqlx::query("DELETE FROM contacts WHERE workspace_id = $1 AND livemode = $2 AND id = $3")
            .bind_scope(scope)
            .bind(id)
    )?;
    if n > 0 {
        versions::bump(c, scope, VERSION_KEY).await?;
    }
    Ok(n > 0)
}

/// Reads a contact with its identities. With `for_update`, PostgreSQL locks
/// the row until the transaction ends.
pub async fn get(c: &mut impl AsHandle, scope: Scope, id: i64, for_update: bool) -> StoreResult<Option<Contact>> {
    let lock = if for_update && c.is_postgres() { " FOR UPDATE" } else { "" };
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM contacts WHERE workspace_id = $1 AND livemode = $2 AND id = $3{lock}"
    ));
    let row: Option<Row> = fetch_optional!(c, sqlx::query_as(sql).bind_scope(scope).bind(id))?;
    let Some(row) = row else { return Ok(None) };
    let mut identities = identities_of(c, scope, &[id]).await?;
    row.into_contact(identities.remove(&id).unwrap_or_default()).map(Some)
}

/// Contacts by id, with their identities (missing ids are left out).
pub async fn get_many(c: &mut impl AsHandle, scope: Scope, ids: &[i64]) -> StoreResult<HashMap<i64, Contact>> {
    let mut out = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        let mut w = Where::scoped(scope, "c");
        let list = w.list(chunk.iter().map(|id| Arg::I64(*id)));
        // Without statistics SQLite would rather scan the scope's index than
        // look the ids up: tell it not to.
        let table = if c.is_postgres() { "contacts c" } else { "contacts c NOT INDEXED" };
        let sql = sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM {table}{} AND c.id IN ({list})", w.sql()));
        let rows: Vec<Row> = fetch_all!(c, bind_args!(sqlx::query_as(sql), w.args.clone()))?;
        let mut identities = identities_of(c, scope, chunk).await?;
        for r in rows {
            let id = r.id;
            out.insert(id, r.into_contact(identities.remove(&id).unwrap_or_default())?);
        }
    }
    Ok(out)
}

/// Which of these normalised phones (or emails, with `column` =
/// `normalized_email`) belong to a contact, and to which.
pub async fn ids_by_addresses(
    c: &mut impl AsHandle,
    scope: Scope,
    column: AddressColumn,
    values: &[&str],
) -> StoreResult<HashMap<String, i64>> {
    let mut out = HashMap::with_capacity(values.len());
    for chunk in values.chunks(500) {
        let mut w = Where::scoped(scope, "c");
        let list = w.list(chunk.iter().map(|v| Arg::Text((*v).to_owned())));
        let col = column.as_sql();
        let sql = sqlx::AssertSqlSafe(format!("SELECT {col}, c.id FROM contacts c{} AND {col} IN ({list})", w.sql()));
        let rows: Vec<(String, i64)> = fetch_all!(c, bind_args!(sqlx::query_as(sql), w.args.clone()))?;
        out.extend(rows);
    }
    Ok(out)
}

/// The unique address columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressColumn {
    Phone,
    Email,
}

impl AddressColumn {
    fn as_sql(self) -> &'static str {
        match self {
            AddressColumn::Phone => "c.normalized_phone",
            AddressColumn::Email => "c.normalized_email",
        }
    }
}

/// The contact that has this normalised phone (or email), if any.
pub async fn id_by_address(
    c: &mut impl AsHandle,
    scope: Scope,
    column: AddressColumn,
    value: &str,
) -> StoreResult<Option<i64>> {
    if known_absent(c, &address_key(scope, column, value)) {
        return Ok(None);
    }
    Ok(ids_by_addresses(c, scope, column, &[value]).await?.remove(value))
}

/// Looks ahead for a batch of senders (a transaction's lookahead, see
/// [`crate::Absences`]): which of these phones (or emails) no contact has,
/// in one statement, so that [`id_by_address`] answers them without one.
pub async fn look_ahead_addresses(
    c: &mut impl AsHandle,
    scope: Scope,
    column: AddressColumn,
    addresses: &[&str],
) -> StoreResult<()> {
    if c.absences().is_none() || addresses.is_empty() {
        return Ok(());
    }
    let found = ids_by_addresses(c, scope, column, addresses).await?;
    for a in addresses.iter().filter(|a| !found.contains_key(**a)) {
        note_absent(c, address_key(scope, column, a));
    }
    Ok(())
}

/// Looks ahead for a batch of senders: which of these identities nobody
/// owns, in one statement, so that [`id_by_identity`] answers them
/// without one.
pub async fn look_ahead_identities(c: &mut impl AsHandle, scope: Scope, identities: &[Identity]) -> StoreResult<()> {
    if c.absences().is_none() {
        return Ok(());
    }
    // One channel at a time: `channel = $3 AND address IN (…)` is on the index.
    let mut channels: Vec<parley_domain::channel::ChannelType> = identities.iter().map(|i| i.channel).collect();
    channels.sort_unstable_by_key(|ch| ch.as_str());
    channels.dedup();
    for channel in channels {
        // Unverified identities are rare and always looked up.
        let addresses: Vec<&str> =
            identities.iter().filter(|i| i.channel == channel && !i.unverified).map(|i| i.address.as_str()).collect();
        for chunk in addresses.chunks(500) {
            let mut w = Where::scoped(scope, "i");
            w.and("i.channel = ?", [Arg::Text(channel.as_str().to_owned())]);
            let list = w.list(chunk.iter().map(|a| Arg::Text((*a).to_owned())));
            let sql = sqlx::AssertSqlSafe(format!(
                "SELECT i.address FROM contact_identities i{} AND i.address IN ({list})",
                w.sql()
            ));
            let rows: Vec<(String,)> = fetch_all!(c, bind_args!(sqlx::query_as(sql), w.args.clone()))?;
            let found: std::collections::HashSet<String> = rows.into_iter().map(|(a,)| a).collect();
            for address in chunk.iter().filter(|a| !found.contains(**a)) {
                let identity = Identity { channel, address: (*address).to_owned(), unverified: false };
                note_absent(c, Absent::Identity { scope, identity });
            }
        }
    }
    Ok(())
}

/// The contact that owns this identity, if any.
pub async fn id_by_identity(c: &mut impl AsHandle, scope: Scope, identity: &Identity) -> StoreResult<Option<i64>> {
    if known_absent(c, &Absent::Identity { scope, identity: identity.clone() }) {
        return Ok(None);
    }
    let row: Option<(i64,)> = fetch_optional!(
        c,
        sqlx::query_as(
            "SELECT contact_id FROM contact_identities
             WHERE workspace_id = $1 AND livemode = $2 AND channel = $3 AND address = $4 AND unverified = $5",
        )
        .bind_scope(scope)
        .bind(&identity.channel)
        .bind(&identity.address)
        .bind(identity.unverified)
    )?;
    Ok(row.map(|r| r.0))
}

/// Identities of several contacts, by contact id, oldest first.
async fn identities_of(c: &mut impl AsHandle, scope: Scope, ids: &[i64]) -> StoreResult<HashMap<i64, Vec<Identity>>> {
    let mut out: HashMap<i64, Vec<Identity>> = HashMap::new();
    if ids.is_empty() {
        return Ok(out);
    }
    let mut w = Where::scoped(scope, "i");
    let list = w.list(ids.iter().map(|id| Arg::I64(*id)));
    let table = if c.is_postgres() {
        "contact_identities i"
    } else {
        "contact_identities i INDEXED BY contact_identities_contact"
    };
    let sql = sqlx::AssertSqlSafe(format!(
        "SELECT i.contact_id, i.channel, i.address, i.unverified FROM {table}{} AND i.contact_id IN ({list}) ORDER BY i.id",
        w.sql()
    ));
    let rows: Vec<(i64, parley_domain::channel::ChannelType, String, bool)> =
        fetch_all!(c, bind_args!(sqlx::query_as(sql), w.args.clone()))?;
    for (contact_id, channel, address, unverified) in rows {
        out.entry(contact_id).or_default().push(Identity { channel, address, unverified });
    }
    Ok(out)
}

/// Adds an identity to a contact. The caller has checked it is free.
pub async fn add_identity(
    c: &mut impl AsHandle,
    scope: Scope,
    contact_id: i64,
    identity: &Identity,
) -> StoreResult<()> {
    forget_absent(c, &Absent::Identity { scope, identity: identity.clone() });
    execute!(
        c,
        sqlx::query(
            "INSERT INTO contact_identities (workspace_id, livemode, contact_id, channel, address, unverified, created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind_scope(scope)
        .bind(contact_id)
        .bind(&identity.channel)
        .bind(&identity.address)
        .bind(identity.unverified)
        .bind(Timestamp::now())
    )?;
    Ok(())
}

/// Removes every identity of a contact.
pub async fn clear_identities(c: &mut impl AsHandle, scope: Scope, contact_id: i64) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query("DELETE FROM contact_identities WHERE workspace_id = $1 AND livemode = $2 AND contact_id = $3")
            .bind_scope(scope)
            .bind(contact_id)
    )?;
    Ok(())
}

/// Gives every proven identity of `from` to `to` (a merge). Unverified ones
/// stay (and go with `from` when it is deleted): moved, they would let
/// anyone writing as that address reach `to`.
pub async fn move_identities(c: &mut impl AsHandle, scope: Scope, from: i64, to: i64) -> StoreResult<()> {
    execute!(
        c,
        sqlx::query(
            "UPDATE contact_identities SET contact_id = $4
             WHERE workspace_id = $1 AND livemode = $2 AND contact_id = $3 AND NOT unverified",
        )
        .bind_scope(scope)
        .bind(from)
        .bind(to)
    )?;
    Ok(())
}

/// A `q` search, prepared by the service: the lower-cased text, and the
/// digits of a query that looks like a phone number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchTerms {
    pub text: String,
    pub digits: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct ContactFilter {
    pub q: Option<SearchTerms>,
    pub tag: Option<String>,
    pub origin: Option<Origin>,
    pub updated_since: Option<Timestamp>,
}

/// Escapes a term for an FTS5 string (a phrase): double the quotes.
fn fts_phrase(term: &str) -> String {
    format!("\"{}\"", term.replace('"', "\"\""))
}

fn like_pattern(term: &str) -> String {
    super::like_contains(term)
}

/// The trigram index needs at least 3 characters per term.
const TRIGRAM: usize = 3;

/// Adds the `q` condition; true when it joins SQLite's trigram index (the
/// query must then read `FROM contacts_search CROSS JOIN contacts c`, so the
/// index drives the join instead of being probed once per contact).
fn add_search(w: &mut Where, backend_is_pg: bool, q: &SearchTerms) -> bool {
    let terms: Vec<&str> = std::iter::once(q.text.as_str()).chain(q.digits.as_deref()).collect();
    let indexable = terms.iter().all(|t| t.chars().count() >= TRIGRAM);
    if !backend_is_pg && indexable {
        let expr = terms.iter().map(|t| fts_phrase(t)).collect::<Vec<_>>().join(" OR ");
        w.and("contacts_search.rowid = c.id AND contacts_search MATCH ?", [Arg::Text(expr)]);
        return true;
    }
    // PostgreSQL's trigram index serves LIKE; on SQLite, short terms scan.
    match terms.as_slice() {
        [text] => w.and("c.search_text LIKE ? ESCAPE '\\'", [Arg::Text(like_pattern(text))]),
        _ => w.and(
            "(c.search_text LIKE ? ESCAPE '\\' OR c.search_text LIKE ? ESCAPE '\\')",
            terms.iter().map(|t| Arg::Text(like_pattern(t))),
        ),
    };
    false
}

/// Contacts newest first (with their identities), and how many match.
pub async fn list(
    c: &mut impl AsHandle,
    scope: Scope,
    filter: &ContactFilter,
    page: Page,
) -> StoreResult<(Vec<Contact>, i64)> {
    let pg = c.is_postgres();
    let mut w = Where::scoped(scope, "c");
    let indexed = filter.q.as_ref().is_some_and(|q| add_search(&mut w, pg, q));
    if let Some(tag) = &filter.tag {
        let clause = if pg {
            "c.tags @> jsonb_build_array(CAST(? AS TEXT))"
        } else {
            "EXISTS (SELECT 1 FROM json_each(c.tags) j WHERE j.value = ?)"
        };
        w.and(clause, [Arg::Text(tag.clone())]);
    }
    if let Some(o) = filter.origin {
        w.and("c.origin = ?", [Arg::Text(o.as_str().to_owned())]);
    }
    if let Some(t) = filter.updated_since {
        w.and("c.updated_at >= ?", [Arg::Time(t)]);
    }
    if indexed {
        return list_indexed(c, scope, &w, page).await;
    }
    let n = w.next_placeholder();
    let count_sql = sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM contacts c{}", w.sql()));
    let page_sql = sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM contacts c{} ORDER BY c.created_at DESC, c.id DESC LIMIT ${} OFFSET ${}",
        w.sql(),
        n,
        n + 1
    ));
    let (total,): (i64,) = fetch_one!(c, bind_args!(sqlx::query_as(count_sql), w.args.clone()))?;
    let rows: Vec<Row> =
        fetch_all!(c, bind_args!(sqlx::query_as(page_sql), w.args.clone()).bind(page.limit).bind(page.offset))?;
    let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
    let mut identities = identities_of(c, scope, &ids).await?;
    let contacts = rows
        .into_iter()
        .map(|r| {
            let id = r.id;
            r.into_contact(identities.remove(&id).unwrap_or_default())
        })
        .collect::<StoreResult<_>>()?;
    Ok((contacts, total))
}

/// A trigram search on SQLite, in one pass over the index: the matches are
/// gathered once and give both the page (a few ids) and the total, so only
/// the page's rows cross from SQLite's thread.
async fn list_indexed(c: &mut impl AsHandle, scope: Scope, w: &Where, page: Page) -> StoreResult<(Vec<Contact>, i64)> {
    let n = w.next_placeholder();
    let sql = sqlx::AssertSqlSafe(format!(
        "WITH hits AS MATERIALIZED (SELECT c.id, c.created_at FROM contacts_search CROSS JOIN contacts c{})
         SELECT h.id, (SELECT COUNT(*) FROM hits) FROM hits h ORDER BY h.created_at DESC, h.id DESC LIMIT ${} OFFSET ${}",
        w.sql(),
        n,
        n + 1
    ));
    let rows: Vec<(i64, i64)> =
        fetch_all!(c, bind_args!(sqlx::query_as(sql), w.args.clone()).bind(page.limit).bind(page.offset))?;
    let total = match rows.first() {
        Some((_, total)) => *total,
        // A page past the end: count on its own.
        None => {
            let sql =
                sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM contacts_search CROSS JOIN contacts c{}", w.sql()));
            let (total,): (i64,) = fetch_one!(c, bind_args!(sqlx::query_as(sql), w.args.clone()))?;
            total
        }
    };
    let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
    let mut found = get_many(c, scope, &ids).await?;
    Ok((ids.iter().filter_map(|id| found.remove(id)).collect(), total))
}
