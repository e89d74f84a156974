//! Prompt blocks: reusable prompt text with `{{variable}}` placeholders.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::Timestamp;

string_enum!(
    /// What a prompt block holds.
    BlockKind {
        Persona = "persona",
        Instruction = "instruction",
        Knowledge = "knowledge",
        Guardrail = "guardrail",
        Greeting = "greeting",
        Other = "other",
    }
);

/// A prompt block as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PromptBlock {
    pub id: i64,
    pub name: String,
    pub slug: String,
    pub kind: BlockKind,
    /// Template text; every `{{placeholder}}` is declared in `variables`.
    pub content: String,
    pub variables: Vec<String>,
    /// Starts at 1 and grows by one on every update.
    pub version: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// One saved version of a prompt block.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PromptBlockVersion {
    pub block_id: i64,
    pub version: i64,
    pub name: String,
    pub kind: BlockKind,
    pub content: String,
    pub variables: Vec<String>,
    pub created_at: Timestamp,
}

/// A fault in template text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("unclosed placeholder starting at character {0}")]
    Unclosed(usize),
    #[error("invalid variable name {0:?} in placeholder; use letters, digits and underscores")]
    BadName(String),
}

/// One piece of a parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece<'a> {
    Text(&'a str),
    Var(&'a str),
}

fn parse(template: &str) -> Result<Vec<Piece<'_>>, TemplateError> {
    let mut pieces = Vec::new();
    let mut rest = template;
    let mut consumed = 0;
    while let Some(start) = rest.find("{{") {
        if start > 0 {
            pieces.push(Piece::Text(&rest[..start]));
        }
        let after = &rest[start + 2..];
        let end =
            after.find("}}").ok_or_else(|| TemplateError::Unclosed(template[..consumed + start].chars().count()))?;
        let name = after[..end].trim();
        if !is_variable_name(name) {
            return Err(TemplateError::BadName(name.to_owned()));
        }
        pieces.push(Piece::Var(name));
        let used = start + 2 + end + 2;
        consumed += used;
        rest = &rest[used..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest));
    }
    Ok(pieces)
}

/// Words (`[A-Za-z_][A-Za-z0-9_]*`) joined by dots, at most 64 characters:
/// `name`, or `contact.display_name` for the runtime's built-in variables.
pub fn is_variable_name(name: &str) -> bool {
    let word = |w: &str| {
        let mut chars = w.chars();
        matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    name.len() <= 64 && name.split('.').all(word)
}

/// The distinct placeholder names of `template`, in order of first use.
pub fn placeholders(template: &str) -> Result<Vec<String>, TemplateError> {
    let mut names: Vec<String> = Vec::new();
    for p in parse(template)? {
        if let Piece::Var(n) = p
            && !names.iter().any(|x| x == n)
        {
            names.push(n.to_owned());
        }
    }
    Ok(names)
}

/// Fills `template`'s placeholders from `values`; returns the missing names
/// if any placeholder has no value.
pub fn render(template: &str, values: &BTreeMap<String, String>) -> Result<String, RenderError> {
    let pieces = parse(template).map_err(RenderError::Template)?;
    let missing: Vec<String> = pieces
        .iter()
        .filter_map(|p| match p {
            Piece::Var(n) if !values.contains_key(*n) => Some((*n).to_owned()),
            _ => None,
        })
        .collect();
    if !missing.is_empty() {
        return Err(RenderError::Missing(missing));
    }
    let mut out = String::with_capacity(template.len());
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Var(n) => out.push_str(&values[n]),
        }
    }
    Ok(out)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenderError {
    Template(TemplateError),
    Missing(Vec<String>),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_found_in_order_without_duplicates() {
        let t = "Hi {{ name }}, you are {{role}}. Bye {{name}}.";
        assert_eq!(placeholders(t).unwrap(), vec!["name", "role"]);
    }

    #[test]
    fn variable_names_are_dotted_words() {
        for ok in ["name", "_x1", "contact.display_name", "conversation.title"] {
            assert!(is_variable_name(ok), "{ok}");
        }
        for bad in ["", "1x", "a..b", ".a", "a.", "a-b", "contact.1st", &"x".repeat(65)] {
            assert!(!is_variable_name(bad), "{bad}");
        }
        assert_eq!(placeholders("Hi {{ contact.display_name }}").unwrap(), vec!["contact.display_name"]);
    }

    #[test]
    fn malformed_templates_are_errors() {
        assert_eq!(placeholders("Hi {{name"), Err(TemplateError::Unclosed(3)));
        assert!(matches!(placeholders("{{ 1x }}"), Err(TemplateError::BadName(_))));
        assert!(matches!(placeholders("{{}}"), Err(TemplateError::BadName(_))));
    }

    #[test]
    fn render_fills_values_and_reports_missing_ones() {
        let mut v = BTreeMap::new();
        v.insert("name".to_owned(), "Ana".to_owned());
        assert_eq!(render("Hi {{name}}!", &v).unwrap(), "Hi Ana!");
        assert_eq!(render("{{name}} {{city}}", &v), Err(RenderError::Missing(vec!["city".into()])));
        assert_eq!(render("no vars", &v).unwrap(), "no vars");
    }
}
