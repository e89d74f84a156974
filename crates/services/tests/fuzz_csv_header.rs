//! Property-based fuzzing of the contact CSV importer's reading half
//! (`contact_import::validate`: the header, `Columns::read`, the rows and
//! the fault cap), without a database. Each property keeps to a few seconds
//! in a debug build.
//!
//! Headers are written as CSV from a list of names, so the expected faults
//! follow from the names alone: a name is trimmed and ASCII-lower-cased; the
//! five known columns are taken once (again is `duplicate_column`), anything
//! else is `extra` at `["body", "header", <trimmed, lower-cased name>]`; a
//! header without display_name, phone or email is `missing`; a header of
//! more than 50 columns is one `too_many_columns` and nothing else. How the
//! input is split into reads never changes the answer.

use parley_domain::contact::Region;
use parley_domain::validation::{FieldError, LocPart};
use parley_services::ServiceError;
use parley_services::crm::contact_import::{MAX_COLUMNS, MAX_REPORTED_FAULTS, validate};
use proptest::prelude::*;
use proptest::test_runner::Config;
use std::sync::LazyLock;

const COLUMNS: [&str; 5] = ["display_name", "phone", "email", "notes", "tags"];
const BOM: &str = "\u{feff}";

fn config(cases: u32) -> Config {
    Config { cases, ..Config::default() }
}

static RUNTIME: LazyLock<tokio::runtime::Runtime> =
    LazyLock::new(|| tokio::runtime::Builder::new_current_thread().build().unwrap());

fn run(bytes: &[u8]) -> Result<usize, ServiceError> {
    RUNTIME.block_on(validate(Region::default(), bytes))
}

/// Like [`run`], but the input arrives `chunk` bytes at a time (as an HTTP
/// body may), which must not change the answer.
fn run_in_chunks(bytes: &[u8], chunk: usize) -> Result<usize, ServiceError> {
    RUNTIME.block_on(validate(Region::default(), Chunked { bytes, chunk }))
}

struct Chunked<'a> {
    bytes: &'a [u8],
    chunk: usize,
}

impl tokio::io::AsyncRead for Chunked<'_> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let n = self.chunk.min(self.bytes.len()).min(buf.remaining());
        buf.put_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        std::task::Poll::Ready(Ok(()))
    }
}

/// The answer of `run` as comparable faults (or the row count, or the
/// error's text).
fn outcome(result: Result<usize, ServiceError>) -> Result<usize, Result<Vec<Fault>, String>> {
    result.map_err(|e| match e {
        ServiceError::Validation(errors) => Ok(faults(&errors)),
        e => Err(e.to_string()),
    })
}

/// A fault as `(type, loc)`, the loc written with `/`.
type Fault = (String, String);

