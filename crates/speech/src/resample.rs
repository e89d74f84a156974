//! Sample-rate conversion between the speech engines' rates (Piper 22.05
//! kHz, espeak-ng 22.05 kHz, Whisper 16 kHz) and the telephone's 8 kHz,
//! with rubato's FFT resampler (band-limited: no aliasing into the
//! telephone band).

use rubato::{FftFixedIn, Resampler as _};

/// A streaming mono resampler: push any number of samples, get what is
/// ready; `finish` flushes the rest. The filter's delay is removed, so the
/// output lines up with the input.
pub struct Resampler {
    inner: Option<FftFixedIn<f32>>,
    from: usize,
    to: usize,
    chunk: usize,
    pending: Vec<f32>,
    /// Output samples still to drop (the filter's delay).
    skip: usize,
    consumed: usize,
    produced: usize,
}

impl Resampler {
    /// A resampler from `from` Hz to `to` Hz (equal rates copy through).
    pub fn new(from: u32, to: u32) -> Resampler {
        let (from, to) = (from as usize, to as usize);
        // 20 ms of input per FFT chunk.
        let chunk = (from / 50).max(1);
        let inner = (from != to).then(|| FftFixedIn::new(from, to, chunk, 1, 1).expect("positive sample rates"));
        let skip = inner.as_ref().map_or(0, |r| r.output_delay());
        Resampler { inner, from, to, chunk, pending: Vec::new(), skip, consumed: 0, produced: 0 }
    }

    /// Converts `input`, returning the samples now ready.
    pub fn push(&mut self, input: &[i16]) -> Vec<i16> {
        let Some(inner) = self.inner.as_mut() else { return input.to_vec() };
        self.consumed += input.len();
        self.pending.extend(input.iter().map(|s| f32::from(*s) / 32768.0));
        let mut out = Vec::new();
        while self.pending.len() >= self.chunk {
            let chunk: Vec<f32> = self.pending.drain(..self.chunk).collect();
            if let Ok(frames) = inner.process(&[chunk], None) {
                Self::emit(&mut self.skip, &mut self.produced, &frames[0], &mut out);
            }
        }
        out
    }

    /// Flushes what is buffered: the output then has the length the input
    /// implies at the new rate.
    pub fn finish(mut self) -> Vec<i16> {
        let Some(mut inner) = self.inner.take() else { return Vec::new() };
        let expected = (self.consumed as u64 * self.to as u64).div_ceil(self.from as u64) as usize;
        let mut out = Vec::new();
        let first = std::mem::take(&mut self.pending);
        let mut input = Some(first);
        while self.produced < expected {
            let result = match input.take() {
                Some(rest) if !rest.is_empty() => inner.process_partial(Some(&[rest]), None),
                _ => inner.process_partial(None::<&[Vec<f32>]>, None),
            };
            match result {
                Ok(frames) if !frames[0].is_empty() => {
                    Self::emit(&mut self.skip, &mut self.produced, &frames[0], &mut out)
                }
                _ => break,
            }
        }
        out.truncate(out.len() - (self.produced.saturating_sub(expected)).min(out.len()));
        out
    }

    fn emit(skip: &mut usize, produced: &mut usize, frames: &[f32], out: &mut Vec<i16>) {
        let dropped = (*skip).min(frames.len());
        *skip -= dropped;
        for s in &frames[dropped..] {
            out.push((s * 32768.0).round().clamp(-32768.0, 32767.0) as i16);
        }
        *produced += frames.len() - dropped;
    }
}

/// Converts a whole buffer.
pub fn resample(input: &[i16], from: u32, to: u32) -> Vec<i16> {
    let mut r = Resampler::new(from, to);
    let mut out = r.push(input);
    out.extend(r.finish());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sine(freq: f32, rate: u32, seconds: f32) -> Vec<i16> {
        let n = (rate as f32 * seconds) as usize;
        (0..n).map(|i| ((i as f32 * freq * std::f32::consts::TAU / rate as f32).sin() * 12000.0) as i16).collect()
    }

    fn crossings(x: &[i16]) -> usize {
        x.windows(2).filter(|w| (w[0] < 0) != (w[1] < 0)).count()
    }

    #[test]
    fn a_tone_keeps_its_pitch_and_duration() {
        let tone = sine(440.0, 22_050, 1.0);
        let out = resample(&tone, 22_050, 8_000);
        assert_eq!(out.len(), 8_000);
        // 440 Hz: 880 zero crossings a second, at either rate.
        let (a, b) = (crossings(&tone), crossings(&out));
        assert!(a.abs_diff(b) <= 4, "{a} vs {b}");
        let peak = out[1000..7000].iter().map(|s| s.unsigned_abs()).max().unwrap();
        assert!((11_000..=13_000).contains(&peak), "amplitude kept: {peak}");
    }

    #[test]
    fn what_the_telephone_cannot_carry_is_filtered_not_folded() {
        // 6 kHz at 22.05 kHz is above 8 kHz's Nyquist (4 kHz): it must
        // vanish, not come back as a 2 kHz alias.
        let out = resample(&sine(6_000.0, 22_050, 0.5), 22_050, 8_000);
        let peak = out[500..3500].iter().map(|s| s.unsigned_abs()).max().unwrap();
        assert!(peak < 600, "aliased energy left: {peak}");
    }

    #[test]
    fn streaming_in_odd_pieces_equals_one_pass() {
        let tone = sine(300.0, 8_000, 0.7);
        let whole = resample(&tone, 8_000, 16_000);
        let mut r = Resampler::new(8_000, 16_000);
        let mut pieces = Vec::new();
        for part in tone.chunks(37) {
            pieces.extend(r.push(part));
        }
        pieces.extend(r.finish());
        assert_eq!(pieces, whole);
        assert_eq!(whole.len(), 11_200);
    }
}
