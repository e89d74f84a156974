//! Untrusted input → typed values, reporting every fault at once.
//!
//! Errors use the 422 of docs/api.md shape (pydantic v1 naming): `loc` is the path to
//! the faulty input starting with `body`, `query`, `path` or `header`; `type`
//! is a stable identifier such as `value_error.missing`.
//!
//! `ObjectReader` takes fields out of a JSON object one by one. Each accessor
//! records its own errors and returns `None` on failure, so a parser reads
//! every field before giving up, and `finish` reports the fields nobody asked
//! for (`value_error.extra`: no mass assignment).

use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::Timestamp;

/// One element of an error location: a field name or a list index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum LocPart {
    Key(String),
    Index(usize),
}

impl From<&str> for LocPart {
    fn from(s: &str) -> Self {
        LocPart::Key(s.to_owned())
    }
}

impl From<usize> for LocPart {
    fn from(i: usize) -> Self {
        LocPart::Index(i)
    }
}

/// A location, such as `["body", "handoff", "keywords", 2]`.
pub type Loc = Vec<LocPart>;

pub fn loc(parts: &[&str]) -> Loc {
    parts.iter().map(|p| LocPart::from(*p)).collect()
}

fn child(parent: &[LocPart], part: impl Into<LocPart>) -> Loc {
    let mut l = parent.to_vec();
    l.push(part.into());
    l
}

/// One validation fault, serialised as `{loc, msg, type[, ctx]}`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct FieldError {
    #[schema(value_type = Vec<serde_json::Value>, example = json!(["body", "name"]))]
    pub loc: Loc,
    #[schema(example = "field required")]
    pub msg: String,
    #[serde(rename = "type")]
    #[schema(example = "value_error.missing")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub ctx: Option<Value>,
}

impl FieldError {
    pub fn new(loc: Loc, kind: impl Into<String>, msg: impl Into<String>) -> Self {
        Self { loc, msg: msg.into(), kind: kind.into(), ctx: None }
    }

    pub fn with_ctx(mut self, ctx: Value) -> Self {
        self.ctx = Some(ctx);
        self
    }

    pub fn missing(loc: Loc) -> Self {
        Self::new(loc, "value_error.missing", "field required")
    }

    pub fn extra(loc: Loc) -> Self {
        Self::new(loc, "value_error.extra", "extra fields not permitted")
    }

    pub fn none_not_allowed(loc: Loc) -> Self {
        Self::new(loc, "type_error.none.not_allowed", "none is not an allowed value")
    }

    /// `kind` is one of `integer`, `string`, `bool`, `dict`, `list`.
    pub fn wrong_type(loc: Loc, kind: &str) -> Self {
        let noun = match kind {
            "bool" => "boolean",
            other => other,
        };
        Self::new(loc, format!("type_error.{kind}"), format!("value is not a valid {noun}"))
    }

    pub fn too_short(loc: Loc, min: usize) -> Self {
        let unit = if min == 1 { "character" } else { "characters" };
        Self::new(loc, "value_error.string.too_short", format!("String should have at least {min} {unit}"))
            .with_ctx(serde_json::json!({ "limit_value": min }))
    }

    pub fn too_long(loc: Loc, max: usize) -> Self {
        let unit = if max == 1 { "character" } else { "characters" };
        Self::new(loc, "value_error.string.too_long", format!("String should have at most {max} {unit}"))
            .with_ctx(serde_json::json!({ "limit_value": max }))
    }

    pub fn not_ge(loc: Loc, min: i64) -> Self {
        Self::new(loc, "value_error.number.not_ge", format!("ensure this value is greater than or equal to {min}"))
            .with_ctx(serde_json::json!({ "limit_value": min }))
    }

    pub fn not_le(loc: Loc, max: i64) -> Self {
        Self::new(loc, "value_error.number.not_le", format!("ensure this value is less than or equal to {max}"))
            .with_ctx(serde_json::json!({ "limit_value": max }))
    }

    pub fn not_enum(loc: Loc, permitted: &[&str]) -> Self {
        let list = permitted.iter().map(|p| format!("'{p}'")).collect::<Vec<_>>().join(", ");
        Self::new(loc, "value_error.enum", format!("value is not a valid enumeration member; permitted: {list}"))
            .with_ctx(serde_json::json!({ "enum_values": permitted }))
    }

