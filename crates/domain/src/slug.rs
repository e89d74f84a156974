//! Slugs: lower-case ASCII words joined by hyphens, derived from a name.

/// Derives the base slug for `name`: letters and digits are kept (accented
/// Latin letters lose their accents), everything else separates words.
/// A name with no usable character gives `"item"`, so a slug is never empty.
pub fn slugify(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut pending_hyphen = false;
    for c in name.chars().flat_map(fold_accent) {
        if c.is_ascii_alphanumeric() {
            if pending_hyphen && !out.is_empty() {
                out.push('-');
            }
            pending_hyphen = false;
            out.push(c.to_ascii_lowercase());
        } else {
            pending_hyphen = true;
        }
    }
    out.truncate(80);
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() { "item".to_owned() } else { out }
}

/// The `n`-th candidate for `base`: `base`, `base-2`, `base-3`, …
pub fn candidate(base: &str, n: u32) -> String {
    if n <= 1 { base.to_owned() } else { format!("{base}-{n}") }
}

fn fold_accent(c: char) -> impl Iterator<Item = char> {
    let folded: &str = match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'À' | 'Á' | 'Â' | 'Ã' | 'Ä' | 'Å' => "a",
        'æ' | 'Æ' => "ae",
        'ç' | 'Ç' => "c",
        'è' | 'é' | 'ê' | 'ë' | 'È' | 'É' | 'Ê' | 'Ë' => "e",
        'ì' | 'í' | 'î' | 'ï' | 'Ì' | 'Í' | 'Î' | 'Ï' => "i",
        'ñ' | 'Ñ' => "n",
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'Ò' | 'Ó' | 'Ô' | 'Õ' | 'Ö' | 'Ø' => "o",
        'œ' | 'Œ' => "oe",
        'ù' | 'ú' | 'û' | 'ü' | 'Ù' | 'Ú' | 'Û' | 'Ü' => "u",
        'ý' | 'ÿ' | 'Ý' => "y",
        'ß' => "ss",
        _ => "",
    };
    let single = if folded.is_empty() { Some(c) } else { None };
    folded.chars().chain(single)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_lower_case_words_joined_by_hyphens() {
        assert_eq!(slugify("Support Bot"), "support-bot");
        assert_eq!(slugify("  Sales -- Agent #2 "), "sales-agent-2");
        assert_eq!(slugify("Réception Zürich"), "reception-zurich");
        assert_eq!(slugify("日本"), "item");
        assert_eq!(candidate("support-bot", 1), "support-bot");
        assert_eq!(candidate("support-bot", 3), "support-bot-3");
    }
}
