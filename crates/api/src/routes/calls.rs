//! `/api/v1/calls`: placing voice calls, following them, their transcripts
//! and recordings.

use axum::Json;
use axum::extract::State;
use axum::extract::ws::{Message as WsFrame, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use parley_domain::call::Call;
use parley_domain::validation::{Parsed, QueryReader};
use parley_services::calls::CallFilter;
use parley_services::calls::{self, CreateCall, PlacedCall, RecordingLink, Transcript};
use parley_voice::webcall::{Frame as WebFrame, Socket, WebCalls};
use serde_json::Value;
use tokio::sync::mpsc;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{
    Auth, FromBody, FromQuery, JsonBody, ListQuery, Params, PathText, RequiredIdempotency, answer_response,
};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_calls, create_call))
        .routes(routes!(get_call))
        .routes(routes!(hangup_call))
        .routes(routes!(analyze_call))
        .routes(routes!(get_transcript))
        .routes(routes!(get_recording))
        .routes(routes!(get_waveform))
        .routes(routes!(web_call_socket))
}

impl FromBody for CreateCall {
    fn from_body(body: Value, state: &AppState) -> Parsed<Self> {
        calls::parse_create(body, state.services.config().contacts.default_region)
    }
}

impl FromQuery for CallFilter {
    fn from_query(q: &mut QueryReader) -> Self {
        calls::parse_filter(q)
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `calls::parse_filter`
struct CallListParams {
    #[param(inline)]
    status: Option<parley_domain::call::CallStatus>,
    #[param(minimum = 1)]
    agent_id: Option<i64>,
    /// The calls with one contact.
    #[param(minimum = 1)]
    contact_id: Option<i64>,
    /// The calls of one conversation (a call's own, or a contact's thread).
    #[param(minimum = 1)]
    conversation_id: Option<i64>,
    #[param(inline)]
    direction: Option<parley_domain::call::CallDirection>,
    /// RFC 3339; calls created at or after it.
    #[param(value_type = Option<String>, format = DateTime)]
    created_after: Option<String>,
    /// RFC 3339; calls created before it.
    #[param(value_type = Option<String>, format = DateTime)]
    created_before: Option<String>,
}

/// `redirect` of the recording route.
pub struct RecordingParams {
    json: bool,
}

impl FromQuery for RecordingParams {
    fn from_query(q: &mut QueryReader) -> Self {
        RecordingParams { json: q.boolean("redirect").unwrap_or(false) }
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only
struct RecordingQuery {
    /// `true`: answer 200 with JSON `{url, expires_at, content_type, duration_ms}` instead of a 307.
    redirect: Option<bool>,
}

/// `points` of the waveform route.
pub struct WaveformParams {
    points: usize,
}

impl FromQuery for WaveformParams {
    fn from_query(q: &mut QueryReader) -> Self {
        let (min, max, default) = calls::WAVEFORM_POINTS;
        WaveformParams { points: q.integer("points", min, max).unwrap_or(default) as usize }
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only
struct WaveformQuery {
    /// Columns per side (10–4000, default 1000).
    #[param(minimum = 10, maximum = 4000)]
    points: Option<i64>,
}

fn not_found_call(id: &str) -> ApiError {
    ApiError::Status(StatusCode::NOT_FOUND, format!("Call {id} not found"))
}

/// Place a call.
///
/// Requires `Idempotency-Key` (the same key with another body is a 409; a
/// replay answers the first response). The agent speaks first
/// (`first_message`, else the agent's), and the call runs until either side
/// hangs up or `max_duration_s`. It is charged per started second when it
/// ends. Test-mode calls, and live calls with `telephony.provider =
/// "simulated"`, run on the simulated provider: `+15005550001` fails to
/// dial (502), `+15005550002` is busy, `+15005550003` is not answered,
/// `+15005550004` fails after ringing; any other number answers.
#[utoipa::path(
    post, path = "/api/v1/calls", tag = "Calls",
    params(("Idempotency-Key" = String, Header, description = "Required.")),
    request_body = CreateCall,
    responses(
        (status = 201, body = PlacedCall, description = "Placed (`queued`; it rings next). A web call's answer also has `web`: how the browser joins"),
        (status = 400, body = ErrorBody, description = "Missing Idempotency-Key"),
        (status = 402, body = ErrorBody, description = "The balance does not cover one minute"),
        (status = 403, body = ErrorBody, description = "Voice is not enabled for the workspace"),
        (status = 409, body = ErrorBody, description = "The key was used with another body"),
        (status = 422, body = ValidationErrorBody),
        (status = 429, body = ErrorBody, description = "The workspace's concurrent-call limit"),
        (status = 502, body = ErrorBody, description = "The telephony provider failed; the call is stored as `failed` (`dial_failed`) and not charged"),
    )
)]
async fn create_call(
    auth: Auth,
    State(s): State<AppState>,
    RequiredIdempotency(idem): RequiredIdempotency,
    body: JsonBody<CreateCall>,
) -> Result<Response, ApiError> {
    let JsonBody { value, canonical } = body;
    let answered = calls::place(&s.services, auth.scope(), idem.for_body(&canonical), value).await?;
    Ok(answer_response(answered))
}

/// A web call's socket: the browser's microphone up, the agent's voice down.
///
/// Open it with the `web.url` of `POST /api/v1/calls {"transport": "web"}`
/// and send, within 10 seconds, the text frame `{"type": "start", "token":
/// "<web.token>", "audio": {"encoding": "pcm_s16le", "sample_rate":
/// 16000}}`: the server answers `{"type": "ready", "call_id", "input",
/// "output"}` (the call is answered) or `{"type": "error", "detail"}` and
/// closes. Then binary frames carry audio both ways, PCM 16-bit
/// little-endian mono: up at the rate `start` named (8,000–48,000 Hz), down
/// at `output.sample_rate` (8,000 Hz) in 20 ms frames paced in real time.
/// The server sends `{"type": "mark", "name"}` when a stretch of speech has
/// all been sent, `{"type": "clear"}` when the caller interrupts (drop what
/// is queued), and `{"type": "end"}` when the call ends; the browser may
/// send `{"type": "dtmf", "digit": "5"}` and `{"type": "end"}`. Frames up
/// to 64 KiB. The token is the credential: no cookie or API key is read.
#[utoipa::path(
    get, path = "/calls/web", tag = "Calls", operation_id = "web_call_socket",
    responses(
        (status = 101, description = "Switching to the WebSocket protocol"),
        (status = 426, body = ErrorBody, description = "Not a WebSocket request"),
    )
)]
async fn web_call_socket(
    State(s): State<AppState>,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let upgrade = upgrade.map_err(|_| {
        ApiError::Status(StatusCode::UPGRADE_REQUIRED, "Connect with a WebSocket (Upgrade: websocket)".into())
    })?;
    let web_calls = calls::web_calls(&s.services);
    let open = s.services.metrics().connected("websocket");
    Ok(upgrade.max_message_size(MAX_WEB_FRAME_BYTES).on_upgrade(move |socket| async move {
        let _open = open;
        web_bridge(web_calls, socket).await
    }))
}

/// Largest web-call frame (20 ms at 48 kHz is 1,920 bytes).
const MAX_WEB_FRAME_BYTES: usize = 64 * 1024;

/// Carries the socket's frames to and from the web-call provider.
async fn web_bridge(web_calls: std::sync::Arc<WebCalls>, socket: WebSocket) {
    let (mut out, mut incoming) = socket.split();
    let (from_browser_tx, from_browser) = mpsc::channel::<WebFrame>(256);
    let (to_browser, mut to_browser_rx) = mpsc::channel::<WebFrame>(1024);
    let reading = async move {
        while let Some(Ok(frame)) = incoming.next().await {
            let frame = match frame {
                WsFrame::Text(text) => WebFrame::Text(text.to_string()),
                WsFrame::Binary(bytes) => WebFrame::Audio(bytes.to_vec()),
                WsFrame::Close(_) => break,
                _ => continue,
            };
            if from_browser_tx.send(frame).await.is_err() {
                break;
            }
        }
    };
    let writing = async move {
        while let Some(frame) = to_browser_rx.recv().await {
            let frame = match frame {
                WebFrame::Text(text) => WsFrame::Text(Utf8Bytes::from(text)),
                WebFrame::Audio(bytes) => WsFrame::Binary(bytes.into()),
            };
            if out.send(frame).await.is_err() {
                return;
            }
        }
        let _ = out.close().await;
    };
    let connecting = web_calls.connect(Socket { from_browser, to_browser });
    // The socket closes when the provider lets go of it (the writer then
    // ends) or when the browser closes it (the provider sees its frames end).
    let carrying = async move {
        tokio::select! {
            _ = reading => {}
            _ = writing => {}
        }
    };
    tokio::join!(connecting, carrying);
}

/// List calls, newest first.
#[utoipa::path(
    get, path = "/api/v1/calls", tag = "Calls",
    params(PageParams, CallListParams),
    responses((status = 200, body = Items<Call>), (status = 422, body = ValidationErrorBody))
)]
async fn list_calls(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<CallFilter>,
) -> Result<Json<Items<Call>>, ApiError> {
    let found = calls::list(&s.services, auth.scope(), &q.filter, q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}

/// Get a call.
#[utoipa::path(
    get, path = "/api/v1/calls/{call_id}", tag = "Calls",
    params(("call_id" = String, Path, description = "`call_…`")),
    responses((status = 200, body = Call), (status = 404, body = ErrorBody, example = json!({"detail": "Call call_01J… not found"})))
)]
async fn get_call(auth: Auth, State(s): State<AppState>, PathText(id): PathText) -> Result<Json<Call>, ApiError> {
    Ok(Json(calls::get(&s.services, auth.scope(), &id).await?))
}

