//! The speech seams (from `parley_speech`) and the builtin tone voice.
//!
//! The tone voice ([`ToneVoice`]) is the builtin synthesiser; real engines
//! (local and cloud) implement the same traits in `parley_speech`.

use tokio::sync::mpsc;

pub use parley_speech::{FRAME_SAMPLES, Synthesiser, Transcriber, Transcript, synthesise};

use crate::audio::{Voice, speak};
use crate::provider::Pcm;

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
