//! GCRA (generic cell rate algorithm) rate limiting, in process or in Redis.
//!
//! Each key keeps one number, its theoretical arrival time (TAT). A request
//! is allowed if, after adding one emission interval, the TAT is no more than
//! `burst` intervals ahead of now. With `rate_limit.redis_url` the same
//! arithmetic runs in one Redis script per check (on Redis's clock), so every
//! instance counts against one quota; if Redis cannot be reached, the
//! instance falls back to its own in-process state and says so in its log.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The verdict on one request and what the `RateLimit` headers report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// Requests that could still be made right now.
    pub remaining: u32,
    /// Seconds until the quota is fully restored (or, when refused, until the
    /// next request is allowed).
    pub reset_s: u64,
    pub retry_after_s: u64,
}

/// A quota: `burst` requests at once, refilled at one per `interval_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quota {
    interval_us: u64,
    burst: u32,
}

impl Quota {
    pub fn new(per_second: f64, burst: u32) -> Self {
        let per_second = if per_second.is_finite() && per_second > 0.0 { per_second } else { 1.0 };
        Self { interval_us: ((1e6 / per_second) as u64).max(1), burst: burst.max(1) }
    }

    pub fn burst(&self) -> u32 {
        self.burst
    }

    fn tolerance_us(&self) -> u64 {
        self.interval_us.saturating_mul(u64::from(self.burst))
    }

    /// Seconds for an empty quota to refill completely.
    pub fn window_s(&self) -> u64 {
        self.tolerance_us().div_ceil(1_000_000).max(1)
    }

    /// The GCRA step at `now` for a key whose TAT is `tat` (None: unseen).
    /// Returns the decision and the new TAT to store if allowed.
    fn step(&self, tat: Option<u64>, now: u64) -> (Decision, Option<u64>) {
        let tat = tat.unwrap_or(now).max(now);
        let new_tat = tat.saturating_add(self.interval_us);
        let limit = now.saturating_add(self.tolerance_us());
        if new_tat > limit {
            let retry = (new_tat - limit).div_ceil(1_000_000).max(1);
            return (Decision { allowed: false, remaining: 0, reset_s: retry, retry_after_s: retry }, None);
        }
        let decision = Decision {
            allowed: true,
            remaining: ((limit - new_tat) / self.interval_us).min(u64::from(u32::MAX)) as u32,
            reset_s: (new_tat - now).div_ceil(1_000_000),
            retry_after_s: 0,
        };
        (decision, Some(new_tat))
    }
}

/// In-process GCRA state: one TAT per (hashed) key.
pub struct Gcra {
    quota: Quota,
    start: Instant,
    hasher: RandomState,
    tat: Mutex<HashMap<u64, u64>>,
}

impl Gcra {
    pub fn new(quota: Quota) -> Self {
        Self { quota, start: Instant::now(), hasher: RandomState::new(), tat: Mutex::new(HashMap::new()) }
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    /// Counts one request for `key`.
    pub fn check(&self, key: &str) -> Decision {
        let h = self.hasher.hash_one(key);
        let now = self.now();
        let mut table = self.tat.lock().unwrap_or_else(|p| p.into_inner());
        let (decision, new_tat) = self.quota.step(table.get(&h).copied(), now);
        if let Some(t) = new_tat {
            table.insert(h, t);
        }
        decision
    }

    /// Gives back one request counted by `check` (a reservation not used).
    pub fn refund(&self, key: &str) {
        let h = self.hasher.hash_one(key);
        let now = self.now();
        let mut table = self.tat.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tat) = table.get_mut(&h) {
            *tat = tat.saturating_sub(self.quota.interval_us).max(now);
        }
    }

    /// Drops keys whose quota has fully refilled (they behave as new).
    pub fn prune(&self) {
        let now = self.now();
        let mut table = self.tat.lock().unwrap_or_else(|p| p.into_inner());
        table.retain(|_, tat| *tat > now);
    }
}

/// The GCRA step in Redis, on Redis's clock (`TIME`), so instances agree.
/// ARGV: interval µs, burst, 1 to refund. Returns {allowed, remaining, reset µs, retry µs}.
const SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = interval * tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
if ARGV[3] == '1' then
  local back = tat - interval
  if back > now then
    redis.call('SET', KEYS[1], back, 'PX', math.ceil((back - now) / 1000))
  else
    redis.call('DEL', KEYS[1])
  end
  return {1, 0, 0, 0}
end
local new_tat = tat + interval
local limit = now + tolerance
if new_tat > limit then
  return {0, 0, 0, new_tat - limit}
end
redis.call('SET', KEYS[1], new_tat, 'PX', math.ceil((new_tat - now) / 1000) + 1)
return {1, math.floor((limit - new_tat) / interval), new_tat - now, 0}
";

/// A connection to the Redis that holds shared limiter state.
pub struct SharedState {
    client: redis::Client,
    /// Every key starts with it.
    prefix: String,
    connection: tokio::sync::OnceCell<redis::aio::ConnectionManager>,
    script: redis::Script,
    /// After a failure, Redis is left alone until then (requests would
    /// otherwise each wait for a connection timeout).
    down_until: Mutex<Option<Instant>>,
    /// When the last "Redis unreachable" warning was logged (at most one a minute).
    warned: Mutex<Option<Instant>>,
}

