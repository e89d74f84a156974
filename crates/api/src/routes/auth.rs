//! `/api/v1/auth`: dashboard sessions. Login returns a short-lived access
//! token (a JWT for `Authorization: Bearer`) and sets a rotating refresh
//! token in an httpOnly, SameSite=Strict cookie scoped to this path.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use parley_domain::Mode;
use parley_domain::ids::{UserId, WorkspaceId};
use parley_domain::user::Role;
use parley_domain::validation::{Parsed, integer, loc, one_of, parse_object, string};
use parley_services::tenancy::identity::{self, Me, Session, TokenResponse};
use parley_services::tenancy::members;
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody};
use crate::extract::{Auth, ClientIp, FromBody, JsonBody};
use crate::state::AppState;

pub const REFRESH_COOKIE: &str = "parley_refresh";
const COOKIE_PATH: &str = "/api/v1/auth";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(login))
        .routes(routes!(refresh))
        .routes(routes!(logout))
        .routes(routes!(me))
        .routes(routes!(switch_workspace))
        .routes(routes!(look_up_invitation))
        .routes(routes!(accept_invitation))
        .routes(routes!(reset_password))
}

impl FromBody for members::LinkToken {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        members::parse_link_token(body)
    }
}

impl FromBody for members::LinkRequest {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        members::parse_link(body)
    }
}

/// What an invitation link offers: the workspace, the role, the email it
/// was sent to, and whether that account exists (then accepting takes its
/// password). A used, revoked or expired link answers 404.
#[utoipa::path(
    post, path = "/api/v1/auth/invitations/lookup", tag = "Authentication",
    request_body = members::LinkToken,
    responses(
        (status = 200, body = members::InvitationPreview),
        (status = 404, body = ErrorBody, example = json!({"detail": "Invitation link not found"})),
    )
)]
async fn look_up_invitation(
    State(s): State<AppState>,
    body: JsonBody<members::LinkToken>,
) -> Result<Json<members::InvitationPreview>, ApiError> {
    Ok(Json(members::look_up(&s.services, &body.value.token).await?))
}

/// Accept an invitation and sign in to its workspace.
///
/// A new account is created with the password given; an existing account
/// must give its own password (wrong ones count toward the sign-in
/// lockout). The link is used up. Sets the refresh cookie as login does.
#[utoipa::path(
    post, path = "/api/v1/auth/invitations/accept", tag = "Authentication",
    request_body = members::LinkRequest,
    responses(
        (status = 200, body = TokenResponse, description = "Signed in to the workspace; `Set-Cookie` carries the refresh token"),
        (status = 401, body = ErrorBody, description = "The existing account's password is wrong"),
        (status = 403, body = ErrorBody, description = "The request came from another site's page (`Origin`)"),
        (status = 404, body = ErrorBody, description = "The link was used, revoked or has expired"),
        (status = 409, body = ErrorBody, description = "An account with the email appeared meanwhile; try again with its password"),
        (status = 429, body = ErrorBody, description = "Too many wrong passwords; see Retry-After"),
    )
)]
async fn accept_invitation(
    State(s): State<AppState>,
    ip: ClientIp,
    headers: HeaderMap,
    body: JsonBody<members::LinkRequest>,
) -> Result<Response, ApiError> {
    same_origin(&s, &headers)?;
    let req = body.value;
    let preview = members::look_up(&s.services, &req.token).await?;
    let session =
        limited_sign_in(&s, ip, &preview.email, members::accept(&s.services, &req.token, &req.password)).await?;
    Ok(session_response(&s, &session))
}

/// Set a new password with a reset link (`parley user reset-password`).
///
/// Every other session of the user ends; this request signs them in to
/// their first workspace. The link is used up.
#[utoipa::path(
    post, path = "/api/v1/auth/password-reset", tag = "Authentication",
    request_body = members::LinkRequest,
    responses(
        (status = 200, body = TokenResponse, description = "Signed in; `Set-Cookie` carries the refresh token"),
        (status = 403, body = ErrorBody, description = "The request came from another site's page (`Origin`), or the user belongs to no workspace"),
        (status = 404, body = ErrorBody, example = json!({"detail": "Password reset link not found"})),
    )
)]
async fn reset_password(
    State(s): State<AppState>,
    headers: HeaderMap,
    body: JsonBody<members::LinkRequest>,
) -> Result<Response, ApiError> {
    same_origin(&s, &headers)?;
    let req = body.value;
    let session = members::reset_password(&s.services, &req.token, &req.password).await?;
    Ok(session_response(&s, &session))
}

/// `POST /api/v1/auth/login`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"email": "owner@parley.local", "password": "a long enough password"}))]
pub struct LoginRequest {
    /// 1–320 characters.
    #[schema(min_length = 1, max_length = 320)]
    pub email: String,
    /// 1–1,024 characters.
    #[schema(min_length = 1, max_length = 1024)]
    pub password: String,
}

