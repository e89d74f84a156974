//! Search queries: the `q` syntax, folding for case- and accent-insensitive
//! matching, and snippets with `<mark>`.
//!
//! Syntax: words (all must match), `"exact phrase"`, `-exclude` (a word or
//! a phrase), `prefix*`. A word is a run of letters and digits; other
//! characters separate words (so `order#123` is the words `order` and `123`).

use unicode_normalization::UnicodeNormalization;

/// One condition of a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    /// Consecutive words (one word is a phrase of one); `prefix`: the last
    /// word may continue.
    Phrase { words: Vec<String>, prefix: bool },
}

/// A parsed query: terms that must match, and terms that must not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub include: Vec<Term>,
    pub exclude: Vec<Term>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("the query is empty")]
    Empty,
    #[error("a quote is not closed")]
    UnbalancedQuote,
    #[error("the query only excludes; add a word to search for")]
    OnlyExclusions,
    #[error("`*` must follow at least one letter or digit")]
    LonePrefix,
}

/// Lower-case, without diacritics (é → e, ß stays), for Latin scripts.
pub fn fold(s: &str) -> String {
    s.nfd().filter(|c| !unicode_normalization::char::is_combining_mark(*c)).flat_map(char::to_lowercase).collect()
}

fn words(s: &str) -> Vec<String> {
    fold(s).split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_owned).collect()
}

/// Parses `q`; every malformed form is an error, never a panic.
pub fn parse(q: &str) -> Result<Query, QueryError> {
    let mut include = Vec::new();
    let mut exclude = Vec::new();
    let mut rest = q.trim();
    while !rest.is_empty() {
        let negated = rest.starts_with('-') && rest.len() > 1 && !rest[1..].starts_with(char::is_whitespace);
        if negated {
            rest = &rest[1..];
        }
        let (term, after) = if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').ok_or(QueryError::UnbalancedQuote)?;
            let words = words(&quoted[..end]);
            (if words.is_empty() { None } else { Some(Term::Phrase { words, prefix: false }) }, &quoted[end + 1..])
        } else {
            let end = rest.find(|c: char| c.is_whitespace() || c == '"').unwrap_or(rest.len());
            let token = &rest[..end];
            let prefix = token.ends_with('*');
            let words = words(token.trim_end_matches('*'));
            if prefix && words.is_empty() {
                return Err(QueryError::LonePrefix);
            }
            (if words.is_empty() { None } else { Some(Term::Phrase { words, prefix }) }, &rest[end..])
        };
        if let Some(term) = term {
            if negated { exclude.push(term) } else { include.push(term) }
        }
        rest = after.trim_start();
    }
    match (include.is_empty(), exclude.is_empty()) {
        (true, true) => Err(QueryError::Empty),
        (true, false) => Err(QueryError::OnlyExclusions),
        _ => Ok(Query { include, exclude }),
    }
}

impl Query {
    /// The query as an FTS5 expression (its words are letters and digits,
    /// quoted, so nothing in `q` can reach FTS5's own syntax).
    pub fn to_fts5(&self) -> String {
        let term = |t: &Term| match t {
            Term::Phrase { words, prefix } => format!("\"{}\"{}", words.join(" "), if *prefix { " *" } else { "" }),
        };
        let mut out = self.include.iter().map(term).collect::<Vec<_>>().join(" AND ");
        for t in &self.exclude {
            out.push_str(" NOT ");
            out.push_str(&term(t));
        }
        out
    }

    /// The query as PostgreSQL `to_tsquery('simple', …)` text.
    pub fn to_tsquery(&self) -> String {
        let term = |t: &Term| match t {
            Term::Phrase { words, prefix } => {
                let last = words.len() - 1;
                let lexemes: Vec<String> = words
                    .iter()
                    .enumerate()
                    .map(|(i, w)| format!("'{w}'{}", if *prefix && i == last { ":*" } else { "" }))
                    .collect();
                format!("({})", lexemes.join(" <-> "))
            }
        };
        let mut parts: Vec<String> = self.include.iter().map(term).collect();
        parts.extend(self.exclude.iter().map(|t| format!("!{}", term(t))));
        parts.join(" & ")
    }
}

