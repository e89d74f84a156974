//! The speech loop over live audio ([`ProviderEvent::Audio`]): voice
//! activity cuts the caller's audio into turns; each turn is transcribed
//! and answered by the agent as a stream (the synthesiser speaks sentence
//! by sentence while the model still writes); when the caller talks over
//! the agent for longer than the interruption threshold, playback stops,
//! the agent's turn is cancelled, and its segment is marked interrupted
//! and trimmed to the words played. Shorter sounds over the agent
//! (backchannels: "uh-huh", "ok") neither interrupt nor start a turn.
//!
//! [`ProviderEvent::Audio`]: crate::provider::ProviderEvent::Audio

use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use parley_domain::call::{AnsweredBy, MachineCause, MachineDetection, Speaker, TranscriptSegment, TurnLatency, Word};
use parley_speech::machine::{Cause, MachineDetector, MachineEvent, MachineSettings, Verdict};
use parley_speech::turns::{SmartSettings, TurnDetector, TurnModels};
use parley_speech::vad::{TurnSettings, VoiceEvent};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::audio::{Voice, duration_ms};
use crate::early::Early;
use crate::provider::{Command, Pcm};
use crate::run::{Action, Progress, Run, transcribe};
use crate::session::{Input, Output};
use crate::speech::Synthesiser;

/// How the engine listens.
#[derive(Debug, Clone)]
pub struct Listening {
    /// The provider streams live audio (SIP, Twilio): the agent's speech
    /// is streamed too, and can be interrupted.
    pub live: bool,
    /// The silence rule (WebRTC's VAD and a fixed silence).
    pub turns: TurnSettings,
    /// The smart rule, used when the agent asks for it and the server has
    /// the models; else the silence rule.
    pub smart: Option<(SmartSettings, Arc<TurnModels>)>,
    /// Caller speech over the agent longer than this interrupts it.
    pub interruption_threshold_ms: i64,
    /// Audio kept from before the detected start of speech (its first
    /// syllable is quiet and the VAD needs a few frames).
    pub preroll_ms: i64,
    /// Silence after which the agent prompts the caller again (once per silence).
    pub silence_reprompt_ms: Option<i64>,
    /// Silence after which the agent hangs up.
    pub silence_hangup_ms: Option<i64>,
    /// When the agent greets, and whether the greeting can be interrupted.
    pub greeting: Greeting,
    /// Answering-machine detection (outbound phone calls that ask for it):
    /// the greeting then waits for the verdict.
    pub machine: Option<MachinePolicy>,
}

/// Answering-machine detection on a call, and what a machine gets.
#[derive(Debug, Clone)]
pub struct MachinePolicy {
    pub on_machine: OnMachine,
    /// A call screening service's prompt gets the greeting and the call
    /// goes on (else it is treated as a machine).
    pub answer_screening: bool,
    pub settings: MachineSettings,
}

/// What the agent does when a machine answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnMachine {
    /// Hangs up at the verdict, having said nothing.
    HangUp,
    /// Says this once the beep has passed (or the machine has gone quiet),
    /// then hangs up.
    LeaveMessage(String),
}

/// When the agent says its greeting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Greeting {
    /// At once; the callee's pick-up words or noise cannot cut it short.
    #[default]
    SpeakFirst,
    /// After the callee's first words, or after `wait_ms` of silence; then
    /// as `SpeakFirst`.
    WaitForCallee { wait_ms: i64 },
    /// At once, and the callee can interrupt it.
    Interruptible,
}

impl Default for Listening {
    fn default() -> Self {
        Listening {
            live: false,
            turns: TurnSettings::default(),
            smart: None,
            interruption_threshold_ms: 300,
            preroll_ms: 200,
            silence_reprompt_ms: None,
            silence_hangup_ms: None,
            greeting: Greeting::default(),
            machine: None,
        }
    }
}

/// How long past its analysis time answering-machine detection waits for
/// audio a line does not send before deciding without it.
const NO_AUDIO_SLACK_MS: i64 = 1000;