    pub fn list_too_long(loc: Loc, max: usize) -> Self {
        Self::new(loc, "value_error.list.max_items", format!("ensure this value has at most {max} items"))
            .with_ctx(serde_json::json!({ "limit_value": max }))
    }

    pub fn list_too_short(loc: Loc, min: usize) -> Self {
        Self::new(loc, "value_error.list.min_items", format!("ensure this value has at least {min} items"))
            .with_ctx(serde_json::json!({ "limit_value": min }))
    }

    pub fn invalid_json() -> Self {
        Self::new(loc(&["body"]), "value_error.jsondecode", "Invalid JSON")
    }

    pub fn not_found(loc: Loc, what: &str) -> Self {
        Self::new(loc, "value_error.not_found", format!("{what} not found"))
    }
}

/// The result of parsing one value: the value, or every fault found in it.
pub type Parsed<T> = Result<T, Vec<FieldError>>;

/// Reads the fields of one JSON object, collecting errors into a shared list.
pub struct ObjectReader<'e> {
    loc: Loc,
    map: Map<String, Value>,
    errors: &'e mut Vec<FieldError>,
}

impl<'e> ObjectReader<'e> {
    /// Starts reading `value`; records a `type_error.dict` if it is not an object.
    pub fn new(value: Value, loc: Loc, errors: &'e mut Vec<FieldError>) -> Option<Self> {
        match value {
            Value::Object(map) => Some(Self { loc, map, errors }),
            _ => {
                errors.push(FieldError::wrong_type(loc, "dict"));
                None
            }
        }
    }

    pub fn loc_of(&self, name: &str) -> Loc {
        child(&self.loc, name)
    }

    /// Records an error found by the caller (for cross-field rules).
    pub fn push_error(&mut self, error: FieldError) {
        self.errors.push(error);
    }

    /// Whether any error was recorded so far (in this object or elsewhere).
    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// Whether the field was sent at all (even as `null`).
    pub fn contains(&self, name: &str) -> bool {
        self.map.contains_key(name)
    }

    fn run<T>(&mut self, name: &str, value: Value, parse: impl FnOnce(Value, &[LocPart]) -> Parsed<T>) -> Option<T> {
        match parse(value, &self.loc_of(name)) {
            Ok(v) => Some(v),
            Err(errs) => {
                self.errors.extend(errs);
                None
            }
        }
    }

    /// A field that must be present and not null.
    pub fn required<T>(&mut self, name: &str, parse: impl FnOnce(Value, &[LocPart]) -> Parsed<T>) -> Option<T> {
        match self.map.remove(name) {
            None => {
                let l = self.loc_of(name);
                self.errors.push(FieldError::missing(l));
                None
            }
            Some(Value::Null) => {
                let l = self.loc_of(name);
                self.errors.push(FieldError::none_not_allowed(l));
                None
            }
            Some(v) => self.run(name, v, parse),
        }
    }

    /// A field that may be absent (`None`) but not null.
    pub fn optional<T>(&mut self, name: &str, parse: impl FnOnce(Value, &[LocPart]) -> Parsed<T>) -> Option<T> {
        match self.map.remove(name) {
            None => None,
            Some(Value::Null) => {
                let l = self.loc_of(name);
                self.errors.push(FieldError::none_not_allowed(l));
                None
            }
            Some(v) => self.run(name, v, parse),
        }
    }

    /// A field that may be absent (`None`) or null (`Some(None)`).
    pub fn nullable<T>(&mut self, name: &str, parse: impl FnOnce(Value, &[LocPart]) -> Parsed<T>) -> Option<Option<T>> {
        match self.map.remove(name) {
            None => None,
            Some(Value::Null) => Some(None),
            Some(v) => self.run(name, v, parse).map(Some),
        }
    }

    /// Reports every field that no accessor took.
    pub fn finish(self) {
        let mut extras: Vec<_> = self.map.into_iter().map(|(k, _)| k).collect();
        extras.sort();
        for k in extras {
            self.errors.push(FieldError::extra(child(&self.loc, k.as_str())));
        }
    }
}

