//! OAuth 2.1 for MCP clients: discovery documents (RFC 9728, RFC 8414),
//! client registration (RFC 7591), the authorization pages, the token and
//! revocation endpoints (RFC 7009), and the user's grants.
//!
//! The OAuth endpoints answer errors in OAuth's shape (`{"error",
//! "error_description"}`), as clients expect; the grants API in the SPEC's.
//! The logic is in `parley_services::tenancy::oauth`.

use axum::Json;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use parley_domain::Mode;
use parley_domain::ids::{GrantId, UserId};
use parley_domain::oauth::{OAuthGrant, SUPPORTED_SCOPES, hash_secret};
use parley_services::tenancy::oauth::{
    self, AuthorizationRequest, AuthorizeRefusal, Consent, OAuthError, OAuthFailure, RegistrationRequest, TokenRequest,
    ValidAuthorization,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::oauth_pages::{self as pages, ConsentView};
use super::{Items, PageParams};
use crate::error::{ApiError, ErrorBody};
use crate::extract::{Auth, ClientIp, Ids, ListQuery, NoFilter};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(protected_resource))
        .routes(routes!(protected_resource_mcp))
        .routes(routes!(authorization_server))
        .routes(routes!(openid_configuration))
        .routes(routes!(register))
        .routes(routes!(authorize_page, authorize_decision))
        .routes(routes!(login))
        .routes(routes!(token))
        .routes(routes!(revoke))
        .routes(routes!(list_grants))
        .routes(routes!(revoke_grant))
        .layer(axum::middleware::map_response(never_framed))
}

/// Every answer of the authorization server, its pages and their redirects
/// alike, refuses to be framed (clickjacking a consent).
async fn never_framed(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("frame-ancestors 'none'"));
    }
    r
}

/// The sign-in cookie of the authorization pages, sent only to `/oauth`:
/// a token good for those pages only (`identity::sign_in_for_oauth`).
const SIGN_IN_COOKIE: &str = "parley_oauth_session";
/// OAuth request bodies are small.
const MAX_FORM_BYTES: usize = 16 * 1024;

// ---- discovery ----------------------------------------------------------------

/// RFC 9728 protected-resource metadata.
#[derive(Serialize, ToSchema)]
pub struct ProtectedResourceMetadata {
    /// The MCP endpoint, `{base_url}/mcp`.
    resource: String,
    authorization_servers: Vec<String>,
    #[schema(example = json!(["mcp:read", "mcp:write"]))]
    scopes_supported: Vec<&'static str>,
    bearer_methods_supported: Vec<&'static str>,
    resource_name: &'static str,
    resource_documentation: String,
}

fn resource_metadata(s: &AppState) -> Json<ProtectedResourceMetadata> {
    let cfg = &s.services.config().oauth;
    Json(ProtectedResourceMetadata {
        resource: cfg.resource(),
        authorization_servers: vec![cfg.issuer.clone()],
        scopes_supported: SUPPORTED_SCOPES.to_vec(),
        bearer_methods_supported: vec!["header"],
        resource_name: "Parley MCP",
        resource_documentation: format!("{}/docs/mcp.md", cfg.issuer),
    })
}

/// Protected-resource metadata of the MCP endpoint (RFC 9728).
///
/// Where MCP clients learn which authorization server issues tokens for
/// `/mcp`. Also served at the path-suffixed `/.well-known/oauth-protected-resource/mcp`.
#[utoipa::path(
    get, path = "/.well-known/oauth-protected-resource", tag = "OAuth",
    responses((status = 200, body = ProtectedResourceMetadata))
)]
async fn protected_resource(State(s): State<AppState>) -> Json<ProtectedResourceMetadata> {
    resource_metadata(&s)
}

/// Protected-resource metadata of the MCP endpoint (RFC 9728, path form).
#[utoipa::path(
    get, path = "/.well-known/oauth-protected-resource/mcp", tag = "OAuth",
    responses((status = 200, body = ProtectedResourceMetadata))
)]
async fn protected_resource_mcp(State(s): State<AppState>) -> Json<ProtectedResourceMetadata> {
    resource_metadata(&s)
}