fn escape(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

/// The words of `text` (runs of letters and digits) as character spans, folded.
fn word_spans(chars: &[char]) -> Vec<(usize, usize, String)> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_alphanumeric() {
            let start = i;
            while i < chars.len() && chars[i].is_alphanumeric() {
                i += 1;
            }
            spans.push((start, i, fold(&chars[start..i].iter().collect::<String>())));
        } else {
            i += 1;
        }
    }
    spans
}

impl Term {
    /// Whether the term matches the words starting at `start`.
    fn matches_at(&self, spans: &[(usize, usize, String)], start: usize) -> bool {
        let Term::Phrase { words, prefix } = self;
        words.iter().enumerate().all(|(k, w)| {
            spans.get(start + k).is_some_and(|(_, _, s)| {
                if *prefix && k == words.len() - 1 { s.starts_with(w.as_str()) } else { s == w }
            })
        })
    }

    fn len(&self) -> usize {
        let Term::Phrase { words, .. } = self;
        words.len()
    }
}

impl Query {
    /// How often each included term occurs in `text`, and the text's length
    /// in words: what ranking needs of one document.
    pub fn term_frequencies(&self, text: &str) -> (Vec<u32>, u32) {
        let chars: Vec<char> = text.chars().collect();
        let spans = word_spans(&chars);
        let counts = self
            .include
            .iter()
            .map(|t| (0..spans.len()).filter(|&start| t.matches_at(&spans, start)).count() as u32)
            .collect();
        (counts, spans.len() as u32)
    }
}

/// Okapi BM25 (k1 = 1.2, b = 0.75) over the included terms.
///
/// Document frequencies are counted only up to a cap (counting every match
/// of a common word costs more than a query may take), so the inverse
/// document frequency is measured against that cap, `ln(1 + cap / (df + ½))`:
/// a term in one document weighs about 9.9 with a cap of 10,000, and every
/// term in the cap or more weighs ln 2.
#[derive(Debug, Clone)]
pub struct Bm25 {
    idf: Vec<f64>,
    avg_len: f64,
}

impl Bm25 {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;

    /// `doc_freqs`: per included term, the documents containing it (at most
    /// `cap`); `avg_len`: the mean length in words of the documents ranked.
    pub fn new(doc_freqs: &[i64], cap: i64, avg_len: f64) -> Self {
        let n = cap as f64;
        let idf = doc_freqs.iter().map(|&df| (1.0 + n / (df.min(cap) as f64 + 0.5)).ln()).collect();
        Bm25 { idf, avg_len: avg_len.max(1.0) }
    }

    /// The score of a document with `tf` (per included term) and `len` words.
    pub fn score(&self, tf: &[u32], len: u32) -> f64 {
        let norm = Self::K1 * (1.0 - Self::B + Self::B * len as f64 / self.avg_len);
        self.idf
            .iter()
            .zip(tf)
            .map(|(idf, &f)| {
                let f = f as f64;
                idf * f * (Self::K1 + 1.0) / (f + norm)
            })
            .sum()
    }
}

