//! Voice activity: when the caller starts and stops talking.
//!
//! WebRTC's VAD (libfvad, through `webrtc-vad`) classifies each 20 ms frame
//! at 8 kHz; [`Turns`] turns those verdicts into the events the speech loop
//! acts on: speech started (barge-in) after a few voiced frames, and the
//! end of an utterance after a silence hang-over, ignoring blips shorter
//! than the minimum utterance.

use webrtc_vad::{SampleRate, Vad, VadMode};

use crate::FRAME_SAMPLES;

/// What a frame changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoiceEvent {
    /// The caller started talking (`at_ms`: where the speech began).
    Started { at_ms: u64 },
    /// An utterance ended (`from_ms`..`to_ms`: the speech, without the
    /// trailing silence).
    Ended { from_ms: u64, to_ms: u64 },
}

/// How turns are cut.
#[derive(Debug, Clone, Copy)]
pub struct TurnSettings {
    /// Voiced time before speech counts as started.
    pub start_ms: u64,
    /// Silence that ends an utterance.
    pub hangover_ms: u64,
    /// Shorter speech is dropped as noise.
    pub min_utterance_ms: u64,
}

impl Default for TurnSettings {
    fn default() -> Self {
        TurnSettings { start_ms: 60, hangover_ms: 600, min_utterance_ms: 200 }
    }
}

pub(crate) const FRAME_MS: u64 = 20;

/// The turn-taking state machine over per-frame verdicts.
#[derive(Debug)]
pub struct Turns {
    settings: TurnSettings,
    now_ms: u64,
    /// Consecutive voiced time, and where it began.
    voiced_ms: u64,
    voiced_from: u64,
    /// The utterance in progress: start, last voiced frame's end.
    speaking: Option<(u64, u64)>,
    /// The end of the last voiced frame.
    last_voiced_ms: u64,
}

impl Turns {
    pub fn new(settings: TurnSettings) -> Turns {
        Turns { settings, now_ms: 0, voiced_ms: 0, voiced_from: 0, speaking: None, last_voiced_ms: 0 }
    }

    /// Takes one 20 ms frame's verdict.
    pub fn frame(&mut self, voiced: bool) -> Option<VoiceEvent> {
        let start = self.now_ms;
        self.now_ms += FRAME_MS;
        if voiced {
            self.last_voiced_ms = self.now_ms;
            if self.voiced_ms == 0 {
                self.voiced_from = start;
            }
            self.voiced_ms += FRAME_MS;
            if let Some((_, last)) = self.speaking.as_mut() {
                *last = self.now_ms;
                return None;
            }
            if self.voiced_ms >= self.settings.start_ms {
                self.speaking = Some((self.voiced_from, self.now_ms));
                return Some(VoiceEvent::Started { at_ms: self.voiced_from });
            }
            return None;
        }
        self.voiced_ms = 0;
        let (from, last) = self.speaking?;
        if self.now_ms - last < self.settings.hangover_ms {
            return None;
        }
        self.speaking = None;
        (last - from >= self.settings.min_utterance_ms).then_some(VoiceEvent::Ended { from_ms: from, to_ms: last })
    }

    /// Ends the utterance in progress now, before its hang-over has run
    /// (the end-of-turn model is sure the caller has finished).
    pub fn end_now(&mut self) -> Option<VoiceEvent> {
        let (from, last) = self.speaking.take()?;
        self.voiced_ms = 0;
        (last - from >= self.settings.min_utterance_ms).then_some(VoiceEvent::Ended { from_ms: from, to_ms: last })
    }

    /// Where the utterance in progress began (ms), if one is.
    pub fn started_ms(&self) -> Option<u64> {
        self.speaking.map(|(from, _)| from)
    }

    /// Whether an utterance is in progress (its hang-over included).
    pub fn speaking(&self) -> bool {
        self.speaking.is_some()
    }

    /// How long the utterance in progress has been heard: from its start
    /// to its last voiced frame (0 when none is in progress).
    pub fn heard_ms(&self) -> u64 {
        self.speaking.map_or(0, |(from, _)| self.last_voiced_ms.saturating_sub(from))
    }

    /// How long the utterance in progress has been silent (its hang-over
    /// so far; 0 when none is in progress or it is voiced now).
    pub fn quiet_ms(&self) -> u64 {
        self.speaking.map_or(0, |(_, last)| self.now_ms - last)
    }
}

/// Frames quieter than this (RMS, about -40 dBFS) are not speech, whatever
/// the VAD says: WebRTC's VAD adapts to the noise floor, and a line's hiss
/// alone can pass it at the start of a call.
const MIN_SPEECH_RMS: f64 = 330.0;

