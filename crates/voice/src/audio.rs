//! Speech as audio, and the stereo recording of a call.
//!
//! The tone voice stands in for text-to-speech until a speech engine is
//! configured: every word is a short tone (a different pitch per side), so
//! recordings have real, audible structure and their length follows the
//! words spoken.

use std::io::Cursor;

use crate::provider::{Pcm, SAMPLE_RATE};

/// Which voice speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Voice {
    Agent,
    Caller,
}

const WORD_MS: usize = 150;
const GAP_MS: usize = 60;
/// Longest utterance the tone voice produces.
const MAX_MS: usize = 2500;

fn samples(ms: usize) -> usize {
    ms * SAMPLE_RATE as usize / 1000
}

/// Milliseconds of `n` samples.
pub fn duration_ms(n: usize) -> i64 {
    (n as i64 * 1000) / i64::from(SAMPLE_RATE)
}

/// `text` in the tone voice: one tone per word, with gaps.
pub fn speak(text: &str, voice: Voice) -> Pcm {
    let base = match voice {
        Voice::Agent => 660.0,
        Voice::Caller => 440.0,
    };
    let mut out = Vec::new();
    for (i, word) in text.split_whitespace().enumerate() {
        if out.len() >= samples(MAX_MS) {
            break;
        }
        // Longer words ring a little longer and higher, so words differ.
        let ms = WORD_MS + 10 * word.chars().count().min(8);
        let freq = base * (1.0 + 0.05 * (i % 4) as f64);
        for n in 0..samples(ms) {
            let t = n as f64 / f64::from(SAMPLE_RATE);
            // A short fade in and out avoids clicks.
            let envelope = (n.min(samples(ms) - n) as f64 / samples(10) as f64).min(1.0);
            out.push((envelope * 8000.0 * (2.0 * std::f64::consts::PI * freq * t).sin()) as i16);
        }
        out.extend(std::iter::repeat_n(0, samples(GAP_MS)));
    }
    out
}

/// A call's recording: caller on the left channel, agent on the right,
/// both on one timeline from the moment the call was answered.
#[derive(Debug, Default)]
pub struct Recorder {
    left: Vec<i16>,
    right: Vec<i16>,
}

/// A finished recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recording {
    /// A stereo 16-bit PCM WAV file.
    pub wav: Vec<u8>,
    pub duration_ms: i64,
}

impl Recorder {
    /// Adds `pcm` from `voice` starting `at_ms` after the answer.
    pub fn put(&mut self, voice: Voice, at_ms: i64, pcm: &[i16]) {
        let track = match voice {
            Voice::Caller => &mut self.left,
            Voice::Agent => &mut self.right,
        };
        let start = (at_ms.max(0) as usize) * SAMPLE_RATE as usize / 1000;
        if track.len() < start + pcm.len() {
            track.resize(start + pcm.len(), 0);
        }
        for (slot, s) in track[start..].iter_mut().zip(pcm) {
            *slot = slot.saturating_add(*s);
        }
    }

    /// The WAV file, `total_ms` long (the call's duration; longer if speech ran over).
    pub fn finish(mut self, total_ms: i64) -> Recording {
        let frames =
            (total_ms.max(0) as usize * SAMPLE_RATE as usize / 1000).max(self.left.len()).max(self.right.len());
        self.left.resize(frames, 0);
        self.right.resize(frames, 0);
        let spec = hound::WavSpec {
            channels: 2,
            sample_rate: SAMPLE_RATE,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut cursor = Cursor::new(Vec::with_capacity(frames * 4 + 44));
        {
            let mut writer = hound::WavWriter::new(&mut cursor, spec).expect("writing to memory cannot fail");
            for (l, r) in self.left.iter().zip(&self.right) {
                writer.write_sample(*l).expect("writing to memory cannot fail");
                writer.write_sample(*r).expect("writing to memory cannot fail");
            }
            writer.finalize().expect("writing to memory cannot fail");
        }
        Recording { wav: cursor.into_inner(), duration_ms: duration_ms(frames) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speech_takes_time_per_word_and_voices_differ() {
        let agent = speak("hello there", Voice::Agent);
        assert_eq!(duration_ms(agent.len()), 2 * (WORD_MS as i64 + 50 + GAP_MS as i64));
        assert_ne!(agent, speak("hello there", Voice::Caller));
        assert!(speak("", Voice::Agent).is_empty());
        assert!(duration_ms(speak(&"word ".repeat(500), Voice::Agent).len()) <= MAX_MS as i64 + 300);
    }

    #[test]
    fn recordings_are_stereo_wav_with_each_side_on_its_channel() {
        let mut r = Recorder::default();
        r.put(Voice::Caller, 0, &[1000; 800]);
        r.put(Voice::Agent, 500, &[-2000; 800]);
        let rec = r.finish(2000);
        assert_eq!(rec.duration_ms, 2000);
        let mut reader = hound::WavReader::new(Cursor::new(rec.wav)).unwrap();
        let spec = reader.spec();
        assert_eq!((spec.channels, spec.sample_rate, spec.bits_per_sample), (2, 8000, 16));
        let samples: Vec<i16> = reader.samples::<i16>().map(Result::unwrap).collect();
        assert_eq!(samples.len(), 2 * 16000);
        // Frame 10: caller speaking (left), agent silent (right).
        assert_eq!((samples[20], samples[21]), (1000, 0));
        // 0.55 s in: the agent (right) only.
        assert_eq!((samples[2 * 4400], samples[2 * 4400 + 1]), (0, -2000));
    }
}
