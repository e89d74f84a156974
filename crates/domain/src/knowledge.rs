//! Knowledge collections: documents split into passages that agents
//! retrieve by BM25 and quote or reason from.

use serde::Serialize;
use utoipa::ToSchema;

use crate::Timestamp;
use crate::search::fold;

/// A named set of documents agents can draw on.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct KnowledgeCollection {
    pub id: i64,
    pub name: String,
    pub description: Option<String>,
    pub document_count: i64,
    /// Passages of the collection's ready documents.
    pub passage_count: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

string_enum!(
    /// processing → ready | failed.
    DocumentStatus { Processing = "processing", Ready = "ready", Failed = "failed" }
);

/// A document of a collection.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct KnowledgeDocument {
    pub id: i64,
    pub collection_id: i64,
    pub title: String,
    /// The uploaded file's name, or null for text sent as JSON.
    pub source: Option<String>,
    pub content_type: String,
    pub status: DocumentStatus,
    /// Why processing failed.
    pub error: Option<String>,
    pub passage_count: i64,
    /// The size of what was sent.
    pub bytes: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A passage found for a question.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct KnowledgeHit {
    pub passage_id: i64,
    pub document_id: i64,
    /// The document's title.
    pub title: String,
    pub text: String,
    /// BM25; higher is better.
    pub score: f64,
}

/// Words that say nothing about what a question is about.
const STOP_WORDS: &[&str] = &[
    "a", "about", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did", "do",
    "does", "for", "from", "had", "has", "have", "he", "her", "here", "him", "his", "how", "i", "if", "in", "into",
    "is", "it", "its", "me", "my", "no", "not", "of", "on", "or", "our", "please", "she", "so", "than", "that", "the",
    "their", "them", "then", "there", "these", "they", "this", "those", "to", "us", "was", "we", "were", "what",
    "when", "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

/// At most this many words of a question are looked up.
pub const MAX_TERMS: usize = 24;

fn stemmer() -> &'static rust_stemmers::Stemmer {
    static STEMMER: std::sync::OnceLock<rust_stemmers::Stemmer> = std::sync::OnceLock::new();
    STEMMER.get_or_init(|| rust_stemmers::Stemmer::create(rust_stemmers::Algorithm::English))
}

/// A text's words as they are indexed: folded and stemmed (Snowball
/// English: "Saturdays" and "saturday" are one word), separated by spaces.
/// Passages are indexed by this form, and questions looked up in it.
pub fn index_words(text: &str) -> String {
    let stemmer = stemmer();
    fold(text)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| stemmer.stem(w).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The words of a question worth looking up, in their indexed form:
/// without stop words and one-letter words, each once, in order.
pub fn terms(question: &str) -> Vec<String> {
    let stemmer = stemmer();
    let mut out: Vec<String> = Vec::new();
    for w in fold(question).split(|c: char| !c.is_alphanumeric()) {
        if w.chars().count() < 2 || STOP_WORDS.contains(&w) {
            continue;
        }
        let stem = stemmer.stem(w).into_owned();
        if out.contains(&stem) {
            continue;
        }
        out.push(stem);
        if out.len() == MAX_TERMS {
            break;
        }
    }
    out
}

/// How often each of `terms` occurs in a passage's indexed words
/// ([`index_words`]), and how many words it has: what BM25 needs of it.
pub fn term_frequencies(indexed: &str, terms: &[String]) -> (Vec<u32>, u32) {
    let mut counts = vec![0u32; terms.len()];
    let mut len = 0u32;
    for word in indexed.split(' ').filter(|w| !w.is_empty()) {
        len += 1;
        if let Some(k) = terms.iter().position(|t| t == word) {
            counts[k] += 1;
        }
    }
    (counts, len)
}

/// A passage's target size and ceiling, in estimated tokens (four
/// characters each): about 300–500 tokens.
const TARGET_CHARS: usize = 1_600;
const MAX_CHARS: usize = 2_000;
/// The tail of a passage repeated at the start of the next, so an answer
/// that straddles a boundary is whole in one of them.
const OVERLAP_CHARS: usize = 300;

/// Splits a document's text into passages: on headings (Markdown `#` lines
/// start a new passage) and paragraph boundaries, about 300–500 tokens
/// each, long paragraphs cut at sentence ends, with overlap. Each passage
/// starts with the heading it falls under.
pub fn split(text: &str) -> Vec<String> {
    let mut passages = Vec::new();
    let mut heading = String::new();
    let mut current = String::new();
    // Whether `current` holds more than the previous passage's overlap.
    let mut fresh = false;
    let flush = |current: &mut String, passages: &mut Vec<String>, heading: &str, overlap: bool| {
        let body = current.trim();
        if !body.is_empty() {
            let passage = if heading.is_empty() { body.to_owned() } else { format!("{heading}\n\n{body}") };
            passages.push(passage);
        }
        let tail = if overlap { overlap_tail(current) } else { String::new() };
        *current = tail;
    };
    for paragraph in paragraphs(text) {
        if let Some(h) = paragraph.strip_prefix('#') {
            if fresh {
                flush(&mut current, &mut passages, &heading, false);
            }
            current.clear();
            fresh = false;
            heading = h.trim_start_matches('#').trim().to_owned();
            continue;
        }
        for piece in pieces(&paragraph) {
            if fresh && current.len() + piece.len() + 2 > MAX_CHARS {
                flush(&mut current, &mut passages, &heading, true);
            }
            if !current.is_empty() {
                current.push_str("\n\n");
            }
            current.push_str(&piece);
            fresh = true;
            if current.len() >= TARGET_CHARS {
                flush(&mut current, &mut passages, &heading, true);
                fresh = false;
            }
        }
    }
    if fresh {
        flush(&mut current, &mut passages, &heading, false);
    }
    passages
}

/// Paragraphs: blocks separated by blank lines, each on one line; a
/// heading line is a paragraph of its own.
fn paragraphs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut block: Vec<&str> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            if !block.is_empty() {
                out.push(block.join(" "));
                block.clear();
            }
            if line.starts_with('#') {
                out.push(line.to_owned());
            }
        } else {
            block.push(line);
        }
    }
    if !block.is_empty() {
        out.push(block.join(" "));
    }
    out
}

