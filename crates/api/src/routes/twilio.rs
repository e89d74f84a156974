//! Twilio's webhooks.
//!
//! - Calls carried by a Twilio number (`telephony.provider = "twilio"`):
//!   the voice webhook, the status callback and the Media Streams
//!   WebSocket, checked and handled by the provider (`parley_voice::twilio`);
//!   all three answer 404 when Twilio does not carry this server's calls.
//! - Messages on `sms` and `whatsapp` channels:
//!   `/hooks/twilio/{public_id}/inbound` and `/status`, checked and read by
//!   the channel's connector like every channel's hooks.
//!
//! These handlers only read the request and write the answer.

use axum::body::Body;
use axum::extract::ws::{Message as Frame, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use parley_voice::twilio::{HookError, TwilioProvider};
use tokio::sync::mpsc;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::channels::PublicHook;
use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// Largest webhook form (Twilio's are a few hundred bytes).
const MAX_FORM_BYTES: usize = 64 * 1024;
/// Largest stream frame (a 20 ms media frame is ~300 bytes).
const MAX_FRAME_BYTES: usize = 64 * 1024;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(voice))
        .routes(routes!(status))
        .routes(routes!(media))
        .routes(routes!(message_inbound))
        .routes(routes!(message_status))
}

/// The parameters Twilio posts (more may come; all are signed).
#[derive(ToSchema)]
#[allow(dead_code)] // documentation; read as pairs
pub struct TwilioCallForm {
    /// `CA…`.
    #[schema(rename = "CallSid")]
    call_sid: String,
    /// `AC…`: must be the configured account.
    #[schema(rename = "AccountSid")]
    account_sid: String,
    /// The caller (voice webhook).
    #[schema(rename = "From")]
    from: Option<String>,
    /// The number dialled (voice webhook).
    #[schema(rename = "To")]
    to: Option<String>,
    /// `ringing`, `in-progress`, `busy`, `no-answer`, `failed`, `canceled`, `completed`.
    #[schema(rename = "CallStatus")]
    call_status: Option<String>,
}

/// The signed form of a Twilio webhook, and the URL it was sent to.
struct Hook {
    path_and_query: String,
    signature: Option<String>,
    params: Vec<(String, String)>,
}

impl Hook {
    async fn read(uri: &axum::http::Uri, headers: &HeaderMap, body: Body) -> Result<Hook, ApiError> {
        let bytes = crate::middleware::read_body(body, MAX_FORM_BYTES).await?;
        let params: Vec<(String, String)> = serde_urlencoded::from_bytes(&bytes)
            .map_err(|_| ApiError::bad_request("The body is not valid form encoding"))?;
        Ok(Hook {
            path_and_query: super::channels::path_and_query(uri),
            signature: headers.get("x-twilio-signature").and_then(|v| v.to_str().ok()).map(str::to_owned),
            params,
        })
    }
}

fn hook_error(e: HookError) -> ApiError {
    match e {
        HookError::Unauthorized => ApiError::unauthorized(e.to_string()),
        HookError::BadRequest(detail) => ApiError::bad_request(detail),
    }
}

fn provider(s: &AppState) -> Result<std::sync::Arc<TwilioProvider>, ApiError> {
    Ok(parley_services::calls::twilio(&s.services)?)
}

/// Twilio's voice webhook for a number (paste `{public_url}/hooks/twilio/voice`
/// as the number's "A call comes in" webhook, HTTP POST).
///
/// Checked against `X-Twilio-Signature` (the auth token over the URL and
/// the sorted parameters) before anything is written. The call is stored on
/// the `voice` channel whose number was dialled, routed by the
/// `call.inbound` triggers, and answered with TwiML that connects its audio
/// to `/hooks/twilio/media` (`<Connect><Stream>`), or refused with
/// `<Reject>` (`busy` at the call limit).
#[utoipa::path(
    post, path = "/hooks/twilio/voice", tag = "Calls", operation_id = "twilio_voice_webhook",
    params(("X-Twilio-Signature" = Option<String>, Header, description = "Twilio's signature of the request")),
    request_body(content = TwilioCallForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, content_type = "text/xml", body = String, description = "TwiML: `<Connect><Stream>` or `<Reject>`"),
        (status = 400, body = ErrorBody, description = "Not a form, or no CallSid, From or To"),
        (status = 401, body = ErrorBody, description = "Missing or wrong signature, or another account's request; nothing was written"),
        (status = 404, body = ErrorBody, description = "Twilio does not carry this server's calls"),
        (status = 413, body = ErrorBody, description = "The form is over 64 KiB"),
    )
)]
async fn voice(
    State(s): State<AppState>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let twilio = provider(&s)?;
    let hook = Hook::read(&uri, &headers, body).await?;
    let twiml = twilio
        .incoming_call(&hook.path_and_query, hook.signature.as_deref(), &hook.params)
        .await
        .map_err(hook_error)?;
    Ok(([(header::CONTENT_TYPE, "text/xml; charset=utf-8")], twiml).into_response())
}

