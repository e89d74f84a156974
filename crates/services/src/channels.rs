//! Channel connections: create, read, list, update, delete.
//!
//! Each channel type is a [`Connector`]: it reads and checks its own
//! settings and says which of them are secret. Secrets are sealed with the
//! master key and never returned. Adding a type (email, SMS, Telegram,
//! voice) means adding a connector, not changing this module.

use futures::future::BoxFuture;
use parley_domain::Scope;
use parley_domain::channel::{Channel, ChannelStatus, ChannelType};
use parley_domain::validation::{
    FieldError, LocPart, Page, Parsed, QueryReader, header_value, list_of, loc, one_of, parse_object, string,
};
use parley_events::signing::WebhookSecret;
use parley_store::Tx;
use parley_store::repo::channels::{self as repo, ChannelFields, ChannelRow};
use rand::Rng;
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::{ServiceError, ServiceResult, Services};

/// What one channel type contributes.
pub trait Connector: Send + Sync {
    fn kind(&self) -> ChannelType;
    /// Names of settings whose values are write-only.
    fn secret_settings(&self) -> &'static [&'static str];
    /// Checks one setting; `None` for a name the type does not know.
    fn parse_setting(&self, name: &str, value: Value, at: &[LocPart]) -> Option<Parsed<Value>>;
    /// The OpenAPI schema of the settings object: each setting `parse_setting`
    /// takes, with its constraints (null removes a setting).
    fn settings_schema(&self) -> utoipa::openapi::Object;
    /// Whether traffic is signed (Standard Webhooks) with a generated `whsec_` secret.
    fn signs_traffic(&self) -> bool;
    /// Prefix of the channel's public id (and address).
    fn public_prefix(&self) -> &'static str;
    /// A setting that is a URL Parley will call (checked against SSRF).
    fn outbound_url_setting(&self) -> Option<&'static str> {
        None
    }
    /// Why a channel with these settings cannot send, if it cannot.
    fn cannot_send(&self, _config: &Map<String, Value>) -> Option<String> {
        None
    }
    /// Whether sending reaches a third party's servers (in test mode such
    /// messages never leave the process). The api and webchat channels
    /// reach only the customer's own systems, so they send in both modes.
    fn reaches_third_party(&self) -> bool {
        false
    }
    /// Sends one outbound message.
    fn deliver<'a>(&'a self, d: Delivery<'a>) -> BoxFuture<'a, Delivered>;
}

/// Everything a connector needs to send one message.
pub struct Delivery<'a> {
    pub client: &'a reqwest::Client,
    pub timeout: std::time::Duration,
    pub allow_private: bool,
    pub channel: &'a ChannelRow,
    /// The channel's secret settings, opened.
    pub secrets: &'a Map<String, Value>,
    /// The channel's `whsec_` secret, for types that sign traffic.
    pub signing: Option<&'a WebhookSecret>,
    pub message: &'a parley_domain::conversation::Message,
    /// The recipient's address on the channel.
    pub to: &'a str,
    pub livemode: bool,
}

/// How a send went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// Accepted; the provider's id for the message, if it gave one.
    Sent { external_id: Option<String> },
    /// Worth another try (after the provider's wish, if it said).
    Retry { error: String, after: Option<std::time::Duration> },
    /// Will never succeed as it stands.
    Failed { error: String },
}

/// The `api` channel: your own system, over signed HTTP both ways.
struct ApiConnector;

