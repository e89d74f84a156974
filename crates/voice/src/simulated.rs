//! The simulated provider: the whole lifecycle of a call, offline, in real
//! time. Magic numbers choose the outcome:
//!
//! - `+15005550001`: the provider fails the dial (the API answers 502);
//! - `+15005550002`: busy;
//! - `+15005550003`: rings until the ring timeout, no answer;
//! - `+15005550004`: rings, then the network fails the call;
//! - anything else: answered by a caller who listens to the agent, says a
//!   line, listens to the answer, says goodbye and hangs up.
//!
//! With a caller voice ([`Simulated::speaking`]) the caller's side is live
//! audio, as SIP's: 20 ms frames of silence or of the caller's synthesised
//! speech, so test-mode calls go through the whole speech loop (voice
//! activity, speech-to-text, barge-in). Without one, the caller's lines
//! arrive whole with their text.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use parley_speech::{Pcm, Synthesiser, synthesise};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep, sleep_until};

use crate::audio::{Voice, duration_ms, speak};
use crate::provider::{Command, Dial, DialError, FarEnd, Placed, Provider, ProviderEvent};

pub const FAILS_TO_DIAL: &str = "+15005550001";
pub const BUSY: &str = "+15005550002";
pub const NO_ANSWER: &str = "+15005550003";
pub const FAILS_AFTER_RINGING: &str = "+15005550004";

/// What the simulated caller says, in turn.
pub const CALLER_LINES: [&str; 2] = ["Hi, I am calling about my order.", "Great, thanks. Bye."];

#[derive(Clone)]
pub struct Simulated {
    /// From dial to ringing.
    pub setup: Duration,
    /// From ringing to answer (or to failure).
    pub ring: Duration,
    /// How long the caller pauses before speaking.
    pub pause: Duration,
    /// How long the caller waits for the agent to start answering.
    pub think: Duration,
    /// The caller's voice, when the caller's side is live audio.
    pub voice: Option<Arc<dyn Synthesiser>>,
}

impl Simulated {
    /// A simulated line whose caller speaks with `voice`, as live audio.
    pub fn speaking(voice: Arc<dyn Synthesiser>) -> Simulated {
        // Live replies come after the end-of-turn silence and speech-to-text,
        // which a speech server busy with other calls can take many seconds
        // to give: the caller is patient rather than hanging up on a slow turn.
        Simulated { voice: Some(voice), think: Duration::from_millis(15_000), ..Simulated::default() }
    }
}

impl Default for Simulated {
    fn default() -> Self {
        Self {
            setup: Duration::from_millis(150),
            ring: Duration::from_millis(600),
            pause: Duration::from_millis(300),
            think: Duration::from_millis(1500),
            voice: None,
        }
    }
}

impl Provider for Simulated {
    fn name(&self) -> &'static str {
        "simulated"
    }

    fn streams_audio(&self) -> bool {
        self.voice.is_some()
    }

    fn dial(&self, dial: Dial) -> BoxFuture<'_, Result<Placed, DialError>> {
        Box::pin(async move {
            if dial.to == FAILS_TO_DIAL {
                return Err(DialError(format!("the simulated carrier rejected the call to {FAILS_TO_DIAL}")));
            }
            let (events, events_rx) = mpsc::channel(64);
            let (commands_tx, commands) = mpsc::channel(64);
            tokio::spawn(self.clone().far_end(dial.clone(), events, commands));
            Ok(Placed {
                provider_call_id: format!("sim_{}", ulid::Ulid::new()),
                events: events_rx,
                commands: commands_tx,
                client_token: None,
            })
        })
    }
}

