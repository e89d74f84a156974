//! Workspaces, API keys and the first-start bootstrap.

use parley_domain::api_key::ApiKey;
use parley_domain::ids::ApiKeyId;
use parley_domain::user::Role;
use parley_domain::workspace::{ApiKeyInfo, Workspace};
use parley_domain::{Mode, Timestamp};
use parley_store::repo::{api_keys, settings, users, workspaces};
use parley_store::{AsHandle, Db, Tx};
use serde::Serialize;

use crate::billing::{self, BillingConfig};
use crate::{ServiceError, ServiceResult, Work};

/// A key just created: its record and, this once, the full secret.
#[derive(Debug, Clone, Serialize)]
pub struct CreatedKey {
    #[serde(flatten)]
    pub info: ApiKeyInfo,
    /// The full key. It is shown only now and cannot be recovered later.
    #[serde(serialize_with = "expose_key")]
    pub key: ApiKey,
}

fn expose_key<S: serde::Serializer>(key: &ApiKey, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(key.expose())
}

/// What a new key should be.
#[derive(Debug, Clone)]
pub struct NewKey {
    pub workspace_id: i64,
    pub mode: Mode,
    pub name: String,
    pub workspace_locked: bool,
    pub created_by: Option<i64>,
    pub expires_at: Option<Timestamp>,
}

pub async fn create_key(c: &mut impl AsHandle, k: NewKey) -> ServiceResult<CreatedKey> {
    if workspaces::get(c, k.workspace_id).await?.is_none() {
        return Err(ServiceError::not_found("Workspace", k.workspace_id));
    }
    let key = ApiKey::generate(k.mode);
    let info = api_keys::insert(
        c,
        &api_keys::NewApiKey {
            workspace_id: k.workspace_id,
            mode: k.mode,
            name: &k.name,
            key_hash: &key.hash(),
            hint: &key.hint(),
            workspace_locked: k.workspace_locked,
            created_by: k.created_by,
            expires_at: k.expires_at,
        },
    )
    .await?;
    Ok(CreatedKey { info, key })
}

/// Revokes a key by id; revoking twice is harmless.
pub async fn revoke_key(c: &mut impl AsHandle, id: ApiKeyId) -> ServiceResult<ApiKeyInfo> {
    let id = id.get();
    api_keys::revoke(c, id).await?.ok_or_else(|| ServiceError::not_found("API key", id))
}

/// A new workspace with its first live key.
pub struct CreatedWorkspace {
    pub workspace: Workspace,
    pub live_key: CreatedKey,
}

/// Creates a workspace with its first live key, and opens its accounts: the
/// configured test balance and `live_credit_cents` of live credit.
pub async fn create_workspace(
    tx: &mut Tx,
    name: &str,
    voice_enabled: bool,
    billing_config: &BillingConfig,
    live_credit_cents: i64,
) -> ServiceResult<CreatedWorkspace> {
    let workspace = workspaces::insert(tx, name, voice_enabled).await?;
    let live_key = create_key(tx, default_key(workspace.id, Mode::Live)).await?;
    billing::open_accounts(tx, workspace.id, billing_config, live_credit_cents).await?;
    Ok(CreatedWorkspace { workspace, live_key })
}

fn default_key(workspace_id: i64, mode: Mode) -> NewKey {
    NewKey {
        workspace_id,
        mode,
        name: format!("Default {} key", mode.as_str()),
        workspace_locked: false,
        created_by: None,
        expires_at: None,
    }
}

/// What the first start created, to be printed once.
pub struct Bootstrap {
    pub workspace: Workspace,
    pub live_key: CreatedKey,
    pub test_key: CreatedKey,
    pub owner_email: String,
    /// The owner's generated password; only its hash is stored.
    pub owner_password: String,
}

/// The login the first start creates for the Default workspace's owner.
pub const BOOTSTRAP_OWNER_EMAIL: &str = "owner@parley.local";

/// The first-start Default workspace's live credit: 10.00 USD.
pub const BOOTSTRAP_LIVE_CREDIT_CENTS: i64 = 1_000;

/// On the first start with no workspace, creates "Default" (voice enabled)
/// with a live and a test key and an owner login. A latch row makes this
/// happen once even when several instances start together on one database.
/// The Default workspace gets [`BOOTSTRAP_LIVE_CREDIT_CENTS`] of live credit,
/// so the README's quick start (which creates an agent) works as written.
pub async fn bootstrap(db: &Db, billing_config: &BillingConfig) -> ServiceResult<Option<Bootstrap>> {
    {
        let mut c = db.read().await?;
        if settings::get(&mut c, "bootstrapped_at").await?.is_some() {
            return Ok(None);
        }
    }
    // Hashing is slow: do it before taking the write lock.
    let owner_password = random_password();
    let password_hash = crate::tenancy::identity::hash_password(owner_password.clone()).await?;
    let live_credit = BOOTSTRAP_LIVE_CREDIT_CENTS.max(billing_config.initial_live_credit_cents);
    let mut tx = Work::begin_on(db).await?;
    let first = settings::set_if_absent(&mut tx, "bootstrapped_at", &Timestamp::now().to_rfc3339()).await?;
    if !first || workspaces::count(&mut tx).await? > 0 {
        tx.commit_before_services().await?;
        return Ok(None);
    }
    let created = create_workspace(&mut tx, "Default", true, billing_config, live_credit).await?;
    let test_key = create_key(&mut tx, default_key(created.workspace.id, Mode::Test)).await?;
    let owner = users::insert(&mut tx, BOOTSTRAP_OWNER_EMAIL, &password_hash)
        .await?
        .ok_or_else(|| ServiceError::Conflict(format!("{BOOTSTRAP_OWNER_EMAIL} already exists")))?;
    users::set_membership(&mut tx, owner.id, created.workspace.id, Role::Owner).await?;
    tx.commit_before_services().await?;
    Ok(Some(Bootstrap {
        workspace: created.workspace,
        live_key: created.live_key,
        test_key,
        owner_email: owner.email,
        owner_password,
    }))
}

/// 20 random characters from an unambiguous alphabet (~115 bits).
fn random_password() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut rng = rand::rng();
    (0..20).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}
