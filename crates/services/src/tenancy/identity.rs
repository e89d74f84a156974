//! Users, passwords, JWT signing keys and dashboard sessions.
//!
//! Access tokens are short-lived HS256 JWTs naming the user, the workspace
//! and the mode. Refresh tokens are opaque random strings stored as SHA-256
//! and rotated on every use; presenting one that was already rotated revokes
//! its whole family (the token was stolen, or replayed).

use std::sync::RwLock;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use parley_domain::crypto::SecretBox;
use parley_domain::email::Email;
use parley_domain::ids::{UserId, WorkspaceId};
use parley_domain::jwt::{self, Claims};
use parley_domain::user::{Membership, Role, User};
use parley_domain::{Mode, Scope, Timestamp};
use parley_store::repo::{sessions, users, workspaces};
use parley_store::{AsHandle, Db};
use rand::RngCore;
use serde::Serialize;
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::{ServiceError, ServiceResult, Services, Work};

/// Session lifetimes.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    pub access_token_ttl_s: i64,
    pub refresh_token_ttl_s: i64,
    /// How long a just-rotated refresh token is still honoured: the answer
    /// carrying its successor can be lost on the way (a tab closed or
    /// reloaded mid-refresh), and the browser then presents the old one.
    pub refresh_reuse_grace_s: i64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self { access_token_ttl_s: 15 * 60, refresh_token_ttl_s: 30 * 24 * 3600, refresh_reuse_grace_s: 30 }
    }
}

pub const PASSWORD_MIN: usize = 8;
pub const PASSWORD_MAX: usize = 1024;

// ---- passwords -------------------------------------------------------------

/// Hashes a password with argon2id, off the async runtime.
pub async fn hash_password(password: String) -> ServiceResult<String> {
    tokio::task::spawn_blocking(move || {
        use argon2::password_hash::{PasswordHasher, SaltString, rand_core::OsRng};
        let salt = SaltString::generate(&mut OsRng);
        argon2::Argon2::default().hash_password(password.as_bytes(), &salt).map(|h| h.to_string())
    })
    .await
    .map_err(|e| ServiceError::internal(e, "the password hashing task stopped"))?
    .map_err(|e| ServiceError::invariant(format!("password hashing failed: {e}")))
}

