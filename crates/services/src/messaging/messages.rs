//! Sending messages, and their delivery status.
//!
//! [`send`] stores an outbound message as `queued` and puts it on the
//! durable queue in the caller's transaction, so once the API has answered
//! 202 the message survives a crash; the courier sends it. Status moves
//! forward only: queued → sent → delivered → read, or failed.

use parley_domain::Scope;
use parley_domain::channel::ChannelType;
use parley_domain::contact::Identity;
use parley_domain::conversation::{
    Attachment, Author, AuthorType, Conversation, ConversationStatus, Direction, Handler, Message, MessageStatus,
    Template,
};
use parley_domain::event::EventType;
use parley_domain::ids::MessageId;
use parley_domain::validation::{FieldError, Parsed, enum_value, integer, loc, parse_object, string};
use parley_store::Tx;
use parley_store::repo::channels::{self as channel_repo, ChannelRow};
use parley_store::repo::conversations as repo;
use parley_store::repo::events;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::messaging::conversations;
use crate::{ServiceError, ServiceResult, Services, event_data};
use parley_connectors::{Hook, InboundRequest, Incoming, connector};

/// Where a message goes: exactly one of the three forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recipient {
    Conversation(i64),
    /// A channel connection and the address on it.
    ChannelAddress {
        channel_id: i64,
        to: String,
    },
    /// A contact, on a channel type (their open conversation there, or their address).
    ContactChannel {
        contact_id: i64,
        channel: ChannelType,
    },
}

/// `POST /api/v1/messages`.
#[derive(Debug, Clone)]
pub struct SendMessage {
    /// Reply in this conversation…
    pub conversation_id: Option<i64>,
    /// …or write to `to` on this channel connection…
    pub channel_id: Option<i64>,
    /// The address on the channel (phone, email, visitor or your own id).
    pub to: Option<String>,
    /// …or write to this contact on a `channel` type.
    pub contact_id: Option<i64>,
    /// With `contact_id`.
    pub channel: Option<ChannelType>,
    /// 1–10,000 characters.
    pub text: String,
    /// Up to 10 files, kept in object storage and shown with download links.
    pub attachments: Option<Vec<AttachmentInput>>,
    /// WhatsApp: an approved template, sent instead of free text (required
    /// outside the 24-hour window); `text` is the conversation's copy.
    pub template: Option<Template>,
    /// Email: the subject (a reply keeps its thread's, with `Re:`).
    pub subject: Option<String>,
    pub recipient: Recipient,
}

