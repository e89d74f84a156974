//! GCRA (generic cell rate algorithm) rate limiting, in process.
//!
//! Each key keeps one number, its theoretical arrival time (TAT). A request
//! is allowed if, after adding one emission interval, the TAT is no more than
//! `burst` intervals ahead of now. The same arithmetic can run in a Redis
//! script for several instances.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::Mutex;
use std::time::Instant;

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

pub struct Gcra {
    interval_ns: u64,
    tolerance_ns: u64,
    burst: u32,
    window_s: u64,
    start: Instant,
    hasher: RandomState,
    tat: Mutex<HashMap<u64, u64>>,
}

impl Gcra {
    pub fn new(per_second: f64, burst: u32) -> Self {
        let per_second = if per_second.is_finite() && per_second > 0.0 { per_second } else { 1.0 };
        let burst = burst.max(1);
        let interval_ns = ((1e9 / per_second) as u64).max(1);
        Self {
            interval_ns,
            tolerance_ns: interval_ns * u64::from(burst),
            burst,
            window_s: (u64::from(burst) * interval_ns).div_ceil(1_000_000_000).max(1),
            start: Instant::now(),
            hasher: RandomState::new(),
            tat: Mutex::new(HashMap::new()),
        }
    }

    pub fn burst(&self) -> u32 {
        self.burst
    }

    /// Seconds for an empty quota to refill completely.
    pub fn window_s(&self) -> u64 {
        self.window_s
    }

    /// Counts one request for `key`.
    pub fn check(&self, key: &str) -> Decision {
        let h = self.hasher.hash_one(key);
        let now = self.start.elapsed().as_nanos() as u64;
        let mut table = self.tat.lock().unwrap_or_else(|p| p.into_inner());
        let tat = table.get(&h).copied().unwrap_or(now).max(now);
        let new_tat = tat + self.interval_ns;
        if new_tat > now + self.tolerance_ns {
            let wait = new_tat - self.tolerance_ns - now;
            let retry = wait.div_ceil(1_000_000_000).max(1);
            return Decision { allowed: false, remaining: 0, reset_s: retry, retry_after_s: retry };
        }
        table.insert(h, new_tat);
        let headroom = now + self.tolerance_ns - new_tat;
        Decision {
            allowed: true,
            remaining: (headroom / self.interval_ns) as u32,
            reset_s: (new_tat - now).div_ceil(1_000_000_000),
            retry_after_s: 0,
        }
    }

    /// Drops keys whose quota has fully refilled (they behave as new).
    pub fn prune(&self) {
        let now = self.start.elapsed().as_nanos() as u64;
        let mut table = self.tat.lock().unwrap_or_else(|p| p.into_inner());
        table.retain(|_, tat| *tat > now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_the_burst_then_refuses() {
        let g = Gcra::new(1.0, 3);
        let d: Vec<Decision> = (0..4).map(|_| g.check("k")).collect();
        assert!(d[..3].iter().all(|d| d.allowed));
        assert_eq!([d[0].remaining, d[1].remaining, d[2].remaining], [2, 1, 0]);
        assert!(!d[3].allowed);
        assert_eq!(d[3].retry_after_s, 1);
        // Another key has its own quota.
        assert!(g.check("other").allowed);
    }

    #[test]
    fn window_is_burst_over_rate() {
        assert_eq!(Gcra::new(20.0, 100).window_s(), 5);
    }
}