/// The call's form of the detector's cause, and the words that decided it.
fn machine_cause(cause: Cause) -> (MachineCause, Option<String>) {
    match cause {
        Cause::InitialSilence => (MachineCause::InitialSilence, None),
        Cause::LongGreeting => (MachineCause::LongGreeting, None),
        Cause::MaxWords => (MachineCause::MaxWords, None),
        Cause::AfterGreetingSilence => (MachineCause::AfterGreetingSilence, None),
        Cause::Phrase(p) => (MachineCause::Phrase, Some(p)),
        Cause::Screening(p) => (MachineCause::Screening, Some(p)),
        Cause::Beep => (MachineCause::Beep, None),
        Cause::TooLong => (MachineCause::TooLong, None),
        Cause::NoAudio => (MachineCause::NoAudio, None),
    }
}

/// Silence after which the utterance so far is transcribed, before its
/// turn has ended.
const SPECULATE_AFTER_MS: i64 = parley_speech::turns::EARLY_WORDS_AFTER_MS as i64;

impl Listening {
    fn detector(&self) -> TurnDetector {
        match &self.smart {
            Some((settings, models)) => TurnDetector::smart(models, *settings),
            None => TurnDetector::silence(self.turns),
        }
    }
}

/// How long the end of a call waits for the caller's last words to be transcribed.
pub(crate) const LAST_WORDS: std::time::Duration = std::time::Duration::from_secs(5);

/// What the loop's tasks report back to the engine.
pub(crate) enum Message {
    /// More of turn `turn`'s text.
    Text { turn: u64, delta: String },
    /// A frame of turn `turn`'s speech, to play now.
    Frame { turn: u64, frame: Pcm },
    /// Turn `turn` asks to end or transfer the call once it has been heard.
    Act { turn: u64, action: Action },
    /// Turn `turn` has no more speech.
    Spoken { turn: u64 },
    /// An utterance of the caller's (audio from `start_ms`, speech ending
    /// at `speech_end_ms`, the turn at `end_ms`), transcribed.
    Heard { start_ms: i64, end_ms: i64, speech_end_ms: i64, transcript: parley_speech::Transcript },
}

/// The agent's turn being spoken.
struct Speaking {
    turn: u64,
    task: JoinHandle<()>,
    /// When its first frame plays (ms from the answer).
    start_ms: Option<i64>,
    text: String,
    action: Option<Action>,
    /// When it answers the caller: how long each step took.
    timing: Option<Timing>,
    /// The greeting, which the callee cannot interrupt.
    protected: bool,
}

/// The moments of one answering turn (ms from the answer).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// The caller stopped speaking.
    speech_end_ms: i64,
    /// Their turn was judged over.
    turn_end_ms: i64,
    /// Their transcript was final.
    heard_ms: i64,
    /// The model's first words arrived.
    first_text_ms: Option<i64>,
    /// The voice's first audio arrived, and went out.
    first_audio_ms: Option<i64>,
    first_out_ms: Option<i64>,
}

impl Timing {
    fn latency(&self) -> Option<TurnLatency> {
        let (text, audio, out) = (self.first_text_ms?, self.first_audio_ms?, self.first_out_ms?);
        Some(TurnLatency {
            end_of_turn_ms: self.turn_end_ms - self.speech_end_ms,
            stt_ms: self.heard_ms - self.turn_end_ms,
            llm_first_token_ms: text - self.heard_ms,
            tts_first_audio_ms: audio - text,
            voice_to_voice_ms: out - self.speech_end_ms,
        })
    }
}

/// An agent segment whose audio is still playing: written when it ends,
/// or trimmed if the caller interrupts it first.
struct Playing {
    start_ms: i64,
    end_ms: i64,
    text: String,
    latency: Option<TurnLatency>,
    protected: bool,
}

/// Answering-machine detection while the call runs.
struct Screen {
    policy: MachinePolicy,
    detector: MachineDetector,
    /// Where the detector's time starts: its first frame (ms from the answer).
    origin: Option<i64>,
    verdict: Option<(AnsweredBy, MachineDetection)>,
    /// The message's turn, once it is said.
    message_turn: Option<u64>,
}

impl Screen {
    /// Whether the agent keeps quiet for the machine: no verdict yet, or a
    /// machine (which gets only its message).
    fn holds(&self) -> bool {
        match &self.verdict {
            None => true,
            Some((AnsweredBy::Machine, d)) => !self.answers(d),
            Some(_) => false,
        }
    }

    /// A screening service's prompt the agent answers as a person's.
    fn answers(&self, d: &MachineDetection) -> bool {
        d.cause == MachineCause::Screening && self.policy.answer_screening
    }
}

