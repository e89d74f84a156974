//! The speech engines' seams: streaming speech-to-text and text-to-speech.
//!
//! Both are channels, so audio and text flow while a call runs: a
//! [`Transcriber`] takes audio frames and gives partial and final text; a
//! [`Synthesiser`] takes text as the agent produces it and gives audio
//! frames. Dropping the receiving end cancels (the agent stops talking the
//! moment the caller barges in); dropping the sending end says the input is
//! over (the transcriber flushes its final text, the synthesiser finishes
//! what it has).
//!
//! The tone voice ([`ToneVoice`]) is the builtin synthesiser; real engines
//! (local and cloud) implement the same traits.

use tokio::sync::mpsc;

use crate::audio::{Voice, speak};
use crate::provider::{Pcm, SAMPLE_RATE};

/// Audio frames are 20 ms (160 samples at 8 kHz), as RTP carries them.
pub const FRAME_SAMPLES: usize = SAMPLE_RATE as usize / 50;

/// Text recognised so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transcript {
    pub text: String,
    /// A final transcript will not change; partials may.
    pub is_final: bool,
}

/// Streaming speech-to-text.
pub trait Transcriber: Send + Sync {
    fn name(&self) -> &'static str;

    /// Starts recognising one utterance stream: audio frames go in the
    /// sender, transcripts come out of the receiver.
    fn start(&self) -> (mpsc::Sender<Pcm>, mpsc::Receiver<Transcript>);
}

/// Streaming text-to-speech.
pub trait Synthesiser: Send + Sync {
    fn name(&self) -> &'static str;

    /// Starts speaking: text chunks go in the sender, audio frames come out
    /// of the receiver, in order.
    fn start(&self) -> (mpsc::Sender<String>, mpsc::Receiver<Pcm>);
}

/// Speaks `text` whole and collects its audio (for callers that need the
/// full utterance, such as the recorder).
pub async fn synthesise(voice: &dyn Synthesiser, text: &str) -> Pcm {
    let (input, mut frames) = voice.start();
    let _ = input.send(text.to_owned()).await;
    drop(input);
    let mut out = Vec::new();
    while let Some(frame) = frames.recv().await {
        out.extend(frame);
    }
    out
}

/// The builtin voice: every word is a tone (see [`crate::audio::speak`]).
#[derive(Debug, Clone, Copy)]
pub struct ToneVoice(pub Voice);

impl Synthesiser for ToneVoice {
    fn name(&self) -> &'static str {
        "tones"
    }

    fn start(&self) -> (mpsc::Sender<String>, mpsc::Receiver<Pcm>) {
        let (text_tx, mut text_rx) = mpsc::channel::<String>(16);
        let (audio_tx, audio_rx) = mpsc::channel::<Pcm>(64);
        let voice = self.0;
        tokio::spawn(async move {
            while let Some(chunk) = text_rx.recv().await {
                for frame in speak(&chunk, voice).chunks(FRAME_SAMPLES) {
                    if audio_tx.send(frame.to_vec()).await.is_err() {
                        return; // cancelled
                    }
                }
            }
        });
        (text_tx, audio_rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_tone_voice_streams_the_same_audio_in_frames() {
        let voice = ToneVoice(Voice::Agent);
        let whole = synthesise(&voice, "hello there").await;
        assert_eq!(whole, speak("hello there", Voice::Agent));
        let (input, mut frames) = voice.start();
        input.send("hello".into()).await.unwrap();
        let first = frames.recv().await.unwrap();
        assert_eq!(first.len(), FRAME_SAMPLES);
    }

    #[tokio::test]
    async fn dropping_the_audio_receiver_stops_the_synthesiser() {
        let voice = ToneVoice(Voice::Agent);
        let (input, frames) = voice.start();
        drop(frames);
        input.send("a long sentence of many words".into()).await.unwrap();
        // The synthesiser task ended: its text receiver is gone soon after.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while !input.is_closed() {
            assert!(std::time::Instant::now() < deadline, "the synthesiser kept running after cancellation");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}
