//! How many callers talking at once the local speech-to-text keeps up
//! with (bench/voice_media.sh runs it): whisper tiny.en on a local Wyoming
//! server (int8, beam 1), fed K talkers for WINDOW seconds. Each talker
//! says an utterance (espeak-ng speech at 8 kHz, streamed in real time as
//! a call delivers it), waits for its transcript, and starts the next;
//! their starts are staggered.
//!
//! For each K it prints the audio transcribed per second of wall time and
//! each utterance's time from its end to its transcript (p50, p95). K
//! talkers are sustained in real time while that p95 stays within 1 s (a
//! conversational turn's budget for speech-to-text); callers in a
//! conversation talk about half of the time, so about twice as many calls
//! fit.
//!
//! Usage: cargo run --release -p parley-speech --example stt_capacity \
//!          --features local-servers -- [max talkers] [window seconds]

use std::sync::Arc;
use std::time::{Duration, Instant};

use parley_speech::Transcriber;
use parley_speech::local_servers::whisper;
use parley_speech::wyoming::WyomingTranscriber;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let max: usize = args.next().and_then(|k| k.parse().ok()).unwrap_or(8);
    let window: u64 = args.next().and_then(|w| w.parse().ok()).unwrap_or(30);
    let server = whisper();
    let espeak = parley_speech::espeak::Espeak::new("en-us", 160).expect("espeak-ng is installed");
    let utterance =
        Arc::new(parley_speech::synthesise(&espeak, "hello, I would like to know where my order is, please").await);
    let audio_s = utterance.len() as f64 / 8000.0;
    let transcriber: Arc<dyn Transcriber> =
        Arc::new(WyomingTranscriber { address: server.address(), language: Some("en".into()) });
    // Warm the model up (its first run loads it).
    transcribe(transcriber.as_ref(), &utterance).await;
    println!("utterance: {audio_s:.1} s of speech; {window} s per step");
    let mut sustained = 0;
    for talkers in 1..=max {
        let began = Instant::now();
        let deadline = began + Duration::from_secs(window);
        let mut streams = Vec::new();
        for i in 0..talkers {
            let (transcriber, utterance) = (transcriber.clone(), utterance.clone());
            let stagger = Duration::from_secs_f64(audio_s * i as f64 / talkers as f64);
            streams.push(tokio::spawn(async move {
                tokio::time::sleep(stagger).await;
                let mut waits = Vec::new();
                while Instant::now() < deadline {
                    waits.push(transcribe(transcriber.as_ref(), &utterance).await);
                }
                waits
            }));
        }
        let mut waits: Vec<Duration> = Vec::new();
        for stream in streams {
            waits.extend(stream.await.unwrap());
        }
        let wall = began.elapsed().as_secs_f64();
        let throughput = waits.len() as f64 * audio_s / wall;
        waits.sort_unstable();
        let at = |q: f64| waits[((waits.len() as f64 * q).ceil() as usize).clamp(1, waits.len()) - 1].as_millis();
        let keeps_up = at(0.95) <= 1000;
        println!(
            "{talkers} talkers: {throughput:.2} s of audio per s; end of utterance to transcript p50 {} ms, p95 {} ms{}",
            at(0.5),
            at(0.95),
            if keeps_up { "" } else { "  (over 1 s)" }
        );
        if !keeps_up {
            break;
        }
        sustained = talkers;
    }
    println!("talkers sustained in real time (p95 within 1 s): {sustained}");
}

/// Streams `pcm` as 20 ms frames in real time and waits for the final
/// transcript; the wait after the last frame.
async fn transcribe(transcriber: &dyn Transcriber, pcm: &[i16]) -> Duration {
    let (audio, mut transcripts) = transcriber.start();
    let mut clock = tokio::time::interval(Duration::from_millis(20));
    for frame in pcm.chunks(160) {
        clock.tick().await;
        let _ = audio.send(frame.to_vec()).await;
    }
    drop(audio);
    let ended = Instant::now();
    while let Some(t) = transcripts.recv().await {
        if t.is_final {
            break;
        }
    }
    ended.elapsed()
}
