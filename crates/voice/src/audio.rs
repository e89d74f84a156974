//! Speech as audio, and the stereo recording of a call.
//!
//! The tone voice stands in for text-to-speech when no engine can speak
//! (espeak-ng missing) and is the simulated caller's voice when its lines
//! arrive as text: every word is a short tone (a different pitch per
//! side), so recordings have audible structure and their length follows
//! the words spoken.

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
/// both on one timeline from the moment the call was answered, written to
/// a WAV file as the call runs.
///
/// Audio arrives out of order (the agent's speech is queued ahead of time;
/// the caller's arrives when an utterance ends), so the last few seconds
/// stay in memory and [`Recorder::flush_before`] writes what is older to
/// the file: memory stays bounded however long the call lasts.
pub struct Recorder {
    writer: hound::WavWriter<std::io::BufWriter<std::fs::File>>,
    path: std::path::PathBuf,
    /// Frames already written.
    flushed: usize,
    /// Frames from `flushed` on, per side, not yet written.
    left: Vec<i16>,
    right: Vec<i16>,
    /// Samples that arrived for time already written (dropped).
    late: usize,
}

/// How long the recording in a WAV file is, by its header: for a file a
/// stopped process left, what it had written when it last flushed.
pub fn recorded_ms(path: &std::path::Path) -> std::io::Result<i64> {
    let reader = hound::WavReader::open(path).map_err(std::io::Error::other)?;
    Ok(duration_ms(reader.duration() as usize))
}

/// A finished recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recording {
    /// A stereo 16-bit PCM WAV file.
    pub path: std::path::PathBuf,
    pub duration_ms: i64,
}

impl Recorder {
    /// Starts a recording in a new file at `path` (readable by its owner only).
    pub fn create(path: &std::path::Path) -> std::io::Result<Self> {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(path)?;
        let spec = hound::WavSpec {
            channels: 2,
            sample_rate: SAMPLE_RATE,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let writer = hound::WavWriter::new(std::io::BufWriter::new(file), spec).map_err(std::io::Error::other)?;
        Ok(Self { writer, path: path.to_owned(), flushed: 0, left: Vec::new(), right: Vec::new(), late: 0 })
    }

    /// Adds `pcm` from `voice` starting `at_ms` after the answer. Samples
    /// for time already written are dropped (and counted).
    pub fn put(&mut self, voice: Voice, at_ms: i64, pcm: &[i16]) {
        let start = (at_ms.max(0) as usize) * SAMPLE_RATE as usize / 1000;
        let skip = self.flushed.saturating_sub(start).min(pcm.len());
        self.late += skip;
        if skip == pcm.len() {
            return;
        }
        let (start, pcm) = (start + skip - self.flushed, &pcm[skip..]);
        let track = match voice {
            Voice::Caller => &mut self.left,
            Voice::Agent => &mut self.right,
        };
        if track.len() < start + pcm.len() {
            track.resize(start + pcm.len(), 0);
        }
        for (slot, s) in track[start..].iter_mut().zip(pcm) {
            *slot = slot.saturating_add(*s);
        }
    }

    /// Removes `voice`'s audio from `ms` on (speech queued, then cut off by
    /// a barge-in). What is already written stays.
    pub fn cut(&mut self, voice: Voice, ms: i64) {
        let from = ((ms.max(0) as usize) * SAMPLE_RATE as usize / 1000).saturating_sub(self.flushed);
        let track = match voice {
            Voice::Caller => &mut self.left,
            Voice::Agent => &mut self.right,
        };
        if from < track.len() {
            for s in &mut track[from..] {
                *s = 0;
            }
        }
    }

    /// Writes everything before `ms` (after the answer) to the file, and
    /// brings its header up to date: if the process dies, the file is a
    /// whole recording up to here.
    pub fn flush_before(&mut self, ms: i64) -> std::io::Result<()> {
        let before = self.flushed;
        self.write_until((ms.max(0) as usize) * SAMPLE_RATE as usize / 1000)?;
        if self.flushed > before {
            self.writer.flush().map_err(std::io::Error::other)?;
        }
        Ok(())
    }

    /// Writes the frames before frame `until`.
    fn write_until(&mut self, until: usize) -> std::io::Result<()> {
        let n = until.saturating_sub(self.flushed);
        if n == 0 {
            return Ok(());
        }
        self.left.resize(self.left.len().max(n), 0);
        self.right.resize(self.right.len().max(n), 0);
        for (l, r) in self.left.drain(..n).zip(self.right.drain(..n)) {
            self.writer.write_sample(l).map_err(std::io::Error::other)?;
            self.writer.write_sample(r).map_err(std::io::Error::other)?;
        }
        self.flushed += n;
        Ok(())
    }

    /// Frames held in memory, not yet written.
    pub fn pending_frames(&self) -> usize {
        self.left.len().max(self.right.len())
    }

    /// Closes the file, `total_ms` long (the call's duration; longer if
    /// speech ran over), with its header complete and its data on disk.
    pub fn finish(mut self, total_ms: i64) -> std::io::Result<Recording> {
        let end = (self.flushed + self.pending_frames()).max(total_ms.max(0) as usize * SAMPLE_RATE as usize / 1000);
        self.write_until(end)?;
        if self.late > 0 {
            tracing::warn!(samples = self.late, "audio arrived for time already recorded and was left out");
        }
        let frames = self.flushed;
        self.writer.finalize().map_err(std::io::Error::other)?;
        std::fs::File::open(&self.path)?.sync_all()?;
        Ok(Recording { path: self.path, duration_ms: duration_ms(frames) })
    }
}

/// Where a 16-bit PCM WAV keeps its samples, read from its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WavLayout {
    pub channels: u16,
    pub sample_rate: u32,
    /// The byte offset of the first sample.
    pub data_start: u64,
    pub frames: u64,
}