/// A paragraph in pieces of at most [`MAX_CHARS`], cut after sentences
/// (or, for a sentence that long, between words).
fn pieces(paragraph: &str) -> Vec<String> {
    if paragraph.len() <= MAX_CHARS {
        return vec![paragraph.to_owned()];
    }
    let mut out = Vec::new();
    let mut piece = String::new();
    for sentence in sentences(paragraph) {
        for part in cut_words(sentence, MAX_CHARS) {
            if !piece.is_empty() && piece.len() + part.len() + 1 > TARGET_CHARS {
                out.push(std::mem::take(&mut piece));
            }
            if !piece.is_empty() {
                piece.push(' ');
            }
            piece.push_str(&part);
        }
    }
    if !piece.is_empty() {
        out.push(piece);
    }
    out
}

fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = text.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if matches!(b, b'.' | b'!' | b'?') && bytes.get(i + 1).is_none_or(|n| *n == b' ') {
            out.push(text[start..=i].trim());
            start = i + 1;
        }
    }
    if start < text.len() && !text[start..].trim().is_empty() {
        out.push(text[start..].trim());
    }
    out
}

fn cut_words(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut part = String::new();
    for word in text.split_whitespace() {
        if !part.is_empty() && part.len() + word.len() + 1 > max {
            out.push(std::mem::take(&mut part));
        }
        if !part.is_empty() {
            part.push(' ');
        }
        // A "word" longer than a passage (a URL, base64) is cut by characters.
        let mut word = word;
        while word.len() > max {
            let mut at = max;
            while !word.is_char_boundary(at) {
                at -= 1;
            }
            out.push(word[..at].to_owned());
            word = &word[at..];
        }
        part.push_str(word);
    }
    if !part.is_empty() {
        out.push(part);
    }
    out
}

/// The last sentences of a passage, up to [`OVERLAP_CHARS`].
fn overlap_tail(passage: &str) -> String {
    let mut tail: Vec<&str> = Vec::new();
    let mut len = 0;
    for s in sentences(passage.trim()).into_iter().rev() {
        if len + s.len() > OVERLAP_CHARS {
            break;
        }
        len += s.len() + 1;
        tail.push(s);
    }
    tail.reverse();
    tail.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_drop_stop_words_and_repeats() {
        assert_eq!(terms("When do you OPEN on Sundays? Open late?"), vec!["open", "sunday", "late"]);
        assert_eq!(index_words("Opening on Saturdays, shipped."), "open on saturday ship");
        assert!(terms("what is it?").is_empty());
        assert_eq!(terms("Café crème").len(), 2);
    }

    #[test]
    fn term_frequencies_count_indexed_words() {
        let indexed = index_words("Shipping: we ship daily, and shipping is free.");
        let terms = terms("shipping costs");
        assert_eq!(term_frequencies(&indexed, &terms), (vec![3, 0], 8));
    }

    #[test]
    fn short_documents_are_one_passage_under_their_heading() {
        let text = "# Opening hours\n\nWe open at 9am.\nWe close at 5pm.\n\n# Returns\n\nReturns within 30 days.";
        assert_eq!(
            split(text),
            vec!["Opening hours\n\nWe open at 9am. We close at 5pm.", "Returns\n\nReturns within 30 days."]
        );
    }

    #[test]
    fn long_documents_split_near_the_target_with_overlap() {
        let paragraph = "This sentence is about shipping times and costs. ".repeat(12);
        let text = vec![paragraph.trim(); 12].join("\n\n");
        let passages = split(&text);
        assert!(passages.len() >= 4, "{}", passages.len());
        for p in &passages {
            assert!(p.len() <= MAX_CHARS + OVERLAP_CHARS + 2, "{}", p.len());
        }
        // Each passage after the first starts with the end of the one before.
        let first_tail = overlap_tail(&passages[0]);
        assert!(!first_tail.is_empty() && passages[1].starts_with(&first_tail));
        // Nothing is lost: every sentence of the text is in some passage.
        let total: usize = passages.iter().map(|p| p.matches("shipping").count()).sum();
        assert!(total >= 144, "{total}");
    }

    #[test]
    fn a_giant_paragraph_is_cut_at_sentences_and_words() {
        let text = format!("{} {}", "Short one. ".repeat(400), "x".repeat(5_000));
        let passages = split(&text);
        assert!(passages.iter().all(|p| p.len() <= MAX_CHARS + OVERLAP_CHARS + 2));
        let xs: usize = passages.iter().map(|p| p.matches('x').count()).sum();
        assert!(xs >= 5_000, "{xs} of 5000 in {:?}", passages.iter().map(|p| p.len()).collect::<Vec<_>>());
    }
}
