//! The OpenAPI document's frame, and the responses every operation shares
//! (added here once rather than repeated on each route).

use utoipa::OpenApi;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{ContentBuilder, HeaderBuilder, Ref, RefOr, ResponseBuilder, Schema};

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
        (name = "Overview", description = "The workspace's last days at a glance: the dashboard's home page"),
        (name = "Authentication", description = "Dashboard sessions: login, refresh, logout, workspace switching, invitation and password-reset links"),
        (name = "Members", description = "Who belongs to the workspace and with which role (owner, admin, member), and invitations to join it"),
        (name = "API keys", description = "Creating, renaming and revoking API keys (owners and admins, with a Bearer token)"),
        (name = "Agents", description = "AI agents, their triggers and prompt preview"),
        (name = "Prompt blocks", description = "Reusable, versioned prompt templates"),
        (name = "Webhooks", description = "Signed, retried event delivery (Standard Webhooks) and the event log"),
        (name = "Live", description = "The workspace's changes as they happen: a Server-Sent Events stream of the event log, resumable"),
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
        (name = "OAuth", description = "OAuth 2.1 for MCP clients: discovery, client registration, the authorization pages, tokens, revocation, and your grants"),
        (name = "Operations", description = "Health probes and this document"),
    ),
    components(schemas(ErrorBody, ValidationErrorBody, InternalErrorBody))
)]
struct ApiDoc;

pub fn base() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// Routes under /api/ that take no credential (they establish one) or that
/// are authenticated by a channel's own signature. The admission layer does
/// not look at credential headers there (a stale token sent along with a
/// refresh is no failed authentication).
pub(crate) const UNAUTHENTICATED: &[&str] = &[
    "/api/v1/auth/login",
    "/api/v1/auth/refresh",
    "/api/v1/auth/logout",
    "/api/v1/auth/invitations/lookup",
    "/api/v1/auth/invitations/accept",
    "/api/v1/auth/password-reset",
    "/api/v1/channels/{channel_id}/inbound",
    "/api/v1/channels/{channel_id}/status",
];

/// Routes that never read the database (so never answer its 503).
const NO_DATABASE: &[&str] = &["/healthz", "/metrics", "/openapi.json", "/docs", "/docs/{file}", "/webchat/widget.js"];

/// Routes that need a signed-in user's session (a Bearer access token): an
/// API key gets a 403 there, so only the `bearer` scheme is listed.
const SESSION_ONLY: &[&str] = &[
    "/api/v1/api-keys",
    "/api/v1/api-keys/{key_id}",
    "/api/v1/auth/me",
    "/api/v1/auth/workspace",
    "/api/v1/billing/credits",
    "/api/v1/invitations",
    "/api/v1/invitations/{invitation_id}",
    "/api/v1/oauth/grants",
    "/api/v1/oauth/grants/{grant_id}",
];

