//! The `telegram` channel: a bot, through the Telegram Bot API (or any
//! server that speaks it: the `base_url` setting).
//!
//! - Updates arrive by webhook (`updates: "webhook"`, the default): the
//!   channel's check calls `setWebhook` with the hook URL
//!   `/hooks/telegram/{public_id}` and a `secret_token` derived from the bot
//!   token, which Telegram sends back in `X-Telegram-Bot-Api-Secret-Token`
//!   and which is checked before anything is read. Or by long polling
//!   (`updates: "polling"`): a job calls `getUpdates` in turn
//!   ([`Connector::poll`]), for servers Telegram cannot reach.
//! - Sending: `sendMessage` with the text rendered to Telegram's HTML subset
//!   (everything escaped; only the lightweight markup becomes tags), and
//!   files with `sendPhoto` (images) or `sendDocument`, by their signed links.
//! - Files arriving (photos, documents) are fetched with `getFile`.
//! - A message in a group or supergroup belongs to the group's
//!   conversation (`kind: group`); its sender is a contact of their own.

use std::time::Duration;

use futures::future::BoxFuture;
use hmac::{Hmac, Mac};
use parley_domain::channel::ChannelType;
use parley_domain::validation::{FieldError, LocPart, Parsed, loc, one_of, string};
use serde_json::{Map, Value, json};

use crate::{
    Check, Checked, Connector, Credentials, Delivered, Delivery, FetchFile, Fetched, FileSource, Hook, Inbound,
    InboundContact, InboundFile, InboundGroup, InboundRequest, Incoming, Poll, Polled, Refused,
};

/// The Bot API's root, when a channel names no other.
pub const TELEGRAM_API: &str = "https://api.telegram.org";
/// The longest text `sendMessage` takes.
const MAX_TEXT_CHARS: usize = 4096;
/// The longest caption of a photo or document.
const MAX_CAPTION_CHARS: usize = 1024;
/// Bytes of the Bot API's answer read.
const REPLY_LIMIT: usize = 64 * 1024;
/// How long one `getUpdates` waits for updates.
pub const POLL_WAIT: Duration = Duration::from_secs(20);
const BOT_TOKEN: &str = "^[0-9]{1,20}:[A-Za-z0-9_-]{20,100}$";

pub(crate) struct TelegramConnector;

/// The `secret_token` Telegram is asked to send with each update: derived
/// from the bot token (only its holder can compute it), in the characters
/// Telegram allows.
pub fn webhook_secret(bot_token: &str) -> String {
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(bot_token.as_bytes()).expect("HMAC takes any key");
    mac.update(b"parley telegram webhook");
    mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
}

fn token(secrets: &Map<String, Value>) -> Option<&str> {
    secrets.get("bot_token").and_then(Value::as_str)
}

fn base(config: &Map<String, Value>) -> &str {
    config.get("base_url").and_then(Value::as_str).unwrap_or(TELEGRAM_API)
}

fn polls(config: &Map<String, Value>) -> bool {
    config.get("updates").and_then(Value::as_str) == Some("polling")
}

/// What one Bot API call came to.
enum Answer {
    /// `ok: true`, with its `result`.
    Ok(Value),
    /// Refused: Telegram's error code, description and `retry_after`.
    Refused { status: u16, error: String, retry_after: Option<Duration> },
    /// No answer (unreachable, timed out).
    Unreachable(String),
}

/// One call of `method` with a JSON body. The bot token is part of the URL,
/// so no error here ever names the URL.
async fn call(
    client: &reqwest::Client,
    timeout: Duration,
    allow_private: bool,
    config: &Map<String, Value>,
    bot_token: &str,
    method: &str,
    body: &Value,
) -> Answer {
    let url = format!("{}/bot{bot_token}/{method}", base(config));
    let reply = match parley_events::post::post_json(client, timeout, &url, body, allow_private, REPLY_LIMIT).await {
        Ok(reply) => reply,
        Err(e) => return Answer::Unreachable(e.replace(bot_token, "<bot token>")),
    };
    let body: Value = serde_json::from_str(&reply.body).unwrap_or(Value::Null);
    if reply.succeeded() && body.get("ok") == Some(&Value::Bool(true)) {
        return Answer::Ok(body.get("result").cloned().unwrap_or(Value::Null));
    }
    // Telegram's `description`; a compatible server's `message`, or its words.
    let description = body
        .get("description")
        .or(body.get("message"))
        .and_then(Value::as_str)
        .map_or_else(|| reply.body.trim().to_owned(), str::to_owned);
    let code = body.get("error_code").and_then(Value::as_u64).map_or(reply.status, |c| c as u16);
    let retry_after =
        body.pointer("/parameters/retry_after").and_then(Value::as_u64).map(Duration::from_secs).or(reply.retry_after);
    Answer::Refused {
        status: code,
        error: format!("Telegram error {code}: {}", description.chars().take(300).collect::<String>()),
        retry_after,
    }
}