/// Parses a whole JSON object with `read`, returning the value or every fault.
pub fn parse_object<T>(value: Value, loc: Loc, read: impl FnOnce(&mut ObjectReader<'_>) -> Option<T>) -> Parsed<T> {
    let mut errors = Vec::new();
    let out = match ObjectReader::new(value, loc, &mut errors) {
        Some(mut r) => {
            let out = read(&mut r);
            r.finish();
            out
        }
        None => None,
    };
    match out {
        Some(v) if errors.is_empty() => Ok(v),
        _ => {
            if errors.is_empty() {
                // A reader returned None without saying why: a programming error,
                // but the caller still gets a 422 rather than a panic.
                errors.push(FieldError::new(Vec::new(), "value_error", "invalid input"));
            }
            Err(errors)
        }
    }
}

// ---- value parsers -------------------------------------------------------

/// A string of `min..=max` characters, kept exactly as sent.
pub fn string(min: usize, max: usize) -> impl FnOnce(Value, &[LocPart]) -> Parsed<String> {
    move |v, l| match v {
        Value::String(s) => check_len(s, l, min, max),
        _ => Err(vec![FieldError::wrong_type(l.to_vec(), "string")]),
    }
}

/// An email address (at most 320 characters), normalised: trimmed, the
/// domain lower-cased and in its ASCII form.
pub fn email_address() -> impl FnOnce(Value, &[LocPart]) -> Parsed<String> {
    move |v, l| {
        let s = string(1, 320)(v, l)?;
        crate::email::Email::parse(&s)
            .map(|e| e.as_str().to_owned())
            .map_err(|m| vec![FieldError::new(l.to_vec(), "value_error.email", m)])
    }
}

/// A string sent as an HTTP header value: `min..=max` characters of visible
/// ASCII or spaces (CR, LF and other control characters would break the
/// header, so the value could never be sent).
pub fn header_value(min: usize, max: usize) -> impl FnOnce(Value, &[LocPart]) -> Parsed<String> {
    move |v, l| {
        let s = string(min, max)(v, l)?;
        if s.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
            Ok(s)
        } else {
            Err(vec![FieldError::new(
                l.to_vec(),
                "value_error.header",
                "must be printable ASCII without control characters such as CR or LF",
            )])
        }
    }
}

/// NUL cannot be stored (PostgreSQL's text and jsonb refuse it), so it is
/// refused at the edge, wherever a string comes from.
fn nul_char(l: &[LocPart]) -> FieldError {
    FieldError::new(l.to_vec(), "value_error.string.nul", "String should not contain NUL (\\u0000) characters")
}

/// What a provider's text becomes before it is stored: NUL replaced by
/// U+FFFD (the replacement character), on both backends. Our own API
/// refuses NUL with a 422 instead; a provider cannot be asked to resend.
pub fn without_nul(s: &str) -> String {
    s.replace('\0', "\u{fffd}")
}

/// [`without_nul`] in place.
pub fn replace_nul(s: &mut String) {
    if s.contains('\0') {
        *s = without_nul(s);
    }
}

/// Whether any string in `v` (keys included) contains NUL.
pub fn contains_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(contains_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || contains_nul(v)),
        _ => false,
    }
}

fn check_len(s: String, l: &[LocPart], min: usize, max: usize) -> Parsed<String> {
    if s.contains('\0') {
        return Err(vec![nul_char(l)]);
    }
    let n = s.chars().count();
    if n < min {
        Err(vec![FieldError::too_short(l.to_vec(), min)])
    } else if n > max {
        Err(vec![FieldError::too_long(l.to_vec(), max)])
    } else {
        Ok(s)
    }
}

/// A JSON integer in `min..=max`. As in JSON Schema, a number with a zero
/// fraction (`5.0`) is an integer; other floats and numeric strings are refused.
pub fn integer(min: i64, max: i64) -> impl FnOnce(Value, &[LocPart]) -> Parsed<i64> {
    move |v, l| match integral(&v) {
        Some(n) => {
            if n < min {
                Err(vec![FieldError::not_ge(l.to_vec(), min)])
            } else if n > max {
                Err(vec![FieldError::not_le(l.to_vec(), max)])
            } else {
                Ok(n)
            }
        }
        _ => Err(vec![FieldError::wrong_type(l.to_vec(), "integer")]),
    }
}

