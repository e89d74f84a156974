//! Channel connections: create, read, list, update, delete, and the
//! authentication of inbound requests.
//!
//! Each channel type is a [`Connector`] (in `parley-connectors`): it reads
//! and checks its own settings and says which of them are secret. Secrets
//! are sealed with the master key and never returned. Adding a type (email,
//! SMS, Telegram, voice) means adding a connector, not changing this module.

use parley_connectors::{AVAILABLE, Connector, Credentials, Incoming, connector};
pub use parley_connectors::{Hook, Inbound, InboundContact, InboundRequest, StatusReport};
use parley_domain::Scope;
use parley_domain::channel::{Channel, ChannelStatus, ChannelType};
use parley_domain::conversation::ApprovedTemplate;
use parley_domain::ids::ChannelId;
use parley_domain::validation::{FieldError, LocPart, Page, Parsed, QueryReader, loc, one_of, parse_object, string};
use parley_events::signing::WebhookSecret;
use parley_store::Tx;
use parley_store::repo::channels::{self as repo, ChannelFields, ChannelRow};
use rand::Rng;
use serde::Serialize;
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::{ServiceError, ServiceResult, Services, Work};

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

/// A channel type this server connects, for a form generated from it
/// (`GET /api/v1/channel-types`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ChannelTypeInfo {
    #[serde(rename = "type")]
    pub kind: ChannelType,
    /// The JSON Schema of the type's `config`: each setting with its
    /// constraints and description (the same as in `POST /api/v1/channels`).
    #[schema(value_type = Object)]
    pub settings: Value,
    /// Settings whose values are write-only.
    pub secret_settings: Vec<String>,
    /// Settings the channel cannot work without (a form asks for them; the
    /// API stores a channel without them, and `check` says they are missing).
    pub needed_settings: Vec<String>,
    /// Whether the channel gets a `whsec_…` signing secret at creation.
    pub signs_traffic: bool,
    /// What to give the provider: each address under this server's public
    /// URL, with `{public_id}` or `{id}` standing for the channel's.
    pub webhooks: Vec<WebhookAddress>,
}

/// An address a provider calls.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WebhookAddress {
    /// Where it goes in the provider's console.
    pub name: String,
    /// e.g. `https://parley.example.com/hooks/twilio/{public_id}/inbound`.
    pub url: String,
}

/// The channel types this server connects, in the order they are offered.
pub fn types(public_url: &str) -> Vec<ChannelTypeInfo> {
    AVAILABLE
        .iter()
        .filter_map(|kind| ChannelType::parse(kind).and_then(connector))
        .map(|c| ChannelTypeInfo {
            kind: c.kind(),
            settings: serde_json::to_value(c.settings_schema()).expect("a schema serialises"),
            secret_settings: c.secret_settings().iter().map(|s| (*s).to_owned()).collect(),
            needed_settings: c.needed_settings().iter().map(|s| (*s).to_owned()).collect(),
            signs_traffic: c.signs_traffic(),
            webhooks: c
                .webhook_paths()
                .iter()
                .map(|(name, path)| WebhookAddress {
                    name: (*name).to_owned(),
                    url: format!("{}{path}", public_url.trim_end_matches('/')),
                })
                .collect(),
        })
        .collect()
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
    for setting in connector.outbound_url_settings() {
        if let Some(Value::String(url)) = config.get(*setting) {
            crate::webhooks::check_url(svc, url, &["body", "config", setting]).await?;
        }
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
        status_reason: None,
    };
    let mut fields = fields;
    fields.address = claim_address(tx, scope, None, kind, &fields.config).await?.unwrap_or(fields.address);
    let row = repo::insert(tx, scope, &fields).await?;
    crate::messaging::polling::settings_changed(tx, scope, row.id, kind).await?;
    Ok(ChannelWithSecret { channel: row.to_api()?, secret: signing.map(|s| s.expose()) })
}

pub async fn get(svc: &Services, scope: Scope, id: ChannelId) -> ServiceResult<Channel> {
    let id = id.get();
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
    id: ChannelId,
    input: UpdateChannel,
) -> ServiceResult<Channel> {
    let id = id.get();
    let current = repo::get(tx, scope, id).await?.ok_or_else(|| not_found(id))?;
    let mut fields = ChannelFields::from(&current);
    let kind = connector(fields.kind)
        .ok_or_else(|| ServiceError::Conflict(format!("Channel {id} is of a type this version cannot change")))?;
    if let Some(name) = input.name {
        fields.name = name;
    }
    if let Some(status) = input.status {
        fields.status = status;
        fields.status_reason = None;
    }
    if let Some(changes) = input.config {
        let mut secrets = open_json(svc, current.sealed_secrets.as_deref())?;
        apply_settings(kind, &mut fields.config, &mut secrets, changes)?;
        fields.secret_names = secrets.keys().cloned().collect();
        fields.sealed_secrets = seal_json(svc, &secrets);
        fields.address =
            claim_address(tx, scope, Some(id), kind, &fields.config).await?.unwrap_or(current.public_id.clone());
    }
    let row = repo::update(tx, scope, id, &fields).await?.ok_or_else(|| not_found(id))?;
    crate::messaging::polling::settings_changed(tx, scope, id, kind).await?;
    Ok(row.to_api()?)
}

