//! CSV import of contacts: all rows are validated first, then written in one
//! transaction; one bad row and nothing is written.
//!
//! The CSV is read as a stream, record by record, and each row is kept only
//! in its parsed, normalised form, so a 50,000-row file is held in memory
//! once. Rows that match an existing contact by phone or email update it
//! (names and notes replace, tags are added); other rows create contacts
//! with `origin: import`.

use parley_domain::Scope;
use parley_domain::event::EventType;
use std::collections::{BTreeSet, HashMap};

use parley_domain::contact::{Origin, Phone, Region, canonical_name};
use parley_domain::email::Email;
use parley_domain::validation::{FieldError, Loc, LocPart, loc};
use parley_store::Tx;
use parley_store::repo::contacts::{self as repo, AddressColumn, ContactFields};
use parley_store::repo::events;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;
use utoipa::ToSchema;

use crate::crm::contacts::clean_tags;
use crate::{ServiceError, ServiceResult, Services, event_data};

/// The most rows one import takes.
pub const MAX_ROWS: usize = 50_000;
/// Faults listed at most (header and rows together); the rest are counted.
pub const MAX_REPORTED_FAULTS: usize = 100;
/// The widest header accepted (the importer knows five columns).
pub const MAX_COLUMNS: usize = 50;
const COLUMNS: &[&str] = &["display_name", "phone", "email", "notes", "tags"];

/// The faults of one import: the first [`MAX_REPORTED_FAULTS`] in full,
/// and how many more there were, so a hostile file cannot make the answer
/// (or the memory behind it) grow with its size.
#[derive(Default)]
struct Faults {
    listed: Vec<FieldError>,
    unlisted: usize,
}

impl Faults {
    fn is_empty(&self) -> bool {
        self.listed.is_empty()
    }

    /// Takes the faults a row or the header recorded in `found`.
    fn take(&mut self, found: &mut Vec<FieldError>) {
        for e in found.drain(..) {
            if self.listed.len() < MAX_REPORTED_FAULTS {
                self.listed.push(e);
            } else {
                self.unlisted += 1;
            }
        }
    }

    fn into_error(mut self) -> ServiceError {
        if self.unlisted > 0 {
            let n = self.unlisted;
            self.listed.push(
                FieldError::new(
                    loc(&["body"]),
                    "value_error.too_many_errors",
                    format!("{n} more faults are not listed; fix these and import again"),
                )
                .with_ctx(serde_json::json!({ "count": n })),
            );
        }
        ServiceError::Validation(self.listed)
    }
}

/// `POST /api/v1/contacts/import`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, ToSchema)]
pub struct ImportReport {
    /// Rows that created a contact.
    pub created: u64,
    /// Rows that changed an existing contact.
    pub updated: u64,
    /// Rows that matched a contact and changed nothing.
    pub unchanged: u64,
}

/// One data row, validated and normalised.
struct Row {
    /// 1-based among data rows (the header is not counted).
    number: usize,
    display_name: Option<String>,
    phone: Option<String>,
    email: Option<String>,
    notes: Option<String>,
    tags: Vec<String>,
}

fn row_loc(number: usize, field: &str) -> Loc {
    vec![LocPart::from("body"), LocPart::from("rows"), LocPart::from(number), LocPart::from(field)]
}

/// Which column holds which field.
#[derive(Default)]
struct Columns {
    index: [Option<usize>; 5],
}

impl Columns {
    fn read(headers: &csv_async::StringRecord, errors: &mut Vec<FieldError>) -> Columns {
        let mut cols = Columns::default();
        if headers.len() > MAX_COLUMNS {
            errors.push(
                FieldError::new(
                    loc(&["body", "header"]),
                    "value_error.csv.too_many_columns",
                    format!("the header has {} columns; at most {MAX_COLUMNS}", headers.len()),
                )
                .with_ctx(serde_json::json!({ "limit_value": MAX_COLUMNS })),
            );
            return cols;
        }
        for (i, name) in headers.iter().enumerate() {
            let name = name.trim().trim_start_matches('\u{feff}').to_ascii_lowercase();
            let at = || vec![LocPart::from("body"), LocPart::from("header"), LocPart::from(name.as_str())];
            match COLUMNS.iter().position(|c| *c == name) {
                Some(k) if cols.index[k].is_some() => {
                    errors.push(FieldError::new(at(), "value_error.csv.duplicate_column", "this column appears twice"))
                }
                Some(k) => cols.index[k] = Some(i),
                None => errors.push(FieldError::new(
                    at(),
                    "value_error.extra",
                    format!("unknown column; the columns are {}", COLUMNS.join(", ")),
                )),
            }
        }
        if cols.index[..3].iter().all(Option::is_none) {
            errors.push(FieldError::new(
                loc(&["body", "header"]),
                "value_error.missing",
                "the header needs a display_name, phone or email column",
            ));
        }
        cols
    }