impl FromBody for LoginRequest {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        parse_object(body, loc(&["body"]), |r| {
            let email = r.required("email", string(1, 320));
            let password = r.required("password", string(1, identity::PASSWORD_MAX));
            Some(LoginRequest { email: email?, password: password? })
        })
    }
}

/// `POST /api/v1/auth/workspace`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"workspace_id": 1, "mode": "test"}))]
pub struct SwitchWorkspaceRequest {
    /// A workspace the user belongs to.
    #[schema(minimum = 1)]
    pub workspace_id: i64,
    /// `live` (default) or `test`.
    #[schema(nullable = false)]
    pub mode: Option<Mode>,
}

impl FromBody for SwitchWorkspaceRequest {
    fn from_body(body: Value, _: &AppState) -> Parsed<Self> {
        parse_object(body, loc(&["body"]), |r| {
            let workspace_id = r.required("workspace_id", integer(1, i64::MAX));
            let mode = r.optional("mode", one_of(&["live", "test"])).and_then(|m| Mode::parse(&m));
            Some(SwitchWorkspaceRequest { workspace_id: workspace_id?, mode })
        })
    }
}

fn refresh_cookie(headers: &HeaderMap) -> Option<String> {
    cookie(headers, REFRESH_COOKIE)
}

/// The value of the cookie `name`, if the request carries it.
pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value.to_owned())
}

fn set_cookie(state: &AppState, value: &str, max_age: i64) -> HeaderValue {
    let secure = if state.config.cookie_secure { "; Secure" } else { "" };
    let cookie =
        format!("{REFRESH_COOKIE}={value}; Path={COOKIE_PATH}; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}");
    HeaderValue::from_str(&cookie).expect("cookie values are URL-safe base64")
}

fn session_response(state: &AppState, session: &Session) -> Response {
    let mut r = Json(TokenResponse::from(session)).into_response();
    r.headers_mut().insert(header::SET_COOKIE, set_cookie(state, &session.refresh_token, session.refresh_expires_in));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// Refuses a browser request from another site to a route that sets or
/// reads the session cookie. The cookie is already `SameSite=Strict`; this
/// is the second wall (and stops login CSRF, which needs no cookie). A
/// request without `Origin` (a script, curl) is not a browser's cross-site
/// request and passes.
fn same_origin(s: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(origin) = headers.get(header::ORIGIN) else { return Ok(()) };
    let origin = origin.to_str().unwrap_or_default();
    // `scheme://host[:port]` of the configured URL (its path dropped).
    let public = s.config.public_url.split_once("://").map(|(scheme, rest)| {
        let scheme = scheme.to_ascii_lowercase();
        let authority = rest.split('/').next().unwrap_or_default().to_ascii_lowercase();
        // Browsers leave a scheme's default port out of `Origin`.
        let default_port = if scheme == "https" { ":443" } else { ":80" };
        format!("{scheme}://{}", authority.strip_suffix(default_port).unwrap_or(&authority))
    });
    let own = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(|host| [format!("http://{host}"), format!("https://{host}")]);
    if public.as_deref() == Some(origin) || own.is_some_and(|o| o.iter().any(|o| o == origin)) {
        return Ok(());
    }
    Err(ApiError::Status(StatusCode::FORBIDDEN, format!("Origin {origin} may not use this server's sign-in")))
}

/// Sign in with email and password.
///
/// Wrong credentials get the same 401 whether or not the email exists.
/// Failed attempts are limited per client IP (`rate_limit.auth_failures_per_minute`)
/// and per account (`rate_limit.account_failures_per_hour`); the limits are
/// checked before the password, so a locked-out IP or account gets a 429
/// whatever the password.
#[utoipa::path(
    post, path = "/api/v1/auth/login", tag = "Authentication",
    request_body = LoginRequest,
    responses(
        (status = 200, body = TokenResponse, description = "Signed in; `Set-Cookie` carries the refresh token"),
        (status = 401, body = ErrorBody, example = json!({"detail": "Invalid email or password"})),
        (status = 403, body = ErrorBody, description = "The user belongs to no workspace, or the request came from another site's page (`Origin`)"),
        (status = 429, body = ErrorBody, description = "Too many failed sign-ins from this IP or for this account; see Retry-After"),
    )
)]
async fn login(
    State(s): State<AppState>,
    ip: ClientIp,
    headers: HeaderMap,
    body: JsonBody<LoginRequest>,
) -> Result<Response, ApiError> {
    same_origin(&s, &headers)?;
    let LoginRequest { email, password } = body.value;
    let session = limited_login(&s, ip, &email, &password).await?;
    Ok(session_response(&s, &session))
}

