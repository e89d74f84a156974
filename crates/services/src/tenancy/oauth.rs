//! Parley as an OAuth 2.1 authorization server for its MCP endpoint.
//!
//! - Clients register dynamically (RFC 7591) or are named by a Client ID
//!   Metadata Document: an HTTPS URL whose JSON Parley fetches (SSRF-guarded)
//!   and caches.
//! - The authorization code flow with PKCE S256 only; a signed-in user
//!   consents to one workspace and mode, locked or not, read-only or not.
//! - Tokens are bound to the MCP resource (RFC 8707), opaque and stored
//!   hashed: an access token is checked against its grant on every request,
//!   so revoking the grant (or leaving the workspace) ends it at once.
//!   Refresh tokens rotate; presenting a rotated one revokes the grant.

use parley_domain::ids::{GrantId, UserId};
use parley_domain::oauth::{self as rules, OAuthGrant, Scopes};
use parley_domain::{Mode, Scope, Timestamp};
use parley_store::repo::oauth::{self as repo, Client, NewGrant, TokenKind};
use parley_store::repo::users;
use serde::{Deserialize, Serialize};

use crate::tenancy::auth::{Credential, Principal};
use crate::{ServiceError, ServiceResult, Services};

/// Lifetimes and where the server is reached.
#[derive(Debug, Clone)]
pub struct OAuthConfig {
    /// The public base URL: the issuer, and the MCP resource's prefix.
    pub issuer: String,
    pub access_token_ttl_s: i64,
    pub refresh_token_ttl_s: i64,
    pub code_ttl_s: i64,
    /// Let a Client ID Metadata Document live at a private address or on
    /// plain HTTP (development and tests only).
    pub allow_private_metadata: bool,
    /// Single-word redirect URI schemes allowed besides https, loopback
    /// http and reverse-domain ones (known clients': `cursor`, `vscode`).
    pub app_schemes: Vec<String>,
}

impl Default for OAuthConfig {
    fn default() -> Self {
        Self {
            issuer: "http://127.0.0.1:8080".into(),
            access_token_ttl_s: 3600,
            refresh_token_ttl_s: 30 * 24 * 3600,
            code_ttl_s: 60,
            allow_private_metadata: false,
            app_schemes: rules::DEFAULT_APP_SCHEMES.iter().map(|s| s.to_string()).collect(),
        }
    }
}

impl OAuthConfig {
    /// The MCP endpoint's resource identifier.
    pub fn resource(&self) -> String {
        format!("{}/mcp", self.issuer)
    }
}

/// An OAuth error response (RFC 6749 §5.2, RFC 7591 §3.2.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthError {
    pub status: u16,
    pub error: &'static str,
    pub description: String,
}

/// Why an OAuth operation did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum OAuthFailure {
    #[error("{}: {}", .0.error, .0.description)]
    Refused(OAuthError),
    #[error(transparent)]
    Failed(#[from] ServiceError),
}

impl From<parley_store::StoreError> for OAuthFailure {
    fn from(e: parley_store::StoreError) -> Self {
        OAuthFailure::Failed(e.into())
    }
}

fn refuse(status: u16, error: &'static str, description: impl Into<String>) -> OAuthFailure {
    OAuthFailure::Refused(OAuthError { status, error, description: description.into() })
}

fn invalid_grant(description: &str) -> OAuthFailure {
    refuse(400, "invalid_grant", description)
}

type OAuthResult<T> = Result<T, OAuthFailure>;

// ---- clients ----------------------------------------------------------------

/// `POST /oauth/register` (RFC 7591). Unknown metadata is ignored, as the
/// RFC asks.
#[derive(Debug, Clone, Deserialize)]
pub struct RegistrationRequest {
    #[serde(default)]
    pub redirect_uris: Vec<String>,
    pub client_name: Option<String>,
    pub client_uri: Option<String>,
    pub token_endpoint_auth_method: Option<String>,
    pub grant_types: Option<Vec<String>>,
    pub response_types: Option<Vec<String>>,
    pub scope: Option<String>,
}

