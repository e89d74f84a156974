//! Wiring for the `parley` binary, usable from tests: connect and migrate,
//! build the application, and serve it on a given listener until a shutdown
//! future resolves.

pub mod config;

use std::future::Future;
use std::time::Duration;

use anyhow::Context;
use parley_api::AppState;
use parley_services::Services;
use parley_services::tenancy::workspaces::Bootstrap;
use parley_store::Db;
use tokio::net::TcpListener;

pub use config::Settings;

/// Connects to the configured database and applies migrations.
pub async fn open_database(settings: &Settings) -> anyhow::Result<Db> {
    let db = Db::connect(&settings.database_url, &settings.db_options())
        .await
        .with_context(|| format!("could not open the database at {}", describe_database(settings)))?;
    db.migrate().await.context("could not apply database migrations")?;
    Ok(db)
}

/// For administration commands: refuses to go on when the SQLite database
/// does not exist, since opening it would create an empty one — the usual
/// cause is running the command from another directory than the server.
pub fn require_existing_database(settings: &Settings) -> anyhow::Result<()> {
    if let Some(path) = settings.sqlite_path()
        && !path.exists()
    {
        anyhow::bail!(
            "there is no database at {}; run the command where `parley serve` keeps its data, name the database \
             with --database-url (or PARLEY_DATABASE_URL), or add --create to make a new one",
            path.display()
        );
    }
    Ok(())
}

/// The database, for logs and messages: a SQLite path made absolute, a
/// PostgreSQL URL without its password.
pub fn describe_database(settings: &Settings) -> String {
    match settings.sqlite_path() {
        Some(path) => format!("sqlite://{}", path.display()),
        None => redact(&settings.database_url),
    }
}

/// Hides a password in a database URL before it is printed.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{}:***{}", &url[..s + 3], user, &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// The text `serve` prints once, on the first start.
pub fn bootstrap_banner(b: &Bootstrap) -> String {
    format!(
        "Parley created the workspace \"{}\" (id {}, voice enabled).\n\
         These credentials are shown only now; store them safely:\n  \
         live key: {}\n  \
         test key: {}\n  \
         owner login: {} / {}\n",
        b.workspace.name,
        b.workspace.id,
        b.live_key.key.expose(),
        b.test_key.key.expose(),
        b.owner_email,
        b.owner_password,
    )
}

/// The use cases over `db`, with the master key and a JWT signing key
/// ready, and agents run by the agent runtime.
pub async fn services(settings: &Settings, db: Db) -> anyhow::Result<Services> {
    let mut config = settings.services_config();
    config.speech = config.speech.with_turn_models(settings.turn_models()?);
    let services = Services::new(db, config, settings.master_key()?)
        .with_agent_runtime(std::sync::Arc::new(parley_agent_runtime::Runtime));
    services.prepare().await.context("could not prepare the JWT signing keys")?;
    Ok(services)
}

/// Starts the telephony providers. Test-mode calls (and live ones with
/// `telephony.provider = "simulated"`) run on the simulated line, whose
/// caller speaks espeak-ng audio through the real speech loop when a
/// speech-to-text engine is configured. With `sip`, live calls go through
/// the SIP endpoint; with `twilio`, through Twilio's REST API and Media
/// Streams. The calls they receive come back on the receiver.
async fn telephony(
    settings: &Settings,
    services: Services,
) -> anyhow::Result<(Services, Option<tokio::sync::mpsc::Receiver<parley_voice::provider::InboundCall>>)> {
    use parley_services::calls::CallRuntime;
    use parley_voice::provider::Provider;
    use parley_voice::simulated::Simulated;
    use std::sync::Arc;
    let simulated = match settings.speech.stt.is_empty() {
        true => Simulated::default(),
        false => match parley_speech::espeak::Espeak::new("en-us", 150) {
            Ok(voice) => Simulated::speaking(Arc::new(voice)),
            Err(e) => {
                tracing::warn!(error = %e, "the simulated caller cannot speak; its lines arrive as text");
                Simulated::default()
            }
        },
    };
    let simulated: Arc<dyn Provider> = Arc::new(simulated);
    let (runtime, inbound) = match settings.telephony.provider.as_str() {
        "sip" => {
            let sip = settings.telephony.sip.parse()?;
            let (provider, inbound) = parley_voice::sip::SipProvider::start(sip).await.map_err(anyhow::Error::msg)?;
            tracing::info!(address = %provider.local_addr(), "SIP endpoint listening");
            (CallRuntime::new(simulated, Arc::new(provider)), Some(inbound))
        }
        "twilio" => {
            let twilio = settings.telephony.twilio.parse(&settings.public_url())?;
            let hooks = format!("{}{}", settings.public_url(), parley_voice::twilio::VOICE_HOOK);
            let (provider, inbound) = parley_voice::twilio::TwilioProvider::new(twilio).map_err(anyhow::Error::msg)?;
            tracing::info!(voice_webhook = %hooks, "live calls go through Twilio");
            (CallRuntime::with_twilio(simulated, provider), Some(inbound))
        }
        _ => (CallRuntime::new(simulated.clone(), simulated), None),
    };
    Ok((services.with_call_runtime(runtime), inbound))
}

