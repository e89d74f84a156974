//! Warm transfer: the agent dials the person the call goes to on a second
//! line while the caller holds (in silence), tells them what the call is
//! about, then joins the two lines and steps out, relaying audio both ways
//! for the rest of the call. The transcript and the recording keep it all:
//! the summary is the agent's, the person's words are `human`, the caller's
//! stay `caller`; the recording's right channel is what the caller's side
//! of Parley carried (the summary and the person). If the person does not
//! answer (or hangs up before the caller is joined), the agent goes back to
//! the caller and says so.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use parley_domain::call::Speaker;
use parley_speech::turns::TurnDetector;
use parley_speech::vad::{TurnSettings, VoiceEvent};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::audio::{Voice, duration_ms};
use crate::live::LAST_WORDS;
use crate::provider::{Command, Dial, DialError, FarEnd, Pcm, Placed, Provider, ProviderEvent};
use crate::run::{Action, Run, hear};
use crate::session::Transfer;
use crate::speech::synthesise;

/// The line a warm transfer dials the person on: the call's own provider.
#[derive(Clone)]
pub struct TransferLine {
    pub provider: Arc<dyn Provider>,
    /// Parley's id for the person's line (the provider's logs show it).
    pub call_id: String,
    /// The caller id the person sees (the number the call is on).
    pub from: Option<String>,
    /// How long the person's phone rings before the agent gives up.
    pub ring_timeout: Duration,
}

/// Quiet after the summary before the lines are joined (the person may
/// have a word to say first; it is theirs alone).
const AFTER_SUMMARY_MS: i64 = 500;

enum Stage {
    /// The person's phone is being dialled, or rings.
    Dialing(JoinHandle<Result<Placed, DialError>>),
    /// The person picked up and hears the summary, until `until_ms`.
    Briefing { until_ms: i64 },
    /// Caller and person talk; the agent is gone.
    Joined,
}

/// What happened on a warm transfer's side of the call.
pub(crate) enum Happening {
    Dialed(Result<Placed, DialError>),
    Leg(Option<ProviderEvent>),
    Said(Said),
}

/// What the engine does next.
pub(crate) enum Next {
    Continue,
    /// The person was not reached: back to the caller.
    Failed(String),
    /// The person hung up after the join: the call is over.
    Over,
}

/// A finished utterance of the caller's or the person's.
pub(crate) struct Said {
    speaker: Speaker,
    start_ms: i64,
    end_ms: i64,
    text: Option<String>,
}

/// A warm transfer under way.
pub(crate) struct Warm {
    transfer: Transfer,
    stage: Stage,
    /// The person's line, once dialled.
    leg: Option<(mpsc::Receiver<ProviderEvent>, mpsc::Sender<Command>)>,
    answered: bool,
    caller: Scribe,
    person: Scribe,
    said_tx: mpsc::Sender<Said>,
    said_rx: mpsc::Receiver<Said>,
}

impl Warm {
    /// Dials the person; the caller holds from now on.
    pub(crate) fn start(line: &TransferLine, transfer: Transfer, turns: TurnSettings) -> Warm {
        let dial = Dial {
            call_id: line.call_id.clone(),
            from: line.from.clone(),
            to: transfer.to.clone(),
            ring_timeout: line.ring_timeout,
        };
        let provider = line.provider.clone();
        let dialing = tokio::spawn(async move { provider.dial(dial).await });
        let (said_tx, said_rx) = mpsc::channel(64);
        Warm {
            transfer,
            stage: Stage::Dialing(dialing),
            leg: None,
            answered: false,
            caller: Scribe::new(Speaker::Caller, turns),
            person: Scribe::new(Speaker::Human, turns),
            said_tx,
            said_rx,
        }
    }

    /// Where the call is going.
    pub(crate) fn to(&self) -> &str {
        &self.transfer.to
    }

    /// Whether caller and person are joined.
    pub(crate) fn joined(&self) -> bool {
        matches!(self.stage, Stage::Joined)
    }

