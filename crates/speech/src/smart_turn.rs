//! Smart Turn v3.2 (pipecat-ai, ONNX, BSD-2): the probability that the
//! caller has finished their turn, judged from the sound of their last
//! words (up to 8 s at 16 kHz).
//!
//! Its input is Whisper's log-mel spectrogram exactly as `transformers`'
//! `WhisperFeatureExtractor(chunk_length=8)` computes it (pipecat vendors
//! the same code): the model quantises its input in steps of ~0.01, so the
//! recipe is followed to the letter, in f64 where pipecat uses f64. See
//! docs/research/turn-detection.md.

use std::path::Path;
use std::sync::Arc;

use ort::value::Tensor;
use realfft::{RealFftPlanner, RealToComplex};

use crate::onnx::{ModelError, Sessions};

/// The model's sample rate.
pub const RATE: usize = 16_000;
/// The model hears at most the last 8 s.
pub const MAX_SAMPLES: usize = 8 * RATE;
const N_FFT: usize = 400;
const HOP: usize = 160;
const MELS: usize = 80;
const FRAMES: usize = MAX_SAMPLES / HOP; // 800 (the STFT's 801st is dropped)
const BINS: usize = N_FFT / 2 + 1;

/// The model, shared by every call.
pub struct SmartTurn {
    sessions: Sessions,
    features: Features,
}

impl SmartTurn {
    pub fn load(environment: &ort::environment::Environment, model: &Path) -> Result<SmartTurn, ModelError> {
        let turn = SmartTurn {
            sessions: Sessions::load(environment, model, crate::onnx::cores())?,
            features: Features::new(),
        };
        turn.probability(&[0.0; RATE])?;
        Ok(turn)
    }

    /// P(the turn is complete) for `audio` (16 kHz, -1..1; the last 8 s
    /// count). Blocking: ~50 ms of one core.
    pub fn probability(&self, audio: &[f32]) -> Result<f32, ModelError> {
        let features = self.features.compute(audio);
        let mut session = self.sessions.get();
        let outputs =
            session.run(ort::inputs!["input_features" => Tensor::from_array(([1usize, MELS, FRAMES], features))?])?;
        // Named "logits", but the graph ends in a sigmoid: a probability.
        let (_, probability) = outputs["logits"].try_extract_tensor::<f32>()?;
        probability.first().copied().ok_or_else(|| ModelError::Run("Smart Turn gave no probability".into()))
    }
}

/// Whisper's log-mel features for 8 s.
pub struct Features {
    fft: Arc<dyn RealToComplex<f64>>,
    window: Vec<f64>,
    /// Each mel band's filter: its first FFT bin and weights.
    filters: Vec<(usize, Vec<f64>)>,
}

impl Default for Features {
    fn default() -> Self {
        Features::new()
    }
}

impl Features {
    pub fn new() -> Features {
        let fft = RealFftPlanner::<f64>::new().plan_fft_forward(N_FFT);
        // Periodic Hann (numpy's `hanning(401)[:-1]`).
        let window =
            (0..N_FFT).map(|n| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * n as f64 / N_FFT as f64).cos()).collect();
        Features { fft, window, filters: mel_filters() }
    }

    /// `[80 × 800]` features, mel-major, for `audio`'s last 8 s (zeros in
    /// front of shorter audio).
    pub fn compute(&self, audio: &[f32]) -> Vec<f32> {
        let tail = &audio[audio.len().saturating_sub(MAX_SAMPLES)..];
        let mut x = vec![0f32; MAX_SAMPLES - tail.len()];
        x.extend_from_slice(tail);
        // Zero mean, unit variance over the whole (padded) buffer.
        let mean = x.iter().map(|v| f64::from(*v)).sum::<f64>() / MAX_SAMPLES as f64;
        let var = x.iter().map(|v| (f64::from(*v) - mean).powi(2)).sum::<f64>() / MAX_SAMPLES as f64;
        let scale = (var + 1e-7).sqrt();
        let x: Vec<f64> = x.iter().map(|v| f64::from(((f64::from(*v) - mean) / scale) as f32)).collect();
        // Centred frames: reflect-pad half a window each side.
        let pad = N_FFT / 2;
        let n = x.len();
        let padded: Vec<f64> = (0..n + 2 * pad)
            .map(|i| {
                let j = i as isize - pad as isize;
                let j = if j < 0 {
                    -j
                } else if j as usize >= n {
                    2 * (n as isize - 1) - j
                } else {
                    j
                };
                x[j as usize]
            })
            .collect();
        let mut frame = self.fft.make_input_vec();
        let mut spectrum = self.fft.make_output_vec();
        let mut power = vec![0f64; BINS];
        let mut log = vec![0f64; MELS * FRAMES];
        for t in 0..FRAMES {
            let start = t * HOP;
            for (k, slot) in frame.iter_mut().enumerate() {
                *slot = padded[start + k] * self.window[k];
            }
            self.fft.process(&mut frame, &mut spectrum).expect("buffers sized by the plan");
            for (p, c) in power.iter_mut().zip(&spectrum) {
                *p = c.norm_sqr();
            }
            for (m, (first, weights)) in self.filters.iter().enumerate() {
                let energy: f64 = weights.iter().zip(&power[*first..]).map(|(w, p)| w * p).sum();
                log[m * FRAMES + t] = energy.max(1e-10).log10();
            }
        }
        let top = log.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        log.iter().map(|v| ((v.max(top - 8.0) + 4.0) / 4.0) as f32).collect()
    }
}