/// Serves the API on `listener` until `shutdown` resolves, then lets
/// in-flight requests finish (at most `shutdown_grace_seconds`), and calls
/// in progress end or are hung up (`voice.shutdown_grace_seconds`).
pub async fn serve(
    settings: Settings,
    db: Db,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut settings = settings;
    if settings.public_url.is_none() {
        // The address actually bound (the configured port may be 0).
        let bound = listener.local_addr().context("the listener has no address")?;
        settings.public_url = Some(format!("http://{bound}").replace("0.0.0.0", "127.0.0.1"));
    }
    let services = services(&settings, db.clone()).await?;
    // In the background: serving starts at once, and a first number parsed
    // meanwhile waits for the load in progress rather than starting another.
    let region = services.config().contacts.default_region;
    tokio::task::spawn_blocking(move || {
        parley_domain::contact::Phone::load_numbering_plans(region);
        give_back_free_memory();
    });
    let (services, inbound_calls) = telephony(&settings, services).await?;
    let state = AppState::new(services.clone(), settings.api_config()).map_err(anyhow::Error::msg)?;
    let mcp_config = parley_mcp::McpConfig::new(&settings.public_url(), state.list_cache())
        .with_allowed_origins(settings.mcp.allowed_origins.clone());
    // The dashboard is served beside the API it calls, by the same process.
    let router = parley_api::app_with(state.clone(), |openapi| {
        parley_mcp::router(services.clone(), mcp_config, openapi).merge(parley_web::router())
    });
    // Building the router and its OpenAPI document peaked near 20 MB of
    // heap, freed now but kept by the allocator: give it back.
    give_back_free_memory();
    let maintenance = tokio::spawn(maintain(
        state,
        parley_services::housekeeping::Retention {
            idempotency_hours: settings.idempotency.retention_hours,
            event_days: settings.webhooks.retention_days,
        },
    ));

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let dispatching = tokio::spawn(parley_services::webhooks::dispatch(
        services.clone(),
        settings.webhooks.dispatcher_config(),
        stop_rx.clone(),
    ));
    let working = tokio::spawn(parley_services::jobs::run(services.clone(), stop_rx.clone()));
    let hangups = tokio::spawn(parley_services::calls::follow_hangups(services.clone(), stop_rx.clone()));
    let answering =
        inbound_calls.map(|calls| tokio::spawn(parley_services::calls::answer_inbound(services.clone(), calls)));
    let metrics_listening = match &settings.metrics.listen {
        Some(address) => {
            let listener = TcpListener::bind(address)
                .await
                .with_context(|| format!("metrics.listen: could not listen on {address}"))?;
            tracing::info!(address = %listener.local_addr()?, "metrics served at /metrics");
            let mut stopped = stop_rx.clone();
            let app = parley_api::metrics_router(services.clone());
            Some(tokio::spawn(async move {
                let until_stop = async move {
                    let _ = stopped.wait_for(|s| *s).await;
                };
                if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(until_stop).await {
                    tracing::warn!(error = %e, "the metrics listener failed");
                }
            }))
        }
        None => None,
    };
    let calls = services.clone();
    let relaying = tokio::spawn(parley_services::signals::relay(services, stop_rx.clone()));
    let mut grace_rx = stop_rx.clone();
    let listener = parley_api::listener::Listener(listener);
    let server = axum::serve(listener, router.into_make_service_with_connect_info::<parley_api::listener::PeerAddr>())
        .with_graceful_shutdown(async move {
            shutdown.await;
            let _ = stop_tx.send(true);
        });
    let grace = Duration::from_secs(settings.shutdown_grace_seconds);
    let result = tokio::select! {
        r = server => r.context("the HTTP server failed"),
        _ = async move {
            let _ = grace_rx.wait_for(|stopped| *stopped).await;
            tokio::time::sleep(grace).await;
        } => {
            tracing::warn!("shutdown grace period over; dropping unfinished requests");
            Ok(())
        }
    };
    maintenance.abort();
    if let Some(metrics) = metrics_listening {
        metrics.abort();
    }
    if let Some(answering) = answering {
        answering.abort();
    }
    // No call starts here any more; those in progress go on (up to
    // voice.shutdown_grace_seconds) and are recorded before the database closes.
    parley_services::calls::drain(&calls).await;
    // The dispatcher saw the same stop signal; let it finish and release its leases.
    let _ = dispatching.await;
    let _ = working.await;
    let _ = hangups.await;
    let _ = relaying.await;
    db.close().await;
    result
}

