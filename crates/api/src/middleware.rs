//! Layers every request passes through: request id and logging span, panic
//! capture, identification and rate limiting, and JSON answers for unknown
//! routes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use crate::error::{ApiError, InternalErrorBody, detail};
use crate::extract::ClientIp;
use crate::extract::auth::{Identity, identify};
use crate::state::AppState;

pub(crate) static REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// The id of the current request, available as an extension.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

fn accepted_request_id(v: &HeaderValue) -> Option<String> {
    let s = v.to_str().ok()?;
    let ok = (1..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    ok.then(|| s.to_owned())
}

/// Assigns the request id (keeping a sane one sent by the client), opens the
/// request's log span, echoes `X-Request-Id`, and gives every 500 a JSON body
/// that names the request id instead of any internal detail.
pub async fn request_context(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let id =
        req.headers().get(&REQUEST_ID).and_then(accepted_request_id).unwrap_or_else(|| ulid::Ulid::new().to_string());
    req.extensions_mut().insert(RequestId(id.clone()));
    if !state.config.trusted_proxies.is_empty() {
        let client = ClientIp::behind(ClientIp::peer(req.extensions()), req.headers(), &state.config.trusted_proxies);
        req.extensions_mut().insert(client);
    }
    let method = metric_method(req.method());
    let route = req.extensions().get::<axum::extract::MatchedPath>().map(|p| p.as_str().to_owned());
    // Named and described as OpenTelemetry's HTTP conventions say, for traces.
    let span = tracing::info_span!(
        "request",
        otel.name = %format_args!("{} {}", req.method(), route.as_deref().unwrap_or("unmatched")),
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        request_id = %id,
        http.request.method = %req.method(),
        url.path = %req.uri().path(),
        http.route = route.as_deref(),
        http.response.status_code = tracing::field::Empty,
        workspace_id = tracing::field::Empty,
    );
    parley_telemetry::traces::continue_trace(&span, req.headers());
    let started = Instant::now();
    let body_read = track_body(&mut req);
    let mut response = next.run(req).instrument(span.clone()).await;
    let status = response.status();
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("otel.status_code", "error");
    }
    let route = route.as_deref().unwrap_or("unmatched");
    let metrics = state.services.metrics();
    metrics.http_requests.with_label_values(&[method, route, status.as_str()]).inc();
    metrics.http_duration.with_label_values(&[method, route]).observe(started.elapsed().as_secs_f64());
    if is_event_stream(&response) {
        response = counted_stream(response, metrics.connected("sse"));
    }
    span.in_scope(|| {
        tracing::info!(status = status.as_u16(), elapsed_ms = started.elapsed().as_secs_f64() * 1e3, "request finished")
    });
    if status == StatusCode::INTERNAL_SERVER_ERROR {
        let headers = std::mem::take(response.headers_mut());
        let body = InternalErrorBody { detail: "Internal server error".into(), request_id: id.clone() };
        response = (status, axum::Json(body)).into_response();
        for (k, v) in headers.iter() {
            if k != axum::http::header::CONTENT_LENGTH && k != axum::http::header::CONTENT_TYPE {
                response.headers_mut().insert(k.clone(), v.clone());
            }
        }
    }
    if body_read.is_some_and(|read| !read.load(Ordering::Acquire)) {
        // The answer came before the body was read (a 413, a 401 on a
        // POST…): the rest of it would be taken for the next request, so
        // the connection cannot be reused.
        response.headers_mut().insert(axum::http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    // Errors are JSON, except the pages people read (OAuth's sign-in and consent).
    if (status.is_client_error() || status.is_server_error()) && !is_json(&response) && !is_html(&response) {
        response = as_json_error(response).await;
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID.clone(), v);
    }
    response
}

/// Wraps a request body that is not empty so that its end is noticed;
/// returns the flag that says whether it was read to the end.
fn track_body(req: &mut Request) -> Option<Arc<AtomicBool>> {
    use http_body::Body as _;
    if req.body().is_end_stream() {
        return None;
    }
    let read = Arc::new(AtomicBool::new(false));
    let body = std::mem::take(req.body_mut());
    *req.body_mut() = Body::new(TrackedBody { inner: body, read: read.clone() });
    Some(read)
}

/// A request body that records when it has been read to the end.
struct TrackedBody {
    inner: Body,
    read: Arc<AtomicBool>,
}

impl http_body::Body for TrackedBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, std::task::Poll::Ready(None)) || self.inner.is_end_stream() {
            self.read.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The method as a metric label: the ones the API serves, else `other`.
fn metric_method(m: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

fn is_event_stream(response: &Response) -> bool {
    is_of(response, "text/event-stream")
}

/// An event stream counted in `parley_stream_clients` until its body is
/// dropped (the client went away or the stream ended).
fn counted_stream(response: Response, open: parley_telemetry::Connected) -> Response {
    use futures::StreamExt;
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _held = &open;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

/// Whether the response's `Content-Type` is of `kind` (`text/html`, …).
fn is_of(response: &Response, kind: &str) -> bool {
    response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with(kind))
}

fn is_json(response: &Response) -> bool {
    is_of(response, "application/json")
}

fn is_html(response: &Response) -> bool {
    is_of(response, "text/html")
}

/// Rewrites an error a framework layer answered in plain text (an
/// extractor's rejection, say) into the `{"detail": …}` of docs/api.md, keeping its
/// status and headers. Our own errors are JSON already; this is the net
/// under everything else.
async fn as_json_error(response: Response) -> Response {
    use http_body_util::BodyExt;
    let (mut parts, body) = response.into_parts();
    let limited = http_body_util::Limited::new(body, 4096).collect().await;
    let text = limited.map(|b| String::from_utf8_lossy(&b.to_bytes()).trim().to_owned()).unwrap_or_default();
    let detail = if text.is_empty() { parts.status.canonical_reason().unwrap_or("Error").to_owned() } else { text };
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    parts.headers.insert(axum::http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let body = serde_json::to_vec(&crate::error::ErrorBody { detail }).unwrap_or_default();
    Response::from_parts(parts, Body::from(body))
}

/// A panic in a handler becomes a plain 500; `request_context` adds the body.
pub fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("handler panicked");
    StatusCode::INTERNAL_SERVER_ERROR.into_response()
}

/// Routes whose callers present API credentials. Elsewhere (webchat,
/// files, provider webhooks under `/hooks/`, and the API routes that
/// establish a session or check a signature) credential headers mean
/// nothing, and requests are counted per IP whatever they carry.
fn takes_credentials(path: &str) -> bool {
    (path.starts_with("/api/") || path == "/mcp" || path.starts_with("/mcp/"))
        && !crate::openapi::UNAUTHENTICATED.iter().any(|t| crate::openapi::matches_template(path, t))
}

/// Routes a provider (or an api channel's system, or a metrics scraper)
/// calls, which check a signature, shared secret or token themselves.
fn checks_its_own_signature(path: &str) -> bool {
    path.starts_with("/hooks/")
        || path == "/metrics"
        || ["/api/v1/channels/{channel_id}/inbound", "/api/v1/channels/{channel_id}/status"]
            .iter()
            .any(|t| crate::openapi::matches_template(path, t))
}

/// Admission: identifies the caller once, then counts the request against
/// its quota — per principal (API key or user) when the credential is
/// valid, per client IP otherwise — and adds `RateLimit-Policy` and
/// `RateLimit` to every response, with a 429 and `Retry-After` past the
/// limit. A refused credential also counts against its IP's failed
/// authentication quota; past that, the answer is a 429 rather than a 401.
pub async fn admit(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    // The dashboard's static files are served from memory and take no
    // credential; one page load fetches a few dozen of them, which would
    // otherwise spend a quarter of the IP's burst before its first API call.
    if req.uri().path().starts_with("/assets/") {
        return next.run(req).await;
    }
    let ip = ClientIp::of(req.extensions());
    // Formatted only for requests counted per IP.
    let ip_bucket = move || ip.bucket();
    let path = req.uri().path();
    let self_authenticating = checks_its_own_signature(path);
    let identity = if takes_credentials(path) {
        let for_mcp = path == "/mcp" || path.starts_with("/mcp/");
        match identify(&state, req.headers(), for_mcp).await {
            Ok(identity) => identity,
            Err(e) => return e.into_response(),
        }
    } else {
        Identity::Anonymous
    };
    if let Identity::Authenticated(p) = &identity {
        tracing::Span::current().record("workspace_id", p.scope.workspace_id);
        // For routes mounted from outside this crate (the MCP endpoint).
        req.extensions_mut().insert(p.clone());
    }
    let limits = &state.limits;
    let failed = if matches!(identity, Identity::Refused(_)) {
        Some(limits.auth_failures.check(&ip_bucket()).await).filter(|d| !d.allowed)
    } else {
        None
    };
    let bucket = identity.principal_bucket().unwrap_or_else(ip_bucket);
    let decision = limits.requests.check(&bucket).await;
    req.extensions_mut().insert(identity);
    let mut response = match failed {
        Some(d) => ApiError::RateLimited { retry_after_s: d.retry_after_s }.into_response(),
        None if !decision.allowed => ApiError::RateLimited { retry_after_s: decision.retry_after_s }.into_response(),
        None => next.run(req).await,
    };
    // Hooks authenticate requests themselves (a provider's signature or
    // secret). A refusal counts against the IP's failed-authentication
    // quota like a bad key's, and past it the refusal is a 429 (a guesser
    // learns nothing more); an authentic request is never held back, since
    // providers send every tenant's traffic from a few shared addresses
    // that anyone can make them post wrong credentials from.
    if self_authenticating && response.status() == StatusCode::UNAUTHORIZED {
        let d = limits.auth_failures.check(&ip_bucket()).await;
        if !d.allowed {
            response = ApiError::RateLimited { retry_after_s: d.retry_after_s }.into_response();
        }
    }
    let quota = limits.requests.quota();
    let policy = format!("\"default\";q={};w={}", quota.burst(), quota.window_s());
    let current = format!("\"default\";r={};t={}", decision.remaining, decision.reset_s);
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&policy) {
        headers.insert(RATELIMIT_POLICY.clone(), v);
    }
    if let Ok(v) = HeaderValue::from_str(&current) {
        headers.insert(RATELIMIT.clone(), v);
    }
    response
}

pub async fn not_found() -> Response {
    detail(StatusCode::NOT_FOUND, "Not Found")
}

pub async fn method_not_allowed() -> Response {
    detail(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
}

/// Reads a whole body, refusing more than `limit` bytes with a 413.
pub(crate) async fn read_body(body: Body, limit: usize) -> Result<bytes::Bytes, ApiError> {
    use http_body_util::BodyExt;
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(ApiError::payload_too_large(limit)),
        Err(e) => Err(ApiError::bad_request(format!("Could not read the request body: {e}"))),
    }
}