/// The Bot API's answer to a send, as the courier takes it.
fn delivered(answer: Answer) -> Result<Value, Delivered> {
    match answer {
        Answer::Ok(result) => Ok(result),
        Answer::Unreachable(error) => Err(Delivered::Retry { error, after: None }),
        Answer::Refused { status, error, retry_after } => Err(match status {
            429 | 500..=599 => Delivered::Retry { error, after: retry_after },
            // 401: the token was revoked. (403 is a user who blocked the
            // bot: that message fails, the channel is fine.)
            401 | 404 => Delivered::CredentialsRefused { error },
            _ => Delivered::Failed { error },
        }),
    }
}

impl Connector for TelegramConnector {
    fn kind(&self) -> ChannelType {
        ChannelType::Telegram
    }
    fn secret_settings(&self) -> &'static [&'static str] {
        &["bot_token"]
    }
    fn needed_settings(&self) -> &'static [&'static str] {
        &["bot_token"]
    }
    fn parse_setting(&self, name: &str, value: Value, at: &[LocPart]) -> Option<Parsed<Value>> {
        Some(match name {
            "bot_token" => string(1, 128)(value, at).and_then(|t| {
                if regex::Regex::new(BOT_TOKEN).is_ok_and(|r| r.is_match(&t)) {
                    Ok(Value::String(t))
                } else {
                    Err(vec![FieldError::new(
                        at.to_vec(),
                        "value_error.pattern",
                        "must be a bot token as @BotFather gives it (123456:ABC-…)",
                    )])
                }
            }),
            "updates" => one_of(&["webhook", "polling"])(value, at).map(Value::String),
            "base_url" => string(1, 2048)(value, at).and_then(|u| {
                parley_events::ssrf::parse_target(&u)
                    .map(|u| Value::String(u.as_str().trim_end_matches('/').to_owned()))
                    .map_err(|e| vec![FieldError::new(at.to_vec(), "value_error.url", e.to_string())])
            }),
            _ => return None,
        })
    }
    fn settings_schema(&self) -> utoipa::openapi::Object {
        use parley_domain::schema::{nullable, string, string_enum};
        parley_domain::schema::closed_object(vec![
            (
                "bot_token",
                nullable(string(1, 128).pattern(Some(BOT_TOKEN)).build()).into(),
                "Secret, write-only: the bot's token from @BotFather.",
            ),
            (
                "updates",
                nullable(string_enum(&["webhook", "polling"])).into(),
                "How updates arrive: `webhook` (default; Telegram calls this server's public URL) or `polling` (Parley asks with getUpdates, for servers Telegram cannot reach).",
            ),
            (
                "base_url",
                parley_domain::schema::nullable_url().into(),
                "The Bot API's root (a local Bot API server); https://api.telegram.org without it.",
            ),
        ])
    }
    fn webhook_paths(&self) -> &'static [(&'static str, &'static str)] {
        &[("Bot webhook (Parley registers it with Telegram itself)", "/hooks/telegram/{public_id}")]
    }
    fn signs_traffic(&self) -> bool {
        false
    }
    fn public_prefix(&self) -> &'static str {
        "tg"
    }
    fn outbound_url_settings(&self) -> &'static [&'static str] {
        &["base_url"]
    }
    fn formatted(&self, text: &str) -> Option<String> {
        Some(crate::markup::telegram_html(text))
    }
    fn cannot_send(&self, config: &Map<String, Value>) -> Option<String> {
        // The token is secret (not in `config`): the courier reports its absence.
        let _ = config;
        None
    }
    fn reaches_third_party(&self) -> bool {
        true
    }
    fn refuse_text(&self, text: &str) -> Option<String> {
        let n = text.chars().count();
        (n > MAX_TEXT_CHARS).then(|| {
            format!(
                "a message on this channel is at most {MAX_TEXT_CHARS} characters (Telegram's limit); this one has {n}"
            )
        })
    }
    fn deliver<'a>(&'a self, d: Delivery<'a>) -> BoxFuture<'a, Delivered> {
        Box::pin(send(d))
    }
    /// `getMe`; then `setWebhook` (webhook updates) or `deleteWebhook`
    /// (polling: Telegram refuses `getUpdates` while a webhook is set).
    fn check<'a>(&'a self, c: Check<'a>) -> BoxFuture<'a, Checked> {
        Box::pin(async move {
            let config = &c.channel.config;
            let Some(bot_token) = token(c.secrets) else {
                return Checked::Refused("the channel has no bot_token".to_owned());
            };
            let me = call(c.client, c.timeout, c.allow_private, config, bot_token, "getMe", &json!({})).await;
            let name = match me {
                Answer::Ok(me) => me.get("username").and_then(Value::as_str).unwrap_or("the bot").to_owned(),
                Answer::Refused { status: 401 | 404, error, .. } => return Checked::Refused(error),
                Answer::Refused { error, .. } | Answer::Unreachable(error) => return Checked::Unreachable(error),
            };
            let (method, body, how) = if polls(config) {
                ("deleteWebhook", json!({}), "updates by polling".to_owned())
            } else {
                let url = format!("{}/hooks/telegram/{}", c.public_url, c.public_id);
                let body = json!({"url": url, "secret_token": webhook_secret(bot_token),
                    "allowed_updates": ["message"]});
                ("setWebhook", body, format!("updates by webhook to {url}"))
            };
            match call(c.client, c.timeout, c.allow_private, config, bot_token, method, &body).await {
                Answer::Ok(_) => Checked::Works(format!("Telegram accepted the token of @{name}; {how}")),
                Answer::Refused { status: 401 | 404, error, .. } => Checked::Refused(error),
                Answer::Refused { error, .. } | Answer::Unreachable(error) => {
                    Checked::Unreachable(format!("@{name} works, but {method} failed: {error}"))
                }
            }
        })
    }
    fn registers_hooks(&self) -> bool {
        true
    }
    fn hooks(&self) -> &'static [Hook] {
        &[Hook::Message]
    }
    fn authenticates_by_headers(&self) -> bool {
        true
    }
    fn authenticate(&self, req: &InboundRequest<'_>, creds: &Credentials<'_>, _now_s: i64) -> Result<(), Refused> {
        let refused = || Refused("Invalid secret: X-Telegram-Bot-Api-Secret-Token does not match".to_owned());
        let bot_token = token(creds.secrets).ok_or_else(refused)?;
        let given = req.headers.get("x-telegram-bot-api-secret-token").ok_or_else(refused)?;
        let expected = webhook_secret(bot_token);
        // Compared as MACs are: in time independent of where they differ.
        let same = given.as_bytes().len() == expected.len()
            && given.as_bytes().iter().zip(expected.as_bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
        if same { Ok(()) } else { Err(refused()) }
    }
    fn read(&self, _hook: Hook, req: &InboundRequest<'_>, _config: &Map<String, Value>) -> Parsed<Incoming> {
        let update: Value = serde_json::from_slice(req.body)
            .map_err(|_| vec![FieldError::new(loc(&["body"]), "value_error.json", "the body is not JSON")])?;
        read_update(&update)
    }
    fn fetch_file<'a>(&'a self, f: FetchFile<'a>) -> BoxFuture<'a, Result<Fetched, String>> {
        Box::pin(async move {
            let config = &f.channel.config;
            let bot_token = token(f.secrets).ok_or("the channel has no bot_token")?;
            let file = match call(
                f.client,
                f.timeout,
                f.allow_private,
                config,
                bot_token,
                "getFile",
                &json!({"file_id": f.reference}),
            )
            .await
            {
                Answer::Ok(file) => file,
                Answer::Refused { error, .. } | Answer::Unreachable(error) => return Err(error),
            };
            let path = file.get("file_path").and_then(Value::as_str).ok_or("Telegram gave no file_path")?;
            let url = format!("{}/file/bot{bot_token}/{path}", base(config));
            let got = parley_events::post::download(f.client, f.timeout, &url, None, f.allow_private, f.max_bytes)
                .await
                .map_err(|e| e.replace(bot_token, "<bot token>"))?;
            if !(200..300).contains(&got.status) {
                return Err(format!("Telegram answered HTTP {} for the file", got.status));
            }
            Ok(Fetched { bytes: got.bytes, content_type: None })
        })
    }
    fn polls(&self, config: &Map<String, Value>) -> bool {
        polls(config)
    }
    /// `getUpdates` from the cursor (the next `update_id`), waiting up to
    /// [`POLL_WAIT`] for one; the updates seen are confirmed by the next call's offset.
    fn poll<'a>(&'a self, p: Poll<'a>) -> BoxFuture<'a, Result<Polled, Delivered>> {
        Box::pin(async move {
            let config = &p.channel.config;
            let Some(bot_token) = token(p.secrets) else {
                return Err(Delivered::CredentialsRefused { error: "the channel has no bot_token".to_owned() });
            };
            let mut body = json!({"timeout": POLL_WAIT.as_secs(), "allowed_updates": ["message"], "limit": 100});
            if let Some(offset) = p.cursor.and_then(|c| c.parse::<i64>().ok()) {
                body["offset"] = json!(offset);
            }
            let timeout = p.timeout + POLL_WAIT;
            let result =
                delivered(call(p.client, timeout, p.allow_private, config, bot_token, "getUpdates", &body).await)?;
            let updates = result.as_array().cloned().unwrap_or_default();
            let next = updates.iter().filter_map(|u| u.get("update_id").and_then(Value::as_i64)).max().map(|id| id + 1);
            let incoming = updates
                .iter()
                .filter_map(|u| read_update(u).ok())
                .filter(|i| !matches!(i, Incoming::Ignored))
                .collect();
            Ok(Polled { incoming, cursor: next.map(|n| n.to_string()).or(p.cursor.map(str::to_owned)) })
        })
    }
}

