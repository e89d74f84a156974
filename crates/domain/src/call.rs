//! Voice calls: their states, why they ended, and the call as the API shows it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::Timestamp;

string_enum!(
    /// queued → ringing → in_progress → completed, or busy | no_answer | failed | canceled.
    CallStatus {
        Queued = "queued",
        Ringing = "ringing",
        InProgress = "in_progress",
        Completed = "completed",
        Busy = "busy",
        NoAnswer = "no_answer",
        Failed = "failed",
        Canceled = "canceled",
    }
);

impl CallStatus {
    /// Terminal states never change.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            CallStatus::Completed | CallStatus::Busy | CallStatus::NoAnswer | CallStatus::Failed | CallStatus::Canceled
        )
    }

    /// Whether a call may move from `self` to `to`: forward along
    /// queued → ringing → in_progress, and from any live state to an end
    /// (`completed` only once answered; `busy` and `no_answer` only before).
    pub fn can_move_to(self, to: CallStatus) -> bool {
        use CallStatus::*;
        match (self, to) {
            (s, _) if s.is_terminal() => false,
            (Queued, Ringing) | (Queued | Ringing, InProgress) => true,
            (InProgress, Completed) => true,
            (Queued | Ringing, Busy | NoAnswer) => true,
            (_, Failed | Canceled) => true,
            _ => false,
        }
    }
}

string_enum!(
    /// Why a call ended.
    EndedReason {
        CallerHangup = "caller_hangup",
        AgentHangup = "agent_hangup",
        Transferred = "transferred",
        MaxDuration = "max_duration",
        NoAnswer = "no_answer",
        Busy = "busy",
        DialFailed = "dial_failed",
        Canceled = "canceled",
        Error = "error",
        /// A machine answered an outbound call: the agent hung up, or left
        /// its message after the beep (`voicemail.action`).
        Voicemail = "voicemail",
        /// The server running the call stopped (SIGTERM), and the call had
        /// not ended within `voice.shutdown_grace_seconds`.
        Shutdown = "shutdown",
    }
);

string_enum!(CallDirection { Outbound = "outbound", Inbound = "inbound" });

string_enum!(
    /// How a placed call reaches the other party.
    CallTransport {
        /// A phone number or SIP address, through the telephony provider.
        Phone = "phone",
        /// A browser, over a WebSocket opened with a single-use token
        /// (`/calls/web`): try an agent without a phone line.
        Web = "web",
    }
);

/// How a browser joins a web call (`POST /api/v1/calls` with
/// `transport: web`): open `url` as a WebSocket and send `token` in the
/// first frame. Single use; valid until `expires_at` (the ring timeout).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WebCallJoin {
    /// The socket's path under the server's root: `/calls/web`.
    pub url: String,
    /// 40 hex characters. Shown once; a replay of the request shows it
    /// again, but it joins only once.
    pub token: String,
    pub expires_at: Timestamp,
}

string_enum!(
    /// absent → processing → available (→ deleted).
    RecordingStatus { Absent = "absent", Processing = "processing", Available = "available", Deleted = "deleted" }
);

string_enum!(Speaker { Agent = "agent", Caller = "caller", Human = "human" });

/// The recording part of a call.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct CallRecording {
    pub status: RecordingStatus,
    pub duration_ms: Option<i64>,
    /// `wav` (stereo: caller left, agent right).
    pub format: Option<String>,
}

string_enum!(
    /// Who picked up an outbound call, as answering-machine detection
    /// judged it (calls with `voicemail` set).
    AnsweredBy { Human = "human", Machine = "machine", Uncertain = "uncertain" }
);

string_enum!(
    /// Why answering-machine detection judged as it did.
    MachineCause {
        /// Nobody spoke in the first 2.5 s.
        InitialSilence = "initial_silence",
        /// A greeting of more than 1.5 s of speech.
        LongGreeting = "long_greeting",
        /// More than two words before a pause.
        MaxWords = "max_words",
        /// A short greeting ("Hello?"), then silence: a person.
        AfterGreetingSilence = "after_greeting_silence",
        /// A voicemail phrase was heard ("leave a message").
        Phrase = "phrase",
        /// A call screening service asked who is calling.
        Screening = "screening",
        /// A beep (a steady tone) was heard.
        Beep = "beep",
        /// No verdict within the analysis time.
        TooLong = "too_long",
        /// No audio came from the line.
        NoAudio = "no_audio",
    }
);