/// RFC 8414 authorization-server metadata.
#[derive(Serialize, ToSchema)]
pub struct AuthorizationServerMetadata {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    registration_endpoint: String,
    revocation_endpoint: String,
    scopes_supported: Vec<&'static str>,
    response_types_supported: Vec<&'static str>,
    response_modes_supported: Vec<&'static str>,
    grant_types_supported: Vec<&'static str>,
    token_endpoint_auth_methods_supported: Vec<&'static str>,
    revocation_endpoint_auth_methods_supported: Vec<&'static str>,
    code_challenge_methods_supported: Vec<&'static str>,
    /// Client ID Metadata Documents: a client id may be an HTTPS URL.
    client_id_metadata_document_supported: bool,
    /// The authorization response carries `iss` (RFC 9207).
    authorization_response_iss_parameter_supported: bool,
    service_documentation: String,
}

fn server_metadata(s: &AppState) -> Json<AuthorizationServerMetadata> {
    let issuer = s.services.config().oauth.issuer.clone();
    let auth_methods = vec!["none", "client_secret_post", "client_secret_basic"];
    Json(AuthorizationServerMetadata {
        authorization_endpoint: format!("{issuer}/oauth/authorize"),
        token_endpoint: format!("{issuer}/oauth/token"),
        registration_endpoint: format!("{issuer}/oauth/register"),
        revocation_endpoint: format!("{issuer}/oauth/revoke"),
        service_documentation: format!("{issuer}/docs/mcp.md"),
        issuer,
        scopes_supported: SUPPORTED_SCOPES.to_vec(),
        response_types_supported: vec!["code"],
        response_modes_supported: vec!["query"],
        grant_types_supported: vec!["authorization_code", "refresh_token"],
        token_endpoint_auth_methods_supported: auth_methods.clone(),
        revocation_endpoint_auth_methods_supported: auth_methods,
        code_challenge_methods_supported: vec!["S256"],
        client_id_metadata_document_supported: true,
        authorization_response_iss_parameter_supported: true,
    })
}

/// Authorization-server metadata (RFC 8414).
#[utoipa::path(
    get, path = "/.well-known/oauth-authorization-server", tag = "OAuth",
    responses((status = 200, body = AuthorizationServerMetadata))
)]
async fn authorization_server(State(s): State<AppState>) -> Json<AuthorizationServerMetadata> {
    server_metadata(&s)
}

/// The same metadata at the OpenID discovery path, which MCP clients also
/// try. Parley is not an OpenID provider: no ID tokens.
#[utoipa::path(
    get, path = "/.well-known/openid-configuration", tag = "OAuth",
    responses((status = 200, body = AuthorizationServerMetadata))
)]
async fn openid_configuration(State(s): State<AppState>) -> Json<AuthorizationServerMetadata> {
    server_metadata(&s)
}

// ---- OAuth-shaped answers ---------------------------------------------------------

/// An OAuth error (RFC 6749 §5.2).
#[derive(Serialize, ToSchema)]
pub struct OAuthErrorBody {
    #[schema(example = "invalid_grant")]
    error: String,
    error_description: String,
}

fn oauth_error(e: OAuthError) -> Response {
    let mut r = (
        StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST),
        Json(OAuthErrorBody { error: e.error.to_owned(), error_description: e.description }),
    )
        .into_response();
    no_store(&mut r);
    if e.status == 401 {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"parley\""));
    }
    r
}

fn failure(e: OAuthFailure) -> Response {
    match e {
        OAuthFailure::Refused(e) => oauth_error(e),
        OAuthFailure::Failed(e) => ApiError::from(e).into_response(),
    }
}

fn no_store(r: &mut Response) {
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r.headers_mut().insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
}