fn loc_of(parts: &[LocPart]) -> String {
    parts
        .iter()
        .map(|p| match p {
            LocPart::Key(k) => k.clone(),
            LocPart::Index(i) => i.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

fn faults(errors: &[FieldError]) -> Vec<Fault> {
    errors.iter().map(|e| (e.kind.clone(), loc_of(&e.loc))).collect()
}

fn fault(kind: &str, loc: &[&str]) -> Fault {
    (kind.to_owned(), loc.join("/"))
}

/// One CSV field, quoted when it must be (or when `quote` asks).
fn field(s: &str, quote: bool) -> String {
    if quote || s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_owned() }
}

/// A CSV line of `fields`; a lone empty field is quoted, since an empty
/// line is no record at all.
fn line(fields: &[(String, bool)]) -> String {
    let lone_empty = fields.len() == 1 && fields[0].0.is_empty();
    fields.iter().map(|(s, q)| field(s, *q || lone_empty)).collect::<Vec<_>>().join(",")
}

/// The faults the header `names` must give, or none.
fn expected_header_faults(names: &[String]) -> Vec<Fault> {
    if names.len() > MAX_COLUMNS {
        return vec![fault("value_error.csv.too_many_columns", &["body", "header"])];
    }
    let mut seen = [false; 5];
    let mut out = Vec::new();
    for raw in names {
        let name = raw.trim().to_ascii_lowercase();
        match COLUMNS.iter().position(|c| *c == name) {
            Some(k) if seen[k] => out.push(fault("value_error.csv.duplicate_column", &["body", "header", &name])),
            Some(k) => seen[k] = true,
            None => out.push(fault("value_error.extra", &["body", "header", &name])),
        }
    }
    if !seen[..3].iter().any(|s| *s) {
        out.push(fault("value_error.missing", &["body", "header"]));
    }
    out
}

/// Whitespace around a name, including Unicode spaces.
fn padding() -> impl Strategy<Value = String> {
    proptest::collection::vec(proptest::sample::select(vec![' ', '\t', '\u{a0}', '\u{2003}', '\u{3000}']), 0..3)
        .prop_map(|cs| cs.into_iter().collect())
}

/// A known column name in any ASCII case, with whitespace around it.
fn known_name(k: usize) -> impl Strategy<Value = String> {
    (padding(), proptest::collection::vec(any::<bool>(), 12), padding()).prop_map(move |(before, upper, after)| {
        let name: String = COLUMNS[k]
            .chars()
            .zip(upper.iter().cycle())
            .map(|(c, &u)| if u { c.to_ascii_uppercase() } else { c })
            .collect();
        format!("{before}{name}{after}")
    })
}

/// Any header name: known ones (in any case, padded), near misses, and
/// arbitrary text with CSV's own special characters.
fn header_name() -> impl Strategy<Value = String> {
    let near = proptest::sample::select(vec![
        "display name",
        "displayname",
        "e-mail",
        "Phone Number",
        "tag",
        "note",
        "emails",
        "",
        " ",
        "display_name\u{0}",
        "ｅｍａｉｌ",
        "phone\"",
        "id",
    ]);
    let text = proptest::collection::vec(
        prop_oneof![
            4 => proptest::sample::select("abcdeilmnoprstEMAILé中😀_-".chars().collect::<Vec<_>>()),
            2 => proptest::sample::select(vec![' ', ',', '"', '\n', '\r', '\t', '\0', '\u{a0}']),
            1 => any::<char>().prop_filter("no BOM in a name", |c| *c != '\u{feff}'),
        ],
        0..12,
    )
    .prop_map(|cs| cs.into_iter().collect::<String>());
    prop_oneof![
        4 => (0usize..5).prop_flat_map(known_name),
        2 => near.prop_map(str::to_owned),
        3 => text,
    ]
}

/// How a header (and the file) is written: optional BOM, quoting of each
/// field, and the line end.
fn header_csv(names: &[String], bom: bool, quote: &[bool], end: &str) -> String {
    let fields: Vec<(String, bool)> = names.iter().zip(quote.iter().cycle()).map(|(n, q)| (n.clone(), *q)).collect();
    format!("{}{}{end}", if bom { BOM } else { "" }, line(&fields))
}

fn line_end() -> impl Strategy<Value = &'static str> {
    proptest::sample::select(vec!["", "\n", "\r\n", "\r"])
}

/// The kinds of data row of the fault-cap property, each with a known
/// number of faults.
#[derive(Debug, Clone, Copy)]
enum RowKind {
    Valid,
    BadEmail,
    BadPhone,
    BadPhoneAndEmail,
    Empty,
    Nul,
    Short,
}

fn row_kind() -> impl Strategy<Value = RowKind> {
    prop_oneof![
        3 => Just(RowKind::Valid),
        1 => Just(RowKind::BadEmail),
        1 => Just(RowKind::BadPhone),
        1 => Just(RowKind::BadPhoneAndEmail),
        1 => Just(RowKind::Empty),
        1 => Just(RowKind::Nul),
        1 => Just(RowKind::Short),
    ]
}

/// The row's line under `header` (known names, in order), and its faults.
fn row(header: &[&str], number: usize, kind: RowKind) -> (String, Vec<Fault>) {
    let n = number.to_string();
    let at = |field: &str| format!("body/rows/{n}/{field}");
    let (name, phone, email, faults) = match kind {
        RowKind::Valid => (format!("Person {n}"), String::new(), format!("p{n}@example.com"), vec![]),
        RowKind::BadEmail => {
            (String::new(), String::new(), "no-at-sign".to_owned(), vec![("value_error.email", at("email"))])
        }
        RowKind::BadPhone => {
            (format!("Person {n}"), "call me".to_owned(), String::new(), vec![("value_error.phone", at("phone"))])
        }
        RowKind::BadPhoneAndEmail => (
            String::new(),
            "abc".to_owned(),
            "x@".to_owned(),
            vec![("value_error.phone", at("phone")), ("value_error.email", at("email"))],
        ),
        RowKind::Empty => {
            (String::new(), String::new(), String::new(), vec![("value_error.missing", at("display_name"))])
        }
        RowKind::Nul => (
            "a\0b".to_owned(),
            String::new(),
            format!("p{n}@example.com"),
            vec![("value_error.string.nul", at("display_name"))],
        ),
        RowKind::Short => {
            (String::new(), String::new(), String::new(), vec![("value_error.csv.columns", format!("body/rows/{n}"))])
        }
    };
    let mut fields: Vec<(String, bool)> = header
        .iter()
        .map(|c| match *c {
            "display_name" => (name.clone(), false),
            "phone" => (phone.clone(), false),
            "email" => (email.clone(), false),
            "notes" => ("a note, with a comma".to_owned(), false),
            _ => ("vip;new".to_owned(), false),
        })
        .collect();
    if matches!(kind, RowKind::Short) {
        fields.pop();
    }
    (line(&fields), faults.into_iter().map(|(k, l)| (k.to_owned(), l)).collect())
}

proptest! {
    #![proptest_config(config(5_000))]

    /// Any bytes at all: no panic; either accepted, unreadable (400), or
    /// faults in the documented shape: at most 100 listed plus one count,
    /// header faults never mixed with row faults, at most one per column
    /// plus `missing`, and `too_many_columns` alone.
    #[test]
    fn arbitrary_bytes_never_panic_and_faults_stay_capped(
        bytes in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..300),
            proptest::collection::vec(
                proptest::sample::select(b",,,\"\n\r\xef\xbb\xbf\xff\x00 aemilphonedisplay_nametags".to_vec()),
                0..300,
            ),
        ],
        chunk in 1usize..8,
    ) {
        let whole = run(&bytes);
        prop_assert_eq!(outcome(run_in_chunks(&bytes, chunk)), outcome(run(&bytes)), "{} bytes at a time", chunk);
        match whole {
            Ok(_) | Err(ServiceError::BadRequest(_)) => {}
            Err(ServiceError::Validation(errors)) => check_fault_shape(&errors)?,
            Err(e) => prop_assert!(false, "unexpected error {e:?}"),
        }
    }

    /// A header of names: exactly the faults the names call for, in order;
    /// accepted (with no rows) when there are none.
    #[test]
    fn header_faults_follow_from_the_names(
        names in proptest::collection::vec(header_name(), 1..12),
        bom in any::<bool>(),
        quote in proptest::collection::vec(any::<bool>(), 1..4),
        end in line_end(),
        chunk in 1usize..8,
    ) {
        let csv = header_csv(&names, bom, &quote, end);
        let expected = expected_header_faults(&names);
        let whole = run(csv.as_bytes());
        prop_assert_eq!(
            outcome(run_in_chunks(csv.as_bytes(), chunk)),
            outcome(run(csv.as_bytes())),
            "{:?} read {} bytes at a time", csv, chunk
        );
        match whole {
            Ok(rows) => {
                prop_assert_eq!(rows, 0);
                prop_assert!(expected.is_empty(), "{:?} was accepted; expected {:?}", csv, expected);
            }
            Err(ServiceError::Validation(errors)) => prop_assert_eq!(faults(&errors), expected, "{:?}", csv),
            Err(e) => prop_assert!(false, "{:?}: {e:?}", csv),
        }
    }

    /// Any non-empty subset of the known columns with display_name, phone or
    /// email, in any order, case and padding, with or without a BOM, is
    /// accepted; and data rows under it land in the right columns (a valid
    /// row only validates if its email is read from the email column).
    #[test]
    fn known_headers_are_accepted(
        order in Just((0..5).collect::<Vec<usize>>()).prop_shuffle(),
        keep in proptest::collection::vec(any::<bool>(), 5),
        cases in proptest::collection::vec(proptest::collection::vec(any::<bool>(), 12), 5),
        pads in proptest::collection::vec((padding(), padding()), 5),
        bom in any::<bool>(),
        quote in proptest::collection::vec(any::<bool>(), 1..4),
        end in proptest::sample::select(vec!["\n", "\r\n"]),
        rows in 0usize..5,
    ) {
        // At least one of display_name, phone and email.
        let mut keep = keep;
        if !keep[..3].iter().any(|&k| k) {
            keep[order.iter().copied().find(|&k| k < 3).expect("all five are there")] = true;
        }
        let columns: Vec<usize> = order.into_iter().filter(|&k| keep[k]).collect();
        let names: Vec<String> = columns
            .iter()
            .map(|&k| {
                let name: String = COLUMNS[k]
                    .chars()
                    .zip(&cases[k])
                    .map(|(c, &u)| if u { c.to_ascii_uppercase() } else { c })
                    .collect();
                format!("{}{name}{}", pads[k].0, pads[k].1)
            })
            .collect();
        let header: Vec<&str> = columns.iter().map(|&k| COLUMNS[k]).collect();
        // A valid row has a name and an email; under only phone, notes and
        // tags it would have nothing to identify a contact.
        let rows = if header.iter().any(|c| matches!(*c, "display_name" | "email")) { rows } else { 0 };
        let mut csv = header_csv(&names, bom, &quote, end);
        for i in 1..=rows {
            csv.push_str(&row(&header, i, RowKind::Valid).0);
            csv.push_str(end);
        }
        match run(csv.as_bytes()) {
            Ok(n) => prop_assert_eq!(n, rows),
            Err(e) => prop_assert!(false, "{:?}: {:?}", csv, e),
        }
    }

    /// The same known column twice, however each is spelled, is a
    /// `duplicate_column` at its name.
    #[test]
    fn duplicate_known_columns_are_reported(
        (k, first, again) in (0usize..5).prop_flat_map(|k| (Just(k), known_name(k), known_name(k))),
        others in proptest::collection::vec(header_name(), 0..6),
        at in any::<proptest::sample::Index>(),
        bom in any::<bool>(),
        quote in proptest::collection::vec(any::<bool>(), 1..4),
    ) {
        let mut names = others;
        names.insert(at.index(names.len() + 1), first);
        names.push(again);
        let csv = header_csv(&names, bom, &quote, "\n");
        let Err(ServiceError::Validation(errors)) = run(csv.as_bytes()) else {
            return Err(TestCaseError::fail(format!("{csv:?} was accepted")));
        };
        let found = faults(&errors);
        prop_assert!(
            found.contains(&fault("value_error.csv.duplicate_column", &["body", "header", COLUMNS[k]])),
            "{:?}: {:?}", csv, found
        );
        prop_assert_eq!(found, expected_header_faults(&names), "{:?}", csv);
    }

    /// More than 50 columns, whatever they are called, is one fault; 50 are
    /// read name by name. (Names from a pool: generating a hundred arbitrary
    /// ones per case costs more than reading them.)
    #[test]
    fn wide_headers_are_one_fault(
        names in proptest::collection::vec(
            proptest::sample::select(vec![
                "display_name", " Phone", "EMAIL ", "notes", "tags", "id", "", " ", "e-mail", "a,b", "say \"hi\"",
                "line\nbreak", "é", "中文", "😀", "x\u{0}y",
            ]),
            MAX_COLUMNS - 2..MAX_COLUMNS * 3,
        ),
        bom in any::<bool>(),
        quote in proptest::collection::vec(any::<bool>(), 1..4),
        end in line_end(),
    ) {
        let names: Vec<String> = names.into_iter().map(str::to_owned).collect();
        let csv = header_csv(&names, bom, &quote, end);
        let expected = expected_header_faults(&names);
        let Err(ServiceError::Validation(errors)) = run(csv.as_bytes()) else {
            return Err(TestCaseError::fail(format!("{csv:?} was accepted")));
        };
        prop_assert_eq!(faults(&errors), expected, "{:?}", csv);
        if names.len() > MAX_COLUMNS {
            prop_assert_eq!(errors.len(), 1);
            prop_assert_eq!(errors[0].kind.as_str(), "value_error.csv.too_many_columns");
            prop_assert_eq!(errors[0].ctx.as_ref().and_then(|c| c["limit_value"].as_u64()), Some(MAX_COLUMNS as u64));
        }
    }
}

