//! RTP for calls (RFC 3550): packets, RFC 4733 telephone events (DTMF),
//! and a jitter buffer that hands frames out in order.
//!
//! Only what a G.711 voice call needs: the fixed header (CSRCs, header
//! extensions and padding are skipped when present), one SSRC per
//! direction. Written here because the `rtp` crate brings webrtc-util's
//! network stack for a 12-byte header.

use std::collections::BTreeMap;

/// The RTP clock of G.711 and telephone events: 8 kHz.
pub const CLOCK_RATE: u32 = 8000;
/// The payload type Parley offers for RFC 4733 events.
pub const TELEPHONE_EVENT_PT: u8 = 101;

/// One RTP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    pub payload_type: u8,
    pub marker: bool,
    pub sequence: u16,
    pub timestamp: u32,
    pub ssrc: u32,
    pub payload: Vec<u8>,
}

impl Packet {
    /// Parses a datagram; `None` if it is not RTP version 2 or is cut short.
    pub fn parse(data: &[u8]) -> Option<Packet> {
        if data.len() < 12 || data[0] >> 6 != 2 {
            return None;
        }
        let padding = data[0] & 0x20 != 0;
        let extension = data[0] & 0x10 != 0;
        let csrcs = usize::from(data[0] & 0x0F);
        let mut offset = 12 + 4 * csrcs;
        if extension {
            let words = u16::from_be_bytes([*data.get(offset + 2)?, *data.get(offset + 3)?]);
            offset += 4 + 4 * usize::from(words);
        }
        let mut end = data.len();
        if padding {
            let pad = usize::from(*data.last()?);
            end = end.checked_sub(pad)?;
        }
        if offset > end {
            return None;
        }
        Some(Packet {
            payload_type: data[1] & 0x7F,
            marker: data[1] & 0x80 != 0,
            sequence: u16::from_be_bytes([data[2], data[3]]),
            timestamp: u32::from_be_bytes([data[4], data[5], data[6], data[7]]),
            ssrc: u32::from_be_bytes([data[8], data[9], data[10], data[11]]),
            payload: data[offset..end].to_vec(),
        })
    }

    /// The datagram.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(12 + self.payload.len());
        out.push(0x80);
        out.push((u8::from(self.marker) << 7) | (self.payload_type & 0x7F));
        out.extend_from_slice(&self.sequence.to_be_bytes());
        out.extend_from_slice(&self.timestamp.to_be_bytes());
        out.extend_from_slice(&self.ssrc.to_be_bytes());
        out.extend_from_slice(&self.payload);
        out
    }
}

/// An RFC 4733 telephone event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TelephoneEvent {
    /// 0–9, `*`, `#`, `A`–`D`.
    pub digit: char,
    pub end: bool,
    pub volume: u8,
    /// In RTP clock units (1/8 ms).
    pub duration: u16,
}

const DIGITS: &[u8; 16] = b"0123456789*#ABCD";

impl TelephoneEvent {
    pub fn parse(payload: &[u8]) -> Option<TelephoneEvent> {
        if payload.len() < 4 {
            return None;
        }
        let digit = *DIGITS.get(usize::from(payload[0]))? as char;
        Some(TelephoneEvent {
            digit,
            end: payload[1] & 0x80 != 0,
            volume: payload[1] & 0x3F,
            duration: u16::from_be_bytes([payload[2], payload[3]]),
        })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let code = DIGITS.iter().position(|d| *d as char == self.digit.to_ascii_uppercase()).unwrap_or(0) as u8;
        let mut out = vec![code, (u8::from(self.end) << 7) | (self.volume & 0x3F)];
        out.extend_from_slice(&self.duration.to_be_bytes());
        out
    }
}

/// The payloads that send `digit` (RFC 4733 §2.5): the event's packets
/// every 20 ms for `ms`, all with the timestamp of its start (the first
/// with the marker bit), then the end packet three times. Returns
/// (marker, payload) pairs, in order.
pub fn dtmf_payloads(digit: char, ms: u16) -> Vec<(bool, Vec<u8>)> {
    let step = (CLOCK_RATE / 50) as u16; // 20 ms
    let total = ms.saturating_mul((CLOCK_RATE / 1000) as u16).max(step);
    let mut out = Vec::new();
    let mut duration = step;
    while duration < total {
        let event = TelephoneEvent { digit, end: false, volume: 10, duration };
        out.push((out.is_empty(), event.to_bytes()));
        duration += step;
    }
    let end = TelephoneEvent { digit, end: true, volume: 10, duration: total };
    for _ in 0..3 {
        out.push((out.is_empty(), end.to_bytes()));
    }
    out
}

