//! CSV import of contacts: all rows are validated first, then written in one
//! transaction; one bad row and nothing is written.
//!
//! The CSV is read as a stream, record by record, and each row is kept only
//! in its parsed, normalised form, so a 50,000-row file is held in memory
//! once. Rows that match an existing contact by phone or email update it
//! (names and notes replace, tags are added); other rows create contacts
//! with `origin: import`.

use parley_domain::Scope;
use parley_domain::contact::{Contact, Origin, Phone, canonical_name};
use parley_domain::email::Email;
use parley_domain::validation::{FieldError, Loc, LocPart, loc};
use parley_store::repo::contacts::{self as repo, ContactFields};
use parley_store::repo::events;
use serde::Serialize;
use tokio::io::AsyncRead;
use utoipa::ToSchema;

use crate::contacts::clean_tags;
use crate::{ServiceError, ServiceResult, Services, event_data};

/// The most rows one import takes.
pub const MAX_ROWS: usize = 50_000;
/// Errors reported at most; past this the import stops reading.
const MAX_ERRORS: usize = 1_000;
const COLUMNS: &[&str] = &["display_name", "phone", "email", "notes", "tags"];

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
    svc: &Services,
    errors: &mut Vec<FieldError>,
) -> Option<Row> {
    let before = errors.len();
    let display_name = cols.get(record, 0).map(str::to_owned);
    if display_name.as_ref().is_some_and(|n| n.chars().count() > 200) {
        errors.push(FieldError::too_long(row_loc(number, "display_name"), 200));
    }
    let phone = cols.get(record, 1).and_then(|raw| {
        Phone::parse(raw, svc.config.contacts.default_region)
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

/// Reads and validates every row; the 422 lists each bad row and field.
async fn read_rows<R: AsyncRead + Unpin + Send>(svc: &Services, input: R) -> ServiceResult<Vec<Row>> {
    let mut reader = csv_async::AsyncReaderBuilder::new().has_headers(true).flexible(false).create_reader(input);
    let mut errors = Vec::new();
    let headers = reader.headers().await.map_err(unreadable)?.clone();
    let cols = Columns::read(&headers, &mut errors);
    if !errors.is_empty() {
        return Err(ServiceError::Validation(errors));
    }
    let mut rows = Vec::new();
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
                if let Some(row) = parse_row(number, &record, &cols, svc, &mut errors) {
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
        if errors.len() >= MAX_ERRORS {
            break;
        }
    }
    if errors.is_empty() { Ok(rows) } else { Err(ServiceError::Validation(errors)) }
}

fn unreadable(e: csv_async::Error) -> ServiceError {
    ServiceError::BadRequest(format!("Could not read the CSV: {e}"))
}

/// Imports a CSV stream into `scope`.
pub async fn import<R: AsyncRead + Unpin + Send>(
    svc: &Services,
    scope: Scope,
    input: R,
) -> ServiceResult<ImportReport> {
    let rows = read_rows(svc, input).await?;
    let mut tx = svc.db.begin().await?;
    let mut report = ImportReport::default();
    let mut errors = Vec::new();
    for row in rows {
        let by_phone = match &row.phone {
            Some(p) => repo::id_by_phone(&mut tx, scope, p).await?,
            None => None,
        };
        let by_email = match &row.email {
            Some(e) => repo::id_by_email(&mut tx, scope, e).await?,
            None => None,
        };
        let existing = match (by_phone, by_email) {
            (Some(a), Some(b)) if a != b => {
                errors.push(FieldError::new(
                    row_loc(row.number, "email"),
                    "value_error.contact.conflict",
                    format!("the phone matches contact {a} and the email matches contact {b}"),
                ));
                continue;
            }
            (found, None) | (None, found) | (found @ Some(_), Some(_)) => found,
        };
        if !errors.is_empty() {
            continue; // nothing will be written; only look for more conflicts
        }
        match existing {
            None => {
                let contact = repo::insert(&mut tx, scope, &new_fields(row)).await?;
                events::append(&mut tx, scope, "contact.created", event_data(&contact)).await?;
                report.created += 1;
            }
            Some(id) => {
                let current =
                    repo::get(&mut tx, scope, id, true).await?.ok_or_else(|| ServiceError::not_found("Contact", id))?;
                let fields = updated_fields(&current, row);
                if fields == ContactFields::from(&current) {
                    report.unchanged += 1;
                } else {
                    repo::update(&mut tx, scope, id, &fields).await?;
                    let contact = repo::get(&mut tx, scope, id, false)
                        .await?
                        .ok_or_else(|| ServiceError::not_found("Contact", id))?;
                    events::append(&mut tx, scope, "contact.updated", event_data(&contact)).await?;
                    report.updated += 1;
                }
            }
        }
    }
    if !errors.is_empty() {
        return Err(ServiceError::Validation(errors));
    }
    tx.commit().await?;
    Ok(report)
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

fn updated_fields(current: &Contact, row: Row) -> ContactFields {
    let mut f = ContactFields::from(current);
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
