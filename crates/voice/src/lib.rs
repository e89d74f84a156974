//! The call engine and the interfaces it is built on.
//!
//! - [`provider`]: what a telephony provider does for a call (dial, ringing
//!   and answer events, audio both ways, DTMF, transfer, hangup). The
//!   simulated provider ([`simulated`]) implements it offline; a SIP
//!   provider plugs into the same trait.
//! - [`runtime`]: the agent's side of a call (what it says first, how it
//!   answers); the builtin runtime is deterministic.
//! - [`audio`]: speech as audio (a tone voice here; real TTS later) and the
//!   stereo WAV recording (caller left, agent right).
//! - [`engine`]: runs one call: drives the provider, turns speech into
//!   transcript segments, records, and reports progress to its owner.

pub mod audio;
pub mod engine;
pub mod provider;
pub mod runtime;
pub mod simulated;