pub(crate) struct Live {
    settings: Listening,
    tx: mpsc::Sender<Message>,
    rx: mpsc::Receiver<Message>,
    detector: Option<(TurnDetector, i64)>,
    preroll: VecDeque<i16>,
    utterance: Option<(i64, Pcm)>,
    /// Where caller speech over the agent began, while it may become a barge-in.
    barge_from: Option<i64>,
    /// The utterance in progress, transcribed in pieces while the caller
    /// pauses (one request at a time), and whether this pause's is out.
    early: Early,
    pause_sent: bool,
    /// Caller turns being transcribed.
    hearing: usize,
    turn: u64,
    speaking: Option<Speaking>,
    playing: Option<Playing>,
    /// The greeting waiting for the callee to speak first, and when it is
    /// said anyway (ms from the answer; `None` once they speak).
    waiting_greeting: Option<(String, Option<i64>)>,
    /// What the callee said over the greeting that asks for an answer once
    /// it is over.
    after_greeting: Option<String>,
    /// Answering-machine detection, when the call has it.
    screen: Option<Screen>,
}

impl Live {
    pub(crate) fn new(settings: Listening) -> Live {
        let (tx, rx) = mpsc::channel(1024);
        let screen = settings.machine.clone().map(|policy| Screen {
            detector: MachineDetector::new(policy.settings),
            policy,
            origin: None,
            verdict: None,
            message_turn: None,
        });
        Live {
            screen,
            settings,
            tx,
            rx,
            detector: None,
            preroll: VecDeque::new(),
            utterance: None,
            barge_from: None,
            early: Early::default(),
            pause_sent: false,
            hearing: 0,
            turn: 0,
            speaking: None,
            playing: None,
            waiting_greeting: None,
            after_greeting: None,
        }
    }

    pub(crate) async fn next(&mut self) -> Option<Message> {
        self.rx.recv().await
    }

    /// Whether the agent is speaking, the caller is talking, or a machine
    /// verdict keeps the agent waiting (no silence prompt meanwhile).
    pub(crate) fn busy(&self) -> bool {
        self.speaking.is_some() || self.playing.is_some() || self.utterance.is_some() || self.machine_holds()
    }

    /// Whether the agent ended the call for a machine (hung up on it, or
    /// left its message).
    pub(crate) fn left_for_machine(&self) -> bool {
        self.screen.as_ref().is_some_and(|s| matches!(&s.verdict, Some((AnsweredBy::Machine, d)) if !s.answers(d)))
    }

    fn machine_holds(&self) -> bool {
        self.screen.as_ref().is_some_and(Screen::holds)
    }

    /// Who picked up, as answering-machine detection judged (its last word).
    pub(crate) fn answered_by(&self) -> Option<(AnsweredBy, MachineDetection)> {
        self.screen.as_ref().and_then(|s| s.verdict.clone())
    }

    fn agent_talking(&self, run: &Run, now: i64) -> bool {
        self.speaking.is_some() || now < run.agent_until_ms
    }

