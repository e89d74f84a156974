//! Early transcription: the caller's utterance is transcribed while they
//! pause, before their turn is judged over, so the end-of-turn silence
//! hides the transcription's time.
//!
//! At most one request is in flight per call, and nothing is sent twice:
//! what a request heard is kept, and the next one carries only the audio
//! after it. (Abandoning a stale request and sending the longer utterance
//! again queued three requests on one whisper server and cost seconds.)

use std::sync::Arc;

use futures::FutureExt;
use parley_speech::{TimedWord, Transcript};
use tokio::task::JoinHandle;

use crate::run::{hear, inaudible};
use crate::speech::Transcriber;

/// Samples per millisecond at the loop's rate.
const PER_MS: usize = parley_speech::SAMPLE_RATE as usize / 1000;

/// One piece of the utterance heard: from this sample on.
struct Piece {
    from: usize,
    transcript: Option<Transcript>,
}

/// An utterance being transcribed in pieces.
#[derive(Default)]
pub(crate) struct Early {
    /// Samples of the utterance sent so far.
    sent: usize,
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
            self.pieces.push(Piece { from: *from, transcript: done.ok().flatten() });
            self.in_flight = None;
            return true;
        }
        false
    }

    /// The words heard so far, in order.
    pub(crate) fn text(&self) -> String {
        let texts = self.pieces.iter().filter_map(|p| p.transcript.as_ref()).map(|t| t.text.trim());
        texts.collect::<Vec<_>>().join(" ")
    }

    /// Sends the audio not yet sent, unless a request is out; whether it did.
    pub(crate) fn send(&mut self, transcriber: &Arc<dyn Transcriber>, audio: &[i16]) -> bool {
        self.collect();
        if self.in_flight.is_some() || self.sent >= audio.len() {
            return false;
        }
        let (from, piece, transcriber) = (self.sent, audio[self.sent..].to_vec(), transcriber.clone());
        self.sent = audio.len();
        self.in_flight = Some((from, tokio::spawn(async move { hear(transcriber.as_ref(), &piece).await })));
        true
    }

    /// The whole utterance's transcript: the request out is waited for,
    /// and audio after it (up to `voiced_to`, the end of the speech) is
    /// sent once more.
    pub(crate) async fn finish(
        mut self,
        transcriber: Option<&Arc<dyn Transcriber>>,
        audio: &[i16],
        voiced_to: usize,
    ) -> Transcript {
        let Some(transcriber) = transcriber else { return inaudible() };
        if let Some((from, handle)) = self.in_flight.take() {
            self.pieces.push(Piece { from, transcript: handle.await.ok().flatten() });
        }
        if self.sent < voiced_to.min(audio.len()) {
            let transcript = hear(transcriber.as_ref(), &audio[self.sent..]).await;
            self.pieces.push(Piece { from: self.sent, transcript });
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
    async fn one_request_at_a_time_and_no_audio_sent_twice() {
        let counting = Counting::default();
        let (most, lengths) = (counting.most.clone(), counting.lengths.clone());
        let transcriber: Arc<dyn Transcriber> = Arc::new(counting);
        let mut early = Early::default();
        let audio = vec![1i16; 8000 * 3];
        // Three pauses as the utterance grows: the first request is still
        // out at the second, so only the first and (after it) the third go.
        early.send(&transcriber, &audio[..5280]);
        early.send(&transcriber, &audio[..10880]);
        assert!(early.busy());
        tokio::time::sleep(std::time::Duration::from_millis(120)).await;
        early.send(&transcriber, &audio[..15360]);
        let transcript = early.finish(Some(&transcriber), &audio, 20000).await;
        assert_eq!(most.load(Ordering::SeqCst), 1, "never two requests at once");
        assert_eq!(*lengths.lock().unwrap(), [5280, 15360 - 5280, 24000 - 15360], "each sample sent once");
        assert_eq!(transcript.text, "5280 10080 8640");
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
