//! Runs one call from dial to end: follows the provider's events, lets the
//! agent speak, writes the transcript as speech finishes, records both
//! sides, and stops at the caller's hangup, the owner's hangup or the
//! maximum duration.

use std::sync::Arc;
use std::time::Duration;

use parley_domain::call::{CallStatus, EndedReason, Speaker, TranscriptSegment};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::audio::{Recorder, Recording, Voice, duration_ms};
use crate::live::Live;
use crate::provider::{Command, FarEnd, Pcm, Placed, ProviderEvent};
use crate::session::{AgentSession, Input, Output};
use crate::speech::{Synthesiser, ToneVoice, Transcriber, synthesise};

/// One finished piece of speech, timed from the answer.
pub type Segment = TranscriptSegment;

/// What the engine reports while a call runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    Ringing,
    Answered,
    /// Reported when the speech has finished (or, for the agent, is queued).
    Segment(Segment),
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub status: CallStatus,
    pub reason: EndedReason,
    /// From answer to end; 0 if never answered.
    pub duration_ms: i64,
    pub recording: Option<Recording>,
    pub segments: Vec<Segment>,
    /// Where the agent transferred the call, if it did.
    pub transfer_to: Option<String>,
}

#[derive(Clone)]
pub struct Options {
    pub max_duration: Duration,
    /// Where to write the recording (a new file, created when the call is
    /// answered); `None` records nothing.
    pub recording: Option<std::path::PathBuf>,
    /// The agent's voice.
    pub voice: Arc<dyn Synthesiser>,
    /// Recognises the caller's speech when the provider sends audio only;
    /// without one such speech is transcribed `[inaudible]`.
    pub transcriber: Option<Arc<dyn Transcriber>>,
    /// How live audio ([`ProviderEvent::Audio`]) is cut into turns, and
    /// how long the caller must talk over the agent to interrupt it.
    pub listening: crate::live::Listening,
}

impl Options {
    /// The builtin tone voice and no transcriber.
    pub fn new(max_duration: Duration, recording: Option<std::path::PathBuf>) -> Self {
        Self {
            max_duration,
            recording,
            voice: Arc::new(ToneVoice(Voice::Agent)),
            transcriber: None,
            listening: crate::live::Listening::default(),
        }
    }
}

/// How far behind the present the recording is written: caller speech
/// arrives when an utterance ends, so an utterance longer than this loses
/// its beginning in the recording (not in the transcript).
pub const RECORDING_WINDOW: Duration = Duration::from_secs(60);
/// The same over live audio, which is recorded as it arrives: the file on
/// disk trails the call by this much (and by the 1 s between writes).
pub const LIVE_RECORDING_WINDOW: Duration = Duration::from_secs(2);

pub(crate) struct Run {
    pub(crate) agent: Box<dyn AgentSession>,
    pub(crate) voice: Arc<dyn Synthesiser>,
    pub(crate) transcriber: Option<Arc<dyn Transcriber>>,
    pub(crate) commands: mpsc::Sender<Command>,
    progress: mpsc::Sender<Progress>,
    /// From the answer on, when recording.
    pub(crate) recorder: Option<Recorder>,
    /// How far behind the present the recording is written.
    recording_window: Duration,
    pub(crate) segments: Vec<Segment>,
    answered: Option<Instant>,
    /// When the agent's queued speech ends (ms from the answer).
    pub(crate) agent_until_ms: i64,
    /// When the caller last stopped speaking (ms from the answer).
    pub(crate) caller_until_ms: i64,
    /// What the agent asked to do once its words are heard, and when.
    pending: Option<(Action, i64)>,
    /// How the agent ended the call, once it did.
    ending: Option<Action>,
    /// Keys pressed and not yet given to the agent, and when to give them.
    keys: String,
    keys_due: Option<Instant>,
    /// Whether the caller was prompted in the current silence.
    pub(crate) reprompted: bool,
}

/// What an agent's turn can do to the call (its `end_call` and
/// `transfer_call` tools).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    EndCall,
    Transfer(String),
}

/// How long after the last key the keys pressed go to the agent (`#` sends them at once).
const KEYS_PAUSE: Duration = Duration::from_millis(1500);

impl Run {
    pub(crate) fn now_ms(&self) -> i64 {
        self.answered.map_or(0, |t| t.elapsed().as_millis() as i64)
    }

    /// The instant `ms` after the answer.
    fn instant_of(&self, ms: i64) -> Instant {
        self.answered.map_or_else(Instant::now, |t| t + Duration::from_millis(ms.max(0) as u64))
    }

