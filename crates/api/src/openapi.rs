//! The OpenAPI document's frame, and the responses every operation shares
//! (added here once rather than repeated on each route).

use utoipa::OpenApi;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{ContentBuilder, HeaderBuilder, Ref, RefOr, ResponseBuilder};

use crate::error::{ErrorBody, InternalErrorBody, ValidationErrorBody};

const DESCRIPTION: &str = "\
Parley is a self-hosted API for AI agents, voice calls and messaging, scoped to a workspace.

Authentication: send `X-API-Key: parley_live_…` (live data) or `parley_test_…` (test data). \
A key sees only its own workspace and mode; an id from another workspace or mode answers 404, \
exactly like a missing one. Missing, malformed, unknown, revoked or expired keys answer 401. \
The dashboard signs in with `POST /api/v1/auth/login` and sends `Authorization: Bearer <access token>` \
(a 15-minute JWT naming the user, workspace and mode); sending both a key and a token is a 400.

Errors are JSON: `{\"detail\": \"…\"}`, or for 422 `{\"detail\": [{\"loc\", \"msg\", \"type\"}]}` \
listing every faulty input at once. Every response carries `X-Request-Id`, `RateLimit-Policy` \
and `RateLimit`.

Pagination: `limit` (1–200, default 50) and `offset` (≥ 0); out-of-range values are a 422. \
`POST /api/v1/agents` requires `Idempotency-Key`; every other POST accepts one.";

#[derive(OpenApi)]
#[openapi(
    info(title = "Parley API", version = "1", description = DESCRIPTION),
    tags(
        (name = "Authentication", description = "Dashboard sessions: login, refresh, logout, workspace switching"),
        (name = "API keys", description = "Creating, renaming and revoking API keys (owners and admins, with a Bearer token)"),
        (name = "Agents", description = "AI agents, their triggers and prompt preview"),
        (name = "Prompt blocks", description = "Reusable, versioned prompt templates"),
        (name = "Webhooks", description = "Signed, retried event delivery (Standard Webhooks) and the event log"),
        (name = "Contacts", description = "People and their channel addresses: normalised, deduplicated, mergeable, importable"),
        (name = "Channels", description = "Channel connections (api, webchat); secret settings are write-only"),
        (name = "Conversations", description = "Conversations per channel and address, and their messages"),
        (name = "Messages", description = "Sending messages through the durable queue, and their delivery status"),
        (name = "Calls", description = "Voice calls: placing, following, hanging up, transcripts and recordings"),
        (name = "Search", description = "Full-text search over messages: ranked, highlighted, scoped"),
        (name = "Handoffs", description = "Handing conversations between agents and humans"),
        (name = "Webchat", description = "The visitor side of webchat channels: the widget and its WebSocket (no credential)"),
        (name = "Files", description = "Downloads through signed, expiring links (no credential)"),
        (name = "Billing", description = "Balances in integer cents, the append-only ledger, owner credits and the test-mode reset"),
        (name = "Operations", description = "Health probes and this document"),
    ),
    components(schemas(ErrorBody, ValidationErrorBody, InternalErrorBody))
)]
struct ApiDoc;

pub fn base() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// Routes under /api/ that take no credential (they establish one).
/// Routes without an API key or session: sign-in, and inbound channel
/// traffic (authenticated by the channel's own signature).
const UNAUTHENTICATED: &[&str] = &[
    "/api/v1/auth/login",
    "/api/v1/auth/refresh",
    "/api/v1/auth/logout",
    "/api/v1/channels/{channel_id}/inbound",
    "/api/v1/channels/{channel_id}/status",
];

fn error_response(description: &str, schema: &str) -> RefOr<utoipa::openapi::Response> {
    ResponseBuilder::new()
        .description(description)
        .content("application/json", ContentBuilder::new().schema(Some(Ref::from_schema_name(schema))).build())
        .build()
        .into()
}

fn shared(name: &str) -> RefOr<utoipa::openapi::Response> {
    RefOr::Ref(Ref::new(format!("#/components/responses/{name}")))
}

/// Adds the API-key security scheme and, to every operation, the responses
/// its layers can produce: 401 and 429 on authenticated routes, 413 and 422
/// where there is a body, 500 everywhere; and the common response headers.
pub fn finish(mut doc: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "api_key",
        SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
            "X-API-Key",
            "parley_live_… or parley_test_…",
        ))),
    );
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .bearer_format("JWT")
                .description(Some("A dashboard access token from POST /api/v1/auth/login"))
                .build(),
        ),
    );
    let r = &mut components.responses;
    r.insert(
        "Unauthorized".into(),
        error_response("Missing, malformed, unknown, revoked or expired API key", "ErrorBody"),
    );
    r.insert(
        "BadRequest".into(),
        error_response("Malformed request, e.g. both X-API-Key and Authorization sent", "ErrorBody"),
    );
    r.insert("RateLimited".into(), error_response("Rate limit exceeded; see Retry-After", "ErrorBody"));
    r.insert(
        "PayloadTooLarge".into(),
        error_response("Request body above the size limit (default 1 MiB)", "ErrorBody"),
    );
    r.insert("ValidationError".into(), error_response("Invalid input; every fault is listed", "ValidationErrorBody"));
    r.insert("InternalError".into(), error_response("Unexpected failure; quote the request id", "InternalErrorBody"));

    let string = || utoipa::openapi::ObjectBuilder::new().schema_type(utoipa::openapi::schema::Type::String).build();
    let common_headers = [
        ("X-Request-Id", "Identifies this request in the server's logs"),
        ("RateLimit-Policy", "The quota, e.g. \"default\";q=100;w=5"),
        ("RateLimit", "What is left of it, e.g. \"default\";r=99;t=1"),
    ];

    for (path, item) in doc.paths.paths.iter_mut() {
        let authenticated = path.starts_with("/api/") && !UNAUTHENTICATED.contains(&path.as_str());
        let ops: [&mut Option<Operation>; 5] =
            [&mut item.get, &mut item.post, &mut item.put, &mut item.patch, &mut item.delete];
        for op in ops.into_iter().flatten() {
            let responses = &mut op.responses.responses;
            if authenticated {
                op.security = Some(vec![
                    SecurityRequirement::new("api_key", Vec::<String>::new()),
                    SecurityRequirement::new("bearer", Vec::<String>::new()),
                ]);
                responses.entry("400".into()).or_insert_with(|| shared("BadRequest"));
                responses.entry("401".into()).or_insert_with(|| shared("Unauthorized"));
                responses.entry("429".into()).or_insert_with(|| shared("RateLimited"));
            }
            if op.request_body.is_some() {
                responses.entry("413".into()).or_insert_with(|| shared("PayloadTooLarge"));
                responses.entry("422".into()).or_insert_with(|| shared("ValidationError"));
            }
            if op.parameters.as_ref().is_some_and(|p| !p.is_empty()) {
                responses.entry("422".into()).or_insert_with(|| shared("ValidationError"));
            }
            responses.entry("500".into()).or_insert_with(|| shared("InternalError"));
            for response in responses.values_mut() {
                if let RefOr::T(resp) = response {
                    for (name, description) in common_headers {
                        resp.headers.entry(name.into()).or_insert_with(|| {
                            HeaderBuilder::new().schema(Some(string())).description(Some(description)).build().into()
                        });
                    }
                }
            }
        }
    }
    doc
}