/// What answering-machine detection found on a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MachineDetection {
    pub cause: MachineCause,
    /// The words that decided it (`phrase`, `screening`).
    pub heard: Option<String>,
    /// When the verdict was given (ms from the answer).
    pub decided_ms: i64,
    /// When the machine's beep ended (ms from the answer), if one was heard.
    pub beep_end_ms: Option<i64>,
    /// The agent left `voicemail.message` (after the beep, or after the
    /// machine went quiet).
    pub message_left: bool,
}

string_enum!(
    /// Whether post-call analysis produced its answer.
    AnalysisStatus {
        Completed = "completed",
        /// The engine failed, gave no answer, or none could be asked (the
        /// `builtin` engine, no funds): `error` says which.
        Failed = "failed",
    }
);

/// Whether the call met the agent's `analysis.success_criteria`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SuccessEvaluation {
    pub result: bool,
    /// The model's reason, in a sentence or two.
    pub reason: String,
}

/// Post-call analysis (the agent's `analysis` plan), once it has run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Analysis {
    pub status: AnalysisStatus,
    /// What the call was about and how it ended (`analysis.summary`).
    pub summary: Option<String>,
    /// The facts extracted into `analysis.schema`, valid against it; `null`
    /// when the model's answer was not (see `data_errors`) or none was asked.
    #[schema(value_type = Option<Object>)]
    pub data: Option<Value>,
    /// Why the model's extraction was refused: where it broke the schema.
    pub data_errors: Vec<String>,
    /// Against `analysis.success_criteria`, when set.
    pub success: Option<SuccessEvaluation>,
    /// Why the analysis failed.
    pub error: Option<String>,
    /// The run (`analysis`) that produced it, billed like any other.
    pub run_id: Option<i64>,
    pub analyzed_at: Timestamp,
}

/// A call as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Call {
    /// `call_<ulid>`.
    pub id: String,
    pub agent_id: i64,
    pub conversation_id: Option<i64>,
    pub contact_id: Option<i64>,
    pub direction: CallDirection,
    pub from: Option<String>,
    pub to: String,
    pub status: CallStatus,
    pub ended_reason: Option<EndedReason>,
    pub created_at: Timestamp,
    pub ringing_at: Option<Timestamp>,
    pub answered_at: Option<Timestamp>,
    pub ended_at: Option<Timestamp>,
    pub duration_ms: Option<i64>,
    pub cost_cents: Option<i64>,
    pub recording: CallRecording,
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    pub provider: String,
    pub provider_call_id: Option<String>,
    /// The number or SIP URI the agent transferred the call to (`ended_reason: transferred`).
    pub transfer_to: Option<String>,
    /// The `voice` channel the call is on (the dialled number or SIP
    /// address, for inbound calls).
    pub channel_id: Option<i64>,
    /// Voice-to-voice latency over the agent's answered turns, once the
    /// call has ended (`null` before, or without any).
    pub latency: Option<CallLatency>,
    /// Who picked up, on outbound calls with answering-machine detection
    /// (`voicemail` set); `null` before the verdict or without it.
    pub answered_by: Option<AnsweredBy>,
    /// How the verdict was reached; `null` as `answered_by`.
    pub machine_detection: Option<MachineDetection>,
    /// Post-call analysis, once it has run (`call.analyzed`); `null` before,
    /// or for calls with nothing to analyse.
    pub analysis: Option<Analysis>,
}

/// One finished piece of speech.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TranscriptSegment {
    pub index: i64,
    pub speaker: Speaker,
    pub text: String,
    pub start_ms: i64,
    pub end_ms: i64,
    /// The other side started speaking before this one finished.
    pub interrupted: bool,
    /// Word timings (ms from the answer) when the speech-to-text engine
    /// gives them; empty otherwise.
    #[serde(default)]
    pub words: Vec<Word>,
    /// An agent turn's latency breakdown, when the turn answered the caller.
    #[serde(default)]
    pub latency: Option<TurnLatency>,
}