    fn get<'r>(&self, record: &'r csv_async::StringRecord, column: usize) -> Option<&'r str> {
        self.index[column].and_then(|i| record.get(i)).map(str::trim).filter(|s| !s.is_empty())
    }
}

fn parse_row(
    number: usize,
    record: &csv_async::StringRecord,
    cols: &Columns,
    region: Region,
    errors: &mut Vec<FieldError>,
) -> Option<Row> {
    let before = errors.len();
    for (k, name) in COLUMNS.iter().enumerate() {
        if cols.get(record, k).is_some_and(|v| v.contains('\0')) {
            errors.push(FieldError::new(row_loc(number, name), "value_error.string.nul", "contains a NUL character"));
        }
    }
    if errors.len() > before {
        return None;
    }
    let display_name = cols.get(record, 0).map(str::to_owned);
    if display_name.as_ref().is_some_and(|n| n.chars().count() > 200) {
        errors.push(FieldError::too_long(row_loc(number, "display_name"), 200));
    }
    let phone = cols.get(record, 1).and_then(|raw| {
        Phone::parse(raw, region)
            .map(|p| p.as_str().to_owned())
            .map_err(|m| errors.push(FieldError::new(row_loc(number, "phone"), "value_error.phone", m)))
            .ok()
    });
    let email = cols.get(record, 2).and_then(|raw| {
        Email::parse(raw)
            .map(|e| e.as_str().to_owned())
            .map_err(|m| errors.push(FieldError::new(row_loc(number, "email"), "value_error.email", m)))
            .ok()
    });
    let notes = cols.get(record, 3).map(str::to_owned);
    if notes.as_ref().is_some_and(|n| n.chars().count() > 10_000) {
        errors.push(FieldError::too_long(row_loc(number, "notes"), 10_000));
    }
    let tags = clean_tags(cols.get(record, 4).unwrap_or_default().split([';', '|', ',']).map(str::to_owned));
    if tags.len() > 50 || tags.iter().any(|t| t.chars().count() > 50) {
        errors.push(FieldError::new(
            row_loc(number, "tags"),
            "value_error.tags",
            "at most 50 tags of 1 to 50 characters",
        ));
    }
    let has_value = [0, 1, 2].iter().any(|k| cols.get(record, *k).is_some());
    if !has_value {
        errors.push(FieldError::new(
            row_loc(number, "display_name"),
            "value_error.missing",
            "a row needs a display_name, phone or email",
        ));
    }
    (errors.len() == before).then_some(Row { number, display_name, phone, email, notes, tags })
}

/// The UTF-8 byte order mark some spreadsheets write first.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// `input` without a leading byte order mark. The CSV reader drops one only
/// when its first read holds all three bytes, and a request body can arrive
/// in smaller pieces; a mark left in place would make a padded or quoted
/// first column name unrecognisable.
async fn without_bom<R: AsyncRead + Unpin + Send>(mut input: R) -> std::io::Result<impl AsyncRead + Unpin + Send> {
    let mut head = [0u8; 3];
    let mut n = 0;
    while n < BOM.len() && head[..n] == BOM[..n] {
        match input.read(&mut head[n..]).await? {
            0 => break,
            got => n += got,
        }
    }
    let head = if head[..n] == *BOM { Vec::new() } else { head[..n].to_vec() };
    Ok(std::io::Cursor::new(head).chain(input))
}

/// Rows handed from the reader to the writer at a time.
const CHUNK: usize = 1_000;

