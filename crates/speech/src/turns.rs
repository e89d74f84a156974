//! When the caller has finished their turn.
//!
//! Two detectors behind one type ([`TurnDetector`]):
//! - **smart** (when the server has the models): Silero VAD hears speech,
//!   and at each pause Smart Turn v3.2 judges from the sound of the last
//!   words whether the caller has finished. Sure (P ≥ threshold): the turn
//!   ends after a short silence. Not sure: the model is asked again as the
//!   silence grows, and the turn ends at a longer cap whatever it says.
//!   When the words are being transcribed, the model is asked so that its
//!   answer comes with them (by how long they took last time on the call):
//!   a pause the caller ends sooner costs no inference.
//! - **silence** (without them): WebRTC's VAD and a fixed silence
//!   ([`crate::vad::SpeechDetector`]).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError, sync_channel};

use crate::onnx::{self, ModelError};
use crate::silero::{SileroStream, SileroVad};
use crate::smart_turn::SmartTurn;
use crate::vad::{FRAME_MS, Framer, SpeechDetector, TurnSettings, Turns, VoiceEvent, loud_enough};
use crate::{FRAME_SAMPLES, SAMPLE_RATE};

/// Where the turn-detection models are (configured; never downloaded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelPaths {
    /// `libonnxruntime.so` (PyPI `onnxruntime` 1.32.0's works).
    pub onnxruntime: PathBuf,
    /// `silero_vad.onnx`.
    pub silero_vad: PathBuf,
    /// `smart-turn-v3.2-cpu.onnx`.
    pub smart_turn: PathBuf,
}

/// The loaded models, shared by every call.
pub struct TurnModels {
    pub vad: Arc<SileroVad>,
    pub turn: Arc<SmartTurn>,
}

impl std::fmt::Debug for TurnModels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TurnModels(Silero VAD, Smart Turn v3.2)")
    }
}

impl TurnModels {
    /// Loads both models (each run once, so a wrong file fails here).
    pub fn load(paths: &ModelPaths) -> Result<TurnModels, ModelError> {
        for path in [&paths.onnxruntime, &paths.silero_vad, &paths.smart_turn] {
            if !Path::new(path).is_file() {
                return Err(ModelError::Load { path: path.clone(), reason: "no such file".into() });
            }
        }
        let runtime = onnx::runtime(&paths.onnxruntime)?;
        Ok(TurnModels {
            vad: Arc::new(SileroVad::load(runtime, &paths.silero_vad)?),
            turn: Arc::new(SmartTurn::load(runtime, &paths.smart_turn)?),
        })
    }
}

/// How the smart detector cuts turns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SmartSettings {
    /// Voiced time before speech counts as started.
    pub start_ms: u64,
    /// Shorter speech is dropped as noise.
    pub min_utterance_ms: u64,
    /// The pause after which the model is first asked; a sure answer ends
    /// the turn here.
    pub min_silence_ms: u64,
    /// While unsure, the model is asked again every this much more silence.
    pub recheck_ms: u64,
    /// The silence that ends the turn whatever the model says.
    pub max_silence_ms: u64,
    /// P(complete) at which the model is sure.
    pub threshold: f32,
}

impl Default for SmartSettings {
    fn default() -> Self {
        SmartSettings {
            start_ms: 60,
            min_utterance_ms: 200,
            min_silence_ms: 200,
            recheck_ms: 400,
            max_silence_ms: 2000,
            threshold: 0.5,
        }
    }
}

/// Silero's speech probability that starts speech, and (lower) that keeps it.
const SPEECH_ON: f32 = 0.5;
const SPEECH_ON_HOLD: f32 = 0.35;
/// Frames under the energy gate after which Silero rests (200 ms).
const REST_AFTER_QUIET_FRAMES: u32 = 10;
/// Audio before the start of speech given to Smart Turn (as pipecat does).
const PRE_SPEECH_MS: u64 = 500;

/// Where Smart Turn runs: on the blocking pool (a live call: the loop
/// does not wait ~50 ms; the answer is read on a later frame), or inline
/// with its answer held back for as many frames as it took (offline
/// measurement: the same timing, deterministic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inference {
    Background,
    Simulated,
}

/// What the caller's words so far say about their pause (from early
/// transcription; see [`SmartDetector::words_coming`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Words {
    /// No transcript is coming (no transcriber): the sound decides.
    Unknown,
    /// Being transcribed: a sure model waits for it.
    Coming,
    /// They end as a sentence can.
    Finished,
    /// They end mid-phrase ("…tell me about the", "…number is"), or on a
    /// number (read in groups): only the cap ends the turn.
    Unfinished,
}

