//! The end-of-turn labelled set and its scoring (like LiveKit's eot-bench):
//! telephone-quality clips of a caller speaking, each with where their
//! speech truly ends, run through a turn detector frame by frame.
//!
//! - **complete**: one sentence, then silence;
//! - **paused**: a sentence with a pause of 300–900 ms in the middle (cut
//!   into the sentence said whole, so the voice goes on as a person's
//!   does when they hesitate);
//! - **numbers**: a phone number read slowly, in groups.
//!
//! A detector that ends the turn before the true end is a **false
//! cut-off**; otherwise its **delay** is how long after the true end it
//! ended the turn (the model's and whisper's time included, as on a call).
//! Behind the `local-servers` feature: tests and benchmarks only.

use std::collections::HashMap;

use crate::turns::{EARLY_WORDS_AFTER_MS, Inference, SmartDetector, SmartSettings, TurnModels};
use crate::vad::{SpeechDetector, TurnSettings, VoiceEvent};
use crate::wyoming::WyomingTranscriber;
use crate::{FRAME_SAMPLES, Synthesiser, synthesise};

const LEAD_MS: usize = 400;
const TRAIL_MS: usize = 3000;
const PER_MS: usize = 8;

/// What a clip holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Complete,
    Paused,
    Numbers,
}

/// One caller turn, at 8 kHz as the line delivers it.
#[derive(Debug, Clone)]
pub struct Clip {
    pub name: String,
    pub kind: Kind,
    pub voice: &'static str,
    pub audio: Vec<i16>,
    /// Where the caller's speech truly ends (ms from the clip's start).
    pub speech_end_ms: u64,
}

const COMPLETE: &[&str] = &[
    "Please turn off the lights.",
    "Thank you very much.",
    "What time is it?",
    "I'd like to cancel my appointment.",
    "That works for me.",
    "Can you send me the invoice?",
    "My name is John Smith.",
    "I need to change my delivery address.",
    "That's all for today.",
    "How much does the premium plan cost?",
    "I was charged twice this month.",
    "Could you call me back tomorrow morning?",
];

/// Sentences and where the caller pauses in them.
const PAUSED: &[(&str, &str)] = &[
    ("I would like to book", "a table for two tonight."),
    ("Can you tell me about the", "opening hours on Sunday?"),
    ("I think that", "my order never arrived."),
    ("The problem is that", "my card was declined."),
    ("I'm calling because", "my internet is down again."),
    ("Could you", "check my balance please?"),
    ("I wanted to ask if", "you deliver on weekends."),
    ("My email address is", "john at example dot com."),
    ("We need someone to", "fix the heating in the office."),
    ("Is it possible to", "move the meeting to Friday?"),
    ("I bought a jacket and", "it was the wrong size."),
    ("Let me think about", "which plan is better for us."),
];

/// Numbers read in groups, paused between them.
const NUMBERS: &[&[&str]] = &[
    &["My number is", "four one five,", "five five five,", "zero one nine two."],
    &["It's", "seven eight,", "three three,", "one two."],
    &["The code is", "nine,", "four,", "six,", "one."],
];

/// The pauses the paused sentences cycle through.
const PAUSES_MS: [usize; 4] = [300, 500, 700, 900];
/// Between groups of a number read slowly.
const NUMBER_PAUSES_MS: [usize; 3] = [400, 600, 800];