    /// The next thing that happens on the transfer's side.
    pub(crate) async fn next(&mut self) -> Happening {
        let Warm { stage, leg, said_rx, .. } = self;
        let dialed = leg.is_some();
        tokio::select! {
            dialed = async {
                match stage {
                    Stage::Dialing(handle) if !dialed => handle.await,
                    _ => std::future::pending().await,
                }
            } => Happening::Dialed(dialed.unwrap_or_else(|e| Err(DialError(format!("the dial stopped: {e}"))))),
            event = async {
                match leg {
                    Some((events, _)) => events.recv().await,
                    None => std::future::pending().await,
                }
            } => Happening::Leg(event),
            Some(said) = said_rx.recv() => Happening::Said(said),
        }
    }

    /// When the lines are to be joined (the summary has been heard).
    pub(crate) fn join_at(&self) -> Option<i64> {
        match self.stage {
            Stage::Briefing { until_ms } => Some(until_ms),
            _ => None,
        }
    }

    /// Acts on what happened.
    pub(crate) async fn on(&mut self, run: &mut Run, happening: Happening) -> Next {
        match happening {
            Happening::Dialed(Ok(placed)) => {
                self.leg = Some((placed.events, placed.commands));
                Next::Continue
            }
            Happening::Dialed(Err(e)) => Next::Failed(format!("the call could not be placed ({e})")),
            Happening::Leg(Some(ProviderEvent::Answered)) => {
                self.answered = true;
                self.brief(run).await;
                Next::Continue
            }
            Happening::Leg(Some(ProviderEvent::Audio(frame))) => {
                self.person_audio(run, frame).await;
                Next::Continue
            }
            Happening::Leg(Some(ProviderEvent::Ended(end))) => match (&self.stage, end) {
                (Stage::Joined, _) => Next::Over,
                (_, _) if self.answered => Next::Failed("they hung up before the caller was put through".into()),
                (_, FarEnd::Busy) => Next::Failed("the line was busy".into()),
                (_, FarEnd::NoAnswer) => Next::Failed("nobody answered".into()),
                (_, FarEnd::HungUp) => Next::Failed("the call was refused".into()),
                (_, FarEnd::Failed) => Next::Failed("the call failed".into()),
            },
            Happening::Leg(None) => match self.stage {
                Stage::Joined => Next::Over,
                _ => Next::Failed("the line went away".into()),
            },
            Happening::Leg(Some(_)) => Next::Continue,
            Happening::Said(said) => {
                if let Some(text) = said.text {
                    run.segment(said.speaker, text, said.start_ms, said.end_ms).await;
                }
                Next::Continue
            }
        }
    }

    /// The summary has been heard: caller and person are joined, and the
    /// call counts as transferred from now on.
    pub(crate) fn join(&mut self, run: &mut Run) {
        self.stage = Stage::Joined;
        run.ending = Some(Action::Transfer(self.transfer.clone()));
    }

    /// The person picked up: the agent tells them what the call is about.
    async fn brief(&mut self, run: &mut Run) {
        let summary = self.transfer.summary.clone().unwrap_or_default();
        let pcm = synthesise(run.voice.as_ref(), &summary).await;
        let start = run.now_ms();
        let end = start + duration_ms(pcm.len());
        if let Some(r) = &mut run.recorder {
            r.put(Voice::Agent, start, &pcm);
        }
        if let Some((_, commands)) = &self.leg {
            let _ = commands.send(Command::Play(pcm)).await;
        }
        self.stage = Stage::Briefing { until_ms: end + AFTER_SUMMARY_MS };
        run.segment(Speaker::Agent, summary, start, end).await;
    }

