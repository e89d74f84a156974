//! HTML to text with html5ever's tokenizer alone: no tree is built, so
//! nesting costs nothing (60,000 nested `<div>` or 200,000 unclosed `<b>`
//! are read in linear time and constant memory besides the text), and the
//! text is written as the tokens stream by.
//!
//! Block elements break lines, headings become Markdown `#` lines (so the
//! passage splitter keeps them with their sections), list items `- `,
//! table cells are separated by ` | `; `script`, `style`, `template` and
//! the like are skipped; whitespace collapses outside `pre`.

use std::cell::RefCell;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts};

use crate::{Budget, ExtractError, Limits};

/// Bytes handed to the tokenizer at a time (the clock is checked between).
const CHUNK: usize = 16 * 1024;

/// The text of an HTML document (UTF-8; invalid bytes replaced).
pub fn text(bytes: &[u8], limits: Limits) -> Result<String, ExtractError> {
    let source = String::from_utf8_lossy(bytes);
    let sink = TextSink { state: RefCell::new(Renderer::new(Budget::new(limits))) };
    let tokenizer = Tokenizer::new(sink, TokenizerOpts::default());
    let queue = BufferQueue::default();
    let mut rest: &str = &source;
    while !rest.is_empty() {
        let mut end = rest.len().min(CHUNK);
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        queue.push_back(StrTendril::from_slice(&rest[..end]));
        rest = &rest[end..];
        let _ = tokenizer.feed(&queue);
        let mut state = tokenizer.sink.state.borrow_mut();
        if let Some(e) = state.budget.stopped() {
            return Err(e.clone());
        }
        state.budget.check_time()?;
    }
    tokenizer.end();
    let state = tokenizer.sink.state.into_inner();
    if let Some(e) = state.budget.stopped() {
        return Err(e.clone());
    }
    Ok(state.finish())
}

/// Text within `limits` as one string, for short HTML (an email body).
pub fn text_lossy(bytes: &[u8], limits: Limits) -> String {
    match text(bytes, limits) {
        Ok(t) => t,
        Err(_) => String::new(),
    }
}

struct TextSink {
    state: RefCell<Renderer>,
}

impl TokenSink for TextSink {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        self.state.borrow_mut().token(token)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Break {
    None,
    Space,
    Line,
    Paragraph,
}

struct Renderer {
    budget: Budget,
    /// Written before the next text: the strongest break asked for since.
    pending: Break,
    /// Anything written yet (no break before the first text).
    started: bool,
    /// Inside an element whose content is not text (its end tag's name).
    skipping: Option<&'static str>,
    /// Open `pre` elements.
    pre: usize,
    /// Inside a heading: its text stays on the `#` line.
    heading: bool,
    /// A list item or cell began: the marker goes before its first text.
    marker: Option<&'static str>,
}

/// Elements whose content is never shown as text.
const SKIPPED: &[&str] = &["script", "style", "template", "noscript", "title", "textarea", "iframe", "noembed"];

/// Elements that end a paragraph.
const PARAGRAPHS: &[&str] = &[
    "p",
    "div",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "aside",
    "main",
    "blockquote",
    "figure",
    "figcaption",
    "form",
    "fieldset",
    "address",
    "table",
    "ul",
    "ol",
    "dl",
    "pre",
    "hr",
    "details",
    "summary",
    "body",
];

/// Elements that end a line.
const LINES: &[&str] = &["br", "li", "tr", "dt", "dd", "caption", "option", "thead", "tbody", "tfoot"];

impl Renderer {
    fn new(budget: Budget) -> Self {
        Self { budget, pending: Break::None, started: false, skipping: None, pre: 0, heading: false, marker: None }
    }

    fn ask(&mut self, b: Break) {
        if self.started {
            self.pending = self.pending.max(b);
        }
    }

    fn token(&mut self, token: Token) -> TokenSinkResult<()> {
        if self.budget.stopped().is_some() {
            return TokenSinkResult::Continue;
        }
        match token {
            Token::TagToken(tag) => {
                let name: &str = &tag.name;
                if let Some(until) = self.skipping {
                    if tag.kind == TagKind::EndTag && name == until {
                        self.skipping = None;
                    }
                    return TokenSinkResult::Continue;
                }
                match tag.kind {
                    TagKind::StartTag => return self.start(name, tag.self_closing),
                    TagKind::EndTag => self.end(name),
                }
            }
            Token::CharacterTokens(text) => {
                if self.skipping.is_none() {
                    self.text(&text);
                }
            }
            Token::NullCharacterToken
            | Token::CommentToken(_)
            | Token::DoctypeToken(_)
            | Token::EOFToken
            | Token::ParseError(_) => {}
        }
        let _ = self.budget.tick();
        TokenSinkResult::Continue
    }

