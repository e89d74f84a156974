//! Readers of untrusted files: the text of a knowledge document (plain
//! text, Markdown, HTML, PDF) and inbound email (MIME).
//!
//! Every reader here is bounded three ways, so a hostile file costs at most
//! a known amount and fails with a reason instead of taking the server down:
//!
//! - **depth**: HTML is read by a streaming tokenizer (no tree), PDF form
//!   drawings are checked for cycles and fan-out before they are run, and a
//!   PDF's page tree is flattened before the text extractor walks it;
//! - **output and memory**: text stops at [`Limits::max_chars`], and every
//!   compressed PDF stream is inflated under [`Limits::max_inflated_bytes`];
//! - **time**: readers check [`Limits::deadline`] as they go.
//!
//! The document readers also run in a child process (the [`sandbox`]), which
//! adds hard limits (address space, CPU time, a wall clock it is killed at)
//! for whatever a third-party parser might still do.

use std::time::{Duration, Instant};

pub mod child;
pub mod html;
pub mod mail;
pub mod pdf;
#[cfg(feature = "sandbox")]
pub mod sandbox;

/// What a reader may spend on one file.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Characters of text kept before the document is refused.
    pub max_chars: usize,
    /// Bytes all of a PDF's compressed streams may inflate to, together.
    pub max_inflated_bytes: usize,
    /// How long the reader may take…
    pub time: Duration,
    /// …so when it gives up.
    pub deadline: Instant,
}

/// The documented defaults: 2,000,000 characters, 256 MiB inflated, 60 s.
pub const MAX_TEXT_CHARS: usize = 2_000_000;
pub const MAX_INFLATED_BYTES: usize = 256 * 1024 * 1024;
pub const TIME_LIMIT: Duration = Duration::from_secs(60);

impl Limits {
    /// The defaults, with the clock starting now.
    pub fn standard() -> Self {
        Self::with(MAX_TEXT_CHARS, TIME_LIMIT)
    }

    pub fn with(max_chars: usize, time: Duration) -> Self {
        Self { max_chars, max_inflated_bytes: MAX_INFLATED_BYTES, time, deadline: Instant::now() + time }
    }

    /// The time-out error for these limits.
    pub fn timed_out(&self) -> ExtractError {
        ExtractError::TimedOut { seconds: self.time.as_secs().max(1) }
    }
}

/// Why a file's text could not be had. The display is what a failed
/// document's `error` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtractError {
    /// More text than [`Limits::max_chars`].
    TooLong {
        max_chars: usize,
    },
    /// Compressed content inflating past the limit.
    TooLarge(String),
    /// Structure nested too deep, or drawing itself.
    TooDeep(String),
    /// Past the deadline.
    TimedOut {
        seconds: u64,
    },
    /// Not a file of its type, or broken.
    Unreadable(String),
    /// The reader died (a panic here, a signal or a resource limit in the sandbox).
    Crashed(String),
    /// No reader could be started now (worth trying again later).
    Unavailable(String),
    Unsupported(String),
}

impl std::fmt::Display for ExtractError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExtractError::TooLong { max_chars } => write!(
                f,
                "the document's text is longer than {} characters; split it into smaller documents",
                group_digits(*max_chars)
            ),
            ExtractError::TooLarge(what) => write!(f, "{what}"),
            ExtractError::TooDeep(what) => write!(f, "{what}"),
            ExtractError::TimedOut { seconds } => {
                write!(f, "reading the document took longer than {seconds} s; it was stopped")
            }
            ExtractError::Unreadable(why) => write!(f, "{why}"),
            ExtractError::Crashed(why) => write!(f, "the document could not be read: {why}"),
            ExtractError::Unsupported(what) => write!(f, "unsupported content type {what}"),
            ExtractError::Unavailable(why) => write!(f, "the document could not be read now: {why}"),
        }
    }
}

impl std::error::Error for ExtractError {}

