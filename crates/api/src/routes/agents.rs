//! `/api/v1/agents`: agents, their triggers and the prompt preview.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use parley_agent_runtime::playground;
use parley_domain::agent::{Agent, AgentStatus, Trigger};
use parley_domain::ids::{AgentId, TriggerId};
use parley_domain::validation::{Parsed, QueryReader};
use parley_services::agents::{self as agent_repo, AgentFilter};
use parley_services::agents::{
    self, CreateAgent, CreateTrigger, PromptPreview, PromptPreviewRequest, UpdateAgent, UpdateTrigger,
};
use serde::Serialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Items, PageParams, to_json};
use crate::error::{ApiError, ErrorBody, ValidationErrorBody};
use crate::extract::{
    Auth, FromBody, FromQuery, Idempotency, Ids, JsonBody, ListQuery, NoFilter, RequiredIdempotency, write,
};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_agents, create_agent))
        .routes(routes!(get_agent, update_agent, delete_agent))
        .routes(routes!(list_triggers, create_trigger))
        .routes(routes!(get_trigger, update_trigger, delete_trigger))
        .routes(routes!(preview_prompt))
        .routes(routes!(chat))
}

impl FromBody for playground::ChatRequest {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        playground::parse_chat(body)
    }
}

impl FromBody for CreateAgent {
    fn from_body(body: Value, state: &AppState) -> Parsed<Self> {
        agents::parse_create(body, &agents::EngineNames::of(state.services.config()))
    }
}

impl FromBody for UpdateAgent {
    fn from_body(body: Value, state: &AppState) -> Parsed<Self> {
        agents::parse_update(body, &agents::EngineNames::of(state.services.config()))
    }
}

impl FromBody for CreateTrigger {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        agents::parse_create_trigger(body)
    }
}

impl FromBody for UpdateTrigger {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        agents::parse_update_trigger(body)
    }
}

impl FromBody for PromptPreviewRequest {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        agents::parse_preview(body)
    }
}

impl FromQuery for AgentFilter {
    fn from_query(q: &mut QueryReader) -> Self {
        agents::parse_filter(q)
    }
}

/// The agents envelope (as documented, unlike the other lists).
#[derive(Serialize, ToSchema)]
pub struct AgentList {
    pub agents: Vec<Agent>,
    /// All agents matching the filters.
    pub total: i64,
    /// Agents in this response.
    pub count: i64,
}

#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation only; parsed by `agents::parse_filter`
struct AgentListParams {
    /// Only agents with this status. Without it, archived agents are hidden.
    #[param(inline)]
    status: Option<AgentStatus>,
    /// Only templates (`true`) or only non-templates (`false`).
    is_template: Option<bool>,
    /// Case-insensitive text in the name, slug or description (1–200 characters).
    #[param(min_length = 1, max_length = 200)]
    q: Option<String>,
}

/// List agents, newest first.
#[utoipa::path(
    get, path = "/api/v1/agents", tag = "Agents",
    params(PageParams, AgentListParams),
    responses((status = 200, body = AgentList), (status = 422, body = ValidationErrorBody))
)]
async fn list_agents(
    auth: Auth,
    State(s): State<AppState>,
    uri: Uri,
    q: ListQuery<AgentFilter>,
) -> Result<Response, ApiError> {
    let scope = auth.scope();
    let query = uri.query().unwrap_or_default();
    crate::cache::respond(&s.lists, &auth.0.versions, scope, agent_repo::VERSION_KEY, query, || async {
        let (agents, total) = agents::list(&s.services, scope, &q.filter, q.page).await?;
        to_json(&AgentList { count: agents.len() as i64, agents, total })
    })
    .await
}

