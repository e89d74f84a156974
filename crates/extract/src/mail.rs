//! Inbound email (MIME) with `mail-parser`, bounded: messages nested in
//! messages are counted before parsing (mail-parser parses them without
//! limit and frees them recursively, so 50,000 levels in 1.5 MB overflow
//! the stack), attachments are capped per message, text is cut to size.
//!
//! Also here: who sent a message, as far as the receiving side vouches
//! for it: `Authentication-Results` headers (RFC 8601) from a trusted
//! server, or an inbound-parse service's own verdict fields.

use std::collections::HashMap;

use mail_parser::{MessageParser, MimeHeaders};

/// Message parts (`message/rfc822`, `message/global`) one email may hold.
/// mail-parser nests them without limit and frees them recursively (about
/// 50 bytes of stack a level: 40,000 levels overflow a 2 MiB thread); 200
/// costs 10 KB and is more than any person forwards at once.
pub const MAX_NESTED_MESSAGES: usize = 200;
/// Attachments kept per email; the rest are listed in the text.
pub const MAX_ATTACHMENTS: usize = 20;
/// The longest subject kept.
pub const MAX_SUBJECT: usize = 998;
/// The shown text and the whole body kept, in characters.
const MAX_TEXT: usize = 10_000;
const MAX_FULL_TEXT: usize = 100_000;

/// What one raw message is.
#[derive(Debug, Clone, PartialEq)]
pub enum Mail {
    /// A message from a person.
    Letter(Letter),
    /// A delivery status notification: the message it names failed.
    Bounce { message_id: String, error: String },
    /// Nothing to store (an auto-reply, a delay notice).
    Ignored,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Letter {
    /// The `From` address, lower-cased.
    pub from: String,
    pub display_name: Option<String>,
    /// The new part of the message (quoted reply and signature trimmed).
    pub text: String,
    /// The whole body, when `text` is only part of it.
    pub full_text: Option<String>,
    pub subject: String,
    /// `<…>`: the message's `Message-ID` (made from its hash when it has none).
    pub message_id: String,
    pub in_reply_to: Option<String>,
    /// Oldest first.
    pub references: Vec<String>,
    pub attachments: Vec<MailFile>,
    /// The `Authentication-Results` headers, topmost (newest) first.
    pub authentication: Vec<AuthenticationResults>,
    /// More than one `From` header (RFC 5322 allows one): which one a
    /// server checked cannot be known, so nothing vouches for it.
    pub several_from: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct MailFile {
    pub filename: String,
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// Why a body is not a message Parley can store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailError {
    NotEmail,
    NoFrom,
    TooNested,
    /// No thread could be started to read it (retry later).
    Busy,
}

impl std::fmt::Display for MailError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MailError::NotEmail => write!(f, "the body is not an email message"),
            MailError::NoFrom => write!(f, "the message has no From address"),
            MailError::Busy => write!(f, "the message could not be read now; try again"),
            MailError::TooNested => {
                write!(f, "the message holds more than {MAX_NESTED_MESSAGES} messages (message/rfc822 parts)")
            }
        }
    }
}

/// Whether `raw` names few enough nested messages to be worth parsing: a
/// quick refusal of the plain nesting bombs. It counts every mention of a
/// `message` type (`message/…`, with any spacing before the slash, as
/// mail-parser reads it) and of `digest` (whose untyped parts are
/// messages), so it over-counts rather than under-counts; but it is not
/// what keeps the parse safe ([`on_deep_stack`] is).
fn nesting_is_bounded(raw: &[u8]) -> bool {
    let lower = |b: &u8| b.to_ascii_lowercase();
    let mut mentions = 0;
    let mut i = 0;
    while i + 6 <= raw.len() {
        let word = &raw[i..];
        let hit = if word.len() >= 7 && word[..7].iter().map(lower).eq(b"message".iter().copied()) {
            // `message`, spaces or folds, then `/`.
            let rest = &word[7..];
            let skipped = rest.iter().take_while(|b| b" \t\r\n".contains(b)).count();
            rest.get(skipped) == Some(&b'/')
        } else {
            word[..6].iter().map(lower).eq(b"digest".iter().copied())
        };
        if hit {
            mentions += 1;
            if mentions > MAX_NESTED_MESSAGES {
                return false;
            }
        }
        i += 1;
    }
    true
}