/// The address the settings give the channel (a voice channel's number),
/// if they give one: 409 when another live channel has it, since an
/// inbound call must reach exactly one workspace.
async fn claim_address(
    tx: &mut Tx,
    scope: Scope,
    id: Option<i64>,
    kind: &dyn Connector,
    config: &Map<String, Value>,
) -> ServiceResult<Option<String>> {
    let Some(address) = kind.address(config) else { return Ok(None) };
    if scope.livemode()
        && kind.kind() == ChannelType::Voice
        && let Some((owner, other)) = repo::find_voice_number(tx, &address).await?
        && (owner != scope || Some(other.id) != id)
    {
        return Err(ServiceError::Conflict(format!("The number {address} belongs to another voice channel")));
    }
    Ok(Some(address))
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
        status_reason: None,
    };
    Ok(repo::insert(tx, scope, &fields).await?)
}

/// Deletes a channel that carries no conversation (409 otherwise: their
/// history must keep its channel; disable the channel instead).
pub async fn delete(tx: &mut Tx, scope: Scope, id: ChannelId) -> ServiceResult<()> {
    let id = id.get();
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
pub async fn prepare_update(svc: &Services, scope: Scope, id: ChannelId, input: &UpdateChannel) -> ServiceResult<()> {
    let id = id.get();
    if input.config.is_none() {
        return Ok(());
    }
    let channel = get(svc, scope, ChannelId(id)).await?;
    prepare(svc, channel.kind, input.config.as_ref()).await
}

/// Credentials no request is authenticated with, checked against when the
/// id names no channel that takes inbound requests.
static DECOY_SECRET: std::sync::LazyLock<WebhookSecret> = std::sync::LazyLock::new(WebhookSecret::generate);

/// Authenticates a request on channel `id`'s `hook` with the channel's
/// credentials (401 otherwise), checks that the channel is active (403),
/// and reads it. Until the request is authenticated, every answer is the
/// same whatever the id names (a missing channel, one that takes no such
/// requests, another workspace's), so callers learn nothing about which
/// channels exist.
/// What `POST /api/v1/channels/{id}/check` answers.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CheckResult {
    /// Whether the provider accepted the channel's credentials (true, too,
    /// for a channel type without provider credentials).
    pub ok: bool,
    /// What the provider said, in words.
    pub detail: String,
    /// The channel after the check: `error` (with `status_reason`) when the
    /// provider refused the credentials of an active channel, `active`
    /// again when they work.
    pub channel: Channel,
}

/// Asks the channel's provider whether its credentials work, and moves the
/// channel to `error` (refused) or back to `active` (working); a disabled
/// channel stays disabled. An unreachable provider changes nothing.
pub async fn check(svc: &Services, scope: Scope, id: ChannelId) -> ServiceResult<CheckResult> {
    let id = id.get();
    let row = {
        let mut c = svc.db.read().await?;
        repo::get(&mut c, scope, id).await?.ok_or_else(|| not_found(id))?
    };
    let kind = connector(row.kind)
        .ok_or_else(|| ServiceError::Conflict(format!("Channel {id} is of a type this version cannot check")))?;
    let asking = Asking::new(svc, &row)?;
    let channel = asking.channel.clone();
    let checked = kind.check(asking.check()).await;
    let (ok, detail, status) = match checked {
        parley_connectors::Checked::Works(detail) => (true, detail, Some((ChannelStatus::Active, None))),
        parley_connectors::Checked::NothingToCheck(detail) => (true, detail, None),
        parley_connectors::Checked::Refused(detail) => {
            let reason = Some(detail.clone());
            (false, detail, Some((ChannelStatus::Error, reason)))
        }
        parley_connectors::Checked::Unreachable(detail) => (false, detail, None),
    };
    let channel = match status {
        // (Unmoved: as it is now, which a concurrent check may have changed.)
        Some((status, reason)) => match set_status(svc, scope, id, status, reason).await? {
            Some(moved) => moved,
            None => get(svc, scope, ChannelId(id)).await?,
        },
        None => channel,
    };
    // (Once active: a poll finding the channel in error would end at once.)
    if ok && channel.status == ChannelStatus::Active && kind.polls(&row.config.0) {
        crate::messaging::polling::start_polling(svc, scope, id).await?;
    }
    Ok(CheckResult { ok, detail, channel })
}