impl utoipa::PartialSchema for SendMessage {
    /// One shape per way of addressing: a conversation; a channel
    /// connection and an address on it; a contact and a channel type.
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use parley_domain::schema::{id, string, string_enum};
        use utoipa::openapi::schema::{AdditionalProperties, ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
        let shape = |title: &str, fields: Vec<(&str, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>| {
            let mut o = ObjectBuilder::new().schema_type(Type::Object).title(Some(title.to_owned()));
            for (name, schema) in fields {
                o = o.property(name, schema).required(name);
            }
            o.property("text", string(1, 10_000).description(Some("1–10,000 characters.")))
                .required("text")
                .property(
                    "attachments",
                    ArrayBuilder::new()
                        .items(utoipa::openapi::Ref::from_schema_name("AttachmentInput"))
                        .max_items(Some(10))
                        .description(Some("Up to 10 files, kept in object storage and shown with download links.")),
                )
                .property("template", template_schema())
                .property(
                    "subject",
                    string(1, 998).pattern(Some(SUBJECT)).description(Some(
                        "Email channels only: the subject. Without it a reply takes its thread's subject (`Re: …`) and a new thread the channel's name.",
                    )),
                )
                .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        };
        OneOfBuilder::new()
            .description(Some("Exactly one way of addressing the message, and its text."))
            .examples([serde_json::json!({"conversation_id": 1, "text": "Your order has shipped."})])
            .item(shape("reply in a conversation", vec![("conversation_id", id("The conversation.").into())]))
            .item(shape(
                "write to an address on a channel connection",
                vec![
                    ("channel_id", id("The channel connection.").into()),
                    (
                        "to",
                        string(1, 255)
                            .description(Some("The address on the channel (phone, email, visitor or your own id)."))
                            .into(),
                    ),
                ],
            ))
            .item(shape(
                "write to a contact on a channel type",
                vec![("contact_id", id("The contact.").into()), ("channel", string_enum(ChannelType::ALL).into())],
            ))
            .into()
    }
}

/// `template` on a send: the Content API's SID and the placeholders' values.
fn template_schema() -> utoipa::openapi::schema::Object {
    use parley_domain::schema::string;
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .description(Some(
            "WhatsApp channels only: an approved template (Twilio Content API), sent instead of free text. \
             Required outside WhatsApp's 24-hour customer-service window (the contact has not written in the last \
             24 hours); `text` is then the conversation's copy of what the template says.",
        ))
        .property(
            "content_sid",
            string(34, 34).pattern(Some(TEMPLATE_SID)).description(Some("The template's SID (HX…).")),
        )
        .required("content_sid")
        .property(
            "variables",
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .max_properties(Some(MAX_TEMPLATE_VARIABLES))
                .property_names(Some(string(1, 64)))
                .additional_properties(Some(AdditionalProperties::RefOr(string(0, 1600).into())))
                .description(Some(
                    "The placeholders' values by name (`{\"1\": \"Ana\"}`); up to 100, each at most 1,600 characters.",
                )),
        )
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .build()
}

/// A subject: one line, no control characters (no header injection).
const SUBJECT: &str = r"^[^\x00-\x1f\x7f]+$";
const TEMPLATE_SID: &str = "^HX[0-9a-fA-F]{32}$";
const MAX_TEMPLATE_VARIABLES: usize = 100;

fn template(v: Value, at: &[parley_domain::validation::LocPart]) -> Parsed<Template> {
    parley_domain::validation::object(|r| {
        let content_sid = r.required("content_sid", string(34, 34)).and_then(|sid| {
            if regex::Regex::new(TEMPLATE_SID).is_ok_and(|p| p.is_match(&sid)) {
                Some(sid)
            } else {
                r.push_error(FieldError::new(
                    r.loc_of("content_sid"),
                    "value_error.pattern",
                    "must be a content SID (HX and 32 hex digits)",
                ));
                None
            }
        });
        let variables = r.optional("variables", |v, at| {
            let bad = || {
                vec![FieldError::new(
                    at.to_vec(),
                    "value_error.template.variables",
                    "an object of at most 100 names (1–64 characters) with string values of at most 1,600 characters",
                )]
            };
            let Value::Object(map) = v else { return Err(vec![FieldError::wrong_type(at.to_vec(), "dict")]) };
            if map.iter().any(|(k, v)| k.contains('\0') || parley_domain::validation::contains_nul(v)) {
                return Err(vec![FieldError::new(
                    at.to_vec(),
                    "value_error.string.nul",
                    "String should not contain NUL (\\u0000) characters",
                )]);
            }
            if map.len() > MAX_TEMPLATE_VARIABLES {
                return Err(bad());
            }
            let mut out = std::collections::BTreeMap::new();
            for (k, v) in map {
                match v {
                    Value::String(s) if (1..=64).contains(&k.chars().count()) && s.chars().count() <= 1600 => {
                        out.insert(k, s);
                    }
                    _ => return Err(bad()),
                }
            }
            Ok(out)
        });
        Some(Template { content_sid: content_sid?, variables: variables.unwrap_or_default() })
    })(v, at)
}

impl utoipa::ToSchema for SendMessage {
    fn schemas(schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
        schemas.push(("AttachmentInput".into(), <AttachmentInput as utoipa::PartialSchema>::schema()));
    }
}

/// A file to send with a message.
#[derive(Debug, Clone, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachmentInput {
    /// 1–255 characters.
    #[schema(min_length = 1, max_length = 255)]
    pub filename: String,
    /// A MIME type such as `image/png`.
    #[schema(min_length = 3, max_length = 100, pattern = r"^\s*[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+\s*$")]
    pub content_type: String,
    /// The file's bytes, base64-encoded, at least one byte (the request body
    /// limit, `limits.max_body_bytes`, bounds the total).
    #[schema(value_type = String, format = Byte, min_length = 4)]
    pub data: Vec<u8>,
}