/// Twilio's status callback for calls Parley places (set on each call).
///
/// Signed like the voice webhook. Ringing, and the outcomes of calls never
/// answered (`busy`, `no-answer`, `failed`, `canceled`), move the call on.
#[utoipa::path(
    post, path = "/hooks/twilio/status", tag = "Calls", operation_id = "twilio_status_callback",
    params(("X-Twilio-Signature" = Option<String>, Header, description = "Twilio's signature of the request")),
    request_body(content = TwilioCallForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 204, description = "Taken"),
        (status = 400, body = ErrorBody, description = "Not a form, or no CallSid or CallStatus"),
        (status = 401, body = ErrorBody, description = "Missing or wrong signature, or another account's request"),
        (status = 404, body = ErrorBody, description = "Twilio does not carry this server's calls"),
        (status = 413, body = ErrorBody, description = "The form is over 64 KiB"),
    )
)]
async fn status(
    State(s): State<AppState>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let twilio = provider(&s)?;
    let hook = Hook::read(&uri, &headers, body).await?;
    twilio.call_status(&hook.path_and_query, hook.signature.as_deref(), &hook.params).map_err(hook_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// A call's audio: the Media Streams WebSocket Twilio opens when the TwiML
/// says `<Connect><Stream>`.
///
/// Twilio's JSON frames: `connected`, `start` (whose custom parameter
/// `parley_stream`, a one-time token from the TwiML, names the call; a
/// stream naming no awaited call is closed), `media` (base64 μ-law, 8 kHz),
/// `dtmf`, `mark`, `stop`. Parley sends `media`, `mark` and `clear`.
#[utoipa::path(
    get, path = "/hooks/twilio/media", tag = "Calls", operation_id = "twilio_media_stream",
    responses(
        (status = 101, description = "Switching to the WebSocket protocol"),
        (status = 404, body = ErrorBody, description = "Twilio does not carry this server's calls"),
        (status = 426, body = ErrorBody, description = "Not a WebSocket request"),
    )
)]
async fn media(
    State(s): State<AppState>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let twilio = provider(&s)?;
    let upgrade = upgrade.map_err(|_| {
        ApiError::Status(StatusCode::UPGRADE_REQUIRED, "Connect with a WebSocket (Upgrade: websocket)".into())
    })?;
    let open = s.services.metrics().connected("websocket");
    Ok(upgrade.max_message_size(MAX_FRAME_BYTES).on_upgrade(move |socket| async move {
        let _open = open;
        bridge(twilio, socket).await
    }))
}

/// Carries the socket's text frames to and from the provider.
async fn bridge(twilio: std::sync::Arc<TwilioProvider>, socket: WebSocket) {
    let (mut out, mut incoming) = socket.split();
    let (from_twilio_tx, from_twilio) = mpsc::channel::<String>(256);
    let (to_twilio, mut to_twilio_rx) = mpsc::channel::<String>(1024);
    let reading = async move {
        while let Some(Ok(frame)) = incoming.next().await {
            match frame {
                Frame::Text(text) => {
                    if from_twilio_tx.send(text.to_string()).await.is_err() {
                        break;
                    }
                }
                Frame::Close(_) => break,
                _ => {}
            }
        }
    };
    let writing = async move {
        while let Some(text) = to_twilio_rx.recv().await {
            if out.send(Frame::Text(Utf8Bytes::from(text))).await.is_err() {
                return;
            }
        }
        let _ = out.close().await;
    };
    let streaming = twilio.stream(from_twilio, to_twilio);
    // The stream ends when the provider lets go of it (the writer then
    // closes the socket) or when Twilio closes it (the provider then sees
    // its frames end).
    let carrying = async move {
        tokio::select! {
            _ = reading => {}
            _ = writing => {}
        }
    };
    tokio::join!(streaming, carrying);
}