/// The provider refused the channel's credentials while sending: the
/// channel goes to `error` with the provider's words.
pub async fn credentials_refused(svc: &Services, scope: Scope, id: ChannelId, error: &str) -> ServiceResult<()> {
    let mut work = svc.begin().await?;
    refuse_credentials(&mut work, scope, id, error).await?;
    svc.commit(work).await
}

/// [`credentials_refused`] within the caller's unit of work (a poll ends
/// its chain in the same commit, so nothing polls a channel in error).
pub async fn refuse_credentials(work: &mut Work, scope: Scope, id: ChannelId, error: &str) -> ServiceResult<()> {
    let id = id.get();
    let reason = format!("The provider refused the channel's credentials: {error}");
    set_status_in(work, scope, id, ChannelStatus::Error, Some(reason)).await?;
    tracing::warn!(channel = id, error, "a channel's provider refused its credentials; the channel is in error");
    Ok(())
}

/// Moves an active or errored channel to `status` (a disabled one stays
/// disabled); the channel as it is now, if it moved.
async fn set_status(
    svc: &Services,
    scope: Scope,
    id: i64,
    status: ChannelStatus,
    reason: Option<String>,
) -> ServiceResult<Option<Channel>> {
    let mut work = svc.begin().await?;
    let moved = set_status_in(&mut work, scope, id, status, reason).await?;
    if moved.is_some() {
        svc.commit(work).await?;
    }
    Ok(moved)
}

async fn set_status_in(
    work: &mut Work,
    scope: Scope,
    id: i64,
    status: ChannelStatus,
    reason: Option<String>,
) -> ServiceResult<Option<Channel>> {
    let Some(current) = repo::get(work, scope, id).await? else { return Ok(None) };
    if current.status == ChannelStatus::Disabled || (current.status == status && current.status_reason == reason) {
        return Ok(None);
    }
    let mut fields = ChannelFields::from(&current);
    fields.status = status;
    fields.status_reason = reason;
    let row = repo::update(work, scope, id, &fields).await?.ok_or_else(|| not_found(id))?;
    Ok(Some(row.to_api()?))
}

/// How a hook request names its channel.
#[derive(Debug, Clone)]
pub enum HookChannel {
    /// By id, in the path (the api channel's hooks).
    Id(i64),
    /// By the public id in a provider's hook URL, for a channel of one of
    /// `kinds` (a channel of another type is not found).
    Public { public_id: String, kinds: &'static [ChannelType] },
}

impl HookChannel {
    /// The channel it names, with its scope, in one read.
    async fn find(&self, svc: &Services) -> ServiceResult<Option<(Scope, ChannelRow)>> {
        let mut c = svc.db.read().await?;
        Ok(match self {
            HookChannel::Id(id) => repo::find_for_inbound(&mut c, *id).await?,
            HookChannel::Public { public_id, kinds } => {
                repo::find_by_public_id(&mut c, public_id).await?.filter(|(_, row)| kinds.contains(&row.kind))
            }
        })
    }
}

impl HookChannel {
    /// The connector a channel this names would have (the api channel's
    /// for an id): what answers for a channel that does not exist.
    fn expected_connector(&self) -> &'static dyn Connector {
        let kind = match self {
            HookChannel::Id(_) => ChannelType::Api,
            HookChannel::Public { kinds, .. } => kinds.first().copied().unwrap_or(ChannelType::Api),
        };
        connector(kind).or_else(|| connector(ChannelType::Api)).expect("the api connector exists")
    }
}