fn attachment(v: Value, at: &[parley_domain::validation::LocPart]) -> Parsed<AttachmentInput> {
    parley_domain::validation::object(|r| {
        let filename = r.required("filename", string(1, 255));
        let content_type = r.required("content_type", string(3, 100)).and_then(|t| {
            let t = t.trim().to_ascii_lowercase();
            let token =
                |p: &str| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || "!#$&^_.+-".contains(c));
            match t.split_once('/') {
                Some((a, b)) if token(a) && token(b) => Some(t),
                _ => {
                    r.push_error(FieldError::new(
                        r.loc_of("content_type"),
                        "value_error.content_type",
                        "a MIME type such as image/png",
                    ));
                    None
                }
            }
        });
        let data = r.required("data", string(1, usize::MAX)).and_then(|d| {
            use base64::Engine;
            match base64::engine::general_purpose::STANDARD.decode(d.trim()) {
                Ok(bytes) if !bytes.is_empty() => Some(bytes),
                _ => {
                    r.push_error(FieldError::new(r.loc_of("data"), "value_error.base64", "non-empty base64 data"));
                    None
                }
            }
        });
        Some(AttachmentInput { filename: filename?, content_type: content_type?, data: data? })
    })(v, at)
}

pub fn parse_send(body: Value) -> Parsed<SendMessage> {
    parse_object(body, loc(&["body"]), |r| {
        let conversation_id = r.optional("conversation_id", integer(1, i64::MAX));
        let channel_id = r.optional("channel_id", integer(1, i64::MAX));
        let to = r.optional("to", string(1, 255));
        let contact_id = r.optional("contact_id", integer(1, i64::MAX));
        let channel = r.optional("channel", enum_value::<ChannelType>());
        let text = r.required("text", string(1, 10_000));
        let attachments = r.optional("attachments", parley_domain::validation::list_of(10, attachment));
        let template = r.optional("template", template);
        let subject = r.optional("subject", string(1, 998)).and_then(|s| {
            if regex::Regex::new(SUBJECT).is_ok_and(|p| p.is_match(&s)) {
                Some(s)
            } else {
                r.push_error(FieldError::new(
                    r.loc_of("subject"),
                    "value_error.pattern",
                    "a subject has no control characters (such as CR or LF)",
                ));
                None
            }
        });
        let recipient = match (conversation_id, channel_id, &to, contact_id, &channel) {
            (Some(id), None, None, None, None) => Some(Recipient::Conversation(id)),
            (None, Some(channel_id), Some(to), None, None) => {
                Some(Recipient::ChannelAddress { channel_id, to: to.clone() })
            }
            (None, None, None, Some(contact_id), Some(channel)) => {
                Some(Recipient::ContactChannel { contact_id, channel: *channel })
            }
            _ => {
                // Field errors (if any) already say what is wrong with a field.
                if !r.has_errors() {
                    r.push_error(FieldError::new(
                        loc(&["body"]),
                        "value_error.message.recipient",
                        "send exactly one of: conversation_id; channel_id and to; contact_id and channel",
                    ));
                }
                None
            }
        };
        Some(SendMessage {
            conversation_id,
            channel_id,
            to,
            contact_id,
            channel,
            text: text?,
            attachments,
            template,
            subject,
            recipient: recipient?,
        })
    })
}

/// Who is sending: a signed-in user, or the workspace's systems (an API key)
/// writing as the conversation's agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    User(i64),
    Agent,
}

fn not_found(id: i64) -> ServiceError {
    ServiceError::not_found("Message", id)
}