impl Connector for ApiConnector {
    fn kind(&self) -> ChannelType {
        ChannelType::Api
    }
    fn secret_settings(&self) -> &'static [&'static str] {
        &["authorization"]
    }
    fn parse_setting(&self, name: &str, value: Value, at: &[LocPart]) -> Option<Parsed<Value>> {
        Some(match name {
            // Where outbound messages are POSTed; without it the channel only receives.
            "url" => string(1, 2048)(value, at).and_then(|u| {
                parley_events::ssrf::parse_target(&u)
                    .map(|u| Value::String(u.to_string()))
                    .map_err(|e| vec![FieldError::new(at.to_vec(), "value_error.url", e.to_string())])
            }),
            // Sent as the Authorization header of outbound requests.
            "authorization" => header_value(1, 1000)(value, at).map(Value::String),
            _ => return None,
        })
    }
    fn settings_schema(&self) -> utoipa::openapi::Object {
        use parley_domain::schema::{nullable, string};
        parley_domain::schema::closed_object(vec![
            (
                "url",
                nullable(string(1, 2048).format(Some(utoipa::openapi::SchemaFormat::Custom("uri".into()))).build())
                    .into(),
                "Where outbound messages are POSTed (http or https, no credentials); without it the channel only receives.",
            ),
            (
                "authorization",
                nullable(string(1, 1000).pattern(Some("^[ -~]+$")).build()).into(),
                "Secret, write-only: sent as the Authorization header of outbound requests (printable ASCII).",
            ),
        ])
    }
    fn signs_traffic(&self) -> bool {
        true
    }
    fn public_prefix(&self) -> &'static str {
        "api"
    }
    fn outbound_url_setting(&self) -> Option<&'static str> {
        Some("url")
    }
    fn cannot_send(&self, config: &Map<String, Value>) -> Option<String> {
        (!config.contains_key("url")).then(|| "it has no `url` to send to (set config.url)".to_owned())
    }
    fn deliver<'a>(&'a self, d: Delivery<'a>) -> BoxFuture<'a, Delivered> {
        Box::pin(deliver_api(d))
    }
}

/// Bytes of an api channel's reply read for its `external_id`.
const API_REPLY_LIMIT: usize = 16 * 1024;

/// POSTs the message to the channel's `url`, signed with its secret. The
/// reply may name the message: `{"external_id": "…"}`. Timeouts, 408, 425,
/// 429 and 5xx are retried; any other 4xx fails the message.
async fn deliver_api(d: Delivery<'_>) -> Delivered {
    let Some(Value::String(url)) = d.channel.config.0.get("url") else {
        return Delivered::Failed { error: "the channel has no url".to_owned() };
    };
    let Some(signing) = d.signing else {
        return Delivered::Failed { error: "the channel has no signing secret".to_owned() };
    };
    let m = d.message;
    let body = serde_json::json!({
        "type": "message",
        "livemode": d.livemode,
        "data": {
            "id": m.id,
            "conversation_id": m.conversation_id,
            "channel_id": d.channel.id,
            "to": d.to,
            "author": m.author,
            "text": m.text,
            "attachments": m.attachments,
            "created_at": m.created_at,
        },
    });
    let post = parley_events::post::SignedPost {
        url,
        secrets: std::slice::from_ref(signing),
        id: &format!("msg_{}", m.id),
        body: serde_json::to_vec(&body).unwrap_or_default(),
        authorization: d.secrets.get("authorization").and_then(Value::as_str),
        allow_private: d.allow_private,
        read_limit: API_REPLY_LIMIT,
    };
    match parley_events::post::send(d.client, d.timeout, post).await {
        Err(error) => Delivered::Retry { error, after: None },
        Ok(reply) if reply.succeeded() => {
            let external_id =
                serde_json::from_str::<Value>(&reply.body).ok().and_then(|v| match v.get("external_id") {
                    Some(Value::String(s)) if !s.is_empty() && s.len() <= 255 => Some(s.clone()),
                    Some(Value::Number(n)) => Some(n.to_string()),
                    _ => None,
                });
            Delivered::Sent { external_id }
        }
        Ok(reply) => {
            let error = reply.error().unwrap_or_default();
            match reply.status {
                408 | 425 | 429 | 500..=599 => Delivered::Retry { error, after: reply.retry_after },
                _ => Delivered::Failed { error },
            }
        }
    }
}

/// The `webchat` channel: the widget on your pages.
struct WebchatConnector;

impl Connector for WebchatConnector {
    fn kind(&self) -> ChannelType {
        ChannelType::Webchat
    }
    fn secret_settings(&self) -> &'static [&'static str] {
        &[]
    }
    fn parse_setting(&self, name: &str, value: Value, at: &[LocPart]) -> Option<Parsed<Value>> {
        Some(match name {
            // Pages allowed to open the chat ("https://shop.example"), or ["*"].
            "allowed_origins" => list_of(20, |v, l| string(1, 200)(v, l))(value, at)
                .map(|o| Value::Array(o.into_iter().map(Value::String).collect())),
            "title" => string(1, 100)(value, at).map(Value::String),
            "greeting" => string(1, 500)(value, at).map(Value::String),
            _ => return None,
        })
    }
    fn settings_schema(&self) -> utoipa::openapi::Object {
        use parley_domain::schema::{nullable, nullable_array, string, strings};
        parley_domain::schema::closed_object(vec![
            (
                "allowed_origins",
                nullable_array(strings(20, 1, 200)).into(),
                "Pages allowed to open the chat (\"https://shop.example\"), or [\"*\"]; default any.",
            ),
            ("title", nullable(string(1, 100).build()).into(), "The widget's title."),
            ("greeting", nullable(string(1, 500).build()).into(), "Shown before the first message."),
        ])
    }
    fn signs_traffic(&self) -> bool {
        false
    }
    fn public_prefix(&self) -> &'static str {
        "wc"
    }
    /// The message is stored; the visitor's socket shows it now or when
    /// they come back.
    fn deliver<'a>(&'a self, _: Delivery<'a>) -> BoxFuture<'a, Delivered> {
        Box::pin(async { Delivered::Sent { external_id: None } })
    }
}

