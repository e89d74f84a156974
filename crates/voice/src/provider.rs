//! The telephony-provider interface.

use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::mpsc;

pub use parley_speech::{Pcm, SAMPLE_RATE};

/// A call to place.
#[derive(Debug, Clone)]
pub struct Dial {
    /// Parley's id of the call.
    pub call_id: String,
    pub from: Option<String>,
    /// E.164 number or `sip:` URI.
    pub to: String,
    /// How long to let it ring before giving up.
    pub ring_timeout: Duration,
}

/// How the far end ended a call (or why it never started).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FarEnd {
    /// The callee hung up.
    HungUp,
    Busy,
    NoAnswer,
    /// The network or the provider failed the call.
    Failed,
}

/// What the provider reports about a call, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    Ringing,
    Answered,
    /// Speech from the far end. `text` is the provider's recognition of it
    /// when it has one (the simulated caller knows what it said; a SIP
    /// provider sends audio only and speech-to-text runs in the engine).
    Heard {
        audio: Pcm,
        text: Option<String>,
    },
    /// Live audio from the far end: 20 ms frames in real time (SIP's RTP,
    /// Twilio's media stream). The engine's speech loop finds the turns in
    /// it (voice activity), transcribes them and detects barge-in.
    Audio(Pcm),
    Dtmf(char),
    /// The call is over; no event follows.
    Ended(FarEnd),
}

/// What Parley asks of a live call.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Play audio to the far end (the agent speaking), after what is queued.
    Play(Pcm),
    /// Drop the audio queued and not yet played (the caller barged in).
    StopPlayback,
    SendDtmf(String),
    /// Hand the call to another number or SIP URI.
    Transfer(String),
    Hangup,
}

/// A placed call: its events, and a line to command it.
pub struct Placed {
    pub provider_call_id: String,
    pub events: mpsc::Receiver<ProviderEvent>,
    pub commands: mpsc::Sender<Command>,
    /// What the far end presents to join the call, when the caller is the
    /// API's client (a web call's single-use token); `None` on phone lines.
    pub client_token: Option<String>,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct DialError(pub String);

/// A telephony provider.
pub trait Provider: Send + Sync {
    /// Its name, shown on calls (`simulated`, `sip`, …).
    fn name(&self) -> &'static str;

    /// Whether answered calls stream live audio ([`ProviderEvent::Audio`])
    /// rather than whole utterances: the engine then listens for turns and
    /// barge-in, and streams the agent's speech.
    fn streams_audio(&self) -> bool {
        false
    }

    /// Places a call. `Err` when the provider refuses or fails before the
    /// call exists (the API answers 502).
    fn dial(&self, dial: Dial) -> BoxFuture<'_, Result<Placed, DialError>>;
}

/// Why an inbound call is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No channel has the dialled number (SIP 404).
    NotFound,
    /// The workspace may not take calls (SIP 403).
    Forbidden,
    /// At the workspace's call limit (SIP 486, Twilio `busy`).
    Busy,
    /// No agent takes the call, or it could not be set up (SIP 480).
    Unavailable,
    /// A repeat of a request for a call already taken (a provider's retry,
    /// or a replay): answered as the first was where the provider can
    /// (Twilio: the same TwiML), never a second call (SIP 482).
    Repeated,
}

/// The provider's side of a call ringing at Parley.
pub trait Ringing: Send + Sync {
    /// Answers; the events begin with `Answered`. `Err` if the caller gave
    /// up meanwhile.
    fn answer(self: Box<Self>) -> BoxFuture<'static, Result<Placed, DialError>>;
    /// Refuses, telling the network why.
    fn refuse(self: Box<Self>, why: Refusal);
}

/// A call ringing at Parley (from a SIP trunk, a Twilio number, …), to
/// answer or refuse.
pub struct InboundCall {
    /// The provider's name, as calls show it.
    pub provider: &'static str,
    /// The caller (a number without its `+` from some trunks, or a name).
    pub from: String,
    /// The number or address dialled.
    pub to: String,
    /// The provider's id of the call (SIP Call-ID, Twilio CallSid).
    pub provider_call_id: String,
    line: Box<dyn Ringing>,
}

impl InboundCall {
    pub fn new(
        provider: &'static str,
        from: String,
        to: String,
        provider_call_id: String,
        line: Box<dyn Ringing>,
    ) -> Self {
        InboundCall { provider, from, to, provider_call_id, line }
    }

    pub async fn answer(self) -> Result<Placed, DialError> {
        self.line.answer().await
    }

    pub fn refuse(self, why: Refusal) {
        self.line.refuse(why)
    }
}

/// A random, unguessable token (160 bits): what a media stream or a
/// browser presents to join its call.
pub(crate) fn random_token() -> String {
    format!("{:032x}{:08x}", rand::random::<u128>(), rand::random::<u32>())
}

/// What a paced stream sends on its next 20 ms tick.
#[derive(Debug, PartialEq)]
pub(crate) enum Paced {
    Audio(Pcm),
    /// A stretch of speech has all been sent: `parley-<n>`.
    Mark(String),
}

/// The agent's audio on a socket transport (Twilio's media stream, a web
/// call): queued in 20 ms frames and sent one per tick, so what has been
/// sent is what the far end has heard, give or take its small buffer; a
/// mark follows each stretch; barge-in drops what is queued.
#[derive(Default)]
pub(crate) struct Outbox {
    queue: std::collections::VecDeque<Pcm>,
    /// Audio went out since the last mark.
    unmarked: bool,
    marks: u64,
}

impl Outbox {
    /// Queues `pcm` as 20 ms frames (the last padded with silence).
    pub(crate) fn play(&mut self, pcm: &[i16]) {
        let frame = crate::speech::FRAME_SAMPLES;
        self.queue.extend(pcm.chunks(frame).map(|c| {
            let mut f = c.to_vec();
            f.resize(frame, 0);
            f
        }));
    }

    /// Drops what is queued (the far end is told to drop what it holds).
    pub(crate) fn clear(&mut self) {
        self.queue.clear();
        self.unmarked = false;
    }

    /// What to send on this tick, if anything.
    pub(crate) fn tick(&mut self) -> Option<Paced> {
        if let Some(frame) = self.queue.pop_front() {
            self.unmarked = true;
            Some(Paced::Audio(frame))
        } else if self.unmarked {
            self.unmarked = false;
            self.marks += 1;
            Some(Paced::Mark(format!("parley-{}", self.marks)))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outbox_paces_frames_marks_each_stretch_and_drops_on_clear() {
        let mut out = Outbox::default();
        assert_eq!(out.tick(), None);
        out.play(&vec![7; 330]);
        let frames: Vec<Paced> = std::iter::from_fn(|| out.tick()).collect();
        assert_eq!(frames.len(), 4, "three frames, then a mark");
        assert_eq!(frames[2], Paced::Audio([vec![7; 10], vec![0; 150]].concat()), "the last frame is padded");
        assert_eq!(frames[3], Paced::Mark("parley-1".into()));
        out.play(&vec![1; 480]);
        assert!(matches!(out.tick(), Some(Paced::Audio(_))));
        out.clear();
        assert_eq!(out.tick(), None, "a cleared stretch is not marked");
        out.play(&vec![1; 160]);
        assert!(matches!(out.tick(), Some(Paced::Audio(_))));
        assert_eq!(out.tick(), Some(Paced::Mark("parley-2".into())));
    }
}
