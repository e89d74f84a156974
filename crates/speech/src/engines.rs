//! The configured speech engines: `[speech.stt.NAME]` and
//! `[speech.tts.NAME]` in `parley.toml` (or `PARLEY_SPEECH__…`), by kind,
//! plus the built-in `espeak` voice, always there.
//!
//! ```toml
//! [speech.stt.whisper]
//! kind = "wyoming"
//! host = "127.0.0.1"
//! port = 10300
//!
//! [speech.tts.piper]
//! kind = "wyoming"
//! host = "127.0.0.1"
//! port = 10200
//! voice = "en_US-joe-medium"
//!
//! [speech.tts.openai]
//! kind = "openai"
//! base_url = "https://api.openai.com/v1"
//! api_key = "sk-…"
//! model = "tts-1"
//! voice = "alloy"
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::espeak::Espeak;
use crate::openai::{OpenAiAudio, OpenAiSynthesiser, OpenAiTranscriber};
use crate::wyoming::{WyomingSynthesiser, WyomingTranscriber};
use crate::{Synthesiser, Transcriber};

/// The built-in voice's name.
pub const ESPEAK: &str = "espeak";

/// A speech-to-text engine's settings.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum SttSettings {
    Wyoming {
        host: String,
        port: u16,
        language: Option<String>,
    },
    #[serde(rename = "openai")]
    OpenAi {
        base_url: String,
        api_key: Option<String>,
        model: String,
        language: Option<String>,
        #[serde(default = "default_timeout_s")]
        timeout_seconds: u64,
        /// Ask for word timings; default: for whisper models.
        word_timestamps: Option<bool>,
    },
}

/// A text-to-speech engine's settings.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum TtsSettings {
    Espeak {
        #[serde(default = "default_espeak_voice")]
        voice: String,
        #[serde(default = "default_words_per_minute")]
        words_per_minute: u32,
    },
    Wyoming {
        host: String,
        port: u16,
        voice: Option<String>,
    },
    #[serde(rename = "openai")]
    OpenAi {
        base_url: String,
        api_key: Option<String>,
        model: String,
        voice: String,
        #[serde(default = "default_speed")]
        speed: f32,
        #[serde(default = "default_timeout_s")]
        timeout_seconds: u64,
    },
}

fn default_timeout_s() -> u64 {
    30
}
fn default_espeak_voice() -> String {
    "en-us".into()
}
fn default_words_per_minute() -> u32 {
    175
}
fn default_speed() -> f32 {
    1.0
}

// Settings hold API keys: their Debug form never shows them.
impl std::fmt::Debug for SttSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let info = EngineInfo::of_stt("", self);
        write!(f, "SttSettings({} {})", info.kind, info.detail.unwrap_or_default())
    }
}

impl std::fmt::Debug for TtsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let info = EngineInfo::of_tts("", self);
        write!(f, "TtsSettings({} {})", info.kind, info.detail.unwrap_or_default())
    }
}

/// What the API shows of an engine: never addresses' secrets or keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineInfo {
    pub name: String,
    /// `stt` or `tts`.
    pub direction: &'static str,
    /// `espeak`, `wyoming` or `openai`.
    pub kind: &'static str,
    /// The model or voice, when the engine names one.
    pub detail: Option<String>,
}

impl EngineInfo {
    fn of_stt(name: &str, s: &SttSettings) -> EngineInfo {
        let (kind, detail) = match s {
            SttSettings::Wyoming { language, .. } => ("wyoming", language.clone()),
            SttSettings::OpenAi { model, .. } => ("openai", Some(model.clone())),
        };
        EngineInfo { name: name.to_owned(), direction: "stt", kind, detail }
    }

    fn of_tts(name: &str, s: &TtsSettings) -> EngineInfo {
        let (kind, detail) = match s {
            TtsSettings::Espeak { voice, .. } => ("espeak", Some(voice.clone())),
            TtsSettings::Wyoming { voice, .. } => ("wyoming", voice.clone()),
            TtsSettings::OpenAi { model, voice, .. } => ("openai", Some(format!("{model}/{voice}"))),
        };
        EngineInfo { name: name.to_owned(), direction: "tts", kind, detail }
    }
}

/// The engines by name.
#[derive(Debug, Clone, Default)]
pub struct SpeechEngines {
    stt: BTreeMap<String, SttSettings>,
    tts: BTreeMap<String, TtsSettings>,
    /// For agents that name no engine.
    default_stt: Option<String>,
    default_tts: Option<String>,
    /// Silero VAD and Smart Turn, when configured (else turns end on a
    /// fixed silence).
    turn_models: Option<std::sync::Arc<crate::turns::TurnModels>>,
}