/// Words a sentence does not end on: articles, prepositions, conjunctions,
/// auxiliaries, subject pronouns and possessives, fillers.
const DANGLING: &[&str] = &[
    "a", "an", "the", "to", "of", "in", "on", "at", "for", "with", "about", "from", "by", "into", "and", "or", "but",
    "so", "because", "if", "that", "than", "when", "while", "which", "where", "is", "are", "was", "were", "be", "am",
    "will", "would", "could", "should", "can", "do", "does", "did", "have", "has", "had", "my", "your", "our", "their",
    "his", "her", "i", "we", "they", "he", "she", "um", "uh", "er", "like", "just", "also", "then", "it's", "i'm",
    "i'd", "we're", "there's", "what's", "not",
];

const NUMBER_WORDS: &[&str] = &[
    "zero", "oh", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "hundred", "thousand",
];

impl Words {
    /// Judges a transcript's end: a sentence ends on its last word with
    /// terminal punctuation (whisper writes it for a finished sentence, and
    /// "…" or nothing when the voice trails off); a dangling word or a
    /// number (read in groups) means more is coming.
    pub fn of(text: &str) -> Words {
        let text = text.trim();
        let last = text
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'').to_lowercase())
            .rfind(|w| !w.is_empty());
        let Some(last) = last else { return Words::Unknown };
        let trailing_off = text.ends_with("...") || text.ends_with('…') || text.ends_with(',');
        let ended = text.ends_with(['.', '?', '!']) && !trailing_off;
        let number = last.chars().any(|c| c.is_ascii_digit()) || NUMBER_WORDS.contains(&last.as_str());
        if !ended || number || DANGLING.contains(&last.as_str()) { Words::Unfinished } else { Words::Finished }
    }
}

/// The silence after which the call loop transcribes the utterance so far
/// (early transcription): the words then reach the detector that long into
/// a pause plus the transcriber's time.
pub const EARLY_WORDS_AFTER_MS: u64 = 120;

/// A Smart Turn answer being computed.
struct Pending {
    answer: Receiver<f32>,
    /// Not read before this frame (simulated inference time).
    not_before: u64,
}

/// Silero VAD + Smart Turn (+ the words, when transcribed early) over
/// 8 kHz audio in any slicing.
pub struct SmartDetector {
    settings: SmartSettings,
    turn_model: Arc<SmartTurn>,
    vad: SileroStream,
    turns: Turns,
    inference: Inference,
    framer: Framer,
    frames: u64,
    speech_probability: f32,
    /// Frames in a row under the energy gate.
    quiet_frames: u32,
    /// Recent audio (enough for the model), and the index of its first sample.
    history: VecDeque<i16>,
    history_start: u64,
    /// The model's answer being computed, how many times it was asked in
    /// this pause (and at what silence, ms, last), and whether it was sure.
    pending: Option<Pending>,
    asked: u64,
    asked_at: u64,
    sure: bool,
    words: Words,
    /// The silence (ms) at which this pause's words were asked for.
    words_asked_at: Option<u64>,
    /// How long words and the model's answers take on this call (ms of
    /// audio, smoothed): when to ask the model so its answer is ready as
    /// the words come.
    words_take_ms: Option<u64>,
    model_takes_ms: Option<u64>,
    /// Every answer the model gave (P, silence when asked), and how many
    /// times it was asked (an answer to a pause the caller ended is
    /// dropped), for measurement.
    pub answers: Vec<(f32, u64)>,
    pub asks: u64,
}

impl SmartDetector {
    pub fn new(models: &TurnModels, settings: SmartSettings, inference: Inference) -> SmartDetector {
        let turn_settings = TurnSettings {
            start_ms: settings.start_ms,
            hangover_ms: settings.max_silence_ms,
            min_utterance_ms: settings.min_utterance_ms,
        };
        SmartDetector {
            settings,
            turn_model: models.turn.clone(),
            vad: SileroStream::new(models.vad.clone()),
            turns: Turns::new(turn_settings),
            inference,
            framer: Framer::default(),
            frames: 0,
            speech_probability: 0.0,
            quiet_frames: 0,
            history: VecDeque::new(),
            history_start: 0,
            pending: None,
            asked: 0,
            asked_at: 0,
            sure: false,
            words: Words::Unknown,
            words_asked_at: None,
            words_take_ms: None,
            model_takes_ms: None,
            answers: Vec::new(),
            asks: 0,
        }
    }