pub(crate) fn loud_enough(frame: &[i16]) -> bool {
    let energy: f64 = frame.iter().map(|s| f64::from(*s).powi(2)).sum();
    (energy / frame.len().max(1) as f64).sqrt() >= MIN_SPEECH_RMS
}

/// Audio in any slicing, given back as whole 20 ms frames (the rest kept
/// for the next call).
#[derive(Debug, Default)]
pub(crate) struct Framer {
    partial: Vec<i16>,
}

impl Framer {
    /// The whole frames `pcm` completes, concatenated.
    pub(crate) fn whole(&mut self, pcm: &[i16]) -> Vec<i16> {
        self.partial.extend_from_slice(pcm);
        let whole = self.partial.len() / FRAME_SAMPLES * FRAME_SAMPLES;
        self.partial.drain(..whole).collect()
    }
}

/// WebRTC's VAD behind the energy gate: whether a 20 ms frame is speech.
pub(crate) struct FrameVad(SendVad);

/// libfvad's state is plain memory with no thread affinity: moving it
/// between threads is sound; sharing it is not (and `FrameVad` is not
/// `Sync`).
struct SendVad(Vad);
// SAFETY: see above; the pointer is owned and used by one thread at a time.
unsafe impl Send for SendVad {}

impl FrameVad {
    pub(crate) fn new() -> FrameVad {
        // Aggressive: telephone lines hiss, and a false start would stop the agent.
        FrameVad(SendVad(Vad::new_with_rate_and_mode(SampleRate::Rate8kHz, VadMode::Aggressive)))
    }

    pub(crate) fn voiced(&mut self, frame: &[i16]) -> bool {
        loud_enough(frame) && self.0.0.is_voice_segment(frame).unwrap_or(false)
    }
}

/// WebRTC's VAD and [`Turns`], over 8 kHz audio in any slicing.
pub struct SpeechDetector {
    vad: FrameVad,
    turns: Turns,
    framer: Framer,
}

impl SpeechDetector {
    pub fn new(settings: TurnSettings) -> SpeechDetector {
        SpeechDetector { vad: FrameVad::new(), turns: Turns::new(settings), framer: Framer::default() }
    }

    /// Takes audio, returning the events it caused, in order.
    pub fn push(&mut self, pcm: &[i16]) -> Vec<VoiceEvent> {
        let mut events = Vec::new();
        for frame in self.framer.whole(pcm).chunks(FRAME_SAMPLES) {
            let voiced = self.vad.voiced(frame);
            events.extend(self.turns.frame(voiced));
        }
        events
    }

    /// Where the caller's turn stands.
    pub fn turns(&self) -> &Turns {
        &self.turns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pattern: &str) -> Vec<VoiceEvent> {
        let mut t = Turns::new(TurnSettings { start_ms: 60, hangover_ms: 100, min_utterance_ms: 100 });
        pattern.chars().filter_map(|c| t.frame(c == '#')).collect()
    }

    #[test]
    fn speech_starts_after_the_start_time_and_ends_after_the_hangover() {
        // Each character is 20 ms: '#' voiced, '.' silent.
        let events = run("..########......");
        assert_eq!(events, [VoiceEvent::Started { at_ms: 40 }, VoiceEvent::Ended { from_ms: 40, to_ms: 200 }]);
    }

    #[test]
    fn a_pause_shorter_than_the_hangover_does_not_end_the_utterance() {
        let events = run("######....######......");
        assert_eq!(events, [VoiceEvent::Started { at_ms: 0 }, VoiceEvent::Ended { from_ms: 0, to_ms: 320 }]);
    }

    #[test]
    fn blips_never_start_and_short_utterances_never_end_a_turn() {
        assert_eq!(run("##..##..##......"), []);
        // Started (60 ms voiced) but only 80 ms long: no utterance.
        assert_eq!(run("####........"), [VoiceEvent::Started { at_ms: 0 }]);
    }

    #[test]
    fn silence_and_hiss_are_not_speech() {
        let mut d = SpeechDetector::new(TurnSettings::default());
        let mut seed = 7u32;
        let hiss: Vec<i16> = (0..8000 * 2)
            .map(|_| {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                ((seed >> 16) as i16 % 60) - 30
            })
            .collect();
        assert!(d.push(&vec![0; 8000]).is_empty());
        assert!(d.push(&hiss).is_empty(), "low hiss is not a caller talking");
        assert!(!d.turns().speaking());
    }
}