/// Checks a password against a stored hash, off the async runtime.
async fn verify_password(password: String, hash: String) -> bool {
    tokio::task::spawn_blocking(move || {
        use argon2::password_hash::{PasswordHash, PasswordVerifier};
        PasswordHash::new(&hash)
            .map(|parsed| argon2::Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
            .unwrap_or(false)
    })
    .await
    .unwrap_or(false)
}

/// A hash of a random password, verified against when the email is unknown
/// so that a wrong email costs the same time as a wrong password.
static DUMMY_HASH: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();

async fn dummy_hash() -> String {
    DUMMY_HASH
        .get_or_init(|| async {
            let mut pw = [0u8; 16];
            rand::rng().fill_bytes(&mut pw);
            hash_password(hex::encode(pw)).await.unwrap_or_default()
        })
        .await
        .clone()
}

fn internal(msg: String) -> ServiceError {
    ServiceError::invariant(msg)
}

/// Creates a user (the password is hashed before any transaction starts).
pub async fn create_user(db: &Db, email: &str, password: &str, membership: Option<(i64, Role)>) -> ServiceResult<User> {
    let email = Email::parse(email).map_err(|e| ServiceError::BadRequest(format!("Invalid email: {e}")))?;
    let n = password.chars().count();
    if !(PASSWORD_MIN..=PASSWORD_MAX).contains(&n) {
        return Err(ServiceError::BadRequest(format!(
            "The password must have {PASSWORD_MIN} to {PASSWORD_MAX} characters"
        )));
    }
    let hash = hash_password(password.to_owned()).await?;
    let mut tx = Work::begin_on(db).await?;
    let user = users::insert(&mut tx, email.as_str(), &hash)
        .await?
        .ok_or_else(|| ServiceError::Conflict(format!("A user with the email {email} already exists")))?;
    if let Some((workspace_id, role)) = membership {
        if workspaces::get(&mut tx, workspace_id).await?.is_none() {
            return Err(ServiceError::not_found("Workspace", workspace_id));
        }
        users::set_membership(&mut tx, user.id, workspace_id, role).await?;
    }
    tx.commit_before_services().await?;
    Ok(user)
}

// ---- signing keys ----------------------------------------------------------

struct KeyCache {
    /// `(kid, secret, retired)`, newest first.
    keys: Vec<(String, Vec<u8>, bool)>,
    loaded: Instant,
}

/// The JWT signing keys, shared by every instance through the database and
/// cached here. An unknown `kid` (another instance rotated) triggers a reload.
pub struct Keyring {
    secrets: SecretBox,
    cache: RwLock<KeyCache>,
    /// Held while reloading for an unknown kid: one reload at a time.
    reloading: tokio::sync::Mutex<()>,
}

const KEY_CACHE_TTL: Duration = Duration::from_secs(60);
const KEY_RELOAD_MIN_INTERVAL: Duration = Duration::from_secs(1);

impl Keyring {
    pub fn new(secrets: SecretBox) -> Self {
        let stale = Instant::now().checked_sub(KEY_CACHE_TTL * 2).unwrap_or_else(Instant::now);
        Self {
            secrets,
            cache: RwLock::new(KeyCache { keys: Vec::new(), loaded: stale }),
            reloading: tokio::sync::Mutex::new(()),
        }
    }

    pub fn secrets(&self) -> &SecretBox {
        &self.secrets
    }

    async fn reload(&self, db: &Db) -> ServiceResult<()> {
        let mut c = db.read().await?;
        let stored = sessions::signing_keys(&mut c).await?;
        let mut keys = Vec::with_capacity(stored.len());
        for k in stored {
            let secret = self.secrets.open(&k.sealed_secret).map_err(|_| {
                internal(format!(
                    "signing key {} cannot be opened: is secrets.master_key the one it was sealed with?",
                    k.kid
                ))
            })?;
            keys.push((k.kid, secret, k.retired_at.is_some()));
        }
        let mut cache = self.cache.write().unwrap_or_else(|p| p.into_inner());
        *cache = KeyCache { keys, loaded: Instant::now() };
        Ok(())
    }

    /// Creates a first signing key if there is none (safe on several instances at once).
    pub async fn ensure(&self, db: &Db) -> ServiceResult<()> {
        self.reload(db).await?;
        let empty = self.cache.read().unwrap_or_else(|p| p.into_inner()).keys.is_empty();
        if empty {
            self.rotate(db).await?;
        }
        Ok(())
    }

    /// Adds a new signing key and retires the others. Tokens they signed stay
    /// valid until they expire, so nobody is logged out.
    pub async fn rotate(&self, db: &Db) -> ServiceResult<String> {
        let kid = ulid::Ulid::new().to_string();
        let mut secret = [0u8; 32];
        rand::rng().fill_bytes(&mut secret);
        let mut tx = Work::begin_on(db).await?;
        sessions::insert_signing_key(&mut tx, &kid, &self.secrets.seal(&secret)).await?;
        sessions::retire_signing_keys_except(&mut tx, &kid).await?;
        tx.commit_before_services().await?;
        self.reload(db).await?;
        Ok(kid)
    }

    async fn signing_key(&self, db: &Db) -> ServiceResult<(String, Vec<u8>)> {
        let fresh = self.cache.read().unwrap_or_else(|p| p.into_inner()).loaded.elapsed() < KEY_CACHE_TTL;
        if !fresh {
            self.reload(db).await?;
        }
        let cache = self.cache.read().unwrap_or_else(|p| p.into_inner());
        cache
            .keys
            .iter()
            .find(|(_, _, retired)| !retired)
            .map(|(kid, secret, _)| (kid.clone(), secret.clone()))
            .ok_or_else(|| internal("no active JWT signing key".into()))
    }

    /// The key `kid` names. An unknown kid (another instance rotated, or
    /// started at the same moment) reloads the keys — at most once a
    /// second, so made-up kids cannot hammer the database; a request that
    /// comes too soon waits for the next reload rather than failing.
    async fn verification_key(&self, db: &Db, kid: &str) -> ServiceResult<Option<Vec<u8>>> {
        let lookup = |c: &KeyCache| c.keys.iter().find(|(k, _, _)| k == kid).map(|(_, s, _)| s.clone());
        let look = || {
            let cache = self.cache.read().unwrap_or_else(|p| p.into_inner());
            (lookup(&cache), KEY_RELOAD_MIN_INTERVAL.saturating_sub(cache.loaded.elapsed()))
        };
        let (found, wait) = look();
        if found.is_some() {
            return Ok(found);
        }
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        // One reload at a time: requests that waited for it look again.
        let _reloading = self.reloading.lock().await;
        let (found, wait) = look();
        if found.is_some() || !wait.is_zero() {
            // Found, or another request reloaded meanwhile without it.
            return Ok(found);
        }
        self.reload(db).await?;
        Ok(lookup(&self.cache.read().unwrap_or_else(|p| p.into_inner())))
    }
}

// ---- sessions --------------------------------------------------------------

/// A signed-in session: an access token, and a refresh token for the cookie.
#[derive(Debug, Clone)]
pub struct Session {
    pub access_token: String,
    pub expires_in: i64,
    pub workspace_id: i64,
    pub mode: Mode,
    pub refresh_token: String,
    pub refresh_expires_in: i64,
}

/// The body of a successful login, refresh or workspace switch.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TokenResponse {
    /// A JWT for `Authorization: Bearer …`.
    pub access_token: String,
    #[schema(example = "bearer")]
    pub token_type: &'static str,
    /// Seconds until the access token expires.
    pub expires_in: i64,
    /// The workspace the token serves.
    pub workspace_id: i64,
    /// The mode the token serves (`live` or `test`).
    pub mode: Mode,
}