/// Reads a form-encoded body (bounded). Anything unreadable is an OAuth
/// `invalid_request`.
async fn form<T: for<'de> Deserialize<'de>>(headers: &HeaderMap, body: Body) -> Result<T, Response> {
    let bytes = crate::middleware::read_body(body, MAX_FORM_BYTES).await.map_err(IntoResponse::into_response)?;
    let is_form = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/x-www-form-urlencoded")
    });
    if !is_form && !bytes.is_empty() {
        return Err(oauth_error(OAuthError {
            status: 400,
            error: "invalid_request",
            description: "Send the parameters form-encoded (application/x-www-form-urlencoded)".into(),
        }));
    }
    serde_urlencoded::from_bytes(&bytes).map_err(|_| {
        oauth_error(OAuthError {
            status: 400,
            error: "invalid_request",
            description: "The body is not valid form encoding, or a parameter appears twice".into(),
        })
    })
}

// ---- registration -------------------------------------------------------------------

/// Client metadata to register (RFC 7591 §2). Unknown fields are ignored.
#[derive(ToSchema)]
#[allow(dead_code)] // documentation; parsed as `RegistrationRequest`
pub struct ClientRegistration {
    /// 1–10 URIs: https, http on a loopback host, or an app's private-use scheme.
    #[schema(example = json!(["http://127.0.0.1:33418/callback"]), min_items = 1, max_items = 10, inline)]
    redirect_uris: Vec<RedirectUri>,
    /// Shown on the consent page (up to 200 printable characters).
    #[schema(max_length = 200, pattern = r"^[^\u0000-\u001f\u007f-\u009f]*$")]
    client_name: Option<String>,
    /// The client's home page (an http or https URL).
    #[schema(max_length = 2000, pattern = "^https?://[^\\s\\u0085]+$")]
    client_uri: Option<String>,
    /// `none` (public client, the default for native apps and MCP clients),
    /// `client_secret_post` or `client_secret_basic` (the RFC's default).
    #[schema(inline)]
    token_endpoint_auth_method: Option<AuthMethod>,
    /// `authorization_code` and/or `refresh_token`.
    #[schema(inline)]
    grant_types: Option<Vec<GrantType>>,
    /// `code` only.
    #[schema(inline)]
    response_types: Option<Vec<ResponseType>>,
    /// Space-separated; `mcp:read`, `mcp:write`.
    #[schema(pattern = "^ *(mcp:(read|write)( +mcp:(read|write))*)? *$")]
    scope: Option<String>,
}

/// A redirect URI (up to 2000 characters).
#[derive(ToSchema)]
#[schema(value_type = String, min_length = 1, max_length = 2000)]
#[allow(dead_code)] // documentation
struct RedirectUri(String);

#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)] // documentation
enum AuthMethod {
    None,
    ClientSecretPost,
    ClientSecretBasic,
}

#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)] // documentation
enum GrantType {
    AuthorizationCode,
    RefreshToken,
}

#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)] // documentation
enum ResponseType {
    Code,
}

/// A registered client (RFC 7591 §3.2.1).
#[derive(Serialize, ToSchema)]
#[allow(dead_code)] // documentation; answered as `RegisteredClient`
pub struct ClientInformation {
    client_id: String,
    /// For confidential clients only, in this response only.
    client_secret: Option<String>,
    client_id_issued_at: i64,
    /// 0: the secret does not expire.
    client_secret_expires_at: Option<i64>,
    client_name: String,
    client_uri: Option<String>,
    redirect_uris: Vec<String>,
    token_endpoint_auth_method: String,
    grant_types: Vec<String>,
    response_types: Vec<String>,
    scope: String,
}