    /// Takes audio, returning the events it caused, in order.
    pub fn push(&mut self, pcm: &[i16]) -> Vec<VoiceEvent> {
        let mut events = Vec::new();
        for frame in self.framer.whole(pcm).chunks(FRAME_SAMPLES) {
            self.frame(frame, &mut events);
        }
        events
    }

    /// The utterance so far is being transcribed (in this pause).
    pub fn words_coming(&mut self) {
        if self.turns.speaking() {
            self.words = Words::Coming;
            self.words_asked_at = Some(self.turns.quiet_ms());
        }
    }

    /// The utterance so far, transcribed.
    pub fn words(&mut self, text: &str) {
        let quiet = self.turns.quiet_ms();
        if self.turns.speaking() && quiet > 0 {
            if let Some(at) = self.words_asked_at.take() {
                self.words_take_ms = Some(smooth(self.words_take_ms, quiet.saturating_sub(at)));
            }
            self.words = match Words::of(text) {
                Words::Unknown => Words::Finished,
                judged => judged,
            };
        }
    }

    fn frame(&mut self, frame: &[i16], events: &mut Vec<VoiceEvent>) {
        self.frames += 1;
        let in_speech = self.turns.speaking() && self.turns.quiet_ms() == 0;
        let loud = loud_enough(frame);
        self.quiet_frames = if loud { 0 } else { self.quiet_frames.saturating_add(1) };
        // Under the energy gate nothing is speech: after a while Silero
        // rests (and starts afresh with the next sound), so a call's
        // silences, and the agent's turns, cost nothing.
        if self.quiet_frames < REST_AFTER_QUIET_FRAMES {
            if let Some(p) = self.vad.push(frame, !self.turns.speaking()).last() {
                self.speech_probability = *p;
            }
        } else if self.quiet_frames == REST_AFTER_QUIET_FRAMES {
            self.vad.reset();
            self.speech_probability = 0.0;
        }
        let needed = if in_speech { SPEECH_ON_HOLD } else { SPEECH_ON };
        let voiced = loud && self.speech_probability >= needed;
        self.remember(frame);
        events.extend(self.turns.frame(voiced));
        let quiet = self.turns.quiet_ms();
        if !self.turns.speaking() || quiet == 0 {
            // Speech again (or no utterance): what was judged of the pause is stale.
            self.pending = None;
            self.asked = 0;
            self.sure = false;
            self.words = Words::Unknown;
            self.words_asked_at = None;
            return;
        }
        // Words that say more is coming leave only the cap: no need to ask.
        let due = if self.asked == 0 { self.first_ask_due() } else { self.asked_at + self.settings.recheck_ms };
        if self.pending.is_none() && !self.sure && quiet >= due && self.words != Words::Unfinished {
            self.asked += 1;
            self.asked_at = quiet;
            self.ask();
        }
        let ready = self.pending.as_ref().filter(|p| p.not_before <= self.frames);
        let answer = match ready.map(|p| p.answer.try_recv()) {
            Some(Ok(p)) => Some(p),
            Some(Err(TryRecvError::Disconnected)) => Some(0.0),
            Some(Err(TryRecvError::Empty)) | None => None,
        };
        if let Some(p) = answer {
            self.pending = None;
            self.model_takes_ms = Some(smooth(self.model_takes_ms, quiet.saturating_sub(self.asked_at)));
            self.answers.push((p, quiet));
            self.sure = p >= self.settings.threshold;
        }
        // Sure, and the words (if any are coming) agree: the turn is over.
        if self.sure && matches!(self.words, Words::Unknown | Words::Finished) {
            events.extend(self.turns.end_now());
        }
    }

    /// The silence at which to ask the model first in this pause: with
    /// words coming, and known from earlier pauses how long they take, so
    /// that its answer is ready as they come (a sure answer waits for them
    /// anyway); else at the shortest pause.
    fn first_ask_due(&self) -> u64 {
        let shortest = self.settings.min_silence_ms;
        match (self.words, self.words_asked_at, self.words_take_ms) {
            (Words::Coming, Some(asked), Some(take)) => {
                (asked + take).saturating_sub(self.model_takes_ms.unwrap_or(0) + FRAME_MS).max(shortest)
            }
            _ => shortest,
        }
    }