/// The parameters Twilio posts with a message or its status (more may
/// come; all are signed).
#[derive(ToSchema)]
#[allow(dead_code)] // documentation; read by the connector
pub struct TwilioMessageForm {
    /// `SM…`: the message; a repeated webhook names the same one.
    #[schema(rename = "MessageSid")]
    message_sid: String,
    #[schema(rename = "AccountSid")]
    account_sid: Option<String>,
    /// The sender (`whatsapp:+…` on WhatsApp): the contact's address.
    #[schema(rename = "From")]
    from: Option<String>,
    #[schema(rename = "To")]
    to: Option<String>,
    /// The text (inbound).
    #[schema(rename = "Body")]
    body: Option<String>,
    /// Attachments (inbound).
    #[schema(rename = "NumMedia")]
    num_media: Option<String>,
    /// The WhatsApp profile's name (inbound).
    #[schema(rename = "ProfileName")]
    profile_name: Option<String>,
    /// `queued`, `sent`, `delivered`, `read`, `failed`, `undelivered` (status).
    #[schema(rename = "MessageStatus")]
    message_status: Option<String>,
    #[schema(rename = "ErrorCode")]
    error_code: Option<String>,
}

/// The channel types whose hooks Twilio calls for messages.
const MESSAGING: &[parley_domain::channel::ChannelType] =
    &[parley_domain::channel::ChannelType::Sms, parley_domain::channel::ChannelType::Whatsapp];

/// A message to an `sms` or `whatsapp` channel (paste
/// `{public_url}/hooks/twilio/{public_id}/inbound` as the number's "A message
/// comes in" webhook, HTTP POST).
///
/// Checked against `X-Twilio-Signature` with the channel's auth token before
/// anything is written. The sender becomes (or finds) the contact
/// `sms:+…` / `whatsapp:+…`, the message is stored in their conversation and
/// the agent runtime answers it. A repeated `MessageSid` is stored once.
/// Answers empty TwiML (Parley replies through the API, not in the answer).
#[utoipa::path(
    post, path = "/hooks/twilio/{public_id}/inbound", tag = "Channels", operation_id = "twilio_message_webhook",
    params(
        ("public_id" = String, Path, description = "The channel's public id (`sms_…`, `wa_…`)"),
        ("X-Twilio-Signature" = Option<String>, Header, description = "Twilio's signature of the request"),
    ),
    request_body(content = TwilioMessageForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, content_type = "text/xml", body = String, description = "Empty TwiML: taken (or seen before)"),
        (status = 401, body = ErrorBody, description = "Missing or wrong signature, or no sms/whatsapp channel has this id; nothing was written"),
        (status = 403, body = ErrorBody, description = "The channel is disabled"),
        (status = 413, body = ErrorBody, description = "The form is over 64 KiB"),
        (status = 422, body = crate::error::ValidationErrorBody, description = "The form is not a message"),
    )
)]
async fn message_inbound(State(s): State<AppState>, hook: PublicHook) -> Result<Response, ApiError> {
    hook.take_message(&s, MESSAGING, MAX_FORM_BYTES).await?;
    let twiml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response/>";
    Ok(([(header::CONTENT_TYPE, "text/xml; charset=utf-8")], twiml).into_response())
}

/// A delivery report for a message an `sms` or `whatsapp` channel sent (the
/// `StatusCallback` Parley sets on each message).
///
/// Signed like inbound messages. Status only moves forward; `failed` and
/// `undelivered` fail the message with Twilio's error code. A report for a
/// message whose send Parley has not recorded yet (Twilio can call back
/// first) is kept and applied when it is.
#[utoipa::path(
    post, path = "/hooks/twilio/{public_id}/status", tag = "Channels", operation_id = "twilio_message_status_callback",
    params(
        ("public_id" = String, Path, description = "The channel's public id (`sms_…`, `wa_…`)"),
        ("X-Twilio-Signature" = Option<String>, Header, description = "Twilio's signature of the request"),
    ),
    request_body(content = TwilioMessageForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 204, description = "Taken"),
        (status = 401, body = ErrorBody, description = "Missing or wrong signature, or no sms/whatsapp channel has this id"),
        (status = 403, body = ErrorBody, description = "The channel is disabled"),
        (status = 413, body = ErrorBody, description = "The form is over 64 KiB"),
        (status = 422, body = crate::error::ValidationErrorBody, description = "The form is not a status report"),
    )
)]
async fn message_status(State(s): State<AppState>, hook: PublicHook) -> Result<StatusCode, ApiError> {
    let hook = hook.read(&s, MESSAGING, parley_services::messaging::channels::Hook::Status, MAX_FORM_BYTES).await?;
    // Applied, or kept for a message whose send is not recorded yet: taken either way.
    parley_services::messaging::messages::report_status(&s.services, &hook.channel, hook.request()).await?;
    Ok(StatusCode::NO_CONTENT)
}