fn field_not_found(field: &str, what: String) -> ServiceError {
    ServiceError::Validation(vec![FieldError::not_found(loc(&["body", field]), &what)])
}

/// Whether an agent may write in the conversation now: not while a human
/// handles it or a handoff to a human waits (`handler` human or none).
pub fn agent_may_reply(conversation: &Conversation) -> bool {
    conversation.handler == Handler::Agent
}

/// Queues a message (see the module comment); 202 with the `queued` message.
/// Its files were stored before the transaction ([`send_answered`]): a
/// `SendMessage` that still carries them is refused.
pub async fn send(
    tx: &mut Tx,
    svc: &Services,
    scope: Scope,
    sender: Sender,
    input: SendMessage,
    attachments: &[Attachment],
) -> ServiceResult<Message> {
    if input.attachments.as_ref().is_some_and(|files| !files.is_empty()) {
        return Err(ServiceError::invariant("a message's files are stored before its transaction (send_answered)"));
    }
    let (conversation, channel) = match input.recipient.clone() {
        Recipient::Conversation(id) => {
            // An agent's reply holds the conversation until it commits, so
            // that a person taking it over meanwhile is seen, never overtaken.
            let found = match sender {
                Sender::Agent => repo::get_locked(tx, scope, id).await?,
                _ => repo::get(tx, scope, id).await?,
            };
            let conversation = found.ok_or_else(|| ServiceError::not_found("Conversation", id))?;
            let channel = channel_of(tx, scope, &conversation).await?;
            (conversation, channel)
        }
        Recipient::ChannelAddress { channel_id, to } => {
            let channel = channel_repo::get(tx, scope, channel_id)
                .await?
                .ok_or_else(|| field_not_found("channel_id", format!("Channel {channel_id}")))?;
            let identity =
                Identity::parse(channel.kind, &to, svc.config.contacts.default_region).map_err(|(kind, msg)| {
                    ServiceError::Validation(vec![FieldError::new(loc(&["body", "to"]), kind, msg)])
                })?;
            let conversation = conversations::find_or_open(tx, svc, scope, &channel, &identity, None).await?.0;
            (conversation, channel)
        }
        Recipient::ContactChannel { contact_id, channel } => to_contact(tx, svc, scope, contact_id, channel).await?,
    };
    let id = conversation.item.id;
    if conversation.status == ConversationStatus::Closed {
        return Err(ServiceError::Conflict(format!("Conversation {id} is closed; start a new one")));
    }
    if sender == Sender::Agent && !agent_may_reply(&conversation) {
        return Err(ServiceError::Conflict(format!(
            "Conversation {id} is handled by a human (handler: {}); agents do not reply until the handoff completes",
            conversation.handler.as_str()
        )));
    }
    if channel.status != parley_domain::channel::ChannelStatus::Active {
        return Err(ServiceError::Conflict(format!("Channel {} is {}; it cannot send", channel.id, channel.status)));
    }
    let kind = connector(channel.kind).ok_or_else(|| {
        ServiceError::Conflict(format!("Channel {} is of a type this version cannot send on", channel.id))
    })?;
    if input.subject.is_some() && !kind.takes_subject() {
        return Err(ServiceError::Validation(vec![FieldError::new(
            loc(&["body", "subject"]),
            "value_error.subject.channel",
            format!("{} channels have no subject; only email channels do", kind.kind()),
        )]));
    }
    if let Some(why) = kind.cannot_send(&channel.config.0) {
        return Err(ServiceError::Conflict(format!("Channel {} cannot send: {why}", channel.id)));
    }
    if let Some(why) = kind.refuse_text(&input.text) {
        return Err(ServiceError::Validation(vec![FieldError::new(
            loc(&["body", "text"]),
            "value_error.text.channel_limit",
            why,
        )]));
    }
    check_template(tx, scope, kind, &conversation, input.template.as_ref()).await?;
    if let Some(keyword) = repo::opted_out(tx, scope, channel.id, &conversation.item.channel_ref).await? {
        return Err(ServiceError::Conflict(format!(
            "{} opted out of messages from channel {} (they wrote {keyword}); they can opt back in by writing START",
            conversation.item.channel_ref, channel.id
        )));
    }
    let previous = match kind.threads() {
        true => repo::latest_message(tx, scope, id).await?.map(|m| m.details),
        false => None,
    };
    let mut details = kind.outbound_details(
        &input.text,
        &channel.config.0,
        previous.as_ref(),
        input.subject.as_deref(),
        &channel.name,
    );
    details.template = input.template;
    let author = match sender {
        Sender::User(user_id) => Author { kind: AuthorType::User, id: Some(user_id) },
        Sender::Agent => Author { kind: AuthorType::Agent, id: conversation.agent_id },
    };
    let mut message = repo::insert_message(
        tx,
        scope,
        &repo::NewMessage {
            conversation_id: id,
            channel_id: channel.id,
            direction: Direction::Outbound,
            author,
            text: &input.text,
            status: MessageStatus::Queued,
            external_id: None,
            attachments,
            details: &details,
        },
    )
    .await?;
    claim_attachments(tx, attachments).await?;
    crate::messaging::courier::enqueue(tx, scope, message.id, id, channel.id).await?;
    svc.storage.present(&mut message);
    Ok(message)
}