impl From<&Session> for TokenResponse {
    fn from(s: &Session) -> Self {
        TokenResponse {
            access_token: s.access_token.clone(),
            token_type: "bearer",
            expires_in: s.expires_in,
            workspace_id: s.workspace_id,
            mode: s.mode,
        }
    }
}

pub(crate) fn hash_token(raw: &str) -> String {
    hex::encode(Sha256::digest(raw.as_bytes()))
}

fn new_refresh_token() -> String {
    new_link_token("rt")
}

/// A random token with a prefix naming its use (`rt_`, `inv_`, `pwr_`).
pub(crate) fn new_link_token(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{prefix}_{}", B64.encode(bytes))
}

const BAD_LOGIN: &str = "Invalid email or password";

async fn issue(
    svc: &Services,
    c: &mut impl AsHandle,
    user_id: i64,
    scope: Scope,
    family: Option<&str>,
) -> ServiceResult<Session> {
    let cfg = &svc.config.auth;
    let now = Timestamp::now();
    let (kid, secret) = svc.keyring.signing_key(&svc.db).await?;
    let family = family.map(str::to_owned).unwrap_or_else(|| ulid::Ulid::new().to_string());
    let claims = Claims {
        sub: user_id.to_string(),
        wid: scope.workspace_id,
        mode: scope.mode,
        aud: jwt::AUDIENCE.into(),
        iss: jwt::ISSUER.into(),
        iat: now.unix_micros() / 1_000_000,
        exp: now.unix_micros() / 1_000_000 + cfg.access_token_ttl_s,
        jti: ulid::Ulid::new().to_string(),
        sid: family.clone(),
    };
    let access_token = jwt::sign(&claims, &kid, &secret);
    let refresh_token = new_refresh_token();
    sessions::insert_refresh_token(
        c,
        &hash_token(&refresh_token),
        &family,
        user_id,
        scope,
        now.plus_seconds(cfg.refresh_token_ttl_s),
        DASHBOARD,
    )
    .await?;
    Ok(Session {
        access_token,
        expires_in: cfg.access_token_ttl_s,
        workspace_id: scope.workspace_id,
        mode: scope.mode,
        refresh_token,
        refresh_expires_in: cfg.refresh_token_ttl_s,
    })
}

/// A new session (a new refresh-token family) for a user in `scope`.
pub(crate) async fn start_session(
    svc: &Services,
    tx: &mut parley_store::Tx,
    user_id: i64,
    scope: Scope,
) -> ServiceResult<Session> {
    issue(svc, tx, user_id, scope, None).await
}

/// The name an account's failed sign-ins are counted under: the normalised
/// email, or the text as sent when it is not an email (it matches no user).
pub fn account_key(email: &str) -> String {
    Email::parse(email).map(|e| e.as_str().to_owned()).unwrap_or_else(|_| email.trim().to_lowercase())
}

/// A refresh token's purposes: a dashboard session, exchanged for access
/// tokens; or the OAuth authorization pages' sign-in, which only those
/// pages take (its cookie cannot become a dashboard session).
const DASHBOARD: &str = "dashboard";
const OAUTH_SIGN_IN: &str = "oauth_sign_in";