/// An update, as the webhook and `getUpdates` give it: a new message, or
/// something Parley does not take (an edit, a member change).
fn read_update(update: &Value) -> Parsed<Incoming> {
    let bad = |field: &str, msg: &str| vec![FieldError::new(loc(&["body", field]), "value_error", msg.to_owned())];
    if update.get("update_id").and_then(Value::as_i64).is_none() {
        return Err(bad("update_id", "not an update"));
    }
    let Some(message) = update.get("message") else { return Ok(Incoming::Ignored) };
    let chat = message.get("chat").ok_or_else(|| bad("message", "a message without a chat"))?;
    let chat_id = chat.get("id").and_then(Value::as_i64).ok_or_else(|| bad("message", "a chat without an id"))?;
    let message_id =
        message.get("message_id").and_then(Value::as_i64).ok_or_else(|| bad("message", "no message_id"))?;
    // Posts in channels have no sender; neither do service messages Parley keeps.
    let Some(sender) = message.get("from") else { return Ok(Incoming::Ignored) };
    let sender_id = sender.get("id").and_then(Value::as_i64).ok_or_else(|| bad("message", "a sender without an id"))?;
    let name = [sender.get("first_name"), sender.get("last_name")]
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    let name = if name.trim().is_empty() {
        sender.get("username").and_then(Value::as_str).unwrap_or_default().to_owned()
    } else {
        name
    };
    let mut attachments = Vec::new();
    // A photo comes in several sizes: the largest is kept.
    if let Some(photo) = message
        .get("photo")
        .and_then(Value::as_array)
        .and_then(|sizes| sizes.iter().max_by_key(|s| s.get("width").and_then(Value::as_i64).unwrap_or(0)))
        && let Some(file_id) = photo.get("file_id").and_then(Value::as_str)
    {
        let unique = photo.get("file_unique_id").and_then(Value::as_str).unwrap_or("photo");
        attachments.push(InboundFile {
            filename: format!("photo-{unique}.jpg"),
            content_type: "image/jpeg".to_owned(),
            source: FileSource::Remote(file_id.to_owned()),
        });
    }
    if let Some(document) = message.get("document")
        && let Some(file_id) = document.get("file_id").and_then(Value::as_str)
    {
        let content_type = document.get("mime_type").and_then(Value::as_str).unwrap_or("application/octet-stream");
        let filename = document
            .get("file_name")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("document{}", crate::extension_for(content_type)));
        attachments.push(InboundFile {
            filename: filename.chars().take(255).collect(),
            content_type: content_type.to_ascii_lowercase(),
            source: FileSource::Remote(file_id.to_owned()),
        });
    }
    let text = message.get("text").or(message.get("caption")).and_then(Value::as_str).map(str::to_owned);
    let text = match text {
        Some(text) if !text.trim().is_empty() => text.chars().take(10_000).collect(),
        _ if !attachments.is_empty() => {
            let names: Vec<&str> = attachments.iter().map(|a| a.filename.as_str()).collect();
            format!("[{}]", names.join(", "))
        }
        // Stickers, locations, polls…: not taken.
        _ => return Ok(Incoming::Ignored),
    };
    let group = match chat.get("type").and_then(Value::as_str) {
        Some("group" | "supergroup") => Some(InboundGroup {
            address: chat_id.to_string(),
            title: chat.get("title").and_then(Value::as_str).unwrap_or("Telegram group").chars().take(200).collect(),
        }),
        _ => None,
    };
    Ok(Incoming::Message(Inbound {
        from: sender_id.to_string(),
        text,
        // Message ids count per chat.
        external_id: format!("{chat_id}:{message_id}"),
        contact: (!name.trim().is_empty())
            .then(|| InboundContact { display_name: Some(name.chars().take(200).collect()) }),
        attachments,
        consent: None,
        group,
        details: Default::default(),
        unverified_sender: false,
        answers: Vec::new(),
    }))
}