    /// A frame of the caller's audio.
    pub(crate) async fn audio(&mut self, run: &mut Run, frame: Pcm) {
        let now = run.now_ms();
        let start = now - duration_ms(frame.len());
        if let Some(r) = &mut run.recorder {
            r.put(Voice::Caller, start, &frame);
        }
        if let Some(screen) = &mut self.screen {
            screen.origin.get_or_insert(start);
            for event in screen.detector.push(&frame) {
                self.on_machine(run, event).await;
            }
        }
        self.finish_played(run, now).await;
        let preroll_samples = (self.settings.preroll_ms * 8) as usize;
        self.preroll.extend(frame.iter().copied());
        while self.preroll.len() > preroll_samples {
            self.preroll.pop_front();
        }
        if let Some((_, audio)) = &mut self.utterance {
            audio.extend_from_slice(&frame);
        }
        let (detector, origin) = self.detector.get_or_insert_with(|| (self.settings.detector(), start));
        let origin = *origin;
        let events = detector.push(&frame);
        let heard_ms = detector.heard_ms() as i64;
        for event in events {
            match event {
                VoiceEvent::Started { at_ms } => {
                    std::mem::take(&mut self.early).abandon();
                    let began = origin + at_ms as i64;
                    let pre: Pcm = self.preroll.iter().copied().collect();
                    // Frames can arrive in a burst at the answer: never before it.
                    self.utterance = Some(((now - duration_ms(pre.len())).max(0), pre));
                    if self.agent_talking(run, now) {
                        self.barge_from = Some(began);
                    }
                }
                VoiceEvent::Ended { from_ms, to_ms } => {
                    self.barge_from = None;
                    let Some((start_ms, audio)) = self.utterance.take() else { continue };
                    let long = (to_ms - from_ms) as i64 >= self.settings.interruption_threshold_ms;
                    let early = std::mem::take(&mut self.early);
                    if self.agent_talking(run, now) && !long {
                        early.abandon();
                        continue; // a backchannel under the agent's speech
                    }
                    let speech_end_ms = origin + to_ms as i64;
                    let voiced_to = ((speech_end_ms - start_ms).max(0) * 8) as usize;
                    let transcriber = run.transcriber.clone();
                    let tx = self.tx.clone();
                    self.hearing += 1;
                    tokio::spawn(async move {
                        let transcript = early.finish(transcriber.as_ref(), &audio, voiced_to).await;
                        let _ = tx.send(Message::Heard { start_ms, end_ms: now, speech_end_ms, transcript }).await;
                    });
                }
            }
        }
        // Transcribe early, once the caller has paused long enough that the
        // turn may be over: the end-of-turn silence then hides most of the
        // transcription's time. If they speak on, what was heard is kept.
        // The words heard up to this pause also tell the turn detector
        // whether the caller stopped mid-phrase.
        let quiet = self.detector.as_ref().map_or(0, |(d, _)| d.quiet_ms()) as i64;
        if quiet == 0 {
            self.pause_sent = false;
        } else if quiet >= SPECULATE_AFTER_MS
            && !self.pause_sent
            && let (Some(transcriber), Some((_, audio))) = (&run.transcriber, &self.utterance)
        {
            self.pause_sent = self.early.send(transcriber, audio);
            if self.pause_sent
                && let Some((detector, _)) = &mut self.detector
            {
                detector.words_coming();
            }
        }
        if self.early.collect() && self.pause_sent {
            let text = self.early.text();
            if let Some((detector, _)) = &mut self.detector {
                detector.words(&text);
            }
            self.machine_words(run, &text).await;
        }
        // Speech heard over the agent for the threshold (not merely begun:
        // a short sound's hang-over does not count) is a barge-in.
        if self.barge_from.is_some() && heard_ms >= self.settings.interruption_threshold_ms {
            self.barge_from = None;
            if !self.greeting_protected(now) {
                self.interrupt(run, now).await;
            }
        }
    }

    /// Stops the agent: no more audio, its turn cancelled, its segment
    /// trimmed to what was played.
    async fn interrupt(&mut self, run: &mut Run, now: i64) {
        let speaking = self.speaking.take();
        if let Some(s) = &speaking {
            s.task.abort();
        }
        let _ = run.commands.send(Command::StopPlayback).await;
        let cut = match (speaking, self.playing.take()) {
            (Some(Speaking { start_ms: Some(start), text, timing, .. }), _) => {
                Some((start, text, timing.and_then(|t| t.latency())))
            }
            (_, Some(Playing { start_ms, text, latency, .. })) => Some((start_ms, text, latency)),
            _ => None,
        };
        if let Some((start, text, latency)) = cut {
            let total = (run.agent_until_ms - start).max(1);
            let played = (now - start).clamp(0, total);
            let trimmed = words_within(&text, played as f64 / total as f64);
            run.write(agent_segment(trimmed, start, now, true, latency)).await;
        }
        if let Some(r) = &mut run.recorder {
            r.cut(Voice::Agent, now);
        }
        run.agent_until_ms = run.agent_until_ms.min(now);
        // What it meant to do after those words is off too.
        run.cancel_action();
        // The agent's memory: its turn stopped where the caller spoke.
        let played = run.segments.last().filter(|s| s.speaker == Speaker::Agent && s.interrupted);
        let played = played.map(|s| s.text.clone()).unwrap_or_default();
        drop(run.agent.respond(Input::Interrupted { played }));
    }

    /// Writes the agent segment whose audio has finished playing.
    pub(crate) async fn finish_played(&mut self, run: &mut Run, now: i64) {
        if self.playing.as_ref().is_some_and(|p| p.end_ms <= now)
            && let Some(p) = self.playing.take()
        {
            run.write(agent_segment(p.text, p.start_ms, p.end_ms, false, p.latency)).await;
            if p.protected {
                self.greeting_over(run);
            }
        }
    }

