//! `/api/v1/channels`: channel connections.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use parley_domain::ids::ChannelId;

use parley_domain::channel::{Channel, ChannelType};
use parley_domain::validation::{Parsed, QueryReader};
use parley_services::messaging::channels::{
    self, ChannelTypeInfo, ChannelWithSecret, CreateChannel, Hook, HookChannel, InboundRequest, UpdateChannel,
};
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{Auth, FromBody, FromQuery, Idempotency, Ids, JsonBody, ListQuery, NoFilter, write};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_channel_types))
        .routes(routes!(list_channels, create_channel))
        .routes(routes!(get_channel, update_channel, delete_channel))
        .routes(routes!(receive_inbound))
        .routes(routes!(receive_status))
        .routes(routes!(check_channel))
        .routes(routes!(list_templates))
}

/// The Standard Webhooks headers of a signed request to a channel.
impl FromBody for CreateChannel {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        channels::parse_create(body)
    }
}

impl FromBody for UpdateChannel {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        channels::parse_update(body)
    }
}

/// The `type` filter of the channel list.
pub struct ChannelFilter(Option<ChannelType>);

impl FromQuery for ChannelFilter {
    fn from_query(q: &mut QueryReader) -> Self {
        ChannelFilter(channels::parse_filter(q))
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `channels::parse_filter`
struct ChannelListParams {
    /// Only channels of this type.
    #[param(inline)]
    r#type: Option<ChannelType>,
}

/// List channel connections, newest first. Secret settings are never shown.
#[utoipa::path(
    get, path = "/api/v1/channels", tag = "Channels",
    params(PageParams, ChannelListParams),
    responses((status = 200, body = Items<Channel>), (status = 422, body = ValidationErrorBody))
)]
async fn list_channels(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<ChannelFilter>,
) -> Result<Json<Items<Channel>>, ApiError> {
    let found = channels::list(&s.services, auth.scope(), q.filter.0, q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}

/// The channel types this server connects: for each, the JSON Schema of
/// its settings (`config`), which settings are write-only, whether it gets
/// a signing secret, and the addresses to give the provider under this
/// server's public URL (`{public_id}` or `{id}` stands for the channel's).
#[utoipa::path(
    get, path = "/api/v1/channel-types", tag = "Channels",
    params(PageParams),
    responses((status = 200, body = Items<ChannelTypeInfo>), (status = 422, body = ValidationErrorBody))
)]
async fn list_channel_types(
    _auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<ChannelTypeInfo>>, ApiError> {
    Ok(Json(Items::paged(channels::types(s.services.config().public_url()), q.page)))
}

/// Create a channel connection.
///
/// An `api` channel gets a `whsec_…` signing secret, shown only in this
/// response. Secret settings (`authorization`) are sealed and never shown
/// again; `secrets_set` names those that are set. An outbound `url` must
/// resolve to public addresses. A `voice` channel's `number` becomes its
/// `address`, where inbound calls arrive; a live number belongs to one channel.
#[utoipa::path(
    post, path = "/api/v1/channels", tag = "Channels",
    params(("Idempotency-Key" = Option<String>, Header, description = "Optional; a retry replays the first response.")),
    request_body = CreateChannel,
    responses(
        (status = 201, body = ChannelWithSecret),
        (status = 409, body = ErrorBody, description = "The voice `number` belongs to another live voice channel"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn create_channel(
    auth: Auth,
    State(s): State<AppState>,
    idem: Idempotency,
    body: JsonBody<CreateChannel>,
) -> Result<Response, ApiError> {
    let JsonBody { value, canonical } = body;
    channels::prepare(&s.services, value.kind, value.config.as_ref()).await?;
    let scope = auth.scope();
    let svc = s.services.clone();
    write(&s, scope, idem, &canonical, StatusCode::CREATED, async move |work| {
        channels::create(work, &svc, scope, value).await
    })
    .await
}

/// Get a channel connection.
#[utoipa::path(
    get, path = "/api/v1/channels/{channel_id}", tag = "Channels",
    params(("channel_id" = i64, Path)),
    responses((status = 200, body = Channel), (status = 404, body = ErrorBody, example = json!({"detail": "Channel 42 not found"})))
)]
async fn get_channel(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<Channel>, ApiError> {
    let [id] = path.0;
    Ok(Json(channels::get(&s.services, auth.scope(), ChannelId(id)).await?))
}

/// Check a channel's credentials with its provider.
///
/// Asks the provider whether the channel's credentials work (SMS and
/// WhatsApp: Twilio's account resource with the account SID and auth
/// token) and answers `{ok, detail, channel}`. Refused credentials move an
/// active channel to `error` with the provider's words in `status_reason`
/// (as a send they refuse does); working ones bring it back to `active`.
/// A disabled channel stays disabled; an unreachable provider changes
/// nothing (`ok: false`). Channel types without provider credentials
/// answer `ok: true`.
#[utoipa::path(
    post, path = "/api/v1/channels/{channel_id}/check", tag = "Channels",
    params(("channel_id" = i64, Path)),
    responses(
        (status = 200, body = parley_services::messaging::channels::CheckResult),
        (status = 404, body = ErrorBody, example = json!({"detail": "Channel 42 not found"})),
        (status = 409, body = ErrorBody, description = "The channel is of a type this version cannot check"),
    )
)]
async fn check_channel(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
) -> Result<Json<parley_services::messaging::channels::CheckResult>, ApiError> {
    let [id] = path.0;
    Ok(Json(channels::check(&s.services, auth.scope(), ChannelId(id)).await?))
}

