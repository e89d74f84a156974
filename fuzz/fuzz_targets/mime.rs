#![no_main]
//! Inbound email: raw messages, inbound-parse forms, Authentication-Results
//! headers and reply trimming, on any bytes.

#[path = "common.rs"]
mod common;

use parley_extract::mail::{self, AuthenticationResults, MAX_ATTACHMENTS, Mail};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    common::quiet_panics();
    if let Ok(Mail::Letter(letter)) = mail::read(data) {
        assert!(letter.attachments.len() <= MAX_ATTACHMENTS);
        let _ = mail::sender_from_headers(&letter, &["mx.parley.test".to_owned()]);
        let _ = mail::trim_reply(&letter.text);
    }
    let _ = mail::read_form("multipart/form-data; boundary=b", data);
    let text = String::from_utf8_lossy(data);
    let _ = AuthenticationResults::parse(&text);
});