/// Authenticates a hook request with the credentials of the channel it
/// names: the channel, its scope and connector. A channel that does not
/// exist (or does not take this hook) is refused in the same words as a
/// wrong credential for its type, after the same work.
async fn authenticate_hook(
    svc: &Services,
    target: &HookChannel,
    hook: Hook,
    request: InboundRequest<'_>,
) -> ServiceResult<(Scope, ChannelRow, &'static dyn Connector)> {
    let now = parley_domain::Timestamp::now().unix_micros() / 1_000_000;
    let found = target.find(svc).await?;
    let hooked = found.and_then(|(scope, row)| {
        let connector = connector(row.kind).filter(|c| c.hooks().contains(&hook))?;
        Some((scope, row, connector))
    });
    match hooked {
        Some((scope, row, connector)) => {
            let secrets = secret_settings(svc, &row)?;
            let signing = if connector.signs_traffic() { Some(signing_secret(svc, &row)?) } else { None };
            let creds = Credentials { secrets: &secrets, signing: signing.as_ref() };
            connector.authenticate(&request, &creds, now).map_err(|r| ServiceError::Unauthorized(r.0))?;
            Ok((scope, row, connector))
        }
        None => {
            let decoy = target.expected_connector();
            let signing = decoy.signs_traffic().then_some(&*DECOY_SECRET);
            let creds = Credentials { secrets: &Map::new(), signing };
            let refused = decoy.authenticate(&request, &creds, now).err();
            let reason = refused.map_or_else(|| "Invalid signature: no signature matches".to_owned(), |r| r.0);
            Err(ServiceError::Unauthorized(reason))
        }
    }
}

/// Checks a hook request's headers before its body is read, for the
/// channel types whose providers authenticate with a shared secret in a
/// header (email, Telegram): a refused request costs no body. Types that
/// sign the body are checked once it is read ([`receive_hook`]).
pub async fn admit_hook(
    svc: &Services,
    target: &HookChannel,
    hook: Hook,
    url: &str,
    headers: &http::HeaderMap,
) -> ServiceResult<()> {
    if !target.expected_connector().authenticates_by_headers() {
        return Ok(());
    }
    authenticate_hook(svc, target, hook, InboundRequest { url, headers, body: &[] }).await.map(|_| ())
}

