//! OpenAI-compatible audio: `POST /v1/audio/transcriptions` (OpenAI,
//! Groq, speaches, …) and `POST /v1/audio/speech` (OpenAI, speaches,
//! Kokoro-FastAPI, …), with a configurable base URL.
//!
//! The base URL and key come from the server's configuration (the
//! operator's, not a workspace's), so no SSRF guard applies; the key is
//! sent as a Bearer token and never logged.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::resample::Resampler;
use crate::{FRAME_SAMPLES, Pcm, SAMPLE_RATE, Synthesiser, Transcriber, Transcript};

/// `response_format: "pcm"` is 24 kHz, 16-bit signed little-endian, mono.
const SPEECH_PCM_RATE: u32 = 24_000;
/// Transcription audio is sent as 16 kHz WAV (Whisper's rate).
const UPLOAD_RATE: u32 = 16_000;
const MAX_ATTEMPTS: u32 = 3;

/// Where an OpenAI-compatible server is, and how to reach it.
#[derive(Clone)]
pub struct OpenAiAudio {
    /// Up to and including `/v1` (`https://api.openai.com/v1`).
    pub base_url: String,
    pub api_key: Option<String>,
    pub timeout: Duration,
    http: reqwest::Client,
}

impl std::fmt::Debug for OpenAiAudio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiAudio").field("base_url", &self.base_url).field("api_key", &"[sealed]").finish()
    }
}

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenAiAudioError {
    #[error("the speech server answered HTTP {status}: {message}")]
    Status { status: u16, message: String },
    #[error("the speech server could not be reached: {0}")]
    Transport(String),
    #[error("the speech server's answer is not what the API documents: {0}")]
    Answer(String),
}

impl OpenAiAudio {
    pub fn new(base_url: &str, api_key: Option<String>, timeout: Duration) -> OpenAiAudio {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(timeout)
            .build()
            .expect("the HTTP client configuration is valid");
        OpenAiAudio { base_url: base_url.trim_end_matches('/').to_owned(), api_key, timeout, http }
    }

    /// Sends the request `build` makes, retrying 429 and 5xx (honouring
    /// `Retry-After`, at most 10 s) and connection failures.
    async fn send(&self, build: impl Fn() -> reqwest::RequestBuilder) -> Result<reqwest::Response, OpenAiAudioError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut request = build();
            if let Some(key) = &self.api_key {
                request = request.bearer_auth(key);
            }
            let outcome = request.send().await;
            let retry_after = match &outcome {
                Ok(r) if r.status().is_success() => return Ok(outcome.expect("matched Ok")),
                Ok(r) if r.status().as_u16() == 429 || r.status().is_server_error() => r
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .map(|s| Duration::from_secs_f64(s.clamp(0.0, 10.0))),
                Ok(_) => None,
                Err(_) => None,
            };
            let retriable = match &outcome {
                Ok(r) => r.status().as_u16() == 429 || r.status().is_server_error(),
                Err(e) => e.is_connect() || e.is_timeout(),
            };
            if !retriable || attempt >= MAX_ATTEMPTS {
                return Err(match outcome {
                    Ok(r) => {
                        let status = r.status().as_u16();
                        let body: Value = r.json().await.unwrap_or(Value::Null);
                        let message = body["error"]["message"].as_str().unwrap_or("no error message").to_owned();
                        OpenAiAudioError::Status { status, message }
                    }
                    Err(e) => OpenAiAudioError::Transport(if e.is_timeout() {
                        "timed out".into()
                    } else {
                        "connection failed".into()
                    }),
                });
            }
            let backoff = Duration::from_millis(250 * 2u64.pow(attempt - 1));
            tokio::time::sleep(retry_after.unwrap_or(backoff)).await;
        }
    }
}

/// 16-bit mono PCM as a WAV file.
fn wav(pcm: &[i16], rate: u32) -> Vec<u8> {
    let data_len = (pcm.len() * 2) as u32;
    let mut out = Vec::with_capacity(44 + data_len as usize);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data_len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data_len.to_le_bytes());
    out.extend(pcm.iter().flat_map(|s| s.to_le_bytes()));
    out
}

/// Speech-to-text through `/audio/transcriptions`.
#[derive(Debug, Clone)]
pub struct OpenAiTranscriber {
    pub server: OpenAiAudio,
    /// `whisper-1`, `gpt-4o-transcribe`, `whisper-large-v3` (Groq), …
    pub model: String,
    pub language: Option<String>,
    /// Ask for word timings (`verbose_json` with word granularity, which
    /// whisper models take and `gpt-4o-*-transcribe` refuse).
    pub word_timestamps: bool,
}

impl OpenAiTranscriber {
    /// Transcribes one utterance (8 kHz audio).
    pub async fn transcribe(&self, pcm: &[i16]) -> Result<String, OpenAiAudioError> {
        self.transcript(pcm).await.map(|t| t.text)
    }

