use std::sync::Arc;

use parley_services::Services;

use crate::cache::ListCache;
use crate::ratelimit::Gcra;

/// HTTP-level settings.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Request bodies above this size get a 413.
    pub max_body_bytes: usize,
    /// The limit for CSV imports, which are streamed.
    pub max_import_bytes: usize,
    pub rate_limit: RateLimitConfig,
    /// How long an unfinished idempotency claim blocks retries if its
    /// process dies (a finished one is replayed instead).
    pub idempotency_lease_s: i64,
    /// List pages kept in memory (0 disables the cache).
    pub list_cache_entries: usize,
    /// Mark the refresh-token cookie `Secure` (serve over HTTPS).
    pub cookie_secure: bool,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 1024 * 1024,
            max_import_bytes: 32 * 1024 * 1024,
            rate_limit: RateLimitConfig::default(),
            idempotency_lease_s: 60,
            list_cache_entries: 256,
            cookie_secure: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct RateLimitConfig {
    /// Sustained requests per second per credential (or per IP without one).
    pub per_second: f64,
    /// Requests that may arrive at once.
    pub burst: u32,
    /// Failed authentications allowed per IP per minute (with that burst).
    pub auth_failures_per_minute: u32,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self { per_second: 20.0, burst: 100, auth_failures_per_minute: 30 }
    }
}

/// Everything a handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub services: Services,
    pub config: Arc<ApiConfig>,
    pub(crate) requests: Arc<Gcra>,
    pub(crate) auth_failures: Arc<Gcra>,
    pub(crate) lists: Arc<ListCache>,
}

impl AppState {
    pub fn new(services: Services, config: ApiConfig) -> Self {
        let rl = &config.rate_limit;
        let requests = Arc::new(Gcra::new(rl.per_second, rl.burst));
        let failures_per_second = f64::from(rl.auth_failures_per_minute.max(1)) / 60.0;
        let auth_failures = Arc::new(Gcra::new(failures_per_second, rl.auth_failures_per_minute.max(1)));
        let lists = Arc::new(ListCache::new(config.list_cache_entries));
        Self { services, config: Arc::new(config), requests, auth_failures, lists }
    }

    /// Forgets idle rate-limit entries; call periodically.
    pub fn prune_rate_limits(&self) {
        self.requests.prune();
        self.auth_failures.prune();
    }
}
