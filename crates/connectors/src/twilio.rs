//! The `sms` and `whatsapp` channels: Twilio's Messages API, or any
//! provider that speaks it (the `base_url` setting).
//!
//! - Sending: `POST {base_url}/2010-04-01/Accounts/{account_sid}/Messages.json`,
//!   form-encoded with basic auth (`To`, `From` or `MessagingServiceSid`,
//!   `Body`, a `MediaUrl` per attachment — its signed, expiring link — and
//!   a `StatusCallback` to the channel's status hook). WhatsApp addresses
//!   carry Twilio's `whatsapp:` prefix on the wire, not in Parley.
//! - Receiving: Twilio posts messages to `/hooks/twilio/{public_id}/inbound`
//!   and delivery reports to `/hooks/twilio/{public_id}/status`, both
//!   signed with the account's auth token (`X-Twilio-Signature` over the
//!   URL and the sorted form parameters), checked before anything is read.
//!   A message is named by its `MessageSid`, so a repeated webhook is
//!   stored once.

use futures::future::BoxFuture;
use parley_domain::channel::ChannelType;
use parley_domain::conversation::{ApprovedTemplate, MessageStatus};
use parley_domain::validation::{FieldError, LocPart, Parsed, header_value, loc, string};
use serde_json::{Map, Value};

use crate::{
    Check, Checked, Connector, Consent, Credentials, Delivered, Delivery, FetchFile, Fetched, FileSource, Hook,
    Inbound, InboundContact, InboundFile, InboundRequest, Incoming, Refused, StatusReport,
};

/// Twilio's API root, when a channel names no other.
pub const TWILIO_API: &str = "https://api.twilio.com";
/// Twilio's Content API root (the WhatsApp templates), when a channel names no other.
pub const TWILIO_CONTENT_API: &str = "https://content.twilio.com";
/// Pages of templates read at most (100 each).
const TEMPLATE_PAGES: usize = 10;
/// Bytes of one page of templates read.
const TEMPLATE_PAGE_LIMIT: usize = 1024 * 1024;
/// The longest `Body` Twilio's Messages API takes.
const MAX_BODY_CHARS: usize = 1600;
/// Most media a message carries (Twilio's limit).
const MAX_MEDIA: usize = 10;
/// WhatsApp's customer-service window after the contact's last message.
const WHATSAPP_WINDOW: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
/// Bytes of the provider's answer read.
const REPLY_LIMIT: usize = 16 * 1024;
/// Patterns of the settings (also in the OpenAPI document).
const ACCOUNT_SID: &str = "^AC[0-9a-fA-F]{32}$";
const SERVICE_SID: &str = "^MG[0-9a-fA-F]{32}$";
const E164: &str = r"^\+[1-9][0-9]{6,14}$";
const WHATSAPP_FROM: &str = r"^(whatsapp:)?\+[1-9][0-9]{6,14}$";

pub(crate) struct TwilioConnector {
    kind: ChannelType,
}

pub(crate) static SMS: TwilioConnector = TwilioConnector { kind: ChannelType::Sms };
pub(crate) static WHATSAPP: TwilioConnector = TwilioConnector { kind: ChannelType::Whatsapp };

fn matches(pattern: &str, s: &str) -> bool {
    regex::Regex::new(pattern).is_ok_and(|r| r.is_match(s))
}

fn pattern(at: &[LocPart], pattern: &'static str, what: &str) -> impl FnOnce(String) -> Parsed<Value> {
    let (at, what) = (at.to_vec(), what.to_owned());
    move |s| {
        if matches(pattern, &s) {
            Ok(Value::String(s))
        } else {
            Err(vec![FieldError::new(at, "value_error.pattern", format!("must be {what}"))])
        }
    }
}

/// The form parameters of a request body.
fn form(body: &[u8]) -> Option<Vec<(String, String)>> {
    serde_urlencoded::from_bytes(body).ok()
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty())
}