    /// Something the loop's tasks reported.
    pub(crate) async fn handle(&mut self, run: &mut Run, message: Message) {
        let current = |turn: u64, speaking: &Option<Speaking>| speaking.as_ref().is_some_and(|s| s.turn == turn);
        match message {
            Message::Text { turn, delta } if current(turn, &self.speaking) => {
                let now = run.now_ms();
                if let Some(s) = &mut self.speaking {
                    s.text.push_str(&delta);
                    if let Some(t) = &mut s.timing {
                        t.first_text_ms.get_or_insert(now);
                    }
                }
            }
            Message::Frame { turn, frame } if current(turn, &self.speaking) => {
                let now = run.now_ms();
                let at = now.max(run.agent_until_ms);
                if let Some(s) = &mut self.speaking {
                    s.start_ms.get_or_insert(at);
                    if let Some(t) = &mut s.timing {
                        t.first_audio_ms.get_or_insert(now);
                        t.first_out_ms.get_or_insert(at);
                    }
                }
                if let Some(r) = &mut run.recorder {
                    r.put(Voice::Agent, at, &frame);
                }
                run.agent_until_ms = at + duration_ms(frame.len());
                let _ = run.commands.send(Command::Play(frame)).await;
            }
            Message::Act { turn, action } if current(turn, &self.speaking) => {
                if let Some(s) = &mut self.speaking {
                    s.action = Some(action);
                }
            }
            Message::Spoken { turn } if current(turn, &self.speaking) => {
                if let Some(Screen { message_turn: Some(t), verdict: Some((_, d)), .. }) = &mut self.screen
                    && *t == turn
                {
                    d.message_left = true;
                }
                let now = run.now_ms();
                self.finish_played(run, now).await;
                if let Some(s) = self.speaking.take() {
                    if let Some(start_ms) = s.start_ms {
                        let text = s.text.trim().to_owned();
                        let latency = s.timing.and_then(|t| t.latency());
                        let (end_ms, protected) = (run.agent_until_ms, s.protected);
                        self.playing = Some(Playing { start_ms, end_ms, text, latency, protected });
                    } else if s.protected {
                        self.greeting_over(run); // nothing was played
                    }
                    if let Some(action) = s.action {
                        run.act_after_speech(action);
                    }
                }
            }
            Message::Heard { start_ms, end_ms, speech_end_ms, transcript } => {
                self.hearing = self.hearing.saturating_sub(1);
                run.caller_until_ms = end_ms;
                run.reprompted = false;
                let text = transcript.text;
                let words = transcript
                    .words
                    .into_iter()
                    .map(|w| Word { word: w.word, start_ms: start_ms + w.start_ms, end_ms: start_ms + w.end_ms })
                    .collect();
                let segment = TranscriptSegment {
                    index: 0,
                    speaker: Speaker::Caller,
                    text: text.clone(),
                    start_ms,
                    end_ms,
                    interrupted: false,
                    words,
                    latency: None,
                };
                run.write(segment).await;
                if text == "[inaudible]" {
                    return;
                }
                self.machine_words(run, &text).await;
                if self.machine_holds() {
                    // Not answered: a machine's words, or words before the
                    // verdict (a person's are answered after the greeting).
                    if self.screen.as_ref().is_some_and(|s| s.verdict.is_none()) && !pick_up_words(&text) {
                        self.after_greeting = Some(text);
                    }
                    return;
                }
                if let Some((greeting, _)) = self.waiting_greeting.take() {
                    // The callee spoke first: now the greeting, then an
                    // answer if they asked for one.
                    // A screening service's question is what the greeting answers.
                    let screened = self.answered_by().is_some_and(|(_, d)| d.cause == MachineCause::Screening);
                    self.after_greeting = (!pick_up_words(&text) && !screened).then_some(text);
                    self.speak_greeting(run, greeting);
                    return;
                }
                if self.greeting_protected(run.now_ms()) {
                    if !pick_up_words(&text) {
                        self.after_greeting = Some(text);
                    }
                    return;
                }
                let timing = Timing {
                    speech_end_ms,
                    turn_end_ms: end_ms,
                    heard_ms: run.now_ms(),
                    first_text_ms: None,
                    first_audio_ms: None,
                    first_out_ms: None,
                };
                self.answer(run, text, Some(timing));
            }
            _ => {} // a cancelled turn's late messages
        }
    }