    fn remember(&mut self, frame: &[i16]) {
        self.history.extend(frame);
        // What the model may hear of the utterance in progress: its last
        // 8 s (64,000 samples at 8 kHz) and the pre-speech before them.
        let keep = (crate::smart_turn::MAX_SAMPLES as u64 / 2 + PRE_SPEECH_MS * 8) as usize;
        while self.history.len() > keep {
            self.history.pop_front();
            self.history_start += 1;
        }
    }

    /// Asks the model about the utterance so far.
    fn ask(&mut self) {
        self.asks += 1;
        let Some(started) = self.turns.started_ms() else { return };
        let from = started.saturating_sub(PRE_SPEECH_MS) * (SAMPLE_RATE as u64 / 1000);
        let skip = from.saturating_sub(self.history_start) as usize;
        let segment: Vec<i16> = self.history.iter().skip(skip).copied().collect();
        let (tx, rx) = sync_channel(1);
        let model = self.turn_model.clone();
        let judge = move || {
            let wide = crate::resample::resample(&segment, SAMPLE_RATE, crate::smart_turn::RATE as u32);
            let audio: Vec<f32> = wide.iter().map(|s| f32::from(*s) / 32768.0).collect();
            let p = model.probability(&audio).unwrap_or_else(|e| {
                tracing::error!(error = %e, "Smart Turn failed; the turn ends on the silence cap");
                0.0
            });
            let _ = tx.send(p);
        };
        let not_before = match self.inference {
            Inference::Background => {
                tokio::task::spawn_blocking(judge);
                0
            }
            Inference::Simulated => {
                let started = std::time::Instant::now();
                judge();
                self.frames + (started.elapsed().as_millis() as u64).div_ceil(20)
            }
        };
        self.pending = Some(Pending { answer: rx, not_before });
    }

    /// Where the caller's turn stands.
    pub fn turns(&self) -> &Turns {
        &self.turns
    }
}

/// A running estimate: three parts the old, one the new.
fn smooth(old: Option<u64>, new: u64) -> u64 {
    old.map_or(new, |old| (3 * old + new) / 4)
}

/// The call's turn detector: smart when the server has the models and the
/// agent has not asked for the silence rule.
pub enum TurnDetector {
    Silence(SpeechDetector),
    Smart(Box<SmartDetector>),
}

impl TurnDetector {
    pub fn silence(settings: TurnSettings) -> TurnDetector {
        TurnDetector::Silence(SpeechDetector::new(settings))
    }

    /// The smart rule, its model answers read on later frames.
    pub fn smart(models: &TurnModels, settings: SmartSettings) -> TurnDetector {
        TurnDetector::Smart(Box::new(SmartDetector::new(models, settings, Inference::Background)))
    }

    pub fn push(&mut self, pcm: &[i16]) -> Vec<VoiceEvent> {
        match self {
            TurnDetector::Silence(d) => d.push(pcm),
            TurnDetector::Smart(d) => d.push(pcm),
        }
    }

    fn turns(&self) -> &Turns {
        match self {
            TurnDetector::Silence(d) => d.turns(),
            TurnDetector::Smart(d) => d.turns(),
        }
    }

    /// Whether an utterance is in progress (its silence so far included).
    pub fn speaking(&self) -> bool {
        self.turns().speaking()
    }

    /// See [`Turns::heard_ms`].
    pub fn heard_ms(&self) -> u64 {
        self.turns().heard_ms()
    }

    /// See [`Turns::quiet_ms`].
    pub fn quiet_ms(&self) -> u64 {
        self.turns().quiet_ms()
    }

    /// See [`SmartDetector::words_coming`] (the silence rule ignores words).
    pub fn words_coming(&mut self) {
        if let TurnDetector::Smart(d) = self {
            d.words_coming();
        }
    }

    /// See [`SmartDetector::words`].
    pub fn words(&mut self, text: &str) {
        if let TurnDetector::Smart(d) = self {
            d.words(text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Words;

    #[test]
    fn words_that_end_mid_phrase_or_on_a_number_are_unfinished() {
        for text in [
            "Can you tell me about the",
            "I think that.",
            "My number is",
            "four one five,",
            "It's 415.",
            "The problem is that might...",
            "Let me think about which plan is",
        ] {
            assert_eq!(Words::of(text), Words::Unfinished, "{text}");
        }
        for text in ["Please turn off the lights.", "What time is it?", "That works for me!"] {
            assert_eq!(Words::of(text), Words::Finished, "{text}");
        }
        assert_eq!(Words::of(" "), Words::Unknown);
    }
}
