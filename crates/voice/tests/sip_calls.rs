//! The `sip` provider against a real SIP peer: SIPp (Debian's sip-tester)
//! as the callee, echoing the RTP it gets.

use std::process::{Command as Process, Stdio};
use std::time::Duration;

use parley_voice::provider::{Command, Dial, FarEnd, Provider, ProviderEvent};
use parley_voice::sip::{SipProvider, SipSettings};
use parley_voice::testing::{free_udp_port, sipp_callee, sipp_callee_saying, sipp_caller};

async fn provider() -> SipProvider {
    SipProvider::start(SipSettings::local("127.0.0.1:0".parse().unwrap(), "parley")).await.unwrap().0
}

/// Starts SIPp's built-in `uas` scenario (180, 200 with SDP, then waits
/// for BYE) for one call, echoing RTP.
fn sipp_uas(port: u16, media_port: u16) -> std::process::Child {
    Process::new("sipp")
        .args(["-sn", "uas", "-i", "127.0.0.1", "-p", &port.to_string(), "-mp", &media_port.to_string()])
        .args(["-rtp_echo", "-m", "1", "-timeout", "60s", "-timeout_error"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sipp runs (apt-get install sip-tester; .ci/run installs it)")
}

fn loud(frame: &[i16]) -> bool {
    let energy: f64 = frame.iter().map(|s| f64::from(*s).powi(2)).sum::<f64>() / frame.len() as f64;
    energy.sqrt() > 1000.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_sipp_rings_is_answered_carries_audio_both_ways_and_hangs_up() {
    let (port, media) = (free_udp_port(), free_udp_port());
    let mut sipp = sipp_uas(port, media);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sip = provider().await;
    let dial = Dial {
        call_id: "call_1".into(),
        from: None,
        to: format!("sip:service@127.0.0.1:{port}"),
        ring_timeout: Duration::from_secs(10),
    };
    let mut placed = sip.dial(dial).await.unwrap();
    let next = async |placed: &mut parley_voice::provider::Placed| {
        tokio::time::timeout(Duration::from_secs(10), placed.events.recv())
            .await
            .expect("an event in time")
            .expect("the call goes on")
    };
    assert_eq!(next(&mut placed).await, ProviderEvent::Ringing);
    assert_eq!(next(&mut placed).await, ProviderEvent::Answered);

    // One second of a 440 Hz tone goes out as RTP, paced at 20 ms, and comes back.
    let tone: Vec<i16> =
        (0..8000).map(|i| ((i as f32 * 440.0 * std::f32::consts::TAU / 8000.0).sin() * 10_000.0) as i16).collect();
    placed.commands.send(Command::Play(tone)).await.unwrap();
    let started = tokio::time::Instant::now();
    let (mut frames, mut loud_frames) = (0, 0);
    while started.elapsed() < Duration::from_secs(2) {
        if let ProviderEvent::Audio(frame) = next(&mut placed).await {
            assert_eq!(frame.len(), 160);
            frames += 1;
            if loud(&frame) {
                loud_frames += 1;
            }
        }
    }
    assert!(frames >= 80, "20 ms frames keep coming, echoed or silent: {frames}");
    assert!((45..=52).contains(&loud_frames), "the second of tone came back: {loud_frames} loud frames");

    placed.commands.send(Command::Hangup).await.unwrap();
    assert_eq!(next(&mut placed).await, ProviderEvent::Ended(FarEnd::HungUp));
    let status = tokio::task::spawn_blocking(move || sipp.wait()).await.unwrap().unwrap();
    assert!(status.success(), "SIPp saw a complete, successful call: {status:?}");
}

async fn events_until_end(placed: &mut parley_voice::provider::Placed) -> Vec<ProviderEvent> {
    let mut seen = Vec::new();
    loop {
        let Ok(event) = tokio::time::timeout(Duration::from_secs(15), placed.events.recv()).await else {
            panic!("no event in time after {seen:?}");
        };
        match event {
            Some(ProviderEvent::Audio(_)) => {}
            Some(e @ ProviderEvent::Ended(_)) => {
                seen.push(e);
                return seen;
            }
            Some(e) => seen.push(e),
            None => return seen,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_callee_ends_the_call_as_busy_and_a_callee_bye_as_hung_up() {
    let sip = provider().await;
    for (scenario, expected) in [
        ("uas_busy.xml", vec![ProviderEvent::Ringing, ProviderEvent::Ended(FarEnd::Busy)]),
        ("uas_hangs_up.xml", vec![ProviderEvent::Answered, ProviderEvent::Ended(FarEnd::HungUp)]),
        ("uas_unavailable.xml", vec![ProviderEvent::Ringing, ProviderEvent::Ended(FarEnd::Failed)]),
        ("uas_rings_forever.xml", vec![ProviderEvent::Ringing, ProviderEvent::Ended(FarEnd::NoAnswer)]),
    ] {
        let (port, media) = (free_udp_port(), free_udp_port());
        let mut sipp = sipp_callee(scenario, port, media);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let dial = Dial {
            call_id: "c".into(),
            from: None,
            to: format!("sip:service@127.0.0.1:{port}"),
            ring_timeout: Duration::from_secs(2),
        };
        let mut placed = sip.dial(dial).await.unwrap();
        assert_eq!(events_until_end(&mut placed).await, expected, "{scenario}");
        let status = tokio::task::spawn_blocking(move || sipp.wait()).await.unwrap().unwrap();
        assert!(status.success(), "{scenario}: SIPp's side of the call went as scripted: {status:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_greets_hears_and_answers_a_sipp_caller_over_rtp() {
    let stt = parley_speech::local_servers::whisper();
    // 160 words a minute: whisper tiny.en hears espeak-ng's "back" as
    // "Mac" at 140 (measured on the audio itself, without the call).
    let espeak = parley_speech::espeak::Espeak::new("en-us", 160).expect("espeak-ng is installed");
    let said = "hello, I would like to know where my order is, please call me back tomorrow morning";
    let words = parley_speech::synthesise(&espeak, said).await;
    let (port, media) = (free_udp_port(), free_udp_port());
    let mut sipp = sipp_callee_saying(&words, port, media);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let sip = provider().await;
    let dial = Dial {
        call_id: "c".into(),
        from: None,
        to: format!("sip:service@127.0.0.1:{port}"),
        ring_timeout: Duration::from_secs(10),
    };
    let placed = sip.dial(dial).await.unwrap();
    let options = live_options(espeak, &stt);
    let agent = Box::new(parley_voice::session::BuiltinAgent {
        name: "Ada".into(),
        first_message: Some("Hello, this is Ada.".into()),
    });
    let (progress, mut reports) = tokio::sync::mpsc::channel(256);
    tokio::spawn(async move { while reports.recv().await.is_some() {} });
    let (_hangup, hangup_rx) = tokio::sync::oneshot::channel();
    let outcome = parley_voice::engine::run(placed, agent, options, progress, hangup_rx).await;

    let s = &outcome.segments;
    assert_eq!(outcome.reason, parley_domain::call::EndedReason::CallerHangup, "{s:#?}");
    assert_eq!(s[0].text, "Hello, this is Ada.", "{s:#?}");
    let caller = s.iter().find(|x| x.speaker == parley_domain::call::Speaker::Caller).expect("the caller was heard");
    let heard = parley_speech::local_servers::recall(said, &caller.text);
    assert!(heard >= 0.9, "whisper heard {:?} over RTP for {said:?}", caller.text);
    let reply = s.iter().rev().find(|x| x.speaker == parley_domain::call::Speaker::Agent).unwrap();
    assert!(reply.text.starts_with("I understand:"), "{s:#?}");
    // The recording has the caller on the left and the agent on the right.
    let recording = outcome.recording.expect("recorded");
    let mut reader = hound::WavReader::open(&recording.path).unwrap();
    let samples: Vec<i16> = reader.samples::<i16>().map(Result::unwrap).collect();
    let rms = |channel: usize, from: i64, to: i64| {
        let part: Vec<f64> = samples
            .chunks(2)
            .skip((from * 8) as usize)
            .take(((to - from) * 8) as usize)
            .map(|f| f64::from(f[channel]))
            .collect();
        (part.iter().map(|x| x * x).sum::<f64>() / part.len().max(1) as f64).sqrt()
    };
    assert!(rms(0, caller.start_ms + 300, caller.end_ms - 300) > 500.0, "caller speech on the left");
    assert!(rms(1, s[0].start_ms + 100, s[0].end_ms - 100) > 500.0, "agent speech on the right");
    let status = tokio::task::spawn_blocking(move || sipp.wait()).await.unwrap().unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trunk_that_challenges_the_invite_gets_the_digest_credentials() {
    let mut settings = SipSettings::local("127.0.0.1:0".parse().unwrap(), "parley");
    settings.credential =
        Some(parley_voice::sip::SipCredential { username: "alice".into(), password: "s3cret".into() });
    let (sip, _) = SipProvider::start(settings).await.unwrap();
    let (port, media) = (free_udp_port(), free_udp_port());
    let mut sipp = sipp_callee("uas_digest_auth.xml", port, media);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let dial = Dial {
        call_id: "c".into(),
        from: None,
        to: format!("sip:+14155550100@127.0.0.1:{port}"),
        ring_timeout: Duration::from_secs(10),
    };
    let mut placed = sip.dial(dial).await.unwrap();
    let Some(ProviderEvent::Answered) = placed.events.recv().await else { panic!("not answered after the challenge") };
    tokio::time::sleep(Duration::from_millis(300)).await;
    placed.commands.send(parley_voice::provider::Command::Hangup).await.unwrap();
    assert_eq!(events_until_end(&mut placed).await, vec![ProviderEvent::Ended(FarEnd::HungUp)]);
    let status = tokio::task::spawn_blocking(move || sipp.wait()).await.unwrap().unwrap();
    assert!(status.success(), "SIPp checked the digest response (alice / s3cret): {status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_registers_at_a_trunk_that_challenges_it() {
    let (port, media) = (free_udp_port(), free_udp_port());
    let mut registrar = sipp_callee("uas_registrar.xml", port, media);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut settings = SipSettings::local("127.0.0.1:0".parse().unwrap(), "parley");
    settings.trunk = Some(format!("127.0.0.1:{port}"));
    settings.register = true;
    settings.credential =
        Some(parley_voice::sip::SipCredential { username: "alice".into(), password: "s3cret".into() });
    let (_sip, _) = SipProvider::start(settings).await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(20), tokio::task::spawn_blocking(move || registrar.wait()))
        .await
        .expect("the registration finished")
        .unwrap()
        .unwrap();
    assert!(
        status.success(),
        "SIPp challenged, checked the digest (alice / s3cret) and the Contact, and granted: {status:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inbound_call_from_a_trusted_address_rings_is_answered_and_hears_keys() {
    let mut settings = SipSettings::local("127.0.0.1:0".parse().unwrap(), "parley");
    settings.trusted = vec!["127.0.0.1".parse().unwrap()];
    let (sip, mut inbound) = SipProvider::start(settings).await.unwrap();
    let mut sipp = sipp_caller("uac_presses_keys.xml", sip.local_addr(), "+14155550100");
    let call = tokio::time::timeout(Duration::from_secs(10), inbound.recv()).await.unwrap().unwrap();
    assert_eq!((call.from.as_str(), call.to.as_str()), ("+14155550123", "+14155550100"));
    let mut placed = call.answer().await.unwrap();
    let events = events_until_end(&mut placed).await;
    let keys: String =
        events.iter().filter_map(|e| if let ProviderEvent::Dtmf(k) = e { Some(*k) } else { None }).collect();
    assert_eq!(keys, "12#", "{events:?}");
    assert_eq!(events.first(), Some(&ProviderEvent::Answered));
    assert_eq!(events.last(), Some(&ProviderEvent::Ended(FarEnd::HungUp)));
    let status = tokio::task::spawn_blocking(move || sipp.wait()).await.unwrap().unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invite_from_an_untrusted_address_is_refused_and_a_refused_call_gets_its_status() {
    // No trunk, nothing trusted: every INVITE is refused with 403 before a call exists.
    let (sip, mut inbound) =
        SipProvider::start(SipSettings::local("127.0.0.1:0".parse().unwrap(), "parley")).await.unwrap();
    let mut sipp = sipp_caller("uac_presses_keys.xml", sip.local_addr(), "+14155550100");
    let status = tokio::task::spawn_blocking(move || sipp.wait()).await.unwrap().unwrap();
    assert!(!status.success(), "SIPp's INVITE was answered");
    assert!(tokio::time::timeout(Duration::from_millis(200), inbound.recv()).await.is_err(), "no call was handed over");
    // Trusted, but nobody takes the number: 404, and SIPp's scenario fails at the 200 it expected.
    let mut settings = SipSettings::local("127.0.0.1:0".parse().unwrap(), "parley");
    settings.trusted = vec!["127.0.0.1".parse().unwrap()];
    let (sip, mut inbound) = SipProvider::start(settings).await.unwrap();
    let mut sipp = sipp_caller("uac_presses_keys.xml", sip.local_addr(), "+19995550000");
    let call = tokio::time::timeout(Duration::from_secs(10), inbound.recv()).await.unwrap().unwrap();
    call.refuse(parley_voice::provider::Refusal::NotFound);
    let status = tokio::task::spawn_blocking(move || sipp.wait()).await.unwrap().unwrap();
    assert!(!status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_refers_the_callee_to_the_second_party_then_hangs_up() {
    let sip = provider().await;
    // The second party, where the callee is sent.
    let (second_port, second_media) = (free_udp_port(), free_udp_port());
    let target = format!("sip:ana@127.0.0.1:{second_port}");
    let mut second = sipp_uas(second_port, second_media);
    let dir = std::env::temp_dir().join(format!("parley-refer-{}", ulid::Ulid::new()));
    std::fs::create_dir_all(&dir).unwrap();
    let template = std::fs::read_to_string(parley_voice::testing::scenario_path("uas_transferred.xml")).unwrap();
    let scenario = dir.join("uas_transferred.xml");
    std::fs::write(&scenario, template.replace("TRANSFER_TARGET", &regex_escape(&target))).unwrap();
    let (port, media) = (free_udp_port(), free_udp_port());
    let mut callee = sipp_callee(&scenario.display().to_string(), port, media);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let dial = Dial {
        call_id: "c".into(),
        from: None,
        to: format!("sip:service@127.0.0.1:{port}"),
        ring_timeout: Duration::from_secs(5),
    };
    let mut placed = sip.dial(dial).await.unwrap();
    let first = placed.events.recv().await;
    assert_eq!(first, Some(ProviderEvent::Answered));
    placed.commands.send(Command::Transfer(target.clone())).await.unwrap();
    assert_eq!(events_until_end(&mut placed).await, vec![ProviderEvent::Ended(FarEnd::HungUp)]);
    let status = tokio::task::spawn_blocking(move || callee.wait()).await.unwrap().unwrap();
    assert!(status.success(), "the callee got a REFER to {target}, then the BYE: {status:?}");
    let _ = second.kill();
    let _ = second.wait();
}

/// `s` as a regular expression matching it literally (SIPp's `ereg`).
fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '@' || c == ':' { c.to_string() } else { format!("\\{c}") })
        .collect()
}

/// A live call's options: espeak-ng speaking, `stt` hearing, recorded in
/// a new temporary directory.
fn live_options(
    espeak: parley_speech::espeak::Espeak,
    stt: &parley_speech::local_servers::LocalServer,
) -> parley_voice::engine::Options {
    let dir = std::env::temp_dir().join(format!("parley-sip-{}", ulid::Ulid::new()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut options = parley_voice::engine::Options::new(Duration::from_secs(60), Some(dir.join("call.wav")));
    options.voice = std::sync::Arc::new(espeak);
    options.transcriber = Some(std::sync::Arc::new(parley_speech::wyoming::WyomingTranscriber {
        address: stt.address(),
        language: Some("en".into()),
    }));
    options.listening.live = true;
    options
}

/// The agent of the warm transfer tests: asked for a person, it asks the
/// caller to hold and transfers warm to `to` with [`SUMMARY`]; told the
/// transfer failed, it says so.
struct Transferring {
    to: String,
    inputs: std::sync::Arc<std::sync::Mutex<Vec<parley_voice::session::Input>>>,
}

const SUMMARY: &str = "I have a caller whose order never arrived and who would like to speak with a person.";
const SORRY: &str = "Sorry, nobody answered. How else can I help?";

impl parley_voice::session::AgentSession for Transferring {
    fn greeting(&mut self) -> Option<String> {
        Some("Hello, this is Ada.".into())
    }
    fn respond(
        &mut self,
        input: parley_voice::session::Input,
    ) -> futures::stream::BoxStream<'static, parley_voice::session::Output> {
        use futures::StreamExt;
        use parley_voice::session::{Input, Output, Transfer};
        self.inputs.lock().unwrap().push(input.clone());
        let said = |text: &str| Output::TextDelta(text.to_owned());
        let outputs = match input {
            Input::UserSaid(t) if t.to_lowercase().contains("person") => {
                let warm = Transfer { to: self.to.clone(), summary: Some(SUMMARY.into()) };
                vec![said("Please hold while I call them."), Output::Transfer(warm)]
            }
            Input::TransferFailed { .. } => vec![said(SORRY)],
            _ => vec![],
        };
        futures::stream::iter(outputs).chain(futures::stream::once(async { Output::EndOfTurn })).boxed()
    }
}

/// A caller's line for the warm transfer tests: quiet through the
/// greeting, asks for a person, holds quiet for `hold_s`, says `then`, and
/// stays a little before hanging up.
async fn asking_for_a_person(espeak: &parley_speech::espeak::Espeak, hold_s: usize, then: &str) -> Vec<i16> {
    let quiet = |s: f64| vec![0i16; (s * 8000.0) as usize];
    let mut line = quiet(2.5);
    line.extend(parley_speech::synthesise(espeak, "I would like to talk to a person, please").await);
    line.extend(quiet(hold_s as f64));
    line.extend(parley_speech::synthesise(espeak, then).await);
    line.extend(quiet(3.0));
    line
}

/// Runs the engine on a call to the caller at `caller_port`, with the
/// transfer line dialling from the same SIP endpoint.
async fn warm_call(
    sip: SipProvider,
    caller_port: u16,
    agent: Transferring,
    stt: &parley_speech::local_servers::LocalServer,
    ring_timeout: Duration,
) -> parley_voice::engine::Outcome {
    let espeak = parley_speech::espeak::Espeak::new("en-us", 160).unwrap();
    let sip = std::sync::Arc::new(sip);
    let dial =
        Dial { call_id: "c".into(), from: None, to: format!("sip:caller@127.0.0.1:{caller_port}"), ring_timeout };
    let placed = sip.dial(dial).await.unwrap();
    let mut options = live_options(espeak, &stt);
    options.transfer_line = Some(parley_voice::warm::TransferLine {
        provider: sip,
        call_id: "c-transfer".into(),
        from: None,
        ring_timeout,
    });
    let (progress, mut reports) = tokio::sync::mpsc::channel(256);
    tokio::spawn(async move { while reports.recv().await.is_some() {} });
    let (_hangup, hangup_rx) = tokio::sync::oneshot::channel();
    parley_voice::engine::run(placed, Box::new(agent), options, progress, hangup_rx).await
}

/// Issue 35: a warm transfer to a second SIPp that answers. The person
/// (SIPp echoing what it gets) hears the summary while the caller holds,
/// then caller and person are joined: the caller's next words reach the
/// person's line and come back from it, and the person hangs up after
/// the caller. The transcript tells it all in order; the recording's right
/// channel carries the person.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_transfer_briefs_the_person_then_joins_the_caller_to_them() {
    use parley_domain::call::{EndedReason, Speaker};
    use parley_speech::local_servers::recall;
    let stt = parley_speech::local_servers::whisper();
    let espeak = parley_speech::espeak::Espeak::new("en-us", 160).unwrap();
    let then = "hello, are you there? my parcel never came";
    let line = asking_for_a_person(&espeak, 14, then).await;
    let (caller_port, caller_media) = (free_udp_port(), free_udp_port());
    let mut caller = parley_voice::testing::sipp_callee_line(&line, caller_port, caller_media);
    let (person_port, person_media) = (free_udp_port(), free_udp_port());
    let mut person = sipp_uas(person_port, person_media);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let to = format!("sip:desk@127.0.0.1:{person_port}");
    let inputs = std::sync::Arc::default();
    let agent = Transferring { to: to.clone(), inputs };
    let outcome = warm_call(provider().await, caller_port, agent, &stt, Duration::from_secs(10)).await;

    let s = &outcome.segments;
    assert_eq!(
        (outcome.reason, outcome.transfer_to.as_deref()),
        (EndedReason::Transferred, Some(to.as_str())),
        "{s:#?}"
    );
    let at = |speaker: Speaker, text: &str, from: usize| {
        s.iter()
            .enumerate()
            .skip(from)
            .find(|(_, x)| x.speaker == speaker && recall(text, &x.text) >= 0.6)
            .map(|(i, _)| i)
            .unwrap_or_else(|| panic!("no {speaker:?} segment like {text:?} after #{from}: {s:#?}"))
    };
    let asked = at(Speaker::Caller, "I would like to talk to a person, please", 0);
    let hold = at(Speaker::Agent, "Please hold while I call them.", asked);
    // The summary, said to the person only; their line echoes it back.
    let briefed = s.iter().position(|x| x.speaker == Speaker::Agent && x.text == SUMMARY).expect("the summary");
    assert!(briefed > hold, "{s:#?}");
    let echoed = at(Speaker::Human, SUMMARY, briefed);
    // (A segment starts with the 200 ms heard before its speech was detected.)
    assert!(s[echoed].start_ms >= s[briefed].start_ms - 250, "{s:#?}");
    // Joined: the caller's words go to the person's line and come back.
    let spoke = at(Speaker::Caller, then, hold);
    let back = at(Speaker::Human, then, echoed + 1);
    assert!(s[back].start_ms >= s[spoke].start_ms - 250 && s[back].start_ms < s[spoke].end_ms, "{s:#?}");
    // The agent said nothing to the caller after asking them to hold.
    let after: Vec<_> = s[hold + 1..].iter().filter(|x| x.speaker == Speaker::Agent && x.text != SUMMARY).collect();
    assert!(after.is_empty(), "{after:#?}");
    // The recording: the person (their echo of the caller) on the right.
    let recording = outcome.recording.expect("recorded");
    let mut reader = hound::WavReader::open(&recording.path).unwrap();
    let samples: Vec<i16> = reader.samples::<i16>().map(Result::unwrap).collect();
    let right: Vec<f64> = samples
        .chunks(2)
        .skip((s[back].start_ms * 8) as usize)
        .take(((s[back].end_ms - s[back].start_ms) * 8) as usize)
        .map(|f| f64::from(f[1]))
        .collect();
    let rms = (right.iter().map(|x| x * x).sum::<f64>() / right.len().max(1) as f64).sqrt();
    assert!(rms > 300.0, "the person's side is in the recording: {rms}");
    for (who, sipp) in [("caller", &mut caller), ("person", &mut person)] {
        let status = sipp.wait().unwrap();
        assert!(status.success(), "the {who}'s SIPp: {status:?}");
    }
}

/// Issue 35: a warm transfer to a second SIPp that rings and never
/// answers: after the ring timeout the agent is back with the caller,
/// says so, and the call goes on until the caller hangs up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_transfer_nobody_answers_comes_back_to_the_caller() {
    use parley_domain::call::{EndedReason, Speaker};
    use parley_voice::session::Input;
    let stt = parley_speech::local_servers::whisper();
    let espeak = parley_speech::espeak::Espeak::new("en-us", 160).unwrap();
    let line = asking_for_a_person(&espeak, 9, "okay, thank you").await;
    let (caller_port, caller_media) = (free_udp_port(), free_udp_port());
    let mut caller = parley_voice::testing::sipp_callee_line(&line, caller_port, caller_media);
    let (person_port, person_media) = (free_udp_port(), free_udp_port());
    let mut person = sipp_callee("uas_rings_forever.xml", person_port, person_media);
    tokio::time::sleep(Duration::from_millis(500)).await;

    let to = format!("sip:desk@127.0.0.1:{person_port}");
    let inputs: std::sync::Arc<std::sync::Mutex<Vec<Input>>> = std::sync::Arc::default();
    let agent = Transferring { to: to.clone(), inputs: inputs.clone() };
    let outcome = warm_call(provider().await, caller_port, agent, &stt, Duration::from_secs(3)).await;

    let s = &outcome.segments;
    assert_eq!((outcome.reason, outcome.transfer_to.clone()), (EndedReason::CallerHangup, None), "{s:#?}");
    let failed = Input::TransferFailed { to, why: "nobody answered".into() };
    assert!(inputs.lock().unwrap().contains(&failed), "{:#?}", inputs.lock().unwrap());
    let hold = s.iter().position(|x| x.text == "Please hold while I call them.").expect("asked to hold");
    let sorry = s.iter().position(|x| x.speaker == Speaker::Agent && x.text == SORRY).expect("back with the caller");
    // Rang for the timeout (3 s) after the hold message, then came back.
    let rang = s[sorry].start_ms - s[hold].end_ms;
    assert!((2500..6000).contains(&rang), "came back {rang} ms after the hold message: {s:#?}");
    assert!(!s.iter().any(|x| x.text == SUMMARY || x.speaker == Speaker::Human), "{s:#?}");
    for (who, sipp) in [("caller", &mut caller), ("person", &mut person)] {
        let status = sipp.wait().unwrap();
        assert!(status.success(), "the {who}'s SIPp: {status:?}");
    }
}
