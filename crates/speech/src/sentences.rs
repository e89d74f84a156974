//! Cuts the agent's streamed text into sentences, so the first sentence is
//! spoken while the model is still writing the rest.

/// Titles and abbreviations whose period does not end a sentence.
const ABBREVIATIONS: &[&str] =
    &["mr", "mrs", "ms", "dr", "st", "prof", "sr", "jr", "vs", "etc", "e.g", "i.e", "no", "approx", "inc", "ltd"];

/// A sentence longer than this is cut at its last comma or space, so a
/// run-on answer does not keep the caller waiting.
const MAX_CHARS: usize = 240;

/// Collects text pieces and hands out whole sentences.
#[derive(Debug, Default)]
pub struct Sentences {
    buf: String,
}

impl Sentences {
    pub fn new() -> Sentences {
        Sentences::default()
    }

    /// Adds streamed text; returns the sentences it completed.
    pub fn push(&mut self, text: &str) -> Vec<String> {
        self.buf.push_str(text);
        let mut out = Vec::new();
        while let Some(end) = self.sentence_end() {
            let rest = self.buf.split_off(end);
            let sentence = std::mem::replace(&mut self.buf, rest);
            let sentence = sentence.trim();
            if !sentence.is_empty() {
                out.push(sentence.to_owned());
            }
        }
        out
    }

    /// What is left when the text is complete.
    pub fn finish(self) -> Option<String> {
        let rest = self.buf.trim();
        (!rest.is_empty()).then(|| rest.to_owned())
    }

    /// The byte index just after the first complete sentence, if any: a
    /// terminator followed by whitespace (so "3.5" and "example.com" stay
    /// whole), or a line break, or a cut in an over-long sentence.
    fn sentence_end(&self) -> Option<usize> {
        let chars: Vec<(usize, char)> = self.buf.char_indices().collect();
        for (i, &(at, c)) in chars.iter().enumerate() {
            if c == '\n' {
                return Some(at + 1);
            }
            let next = chars.get(i + 1).map(|(_, n)| *n);
            if matches!(c, '.' | '!' | '?' | ';' | '…') && next.is_some_and(char::is_whitespace) {
                if c == '.' && self.ends_with_abbreviation(at) {
                    continue;
                }
                return Some(at + c.len_utf8());
            }
            if i >= MAX_CHARS {
                let head = &self.buf[..at];
                let cut = head.rfind(", ").map(|p| p + 1).or_else(|| head.rfind(' '))?;
                return Some(cut + 1);
            }
        }
        None
    }

    fn ends_with_abbreviation(&self, period_at: usize) -> bool {
        let word = self.buf[..period_at].rsplit(|c: char| c.is_whitespace()).next().unwrap_or("");
        let word = word.trim_start_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
        ABBREVIATIONS.contains(&word.as_str()) || (word.len() == 1 && word.chars().all(char::is_alphabetic))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pieces: &[&str]) -> Vec<String> {
        let mut s = Sentences::new();
        let mut out: Vec<String> = pieces.iter().flat_map(|p| s.push(p)).collect();
        out.extend(s.finish());
        out
    }

    #[test]
    fn sentences_come_out_as_soon_as_they_end() {
        let mut s = Sentences::new();
        assert!(s.push("Hello the").is_empty());
        assert_eq!(s.push("re! How can"), ["Hello there!"]);
        assert!(s.push(" I help").is_empty());
        assert_eq!(s.push("? "), ["How can I help?"]);
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn numbers_addresses_and_titles_do_not_end_sentences() {
        assert_eq!(
            split(&["Dr. Smith charges 3.5 dollars at example.com today. ", "Call J. Doe then."]),
            ["Dr. Smith charges 3.5 dollars at example.com today.", "Call J. Doe then."]
        );
    }

    #[test]
    fn a_run_on_sentence_is_cut_at_a_comma() {
        let long = format!("{}, and then {}", "word ".repeat(40).trim(), "more ".repeat(30));
        let out = split(&[&long]);
        assert!(out.len() >= 2, "{out:?}");
        assert!(out[0].ends_with(','), "{out:?}");
        assert!(out.iter().all(|s| s.chars().count() <= 245));
    }
}