/// Twilio's default opt-out and opt-in keywords: a message that is only
/// one of them (any case, surrounding spaces and punctuation ignored).
fn consent(body: &str) -> Option<Consent> {
    let word = body.trim().trim_matches(|c: char| c.is_ascii_punctuation()).to_ascii_uppercase();
    const OPT_OUT: [&str; 7] = ["STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "OPTOUT"];
    if let Some(k) = OPT_OUT.iter().find(|k| **k == word) {
        return Some(Consent::OptOut(k));
    }
    ["START", "YES", "UNSTOP"].contains(&word.as_str()).then_some(Consent::OptIn)
}

/// The media of an inbound message (`MediaUrl{i}`, `MediaContentType{i}`).
fn media(params: &[(String, String)]) -> Vec<InboundFile> {
    let count = param(params, "NumMedia").and_then(|n| n.parse::<usize>().ok()).unwrap_or(0).min(MAX_MEDIA);
    (0..count)
        .filter_map(|i| {
            let url = param(params, &format!("MediaUrl{i}"))?;
            let content_type = param(params, &format!("MediaContentType{i}")).unwrap_or("application/octet-stream");
            Some(InboundFile {
                filename: format!("media-{}{}", i + 1, crate::extension_for(content_type)),
                content_type: content_type.to_ascii_lowercase(),
                source: FileSource::Remote(url.to_owned()),
            })
        })
        .collect()
}

impl TwilioConnector {
    /// An address as Twilio writes it on this channel.
    fn wire_address(&self, address: &str) -> String {
        match self.kind {
            ChannelType::Whatsapp if !address.starts_with("whatsapp:") => format!("whatsapp:{address}"),
            _ => address.to_owned(),
        }
    }
}

impl Connector for TwilioConnector {
    fn kind(&self) -> ChannelType {
        self.kind
    }
    fn secret_settings(&self) -> &'static [&'static str] {
        &["auth_token"]
    }
    fn needed_settings(&self) -> &'static [&'static str] {
        &["account_sid", "auth_token"]
    }
    fn parse_setting(&self, name: &str, value: Value, at: &[LocPart]) -> Option<Parsed<Value>> {
        Some(match name {
            "account_sid" => {
                string(34, 34)(value, at).and_then(pattern(at, ACCOUNT_SID, "an account SID (AC and 32 hex digits)"))
            }
            "auth_token" => header_value(1, 128)(value, at).map(Value::String),
            "messaging_service_sid" => string(34, 34)(value, at).and_then(pattern(
                at,
                SERVICE_SID,
                "a messaging service SID (MG and 32 hex digits)",
            )),
            "from" if self.kind == ChannelType::Whatsapp => string(1, 30)(value, at)
                .and_then(pattern(at, WHATSAPP_FROM, "a WhatsApp sender number in E.164 form (+14155550100)"))
                .map(|v| Value::String(v.as_str().unwrap_or_default().trim_start_matches("whatsapp:").to_owned())),
            "from" => string(1, 16)(value, at).and_then(pattern(at, E164, "a number in E.164 form (+14155550100)")),
            "base_url" | "content_base_url" => string(1, 2048)(value, at).and_then(|u| {
                parley_events::ssrf::parse_target(&u)
                    .map(|u| Value::String(u.as_str().trim_end_matches('/').to_owned()))
                    .map_err(|e| vec![FieldError::new(at.to_vec(), "value_error.url", e.to_string())])
            }),
            _ => return None,
        })
    }
    fn settings_schema(&self) -> utoipa::openapi::Object {
        use parley_domain::schema::{nullable, string};
        let from = match self.kind {
            ChannelType::Whatsapp => nullable(string(1, 30).pattern(Some(WHATSAPP_FROM)).build()),
            _ => nullable(string(1, 16).pattern(Some(E164)).build()),
        };
        parley_domain::schema::closed_object(vec![
            (
                "account_sid",
                nullable(string(34, 34).pattern(Some(ACCOUNT_SID)).build()).into(),
                "The Twilio account (AC…).",
            ),
            (
                "auth_token",
                nullable(string(1, 128).pattern(Some("^[ -~]+$")).build()).into(),
                "Secret, write-only: the account's auth token (basic auth for sending; it signs Twilio's webhooks).",
            ),
            (
                "from",
                from.into(),
                "The sender number (E.164); the channel's address. This or messaging_service_sid is needed to send.",
            ),
            (
                "messaging_service_sid",
                nullable(string(34, 34).pattern(Some(SERVICE_SID)).build()).into(),
                "A messaging service (MG…) to send through instead of `from`.",
            ),
            (
                "base_url",
                parley_domain::schema::nullable_url().into(),
                "The API's root for a Twilio-compatible provider; https://api.twilio.com without it.",
            ),
            (
                "content_base_url",
                parley_domain::schema::nullable_url().into(),
                "The Content API's root (WhatsApp templates); https://content.twilio.com without it.",
            ),
        ])
    }
    fn signs_traffic(&self) -> bool {
        false
    }
    fn public_prefix(&self) -> &'static str {
        match self.kind {
            ChannelType::Whatsapp => "wa",
            _ => "sms",
        }
    }
    fn webhook_paths(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("A message comes in (HTTP POST)", "/hooks/twilio/{public_id}/inbound"),
            ("Status callback URL", "/hooks/twilio/{public_id}/status"),
        ]
    }
    fn outbound_url_settings(&self) -> &'static [&'static str] {
        &["base_url", "content_base_url"]
    }
    fn address(&self, config: &Map<String, Value>) -> Option<String> {
        config.get("from").and_then(Value::as_str).map(str::to_owned)
    }
    fn cannot_send(&self, config: &Map<String, Value>) -> Option<String> {
        if !config.contains_key("account_sid") {
            return Some("it has no `account_sid` (set config.account_sid and config.auth_token)".to_owned());
        }
        if !config.contains_key("from") && !config.contains_key("messaging_service_sid") {
            return Some("it has no sender (set config.from or config.messaging_service_sid)".to_owned());
        }
        None
    }
    fn reaches_third_party(&self) -> bool {
        true
    }
    /// Twilio takes a `Body` of at most 1,600 characters (it splits longer
    /// SMS into segments itself, up to that).
    fn refuse_text(&self, text: &str) -> Option<String> {
        let n = text.chars().count();
        (n > MAX_BODY_CHARS).then(|| {
            format!(
                "a message on this channel is at most {MAX_BODY_CHARS} characters (Twilio's limit); this one has {n}"
            )
        })
    }
    fn details(&self, text: &str) -> parley_domain::conversation::MessageDetails {
        let segments = (self.kind == ChannelType::Sms).then(|| parley_domain::sms::segments(text));
        parley_domain::conversation::MessageDetails { segments, ..Default::default() }
    }
    fn service_window(&self) -> Option<std::time::Duration> {
        (self.kind == ChannelType::Whatsapp).then_some(WHATSAPP_WINDOW)
    }
    fn takes_templates(&self) -> bool {
        self.kind == ChannelType::Whatsapp
    }
    /// `GET {content_base_url}/v1/ContentAndApprovals` (following
    /// `meta.next_page_url`), keeping those WhatsApp approved.
    fn templates<'a>(&'a self, c: Check<'a>) -> BoxFuture<'a, Result<Vec<ApprovedTemplate>, String>> {
        Box::pin(async move {
            let config = &c.channel.config;
            let account = config.get("account_sid").and_then(Value::as_str);
            let token = c.secrets.get("auth_token").and_then(Value::as_str);
            let (Some(account), Some(token)) = (account, token) else {
                return Err("the channel has no account_sid or auth_token".to_owned());
            };
            let base = config.get("content_base_url").and_then(Value::as_str).unwrap_or(TWILIO_CONTENT_API);
            let mut url = format!("{base}/v1/ContentAndApprovals?PageSize=100");
            let mut found = Vec::new();
            for _ in 0..TEMPLATE_PAGES {
                let reply = parley_events::post::get_with_basic_auth(
                    c.client,
                    c.timeout,
                    &url,
                    (account, token),
                    c.allow_private,
                    TEMPLATE_PAGE_LIMIT,
                )
                .await?;
                let body: Value = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
                if !(200..=299).contains(&reply.status) {
                    return Err(twilio_error(&reply, &body));
                }
                let contents = body.get("contents").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
                found.extend(contents.iter().filter_map(approved_template));
                // The next page, only on the same Content API (never where a reply points).
                match body.pointer("/meta/next_page_url").and_then(Value::as_str) {
                    Some(next) if next.starts_with(base) => url = next.to_owned(),
                    Some(next) if next.starts_with('/') => url = format!("{base}{next}"),
                    _ => break,
                }
            }
            Ok(found)
        })
    }
    fn deliver<'a>(&'a self, d: Delivery<'a>) -> BoxFuture<'a, Delivered> {
        Box::pin(self.send(d))
    }
    fn look_up_sent<'a>(&'a self, d: Delivery<'a>) -> BoxFuture<'a, Option<Result<Vec<String>, String>>> {
        Box::pin(async move { self.sent_like(d).await })
    }
    /// Media URLs need the account's credentials when the account enforces
    /// HTTP auth on media; Twilio answers with a redirect to its storage.
    fn fetch_file<'a>(&'a self, f: FetchFile<'a>) -> BoxFuture<'a, Result<Fetched, String>> {
        Box::pin(async move {
            let account = f.channel.config.get("account_sid").and_then(Value::as_str).unwrap_or_default();
            let token = f.secrets.get("auth_token").and_then(Value::as_str).unwrap_or_default();
            let got = parley_events::post::download(
                f.client,
                f.timeout,
                f.reference,
                Some((account, token)),
                f.allow_private,
                f.max_bytes,
            )
            .await?;
            if !(200..300).contains(&got.status) {
                return Err(format!("the provider answered HTTP {} for the media", got.status));
            }
            Ok(Fetched { bytes: got.bytes, content_type: got.content_type })
        })
    }
    /// `GET …/2010-04-01/Accounts/{account_sid}.json` with the credentials.
    fn check<'a>(&'a self, c: Check<'a>) -> BoxFuture<'a, Checked> {
        Box::pin(async move {
            let config = &c.channel.config;
            let account = config.get("account_sid").and_then(Value::as_str);
            let token = c.secrets.get("auth_token").and_then(Value::as_str);
            let (Some(account), Some(token)) = (account, token) else {
                return Checked::Refused("the channel has no account_sid or auth_token".to_owned());
            };
            let base = config.get("base_url").and_then(Value::as_str).unwrap_or(TWILIO_API);
            let url = format!("{base}/2010-04-01/Accounts/{account}.json");
            let got = parley_events::post::get_with_basic_auth(
                c.client,
                c.timeout,
                &url,
                (account, token),
                c.allow_private,
                REPLY_LIMIT,
            )
            .await;
            let reply = match got {
                Ok(reply) => reply,
                Err(e) => return Checked::Unreachable(e),
            };
            let body: Value = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
            match reply.status {
                200..=299 => {
                    let name = body.get("friendly_name").and_then(Value::as_str).unwrap_or(account);
                    let status = body.get("status").and_then(Value::as_str).unwrap_or("active");
                    Checked::Works(format!("Twilio accepted the credentials of {name} ({status})"))
                }
                401 | 403 | 404 => Checked::Refused(twilio_error(&reply, &body)),
                _ => Checked::Unreachable(twilio_error(&reply, &body)),
            }
        })
    }
    fn hooks(&self) -> &'static [Hook] {
        &[Hook::Message, Hook::Status]
    }
    /// Twilio calls back (`queued`, `sent`) as soon as it has the message,
    /// possibly before its answer to the send has been stored.
    fn reports_may_precede_send(&self) -> bool {
        true
    }
    /// `X-Twilio-Signature`: the channel's auth token over the URL Twilio
    /// requested and the sorted form parameters.
    fn authenticate(&self, req: &InboundRequest<'_>, creds: &Credentials<'_>, _now_s: i64) -> Result<(), Refused> {
        let refused = || Refused("Invalid signature: X-Twilio-Signature does not match".to_owned());
        let Some(token) = creds.secrets.get("auth_token").and_then(Value::as_str) else {
            return Err(refused());
        };
        let signature = req.headers.get("x-twilio-signature").and_then(|v| v.to_str().ok()).ok_or_else(refused)?;
        let params = form(req.body).ok_or_else(refused)?;
        if parley_domain::twilio::signature_valid(token, req.url, &params, signature) { Ok(()) } else { Err(refused()) }
    }
    fn read(&self, hook: Hook, req: &InboundRequest<'_>, _config: &Map<String, Value>) -> Parsed<Incoming> {
        let bad = |field: &str, msg: &str| vec![FieldError::new(loc(&["body", field]), "value_error", msg.to_owned())];
        let params = form(req.body).ok_or_else(|| bad("form", "the body is not a form"))?;
        let sid = param(&params, "MessageSid")
            .or(param(&params, "SmsSid"))
            .ok_or_else(|| bad("MessageSid", "missing"))?
            .to_owned();
        match hook {
            Hook::Message => {
                let from = param(&params, "From").ok_or_else(|| bad("From", "missing"))?;
                let from = from.trim_start_matches("whatsapp:").to_owned();
                let attachments = media(&params);
                let n = attachments.len();
                let text = match param(&params, "Body") {
                    Some(body) => body.chars().take(10_000).collect(),
                    None if n > 0 => format!("[{n} attachment{}]", if n == 1 { "" } else { "s" }),
                    None => return Err(bad("Body", "the message has neither text nor media")),
                };
                let contact = param(&params, "ProfileName")
                    .map(|name| InboundContact { display_name: Some(name.chars().take(200).collect()) });
                // Twilio's opt-out keywords bind SMS senders; WhatsApp has its own block.
                let consent = if self.kind == ChannelType::Sms { consent(&text) } else { None };
                Ok(Incoming::Message(Inbound {
                    from,
                    text,
                    external_id: sid,
                    contact,
                    attachments,
                    consent,
                    group: None,
                    details: Default::default(),
                    unverified_sender: false,
                    answers: Vec::new(),
                }))
            }
            Hook::Status => {
                let status = param(&params, "MessageStatus").ok_or_else(|| bad("MessageStatus", "missing"))?;
                let error = match (param(&params, "ErrorMessage"), param(&params, "ErrorCode")) {
                    (Some(message), Some(code)) => Some(format!("{message} (Twilio error {code})")),
                    (Some(message), None) => Some(message.to_owned()),
                    (None, Some(code)) => Some(format!("Twilio error {code}")),
                    (None, None) => None,
                };
                let status = match status {
                    // Before the handset: Parley's message is already `sent`
                    // (the provider took it), and status only moves forward.
                    "accepted" | "scheduled" | "queued" | "sending" | "sent" => MessageStatus::Sent,
                    "delivered" => MessageStatus::Delivered,
                    "read" => MessageStatus::Read,
                    "failed" | "undelivered" | "canceled" => MessageStatus::Failed,
                    _ => return Err(bad("MessageStatus", "not a status of an outbound message")),
                };
                let error =
                    if status == MessageStatus::Failed { error.or(Some("undelivered".to_owned())) } else { None };
                Ok(Incoming::Status(StatusReport { external_id: sid, status, error }))
            }
        }
    }
}