/// Authenticates a hook request (see [`authenticate_hook`]) and reads it.
pub async fn receive_hook(
    svc: &Services,
    target: &HookChannel,
    hook: Hook,
    request: InboundRequest<'_>,
) -> ServiceResult<(Scope, ChannelRow, Incoming)> {
    let (scope, channel, connector) = authenticate_hook(svc, target, hook, request).await?;
    if channel.status != ChannelStatus::Active {
        return Err(ServiceError::Forbidden(format!("Channel {} is {}", channel.id, channel.status)));
    }
    let incoming = connector.read(hook, &request, &channel.config)?.without_nul();
    Ok((scope, channel, incoming))
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

/// Takes a message for the channel `target` names (authenticated, see
/// [`receive_hook`]); `None` when the request carried nothing Parley takes
/// (an edit).
pub async fn receive_inbound(
    svc: &Services,
    target: &HookChannel,
    request: InboundRequest<'_>,
) -> ServiceResult<Option<crate::messaging::conversations::Received>> {
    let (scope, channel, incoming) = receive_hook(svc, target, Hook::Message, request).await?;
    take(svc, scope, &channel, incoming).await
}

/// Stores what arrived (by webhook or poll): a message, or a report on a
/// message sent (an email bounce; one naming no message here is ignored).
pub async fn take(
    svc: &Services,
    scope: Scope,
    channel: &ChannelRow,
    incoming: Incoming,
) -> ServiceResult<Option<crate::messaging::conversations::Received>> {
    match incoming {
        Incoming::Message(inbound) => Ok(Some(take_message(svc, scope, channel, inbound).await?)),
        Incoming::Ignored => Ok(None),
        Incoming::Status(report) => match crate::messaging::messages::apply_report(svc, scope, channel, report).await {
            Ok(_) | Err(ServiceError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        },
    }
}

/// Stores a message that arrived on `channel` (by webhook or poll), once
/// per provider id; its files are fetched from the provider (or taken from
/// the request) and kept in object storage first.
pub async fn take_message(
    svc: &Services,
    scope: Scope,
    channel: &ChannelRow,
    mut inbound: parley_connectors::Inbound,
) -> ServiceResult<crate::messaging::conversations::Received> {
    let files = std::mem::take(&mut inbound.attachments);
    let mut attachments = Vec::new();
    if !files.is_empty() && !already_received(svc, scope, channel.id, &inbound.external_id).await? {
        let (fetched, failures) = fetch_files(svc, channel, files).await?;
        attachments = crate::messaging::messages::store_attachments(svc, scope, fetched).await?;
        for failure in failures {
            inbound.text.push_str(&format!("\n[{failure}]"));
        }
    }
    let job = crate::messaging::conversations::InboundJob {
        scope,
        channel: channel.clone(),
        inbound,
        attachments: attachments.clone(),
    };
    let received = crate::messaging::conversations::receive_committed(svc, job).await;
    // Not stored (a failure, or a message already received): its files are orphans.
    if !received.as_ref().is_ok_and(|r| r.new) {
        crate::messaging::messages::discard_attachments(svc, &attachments).await;
    }
    received
}

/// The largest file an inbound message may carry.
const MAX_INBOUND_FILE_BYTES: usize = 20 * 1024 * 1024;

async fn already_received(svc: &Services, scope: Scope, channel_id: i64, external_id: &str) -> ServiceResult<bool> {
    let mut c = svc.db.read().await?;
    let found = parley_store::repo::conversations::by_external_id(
        &mut c,
        scope,
        channel_id,
        parley_domain::conversation::Direction::Inbound,
        external_id,
    )
    .await?;
    Ok(found.is_some())
}

/// The files' bytes: in the request, or fetched from the provider with the
/// channel's credentials. A file that cannot be fetched is named in the
/// failures (the message is kept without it).
async fn fetch_files(
    svc: &Services,
    channel: &ChannelRow,
    files: Vec<parley_connectors::InboundFile>,
) -> ServiceResult<(Vec<crate::messaging::messages::AttachmentInput>, Vec<String>)> {
    let Some(connector) = connector(channel.kind) else { return Ok((Vec::new(), Vec::new())) };
    let secrets = secret_settings(svc, channel)?;
    let api = channel.to_api()?;
    let timeout = svc.config.courier.request_timeout;
    let client = parley_events::ssrf::http_client(svc.config.webhooks_allow_private, timeout);
    let (mut fetched, mut failures) = (Vec::new(), Vec::new());
    for file in files {
        let got = match file.source {
            parley_connectors::FileSource::Inline(bytes) => {
                Ok(parley_connectors::Fetched { bytes, content_type: None })
            }
            parley_connectors::FileSource::Remote(reference) => {
                let fetch = parley_connectors::FetchFile {
                    client: &client,
                    timeout,
                    allow_private: svc.config.webhooks_allow_private,
                    channel: &api,
                    secrets: &secrets,
                    reference: &reference,
                    max_bytes: MAX_INBOUND_FILE_BYTES,
                };
                connector.fetch_file(fetch).await
            }
        };
        match got {
            Ok(got) if !got.bytes.is_empty() => fetched.push(crate::messaging::messages::AttachmentInput {
                filename: file.filename,
                content_type: got.content_type.unwrap_or(file.content_type),
                data: got.bytes,
            }),
            Ok(_) => failures.push(format!("{} was empty", file.filename)),
            Err(e) => {
                tracing::warn!(channel = channel.id, file = %file.filename, error = %e, "an inbound file could not be fetched");
                failures.push(format!("{} could not be fetched: {e}", file.filename));
            }
        }
    }
    Ok((fetched, failures))
}

/// `GET /api/v1/channels/{id}/templates`: the templates the provider
/// approved for the channel (WhatsApp), asked now (not kept): what the
/// inbox offers outside the customer-service window.
pub async fn templates(svc: &Services, scope: Scope, id: ChannelId) -> ServiceResult<Vec<ApprovedTemplate>> {
    let id = id.get();
    let row = {
        let mut c = svc.db.read().await?;
        repo::get(&mut c, scope, id).await?.ok_or_else(|| not_found(id))?
    };
    let kind = connector(row.kind).filter(|k| k.takes_templates()).ok_or_else(|| {
        ServiceError::Conflict(format!("Channel {id} is {}: only WhatsApp channels have templates", row.kind.as_str()))
    })?;
    kind.templates(Asking::new(svc, &row)?.check())
        .await
        .map_err(|e| ServiceError::BadGateway(format!("The provider did not list channel {id}'s templates: {e}")))
}

/// What a request to a channel's provider needs, owned: its settings with
/// the secrets opened, and an HTTP client that refuses private targets
/// unless the server allows them.
struct Asking {
    client: reqwest::Client,
    timeout: std::time::Duration,
    allow_private: bool,
    secrets: Map<String, Value>,
    channel: Channel,
    public_url: String,
    public_id: String,
}

impl Asking {
    fn new(svc: &Services, row: &ChannelRow) -> ServiceResult<Self> {
        let timeout = svc.config.courier.request_timeout;
        Ok(Self {
            client: parley_events::ssrf::http_client(svc.config.webhooks_allow_private, timeout),
            timeout,
            allow_private: svc.config.webhooks_allow_private,
            secrets: secret_settings(svc, row)?,
            channel: row.to_api()?,
            public_url: svc.config.public_url().to_owned(),
            public_id: row.public_id.clone(),
        })
    }

    fn check(&self) -> parley_connectors::Check<'_> {
        parley_connectors::Check {
            client: &self.client,
            timeout: self.timeout,
            allow_private: self.allow_private,
            channel: &self.channel,
            secrets: &self.secrets,
            public_url: &self.public_url,
            public_id: &self.public_id,
        }
    }
}
