#![no_main]
//! HTML text: any bytes end in text or an error, within the limits.

#[path = "common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    common::quiet_panics();
    let limits = common::limits();
    if let Ok(text) = parley_extract::html::text(data, limits) {
        assert!(text.chars().count() <= limits.max_chars);
    }
});