proptest! {
    #![proptest_config(config(1_000))]

    /// Rows with known faults: the first 100 are listed in order, and the
    /// rest are one `too_many_errors` whose count is exactly how many more
    /// there were; no faults means every row is taken.
    #[test]
    fn row_faults_are_listed_up_to_the_cap_and_the_rest_counted(
        order in Just(vec!["display_name", "phone", "email", "notes", "tags"]).prop_shuffle(),
        extra in 0usize..3,
        kinds in proptest::collection::vec(row_kind(), 0..250),
        end in proptest::sample::select(vec!["\n", "\r\n"]),
    ) {
        // display_name, phone and email always; notes and tags sometimes.
        let header: Vec<&str> =
            order.into_iter().filter(|c| matches!(*c, "display_name" | "phone" | "email") || extra > 0).collect();
        let mut csv = header.join(",") + end;
        let mut expected = Vec::new();
        for (i, kind) in kinds.iter().enumerate() {
            let (line, f) = row(&header, i + 1, *kind);
            csv.push_str(&line);
            csv.push_str(end);
            expected.extend(f);
        }
        let result = run(csv.as_bytes());
        if expected.is_empty() {
            prop_assert_eq!(result.ok(), Some(kinds.len()));
            return Ok(());
        }
        let Err(ServiceError::Validation(errors)) = result else {
            return Err(TestCaseError::fail(format!("{result:?}; expected {} faults", expected.len())));
        };
        check_fault_shape(&errors)?;
        let listed = expected.len().min(MAX_REPORTED_FAULTS);
        prop_assert_eq!(faults(&errors[..listed]), expected[..listed].to_vec());
        if expected.len() > MAX_REPORTED_FAULTS {
            prop_assert_eq!(errors.len(), MAX_REPORTED_FAULTS + 1);
            let more = &errors[MAX_REPORTED_FAULTS];
            prop_assert_eq!(faults(std::slice::from_ref(more)), vec![fault("value_error.too_many_errors", &["body"])]);
            let count = more.ctx.as_ref().and_then(|c| c["count"].as_u64());
            prop_assert_eq!(count, Some((expected.len() - MAX_REPORTED_FAULTS) as u64));
        } else {
            prop_assert_eq!(errors.len(), expected.len());
        }
    }
}

/// The shape every 422 of the importer has.
fn check_fault_shape(errors: &[FieldError]) -> Result<(), TestCaseError> {
    prop_assert!(!errors.is_empty() && errors.len() <= MAX_REPORTED_FAULTS + 1, "{} faults", errors.len());
    for (i, e) in errors.iter().enumerate() {
        prop_assert_eq!(e.loc.first(), Some(&LocPart::from("body")));
        let last = i + 1 == errors.len();
        prop_assert!(e.kind != "value_error.too_many_errors" || last, "the count is not last: {:?}", errors);
    }
    if errors.len() == MAX_REPORTED_FAULTS + 1 {
        prop_assert_eq!(errors[MAX_REPORTED_FAULTS].kind.as_str(), "value_error.too_many_errors");
    }
    let header = errors.iter().filter(|e| e.loc.get(1) == Some(&LocPart::from("header"))).count();
    prop_assert!(header == 0 || header == errors.len(), "header and row faults mixed: {:?}", errors);
    prop_assert!(header <= MAX_COLUMNS + 1);
    if errors.iter().any(|e| e.kind == "value_error.csv.too_many_columns") {
        prop_assert_eq!(errors.len(), 1);
    }
    Ok(())
}
