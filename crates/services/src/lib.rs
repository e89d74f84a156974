//! Parley's use cases, grouped by area (`tenancy`, `billing`, `crm`,
//! `messaging`, `agents`, `calls`, `files`, `search`, `webhooks`). Each
//! module owns one resource group: it parses input into typed commands
//! (`parse_*`), applies the business rules, writes through the store, and
//! appends the matching event in the same transaction.
//!
//! Writes take a `&mut Tx` (or a `&mut Work` when they leave something for
//! after the commit) and run in a unit of work ([`unit`]) that callers (the
//! REST API, the CLI, MCP) start with one call; reads take `&Services`.

// Areas: each groups the use cases of one part of the product.
pub mod agents;
pub mod billing;
pub mod calls;
pub mod crm;
pub mod demo;
pub mod files;
pub mod knowledge;
pub mod messaging;
pub mod overview;
pub mod search;
pub mod tenancy;
pub mod webhooks;

// What the areas share: the unit of work, the job queue, errors, signals
// between instances, group commits.
mod error;
pub mod group_commit;
pub mod housekeeping;
pub mod jobs;
pub mod list_cache;
pub mod live;
pub mod metrics;
pub mod signals;
pub mod unit;

use std::sync::Arc;

pub use error::{ServiceError, ServiceResult};
use parley_store::Db;
/// The change counters a request saw when it began (list caches key on them).
pub use parley_store::repo::versions::Snapshot;
pub use unit::{AfterCommit, Answer, Answered, Claimed, Idempotent, KeyHold, Work};

/// Settings the use cases need.
#[derive(Debug, Clone)]
pub struct ServicesConfig {
    /// The configured text engines; `builtin` is always among them.
    pub text_engines: parley_engines::Engines,
    /// The configured speech engines; `espeak` is always among them.
    pub speech: parley_speech::engines::SpeechEngines,
    pub auth: tenancy::identity::AuthConfig,
    pub oauth: tenancy::oauth::OAuthConfig,
    /// Let webhook URLs point at private addresses (development and tests).
    pub webhooks_allow_private: bool,
    pub billing: billing::BillingConfig,
    pub contacts: crm::contacts::ContactsConfig,
    pub courier: messaging::courier::CourierConfig,
    pub storage: files::StorageConfig,
    pub calls: calls::CallsConfig,
    pub runtime: agents::runs::RuntimeConfig,
    pub knowledge: knowledge::KnowledgeConfig,
    /// A handoff nobody has accepted is offered again after this long
    /// (`None`: never; see `messaging::offers`).
    pub handoff_reoffer: Option<std::time::Duration>,
    /// How long an unfinished idempotency claim blocks retries if its
    /// process dies (a finished one is replayed instead).
    pub idempotency_lease_s: i64,
}

impl ServicesConfig {
    /// This server's public root, as browsers and providers reach it (file
    /// links, provider callbacks and webhooks).
    pub fn public_url(&self) -> &str {
        self.storage.public_url.trim_end_matches('/')
    }
}

impl Default for ServicesConfig {
    fn default() -> Self {
        Self {
            text_engines: parley_engines::Engines::builtin_only(),
            speech: parley_speech::engines::SpeechEngines::default(),
            auth: tenancy::identity::AuthConfig::default(),
            oauth: tenancy::oauth::OAuthConfig::default(),
            webhooks_allow_private: false,
            billing: billing::BillingConfig::default(),
            contacts: crm::contacts::ContactsConfig::default(),
            courier: messaging::courier::CourierConfig::default(),
            storage: files::StorageConfig::default(),
            calls: calls::CallsConfig::default(),
            runtime: agents::runs::RuntimeConfig::default(),
            knowledge: knowledge::KnowledgeConfig::default(),
            handoff_reoffer: Some(std::time::Duration::from_secs(120)),
            idempotency_lease_s: 60,
        }
    }
}