impl WavLayout {
    /// The layout of the WAV whose first bytes are `head` (the header
    /// must be in them); `None` unless it is 16-bit PCM, mono or stereo.
    pub fn read(head: &[u8]) -> Option<WavLayout> {
        let mut cursor = std::io::Cursor::new(head);
        let reader = hound::WavReader::new(&mut cursor).ok()?;
        let spec = reader.spec();
        let ok = spec.sample_format == hound::SampleFormat::Int && spec.bits_per_sample == 16;
        if !ok || !(1..=2).contains(&spec.channels) {
            return None;
        }
        let frames = u64::from(reader.duration());
        drop(reader);
        Some(WavLayout {
            channels: spec.channels,
            sample_rate: spec.sample_rate,
            data_start: cursor.position(),
            frames,
        })
    }

    /// Bytes per frame (one sample of each channel).
    pub fn frame_bytes(&self) -> u64 {
        2 * u64::from(self.channels)
    }
}

/// A recording's waveform for drawing: the loudest sample of each of
/// `columns` equal slices of the call, per side, in thousandths of full
/// scale. Fed the samples in order, a chunk at a time, so a call of any
/// length is read in bounded memory.
#[derive(Debug)]
pub struct Peaks {
    layout: WavLayout,
    seen: u64,
    /// Left channel (the caller).
    pub caller: Vec<u16>,
    /// Right channel (the agent); the left again for a mono file.
    pub agent: Vec<u16>,
}

impl Peaks {
    pub fn new(layout: WavLayout, columns: usize) -> Peaks {
        Peaks { layout, seen: 0, caller: vec![0; columns], agent: vec![0; columns] }
    }