/// The connectors available in this version.
pub fn connector(kind: ChannelType) -> Option<&'static dyn Connector> {
    match kind {
        ChannelType::Api => Some(&ApiConnector),
        ChannelType::Webchat => Some(&WebchatConnector),
        _ => None,
    }
}

const AVAILABLE: &[&str] = &["api", "webchat"];

/// Settings as sent: each value, or `null` to remove it (in an update).
pub type SettingChanges = Map<String, Value>;

/// `POST /api/v1/channels`: one body shape per available type (its schema
/// is built from the connectors, see [`create_channel_schema`]).
#[derive(Debug, Clone)]
pub struct CreateChannel {
    pub kind: ChannelType,
    pub name: String,
    /// The type's settings.
    pub config: Option<SettingChanges>,
}

/// `PATCH /api/v1/channels/{channel_id}`.
#[derive(Debug, Clone, Default)]
pub struct UpdateChannel {
    pub name: Option<String>,
    pub status: Option<ChannelStatus>,
    /// Settings to change; a `null` value removes that setting. Others stay.
    pub config: Option<SettingChanges>,
}

/// `{type, name, config}` for each available channel type, `config` being
/// exactly the settings that type's connector takes.
fn create_channel_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use parley_domain::schema::{string, string_enum};
    use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, OneOfBuilder, Type};
    let mut one_of = OneOfBuilder::new()
        .description(Some(
            "A channel connection. `type` picks the settings `config` takes; secret settings are write-only.",
        ))
        .examples([
            serde_json::json!({"type": "api", "name": "Backend", "config": {"url": "https://example.com/parley"}}),
        ]);
    for kind in AVAILABLE {
        let connector = ChannelType::parse(kind).and_then(connector).expect("available types have connectors");
        one_of = one_of.item(
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .title(Some(format!("{kind} channel")))
                .property("type", string_enum(&[kind]))
                .required("type")
                .property("name", string(1, 100).description(Some("1–100 characters.")))
                .required("name")
                .property("config", connector.settings_schema())
                .additional_properties(Some(AdditionalProperties::FreeForm(false))),
        );
    }
    one_of.into()
}

impl utoipa::PartialSchema for CreateChannel {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        create_channel_schema()
    }
}

impl utoipa::ToSchema for CreateChannel {}

impl utoipa::PartialSchema for UpdateChannel {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use parley_domain::schema::{string, string_enum};
        use utoipa::openapi::schema::{AdditionalProperties, AnyOfBuilder, ObjectBuilder, Type};
        let mut settings = AnyOfBuilder::new()
            .description(Some("Settings of the channel's type to change; a `null` value removes that setting."));
        for kind in AVAILABLE {
            let connector = ChannelType::parse(kind).and_then(connector).expect("available types have connectors");
            settings = settings.item(connector.settings_schema());
        }
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .property("name", string(1, 100).description(Some("1–100 characters.")))
            .property("status", string_enum(&["active", "disabled"]))
            .property("config", settings)
            .additional_properties(Some(AdditionalProperties::FreeForm(false)))
            .examples([serde_json::json!({"name": "Backend (EU)"})])
            .into()
    }
}

impl utoipa::ToSchema for UpdateChannel {}

/// A channel with its signing secret: returned once, at creation, for types
/// that sign their traffic.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ChannelWithSecret {
    #[serde(flatten)]
    pub channel: Channel,
    /// `whsec_…` (api channels): sign inbound requests and verify outbound
    /// ones with it. Shown only now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

