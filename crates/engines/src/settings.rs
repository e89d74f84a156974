//! `[text_engines.NAME]`: each engine's settings, checked at start-up.

use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

/// Why an engine's settings were refused (start-up stops with it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SettingsError(pub String);

/// One engine's settings.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineSettings {
    Builtin,
    Openai(OpenAiSettings),
}

/// An OpenAI-compatible chat-completions server.
#[derive(Clone, PartialEq)]
pub struct OpenAiSettings {
    /// Up to and including `/v1` (default `https://api.openai.com/v1`).
    pub base_url: String,
    /// Sent as `Authorization: Bearer …`; never logged or listed.
    pub api_key: Option<String>,
    pub model: String,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    /// The whole answer must arrive within this (default 120 s).
    pub timeout: Duration,
    /// A stream that sends nothing for this long is broken (default 30 s).
    pub idle_timeout: Duration,
    /// Retries of a refused request (429, 5xx, connection), honouring
    /// `Retry-After`, before the engine gives up (default 3).
    pub max_retries: u32,
    pub pricing: Pricing,
}

impl std::fmt::Debug for OpenAiSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiSettings")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<secret>"))
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

/// What an engine costs, in cents per 1,000 tokens (fractions allowed; a
/// run's cost is rounded up to whole cents).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    #[serde(default)]
    pub input_per_1k_cents: f64,
    #[serde(default)]
    pub output_per_1k_cents: f64,
}

impl Pricing {
    /// Whole cents for `usage`, rounded up.
    pub fn cost_cents(&self, usage: crate::Usage) -> i64 {
        let cents = usage.input_tokens as f64 / 1000.0 * self.input_per_1k_cents
            + usage.output_tokens as f64 / 1000.0 * self.output_per_1k_cents;
        cents.ceil() as i64
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    kind: Option<String>,
    base_url: Option<String>,
    api_key: Option<String>,
    model: Option<String>,
    temperature: Option<f64>,
    max_tokens: Option<u32>,
    timeout_s: Option<u64>,
    idle_timeout_s: Option<u64>,
    max_retries: Option<u32>,
    pricing: Option<Pricing>,
}

impl EngineSettings {
    /// Reads `[text_engines.NAME]`. `kind` defaults to `openai`, which needs a `model`.
    pub fn parse(name: &str, value: Value) -> Result<EngineSettings, SettingsError> {
        let fail = |msg: String| SettingsError(format!("text_engines.{name}: {msg}"));
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(fail("engine names use letters, digits, `-` and `_`".into()));
        }
        let raw: Raw = serde_json::from_value(value).map_err(|e| fail(e.to_string()))?;
        match raw.kind.as_deref().unwrap_or("openai") {
            "builtin" => Ok(EngineSettings::Builtin),
            "openai" => {
                let model =
                    raw.model.filter(|m| !m.trim().is_empty()).ok_or_else(|| fail("`model` is required".into()))?;
                let base_url = raw.base_url.unwrap_or_else(|| "https://api.openai.com/v1".to_owned());
                if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
                    return Err(fail(format!("`base_url` must be an http(s) URL, not {base_url:?}")));
                }
                if let Some(t) = raw.temperature
                    && !(0.0..=2.0).contains(&t)
                {
                    return Err(fail("`temperature` must be between 0 and 2".into()));
                }
                Ok(EngineSettings::Openai(OpenAiSettings {
                    base_url: base_url.trim_end_matches('/').to_owned(),
                    api_key: raw.api_key.filter(|k| !k.is_empty()),
                    model,
                    temperature: raw.temperature,
                    max_tokens: raw.max_tokens,
                    timeout: Duration::from_secs(raw.timeout_s.unwrap_or(120).max(1)),
                    idle_timeout: Duration::from_secs(raw.idle_timeout_s.unwrap_or(30).max(1)),
                    max_retries: raw.max_retries.unwrap_or(3),
                    pricing: raw.pricing.unwrap_or_default(),
                }))
            }
            other => Err(fail(format!("`kind` must be `openai` or `builtin`, not {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_openai_engine_needs_a_model_and_keeps_its_key_out_of_debug() {
        let e = EngineSettings::parse(
            "groq",
            json!({"base_url": "https://api.groq.com/openai/v1/", "api_key": "gsk_secret", "model": "llama"}),
        )
        .unwrap();
        let EngineSettings::Openai(o) = &e else { panic!("{e:?}") };
        assert_eq!(o.base_url, "https://api.groq.com/openai/v1");
        assert!(!format!("{e:?}").contains("gsk_secret"));
        let err = EngineSettings::parse("groq", json!({"base_url": "https://x"})).unwrap_err();
        assert_eq!(err.0, "text_engines.groq: `model` is required");
        assert!(EngineSettings::parse("x", json!({"model": "m", "colour": 1})).unwrap_err().0.contains("colour"));
        assert!(EngineSettings::parse("x", json!({"kind": "gemini"})).is_err());
        assert!(EngineSettings::parse("x", json!({"model": "m", "temperature": 3.0})).is_err());
        assert_eq!(EngineSettings::parse("b", json!({"kind": "builtin"})).unwrap(), EngineSettings::Builtin);
    }

    #[test]
    fn pricing_rounds_a_run_up_to_whole_cents() {
        let p = Pricing { input_per_1k_cents: 0.015, output_per_1k_cents: 0.06 };
        assert_eq!(p.cost_cents(crate::Usage { input_tokens: 0, output_tokens: 0 }), 0);
        assert_eq!(p.cost_cents(crate::Usage { input_tokens: 1000, output_tokens: 1000 }), 1);
        assert_eq!(p.cost_cents(crate::Usage { input_tokens: 100_000, output_tokens: 10_000 }), 3);
    }
}
