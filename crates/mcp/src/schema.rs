//! Tool argument schemas as listed: the OpenAPI document's schemas with
//! their references inlined (only a schema that contains itself keeps one,
//! into `$defs`) and what a client does not need to call a tool left out:
//! `example`s, `title`s, formats JSON Schema does not define, and
//! descriptions past their first sentence. Every constraint (`type`,
//! `enum`, `required`, lengths, bounds, `pattern`, JSON Schema `format`s,
//! `additionalProperties`, …) stays as the document states it.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// Keywords whose value is one schema.
const SCHEMA: &[&str] = &[
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
];
/// Keywords whose value maps names to schemas.
const SCHEMA_MAP: &[&str] = &["properties", "patternProperties", "dependentSchemas"];
/// Keywords whose value is a list of schemas.
const SCHEMA_LIST: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];
/// Left out: examples and titles only show or name things; the
/// description is kept in brief.
const DROPPED: &[&str] = &["example", "examples", "title"];
/// What a `$ref`'s sibling may say without constraining anything.
const ANNOTATIONS: &[&str] = &["description", "title", "example", "examples", "default", "deprecated"];

/// The `format`s JSON Schema (2020-12) defines.
const JSON_SCHEMA_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Resolves `#/components/schemas/…` references of one tool's schemas
/// against the OpenAPI document.
pub(crate) struct Resolver<'a> {
    doc: &'a Value,
    /// Schemas that contain themselves: referenced as `#/$defs/…`.
    recursive: BTreeSet<String>,
}

impl<'a> Resolver<'a> {
    pub(crate) fn new(doc: &'a Value) -> Self {
        Resolver { doc, recursive: BTreeSet::new() }
    }

    /// `schema`, compact, with its references inlined.
    pub(crate) fn resolve(&mut self, schema: &Value) -> Value {
        self.expand(schema, &mut Vec::new())
    }

    /// The `$defs` the resolved schemas refer to (the recursive ones), if any.
    pub(crate) fn defs(mut self) -> Option<Map<String, Value>> {
        let mut defs = Map::new();
        while let Some(name) = self.recursive.iter().find(|n| !defs.contains_key(*n)).cloned() {
            let doc = self.doc;
            let def = self.expand(&doc["components"]["schemas"][&name], &mut vec![name.clone()]);
            defs.insert(name, def);
        }
        (!defs.is_empty()).then_some(defs)
    }

    /// `schema` compacted, references inlined except those to a schema
    /// being expanded (on `stack`), which become `#/$defs/…`.
    fn expand(&mut self, schema: &Value, stack: &mut Vec<String>) -> Value {
        let Value::Object(m) = schema else { return schema.clone() };
        if let Some(name) = m.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/components/schemas/"))
        {
            let name = name.to_owned();
            let target = if stack.contains(&name) {
                self.recursive.insert(name.clone());
                json!({ "$ref": format!("#/$defs/{name}") })
            } else {
                stack.push(name.clone());
                let doc = self.doc;
                let target = self.expand(&doc["components"]["schemas"][&name], stack);
                stack.pop();
                target
            };
            let siblings: Map<String, Value> =
                m.iter().filter(|(k, _)| *k != "$ref").map(|(k, v)| (k.clone(), v.clone())).collect();
            let siblings = match self.expand(&Value::Object(siblings), stack) {
                Value::Object(s) => s,
                _ => Map::new(),
            };
            return with_siblings(target, siblings);
        }
        let mut out = Map::new();
        for (k, v) in m {
            let k = k.as_str();
            let kept = match k {
                _ if DROPPED.contains(&k) => continue,
                "format" if !v.as_str().is_some_and(|f| JSON_SCHEMA_FORMATS.contains(&f)) => {
                    // OpenAPI's own formats (int64, phone) are not JSON
                    // Schema's: validators warn on them.
                    continue;
                }
                "description" => match v.as_str().map(brief) {
                    Some(d) if !d.is_empty() && !restates_bounds(&d, m) => json!(d),
                    _ => continue,
                },
                "required" if v.as_array().is_some_and(Vec::is_empty) => continue,
                _ if SCHEMA.contains(&k) => self.expand(v, stack),
                _ if SCHEMA_MAP.contains(&k) => match v {
                    Value::Object(named) => {
                        Value::Object(named.iter().map(|(n, s)| (n.clone(), self.expand(s, stack))).collect())
                    }
                    other => other.clone(),
                },
                _ if SCHEMA_LIST.contains(&k) => match v {
                    Value::Array(all) => Value::Array(all.iter().map(|s| self.expand(s, stack)).collect()),
                    other => other.clone(),
                },
                // Values (enum, const, default) and constraints, as written.
                _ => v.clone(),
            };
            out.insert(k.to_owned(), kept);
        }
        Value::Object(out)
    }
}