/// Reads and validates every row, sending valid rows on in chunks while no
/// row has failed; the 422 it returns lists each bad row and field.
async fn read_rows<R: AsyncRead + Unpin + Send>(
    region: Region,
    input: R,
    out: mpsc::Sender<Vec<Row>>,
) -> ServiceResult<()> {
    let input =
        without_bom(input).await.map_err(|e| ServiceError::BadRequest(format!("Could not read the CSV: {e}")))?;
    let mut reader = csv_async::AsyncReaderBuilder::new().has_headers(true).flexible(false).create_reader(input);
    let mut errors = Vec::new();
    let mut faults = Faults::default();
    let headers = reader.headers().await.map_err(unreadable)?.clone();
    let cols = Columns::read(&headers, &mut errors);
    faults.take(&mut errors);
    if !faults.is_empty() {
        return Err(faults.into_error());
    }
    let mut rows = Vec::with_capacity(CHUNK);
    let mut record = csv_async::StringRecord::new();
    let mut number = 0;
    loop {
        match reader.read_record(&mut record).await {
            Ok(false) => break,
            Ok(true) => {
                number += 1;
                if number > MAX_ROWS {
                    return Err(ServiceError::Validation(vec![FieldError::new(
                        loc(&["body", "rows"]),
                        "value_error.list.max_items",
                        format!("an import takes at most {MAX_ROWS} rows"),
                    )]));
                }
                if let Some(row) = parse_row(number, &record, &cols, region, &mut errors) {
                    rows.push(row);
                }
            }
            Err(e) if matches!(e.kind(), csv_async::ErrorKind::UnequalLengths { .. }) => {
                number += 1;
                errors.push(FieldError::new(
                    vec![LocPart::from("body"), LocPart::from("rows"), LocPart::from(number)],
                    "value_error.csv.columns",
                    format!("this row has a different number of fields than the header ({})", headers.len()),
                ));
            }
            Err(e) => return Err(unreadable(e)),
        }
        faults.take(&mut errors);
        // Once a row has failed nothing will be written: keep only checking
        // (and counting faults).
        if !faults.is_empty() {
            rows.clear();
        } else if rows.len() == CHUNK {
            let full = std::mem::replace(&mut rows, Vec::with_capacity(CHUNK));
            if out.send(full).await.is_err() {
                return Ok(()); // the writer gave up; its error is the answer
            }
        }
    }
    if !faults.is_empty() {
        return Err(faults.into_error());
    }
    if !rows.is_empty() {
        let _ = out.send(rows).await;
    }
    Ok(())
}

/// Reads and checks a CSV exactly as [`import`] does (header, rows, the
/// same faults under the same cap) without a database or writing anything;
/// answers how many rows an import would take. For tests and dry runs.
pub async fn validate<R: AsyncRead + Unpin + Send>(region: Region, input: R) -> ServiceResult<usize> {
    let (chunks, mut incoming) = mpsc::channel::<Vec<Row>>(2);
    let count = async move {
        let mut n = 0;
        while let Some(rows) = incoming.recv().await {
            n += rows.len();
        }
        n
    };
    let (read, n) = tokio::join!(read_rows(region, input, chunks), count);
    read.map(|()| n)
}

fn unreadable(e: csv_async::Error) -> ServiceError {
    ServiceError::BadRequest(format!("Could not read the CSV: {e}"))
}

/// Which contact a phone or email belongs to while the import runs: one
/// that existed, or one this import is creating (by position).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Existing(i64),
    New(usize),
}

/// Who owns each phone and email, kept current as rows change contacts.
#[derive(Default)]
struct Owners {
    phones: HashMap<String, Owner>,
    emails: HashMap<String, Owner>,
}

impl Owners {
    fn of(&self, row: &Row) -> (Option<Owner>, Option<Owner>) {
        let get = |map: &HashMap<String, Owner>, v: &Option<String>| v.as_ref().and_then(|v| map.get(v)).copied();
        (get(&self.phones, &row.phone), get(&self.emails, &row.email))
    }

    /// Records that `owner` moved from `before` to `after`.
    fn moved(&mut self, owner: Owner, before: &ContactFields, after: &ContactFields) {
        for (map, old, new) in [
            (&mut self.phones, &before.normalized_phone, &after.normalized_phone),
            (&mut self.emails, &before.normalized_email, &after.normalized_email),
        ] {
            if old != new {
                if let Some(o) = old {
                    map.remove(o);
                }
                if let Some(n) = new {
                    map.insert(n.clone(), owner);
                }
            }
        }
    }
}

/// Imports a CSV stream into `scope`, in one transaction. A reader task
/// parses and checks rows while this one writes the rows already checked,
/// chunk by chunk (reads of existing contacts and inserts go in batches);
/// if any row fails, the transaction is dropped and nothing is written.
pub async fn import<R>(svc: &Services, scope: Scope, input: R) -> ServiceResult<ImportReport>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let (chunks, mut incoming) = mpsc::channel(2);
    let reader = tokio::spawn(read_rows(svc.config.contacts.default_region, input, chunks));
    let mut work = svc.begin().await?;
    let mut report = ImportReport::default();
    let mut conflicts = Faults::default();
    let mut written = Ok(());
    while let Some(rows) = incoming.recv().await {
        written = write_chunk(&mut work, scope, rows, &mut report, &mut conflicts).await;
        if written.is_err() {
            break;
        }
    }
    drop(incoming);
    let read = reader.await.map_err(|e| ServiceError::BadRequest(format!("Could not read the CSV: {e}")))?;
    read?;
    written?;
    if !conflicts.is_empty() {
        return Err(conflicts.into_error());
    }
    svc.commit(work).await?;
    Ok(report)
}