/// Create an agent.
///
/// Requires `Idempotency-Key`. With `template_id`, the new agent starts as a
/// copy of that template (not a template itself) and the given fields apply on top.
#[utoipa::path(
    post, path = "/api/v1/agents", tag = "Agents",
    params(("Idempotency-Key" = String, Header, description = "Required. 1–255 printable ASCII characters; a retry with the same key and body replays the first response.")),
    request_body = CreateAgent,
    responses(
        (status = 201, body = agents::CreatedAgent, description = "Created, with the agent's `tool_secret` (shown only now)"),
        (status = 400, body = ErrorBody, description = "Missing Idempotency-Key"),
        (status = 402, body = ErrorBody, description = "The balance does not cover `pricing.agent_create_cents`; nothing was written"),
        (status = 409, body = ErrorBody, description = "The key was used with another body, or its first request is still running (with Retry-After)"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn create_agent(
    auth: Auth,
    State(s): State<AppState>,
    RequiredIdempotency(idem): RequiredIdempotency,
    body: JsonBody<CreateAgent>,
) -> Result<Response, ApiError> {
    let scope = auth.scope();
    let JsonBody { value, canonical } = body;
    let svc = s.services.clone();
    agents::prepare(&svc, &value.changes).await?;
    write(&s, scope, idem, &canonical, StatusCode::CREATED, async move |work| {
        agents::create(work, &svc, scope, value).await
    })
    .await
}

/// Get an agent.
#[utoipa::path(
    get, path = "/api/v1/agents/{agent_id}", tag = "Agents",
    params(("agent_id" = i64, Path)),
    responses((status = 200, body = Agent), (status = 404, body = ErrorBody, example = json!({"detail": "Agent 42 not found"})))
)]
async fn get_agent(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<Agent>, ApiError> {
    let [id] = path.0.map(AgentId);
    Ok(Json(agents::get(&s.services, auth.scope(), id).await?))
}

/// Update an agent.
///
/// Status moves: active↔paused, active|paused→archived, archived→paused; any
/// other move is a 409.
#[utoipa::path(
    patch, path = "/api/v1/agents/{agent_id}", tag = "Agents",
    params(("agent_id" = i64, Path)),
    request_body = UpdateAgent,
    responses(
        (status = 200, body = Agent),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "A status move the state machine forbids"),
        (status = 422, body = ValidationErrorBody),
    )
)]
async fn update_agent(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<UpdateAgent>,
) -> Result<Json<Agent>, ApiError> {
    let [id] = path.0.map(AgentId);
    let scope = auth.scope();
    let input = body.value;
    let svc = &s.services;
    agents::prepare(svc, &input.changes).await?;
    Ok(Json(svc.transaction(async move |work| agents::update(work, svc, scope, id, input).await).await?))
}

/// Archive an agent.
///
/// The agent stops answering traffic and leaves the default list; restore it
/// with `PATCH {"status": "paused"}`.
#[utoipa::path(
    delete, path = "/api/v1/agents/{agent_id}", tag = "Agents",
    params(("agent_id" = i64, Path)),
    responses((status = 204, description = "Archived"), (status = 404, body = ErrorBody))
)]
async fn delete_agent(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<StatusCode, ApiError> {
    let [id] = path.0.map(AgentId);
    let scope = auth.scope();
    s.services.transaction(async move |work| agents::archive(work, scope, id).await).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// List an agent's triggers, oldest first.
#[utoipa::path(
    get, path = "/api/v1/agents/{agent_id}/triggers", tag = "Agents",
    params(("agent_id" = i64, Path), PageParams),
    responses((status = 200, body = Items<Trigger>), (status = 404, body = ErrorBody), (status = 422, body = ValidationErrorBody))
)]
async fn list_triggers(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<Trigger>>, ApiError> {
    let [agent_id] = path.0.map(AgentId);
    let found = agents::list_triggers(&s.services, auth.scope(), agent_id, q.page).await?;
    Ok(Json(Items::new(found, q.page)))
}

/// Add a trigger that routes inbound messages or calls to the agent.
#[utoipa::path(
    post, path = "/api/v1/agents/{agent_id}/triggers", tag = "Agents",
    params(("agent_id" = i64, Path), ("Idempotency-Key" = Option<String>, Header, description = "Optional; retries with the same key replay the first response.")),
    request_body = CreateTrigger,
    responses((status = 201, body = Trigger), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 422, body = ValidationErrorBody))
)]
async fn create_trigger(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    idem: Idempotency,
    body: JsonBody<CreateTrigger>,
) -> Result<Response, ApiError> {
    let [agent_id] = path.0.map(AgentId);
    let scope = auth.scope();
    let JsonBody { value, canonical } = body;
    write(&s, scope, idem, &canonical, StatusCode::CREATED, async move |work| {
        agents::create_trigger(work, scope, agent_id, value).await
    })
    .await
}

/// Get a trigger.
#[utoipa::path(
    get, path = "/api/v1/agents/{agent_id}/triggers/{trigger_id}", tag = "Agents",
    params(("agent_id" = i64, Path), ("trigger_id" = i64, Path)),
    responses((status = 200, body = Trigger), (status = 404, body = ErrorBody))
)]
async fn get_trigger(auth: Auth, State(s): State<AppState>, path: Ids<2>) -> Result<Json<Trigger>, ApiError> {
    let (agent_id, id) = (AgentId(path.0[0]), TriggerId(path.0[1]));
    Ok(Json(agents::get_trigger(&s.services, auth.scope(), agent_id, id).await?))
}

/// Update a trigger.
#[utoipa::path(
    patch, path = "/api/v1/agents/{agent_id}/triggers/{trigger_id}", tag = "Agents",
    params(("agent_id" = i64, Path), ("trigger_id" = i64, Path)),
    request_body = UpdateTrigger,
    responses((status = 200, body = Trigger), (status = 404, body = ErrorBody), (status = 422, body = ValidationErrorBody))
)]
async fn update_trigger(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<2>,
    body: JsonBody<UpdateTrigger>,
) -> Result<Json<Trigger>, ApiError> {
    let (agent_id, id) = (AgentId(path.0[0]), TriggerId(path.0[1]));
    let scope = auth.scope();
    let input = body.value;
    Ok(Json(
        s.services
            .transaction(async move |work| agents::update_trigger(work, scope, agent_id, id, input).await)
            .await?,
    ))
}

