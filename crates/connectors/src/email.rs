//! The `email` channel: a mailbox, sending over SMTP and receiving by a
//! raw-MIME webhook or IMAP.
//!
//! - Sending (`lettre`): STARTTLS, implicit TLS or none (local relays),
//!   AUTH with the channel's login, one pooled transport per server and
//!   login. Each message is `multipart/alternative` (the text, and HTML
//!   rendered from its markup) with its files attached, and carries the
//!   threading headers Parley chose when it was queued (`Message-ID`,
//!   `In-Reply-To`, `References`), so replies stay in their thread on both
//!   sides. 5xx replies fail the message with the server's words (535 puts
//!   the channel in error); 4xx and lost connections are retried.
//! - Receiving: `POST /hooks/email/{public_id}` with the raw message (as
//!   Postmark, SendGrid's and Mailgun's inbound routes forward it: the body
//!   itself, or a form field `email` / `body-mime`), authenticated by the
//!   channel's `inbound_secret`; or IMAP, polled as a job (IDLE while
//!   waiting where the server has it).
//! - Parsing (`mail-parser`): charsets and encoded words decoded, the text
//!   part chosen over HTML (HTML turned to text when it is all there is),
//!   the quoted reply and signature trimmed from what the conversation and
//!   the agent see (the whole body kept in `email.full_text`), files kept
//!   as attachments. A delivery status notification (bounce) fails the
//!   message it names.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::future::BoxFuture;
use lettre::message::{Attachment as MailAttachment, Mailbox, MultiPart, header::ContentType};
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::transport::smtp::{PoolConfig, authentication::Credentials as SmtpCredentials};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use parley_domain::channel::ChannelType;
use parley_domain::conversation::{EmailHeaders, MessageDetails, MessageStatus};
use parley_domain::validation::{FieldError, LocPart, Parsed, integer, loc, one_of, string};
use serde_json::{Map, Value};

use crate::{
    Check, Checked, Connector, Credentials, Delivered, Delivery, FileSource, Hook, Inbound, InboundContact,
    InboundFile, InboundRequest, Incoming, Poll, Polled, Refused, StatusReport,
};

/// How long an IMAP poll waits (IDLE) for new mail before it returns.
const IDLE_WAIT: Duration = crate::telegram::POLL_WAIT;
/// Messages fetched per poll.
const FETCH_BATCH: usize = 50;
/// The longest subject kept.
const MAX_SUBJECT: usize = 998;

pub(crate) struct EmailConnector;

fn text<'a>(config: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    config.get(key).and_then(Value::as_str)
}

fn port(config: &Map<String, Value>, key: &str, default: u16) -> u16 {
    config.get(key).and_then(Value::as_u64).and_then(|p| u16::try_from(p).ok()).unwrap_or(default)
}

fn email_setting(value: Value, at: &[LocPart]) -> Parsed<Value> {
    string(3, 254)(value, at).and_then(|s| {
        parley_domain::email::Email::parse(&s)
            .map(|e| Value::String(e.as_str().to_owned()))
            .map_err(|msg| vec![FieldError::new(at.to_vec(), "value_error.email", msg)])
    })
}

fn host_setting(value: Value, at: &[LocPart]) -> Parsed<Value> {
    string(1, 253)(value, at).and_then(|h| {
        let ok = h.chars().all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c)) && !h.starts_with('-');
        if ok {
            Ok(Value::String(h.to_ascii_lowercase()))
        } else {
            Err(vec![FieldError::new(
                at.to_vec(),
                "value_error.host",
                "must be a host name or IP address, without a scheme or port",
            )])
        }
    })
}

/// The address Parley may connect to for `host:port`: every address the
/// name resolves to must be public, unless private targets are allowed.
async fn guard_host(host: &str, port: u16, allow_private: bool) -> Result<SocketAddr, String> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> =
        tokio::net::lookup_host((host, port)).await.map_err(|e| format!("{host} does not resolve: {e}"))?.collect();
    let first = *addrs.first().ok_or_else(|| format!("{host} does not resolve"))?;
    if !allow_private && addrs.iter().any(|a| !parley_events::ssrf::is_public(a.ip())) {
        return Err(format!("refused: {host} resolves to a private address"));
    }
    Ok(first)
}

/// The roots a TLS connection trusts: the web's, and the channel's own CA.
fn root_store(config: &Map<String, Value>) -> rustls::RootCertStore {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(pem) = text(config, "tls_ca_pem") {
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()).flatten() {
            let _ = roots.add(cert);
        }
    }
    roots
}