/// The user these credentials belong to. Every failure is the same 401
/// after the same amount of work.
pub(crate) async fn verify_credentials(
    svc: &Services,
    email: &str,
    password: &str,
) -> ServiceResult<parley_domain::user::User> {
    let found = match Email::parse(email) {
        Ok(e) => {
            let mut c = svc.db.read().await?;
            users::find_credentials(&mut c, e.as_str()).await?
        }
        Err(_) => None,
    };
    let (user, hash) = match found {
        Some((user, hash)) => (Some(user), hash),
        None => (None, dummy_hash().await),
    };
    let ok = verify_password(password.to_owned(), hash).await;
    user.filter(|_| ok).ok_or_else(|| ServiceError::Unauthorized(BAD_LOGIN.into()))
}

/// Where a sign-in lands: the user's first workspace, live mode.
pub(crate) async fn first_workspace(tx: &mut parley_store::Tx, user_id: i64) -> ServiceResult<Scope> {
    let first =
        users::memberships(tx, user_id).await?.into_iter().next().ok_or_else(|| {
            ServiceError::Forbidden("This user belongs to no workspace; ask an owner to add them".into())
        })?;
    Ok(Scope::new(first.workspace_id, Mode::Live))
}

/// Signs a user in to their first workspace (live mode). Every failure is
/// the same 401 after the same amount of work.
pub async fn login(svc: &Services, email: &str, password: &str) -> ServiceResult<Session> {
    let user = verify_credentials(svc, email, password).await?;
    let mut tx = svc.begin().await?;
    let first = first_workspace(&mut tx, user.id).await?;
    let session = issue(svc, &mut tx, user.id, first, None).await?;
    svc.commit(tx).await?;
    Ok(session)
}

/// Signs a user in on the OAuth authorization pages: a token for their
/// cookie (and its lifetime in seconds), good only for those pages.
pub async fn sign_in_for_oauth(svc: &Services, email: &str, password: &str) -> ServiceResult<(String, i64)> {
    let user = verify_credentials(svc, email, password).await?;
    let mut tx = svc.begin().await?;
    let scope = first_workspace(&mut tx, user.id).await?;
    let ttl = svc.config.auth.refresh_token_ttl_s;
    let token = new_refresh_token();
    let family = ulid::Ulid::new().to_string();
    let expires = Timestamp::now().plus_seconds(ttl);
    sessions::insert_refresh_token(&mut tx, &hash_token(&token), &family, user.id, scope, expires, OAUTH_SIGN_IN)
        .await?;
    svc.commit(tx).await?;
    Ok((token, ttl))
}

/// The user an OAuth sign-in token (see [`sign_in_for_oauth`]) belongs to,
/// while it is valid; a dashboard session's token is not one.
pub async fn oauth_signed_in_user(svc: &Services, raw: &str) -> ServiceResult<Option<i64>> {
    let mut c = svc.db.read().await?;
    let Some(token) = sessions::find_refresh_token(&mut c, &hash_token(raw)).await? else { return Ok(None) };
    let valid = token.purpose == OAUTH_SIGN_IN
        && token.revoked_at.is_none()
        && token.rotated_at.is_none()
        && token.expires_at > Timestamp::now();
    Ok(valid.then_some(token.user_id))
}

/// Exchanges a refresh token for a new session, rotating it.
pub async fn refresh(svc: &Services, raw: &str) -> ServiceResult<Session> {
    let invalid = || ServiceError::Unauthorized("Invalid or expired refresh token; sign in again".into());
    let mut tx = svc.begin().await?;
    let Some(token) = sessions::find_refresh_token(&mut tx, &hash_token(raw)).await? else {
        return Err(invalid());
    };
    if token.revoked_at.is_some() || token.expires_at <= Timestamp::now() || token.purpose != DASHBOARD {
        return Err(invalid());
    }
    let rotated_now = token.rotated_at.is_none() && sessions::mark_rotated(&mut tx, token.id).await?;
    // Rotated already: within the grace its successor most likely never
    // reached the browser (a tab closed or reloaded while the refresh was on
    // its way; another request rotating it this instant), so the session
    // goes on, as Auth0's reuse interval and Okta's grace period allow.
    // Later, reuse means the token was copied: the family ends.
    let grace = svc.config.auth.refresh_reuse_grace_s;
    let just_rotated = token.rotated_at.is_none_or(|at| at.plus_seconds(grace) > Timestamp::now());
    if !rotated_now && !just_rotated {
        sessions::revoke_family(&mut tx, &token.family_id).await?;
        svc.commit(tx).await?;
        tracing::warn!(user_id = token.user_id, "refresh token reuse detected; session family revoked");
        return Err(ServiceError::Unauthorized("Refresh token reuse detected; sign in again".into()));
    }
    // Removed from the token's workspace: the session carries on in another
    // of the user's workspaces (live mode), or ends if there is none.
    let mut scope = token.scope();
    if users::role_in(&mut tx, token.user_id, token.workspace_id).await?.is_none() {
        match users::memberships(&mut tx, token.user_id).await?.first() {
            Some(other) => scope = Scope::new(other.workspace_id, Mode::Live),
            None => {
                sessions::revoke_family(&mut tx, &token.family_id).await?;
                svc.commit(tx).await?;
                return Err(invalid());
            }
        }
    }
    let session = issue(svc, &mut tx, token.user_id, scope, Some(&token.family_id)).await?;
    svc.commit(tx).await?;
    Ok(session)
}