/// A JSON number in `min..=max` (an integer is a number too).
pub fn number(min: f64, max: f64) -> impl FnOnce(Value, &[LocPart]) -> Parsed<f64> {
    move |v, l| match v.as_f64() {
        Some(n) if n < min => Err(vec![
            FieldError::new(
                l.to_vec(),
                "value_error.number.not_ge",
                format!("ensure this value is greater than or equal to {min}"),
            )
            .with_ctx(serde_json::json!({"limit_value": min})),
        ]),
        Some(n) if n > max => Err(vec![
            FieldError::new(
                l.to_vec(),
                "value_error.number.not_le",
                format!("ensure this value is less than or equal to {max}"),
            )
            .with_ctx(serde_json::json!({"limit_value": max})),
        ]),
        Some(n) => Ok(n),
        None => Err(vec![FieldError::wrong_type(l.to_vec(), "float")]),
    }
}

/// An integer written in a URL (path or query): digits, or digits with a
/// zero fraction (`42.0`, which JSON Schema counts as an integer).
pub fn parse_integer_text(raw: &str) -> Result<i64, std::num::ParseIntError> {
    match raw.split_once('.') {
        Some((whole, fraction)) if !fraction.is_empty() && fraction.bytes().all(|b| b == b'0') => whole.parse(),
        _ => raw.parse(),
    }
}

/// The integer a JSON number denotes: an integer, or a float with no
/// fractional part within the range of i64.
fn integral(v: &Value) -> Option<i64> {
    if let Some(n) = v.as_i64() {
        return Some(n);
    }
    let f = v.as_f64()?;
    // 2^63 is exactly representable; anything at or past it does not fit.
    (f.fract() == 0.0 && f >= -9_223_372_036_854_775_808.0 && f < 9_223_372_036_854_775_808.0).then(|| f as i64)
}

pub fn boolean() -> impl FnOnce(Value, &[LocPart]) -> Parsed<bool> {
    move |v, l| match v {
        Value::Bool(b) => Ok(b),
        _ => Err(vec![FieldError::wrong_type(l.to_vec(), "bool")]),
    }
}

/// A string that must be one of `permitted`.
pub fn one_of(permitted: &'static [&'static str]) -> impl FnOnce(Value, &[LocPart]) -> Parsed<String> {
    move |v, l| match v {
        Value::String(s) if permitted.contains(&s.as_str()) => Ok(s),
        Value::String(_) => Err(vec![FieldError::not_enum(l.to_vec(), permitted)]),
        _ => Err(vec![FieldError::wrong_type(l.to_vec(), "string")]),
    }
}

/// A string that is one of `E`'s values.
pub fn enum_value<E: crate::StringEnum>() -> impl FnOnce(Value, &[LocPart]) -> Parsed<E> {
    move |v, l| one_of(E::ALL)(v, l).map(|s| E::parse(&s).expect("checked by one_of"))
}

/// A list of at most `max_items`, each element parsed by `item`.
pub fn list_of<T, F>(max_items: usize, item: F) -> impl FnOnce(Value, &[LocPart]) -> Parsed<Vec<T>>
where
    F: Fn(Value, &[LocPart]) -> Parsed<T>,
{
    move |v, l| match v {
        Value::Array(items) => {
            if items.len() > max_items {
                return Err(vec![FieldError::list_too_long(l.to_vec(), max_items)]);
            }
            let mut out = Vec::with_capacity(items.len());
            let mut errors = Vec::new();
            for (i, it) in items.into_iter().enumerate() {
                match item(it, &child(l, i)) {
                    Ok(v) => out.push(v),
                    Err(e) => errors.extend(e),
                }
            }
            if errors.is_empty() { Ok(out) } else { Err(errors) }
        }
        _ => Err(vec![FieldError::wrong_type(l.to_vec(), "list")]),
    }
}

/// A free-form JSON object whose serialised size is at most `max_bytes`.
pub fn json_object(max_bytes: usize) -> impl FnOnce(Value, &[LocPart]) -> Parsed<Map<String, Value>> {
    move |v, l| match v {
        Value::Object(map) => {
            if map.iter().any(|(k, v)| k.contains('\0') || contains_nul(v)) {
                return Err(vec![nul_char(l)]);
            }
            let size = serde_json::to_vec(&map).map(|b| b.len()).unwrap_or(usize::MAX);
            if size > max_bytes {
                Err(vec![
                    FieldError::new(
                        l.to_vec(),
                        "value_error.object.too_large",
                        format!("object must serialise to at most {max_bytes} bytes"),
                    )
                    .with_ctx(serde_json::json!({ "limit_value": max_bytes })),
                ])
            } else {
                Ok(map)
            }
        }
        _ => Err(vec![FieldError::wrong_type(l.to_vec(), "dict")]),
    }
}