    /// The call was answered: the agent greets as its agent asks (with
    /// answering-machine detection, once a person is judged to have
    /// picked up).
    pub(crate) fn greet(&mut self, run: &mut Run, greeting: String) {
        if self.screen.is_some() {
            self.waiting_greeting = Some((greeting, None));
            return;
        }
        match self.settings.greeting {
            Greeting::SpeakFirst => self.speak_greeting(run, greeting),
            Greeting::WaitForCallee { wait_ms } => {
                self.waiting_greeting = Some((greeting, Some(run.now_ms() + wait_ms)));
            }
            Greeting::Interruptible => {
                let turn = futures::stream::iter([Output::TextDelta(greeting), Output::EndOfTurn]).boxed();
                self.speak_timed(run, turn, None, false);
            }
        }
    }

    /// When the greeting waiting for the callee is said anyway (ms from the answer).
    pub(crate) fn greeting_due(&self) -> Option<i64> {
        self.waiting_greeting.as_ref().and_then(|(_, at)| *at)
    }

    /// The callee stayed silent: the agent greets first after all (unless
    /// they are speaking now: their words' end greets).
    pub(crate) fn greeting_wait_over(&mut self, run: &mut Run) {
        if self.machine_holds() {
            return;
        }
        if self.utterance.is_some() {
            if let Some((_, at)) = &mut self.waiting_greeting {
                *at = None;
            }
            return;
        }
        if let Some((greeting, _)) = self.waiting_greeting.take() {
            self.speak_greeting(run, greeting);
        }
    }

    /// Words heard from the callee, for answering-machine detection.
    async fn machine_words(&mut self, run: &mut Run, text: &str) {
        if let Some(event) = self.screen.as_mut().and_then(|s| s.detector.words(text)) {
            self.on_machine(run, event).await;
        }
    }

    /// When answering-machine detection stops waiting for audio the line
    /// does not send (ms from the answer): for its verdict, or for the beep.
    pub(crate) fn machine_due(&self) -> Option<i64> {
        let screen = self.screen.as_ref()?;
        let s = &screen.policy.settings;
        match (&screen.verdict, &screen.policy.on_machine) {
            (None, _) => Some(s.total_analysis_ms as i64 + NO_AUDIO_SLACK_MS),
            (Some((AnsweredBy::Machine, d)), OnMachine::LeaveMessage(_))
                if screen.message_turn.is_none() && !screen.answers(d) =>
            {
                Some(s.beep_wait_ms as i64 + NO_AUDIO_SLACK_MS)
            }
            _ => None,
        }
    }

    /// The line sent too little audio for answering-machine detection to
    /// decide by it: it decides now.
    pub(crate) async fn machine_timeout(&mut self, run: &mut Run) {
        if let Some(event) = self.screen.as_mut().and_then(|s| s.detector.timeout()) {
            self.on_machine(run, event).await;
        }
    }

    /// What answering-machine detection found: a person is greeted; a
    /// machine is hung up on, or gets its message once the beep is over.
    async fn on_machine(&mut self, run: &mut Run, event: MachineEvent) {
        let now = run.now_ms();
        let Some(screen) = &mut self.screen else { return };
        let at = |at_ms: u64| screen.origin.map_or(now, |o| (o + at_ms as i64).min(now));
        match event {
            MachineEvent::Verdict { verdict, cause, at_ms } => {
                let by = match verdict {
                    Verdict::Human => AnsweredBy::Human,
                    Verdict::Machine => AnsweredBy::Machine,
                    Verdict::Uncertain => AnsweredBy::Uncertain,
                };
                let (cause, heard) = machine_cause(cause);
                let decided_ms = if cause == MachineCause::NoAudio { now } else { at(at_ms) };
                let beep_end_ms = screen.verdict.as_ref().and_then(|(_, d)| d.beep_end_ms);
                let detection = MachineDetection { cause, heard, decided_ms, beep_end_ms, message_left: false };
                let revised = screen.verdict.replace((by, detection.clone())).is_some();
                let holds = screen.holds();
                let hang_up = screen.policy.on_machine == OnMachine::HangUp
                    || (detection.cause == MachineCause::Screening && !screen.policy.answer_screening);
                let _ = run.progress.send(Progress::Answerer { by, detection }).await;
                if !holds {
                    self.greeting_wait_over(run);
                    return;
                }
                // A machine after all ("Hello" was its greeting's first
                // word): the agent stops whatever it began saying.
                if revised {
                    self.after_greeting = None;
                    self.waiting_greeting = None;
                    if self.speaking.is_some() || self.playing.is_some() {
                        self.interrupt(run, now).await;
                    }
                }
                if hang_up {
                    self.waiting_greeting = None;
                    run.act(Action::EndCall).await;
                }
            }
            MachineEvent::BeepEnded { at_ms, .. } => {
                let end = at(at_ms);
                if let Some((_, d)) = &mut screen.verdict {
                    d.beep_end_ms = Some(end);
                }
            }
            MachineEvent::BeepStarted { .. } => {}
            MachineEvent::Ready { .. } => {
                let OnMachine::LeaveMessage(message) = screen.policy.on_machine.clone() else { return };
                if !screen.holds() || screen.message_turn.is_some() || run.ending.is_some() {
                    return;
                }
                self.waiting_greeting = None;
                let turn = futures::stream::iter([Output::TextDelta(message), Output::EndCall, Output::EndOfTurn]);
                self.speak_timed(run, turn.boxed(), None, true);
                if let Some(screen) = &mut self.screen {
                    screen.message_turn = Some(self.turn);
                }
            }
        }
    }