/// Runs `f` on a thread whose stack grows with the input: mail-parser
/// frees nested messages recursively (about 45 bytes of stack a level; a
/// level takes at least 20 bytes of input), which no count of the input
/// can bound reliably, so the stack is sized to the input instead.
fn on_deep_stack<T: Send>(input_len: usize, f: impl FnOnce() -> T + Send) -> Result<T, MailError> {
    let stack = input_len.saturating_mul(3).saturating_add(8 << 20);
    std::thread::scope(|scope| {
        let thread = std::thread::Builder::new().name("mail-parser".into()).stack_size(stack).spawn_scoped(scope, f);
        match thread {
            Ok(running) => running.join().map_err(|_| MailError::NotEmail),
            Err(_) => Err(MailError::Busy),
        }
    })
}

/// Parses `raw` when its nesting is bounded (call on a deep stack).
fn parse(raw: &[u8]) -> Result<mail_parser::Message<'_>, MailError> {
    if !nesting_is_bounded(raw) {
        return Err(MailError::TooNested);
    }
    MessageParser::default().parse(raw).ok_or(MailError::NotEmail)
}

fn bracketed(id: &str) -> String {
    let id = id.trim().trim_start_matches('<').trim_end_matches('>');
    format!("<{id}>")
}

fn cut(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Reads one raw message.
pub fn read(raw: &[u8]) -> Result<Mail, MailError> {
    on_deep_stack(raw.len(), || read_parsed(raw))?
}

fn read_parsed(raw: &[u8]) -> Result<Mail, MailError> {
    let msg = parse(raw)?;
    if let Some(bounce) = bounce(&msg) {
        return Ok(bounce);
    }
    let from = msg.from().and_then(|a| a.first()).ok_or(MailError::NoFrom)?;
    let address = from.address().ok_or(MailError::NoFrom)?.trim().to_ascii_lowercase();
    if address.is_empty() {
        return Err(MailError::NoFrom);
    }
    // Auto-replies and list traffic would make the agent answer machines.
    if msg.header_raw("Auto-Submitted").is_some_and(|v| !v.trim().eq_ignore_ascii_case("no")) {
        return Ok(Mail::Ignored);
    }
    let message_id = match msg.message_id() {
        Some(id) => bracketed(id),
        None => {
            use sha2::Digest;
            let hash: String = sha2::Sha256::digest(raw).iter().take(16).map(|b| format!("{b:02x}")).collect();
            format!("<{hash}@parley.invalid>")
        }
    };
    let in_reply_to = msg.in_reply_to().as_text_list().and_then(|l| l.last().map(|i| bracketed(i)));
    let references: Vec<String> =
        msg.references().as_text_list().map(|l| l.iter().map(|i| bracketed(i)).collect()).unwrap_or_default();
    let full = msg.body_text(0).map(|t| t.replace("\r\n", "\n").trim_end().to_owned()).unwrap_or_default();
    let files: Vec<_> = msg.attachments().filter(|p| !p.is_message()).collect();
    let dropped = files.len().saturating_sub(MAX_ATTACHMENTS);
    let attachments: Vec<MailFile> = files
        .into_iter()
        .take(MAX_ATTACHMENTS)
        .enumerate()
        .map(|(i, part)| {
            let content_type =
                part.content_type().map_or("application/octet-stream".to_owned(), |c| match c.subtype() {
                    Some(sub) => format!("{}/{}", c.ctype(), sub).to_ascii_lowercase(),
                    None => c.ctype().to_ascii_lowercase(),
                });
            let filename = part
                .attachment_name()
                .map(|n| cut(n, 255))
                .unwrap_or_else(|| format!("attachment-{}{}", i + 1, crate::extension_for(&content_type)));
            MailFile { filename, content_type, bytes: part.contents().to_vec() }
        })
        .collect();
    let trimmed = trim_reply(&full);
    let mut text = if !trimmed.is_empty() {
        cut(&trimmed, MAX_TEXT)
    } else if !attachments.is_empty() {
        format!("[{}]", attachments.iter().map(|a| a.filename.as_str()).collect::<Vec<_>>().join(", "))
    } else {
        msg.subject().map_or_else(|| "(no text)".to_owned(), |s| cut(s, MAX_TEXT))
    };
    if dropped > 0 {
        let note = format!("\n\n[{dropped} more attachments were not kept: Parley keeps {MAX_ATTACHMENTS} per email]");
        text = cut(&text, MAX_TEXT - note.chars().count());
        text.push_str(&note);
    }
    let full_text = (full.trim() != text).then(|| cut(&full, MAX_FULL_TEXT));
    let authentication = msg
        .header_values("Authentication-Results")
        .filter_map(|v| v.as_text())
        .filter_map(AuthenticationResults::parse)
        .collect();
    let several_from = msg.header_values("From").count() > 1;
    Ok(Mail::Letter(Letter {
        several_from,
        from: address,
        display_name: from.name().map(str::trim).filter(|n| !n.is_empty()).map(|n| cut(n, 200)),
        text,
        full_text,
        subject: msg.subject().map(|s| cut(s, MAX_SUBJECT)).unwrap_or_default(),
        message_id,
        in_reply_to,
        references,
        attachments,
        authentication,
    }))
}

/// Lines that begin the quoted message in a reply.
fn starts_quote(lines: &[&str], i: usize) -> bool {
    let line = lines[i].trim();
    let next = lines.get(i + 1).map_or("", |l| l.trim());
    (line.starts_with("On ") && (line.ends_with("wrote:") || next.ends_with("wrote:")))
        || line.starts_with('>')
        || (line.len() >= 20 && line.chars().all(|c| c == '_'))
        || line.to_ascii_lowercase().trim_matches('-').trim() == "original message"
        || (line.starts_with("From: ")
            && lines[i + 1..].iter().take(3).any(|l| l.starts_with("Sent: ") || l.starts_with("Date: ")))
}

/// The new part of a reply: the text before the quoted message, without
/// the signature (after `-- `) or a "Sent from my …" line. The whole text
/// when nothing would be left.
pub fn trim_reply(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut end = (0..lines.len()).find(|&i| starts_quote(&lines, i)).unwrap_or(lines.len());
    if let Some(sig) = lines[..end].iter().position(|l| *l == "-- " || *l == "--") {
        end = sig;
    }
    let mut kept: Vec<&str> = lines[..end].to_vec();
    while kept.last().is_some_and(|l| l.trim().is_empty() || l.trim().starts_with("Sent from my ")) {
        kept.pop();
    }
    let trimmed = kept.join("\n").trim().to_owned();
    if trimmed.is_empty() { text.trim().to_owned() } else { trimmed }
}

/// The blocks of a `message/delivery-status` part (per message, then per recipient).
fn dsn_blocks(raw: &[u8]) -> Vec<HashMap<String, String>> {
    let text = String::from_utf8_lossy(raw).replace("\r\n", "\n");
    text.split("\n\n")
        .map(|block| {
            let mut fields: HashMap<String, String> = HashMap::new();
            let mut last: Option<String> = None;
            for line in block.lines() {
                if line.starts_with([' ', '\t']) {
                    if let Some(v) = last.as_ref().and_then(|k| fields.get_mut(k)) {
                        v.push(' ');
                        v.push_str(line.trim());
                    }
                } else if let Some((k, v)) = line.split_once(':') {
                    let k = k.trim().to_ascii_lowercase();
                    fields.insert(k.clone(), v.trim().to_owned());
                    last = Some(k);
                }
            }
            fields
        })
        .filter(|f| !f.is_empty())
        .collect()
}

/// A delivery status notification: the failure of the message it names
/// (delays and successes change nothing).
fn bounce(msg: &mail_parser::Message<'_>) -> Option<Mail> {
    let ct = msg.content_type()?;
    let is_report = ct.ctype().eq_ignore_ascii_case("multipart")
        && ct.subtype().is_some_and(|s| s.eq_ignore_ascii_case("report"))
        && ct.attribute("report-type").is_some_and(|r| r.eq_ignore_ascii_case("delivery-status"));
    if !is_report {
        return None;
    }
    let (mut recipient, mut failed, mut original) = (None, None, None);
    for part in msg.attachments() {
        if part.is_content_type("message", "delivery-status") {
            for block in dsn_blocks(part.contents()) {
                let action = block.get("action").map(|a| a.to_ascii_lowercase());
                let status = block.get("status").cloned().unwrap_or_default();
                if action.as_deref() == Some("failed") || (action.is_none() && status.starts_with('5')) {
                    let to = block.get("final-recipient").or(block.get("original-recipient"));
                    recipient = to.map(|r| r.split_once(';').map_or(r.as_str(), |(_, a)| a).trim().to_owned());
                    let diagnostic = block
                        .get("diagnostic-code")
                        .map(|d| d.split_once(';').map_or(d.as_str(), |(_, t)| t).trim().to_owned());
                    failed = Some(match diagnostic {
                        Some(d) => format!("{status}: {d}"),
                        None => status,
                    });
                }
            }
        } else if part.is_content_type("text", "rfc822-headers") {
            original =
                MessageParser::default().parse_headers(part.contents()).and_then(|h| h.message_id().map(bracketed));
        } else if let Some(orig) = part.message() {
            original = orig.message_id().map(bracketed);
        }
    }
    match (original, failed) {
        (Some(message_id), Some(reason)) => {
            let to = recipient.map_or(String::new(), |r| format!(" to {r}"));
            Some(Mail::Bounce { message_id, error: cut(&format!("bounced{to}: {reason}"), 1000) })
        }
        _ => Some(Mail::Ignored),
    }
}

/// An inbound-parse service's form (SendGrid, Mailgun): the raw message
/// and the service's own verdicts on the sender.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Form {
    /// `email` (SendGrid) or `body-mime` (Mailgun).
    pub message: Option<Vec<u8>>,
    /// SendGrid's `SPF` (`pass`, …).
    pub spf: Option<String>,
    /// SendGrid's `dkim`: `{@example.com : pass, @other.net : fail}`.
    pub dkim: Option<String>,
    /// SendGrid's `envelope` JSON `from` (the SMTP MAIL FROM).
    pub envelope_from: Option<String>,
}