/// Matches, updates and creates the contacts of one chunk of checked rows.
/// Rows of earlier chunks are already written, so lookups find them.
async fn write_chunk(
    tx: &mut Tx,
    scope: Scope,
    rows: Vec<Row>,
    report: &mut ImportReport,
    conflicts: &mut Faults,
) -> ServiceResult<()> {
    let mut owners = Owners::default();
    let phones: Vec<&str> = rows.iter().filter_map(|r| r.phone.as_deref()).collect();
    let emails: Vec<&str> = rows.iter().filter_map(|r| r.email.as_deref()).collect();
    for (map, column, values) in
        [(&mut owners.phones, AddressColumn::Phone, &phones), (&mut owners.emails, AddressColumn::Email, &emails)]
    {
        for (value, id) in repo::ids_by_addresses(tx, scope, column, values).await? {
            map.insert(value, Owner::Existing(id));
        }
    }
    let matched: Vec<i64> = owners
        .phones
        .values()
        .chain(owners.emails.values())
        .filter_map(|o| match o {
            Owner::Existing(id) => Some(*id),
            Owner::New(_) => None,
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut existing: HashMap<i64, ContactFields> =
        repo::get_many(tx, scope, &matched).await?.iter().map(|(id, c)| (*id, ContactFields::from(c))).collect();
    let mut changed: BTreeSet<i64> = BTreeSet::new();
    let mut created: Vec<ContactFields> = Vec::new();

    for row in rows {
        let owner = match owners.of(&row) {
            (Some(a), Some(b)) if a != b => {
                conflicts.take(&mut vec![FieldError::new(
                    row_loc(row.number, "email"),
                    "value_error.contact.conflict",
                    format!("the phone and the email belong to two different contacts ({})", describe(&[a, b])),
                )]);
                continue;
            }
            (found @ Some(_), _) | (None, found) => found,
        };
        let current = match owner {
            None => {
                let fields = new_fields(row);
                owners.moved(Owner::New(created.len()), &ContactFields::default(), &fields);
                created.push(fields);
                report.created += 1;
                continue;
            }
            Some(Owner::Existing(id)) => existing.get_mut(&id),
            Some(Owner::New(i)) => created.get_mut(i),
        };
        let Some(current) = current else { continue };
        let fields = updated_fields(current, row);
        if fields == *current {
            report.unchanged += 1;
            continue;
        }
        let owner = owner.expect("matched above");
        owners.moved(owner, current, &fields);
        *current = fields;
        if let Owner::Existing(id) = owner {
            changed.insert(id);
        }
        report.updated += 1;
    }
    if !conflicts.is_empty() {
        return Ok(()); // nothing will be written; later chunks are only checked
    }
    for id in &changed {
        repo::update(tx, scope, *id, &existing[id]).await?;
    }
    let inserted = repo::insert_many(tx, scope, &created).await?;
    events::append_many(
        tx,
        scope,
        EventType::ContactCreated,
        inserted.iter().map(event_data).collect::<ServiceResult<_>>()?,
    )
    .await?;
    let ids: Vec<i64> = changed.into_iter().collect();
    let mut updated = repo::get_many(tx, scope, &ids).await?;
    let data =
        ids.iter().filter_map(|id| updated.remove(id)).map(|c| event_data(&c)).collect::<ServiceResult<Vec<_>>>()?;
    events::append_many(tx, scope, EventType::ContactUpdated, data).await?;
    Ok(())
}

fn describe(owners: &[Owner]) -> String {
    owners
        .iter()
        .map(|o| match o {
            Owner::Existing(id) => format!("contact {id}"),
            Owner::New(i) => format!("a contact created by this import, #{}", i + 1),
        })
        .collect::<Vec<_>>()
        .join(" and ")
}

fn new_fields(row: Row) -> ContactFields {
    let display_name = row.display_name.or_else(|| row.email.clone()).or_else(|| row.phone.clone()).unwrap_or_default();
    ContactFields {
        canonical_name: canonical_name(&display_name),
        display_name,
        normalized_phone: row.phone,
        normalized_email: row.email,
        notes: row.notes,
        tags: row.tags,
        origin: Some(Origin::Import),
        ..ContactFields::default()
    }
}

fn updated_fields(current: &ContactFields, row: Row) -> ContactFields {
    let mut f = current.clone();
    if let Some(name) = row.display_name {
        f.canonical_name = canonical_name(&name);
        f.display_name = name;
    }
    if row.phone.is_some() {
        f.normalized_phone = row.phone;
    }
    if row.email.is_some() {
        f.normalized_email = row.email;
    }
    if row.notes.is_some() {
        f.notes = row.notes;
    }
    f.tags = clean_tags(f.tags.into_iter().chain(row.tags));
    f
}