/// Analyse an ended call again, with its agent's `analysis` plan as it is
/// now (summary, extraction into `analysis.schema`, success evaluation).
/// Answers 202 with the call; its `analysis` is replaced when the job is
/// done (`call.analyzed`). Billed as a run (`analysis`).
#[utoipa::path(
    post, path = "/api/v1/calls/{call_id}/analysis", tag = "Calls",
    params(("call_id" = String, Path)),
    responses(
        (status = 202, body = Call, description = "Queued; the call as it is now"),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The call has not ended"),
    )
)]
async fn analyze_call(auth: Auth, State(s): State<AppState>, PathText(id): PathText) -> Result<Response, ApiError> {
    let call = calls::analyze(&s.services, auth.scope(), &id).await?;
    Ok((StatusCode::ACCEPTED, Json(call)).into_response())
}

/// Hang up a call (`ended_reason: agent_hangup`, or `canceled` before it
/// was answered). Answers the ended call; 409 once it has ended.
#[utoipa::path(
    post, path = "/api/v1/calls/{call_id}/hangup", tag = "Calls",
    params(("call_id" = String, Path)),
    responses(
        (status = 200, body = Call),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The call has already ended"),
    )
)]
async fn hangup_call(auth: Auth, State(s): State<AppState>, PathText(id): PathText) -> Result<Json<Call>, ApiError> {
    Ok(Json(calls::hangup(&s.services, auth.scope(), &id).await?))
}

