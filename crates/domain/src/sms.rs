//! How an SMS travels: the GSM 03.38 7-bit alphabet or UCS-2, and how many
//! segments (billed parts) a text takes, as carriers and Twilio count them.
//!
//! A text wholly in the GSM-7 alphabet takes 160 septets in one segment, or
//! 153 per segment once split (the rest is the concatenation header); the
//! extension characters (`^{}\[~]|€` and form feed) take two septets and a
//! pair is never split across segments. Any other character sends the whole
//! text as UCS-2: 70 UTF-16 code units in one segment, 67 per segment once
//! split, a surrogate pair never split.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

string_enum!(
    /// The alphabet an SMS travels in.
    SmsEncoding { Gsm7 = "GSM-7", Ucs2 = "UCS-2" }
);

/// How an SMS text travels: its alphabet and how many segments it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Segments {
    /// `GSM-7` when every character is in the GSM 03.38 alphabet (with its
    /// extension table), else `UCS-2`.
    pub encoding: SmsEncoding,
    /// Segments (billed parts): GSM-7 160 septets in one, 153 each once
    /// split; UCS-2 70 code units in one, 67 each once split.
    pub count: u32,
}

/// The basic GSM 03.38 table (one septet each).
const GSM7_BASIC: &str = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?\
¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà";
/// The extension table (an escape and the character: two septets each).
const GSM7_EXTENDED: &str = "\u{0C}^{}\\[~]|€";

/// Units each character takes in its encoding.
fn units(text: &str) -> (SmsEncoding, Vec<u32>) {
    let gsm: Option<Vec<u32>> = text
        .chars()
        .map(|c| {
            if GSM7_BASIC.contains(c) {
                Some(1)
            } else if GSM7_EXTENDED.contains(c) {
                Some(2)
            } else {
                None
            }
        })
        .collect();
    match gsm {
        Some(septets) => (SmsEncoding::Gsm7, septets),
        None => (SmsEncoding::Ucs2, text.chars().map(|c| c.len_utf16() as u32).collect()),
    }
}

/// The encoding and segment count of `text` (an empty text takes one segment).
pub fn segments(text: &str) -> Segments {
    let (encoding, units) = units(text);
    let (single, split) = match encoding {
        SmsEncoding::Gsm7 => (160, 153),
        SmsEncoding::Ucs2 => (70, 67),
    };
    let total: u32 = units.iter().sum();
    if total <= single {
        return Segments { encoding, count: 1 };
    }
    // Fill segments character by character: a character that does not fit
    // whole (an escape pair, a surrogate pair) starts the next segment.
    let (mut count, mut used) = (1, 0);
    for u in units {
        if used + u > split {
            count += 1;
            used = 0;
        }
        used += u;
    }
    Segments { encoding, count }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(text: &str) -> (SmsEncoding, u32) {
        let s = segments(text);
        (s.encoding, s.count)
    }

    #[test]
    fn gsm7_texts_take_160_then_153_septets_per_segment() {
        assert_eq!(seg(""), (SmsEncoding::Gsm7, 1));
        assert_eq!(seg(&"a".repeat(160)), (SmsEncoding::Gsm7, 1));
        assert_eq!(seg(&"a".repeat(161)), (SmsEncoding::Gsm7, 2));
        assert_eq!(seg(&"a".repeat(306)), (SmsEncoding::Gsm7, 2));
        assert_eq!(seg(&"a".repeat(307)), (SmsEncoding::Gsm7, 3));
        assert_eq!(seg("Hello £5 @ café — no"), (SmsEncoding::Ucs2, 1), "an em dash is not GSM-7");
        assert_eq!(seg("Price: 5€ [ok] ~ é Ñ ¿"), (SmsEncoding::Gsm7, 1));
    }

    #[test]
    fn extension_characters_take_two_septets_and_are_not_split() {
        assert_eq!(seg(&"€".repeat(80)), (SmsEncoding::Gsm7, 1));
        assert_eq!(seg(&"€".repeat(81)), (SmsEncoding::Gsm7, 2));
        // 152 septets, then an escape pair that does not fit in the first
        // 153: it starts the second segment.
        let text = format!("{}{}", "a".repeat(152), "{".repeat(5));
        assert_eq!(seg(&text), (SmsEncoding::Gsm7, 2));
        let text = format!("{}{}", "a".repeat(152), "{".repeat(77));
        assert_eq!(seg(&text), (SmsEncoding::Gsm7, 3), "152 + 77×2 = 306 septets, but the first pair moves over");
    }

    #[test]
    fn ucs2_texts_take_70_then_67_code_units_per_segment() {
        assert_eq!(seg(&"ж".repeat(70)), (SmsEncoding::Ucs2, 1));
        assert_eq!(seg(&"ж".repeat(71)), (SmsEncoding::Ucs2, 2));
        assert_eq!(seg(&"ж".repeat(134)), (SmsEncoding::Ucs2, 2));
        assert_eq!(seg(&"ж".repeat(135)), (SmsEncoding::Ucs2, 3));
        // An emoji is two code units: 35 fill one segment, 36 need two.
        assert_eq!(seg(&"😀".repeat(35)), (SmsEncoding::Ucs2, 1));
        assert_eq!(seg(&"😀".repeat(36)), (SmsEncoding::Ucs2, 2));
        // One non-GSM character sends the whole text as UCS-2.
        assert_eq!(seg(&format!("{}ж", "a".repeat(69))), (SmsEncoding::Ucs2, 1));
        assert_eq!(seg(&format!("{}ж", "a".repeat(70))), (SmsEncoding::Ucs2, 2));
    }
}