/// A template only where the channel sends them; outside the channel's
/// customer-service window (WhatsApp's 24 hours since the contact last
/// wrote), nothing but a template.
async fn check_template(
    tx: &mut Tx,
    scope: Scope,
    kind: &dyn parley_connectors::Connector,
    conversation: &Conversation,
    template: Option<&Template>,
) -> ServiceResult<()> {
    let refuse = |code: &str, msg: String| {
        ServiceError::Validation(vec![FieldError::new(loc(&["body", "template"]), code, msg)])
    };
    if template.is_some() && !kind.takes_templates() {
        return Err(refuse(
            "value_error.template.channel",
            format!("{} channels do not send templates; only WhatsApp channels do", kind.kind()),
        ));
    }
    let Some(window) = kind.service_window() else { return Ok(()) };
    if template.is_some() {
        return Ok(());
    }
    let last = repo::last_inbound_at(tx, scope, conversation.item.id).await?;
    let open_since = parley_domain::Timestamp::now().unix_micros() - window.as_micros() as i64;
    if last.is_some_and(|at| at.unix_micros() > open_since) {
        return Ok(());
    }
    let hours = window.as_secs() / 3600;
    Err(refuse(
        "value_error.template.required",
        format!(
            "outside WhatsApp's {hours}-hour customer-service window (the contact {} in the last {hours} hours) only an approved template can be sent: set template",
            if last.is_some() { "has not written" } else { "has never written" }
        ),
    ))
}

/// Writes the files to object storage, staged (see `files::stage`), before
/// the transaction of the message that names them: no transaction waits on
/// storage, and a failed commit leaves an orphan that is removed, never a
/// message whose file is missing. That transaction claims them
/// ([`claim_attachments`]).
pub(crate) async fn store_attachments(
    svc: &Services,
    scope: Scope,
    files: Vec<AttachmentInput>,
) -> ServiceResult<Vec<Attachment>> {
    let mut stored = Vec::with_capacity(files.len());
    let mut objects = Vec::with_capacity(files.len());
    for file in files {
        // The key keeps a tame form of the name, for people browsing the store
        // (never `.` or `..`, which a file system reads as directories).
        let mut tame: String = file
            .filename
            .chars()
            .take(100)
            .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' })
            .collect();
        if tame.chars().all(|c| c == '.') {
            tame = "file".to_owned();
        }
        let key = format!(
            "attachments/{}/{}/{}/{tame}",
            scope.workspace_id,
            if scope.livemode() { "live" } else { "test" },
            ulid::Ulid::new()
        );
        let size = file.data.len() as i64;
        objects.push(crate::files::NewObject {
            key: key.clone(),
            bytes: file.data.into(),
            content_type: file.content_type.clone(),
        });
        stored.push(Attachment {
            filename: file.filename,
            content_type: file.content_type,
            size,
            key,
            url: None,
            expires_at: None,
        });
    }
    crate::files::stage(svc, objects).await?;
    Ok(stored)
}