/// The registered client (RFC 7591 §3.2.1).
#[derive(Debug, Clone, Serialize)]
pub struct RegisteredClient {
    pub client_id: String,
    /// Only for `client_secret_post` / `client_secret_basic` clients, and
    /// only in this response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    pub client_id_issued_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_secret_expires_at: Option<i64>,
    pub client_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_uri: Option<String>,
    pub redirect_uris: Vec<String>,
    pub token_endpoint_auth_method: String,
    pub grant_types: Vec<&'static str>,
    pub response_types: Vec<&'static str>,
    pub scope: &'static str,
}

const AUTH_METHODS: [&str; 3] = ["none", "client_secret_post", "client_secret_basic"];
const MAX_REDIRECT_URIS: usize = 10;
const MAX_URI_LEN: usize = 2000;
const MAX_NAME_CHARS: usize = 200;

fn bad_metadata(description: impl Into<String>) -> OAuthFailure {
    refuse(400, "invalid_client_metadata", description)
}

/// Checks redirect URIs and a client's display name, shared by both ways a
/// client is known.
fn check_client_fields(
    app_schemes: &[String],
    redirect_uris: &[String],
    client_name: Option<&str>,
    client_uri: Option<&str>,
) -> OAuthResult<(String, Option<String>)> {
    if redirect_uris.is_empty() {
        return Err(refuse(400, "invalid_redirect_uri", "redirect_uris must list at least one URI"));
    }
    if redirect_uris.len() > MAX_REDIRECT_URIS {
        return Err(refuse(400, "invalid_redirect_uri", format!("at most {MAX_REDIRECT_URIS} redirect_uris")));
    }
    for uri in redirect_uris {
        if uri.len() > MAX_URI_LEN {
            return Err(refuse(400, "invalid_redirect_uri", format!("a redirect URI is longer than {MAX_URI_LEN}")));
        }
        rules::check_redirect_uri(uri, app_schemes).map_err(|e| refuse(400, "invalid_redirect_uri", e))?;
    }
    let name = client_name.map(str::trim).filter(|n| !n.is_empty());
    if name.is_some_and(|n| n.chars().count() > MAX_NAME_CHARS || n.chars().any(char::is_control)) {
        return Err(bad_metadata(format!("client_name must be at most {MAX_NAME_CHARS} printable characters")));
    }
    // Informational only (never fetched or linked): an http(s) URL's shape.
    let client_uri = match client_uri {
        Some(u) => {
            let rest = u.strip_prefix("https://").or_else(|| u.strip_prefix("http://"));
            if rest.is_none_or(|r| r.is_empty() || r.chars().any(char::is_whitespace)) || u.len() > MAX_URI_LEN {
                return Err(bad_metadata("client_uri must be an http(s) URL"));
            }
            Some(u.to_owned())
        }
        None => None,
    };
    // Unnamed clients are named by where they send the user back.
    let name = name.map(str::to_owned).unwrap_or_else(|| {
        let first = url::Url::parse(&redirect_uris[0]).ok();
        let host = first.as_ref().and_then(|u| u.host_str()).map(str::to_owned);
        host.unwrap_or_else(|| "Unnamed client".into())
    });
    Ok((name, client_uri))
}

pub async fn register(svc: &Services, req: RegistrationRequest) -> OAuthResult<RegisteredClient> {
    let method = req.token_endpoint_auth_method.as_deref().unwrap_or("client_secret_basic");
    if !AUTH_METHODS.contains(&method) {
        return Err(bad_metadata(format!(
            "token_endpoint_auth_method {method:?} is not supported; use none, client_secret_post or client_secret_basic"
        )));
    }
    if let Some(types) = &req.grant_types
        && let Some(other) = types.iter().find(|t| !matches!(t.as_str(), "authorization_code" | "refresh_token"))
    {
        return Err(bad_metadata(format!("grant type {other:?} is not supported")));
    }
    if let Some(types) = &req.response_types
        && let Some(other) = types.iter().find(|t| t.as_str() != "code")
    {
        return Err(bad_metadata(format!("response type {other:?} is not supported")));
    }
    if let Some(scope) = &req.scope {
        Scopes::parse(Some(scope)).map_err(|e| refuse(400, "invalid_client_metadata", e))?;
    }
    let (name, client_uri) = check_client_fields(
        &svc.config.oauth.app_schemes,
        &req.redirect_uris,
        req.client_name.as_deref(),
        req.client_uri.as_deref(),
    )?;
    let client_id = rules::new_token(rules::CLIENT_ID_PREFIX);
    let secret = (method != "none").then(|| rules::new_token(rules::CLIENT_SECRET_PREFIX));
    let now = Timestamp::now();
    let client = Client {
        client_id: client_id.clone(),
        client_name: name.clone(),
        client_uri: client_uri.clone(),
        redirect_uris: serde_json::to_string(&req.redirect_uris).unwrap_or_else(|_| "[]".into()),
        auth_method: method.to_owned(),
        secret_hash: secret.as_deref().map(rules::hash_secret),
        source: "registered".into(),
        created_at: now,
        expires_at: None,
    };
    let mut tx = svc.begin().await?;
    repo::upsert_client(&mut tx, &client).await?;
    svc.commit(tx).await?;
    Ok(RegisteredClient {
        client_id,
        client_secret_expires_at: secret.as_ref().map(|_| 0),
        client_secret: secret,
        client_id_issued_at: now.unix_micros() / 1_000_000,
        client_name: name,
        client_uri,
        redirect_uris: req.redirect_uris,
        token_endpoint_auth_method: method.to_owned(),
        grant_types: vec!["authorization_code", "refresh_token"],
        response_types: vec!["code"],
        scope: Scopes::ALL.as_str(),
    })
}

