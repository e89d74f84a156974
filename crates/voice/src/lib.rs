//! The call engine and the interfaces it is built on.
//!
//! - [`provider`]: what a telephony provider does for a call (dial, ringing
//!   and answer events, audio both ways, DTMF, transfer, hangup). The
//!   simulated provider ([`simulated`]) implements it offline, the SIP
//!   provider ([`sip`]) through a trunk; `testing` (a feature) drives
//!   the SIP side with SIPp in tests and benchmarks.
//! - [`session`]: the agent's side of a conversation as a cancellable
//!   stream of text and tool calls; the builtin session is deterministic.
//! - [`speech`]: the streaming speech-to-text and text-to-speech seams
//!   (from `parley_speech`); the tone voice is the builtin synthesiser.
//! - [`audio`]: the tone voice (the fallback, and the simulated caller's
//!   text-only voice) and the
//!   stereo WAV recording (caller left, agent right).
//! - [`codec`]: G.711 μ-law and A-law, as telephone lines carry audio;
//!   [`rtp`]: RTP packets, RFC 4733 DTMF and a jitter buffer; [`sdp`]:
//!   offer/answer for one audio stream.
//!   Speech engines, VAD and resampling are in `parley_speech`.
//! - [`live`]: the speech loop over live audio: turns found by voice
//!   activity, transcribed, answered as a stream of sentences, and
//!   interrupted when the caller talks over the agent.
//! - [`webcall`]: the browser's transport, PCM over a WebSocket.
//! - [`engine`]: runs one call: drives the provider, turns speech into
//!   transcript segments, records, and reports progress to its owner.

pub mod audio;
pub mod codec;
mod early;
pub mod engine;
pub mod live;
pub mod provider;
pub mod rtp;
mod run;
pub mod sdp;
pub mod session;
pub mod simulated;
pub mod sip;
pub mod speech;
#[cfg(feature = "testing")]
pub mod testing;
pub mod twilio;
pub mod warm;
pub mod webcall;