impl TwilioConnector {
    /// One `Messages.json` request. 429 (with its `Retry-After`) and 5xx
    /// are retried; any other refusal fails the message with Twilio's code
    /// and words.
    async fn send(&self, d: Delivery<'_>) -> Delivered {
        let config = &d.channel.config;
        let text = |k: &str| config.get(k).and_then(Value::as_str);
        let (Some(account), Some(token)) = (text("account_sid"), d.secrets.get("auth_token").and_then(Value::as_str))
        else {
            return Delivered::Failed { error: "the channel has no account_sid or auth_token".to_owned() };
        };
        let base = text("base_url").unwrap_or(TWILIO_API);
        let url = format!("{base}/2010-04-01/Accounts/{account}/Messages.json");
        let to = self.wire_address(d.to);
        let from = text("from").map(|f| self.wire_address(f));
        let callback = format!("{}/hooks/twilio/{}/status", d.public_url, d.public_id);
        let mut form: Vec<(&str, &str)> = vec![("To", &to), ("StatusCallback", &callback)];
        // A template is rendered by the provider: its SID and the values of
        // its placeholders (a JSON object, as the Content API takes them).
        let variables;
        match &d.message.details.template {
            Some(template) => {
                variables = serde_json::to_string(&template.variables).unwrap_or_else(|_| "{}".to_owned());
                form.push(("ContentSid", &template.content_sid));
                form.push(("ContentVariables", &variables));
            }
            None => form.push(("Body", &d.message.text)),
        }
        match (text("messaging_service_sid"), &from) {
            (Some(service), _) => form.push(("MessagingServiceSid", service)),
            (None, Some(from)) => form.push(("From", from)),
            (None, None) => return Delivered::Failed { error: "the channel has no sender".to_owned() },
        }
        for link in d.message.attachments.iter().filter_map(|a| a.url.as_deref()) {
            form.push(("MediaUrl", link));
        }
        let post = parley_events::post::FormPost {
            url: &url,
            basic_auth: (account, token),
            form: &form,
            allow_private: d.allow_private,
            read_limit: REPLY_LIMIT,
        };
        let reply = match parley_events::post::send_form(d.client, d.timeout, post).await {
            Ok(reply) => reply,
            Err(error) => return Delivered::Retry { error, after: None },
        };
        let body: Value = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
        if reply.succeeded() {
            let external_id = body.get("sid").and_then(Value::as_str).map(str::to_owned);
            return Delivered::Sent { external_id };
        }
        let error = twilio_error(&reply, &body);
        match reply.status {
            429 | 500..=599 => Delivered::Retry { error, after: reply.retry_after },
            // Twilio's 20003: the account SID and auth token do not authenticate.
            401 | 403 => Delivered::CredentialsRefused { error },
            _ => Delivered::Failed { error },
        }
    }
}

