//! The end-of-turn benchmark (bench/turns.sh): the labelled set
//! (`parley_speech::eot`) through today's rule at every silence and the
//! smart rule at every pause and threshold, reported as LiveKit's
//! eot-bench does: the false cut-off rate and the end-of-turn delay, and
//! each rule's lowest median delay at a false cut-off rate of at most 5%.
//! Then the models' CPU cost: how many calls one core keeps up with.
//!
//! Usage: eot_bench   (needs the PyPI packages .ci/run installs)

use std::time::Instant;

use parley_speech::eot::{Call, Outcome, Stt, labelled_set, score, silence_rule, smart_call};
use parley_speech::espeak::Espeak;
use parley_speech::local_servers::{piper, turn_models, whisper};
use parley_speech::silero::SileroStream;
use parley_speech::turns::SmartSettings;
use parley_speech::vad::TurnSettings;
use parley_speech::wyoming::{WyomingSynthesiser, WyomingTranscriber};
use parley_voice::codec::G711;

const MAX_FALSE_CUTOFFS: f64 = 0.05;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let models = turn_models();
    let tts = piper();
    let espeak = Espeak::new("en-us", 160).unwrap();
    let joe = WyomingSynthesiser { address: tts.address(), voice: Some("en_US-joe-medium".into()) };
    let line = |pcm: &[i16]| G711::Pcmu.decode(&G711::Pcmu.encode(pcm));
    let clips = labelled_set(&[("espeak-ng", &espeak), ("piper", &joe)], &line).await;
    println!("{} clips (espeak-ng and Piper, G.711 μ-law)\n", clips.len());

    println!("rule                         false cut-offs  median delay  p90 delay");
    let mut best: Vec<(String, f64, f64)> = Vec::new();
    let mut report = |rule: String, outcomes: &[Outcome]| {
        let s = score(outcomes);
        println!(
            "{rule:<28} {:>13.1}% {:>10.0} ms {:>7.0} ms",
            s.false_cutoff_rate * 100.0,
            s.median_delay_ms,
            s.p90_delay_ms
        );
        if s.false_cutoff_rate <= MAX_FALSE_CUTOFFS {
            best.push((rule, s.median_delay_ms, s.false_cutoff_rate));
        }
    };
    for silence in (300..=1500).step_by(100) {
        let settings = TurnSettings { hangover_ms: silence, ..TurnSettings::default() };
        let outcomes: Vec<Outcome> = clips.iter().map(|c| silence_rule(c, settings)).collect();
        report(format!("silence {silence} ms"), &outcomes);
    }
    let whisper = whisper();
    let mut stt = Stt::new(WyomingTranscriber { address: whisper.address(), language: Some("en".into()) });
    let mut defaults = None;
    for with_words in [false, true] {
        for min_silence in [100, 200, 300] {
            for threshold in [0.5, 0.7, 0.9] {
                let settings = SmartSettings { min_silence_ms: min_silence, threshold, ..SmartSettings::default() };
                let words = if with_words { Some(&mut stt) } else { None };
                let call = smart_call(&clips, &models, settings, words).await;
                let words = if with_words { " + words" } else { "" };
                report(format!("smart{words} {min_silence} ms, P >= {threshold}"), &call.outcomes);
                if with_words && settings == SmartSettings::default() {
                    defaults = Some(call);
                }
            }
        }
    }
    println!("\nlowest median delay with at most {:.0}% false cut-offs:", MAX_FALSE_CUTOFFS * 100.0);
    for family in ["silence", "smart"] {
        match best.iter().filter(|(r, ..)| r.starts_with(family)).min_by(|a, b| a.1.total_cmp(&b.1)) {
            Some((rule, delay, cut)) => println!("  {rule}: {delay:.0} ms ({:.1}% cut off)", cut * 100.0),
            None => println!("  {family}: no setting reaches it"),
        }
    }
    cpu(&models, &clips.iter().flat_map(|c| c.audio.iter().copied()).collect::<Vec<_>>(), &defaults.unwrap());
}

/// One core's capacity: the smart detector with the agent defaults and
/// the words, over the whole set as one call (Silero on every sound,
/// resting in silence; Smart Turn when asked, inline), as CPU time per
/// second of call audio; and Silero's and Smart Turn's own costs.
fn cpu(models: &parley_speech::turns::TurnModels, audio: &[i16], call: &Call) {
    let mut stream = SileroStream::new(models.vad.clone());
    let started = Instant::now();
    let windows: usize = audio.chunks(160).map(|f| stream.push(f, false).len()).sum();
    let silero = started.elapsed().as_secs_f64();
    let pcm: Vec<i16> = audio.iter().take(8000 * 4).copied().collect();
    let wide: Vec<f32> =
        parley_speech::resample::resample(&pcm, 8000, 16000).iter().map(|s| f32::from(*s) / 32768.0).collect();
    let runs = 30;
    let started = Instant::now();
    for _ in 0..runs {
        models.turn.probability(&wide).unwrap();
    }
    let turn_ms = started.elapsed().as_secs_f64() * 1000.0 / runs as f64;
    println!("\nCPU, one thread:");
    println!("  Silero VAD: {:.3} ms per 32 ms window ({windows} windows)", silero * 1000.0 / windows as f64);
    println!("  Smart Turn: {turn_ms:.1} ms per answer (features included)");
    println!(
        "  the smart detector (defaults, with words): asked the model {} times at {} pauses transcribed; {:.1} ms of CPU per second of call audio ({:.0} s): one core keeps up with {:.0} calls",
        call.asked,
        call.words_asked,
        call.cpu_ms / call.seconds,
        call.seconds,
        call.calls_per_core()
    );
}