    /// A frame of the caller's: to the person once joined; heard and recorded.
    pub(crate) async fn caller_audio(&mut self, run: &mut Run, frame: Pcm) {
        let now = run.now_ms();
        if let Some(r) = &mut run.recorder {
            r.put(Voice::Caller, now - duration_ms(frame.len()), &frame);
        }
        self.caller.push(run, now, &frame, &self.said_tx);
        if self.joined()
            && let Some((_, commands)) = &self.leg
        {
            let _ = commands.send(Command::Play(frame)).await;
        }
    }

    /// A frame of the person's: to the caller once joined; heard and recorded.
    async fn person_audio(&mut self, run: &mut Run, frame: Pcm) {
        let now = run.now_ms();
        if let Some(r) = &mut run.recorder {
            r.put(Voice::Agent, now - duration_ms(frame.len()), &frame);
        }
        self.person.push(run, now, &frame, &self.said_tx);
        if self.joined() {
            let _ = run.commands.send(Command::Play(frame)).await;
        }
    }

    /// Hangs up the person's line (the call is over, or not theirs).
    pub(crate) async fn hang_up(&mut self) {
        match &mut self.stage {
            Stage::Dialing(handle) if self.leg.is_none() => handle.abort(),
            _ => {}
        }
        if let Some((_, commands)) = &self.leg {
            let _ = commands.send(Command::Hangup).await;
        }
    }

    /// Writes the words still being transcribed (the call is ending).
    pub(crate) async fn finish(mut self, run: &mut Run) {
        self.hang_up().await;
        for scribe in [&mut self.caller, &mut self.person] {
            scribe.flush(run, &self.said_tx);
        }
        drop(self.said_tx);
        let deadline = tokio::time::Instant::now() + LAST_WORDS;
        while let Ok(Some(said)) = tokio::time::timeout_at(deadline, self.said_rx.recv()).await {
            if let Some(text) = said.text {
                run.segment(said.speaker, text, said.start_ms, said.end_ms).await;
            }
        }
    }
}

/// Cuts one side's audio into utterances and transcribes each.
struct Scribe {
    speaker: Speaker,
    detector: TurnDetector,
    /// Audio kept from before speech is detected (its first syllable).
    preroll: VecDeque<i16>,
    utterance: Option<(i64, Vec<i16>)>,
}

/// Audio kept before speech starts, in samples (200 ms).
const PREROLL: usize = 1600;

impl Scribe {
    fn new(speaker: Speaker, turns: TurnSettings) -> Scribe {
        Scribe { speaker, detector: TurnDetector::silence(turns), preroll: VecDeque::new(), utterance: None }
    }

    fn push(&mut self, run: &Run, now: i64, frame: &[i16], said: &mpsc::Sender<Said>) {
        self.preroll.extend(frame.iter().copied());
        while self.preroll.len() > PREROLL {
            self.preroll.pop_front();
        }
        if let Some((_, audio)) = &mut self.utterance {
            audio.extend_from_slice(frame);
        }
        for event in self.detector.push(frame) {
            match event {
                VoiceEvent::Started { .. } => {
                    let pre: Vec<i16> = self.preroll.iter().copied().collect();
                    self.utterance = Some(((now - duration_ms(pre.len())).max(0), pre));
                }
                VoiceEvent::Ended { .. } => self.send(run, now, said),
            }
        }
    }

    /// Transcribes the utterance under way, if any.
    fn flush(&mut self, run: &Run, said: &mpsc::Sender<Said>) {
        self.send(run, run.now_ms(), said);
    }

    fn send(&mut self, run: &Run, now: i64, said: &mpsc::Sender<Said>) {
        let Some((start_ms, audio)) = self.utterance.take() else { return };
        let (speaker, said, transcriber) = (self.speaker, said.clone(), run.transcriber.clone());
        tokio::spawn(async move {
            let text = match transcriber {
                Some(t) => hear(t.as_ref(), &audio).await.map(|t| t.text.trim().to_owned()),
                None => Some("[inaudible]".to_owned()),
            };
            let _ = said.send(Said { speaker, start_ms, end_ms: now, text }).await;
        });
    }
}
