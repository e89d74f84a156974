//! Answering-machine detection on outbound calls: who picked up, a person
//! or a machine, within the first seconds, and (for a machine) when a
//! message may be left.
//!
//! Three signals (docs/research/voicemail-detection.md):
//! - the **speech pattern**, Asterisk `app_amd`'s rules over WebRTC VAD
//!   verdicts: a short greeting then silence is a person ("Hello?"); a long
//!   greeting, or many words, is a machine;
//! - **words** heard early ("leave a message", "after the tone"; a call
//!   screening service's "say your name and why you're calling");
//! - a **beep**: a steady single tone (400–2,000 Hz) found by Goertzel
//!   filters on each 20 ms frame; its end is when a message may start.

use crate::FRAME_SAMPLES;
use crate::vad::{FRAME_MS, FrameVad, Framer};

/// Who picked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Human,
    Machine,
    Uncertain,
}

/// Why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    InitialSilence,
    LongGreeting,
    MaxWords,
    AfterGreetingSilence,
    /// A voicemail phrase was heard.
    Phrase(String),
    /// A call screening service's prompt was heard.
    Screening(String),
    Beep,
    TooLong,
    /// The line sent no audio for the analysis time.
    NoAudio,
}

/// What allowed a message to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// The beep ended.
    Beep,
    /// The machine stopped talking and no beep came.
    Silence,
    /// No beep within the wait.
    Timeout,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MachineEvent {
    /// The verdict (a second one only turns `Human` into `Machine`, when a
    /// voicemail phrase is heard soon after).
    Verdict {
        verdict: Verdict,
        cause: Cause,
        at_ms: u64,
    },
    BeepStarted {
        at_ms: u64,
        hz: f32,
    },
    BeepEnded {
        at_ms: u64,
        hz: f32,
    },
    /// A message may start now (after a machine verdict).
    Ready {
        at_ms: u64,
        after: Ready,
    },
}

/// How beeps are told from speech.
#[derive(Debug, Clone, Copy)]
pub struct BeepSettings {
    pub low_hz: f32,
    pub high_hz: f32,
    /// Share of a frame's energy in one tone.
    pub tonality: f32,
    /// A shorter tone is not a beep (a tone voice's words last up to 230 ms).
    pub min_ms: u64,
    /// A longer tone is not a beep (a fax, a dial tone).
    pub max_ms: u64,
    /// Non-beep time that confirms the beep is over.
    pub end_quiet_ms: u64,
}

impl Default for BeepSettings {
    fn default() -> Self {
        BeepSettings { low_hz: 400.0, high_hz: 2000.0, tonality: 0.7, min_ms: 240, max_ms: 2500, end_quiet_ms: 100 }
    }
}

/// The detector's thresholds: Asterisk `app_amd`'s defaults.
#[derive(Debug, Clone, Copy)]
pub struct MachineSettings {
    pub initial_silence_ms: u64,
    pub greeting_ms: u64,
    pub after_greeting_silence_ms: u64,
    pub total_analysis_ms: u64,
    pub min_word_ms: u64,
    pub between_words_ms: u64,
    pub max_words: u32,
    pub beep: BeepSettings,
    /// After a machine's speech, this much silence without a beep lets a
    /// message start.
    pub ready_silence_ms: u64,
    /// At most this long (from the answer) is waited for a beep.
    pub beep_wait_ms: u64,
    /// Until then, a voicemail phrase turns a `Human` verdict into `Machine`.
    pub revise_human_ms: u64,
}

impl Default for MachineSettings {
    fn default() -> Self {
        MachineSettings {
            initial_silence_ms: 2500,
            greeting_ms: 1500,
            after_greeting_silence_ms: 800,
            total_analysis_ms: 5000,
            min_word_ms: 100,
            between_words_ms: 60,
            max_words: 2,
            beep: BeepSettings::default(),
            ready_silence_ms: 3000,
            beep_wait_ms: 30_000,
            revise_human_ms: 8000,
        }
    }
}

/// Phrases of voicemail greetings.
const VOICEMAIL: &[&str] = &[
    "leave a message",
    "leave your message",
    "leave me a message",
    "after the tone",
    "after the beep",
    "at the tone",
    "not available",
    "unavailable",
    "you have reached",
    "you've reached",
    "can't take your call",
    "cannot take your call",
    "can't come to the phone",
    "record your message",
    "mailbox",
    "voicemail",
    "voice mail",
];

/// Phrases of call screening services (Google's, Apple's).
const SCREENING: &[&str] = &[
    "screening service",
    "call assist",
    "recording this call for",
    "say your name",
    "state your name",
    "why you're calling",
    "why you are calling",
    "reason for calling",
    "what you're calling about",
];

