//! The webchat channel's public side: the visitor WebSocket at
//! `/webchat/{public_id}` and the embeddable widget at `/webchat/widget.js`.
//!
//! Protocol (JSON text frames):
//! - client → `{"type":"hello","visitor_token"?}` first (within 10 s);
//!   server → `{"type":"ready","visitor_id","visitor_token"?,"conversation_id","title","greeting","messages"}`
//!   (`visitor_token` only for a new visitor: keep it to come back;
//!   `calls`: whether the channel offers the visitor a web call).
//! - client → `{"type":"message","text","client_id"?}`; server → `{"type":"ack","client_id","message"}`.
//! - server → `{"type":"message","message"}` for each reply once sent (and
//!   the visitor's own messages written in another tab); client →
//!   `{"type":"delivered"|"read","message_id"}`.
//! - server → `{"type":"receipt","message_id","status":"read"}` when the
//!   workspace has read the visitor's message.
//! - client → `{"type":"ping"}`; server → `{"type":"pong"}`.
//! - client → `{"type":"call"}` (when `ready` said `calls: true`); server →
//!   `{"type":"call","call_id","url","token","expires_at"}`: a web call with
//!   the chat's agent, joined at `url` with `token` (see `/calls/web`).
//! - server → `{"type":"error","detail"}` for a frame it cannot take.

use std::collections::HashSet;
use std::time::Duration;

use axum::extract::State;
use axum::extract::ws::{Message as Frame, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use parley_domain::conversation::{Direction, MessageStatus};
use parley_services::messaging::webchat::{self, Visitor, Webchat};
use parley_services::signals::Signal;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody};
use crate::extract::PathText;
use crate::state::AppState;

/// The widget: plain JavaScript, no dependencies.
const WIDGET_JS: &str = include_str!("webchat_widget.js");
/// Largest frame a visitor may send.
const MAX_FRAME_BYTES: usize = 64 * 1024;
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How soon a socket may ask for another call.
const CALL_SPACING: Duration = Duration::from_secs(10);

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(widget)).routes(routes!(connect)).routes(routes!(preview))
}

/// The preview page's walls: the widget's own script and its inline
/// styles (it renders in a shadow root with a `<style>`), its socket, and
/// nothing else; never framed.
const PREVIEW_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; \
                           img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// A page with nothing but the widget, open: the dashboard's live preview
/// of a webchat channel. Chatting here is chatting as a visitor (on this
/// server's origin, which the channel's `allowed_origins` must allow).
#[utoipa::path(
    get, path = "/webchat/{public_id}/preview", tag = "Webchat",
    params(("public_id" = String, Path, description = "The webchat channel's address, `wc_…`")),
    responses(
        (status = 200, content_type = "text/html", body = String),
        (status = 403, body = ErrorBody, description = "The channel is disabled"),
        (status = 404, body = ErrorBody, description = "No webchat channel has this id"),
    )
)]
async fn preview(State(s): State<AppState>, PathText(public_id): PathText) -> Result<Response, ApiError> {
    let chat = webchat::open(&s.services, &public_id).await?;
    // Public ids are `wc_` and letters or digits: nothing here needs escaping, but check.
    let id = chat.public_id();
    if !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err(ApiError::Status(StatusCode::NOT_FOUND, format!("Webchat {public_id} not found")));
    }
    let page = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" \
         content=\"width=device-width, initial-scale=1\"><title>Webchat preview</title></head>\n<body>\
         <main><h1>Webchat preview</h1><p>The widget as visitors see it. What you write here reaches the \
         channel as a visitor's message, and its agents answer.</p></main>\n<script src=\"/webchat/widget.js\" \
         data-channel=\"{id}\" data-open=\"true\" async></script></body></html>\n"
    );
    Ok((
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, PREVIEW_CSP),
            (header::X_FRAME_OPTIONS, "DENY"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        page,
    )
        .into_response())
}

/// The embeddable chat widget.
///
/// Add it to a page with one tag: `<script src="{base_url}/webchat/widget.js"
/// data-channel="wc_…" async></script>` (the webchat channel's `address`).
/// Optional attributes: `data-title`, `data-color`, `data-open="true"`.
#[utoipa::path(
    get, path = "/webchat/widget.js", tag = "Webchat",
    responses((status = 200, content_type = "text/javascript", body = String))
)]
async fn widget() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=300"),
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        ],
        WIDGET_JS,
    )
        .into_response()
}