/// A call's transcript: the finished segments so far, in order.
#[utoipa::path(
    get, path = "/api/v1/calls/{call_id}/transcript", tag = "Calls",
    params(("call_id" = String, Path)),
    responses((status = 200, body = Transcript), (status = 404, body = ErrorBody))
)]
async fn get_transcript(
    auth: Auth,
    State(s): State<AppState>,
    PathText(id): PathText,
) -> Result<Json<Transcript>, ApiError> {
    Ok(Json(calls::transcript(&s.services, auth.scope(), &id).await?))
}

/// A recording's waveform: per side, the loudest sample of each of
/// `points` equal slices of the call, in thousandths of full scale — what a
/// page needs to draw the recording without downloading it. Recordings do
/// not change, so the answer may be cached. 404 when the call has no
/// recording; 503 when storage cannot read it.
#[utoipa::path(
    get, path = "/api/v1/calls/{call_id}/recording/waveform", tag = "Calls",
    params(("call_id" = String, Path), WaveformQuery),
    responses(
        (status = 200, body = calls::Waveform),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
        (status = 503, body = ErrorBody, description = "Storage cannot read the recording"),
    )
)]
async fn get_waveform(
    auth: Auth,
    State(s): State<AppState>,
    PathText(id): PathText,
    Params(params): Params<WaveformParams>,
) -> Result<Response, ApiError> {
    let waveform = calls::waveform(&s.services, auth.scope(), &id, params.points).await?;
    Ok(([(header::CACHE_CONTROL, HeaderValue::from_static("private, max-age=3600"))], Json(waveform)).into_response())
}

/// A call's recording (stereo WAV: caller left, agent right).
///
/// 307 to a signed link (valid `storage.url_ttl_seconds`, 1 h) by default;
/// with `redirect=true`, 200 JSON `{url, expires_at, content_type,
/// duration_ms}`. 404 when the call has no recording; 503 when storage
/// cannot produce a URL (the file is checked first, so a link is never dead).
#[utoipa::path(
    get, path = "/api/v1/calls/{call_id}/recording", tag = "Calls",
    params(("call_id" = String, Path), RecordingQuery),
    responses(
        (status = 200, body = RecordingLink, description = "With redirect=true"),
        (status = 307, description = "Location: the signed link"),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
        (status = 503, body = ErrorBody, description = "Storage cannot produce a URL"),
    )
)]
async fn get_recording(
    auth: Auth,
    State(s): State<AppState>,
    PathText(id): PathText,
    Params(params): Params<RecordingParams>,
) -> Result<Response, ApiError> {
    let link = calls::recording(&s.services, auth.scope(), &id).await?;
    if params.json {
        return Ok(Json(link).into_response());
    }
    let location = HeaderValue::from_str(&link.url).map_err(|_| not_found_call(&id))?;
    Ok((StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, location)]).into_response())
}
