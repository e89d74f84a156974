//! Runs one call from dial to end: follows the provider's events, lets the
//! agent speak, writes the transcript as speech finishes, records both
//! sides, and stops at the caller's hangup, the owner's hangup or the
//! maximum duration.

use std::sync::Arc;
use std::time::Duration;

use parley_domain::call::{AnsweredBy, CallStatus, EndedReason, MachineDetection, Speaker};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::audio::{Recorder, Recording, Voice};
use crate::live::Live;
use crate::provider::{Command, FarEnd, Placed, ProviderEvent};
use crate::run::{Action, KEYS_PAUSE, Run};
pub use crate::run::{Progress, Segment};
use crate::session::{AgentSession, Input};
use crate::speech::{Synthesiser, ToneVoice, Transcriber};
use crate::warm::{Happening, Next, Warm};

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
    /// Who picked up, as answering-machine detection judged.
    pub machine: Option<(AnsweredBy, MachineDetection)>,
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
    /// Where a warm transfer dials the person (calls with live audio);
    /// without one a warm transfer is made cold.
    pub transfer_line: Option<crate::warm::TransferLine>,
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
            transfer_line: None,
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

/// Runs a placed call until it ends. `hangup` ends it from Parley's side,
/// for the reason it carries (`agent_hangup` when asked through the API,
/// `shutdown` when the server stops).
pub async fn run(
    placed: Placed,
    agent: Box<dyn AgentSession>,
    options: Options,
    progress: mpsc::Sender<Progress>,
    mut hangup: oneshot::Receiver<EndedReason>,
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
    let mut live = Live::new(options.listening.clone());
    // The recording keeps the last RECORDING_WINDOW in memory and writes the rest.
    let mut flush = tokio::time::interval(Duration::from_secs(1));
    let far_off = Instant::now() + Duration::from_secs(365 * 24 * 3600);
    let mut deadline = far_off;
    // A warm transfer under way: the caller's audio goes to it, not to the agent.
    let mut warm: Option<Warm> = None;
    let (status, reason) = loop {
        let greeting_at = live.greeting_due().map(|at| run.instant_of(at));
        let machine_at = live.machine_due().filter(|_| run.answered.is_some()).map(|at| run.instant_of(at));
        let join_at = warm.as_ref().and_then(Warm::join_at).map(|at| run.instant_of(at));
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
                            live.greet(&mut run, greeting);
                        } else {
                            run.say(greeting).await;
                        }
                    }
                }
                Some(ProviderEvent::Heard { audio, text }) => run.heard(audio, text).await,
                Some(ProviderEvent::Audio(frame)) => match &mut warm {
                    Some(warm) => warm.caller_audio(&mut run, frame).await,
                    None => live.audio(&mut run, frame).await,
                },
                Some(ProviderEvent::Dtmf(_)) if warm.is_some() => {}
                Some(ProviderEvent::Dtmf(key)) => {
                    run.keys.push(key);
                    run.keys_due = Some(if key == '#' { Instant::now() } else { Instant::now() + KEYS_PAUSE });
                }
                Some(ProviderEvent::Ended(end)) => break match (end, run.answered.is_some()) {
                    (FarEnd::HungUp, true) => match &run.ending {
                        Some(Action::EndCall) if live.left_for_machine() => (CallStatus::Completed, EndedReason::Voicemail),
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
            asked = &mut hangup => {
                let _ = run.commands.send(Command::Hangup).await;
                let reason = asked.unwrap_or(EndedReason::AgentHangup);
                break match (run.answered.is_some(), reason) {
                    (true, reason) => (CallStatus::Completed, reason),
                    (false, EndedReason::AgentHangup) => (CallStatus::Canceled, EndedReason::Canceled),
                    (false, reason) => (CallStatus::Canceled, reason),
                };
            }
            Some(message) = live.next() => live.handle(&mut run, message).await,
            happening = next_of(&mut warm) => {
                let Some(transfer) = &mut warm else { continue };
                match transfer.on(&mut run, happening).await {
                    Next::Continue => {}
                    Next::Over => {
                        let _ = run.commands.send(Command::Hangup).await;
                        break (CallStatus::Completed, EndedReason::Transferred);
                    }
                    Next::Failed(why) => {
                        let transfer = warm.take().expect("under way");
                        let to = transfer.to().to_owned();
                        tracing::info!(to, why, "a warm transfer did not reach the person; back to the caller");
                        transfer.finish(&mut run).await;
                        respond(&mut run, &mut live, options.listening.live, Input::TransferFailed { to, why }).await;
                    }
                }
            }
            _ = sleep_until_opt(join_at) => {
                if let Some(transfer) = &mut warm {
                    transfer.join(&mut run);
                }
            }
            _ = sleep_until_opt(greeting_at) => live.greeting_wait_over(&mut run),
            _ = sleep_until_opt(machine_at) => live.machine_timeout(&mut run).await,
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
                    match (action, &options.transfer_line) {
                        (Action::Transfer(t), Some(line)) if t.summary.is_some() && options.listening.live => {
                            warm = Some(Warm::start(line, t, options.listening.turns));
                        }
                        (action, _) => run.act(action).await,
                    }
                }
            }
            _ = flush.tick() => {
                run.flush_recording();
                let now = run.now_ms();
                live.finish_played(&mut run, now).await;
                if run.answered.is_some() && run.ending.is_none() && run.pending.is_none() && warm.is_none() && !live.busy() {
                    let quiet = run.now_ms() - run.silence_since();
                    let listening = &options.listening;
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
    if let Some(transfer) = warm.take() {
        transfer.finish(&mut run).await;
    }
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
        Some(Action::Transfer(t)) if reason == EndedReason::Transferred => Some(t.to),
        _ => None,
    };
    let machine = live.answered_by();
    Outcome { status, reason, duration_ms, recording, segments: run.segments, transfer_to, machine }
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

/// What happens next on a warm transfer's side, or never without one.
async fn next_of(warm: &mut Option<Warm>) -> Happening {
    match warm {
        Some(warm) => warm.next().await,
        None => std::future::pending().await,
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
    use crate::provider::Pcm;
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
                let _ = hang.send(EndedReason::AgentHangup);
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
        let placed = Placed { provider_call_id: "p".into(), events, commands, client_token: None };
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