/// A visitor's chat: a WebSocket (see the module documentation in
/// `docs/api.md` for the frames). No credential: the channel's public id
/// names it, and its `allowed_origins` (if set) limit the pages that may
/// open it.
#[utoipa::path(
    get, path = "/webchat/{public_id}", tag = "Webchat",
    params(("public_id" = String, Path, description = "The webchat channel's address, `wc_…`")),
    responses(
        (status = 101, description = "Switching to the WebSocket protocol"),
        (status = 403, body = ErrorBody, description = "The channel is disabled, or the page's Origin is not allowed"),
        (status = 404, body = ErrorBody, description = "No active webchat channel has this id"),
        (status = 426, body = ErrorBody, description = "Not a WebSocket request"),
    )
)]
async fn connect(
    State(s): State<AppState>,
    PathText(public_id): PathText,
    headers: HeaderMap,
    upgrade: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Result<Response, ApiError> {
    let chat = webchat::open(&s.services, &public_id).await?;
    let origin = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok());
    if !chat.origin_allowed(origin) {
        return Err(ApiError::Status(
            StatusCode::FORBIDDEN,
            format!("Origin {} may not open this chat", origin.unwrap_or("(none)")),
        ));
    }
    let upgrade = upgrade.map_err(|_| {
        ApiError::Status(StatusCode::UPGRADE_REQUIRED, "Connect with a WebSocket (Upgrade: websocket)".into())
    })?;
    let open = s.services.metrics().connected("websocket");
    Ok(upgrade.max_message_size(MAX_FRAME_BYTES).on_upgrade(move |socket| async move {
        let _open = open;
        if let Err(e) = Session::run(s, chat, socket).await {
            tracing::debug!(error = %e, "webchat session ended");
        }
    }))
}

type SessionResult = Result<(), String>;

/// One visitor's socket.
struct Session {
    state: AppState,
    chat: Webchat,
    visitor: Visitor,
    conversation_id: Option<i64>,
    /// Messages the visitor has been shown, and their messages whose read
    /// receipt they have.
    shown: HashSet<i64>,
    receipts: HashSet<i64>,
    /// When this socket last asked for a call.
    calling: Option<std::time::Instant>,
}

fn frame(value: Value) -> Frame {
    Frame::Text(Utf8Bytes::from(value.to_string()))
}

/// What to tell a visitor about a refusal (never internals).
fn detail(e: parley_services::ServiceError) -> String {
    use parley_services::ServiceError;
    match e {
        ServiceError::Validation(errors) => errors.iter().map(|e| e.msg.clone()).collect::<Vec<_>>().join("; "),
        ServiceError::Store(e) => {
            tracing::warn!(error = %e, "webchat request failed");
            "Something went wrong; please try again".to_owned()
        }
        other => other.to_string(),
    }
}

impl Session {
    async fn run(state: AppState, chat: Webchat, socket: WebSocket) -> SessionResult {
        let (mut out, mut incoming) = socket.split();
        let hello = match tokio::time::timeout(HELLO_TIMEOUT, incoming.next()).await {
            Ok(Some(Ok(Frame::Text(text)))) => serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
            _ => return Err("no hello".into()),
        };
        if hello["type"] != "hello" {
            let _ = out.send(frame(json!({"type": "error", "detail": "say hello first"}))).await;
            return Err("no hello".into());
        }
        let services = &state.services;
        let visitor = webchat::hello(services, &chat, hello["visitor_token"].as_str()).await.map_err(detail)?;
        let conversation = webchat::conversation(services, &chat, &visitor).await.map_err(detail)?;
        let mut session = Session {
            state: state.clone(),
            conversation_id: conversation.as_ref().map(|c| c.item.id),
            chat,
            visitor,
            shown: HashSet::new(),
            receipts: HashSet::new(),
            calling: None,
        };
        let history = session.unseen().await?;
        let ready = json!({
            "type": "ready",
            "visitor_id": session.visitor.public_id,
            "visitor_token": session.visitor.new_token,
            "conversation_id": session.conversation_id,
            "title": session.chat.title(),
            "greeting": session.chat.greeting(),
            "calls": session.chat.calls(),
            "messages": history.iter().filter_map(|f| f.get("message").cloned()).collect::<Vec<_>>(),
        });
        out.send(frame(ready)).await.map_err(|e| e.to_string())?;

        let mut signals = state.services.subscribe_signals();
        let mut poll = tokio::time::interval(state.config.webchat_poll_interval);
        loop {
            let outgoing: Vec<Value> = tokio::select! {
                received = incoming.next() => match received {
                    Some(Ok(Frame::Text(text))) => session.on_frame(&text).await?,
                    Some(Ok(Frame::Close(_))) | None => return Ok(()),
                    Some(Ok(_)) => Vec::new(),
                    Some(Err(e)) => return Err(e.to_string()),
                },
                signal = signals.recv() => match signal {
                    Ok(Signal::ConversationChanged { conversation_id })
                        if Some(conversation_id) == session.conversation_id => session.unseen().await?,
                    Ok(_) => Vec::new(),
                    Err(RecvError::Lagged(_)) => session.unseen().await?,
                    Err(RecvError::Closed) => return Ok(()),
                },
                _ = poll.tick() => session.unseen().await?,
            };
            for value in outgoing {
                out.send(frame(value)).await.map_err(|e| e.to_string())?;
            }
        }
    }