/// In the transaction of the message that names them: its files are no
/// longer orphans.
pub(crate) async fn claim_attachments(tx: &mut Tx, attachments: &[Attachment]) -> ServiceResult<()> {
    for attachment in attachments {
        crate::files::claim(tx, &attachment.key).await?;
    }
    Ok(())
}

/// Removes stored files no message will name.
pub(crate) async fn discard_attachments(svc: &Services, attachments: &[Attachment]) {
    crate::files::discard(svc, attachments.iter().map(|a| a.key.clone()).collect()).await
}

/// `POST /api/v1/messages` (and MCP's `send_message`): [`send`] in a unit
/// of work, answering 202 with the queued message. Its files are stored
/// first, with no transaction open (once the idempotency key is claimed, so
/// a replay stores nothing), and removed again if the message is not sent.
pub async fn send_answered(
    svc: &Services,
    scope: Scope,
    idem: Option<crate::Idempotent>,
    sender: Sender,
    mut input: SendMessage,
) -> ServiceResult<crate::Answered> {
    let files = input.attachments.take().unwrap_or_default();
    if files.is_empty() {
        return svc
            .write(scope, idem, async |work| {
                crate::Answer::json(202, &send(work, svc, scope, sender, input, &[]).await?)
            })
            .await;
    }
    svc.idempotent(scope, idem, async move |hold| {
        let attachments = store_attachments(svc, scope, files).await?;
        let sent = async {
            let mut work = svc.begin().await?;
            let message = send(&mut work, svc, scope, sender, input, &attachments).await?;
            let answer = crate::Answer::json(202, &message)?;
            if let Some(hold) = &hold {
                hold.complete(&mut work, &answer).await?;
            }
            svc.commit(work).await?;
            Ok(answer)
        }
        .await;
        if sent.is_err() {
            discard_attachments(svc, &attachments).await;
        }
        sent
    })
    .await
}

async fn channel_of(
    c: &mut impl parley_store::AsHandle,
    scope: Scope,
    conversation: &Conversation,
) -> ServiceResult<ChannelRow> {
    channel_repo::get(c, scope, conversation.channel_id).await?.ok_or_else(|| {
        parley_store::StoreError::Corrupt(format!(
            "conversation {} runs on channel {}, which is gone",
            conversation.item.id, conversation.channel_id
        ))
        .into()
    })
}

/// A contact on a channel type: their newest open conversation there, or a
/// new one on the oldest active connection of that type, at their address.
async fn to_contact(
    tx: &mut Tx,
    svc: &Services,
    scope: Scope,
    contact_id: i64,
    channel: ChannelType,
) -> ServiceResult<(Conversation, ChannelRow)> {
    let contact = parley_store::repo::contacts::get(tx, scope, contact_id, false)
        .await?
        .ok_or_else(|| field_not_found("contact_id", format!("Contact {contact_id}")))?;
    if let Some(conversation) = repo::newest_open_for_contact(tx, scope, contact_id, channel.as_str()).await? {
        let row = channel_of(tx, scope, &conversation).await?;
        return Ok((conversation, row));
    }
    let identity = contact.identities.iter().find(|i| i.channel == channel).cloned().or_else(|| {
        match channel {
            ChannelType::Sms | ChannelType::Whatsapp | ChannelType::Voice => contact.normalized_phone.clone(),
            ChannelType::Email => contact.normalized_email.clone(),
            _ => None,
        }
        .map(|address| Identity { channel, address, unverified: false })
    });
    let Some(identity) = identity else {
        return Err(ServiceError::Validation(vec![FieldError::new(
            loc(&["body", "contact_id"]),
            "value_error.contact.no_address",
            format!("Contact {contact_id} has no {channel} address"),
        )]));
    };
    let row = channel_repo::first_active_of_type(tx, scope, channel).await?.ok_or_else(|| {
        ServiceError::Validation(vec![FieldError::new(
            loc(&["body", "channel"]),
            "value_error.channel.none_active",
            format!("The workspace has no active {channel} channel"),
        )])
    })?;
    let conversation = conversations::find_or_open(tx, svc, scope, &row, &identity, None).await?.0;
    Ok((conversation, row))
}