/// Up to `width` characters of `text` around its first match, HTML-escaped,
/// with the matched words wrapped in `<mark>…</mark>`.
pub fn snippet(text: &str, query: &Query, width: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    let spans = word_spans(&chars);
    let mut marked = vec![false; spans.len()];
    for term in &query.include {
        for start in 0..spans.len() {
            if term.matches_at(&spans, start) {
                marked[start..start + term.len()].iter_mut().for_each(|m| *m = true);
            }
        }
    }
    let first = spans.iter().zip(&marked).find(|(_, m)| **m).map_or(0, |((s, _, _), _)| *s);
    let from = first.saturating_sub(width / 3);
    let to = (from + width).min(chars.len());
    let from = to.saturating_sub(width).min(from);
    let mut out = String::new();
    if from > 0 {
        out.push('…');
    }
    let mut at = from;
    for ((s, e, _), m) in spans.iter().zip(&marked) {
        if !*m || *e <= from || *s >= to {
            continue;
        }
        let (s, e) = ((*s).max(from), (*e).min(to));
        escape(&chars[at..s].iter().collect::<String>(), &mut out);
        out.push_str("<mark>");
        escape(&chars[s..e].iter().collect::<String>(), &mut out);
        out.push_str("</mark>");
        at = e;
    }
    escape(&chars[at..to].iter().collect::<String>(), &mut out);
    if to < chars.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phrase(words: &[&str], prefix: bool) -> Term {
        Term::Phrase { words: words.iter().map(|w| w.to_string()).collect(), prefix }
    }

    #[test]
    fn the_syntax_parses_and_malformed_queries_are_errors() {
        let q = parse(r#"Crème  "brûlée recipe" -burnt choc* -"too sweet""#).unwrap();
        assert_eq!(
            q.include,
            [phrase(&["creme"], false), phrase(&["brulee", "recipe"], false), phrase(&["choc"], true)]
        );
        assert_eq!(q.exclude, [phrase(&["burnt"], false), phrase(&["too", "sweet"], false)]);
        assert_eq!(q.to_fts5(), r#""creme" AND "brulee recipe" AND "choc" * NOT "burnt" NOT "too sweet""#);
        assert_eq!(
            q.to_tsquery(),
            "('creme') & ('brulee' <-> 'recipe') & ('choc':*) & !('burnt') & !('too' <-> 'sweet')"
        );
        assert_eq!(parse("order#123").unwrap().include, [phrase(&["order", "123"], false)]);
        assert_eq!(parse(r#""unclosed"#), Err(QueryError::UnbalancedQuote));
        assert_eq!(parse("   "), Err(QueryError::Empty));
        assert_eq!(parse("!!! ???"), Err(QueryError::Empty));
        assert_eq!(parse("-only"), Err(QueryError::OnlyExclusions));
        assert_eq!(parse("*"), Err(QueryError::LonePrefix));
        // Quotes and operators of FTS5 or tsquery never pass through.
        let evil = parse(r#"a'b OR c:* NEAR(d)"#).unwrap();
        assert!(!evil.to_fts5().contains("OR c") && !evil.to_tsquery().contains("''"));
    }

    #[test]
    fn snippets_mark_matches_and_escape_everything_else() {
        let q = parse("order*").unwrap();
        let s = snippet("<b>Hi</b> & your Orders are <script>here</script>", &q, 200);
        assert_eq!(s, "&lt;b&gt;Hi&lt;/b&gt; &amp; your <mark>Orders</mark> are &lt;script&gt;here&lt;/script&gt;");
        let long = format!("{} needle {}", "hay ".repeat(100), "straw ".repeat(100));
        let s = snippet(&long, &parse("NEEDLE").unwrap(), 60);
        assert!(s.starts_with('…') && s.ends_with('…') && s.contains("<mark>needle</mark>"), "{s}");
        assert_eq!(snippet("Crème brûlée", &parse("creme").unwrap(), 50), "<mark>Crème</mark> brûlée");
    }

    #[test]
    fn term_frequencies_count_words_phrases_and_prefixes() {
        let q = parse(r#"order "next day" ship*"#).unwrap();
        let (tf, len) = q.term_frequencies("Order #12: ORDER shipped next-day; shipping next week, next day.");
        assert_eq!(tf, [2, 2, 2]);
        assert_eq!(len, 11);
    }

    #[test]
    fn bm25_prefers_rare_terms_more_occurrences_and_shorter_texts() {
        let bm = Bm25::new(&[10_000, 3], 10_000, 10.0);
        // The rare term outweighs the common one.
        assert!(bm.score(&[0, 1], 10) > bm.score(&[1, 0], 10));
        // More occurrences score higher, with diminishing returns.
        let (one, two, three) = (bm.score(&[1, 0], 10), bm.score(&[2, 0], 10), bm.score(&[3, 0], 10));
        assert!(one < two && two < three && three - two < two - one);
        // The same occurrences in a shorter text score higher.
        assert!(bm.score(&[1, 1], 5) > bm.score(&[1, 1], 40));
        // A common term still counts.
        assert!(one > 0.0);
    }
}
