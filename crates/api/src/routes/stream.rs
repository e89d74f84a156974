//! `GET /api/v1/stream`: the workspace's changes as Server-Sent Events
//! (see `parley_services::live` for how they reach every instance).

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as Frame, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use parley_domain::Scope;
use parley_domain::event::Event;
use parley_domain::validation::QueryReader;
use parley_services::Services;
use parley_services::live::{self, LiveEvent, Replay, ResetReason, StreamFilter, StreamSlot, Subscription};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::auth::{Identity, identify};
use crate::extract::{Auth, FromQuery, Params};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(stream))
}

/// How often an open stream checks that its credential still holds (a
/// revoked key, a removed member, an expired session end it).
const RECHECK_EVERY: Duration = Duration::from_secs(30);
/// A comment line this often keeps proxies from closing a quiet stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// What a client waits before reconnecting (the `retry` field).
const RETRY_MS: u64 = 2000;

/// The stream's query.
pub struct StreamQuery {
    types: Vec<String>,
}

impl FromQuery for StreamQuery {
    fn from_query(q: &mut QueryReader) -> Self {
        StreamQuery { types: live::parse_types(q) }
    }
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `live::parse_types`
struct StreamParams {
    /// Only these event types, comma-separated: types (`message.received`)
    /// or families (`message.*`); at most 20. Default: every type the
    /// caller may see.
    #[param(format = "event-types", min_length = 1, max_length = 1000, example = "conversation.*,message.*,handoff.*")]
    types: Option<String>,
}

/// The workspace's changes, live (Server-Sent Events).
///
/// Each change is the event the log records (`GET /api/v1/events/{id}`),
/// sent as it commits on any instance: the SSE `id` is the event's id, the
/// SSE `event` its type (`message.received`, `conversation.updated`,
/// `handoff.requested`, `call.completed`, …) and `data` the event as JSON.
/// Only the key's mode is streamed; members do not receive `webhook.test`.
///
/// Send `Accept: text/event-stream`. A client that reconnects sends
/// `Last-Event-ID` and is first sent what it missed, if that is within
/// the last hour and at most 1,000 events (counted from 10 s before the
/// one it names); otherwise it gets one `reset`
/// event (`{"reason": "unknown_event" | "too_old" | "too_many"}`) and
/// should reload what it shows (also for a `Last-Event-ID` that cannot be
/// an id). At most 20 streams per credential are open on one server at
/// once (429 past that). After a reconnect an event may come twice:
/// the id tells. A `ready` event (`{"replayed": N}`) says the stream is
/// live. The stream ends with an `error` event (`{"status", "detail"}`)
/// when its credential stops being valid (a session's access token expires
/// after 15 minutes: renew it and reconnect); comment lines keep it open
/// while nothing happens.
#[utoipa::path(
    get, path = "/api/v1/stream", tag = "Live",
    params(
        StreamParams,
        ("Last-Event-ID" = Option<String>, Header, description = "The last event id the client received: what followed it is sent first (browsers' EventSource sends it when it reconnects)."),
    ),
    responses(
        (status = 200, content_type = "text/event-stream", body = String,
         description = "The event stream (`id`, `event`, `data` per change)"),
        (status = 406, body = ErrorBody, description = "The request did not accept text/event-stream"),
        (status = 422, body = ValidationErrorBody),
        (status = 429, body = ErrorBody, description = "This credential has 20 streams open on this server already"),
    )
)]
async fn stream(
    auth: Auth,
    State(s): State<AppState>,
    headers: HeaderMap,
    Params(q): Params<StreamQuery>,
) -> Result<Response, ApiError> {
    let accepts =
        headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).any(|v| v.contains("text/event-stream"));
    if !accepts {
        return Err(ApiError::Status(
            StatusCode::NOT_ACCEPTABLE,
            "This is a Server-Sent Events stream: send Accept: text/event-stream".into(),
        ));
    }
    // A Last-Event-ID that cannot be an event id resumes nothing: the
    // client is told to reload, as for an unknown one.
    let last_event_id = headers
        .get("last-event-id")
        .map(|v| v.to_str().ok().map(str::trim).filter(|v| !v.is_empty() && v.len() <= 255).map(str::to_owned));
    let scope = auth.scope();
    let slot = s.services.open_stream(caller_name(&auth.0))?;
    let filter = StreamFilter::new(&auth.0, q.types);
    // Joined before the replay is read: nothing committed in between is missed.
    let subscription = s.services.watch(scope);
    let mut client = Client::new(s.clone(), headers, scope, filter, subscription, slot);
    let replayed = match last_event_id {
        Some(Some(id)) => client.catch_up(&id).await?,
        Some(None) => {
            client.reset(ResetReason::UnknownEvent);
            0
        }
        None => 0,
    };
    client.pending.push_back(Frame::default().event("ready").data(json!({ "replayed": replayed }).to_string()));
    let frames = futures::stream::unfold(client, |mut client| async move {
        let frame = client.next().await?;
        Some((Ok::<_, std::convert::Infallible>(frame), client))
    });
    let mut response = Sse::new(frames).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response();
    let h = response.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies (nginx, HAProxy with buffering) pass each event on at once.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(response)
}

