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
use crate::session::{AgentSession, Input, reply_text};
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

pub(crate) struct Run {
    pub(crate) agent: Box<dyn AgentSession>,
    pub(crate) voice: Arc<dyn Synthesiser>,
    pub(crate) transcriber: Option<Arc<dyn Transcriber>>,
    pub(crate) commands: mpsc::Sender<Command>,
    progress: mpsc::Sender<Progress>,
    /// From the answer on, when recording.
    pub(crate) recorder: Option<Recorder>,
    pub(crate) segments: Vec<Segment>,
    answered: Option<Instant>,
    /// When the agent's queued speech ends (ms from the answer).
    pub(crate) agent_until_ms: i64,
}

impl Run {
    pub(crate) fn now_ms(&self) -> i64 {
        self.answered.map_or(0, |t| t.elapsed().as_millis() as i64)
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
        let s = Segment { index: self.segments.len() as i64, speaker, text, start_ms, end_ms, interrupted };
        self.segments.push(s.clone());
        let _ = self.progress.send(Progress::Segment(s)).await;
    }

    /// Writes the recording up to [`RECORDING_WINDOW`] ago; on a write
    /// failure the call goes on unrecorded.
    fn flush_recording(&mut self) {
        let upto = self.now_ms() - RECORDING_WINDOW.as_millis() as i64;
        if let Some(r) = &mut self.recorder
            && let Err(e) = r.flush_before(upto)
        {
            tracing::error!(error = %e, "could not write a call's recording; the call goes on unrecorded");
            self.recorder = None;
        }
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
        self.segment(Speaker::Caller, text.clone(), start, end).await;
        let reply = reply_text(self.agent.respond(Input::UserSaid(text))).await;
        if !reply.is_empty() {
            self.say(reply).await;
        }
    }

    /// The caller's speech as text, through the transcriber if there is one.
    async fn transcribe(&mut self, audio: &Pcm) -> String {
        transcribe(self.transcriber.as_deref(), audio).await
    }
}

/// An utterance's text: the transcriber's final transcript, or
/// `[inaudible]` without a transcriber or a transcript.
pub(crate) async fn transcribe(transcriber: Option<&dyn Transcriber>, audio: &Pcm) -> String {
    let Some(transcriber) = transcriber else { return "[inaudible]".to_owned() };
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
            last = Some(t.text);
        }
    }
    last.filter(|t| !t.trim().is_empty()).unwrap_or_else(|| "[inaudible]".to_owned())
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
        segments: Vec::new(),
        answered: None,
        agent_until_ms: 0,
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
                Some(ProviderEvent::Dtmf(_)) => {}
                Some(ProviderEvent::Ended(end)) => break match (end, run.answered.is_some()) {
                    (FarEnd::HungUp, true) => (CallStatus::Completed, EndedReason::CallerHangup),
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
            _ = flush.tick() => run.flush_recording(),
            _ = tokio::time::sleep_until(deadline) => {
                let _ = run.commands.send(Command::Hangup).await;
                break (CallStatus::Completed, EndedReason::MaxDuration);
            }
        }
    };
    live.stop(&mut run).await;
    let duration_ms = run.now_ms();
    let recording = match run.recorder.take().map(|r| r.finish(duration_ms)) {
        Some(Ok(recording)) => Some(recording),
        Some(Err(e)) => {
            tracing::error!(error = %e, "could not finish a call's recording");
            None
        }
        None => None,
    };
    Outcome { status, reason, duration_ms, recording, segments: run.segments }
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
                    let partial = crate::speech::Transcript { text: format!("{n}"), is_final: false };
                    let _ = text_tx.send(partial).await;
                }
                let _ = text_tx.send(crate::speech::Transcript { text: format!("{n} samples"), is_final: true }).await;
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