// --- Sending -------------------------------------------------------------

type Mailer = AsyncSmtpTransport<Tokio1Executor>;

/// Pooled transports by server and login, so connections are reused.
fn mailers() -> &'static Mutex<HashMap<String, Mailer>> {
    static MAILERS: OnceLock<Mutex<HashMap<String, Mailer>>> = OnceLock::new();
    MAILERS.get_or_init(Mutex::default)
}

fn digest(s: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(s.as_bytes()).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The channel's SMTP transport (built once per server and login).
fn mailer(config: &Map<String, Value>, secrets: &Map<String, Value>, timeout: Duration) -> Result<Mailer, String> {
    let host = text(config, "smtp_host").ok_or("the channel has no smtp_host")?;
    let security = text(config, "smtp_security").unwrap_or("starttls");
    let port = port(config, "smtp_port", if security == "tls" { 465 } else { 587 });
    let user = text(config, "smtp_username");
    let password = secrets.get("smtp_password").and_then(Value::as_str);
    let ca = text(config, "tls_ca_pem").unwrap_or_default();
    let key =
        format!("{host}:{port}:{security}:{}:{}:{}", user.unwrap_or(""), digest(password.unwrap_or("")), digest(ca));
    if let Some(m) = mailers().lock().expect("not poisoned").get(&key) {
        return Ok(m.clone());
    }
    let tls = || -> Result<TlsParameters, String> {
        let mut params = TlsParameters::builder(host.trim_start_matches('[').trim_end_matches(']').to_owned());
        if !ca.is_empty() {
            params = params.add_root_certificate(Certificate::from_pem(ca.as_bytes()).map_err(|e| e.to_string())?);
        }
        params.build().map_err(|e| e.to_string())
    };
    let mut builder = Mailer::builder_dangerous(host)
        .port(port)
        .timeout(Some(timeout))
        .pool_config(PoolConfig::new().max_size(8).idle_timeout(Duration::from_secs(60)));
    builder = match security {
        "tls" => builder.tls(Tls::Wrapper(tls()?)),
        "none" => builder.tls(Tls::None),
        _ => builder.tls(Tls::Required(tls()?)),
    };
    if let (Some(user), Some(password)) = (user, password) {
        builder = builder.credentials(SmtpCredentials::new(user.to_owned(), password.to_owned()));
    }
    let built = builder.build();
    mailers().lock().expect("not poisoned").insert(key, built.clone());
    Ok(built)
}

/// A `Message-ID` for a message Parley sends from `address`.
pub fn new_message_id(address: &str) -> String {
    let domain = address.rsplit_once('@').map_or("parley.invalid", |(_, d)| d);
    format!("<parley.{}@{domain}>", ulid::Ulid::new().to_string().to_ascii_lowercase())
}

/// The headers of a message queued on an email channel: a reply in the
/// thread of `previous` (the conversation's last email), or a new thread.
pub fn outbound_headers(
    address: &str,
    previous: Option<&EmailHeaders>,
    subject: Option<&str>,
    fallback_subject: &str,
) -> EmailHeaders {
    let subject = match (subject, previous) {
        (Some(s), _) => s.to_owned(),
        (None, Some(p)) if p.subject.to_ascii_lowercase().starts_with("re:") => p.subject.clone(),
        (None, Some(p)) if !p.subject.is_empty() => format!("Re: {}", p.subject),
        _ => fallback_subject.to_owned(),
    };
    let (in_reply_to, references) = match previous {
        Some(p) => {
            let mut refs = p.references.clone();
            refs.push(p.message_id.clone());
            // Long threads keep their first message and the latest ones.
            if refs.len() > 20 {
                let keep_from = refs.len() - 19;
                refs = std::iter::once(refs[0].clone()).chain(refs[keep_from..].iter().cloned()).collect();
            }
            (Some(p.message_id.clone()), refs)
        }
        None => (None, Vec::new()),
    };
    EmailHeaders {
        subject: subject.chars().take(MAX_SUBJECT).collect(),
        message_id: new_message_id(address),
        in_reply_to,
        references,
        full_text: None,
    }
}

fn smtp_outcome(e: lettre::transport::smtp::Error) -> Delivered {
    let code = e.status().map(u16::from);
    let words = std::error::Error::source(&e).map(|s| s.to_string()).unwrap_or_default();
    let error = match code {
        Some(code) => format!("SMTP {code}: {}", words.chars().take(300).collect::<String>()),
        None => format!("SMTP: {e}"),
    };
    match code {
        // 535: authentication failed; 530: authentication required.
        Some(530 | 534 | 535) => Delivered::CredentialsRefused { error },
        Some(_) if e.is_permanent() => Delivered::Failed { error },
        _ => Delivered::Retry { error, after: None },
    }
}

async fn send(d: Delivery<'_>) -> Delivered {
    let config = &d.channel.config;
    let Some(address) = text(config, "address") else {
        return Delivered::Failed { error: "the channel has no address".to_owned() };
    };
    let host = text(config, "smtp_host").unwrap_or_default();
    let security = text(config, "smtp_security").unwrap_or("starttls");
    let port = port(config, "smtp_port", if security == "tls" { 465 } else { 587 });
    if let Err(error) = guard_host(host, port, d.allow_private).await {
        return Delivered::Retry { error, after: None };
    }
    let mailer = match mailer(config, d.secrets, d.timeout) {
        Ok(m) => m,
        Err(error) => return Delivered::Failed { error },
    };
    let from_name = text(config, "from_name").map(str::to_owned);
    let parse = |a: &str| a.parse::<lettre::Address>().map_err(|e| format!("{a} is not an address: {e}"));
    let (from, to) = match (parse(address), parse(d.to)) {
        (Ok(from), Ok(to)) => (Mailbox::new(from_name, from), Mailbox::new(None, to)),
        (Err(error), _) | (_, Err(error)) => return Delivered::Failed { error },
    };
    let headers =
        d.message.details.email.clone().unwrap_or_else(|| outbound_headers(address, None, None, &d.channel.name));
    let mut builder = lettre::Message::builder()
        .from(from)
        .to(to)
        .subject(headers.subject.clone())
        .message_id(Some(headers.message_id.clone()));
    if let Some(reply_to) = text(config, "reply_to").and_then(|r| parse(r).ok()) {
        builder = builder.reply_to(Mailbox::new(None, reply_to));
    }
    if let Some(parent) = &headers.in_reply_to {
        builder = builder.in_reply_to(parent.clone());
    }
    if !headers.references.is_empty() {
        builder = builder.references(headers.references.join(" "));
    }
    let html = format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body>{}</body></html>",
        crate::markup::html(&d.message.text)
    );
    let body = MultiPart::alternative_plain_html(d.message.text.clone(), html);
    let built = if d.files.is_empty() {
        builder.multipart(body)
    } else {
        let mut mixed = MultiPart::mixed().multipart(body);
        for file in d.files {
            let kind = ContentType::parse(&file.content_type)
                .unwrap_or(ContentType::parse("application/octet-stream").expect("a type"));
            mixed = mixed.singlepart(MailAttachment::new(file.filename.clone()).body(file.bytes.clone(), kind));
        }
        builder.multipart(mixed)
    };
    let message = match built {
        Ok(m) => m,
        Err(e) => return Delivered::Failed { error: format!("the message cannot be built: {e}") },
    };
    match mailer.send(message).await {
        Ok(_) => Delivered::Sent { external_id: Some(headers.message_id) },
        Err(e) => smtp_outcome(e),
    }
}

