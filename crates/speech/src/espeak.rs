//! espeak-ng, the zero-set-up text-to-speech: Debian's `libespeak-ng`,
//! loaded when first used (so Parley builds and starts without it), driven
//! through a small FFI of our own (the `espeakng` crates do not build
//! against Debian's library).
//!
//! The library keeps global state, so one thread owns it and speaks one
//! sentence at a time; its 22.05 kHz output is resampled to 8 kHz and cut
//! into 20 ms frames as it is produced (first audio in about a
//! millisecond). Dropping the frames' receiver aborts the sentence being
//! spoken: the library's callback returns 1.

use std::cell::RefCell;
use std::ffi::{CString, c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;
use std::sync::mpsc as std_mpsc;

use tokio::sync::mpsc;

use crate::resample::Resampler;
use crate::{FRAME_SAMPLES, Pcm, SAMPLE_RATE, Synthesiser};

/// The shared library's soname on Debian and Ubuntu.
const LIBRARY: &str = "libespeak-ng.so.1";
/// `AUDIO_OUTPUT_SYNCHRONOUS`: `espeak_Synth` returns when the text is spoken.
const AUDIO_OUTPUT_SYNCHRONOUS: c_int = 2;
/// `espeakINITIALIZE_DONT_EXIT`: report errors instead of exiting the process.
const INITIALIZE_DONT_EXIT: c_int = 0x8000;
const CHARS_UTF8: c_uint = 1;
const POS_CHARACTER: c_int = 1;
const PARAM_RATE: c_int = 1;

type SynthCallback = extern "C" fn(*mut i16, c_int, *mut c_void) -> c_int;

/// The library's entry points.
struct Api {
    synth: unsafe extern "C" fn(*const c_void, usize, c_uint, c_int, c_uint, c_uint, *mut c_uint, *mut c_void) -> c_int,
    set_voice: unsafe extern "C" fn(*const c_char) -> c_int,
    set_parameter: unsafe extern "C" fn(c_int, c_int, c_int) -> c_int,
    /// The library's output rate (22,050 Hz for its voices).
    rate: u32,
    _library: libloading::Library,
}

/// One sentence to speak.
struct Job {
    text: String,
    voice: String,
    words_per_minute: u32,
    frames: mpsc::Sender<Pcm>,
    done: std_mpsc::Sender<()>,
}

/// Where the callback puts audio: the job being spoken, on the library's thread.
struct Sink {
    resampler: Resampler,
    pending: Pcm,
    frames: mpsc::Sender<Pcm>,
    cancelled: bool,
}

thread_local! {
    static SINK: RefCell<Option<Sink>> = const { RefCell::new(None) };
}

extern "C" fn on_audio(wav: *mut i16, count: c_int, _events: *mut c_void) -> c_int {
    SINK.with(|sink| {
        let mut sink = sink.borrow_mut();
        let Some(sink) = sink.as_mut() else { return 1 };
        if sink.cancelled {
            return 1;
        }
        if !wav.is_null() && count > 0 {
            // SAFETY: the library hands `count` samples at `wav`, valid for this call.
            let samples = unsafe { std::slice::from_raw_parts(wav, count as usize) };
            let out = sink.resampler.push(samples);
            sink.pending.extend(out);
            if !send_frames(sink, false) {
                sink.cancelled = true;
                return 1;
            }
        }
        0
    })
}

/// Sends the whole 20 ms frames (and, at the end, the rest); false once
/// nobody listens.
fn send_frames(sink: &mut Sink, last: bool) -> bool {
    while sink.pending.len() >= FRAME_SAMPLES || (last && !sink.pending.is_empty()) {
        let n = sink.pending.len().min(FRAME_SAMPLES);
        let frame: Pcm = sink.pending.drain(..n).collect();
        if sink.frames.blocking_send(frame).is_err() {
            return false;
        }
    }
    true
}

/// The thread that owns the library, or why it could not start.
fn engine() -> &'static Result<std_mpsc::Sender<Job>, String> {
    static ENGINE: OnceLock<Result<std_mpsc::Sender<Job>, String>> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let (ready_tx, ready_rx) = std_mpsc::channel();
        let (jobs_tx, jobs_rx) = std_mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("espeak-ng".into())
            .spawn(move || {
                let api = match load() {
                    Ok(api) => {
                        let _ = ready_tx.send(Ok(()));
                        api
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                for job in jobs_rx {
                    speak_on_this_thread(&api, &job);
                    let _ = job.done.send(());
                }
            })
            .map_err(|e| format!("could not start the espeak-ng thread: {e}"))?;
        ready_rx.recv().map_err(|_| "the espeak-ng thread stopped".to_owned())?.map(|()| jobs_tx)
    })
}