/// Recognises each DTMF digit once, whatever the number of packets and
/// retransmitted end packets that carry it.
#[derive(Debug, Default)]
pub struct DtmfReceiver {
    /// The timestamp of the last event reported.
    last: Option<u32>,
}

impl DtmfReceiver {
    /// Takes a telephone-event packet; returns its digit the first time
    /// an event (identified by its timestamp) is seen.
    pub fn packet(&mut self, packet: &Packet) -> Option<char> {
        let event = TelephoneEvent::parse(&packet.payload)?;
        if self.last == Some(packet.timestamp) {
            return None;
        }
        self.last = Some(packet.timestamp);
        Some(event.digit)
    }
}

/// A gap in sequence numbers larger than this (1 s of 20 ms frames) is
/// skipped rather than played as lost packets.
const MAX_GAP: u64 = 50;

/// Orders incoming audio packets and absorbs network jitter: packets are
/// held until `depth` later ones have arrived (or `pop_due` forces them
/// out), duplicates and packets older than what was already played are
/// dropped, and a missing packet is played as a gap (`None`).
#[derive(Debug)]
pub struct JitterBuffer {
    depth: usize,
    /// Extended (wrap-free) sequence number → payload.
    held: BTreeMap<u64, Vec<u8>>,
    /// The next extended sequence number to play.
    next: Option<u64>,
    /// The highest extended sequence seen, for unwrapping.
    highest: Option<u64>,
    pub lost: u64,
    pub late: u64,
}

impl JitterBuffer {
    /// A buffer holding `depth` packets (3 = 60 ms of 20 ms frames).
    pub fn new(depth: usize) -> JitterBuffer {
        JitterBuffer { depth: depth.max(1), held: BTreeMap::new(), next: None, highest: None, lost: 0, late: 0 }
    }

    /// The sequence number extended past 16-bit wrap-arounds.
    fn extend(&mut self, sequence: u16) -> u64 {
        let Some(highest) = self.highest else {
            let first = u64::from(sequence) + (1 << 16);
            self.highest = Some(first);
            return first;
        };
        let base = highest & !0xFFFF;
        let candidates = [base.wrapping_sub(1 << 16), base, base + (1 << 16)];
        let ext = candidates
            .into_iter()
            .map(|b| b + u64::from(sequence))
            .min_by_key(|c| c.abs_diff(highest))
            .expect("three candidates");
        self.highest = Some(highest.max(ext));
        ext
    }

    /// Takes a packet's payload.
    pub fn push(&mut self, sequence: u16, payload: Vec<u8>) {
        let ext = self.extend(sequence);
        if self.next.is_some_and(|n| ext < n) || self.held.contains_key(&ext) {
            self.late += 1;
            return;
        }
        self.next.get_or_insert(ext);
        self.held.insert(ext, payload);
    }

    /// The next frames to play, in order, once the buffer is deep enough:
    /// `Some(payload)`, or `None` for a packet that never came.
    pub fn pop(&mut self) -> Vec<Option<Vec<u8>>> {
        let mut out = Vec::new();
        while self.held.len() > self.depth {
            out.push(self.take_next());
        }
        out
    }

    /// One frame now, whatever the depth (the playout clock ticked);
    /// `None` when nothing is held (an underrun: the far end is silent).
    pub fn pop_due(&mut self) -> Option<Option<Vec<u8>>> {
        let first = *self.held.keys().next()?;
        // A new talk spurt far ahead of where playout was (the sender
        // skipped numbers, or restarted): play on from it.
        if self.next.is_some_and(|n| first > n + MAX_GAP) {
            self.next = Some(first);
        }
        Some(self.take_next())
    }