    pub(crate) async fn segment(&mut self, speaker: Speaker, text: String, start_ms: i64, end_ms: i64) {
        self.segment_with(speaker, text, start_ms, end_ms, false).await;
    }

    pub(crate) async fn segment_with(
        &mut self,
        speaker: Speaker,
        text: String,
        start_ms: i64,
        end_ms: i64,
        interrupted: bool,
    ) {
        let s = Segment { index: 0, speaker, text, start_ms, end_ms, interrupted, words: Vec::new(), latency: None };
        self.write(s).await;
    }

    /// Writes a segment, numbered next.
    pub(crate) async fn write(&mut self, mut s: Segment) {
        s.index = self.segments.len() as i64;
        self.segments.push(s.clone());
        let _ = self.progress.send(Progress::Segment(s)).await;
    }

    /// Writes the recording up to its window ago ([`RECORDING_WINDOW`],
    /// [`LIVE_RECORDING_WINDOW`]); on a write
    /// failure the call goes on unrecorded.
    fn flush_recording(&mut self) {
        let upto = self.now_ms() - self.recording_window.as_millis() as i64;
        if let Some(r) = &mut self.recorder
            && let Err(e) = r.flush_before(upto)
        {
            tracing::error!(error = %e, "could not write a call's recording; the call goes on unrecorded");
            self.recorder = None;
        }
    }

    /// Asks the agent to act on its turn's end: once the words queued so
    /// far have been heard.
    pub(crate) fn act_after_speech(&mut self, action: Action) {
        self.pending = Some((action, self.agent_until_ms));
    }

    /// Forgets what the agent asked to do (the caller interrupted it).
    pub(crate) fn cancel_action(&mut self) {
        self.pending = None;
    }

    /// Carries out what the agent asked: hang up, or transfer.
    async fn act(&mut self, action: Action) {
        let command = match &action {
            Action::EndCall => Command::Hangup,
            Action::Transfer(to) => Command::Transfer(to.clone()),
        };
        self.ending = Some(action);
        let _ = self.commands.send(command).await;
    }

    /// The caller is quiet and the agent has nothing to say.
    pub(crate) fn silence_since(&self) -> i64 {
        self.agent_until_ms.max(self.caller_until_ms)
    }

    /// The agent says `text`: played to the caller after what it is already saying.
    async fn say(&mut self, text: String) {
        let pcm = synthesise(self.voice.as_ref(), &text).await;
        let start = self.now_ms().max(self.agent_until_ms);
        let end = start + duration_ms(pcm.len());
        if let Some(r) = &mut self.recorder {
            r.put(Voice::Agent, start, &pcm);
        }
        self.agent_until_ms = end;
        let _ = self.commands.send(Command::Play(pcm)).await;
        self.segment(Speaker::Agent, text, start, end).await;
    }

    async fn heard(&mut self, audio: Vec<i16>, text: Option<String>) {
        let end = self.now_ms();
        let start = (end - duration_ms(audio.len())).max(0);
        if let Some(r) = &mut self.recorder {
            r.put(Voice::Caller, start, &audio);
        }
        // The caller spoke over the agent: the agent's last words were cut off.
        if start < self.agent_until_ms
            && let Some(last) = self.segments.iter_mut().rev().find(|s| s.speaker == Speaker::Agent)
        {
            last.interrupted = true;
        }
        let text = match text {
            Some(text) => text,
            None => self.transcribe(&audio).await,
        };
        self.caller_until_ms = end;
        self.reprompted = false;
        self.segment(Speaker::Caller, text.clone(), start, end).await;
        self.answer(Input::UserSaid(text)).await;
    }

    /// The agent's whole turn, said (calls without live audio).
    async fn answer(&mut self, input: Input) {
        let mut turn = self.agent.respond(input);
        let (mut reply, mut action) = (String::new(), None);
        while let Some(output) = futures::StreamExt::next(&mut turn).await {
            match output {
                Output::TextDelta(t) => reply.push_str(&t),
                Output::EndCall => action = Some(Action::EndCall),
                Output::Transfer(to) => action = Some(Action::Transfer(to)),
                Output::ToolCall { .. } | Output::EndOfTurn => {}
            }
        }
        if !reply.is_empty() {
            self.say(reply).await;
        }
        if let Some(action) = action {
            self.act_after_speech(action);
        }
    }

    /// The caller's speech as text, through the transcriber if there is one.
    async fn transcribe(&mut self, audio: &Pcm) -> String {
        transcribe(self.transcriber.as_deref(), audio).await.text
    }
}