/// A referenced schema with what its `$ref` said beside it: annotations
/// (a description) replace the target's; a constraint the target also
/// states applies as well (`allOf`).
fn with_siblings(target: Value, siblings: Map<String, Value>) -> Value {
    if siblings.is_empty() {
        return target;
    }
    match target {
        Value::Object(mut t)
            if siblings.iter().all(|(k, v)| ANNOTATIONS.contains(&k.as_str()) || t.get(k).is_none_or(|w| w == v)) =>
        {
            t.extend(siblings);
            Value::Object(t)
        }
        other => {
            let mut both = siblings;
            both.insert("allOf".into(), json!([other]));
            Value::Object(both)
        }
    }
}

/// Whether a description says no more than `schema`'s bounds do:
/// "1–200 characters.", "Up to 2,000 characters, or null.", "0–1000.".
fn restates_bounds(description: &str, schema: &Map<String, Value>) -> bool {
    let number = |s: &str| {
        let digits = s.replace(',', "");
        if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return None;
        }
        digits.parse::<f64>().ok()
    };
    let bound = |keys: [&str; 2]| keys.iter().find_map(|k| schema.get(*k)).and_then(Value::as_f64);
    let d = description.strip_suffix('.').unwrap_or(description);
    let d = match d.strip_suffix(", or null") {
        Some(d) if schema.get("type").and_then(Value::as_array).is_some_and(|t| t.contains(&json!("null"))) => d,
        Some(_) => return false,
        None => d,
    };
    let d = d.strip_suffix(" characters").unwrap_or(d);
    let (low, high) = match d.strip_prefix("Up to ") {
        Some(n) => (Some(0.0), number(n)),
        None => match d.split_once('–') {
            Some((a, b)) => (number(a), number(b)),
            None => return false,
        },
    };
    let (Some(low), Some(high)) = (low, high) else { return false };
    bound(["maxLength", "maximum"]) == Some(high) && bound(["minLength", "minimum"]).unwrap_or(0.0) == low
}

