//! The speech loop on live audio: a test line streams the caller's audio
//! (espeak-ng speech) in real time, 20 ms at a time, as SIP or Twilio do,
//! and records what the engine sends back and when.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use parley_domain::call::EndedReason;
use parley_domain::call::Speaker;
use parley_domain::call::{AnsweredBy, MachineCause};
use parley_speech::espeak::Espeak;
use parley_speech::machine::MachineSettings;
use parley_speech::turns::SmartSettings;
use parley_speech::{Pcm, Transcript, synthesise};
use parley_voice::engine::{self, Options, Outcome, Progress};
use parley_voice::live::{Greeting, MachinePolicy, OnMachine};
use parley_voice::provider::{Command, FarEnd, Placed, ProviderEvent};
use parley_voice::session::{AgentSession, BuiltinAgent, Input, Output};
use parley_voice::speech::Transcriber;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Knows what the caller says (the test scripts it): the speech loop's
/// turn-taking is under test here, not recognition.
/// A transcriber that knows what each utterance of the script says: the
/// request whose audio holds the end of an utterance's speech hears its
/// line (so an utterance transcribed in pieces, at its pauses, is heard
/// once, as whisper would); other requests hear nothing.
struct Scripted {
    /// Each line and the last 40 ms of its speech.
    lines: Vec<(&'static str, Pcm)>,
}

impl Scripted {
    /// Pairs `heard` with the script's speech steps, in order.
    fn new(heard: Vec<&'static str>, script: &[Step]) -> Scripted {
        let speech = script.iter().filter_map(|step| match step {
            Step::Audio(pcm) if pcm.iter().any(|s| s.unsigned_abs() > 100) => Some(pcm),
            _ => None,
        });
        let lines = heard
            .into_iter()
            .zip(speech)
            .map(|(text, pcm)| {
                let end = pcm.iter().rposition(|s| s.unsigned_abs() > 100).unwrap_or(0) + 1;
                (text, pcm[end.saturating_sub(320)..end].to_vec())
            })
            .collect();
        Scripted { lines }
    }
}

impl Transcriber for Scripted {
    fn name(&self) -> &'static str {
        "scripted"
    }
    fn start(&self) -> (mpsc::Sender<Pcm>, mpsc::Receiver<Transcript>) {
        let (audio_tx, mut audio_rx) = mpsc::channel::<Pcm>(1024);
        let (text_tx, text_rx) = mpsc::channel(2);
        let lines = self.lines.clone();
        tokio::spawn(async move {
            let mut audio = Vec::new();
            while let Some(frame) = audio_rx.recv().await {
                audio.extend(frame);
            }
            let ends = |tail: &Pcm| audio.windows(tail.len().max(1)).any(|w| w == tail.as_slice());
            let text = lines.iter().find(|(_, tail)| ends(tail)).map_or("", |(text, _)| text);
            let _ = text_tx.send(Transcript::final_text(text.to_owned())).await;
        });
        (audio_tx, text_rx)
    }
}

/// The agent of these tests: the builtin one, except that it says
/// goodbye and hangs up when the caller says "goodbye", transfers when
/// asked to, and keeps every input it was given.
struct Scripting {
    builtin: BuiltinAgent,
    inputs: Arc<Mutex<Vec<Input>>>,
}

impl AgentSession for Scripting {
    fn greeting(&mut self) -> Option<String> {
        self.builtin.greeting()
    }
    fn respond(&mut self, input: Input) -> BoxStream<'static, Output> {
        self.inputs.lock().unwrap().push(input.clone());
        let said = |text: &str, then: Output| {
            futures::stream::iter([Output::TextDelta(text.to_owned()), then, Output::EndOfTurn]).boxed()
        };
        match &input {
            Input::UserSaid(t) if t.contains("Goodbye") => said("Goodbye, take care.", Output::EndCall),
            Input::UserSaid(t) if t.contains("transfer") => {
                let cold = parley_voice::session::Transfer { to: "sip:ana@127.0.0.1".into(), summary: None };
                said("Transferring you now.", Output::Transfer(cold))
            }
            _ => self.builtin.respond(input),
        }
    }
}

/// What the line saw the engine do, timed from the answer.
#[derive(Default)]
struct Line {
    /// When each played frame was sent, and stops.
    played: Vec<Duration>,
    stops: Vec<Duration>,
    /// Hang-ups and transfers.
    ended: Vec<(Duration, Command)>,
}