/// What the use cases share, cheap to clone. Its parts are private: the
/// areas reach them inside this crate, callers get only what they need
/// (settings, files, live signals, a health check) and otherwise call the
/// areas' operations.
#[derive(Clone)]
pub struct Services {
    pub(crate) db: Db,
    pub(crate) config: Arc<ServicesConfig>,
    pub(crate) keyring: Arc<tenancy::identity::Keyring>,
    /// Signals between instances (conversation changes, hang-ups).
    pub(crate) signals: Arc<signals::Signals>,
    /// Files: attachments and recordings.
    pub(crate) storage: Arc<files::Storage>,
    /// This instance's live calls and its telephony providers.
    pub(crate) calls: Arc<calls::CallRuntime>,
    /// Knowledge's document frequencies, by collection version.
    pub(crate) frequencies: Arc<knowledge::Frequencies>,
    /// Inbound messages, committed in groups.
    pub(crate) inbound:
        Arc<group_commit::GroupCommit<messaging::conversations::InboundJob, messaging::conversations::Received>>,
    /// Sends the courier made, recorded in groups.
    pub(crate) sent: Arc<group_commit::GroupCommit<messaging::courier::SentJob, bool>>,
    /// Runs agents (see [`agents::runtime`]).
    pub(crate) agent_runtime: Option<Arc<dyn agents::runtime::AgentRuntime>>,
    /// This instance's live streams of events, one hub per scope watched.
    pub(crate) live: Arc<live::Hubs>,
}

impl Services {
    /// `secrets` seals secrets stored in the database (JWT signing keys,
    /// channel credentials). Call [`Services::prepare`] before serving.
    pub fn new(db: Db, config: ServicesConfig, secrets: parley_domain::crypto::SecretBox) -> Self {
        let storage = files::Storage::open(config.storage.clone(), secrets.derive_key("parley/files"));
        let signals = Arc::new(signals::Signals::new(db.backend()));
        // Every commit that wrote events tells the live streams, on every instance.
        let announce = Arc::clone(&signals);
        db.event_bell().listen(move |written| announce.events_written(written));
        Self {
            storage: Arc::new(storage),
            calls: Arc::new(calls::CallRuntime::default()),
            db,
            config: Arc::new(config),
            keyring: Arc::new(tenancy::identity::Keyring::new(secrets)),
            signals,
            live: Arc::default(),
            frequencies: Arc::default(),
            inbound: Arc::new(
                group_commit::GroupCommit::new("inbound", messaging::conversations::run_receive)
                    .with_look_ahead(messaging::conversations::look_ahead_receive)
                    .with_lock_order(messaging::conversations::receive_lock_order),
            ),
            sent: Arc::new(group_commit::GroupCommit::new("sent", messaging::courier::record_sent)),
            agent_runtime: None,
        }
    }

    /// Loads the JWT signing keys, creating the first one on a new database.
    pub async fn prepare(&self) -> ServiceResult<()> {
        self.keyring.ensure(&self.db).await
    }

    /// The same use cases placing calls through `runtime`'s providers.
    pub fn with_call_runtime(mut self, runtime: calls::CallRuntime) -> Self {
        self.calls = Arc::new(runtime);
        self
    }

    /// The same use cases storing files in `storage` (tests watch its calls).
    pub fn with_storage(mut self, storage: files::Storage) -> Self {
        self.storage = Arc::new(storage);
        self
    }

    pub fn config(&self) -> &Arc<ServicesConfig> {
        &self.config
    }

    /// Stored files (attachments, recordings) and their download links.
    pub fn files(&self) -> &files::Storage {
        &self.storage
    }

    /// Changes to conversations and calls, from this instance and others.
    pub fn subscribe_signals(&self) -> tokio::sync::broadcast::Receiver<signals::Signal> {
        self.signals.subscribe()
    }

    /// Whether the database answers (the health check).
    pub async fn ping(&self) -> ServiceResult<()> {
        Ok(self.db.ping().await?)
    }

    /// Whether the database answers within `within`, and if not why (for
    /// `/readyz`: words fit for anyone to read).
    pub async fn readiness(&self, within: std::time::Duration) -> Result<(), &'static str> {
        self.db.readiness(within).await
    }

    /// This instance's metrics (see [`metrics`] for what a scrape adds).
    pub fn metrics(&self) -> &parley_telemetry::Metrics {
        self.db.metrics()
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
