//! The MCP endpoint at `/mcp` and `/mcp/`: the workspace's operations as
//! MCP tools, over Streamable HTTP (rmcp), for AI tool clients.
//!
//! - Stateless: no server-side session, so any instance answers any
//!   request. rmcp serves the 2026-07-28 revision (no `initialize`,
//!   `server/discover`) and older clients' `initialize` handshake
//!   (2025-11-25, 2025-06-18, 2025-03-26) the same way.
//! - Who calls is decided once per request by the API's admission layer
//!   (the same key rules as REST: revocation immediate, test keys see test
//!   data); it leaves the [`Principal`] in the request's extensions, which
//!   rmcp hands to the tool with the request's parts. API keys and OAuth
//!   access tokens issued for this endpoint are taken here; a dashboard
//!   session token is for the REST API. An unauthenticated request gets a
//!   401 naming the protected-resource metadata (RFC 9728), where OAuth
//!   clients start.
//! - A read-only grant (`mcp:read`) sees and calls only the tools that
//!   change nothing.
//! - Every tool calls the same service operation as its REST route
//!   ([`tools`]), so scope, validation and events are identical; a
//!   refusal is a tool result with `isError`, in the API's words.

mod catalog;
mod library;
mod schema;
mod tools;

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use parley_services::Services;
use parley_services::tenancy::auth::{Credential, Principal};
use parley_services::tenancy::reach;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, GetPromptRequestParams, GetPromptResponse, Implementation,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};

use catalog::Catalog;
pub use catalog::ToolSpec;
pub use tools::TOOLS;

/// How the endpoint is reached.
#[derive(Clone)]
pub struct McpConfig {
    /// Host names (with or without a port) clients may address: the public
    /// URL's host and loopback. rmcp refuses any other `Host` (a DNS
    /// rebinding guard).
    pub allowed_hosts: Vec<String>,
    /// Browser origins that may call (`scheme://host[:port]`, `:*` for any
    /// port): the public URL's, loopback ones, and those configured. A
    /// request with another `Origin` gets a 403; one without is not checked.
    pub allowed_origins: Vec<String>,
    /// The REST API's list-page cache, shared.
    pub lists: Arc<parley_services::list_cache::ListCache>,
    /// Where the protected-resource metadata is (the 401's challenge).
    pub resource_metadata: String,
}

impl McpConfig {
    /// Allows the host of `public_url` besides loopback.
    pub fn new(public_url: &str, lists: Arc<parley_services::list_cache::ListCache>) -> Self {
        let mut allowed_hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
        let mut allowed_origins: Vec<String> =
            ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"].map(str::to_owned).to_vec();
        if let Ok(uri) = public_url.parse::<http::Uri>()
            && let Some(host) = uri.host()
        {
            let bare = host.trim_start_matches('[').trim_end_matches(']').to_owned();
            if !allowed_hosts.contains(&bare) {
                allowed_hosts.push(bare);
            }
            let scheme = uri.scheme_str().unwrap_or("https");
            let port = uri.port_u16().unwrap_or(if scheme == "http" { 80 } else { 443 });
            allowed_origins.push(format!("{scheme}://{host}:{port}"));
        }
        let resource_metadata =
            format!("{}/.well-known/oauth-protected-resource/mcp", public_url.trim_end_matches('/'));
        Self { allowed_hosts, allowed_origins, lists, resource_metadata }
    }
}

impl McpConfig {
    /// Adds configured browser origins (`mcp.allowed_origins`).
    pub fn with_allowed_origins(mut self, origins: Vec<String>) -> Self {
        self.allowed_origins.extend(origins);
        self
    }
}

/// A JSON-RPC request larger than this gets a 413.
const MAX_BODY_BYTES: usize = 1 << 20;

/// The endpoint's routes (`/mcp` and `/mcp/`, neither redirected), to be
/// mounted behind the API's admission layer; its tools' schemas come from
/// the REST API's OpenAPI document, `openapi`.
pub fn router(svc: Services, config: McpConfig, openapi: &serde_json::Value) -> Router {
    let transport = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(MAX_BODY_BYTES)
        .with_allowed_hosts(config.allowed_hosts)
        .with_allowed_origins(config.allowed_origins);
    let handler = Handler { svc, catalog: Arc::new(Catalog::new(openapi, config.lists)) };
    let service =
        StreamableHttpService::new(move || Ok(handler.clone()), Arc::new(NeverSessionManager::default()), transport);
    let challenge = Arc::new(config.resource_metadata);
    Router::new().route_service("/mcp", service.clone()).route_service("/mcp/", service).layer(
        axum::middleware::from_fn(move |req: Request, next: Next| {
            let challenge = Arc::clone(&challenge);
            async move { require_mcp_credential(&challenge, req, next).await }
        }),
    )
}