/// The largest metadata document Parley reads.
const METADATA_MAX_BYTES: usize = 64 * 1024;
const METADATA_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a fetched document is trusted, whatever its `Cache-Control`.
const METADATA_MIN_CACHE_S: i64 = 60;
const METADATA_MAX_CACHE_S: i64 = 24 * 3600;
const METADATA_DEFAULT_CACHE_S: i64 = 3600;

fn is_metadata_url(client_id: &str) -> bool {
    client_id.starts_with("https://") || client_id.starts_with("http://")
}

/// The client `client_id` names: a registered one, or the metadata
/// document at that URL (from the cache while it is fresh).
pub async fn client(svc: &Services, client_id: &str) -> OAuthResult<Client> {
    let unknown = || refuse(401, "invalid_client", "Unknown client_id");
    if client_id.is_empty() || client_id.len() > MAX_URI_LEN {
        return Err(unknown());
    }
    let cached = {
        let mut c = svc.db.read().await.map_err(ServiceError::from)?;
        repo::find_client(&mut c, client_id).await?
    };
    if !is_metadata_url(client_id) {
        return cached.ok_or_else(unknown);
    }
    if let Some(c) = cached.filter(|c| c.expires_at.is_some_and(|t| t > Timestamp::now())) {
        return Ok(c);
    }
    let client = fetch_metadata_document(svc, client_id).await?;
    let mut tx = svc.begin().await?;
    repo::upsert_client(&mut tx, &client).await?;
    svc.commit(tx).await?;
    Ok(client)
}

#[derive(Deserialize)]
struct MetadataDocument {
    client_id: String,
    #[serde(default)]
    redirect_uris: Vec<String>,
    client_name: Option<String>,
    client_uri: Option<String>,
    token_endpoint_auth_method: Option<String>,
}

