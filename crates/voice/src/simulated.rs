//! The simulated provider: the whole lifecycle of a call, offline, in real
//! time. Magic numbers choose the outcome:
//!
//! - `+15005550001`: the provider fails the dial (the API answers 502);
//! - `+15005550002`: busy;
//! - `+15005550003`: rings until the ring timeout, no answer;
//! - `+15005550004`: rings, then the network fails the call;
//! - anything else: answered by a caller who listens to the agent, says a
//!   line, listens to the answer, says goodbye and hangs up.

use std::time::Duration;

use futures::future::BoxFuture;
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

#[derive(Debug, Clone)]
pub struct Simulated {
    /// From dial to ringing.
    pub setup: Duration,
    /// From ringing to answer (or to failure).
    pub ring: Duration,
    /// How long the caller pauses before speaking.
    pub pause: Duration,
    /// How long the caller waits for the agent to start answering.
    pub think: Duration,
}

impl Default for Simulated {
    fn default() -> Self {
        Self {
            setup: Duration::from_millis(150),
            ring: Duration::from_millis(600),
            pause: Duration::from_millis(300),
            think: Duration::from_millis(1500),
        }
    }
}

impl Provider for Simulated {
    fn name(&self) -> &'static str {
        "simulated"
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

fn ms(n: i64) -> Duration {
    Duration::from_millis(n.max(0) as u64)
}