/// Periodic housekeeping: purge old idempotency keys, events and delivery
/// logs, retired signing keys, orphaned files; forget idle rate-limit state; store the
/// recordings calls of stopped instances left in the spool.
async fn maintain(state: AppState, retention: parley_services::housekeeping::Retention) {
    let mut tick = tokio::time::interval(Duration::from_secs(60));
    loop {
        tick.tick().await;
        state.prune_rate_limits();
        match parley_services::housekeeping::purge(&state.services, retention).await {
            Ok(purged) => {
                if purged.idempotency_keys > 0 {
                    tracing::info!(purged = purged.idempotency_keys, "purged expired idempotency keys")
                }
                if purged.orphaned_files > 0 {
                    tracing::info!(removed = purged.orphaned_files, "removed files no message came to name")
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not purge expired records"),
        }
        if let Err(e) = parley_services::calls::adopt_spooled_recordings(&state.services).await {
            tracing::warn!(error = %e, "could not store the recordings left in the spool");
        }
        give_back_free_memory();
    }
}

/// Returns the allocator's free pages to the system (glibc keeps what a
/// burst of allocations freed: the start's OpenAPI document, a large
/// import). Cheap: a walk over the heap's free chunks.
pub fn give_back_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases memory the allocator holds free.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown requested; finishing in-flight requests");
}

/// The process's logging, and its traces if they are on: flush them
/// before the process ends.
#[derive(Clone, Default)]
pub struct Logging {
    traces: Option<parley_telemetry::traces::Traces>,
}

impl Logging {
    /// Sends the traces still buffered; blocks (call it off the async threads).
    pub fn flush_traces(&self) {
        if let Some(t) = &self.traces {
            t.flush();
        }
    }

    /// Sends what is buffered and stops the exporter; blocks.
    pub fn shutdown(&self) {
        if let Some(t) = &self.traces {
            t.shutdown();
        }
    }
}

/// Sets up logging to stderr (stdout is for the CLI's JSON and the
/// first-start banner) and, when `traces.endpoint` is set, the export of
/// Parley's spans over OTLP. The log filter (`log.level`, `RUST_LOG`)
/// chooses log lines only: spans are traced whatever it says.
pub fn init_logging(settings: &Settings) -> anyhow::Result<Logging> {
    use tracing_subscriber::EnvFilter;
    use tracing_subscriber::prelude::*;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&settings.log.level));
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = if settings.log.format == "json" {
        fmt.json().flatten_event(true).with_current_span(true).boxed()
    } else {
        fmt.compact().boxed()
    };
    let (traces, exporting) = match settings.traces.config()? {
        Some(config) => {
            let (traces, layer) = parley_telemetry::traces::Traces::start(&config).map_err(anyhow::Error::msg)?;
            (Some(traces), Some(layer))
        }
        None => (None, None),
    };
    let _ = tracing_subscriber::registry().with(exporting).with(fmt.with_filter(filter)).try_init();
    Ok(Logging { traces })
}
