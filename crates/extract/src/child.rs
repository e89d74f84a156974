//! The child side of the sandbox: `parley extract-document` reads a
//! document on standard input and writes what became of it on standard
//! output, under limits it sets on itself first (address space, CPU time).
//!
//! Its answer is one frame: `ok\n` and the text, or `error <kind>
//! <number>\n` and the reason ([`encode_error`] / [`decode`]).

use std::io::{Read, Write};
use std::time::Duration;

use crate::{ExtractError, Limits};

/// What the parent asks for (the command's arguments).
#[derive(Debug, Clone)]
pub struct Request {
    pub content_type: String,
    pub max_chars: usize,
    pub max_inflated_bytes: usize,
    pub time: Duration,
    /// The address space the child may use.
    pub memory_bytes: u64,
}

impl Request {
    /// The command-line arguments after the program's name.
    pub fn args(&self) -> Vec<String> {
        vec![
            "extract-document".into(),
            "--content-type".into(),
            self.content_type.clone(),
            "--max-chars".into(),
            self.max_chars.to_string(),
            "--max-inflated-bytes".into(),
            self.max_inflated_bytes.to_string(),
            "--seconds".into(),
            self.time.as_secs().max(1).to_string(),
            "--memory-bytes".into(),
            self.memory_bytes.to_string(),
        ]
    }
}

/// Runs the child: limits itself, reads standard input, answers on standard
/// output. The exit code is 0 when an answer was written.
pub fn run(request: &Request) -> i32 {
    limit_self(request);
    let mut input = Vec::new();
    if std::io::stdin().lock().read_to_end(&mut input).is_err() {
        return 1;
    }
    let mut limits = Limits::with(request.max_chars, request.time);
    limits.max_inflated_bytes = request.max_inflated_bytes;
    let answer = match crate::document_text(&request.content_type, &input, limits) {
        Ok(text) => {
            let mut frame = b"ok\n".to_vec();
            frame.extend_from_slice(text.as_bytes());
            frame
        }
        Err(e) => encode_error(&e).into_bytes(),
    };
    let mut out = std::io::stdout().lock();
    if out.write_all(&answer).and_then(|()| out.flush()).is_err() {
        return 1;
    }
    0
}

/// Address space and CPU time (the parent also kills the child at its
/// wall-clock deadline; CPU time stops a child the parent lost track of).
fn limit_self(request: &Request) {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let memory = Rlimit { current: Some(request.memory_bytes), maximum: Some(request.memory_bytes) };
    let _ = setrlimit(Resource::As, memory);
    let seconds = request.time.as_secs().max(1);
    let cpu = Rlimit { current: Some(seconds + 1), maximum: Some(seconds + 2) };
    let _ = setrlimit(Resource::Cpu, cpu);
    // No core files from a child killed by a limit, no files written at
    // all, and no more descriptors than its three pipes and a few more.
    let none = Rlimit { current: Some(0), maximum: Some(0) };
    let _ = setrlimit(Resource::Core, none);
    let _ = setrlimit(Resource::Fsize, none);
    let _ = setrlimit(Resource::Nofile, Rlimit { current: Some(16), maximum: Some(16) });
}

/// `error <kind> <number>\n<reason>`.
pub fn encode_error(e: &ExtractError) -> String {
    let (kind, number, reason) = match e {
        ExtractError::TooLong { max_chars } => ("too_long", *max_chars as u64, String::new()),
        ExtractError::TooLarge(r) => ("too_large", 0, r.clone()),
        ExtractError::TooDeep(r) => ("too_deep", 0, r.clone()),
        ExtractError::TimedOut { seconds } => ("timed_out", *seconds, String::new()),
        ExtractError::Unreadable(r) => ("unreadable", 0, r.clone()),
        ExtractError::Crashed(r) => ("crashed", 0, r.clone()),
        ExtractError::Unsupported(r) => ("unsupported", 0, r.clone()),
        ExtractError::Unavailable(r) => ("unavailable", 0, r.clone()),
    };
    format!("error {kind} {number}\n{reason}")
}

/// Reads a child's answer.
pub fn decode(frame: &[u8]) -> Result<String, ExtractError> {
    let broken = || ExtractError::Crashed("the reader gave no answer".into());
    let newline = frame.iter().position(|b| *b == b'\n').ok_or_else(broken)?;
    let (head, body) = (&frame[..newline], &frame[newline + 1..]);
    let body = String::from_utf8_lossy(body).into_owned();
    if head == b"ok" {
        return Ok(body);
    }
    let head = std::str::from_utf8(head).map_err(|_| broken())?;
    let mut words = head.split(' ');
    if words.next() != Some("error") {
        return Err(broken());
    }
    let kind = words.next().unwrap_or_default();
    let number: u64 = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    let reason = crate::cut(&body, 1000);
    Err(match kind {
        "too_long" => ExtractError::TooLong { max_chars: number as usize },
        "too_large" => ExtractError::TooLarge(reason),
        "too_deep" => ExtractError::TooDeep(reason),
        "timed_out" => ExtractError::TimedOut { seconds: number },
        "unreadable" => ExtractError::Unreadable(reason),
        "unsupported" => ExtractError::Unsupported(reason),
        "unavailable" => ExtractError::Unavailable(reason),
        _ => ExtractError::Crashed(reason),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_round_trip() {
        assert_eq!(decode(b"ok\nline one\nline two"), Ok("line one\nline two".into()));
        for e in [
            ExtractError::TooLong { max_chars: 2_000_000 },
            ExtractError::TooLarge("the PDF's compressed content expands to more than 256 MiB".into()),
            ExtractError::TooDeep("deep".into()),
            ExtractError::TimedOut { seconds: 60 },
            ExtractError::Unreadable("could not read the PDF: x".into()),
            ExtractError::Crashed("boom".into()),
            ExtractError::Unsupported("image/png".into()),
            ExtractError::Unavailable("busy".into()),
        ] {
            assert_eq!(decode(encode_error(&e).as_bytes()), Err(e));
        }
        assert!(matches!(decode(b""), Err(ExtractError::Crashed(_))));
        assert!(matches!(decode(b"garbage\n"), Err(ExtractError::Crashed(_))));
    }
}
