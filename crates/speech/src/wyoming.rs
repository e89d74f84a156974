//! Home Assistant's Wyoming protocol: local speech servers
//! (`wyoming-faster-whisper` for speech-to-text, `wyoming-piper` for
//! text-to-speech) reached over TCP.
//!
//! The wire format: each event is one JSON line, `{"type", "data"?,
//! "data_length"?, "payload_length"?, "version"?}`, then `data_length`
//! bytes of JSON merged into `data`, then `payload_length` bytes of binary
//! payload (audio: 16-bit little-endian PCM).

use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::resample::Resampler;
use crate::{FRAME_SAMPLES, Pcm, SAMPLE_RATE, Synthesiser, Transcriber, Transcript};

/// The protocol version Parley speaks.
const VERSION: &str = "1.5.2";
/// Bounds on what a server may send: a header line, its data, its payload.
const MAX_HEADER_BYTES: usize = 64 * 1024;
const MAX_DATA_BYTES: usize = 1024 * 1024;
const MAX_PAYLOAD_BYTES: usize = 8 * 1024 * 1024;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a server may take to answer one request.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// faster-whisper's input rate.
const WHISPER_RATE: u32 = 16_000;

/// One Wyoming event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub kind: String,
    pub data: Map<String, Value>,
    pub payload: Vec<u8>,
}

impl Event {
    pub fn new(kind: &str, data: Value) -> Event {
        let data = match data {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        Event { kind: kind.to_owned(), data, payload: Vec::new() }
    }

    fn with_payload(mut self, payload: Vec<u8>) -> Event {
        self.payload = payload;
        self
    }
}

/// Why a Wyoming exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum WyomingError {
    #[error("could not reach the Wyoming server at {0}: {1}")]
    Connect(String, String),
    #[error("the Wyoming server broke the protocol: {0}")]
    Protocol(String),
    #[error("the Wyoming server did not answer in time")]
    Timeout,
    #[error("the Wyoming connection failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Writes one event: the header line, the data block, the payload.
pub async fn write_event<W: AsyncWriteExt + Unpin>(w: &mut W, event: &Event) -> Result<(), WyomingError> {
    let data = serde_json::to_vec(&event.data).map_err(|e| WyomingError::Protocol(e.to_string()))?;
    let mut header = json!({"type": event.kind, "version": VERSION});
    if !event.data.is_empty() {
        header["data_length"] = json!(data.len());
    }
    if !event.payload.is_empty() {
        header["payload_length"] = json!(event.payload.len());
    }
    let mut line = serde_json::to_vec(&header).map_err(|e| WyomingError::Protocol(e.to_string()))?;
    line.push(b'\n');
    w.write_all(&line).await?;
    if !event.data.is_empty() {
        w.write_all(&data).await?;
    }
    if !event.payload.is_empty() {
        w.write_all(&event.payload).await?;
    }
    w.flush().await?;
    Ok(())
}

/// Reads one event; `None` at the end of the stream.
pub async fn read_event<R: AsyncBufReadExt + Unpin>(r: &mut R) -> Result<Option<Event>, WyomingError> {
    let mut line = Vec::new();
    let n = (&mut *r).take(MAX_HEADER_BYTES as u64 + 1).read_until(b'\n', &mut line).await?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(WyomingError::Protocol("a header line is too long or cut off".into()));
    }
    let header: Value = serde_json::from_slice(&line).map_err(|e| WyomingError::Protocol(format!("header: {e}")))?;
    let kind = header["type"].as_str().ok_or_else(|| WyomingError::Protocol("an event without a type".into()))?;
    let mut data = header.get("data").and_then(Value::as_object).cloned().unwrap_or_default();
    let length = |name: &str, max: usize| -> Result<usize, WyomingError> {
        match header.get(name).and_then(Value::as_u64) {
            Some(n) if n as usize <= max => Ok(n as usize),
            Some(n) => Err(WyomingError::Protocol(format!("{name} {n} is over the limit"))),
            None => Ok(0),
        }
    };
    let (data_length, payload_length) =
        (length("data_length", MAX_DATA_BYTES)?, length("payload_length", MAX_PAYLOAD_BYTES)?);
    if data_length > 0 {
        let mut block = vec![0; data_length];
        r.read_exact(&mut block).await?;
        let extra: Map<String, Value> =
            serde_json::from_slice(&block).map_err(|e| WyomingError::Protocol(format!("data: {e}")))?;
        data.extend(extra);
    }
    let mut payload = vec![0; payload_length];
    r.read_exact(&mut payload).await?;
    Ok(Some(Event { kind: kind.to_owned(), data, payload }))
}