    /// Transcribes one utterance, with word timings if asked for and given.
    pub async fn transcript(&self, pcm: &[i16]) -> Result<Transcript, OpenAiAudioError> {
        let upload = wav(&crate::resample::resample(pcm, SAMPLE_RATE, UPLOAD_RATE), UPLOAD_RATE);
        let url = format!("{}/audio/transcriptions", self.server.base_url);
        let response = self
            .server
            .send(|| {
                let file = reqwest::multipart::Part::bytes(upload.clone())
                    .file_name("utterance.wav")
                    .mime_str("audio/wav")
                    .expect("a valid MIME type");
                let mut form = reqwest::multipart::Form::new().part("file", file).text("model", self.model.clone());
                form = if self.word_timestamps {
                    form.text("response_format", "verbose_json").text("timestamp_granularities[]", "word")
                } else {
                    form.text("response_format", "json")
                };
                if let Some(language) = &self.language {
                    form = form.text("language", language.clone());
                }
                self.server.http.post(&url).multipart(form)
            })
            .await?;
        let body: Value = response.json().await.map_err(|e| OpenAiAudioError::Answer(e.to_string()))?;
        let text = body["text"]
            .as_str()
            .map(|t| t.trim().to_owned())
            .ok_or_else(|| OpenAiAudioError::Answer("no `text` in the transcription".into()))?;
        // `words: [{word, start, end}]`, in seconds.
        let ms = |v: &Value| (v.as_f64().unwrap_or(0.0) * 1000.0).round() as i64;
        let words = body["words"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|w| {
                let word = w["word"].as_str()?.trim().to_owned();
                Some(crate::TimedWord { word, start_ms: ms(&w["start"]), end_ms: ms(&w["end"]) })
            })
            .collect();
        Ok(Transcript { text, is_final: true, words })
    }
}

impl Transcriber for OpenAiTranscriber {
    fn name(&self) -> &'static str {
        "openai"
    }

    /// One request per utterance, sent when the input ends.
    fn start(&self) -> (mpsc::Sender<Pcm>, mpsc::Receiver<Transcript>) {
        let this = self.clone();
        crate::whole_utterance("openai", move |utterance| async move { this.transcript(&utterance).await })
    }
}

/// Text-to-speech through `/audio/speech`, streamed as raw PCM.
#[derive(Debug, Clone)]
pub struct OpenAiSynthesiser {
    pub server: OpenAiAudio,
    /// `tts-1`, `gpt-4o-mini-tts`, `kokoro`, …
    pub model: String,
    /// `alloy`, `nova`, …
    pub voice: String,
    /// 0.25–4.0.
    pub speed: f32,
}

impl OpenAiSynthesiser {
    /// Speaks one sentence, sending 8 kHz frames as the body streams in;
    /// false once nobody listens.
    async fn speak(&self, sentence: &str, frames: &mpsc::Sender<Pcm>) -> Result<bool, OpenAiAudioError> {
        let url = format!("{}/audio/speech", self.server.base_url);
        let body = json!({
            "model": self.model, "input": sentence, "voice": self.voice,
            "response_format": "pcm", "speed": self.speed.clamp(0.25, 4.0),
        });
        let response = self.server.send(|| self.server.http.post(&url).json(&body)).await?;
        let mut stream = response.bytes_stream();
        let mut resampler = Resampler::new(SPEECH_PCM_RATE, SAMPLE_RATE);
        let (mut odd, mut pending): (Option<u8>, Pcm) = (None, Vec::new());
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                OpenAiAudioError::Transport(if e.is_timeout() {
                    "timed out".into()
                } else {
                    "the audio stream broke".into()
                })
            })?;
            let mut bytes: Vec<u8> = odd.take().into_iter().collect();
            bytes.extend_from_slice(&chunk);
            if bytes.len() % 2 == 1 {
                odd = bytes.pop();
            }
            let samples: Pcm = bytes.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect();
            pending.extend(resampler.push(&samples));
            while pending.len() >= FRAME_SAMPLES {
                let frame: Pcm = pending.drain(..FRAME_SAMPLES).collect();
                if frames.send(frame).await.is_err() {
                    return Ok(false);
                }
            }
        }
        pending.extend(resampler.finish());
        for frame in pending.chunks(FRAME_SAMPLES) {
            if frames.send(frame.to_vec()).await.is_err() {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Synthesiser for OpenAiSynthesiser {
    fn name(&self) -> &'static str {
        "openai"
    }

    fn start(&self) -> (mpsc::Sender<String>, mpsc::Receiver<Pcm>) {
        let this = self.clone();
        crate::sentence_by_sentence("openai", move |sentence, frames| {
            let this = this.clone();
            async move { this.speak(&sentence, &frames).await }
        })
    }
}