impl Simulated {
    /// The other side of the line.
    async fn far_end(self, dial: Dial, events: mpsc::Sender<ProviderEvent>, mut commands: mpsc::Receiver<Command>) {
        sleep(self.setup).await;
        if dial.to == BUSY {
            let _ = events.send(ProviderEvent::Ended(FarEnd::Busy)).await;
            return;
        }
        if events.send(ProviderEvent::Ringing).await.is_err() {
            return;
        }
        let outcome = match dial.to.as_str() {
            NO_ANSWER => Some((dial.ring_timeout, FarEnd::NoAnswer)),
            FAILS_AFTER_RINGING => Some((self.ring, FarEnd::Failed)),
            _ => None,
        };
        if let Some((after, end)) = outcome {
            tokio::select! {
                _ = sleep(after) => { let _ = events.send(ProviderEvent::Ended(end)).await; }
                _ = commands.recv() => {}
            }
            return;
        }
        tokio::select! {
            _ = sleep(self.ring) => {}
            _ = commands.recv() => return,
        }
        if events.send(ProviderEvent::Answered).await.is_err() {
            return;
        }
        if let Some(voice) = self.voice.clone() {
            return self.talk_live(voice, events, commands).await;
        }
        // Each line waits for the agent to answer (up to `think`) and finish.
        let mut agent_done = Instant::now();
        let mut speak_at = Instant::now() + self.think;
        for line in CALLER_LINES.iter().map(Some).chain([None]) {
            loop {
                tokio::select! {
                    _ = sleep_until(speak_at) => break,
                    command = commands.recv() => match command {
                        // Listen to the agent to the end, then pause.
                        Some(Command::Play(pcm)) => {
                            agent_done = Instant::now().max(agent_done) + ms(duration_ms(pcm.len()));
                            speak_at = agent_done + self.pause;
                        }
                        Some(Command::SendDtmf(_) | Command::StopPlayback) => {}
                        Some(Command::Hangup) | None => return,
                        Some(Command::Transfer(_)) => {
                            let _ = events.send(ProviderEvent::Ended(FarEnd::HungUp)).await;
                            return;
                        }
                    },
                }
            }
            // After the last line and the agent's goodbye: hang up.
            let Some(line) = line else { break };
            let audio = speak(line, Voice::Caller);
            // The caller talks; the provider reports the speech when it ends.
            sleep(ms(duration_ms(audio.len()))).await;
            if events.send(ProviderEvent::Heard { audio, text: Some(line.to_string()) }).await.is_err() {
                return;
            }
            speak_at = Instant::now() + self.think;
        }
        let _ = events.send(ProviderEvent::Ended(FarEnd::HungUp)).await;
    }
}

impl Simulated {
    /// The answered call as live audio: a frame every 20 ms, the caller's
    /// speech or silence. Each line waits for the agent to have answered
    /// (up to `think`) and finished; after the last, the caller hangs up
    /// once the agent is done.
    async fn talk_live(
        self,
        voice: Arc<dyn Synthesiser>,
        events: mpsc::Sender<ProviderEvent>,
        mut commands: mpsc::Receiver<Command>,
    ) {
        let mut lines = Vec::new();
        for line in CALLER_LINES {
            lines.push(synthesise(voice.as_ref(), line).await);
        }
        let mut lines = lines.into_iter();
        let frame_len = crate::speech::FRAME_SAMPLES;
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut agent_done = Instant::now();
        let mut speak_at = Instant::now() + self.think;
        let mut saying: Option<(Pcm, usize)> = None;
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let now = Instant::now();
                    if saying.is_none() && now >= speak_at && now >= agent_done {
                        match lines.next() {
                            Some(line) => saying = Some((line, 0)),
                            None => {
                                let _ = events.send(ProviderEvent::Ended(FarEnd::HungUp)).await;
                                return;
                            }
                        }
                    }
                    let mut frame = vec![0i16; frame_len];
                    if let Some((line, at)) = &mut saying {
                        let end = (*at + frame_len).min(line.len());
                        frame[..end - *at].copy_from_slice(&line[*at..end]);
                        *at = end;
                        if end == line.len() {
                            saying = None;
                            speak_at = now + self.think;
                        }
                    }
                    if events.send(ProviderEvent::Audio(frame)).await.is_err() {
                        return;
                    }
                }
                command = commands.recv() => match command {
                    Some(Command::Play(pcm)) => {
                        agent_done = Instant::now().max(agent_done) + ms(duration_ms(pcm.len()));
                        speak_at = agent_done + self.pause;
                    }
                    Some(Command::StopPlayback) => agent_done = Instant::now(),
                    Some(Command::SendDtmf(_)) => {}
                    Some(Command::Hangup) | None => return,
                    Some(Command::Transfer(_)) => {
                        let _ = events.send(ProviderEvent::Ended(FarEnd::HungUp)).await;
                        return;
                    }
                },
            }
        }
    }
}

fn ms(n: i64) -> Duration {
    Duration::from_millis(n.max(0) as u64)
}