/// Reads a `multipart/form-data` body as MIME (a form is a multipart message).
pub fn read_form(content_type: &str, body: &[u8]) -> Option<Form> {
    if !content_type.trim().to_ascii_lowercase().starts_with("multipart/form-data") {
        return None;
    }
    let mut wrapped = format!("Content-Type: {content_type}\r\n\r\n").into_bytes();
    wrapped.extend_from_slice(body);
    on_deep_stack(wrapped.len(), || read_form_parsed(&wrapped)).ok().flatten()
}

fn read_form_parsed(wrapped: &[u8]) -> Option<Form> {
    let form = parse(wrapped).ok()?;
    let mut out = Form::default();
    for part in form.parts.iter() {
        let Some(name) = part.content_disposition().and_then(|d| d.attribute("name")) else { continue };
        let text = || String::from_utf8_lossy(part.contents()).trim().to_owned();
        match name {
            "email" | "body-mime" => out.message = Some(part.contents().to_vec()),
            "SPF" => out.spf = Some(cut(&text(), 100)),
            "dkim" => out.dkim = Some(cut(&text(), 2000)),
            "envelope" => {
                let from = text()
                    .split("\"from\"")
                    .nth(1)
                    .and_then(|rest| rest.split('"').nth(1))
                    .map(|f| f.trim().to_ascii_lowercase());
                out.envelope_from = from.filter(|f| !f.is_empty());
            }
            _ => {}
        }
    }
    Some(out)
}