/// Fetches a Client ID Metadata Document: HTTPS only, public addresses
/// only, no redirects, bounded in time and size; its `client_id` must be
/// its own URL.
async fn fetch_metadata_document(svc: &Services, client_id: &str) -> OAuthResult<Client> {
    let cfg = &svc.config.oauth;
    let bad = |why: String| refuse(400, "invalid_client", format!("Client metadata document {client_id}: {why}"));
    let url = parley_events::ssrf::parse_target(client_id).map_err(|e| bad(e.to_string()))?;
    if url.scheme() != "https" && !cfg.allow_private_metadata {
        return Err(bad("the URL must use https".into()));
    }
    if url.path() == "/" || url.fragment().is_some() {
        return Err(bad("the URL must have a path and no fragment".into()));
    }
    parley_events::ssrf::check_literal_host(&url, cfg.allow_private_metadata).map_err(|e| bad(e.to_string()))?;
    let http = parley_events::ssrf::http_client(cfg.allow_private_metadata, METADATA_TIMEOUT);
    let response = http
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| bad(format!("could not be fetched ({})", without_url(&e))))?;
    if !response.status().is_success() {
        return Err(bad(format!("answered HTTP {}", response.status().as_u16())));
    }
    let max_age = response
        .headers()
        .get(reqwest::header::CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').find_map(|d| d.trim().strip_prefix("max-age=")?.parse::<i64>().ok()))
        .unwrap_or(METADATA_DEFAULT_CACHE_S)
        .clamp(METADATA_MIN_CACHE_S, METADATA_MAX_CACHE_S);
    let body = read_limited(response, METADATA_MAX_BYTES).await.map_err(bad)?;
    let doc: MetadataDocument =
        serde_json::from_slice(&body).map_err(|e| bad(format!("is not a client metadata document ({e})")))?;
    if doc.client_id != client_id {
        return Err(bad("its client_id is not the document's URL".into()));
    }
    let method = doc.token_endpoint_auth_method.as_deref().unwrap_or("none");
    if method != "none" {
        return Err(bad(format!("token_endpoint_auth_method {method:?} is not supported for metadata documents")));
    }
    let (name, client_uri) = check_client_fields(
        &svc.config.oauth.app_schemes,
        &doc.redirect_uris,
        doc.client_name.as_deref(),
        doc.client_uri.as_deref(),
    )
    .map_err(|e| match e {
        OAuthFailure::Refused(r) => bad(r.description),
        other => other,
    })?;
    let now = Timestamp::now();
    Ok(Client {
        client_id: client_id.to_owned(),
        client_name: name,
        client_uri,
        redirect_uris: serde_json::to_string(&doc.redirect_uris).unwrap_or_else(|_| "[]".into()),
        auth_method: "none".into(),
        secret_hash: None,
        source: "metadata_document".into(),
        created_at: now,
        expires_at: Some(now.plus_seconds(max_age)),
    })
}

fn without_url(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "could not connect".into()
    } else {
        "request failed".into()
    }
}

