//! `/api/v1/calls`: placing voice calls, following them, their transcripts
//! and recordings.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use parley_domain::call::Call;
use parley_domain::validation::{Parsed, QueryReader};
use parley_services::calls::CallFilter;
use parley_services::calls::{self, CreateCall, RecordingLink, Transcript};
use serde_json::Value;
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
        .routes(routes!(get_transcript))
        .routes(routes!(get_recording))
        .routes(routes!(get_waveform))
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
        (status = 201, body = Call, description = "Placed (`queued`; it rings next)"),
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