/// Makes the set with each voice, passing every clip through `line`
/// (G.711 coding: the caller's tests give it).
pub async fn labelled_set(voices: &[(&'static str, &dyn Synthesiser)], line: &dyn Fn(&[i16]) -> Vec<i16>) -> Vec<Clip> {
    let mut clips = Vec::new();
    for &(voice, synth) in voices {
        for text in COMPLETE {
            clips.push(clip(voice, synth, Kind::Complete, &[*text], &[], line).await);
        }
        for (i, (first, second)) in PAUSED.iter().enumerate() {
            let pause = PAUSES_MS[i % PAUSES_MS.len()];
            clips.push(clip(voice, synth, Kind::Paused, &[*first, *second], &[pause], line).await);
        }
        for (i, groups) in NUMBERS.iter().enumerate() {
            let pauses = vec![NUMBER_PAUSES_MS[i % NUMBER_PAUSES_MS.len()]; groups.len() - 1];
            clips.push(clip(voice, synth, Kind::Numbers, groups, &pauses, line).await);
        }
    }
    clips
}

/// The parts said as one sentence (so each pause keeps the voice's
/// mid-sentence intonation, as a person hesitating does), with silence
/// inserted after each part but the last. Where a part ends in the whole
/// is found by saying its prefix alone (the engines keep their timing in
/// context) and moving to the quietest point nearby.
async fn clip(
    voice: &'static str,
    synth: &dyn Synthesiser,
    kind: Kind,
    parts: &[&str],
    pauses: &[usize],
    line: &dyn Fn(&[i16]) -> Vec<i16>,
) -> Clip {
    let whole = trim(&synthesise(synth, &parts.join(" ")).await).to_vec();
    let mut cuts = Vec::new();
    for n in 1..parts.len() {
        let prefix = trim(&synthesise(synth, &parts[..n].join(" ")).await).len();
        cuts.push(quietest_near(&whole, prefix));
    }
    let mut audio = vec![0i16; LEAD_MS * PER_MS];
    let mut from = 0;
    for (cut, pause_ms) in cuts.iter().zip(pauses) {
        audio.extend_from_slice(&whole[from..*cut]);
        audio.extend(std::iter::repeat_n(0, pause_ms * PER_MS));
        from = *cut;
    }
    audio.extend_from_slice(&whole[from..]);
    let speech_end_ms = (audio.len() / PER_MS) as u64;
    audio.extend(std::iter::repeat_n(0, TRAIL_MS * PER_MS));
    let mut name = String::new();
    for (i, part) in parts.iter().enumerate() {
        name.push_str(part);
        if let Some(p) = pauses.get(i) {
            name.push_str(&format!(" [{p} ms] "));
        }
    }
    Clip { name, kind, voice, audio: line(&audio), speech_end_ms }
}

/// The quietest 10 ms within 100 ms of `at` (between two words).
fn quietest_near(pcm: &[i16], at: usize) -> usize {
    let (window, reach) = (10 * PER_MS, 100 * PER_MS);
    let energy =
        |start: usize| pcm[start..(start + window).min(pcm.len())].iter().map(|s| i64::from(*s).pow(2)).sum::<i64>();
    let lo = at.saturating_sub(reach);
    let hi = (at + reach).min(pcm.len().saturating_sub(window));
    (lo..=hi.max(lo)).step_by(PER_MS).min_by_key(|s| energy(*s)).map_or(at, |s| s + window / 2).min(pcm.len())
}

/// The speech, without the synthesiser's silence around it.
fn trim(pcm: &[i16]) -> &[i16] {
    let loud = |s: &i16| s.unsigned_abs() > 200;
    let first = pcm.iter().position(loud).unwrap_or(0);
    let last = pcm.iter().rposition(loud).map_or(0, |i| i + 1);
    &pcm[first..last.max(first)]
}

/// How a detector did on one clip.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// The turn ended before the caller finished.
    pub cut_off: bool,
    /// After the true end: how long until the turn ended (ms).
    pub delay_ms: Option<f64>,
}

/// Today's rule (WebRTC VAD, fixed silence) on a clip.
pub fn silence_rule(clip: &Clip, settings: TurnSettings) -> Outcome {
    let mut detector = SpeechDetector::new(settings);
    let mut ended = None;
    for (i, frame) in clip.audio.chunks(FRAME_SAMPLES).enumerate() {
        if detector.push(frame).iter().any(|e| matches!(e, VoiceEvent::Ended { .. })) {
            ended = Some(((i + 1) * 20) as f64);
            break;
        }
    }
    outcome(clip, ended)
}

/// Whisper for the smart rule's words, its answers kept: every setting
/// hears the same pauses, so each is transcribed once.
pub struct Stt {
    transcriber: WyomingTranscriber,
    heard: HashMap<(String, usize), (String, f64)>,
    latency_ms: Option<f64>,
}

impl Stt {
    /// Words arrive after the time whisper took.
    pub fn new(transcriber: WyomingTranscriber) -> Stt {
        Stt { transcriber, heard: HashMap::new(), latency_ms: None }
    }

    /// Words arrive `ms` after they were asked for, however long whisper
    /// took (a test's timing then does not depend on the machine's load).
    pub fn with_latency(mut self, ms: f64) -> Stt {
        self.latency_ms = Some(ms);
        self
    }

    /// The words of `audio` and how long the transcription took (ms).
    async fn hear(&mut self, key: (String, usize), audio: &[i16]) -> (String, f64) {
        let heard = match self.heard.get(&key) {
            Some(known) => known.clone(),
            None => {
                let started = std::time::Instant::now();
                let text = self.transcriber.transcribe(audio).await.unwrap_or_default();
                let heard = (text, started.elapsed().as_secs_f64() * 1000.0);
                self.heard.insert(key, heard.clone());
                heard
            }
        };
        (heard.0, self.latency_ms.unwrap_or(heard.1))
    }
}

/// The smart rule over a set as one call hears it: one detector takes the
/// clips one after another (so it learns, as on a call, how long the words
/// take), the model's answers held back for the time they took, and (with
/// `stt`) the words transcribed at each pause, given to the detector once
/// whisper has answered.
pub async fn smart_call(
    clips: &[Clip],
    models: &TurnModels,
    settings: SmartSettings,
    mut stt: Option<&mut Stt>,
) -> Call {
    let mut detector = SmartDetector::new(models, settings, Inference::Simulated);
    let mut outcomes = Vec::new();
    let mut cpu = std::time::Duration::ZERO;
    let mut words_asked = 0;
    for clip in clips {
        let mut asked_this_pause = false;
        let mut words: Option<(usize, String)> = None;
        let mut ended = None;
        for (i, frame) in clip.audio.chunks(FRAME_SAMPLES).enumerate() {
            if let Some((at, text)) = &words
                && *at <= i
            {
                detector.words(text);
                words = None;
            }
            let started = std::time::Instant::now();
            let events = detector.push(frame);
            cpu += started.elapsed();
            if ended.is_none() && events.iter().any(|e| matches!(e, VoiceEvent::Ended { .. })) {
                ended = Some(((i + 1) * 20) as f64);
            }
            let quiet = detector.turns().quiet_ms();
            if quiet == 0 {
                asked_this_pause = false;
                words = None;
            } else if quiet >= EARLY_WORDS_AFTER_MS
                && !asked_this_pause
                && detector.turns().speaking()
                && let Some(stt) = stt.as_deref_mut()
            {
                asked_this_pause = true;
                words_asked += 1;
                detector.words_coming();
                let upto = (i + 1) * FRAME_SAMPLES;
                let (text, ms) = stt.hear((format!("{} {}", clip.voice, clip.name), i), &clip.audio[..upto]).await;
                words = Some((i + 1 + (ms / 20.0).ceil() as usize, text));
            }
        }
        outcomes.push(outcome(clip, ended));
    }
    let seconds = clips.iter().map(|c| c.audio.len()).sum::<usize>() as f64 / (PER_MS * 1000) as f64;
    Call { outcomes, asked: detector.asks as usize, words_asked, cpu_ms: cpu.as_secs_f64() * 1000.0, seconds }
}

/// A set heard as one call by the smart rule.
#[derive(Debug, Clone)]
pub struct Call {
    /// Each clip's outcome, in the set's order.
    pub outcomes: Vec<Outcome>,
    /// How many times the model was asked.
    pub asked: usize,
    /// How many pauses' words were transcribed.
    pub words_asked: usize,
    /// The detector's CPU time (Silero and Smart Turn included; whisper not).
    pub cpu_ms: f64,
    /// The call's audio.
    pub seconds: f64,
}

impl Call {
    /// How many such calls one core keeps up with in real time.
    pub fn calls_per_core(&self) -> f64 {
        self.seconds * 1000.0 / self.cpu_ms
    }
}

fn outcome(clip: &Clip, ended_ms: Option<f64>) -> Outcome {
    let end = clip.speech_end_ms as f64;
    match ended_ms {
        Some(t) if t < end => Outcome { cut_off: true, delay_ms: None },
        Some(t) => Outcome { cut_off: false, delay_ms: Some(t - end) },
        // Never ended within the clip's trailing silence: as late as it gets.
        None => Outcome { cut_off: false, delay_ms: Some(TRAIL_MS as f64) },
    }
}

/// Over a set: the share cut off, and the median and 90th percentile delay
/// of the rest (ms).
#[derive(Debug, Clone, Copy)]
pub struct Score {
    pub false_cutoff_rate: f64,
    pub median_delay_ms: f64,
    pub p90_delay_ms: f64,
}

pub fn score(outcomes: &[Outcome]) -> Score {
    let cut = outcomes.iter().filter(|o| o.cut_off).count();
    let mut delays: Vec<f64> = outcomes.iter().filter_map(|o| o.delay_ms).collect();
    delays.sort_by(f64::total_cmp);
    let at = |q: f64| delays.get(((delays.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(f64::NAN);
    Score {
        false_cutoff_rate: cut as f64 / outcomes.len().max(1) as f64,
        median_delay_ms: at(0.5),
        p90_delay_ms: at(0.9),
    }
}