/// Messages Twilio lists per page when looking for an earlier send.
const LOOKUP_PAGE: usize = 50;
/// How much earlier than the message's queueing a match may be stamped
/// (the clocks of Parley and Twilio differ).
const CLOCK_SLACK_S: i64 = 300;

impl TwilioConnector {
    /// `GET Messages.json?To=…[&From=…]`: the account's latest messages to
    /// the recipient (Twilio lists newest first) whose body is this text,
    /// sent from this channel's number or messaging service, created after
    /// the message was queued. A template's body is rendered by Twilio, so
    /// it cannot be matched: `None`, and a retry may repeat it.
    async fn sent_like(&self, d: Delivery<'_>) -> Option<Result<Vec<String>, String>> {
        if d.message.details.template.is_some() {
            return None;
        }
        let config = &d.channel.config;
        let text = |k: &str| config.get(k).and_then(Value::as_str);
        let (Some(account), Some(token)) = (text("account_sid"), d.secrets.get("auth_token").and_then(Value::as_str))
        else {
            return Some(Err("the channel has no account_sid or auth_token".to_owned()));
        };
        let base = text("base_url").unwrap_or(TWILIO_API);
        let service = text("messaging_service_sid");
        let from = text("from").map(|f| self.wire_address(f));
        let mut query = vec![("To", self.wire_address(d.to)), ("PageSize", LOOKUP_PAGE.to_string())];
        if let (None, Some(from)) = (service, &from) {
            query.push(("From", from.clone()));
        }
        let query = serde_urlencoded::to_string(&query).unwrap_or_default();
        let url = format!("{base}/2010-04-01/Accounts/{account}/Messages.json?{query}");
        let got =
            parley_events::post::download(d.client, d.timeout, &url, Some((account, token)), d.allow_private, 1 << 20)
                .await;
        let got = match got {
            Ok(got) if (200..300).contains(&got.status) => got,
            Ok(got) => return Some(Err(format!("listing messages answered HTTP {}", got.status))),
            Err(e) => return Some(Err(format!("could not list messages: {e}"))),
        };
        let Ok(list) = serde_json::from_slice::<Value>(&got.bytes) else {
            return Some(Err("the message list is not JSON".to_owned()));
        };
        let since = d.message.created_at.unix_micros() / 1_000_000 - CLOCK_SLACK_S;
        let mut found: Vec<(i64, String)> = list
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|m| m.get("direction").and_then(Value::as_str).is_none_or(|dir| dir.starts_with("outbound")))
            .filter(|m| m.get("body").and_then(Value::as_str) == Some(d.message.text.as_str()))
            .filter(|m| match service {
                Some(service) => m.get("messaging_service_sid").and_then(Value::as_str) == Some(service),
                None => true,
            })
            .filter_map(|m| {
                let created = m.get("date_created").and_then(Value::as_str)?;
                let created =
                    time::OffsetDateTime::parse(created, &time::format_description::well_known::Rfc2822).ok()?;
                let sid = m.get("sid").and_then(Value::as_str)?;
                (created.unix_timestamp() >= since).then(|| (created.unix_timestamp(), sid.to_owned()))
            })
            .collect();
        found.sort();
        Some(Ok(found.into_iter().map(|(_, sid)| sid).collect()))
    }
}