/// An utterance's final transcript: the transcriber's, or `[inaudible]`
/// without a transcriber or a transcript.
pub(crate) async fn transcribe(transcriber: Option<&dyn Transcriber>, audio: &Pcm) -> parley_speech::Transcript {
    let inaudible = || parley_speech::Transcript::final_text("[inaudible]".to_owned());
    let Some(transcriber) = transcriber else { return inaudible() };
    let (frames, mut transcripts) = transcriber.start();
    for frame in audio.chunks(crate::speech::FRAME_SAMPLES) {
        if frames.send(frame.to_vec()).await.is_err() {
            break;
        }
    }
    drop(frames);
    let mut last = None;
    while let Some(t) = transcripts.recv().await {
        if t.is_final {
            last = Some(t);
        }
    }
    last.filter(|t| !t.text.trim().is_empty()).unwrap_or_else(inaudible)
}

/// Runs a placed call until it ends. `hangup` ends it from Parley's side.
pub async fn run(
    placed: Placed,
    agent: Box<dyn AgentSession>,
    options: Options,
    progress: mpsc::Sender<Progress>,
    mut hangup: oneshot::Receiver<()>,
) -> Outcome {
    let Placed { mut events, commands, .. } = placed;
    let mut run = Run {
        agent,
        voice: options.voice.clone(),
        transcriber: options.transcriber.clone(),
        commands,
        progress,
        recorder: None,
        recording_window: if options.listening.live { LIVE_RECORDING_WINDOW } else { RECORDING_WINDOW },
        segments: Vec::new(),
        answered: None,
        agent_until_ms: 0,
        caller_until_ms: 0,
        pending: None,
        ending: None,
        keys: String::new(),
        keys_due: None,
        reprompted: false,
    };
    let mut live = Live::new(options.listening);
    // The recording keeps the last RECORDING_WINDOW in memory and writes the rest.
    let mut flush = tokio::time::interval(Duration::from_secs(1));
    let far_off = Instant::now() + Duration::from_secs(365 * 24 * 3600);
    let mut deadline = far_off;
    let (status, reason) = loop {
        tokio::select! {
            event = events.recv() => match event {
                Some(ProviderEvent::Ringing) => { let _ = run.progress.send(Progress::Ringing).await; }
                Some(ProviderEvent::Answered) => {
                    run.answered = Some(Instant::now());
                    run.recorder = options.recording.as_deref().and_then(|path| {
                        Recorder::create(path)
                            .map_err(|e| tracing::error!(error = %e, "could not start a call's recording"))
                            .ok()
                    });
                    deadline = Instant::now() + options.max_duration;
                    let _ = run.progress.send(Progress::Answered).await;
                    if let Some(greeting) = run.agent.greeting() {
                        if options.listening.live {
                            live.speak_text(&mut run, greeting);
                        } else {
                            run.say(greeting).await;
                        }
                    }
                }
                Some(ProviderEvent::Heard { audio, text }) => run.heard(audio, text).await,
                Some(ProviderEvent::Audio(frame)) => live.audio(&mut run, frame).await,
                Some(ProviderEvent::Dtmf(key)) => {
                    run.keys.push(key);
                    run.keys_due = Some(if key == '#' { Instant::now() } else { Instant::now() + KEYS_PAUSE });
                }
                Some(ProviderEvent::Ended(end)) => break match (end, run.answered.is_some()) {
                    (FarEnd::HungUp, true) => match &run.ending {
                        Some(Action::EndCall) => (CallStatus::Completed, EndedReason::AgentHangup),
                        Some(Action::Transfer(_)) => (CallStatus::Completed, EndedReason::Transferred),
                        None => (CallStatus::Completed, EndedReason::CallerHangup),
                    },
                    (FarEnd::HungUp, false) => (CallStatus::Canceled, EndedReason::Canceled),
                    (FarEnd::Busy, _) => (CallStatus::Busy, EndedReason::Busy),
                    (FarEnd::NoAnswer, _) => (CallStatus::NoAnswer, EndedReason::NoAnswer),
                    (FarEnd::Failed, _) => (CallStatus::Failed, EndedReason::Error),
                },
                // The provider went away without ending the call.
                None => break (CallStatus::Failed, EndedReason::Error),
            },
            _ = &mut hangup => {
                let _ = run.commands.send(Command::Hangup).await;
                break if run.answered.is_some() {
                    (CallStatus::Completed, EndedReason::AgentHangup)
                } else {
                    (CallStatus::Canceled, EndedReason::Canceled)
                };
            }
            Some(message) = live.next() => live.handle(&mut run, message).await,
            _ = sleep_until_opt(run.keys_due) => {
                run.keys_due = None;
                let keys = std::mem::take(&mut run.keys);
                let now = run.now_ms();
                run.caller_until_ms = now;
                run.reprompted = false;
                run.segment(Speaker::Caller, format!("[pressed {keys}]"), now, now).await;
                respond(&mut run, &mut live, options.listening.live, Input::Keys(keys)).await;
            }
            _ = sleep_until_opt(run.pending.as_ref().map(|(_, at)| run.instant_of(*at))) => {
                if let Some((action, _)) = run.pending.take() {
                    live.stop(&mut run).await;
                    run.act(action).await;
                }
            }
            _ = flush.tick() => {
                run.flush_recording();
                let now = run.now_ms();
                live.finish_played(&mut run, now).await;
                if run.answered.is_some() && run.ending.is_none() && run.pending.is_none() && !live.busy() {
                    let quiet = run.now_ms() - run.silence_since();
                    let listening = options.listening;
                    if listening.silence_hangup_ms.is_some_and(|m| quiet >= m) {
                        run.act(Action::EndCall).await;
                    } else if !run.reprompted && listening.silence_reprompt_ms.is_some_and(|m| quiet >= m) {
                        run.reprompted = true;
                        respond(&mut run, &mut live, listening.live, Input::Timeout).await;
                    }
                }
            }
            _ = tokio::time::sleep_until(deadline) => {
                let _ = run.commands.send(Command::Hangup).await;
                break (CallStatus::Completed, EndedReason::MaxDuration);
            }
        }
    };
    live.stop(&mut run).await;
    live.hear_last_words(&mut run).await;
    let duration_ms = run.now_ms();
    let recording = match run.recorder.take().map(|r| r.finish(duration_ms)) {
        Some(Ok(recording)) => Some(recording),
        Some(Err(e)) => {
            tracing::error!(error = %e, "could not finish a call's recording");
            None
        }
        None => None,
    };
    let transfer_to = match run.ending {
        Some(Action::Transfer(to)) if reason == EndedReason::Transferred => Some(to),
        _ => None,
    };
    Outcome { status, reason, duration_ms, recording, segments: run.segments, transfer_to }
}