/// A nested object read by `read`.
pub fn object<T>(read: impl FnOnce(&mut ObjectReader<'_>) -> Option<T>) -> impl FnOnce(Value, &[LocPart]) -> Parsed<T> {
    move |v, l| parse_object(v, l.to_vec(), read)
}

/// An RFC 3339 timestamp string.
pub fn timestamp() -> impl FnOnce(Value, &[LocPart]) -> Parsed<Timestamp> {
    move |v, l| match v {
        Value::String(s) => Timestamp::parse_rfc3339(&s).ok_or_else(|| vec![invalid_datetime(l.to_vec())]),
        _ => Err(vec![FieldError::wrong_type(l.to_vec(), "string")]),
    }
}

fn invalid_datetime(l: Loc) -> FieldError {
    FieldError::new(l, "value_error.datetime", "invalid datetime format; expected RFC 3339, e.g. 2026-01-31T12:00:00Z")
}

// ---- query strings -------------------------------------------------------

/// Reads query parameters (`loc` starts with `query`). Unknown parameters are
/// ignored, as HTTP caches and proxies add their own; a repeated one keeps
/// its last value.
pub struct QueryReader {
    pairs: Vec<(String, String)>,
    errors: Vec<FieldError>,
}

impl QueryReader {
    pub fn new(pairs: Vec<(String, String)>) -> Self {
        Self { pairs, errors: Vec::new() }
    }

    fn raw(&self, name: &str) -> Option<&str> {
        self.pairs.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    fn loc(name: &str) -> Loc {
        loc(&["query", name])
    }

    /// Whether the parameter was sent (even empty).
    pub fn has(&self, name: &str) -> bool {
        self.raw(name).is_some()
    }

    pub fn push_error(&mut self, e: FieldError) {
        self.errors.push(e);
    }

    pub fn integer(&mut self, name: &str, min: i64, max: i64) -> Option<i64> {
        let raw = self.raw(name)?.trim().to_owned();
        match parse_integer_text(&raw) {
            Ok(n) if n < min => self.fail(FieldError::not_ge(Self::loc(name), min)),
            Ok(n) if n > max => self.fail(FieldError::not_le(Self::loc(name), max)),
            Ok(n) => Some(n),
            Err(_) => self.fail(FieldError::wrong_type(Self::loc(name), "integer")),
        }
    }

    pub fn string(&mut self, name: &str, min: usize, max: usize) -> Option<String> {
        let raw = self.raw(name)?.to_owned();
        match check_len(raw, &Self::loc(name), min, max) {
            Ok(s) => Some(s),
            Err(e) => {
                self.errors.extend(e);
                None
            }
        }
    }

    pub fn one_of(&mut self, name: &str, permitted: &'static [&'static str]) -> Option<String> {
        let raw = self.raw(name)?.to_owned();
        if permitted.contains(&raw.as_str()) {
            Some(raw)
        } else {
            self.fail(FieldError::not_enum(Self::loc(name), permitted))
        }
    }

    /// One of `E`'s values.
    pub fn enum_value<E: crate::StringEnum>(&mut self, name: &str) -> Option<E> {
        self.one_of(name, E::ALL).and_then(|s| E::parse(&s))
    }

    /// `true`/`false` (also `1`/`0`); any other value is a 422.
    pub fn boolean(&mut self, name: &str) -> Option<bool> {
        let raw = self.raw(name)?;
        match raw {
            "true" | "1" => Some(true),
            "false" | "0" => Some(false),
            _ => {
                self.fail(FieldError::new(Self::loc(name), "type_error.bool", "value could not be parsed to a boolean"))
            }
        }
    }

    pub fn timestamp(&mut self, name: &str) -> Option<Timestamp> {
        let raw = self.raw(name)?.to_owned();
        match Timestamp::parse_rfc3339(&raw) {
            Some(t) => Some(t),
            None => self.fail(invalid_datetime(Self::loc(name))),
        }
    }

    fn fail<T>(&mut self, e: FieldError) -> Option<T> {
        self.errors.push(e);
        None
    }

    /// The collected errors, if any.
    pub fn finish(self) -> Result<(), Vec<FieldError>> {
        if self.errors.is_empty() { Ok(()) } else { Err(self.errors) }
    }
}

/// `limit` and `offset` of every list endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    pub limit: i64,
    pub offset: i64,
}

