//! Silero VAD (ONNX, MIT): the probability that a 32 ms window is speech.
//! Run at the telephone rate, 8 kHz (the model's own 8 kHz branch): each
//! window is 256 samples with the previous 32 as context, and the model's
//! recurrent state is carried from one window to the next, as pipecat and
//! Silero's own reference code do.

use std::path::Path;
use std::sync::Arc;

use ort::value::Tensor;

use crate::onnx::{ModelError, Sessions};

/// Samples per window at 8 kHz (32 ms).
pub const WINDOW: usize = 256;
const CONTEXT: usize = 32;
const STATE: usize = 2 * 128;
const RATE: i64 = 8000;

/// After this much audio, a quiet stream's state is reset (the recurrent
/// state drifts over long silences; pipecat does the same).
const RESET_AFTER_WINDOWS: u32 = 63; // ~2 s
const RESET_QUIET_WINDOWS: usize = 5;
const RESET_QUIET_PROBABILITY: f32 = 0.1;

/// The model, shared by every call.
pub struct SileroVad {
    sessions: Sessions,
}

impl SileroVad {
    pub fn load(environment: &ort::environment::Environment, model: &Path) -> Result<SileroVad, ModelError> {
        let vad = SileroVad { sessions: Sessions::load(environment, model, crate::onnx::cores())? };
        // A window of silence proves the model is Silero's (its inputs and outputs).
        vad.window(&[0.0; CONTEXT + WINDOW], &mut [0.0; STATE])?;
        Ok(vad)
    }

    /// Scores one window (with its context first), updating `state`.
    fn window(&self, input: &[f32], state: &mut [f32]) -> Result<f32, ModelError> {
        let mut session = self.sessions.get();
        let outputs = session.run(ort::inputs![
            "input" => Tensor::from_array(([1usize, input.len()], input.to_vec()))?,
            "state" => Tensor::from_array(([2usize, 1, 128], state.to_vec()))?,
            "sr" => Tensor::from_array((Vec::<usize>::new(), vec![RATE]))?,
        ])?;
        let (_, probability) = outputs["output"].try_extract_tensor::<f32>()?;
        let (_, next) = outputs["stateN"].try_extract_tensor::<f32>()?;
        state.copy_from_slice(next);
        probability.first().copied().ok_or_else(|| ModelError::Run("Silero gave no probability".into()))
    }
}

/// One call's stream through the model: 8 kHz audio in any slicing, a
/// probability per window out.
pub struct SileroStream {
    model: Arc<SileroVad>,
    state: Vec<f32>,
    /// The window being scored, after the previous window's last samples.
    input: Vec<f32>,
    since_reset: u32,
    recent: Vec<f32>,
    failed: bool,
}

impl SileroStream {
    pub fn new(model: Arc<SileroVad>) -> SileroStream {
        let mut input = Vec::with_capacity(CONTEXT + WINDOW);
        input.resize(CONTEXT, 0.0);
        SileroStream { model, state: vec![0.0; STATE], input, since_reset: 0, recent: Vec::new(), failed: false }
    }

    /// Takes audio; returns the probability of each window it completed.
    /// `quiet`: whether the caller is silent now (a reset may happen).
    pub fn push(&mut self, pcm: &[i16], quiet: bool) -> Vec<f32> {
        let mut scores = Vec::new();
        for &sample in pcm {
            self.input.push(f32::from(sample) / 32768.0);
            if self.input.len() < CONTEXT + WINDOW {
                continue;
            }
            let probability = match self.model.window(&self.input, &mut self.state) {
                Ok(p) => p,
                Err(e) => {
                    // A model that fails once fails always: say so once, hear silence.
                    if !self.failed {
                        tracing::error!(error = %e, "Silero VAD failed; the call hears no speech");
                        self.failed = true;
                    }
                    0.0
                }
            };
            scores.push(probability);
            self.input.drain(..WINDOW);
            self.after(probability, quiet);
        }
        scores
    }

    /// Starts afresh (state and context zero), as after a long silence.
    pub fn reset(&mut self) {
        self.state.fill(0.0);
        self.input.truncate(0);
        self.input.resize(CONTEXT, 0.0);
        self.since_reset = 0;
        self.recent.clear();
    }

    fn after(&mut self, probability: f32, quiet: bool) {
        self.since_reset += 1;
        self.recent.push(probability);
        if self.recent.len() > RESET_QUIET_WINDOWS {
            self.recent.remove(0);
        }
        let all_quiet =
            self.recent.len() == RESET_QUIET_WINDOWS && self.recent.iter().all(|p| *p < RESET_QUIET_PROBABILITY);
        if quiet && all_quiet && self.since_reset >= RESET_AFTER_WINDOWS {
            self.reset();
        }
    }
}
