//! Speech for calls.
//!
//! - The seams ([`Transcriber`], [`Synthesiser`]): streaming speech-to-text
//!   and text-to-speech as channels, so audio and text flow while a call
//!   runs. Dropping the receiving end cancels (the agent stops talking the
//!   moment the caller barges in); dropping the sending end says the input
//!   is over (the transcriber flushes its final text, the synthesiser
//!   finishes what it has).
//! - Engines: [`espeak`] (espeak-ng through its C library, the zero-set-up
//!   voice) and [`wyoming`] (local faster-whisper and Piper servers).
//! - The loop's parts: [`turns`] (when the caller has finished: Silero VAD
//!   and Smart Turn through [`onnx`], else [`vad`], WebRTC's VAD and a
//!   fixed silence), [`resample`]
//!   (rubato), [`sentences`] (streamed text cut for speaking).

pub mod engines;
#[cfg(feature = "local-servers")]
pub mod eot;
pub mod espeak;
#[cfg(feature = "local-servers")]
pub mod local_servers;
pub mod machine;
pub mod onnx;
pub mod openai;
pub mod resample;
pub mod sentences;
pub mod silero;
pub mod smart_turn;
pub mod turns;
pub mod vad;
pub mod wyoming;

use tokio::sync::mpsc;

/// Audio: 16-bit mono PCM samples at [`SAMPLE_RATE`].
pub type Pcm = Vec<i16>;

/// Telephone audio: 8 kHz (G.711's rate). Engines at other rates are
/// resampled to it.
pub const SAMPLE_RATE: u32 = 8000;

/// Audio frames are 20 ms (160 samples at 8 kHz), as RTP carries them.
pub const FRAME_SAMPLES: usize = SAMPLE_RATE as usize / 50;

/// Text recognised so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transcript {
    pub text: String,
    /// A final transcript will not change; partials may.
    pub is_final: bool,
    /// Word timings, from the start of the audio given, when the engine
    /// gives them.
    pub words: Vec<TimedWord>,
}

impl Transcript {
    /// A final transcript without word timings.
    pub fn final_text(text: String) -> Transcript {
        Transcript { text, is_final: true, words: Vec::new() }
    }
}

/// A recognised word and when it was said (ms from the audio's start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedWord {
    pub word: String,
    pub start_ms: i64,
    pub end_ms: i64,
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

/// Runs a synthesiser that speaks one sentence at a time: the text stream
/// is cut into sentences ([`sentences::Sentences`]) and `speak` says each
/// in order, sending frames; it returns `Ok(false)` once nobody listens
/// (cancelled), and an error ends the speech (logged).
pub fn sentence_by_sentence<F, Fut, E>(engine: &'static str, speak: F) -> (mpsc::Sender<String>, mpsc::Receiver<Pcm>)
where
    F: Fn(String, mpsc::Sender<Pcm>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<bool, E>> + Send,
    E: std::fmt::Display,
{
    let (text_tx, mut text_rx) = mpsc::channel::<String>(64);
    let (audio_tx, audio_rx) = mpsc::channel::<Pcm>(256);
    tokio::spawn(async move {
        let mut sentences = sentences::Sentences::new();
        let mut finished = false;
        while !finished {
            let ready: Vec<String> = match text_rx.recv().await {
                Some(chunk) => sentences.push(&chunk),
                None => {
                    finished = true;
                    std::mem::take(&mut sentences).finish().into_iter().collect()
                }
            };
            for sentence in ready {
                match speak(sentence, audio_tx.clone()).await {
                    Ok(true) => {}
                    Ok(false) => return,
                    Err(e) => {
                        tracing::warn!(engine, error = %e, "speech synthesis failed");
                        return;
                    }
                }
            }
        }
    });
    (text_tx, audio_rx)
}

/// Runs a transcriber that is not a streaming recogniser: the utterance's
/// audio is collected until the input ends (the speech loop ends it at the
/// end of the caller's turn), then `transcribe` gives one final transcript.
/// A failure is logged and transcribes as nothing.
pub fn whole_utterance<F, Fut, E>(
    engine: &'static str,
    transcribe: F,
) -> (mpsc::Sender<Pcm>, mpsc::Receiver<Transcript>)
where
    F: FnOnce(Pcm) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<Transcript, E>> + Send,
    E: std::fmt::Display,
{
    let (audio_tx, mut audio_rx) = mpsc::channel::<Pcm>(512);
    let (text_tx, text_rx) = mpsc::channel(4);
    tokio::spawn(async move {
        let mut utterance = Vec::new();
        while let Some(frame) = audio_rx.recv().await {
            utterance.extend(frame);
        }
        let transcript = transcribe(utterance).await.unwrap_or_else(|e| {
            tracing::warn!(engine, error = %e, "transcription failed");
            Transcript::final_text(String::new())
        });
        let _ = text_tx.send(transcript).await;
    });
    (audio_tx, text_rx)
}