/// The credential a stream is counted against.
fn caller_name(p: &parley_services::tenancy::auth::Principal) -> String {
    use parley_services::tenancy::auth::Credential;
    match p.credential {
        Credential::ApiKey { key_id, .. } => format!("key:{key_id}"),
        Credential::User { user_id, .. } => format!("user:{user_id}"),
        Credential::OAuth { grant_id, .. } => format!("grant:{grant_id}"),
    }
}

/// One connected client.
struct Client {
    state: AppState,
    headers: HeaderMap,
    scope: Scope,
    filter: StreamFilter,
    subscription: Subscription,
    /// Frames to send before anything new.
    pending: VecDeque<Frame>,
    /// Events sent by the last catch-up, which the live feed may bring again.
    replayed: HashSet<String>,
    /// The id of the last event sent, to catch up from after falling behind.
    last_id: Option<String>,
    recheck: tokio::time::Interval,
    ended: bool,
    _slot: StreamSlot,
}

impl Client {
    fn new(
        state: AppState,
        headers: HeaderMap,
        scope: Scope,
        filter: StreamFilter,
        subscription: Subscription,
        slot: StreamSlot,
    ) -> Self {
        let mut recheck = tokio::time::interval_at(tokio::time::Instant::now() + RECHECK_EVERY, RECHECK_EVERY);
        recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let retry = Frame::default().retry(Duration::from_millis(RETRY_MS)).comment("parley stream");
        Client {
            state,
            headers,
            scope,
            filter,
            subscription,
            pending: VecDeque::from([retry]),
            replayed: HashSet::new(),
            last_id: None,
            recheck,
            ended: false,
            _slot: slot,
        }
    }

    fn services(&self) -> &Services {
        &self.state.services
    }

    /// Queues what followed event `id` from the log (or a `reset`); the number of events queued.
    async fn catch_up(&mut self, id: &str) -> Result<usize, ApiError> {
        let started = Instant::now();
        let replay = self.services().replay(self.scope, id).await?;
        let events = match replay {
            Replay::Events(events) => events,
            Replay::Reset(reason) => {
                self.reset(reason);
                return Ok(0);
            }
        };
        self.replayed.clear();
        let mut queued = 0;
        for event in events.iter().filter(|e| self.filter.admits(e.kind)) {
            self.replayed.insert(event.id.clone());
            self.pending.push_back(frame_of(event));
            queued += 1;
        }
        if let Some(last) = events.last() {
            self.last_id = Some(last.id.clone());
        }
        tracing::debug!(replayed = queued, took_ms = started.elapsed().as_millis() as u64, "stream caught up");
        Ok(queued)
    }

    fn reset(&mut self, reason: ResetReason) {
        self.replayed.clear();
        self.pending.push_back(Frame::default().event("reset").data(json!({ "reason": reason.as_str() }).to_string()));
    }

    fn end_with(&mut self, status: u16, detail: &str) {
        self.pending
            .push_back(Frame::default().event("error").data(json!({ "status": status, "detail": detail }).to_string()));
        self.ended = true;
    }

    /// The next frame to send; `None` ends the stream.
    async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(frame) = self.pending.pop_front() {
                return Some(frame);
            }
            if self.ended {
                return None;
            }
            tokio::select! {
                received = self.subscription.events.recv() => match received {
                    Ok(event) => {
                        if let Some(frame) = self.live(&event) {
                            return Some(frame);
                        }
                    }
                    // Fell behind the hub: catch up from the log.
                    Err(RecvError::Lagged(_)) => match self.last_id.clone() {
                        Some(id) => {
                            if self.catch_up(&id).await.is_err() {
                                self.end_with(503, "The stream could not catch up; reconnect with Last-Event-ID");
                            }
                        }
                        None => self.reset(ResetReason::TooMany),
                    },
                    Err(RecvError::Closed) => return None,
                },
                _ = self.recheck.tick() => self.recheck_credential().await,
            }
        }
    }

    /// The frame for a live event, unless the client may not see it or already has it.
    fn live(&mut self, event: &Arc<LiveEvent>) -> Option<Frame> {
        match &**event {
            LiveEvent::Logged { id, kind, json } => {
                if !self.filter.admits(*kind) || self.replayed.remove(id) {
                    return None;
                }
                self.last_id = Some(id.clone());
                Some(Frame::default().id(id.as_str()).event(kind.as_str()).data(json.as_str()))
            }
            LiveEvent::Presence { json } => {
                self.filter.admits_presence().then(|| Frame::default().event(live::PRESENCE).data(json.as_str()))
            }
        }
    }

    async fn recheck_credential(&mut self) {
        match identify(&self.state, &self.headers, false).await {
            // Its role may have changed: so may what it is sent.
            Ok(Identity::Authenticated(p)) if p.scope == self.scope => self.filter = self.filter.for_caller(&p),
            Ok(Identity::Refused(why)) => self.end_with(401, why),
            Ok(_) => self.end_with(401, "The credential no longer admits this stream"),
            // A database hiccup: check again next time.
            Err(_) => {}
        }
    }
}

fn frame_of(event: &Event) -> Frame {
    let json = serde_json::to_string(event).expect("events serialise");
    Frame::default().id(event.id.as_str()).event(event.kind.as_str()).data(json)
}
