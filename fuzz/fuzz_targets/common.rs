//! What every driver shares.

use std::time::Duration;

use parley_extract::Limits;

/// Panics are caught by the readers and fail the one file (as in the
/// server); libFuzzer's hook would count them as crashes, so it is replaced
/// by a silent one. What the drivers look for is what escapes: a stack
/// overflow, a hang, unbounded memory.
pub fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::panic::set_hook(Box::new(|_| {})));
}

/// Small limits, so each input is quick; a reader that ignored them would
/// run into libFuzzer's -timeout and -rss_limit_mb.
#[allow(dead_code)] // the MIME driver has no text limit to pass
pub fn limits() -> Limits {
    let mut limits = Limits::with(20_000, Duration::from_secs(1));
    limits.max_inflated_bytes = 64 * 1024 * 1024;
    limits
}