fn channel_type() -> impl FnOnce(Value, &[LocPart]) -> Parsed<ChannelType> {
    |v, l| {
        let s = one_of(ChannelType::ALL)(v, l)?;
        match ChannelType::parse(&s) {
            Some(kind) if connector(kind).is_some() => Ok(kind),
            _ => Err(vec![FieldError::not_enum(l.to_vec(), AVAILABLE)]),
        }
    }
}

fn settings_object() -> impl FnOnce(Value, &[LocPart]) -> Parsed<SettingChanges> {
    |v, l| match v {
        Value::Object(m) => Ok(m),
        _ => Err(vec![FieldError::wrong_type(l.to_vec(), "dict")]),
    }
}

pub fn parse_create(body: Value) -> Parsed<CreateChannel> {
    parse_object(body, loc(&["body"]), |r| {
        let kind = r.required("type", channel_type());
        let name = r.required("name", string(1, 100));
        let mut config = r.optional("config", settings_object());
        // Settings are checked here too, so that their faults come with the others.
        if let (Some(kind), Some(settings)) = (kind.and_then(connector), config.as_mut()) {
            let (mut public, mut secrets) = (Map::new(), Map::new());
            if let Err(ServiceError::Validation(errors)) =
                apply_settings(kind, &mut public, &mut secrets, settings.clone())
            {
                errors.into_iter().for_each(|e| r.push_error(e));
            }
        }
        Some(CreateChannel { kind: kind?, name: name?, config })
    })
}

pub fn parse_update(body: Value) -> Parsed<UpdateChannel> {
    parse_object(body, loc(&["body"]), |r| {
        let name = r.optional("name", string(1, 100));
        let status = r.optional("status", one_of(&["active", "disabled"])).and_then(|s| ChannelStatus::parse(&s));
        let config = r.optional("config", settings_object());
        Some(UpdateChannel { name, status, config })
    })
}

pub fn parse_filter(q: &mut QueryReader) -> Option<ChannelType> {
    q.enum_value::<ChannelType>("type")
}

fn not_found(id: i64) -> ServiceError {
    ServiceError::not_found("Channel", id)
}

/// Applies setting changes for `kind` to the current public and secret
/// settings; every bad setting is reported at once.
fn apply_settings(
    kind: &dyn Connector,
    public: &mut Map<String, Value>,
    secrets: &mut Map<String, Value>,
    changes: SettingChanges,
) -> ServiceResult<()> {
    let mut errors = Vec::new();
    for (name, value) in changes {
        let at = loc(&["body", "config", &name]);
        let target = if kind.secret_settings().contains(&name.as_str()) { &mut *secrets } else { &mut *public };
        if value.is_null() {
            target.remove(&name);
            continue;
        }
        match kind.parse_setting(&name, value, &at) {
            Some(Ok(v)) => {
                target.insert(name, v);
            }
            Some(Err(e)) => errors.extend(e),
            None => errors.push(FieldError::extra(at)),
        }
    }
    if errors.is_empty() { Ok(()) } else { Err(ServiceError::Validation(errors)) }
}

fn public_id(prefix: &str) -> String {
    const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut rng = rand::rng();
    let random: String = (0..22).map(|_| BASE62[rng.random_range(0..BASE62.len())] as char).collect();
    format!("{prefix}_{random}")
}

fn seal_json(svc: &Services, map: &Map<String, Value>) -> Option<String> {
    (!map.is_empty()).then(|| svc.keyring.secrets().seal(Value::Object(map.clone()).to_string().as_bytes()))
}

fn open_json(svc: &Services, sealed: Option<&str>) -> ServiceResult<Map<String, Value>> {
    let Some(sealed) = sealed else { return Ok(Map::new()) };
    let plain = svc.keyring.secrets().open(sealed).map_err(|_| {
        parley_store::StoreError::Corrupt("a channel's secrets cannot be opened with this master key".into())
    })?;
    match serde_json::from_slice(&plain) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(parley_store::StoreError::Corrupt("a channel's sealed secrets are not an object".into()).into()),
    }
}

/// Checks outbound URLs against SSRF before any transaction (DNS can be slow).
pub async fn prepare(svc: &Services, kind: ChannelType, config: Option<&SettingChanges>) -> ServiceResult<()> {
    let (Some(connector), Some(config)) = (connector(kind), config) else { return Ok(()) };
    if let Some(setting) = connector.outbound_url_setting()
        && let Some(Value::String(url)) = config.get(setting)
    {
        crate::webhooks::check_url(svc, url, &["body", "config", setting]).await?;
    }
    Ok(())
}