    fn speak_greeting(&mut self, run: &mut Run, greeting: String) {
        let turn = futures::stream::iter([Output::TextDelta(greeting), Output::EndOfTurn]).boxed();
        self.speak_timed(run, turn, None, true);
    }

    /// Whether the greeting is being said, and may not be interrupted.
    fn greeting_protected(&self, now: i64) -> bool {
        self.speaking.as_ref().is_some_and(|s| s.protected)
            || self.playing.as_ref().is_some_and(|p| p.protected && now < p.end_ms)
    }

    /// The greeting has been said: what the callee asked over it is answered.
    fn greeting_over(&mut self, run: &mut Run) {
        if let Some(text) = self.after_greeting.take() {
            self.answer(run, text, None);
        }
    }

    /// The agent answers the caller's words.
    fn answer(&mut self, run: &mut Run, text: String, timing: Option<Timing>) {
        let turn = run.agent.respond(Input::UserSaid(text));
        self.speak_timed(run, turn, timing, false);
    }

    /// Starts speaking an agent turn: its text goes to the synthesiser as
    /// it streams, the frames come back to be played.
    pub(crate) fn speak(&mut self, run: &mut Run, turn: BoxStream<'static, Output>) {
        self.speak_timed(run, turn, None, false);
    }

    /// [`Live::speak`], timing the turn when it answers the caller.
    fn speak_timed(
        &mut self,
        run: &mut Run,
        turn: BoxStream<'static, Output>,
        timing: Option<Timing>,
        protected: bool,
    ) {
        if let Some(previous) = self.speaking.take() {
            previous.task.abort();
        }
        self.turn += 1;
        let id = self.turn;
        let task = tokio::spawn(speak_turn(id, turn, run.voice.clone(), self.tx.clone()));
        let text = String::new();
        self.speaking = Some(Speaking { turn: id, task, start_ms: None, text, action: None, timing, protected });
    }