/// A Content API item WhatsApp approved, as Parley shows it: its
/// `approval_requests` (or `approval_requests.whatsapp`) says `approved`;
/// its body is its `twilio/text` type's, else the first type with one.
fn approved_template(item: &Value) -> Option<ApprovedTemplate> {
    let approval = item.get("approval_requests")?;
    let status = approval.get("status").or_else(|| approval.pointer("/whatsapp/status")).and_then(Value::as_str)?;
    if !status.eq_ignore_ascii_case("approved") {
        return None;
    }
    let sid = item.get("sid").and_then(Value::as_str).filter(|s| s.len() == 34 && s.starts_with("HX"))?;
    let types = item.get("types").and_then(Value::as_object);
    let body = types
        .and_then(|t| t.get("twilio/text").or_else(|| t.values().find(|v| v.get("body").is_some())))
        .and_then(|t| t.get("body"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let variables = item
        .get("variables")
        .and_then(Value::as_object)
        .map(|v| v.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned())).collect())
        .unwrap_or_default();
    let text = |key: &str| item.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    Some(ApprovedTemplate {
        content_sid: sid.to_owned(),
        name: text("friendly_name"),
        language: text("language"),
        body: body.to_owned(),
        variables,
    })
}

/// A refusal in words: the status, then Twilio's error document
/// (`{"code": 21211, "message": "…", "more_info": "…", "status": 400}`).
fn twilio_error(reply: &parley_events::post::Reply, body: &Value) -> String {
    let mut error = reply.error().unwrap_or_else(|| format!("HTTP {}", reply.status));
    if let Some(code) = body.get("code").and_then(Value::as_i64) {
        error = format!("{error}: Twilio error {code}");
    }
    if let Some(message) = body.get("message").and_then(Value::as_str) {
        error = format!("{error}: {}", message.chars().take(300).collect::<String>());
    }
    error
}