// --- Receiving ---------------------------------------------------------------

pub use parley_extract::mail::trim_reply;
use parley_extract::mail::{Form, Letter, Mail, Sender};

/// Reads one raw message: a message from a contact, or a bounce. Its
/// sender is unverified until [`vouch`] says otherwise.
pub fn parse_mail(raw: &[u8]) -> Parsed<Incoming> {
    Ok(read_mail(raw)?.0)
}

/// The message, and the letter it holds (for [`vouch`]).
fn read_mail(raw: &[u8]) -> Result<(Incoming, Option<Letter>), Vec<FieldError>> {
    let bad = |msg: String| vec![FieldError::new(loc(&["body"]), "value_error.email_message", msg)];
    let letter = match parley_extract::mail::read(raw).map_err(|e| bad(e.to_string()))? {
        Mail::Letter(letter) => letter,
        Mail::Bounce { message_id, error } => {
            let report = StatusReport { external_id: message_id, status: MessageStatus::Failed, error: Some(error) };
            return Ok((Incoming::Status(report), None));
        }
        Mail::Ignored => return Ok((Incoming::Ignored, None)),
    };
    let mut answers: Vec<String> = letter.references.iter().rev().cloned().collect();
    if let Some(parent) = &letter.in_reply_to {
        answers.retain(|a| a != parent);
        answers.insert(0, parent.clone());
    }
    let headers = EmailHeaders {
        subject: letter.subject.clone(),
        message_id: letter.message_id.clone(),
        in_reply_to: letter.in_reply_to.clone(),
        references: letter.references.clone(),
        full_text: letter.full_text.clone(),
    };
    let attachments = letter
        .attachments
        .iter()
        .map(|a| InboundFile {
            filename: a.filename.clone(),
            content_type: a.content_type.clone(),
            source: FileSource::Inline(a.bytes.clone()),
        })
        .collect();
    let inbound = Inbound {
        from: letter.from.clone(),
        text: letter.text.clone(),
        external_id: letter.message_id.clone(),
        contact: letter.display_name.clone().map(|n| InboundContact { display_name: Some(n) }),
        attachments,
        consent: None,
        group: None,
        details: MessageDetails { email: Some(headers), ..Default::default() },
        unverified_sender: true,
        answers,
    };
    Ok((Incoming::Message(inbound), Some(letter)))
}