/// Lets through requests with an API key or an MCP access token the
/// admission layer accepted; the others get a 401 whose `WWW-Authenticate`
/// names the protected-resource metadata.
async fn require_mcp_credential(resource_metadata: &str, req: Request, next: Next) -> Response {
    let deny = |error: Option<&str>, description: &str| unauthorized(resource_metadata, error, description);
    match req.extensions().get::<Principal>() {
        Some(Principal { credential: Credential::ApiKey { .. } | Credential::OAuth { .. }, .. }) => next.run(req).await,
        Some(_) => deny(
            Some("invalid_token"),
            "The MCP endpoint takes an API key or an OAuth token issued for it, not a dashboard session token",
        ),
        None if req.headers().contains_key("x-api-key") || req.headers().contains_key(header::AUTHORIZATION) => {
            deny(Some("invalid_token"), "Invalid, expired or revoked credential")
        }
        None => deny(
            None,
            "Authenticate with OAuth (see the resource metadata), X-API-Key, or Authorization: Bearer parley_<key>",
        ),
    }
}

/// A 401 with the RFC 6750 / RFC 9728 challenge.
fn unauthorized(resource_metadata: &str, error: Option<&str>, description: &str) -> Response {
    let mut response =
        (StatusCode::UNAUTHORIZED, axum::Json(serde_json::json!({ "detail": description }))).into_response();
    let scope = parley_domain::oauth::Scopes::ALL.as_str();
    let mut challenge = format!("Bearer resource_metadata=\"{resource_metadata}\", scope=\"{scope}\"");
    if let Some(error) = error {
        challenge.push_str(&format!(", error=\"{error}\", error_description=\"{description}\""));
    }
    if let Ok(v) = HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    response
}

/// What a client reads first: the scope of the tools, and the arguments
/// many tools share (their schemas do not repeat it).
pub const INSTRUCTIONS: &str = "Parley: AI agents, calls, conversations and contacts of one workspace. \
    Tools act on the workspace (and mode: live or test) of the API key or OAuth grant. \
    List tools take `limit` (items per page, 1–200, default 50) and `offset` (0-based start position). \
    Tools that create take an optional `idempotency_key`: a retry with the same key and arguments \
    replays the first answer instead of acting twice.";

/// The MCP server: one per request (rmcp builds it from the factory).
#[derive(Clone)]
struct Handler {
    svc: Services,
    catalog: Arc<Catalog>,
}

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_resources().enable_prompts().build())
            .with_server_info(Implementation::new("parley", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    /// A locked credential sees the tools without `workspace_id` and no
    /// `list_workspaces`; an unlocked one sees both. A read-only grant sees
    /// only the tools that change nothing.
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let principal = principal(&context)?;
        let switching = reach::may_switch(&principal);
        let writing = catalog::may_write(&principal);
        let mut listed: Vec<Tool> = self
            .catalog
            .tools
            .iter()
            .filter(|t| writing || t.read_only)
            .map(|t| if switching { t.switching.clone() } else { t.tool.clone() })
            .collect();
        if switching {
            listed.insert(0, catalog::list_workspaces_tool());
        }
        Ok(ListToolsResult::with_all_items(listed))
    }

    /// For rmcp's checks of request headers: the widest form of each tool.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        if name == catalog::LIST_WORKSPACES {
            return Some(catalog::list_workspaces_tool());
        }
        self.catalog.find(name).map(|t| t.switching.clone())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(library::templates()))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let scope = self.scope(&context).await?;
        Ok(ListResourcesResult::with_all_items(library::resources(&self.svc, scope).await?))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let scope = self.scope(&context).await?;
        Ok(library::read(&self.svc, scope, &request.uri).await?.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let scope = self.scope(&context).await?;
        Ok(ListPromptsResult::with_all_items(library::prompts(&self.svc, scope).await?))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let scope = self.scope(&context).await?;
        let arguments = request
            .arguments
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
            .collect();
        Ok(library::get(&self.svc, scope, &request.name, arguments).await?.into())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let principal = principal(&context)?;
        let arguments = request.arguments.unwrap_or_default();
        let result = match catalog::call(&self.catalog, &request.name, &self.svc, &principal, arguments).await {
            None => return Err(ErrorData::invalid_params(format!("Unknown tool: {}", request.name), None)),
            Some(Ok(value)) => CallToolResult::structured(value),
            Some(Err(refusal)) => CallToolResult::structured_error(refusal),
        };
        Ok(result.into())
    }
}

impl Handler {
    async fn scope(&self, context: &RequestContext<RoleServer>) -> Result<parley_domain::Scope, ErrorData> {
        Ok(principal(context)?.scope)
    }
}

/// The caller, as the admission layer identified it.
fn principal(context: &RequestContext<RoleServer>) -> Result<Principal, ErrorData> {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Principal>())
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request reached a tool unauthenticated", None))
}