impl Page {
    pub const DEFAULT_LIMIT: i64 = 50;
    pub const MAX_LIMIT: i64 = 200;

    /// Reads `limit` (1..=200, default 50) and `offset` (≥ 0, default 0).
    /// Out-of-range values are errors, never clamped.
    pub fn read(q: &mut QueryReader) -> Page {
        Page {
            limit: q.integer("limit", 1, Self::MAX_LIMIT).unwrap_or(Self::DEFAULT_LIMIT),
            offset: q.integer("offset", 0, i64::MAX).unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug)]
    struct Input {
        name: String,
        priority: Option<i64>,
        tags: Option<Vec<String>>,
    }

    fn read(v: Value) -> Parsed<Input> {
        parse_object(v, loc(&["body"]), |r| {
            let name = r.required("name", string(1, 10));
            let priority = r.optional("priority", integer(0, 100));
            let tags = r.optional("tags", list_of(3, |v, l| string(1, 5)(v, l)));
            Some(Input { name: name?, priority, tags })
        })
    }

    #[test]
    fn every_fault_is_reported_at_once() {
        let errs = read(json!({"priority": 101, "tags": ["ok", ""], "color": "red"})).unwrap_err();
        let got: Vec<(String, String)> =
            errs.iter().map(|e| (serde_json::to_string(&e.loc).unwrap(), e.kind.clone())).collect();
        assert_eq!(
            got,
            vec![
                (r#"["body","name"]"#.into(), "value_error.missing".into()),
                (r#"["body","priority"]"#.into(), "value_error.number.not_le".into()),
                (r#"["body","tags",1]"#.into(), "value_error.string.too_short".into()),
                (r#"["body","color"]"#.into(), "value_error.extra".into()),
            ]
        );
        assert_eq!(errs[0].msg, "field required");
        assert_eq!(errs[2].msg, "String should have at least 1 character");
    }

    #[test]
    fn valid_input_parses() {
        let v = read(json!({"name": "Ana", "tags": ["a"]})).unwrap();
        assert_eq!(v.name, "Ana");
        assert_eq!(v.priority, None);
        assert_eq!(v.tags.unwrap(), vec!["a"]);
    }

    #[test]
    fn wrong_types_name_the_expected_type() {
        let errs = read(json!({"name": 5, "priority": "5"})).unwrap_err();
        assert_eq!(errs[0].kind, "type_error.string");
        assert_eq!(errs[1].kind, "type_error.integer");
        assert_eq!(errs[1].msg, "value is not a valid integer");
        let errs = read(json!([1])).unwrap_err();
        assert_eq!(errs[0].kind, "type_error.dict");
    }

    #[test]
    fn integers_in_urls_may_have_a_zero_fraction() {
        assert_eq!(parse_integer_text("42"), Ok(42));
        assert_eq!(parse_integer_text("42.0"), Ok(42));
        assert_eq!(parse_integer_text("-7.000"), Ok(-7));
        for bad in ["42.5", "42.", ".0", "4e1", "x", ""] {
            assert!(parse_integer_text(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn integral_floats_are_integers_as_in_json_schema() {
        assert_eq!(integer(0, 10)(json!(5.0), &[]), Ok(5));
        assert_eq!(integer(0, 10)(json!(-0.0), &[]), Ok(0));
        assert!(integer(0, 10)(json!(5.5), &[]).is_err());
        assert!(integer(0, 10)(json!("5"), &[]).is_err());
        assert!(integer(i64::MIN, i64::MAX)(json!(1e19), &[]).is_err());
        assert_eq!(integer(0, 10)(json!(11.0), &[]).unwrap_err()[0].kind, "value_error.number.not_le");
    }

    #[test]
    fn pagination_is_never_clamped() {
        let mut q = QueryReader::new(vec![("limit".into(), "201".into()), ("offset".into(), "-1".into())]);
        Page::read(&mut q);
        let errs = q.finish().unwrap_err();
        assert_eq!(errs[0].loc, loc(&["query", "limit"]));
        assert_eq!(errs[1].loc, loc(&["query", "offset"]));
        let mut q = QueryReader::new(vec![]);
        assert_eq!(Page::read(&mut q), Page { limit: 50, offset: 0 });
    }
}