/// Register an OAuth client (RFC 7591 dynamic client registration).
///
/// Open to anyone, as MCP clients register themselves; a registered client
/// can do nothing until a user consents. Counted against the per-IP quota.
#[utoipa::path(
    post, path = "/oauth/register", tag = "OAuth",
    request_body = ClientRegistration,
    responses(
        (status = 201, body = ClientInformation),
        (status = 400, body = OAuthErrorBody, description = "`invalid_redirect_uri` or `invalid_client_metadata`"),
    )
)]
async fn register(State(s): State<AppState>, body: Body) -> Response {
    let bytes = match crate::middleware::read_body(body, MAX_FORM_BYTES).await {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let request: RegistrationRequest = match serde_json::from_slice(&bytes) {
        Ok(r) => r,
        Err(e) => {
            return oauth_error(OAuthError {
                status: 400,
                error: "invalid_client_metadata",
                description: format!("The body is not client metadata JSON: {e}"),
            });
        }
    };
    match oauth::register(&s.services, request).await {
        Ok(client) => {
            let mut r = (StatusCode::CREATED, Json(client)).into_response();
            no_store(&mut r);
            r
        }
        Err(e) => failure(e),
    }
}

// ---- authorization pages ------------------------------------------------------------

/// The query of the authorization endpoint (RFC 6749 §4.1.1, RFC 7636, RFC 8707).
#[derive(Deserialize, utoipa::IntoParams, ToSchema)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documentation; parsed as `AuthorizationRequest`
pub struct AuthorizeParams {
    /// `code`.
    response_type: Option<String>,
    /// A registered client's id, or the HTTPS URL of its metadata document.
    client_id: Option<String>,
    /// One of the client's redirect URIs (a loopback URI's port may differ).
    redirect_uri: Option<String>,
    /// BASE64URL(SHA-256(code_verifier)).
    code_challenge: Option<String>,
    /// `S256` (the only method).
    code_challenge_method: Option<String>,
    /// Returned unchanged (up to 1024 characters).
    state: Option<String>,
    /// `mcp:read` and/or `mcp:write` (default both).
    scope: Option<String>,
    /// `{base_url}/mcp`.
    resource: Option<String>,
}

fn html(status: StatusCode, body: String) -> Response {
    let mut r = (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Not `no-referrer`: with it, the forms' POSTs carry `Origin: null`.
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    no_store(&mut r);
    r
}

fn see_other(location: &str) -> Response {
    match HeaderValue::from_str(location) {
        Ok(v) => {
            let mut r = StatusCode::SEE_OTHER.into_response();
            r.headers_mut().insert(header::LOCATION, v);
            no_store(&mut r);
            r
        }
        Err(_) => html(StatusCode::BAD_REQUEST, pages::refusal("invalid_request", "The request cannot be redirected.")),
    }
}

fn refusal_response(refusal: AuthorizeRefusal) -> Response {
    match refusal {
        AuthorizeRefusal::Show { error, message } => html(StatusCode::BAD_REQUEST, pages::refusal(error, &message)),
        AuthorizeRefusal::Redirect(to) => see_other(&to),
        AuthorizeRefusal::Failed(e) => ApiError::from(e).into_response(),
    }
}

/// The authorization request as a query string (what the sign-in form
/// carries back to this page).
fn request_query(req: &AuthorizationRequest) -> String {
    serde_urlencoded::to_string(req).unwrap_or_default()
}

/// The consent form's anti-forgery value: bound to the sign-in cookie
/// (which a forging page cannot read) and to the request.
fn csrf_token(cookie: &str, req: &AuthorizationRequest) -> String {
    let part = |v: &Option<String>| v.clone().unwrap_or_default();
    hash_secret(&format!(
        "consent\n{cookie}\n{}\n{}\n{}\n{}\n{}",
        part(&req.client_id),
        part(&req.redirect_uri),
        part(&req.code_challenge),
        part(&req.state),
        part(&req.scope),
    ))
}

async fn signed_in(s: &AppState, headers: &HeaderMap) -> Result<Option<(i64, String)>, ApiError> {
    let Some(cookie) = super::auth::cookie(headers, SIGN_IN_COOKIE) else { return Ok(None) };
    Ok(parley_services::tenancy::identity::oauth_signed_in_user(&s.services, &cookie).await?.map(|user| (user, cookie)))
}

/// The authorization endpoint: the sign-in page, then the consent page.
///
/// A request with an unknown client or a redirect URI the client did not
/// register is refused on the page itself (400), never redirected. Other
/// faults (no PKCE S256, an unknown scope, another resource) are sent back
/// to the redirect URI as `error`, with `state` and `iss`.
#[utoipa::path(
    get, path = "/oauth/authorize", tag = "OAuth",
    params(AuthorizeParams),
    responses(
        (status = 200, content_type = "text/html", body = String, description = "The sign-in or consent page"),
        (status = 303, description = "An error sent back to the client's redirect URI"),
        (status = 400, content_type = "text/html", body = String, description = "The client or redirect URI cannot be trusted"),
    )
)]
async fn authorize_page(
    State(s): State<AppState>,
    headers: HeaderMap,
    query: Result<Query<AuthorizationRequest>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(req)) = query else {
        return html(
            StatusCode::BAD_REQUEST,
            pages::refusal("invalid_request", "The authorization request's query cannot be read."),
        );
    };
    let auth = match oauth::check_authorization(&s.services, &req).await {
        Ok(a) => a,
        Err(r) => return refusal_response(r),
    };
    match signed_in(&s, &headers).await {
        Ok(Some((user, cookie))) => consent_page(&s, &auth, &req, user, &cookie).await,
        Ok(None) => html(StatusCode::OK, pages::login(&auth.client.client_name, &request_query(&req), "", None)),
        Err(e) => e.into_response(),
    }
}