impl SharedState {
    /// Parses the URL; connecting happens on first use (and reconnects after failures).
    pub fn new(url: &str, prefix: &str) -> Result<Self, String> {
        let client = redis::Client::open(url).map_err(|e| format!("rate_limit.redis_url: {e}"))?;
        Ok(Self {
            client,
            prefix: prefix.to_owned(),
            connection: tokio::sync::OnceCell::new(),
            script: redis::Script::new(SCRIPT),
            down_until: Mutex::new(None),
            warned: Mutex::new(None),
        })
    }

    async fn run(&self, key: &str, quota: Quota, refund: bool) -> Result<Decision, redis::RedisError> {
        let connection = self
            .connection
            .get_or_try_init(|| async {
                let config = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(Duration::from_millis(500)))
                    .set_response_timeout(Some(Duration::from_millis(500)))
                    .set_number_of_retries(1);
                redis::aio::ConnectionManager::new_with_config(self.client.clone(), config).await
            })
            .await?;
        let mut connection = connection.clone();
        let (allowed, remaining, reset_us, retry_us): (i64, i64, i64, i64) = self
            .script
            .key(key)
            .arg(quota.interval_us)
            .arg(quota.burst)
            .arg(if refund { "1" } else { "0" })
            .invoke_async(&mut connection)
            .await?;
        let retry = (retry_us.max(0) as u64).div_ceil(1_000_000).max(1);
        Ok(if allowed == 1 {
            Decision {
                allowed: true,
                remaining: remaining.clamp(0, i64::from(u32::MAX)) as u32,
                reset_s: (reset_us.max(0) as u64).div_ceil(1_000_000),
                retry_after_s: 0,
            }
        } else {
            Decision { allowed: false, remaining: 0, reset_s: retry, retry_after_s: retry }
        })
    }

    fn is_down(&self) -> bool {
        self.down_until.lock().unwrap_or_else(|p| p.into_inner()).is_some_and(|t| Instant::now() < t)
    }

    fn failed(&self, error: &redis::RedisError) {
        *self.down_until.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now() + Duration::from_secs(5));
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        if warned.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
            *warned = Some(Instant::now());
            tracing::warn!(error = %error, "rate limiting: Redis is unreachable; counting in this instance only");
        }
    }
}

/// One named quota (requests, failed sign-ins, …), counted in Redis when
/// configured and in process otherwise.
pub struct Limiter {
    name: &'static str,
    quota: Quota,
    local: Gcra,
    shared: Option<std::sync::Arc<SharedState>>,
}

impl Limiter {
    pub fn new(name: &'static str, quota: Quota, shared: Option<std::sync::Arc<SharedState>>) -> Self {
        Self { name, quota, local: Gcra::new(quota), shared }
    }

    pub fn quota(&self) -> Quota {
        self.quota
    }

    fn redis_key(&self, shared: &SharedState, key: &str) -> String {
        format!("{}:rl:{}:{key}", shared.prefix, self.name)
    }

    /// Counts one request for `key`.
    pub async fn check(&self, key: &str) -> Decision {
        if let Some(shared) = self.shared.as_ref().filter(|s| !s.is_down()) {
            match shared.run(&self.redis_key(shared, key), self.quota, false).await {
                Ok(d) => return d,
                Err(e) => shared.failed(&e),
            }
        }
        self.local.check(key)
    }

    /// Gives back one request counted by `check`.
    pub async fn refund(&self, key: &str) {
        if let Some(shared) = self.shared.as_ref().filter(|s| !s.is_down()) {
            match shared.run(&self.redis_key(shared, key), self.quota, true).await {
                Ok(_) => return,
                Err(e) => shared.failed(&e),
            }
        }
        self.local.refund(key)
    }

    pub fn prune(&self) {
        self.local.prune();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_the_burst_then_refuses() {
        let g = Gcra::new(Quota::new(1.0, 3));
        let d: Vec<Decision> = (0..4).map(|_| g.check("k")).collect();
        assert!(d[..3].iter().all(|d| d.allowed));
        assert_eq!([d[0].remaining, d[1].remaining, d[2].remaining], [2, 1, 0]);
        assert!(!d[3].allowed);
        assert_eq!(d[3].retry_after_s, 1);
        // Another key has its own quota.
        assert!(g.check("other").allowed);
    }

    #[test]
    fn a_refund_gives_one_request_back() {
        let g = Gcra::new(Quota::new(0.001, 2));
        assert!(g.check("k").allowed);
        assert!(g.check("k").allowed);
        assert!(!g.check("k").allowed);
        g.refund("k");
        assert!(g.check("k").allowed);
        assert!(!g.check("k").allowed);
    }

    #[test]
    fn window_is_burst_over_rate() {
        assert_eq!(Quota::new(20.0, 100).window_s(), 5);
    }
}