pub async fn create(
    tx: &mut Tx,
    svc: &Services,
    scope: Scope,
    input: CreateChannel,
) -> ServiceResult<ChannelWithSecret> {
    let kind = connector(input.kind)
        .ok_or_else(|| ServiceError::Validation(vec![FieldError::not_enum(loc(&["body", "type"]), AVAILABLE)]))?;
    let (mut public, mut secrets) = (Map::new(), Map::new());
    apply_settings(kind, &mut public, &mut secrets, input.config.unwrap_or_default())?;
    let signing = kind.signs_traffic().then(WebhookSecret::generate);
    let id = public_id(kind.public_prefix());
    let fields = ChannelFields {
        kind: input.kind,
        name: input.name,
        address: id.clone(),
        public_id: id,
        status: ChannelStatus::Active,
        secret_names: secrets.keys().cloned().collect(),
        sealed_secrets: seal_json(svc, &secrets),
        config: public,
        sealed_signing_secret: signing.as_ref().map(|s| svc.keyring.secrets().seal(s.expose().as_bytes())),
    };
    let row = repo::insert(tx, scope, &fields).await?;
    Ok(ChannelWithSecret { channel: row.to_api()?, secret: signing.map(|s| s.expose()) })
}

pub async fn get(svc: &Services, scope: Scope, id: i64) -> ServiceResult<Channel> {
    let mut c = svc.db.read().await?;
    Ok(repo::get(&mut c, scope, id).await?.ok_or_else(|| not_found(id))?.to_api()?)
}

pub async fn list(
    svc: &Services,
    scope: Scope,
    kind: Option<ChannelType>,
    page: Page,
) -> ServiceResult<(Vec<Channel>, i64)> {
    let mut c = svc.db.read().await?;
    let (rows, total) = repo::list(&mut c, scope, kind, page).await?;
    Ok((rows.iter().map(ChannelRow::to_api).collect::<Result<_, _>>()?, total))
}

pub async fn update(
    tx: &mut Tx,
    svc: &Services,
    scope: Scope,
    id: i64,
    input: UpdateChannel,
) -> ServiceResult<Channel> {
    let current = repo::get(tx, scope, id).await?.ok_or_else(|| not_found(id))?;
    let mut fields = ChannelFields::from(&current);
    let kind = connector(fields.kind)
        .ok_or_else(|| ServiceError::Conflict(format!("Channel {id} is of a type this version cannot change")))?;
    if let Some(name) = input.name {
        fields.name = name;
    }
    if let Some(status) = input.status {
        fields.status = status;
    }
    if let Some(changes) = input.config {
        let mut secrets = open_json(svc, current.sealed_secrets.as_deref())?;
        apply_settings(kind, &mut fields.config, &mut secrets, changes)?;
        fields.secret_names = secrets.keys().cloned().collect();
        fields.sealed_secrets = seal_json(svc, &secrets);
    }
    Ok(repo::update(tx, scope, id, &fields).await?.ok_or_else(|| not_found(id))?.to_api()?)
}

/// The scope's voice channel connection (calls' conversations run on it),
/// created on first use.
pub async fn voice_channel(tx: &mut Tx, scope: Scope) -> ServiceResult<ChannelRow> {
    if let Some(row) = repo::first_active_of_type(tx, scope, ChannelType::Voice).await? {
        return Ok(row);
    }
    let id = public_id("voice");
    let fields = ChannelFields {
        kind: ChannelType::Voice,
        name: "Voice".to_owned(),
        address: id.clone(),
        public_id: id,
        status: ChannelStatus::Active,
        secret_names: Vec::new(),
        sealed_secrets: None,
        config: Map::new(),
        sealed_signing_secret: None,
    };
    Ok(repo::insert(tx, scope, &fields).await?)
}

/// Deletes a channel that carries no conversation (409 otherwise: their
/// history must keep its channel; disable the channel instead).
pub async fn delete(tx: &mut Tx, scope: Scope, id: i64) -> ServiceResult<()> {
    if repo::get(tx, scope, id).await?.is_none() {
        return Err(not_found(id));
    }
    if parley_store::repo::conversations::exist_on_channel(tx, scope, id).await? {
        return Err(ServiceError::Conflict(format!("Channel {id} has conversations; disable it instead")));
    }
    repo::delete(tx, scope, id).await?;
    Ok(())
}