/// One steady tone per frame, found by Goertzel filters on a 25 Hz grid.
struct Beeps {
    settings: BeepSettings,
    /// The tone's run: where it began, its frequency, its length.
    run: Option<(u64, f32, u64)>,
    /// A beep long enough (or too long), and the non-beep time since its
    /// last frame.
    confirmed: bool,
    too_long: bool,
    quiet_ms: u64,
    /// Its last beep frame's end.
    last_ms: u64,
}

/// Mean absolute sample under which a frame is silence (Asterisk's).
const SILENT_MEAN_ABS: f64 = 256.0;

impl Beeps {
    fn new(settings: BeepSettings) -> Beeps {
        Beeps { settings, run: None, confirmed: false, too_long: false, quiet_ms: 0, last_ms: 0 }
    }

    /// The frame's tone, if one tone holds most of its energy.
    fn tone(&self, frame: &[i16]) -> Option<f32> {
        let n = frame.len() as f64;
        let mean_abs = frame.iter().map(|s| f64::from(*s).abs()).sum::<f64>() / n;
        if mean_abs < SILENT_MEAN_ABS {
            return None;
        }
        let energy: f64 = frame.iter().map(|s| f64::from(*s).powi(2)).sum();
        let mut best = (0.0, 0.0);
        let mut hz = self.settings.low_hz;
        while hz <= self.settings.high_hz {
            let power = goertzel(frame, f64::from(hz));
            if power > best.0 {
                best = (power, hz);
            }
            hz += 25.0;
        }
        let tonality = best.0 / (energy * n / 2.0);
        (tonality >= f64::from(self.settings.tonality)).then_some(best.1)
    }

    /// Takes a frame ending at `now_ms`.
    fn frame(&mut self, frame: &[i16], now_ms: u64, events: &mut Vec<MachineEvent>) {
        let start = now_ms - FRAME_MS;
        let tone = self.tone(frame);
        let same = match (tone, self.run) {
            (Some(hz), Some((_, run_hz, _))) => (hz - run_hz).abs() <= 50.0,
            _ => false,
        };
        if same && let Some((from, hz, len)) = &mut self.run {
            *len += FRAME_MS;
            self.last_ms = now_ms;
            self.quiet_ms = 0;
            if *len > self.settings.max_ms {
                // Too long for a beep (a fax, a dial tone): it ends unheard.
                self.too_long = true;
            } else if !self.confirmed && *len >= self.settings.min_ms {
                self.confirmed = true;
                events.push(MachineEvent::BeepStarted { at_ms: *from, hz: *hz });
            }
            return;
        }
        if self.confirmed
            && let Some((_, hz, _)) = self.run
        {
            // A beep's end is confirmed after a little time without it.
            self.quiet_ms += FRAME_MS;
            if self.quiet_ms < self.settings.end_quiet_ms {
                return;
            }
            if !self.too_long {
                events.push(MachineEvent::BeepEnded { at_ms: self.last_ms, hz });
            }
        }
        self.confirmed = false;
        self.too_long = false;
        self.quiet_ms = 0;
        self.run = tone.map(|hz| (start, hz, FRAME_MS));
        if tone.is_some() {
            self.last_ms = now_ms;
        }
    }
}

/// |X(f)|² of `frame` at `hz` (8 kHz), by Goertzel's recurrence.
fn goertzel(frame: &[i16], hz: f64) -> f64 {
    let w = 2.0 * std::f64::consts::PI * hz / f64::from(crate::SAMPLE_RATE);
    let coeff = 2.0 * w.cos();
    let (mut s1, mut s2) = (0.0f64, 0.0f64);
    for x in frame {
        let s = f64::from(*x) + coeff * s1 - s2;
        s2 = s1;
        s1 = s;
    }
    s1 * s1 + s2 * s2 - coeff * s1 * s2
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nobody has spoken yet.
    Silence,
    /// The greeting has begun.
    Greeting,
    Decided,
}

/// The detector, fed the callee's 8 kHz audio (any slicing) and the words
/// heard.
pub struct MachineDetector {
    settings: MachineSettings,
    vad: FrameVad,
    beeps: Beeps,
    framer: Framer,
    now_ms: u64,
    phase: Phase,
    verdict: Option<Verdict>,
    /// Voiced and silent time in a row, words begun, voice since the greeting began.
    voiced_ms: u64,
    silent_ms: u64,
    in_word: bool,
    words: u32,
    greeting_voice_ms: u64,
    cause: Option<Cause>,
    /// A message may start (said once).
    ready: bool,
}