/// Delete a trigger.
#[utoipa::path(
    delete, path = "/api/v1/agents/{agent_id}/triggers/{trigger_id}", tag = "Agents",
    params(("agent_id" = i64, Path), ("trigger_id" = i64, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = ErrorBody))
)]
async fn delete_trigger(auth: Auth, State(s): State<AppState>, path: Ids<2>) -> Result<StatusCode, ApiError> {
    let (agent_id, id) = (AgentId(path.0[0]), TriggerId(path.0[1]));
    let scope = auth.scope();
    s.services.transaction(async move |work| agents::delete_trigger(work, scope, agent_id, id).await).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Render the agent's system prompt as a run would: its prompt blocks in
/// order, then `system_prompt`, with the built-in variables a preview has
/// (`agent.name`, `workspace.name`, `now`; they win over the request's) and
/// the request's `variables`. A variable a block needs but neither gives is
/// a 422 at `["body", "variables", <name>]`; in `system_prompt` a
/// placeholder without a value is kept as written.
#[utoipa::path(
    post, path = "/api/v1/agents/{agent_id}/prompt/preview", tag = "Agents",
    params(("agent_id" = i64, Path)),
    request_body = PromptPreviewRequest,
    responses((status = 200, body = PromptPreview), (status = 404, body = ErrorBody), (status = 422, body = ValidationErrorBody))
)]
async fn preview_prompt(
    auth: Auth,
    State(s): State<AppState>,
    path: Ids<1>,
    body: JsonBody<PromptPreviewRequest>,
) -> Result<Json<PromptPreview>, ApiError> {
    let [agent_id] = path.0.map(AgentId);
    Ok(Json(agents::preview_prompt(&s.services, auth.scope(), agent_id, body.value).await?))
}

/// Ask the agent (the playground).
///
/// The agent answers `messages` (ending with the user's turn), or the
/// latest message of `conversation_id`, exactly as a run would (prompt,
/// knowledge, tools, engine) but without touching any channel: nothing is
/// sent, `update_contact` and `send_message` only say what they would do,
/// and a handoff or end is reported, not applied. It is recorded as a run
/// (`trigger: playground`) and billed like one.
///
/// With `Accept: text/event-stream` the answer streams as Server-Sent
/// Events: `delta` events (`{"text": …}`) as the engine writes, then one
/// `done` event with the answer below, or an `error` event (`{"status",
/// "detail"}`).
#[utoipa::path(
    post, path = "/api/v1/agents/{agent_id}/chat", tag = "Agents",
    params(("agent_id" = i64, Path)),
    request_body = playground::ChatRequest,
    responses(
        (status = 200, body = playground::ChatAnswer, content_type = "application/json"),
        (status = 402, body = ErrorBody, description = "A priced engine and an empty balance"),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The agent is archived, or its engine is not configured"),
        (status = 422, body = ValidationErrorBody),
        (status = 503, body = ErrorBody, description = "The text engine failed"),
    )
)]
async fn chat(
    auth: Auth,
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    path: Ids<1>,
    body: JsonBody<playground::ChatRequest>,
) -> Result<Response, ApiError> {
    use axum::response::IntoResponse;
    use axum::response::sse::{Event, Sse};

    let [agent_id] = path.0.map(AgentId);
    let scope = auth.scope();
    let streamed = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"));
    if !streamed {
        let answer = playground::chat(&s.services, scope, agent_id, body.value, None).await?;
        return Ok(Json(answer).into_response());
    }
    // A missing agent is a 404 before the stream starts.
    agents::get(&s.services, scope, agent_id).await?;
    let (deltas, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let svc = s.services.clone();
    let answer = tokio::spawn(async move { playground::chat(&svc, scope, agent_id, body.value, Some(deltas)).await });
    // Deltas as they come; the channel closes when the run ends.
    let events = futures::stream::unfold(rx, |mut rx| async move {
        let text = rx.recv().await?;
        let event = Event::default().event("delta").json_data(serde_json::json!({"text": text}));
        Some((event.map_err(axum::Error::new), rx))
    });
    let stream = futures::StreamExt::chain(
        events,
        futures::stream::once(async move {
            let last = match answer.await {
                Ok(Ok(answer)) => Event::default().event("done").json_data(&answer),
                Ok(Err(e)) => {
                    let response = ApiError::from(e).into_response();
                    let status = response.status().as_u16();
                    let body = axum::body::to_bytes(response.into_body(), 64 * 1024).await.unwrap_or_default();
                    let detail: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    Event::default().event("error").json_data(serde_json::json!({"status": status, "detail": detail.get("detail").cloned().unwrap_or(detail)}))
                }
                Err(_) => Event::default()
                    .event("error")
                    .json_data(serde_json::json!({"status": 500, "detail": "The playground run stopped unexpectedly"})),
            };
            last.map_err(axum::Error::new)
        }),
    );
    Ok(Sse::new(stream).into_response())
}
