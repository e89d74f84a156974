//! Parley's use cases. Each module owns one resource group: it parses input
//! into typed commands (`parse_*`), applies the business rules, writes
//! through the store, and appends the matching event in the same transaction.
//!
//! Writes take a `&mut Tx` (or a `&mut Work` when they leave something for
//! after the commit) and run in a unit of work ([`unit`]) that callers (the
//! REST API, the CLI, MCP) start with one call; reads take `&Services`.

pub mod agents;
pub mod api_keys;
pub mod auth;
pub mod billing;
pub mod calls;
pub mod channels;
pub mod contact_import;
pub mod contacts;
pub mod conversations;
pub mod courier;
mod error;
pub mod group_commit;
pub mod handoffs;
pub mod identity;
pub mod jobs;
pub mod messages;
pub mod prompt_blocks;
pub mod search;
pub mod signals;
pub mod storage;
pub mod unit;
pub mod webchat;
pub mod webhooks;
pub mod workspaces;

use std::sync::Arc;

pub use error::{ServiceError, ServiceResult};
use parley_store::Db;
pub use unit::{Answer, Answered, Idempotent, KeyHold, Work};

/// Settings the use cases need.
#[derive(Debug, Clone)]
pub struct ServicesConfig {
    /// Names of the configured text engines; `builtin` is always among them.
    pub text_engines: Vec<String>,
    pub auth: identity::AuthConfig,
    /// Let webhook URLs point at private addresses (development and tests).
    pub webhooks_allow_private: bool,
    pub billing: billing::BillingConfig,
    pub contacts: contacts::ContactsConfig,
    pub courier: courier::CourierConfig,
    pub storage: storage::StorageConfig,
    pub calls: calls::CallsConfig,
    /// How long an unfinished idempotency claim blocks retries if its
    /// process dies (a finished one is replayed instead).
    pub idempotency_lease_s: i64,
}

impl Default for ServicesConfig {
    fn default() -> Self {
        Self {
            text_engines: vec!["builtin".to_owned()],
            auth: identity::AuthConfig::default(),
            webhooks_allow_private: false,
            billing: billing::BillingConfig::default(),
            contacts: contacts::ContactsConfig::default(),
            courier: courier::CourierConfig::default(),
            storage: storage::StorageConfig::default(),
            calls: calls::CallsConfig::default(),
            idempotency_lease_s: 60,
        }
    }
}

impl ServicesConfig {
    /// Adds `builtin` if the configuration forgot it, and sorts the names.
    pub fn normalised(mut self) -> Self {
        if !self.text_engines.iter().any(|e| e == "builtin") {
            self.text_engines.push("builtin".to_owned());
        }
        self.text_engines.sort();
        self.text_engines.dedup();
        self
    }
}

/// The database, settings and JWT keys, cheap to clone.
#[derive(Clone)]
pub struct Services {
    pub db: Db,
    pub config: Arc<ServicesConfig>,
    pub keyring: Arc<identity::Keyring>,
    /// Bumped after writes, so the webhook dispatcher delivers new events at once.
    pub outbox: Arc<tokio::sync::watch::Sender<u64>>,
    /// Signals between instances (conversation changes, hang-ups).
    pub signals: Arc<signals::Signals>,
    /// Files: attachments (and later recordings).
    pub storage: Arc<storage::Storage>,
    /// This instance's live calls and its telephony providers.
    pub calls: Arc<calls::CallRuntime>,
    /// Inbound messages, committed in groups.
    pub inbound: Arc<group_commit::GroupCommit<conversations::InboundJob, conversations::Received>>,
}

impl Services {
    /// `secrets` seals secrets stored in the database (JWT signing keys).
    pub fn new(db: Db, config: ServicesConfig, secrets: parley_domain::crypto::SecretBox) -> Self {
        let storage = storage::Storage::open(config.storage.clone(), secrets.derive_key("parley/files"));
        Self {
            storage: Arc::new(storage),
            calls: Arc::new(calls::CallRuntime::default()),
            db,
            config: Arc::new(config.normalised()),
            keyring: Arc::new(identity::Keyring::new(secrets)),
            outbox: Arc::new(tokio::sync::watch::channel(0).0),
            signals: Arc::new(signals::Signals::default()),
            inbound: Arc::new(group_commit::GroupCommit::new(conversations::run_receive)),
        }
    }
}

impl Services {
    /// Tells the dispatcher that a committed write may have queued deliveries.
    pub fn wake_outbox(&self) {
        self.outbox.send_modify(|generation| *generation = generation.wrapping_add(1));
    }
}

/// Picks the first of `base`, `base-2`, `base-3`, … that is not in `taken`.
pub(crate) fn free_slug(base: &str, taken: &[String]) -> String {
    (1..)
        .map(|n| parley_domain::slug::candidate(base, n))
        .find(|c| !taken.iter().any(|t| t == c))
        .expect("an unbounded range always finds a free slug")
}

/// Serialises a resource for an event's `data` (a failure is a bug, never a `null` payload).
pub(crate) fn event_data<T: serde::Serialize>(value: &T) -> ServiceResult<serde_json::Value> {
    serde_json::to_value(value).map_err(|e| ServiceError::internal(e, "serialising an event's data"))
}