impl MachineDetector {
    pub fn new(settings: MachineSettings) -> MachineDetector {
        MachineDetector {
            settings,
            vad: FrameVad::new(),
            beeps: Beeps::new(settings.beep),
            framer: Framer::default(),
            now_ms: 0,
            phase: Phase::Silence,
            verdict: None,
            voiced_ms: 0,
            silent_ms: 0,
            in_word: false,
            words: 0,
            greeting_voice_ms: 0,
            cause: None,
            ready: false,
        }
    }

    pub fn verdict(&self) -> Option<Verdict> {
        self.verdict
    }

    /// Takes audio, returning what it decided, in order.
    pub fn push(&mut self, pcm: &[i16]) -> Vec<MachineEvent> {
        let mut events = Vec::new();
        for frame in self.framer.whole(pcm).chunks(FRAME_SAMPLES) {
            self.frame(frame, &mut events);
        }
        events
    }

    /// Words heard from the callee (early or final transcripts).
    pub fn words(&mut self, text: &str) -> Option<MachineEvent> {
        let text = text.to_lowercase().replace('’', "'");
        let found = |list: &[&str]| list.iter().find(|p| text.contains(*p)).map(|p| p.to_string());
        let cause = match (found(SCREENING), found(VOICEMAIL)) {
            (Some(p), _) => Cause::Screening(p),
            (None, Some(p)) => Cause::Phrase(p),
            (None, None) => return None,
        };
        let revisable = match self.verdict {
            None | Some(Verdict::Uncertain) => true,
            // Soon after "Hello", a voicemail phrase means the greeting was a machine's.
            Some(Verdict::Human) => self.now_ms < self.settings.revise_human_ms,
            // A machine by its pattern may turn out to be a screening service,
            // which wants an answer rather than a message.
            Some(Verdict::Machine) => {
                matches!(cause, Cause::Screening(_)) && !matches!(self.cause, Some(Cause::Screening(_)))
            }
        };
        revisable.then(|| self.decide(Verdict::Machine, cause))
    }

    /// The line stopped sending audio (a SIP peer sends no RTP in
    /// silence): what the detector would have decided by now. Without a
    /// verdict, `Uncertain`; a machine waiting for its beep, `Ready`.
    pub fn timeout(&mut self) -> Option<MachineEvent> {
        match self.verdict {
            None => Some(self.decide(Verdict::Uncertain, Cause::NoAudio)),
            Some(Verdict::Machine) if !self.ready => {
                self.ready = true;
                Some(MachineEvent::Ready { at_ms: self.now_ms, after: Ready::Timeout })
            }
            _ => None,
        }
    }

    /// How much audio the detector has heard (ms).
    pub fn heard_ms(&self) -> u64 {
        self.now_ms
    }

    /// Why the verdict is what it is.
    pub fn cause(&self) -> Option<&Cause> {
        self.cause.as_ref()
    }

    fn decide(&mut self, verdict: Verdict, cause: Cause) -> MachineEvent {
        self.phase = Phase::Decided;
        self.verdict = Some(verdict);
        self.cause = Some(cause.clone());
        MachineEvent::Verdict { verdict, cause, at_ms: self.now_ms }
    }