pub async fn get(svc: &Services, scope: Scope, id: MessageId) -> ServiceResult<Message> {
    let id = id.get();
    let mut c = svc.db.read().await?;
    let mut message = repo::get_message(&mut c, scope, id).await?.ok_or_else(|| not_found(id))?;
    svc.storage.present(&mut message);
    Ok(message)
}

/// The event a status change emits.
fn status_event(status: MessageStatus) -> Option<EventType> {
    match status {
        MessageStatus::Sent => Some(EventType::MessageSent),
        MessageStatus::Delivered => Some(EventType::MessageDelivered),
        MessageStatus::Read => Some(EventType::MessageRead),
        MessageStatus::Failed => Some(EventType::MessageFailed),
        MessageStatus::Queued | MessageStatus::Received => None,
    }
}

/// Moves message `id` forward to `status` and emits its event; a report
/// that would move it back (providers report out of order) changes nothing.
/// Returns the message as it now is.
pub async fn advance(
    tx: &mut Tx,
    storage: &crate::files::Storage,
    scope: Scope,
    id: i64,
    status: MessageStatus,
    external_id: Option<&str>,
    error: Option<&str>,
) -> ServiceResult<Message> {
    let (mut message, moved) = match repo::advance_status(tx, scope, id, status, external_id, error).await? {
        Some(moved) => (moved, true),
        None => (repo::get_message(tx, scope, id).await?.ok_or_else(|| not_found(id))?, false),
    };
    storage.present(&mut message);
    if moved && let Some(event) = status_event(status) {
        events::append(tx, scope, event, event_data(&message)?).await?;
    }
    Ok(message)
}

/// What became of a delivery report.
#[derive(Debug)]
pub enum Reported {
    /// Applied to the message it names (status only moves forward).
    Applied(Message),
    /// It names a message whose provider id is not recorded yet: kept, and
    /// applied when the send is recorded (providers that may call back
    /// first; others answer 404).
    Kept,
}

/// Applies an authenticated delivery report for the channel `target` names.
pub async fn report_status(
    svc: &Services,
    target: &crate::messaging::channels::HookChannel,
    request: InboundRequest<'_>,
) -> ServiceResult<Reported> {
    let (scope, channel, incoming) =
        crate::messaging::channels::receive_hook(svc, target, Hook::Status, request).await?;
    let Incoming::Status(report) = incoming else {
        return Err(ServiceError::invariant("a status hook read something other than a status report"));
    };
    apply_report(svc, scope, &channel, report).await
}

/// Applies a delivery report to the message on `channel` it names.
pub async fn apply_report(
    svc: &Services,
    scope: Scope,
    channel: &ChannelRow,
    report: parley_connectors::StatusReport,
) -> ServiceResult<Reported> {
    let channel_id = channel.id;
    let error = report.error.as_deref().or((report.status == MessageStatus::Failed).then_some("reported failed"));
    let mut work = svc.begin().await?;
    let found = repo::by_external_id(&mut work, scope, channel.id, Direction::Outbound, &report.external_id).await?;
    let Some(message) = found else {
        if !parley_connectors::connector(channel.kind).is_some_and(|c| c.reports_may_precede_send()) {
            return Err(ServiceError::NotFound {
                kind: "Message with external_id",
                id: format!("{} on channel {channel_id}", report.external_id),
            });
        }
        repo::keep_early_report(&mut work, scope, channel.id, &report.external_id, report.status, error).await?;
        svc.commit(work).await?;
        return Ok(Reported::Kept);
    };
    let message = advance(&mut work, &svc.storage, scope, message.id, report.status, None, error).await?;
    work.conversation_changed(message.conversation_id);
    svc.commit(work).await?;
    Ok(Reported::Applied(message))
}