    /// Answers one client frame.
    async fn on_frame(&mut self, text: &str) -> Result<Vec<Value>, String> {
        let services = &self.state.services;
        let value: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(_) => return Ok(vec![json!({"type": "error", "detail": "frames are JSON objects"})]),
        };
        match value["type"].as_str() {
            Some("message") => {
                let text = value["text"].as_str().unwrap_or_default().to_owned();
                let client_id = value["client_id"].as_str().map(str::to_owned);
                match webchat::say(services, &self.chat, &self.visitor, text, client_id.clone()).await {
                    Ok(message) => {
                        self.conversation_id = Some(message.conversation_id);
                        self.shown.insert(message.id);
                        Ok(vec![
                            json!({"type": "ack", "client_id": client_id, "message": webchat::for_visitor(services, &message).await}),
                        ])
                    }
                    Err(e) => Ok(vec![json!({"type": "error", "client_id": client_id, "detail": detail(e)})]),
                }
            }
            Some(kind @ ("delivered" | "read")) => {
                let status = if kind == "read" { MessageStatus::Read } else { MessageStatus::Delivered };
                let Some(id) = value["message_id"].as_i64() else {
                    return Ok(vec![json!({"type": "error", "detail": "message_id is required"})]);
                };
                match webchat::receipt(services, &self.chat, &self.visitor, id, status).await {
                    Ok(_) => Ok(Vec::new()),
                    Err(e) => Ok(vec![json!({"type": "error", "detail": detail(e)})]),
                }
            }
            Some("ping") => Ok(vec![json!({"type": "pong"})]),
            // A web call with the agent (when the channel offers calls): one
            // at a time per socket, so a page cannot fill the call limit.
            Some("call") => {
                if self.calling.as_ref().is_some_and(|started| started.elapsed() < CALL_SPACING) {
                    return Ok(vec![json!({"type": "error", "detail": "a call was just asked for; wait a moment"})]);
                }
                self.calling = Some(std::time::Instant::now());
                match webchat::call(services, &self.chat, &self.visitor).await {
                    Ok(call) => Ok(vec![json!({"type": "call", "call_id": call.call_id, "url": call.join.url,
                        "token": call.join.token, "expires_at": call.join.expires_at})]),
                    Err(e) => Ok(vec![json!({"type": "error", "detail": detail(e)})]),
                }
            }
            _ => Ok(vec![json!({"type": "error", "detail": "unknown frame type"})]),
        }
    }

    /// What the visitor has not seen yet: messages (theirs from other tabs,
    /// and replies once sent) and read receipts.
    async fn unseen(&mut self) -> Result<Vec<Value>, String> {
        let services = &self.state.services;
        if self.conversation_id.is_none() {
            // Opened meanwhile, e.g. in another tab.
            let c = webchat::conversation(services, &self.chat, &self.visitor).await.map_err(detail)?;
            self.conversation_id = c.map(|c| c.item.id);
        }
        let Some(id) = self.conversation_id else { return Ok(Vec::new()) };
        let messages = webchat::history(services, &self.chat, id).await.map_err(detail)?;
        let mut out = Vec::new();
        for m in &messages {
            if webchat::visible(m) && self.shown.insert(m.id) {
                out.push(json!({"type": "message", "message": webchat::for_visitor(services, m).await}));
            }
            if m.direction == Direction::Inbound && m.read_at.is_some() && self.receipts.insert(m.id) {
                out.push(json!({"type": "receipt", "message_id": m.id, "status": "read"}));
            }
        }
        Ok(out)
    }
}