async fn consent_page(
    s: &AppState,
    auth: &ValidAuthorization,
    req: &AuthorizationRequest,
    user: i64,
    cookie: &str,
) -> Response {
    match oauth::consentable_workspaces(&s.services, UserId(user)).await {
        Ok((email, workspaces)) if workspaces.is_empty() => html(
            StatusCode::FORBIDDEN,
            pages::refusal("access_denied", &format!("{email} belongs to no workspace; ask an owner to add you.")),
        ),
        Ok((email, workspaces)) => html(
            StatusCode::OK,
            pages::consent(&ConsentView {
                auth,
                request: req,
                email: &email,
                workspaces: &workspaces,
                csrf: &csrf_token(cookie, req),
            }),
        ),
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// A POST from another site's page is refused: only Parley's own pages
/// post these forms.
fn foreign_origin(s: &AppState, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else { return false };
    let issuer = &s.services.config().oauth.issuer;
    let own = issuer.split('/').take(3).collect::<Vec<_>>().join("/");
    !origin.eq_ignore_ascii_case(&own)
}

/// The consent form's fields.
#[derive(Deserialize, ToSchema)]
pub struct ConsentForm {
    #[serde(flatten)]
    #[schema(inline)]
    request: AuthorizeParamsForm,
    /// The page's anti-forgery value.
    csrf: Option<String>,
    /// `allow` or `deny`.
    decision: Option<String>,
    workspace_id: Option<String>,
    /// `live` or `test`.
    mode: Option<String>,
    /// `on` when checked.
    workspace_locked: Option<String>,
    /// `on` when checked.
    allow_write: Option<String>,
}

/// The authorization request, carried through the consent form.
#[derive(Deserialize, Serialize, ToSchema, Default)]
pub struct AuthorizeParamsForm {
    response_type: Option<String>,
    client_id: Option<String>,
    redirect_uri: Option<String>,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
    state: Option<String>,
    scope: Option<String>,
    resource: Option<String>,
}

impl From<AuthorizeParamsForm> for AuthorizationRequest {
    fn from(f: AuthorizeParamsForm) -> Self {
        AuthorizationRequest {
            response_type: f.response_type,
            client_id: f.client_id,
            redirect_uri: f.redirect_uri,
            code_challenge: f.code_challenge,
            code_challenge_method: f.code_challenge_method,
            state: f.state,
            scope: f.scope,
            resource: f.resource,
        }
    }
}

/// The consent page's answer: allow (a code for the client) or deny.
#[utoipa::path(
    post, path = "/oauth/authorize", tag = "OAuth",
    request_body(content = ConsentForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "To the client's redirect URI (with `code`, or `error=access_denied`), or back to sign in"),
        (status = 400, content_type = "text/html", body = String, description = "The request cannot be authorized"),
        (status = 403, content_type = "text/html", body = String, description = "A forged or stale form, or a workspace the user is not in"),
    )
)]
async fn authorize_decision(State(s): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    if foreign_origin(&s, &headers) {
        return html(StatusCode::FORBIDDEN, pages::refusal("access_denied", "This form was posted from another site."));
    }
    let form: ConsentForm = match form(&headers, body).await {
        Ok(f) => f,
        Err(_) => return html(StatusCode::BAD_REQUEST, pages::refusal("invalid_request", "The form cannot be read.")),
    };
    let req: AuthorizationRequest = form.request.into();
    let auth = match oauth::check_authorization(&s.services, &req).await {
        Ok(a) => a,
        Err(r) => return refusal_response(r),
    };
    let (user, cookie) = match signed_in(&s, &headers).await {
        Ok(Some(found)) => found,
        Ok(None) => return see_other(&format!("/oauth/authorize?{}", request_query(&req))),
        Err(e) => return e.into_response(),
    };
    let expected = csrf_token(&cookie, &req);
    if form.csrf.as_deref().is_none_or(|c| c != expected) {
        return html(
            StatusCode::FORBIDDEN,
            pages::refusal("access_denied", "This form has expired or was not issued by Parley; start again."),
        );
    }
    match form.decision.as_deref() {
        Some("allow") => {}
        Some("deny") => return see_other(&oauth::deny(&s.services, &auth)),
        _ => return html(StatusCode::BAD_REQUEST, pages::refusal("invalid_request", "Choose Allow or Deny.")),
    }
    let (Some(workspace_id), Some(mode)) = (
        form.workspace_id.as_deref().and_then(|w| w.parse::<i64>().ok()),
        form.mode.as_deref().and_then(|m| Mode::parse(m)),
    ) else {
        return html(StatusCode::BAD_REQUEST, pages::refusal("invalid_request", "Choose a workspace and a mode."));
    };
    let consent = Consent {
        workspace_id,
        mode,
        workspace_locked: form.workspace_locked.as_deref() == Some("on"),
        allow_write: form.allow_write.as_deref() == Some("on"),
    };
    match oauth::approve(&s.services, UserId(user), &auth, &consent).await {
        Ok(to) => see_other(&to),
        Err(parley_services::ServiceError::Forbidden(why)) => {
            html(StatusCode::FORBIDDEN, pages::refusal("access_denied", &why))
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// The sign-in form's fields.
#[derive(Deserialize, ToSchema)]
pub struct SignInForm {
    email: Option<String>,
    password: Option<String>,
    /// The authorization request's query string, to return to.
    request: Option<String>,
}

/// Sign in on the way to the consent page (the dashboard's users and
/// sessions; the same failed-attempt limits as `POST /api/v1/auth/login`).
#[utoipa::path(
    post, path = "/oauth/login", tag = "OAuth",
    request_body(content = SignInForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "Signed in: back to the consent page (`Set-Cookie` carries the sign-in session)"),
        (status = 400, content_type = "text/html", body = String, description = "The authorization request is missing or invalid"),
        (status = 401, content_type = "text/html", body = String, description = "Wrong email or password: the form again"),
        (status = 403, content_type = "text/html", body = String, description = "Posted from another site, or the user belongs to no workspace"),
        (status = 429, content_type = "text/html", body = String, description = "Too many failed sign-ins: the form again, with when to retry"),
    )
)]
async fn login(State(s): State<AppState>, ip: ClientIp, headers: HeaderMap, body: Body) -> Response {
    if foreign_origin(&s, &headers) {
        return html(StatusCode::FORBIDDEN, pages::refusal("access_denied", "This form was posted from another site."));
    }
    let form: SignInForm = match form(&headers, body).await {
        Ok(f) => f,
        Err(_) => return html(StatusCode::BAD_REQUEST, pages::refusal("invalid_request", "The form cannot be read.")),
    };
    let query = form.request.unwrap_or_default();
    let req: AuthorizationRequest = match serde_urlencoded::from_str(&query) {
        Ok(r) => r,
        Err(_) => {
            return html(
                StatusCode::BAD_REQUEST,
                pages::refusal("invalid_request", "The authorization request cannot be read."),
            );
        }
    };
    let auth = match oauth::check_authorization(&s.services, &req).await {
        Ok(a) => a,
        Err(r) => return refusal_response(r),
    };
    let (email, password) = (form.email.unwrap_or_default(), form.password.unwrap_or_default());
    let again = |status, why: &str| {
        html(status, pages::login(&auth.client.client_name, &request_query(&req), &email, Some(why)))
    };
    let signing_in = parley_services::tenancy::identity::sign_in_for_oauth(&s.services, &email, &password);
    match super::auth::limited_sign_in(&s, ip, &email, signing_in).await {
        Ok((token, expires_in)) => {
            let mut r = see_other(&format!("/oauth/authorize?{}", request_query(&req)));
            let secure = if s.config.cookie_secure { "; Secure" } else { "" };
            let cookie =
                format!("{SIGN_IN_COOKIE}={token}; Path=/oauth; Max-Age={expires_in}; HttpOnly; SameSite=Lax{secure}");
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Err(ApiError::RateLimited { retry_after_s }) => again(
            StatusCode::TOO_MANY_REQUESTS,
            &format!("Too many failed sign-ins; try again in {retry_after_s} seconds."),
        ),
        Err(ApiError::Service(parley_services::ServiceError::Unauthorized(why))) => {
            again(StatusCode::UNAUTHORIZED, &why)
        }
        Err(ApiError::Service(parley_services::ServiceError::Forbidden(why))) => again(StatusCode::FORBIDDEN, &why),
        Err(e) => e.into_response(),
    }
}

// ---- tokens -----------------------------------------------------------------------------

/// The token endpoint's parameters (RFC 6749 §4.1.3 and §6).
#[derive(ToSchema)]
#[allow(dead_code)] // documentation; parsed as `TokenRequest`
pub struct TokenForm {
    #[schema(inline)]
    grant_type: GrantType,
    code: Option<String>,
    redirect_uri: Option<String>,
    /// PKCE: 43–128 characters whose S256 hash is the code challenge.
    code_verifier: Option<String>,
    refresh_token: Option<String>,
    /// On refresh: the same scopes or fewer.
    scope: Option<String>,
    /// `{base_url}/mcp` (RFC 8707).
    resource: Option<String>,
    client_id: Option<String>,
    /// For `client_secret_post` clients (others use HTTP Basic).
    client_secret: Option<String>,
}

/// Tokens for the MCP endpoint (RFC 6749 §5.1).
#[derive(Serialize, ToSchema)]
#[allow(dead_code)] // documentation; answered as `IssuedTokens`
pub struct TokenAnswer {
    /// Opaque, `pmcp_at_…`; valid at `/mcp` only.
    access_token: String,
    #[schema(example = "Bearer")]
    token_type: String,
    /// Seconds (default 3600).
    expires_in: i64,
    /// Opaque, `pmcp_rt_…`, single use: each refresh returns a new one.
    refresh_token: String,
    scope: String,
}

/// `Authorization: Basic` credentials, form-decoded as RFC 6749 §2.3.1 asks.
fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (id, secret) = text.split_once(':')?;
    let unescape = |s: &str| -> Option<String> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(&format!("v={s}")).ok()?;
        pairs.into_iter().next().map(|(_, v)| v)
    };
    Some((unescape(id)?, unescape(secret)?))
}