impl SpeechEngines {
    /// Parses `[speech.stt.*]` and `[speech.tts.*]`; an error names the
    /// table and what is wrong. `espeak` is added unless configured.
    pub fn from_settings(
        stt: &BTreeMap<String, Value>,
        tts: &BTreeMap<String, Value>,
    ) -> Result<SpeechEngines, String> {
        let mut engines = SpeechEngines::default();
        for (name, value) in stt {
            let parsed: SttSettings =
                serde_json::from_value(value.clone()).map_err(|e| format!("speech.stt.{name}: {e}"))?;
            check(name, &parsed_urls_stt(&parsed))?;
            engines.stt.insert(name.clone(), parsed);
        }
        for (name, value) in tts {
            let parsed: TtsSettings =
                serde_json::from_value(value.clone()).map_err(|e| format!("speech.tts.{name}: {e}"))?;
            check(name, &parsed_urls_tts(&parsed))?;
            engines.tts.insert(name.clone(), parsed);
        }
        engines.tts.entry(ESPEAK.to_owned()).or_insert_with(|| TtsSettings::Espeak {
            voice: default_espeak_voice(),
            words_per_minute: default_words_per_minute(),
        });
        Ok(engines)
    }

    /// Every engine, speech-to-text first, by name.
    pub fn list(&self) -> Vec<EngineInfo> {
        let stt = self.stt.iter().map(|(n, s)| EngineInfo::of_stt(n, s));
        stt.chain(self.tts.iter().map(|(n, s)| EngineInfo::of_tts(n, s))).collect()
    }

    /// Sets the engines agents without their own use. `Err` names an
    /// engine that is not configured.
    /// With the turn-detection models loaded.
    pub fn with_turn_models(mut self, models: Option<std::sync::Arc<crate::turns::TurnModels>>) -> SpeechEngines {
        self.turn_models = models;
        self
    }

    pub fn turn_models(&self) -> Option<&std::sync::Arc<crate::turns::TurnModels>> {
        self.turn_models.as_ref()
    }

    pub fn with_defaults(mut self, stt: Option<String>, tts: Option<String>) -> Result<SpeechEngines, String> {
        if let Some(name) = &stt
            && !self.has_stt(name)
        {
            return Err(format!("speech.default_stt: `{name}` is not a configured [speech.stt.*] engine"));
        }
        if let Some(name) = &tts
            && !self.has_tts(name)
        {
            return Err(format!("speech.default_tts: `{name}` is not a configured [speech.tts.*] engine"));
        }
        self.default_stt = stt;
        self.default_tts = tts;
        Ok(self)
    }

    /// The speech-to-text engine of agents without their own, if any.
    pub fn default_stt(&self) -> Option<&str> {
        self.default_stt.as_deref()
    }

    /// The text-to-speech engine of agents without their own (`espeak` unless set).
    pub fn default_tts(&self) -> &str {
        self.default_tts.as_deref().unwrap_or(ESPEAK)
    }

    /// The speech-to-text engines' names.
    pub fn stt_names(&self) -> Vec<String> {
        self.stt.keys().cloned().collect()
    }

    /// The text-to-speech engines' names (`espeak` among them).
    pub fn tts_names(&self) -> Vec<String> {
        self.tts.keys().cloned().collect()
    }

    pub fn has_stt(&self, name: &str) -> bool {
        self.stt.contains_key(name)
    }

    pub fn has_tts(&self, name: &str) -> bool {
        self.tts.contains_key(name)
    }

    /// The transcriber `name`, with `language` overriding the engine's.
    pub fn transcriber(&self, name: &str, language: Option<&str>) -> Option<Arc<dyn Transcriber>> {
        let language = |own: &Option<String>| language.map(str::to_owned).or_else(|| own.clone());
        Some(match self.stt.get(name)? {
            SttSettings::Wyoming { host, port, language: own } => {
                Arc::new(WyomingTranscriber { address: format!("{host}:{port}"), language: language(own) })
            }
            SttSettings::OpenAi { base_url, api_key, model, language: own, timeout_seconds, word_timestamps } => {
                Arc::new(OpenAiTranscriber {
                    server: OpenAiAudio::new(base_url, api_key.clone(), Duration::from_secs(*timeout_seconds)),
                    model: model.clone(),
                    language: language(own),
                    word_timestamps: word_timestamps.unwrap_or_else(|| model.contains("whisper")),
                })
            }
        })
    }

