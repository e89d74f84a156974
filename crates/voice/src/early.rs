//! Early transcription: the caller's utterance is transcribed while they
//! pause, before their turn is judged over, so the end-of-turn silence
//! hides the transcription's time.
//!
//! At most one request is in flight per call. Each request carries the
//! utterance from the start of its window: whisper hears a phrase whole
//! (sent in pieces cut at every short pause, "where my order is" came back
//! as "Where am I ordering?"), and a newer answer replaces the older. A
//! window closes once it holds 8 s of audio; what it heard is kept, and
//! the next window starts where its last request ended, so a long
//! utterance is never sent again from its start. (Abandoning a stale
//! request and sending the longer utterance again queued three requests on
//! one whisper server and cost seconds.)

use std::sync::Arc;

use futures::FutureExt;
use parley_speech::{TimedWord, Transcript};
use tokio::task::JoinHandle;

use crate::run::{hear, inaudible};
use crate::speech::Transcriber;

/// Samples per millisecond at the loop's rate.
const PER_MS: usize = parley_speech::SAMPLE_RATE as usize / 1000;
/// The most audio one request carries again (whisper's own window is 30 s;
/// 8 s keeps a request's time near a short phrase's).
const WINDOW: usize = 8000 * PER_MS;

/// One piece of the utterance heard: from this sample on.
struct Piece {
    from: usize,
    transcript: Option<Transcript>,
}

/// An utterance being transcribed in windows.
#[derive(Default)]
pub(crate) struct Early {
    /// Samples of the utterance sent so far.
    sent: usize,
    /// Where the current window starts.
    window: usize,
    pieces: Vec<Piece>,
    in_flight: Option<(usize, JoinHandle<Option<Transcript>>)>,
}

impl Early {
    /// Whether a request is out.
    #[cfg(test)]
    pub(crate) fn busy(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Keeps a finished request's words; whether one finished.
    pub(crate) fn collect(&mut self) -> bool {
        if let Some((from, handle)) = &mut self.in_flight
            && let Some(done) = handle.now_or_never()
        {
            let from = *from;
            self.keep(Piece { from, transcript: done.ok().flatten() });
            self.in_flight = None;
            return true;
        }
        false
    }

    /// A newer hearing of a window replaces what was heard of it.
    fn keep(&mut self, piece: Piece) {
        self.pieces.retain(|p| p.from < piece.from);
        self.pieces.push(piece);
    }

    /// The words heard so far, in order.
    pub(crate) fn text(&self) -> String {
        let texts = self.pieces.iter().filter_map(|p| p.transcript.as_ref()).map(|t| t.text.trim());
        texts.collect::<Vec<_>>().join(" ")
    }

    /// Where a request for audio up to `end` starts: the window's start,
    /// or (the window full) the end of what was sent.
    fn window_for(&mut self, end: usize) -> usize {
        if end - self.window > WINDOW {
            self.window = self.sent;
        }
        self.window
    }

    /// Sends the window up to the audio's end, unless a request is out or
    /// nothing new came; whether it did.
    pub(crate) fn send(&mut self, transcriber: &Arc<dyn Transcriber>, audio: &[i16]) -> bool {
        self.collect();
        if self.in_flight.is_some() || self.sent >= audio.len() {
            return false;
        }
        let from = self.window_for(audio.len());
        let (piece, transcriber) = (audio[from..].to_vec(), transcriber.clone());
        self.sent = audio.len();
        self.in_flight = Some((from, tokio::spawn(async move { hear(transcriber.as_ref(), &piece).await })));
        true
    }

    /// The whole utterance's transcript: the request out is waited for,
    /// and if speech followed it (up to `voiced_to`, the end of the
    /// speech), its window is heard once more to there.
    pub(crate) async fn finish(
        mut self,
        transcriber: Option<&Arc<dyn Transcriber>>,
        audio: &[i16],
        voiced_to: usize,
    ) -> Transcript {
        let Some(transcriber) = transcriber else { return inaudible() };
        if let Some((from, handle)) = self.in_flight.take() {
            let transcript = handle.await.ok().flatten();
            self.keep(Piece { from, transcript });
        }
        if self.sent < voiced_to.min(audio.len()) {
            let from = self.window_for(audio.len());
            let transcript = hear(transcriber.as_ref(), &audio[from..]).await;
            self.keep(Piece { from, transcript });
        }
        join(self.pieces).unwrap_or_else(inaudible)
    }

    /// Gives up (the utterance was a backchannel, or the call ended).
    pub(crate) fn abandon(self) {
        if let Some((_, handle)) = self.in_flight {
            handle.abort();
        }
    }
}

/// The pieces' words in order, their timings from the utterance's start.
fn join(pieces: Vec<Piece>) -> Option<Transcript> {
    let mut text = Vec::new();
    let mut words = Vec::new();
    for piece in pieces {
        let Some(t) = piece.transcript else { continue };
        let offset = (piece.from / PER_MS) as i64;
        text.push(t.text.trim().to_owned());
        words.extend(t.words.into_iter().map(|w| TimedWord {
            word: w.word,
            start_ms: w.start_ms + offset,
            end_ms: w.end_ms + offset,
        }));
    }
    (!text.is_empty()).then(|| Transcript { text: text.join(" "), is_final: true, words })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::sync::mpsc;

    /// A transcriber that counts requests in flight and says how many
    /// samples it was given.
    #[derive(Default)]
    struct Counting {
        in_flight: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
        lengths: Arc<Mutex<Vec<usize>>>,
    }

    impl Transcriber for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }

        fn start(&self) -> (mpsc::Sender<crate::provider::Pcm>, mpsc::Receiver<Transcript>) {
            let (audio_tx, mut audio_rx) = mpsc::channel::<crate::provider::Pcm>(1024);
            let (text_tx, text_rx) = mpsc::channel(1);
            let (now, most, lengths) = (self.in_flight.clone(), self.most.clone(), self.lengths.clone());
            tokio::spawn(async move {
                let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(n, Ordering::SeqCst);
                let mut len = 0;
                while let Some(frame) = audio_rx.recv().await {
                    len += frame.len();
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                lengths.lock().unwrap().push(len);
                now.fetch_sub(1, Ordering::SeqCst);
                let _ = text_tx.send(Transcript::final_text(format!("{len}"))).await;
            });
            (audio_tx, text_rx)
        }
    }

    #[tokio::test]
    async fn one_request_at_a_time_each_hearing_the_phrase_whole() {
        let counting = Counting::default();
        let (most, lengths) = (counting.most.clone(), counting.lengths.clone());
        let transcriber: Arc<dyn Transcriber> = Arc::new(counting);
        let mut early = Early::default();
        let audio = vec![1i16; 8000 * 3];
        // Three pauses as the utterance grows: the first request is still
        // out at the second, so only the first and (after it) the third go,
        // each from the utterance's start; the end hears it all once more.
        early.send(&transcriber, &audio[..5280]);
        early.send(&transcriber, &audio[..10880]);
        assert!(early.busy());
        tokio::time::sleep(std::time::Duration::from_millis(120)).await;
        early.send(&transcriber, &audio[..15360]);
        let transcript = early.finish(Some(&transcriber), &audio, 20000).await;
        assert_eq!(most.load(Ordering::SeqCst), 1, "never two requests at once");
        assert_eq!(*lengths.lock().unwrap(), [5280, 15360, 24000]);
        assert_eq!(transcript.text, "24000", "the newest hearing replaces the older");
    }

    #[tokio::test]
    async fn a_long_utterance_is_heard_in_windows_of_at_most_8_s() {
        let counting = Counting::default();
        let lengths = counting.lengths.clone();
        let transcriber: Arc<dyn Transcriber> = Arc::new(counting);
        let mut early = Early::default();
        let audio = vec![1i16; 8000 * 13];
        let pause = || tokio::time::sleep(std::time::Duration::from_millis(120));
        early.send(&transcriber, &audio[..30_000]);
        pause().await;
        early.send(&transcriber, &audio[..50_000]);
        pause().await;
        // Past 8 s (64,000 samples) from its start the window closes: the
        // next one starts where the last request ended.
        early.send(&transcriber, &audio[..90_000]);
        pause().await;
        let transcript = early.finish(Some(&transcriber), &audio[..100_000], 100_000).await;
        assert_eq!(*lengths.lock().unwrap(), [30_000, 50_000, 40_000, 50_000]);
        assert_eq!(transcript.text, "50000 50000");
        assert!(early_words_offset_is_the_window_start());
    }

    fn early_words_offset_is_the_window_start() -> bool {
        let word = TimedWord { word: "x".into(), start_ms: 10, end_ms: 20 };
        let piece = Piece {
            from: 50_000,
            transcript: Some(Transcript { text: "x".into(), is_final: true, words: vec![word] }),
        };
        join(vec![piece]).unwrap().words[0].start_ms == 50_000 / PER_MS as i64 + 10
    }

    #[tokio::test]
    async fn trailing_silence_after_the_last_request_is_not_sent() {
        let counting = Counting::default();
        let lengths = counting.lengths.clone();
        let transcriber: Arc<dyn Transcriber> = Arc::new(counting);
        let mut early = Early::default();
        let audio = vec![1i16; 8000];
        early.send(&transcriber, &audio[..6000]);
        // The speech ended at sample 5000: what follows is the end-of-turn silence.
        let transcript = early.finish(Some(&transcriber), &audio, 5000).await;
        assert_eq!(*lengths.lock().unwrap(), [6000]);
        assert_eq!(transcript.text, "6000");
    }

    #[test]
    fn pieces_keep_word_times_from_the_utterance_start() {
        let word = |w: &str, s, e| TimedWord { word: w.into(), start_ms: s, end_ms: e };
        let pieces = vec![
            Piece {
                from: 0,
                transcript: Some(Transcript { text: "I would".into(), is_final: true, words: vec![word("I", 0, 100)] }),
            },
            Piece { from: 8000, transcript: None },
            Piece {
                from: 16000,
                transcript: Some(Transcript {
                    text: " like tea.".into(),
                    is_final: true,
                    words: vec![word("like", 50, 300)],
                }),
            },
        ];
        let t = join(pieces).unwrap();
        assert_eq!(t.text, "I would like tea.");
        assert_eq!(t.words, [word("I", 0, 100), word("like", 2050, 2300)]);
        assert!(join(vec![Piece { from: 0, transcript: None }]).is_none());
    }
}