/// The servers whose `Authentication-Results` the channel trusts.
fn trusted_servers(config: &Map<String, Value>) -> Vec<String> {
    config
        .get("trusted_authserv_ids")
        .and_then(Value::as_array)
        .map(|ids| ids.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Marks the sender verified when the receiving side vouches for its
/// `From`: an inbound-parse service's verdict (SendGrid's `dkim`/`SPF`
/// fields, when the form carries them), else the topmost
/// `Authentication-Results` of a server the channel trusts.
fn vouch(incoming: &mut Incoming, letter: Option<&Letter>, form: Option<&Form>, config: &Map<String, Value>) {
    let (Incoming::Message(inbound), Some(letter)) = (incoming, letter) else { return };
    let sender = form
        .and_then(|f| parley_extract::mail::sender_from_form(letter, f))
        .unwrap_or_else(|| parley_extract::mail::sender_from_headers(letter, &trusted_servers(config)));
    inbound.unverified_sender = match sender {
        Sender::Verified(_) => false,
        Sender::Unverified(why) => {
            tracing::debug!(from = %letter.from, %why, "an email sender is unverified");
            true
        }
    };
}

/// Reads a hook request: the raw message as the body, or the form field
/// inbound-parse services put it in (`email`: SendGrid; `body-mime`:
/// Mailgun), with the service's verdicts.
fn read_hook(req: &InboundRequest<'_>, config: &Map<String, Value>) -> Parsed<Incoming> {
    let content_type = req.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let form = parley_extract::mail::read_form(content_type, req.body);
    let raw = form.as_ref().and_then(|f| f.message.as_deref()).unwrap_or(req.body);
    let (mut incoming, letter) = read_mail(raw)?;
    vouch(&mut incoming, letter.as_ref(), form.as_ref(), config);
    Ok(incoming)
}

// --- IMAP --------------------------------------------------------------------

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + std::fmt::Debug + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + std::fmt::Debug + Send> Stream for T {}

/// Where an IMAP poll stopped: the mailbox's UIDVALIDITY and the last UID taken.
fn read_cursor(cursor: Option<&str>) -> Option<(u32, u32)> {
    let (validity, uid) = cursor?.split_once(':')?;
    Some((validity.parse().ok()?, uid.parse().ok()?))
}

async fn with_timeout<T, E: std::fmt::Display>(
    what: &str,
    wait: Duration,
    f: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, Delivered> {
    match tokio::time::timeout(wait, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(Delivered::Retry { error: format!("IMAP {what}: {e}"), after: None }),
        Err(_) => Err(Delivered::Retry { error: format!("IMAP {what}: timed out"), after: None }),
    }
}

async fn imap_connect(p: &Poll<'_>) -> Result<Box<dyn Stream>, Delivered> {
    let config = &p.channel.config;
    let retry = |error: String| Delivered::Retry { error, after: None };
    let host = text(config, "imap_host").ok_or_else(|| Delivered::Failed { error: "no imap_host".to_owned() })?;
    let security = text(config, "imap_security").unwrap_or("tls");
    let port = port(config, "imap_port", if security == "tls" { 993 } else { 143 });
    let addr = guard_host(host, port, p.allow_private).await.map_err(retry)?;
    let tcp = with_timeout("connect", p.timeout, tokio::net::TcpStream::connect(addr)).await?;
    let tls = || {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| retry(e.to_string()))?
            .with_root_certificates(root_store(config))
            .with_no_client_auth();
        let name =
            rustls::pki_types::ServerName::try_from(host.trim_start_matches('[').trim_end_matches(']').to_owned())
                .map_err(|e| retry(e.to_string()))?;
        Ok::<_, Delivered>((tokio_rustls::TlsConnector::from(Arc::new(config)), name))
    };
    match security {
        "none" => Ok(Box::new(tcp)),
        "starttls" => {
            let mut client = async_imap::Client::new(tcp);
            with_timeout("greeting", p.timeout, async { client.read_response().await }).await?;
            with_timeout("STARTTLS", p.timeout, client.run_command_and_check_ok("STARTTLS", None)).await?;
            let (connector, name) = tls()?;
            let tls = with_timeout("TLS", p.timeout, connector.connect(name, client.into_inner())).await?;
            Ok(Box::new(tls))
        }
        _ => {
            let (connector, name) = tls()?;
            Ok(Box::new(with_timeout("TLS", p.timeout, connector.connect(name, tcp)).await?))
        }
    }
}

type Session = async_imap::Session<Box<dyn Stream>>;

/// Connected, logged in: a refused login is the credentials' fault.
async fn imap_session(p: &Poll<'_>) -> Result<Session, Delivered> {
    let config = &p.channel.config;
    let security = text(config, "imap_security").unwrap_or("tls");
    let stream = imap_connect(p).await?;
    let mut client = async_imap::Client::new(stream);
    // (After STARTTLS the greeting was read before the handshake.)
    if security != "starttls" {
        with_timeout("greeting", p.timeout, async { client.read_response().await }).await?;
    }
    let user = text(config, "imap_username").or(text(config, "address")).unwrap_or_default();
    let password = p.secrets.get("imap_password").and_then(Value::as_str).unwrap_or_default();
    match tokio::time::timeout(p.timeout, client.login(user, password)).await {
        Ok(Ok(session)) => Ok(session),
        Ok(Err((async_imap::error::Error::No(words), _))) => {
            Err(Delivered::CredentialsRefused { error: format!("IMAP login refused: {words}") })
        }
        Ok(Err((e, _))) => Err(Delivered::Retry { error: format!("IMAP login: {e}"), after: None }),
        Err(_) => Err(Delivered::Retry { error: "IMAP login: timed out".to_owned(), after: None }),
    }
}

async fn imap_poll(p: Poll<'_>) -> Result<Polled, Delivered> {
    use futures_util::TryStreamExt;
    let config = &p.channel.config;
    let mut session = imap_session(&p).await?;
    let mailbox_name = text(config, "imap_mailbox").unwrap_or("INBOX");
    let mailbox = with_timeout("SELECT", p.timeout, session.select(mailbox_name)).await?;
    let validity = mailbox.uid_validity.unwrap_or(0);
    // A mailbox whose UIDVALIDITY changed numbers its messages anew.
    let last = read_cursor(p.cursor).filter(|(v, _)| *v == validity).map(|(_, uid)| uid);
    let search = || match last {
        Some(uid) => format!("UID {}:*", uid + 1),
        None => "UNSEEN".to_owned(),
    };
    let mut found: Vec<u32> =
        with_timeout("SEARCH", p.timeout, session.uid_search(search())).await?.into_iter().collect();
    found.retain(|uid| last.is_none_or(|l| *uid > l));
    if found.is_empty() {
        let capabilities = with_timeout("CAPABILITY", p.timeout, session.capabilities()).await?;
        if capabilities.has_str("IDLE") {
            let mut idle = session.idle();
            with_timeout("IDLE", p.timeout, idle.init()).await?;
            let (wait, _stop) = idle.wait_with_timeout(IDLE_WAIT);
            let _ = wait.await;
            session = with_timeout("DONE", p.timeout, idle.done()).await?;
        } else {
            tokio::time::sleep(IDLE_WAIT.min(Duration::from_secs(5))).await;
        }
        found = with_timeout("SEARCH", p.timeout, session.uid_search(search())).await?.into_iter().collect();
        found.retain(|uid| last.is_none_or(|l| *uid > l));
    }
    found.sort_unstable();
    found.truncate(FETCH_BATCH);
    let mut incoming = Vec::new();
    let mut newest = last;
    if !found.is_empty() {
        let set = found.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let fetched: Vec<async_imap::types::Fetch> = with_timeout("FETCH", p.timeout, async {
            session.uid_fetch(&set, "(UID BODY.PEEK[])").await?.try_collect().await
        })
        .await?;
        for fetch in &fetched {
            let (Some(uid), Some(raw)) = (fetch.uid, fetch.body()) else { continue };
            match read_mail(raw) {
                Ok((Incoming::Ignored, _)) => {}
                Ok((mut one, letter)) => {
                    vouch(&mut one, letter.as_ref(), None, &p.channel.config);
                    incoming.push(one);
                }
                Err(e) => tracing::warn!(uid, error = ?e, "an IMAP message could not be read as email; skipped"),
            }
            newest = Some(newest.map_or(uid, |n| n.max(uid)));
        }
        let _: Vec<async_imap::types::Fetch> = with_timeout("STORE", p.timeout, async {
            session.uid_store(&set, "+FLAGS.SILENT (\\Seen)").await?.try_collect().await
        })
        .await?;
    }
    let _ = tokio::time::timeout(p.timeout, session.logout()).await;
    let cursor = newest.map(|uid| format!("{validity}:{uid}")).or(p.cursor.map(str::to_owned));
    Ok(Polled { incoming, cursor })
}

// --- The connector -----------------------------------------------------------

impl Connector for EmailConnector {
    fn kind(&self) -> ChannelType {
        ChannelType::Email
    }
    fn secret_settings(&self) -> &'static [&'static str] {
        &["smtp_password", "imap_password", "inbound_secret"]
    }
    fn parse_setting(&self, name: &str, value: Value, at: &[LocPart]) -> Option<Parsed<Value>> {
        Some(match name {
            "address" | "reply_to" => email_setting(value, at),
            "from_name" => string(1, 200)(value, at).map(Value::String),
            "smtp_host" | "imap_host" => host_setting(value, at),
            "smtp_port" | "imap_port" => integer(1, 65535)(value, at).map(Value::from),
            "smtp_security" => one_of(&["starttls", "tls", "none"])(value, at).map(Value::String),
            "imap_security" => one_of(&["tls", "starttls", "none"])(value, at).map(Value::String),
            "smtp_username" | "imap_username" => string(1, 320)(value, at).map(Value::String),
            "smtp_password" | "imap_password" => {
                parley_domain::validation::header_value(1, 512)(value, at).map(Value::String)
            }
            "inbound_secret" => parley_domain::validation::header_value(24, 256)(value, at).map(Value::String),
            "imap_mailbox" => string(1, 200)(value, at).map(Value::String),
            "trusted_authserv_ids" => parley_domain::validation::list_of(10, |v, l| {
                host_setting(v, l).map(|h| Value::String(h.as_str().unwrap_or_default().to_ascii_lowercase()))
            })(value, at)
            .map(Value::from),
            "tls_ca_pem" => string(1, 16_384)(value, at).and_then(|pem| {
                if pem.contains("-----BEGIN CERTIFICATE-----") {
                    Ok(Value::String(pem))
                } else {
                    Err(vec![FieldError::new(at.to_vec(), "value_error.pem", "must be PEM certificates")])
                }
            }),
            _ => return None,
        })
    }
    fn settings_schema(&self) -> utoipa::openapi::Object {
        use parley_domain::schema::{nullable, string, string_enum};
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let port =
            || nullable(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(1)).maximum(Some(65535)).build());
        let secret = |min: usize, max: usize| nullable(string(min, max).pattern(Some("^[ -~]+$")).build());
        parley_domain::schema::closed_object(vec![
            (
                "address",
                nullable(
                    string(3, 254)
                        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Email)))
                        .build(),
                )
                .into(),
                "The mailbox's address: messages are sent from it; the channel's address.",
            ),
            ("from_name", nullable(string(1, 200).build()).into(), "The name shown with the address."),
            (
                "reply_to",
                nullable(
                    string(3, 254)
                        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Email)))
                        .build(),
                )
                .into(),
                "A Reply-To address, when replies should go elsewhere.",
            ),
            ("smtp_host", nullable(string(1, 253).build()).into(), "The SMTP server (a host name or IP address)."),
            ("smtp_port", port().into(), "Default 587 (465 with smtp_security tls)."),
            (
                "smtp_security",
                nullable(string_enum(&["starttls", "tls", "none"])).into(),
                "`starttls` (default; required, never opportunistic), `tls` (implicit, port 465) or `none` (a local relay).",
            ),
            ("smtp_username", nullable(string(1, 320).build()).into(), "The SMTP login (AUTH); none: no AUTH."),
            ("smtp_password", secret(1, 512).into(), "Secret, write-only: the SMTP password."),
            (
                "imap_host",
                nullable(string(1, 253).build()).into(),
                "An IMAP server to read the mailbox from (polled; IDLE where the server has it). None: inbound by webhook only.",
            ),
            ("imap_port", port().into(), "Default 993 (143 with imap_security starttls or none)."),
            (
                "imap_security",
                nullable(string_enum(&["tls", "starttls", "none"])).into(),
                "`tls` (default), `starttls` or `none`.",
            ),
            ("imap_username", nullable(string(1, 320).build()).into(), "The IMAP login; the address without it."),
            ("imap_password", secret(1, 512).into(), "Secret, write-only: the IMAP password."),
            ("imap_mailbox", nullable(string(1, 200).build()).into(), "The folder read; INBOX without it."),
            (
                "inbound_secret",
                secret(24, 256).into(),
                "Secret, write-only: what `POST /hooks/email/{public_id}` must carry (`Authorization: Bearer …`, or as the basic-auth password). Without it the webhook refuses everything.",
            ),
            (
                "trusted_authserv_ids",
                parley_domain::schema::nullable_array(
                    utoipa::openapi::schema::ArrayBuilder::new()
                        .items(string(1, 253).build())
                        .max_items(Some(10))
                        .build(),
                )
                .into(),
                "Up to 10 servers (their authserv-id, such as `mx.google.com` or your own MTA's host name) whose \
                 topmost `Authentication-Results` header vouches for a message's `From`: DMARC pass, or DKIM or SPF \
                 pass aligned with the `From` domain. A sender no trusted server vouches for is unverified, kept \
                 apart from the address's contact. SendGrid's own `dkim`/`SPF` fields count without this.",
            ),
            (
                "tls_ca_pem",
                nullable(string(1, 16_384).pattern(Some("-----BEGIN CERTIFICATE-----")).build()).into(),
                "PEM certificates of a private CA the SMTP and IMAP servers' certificates chain to (besides the public roots).",
            ),
        ])
    }
    fn webhook_paths(&self) -> &'static [(&'static str, &'static str)] {
        &[("Raw messages (POST, Authorization: Bearer <inbound_secret>)", "/hooks/email/{public_id}")]
    }
    fn signs_traffic(&self) -> bool {
        false
    }
    fn public_prefix(&self) -> &'static str {
        "em"
    }
    fn address(&self, config: &Map<String, Value>) -> Option<String> {
        text(config, "address").map(str::to_owned)
    }
    fn cannot_send(&self, config: &Map<String, Value>) -> Option<String> {
        if !config.contains_key("address") {
            return Some("it has no `address` (set config.address)".to_owned());
        }
        if !config.contains_key("smtp_host") {
            return Some("it has no SMTP server (set config.smtp_host)".to_owned());
        }
        None
    }
    fn reaches_third_party(&self) -> bool {
        true
    }
    fn embeds_files(&self) -> bool {
        true
    }
    fn threads(&self) -> bool {
        true
    }
    fn outbound_details(
        &self,
        text: &str,
        config: &Map<String, Value>,
        previous: Option<&MessageDetails>,
        subject: Option<&str>,
        channel_name: &str,
    ) -> MessageDetails {
        let _ = text;
        let address = self.address(config).unwrap_or_default();
        let previous = previous.and_then(|p| p.email.as_ref());
        MessageDetails {
            email: Some(outbound_headers(&address, previous, subject, channel_name)),
            ..Default::default()
        }
    }
    fn takes_subject(&self) -> bool {
        true
    }
    fn formatted(&self, text: &str) -> Option<String> {
        Some(crate::markup::html(text))
    }
    fn deliver<'a>(&'a self, d: Delivery<'a>) -> BoxFuture<'a, Delivered> {
        Box::pin(send(d))
    }
    /// Logs in to the SMTP server (and the IMAP server, if set).
    fn check<'a>(&'a self, c: Check<'a>) -> BoxFuture<'a, Checked> {
        Box::pin(async move {
            let config = &c.channel.config;
            let mut works = Vec::new();
            if let Some(host) = text(config, "smtp_host") {
                let security = text(config, "smtp_security").unwrap_or("starttls");
                let port = port(config, "smtp_port", if security == "tls" { 465 } else { 587 });
                if let Err(e) = guard_host(host, port, c.allow_private).await {
                    return Checked::Unreachable(e);
                }
                let mailer = match mailer(config, c.secrets, c.timeout) {
                    Ok(m) => m,
                    Err(e) => return Checked::Refused(e),
                };
                match mailer.test_connection().await {
                    Ok(true) => works.push(format!("SMTP {host}:{port}")),
                    Ok(false) => return Checked::Unreachable(format!("SMTP {host}:{port} did not answer NOOP")),
                    Err(e) => {
                        return match smtp_outcome(e) {
                            Delivered::CredentialsRefused { error } => Checked::Refused(error),
                            other => Checked::Unreachable(other.error().unwrap_or("refused").to_owned()),
                        };
                    }
                }
            }
            if text(config, "imap_host").is_some() {
                match imap_login(&c).await {
                    Ok(what) => works.push(what),
                    Err(Delivered::CredentialsRefused { error }) => return Checked::Refused(error),
                    Err(other) => return Checked::Unreachable(other.error().unwrap_or("failed").to_owned()),
                }
            }
            if works.is_empty() {
                return Checked::NothingToCheck("the channel has no SMTP or IMAP server to check".to_owned());
            }
            Checked::Works(format!("logged in to {}", works.join(" and ")))
        })
    }
    fn hooks(&self) -> &'static [Hook] {
        &[Hook::Message]
    }
    fn authenticates_by_headers(&self) -> bool {
        true
    }
    /// `Authorization: Bearer <inbound_secret>` (the scheme in any case, as
    /// RFC 7235 has it), or basic auth with it as the password (services
    /// that only take a URL with credentials).
    fn authenticate(&self, req: &InboundRequest<'_>, creds: &Credentials<'_>, _now_s: i64) -> Result<(), Refused> {
        let refused = || Refused("Invalid credentials: the inbound secret does not match".to_owned());
        let secret = creds.secrets.get("inbound_secret").and_then(Value::as_str).ok_or_else(refused)?;
        let given = req.headers.get("authorization").and_then(|v| v.to_str().ok()).ok_or_else(refused)?;
        let (scheme, credentials) = given.trim().split_once(' ').unwrap_or((given, ""));
        let offered = if scheme.eq_ignore_ascii_case("bearer") {
            credentials.trim().to_owned()
        } else if scheme.eq_ignore_ascii_case("basic") {
            let basic = credentials;
            use base64::Engine as _;
            let decoded = base64::engine::general_purpose::STANDARD.decode(basic.trim()).map_err(|_| refused())?;
            let pair = String::from_utf8(decoded).map_err(|_| refused())?;
            pair.split_once(':').map(|(_, p)| p.to_owned()).ok_or_else(refused)?
        } else {
            return Err(refused());
        };
        let same = offered.len() == secret.len()
            && offered.bytes().zip(secret.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
        if same { Ok(()) } else { Err(refused()) }
    }
    fn read(&self, _hook: Hook, req: &InboundRequest<'_>, config: &Map<String, Value>) -> Parsed<Incoming> {
        read_hook(req, config)
    }
    fn polls(&self, config: &Map<String, Value>) -> bool {
        config.contains_key("imap_host")
    }
    fn poll<'a>(&'a self, p: Poll<'a>) -> BoxFuture<'a, Result<Polled, Delivered>> {
        Box::pin(imap_poll(p))
    }
    fn registers_hooks(&self) -> bool {
        // Not to register anything: to start the IMAP poll after a change.
        true
    }
}

/// Logs in to the IMAP server and selects the mailbox.
async fn imap_login(c: &Check<'_>) -> Result<String, Delivered> {
    let poll = Poll {
        client: c.client,
        timeout: c.timeout,
        allow_private: c.allow_private,
        channel: c.channel,
        secrets: c.secrets,
        cursor: None,
    };
    let config = &c.channel.config;
    let mut session = imap_session(&poll).await?;
    let mailbox = text(config, "imap_mailbox").unwrap_or("INBOX");
    with_timeout("SELECT", c.timeout, session.select(mailbox)).await?;
    let _ = tokio::time::timeout(c.timeout, session.logout()).await;
    Ok(format!("IMAP {}", text(config, "imap_host").unwrap_or_default()))
}
