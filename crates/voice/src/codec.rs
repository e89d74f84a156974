//! G.711 (ITU-T G.711): μ-law (PCMU, North America and Japan) and A-law
//! (PCMA, elsewhere), the codecs every SIP trunk and Twilio's media streams
//! carry. Each 16-bit sample becomes one byte: 8 kHz audio is 64 kbit/s.
//!
//! Written here rather than taken from a crate: it is the standard's
//! segment arithmetic, a few lines each way, checked below against the
//! standard's reference points.

const BIAS: i32 = 0x84;
const CLIP: i32 = 32635;

/// Encodes one sample as μ-law.
pub fn ulaw_encode(sample: i16) -> u8 {
    let mut s = i32::from(sample);
    let sign = if s < 0 {
        s = -s;
        0x80
    } else {
        0
    };
    s = s.min(CLIP) + BIAS;
    let exponent = (7 - (s.leading_zeros() as i32 - 17)).clamp(0, 7);
    let mantissa = (s >> (exponent + 3)) & 0x0F;
    !(sign | (exponent << 4) | mantissa) as u8
}

/// Decodes one μ-law byte.
pub fn ulaw_decode(byte: u8) -> i16 {
    let b = !byte;
    let sign = b & 0x80;
    let exponent = i32::from((b >> 4) & 0x07);
    let mantissa = i32::from(b & 0x0F);
    let magnitude = (((mantissa << 3) + BIAS) << exponent) - BIAS;
    (if sign != 0 { -magnitude } else { magnitude }) as i16
}

/// Encodes one sample as A-law.
pub fn alaw_encode(sample: i16) -> u8 {
    let s = i32::from(sample);
    let (sign, magnitude) = if s >= 0 { (0x80, s) } else { (0x00, -s - 1) };
    let magnitude = magnitude.min(0x7FFF) >> 3; // 13-bit magnitude
    let byte = if magnitude < 32 {
        (magnitude >> 1) as u8
    } else {
        let exponent = (31 - (magnitude as u32).leading_zeros() as i32 - 4).clamp(1, 7);
        let mantissa = (magnitude >> exponent) & 0x0F;
        ((exponent << 4) | mantissa) as u8
    };
    (byte | sign) ^ 0x55
}

/// Decodes one A-law byte.
pub fn alaw_decode(byte: u8) -> i16 {
    let b = byte ^ 0x55;
    let exponent = i32::from((b >> 4) & 0x07);
    let mantissa = i32::from(b & 0x0F);
    let magnitude = if exponent == 0 { (mantissa << 4) + 8 } else { ((mantissa << 4) + 0x108) << (exponent - 1) };
    (if b & 0x80 != 0 { magnitude } else { -magnitude }) as i16
}

/// A G.711 variant, by its RTP name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum G711 {
    /// μ-law, static RTP payload type 0.
    Pcmu,
    /// A-law, static RTP payload type 8.
    Pcma,
}

impl G711 {
    pub fn payload_type(self) -> u8 {
        match self {
            G711::Pcmu => 0,
            G711::Pcma => 8,
        }
    }

    pub fn encode(self, pcm: &[i16]) -> Vec<u8> {
        match self {
            G711::Pcmu => pcm.iter().map(|s| ulaw_encode(*s)).collect(),
            G711::Pcma => pcm.iter().map(|s| alaw_encode(*s)).collect(),
        }
    }

    pub fn decode(self, bytes: &[u8]) -> Vec<i16> {
        match self {
            G711::Pcmu => bytes.iter().map(|b| ulaw_decode(*b)).collect(),
            G711::Pcma => bytes.iter().map(|b| alaw_decode(*b)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_points_of_the_standard() {
        // Silence: μ-law 0xFF, A-law 0xD5 (the "idle" bytes on a line).
        assert_eq!(ulaw_encode(0), 0xFF);
        assert_eq!(alaw_encode(0), 0xD5);
        assert_eq!(ulaw_decode(0xFF), 0);
        assert_eq!(ulaw_decode(0x7F), 0);
        // Full scale.
        assert_eq!(ulaw_encode(i16::MAX), 0x80);
        assert_eq!(ulaw_encode(i16::MIN), 0x00);
        assert_eq!(ulaw_decode(0x80), 32124);
        assert_eq!(ulaw_decode(0x00), -32124);
        assert_eq!(alaw_encode(i16::MAX), 0xAA);
        assert_eq!(alaw_encode(i16::MIN), 0x2A);
        assert_eq!(alaw_decode(0xAA), 32256);
        assert_eq!(alaw_decode(0x2A), -32256);
        assert_eq!(alaw_decode(0xD5), 8);
    }

    #[test]
    fn every_byte_survives_a_round_trip() {
        for b in 0..=255u8 {
            assert_eq!(ulaw_encode(ulaw_decode(b)), if b == 0x7F { 0xFF } else { b }, "μ-law {b:#04x}");
            assert_eq!(alaw_encode(alaw_decode(b)), b, "A-law {b:#04x}");
        }
    }

    #[test]
    fn the_quantisation_error_stays_within_the_segment_step() {
        for s in (i16::MIN..=i16::MAX).step_by(7) {
            for (name, back) in [("μ-law", ulaw_decode(ulaw_encode(s))), ("A-law", alaw_decode(alaw_encode(s)))] {
                let err = (i32::from(back) - i32::from(s)).abs();
                // Half a step of the sample's segment (steps double per segment, the top one is 1024).
                let allowed = (i32::from(s).abs() / 16).max(16) + 8;
                assert!(err <= allowed.min(1100), "{name}: {s} came back as {back}");
            }
        }
    }
}