/// `prepare` for an update: checks a changed outbound URL of channel `id`.
pub async fn prepare_update(svc: &Services, scope: Scope, id: i64, input: &UpdateChannel) -> ServiceResult<()> {
    if input.config.is_none() {
        return Ok(());
    }
    let channel = get(svc, scope, id).await?;
    prepare(svc, channel.kind, input.config.as_ref()).await
}

/// How far an inbound request's `webhook-timestamp` may be from now.
pub const INBOUND_TOLERANCE_S: i64 = 5 * 60;

/// The Standard Webhooks headers of an inbound request.
pub struct SignatureHeaders<'a> {
    pub id: Option<&'a str>,
    pub timestamp: Option<&'a str>,
    pub signature: Option<&'a str>,
}

/// A secret no request is signed with, checked against when the id names no
/// api channel.
static DECOY_SECRET: std::sync::LazyLock<WebhookSecret> = std::sync::LazyLock::new(WebhookSecret::generate);

/// Checks that a request for api channel `id` is signed with the channel's
/// `whsec_` secret within five minutes of now (401 otherwise) and that the
/// channel is active (403); returns its scope and row. Until the signature
/// matches, every answer is the same whatever the id names — a missing
/// channel, another type's, another workspace's — so unsigned requests
/// learn nothing about which channels exist.
pub async fn verified_api_channel(
    svc: &Services,
    id: i64,
    headers: SignatureHeaders<'_>,
    body: &[u8],
) -> ServiceResult<(Scope, ChannelRow)> {
    let refused =
        |e: parley_events::signing::VerifyError| ServiceError::Unauthorized(format!("Invalid signature: {e}"));
    let now = parley_domain::Timestamp::now().unix_micros() / 1_000_000;
    let signed = parley_events::signing::SignedHeaders::check(
        headers.id,
        headers.timestamp,
        headers.signature,
        now,
        INBOUND_TOLERANCE_S,
    )
    .map_err(refused)?;
    let found = {
        let mut c = svc.db.read().await?;
        repo::find_for_inbound(&mut c, id).await?
    };
    let verified = match found {
        Some((scope, channel)) if channel.kind == ChannelType::Api => {
            signed.matches(&signing_secret(svc, &channel)?, body).then_some((scope, channel))
        }
        _ => {
            // The same work as a real check, so that the time taken does not
            // tell a channel that exists from one that does not.
            let _ = signed.matches(&DECOY_SECRET, body);
            None
        }
    };
    let (scope, channel) = verified.ok_or_else(|| refused(parley_events::signing::VerifyError::NoMatch))?;
    if channel.status != ChannelStatus::Active {
        return Err(ServiceError::Forbidden(format!("Channel {id} is {}", channel.status)));
    }
    Ok((scope, channel))
}

/// The channel's `whsec_` secret, opened.
pub fn signing_secret(svc: &Services, channel: &ChannelRow) -> ServiceResult<WebhookSecret> {
    let id = channel.id;
    let sealed = channel
        .sealed_signing_secret
        .as_deref()
        .ok_or_else(|| parley_store::StoreError::Corrupt(format!("channel {id} has no signing secret")))?;
    Ok(svc
        .keyring
        .secrets()
        .open(sealed)
        .ok()
        .and_then(|raw| String::from_utf8(raw).ok())
        .and_then(|s| WebhookSecret::parse(&s))
        .ok_or_else(|| parley_store::StoreError::Corrupt(format!("channel {id}'s signing secret cannot be opened")))?)
}

/// The channel's secret settings, opened.
pub fn secret_settings(svc: &Services, channel: &ChannelRow) -> ServiceResult<Map<String, Value>> {
    open_json(svc, channel.sealed_secrets.as_deref())
}

/// Takes a message for api channel `id` (signed, see
/// [`verified_api_channel`]). Stored once per `external_id`.
pub async fn receive_inbound(
    svc: &Services,
    id: i64,
    headers: SignatureHeaders<'_>,
    body: &[u8],
) -> ServiceResult<crate::conversations::Received> {
    let (scope, channel) = verified_api_channel(svc, id, headers, body).await?;
    let value: Value =
        serde_json::from_slice(body).map_err(|_| ServiceError::Validation(vec![FieldError::invalid_json()]))?;
    let inbound = crate::conversations::parse_inbound(value)?;
    crate::conversations::receive_committed(svc, crate::conversations::InboundJob { scope, channel, inbound }).await
}
