//! One running call's state, shared by the engine (which drives the call
//! from the provider's events) and the live-audio listener (which cuts
//! the caller's audio into turns): the transcript written as speech
//! finishes, the recorder, the agent's pending action, keys pressed. Both
//! depend on this module and not on each other.

use std::sync::Arc;
use std::time::Duration;

use parley_domain::call::{Speaker, TranscriptSegment};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::audio::{Recorder, Voice, duration_ms};
use crate::provider::{Command, Pcm};
use crate::session::{AgentSession, Input, Output};
use crate::speech::{Synthesiser, Transcriber, synthesise};

/// One finished piece of speech, timed from the answer.
pub type Segment = TranscriptSegment;

/// What the engine reports while a call runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    Ringing,
    Answered,
    /// Reported when the speech has finished (or, for the agent, is queued).
    Segment(Segment),
    /// Answering-machine detection's verdict (a second one revises it).
    Answerer {
        by: parley_domain::call::AnsweredBy,
        detection: parley_domain::call::MachineDetection,
    },
}

/// A running call.
pub(crate) struct Run {
    pub(crate) agent: Box<dyn AgentSession>,
    pub(crate) voice: Arc<dyn Synthesiser>,
    pub(crate) transcriber: Option<Arc<dyn Transcriber>>,
    pub(crate) commands: mpsc::Sender<Command>,
    pub(crate) progress: mpsc::Sender<Progress>,
    /// From the answer on, when recording.
    pub(crate) recorder: Option<Recorder>,
    /// How far behind the present the recording is written.
    pub(crate) recording_window: Duration,
    pub(crate) segments: Vec<Segment>,
    pub(crate) answered: Option<Instant>,
    /// When the agent's queued speech ends (ms from the answer).
    pub(crate) agent_until_ms: i64,
    /// When the caller last stopped speaking (ms from the answer).
    pub(crate) caller_until_ms: i64,
    /// What the agent asked to do once its words are heard, and when.
    pub(crate) pending: Option<(Action, i64)>,
    /// How the agent ended the call, once it did.
    pub(crate) ending: Option<Action>,
    /// Keys pressed and not yet given to the agent, and when to give them.
    pub(crate) keys: String,
    pub(crate) keys_due: Option<Instant>,
    /// Whether the caller was prompted in the current silence.
    pub(crate) reprompted: bool,
}

/// What an agent's turn can do to the call (its `end_call` and
/// `transfer_call` tools).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    EndCall,
    Transfer(crate::session::Transfer),
}

/// How long after the last key the keys pressed go to the agent (`#` sends them at once).
pub(crate) const KEYS_PAUSE: Duration = Duration::from_millis(1500);

impl Run {
    pub(crate) fn now_ms(&self) -> i64 {
        self.answered.map_or(0, |t| t.elapsed().as_millis() as i64)
    }

    /// The instant `ms` after the answer.
    pub(crate) fn instant_of(&self, ms: i64) -> Instant {
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
    pub(crate) fn flush_recording(&mut self) {
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
    pub(crate) async fn act(&mut self, action: Action) {
        let command = match &action {
            Action::EndCall => Command::Hangup,
            Action::Transfer(t) => Command::Transfer(t.to.clone()),
        };
        self.ending = Some(action);
        let _ = self.commands.send(command).await;
    }

    /// The caller is quiet and the agent has nothing to say.
    pub(crate) fn silence_since(&self) -> i64 {
        self.agent_until_ms.max(self.caller_until_ms)
    }

    /// The agent says `text`: played to the caller after what it is already saying.
    pub(crate) async fn say(&mut self, text: String) {
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

    pub(crate) async fn heard(&mut self, audio: Vec<i16>, text: Option<String>) {
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
    pub(crate) async fn answer(&mut self, input: Input) {
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
    pub(crate) async fn transcribe(&mut self, audio: &Pcm) -> String {
        transcribe(self.transcriber.as_deref(), audio).await.text
    }
}

/// An utterance's final transcript: the transcriber's, or `[inaudible]`
/// without a transcriber or a transcript.
pub(crate) async fn transcribe(transcriber: Option<&dyn Transcriber>, audio: &Pcm) -> parley_speech::Transcript {
    match transcriber {
        Some(t) => hear(t, audio).await,
        None => None,
    }
    .unwrap_or_else(inaudible)
}

/// `[inaudible]`: what a caller's speech without words is written as.
pub(crate) fn inaudible() -> parley_speech::Transcript {
    parley_speech::Transcript::final_text("[inaudible]".to_owned())
}

/// The transcriber's final transcript of `audio`, if it heard words.
pub(crate) async fn hear(transcriber: &dyn Transcriber, audio: &[i16]) -> Option<parley_speech::Transcript> {
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
    last.filter(|t| !t.text.trim().is_empty())
}