/// A word heard, timed from the answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Word {
    pub word: String,
    pub start_ms: i64,
    pub end_ms: i64,
}

/// How long an agent turn took to answer, from the end of the caller's
/// speech: until the turn was judged over (`end_of_turn_ms`: the silence
/// the turn detector waited), then until the transcript was final
/// (`stt_ms`), then until the model's first words (`llm_first_token_ms`),
/// then until the voice's first audio (`tts_first_audio_ms`);
/// `voice_to_voice_ms` is the whole, to the reply's first audio frame
/// going out. (Turns recorded before `end_of_turn_ms` existed have it 0
/// and count the silence in `stt_ms`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TurnLatency {
    #[serde(default)]
    pub end_of_turn_ms: i64,
    pub stt_ms: i64,
    pub llm_first_token_ms: i64,
    pub tts_first_audio_ms: i64,
    pub voice_to_voice_ms: i64,
}

/// A call's voice-to-voice latency over its answered turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CallLatency {
    pub turns: i64,
    pub voice_to_voice_p50_ms: i64,
    pub voice_to_voice_p95_ms: i64,
}

impl CallLatency {
    /// Over the segments' turn latencies; `None` without any.
    pub fn of(segments: &[TranscriptSegment]) -> Option<CallLatency> {
        Self::over(segments.iter().filter_map(|s| s.latency.map(|l| l.voice_to_voice_ms)).collect())
    }

    /// Over turns' voice-to-voice milliseconds (nearest rank); `None` when empty.
    pub fn over(mut all: Vec<i64>) -> Option<CallLatency> {
        if all.is_empty() {
            return None;
        }
        all.sort_unstable();
        let at = |q: f64| all[(((all.len() as f64) * q).ceil() as usize).clamp(1, all.len()) - 1];
        Some(CallLatency { turns: all.len() as i64, voice_to_voice_p50_ms: at(0.5), voice_to_voice_p95_ms: at(0.95) })
    }
}

/// A new call id: `call_` and a ULID.
pub fn new_call_id() -> String {
    format!("call_{}", ulid::Ulid::new())
}

/// A configured speech engine (`GET /api/v1/speech-engines`): never its
/// address's secrets or keys.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[schema(example = json!({"name": "piper", "direction": "tts", "kind": "wyoming", "detail": "en_US-joe-medium"}))]
pub struct SpeechEngineInfo {
    /// What agents name as their `tts_engine` or `stt_engine`.
    pub name: String,
    /// `stt` (speech-to-text) or `tts` (text-to-speech).
    #[schema(example = "tts")]
    pub direction: String,
    /// `espeak` (built in), `wyoming` (a local server) or `openai` (an
    /// OpenAI-compatible audio API).
    #[schema(example = "wyoming")]
    pub kind: String,
    /// The engine's model or voice, when it names one.
    pub detail: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_states_never_change_and_moves_go_forward() {
        use CallStatus::*;
        for s in [Completed, Busy, NoAnswer, Failed, Canceled] {
            for to in [Queued, Ringing, InProgress, Completed, Failed, Canceled] {
                assert!(!s.can_move_to(to), "{s:?} -> {to:?}");
            }
        }
        assert!(Queued.can_move_to(Ringing) && Ringing.can_move_to(InProgress) && InProgress.can_move_to(Completed));
        assert!(!Ringing.can_move_to(Queued) && !InProgress.can_move_to(Ringing) && !Queued.can_move_to(Completed));
        assert!(!InProgress.can_move_to(Busy) && Ringing.can_move_to(NoAnswer) && InProgress.can_move_to(Failed));
        assert_eq!(serde_json::to_value(InProgress).unwrap(), "in_progress");
        assert_eq!(CallStatus::parse("no_answer"), Some(NoAnswer));
    }
}