/// Exchange an authorization code, or rotate a refresh token.
///
/// Public clients send `client_id`; confidential ones authenticate with
/// HTTP Basic or `client_secret`. A refresh token used twice revokes its
/// whole grant (someone else has it).
#[utoipa::path(
    post, path = "/oauth/token", tag = "OAuth",
    request_body(content = TokenForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, body = TokenAnswer),
        (status = 400, body = OAuthErrorBody, description = "`invalid_request`, `invalid_grant`, `invalid_scope`, `invalid_target` or `unsupported_grant_type`"),
        (status = 401, body = OAuthErrorBody, description = "`invalid_client`"),
    )
)]
async fn token(State(s): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let req: TokenRequest = match form(&headers, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    let basic = basic_credentials(&headers);
    let client =
        match oauth::authenticate_client(&s.services, basic, req.client_id.as_deref(), req.client_secret.as_deref())
            .await
        {
            Ok(c) => c,
            Err(e) => return failure(e),
        };
    match oauth::token(&s.services, &client, &req).await {
        Ok(tokens) => {
            let mut r = Json(tokens).into_response();
            no_store(&mut r);
            r
        }
        Err(e) => failure(e),
    }
}

/// The revocation endpoint's parameters (RFC 7009 §2.1).
#[derive(Deserialize, ToSchema)]
pub struct RevokeForm {
    #[schema(value_type = String, min_length = 1)]
    token: Option<String>,
    /// `access_token` or `refresh_token` (a hint; both are looked up).
    token_type_hint: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
}

/// Revoke a token (RFC 7009). A refresh token ends its whole grant.
///
/// The answer is 200 whether or not the token was known.
#[utoipa::path(
    post, path = "/oauth/revoke", tag = "OAuth",
    request_body(content = RevokeForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 200, description = "Revoked, or unknown"),
        (status = 400, body = OAuthErrorBody, description = "`invalid_request`: no token"),
        (status = 401, body = OAuthErrorBody, description = "`invalid_client`"),
    )
)]
async fn revoke(State(s): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let req: RevokeForm = match form(&headers, body).await {
        Ok(r) => r,
        Err(r) => return r,
    };
    let _ = &req.token_type_hint;
    let basic = basic_credentials(&headers);
    let client =
        match oauth::authenticate_client(&s.services, basic, req.client_id.as_deref(), req.client_secret.as_deref())
            .await
        {
            Ok(c) => c,
            Err(e) => return failure(e),
        };
    let Some(raw) = req.token.filter(|t| !t.is_empty()) else {
        return oauth_error(OAuthError {
            status: 400,
            error: "invalid_request",
            description: "token is required".into(),
        });
    };
    match oauth::revoke(&s.services, &client, &raw).await {
        Ok(()) => {
            let mut r = StatusCode::OK.into_response();
            no_store(&mut r);
            r
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

// ---- grants -------------------------------------------------------------------------------

/// Your MCP grants: the clients you allowed, newest first (signed-in users).
#[utoipa::path(
    get, path = "/api/v1/oauth/grants", tag = "OAuth",
    params(PageParams),
    responses((status = 200, body = Items<OAuthGrant>), (status = 403, body = ErrorBody, description = "An API key or MCP token"))
)]
async fn list_grants(
    auth: Auth,
    State(s): State<AppState>,
    q: ListQuery<NoFilter>,
) -> Result<Json<Items<OAuthGrant>>, ApiError> {
    let (user, _) = auth.0.require_user()?;
    Ok(Json(Items::paged(oauth::grants(&s.services, UserId(user)).await?, q.page)))
}

/// Revoke one of your MCP grants: its tokens stop working at once.
#[utoipa::path(
    delete, path = "/api/v1/oauth/grants/{grant_id}", tag = "OAuth",
    params(("grant_id" = i64, Path, minimum = 1)),
    responses(
        (status = 200, body = OAuthGrant, description = "The grant as it was"),
        (status = 403, body = ErrorBody, description = "An API key or MCP token"),
        (status = 404, body = ErrorBody, description = "No such grant of yours"),
    )
)]
async fn revoke_grant(auth: Auth, State(s): State<AppState>, path: Ids<1>) -> Result<Json<OAuthGrant>, ApiError> {
    let (user, _) = auth.0.require_user()?;
    let [id] = path.0;
    Ok(Json(oauth::revoke_grant(&s.services, UserId(user), GrantId(id)).await?))
}