/// Signs a user in to the dashboard under the failed-attempt quotas.
pub(crate) async fn limited_login(
    s: &AppState,
    ip: ClientIp,
    email: &str,
    password: &str,
) -> Result<identity::Session, ApiError> {
    limited_sign_in(s, ip, email, identity::login(&s.services, email, password)).await
}

/// Runs a sign-in (`attempt`, of `email`) under the failed-attempt quotas
/// (per IP and per account), as the dashboard and the OAuth sign-in page
/// both do.
pub(crate) async fn limited_sign_in<T>(
    s: &AppState,
    ip: ClientIp,
    email: &str,
    attempt: impl std::future::Future<Output = parley_services::ServiceResult<T>>,
) -> Result<T, ApiError> {
    // Each attempt reserves a failure from both quotas before the password
    // is looked at; a success gives them back.
    let limits = &s.limits;
    let (ip_bucket, account_bucket) = (ip.bucket(), format!("account:{}", identity::account_key(email)));
    let by_ip = limits.auth_failures.check(&ip_bucket).await;
    if !by_ip.allowed {
        return Err(ApiError::RateLimited { retry_after_s: by_ip.retry_after_s });
    }
    let by_account = limits.account_failures.check(&account_bucket).await;
    if !by_account.allowed {
        limits.auth_failures.refund(&ip_bucket).await;
        return Err(ApiError::RateLimited { retry_after_s: by_account.retry_after_s });
    }
    let outcome = attempt.await;
    if !matches!(outcome, Err(parley_services::ServiceError::Unauthorized(_))) {
        limits.auth_failures.refund(&ip_bucket).await;
        limits.account_failures.refund(&account_bucket).await;
    }
    Ok(outcome?)
}

/// Exchange the refresh-token cookie for a new access token.
///
/// The refresh token rotates on every use. Presenting one rotated more than
/// `auth.refresh_reuse_grace_seconds` (30 s) ago revokes every token of its
/// session (reuse means it was copied); within the grace it still renews the
/// session (its successor may never have reached the browser).
/// A browser request from another site's page (its `Origin`) gets a 403.
#[utoipa::path(
    post, path = "/api/v1/auth/refresh", tag = "Authentication",
    responses(
        (status = 200, body = TokenResponse),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "The request came from another site's page (`Origin`)"),
    )
)]
async fn refresh(State(s): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    same_origin(&s, &headers)?;
    let Some(raw) = refresh_cookie(&headers) else {
        return Err(ApiError::unauthorized("Missing refresh token cookie; sign in"));
    };
    let session = identity::refresh(&s.services, &raw).await?;
    Ok(session_response(&s, &session))
}

/// Sign out: revokes the session's refresh tokens and clears the cookie.
#[utoipa::path(
    post, path = "/api/v1/auth/logout", tag = "Authentication",
    responses(
        (status = 204, description = "Signed out"),
        (status = 403, body = ErrorBody, description = "The request came from another site's page (`Origin`)"),
    )
)]
async fn logout(State(s): State<AppState>, headers: HeaderMap) -> Result<Response, ApiError> {
    same_origin(&s, &headers)?;
    if let Some(raw) = refresh_cookie(&headers) {
        identity::logout(&s.services, &raw).await?;
    }
    let mut r = StatusCode::NO_CONTENT.into_response();
    r.headers_mut().insert(header::SET_COOKIE, set_cookie(&s, "", 0));
    Ok(r)
}

/// The signed-in user and the workspaces they belong to, with their roles.
#[utoipa::path(
    get, path = "/api/v1/auth/me", tag = "Authentication",
    responses((status = 200, body = Me), (status = 403, body = ErrorBody, description = "Called with an API key"))
)]
async fn me(auth: Auth, State(s): State<AppState>) -> Result<Json<Me>, ApiError> {
    let (user_id, _): (i64, Role) = auth.0.require_user()?;
    Ok(Json(identity::me(&s.services, UserId(user_id), auth.scope()).await?))
}

/// Switch to another workspace (or mode) the user belongs to.
///
/// Returns a new access token and sets a new refresh cookie. Any workspace
/// the user does not belong to answers 404.
#[utoipa::path(
    post, path = "/api/v1/auth/workspace", tag = "Authentication",
    request_body = SwitchWorkspaceRequest,
    responses((status = 200, body = TokenResponse), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody))
)]
async fn switch_workspace(
    auth: Auth,
    State(s): State<AppState>,
    headers: HeaderMap,
    body: JsonBody<SwitchWorkspaceRequest>,
) -> Result<Response, ApiError> {
    let (user_id, _) = auth.0.require_user()?;
    let req = body.value;
    let old = refresh_cookie(&headers);
    let session = identity::switch_workspace(
        &s.services,
        UserId(user_id),
        WorkspaceId(req.workspace_id),
        req.mode.unwrap_or(Mode::Live),
        old.as_deref(),
    )
    .await?;
    Ok(session_response(&s, &session))
}