    fn start(&mut self, name: &str, self_closing: bool) -> TokenSinkResult<()> {
        if let Some(skipped) = SKIPPED.iter().find(|s| **s == name) {
            if !self_closing {
                self.skipping = Some(skipped);
            }
            // The tokenizer reads these elements' content as raw text, as a
            // browser's tree builder would tell it to.
            return match name {
                "script" => TokenSinkResult::RawData(RawKind::ScriptData),
                "title" | "textarea" => TokenSinkResult::RawData(RawKind::Rcdata),
                "noscript" | "template" => TokenSinkResult::Continue,
                _ => TokenSinkResult::RawData(RawKind::Rawtext),
            };
        }
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.ask(Break::Paragraph);
                let level = name.as_bytes()[1] - b'0';
                self.heading = true;
                self.marker = Some(&"######"[..level as usize]);
            }
            "li" => {
                self.ask(Break::Line);
                self.marker = Some("-");
            }
            "td" | "th" => {
                if self.started && self.pending < Break::Line {
                    self.marker = Some("|");
                }
            }
            "pre" => {
                self.ask(Break::Paragraph);
                self.pre += 1;
            }
            "img" => {}
            "plaintext" => return TokenSinkResult::Plaintext,
            _ if PARAGRAPHS.contains(&name) => self.ask(Break::Paragraph),
            _ if LINES.contains(&name) => self.ask(Break::Line),
            _ => {}
        }
        TokenSinkResult::Continue
    }

    fn end(&mut self, name: &str) {
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                self.heading = false;
                self.marker = None;
                self.ask(Break::Paragraph);
            }
            "pre" => {
                self.pre = self.pre.saturating_sub(1);
                self.ask(Break::Paragraph);
            }
            "td" | "th" => self.ask(Break::Space),
            _ if PARAGRAPHS.contains(&name) => self.ask(Break::Paragraph),
            _ if LINES.contains(&name) => self.ask(Break::Line),
            _ => {}
        }
    }

    fn text(&mut self, text: &str) {
        if self.pre > 0 && !self.heading {
            self.flush_break();
            let _ = self.budget.push(text);
            self.started = true;
            return;
        }
        // Collapse whitespace; a run at either end becomes a pending space.
        let mut words = text.split_whitespace().peekable();
        if words.peek().is_none() {
            if !text.is_empty() {
                self.ask(Break::Space);
            }
            return;
        }
        if text.starts_with(char::is_whitespace) {
            self.ask(Break::Space);
        }
        let mut first = true;
        for word in words {
            if !first {
                self.ask(Break::Space);
            }
            first = false;
            self.flush_break();
            self.started = true;
            if self.budget.push(word).is_err() {
                return;
            }
        }
        if text.ends_with(char::is_whitespace) {
            self.ask(Break::Space);
        }
    }

    /// Writes the pending break, and a heading's or item's marker.
    fn flush_break(&mut self) {
        let gap = match self.pending {
            // A heading keeps to one line.
            Break::Line | Break::Paragraph if self.heading && self.marker.is_none() => " ",
            Break::None => "",
            Break::Space => " ",
            Break::Line => "\n",
            Break::Paragraph => "\n\n",
        };
        self.pending = Break::None;
        let _ = self.budget.push(gap);
        if let Some(marker) = self.marker.take() {
            let _ = self.budget.push(marker);
            let _ = self.budget.push(" ");
        }
    }

    fn finish(self) -> String {
        self.budget.into_text()
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::TIME_LIMIT;

    fn read(html: &str) -> String {
        text(html.as_bytes(), Limits::standard()).unwrap()
    }

    #[test]
    fn blocks_headings_lists_and_tables_become_lines() {
        let html = "<html><head><title>T</title><style>p{color:red}</style></head><body>\
            <h1>Opening  hours</h1><p>We open at <b>9am</b>,\n Monday to Friday.</p>\
            <ul><li>Tea</li><li>Coffee &amp; cake</li></ul>\
            <table><tr><th>Day</th><th>Open</th></tr><tr><td>Sat</td><td>10am</td></tr></table>\
            <script>var x = '<p>not text</p>';</script><p>End<br>line two</p></body></html>";
        assert_eq!(
            read(html),
            "# Opening hours\n\nWe open at 9am, Monday to Friday.\n\n- Tea\n- Coffee & cake\n\n\
             Day | Open\nSat | 10am\n\nEnd\nline two"
        );
    }

    #[test]
    fn pre_keeps_its_whitespace() {
        assert_eq!(read("<p>a</p><pre>x  =  1\n  y</pre>"), "a\n\nx  =  1\n  y");
    }

    #[test]
    fn deep_nesting_is_linear() {
        let depth = 100_000;
        let html = format!("{}deep{}", "<div>".repeat(depth), "</div>".repeat(depth));
        let started = Instant::now();
        assert_eq!(read(&html), "deep");
        let unclosed = format!("{}bold", "<b>".repeat(200_000));
        assert_eq!(read(&unclosed), "bold");
        assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    }

    #[test]
    fn text_past_the_limit_stops_reading() {
        let html = "<td>cell</td>".repeat(100_000);
        assert_eq!(
            text(html.as_bytes(), Limits::with(1000, TIME_LIMIT)),
            Err(ExtractError::TooLong { max_chars: 1000 })
        );
    }

    #[test]
    fn time_is_checked() {
        let html = "<p>x</p>".repeat(10_000);
        assert!(matches!(
            text(html.as_bytes(), Limits::with(1_000_000, Duration::ZERO)),
            Err(ExtractError::TimedOut { .. })
        ));
    }
}