/// Whether a request path matches a route template (`{name}` matches any one segment).
pub(crate) fn matches_template(path: &str, template: &str) -> bool {
    let (mut p, mut t) = (path.split('/'), template.split('/'));
    loop {
        match (p.next(), t.next()) {
            (None, None) => return true,
            (Some(seg), Some(tpl)) if tpl.starts_with('{') && tpl.ends_with('}') && !seg.is_empty() => {}
            (Some(seg), Some(tpl)) if seg == tpl => {}
            _ => return false,
        }
    }
}

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
    flatten_all_of(&mut components.schemas);
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
    components.add_security_scheme(
        "metrics_token",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some("The server's metrics.token (GET /metrics only)"))
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
        error_response(
            "Malformed request: a header the server cannot parse (control characters), or credentials sent \
             twice (two X-API-Key or Authorization headers, or both)",
            "ErrorBody",
        ),
    );
    r.insert("RateLimited".into(), error_response("Rate limit exceeded; see Retry-After", "ErrorBody"));
    r.insert(
        "IdempotencyConflict".into(),
        error_response(
            "The Idempotency-Key was used with another request, or its first request is still running (with \
             Retry-After: 1)",
            "ErrorBody",
        ),
    );
    r.insert(
        "PayloadTooLarge".into(),
        error_response("Request body above the size limit (default 1 MiB)", "ErrorBody"),
    );
    r.insert("ValidationError".into(), error_response("Invalid input; every fault is listed", "ValidationErrorBody"));
    r.insert("InternalError".into(), error_response("Unexpected failure; quote the request id", "InternalErrorBody"));
    r.insert(
        "Unavailable".into(),
        error_response(
            "The database (or another backend the request needs) cannot serve it now; retry after Retry-After \
             seconds",
            "ErrorBody",
        ),
    );

    let schemas = components.schemas.clone();
    let string = || utoipa::openapi::ObjectBuilder::new().schema_type(utoipa::openapi::schema::Type::String).build();
    let common_headers = [
        ("X-Request-Id", "Identifies this request in the server's logs"),
        ("RateLimit-Policy", "The quota, e.g. \"default\";q=100;w=5"),
        ("RateLimit", "What is left of it, e.g. \"default\";r=99;t=1"),
    ];

    for (path, item) in doc.paths.paths.iter_mut() {
        let authenticated = path.starts_with("/api/") && !UNAUTHENTICATED.contains(&path.as_str());
        let session_only = SESSION_ONLY.contains(&path.as_str());
        let ops: [&mut Option<Operation>; 5] =
            [&mut item.get, &mut item.post, &mut item.put, &mut item.patch, &mut item.delete];
        for op in ops.into_iter().flatten() {
            // Readers show summaries as plain text (descriptions as markdown).
            if let Some(summary) = op.summary.as_mut() {
                *summary = summary.replace("**", "").replace('`', "");
            }
            for parameter in op.parameters.iter_mut().flatten() {
                if let RefOr::T(parameter) = parameter
                    && parameter.name == "Idempotency-Key"
                {
                    parameter.schema = Some(idempotency_key_schema());
                }
            }
            let responses = &mut op.responses.responses;
            if authenticated {
                let bearer = SecurityRequirement::new("bearer", Vec::<String>::new());
                op.security = Some(if session_only {
                    vec![bearer]
                } else {
                    vec![SecurityRequirement::new("api_key", Vec::<String>::new()), bearer]
                });
                responses.entry("401".into()).or_insert_with(|| shared("Unauthorized"));
            }
            // Every route: unparseable headers, and the per-IP quota.
            responses.entry("400".into()).or_insert_with(|| shared("BadRequest"));
            responses.entry("429".into()).or_insert_with(|| shared("RateLimited"));
            let takes_idempotency_key = op.parameters.iter().flatten().any(|p| match p {
                RefOr::T(p) => p.name == "Idempotency-Key",
                RefOr::Ref(_) => false,
            });
            if takes_idempotency_key {
                responses.entry("409".into()).or_insert_with(|| shared("IdempotencyConflict"));
            }
            if let Some(RefOr::T(body)) = op.request_body.as_mut() {
                responses.entry("413".into()).or_insert_with(|| shared("PayloadTooLarge"));
                responses.entry("422".into()).or_insert_with(|| shared("ValidationError"));
                // An empty body is read as `{}`: where no field is required, it may be left out.
                if json_body_requires_nothing(body, &schemas) {
                    body.required = Some(utoipa::openapi::Required::False);
                }
            }
            if op.parameters.as_ref().is_some_and(|p| !p.is_empty()) {
                responses.entry("422".into()).or_insert_with(|| shared("ValidationError"));
            }
            responses.entry("500".into()).or_insert_with(|| shared("InternalError"));
            if !NO_DATABASE.contains(&path.as_str()) {
                responses.entry("503".into()).or_insert_with(|| shared("Unavailable"));
            }
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

/// Whether a JSON request body's schema is an object with no required field.
fn json_body_requires_nothing(
    body: &utoipa::openapi::request_body::RequestBody,
    schemas: &std::collections::BTreeMap<String, RefOr<Schema>>,
) -> bool {
    let Some(RefOr::T(content)) = body.content.get("application/json") else { return false };
    let Some(schema) = content.schema.as_ref() else { return false };
    let resolved = match schema {
        RefOr::Ref(r) => schemas.get(r.ref_location.trim_start_matches("#/components/schemas/")),
        inline => Some(inline),
    };
    matches!(resolved, Some(RefOr::T(Schema::Object(o))) if o.required.is_empty())
}

/// `Idempotency-Key`: 1–255 printable ASCII characters (surrounding
/// whitespace is not part of the key; RFC 8941 quotes around it are
/// stripped).
fn idempotency_key_schema() -> RefOr<Schema> {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .min_length(Some(1))
        .max_length(Some(255))
        .pattern(Some("^[!-~]([ -~]*[!-~])?$"))
        .into()
}

/// Merges `allOf` schemas (what `#[serde(flatten)]` produces) into one
/// object: with `additionalProperties: false` on its parts, an `allOf`
/// would refuse every body, since each part forbids the others' fields.
fn flatten_all_of(schemas: &mut std::collections::BTreeMap<String, RefOr<Schema>>) {
    let names: Vec<String> = schemas.keys().cloned().collect();
    for name in names {
        let Some(RefOr::T(Schema::AllOf(all_of))) = schemas.get(&name) else { continue };
        let mut merged = utoipa::openapi::schema::Object::new();
        merged.description = all_of.description.clone();
        merged.examples = all_of.examples.clone();
        #[allow(deprecated)]
        {
            merged.example = all_of.example.clone();
        }
        let mut closed = false;
        let mut mergeable = true;
        for part in &all_of.items {
            let object = match part {
                RefOr::T(Schema::Object(o)) => Some(o.clone()),
                RefOr::Ref(r) => match schemas.get(r.ref_location.trim_start_matches("#/components/schemas/")) {
                    Some(RefOr::T(Schema::Object(o))) => Some(o.clone()),
                    _ => None,
                },
                _ => None,
            };
            let Some(object) = object else {
                mergeable = false;
                break;
            };
            closed |= matches!(
                object.additional_properties.as_deref(),
                Some(utoipa::openapi::schema::AdditionalProperties::FreeForm(false))
            );
            for (k, v) in object.properties {
                merged.properties.insert(k, v);
            }
            for r in object.required {
                if !merged.required.contains(&r) {
                    merged.required.push(r);
                }
            }
        }
        if !mergeable {
            continue;
        }
        merged.schema_type = utoipa::openapi::schema::SchemaType::Type(utoipa::openapi::schema::Type::Object);
        if closed {
            merged.additional_properties =
                Some(Box::new(utoipa::openapi::schema::AdditionalProperties::FreeForm(false)));
        }
        schemas.insert(name, RefOr::T(Schema::Object(merged)));
    }
}

/// Lists the configured engines as the values the fields naming them take.
pub fn with_engines(
    mut doc: utoipa::openapi::OpenApi,
    engines: &parley_services::agents::EngineNames,
) -> utoipa::openapi::OpenApi {
    let Some(components) = doc.components.as_mut() else { return doc };
    let fields = [
        ("AgentChanges", "text_engine", &engines.text),
        ("CreateAgent", "text_engine", &engines.text),
        ("UpdateAgent", "text_engine", &engines.text),
        ("AgentVoice", "tts_engine", &engines.tts),
        ("AgentTranscriber", "stt_engine", &engines.stt),
    ];
    for (schema, field, names) in fields {
        if let Some(RefOr::T(Schema::Object(o))) = components.schemas.get_mut(schema)
            && let Some(RefOr::T(Schema::Object(field))) = o.properties.get_mut(field)
            && !names.is_empty()
        {
            field.enum_values = Some(names.iter().map(|e| serde_json::Value::String(e.clone())).collect());
        }
    }
    // No speech-to-text engine: an empty enum is not a valid schema, so the
    // request's `transcriber` takes only null.
    if engines.stt.is_empty() {
        for schema in ["AgentChanges", "CreateAgent", "UpdateAgent"] {
            if let Some(RefOr::T(Schema::Object(o))) = components.schemas.get_mut(schema) {
                let only_null = utoipa::openapi::schema::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::Null)
                    .description(Some("No speech-to-text engine is configured (speech.stt): only null."))
                    .build();
                o.properties.insert("transcriber".into(), RefOr::T(Schema::Object(only_null)));
            }
        }
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::matches_template;

    #[test]
    fn templates_match_one_segment_per_parameter() {
        let t = "/api/v1/channels/{channel_id}/inbound";
        assert!(matches_template("/api/v1/channels/12/inbound", t));
        assert!(matches_template("/api/v1/channels/%FF/inbound", t));
        for path in [
            "/api/v1/channels/12/inbound/x",
            "/api/v1/channels//inbound",
            "/api/v1/channels/12",
            "/api/v1/channels/12/status",
        ] {
            assert!(!matches_template(path, t), "{path}");
        }
        assert!(matches_template("/api/v1/auth/login", "/api/v1/auth/login"));
    }
}