/// Ends the session the refresh token belongs to (harmless if unknown).
pub async fn logout(svc: &Services, raw: &str) -> ServiceResult<()> {
    let mut tx = svc.begin().await?;
    if let Some(token) = sessions::find_refresh_token(&mut tx, &hash_token(raw)).await? {
        sessions::revoke_family(&mut tx, &token.family_id).await?;
    }
    svc.commit(tx).await?;
    Ok(())
}

/// A new session in another workspace (and mode) the user belongs to.
/// Any other workspace is a 404, as if it did not exist.
pub async fn switch_workspace(
    svc: &Services,
    user_id: UserId,
    workspace_id: WorkspaceId,
    mode: Mode,
    old_refresh: Option<&str>,
) -> ServiceResult<Session> {
    let user_id = user_id.get();
    let workspace_id = workspace_id.get();
    let mut tx = svc.begin().await?;
    if users::role_in(&mut tx, user_id, workspace_id).await?.is_none() {
        return Err(ServiceError::not_found("Workspace", workspace_id));
    }
    if let Some(raw) = old_refresh
        && let Some(token) = sessions::find_refresh_token(&mut tx, &hash_token(raw)).await?
        && token.user_id == user_id
    {
        sessions::revoke_family(&mut tx, &token.family_id).await?;
    }
    let session = issue(svc, &mut tx, user_id, Scope::new(workspace_id, mode), None).await?;
    svc.commit(tx).await?;
    Ok(session)
}

/// `GET /api/v1/auth/me`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Me {
    pub user: User,
    /// The workspace and mode of the token used.
    pub workspace_id: i64,
    pub mode: Mode,
    pub workspaces: Vec<Membership>,
}

pub async fn me(svc: &Services, user_id: UserId, scope: Scope) -> ServiceResult<Me> {
    let user_id = user_id.get();
    let mut c = svc.db.read().await?;
    let user = users::get(&mut c, user_id).await?.ok_or_else(|| ServiceError::not_found("User", user_id))?;
    let workspaces = users::memberships(&mut c, user_id).await?;
    Ok(Me { user, workspace_id: scope.workspace_id, mode: scope.mode, workspaces })
}

/// Verifies an access token and reads the user's current role in the
/// token's workspace (so removing a member takes effect at once). A token
/// whose session was revoked (logout, refresh-token reuse, workspace
/// switch) is refused on its next request, on every instance: the check is
/// part of the same query.
pub async fn authenticate_jwt(
    svc: &Services,
    token: &str,
) -> ServiceResult<Option<(i64, Role, Scope, parley_store::repo::versions::Snapshot)>> {
    let Ok(kid) = jwt::key_id(token) else { return Ok(None) };
    let Some(secret) = svc.keyring.verification_key(&svc.db, &kid).await? else { return Ok(None) };
    let Ok(claims) = jwt::verify(token, &secret, Timestamp::now().unix_micros() / 1_000_000) else { return Ok(None) };
    let Ok(user_id) = claims.sub.parse::<i64>() else { return Ok(None) };
    let scope = Scope::new(claims.wid, claims.mode);
    let mut c = svc.db.read().await?;
    let Some((role, versions)) = users::session_role_and_versions(&mut c, user_id, scope, &claims.sid).await? else {
        return Ok(None);
    };
    Ok(Some((user_id, role, scope, versions)))
}

/// Starts signing new tokens with a fresh key; tokens signed with the old
/// one stay valid until it is purged a day later. Returns the new key's id.
pub async fn rotate_signing_key(svc: &crate::Services) -> ServiceResult<String> {
    svc.keyring.rotate(&svc.db).await
}