/// Sends the text (with a lone file as its caption when it fits), then
/// each further file; the message's id is the text's (`chat:message`).
async fn send(d: Delivery<'_>) -> Delivered {
    let config = &d.channel.config;
    let Some(bot_token) = token(d.secrets) else {
        return Delivered::Failed { error: "the channel has no bot_token".to_owned() };
    };
    let html = crate::markup::telegram_html(&d.message.text);
    let files: Vec<_> = d.message.attachments.iter().filter_map(|a| Some((a, a.url.as_deref()?))).collect();
    let caption_fits = files.len() == 1 && d.message.text.chars().count() <= MAX_CAPTION_CHARS;
    let mut first = None;
    if !caption_fits {
        let body = json!({"chat_id": d.to, "text": html, "parse_mode": "HTML",
            "link_preview_options": {"is_disabled": true}});
        match delivered(call(d.client, d.timeout, d.allow_private, config, bot_token, "sendMessage", &body).await) {
            Ok(sent) => first = Some(sent),
            Err(outcome) => return outcome,
        }
    }
    for (i, (file, link)) in files.iter().enumerate() {
        let (method, field) =
            if file.content_type.starts_with("image/") { ("sendPhoto", "photo") } else { ("sendDocument", "document") };
        let mut body = json!({"chat_id": d.to, field: link});
        if caption_fits && i == 0 {
            body["caption"] = json!(html);
            body["parse_mode"] = json!("HTML");
        }
        match delivered(call(d.client, d.timeout, d.allow_private, config, bot_token, method, &body).await) {
            Ok(sent) => {
                first.get_or_insert(sent);
            }
            // Before anything went out, the whole message can be retried.
            Err(outcome) if first.is_none() => return outcome,
            // After, a retry would send the text twice: the message fails
            // naming the file that did not go.
            Err(outcome) => {
                let error = outcome.error().unwrap_or("refused");
                return Delivered::Failed {
                    error: format!("the text was sent, but {} was not: {error}", file.filename),
                };
            }
        }
    }
    let external_id = first.and_then(|sent| {
        let chat = sent.pointer("/chat/id").and_then(Value::as_i64)?;
        let id = sent.get("message_id").and_then(Value::as_i64)?;
        Some(format!("{chat}:{id}"))
    });
    Delivered::Sent { external_id }
}