/// The agent answers `input`: streamed (live audio) or said whole.
async fn respond(run: &mut Run, live: &mut Live, streamed: bool, input: Input) {
    if streamed {
        let turn = run.agent.respond(input);
        live.speak(run, turn);
    } else {
        run.answer(input).await;
    }
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{Dial, Provider};
    use crate::session::BuiltinAgent;
    use crate::simulated::{self, Simulated};

    async fn call(to: &str, hang_up_after: Option<Duration>) -> (Vec<Progress>, Outcome) {
        let provider = Simulated::default();
        let placed = provider
            .dial(Dial {
                call_id: "call_x".into(),
                from: None,
                to: to.into(),
                ring_timeout: Duration::from_millis(800),
            })
            .await
            .unwrap();
        let (tx, mut rx) = mpsc::channel(64);
        let (hang, hangup) = oneshot::channel();
        if let Some(after) = hang_up_after {
            tokio::spawn(async move {
                tokio::time::sleep(after).await;
                let _ = hang.send(());
            });
        } else {
            std::mem::forget(hang);
        }
        let agent = Box::new(BuiltinAgent { name: "Ava".into(), first_message: Some("Hi, Ava here.".into()) });
        let dir = std::env::temp_dir().join(format!("parley-engine-{}", ulid::Ulid::new()));
        std::fs::create_dir_all(&dir).unwrap();
        let options = Options::new(Duration::from_secs(30), Some(dir.join("call.wav")));
        let outcome = run(placed, agent, options, tx, hangup).await;
        let mut seen = Vec::new();
        while let Ok(p) = rx.try_recv() {
            seen.push(p);
        }
        (seen, outcome)
    }

    #[tokio::test]
    async fn an_answered_call_has_a_dialogue_a_transcript_and_a_recording() {
        let (progress, outcome) = call("+14155550100", None).await;
        assert_eq!((outcome.status, outcome.reason), (CallStatus::Completed, EndedReason::CallerHangup));
        assert_eq!(&progress[..2], &[Progress::Ringing, Progress::Answered]);
        let said: Vec<(Speaker, &str)> = outcome.segments.iter().map(|s| (s.speaker, s.text.as_str())).collect();
        assert_eq!(
            said,
            [
                (Speaker::Agent, "Hi, Ava here."),
                (Speaker::Caller, simulated::CALLER_LINES[0]),
                (Speaker::Agent, "I understand: Hi, I am calling about my order."),
                (Speaker::Caller, simulated::CALLER_LINES[1]),
                (Speaker::Agent, "Thank you for calling. Goodbye."),
            ]
        );
        for s in &outcome.segments {
            assert!(0 <= s.start_ms && s.start_ms < s.end_ms, "{s:?}");
        }
        // Each caller line follows the agent's previous turn.
        assert!(outcome.segments[1].start_ms >= outcome.segments[0].start_ms);
        assert!(outcome.segments[3].start_ms >= outcome.segments[2].start_ms);
        let recording = outcome.recording.unwrap();
        assert_eq!(recording.duration_ms, outcome.duration_ms);
        assert!(outcome.duration_ms >= outcome.segments.last().unwrap().end_ms);
    }

    #[tokio::test]
    async fn magic_numbers_choose_the_outcome() {
        assert!(
            Simulated::default()
                .dial(Dial {
                    call_id: "c".into(),
                    from: None,
                    to: simulated::FAILS_TO_DIAL.into(),
                    ring_timeout: Duration::from_secs(1)
                })
                .await
                .is_err()
        );
        for (to, status, reason) in [
            (simulated::BUSY, CallStatus::Busy, EndedReason::Busy),
            (simulated::NO_ANSWER, CallStatus::NoAnswer, EndedReason::NoAnswer),
            (simulated::FAILS_AFTER_RINGING, CallStatus::Failed, EndedReason::Error),
        ] {
            let (_, outcome) = call(to, None).await;
            assert_eq!((outcome.status, outcome.reason, outcome.duration_ms), (status, reason, 0), "{to}");
            assert!(outcome.recording.is_none() && outcome.segments.is_empty());
        }
    }

    #[tokio::test]
    async fn hanging_up_ends_the_call_from_our_side() {
        let (_, outcome) = call("+14155550100", Some(Duration::from_millis(1500))).await;
        assert_eq!((outcome.status, outcome.reason), (CallStatus::Completed, EndedReason::AgentHangup));
        assert!(outcome.duration_ms < 1500);
        let (_, early) = call("+14155550100", Some(Duration::from_millis(300))).await;
        assert_eq!((early.status, early.reason), (CallStatus::Canceled, EndedReason::Canceled));
    }

    /// Recognises every utterance as "N samples".
    struct Counting;

    impl Transcriber for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }

        fn start(&self) -> (mpsc::Sender<Pcm>, mpsc::Receiver<crate::speech::Transcript>) {
            let (audio_tx, mut audio_rx) = mpsc::channel::<Pcm>(16);
            let (text_tx, text_rx) = mpsc::channel(16);
            tokio::spawn(async move {
                let mut n = 0;
                while let Some(frame) = audio_rx.recv().await {
                    n += frame.len();
                    let partial = crate::speech::Transcript { text: format!("{n}"), is_final: false, words: vec![] };
                    let _ = text_tx.send(partial).await;
                }
                let _ = text_tx.send(crate::speech::Transcript::final_text(format!("{n} samples"))).await;
            });
            (audio_tx, text_rx)
        }
    }

    #[tokio::test]
    async fn speech_without_text_goes_through_the_transcriber() {
        let (events_tx, events) = mpsc::channel(8);
        let (commands, mut played) = mpsc::channel(64);
        tokio::spawn(async move { while played.recv().await.is_some() {} });
        let placed = Placed { provider_call_id: "p".into(), events, commands };
        events_tx.send(ProviderEvent::Answered).await.unwrap();
        events_tx.send(ProviderEvent::Heard { audio: vec![100; 1600], text: None }).await.unwrap();
        events_tx.send(ProviderEvent::Heard { audio: vec![100; 800], text: None }).await.unwrap();
        events_tx.send(ProviderEvent::Ended(FarEnd::HungUp)).await.unwrap();
        let mut options = Options::new(Duration::from_secs(30), None);
        options.transcriber = Some(Arc::new(Counting));
        let agent = Box::new(BuiltinAgent { name: "Ava".into(), first_message: Some("Hi.".into()) });
        let (progress, _rx) = mpsc::channel(64);
        let (_hang, hangup) = oneshot::channel();
        let outcome = run(placed, agent, options, progress, hangup).await;
        let caller: Vec<&str> =
            outcome.segments.iter().filter(|s| s.speaker == Speaker::Caller).map(|s| s.text.as_str()).collect();
        assert_eq!(caller, ["1600 samples", "800 samples"]);
        assert!(outcome.segments.iter().any(|s| s.text == "I understand: 1600 samples."));
    }
}