fn load() -> Result<Api, String> {
    let missing =
        |e: libloading::Error| format!("espeak-ng is not available ({e}); install it with `apt-get install espeak-ng`");
    // SAFETY: loading Debian's libespeak-ng runs no initialisers with preconditions.
    let library = unsafe { libloading::Library::new(LIBRARY) }.map_err(missing)?;
    // SAFETY: the symbols are looked up by their C names, with the
    // signatures of espeak-ng's speak_lib.h.
    unsafe {
        let initialize: libloading::Symbol<unsafe extern "C" fn(c_int, c_int, *const c_char, c_int) -> c_int> =
            library.get(b"espeak_Initialize\0").map_err(missing)?;
        let set_callback: libloading::Symbol<unsafe extern "C" fn(SynthCallback)> =
            library.get(b"espeak_SetSynthCallback\0").map_err(missing)?;
        let rate = initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, std::ptr::null(), INITIALIZE_DONT_EXIT);
        if rate <= 0 {
            return Err("espeak-ng could not initialise (is espeak-ng-data installed?)".into());
        }
        set_callback(on_audio);
        let synth = *library.get(b"espeak_Synth\0").map_err(missing)?;
        let set_voice = *library.get(b"espeak_SetVoiceByName\0").map_err(missing)?;
        let set_parameter = *library.get(b"espeak_SetParameter\0").map_err(missing)?;
        Ok(Api { synth, set_voice, set_parameter, rate: rate as u32, _library: library })
    }
}

fn speak_on_this_thread(api: &Api, job: &Job) {
    let (Ok(text), Ok(voice)) = (CString::new(job.text.as_str()), CString::new(job.voice.as_str())) else { return };
    SINK.with(|sink| {
        *sink.borrow_mut() = Some(Sink {
            resampler: Resampler::new(api.rate, SAMPLE_RATE),
            pending: Vec::new(),
            frames: job.frames.clone(),
            cancelled: false,
        });
    });
    // SAFETY: the strings outlive the calls; the library is initialised,
    // synchronous, and used from this thread only.
    unsafe {
        if (api.set_voice)(voice.as_ptr()) != 0 {
            tracing::warn!(voice = %job.voice, "espeak-ng has no such voice; using its default");
        }
        (api.set_parameter)(PARAM_RATE, job.words_per_minute.clamp(80, 450) as c_int, 0);
        let bytes = text.as_bytes_with_nul();
        (api.synth)(
            bytes.as_ptr().cast(),
            bytes.len(),
            0,
            POS_CHARACTER,
            0,
            CHARS_UTF8,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
    }
    if let Some(sink) = SINK.with(|sink| sink.borrow_mut().take())
        && !sink.cancelled
    {
        let Sink { resampler, mut pending, frames, cancelled } = sink;
        pending.extend(resampler.finish());
        send_frames(
            &mut Sink { resampler: Resampler::new(SAMPLE_RATE, SAMPLE_RATE), pending, frames, cancelled },
            true,
        );
    }
}

/// The espeak-ng voice: a Synthesiser speaking sentence by sentence.
#[derive(Debug, Clone)]
pub struct Espeak {
    /// An espeak-ng voice name (`en-us`, `en-gb`, `de`, …).
    pub voice: String,
    pub words_per_minute: u32,
}

impl Espeak {
    /// The voice, once the library is known to load.
    pub fn new(voice: &str, words_per_minute: u32) -> Result<Espeak, String> {
        engine().as_ref().map_err(Clone::clone)?;
        Ok(Espeak { voice: voice.to_owned(), words_per_minute })
    }
}

impl Synthesiser for Espeak {
    fn name(&self) -> &'static str {
        "espeak-ng"
    }

    fn start(&self) -> (mpsc::Sender<String>, mpsc::Receiver<Pcm>) {
        let this = self.clone();
        crate::sentence_by_sentence("espeak-ng", move |sentence, frames| {
            let this = this.clone();
            async move {
                let jobs = engine().as_ref().map_err(Clone::clone)?;
                let (done_tx, done_rx) = std_mpsc::channel();
                let job = Job {
                    text: sentence,
                    voice: this.voice.clone(),
                    words_per_minute: this.words_per_minute,
                    frames: frames.clone(),
                    done: done_tx,
                };
                jobs.send(job).map_err(|_| "the espeak-ng thread stopped".to_owned())?;
                // Sentences are spoken in order: wait for this one.
                tokio::task::spawn_blocking(move || done_rx.recv())
                    .await
                    .map_err(|e| e.to_string())?
                    .map_err(|_| "the espeak-ng thread stopped".to_owned())?;
                Ok::<bool, String>(!frames.is_closed())
            }
        })
    }
}