async fn connect(address: &str) -> Result<TcpStream, WyomingError> {
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address))
        .await
        .map_err(|_| WyomingError::Connect(address.to_owned(), "timed out".into()))?
        .map_err(|e| WyomingError::Connect(address.to_owned(), e.to_string()))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

fn pcm_bytes(pcm: &[i16]) -> Vec<u8> {
    pcm.iter().flat_map(|s| s.to_le_bytes()).collect()
}

fn pcm_from_bytes(bytes: &[u8]) -> Pcm {
    bytes.chunks_exact(2).map(|b| i16::from_le_bytes([b[0], b[1]])).collect()
}

/// Speech-to-text through a Wyoming server (faster-whisper).
#[derive(Debug, Clone)]
pub struct WyomingTranscriber {
    /// `host:port`.
    pub address: String,
    /// A language code (`en`), or `None` for the server's default.
    pub language: Option<String>,
}

impl WyomingTranscriber {
    /// Transcribes one utterance (8 kHz audio) whole.
    pub async fn transcribe(&self, pcm: &[i16]) -> Result<String, WyomingError> {
        let stream = connect(&self.address).await?;
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        let mut start = json!({});
        if let Some(language) = &self.language {
            start["language"] = json!(language);
        }
        write_event(&mut write, &Event::new("transcribe", start)).await?;
        let format = json!({"rate": WHISPER_RATE, "width": 2, "channels": 1});
        write_event(&mut write, &Event::new("audio-start", format.clone())).await?;
        let mut resampler = Resampler::new(SAMPLE_RATE, WHISPER_RATE);
        // One second of audio per chunk.
        for part in pcm.chunks(SAMPLE_RATE as usize) {
            let audio = resampler.push(part);
            if !audio.is_empty() {
                write_event(&mut write, &Event::new("audio-chunk", format.clone()).with_payload(pcm_bytes(&audio)))
                    .await?;
            }
        }
        let rest = resampler.finish();
        if !rest.is_empty() {
            write_event(&mut write, &Event::new("audio-chunk", format.clone()).with_payload(pcm_bytes(&rest))).await?;
        }
        write_event(&mut write, &Event::new("audio-stop", json!({}))).await?;
        let answer = async {
            while let Some(event) = read_event(&mut read).await? {
                if event.kind == "transcript" {
                    return Ok(event.data.get("text").and_then(Value::as_str).unwrap_or_default().trim().to_owned());
                }
            }
            Err(WyomingError::Protocol("the connection closed before the transcript".into()))
        };
        tokio::time::timeout(ANSWER_TIMEOUT, answer).await.map_err(|_| WyomingError::Timeout)?
    }
}

impl Transcriber for WyomingTranscriber {
    fn name(&self) -> &'static str {
        "wyoming"
    }

    /// faster-whisper is not a streaming recogniser: one request per
    /// utterance, sent when the input ends.
    fn start(&self) -> (mpsc::Sender<Pcm>, mpsc::Receiver<Transcript>) {
        let this = self.clone();
        crate::whole_utterance("wyoming", move |utterance| async move {
            this.transcribe(&utterance).await.map(Transcript::final_text)
        })
    }
}

/// Text-to-speech through a Wyoming server (Piper).
#[derive(Debug, Clone)]
pub struct WyomingSynthesiser {
    /// `host:port`.
    pub address: String,
    /// The server's voice name (`en_US-joe-medium`), or `None` for its default.
    pub voice: Option<String>,
}