    /// The next samples: whole frames (a partial one at the end is ignored).
    pub fn feed(&mut self, bytes: &[u8]) {
        let columns = self.caller.len() as u64;
        let frames = self.layout.frames.max(1);
        let per_frame = self.layout.frame_bytes() as usize;
        for frame in bytes.chunks_exact(per_frame) {
            if self.seen >= self.layout.frames {
                return;
            }
            let col = (self.seen * columns / frames) as usize;
            let left = i16::from_le_bytes([frame[0], frame[1]]).unsigned_abs();
            let right = if per_frame == 4 { i16::from_le_bytes([frame[2], frame[3]]).unsigned_abs() } else { left };
            // Thousandths of full scale (32768), rounded up so a sound is never drawn as silence.
            let scale = |v: u16| ((u32::from(v) * 1000).div_ceil(32768)) as u16;
            self.caller[col] = self.caller[col].max(scale(left));
            self.agent[col] = self.agent[col].max(scale(right));
            self.seen += 1;
        }
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

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("parley-voice-{}", ulid::Ulid::new()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn recordings_are_stereo_wav_with_each_side_on_its_channel() {
        let mut r = Recorder::create(&scratch("a.wav")).unwrap();
        r.put(Voice::Caller, 0, &[1000; 800]);
        r.put(Voice::Agent, 500, &[-2000; 800]);
        let rec = r.finish(2000).unwrap();
        assert_eq!(rec.duration_ms, 2000);
        let mut reader = hound::WavReader::open(&rec.path).unwrap();
        let spec = reader.spec();
        assert_eq!((spec.channels, spec.sample_rate, spec.bits_per_sample), (2, 8000, 16));
        let samples: Vec<i16> = reader.samples::<i16>().map(Result::unwrap).collect();
        assert_eq!(samples.len(), 2 * 16000);
        // Frame 10: caller speaking (left), agent silent (right).
        assert_eq!((samples[20], samples[21]), (1000, 0));
        // 0.55 s in: the agent (right) only.
        assert_eq!((samples[2 * 4400], samples[2 * 4400 + 1]), (0, -2000));
    }

    #[test]
    fn a_long_call_is_written_as_it_runs_and_memory_stays_bounded() {
        let path = scratch("long.wav");
        let mut r = Recorder::create(&path).unwrap();
        // Ten minutes: a second of caller speech, then of agent speech, in turn,
        // flushed 5 s behind "now" as the engine does.
        let mut most = 0;
        for second in 0..600_i64 {
            let voice = if second % 2 == 0 { Voice::Caller } else { Voice::Agent };
            r.put(voice, second * 1000, &[(second % 100) as i16 + 1; SAMPLE_RATE as usize]);
            r.flush_before((second - 5) * 1000).unwrap();
            most = most.max(r.pending_frames());
        }
        assert!(most <= 7 * SAMPLE_RATE as usize, "held {most} frames in memory");
        // Already on disk before the end: 594 s of stereo 16-bit audio, less
        // what the file writer buffers (8 KiB).
        let written = std::fs::metadata(&path).unwrap().len();
        assert!(written >= 594 * 8000 * 4 - 8192, "only {written} bytes on disk mid-call");
        // Audio for time already written is left out, not misplaced.
        r.put(Voice::Caller, 0, &[9999; 80]);
        let rec = r.finish(600_000).unwrap();
        assert_eq!(rec.duration_ms, 600_000);
        let mut reader = hound::WavReader::open(&rec.path).unwrap();
        assert_eq!(reader.duration(), 600 * 8000);
        let samples: Vec<i16> = reader.samples::<i16>().map(Result::unwrap).collect();
        // 0.5 s: caller (left) second 0; 1.5 s: agent (right) second 1.
        assert_eq!((samples[2 * 4000], samples[2 * 4000 + 1]), (1, 0));
        assert_eq!((samples[2 * 12000], samples[2 * 12000 + 1]), (0, 2));
        assert_eq!(samples[2 * 599 * 8000 + 1], 100);
    }

    #[test]
    fn the_waveform_is_read_in_chunks_with_each_side_on_its_own() {
        let mut r = Recorder::create(&scratch("w.wav")).unwrap();
        // 4 s: the caller loud in the first second, the agent half as loud in the third.
        r.put(Voice::Caller, 0, &[-32768; 8000]);
        r.put(Voice::Agent, 2000, &[16384; 8000]);
        let rec = r.finish(4000).unwrap();
        let bytes = std::fs::read(&rec.path).unwrap();
        let layout = WavLayout::read(&bytes[..64]).unwrap();
        assert_eq!((layout.channels, layout.sample_rate, layout.data_start, layout.frames), (2, 8000, 44, 32000));
        let mut peaks = Peaks::new(layout, 4);
        // Chunks of a size that is no multiple of anything in particular but whole frames.
        for chunk in bytes[44..].chunks(4 * 999) {
            peaks.feed(chunk);
        }
        assert_eq!(peaks.caller, vec![1000, 0, 0, 0]);
        assert_eq!(peaks.agent, vec![0, 0, 500, 0]);
        // Not a 16-bit PCM WAV: no layout.
        assert_eq!(WavLayout::read(b"RIFF\0\0\0\0WAVEjunk"), None);
        assert_eq!(WavLayout::read(b"%PDF-1.4"), None);
    }
}
