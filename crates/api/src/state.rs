use std::sync::Arc;

use parley_services::Services;

use crate::cache::ListCache;
use crate::ratelimit::{Limiter, Quota, SharedState};

/// HTTP-level settings.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// Request bodies above this size get a 413.
    pub max_body_bytes: usize,
    /// The limit for CSV imports, which are streamed.
    pub max_import_bytes: usize,
    pub rate_limit: RateLimitConfig,
    /// List pages kept in memory (0 disables the cache).
    pub list_cache_entries: usize,
    /// Mark the refresh-token cookie `Secure` (serve over HTTPS).
    pub cookie_secure: bool,
    /// This server's public URL (`public_url`): its origin may call the
    /// cookie-bearing sign-in routes, besides the request's own host.
    pub public_url: String,
    /// How often a webchat socket reads its conversation even without a
    /// signal (signals reach every instance; this is the safety net).
    pub webchat_poll_interval: std::time::Duration,
    /// `metrics.token`: `/metrics` answers to it (404 without one).
    pub metrics_token: Option<String>,
    /// `proxy.trusted`: peers whose `X-Forwarded-For` names the client.
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 1024 * 1024,
            max_import_bytes: 32 * 1024 * 1024,
            rate_limit: RateLimitConfig::default(),
            list_cache_entries: 256,
            cookie_secure: false,
            public_url: "http://127.0.0.1:8080".to_owned(),
            webchat_poll_interval: std::time::Duration::from_secs(5),
            metrics_token: None,
            trusted_proxies: Vec::new(),
        }
    }
}

/// The `[rate_limit]` settings, read as they are from the server's
/// configuration (one type: the server does not mirror it).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Sustained requests per second per credential (or per IP without one).
    pub per_second: f64,
    /// Requests that may arrive at once.
    pub burst: u32,
    /// Failed authentications (bad keys, tokens or passwords) allowed per IP
    /// per minute (with that burst).
    pub auth_failures_per_minute: u32,
    /// Failed sign-ins allowed per account (email) per hour (with that burst).
    pub account_failures_per_hour: u32,
    /// Keep the limiter state in this Redis (`redis://host:port/db`), shared
    /// by every instance; without it, each instance counts on its own.
    pub redis_url: Option<String>,
    /// Prefix of the limiter's Redis keys.
    pub redis_key_prefix: String,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            per_second: 20.0,
            burst: 100,
            auth_failures_per_minute: 30,
            account_failures_per_hour: 20,
            redis_url: None,
            redis_key_prefix: "parley".to_owned(),
        }
    }
}

/// The quotas every request is counted against.
pub(crate) struct Limits {
    /// Requests per principal (API key, user), or per IP without a valid credential.
    pub requests: Limiter,
    /// Failed authentications per client IP.
    pub auth_failures: Limiter,
    /// Failed sign-ins per account.
    pub account_failures: Limiter,
}

/// Everything a handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub services: Services,
    pub config: Arc<ApiConfig>,
    pub(crate) limits: Arc<Limits>,
    pub(crate) lists: Arc<ListCache>,
}

impl AppState {
    /// The list-page cache, for the other doors (MCP) to share.
    pub fn list_cache(&self) -> Arc<ListCache> {
        Arc::clone(&self.lists)
    }

    /// Fails only on an unusable `rate_limit.redis_url`.
    pub fn new(services: Services, config: ApiConfig) -> Result<Self, String> {
        let rl = &config.rate_limit;
        let shared =
            rl.redis_url.as_deref().map(|url| SharedState::new(url, &rl.redis_key_prefix)).transpose()?.map(Arc::new);
        let per_minute = rl.auth_failures_per_minute.max(1);
        let per_hour = rl.account_failures_per_hour.max(1);
        let limits = Limits {
            requests: Limiter::new("requests", Quota::new(rl.per_second, rl.burst), shared.clone()),
            auth_failures: Limiter::new(
                "auth_failures",
                Quota::new(f64::from(per_minute) / 60.0, per_minute),
                shared.clone(),
            ),
            account_failures: Limiter::new(
                "account_failures",
                Quota::new(f64::from(per_hour) / 3600.0, per_hour),
                shared,
            ),
        };
        let lists = Arc::new(ListCache::new(config.list_cache_entries));
        Ok(Self { services, config: Arc::new(config), limits: Arc::new(limits), lists })
    }

    /// Forgets idle in-process rate-limit entries; call periodically.
    pub fn prune_rate_limits(&self) {
        self.limits.requests.prune();
        self.limits.auth_failures.prune();
        self.limits.account_failures.prune();
    }
}