    /// The synthesiser `name`, with `voice` and `speed` overriding the
    /// engine's. `Err` when the engine cannot run here (espeak-ng missing).
    pub fn synthesiser(
        &self,
        name: &str,
        voice: Option<&str>,
        speed: Option<f32>,
    ) -> Option<Result<Arc<dyn Synthesiser>, String>> {
        let pick = |own: &str| voice.unwrap_or(own).to_owned();
        Some(match self.tts.get(name)? {
            TtsSettings::Espeak { voice: own, words_per_minute } => {
                let wpm = (*words_per_minute as f32 * speed.unwrap_or(1.0)).round() as u32;
                Espeak::new(&pick(own), wpm).map(|e| Arc::new(e) as Arc<dyn Synthesiser>)
            }
            TtsSettings::Wyoming { host, port, voice: own } => Ok(Arc::new(WyomingSynthesiser {
                address: format!("{host}:{port}"),
                voice: voice.map(str::to_owned).or_else(|| own.clone()),
            })),
            TtsSettings::OpenAi { base_url, api_key, model, voice: own, speed: own_speed, timeout_seconds } => {
                Ok(Arc::new(OpenAiSynthesiser {
                    server: OpenAiAudio::new(base_url, api_key.clone(), Duration::from_secs(*timeout_seconds)),
                    model: model.clone(),
                    voice: pick(own),
                    speed: speed.unwrap_or(*own_speed),
                }))
            }
        })
    }
}

fn parsed_urls_stt(s: &SttSettings) -> Vec<&str> {
    match s {
        SttSettings::OpenAi { base_url, .. } => vec![base_url.as_str()],
        SttSettings::Wyoming { .. } => vec![],
    }
}

fn parsed_urls_tts(s: &TtsSettings) -> Vec<&str> {
    match s {
        TtsSettings::OpenAi { base_url, .. } => vec![base_url.as_str()],
        _ => vec![],
    }
}

fn check(name: &str, urls: &[&str]) -> Result<(), String> {
    for url in urls {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!("speech engine {name}: base_url must be an http(s) URL"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn engines_parse_by_kind_and_espeak_is_always_there() {
        let stt = BTreeMap::from([
            ("whisper".to_owned(), json!({"kind": "wyoming", "host": "127.0.0.1", "port": 10300})),
            (
                "cloud".to_owned(),
                json!({"kind": "openai", "base_url": "https://api.openai.com/v1", "api_key": "sk-secret", "model": "whisper-1"}),
            ),
        ]);
        let tts = BTreeMap::from([(
            "piper".to_owned(),
            json!({"kind": "wyoming", "host": "127.0.0.1", "port": 10200, "voice": "en_US-joe-medium"}),
        )]);
        let engines = SpeechEngines::from_settings(&stt, &tts).unwrap();
        let names: Vec<(String, &str, &str)> =
            engines.list().into_iter().map(|e| (e.name, e.direction, e.kind)).collect();
        assert_eq!(
            names,
            [
                ("cloud".to_owned(), "stt", "openai"),
                ("whisper".to_owned(), "stt", "wyoming"),
                ("espeak".to_owned(), "tts", "espeak"),
                ("piper".to_owned(), "tts", "wyoming")
            ]
        );
        assert!(engines.transcriber("whisper", None).is_some() && engines.transcriber("nope", None).is_none());
        assert!(!format!("{engines:?}").contains("sk-secret"), "keys never show");
    }

    #[test]
    fn mistakes_are_named() {
        let bad = BTreeMap::from([("x".to_owned(), json!({"kind": "wyoming", "host": "h"}))]);
        assert!(SpeechEngines::from_settings(&bad, &BTreeMap::new()).unwrap_err().contains("speech.stt.x"));
        let bad = BTreeMap::from([("y".to_owned(), json!({"kind": "espeak", "colour": "red"}))]);
        assert!(SpeechEngines::from_settings(&BTreeMap::new(), &bad).unwrap_err().contains("colour"));
        let bad = BTreeMap::from([(
            "z".to_owned(),
            json!({"kind": "openai", "base_url": "ftp://x", "model": "m", "voice": "v"}),
        )]);
        assert!(SpeechEngines::from_settings(&BTreeMap::new(), &bad).unwrap_err().contains("http"));
    }
}