fn hz_to_mel(hz: f64) -> f64 {
    // Slaney: linear below 1 kHz, logarithmic above.
    let (f_sp, min_log_hz, min_log_mel, logstep) = (200.0 / 3.0, 1000.0, 15.0, 6.4f64.ln() / 27.0);
    if hz >= min_log_hz { min_log_mel + (hz / min_log_hz).ln() / logstep } else { hz / f_sp }
}

fn mel_to_hz(mel: f64) -> f64 {
    let (f_sp, min_log_hz, min_log_mel, logstep) = (200.0 / 3.0, 1000.0, 15.0, 6.4f64.ln() / 27.0);
    if mel >= min_log_mel { min_log_hz * (logstep * (mel - min_log_mel)).exp() } else { f_sp * mel }
}

/// 80 triangular Slaney-normalised filters over 0–8 kHz, each kept as its
/// non-zero run of FFT bins.
fn mel_filters() -> Vec<(usize, Vec<f64>)> {
    let nyquist = RATE as f64 / 2.0;
    let (low, high) = (hz_to_mel(0.0), hz_to_mel(nyquist));
    let edges: Vec<f64> = (0..MELS + 2).map(|i| mel_to_hz(low + (high - low) * i as f64 / (MELS + 1) as f64)).collect();
    let bins: Vec<f64> = (0..BINS).map(|k| nyquist * k as f64 / (BINS - 1) as f64).collect();
    (0..MELS)
        .map(|m| {
            let (left, centre, right) = (edges[m], edges[m + 1], edges[m + 2]);
            let norm = 2.0 / (right - left);
            let weights: Vec<(usize, f64)> = bins
                .iter()
                .enumerate()
                .map(|(k, f)| {
                    let rising = (f - left) / (centre - left);
                    let falling = (right - f) / (right - centre);
                    (k, rising.min(falling).max(0.0) * norm)
                })
                .filter(|(_, w)| *w > 0.0)
                .collect();
            let first = weights.first().map_or(0, |(k, _)| *k);
            (first, weights.into_iter().map(|(_, w)| w).collect())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mel_filters_are_slaney_triangles_that_cover_the_band() {
        let filters = mel_filters();
        assert_eq!(filters.len(), MELS);
        // Every band has bins, and bands move up in frequency.
        assert!(filters.iter().all(|(_, w)| !w.is_empty()));
        assert!(filters.windows(2).all(|p| p[0].0 <= p[1].0));
        // Slaney normalisation: each triangle's area (in Hz) is ~1.
        let hz_per_bin = 8000.0 / 200.0;
        for (m, (_, w)) in filters.iter().enumerate().skip(10) {
            let area: f64 = w.iter().sum::<f64>() * hz_per_bin;
            assert!((area - 1.0).abs() < 0.1, "band {m}: area {area}");
        }
        assert!((mel_to_hz(hz_to_mel(3210.0)) - 3210.0).abs() < 1e-9);
    }

    #[test]
    fn features_are_shaped_and_scaled_like_whispers() {
        let features = Features::new();
        // One second of a 440 Hz tone.
        let tone: Vec<f32> =
            (0..RATE).map(|i| (i as f32 * 440.0 * std::f32::consts::TAU / RATE as f32).sin() * 0.3).collect();
        let out = features.compute(&tone);
        assert_eq!(out.len(), MELS * FRAMES);
        let top = out.iter().copied().fold(f32::MIN, f32::max);
        let bottom = out.iter().copied().fold(f32::MAX, f32::min);
        // (log10 + 4) / 4 with the floor 8 decades under the top.
        assert!((top - bottom - 2.0).abs() < 1e-4, "range {bottom}..{top}");
        // The tone sits in the last second: its band is loud there, and the
        // zero padding in front is at the floor.
        let band = (0..MELS).max_by(|a, b| out[a * FRAMES + 790].total_cmp(&out[b * FRAMES + 790])).unwrap();
        let centre_hz = mel_to_hz(hz_to_mel(0.0) + (hz_to_mel(8000.0) - hz_to_mel(0.0)) * (band + 1) as f64 / 81.0);
        assert!((centre_hz - 440.0).abs() < 60.0, "loudest band centred at {centre_hz} Hz");
        assert!(out[band * FRAMES + 100] < out[band * FRAMES + 790]);
    }
}
