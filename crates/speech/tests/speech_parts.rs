//! The speech loop's parts on real speech: espeak-ng (Debian's library)
//! speaks, the audio goes through G.711 as on a phone line, and the VAD
//! hears an utterance of the right length.

use parley_speech::espeak::Espeak;
use parley_speech::vad::{SpeechDetector, TurnSettings, VoiceEvent};
use parley_speech::{Synthesiser, synthesise};
use parley_voice::codec::G711;

fn espeak() -> Espeak {
    Espeak::new("en-us", 175).expect("espeak-ng is installed (apt-get install espeak-ng); .ci/run installs it")
}

fn rms(pcm: &[i16]) -> f64 {
    (pcm.iter().map(|s| f64::from(*s).powi(2)).sum::<f64>() / pcm.len().max(1) as f64).sqrt()
}

#[tokio::test]
async fn espeak_speaks_a_sentence_the_vad_hears_through_a_phone_codec() {
    let voice = espeak();
    let pcm = synthesise(&voice, "Hello, this is Parley. How can I help you today?").await;
    let seconds = pcm.len() as f64 / 8000.0;
    assert!((1.5..6.0).contains(&seconds), "{seconds} s of speech");
    assert!(rms(&pcm) > 1000.0, "audible: rms {}", rms(&pcm));
    for codec in [G711::Pcmu, G711::Pcma] {
        let line = codec.decode(&codec.encode(&pcm));
        let mut heard = SpeechDetector::new(TurnSettings::default());
        let mut events = heard.push(&vec![0; 4000]);
        events.extend(heard.push(&line));
        events.extend(heard.push(&vec![0; 8000]));
        let Some(VoiceEvent::Started { at_ms }) = events.first().copied() else {
            panic!("{codec:?}: no speech heard: {events:?}")
        };
        assert!((400..900).contains(&at_ms), "{codec:?}: speech starts after the 500 ms of silence: {at_ms}");
        let ended = events.iter().find_map(|e| match e {
            VoiceEvent::Ended { from_ms, to_ms } => Some((*from_ms, *to_ms)),
            _ => None,
        });
        let (from, to) = ended.unwrap_or_else(|| panic!("{codec:?}: the utterance ended: {events:?}"));
        let heard_s = (to - from) as f64 / 1000.0;
        assert!(heard_s > seconds * 0.6 && heard_s <= seconds + 0.1, "{codec:?}: heard {heard_s} s of {seconds} s");
    }
}

#[tokio::test]
async fn the_first_sentence_is_spoken_before_the_text_is_complete_and_dropping_stops_it() {
    let voice = espeak();
    let (text, mut frames) = voice.start();
    text.send("Thanks for calling. ".into()).await.unwrap();
    // The rest has not been written yet, and audio already flows.
    let first = tokio::time::timeout(std::time::Duration::from_secs(2), frames.recv()).await;
    assert!(first.is_ok_and(|f| f.is_some_and(|f| f.len() == 160)), "a 20 ms frame of the first sentence");
    drop(frames); // barge-in: nobody listens any more
    text.send("This long second sentence would take several seconds to say out loud, if anyone listened. ".into())
        .await
        .ok();
    drop(text);
    // The library is free again at once: another voice speaks promptly.
    let started = std::time::Instant::now();
    let pcm = synthesise(&voice, "Yes.").await;
    assert!(!pcm.is_empty());
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
}