/// One `Authentication-Results` header (RFC 8601).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticationResults {
    /// The server that checked (lower-cased).
    pub authserv_id: String,
    pub results: Vec<MethodResult>,
}

/// `dkim=pass header.d=example.com`: the method, its result and properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodResult {
    /// Lower-cased, without a version (`dkim/1` → `dkim`).
    pub method: String,
    /// Lower-cased.
    pub result: String,
    /// `(ptype.property, value)`, the name lower-cased.
    pub properties: Vec<(String, String)>,
}

impl MethodResult {
    fn property(&self, name: &str) -> Option<&str> {
        self.properties.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Removes `( … )` comments (they nest), outside quoted strings.
fn strip_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let (mut depth, mut quoted, mut escaped) = (0usize, false, false);
    for c in s.chars() {
        if escaped {
            escaped = false;
            if depth == 0 {
                out.push(c);
            }
            continue;
        }
        match c {
            '\\' => {
                escaped = true;
                if depth == 0 {
                    out.push(c);
                }
            }
            '"' if depth == 0 => {
                quoted = !quoted;
                out.push(c);
            }
            '(' if !quoted => depth += 1,
            ')' if !quoted && depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

impl AuthenticationResults {
    /// Parses a header's value; `None` when it names no server.
    pub fn parse(value: &str) -> Option<Self> {
        let value = strip_comments(value);
        let mut parts = value.split(';');
        let id = parts.next()?.split_whitespace().next()?.trim_matches('"').to_ascii_lowercase();
        if id.is_empty() {
            return None;
        }
        let mut results = Vec::new();
        for part in parts.take(32) {
            let mut words = part.split_whitespace();
            let Some((method, result)) = words.next().and_then(|w| w.split_once('=')) else { continue };
            let method = method.split('/').next().unwrap_or_default().to_ascii_lowercase();
            if method == "none" {
                continue;
            }
            let properties = words
                .filter_map(|w| w.split_once('='))
                .filter(|(k, _)| k.contains('.'))
                .map(|(k, v)| (k.to_ascii_lowercase(), v.trim_matches('"').to_owned()))
                .take(16)
                .collect();
            results.push(MethodResult { method, result: result.trim_matches('"').to_ascii_lowercase(), properties });
        }
        Some(Self { authserv_id: id, results })
    }
}

/// How far the receiving side vouches for a message's `From`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sender {
    /// Authenticated for the `From` domain: how (`dmarc=pass by mx.example.com`).
    Verified(String),
    /// Not shown to be the `From` address's owner: why.
    Unverified(String),
}

impl Sender {
    pub fn is_verified(&self) -> bool {
        matches!(self, Sender::Verified(_))
    }
}

/// The domain part of an address or a `@domain`, lower-cased.
fn domain_of(s: &str) -> String {
    s.rsplit('@').next().unwrap_or_default().trim().trim_end_matches('.').to_ascii_lowercase()
}

/// DMARC's relaxed alignment without a public-suffix list: the same domain,
/// or one a subdomain of the other. A signer controls the DNS of the domain
/// it signs as, so a match on a public suffix itself cannot be produced.
fn aligned(a: &str, b: &str) -> bool {
    !a.is_empty() && !b.is_empty() && (a == b || a.ends_with(&format!(".{b}")) || b.ends_with(&format!(".{a}")))
}

/// The verdict of the topmost `Authentication-Results` header written by a
/// `trusted` server (headers lower down, or by others, may be the sender's
/// own): DMARC pass for the `From` domain, or DKIM or SPF pass aligned
/// with it.
pub fn sender_from_headers(letter: &Letter, trusted: &[String]) -> Sender {
    if letter.several_from {
        return Sender::Unverified("the message has more than one From header".into());
    }
    if trusted.is_empty() {
        return Sender::Unverified("the channel trusts no server's Authentication-Results".into());
    }
    let Some(header) =
        letter.authentication.iter().find(|h| trusted.iter().any(|t| t.eq_ignore_ascii_case(&h.authserv_id)))
    else {
        return Sender::Unverified("no Authentication-Results from a trusted server".into());
    };
    let from = domain_of(&letter.from);
    let by = &header.authserv_id;
    for r in header.results.iter().filter(|r| r.result == "pass") {
        let domain = match r.method.as_str() {
            "dmarc" => r.property("header.from").map(domain_of).unwrap_or_else(|| from.clone()),
            "dkim" => r.property("header.d").or(r.property("header.i")).map(domain_of).unwrap_or_default(),
            "spf" => r.property("smtp.mailfrom").map(domain_of).unwrap_or_default(),
            _ => continue,
        };
        if aligned(&domain, &from) {
            return Sender::Verified(format!("{}=pass ({domain}) by {by}", r.method));
        }
    }
    Sender::Unverified(format!("{by} did not authenticate {from}"))
}

/// The verdict of an inbound-parse form: SendGrid's `dkim` pass for an
/// aligned domain, or its `SPF` pass with an aligned envelope sender.
pub fn sender_from_form(letter: &Letter, form: &Form) -> Option<Sender> {
    if form.dkim.is_none() && form.spf.is_none() {
        return None;
    }
    if letter.several_from {
        return Some(Sender::Unverified("the message has more than one From header".into()));
    }
    let from = domain_of(&letter.from);
    if let Some(dkim) = &form.dkim {
        for entry in dkim.trim_matches(|c| c == '{' || c == '}').split(',') {
            if let Some((domain, result)) = entry.split_once(':')
                && result.trim().eq_ignore_ascii_case("pass")
                && aligned(&domain_of(domain), &from)
            {
                return Some(Sender::Verified(format!(
                    "dkim=pass ({}) by the inbound-parse service",
                    domain_of(domain)
                )));
            }
        }
    }
    if let (Some(spf), Some(envelope)) = (&form.spf, &form.envelope_from)
        && spf.eq_ignore_ascii_case("pass")
        && aligned(&domain_of(envelope), &from)
    {
        return Some(Sender::Verified(format!("spf=pass ({}) by the inbound-parse service", domain_of(envelope))));
    }
    Some(Sender::Unverified(format!("the inbound-parse service did not authenticate {from}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(raw: &str) -> Letter {
        match read(raw.as_bytes()).unwrap() {
            Mail::Letter(l) => l,
            other => panic!("not a letter: {other:?}"),
        }
    }

    const SIGNED: &str = "Authentication-Results: mx.parley.test;\r\n dkim=pass (2048-bit key) header.d=example.com header.s=s1;\r\n spf=fail smtp.mailfrom=other.net\r\n\
        Authentication-Results: evil.test; dmarc=pass header.from=bank.com\r\n\
        From: Ana <Ana@Example.com>\r\nTo: help@parley.test\r\nSubject: Hi\r\nMessage-ID: <a@example.com>\r\n\r\nHello there\r\n";

    #[test]
    fn authentication_results_are_parsed_without_comments() {
        let h = AuthenticationResults::parse(
            "mx.google.com; dkim=pass header.i=@example.com header.s=20230601 header.b=abc; \
             spf=pass (google.com: domain of a@example.com designates 1.2.3.4 as permitted sender) smtp.mailfrom=a@example.com; \
             dmarc=pass (p=NONE sp=NONE dis=NONE) header.from=example.com",
        )
        .unwrap();
        assert_eq!(h.authserv_id, "mx.google.com");
        let methods: Vec<_> = h.results.iter().map(|r| (r.method.as_str(), r.result.as_str())).collect();
        assert_eq!(methods, [("dkim", "pass"), ("spf", "pass"), ("dmarc", "pass")]);
        assert_eq!(h.results[1].property("smtp.mailfrom"), Some("a@example.com"));
        assert!(AuthenticationResults::parse("mx.example.com; none").unwrap().results.is_empty());
        assert!(AuthenticationResults::parse("  ").is_none());
    }

    #[test]
    fn only_a_trusted_servers_aligned_pass_verifies() {
        let l = letter(SIGNED);
        assert_eq!(l.from, "ana@example.com");
        assert!(sender_from_headers(&l, &["mx.parley.test".into()]).is_verified());
        // The sender wrote the second header themselves: not trusted.
        assert!(!sender_from_headers(&l, &["evil.test".into()]).is_verified() || l.from.ends_with("bank.com"));
        assert!(!sender_from_headers(&l, &[]).is_verified());
        assert!(!sender_from_headers(&l, &["mx.other.test".into()]).is_verified());
        // Two From headers: which one was checked is unknown.
        let doubled = SIGNED.replace("From: Ana", "From: ceo@bank.com\r\nFrom: Ana");
        let l2 = letter(&doubled);
        assert!(l2.several_from);
        assert!(!sender_from_headers(&l2, &["mx.parley.test".into()]).is_verified());
        // A pass for another domain does not vouch for this From.
        let spoofed = SIGNED.replace("Ana@Example.com", "ceo@bank.com");
        assert!(!sender_from_headers(&letter(&spoofed), &["mx.parley.test".into()]).is_verified());
    }

    #[test]
    fn alignment_is_relaxed_but_not_lateral() {
        assert!(aligned("mail.example.com", "example.com"));
        assert!(aligned("example.com", "news.example.com"));
        assert!(!aligned("alice.github.io", "eve.github.io"));
        assert!(!aligned("example.com", "notexample.com"));
        assert!(!aligned("", "example.com"));
    }

    #[test]
    fn sendgrid_verdicts_are_read() {
        let l = letter(SIGNED);
        let form = Form { dkim: Some("{@example.com : pass}".into()), ..Default::default() };
        assert!(sender_from_form(&l, &form).unwrap().is_verified());
        let form = Form {
            dkim: Some("{@other.net : pass}".into()),
            spf: Some("pass".into()),
            envelope_from: Some("x@other.net".into()),
            ..Default::default()
        };
        assert!(!sender_from_form(&l, &form).unwrap().is_verified());
        let form = Form {
            spf: Some("pass".into()),
            envelope_from: Some("bounce@mail.example.com".into()),
            ..Default::default()
        };
        assert!(sender_from_form(&l, &form).unwrap().is_verified());
        assert_eq!(sender_from_form(&l, &Form::default()), None);
    }

    #[test]
    fn nested_messages_are_refused_before_parsing() {
        let mut raw = String::new();
        for _ in 0..50_000 {
            raw.push_str("Content-Type: message/rfc822\r\n\r\n");
        }
        raw.push_str("From: a@b.c\r\n\r\nhi");
        assert_eq!(read(raw.as_bytes()), Err(MailError::TooNested));
    }

    #[test]
    fn spaced_and_digest_nesting_are_counted_too() {
        // mail-parser reads `message / rfc822`, and a digest's untyped parts, as messages.
        let spaced = "Content-Type: message / rfc822\r\n\r\n".repeat(300) + "From: a@b.c\r\n\r\nhi";
        assert_eq!(read(spaced.as_bytes()), Err(MailError::TooNested));
        let mut digest = String::new();
        for n in 0..300 {
            digest.push_str(&format!("Content-Type: multipart/digest; boundary=b{n}\r\n\r\n--b{n}\r\n"));
        }
        assert_eq!(read(digest.as_bytes()), Err(MailError::TooNested));
    }

    #[test]
    fn a_parse_of_any_depth_has_the_stack_it_needs() {
        // 200,000 levels (about 9 MB) below the count: freeing them takes
        // far more than a default 2 MiB thread stack.
        let mut digest = Vec::new();
        for n in 0..200_000 {
            digest.extend_from_slice(
                format!(
                    "Content-Type: multipart/mixed; boundary=b{n}\r\n\r\n--b{n}\r\nContent-Type: message/rfc822\r\n\r\n"
                )
                .as_bytes(),
            );
        }
        digest.extend_from_slice(b"From: a@b.c\r\n\r\nhi");
        let parsed = on_deep_stack(digest.len(), || MessageParser::default().parse(&digest).map(|m| m.parts.len()));
        assert!(parsed.unwrap().unwrap() > 1);
    }

    #[test]
    fn attachments_past_the_cap_are_listed_not_kept() {
        let mut raw = String::from(
            "From: a@example.com\r\nSubject: files\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nsee files\r\n",
        );
        for i in 0..45 {
            raw.push_str(&format!(
                "--b\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=f{i}.bin\r\n\r\nx\r\n"
            ));
        }
        raw.push_str("--b--\r\n");
        let l = letter(&raw);
        assert_eq!(l.attachments.len(), MAX_ATTACHMENTS);
        assert!(l.text.starts_with("see files"));
        assert!(l.text.ends_with("[25 more attachments were not kept: Parley keeps 20 per email]"), "{}", l.text);
    }
}