    fn frame(&mut self, frame: &[i16], events: &mut Vec<MachineEvent>) {
        self.now_ms += FRAME_MS;
        let mut beeps = Vec::new();
        self.beeps.frame(frame, self.now_ms, &mut beeps);
        for beep in beeps {
            if let MachineEvent::BeepStarted { .. } = beep
                && self.verdict != Some(Verdict::Machine)
            {
                events.push(self.decide(Verdict::Machine, Cause::Beep));
            }
            let ended = matches!(beep, MachineEvent::BeepEnded { .. });
            events.push(beep);
            if ended && !self.ready {
                self.ready = true;
                events.push(MachineEvent::Ready { at_ms: self.now_ms, after: Ready::Beep });
            }
        }
        // A beep is not speech.
        let voiced = self.vad.voiced(frame) && self.beeps.run.is_none();
        if voiced {
            self.voiced_ms += FRAME_MS;
            self.silent_ms = 0;
        } else {
            self.silent_ms += FRAME_MS;
            self.voiced_ms = 0;
        }
        if self.in_word && self.silent_ms >= self.settings.between_words_ms {
            self.in_word = false;
        }
        if !self.in_word && self.voiced_ms >= self.settings.min_word_ms {
            self.in_word = true;
            self.words += 1;
        }
        let s = self.settings;
        match self.phase {
            Phase::Silence => {
                if self.in_word {
                    self.phase = Phase::Greeting;
                    self.greeting_voice_ms = self.voiced_ms;
                } else if self.silent_ms >= s.initial_silence_ms {
                    events.push(self.decide(Verdict::Uncertain, Cause::InitialSilence));
                }
            }
            Phase::Greeting => {
                if voiced {
                    self.greeting_voice_ms += FRAME_MS;
                }
                if self.greeting_voice_ms >= s.greeting_ms {
                    events.push(self.decide(Verdict::Machine, Cause::LongGreeting));
                } else if self.words > s.max_words {
                    events.push(self.decide(Verdict::Machine, Cause::MaxWords));
                } else if self.silent_ms >= s.after_greeting_silence_ms {
                    events.push(self.decide(Verdict::Human, Cause::AfterGreetingSilence));
                }
            }
            Phase::Decided => {}
        }
        if self.verdict.is_none() && self.now_ms >= s.total_analysis_ms {
            events.push(self.decide(Verdict::Uncertain, Cause::TooLong));
        }
        // A machine: a message may start once its beep ends, else once it
        // has spoken and gone quiet, else at the wait's end.
        if self.verdict == Some(Verdict::Machine) && !self.ready {
            let quiet_after_speech = self.silent_ms >= s.ready_silence_ms;
            let after = if self.now_ms >= s.beep_wait_ms {
                Some(Ready::Timeout)
            } else if quiet_after_speech && self.beeps.run.is_none() {
                Some(Ready::Silence)
            } else {
                None
            };
            if let Some(after) = after {
                self.ready = true;
                events.push(MachineEvent::Ready { at_ms: self.now_ms, after });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(hz: f64, ms: usize) -> Vec<i16> {
        (0..ms * 8).map(|i| ((i as f64 * hz * std::f64::consts::TAU / 8000.0).sin() * 12_000.0) as i16).collect()
    }

    fn beeps(audio: &[i16]) -> Vec<MachineEvent> {
        let mut b = Beeps::new(BeepSettings::default());
        let mut events = Vec::new();
        for (i, frame) in audio.chunks(FRAME_SAMPLES).enumerate() {
            b.frame(frame, (i as u64 + 1) * FRAME_MS, &mut events);
        }
        events
    }

    #[test]
    fn a_beep_is_found_with_its_start_and_end() {
        let mut audio = vec![0i16; 8000];
        audio.extend(tone(1000.0, 500));
        audio.extend(vec![0i16; 8000]);
        let events = beeps(&audio);
        assert_eq!(events.len(), 2, "{events:?}");
        assert!(matches!(events[0], MachineEvent::BeepStarted { at_ms: 1000, hz } if (hz - 1000.0).abs() < 1.0));
        assert!(matches!(events[1], MachineEvent::BeepEnded { at_ms: 1500, .. }), "{events:?}");
    }

    #[test]
    fn short_and_long_tones_are_not_beeps() {
        let mut audio = vec![0i16; 4000];
        audio.extend(tone(800.0, 160));
        audio.extend(vec![0i16; 4000]);
        assert!(beeps(&audio).is_empty());
        // A 3 s tone starts like a beep but never ends as one: no message after it.
        let mut audio = vec![0i16; 4000];
        audio.extend(tone(800.0, 3000));
        audio.extend(vec![0i16; 4000]);
        let events = beeps(&audio);
        assert!(matches!(events[..], [MachineEvent::BeepStarted { .. }]), "{events:?}");
        // Two tones at once (a chord, or a voice's harmonics) hold no single tone.
        let chord: Vec<i16> = tone(500.0, 600).iter().zip(tone(1300.0, 600)).map(|(a, b)| a / 2 + b / 2).collect();
        assert!(beeps(&chord).is_empty());
    }

    #[test]
    fn voicemail_and_screening_words_are_machines() {
        let mut d = MachineDetector::new(MachineSettings::default());
        assert_eq!(d.words("Hello? Who is this?"), None);
        let e = d.words("Hi, you've reached Sam. Please leave a message after the tone.");
        assert!(matches!(e, Some(MachineEvent::Verdict { verdict: Verdict::Machine, cause: Cause::Phrase(_), .. })));
        let mut d = MachineDetector::new(MachineSettings::default());
        let e = d.words("Go ahead and say your name and why you're calling.");
        assert!(matches!(e, Some(MachineEvent::Verdict { cause: Cause::Screening(_), .. })), "{e:?}");
    }

    #[test]
    fn silence_alone_is_uncertain() {
        let mut d = MachineDetector::new(MachineSettings::default());
        let events = d.push(&vec![0i16; 8000 * 3]);
        assert!(matches!(
            events[..],
            [MachineEvent::Verdict { verdict: Verdict::Uncertain, cause: Cause::InitialSilence, at_ms: 2500 }]
        ));
    }
}