/// The message templates the provider approved for a WhatsApp channel,
/// asked of it now (Twilio's Content API, `GET /v1/ContentAndApprovals` at
/// the channel's `content_base_url`): what may be sent outside WhatsApp's
/// 24-hour window, as `template: {content_sid, variables}` on a send.
#[utoipa::path(
    get, path = "/api/v1/channels/{channel_id}/templates", tag = "Channels",
    params(("channel_id" = i64, Path), PageParams),
    responses(
        (status = 200, body = Items<parley_domain::conversation::ApprovedTemplate>),
        (status = 404, body = ErrorBody, example = json!({"detail": "Channel 42 not found"})),
        (status = 409, body = ErrorBody, description = "Not a WhatsApp channel: only WhatsApp channels have templates"),
        (status = 422, body = ValidationErrorBody),
        (status = 502, body = ErrorBody, description = "The provider could not be reached, or refused the request"),
    )
)]
async fn list_templates(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<parley_domain::conversation::ApprovedTemplate>>, ApiError> {
    let [id] = path.0;
    Ok(Json(Items::paged(channels::templates(&s.services, auth.scope(), ChannelId(id)).await?, q.page)))
}

/// Rename, disable or re-enable a channel, or change its settings (a
/// `null` setting removes it; others stay as they are).
#[utoipa::path(
    patch, path = "/api/v1/channels/{channel_id}", tag = "Channels",
    params(("channel_id" = i64, Path)),
    request_body = UpdateChannel,
    responses(
        (status = 200, body = Channel),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The voice `number` belongs to another live voice channel, or the channel is of a type this version cannot change"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn update_channel(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<UpdateChannel>,
) -> Result<Json<Channel>, ApiError> {
    let [id] = path.0;
    let scope = auth.scope();
    let input = body.value;
    channels::prepare_update(&s.services, scope, ChannelId(id), &input).await?;
    let svc = s.services.clone();
    let channel = s
        .services
        .transaction(async move |work| channels::update(work, &svc, scope, ChannelId(id), input).await)
        .await?;
    Ok(Json(channel))
}

/// Delete a channel connection that has no conversations (disable one that has).
#[utoipa::path(
    delete, path = "/api/v1/channels/{channel_id}", tag = "Channels",
    params(("channel_id" = i64, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The channel has conversations; disable it instead"),
    )
)]
async fn delete_channel(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<StatusCode, ApiError> {
    let [id] = path.0;
    let scope = auth.scope();
    s.services.transaction(async move |work| channels::delete(work, scope, ChannelId(id)).await).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Deliver a message from your system to an api channel.
///
/// Authenticated by the channel's `whsec_` secret, not an API key: sign the
/// body per Standard Webhooks (`webhook-id`, `webhook-timestamp` within 5
/// minutes, `webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body">`).
/// 201 with the stored message; a repeated `external_id` is stored once and
/// answers 200 with the first message.
#[utoipa::path(
    post, path = "/api/v1/channels/{channel_id}/inbound", tag = "Channels",
    params(("channel_id" = i64, Path)),
    request_body = parley_services::messaging::channels::Inbound,
    responses(
        (status = 200, body = parley_domain::conversation::Message, description = "Seen before: the first message"),
        (status = 201, body = parley_domain::conversation::Message),
        (status = 401, body = ErrorBody, description = "Missing, stale or wrong signature — also when no api channel has this id, so the answer reveals nothing"),
        (status = 403, body = ErrorBody, description = "The channel is disabled"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn receive_inbound(State(s): State<AppState>, hook: HookRequest) -> Result<Response, ApiError> {
    let received = channels::receive_inbound(&s.services, &hook.channel, hook.request())
        .await?
        .ok_or_else(|| parley_services::ServiceError::invariant("the api channel read nothing from a valid body"))?;
    let status = if received.new { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(received.message)).into_response())
}

/// Report an outbound message's delivery status (api channels).
///
/// Your system calls this when a message Parley POSTed to it is sent,
/// delivered, read or has failed, naming it by the `external_id` your reply
/// gave. Signed like inbound messages. Status only moves forward: a report
/// that would move it back changes nothing and answers the message as it
/// is. Emits `message.sent`, `message.delivered`, `message.read` or
/// `message.failed`.
#[utoipa::path(
    post, path = "/api/v1/channels/{channel_id}/status", tag = "Channels",
    params(("channel_id" = i64, Path)),
    request_body = parley_services::messaging::channels::StatusReport,
    responses(
        (status = 200, body = parley_domain::conversation::Message),
        (status = 401, body = ErrorBody, description = "Missing, stale or wrong signature — also when no api channel has this id, so the answer reveals nothing"),
        (status = 403, body = ErrorBody, description = "The channel is disabled"),
        (status = 404, body = ErrorBody, description = "No outbound message with that external_id on this channel"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn receive_status(
    State(s): State<AppState>,
    hook: HookRequest,
) -> Result<Json<parley_domain::conversation::Message>, ApiError> {
    use parley_services::messaging::messages::{Reported, report_status};
    match report_status(&s.services, &hook.channel, hook.request()).await? {
        Reported::Applied(message) => Ok(Json(message)),
        // The api channel answers 404 for an unknown external_id instead.
        Reported::Kept => Err(parley_services::ServiceError::invariant("an api channel kept an early report").into()),
    }
}

/// A provider's request to one of a channel's hooks, as it arrived: the
/// channel id (from the path, or found by the public id a provider's hook
/// names), the URL the provider requested, the headers and the body (within
/// the size limit). The connector authenticates it before anything is read.
pub(crate) struct HookRequest {
    pub(crate) channel: HookChannel,
    /// The URL as the provider requested it (the public root, path and query).
    url: String,
    headers: HeaderMap,
    body: bytes::Bytes,
}

impl HookRequest {
    /// Reads a request to `hook` of `channel`. Where the provider
    /// authenticates with a secret in a header, that is checked first: a
    /// refused request is answered before its body is read.
    pub(crate) async fn read(
        s: &AppState,
        channel: HookChannel,
        hook: Hook,
        uri: &axum::http::Uri,
        headers: HeaderMap,
        body: axum::body::Body,
        limit: usize,
    ) -> Result<Self, ApiError> {
        let url = format!("{}{}", s.services.config().public_url(), path_and_query(uri));
        parley_services::messaging::channels::admit_hook(&s.services, &channel, hook, &url, &headers).await?;
        let body = crate::middleware::read_body(body, limit).await?;
        Ok(Self { channel, url, headers, body })
    }

    pub(crate) fn request(&self) -> InboundRequest<'_> {
        InboundRequest { url: &self.url, headers: &self.headers, body: &self.body }
    }
}

/// A provider's request to a hook URL that names its channel by public id
/// (`/hooks/<provider>/{public_id}/…`), neither authenticated nor read yet.
pub(crate) struct PublicHook {
    public_id: String,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: axum::body::Body,
}

impl PublicHook {
    /// Authenticates the request as `hook` of a channel of one of `kinds`,
    /// then reads its body (up to `limit` bytes).
    pub(crate) async fn read(
        self,
        s: &AppState,
        kinds: &'static [ChannelType],
        hook: Hook,
        limit: usize,
    ) -> Result<HookRequest, ApiError> {
        let channel = HookChannel::Public { public_id: self.public_id, kinds };
        HookRequest::read(s, channel, hook, &self.uri, self.headers, self.body, limit).await
    }

    /// Reads the message the provider posts and takes it.
    pub(crate) async fn take_message(
        self,
        s: &AppState,
        kinds: &'static [ChannelType],
        limit: usize,
    ) -> Result<(), ApiError> {
        let hook = self.read(s, kinds, Hook::Message, limit).await?;
        channels::receive_inbound(&s.services, &hook.channel, hook.request()).await?;
        Ok(())
    }
}

impl axum::extract::FromRequest<AppState> for PublicHook {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, s: &AppState) -> Result<Self, ApiError> {
        use axum::extract::FromRequestParts;
        let (mut parts, body) = req.into_parts();
        let crate::extract::PathText(public_id) = crate::extract::PathText::from_request_parts(&mut parts, s).await?;
        // The URI the provider requested (signatures cover it), not the one nesting left.
        let axum::extract::OriginalUri(uri) =
            axum::extract::OriginalUri::from_request_parts(&mut parts, s).await.unwrap_or_else(|never| match never {});
        Ok(Self { public_id, uri, headers: parts.headers, body })
    }
}

/// The path and query of a request, as its sender wrote them (signatures
/// such as Twilio's cover them).
pub(crate) fn path_and_query(uri: &axum::http::Uri) -> String {
    uri.path_and_query().map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned())
}

impl axum::extract::FromRequest<AppState> for HookRequest {
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, s: &AppState) -> Result<Self, ApiError> {
        use axum::extract::FromRequestParts;
        let (mut parts, body) = req.into_parts();
        let Ids([channel_id]) = Ids::<1>::from_request_parts(&mut parts, s).await?;
        let channel = HookChannel::Id(channel_id);
        // The api channel signs its body: nothing to check before reading it.
        HookRequest::read(s, channel, Hook::Message, &parts.uri, parts.headers, body, s.config.max_body_bytes).await
    }
}