    /// The call is over: the caller's last words are still transcribed
    /// (those being heard, and an utterance cut off by the hang-up) and
    /// written, for at most `LAST_WORDS`, without an answer.
    pub(crate) async fn hear_last_words(&mut self, run: &mut Run) {
        std::mem::take(&mut self.early).abandon();
        if let Some((start_ms, audio)) = self.utterance.take()
            && audio.len() >= crate::speech::FRAME_SAMPLES * 10
        {
            let (transcriber, tx, end_ms) = (run.transcriber.clone(), self.tx.clone(), run.now_ms());
            self.hearing += 1;
            tokio::spawn(async move {
                let transcript = transcribe(transcriber.as_deref(), &audio).await;
                let _ = tx.send(Message::Heard { start_ms, end_ms, speech_end_ms: end_ms, transcript }).await;
            });
        }
        let deadline = tokio::time::Instant::now() + LAST_WORDS;
        while self.hearing > 0 {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(Message::Heard { start_ms, end_ms, transcript, .. })) => {
                    self.hearing -= 1;
                    run.segment(Speaker::Caller, transcript.text, start_ms, end_ms).await;
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }

    /// The call is over: what was playing is written as far as it got.
    pub(crate) async fn stop(&mut self, run: &mut Run) {
        if let Some(s) = self.speaking.take() {
            s.task.abort();
            if let Some(start) = s.start_ms {
                let now = run.now_ms();
                let latency = s.timing.and_then(|t| t.latency());
                run.write(agent_segment(s.text.trim().to_owned(), start, now.max(start), true, latency)).await;
            }
        }
        if let Some(p) = self.playing.take() {
            let now = run.now_ms();
            let cut_short = p.end_ms > now;
            let end = p.end_ms.min(now.max(p.start_ms));
            run.write(agent_segment(p.text, p.start_ms, end, cut_short, p.latency)).await;
        }
    }
}

/// Streams one agent turn through the synthesiser.
async fn speak_turn(
    turn: u64,
    mut stream: BoxStream<'static, Output>,
    voice: Arc<dyn Synthesiser>,
    tx: mpsc::Sender<Message>,
) {
    let (text_in, mut frames) = voice.start();
    let mut text_in = Some(text_in);
    loop {
        tokio::select! {
            output = stream.next(), if text_in.is_some() => match output {
                Some(Output::TextDelta(delta)) => {
                    let _ = tx.send(Message::Text { turn, delta: delta.clone() }).await;
                    if let Some(input) = &text_in && input.send(delta).await.is_err() {
                        text_in = None;
                    }
                }
                Some(Output::EndCall) => {
                    let _ = tx.send(Message::Act { turn, action: Action::EndCall }).await;
                }
                Some(Output::Transfer(to)) => {
                    let _ = tx.send(Message::Act { turn, action: Action::Transfer(to) }).await;
                }
                Some(Output::ToolCall { .. }) => {}
                Some(Output::EndOfTurn) | None => text_in = None,
            },
            frame = frames.recv() => match frame {
                Some(frame) => {
                    if tx.send(Message::Frame { turn, frame }).await.is_err() {
                        return;
                    }
                }
                None => break,
            },
        }
    }
    let _ = tx.send(Message::Spoken { turn }).await;
}

/// An agent segment.
fn agent_segment(
    text: String,
    start_ms: i64,
    end_ms: i64,
    interrupted: bool,
    latency: Option<TurnLatency>,
) -> TranscriptSegment {
    TranscriptSegment {
        index: 0,
        speaker: Speaker::Agent,
        text,
        start_ms,
        end_ms,
        interrupted,
        words: Vec::new(),
        latency,
    }
}

/// Whether `text` is only what people say as they pick up ("Hello?",
/// "Yes, speaking", "Who is this?"): the greeting answers it.
fn pick_up_words(text: &str) -> bool {
    const PICK_UP: &[&str] = &[
        "hello",
        "hallo",
        "hullo",
        "hi",
        "hey",
        "hiya",
        "yes",
        "yeah",
        "yep",
        "yup",
        "speaking",
        "good",
        "morning",
        "afternoon",
        "evening",
        "who",
        "whos",
        "who's",
        "is",
        "this",
        "it",
        "its",
        "it's",
        "there",
        "oh",
        "um",
        "uh",
        "ok",
        "okay",
        "the",
        "calling",
    ];
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'').to_lowercase())
        .filter(|w| !w.is_empty())
        .all(|w| PICK_UP.contains(&w.as_str()))
}

/// The first share of `text`'s words (at least one word once any was played).
fn words_within(text: &str, share: f64) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let n = ((words.len() as f64) * share).ceil() as usize;
    words[..n.min(words.len())].join(" ")
}

#[cfg(test)]
mod tests {
    use super::{pick_up_words, words_within};

    #[test]
    fn pick_up_words_are_told_from_a_question() {
        for said in ["Hello?", "Hi, yes, speaking.", "Who is this?", "Hello, who's calling?", "Good morning!"] {
            assert!(pick_up_words(said), "{said}");
        }
        for said in ["Hello, is my order ready?", "Yes, I wanted to ask about my bill", "Can you hear me?"] {
            assert!(!pick_up_words(said), "{said}");
        }
    }

    #[test]
    fn a_trimmed_segment_keeps_the_words_played() {
        assert_eq!(words_within("one two three four", 0.5), "one two");
        assert_eq!(words_within("one two three four", 0.1), "one");
        assert_eq!(words_within("one two three four", 1.0), "one two three four");
        assert_eq!(words_within("one two", 0.0), "");
    }
}