async fn read_limited(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| without_url(&e))? {
        if body.len() + chunk.len() > max {
            return Err(format!("is larger than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Checks the client's credentials at the token and revocation endpoints.
/// `basic` is `Authorization: Basic`'s (id, secret); `form_id` and
/// `form_secret` the body's.
pub async fn authenticate_client(
    svc: &Services,
    basic: Option<(String, String)>,
    form_id: Option<&str>,
    form_secret: Option<&str>,
) -> OAuthResult<Client> {
    let invalid = || refuse(401, "invalid_client", "Client authentication failed");
    // A secret is accepted from either place (clients differ in which
    // they pick); a public client sends only its id.
    let (id, secret) = match (&basic, form_id) {
        (Some((id, _)), Some(other)) if other != id => return Err(invalid()),
        (Some((id, secret)), _) => (id.as_str(), Some(secret.as_str())),
        (None, Some(id)) => (id, form_secret),
        (None, None) => return Err(refuse(400, "invalid_request", "client_id is required")),
    };
    let client = client(svc, id).await.map_err(|e| match e {
        OAuthFailure::Refused(_) => invalid(),
        other => other,
    })?;
    match (&client.secret_hash, secret) {
        (None, None) => Ok(client),
        (Some(hash), Some(s)) if constant_time_eq(hash, &rules::hash_secret(s)) => Ok(client),
        _ => Err(invalid()),
    }
}

fn constant_time_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

// ---- authorization ----------------------------------------------------------

/// The query of `GET /oauth/authorize`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct AuthorizationRequest {
    pub response_type: Option<String>,
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub code_challenge: Option<String>,
    pub code_challenge_method: Option<String>,
    pub state: Option<String>,
    pub scope: Option<String>,
    pub resource: Option<String>,
}

/// A request that may go to the consent page.
#[derive(Debug, Clone)]
pub struct ValidAuthorization {
    pub client: Client,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub state: Option<String>,
    pub scopes: Scopes,
    pub resource: String,
}

/// Why an authorization request cannot proceed.
#[derive(Debug)]
pub enum AuthorizeRefusal {
    /// The client or redirect URI cannot be trusted: shown to the user, never
    /// redirected (RFC 6749 §4.1.2.1). `error` is OAuth's code for it
    /// (`invalid_client`, `invalid_redirect_uri`, `invalid_request`).
    Show {
        error: &'static str,
        message: String,
    },
    /// Sent back to the client's redirect URI.
    Redirect(String),
    Failed(ServiceError),
}

impl From<ServiceError> for AuthorizeRefusal {
    fn from(e: ServiceError) -> Self {
        AuthorizeRefusal::Failed(e)
    }
}

const MAX_STATE_LEN: usize = 1024;

/// Checks an authorization request, in the order RFC 6749 §4.1.2.1 asks:
/// client and redirect URI first (their failures are shown, not
/// redirected), then the rest (sent back to the client).
pub async fn check_authorization(
    svc: &Services,
    req: &AuthorizationRequest,
) -> Result<ValidAuthorization, AuthorizeRefusal> {
    let Some(client_id) = req.client_id.as_deref().filter(|c| !c.is_empty()) else {
        return Err(AuthorizeRefusal::Show {
            error: "invalid_request",
            message: "The request names no client (client_id is missing).".into(),
        });
    };
    let client = match client(svc, client_id).await {
        Ok(c) => c,
        Err(OAuthFailure::Refused(e)) => {
            return Err(AuthorizeRefusal::Show { error: "invalid_client", message: e.description });
        }
        Err(OAuthFailure::Failed(e)) => return Err(e.into()),
    };
    let registered = client.redirect_uris();
    let redirect_uri = match req.redirect_uri.as_deref() {
        // Checked again: a client registered before the rules tightened.
        Some(uri)
            if rules::redirect_matches(&registered, uri)
                && rules::check_redirect_uri(uri, &svc.config.oauth.app_schemes).is_ok() =>
        {
            uri.to_owned()
        }
        Some(_) => {
            return Err(AuthorizeRefusal::Show {
                error: "invalid_redirect_uri",
                message: "The redirect_uri is not one this client registered, so Parley will not send you there."
                    .into(),
            });
        }
        None if registered.len() == 1
            && rules::check_redirect_uri(&registered[0], &svc.config.oauth.app_schemes).is_ok() =>
        {
            registered[0].clone()
        }
        None => {
            return Err(AuthorizeRefusal::Show {
                error: "invalid_request",
                message: "The request has no redirect_uri.".into(),
            });
        }
    };
    let state = req.state.clone();
    let back = |error: &str, description: &str| {
        AuthorizeRefusal::Redirect(redirect_with(
            &redirect_uri,
            &[("error", error), ("error_description", description)],
            state.as_deref(),
            &svc.config.oauth.issuer,
        ))
    };
    if state.as_ref().is_some_and(|s| s.len() > MAX_STATE_LEN) {
        return Err(back("invalid_request", "state is too long"));
    }
    if req.response_type.as_deref() != Some("code") {
        return Err(back("unsupported_response_type", "response_type must be code"));
    }
    let challenge = match (req.code_challenge.as_deref(), req.code_challenge_method.as_deref()) {
        (Some(c), Some("S256")) if rules::is_s256_challenge(c) => c.to_owned(),
        (Some(_), Some("S256")) => return Err(back("invalid_request", "code_challenge is not an S256 challenge")),
        (Some(_), _) => return Err(back("invalid_request", "code_challenge_method must be S256")),
        (None, _) => return Err(back("invalid_request", "PKCE is required: send code_challenge with S256")),
    };
    let scopes = Scopes::parse(req.scope.as_deref()).map_err(|e| back("invalid_scope", &e))?;
    let resource = svc.config.oauth.resource();
    if let Some(r) = req.resource.as_deref()
        && !rules::names_resource(r, &resource)
    {
        return Err(back("invalid_target", &format!("this server issues tokens for {resource} only")));
    }
    Ok(ValidAuthorization { client, redirect_uri, code_challenge: challenge, state, scopes, resource })
}

/// `uri` with `params`, `state` and `iss` (RFC 9207) added to its query.
fn redirect_with(uri: &str, params: &[(&str, &str)], state: Option<&str>, issuer: &str) -> String {
    let mut url = match url::Url::parse(uri) {
        Ok(u) => u,
        Err(_) => return uri.to_owned(),
    };
    {
        let mut q = url.query_pairs_mut();
        for (k, v) in params {
            q.append_pair(k, v);
        }
        if let Some(s) = state {
            q.append_pair("state", s);
        }
        q.append_pair("iss", issuer);
    }
    url.to_string()
}

/// The user's answer on the consent page.
#[derive(Debug, Clone)]
pub struct Consent {
    pub workspace_id: i64,
    pub mode: Mode,
    pub workspace_locked: bool,
    /// Whether the user allows changes (when the client asked for them).
    pub allow_write: bool,
}

/// Records the grant and returns where to send the browser: the client's
/// redirect URI with a single-use code.
pub async fn approve(
    svc: &Services,
    user_id: UserId,
    auth: &ValidAuthorization,
    consent: &Consent,
) -> ServiceResult<String> {
    let user_id = user_id.get();
    let cfg = &svc.config.oauth;
    let mut tx = svc.begin().await?;
    if users::role_in(&mut tx, user_id, consent.workspace_id).await?.is_none() {
        return Err(ServiceError::Forbidden("You are not a member of that workspace".into()));
    }
    let scopes = Scopes { read: true, write: auth.scopes.write && consent.allow_write };
    let grant_id = repo::insert_grant(
        &mut tx,
        &NewGrant {
            user_id,
            client_id: &auth.client.client_id,
            client_name: &auth.client.client_name,
            scope: Scope::new(consent.workspace_id, consent.mode),
            workspace_locked: consent.workspace_locked,
            scopes: scopes.as_str(),
            resource: &auth.resource,
        },
    )
    .await?;
    let code = rules::new_token(rules::CODE_PREFIX);
    let expires = Timestamp::now().plus_seconds(cfg.code_ttl_s);
    repo::insert_code(&mut tx, &rules::hash_secret(&code), grant_id, &auth.redirect_uri, &auth.code_challenge, expires)
        .await?;
    svc.commit(tx).await?;
    tracing::info!(user_id, grant_id, client_id = %auth.client.client_id, "MCP grant approved");
    Ok(redirect_with(&auth.redirect_uri, &[("code", &code)], auth.state.as_deref(), &cfg.issuer))
}

/// Where to send the browser when the user declines.
pub fn deny(svc: &Services, auth: &ValidAuthorization) -> String {
    redirect_with(
        &auth.redirect_uri,
        &[("error", "access_denied"), ("error_description", "The user declined the request")],
        auth.state.as_deref(),
        &svc.config.oauth.issuer,
    )
}

/// The workspaces a user may grant access to.
pub async fn consentable_workspaces(
    svc: &Services,
    user_id: UserId,
) -> ServiceResult<(String, Vec<parley_domain::user::Membership>)> {
    let user_id = user_id.get();
    let mut c = svc.db.read().await?;
    let email = users::get(&mut c, user_id).await?.map(|u| u.email).unwrap_or_default();
    Ok((email, users::memberships(&mut c, user_id).await?))
}

// ---- tokens -----------------------------------------------------------------

/// The body of `POST /oauth/token` (form-encoded).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct TokenRequest {
    pub grant_type: Option<String>,
    pub code: Option<String>,
    pub redirect_uri: Option<String>,
    pub code_verifier: Option<String>,
    pub refresh_token: Option<String>,
    pub scope: Option<String>,
    pub resource: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
}

/// A successful token response (RFC 6749 §5.1).
#[derive(Debug, Clone, Serialize)]
pub struct IssuedTokens {
    pub access_token: String,
    pub token_type: &'static str,
    pub expires_in: i64,
    pub refresh_token: String,
    pub scope: &'static str,
}

/// `POST /oauth/token` for a client already authenticated.
pub async fn token(svc: &Services, client: &Client, req: &TokenRequest) -> OAuthResult<IssuedTokens> {
    let cfg = &svc.config.oauth;
    if let Some(r) = req.resource.as_deref()
        && !rules::names_resource(r, &cfg.resource())
    {
        return Err(refuse(400, "invalid_target", format!("this server issues tokens for {} only", cfg.resource())));
    }
    match req.grant_type.as_deref() {
        Some("authorization_code") => exchange_code(svc, client, req).await,
        Some("refresh_token") => refresh(svc, client, req).await,
        Some(other) => Err(refuse(400, "unsupported_grant_type", format!("grant_type {other:?} is not supported"))),
        None => Err(refuse(400, "invalid_request", "grant_type is required")),
    }
}

async fn exchange_code(svc: &Services, client: &Client, req: &TokenRequest) -> OAuthResult<IssuedTokens> {
    let code = req.code.as_deref().ok_or_else(|| refuse(400, "invalid_request", "code is required"))?;
    let verifier =
        req.code_verifier.as_deref().ok_or_else(|| refuse(400, "invalid_request", "code_verifier is required"))?;
    let mut tx = svc.begin().await?;
    let Some(found) = repo::find_code(&mut tx, &rules::hash_secret(code)).await? else {
        return Err(invalid_grant("Unknown authorization code"));
    };
    let Some(grant) = repo::get_grant(&mut tx, found.grant_id).await? else {
        return Err(invalid_grant("Unknown authorization code"));
    };
    if grant.client_id != client.client_id {
        return Err(invalid_grant("The code was issued to another client"));
    }
    if found.used_at.is_some() || !repo::use_code(&mut tx, found.id).await? {
        // A code used twice was intercepted: end what it gave (RFC 6749 §4.1.2).
        repo::revoke_grant(&mut tx, grant.id).await?;
        svc.commit(tx).await?;
        tracing::warn!(grant_id = grant.id, "authorization code reuse; grant revoked");
        return Err(invalid_grant("The authorization code was already used; its grant is revoked"));
    }
    if found.expires_at <= Timestamp::now() || grant.revoked_at.is_some() {
        return Err(invalid_grant("The authorization code has expired"));
    }
    if req.redirect_uri.as_deref().is_some_and(|r| r != found.redirect_uri) {
        return Err(invalid_grant("redirect_uri differs from the authorization request's"));
    }
    if !rules::pkce_matches(verifier, &found.code_challenge) {
        return Err(invalid_grant("code_verifier does not match the code_challenge"));
    }
    let scopes = Scopes::parse(Some(&grant.scope)).unwrap_or(Scopes { read: true, write: false });
    let issued = issue(svc, &mut tx, grant.id, scopes).await?;
    svc.commit(tx).await?;
    Ok(issued)
}

async fn refresh(svc: &Services, client: &Client, req: &TokenRequest) -> OAuthResult<IssuedTokens> {
    let raw =
        req.refresh_token.as_deref().ok_or_else(|| refuse(400, "invalid_request", "refresh_token is required"))?;
    let mut tx = svc.begin().await?;
    let Some(token) = repo::find_token(&mut tx, &rules::hash_secret(raw), TokenKind::Refresh).await? else {
        return Err(invalid_grant("Invalid refresh token"));
    };
    if token.client_id != client.client_id {
        return Err(invalid_grant("Invalid refresh token"));
    }
    if token.grant_revoked_at.is_some() {
        return Err(invalid_grant("The grant was revoked"));
    }
    if token.rotated_at.is_some() || !repo::rotate_token(&mut tx, token.id).await? {
        // Both the client and someone else hold the token: trust neither.
        repo::revoke_grant(&mut tx, token.grant_id).await?;
        svc.commit(tx).await?;
        tracing::warn!(grant_id = token.grant_id, "refresh token reuse; grant revoked");
        return Err(invalid_grant("Refresh token reuse detected; the grant is revoked"));
    }
    if token.expires_at <= Timestamp::now() {
        return Err(invalid_grant("The refresh token has expired"));
    }
    let granted = Scopes::parse(Some(&token.scope)).unwrap_or(Scopes { read: true, write: false });
    let wanted = match req.scope.as_deref() {
        Some(s) => Scopes::parse(Some(s)).map_err(|e| refuse(400, "invalid_scope", e))?,
        None => granted,
    };
    if !wanted.within(granted) {
        return Err(refuse(400, "invalid_scope", "a refresh cannot widen the grant's scope"));
    }
    let Some(grant) = repo::get_grant(&mut tx, token.grant_id).await? else {
        return Err(invalid_grant("Invalid refresh token"));
    };
    if users::role_in(&mut tx, grant.user_id, grant.workspace_id).await?.is_none() {
        repo::revoke_grant(&mut tx, grant.id).await?;
        svc.commit(tx).await?;
        return Err(invalid_grant("The user is no longer a member of the grant's workspace"));
    }
    let issued = issue(svc, &mut tx, grant.id, wanted).await?;
    svc.commit(tx).await?;
    Ok(issued)
}

async fn issue(
    svc: &Services,
    c: &mut impl parley_store::AsHandle,
    grant_id: i64,
    scopes: Scopes,
) -> OAuthResult<IssuedTokens> {
    let cfg = &svc.config.oauth;
    let now = Timestamp::now();
    let access = rules::new_token(rules::ACCESS_TOKEN_PREFIX);
    let refresh = rules::new_token(rules::REFRESH_TOKEN_PREFIX);
    let scope = scopes.as_str();
    let access_expires = now.plus_seconds(cfg.access_token_ttl_s);
    repo::insert_token(c, &rules::hash_secret(&access), grant_id, TokenKind::Access, scope, access_expires).await?;
    let refresh_expires = now.plus_seconds(cfg.refresh_token_ttl_s);
    repo::insert_token(c, &rules::hash_secret(&refresh), grant_id, TokenKind::Refresh, scope, refresh_expires).await?;
    repo::touch_grant(c, grant_id, now, 0).await?;
    Ok(IssuedTokens {
        access_token: access,
        token_type: "Bearer",
        expires_in: cfg.access_token_ttl_s,
        refresh_token: refresh,
        scope,
    })
}

/// `POST /oauth/revoke` (RFC 7009). A refresh token ends its whole grant;
/// an access token ends itself. Unknown tokens, and tokens of another
/// client, change nothing (and the answer is the same).
pub async fn revoke(svc: &Services, client: &Client, raw: &str) -> ServiceResult<()> {
    let hash = rules::hash_secret(raw);
    let mut tx = svc.begin().await?;
    for kind in [TokenKind::Refresh, TokenKind::Access] {
        if let Some(token) = repo::find_token(&mut tx, &hash, kind).await?
            && token.client_id == client.client_id
        {
            match kind {
                TokenKind::Refresh => repo::revoke_grant(&mut tx, token.grant_id).await.map(|_| ())?,
                TokenKind::Access => repo::expire_token(&mut tx, token.id).await?,
            }
        }
    }
    svc.commit(tx).await?;
    Ok(())
}

/// `last_used_at` of a grant is written at most this often.
const LAST_USED_INTERVAL_S: i64 = 60;

/// Checks an MCP access token: known, unexpired, its grant not revoked and
/// its user still a member of the grant's workspace. `None` otherwise.
pub async fn authenticate_access_token(svc: &Services, raw: &str) -> ServiceResult<Option<Principal>> {
    if !raw.starts_with(rules::ACCESS_TOKEN_PREFIX) {
        return Ok(None);
    }
    let mut c = svc.db.read().await?;
    let Some(found) = repo::authenticate_access(&mut c, &rules::hash_secret(raw)).await? else { return Ok(None) };
    drop(c);
    let now = Timestamp::now();
    if found.expires_at <= now {
        return Ok(None);
    }
    if found.last_used_at.is_none_or(|t| t < now.plus_seconds(-LAST_USED_INTERVAL_S)) {
        let svc = svc.clone();
        let grant_id = found.grant_id;
        tokio::spawn(async move {
            let result = svc
                .transaction(async |work| Ok(repo::touch_grant(work, grant_id, now, LAST_USED_INTERVAL_S).await?))
                .await;
            if let Err(e) = result {
                tracing::warn!(error = %e, grant_id, "could not record MCP grant use");
            }
        });
    }
    let write = Scopes::parse(Some(&found.scopes)).is_ok_and(|s| s.write);
    Ok(Some(Principal {
        scope: found.scope,
        credential: Credential::OAuth {
            grant_id: found.grant_id,
            user_id: found.user_id,
            role: found.role,
            workspace_locked: found.workspace_locked,
            write,
        },
        versions: found.versions,
    }))
}

// ---- grants -----------------------------------------------------------------

/// The signed-in user's MCP grants that are not revoked.
pub async fn grants(svc: &Services, user_id: UserId) -> ServiceResult<Vec<OAuthGrant>> {
    let user_id = user_id.get();
    let mut c = svc.db.read().await?;
    Ok(repo::grants_of(&mut c, user_id).await?.into_iter().map(Into::into).collect())
}

/// Revokes one of the user's grants; another user's (or an unknown one)
/// is a 404.
pub async fn revoke_grant(svc: &Services, user_id: UserId, grant_id: GrantId) -> ServiceResult<OAuthGrant> {
    let user_id = user_id.get();
    let grant_id = grant_id.get();
    let mut tx = svc.begin().await?;
    let grant = repo::get_grant(&mut tx, grant_id)
        .await?
        .filter(|g| g.user_id == user_id && g.revoked_at.is_none())
        .ok_or_else(|| ServiceError::not_found("Grant", grant_id))?;
    repo::revoke_grant(&mut tx, grant_id).await?;
    svc.commit(tx).await?;
    Ok(grant.into())
}