/// Part of what the caller does.
enum Step {
    Audio(Pcm),
    /// Presses keys (RFC 4733 events), at once.
    Keys(&'static str),
}

/// Streams `script` (silence or speech, in order) in real time after
/// answering, then hangs up; records the engine's commands. The engine's
/// hang-up or transfer ends the call as SIP does (the far end reports it over).
fn line(script: Vec<Step>) -> (Placed, Arc<Mutex<Line>>) {
    let (events_tx, events) = mpsc::channel(64);
    let (commands, mut commands_rx) = mpsc::channel::<Command>(4096);
    let seen = Arc::new(Mutex::new(Line::default()));
    let log = seen.clone();
    tokio::spawn(async move {
        events_tx.send(ProviderEvent::Answered).await.unwrap();
        let answered = Instant::now();
        let mut timeline: Vec<Result<Pcm, char>> = Vec::new();
        for step in script {
            match step {
                Step::Audio(pcm) => timeline.extend(pcm.chunks(160).map(|c| Ok(c.to_vec()))),
                Step::Keys(keys) => timeline.extend(keys.chars().map(Err)),
            }
        }
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let mut timeline = timeline.into_iter();
        loop {
            tokio::select! {
                _ = tick.tick() => loop {
                    match timeline.next() {
                        Some(Ok(frame)) => { let _ = events_tx.send(ProviderEvent::Audio(frame)).await; break; }
                        Some(Err(key)) => { let _ = events_tx.send(ProviderEvent::Dtmf(key)).await; }
                        None => { let _ = events_tx.send(ProviderEvent::Ended(FarEnd::HungUp)).await; break; }
                    }
                },
                Some(command) = commands_rx.recv() => {
                    let at = answered.elapsed();
                    match command {
                        Command::Play(_) => log.lock().unwrap().played.push(at),
                        Command::StopPlayback => log.lock().unwrap().stops.push(at),
                        Command::Hangup | Command::Transfer(_) => {
                            log.lock().unwrap().ended.push((at, command));
                            let _ = events_tx.send(ProviderEvent::Ended(FarEnd::HungUp)).await;
                            break;
                        }
                        Command::SendDtmf(_) => {}
                    }
                }
            }
        }
        // Drain what the engine still sends while it ends the call.
        while commands_rx.recv().await.is_some() {}
    });
    (Placed { provider_call_id: "line".into(), events, commands, client_token: None }, seen)
}

fn silence(ms: usize) -> Pcm {
    vec![0; ms * 8]
}

async fn speech(text: &str) -> Pcm {
    synthesise(&Espeak::new("en-us", 175).expect("espeak-ng is installed"), text).await
}

async fn call(
    first_message: &str,
    script: Vec<Pcm>,
    heard: Vec<&'static str>,
    threshold_ms: i64,
) -> (Outcome, Arc<Mutex<Line>>, std::path::PathBuf) {
    let (outcome, seen, wav, _) = call_with(first_message, script.into_iter().map(Step::Audio).collect(), heard, |o| {
        o.listening.interruption_threshold_ms = threshold_ms;
    })
    .await;
    (outcome, seen, wav)
}

async fn call_with(
    first_message: &str,
    script: Vec<Step>,
    heard: Vec<&'static str>,
    configure: impl FnOnce(&mut Options),
) -> (Outcome, Arc<Mutex<Line>>, std::path::PathBuf, Arc<Mutex<Vec<Input>>>) {
    let (outcome, seen, wav, inputs, _) = call_reporting(first_message, script, heard, configure).await;
    (outcome, seen, wav, inputs)
}

/// [`call_with`], with what the engine reported as the call ran.
async fn call_reporting(
    first_message: &str,
    script: Vec<Step>,
    heard: Vec<&'static str>,
    configure: impl FnOnce(&mut Options),
) -> (Outcome, Arc<Mutex<Line>>, std::path::PathBuf, Arc<Mutex<Vec<Input>>>, Vec<Progress>) {
    let transcriber = Scripted::new(heard, &script);
    let (placed, seen) = line(script);
    let dir = std::env::temp_dir().join(format!("parley-live-{}", ulid::Ulid::new()));
    std::fs::create_dir_all(&dir).unwrap();
    let wav = dir.join("call.wav");
    let mut options = Options::new(Duration::from_secs(60), Some(wav.clone()));
    options.voice = Arc::new(Espeak::new("en-us", 175).unwrap());
    options.transcriber = Some(Arc::new(transcriber));
    options.listening.live = true;
    configure(&mut options);
    let inputs = Arc::new(Mutex::new(Vec::new()));
    let agent = Box::new(Scripting {
        builtin: BuiltinAgent { name: "Ada".into(), first_message: Some(first_message.into()) },
        inputs: inputs.clone(),
    });
    let (progress, mut reports) = mpsc::channel::<Progress>(256);
    let reported = tokio::spawn(async move {
        let mut all = Vec::new();
        while let Some(p) = reports.recv().await {
            all.push(p);
        }
        all
    });
    let (_hangup, hangup_rx) = oneshot::channel();
    let outcome = engine::run(placed, agent, options, progress, hangup_rx).await;
    (outcome, seen, wav, inputs, reported.await.unwrap())
}

/// RMS of the recording's `channel` between two times.
fn loudness(wav: &std::path::Path, channel: usize, from_ms: i64, to_ms: i64) -> f64 {
    let mut reader = hound::WavReader::open(wav).unwrap();
    let samples: Vec<i16> = reader.samples::<i16>().map(Result::unwrap).collect();
    let frames: Vec<i16> = samples.chunks(2).map(|f| f[channel]).collect();
    let (a, b) = ((from_ms * 8) as usize, ((to_ms * 8) as usize).min(frames.len()));
    let part = &frames[a.min(b)..b];
    (part.iter().map(|s| f64::from(*s).powi(2)).sum::<f64>() / part.len().max(1) as f64).sqrt()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_turn_is_heard_at_its_end_and_answered_in_streamed_speech() {
    let words = speech("I would like to book a table for two").await;
    let said_ms = words.len() as i64 / 8;
    let script = vec![silence(2500), words, silence(4000)];
    let (outcome, seen, wav) =
        call("Hello, this is Ada.", script, vec!["I would like to book a table for two."], 300).await;

    let s = &outcome.segments;
    assert_eq!(s.len(), 3, "{s:#?}");
    assert_eq!((s[0].speaker, s[0].text.as_str(), s[0].interrupted), (Speaker::Agent, "Hello, this is Ada.", false));
    assert_eq!((s[1].speaker, s[1].text.as_str()), (Speaker::Caller, "I would like to book a table for two."));
    assert_eq!(
        (s[2].speaker, s[2].text.as_str()),
        (Speaker::Agent, "I understand: I would like to book a table for two.")
    );
    // The caller's turn spans their speech; it ends after the silence hang-over.
    assert!((2300..2700).contains(&s[1].start_ms), "{:?}", s[1]);
    assert!(s[1].end_ms >= 2500 + said_ms - 100 && s[1].end_ms <= 2500 + said_ms + 900, "{:?}", s[1]);
    // The reply starts playing soon after the turn ends: the first sentence
    // is spoken while the rest is still being written.
    let line = seen.lock().unwrap();
    let first_reply_frame =
        line.played.iter().find(|t| t.as_millis() as i64 >= s[1].end_ms).expect("the reply is played");
    let gap = first_reply_frame.as_millis() as i64 - s[1].end_ms;
    assert!(gap < 250, "first reply audio {gap} ms after the caller's turn ended");
    // The reply's latency, from the end of the caller's speech: the
    // end-of-turn silence (600 ms) and the transcript, the model, the voice.
    let l = s[2].latency.expect("the answering turn is timed");
    assert!((580..700).contains(&l.end_of_turn_ms), "the silence rule waits its 600 ms: {l:?}");
    assert!((0..600).contains(&l.stt_ms), "{l:?}");
    assert!(l.llm_first_token_ms >= 0 && l.llm_first_token_ms < 100, "{l:?}");
    assert!(l.tts_first_audio_ms >= 0 && l.tts_first_audio_ms < 100, "{l:?}");
    let steps = l.end_of_turn_ms + l.stt_ms + l.llm_first_token_ms + l.tts_first_audio_ms;
    assert!(l.voice_to_voice_ms >= steps && l.voice_to_voice_ms <= steps + 60, "{l:?}");
    // Measured from where the speech really ended (the detector's end is within 200 ms of it).
    let speech_end = s[2].start_ms - l.voice_to_voice_ms;
    assert!(
        (speech_end - (2500 + said_ms)).abs() < 200,
        "speech ended at {speech_end} ms; the line's at {}",
        2500 + said_ms
    );
    assert!(s[0].latency.is_none() && s[1].latency.is_none(), "the greeting answers nobody; the caller has none");
    assert!(line.stops.is_empty(), "no barge-in");
    // The recording: the caller on the left while they speak, the agent on the right while it answers.
    let wav = outcome.recording.as_ref().map(|r| r.path.clone()).unwrap_or(wav);
    assert!(loudness(&wav, 0, 2600, 2500 + said_ms - 100) > 800.0);
    assert!(loudness(&wav, 1, s[2].start_ms + 100, s[2].end_ms - 100) > 800.0);
    assert!(loudness(&wav, 1, 2700, 2500 + said_ms - 100) < 50.0, "the agent is silent while the caller talks");
}

const LONG_GREETING: &str = "Thanks for calling Parley, the self hosted platform for voice and chat agents. \
                             We can help you with bookings, orders, returns and anything else you need today.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn talking_over_the_agent_stops_it_within_300_ms_and_trims_its_words() {
    let interruption = speech("wait, I have a question about my order").await;
    // The greeting lasts several seconds; the caller talks over it at 3 s.
    let script = vec![Step::Audio(silence(3000)), Step::Audio(interruption), Step::Audio(silence(4000))];
    let heard = vec!["Wait, I have a question about my order."];
    let (outcome, seen, _, inputs) = call_with(LONG_GREETING, script, heard, |o| {
        o.listening.interruption_threshold_ms = 150;
        o.listening.greeting = Greeting::Interruptible;
    })
    .await;
    let line = seen.lock().unwrap();
    assert_eq!(line.stops.len(), 1, "{:?}", line.stops);
    let stop = line.stops[0].as_millis() as i64;
    assert!((3000..3300).contains(&stop), "playback stopped at {stop} ms; the caller began at 3000 ms");
    assert!(
        !line.played.iter().any(|t| t.as_millis() as i64 > stop && (t.as_millis() as i64) < stop + 1000),
        "no agent audio after the stop until the caller's turn is answered"
    );
    let s = &outcome.segments;
    assert_eq!(s[0].speaker, Speaker::Agent);
    assert!(s[0].interrupted, "{:?}", s[0]);
    let full = LONG_GREETING.split_whitespace().count();
    let kept = s[0].text.split_whitespace().count();
    assert!(kept > 3 && kept < full * 2 / 3, "trimmed to what was played: {:?}", s[0].text);
    assert!(LONG_GREETING.starts_with(&s[0].text), "{:?}", s[0].text);
    assert!((s[0].end_ms - stop).abs() < 100);
    // The agent's memory keeps the words heard, not the whole greeting.
    let inputs = inputs.lock().unwrap();
    assert_eq!(inputs[0], Input::Interrupted { played: s[0].text.clone() }, "{inputs:?}");
    // The interruption is the caller's turn, and is answered.
    assert_eq!(s[1].speaker, Speaker::Caller);
    assert_eq!(s[1].text, "Wait, I have a question about my order.");
    assert_eq!(s[2].text, "I understand: Wait, I have a question about my order.");
    assert_eq!(s.len(), 3, "{s:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callee_talking_as_they_pick_up_never_cuts_the_greeting_and_a_question_is_answered_after_it() {
    // The callee speaks at once (a burst of frames at the answer, as a
    // line delivers them), for longer than the interruption threshold.
    let question = speech("hello, is this about my order").await;
    let script = vec![Step::Audio(question), Step::Audio(silence(12_000))];
    let heard = vec!["Hello, is this about my order?"];
    let (outcome, seen, wav, _) = call_with(LONG_GREETING, script, heard, |_| {}).await;
    assert!(seen.lock().unwrap().stops.is_empty(), "the greeting is never stopped");
    let s = &outcome.segments;
    let greeting = s.iter().find(|x| x.speaker == Speaker::Agent).unwrap();
    assert_eq!((greeting.text.as_str(), greeting.interrupted), (LONG_GREETING, false), "{s:#?}");
    let caller = s.iter().find(|x| x.speaker == Speaker::Caller).unwrap();
    assert_eq!(caller.text, "Hello, is this about my order?");
    assert!(caller.start_ms >= 0, "no segment starts before the answer: {caller:?}");
    // Answered once the greeting is over.
    let answer = s.iter().rfind(|x| x.speaker == Speaker::Agent).unwrap();
    assert!(answer.text.starts_with("I understand: Hello, is this about my order"), "{s:#?}");
    assert!(answer.start_ms >= greeting.end_ms, "{s:#?}");
    // The recording has the whole greeting: the agent's side is loud to its end.
    assert!(loudness(&wav, 1, greeting.end_ms - 600, greeting.end_ms - 100) > 300.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_turn_models_a_finished_sentence_ends_the_turn_sooner_than_the_silence_rule() {
    let words = speech("please turn off the lights").await;
    let script = vec![silence(2500), words, silence(4000)];
    let heard = vec!["Please turn off the lights."];
    let smart = (SmartSettings::default(), parley_speech::local_servers::turn_models());
    let steps = script.into_iter().map(Step::Audio).collect();
    let (outcome, _, _, _) = call_with("Hello, this is Ada.", steps, heard, |o| o.listening.smart = Some(smart)).await;
    let s = &outcome.segments;
    assert_eq!(s.len(), 3, "{s:#?}");
    assert_eq!(s[1].text, "Please turn off the lights.");
    // Smart Turn is sure after a 200 ms pause and the words agree: the turn
    // ends well before the silence rule's 600 ms.
    let l = s[2].latency.expect("the answer is timed");
    assert!((150..550).contains(&l.end_of_turn_ms), "{l:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callees_hello_over_the_greeting_is_written_but_not_answered() {
    let hello = speech("hello? hello?").await;
    let script = vec![Step::Audio(silence(500)), Step::Audio(hello), Step::Audio(silence(12_000))];
    let (outcome, seen, _, inputs) = call_with(LONG_GREETING, script, vec!["Hello? Hello?"], |_| {}).await;
    assert!(seen.lock().unwrap().stops.is_empty());
    let s = &outcome.segments;
    assert_eq!(s.len(), 2, "the greeting and the hello, nothing answered: {s:#?}");
    assert!(s.iter().any(|x| x.speaker == Speaker::Agent && x.text == LONG_GREETING && !x.interrupted));
    assert!(s.iter().any(|x| x.speaker == Speaker::Caller && x.text == "Hello? Hello?"));
    assert!(inputs.lock().unwrap().is_empty(), "the agent was not asked to answer a hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_the_callee_greets_after_their_hello_or_after_the_silence() {
    let hello = speech("hello?").await;
    let script = vec![Step::Audio(silence(1000)), Step::Audio(hello), Step::Audio(silence(6000))];
    let (outcome, _, _, _) = call_with("Hi, this is Ada from Acme.", script, vec!["Hello?"], |o| {
        o.listening.greeting = Greeting::WaitForCallee { wait_ms: 3000 };
    })
    .await;
    let s = &outcome.segments;
    assert_eq!(s.len(), 2, "{s:#?}");
    assert_eq!((s[0].speaker, s[0].text.as_str()), (Speaker::Caller, "Hello?"));
    assert_eq!((s[1].speaker, s[1].text.as_str()), (Speaker::Agent, "Hi, this is Ada from Acme."));
    assert!(s[1].start_ms >= s[0].end_ms && s[1].start_ms < 3000, "greeted after the hello: {s:#?}");

    // Nobody speaks: the agent greets once the wait is over.
    let script = vec![Step::Audio(silence(6000))];
    let (outcome, _, _, _) = call_with("Hi, this is Ada from Acme.", script, vec![], |o| {
        o.listening.greeting = Greeting::WaitForCallee { wait_ms: 2000 };
    })
    .await;
    let s = &outcome.segments;
    assert_eq!(s.len(), 1, "{s:#?}");
    assert!((2000..2600).contains(&s[0].start_ms), "greeted {} ms in", s[0].start_ms);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backchannel_under_the_agent_neither_interrupts_nor_takes_a_turn() {
    // "uh" (about 240 ms of voice) at 1 s, under the default 300 ms threshold.
    let backchannel = speech("uh").await;
    let rest = 13_000 - backchannel.len() / 8; // past the end of the greeting
    let script = vec![silence(1000), backchannel, silence(rest)];
    let (outcome, seen, _) = call(LONG_GREETING, script, vec!["Uh."], 300).await;
    assert!(seen.lock().unwrap().stops.is_empty(), "no barge-in");
    let s = &outcome.segments;
    assert_eq!(s.len(), 1, "the greeting only: {s:#?}");
    assert_eq!((s[0].text.as_str(), s[0].interrupted), (LONG_GREETING, false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_hangs_up_once_its_goodbye_has_been_heard() {
    let bye = speech("goodbye").await;
    let script = vec![Step::Audio(silence(2000)), Step::Audio(bye), Step::Audio(silence(10_000))];
    let (outcome, seen, _, _) = call_with("Hi.", script, vec!["Goodbye."], |_| {}).await;
    assert_eq!(outcome.reason, EndedReason::AgentHangup);
    let s = &outcome.segments;
    let last = s.last().unwrap();
    assert_eq!((last.speaker, last.text.as_str(), last.interrupted), (Speaker::Agent, "Goodbye, take care.", false));
    let line = seen.lock().unwrap();
    let (at, command) = &line.ended[0];
    assert_eq!(command, &Command::Hangup);
    let at = at.as_millis() as i64;
    assert!(
        at >= last.end_ms - 40 && at < last.end_ms + 300,
        "hung up at {at} ms; the goodbye ended at {}",
        last.end_ms
    );
    assert!(at < 8000, "long before the caller's line ended");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_transfers_the_call_where_it_was_asked_to() {
    let ask = speech("please transfer me").await;
    let script = vec![Step::Audio(silence(2000)), Step::Audio(ask), Step::Audio(silence(10_000))];
    let (outcome, seen, _, _) = call_with("Hi.", script, vec!["Please transfer me."], |_| {}).await;
    assert_eq!(outcome.reason, EndedReason::Transferred);
    assert_eq!(outcome.transfer_to.as_deref(), Some("sip:ana@127.0.0.1"));
    assert_eq!(seen.lock().unwrap().ended[0].1, Command::Transfer("sip:ana@127.0.0.1".into()));
    assert_eq!(outcome.segments.last().unwrap().text, "Transferring you now.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_pressed_reach_the_agent_as_one_input() {
    let script = vec![
        Step::Audio(silence(1500)),
        Step::Keys("12"),
        Step::Audio(silence(200)),
        Step::Keys("#"),
        Step::Audio(silence(3000)),
    ];
    let (outcome, _, _, inputs) = call_with("Hi.", script, vec![], |_| {}).await;
    assert_eq!(inputs.lock().unwrap().as_slice(), &[Input::Keys("12#".into())]);
    let s: Vec<(Speaker, &str)> = outcome.segments.iter().map(|s| (s.speaker, s.text.as_str())).collect();
    assert_eq!(
        s,
        vec![(Speaker::Agent, "Hi."), (Speaker::Caller, "[pressed 12#]"), (Speaker::Agent, "You pressed 12#.")]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_caller_is_prompted_once_then_hung_up_on() {
    let script = vec![Step::Audio(silence(20_000))];
    let (outcome, seen, _, inputs) = call_with("Hi.", script, vec![], |o| {
        o.listening.silence_reprompt_ms = Some(2000);
        o.listening.silence_hangup_ms = Some(4000);
    })
    .await;
    assert_eq!(outcome.reason, EndedReason::AgentHangup);
    assert_eq!(inputs.lock().unwrap().as_slice(), &[Input::Timeout]);
    let s = &outcome.segments;
    assert_eq!(s.iter().map(|s| s.text.as_str()).collect::<Vec<_>>(), vec!["Hi.", "Are you still there?"]);
    // Re-prompted 2 s after the greeting ended, hung up 4 s after the re-prompt (the checks run each second).
    let prompt_gap = s[1].start_ms - s[0].end_ms;
    assert!((2000..3200).contains(&prompt_gap), "re-prompted {prompt_gap} ms after the greeting");
    let hung_up = seen.lock().unwrap().ended[0].0.as_millis() as i64;
    assert!(
        (4000..5200).contains(&(hung_up - s[1].end_ms)),
        "hung up {} ms after the re-prompt",
        hung_up - s[1].end_ms
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn words_said_just_before_hanging_up_are_still_transcribed() {
    // The caller speaks and the line ends at once: no end-of-turn silence.
    let words = speech("I will call back later").await;
    let script = vec![Step::Audio(silence(1500)), Step::Audio(words)];
    let (outcome, _, _, inputs) = call_with("Hi.", script, vec!["I will call back later."], |_| {}).await;
    let last = outcome.segments.last().unwrap();
    assert_eq!(
        (last.speaker, last.text.as_str()),
        (Speaker::Caller, "I will call back later."),
        "{:#?}",
        outcome.segments
    );
    assert!(inputs.lock().unwrap().is_empty(), "nobody is left to answer");
}

/// A steady tone, as an answering machine's beep (about sox's `synth sine`).
fn tone(ms: usize, hz: f64) -> Pcm {
    (0..ms * 8).map(|n| (16_384.0 * (std::f64::consts::TAU * hz * n as f64 / 8000.0).sin()) as i16).collect()
}

const VOICEMAIL_GREETING: &str =
    "You have reached Alex Smith. I am not available right now. Please leave a message after the tone.";
const MESSAGE: &str = "Hi Alex, this is Ada from Acme. Your order is ready. Goodbye.";

/// Answering-machine detection with `on_machine`, the default thresholds.
fn detecting(on_machine: OnMachine) -> impl FnOnce(&mut Options) {
    move |o| {
        o.listening.machine =
            Some(MachinePolicy { on_machine, answer_screening: true, settings: MachineSettings::default() })
    }
}

/// A voicemail greeting, a 500 ms beep at 1 kHz, then silence.
async fn voicemail_line() -> Vec<Step> {
    let greeting = speech(VOICEMAIL_GREETING).await;
    vec![
        Step::Audio(silence(300)),
        Step::Audio(greeting),
        Step::Audio(silence(300)),
        Step::Audio(tone(500, 1000.0)),
        Step::Audio(silence(8000)),
    ]
}

/// The answering-machine verdicts reported.
fn verdicts(progress: &[Progress]) -> Vec<(AnsweredBy, MachineCause)> {
    progress
        .iter()
        .filter_map(|p| match p {
            Progress::Answerer { by, detection } => Some((*by, detection.cause)),
            _ => None,
        })
        .collect()
}

/// One verdict, a machine, from its greeting's length or words.
fn assert_machine_by_its_greeting(progress: &[Progress]) {
    let v = verdicts(progress);
    assert!(matches!(v[..], [(AnsweredBy::Machine, MachineCause::LongGreeting | MachineCause::MaxWords)]), "{v:?}");
}

/// Where channel `channel` of the recording is loud, 20 ms frame by frame (ms).
fn loud_frames(wav: &std::path::Path, channel: usize) -> Vec<i64> {
    let mut reader = hound::WavReader::open(wav).unwrap();
    let samples: Vec<i16> = reader.samples::<i16>().map(Result::unwrap).collect();
    let side: Vec<f64> = samples.chunks(2).map(|f| f64::from(f[channel])).collect();
    side.chunks(160)
        .enumerate()
        .filter(|(_, f)| (f.iter().map(|x| x * x).sum::<f64>() / f.len() as f64).sqrt() > 300.0)
        .map(|(i, _)| i as i64 * 20)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voicemail_gets_its_message_after_the_beep_and_no_greeting() {
    let script = voicemail_line().await;
    let heard = vec![VOICEMAIL_GREETING, ""];
    let (outcome, seen, wav, inputs, progress) =
        call_reporting("Hi, this is Ada from Acme.", script, heard, detecting(OnMachine::LeaveMessage(MESSAGE.into())))
            .await;
    assert_eq!(outcome.reason, EndedReason::Voicemail);
    assert_machine_by_its_greeting(&progress);
    let (by, d) = outcome.machine.clone().expect("a verdict");
    assert_eq!(by, AnsweredBy::Machine);
    assert!(d.message_left, "{d:?}");
    assert!((1500..3000).contains(&d.decided_ms), "decided within the first seconds: {d:?}");
    let beep_end = d.beep_end_ms.expect("the beep was heard");
    let agent: Vec<_> = outcome.segments.iter().filter(|s| s.speaker == Speaker::Agent).collect();
    assert_eq!(agent.len(), 1, "the message, and no greeting: {:#?}", outcome.segments);
    assert_eq!((agent[0].text.as_str(), agent[0].interrupted), (MESSAGE, false));
    assert!(inputs.lock().unwrap().is_empty(), "the machine's words are not answered");
    // The recording: the caller side's last sound before the message is the
    // beep; the agent starts after its end, and is silent before it.
    let caller = loud_frames(&wav, 0);
    let onset = *loud_frames(&wav, 1).first().expect("the agent spoke");
    let beep_end_heard = caller.iter().filter(|&&t| t < onset).max().unwrap() + 20;
    assert!(
        (beep_end_heard - beep_end).abs() <= 40,
        "beep end {beep_end} ms, heard in the recording at {beep_end_heard}"
    );
    assert!(
        onset >= beep_end_heard && onset <= beep_end_heard + 1500,
        "the message began {onset} ms, the beep ended {beep_end_heard}"
    );
    assert!(loudness(&wav, 1, 0, beep_end_heard) < 50.0, "the agent did not talk over the greeting or the beep");
    // Hung up once the message was played.
    let line = seen.lock().unwrap();
    let (at, command) = &line.ended[0];
    assert_eq!(command, &Command::Hangup);
    assert!((at.as_millis() as i64) >= agent[0].end_ms - 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voicemail_is_hung_up_on_at_the_verdict_when_asked() {
    let script = voicemail_line().await;
    let (outcome, seen, wav, _, progress) = call_reporting(
        "Hi, this is Ada from Acme.",
        script,
        vec![VOICEMAIL_GREETING, ""],
        detecting(OnMachine::HangUp),
    )
    .await;
    assert_eq!(outcome.reason, EndedReason::Voicemail);
    assert_machine_by_its_greeting(&progress);
    let decided = outcome.machine.unwrap().1.decided_ms;
    let hung_up = seen.lock().unwrap().ended[0].0.as_millis() as i64;
    assert!(hung_up >= decided && hung_up < decided + 1000, "hung up {hung_up} ms, decided {decided}");
    assert!(outcome.segments.iter().all(|s| s.speaker == Speaker::Caller), "{:#?}", outcome.segments);
    assert!(loudness(&wav, 1, 0, hung_up) < 50.0, "the agent never spoke");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_saying_hello_is_greeted_once_they_stop() {
    let hello = speech("hello?").await;
    let hello_ms = (hello.len() / 8) as i64;
    let script = vec![Step::Audio(silence(300)), Step::Audio(hello), Step::Audio(silence(5000))];
    let (outcome, _, _, _, progress) =
        call_reporting("Hi, this is Ada from Acme.", script, vec!["Hello?"], detecting(OnMachine::HangUp)).await;
    assert_eq!(verdicts(&progress), vec![(AnsweredBy::Human, MachineCause::AfterGreetingSilence)]);
    assert_eq!(outcome.reason, EndedReason::CallerHangup);
    let s = &outcome.segments;
    let greeting = s.iter().find(|x| x.speaker == Speaker::Agent).expect("greeted");
    assert_eq!(greeting.text, "Hi, this is Ada from Acme.");
    assert!(
        greeting.start_ms >= 300 + hello_ms && greeting.start_ms < 2500,
        "greeted at {} ms: {s:#?}",
        greeting.start_ms
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_screening_prompt_gets_the_greeting_and_the_call_goes_on() {
    const PROMPT: &str = "Hi, the person you are calling is using a screening service. Go ahead and say your name and why you are calling.";
    let prompt = speech(PROMPT).await;
    let script = vec![Step::Audio(silence(300)), Step::Audio(prompt), Step::Audio(silence(6000))];
    let (outcome, seen, _, inputs, progress) = call_reporting(
        "Hi, this is Ada from Acme, calling about your order.",
        script,
        vec![PROMPT],
        detecting(OnMachine::LeaveMessage(MESSAGE.into())),
    )
    .await;
    let v = verdicts(&progress);
    assert_eq!(v.last(), Some(&(AnsweredBy::Machine, MachineCause::Screening)), "{v:?}");
    assert_eq!(outcome.reason, EndedReason::CallerHangup, "the agent did not hang up");
    assert!(seen.lock().unwrap().ended.is_empty());
    let agent: Vec<_> =
        outcome.segments.iter().filter(|s| s.speaker == Speaker::Agent).map(|s| s.text.as_str()).collect();
    assert_eq!(agent, vec!["Hi, this is Ada from Acme, calling about your order."], "{:#?}", outcome.segments);
    assert!(inputs.lock().unwrap().is_empty(), "the prompt is answered by the greeting alone");
}