    /// Packets held, not yet played.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    fn take_next(&mut self) -> Option<Vec<u8>> {
        let next = self.next?;
        self.next = Some(next + 1);
        match self.held.remove(&next) {
            Some(payload) => Some(payload),
            None => {
                self.lost += 1;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_round_trip_and_extensions_and_padding_are_skipped() {
        let p = Packet {
            payload_type: 0,
            marker: true,
            sequence: 65_535,
            timestamp: 160,
            ssrc: 0xDEADBEEF,
            payload: vec![0xFF; 160],
        };
        assert_eq!(Packet::parse(&p.to_bytes()), Some(p.clone()));
        // One CSRC, a one-word extension, and 4 bytes of padding.
        let mut raw = vec![0x80 | 0x20 | 0x10 | 0x01, 0x08, 0, 1, 0, 0, 0, 160, 0, 0, 0, 7];
        raw.extend_from_slice(&[0, 0, 0, 9]); // CSRC
        raw.extend_from_slice(&[0xBE, 0xDE, 0, 1, 1, 2, 3, 4]); // extension
        raw.extend_from_slice(&[0xD5; 3]); // payload
        raw.extend_from_slice(&[0, 0, 0, 4]); // padding
        let parsed = Packet::parse(&raw).unwrap();
        assert_eq!((parsed.payload_type, parsed.payload.as_slice()), (8, &[0xD5u8; 3][..]));
        assert_eq!(Packet::parse(&[0x40; 20]), None, "version 1");
        assert_eq!(Packet::parse(&[0x80; 8]), None, "too short");
    }

    #[test]
    fn dtmf_is_sent_as_rfc_4733_says_and_each_digit_is_heard_once() {
        let payloads = dtmf_payloads('5', 100);
        assert!(payloads[0].0 && payloads.iter().skip(1).all(|(m, _)| !m), "marker on the first packet only");
        let events: Vec<TelephoneEvent> = payloads.iter().map(|(_, p)| TelephoneEvent::parse(p).unwrap()).collect();
        assert!(events.iter().all(|e| e.digit == '5'));
        assert_eq!(events.iter().filter(|e| e.end).count(), 3, "the end packet three times");
        assert_eq!(events.last().unwrap().duration, 800, "100 ms at 8 kHz");
        let mut receiver = DtmfReceiver::default();
        let mut heard = Vec::new();
        for (ts, digit) in [(1000u32, '1'), (2000, '#')] {
            for (marker, payload) in dtmf_payloads(digit, 60) {
                let p =
                    Packet { payload_type: TELEPHONE_EVENT_PT, marker, sequence: 0, timestamp: ts, ssrc: 1, payload };
                heard.extend(receiver.packet(&p));
            }
        }
        assert_eq!(heard, ['1', '#']);
    }

    #[test]
    fn the_jitter_buffer_reorders_drops_late_and_duplicate_packets_and_marks_losses() {
        let mut jb = JitterBuffer::new(2);
        for seq in [10u16, 12, 11, 11, 14, 15, 16] {
            jb.push(seq, vec![seq as u8]);
        }
        let played: Vec<Option<u8>> = jb.pop().into_iter().map(|f| f.map(|p| p[0])).collect();
        assert_eq!(played, [Some(10), Some(11), Some(12), None, Some(14)]);
        assert_eq!((jb.lost, jb.late), (1, 1));
        jb.push(12, vec![12]); // already played
        assert_eq!(jb.late, 2);
        let rest: Vec<Option<u8>> = std::iter::from_fn(|| jb.pop_due()).map(|f| f.map(|p| p[0])).collect();
        assert_eq!(rest, [Some(15), Some(16)]);
    }

    #[test]
    fn a_far_jump_in_sequence_numbers_resyncs_instead_of_playing_a_long_loss() {
        let mut jb = JitterBuffer::new(1);
        jb.push(100, vec![1]);
        assert_eq!(jb.pop_due(), Some(Some(vec![1])));
        jb.push(5000, vec![2]);
        assert_eq!(jb.pop_due(), Some(Some(vec![2])));
        assert_eq!(jb.lost, 0);
        assert_eq!(jb.pop_due(), None, "nothing held: an underrun");
    }

    #[test]
    fn sequence_numbers_wrap_around() {
        let mut jb = JitterBuffer::new(1);
        for seq in [65_534u16, 65_535, 0, 1] {
            jb.push(seq, vec![seq as u8]);
        }
        let played: Vec<Option<u8>> = std::iter::from_fn(|| jb.pop_due()).map(|f| f.map(|p| p[0])).collect();
        assert_eq!(played, [Some(254), Some(255), Some(0), Some(1)]);
        assert_eq!(jb.lost, 0);
    }
}