impl WyomingSynthesiser {
    /// Speaks one sentence, sending 8 kHz frames as they come; false once
    /// nobody listens.
    async fn speak(&self, sentence: &str, frames: &mpsc::Sender<Pcm>) -> Result<bool, WyomingError> {
        let stream = connect(&self.address).await?;
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        let mut request = json!({"text": sentence});
        if let Some(voice) = &self.voice {
            request["voice"] = json!({"name": voice});
        }
        write_event(&mut write, &Event::new("synthesize", request)).await?;
        let mut resampler: Option<Resampler> = None;
        let mut pending: Pcm = Vec::new();
        loop {
            let event = tokio::time::timeout(ANSWER_TIMEOUT, read_event(&mut read))
                .await
                .map_err(|_| WyomingError::Timeout)??
                .ok_or_else(|| WyomingError::Protocol("the connection closed before audio-stop".into()))?;
            match event.kind.as_str() {
                "audio-start" | "audio-chunk" if resampler.is_none() => {
                    let rate = event.data.get("rate").and_then(Value::as_u64).unwrap_or(22_050) as u32;
                    let width = event.data.get("width").and_then(Value::as_u64).unwrap_or(2);
                    let channels = event.data.get("channels").and_then(Value::as_u64).unwrap_or(1);
                    if width != 2 || channels != 1 {
                        return Err(WyomingError::Protocol(format!("audio of width {width}, {channels} channels")));
                    }
                    resampler = Some(Resampler::new(rate, SAMPLE_RATE));
                    if event.kind == "audio-chunk" {
                        pending.extend(
                            resampler.as_mut().map(|r| r.push(&pcm_from_bytes(&event.payload))).unwrap_or_default(),
                        );
                    }
                }
                "audio-chunk" => {
                    if let Some(r) = resampler.as_mut() {
                        pending.extend(r.push(&pcm_from_bytes(&event.payload)));
                    }
                }
                "audio-stop" => {
                    if let Some(r) = resampler.take() {
                        pending.extend(r.finish());
                    }
                    for frame in pending.chunks(FRAME_SAMPLES) {
                        if frames.send(frame.to_vec()).await.is_err() {
                            return Ok(false);
                        }
                    }
                    return Ok(true);
                }
                "error" => {
                    let text = event.data.get("text").and_then(Value::as_str).unwrap_or("unknown error");
                    return Err(WyomingError::Protocol(format!("the server refused: {text}")));
                }
                _ => {}
            }
            while pending.len() >= FRAME_SAMPLES {
                let frame: Pcm = pending.drain(..FRAME_SAMPLES).collect();
                if frames.send(frame).await.is_err() {
                    return Ok(false);
                }
            }
        }
    }
}

impl Synthesiser for WyomingSynthesiser {
    fn name(&self) -> &'static str {
        "wyoming"
    }

    fn start(&self) -> (mpsc::Sender<String>, mpsc::Receiver<Pcm>) {
        let this = self.clone();
        crate::sentence_by_sentence("wyoming", move |sentence, frames| {
            let this = this.clone();
            async move { this.speak(&sentence, &frames).await }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn events_round_trip_with_data_blocks_and_payloads() {
        let event =
            Event::new("audio-chunk", json!({"rate": 16000, "width": 2, "channels": 1})).with_payload(vec![1, 2, 3, 4]);
        let mut wire = Vec::new();
        write_event(&mut wire, &event).await.unwrap();
        let header_end = wire.iter().position(|b| *b == b'\n').unwrap();
        let header: Value = serde_json::from_slice(&wire[..header_end]).unwrap();
        assert_eq!(header["type"], "audio-chunk");
        assert_eq!(header["payload_length"], 4);
        assert!(header["data_length"].as_u64().unwrap() > 0);
        let mut reader = BufReader::new(&wire[..]);
        assert_eq!(read_event(&mut reader).await.unwrap(), Some(event));
        assert_eq!(read_event(&mut reader).await.unwrap(), None);
    }

    #[tokio::test]
    async fn inline_data_is_read_too_and_oversized_lengths_are_refused() {
        let wire = b"{\"type\": \"transcript\", \"data\": {\"text\": \"hi\"}}\n".to_vec();
        let event = read_event(&mut BufReader::new(&wire[..])).await.unwrap().unwrap();
        assert_eq!(event.data["text"], "hi");
        let wire = b"{\"type\": \"audio-chunk\", \"payload_length\": 999999999999}\n".to_vec();
        assert!(matches!(read_event(&mut BufReader::new(&wire[..])).await, Err(WyomingError::Protocol(_))));
    }
}
