//! Answering-machine detection on synthesised calls (espeak-ng, 8 kHz): a
//! person's "Hello?", a voicemail greeting and its beep, a call screening
//! prompt.

use parley_speech::espeak::Espeak;
use parley_speech::machine::{Cause, MachineDetector, MachineEvent, MachineSettings, Ready, Verdict};
use parley_speech::synthesise;

async fn say(text: &str) -> Vec<i16> {
    synthesise(&Espeak::new("en-us", 160).unwrap(), text).await
}

fn silence(ms: usize) -> Vec<i16> {
    vec![0; ms * 8]
}

/// `sox -n -r 8000 -b 16 -c 1 beep.wav synth 0.5 sine 1000 vol 0.5`
fn beep() -> Vec<i16> {
    (0..4000).map(|i| ((i as f64 * 1000.0 * std::f64::consts::TAU / 8000.0).sin() * 16383.0) as i16).collect()
}

fn run(audio: &[i16]) -> Vec<MachineEvent> {
    let mut d = MachineDetector::new(MachineSettings::default());
    audio.chunks(160).flat_map(|f| d.push(f)).collect()
}

fn verdict(events: &[MachineEvent]) -> Option<(Verdict, Cause, u64)> {
    events.iter().find_map(|e| match e {
        MachineEvent::Verdict { verdict, cause, at_ms } => Some((*verdict, cause.clone(), *at_ms)),
        _ => None,
    })
}

#[tokio::test]
async fn a_person_saying_hello_is_human_within_two_seconds() {
    let audio = [silence(300), say("Hello?").await, silence(3000)].concat();
    let events = run(&audio);
    let (v, cause, at) = verdict(&events).expect("a verdict");
    assert_eq!((v, cause), (Verdict::Human, Cause::AfterGreetingSilence), "{events:?}");
    assert!(at < 2000, "decided at {at} ms");
    assert!(!events.iter().any(|e| matches!(e, MachineEvent::BeepStarted { .. })));
}

#[tokio::test]
async fn a_voicemail_greeting_is_a_machine_and_a_message_may_start_when_its_beep_ends() {
    let greeting =
        say("Hi, you have reached Sam Jones. I can't take your call right now. Please leave a message after the tone.")
            .await;
    let beep_from = 300 + greeting.len() / 8 + 600;
    let audio = [silence(300), greeting, silence(600), beep(), silence(5000)].concat();
    let events = run(&audio);
    let (v, _, at) = verdict(&events).expect("a verdict");
    assert_eq!(v, Verdict::Machine, "{events:?}");
    assert!(at < 3000, "decided at {at} ms, in the greeting's first seconds");
    let started = events.iter().find_map(|e| match e {
        MachineEvent::BeepStarted { at_ms, hz } => Some((*at_ms, *hz)),
        _ => None,
    });
    let (start, hz) = started.expect("the beep is heard");
    assert!((start as i64 - beep_from as i64).abs() <= 40 && (hz - 1000.0).abs() < 30.0, "{events:?}");
    let ended = events.iter().find_map(|e| match e {
        MachineEvent::BeepEnded { at_ms, .. } => Some(*at_ms),
        _ => None,
    });
    assert!((ended.expect("the beep ends") as i64 - (beep_from + 500) as i64).abs() <= 40, "{events:?}");
    let ready = events.iter().find_map(|e| match e {
        MachineEvent::Ready { at_ms, after } => Some((*at_ms, *after)),
        _ => None,
    });
    let (ready_at, after) = ready.expect("a message may start");
    assert_eq!(after, Ready::Beep);
    assert!(ready_at >= (beep_from + 500) as u64 && ready_at <= (beep_from + 700) as u64, "ready at {ready_at} ms");
}

#[tokio::test]
async fn a_call_screening_prompt_is_a_machine_that_wants_an_answer() {
    let prompt = "Hi, the person you're calling is using a screening service. Go ahead and say your name and why you're calling.";
    let audio = [silence(300), say(prompt).await, silence(2000)].concat();
    let mut d = MachineDetector::new(MachineSettings::default());
    let events: Vec<MachineEvent> = audio.chunks(160).flat_map(|f| d.push(f)).collect();
    assert_eq!(verdict(&events).map(|v| v.0), Some(Verdict::Machine), "{events:?}");
    // Its words say what kind of machine: one to answer, not to leave a message with.
    let e = d.words("Hi, the person you're calling is using a screening service. Go ahead and say your name and why you're calling.");
    assert!(matches!(e, Some(MachineEvent::Verdict { cause: Cause::Screening(_), .. })), "{e:?}");
    assert!(matches!(d.cause(), Some(Cause::Screening(_))));
}