/// A description in brief: its first sentence, line breaks as spaces.
pub(crate) fn brief(text: &str) -> String {
    let paragraph = text.trim().split("\n\n").next().unwrap_or_default();
    let flat = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
    let (mut depth, mut code) = (0usize, false);
    for (i, c) in flat.char_indices() {
        match c {
            '`' => code = !code,
            _ if code => {}
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            '.' | '!' | '?' if depth == 0 => {
                let rest = &flat[i + 1..];
                let next = rest.strip_prefix(' ').and_then(|r| r.chars().next());
                let abbreviation = ["e.g", "i.e", "etc", "vs"].iter().any(|a| flat[..i].ends_with(a));
                if next.is_some_and(|n| n.is_uppercase() || "`\"'(".contains(n)) && !abbreviation {
                    return flat[..=i].to_owned();
                }
            }
            _ => {}
        }
    }
    flat
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_keeps_its_first_sentence() {
        assert_eq!(brief("Items per page, 1–200. Default 50."), "Items per page, 1–200.");
        assert_eq!(brief("One line\nwrapped. Then more.\n\nA paragraph."), "One line wrapped.");
        assert_eq!(
            brief("Only events of this type, e.g. `message.received`. More."),
            "Only events of this type, e.g. `message.received`."
        );
        assert_eq!(brief("A link (valid 1 h. Then gone) stays. Next."), "A link (valid 1 h. Then gone) stays.");
        assert_eq!(brief("Use `a. B` here. Next."), "Use `a. B` here.");
        assert_eq!(brief("Version 1.5 of it, and lowercase. after"), "Version 1.5 of it, and lowercase. after");
        assert_eq!(brief("Ends here.\n\nA paragraph."), "Ends here.");
        assert_eq!(brief("  "), "");
    }

    #[test]
    fn a_description_that_only_restates_bounds_is_left_out() {
        let bounds = |s: Value| s.as_object().unwrap().clone();
        let text = bounds(json!({"type": "string", "minLength": 1, "maxLength": 200}));
        assert!(restates_bounds("1–200 characters.", &text));
        assert!(!restates_bounds("1–100 characters.", &text), "another bound");
        assert!(!restates_bounds("2–200 characters.", &text), "another bound");
        assert!(!restates_bounds("1–200 characters.", &bounds(json!({"type": "string"}))), "said nowhere else");
        let nullable = bounds(json!({"type": ["string", "null"], "maxLength": 2000}));
        assert!(restates_bounds("Up to 2,000 characters, or null.", &nullable));
        assert!(!restates_bounds("Up to 2,000 characters, or null.", &bounds(json!({"maxLength": 2000}))), "null");
        assert!(restates_bounds("0–1000.", &bounds(json!({"minimum": 0, "maximum": 1000}))));
        assert!(restates_bounds("1–100,000 characters.", &bounds(json!({"minLength": 1, "maxLength": 100000}))));
        for d in ["Items per page, 1–200.", "1–200 characters, for whoever takes over.", "Up to 200 names.", "–."]
        {
            assert!(!restates_bounds(d, &text), "{d}");
        }
    }

    #[test]
    fn references_are_inlined_and_noise_left_out() {
        let doc = json!({"components": {"schemas": {
            "Name": {"type": "string", "minLength": 1, "maxLength": 100, "title": "Name",
                     "example": "Ada", "description": "A name. Shown to callers."},
            "Body": {"type": "object", "required": ["name"], "additionalProperties": false,
                     "examples": [{"name": "Ada"}],
                     "properties": {
                         "name": {"$ref": "#/components/schemas/Name", "description": "The agent's name. Unique."},
                         "title": {"type": ["string", "null"], "format": "int64", "maximum": 5},
                         "when": {"type": "string", "format": "date-time"}}}}}});
        let mut r = Resolver::new(&doc);
        let body = r.resolve(&json!({"$ref": "#/components/schemas/Body"}));
        assert_eq!(
            body,
            json!({"type": "object", "required": ["name"], "additionalProperties": false, "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 100, "description": "The agent's name."},
                "title": {"type": ["string", "null"], "maximum": 5},
                "when": {"type": "string", "format": "date-time"}}})
        );
        assert_eq!(r.defs(), None);
    }

    #[test]
    fn a_schema_that_contains_itself_is_referenced_from_defs() {
        let doc = json!({"components": {"schemas": {
            "Node": {"type": "object", "properties": {
                "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}}}});
        let mut r = Resolver::new(&doc);
        let node = r.resolve(&json!({"$ref": "#/components/schemas/Node"}));
        assert_eq!(node["properties"]["children"]["items"], json!({"$ref": "#/$defs/Node"}));
        let defs = r.defs().unwrap();
        assert_eq!(defs["Node"]["properties"]["children"]["items"], json!({"$ref": "#/$defs/Node"}));
    }

    #[test]
    fn a_constraint_beside_a_reference_applies_too() {
        let doc = json!({"components": {"schemas": {"N": {"type": "integer", "maximum": 10}}}});
        let got = Resolver::new(&doc).resolve(&json!({"$ref": "#/components/schemas/N", "maximum": 5}));
        assert_eq!(got, json!({"maximum": 5, "allOf": [{"type": "integer", "maximum": 10}]}));
    }
}