/// `2000000` → `2,000,000`.
pub fn group_digits(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Where a reader's text goes: counts characters against the limit and
/// watches the clock (every few hundred pushes, so a tight loop pays little).
pub struct Budget {
    out: String,
    chars: usize,
    limits: Limits,
    pushes: u32,
    /// Why the reader must stop, once it must.
    stopped: Option<ExtractError>,
}

impl Budget {
    pub fn new(limits: Limits) -> Self {
        Self { out: String::new(), chars: 0, limits, pushes: 0, stopped: None }
    }

    /// Appends `s`; an error once the text is too long or time is up
    /// (and for every push after that).
    pub fn push(&mut self, s: &str) -> Result<(), ExtractError> {
        if let Some(e) = &self.stopped {
            return Err(e.clone());
        }
        let n = s.chars().count();
        if self.chars + n > self.limits.max_chars {
            return Err(self.stop(ExtractError::TooLong { max_chars: self.limits.max_chars }));
        }
        self.chars += n;
        self.out.push_str(s);
        self.tick()
    }

    /// Checks the clock now and then; an error once time is up.
    pub fn tick(&mut self) -> Result<(), ExtractError> {
        if let Some(e) = &self.stopped {
            return Err(e.clone());
        }
        self.pushes = self.pushes.wrapping_add(1);
        if self.pushes % 256 == 0 {
            self.check_time()?;
        }
        Ok(())
    }

    pub fn check_time(&mut self) -> Result<(), ExtractError> {
        if Instant::now() >= self.limits.deadline {
            let e = self.limits.timed_out();
            return Err(self.stop(e));
        }
        Ok(())
    }

    fn stop(&mut self, e: ExtractError) -> ExtractError {
        self.stopped = Some(e.clone());
        e
    }

    /// Why the reader stopped early, if it did.
    pub fn stopped(&self) -> Option<&ExtractError> {
        self.stopped.as_ref()
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    pub fn text(&self) -> &str {
        &self.out
    }

    pub fn into_text(self) -> String {
        self.out
    }
}

impl std::fmt::Write for Budget {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.push(s).map_err(|_| std::fmt::Error)
    }
}

/// The content types a knowledge document may have.
pub const DOCUMENT_TYPES: &[&str] = &["text/plain", "text/markdown", "text/html", "application/pdf"];

/// A document's text, within `limits`: UTF-8 as sent (invalid bytes
/// replaced), HTML rendered to text, PDF text extracted. A panic in a
/// reader fails the document, not the caller.
pub fn document_text(content_type: &str, bytes: &[u8], limits: Limits) -> Result<String, ExtractError> {
    let read = || match content_type {
        "text/plain" | "text/markdown" => {
            let mut budget = Budget::new(limits);
            budget.push(&String::from_utf8_lossy(bytes))?;
            Ok(budget.into_text())
        }
        "text/html" => html::text(bytes, limits),
        "application/pdf" => pdf::text(bytes, limits),
        other => Err(ExtractError::Unsupported(other.to_owned())),
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)) {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(ExtractError::Crashed(format!("the {} reader failed ({})", kind_name(content_type), cut(&what, 200))))
        }
    }
}

fn kind_name(content_type: &str) -> &'static str {
    match content_type {
        "application/pdf" => "PDF",
        "text/html" => "HTML",
        _ => "text",
    }
}

/// The usual file name extension (with its dot) for a media type, for
/// naming files providers send without a name; empty when none is known.
pub fn extension_for(content_type: &str) -> String {
    let content_type = content_type.trim().to_ascii_lowercase();
    let subtype = content_type.split_once('/').map_or("", |(_, s)| s);
    let known = mime_guess::get_mime_extensions_str(&content_type).unwrap_or(&[]);
    // The list's first is not always the usual one (`jfif` for JPEG).
    let usual = match subtype {
        "jpeg" => Some("jpg"),
        _ => known.iter().copied().find(|e| *e == subtype).or(known.first().copied()),
    };
    usual.map_or(String::new(), |e| format!(".{e}"))
}

/// At most `n` characters of `s`.
pub(crate) fn cut(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_refuses_text_past_the_limit() {
        let mut b = Budget::new(Limits::with(5, TIME_LIMIT));
        assert!(b.push("héllo").is_ok());
        assert_eq!(b.push("!"), Err(ExtractError::TooLong { max_chars: 5 }));
        assert_eq!(b.text(), "héllo");
        // Stopped for good.
        assert!(b.push("").is_err());
    }

    #[test]
    fn budget_stops_at_the_deadline() {
        let mut b = Budget::new(Limits::with(1000, Duration::ZERO));
        assert!(matches!(b.check_time(), Err(ExtractError::TimedOut { .. })));
    }

    #[test]
    fn plain_text_is_kept_with_invalid_bytes_replaced() {
        let text = document_text("text/plain", b"caf\xc3\xa9 \xff ok", Limits::standard()).unwrap();
        assert_eq!(text, "café \u{fffd} ok");
        let long = document_text("text/markdown", &[b'a'; 11], Limits::with(10, TIME_LIMIT));
        assert_eq!(long, Err(ExtractError::TooLong { max_chars: 10 }));
    }

    #[test]
    fn digits_are_grouped() {
        assert_eq!(group_digits(2_000_000), "2,000,000");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(1000), "1,000");
    }
}