/// Applies the reports that arrived before the send of message `id` was
/// recorded as `external_id`, in the transaction that records it.
pub async fn apply_early_reports(
    tx: &mut Tx,
    storage: &crate::files::Storage,
    scope: Scope,
    channel_id: i64,
    id: i64,
    external_id: &str,
) -> ServiceResult<()> {
    for (status, error) in repo::take_early_reports(tx, scope, channel_id, external_id).await? {
        advance(tx, storage, scope, id, status, None, error.as_deref()).await?;
    }
    Ok(())
}

/// `POST /api/v1/conversations/{id}/reply-preview`: the composer's text.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"text": "Hi **Ana**, your order shipped."}))]
pub struct PreviewReply {
    /// 0–10,000 characters: what the composer holds now.
    #[schema(max_length = 10000)]
    pub text: String,
}

pub fn parse_preview(body: Value) -> Parsed<PreviewReply> {
    parse_object(body, loc(&["body"]), |r| Some(PreviewReply { text: r.required("text", string(0, 10_000))? }))
}

/// A reply as the conversation's channel would send it now, worked out by
/// the same code that sends it: nothing is stored or sent.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReplyPreview {
    /// The conversation's channel type.
    #[schema(schema_with = parley_domain::schema::channel)]
    pub channel: String,
    /// Why the channel would refuse this text (too long for it); null when it takes it.
    pub refused: Option<String>,
    /// SMS: the encoding and how many segments (billed parts) it takes.
    pub segments: Option<parley_domain::sms::Segments>,
    /// Email: the subject the reply goes with.
    pub subject: Option<String>,
    /// Email: whether the reply continues the thread (answers its last email).
    pub threaded: Option<bool>,
    /// Channels that show formatting (email, Telegram): the markup as they
    /// render it, as HTML (raw HTML in the text escaped; links kept only to
    /// http(s), mailto and tel).
    pub html: Option<String>,
    /// A channel with a customer-service window (WhatsApp): true when the
    /// contact has not written within it, so only an approved template may
    /// be sent (`GET /channels/{id}/templates`).
    pub template_required: bool,
    /// Until when free text may be sent (the window's end), if it is open.
    pub free_text_until: Option<parley_domain::Timestamp>,
}

pub async fn preview(
    svc: &Services,
    scope: Scope,
    id: parley_domain::ids::ConversationId,
    input: PreviewReply,
) -> ServiceResult<ReplyPreview> {
    let id = id.get();
    let mut c = svc.db.read().await?;
    let conversation =
        repo::get(&mut c, scope, id).await?.ok_or_else(|| ServiceError::not_found("Conversation", id))?;
    let channel = channel_of(&mut c, scope, &conversation).await?;
    let kind = connector(channel.kind).ok_or_else(|| {
        ServiceError::Conflict(format!("Channel {} is of a type this version cannot send on", channel.id))
    })?;
    let previous = repo::latest_message(&mut c, scope, id).await?.map(|m| m.details);
    let details = kind.outbound_details(&input.text, &channel.config.0, previous.as_ref(), None, &channel.name);
    let (template_required, free_text_until) = match kind.service_window() {
        Some(window) => {
            let until = repo::last_inbound_at(&mut c, scope, id)
                .await?
                .map(|at| at.plus_duration(window))
                .filter(|until| *until > parley_domain::Timestamp::now());
            (until.is_none(), until)
        }
        None => (false, None),
    };
    Ok(ReplyPreview {
        channel: channel.kind.as_str().to_owned(),
        refused: kind.refuse_text(&input.text),
        segments: details.segments,
        subject: details.email.as_ref().map(|e| e.subject.clone()),
        threaded: details.email.as_ref().map(|e| e.in_reply_to.is_some()),
        html: kind.formatted(&input.text),
        template_required,
        free_text_until,
    })
}
