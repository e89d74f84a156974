//! An instance's metrics: one Prometheus registry per running server
//! (tests run several in one process), shared by every layer through the
//! database handle (`parley_store::Db::metrics`), rendered by `/metrics`
//! in Prometheus's text format.
//!
//! Counters and histograms are counted where things happen; gauges of
//! what is stored (job queue depth, webhook backlog) or held (calls,
//! connections) are set by the scrape itself, so they are never stale.
//! docs/operations.md lists every family and what to alert on.
//!
//! Label values are bounded: routes are the router's templates (an
//! unmatched path is `unmatched`), kinds and outcomes fixed names; never an
//! id, a workspace or anything a caller wrote.

pub mod traces;

use std::ops::Deref;
use std::sync::Arc;

use prometheus::{
    Encoder, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

/// The instance's metrics; cheap to clone (all clones count together).
#[derive(Clone)]
pub struct Metrics(Arc<Families>);

/// The metric families, by what they measure.
pub struct Families {
    registry: Registry,
    /// `parley_http_requests_total{method, route, status}`.
    pub http_requests: IntCounterVec,
    /// `parley_http_request_duration_seconds{method, route}`: to the
    /// response's head (a stream's lifetime is not its duration).
    pub http_duration: HistogramVec,
    /// `parley_job_runs_total{kind, outcome}`: outcome `done`, `later`
    /// (not due yet, no failure), `retry` or `failed` (dead-lettered).
    pub job_runs: IntCounterVec,
    /// `parley_job_run_duration_seconds{kind}`.
    pub job_duration: HistogramVec,
    /// `parley_jobs_queued{kind}`: pending jobs not leased (due or not), at the scrape.
    pub jobs_queued: IntGaugeVec,
    /// `parley_jobs_running{kind}`: jobs under a live lease, at the scrape.
    pub jobs_running: IntGaugeVec,
    /// `parley_jobs_oldest_due_seconds{kind}`: how long the oldest due,
    /// unleased job has waited past its time (0 when none waits).
    pub jobs_oldest_due: GaugeVec,
    /// `parley_webhook_attempts_total{outcome}`: `delivered` or `failed`.
    pub webhook_attempts: IntCounterVec,
    /// `parley_webhook_backlog`: deliveries waiting to be made, at the scrape.
    pub webhook_backlog: IntGauge,
    /// `parley_webhook_backlog_oldest_seconds`: age of the oldest waiting delivery.
    pub webhook_backlog_oldest: Gauge,
    /// `parley_agent_runs_total{outcome}`: `completed`, `failed`, `canceled`.
    pub agent_runs: IntCounterVec,
    /// `parley_agent_run_duration_seconds`: from the run's start to its record.
    pub agent_run_duration: Histogram,
    /// `parley_calls_active`: calls this instance runs, at the scrape.
    pub calls_active: IntGauge,
    /// `parley_call_voice_to_voice_seconds`: caller stops → agent's first audio out.
    pub voice_to_voice: Histogram,
    /// `parley_call_end_of_turn_seconds`: caller stops → turn judged over.
    pub end_of_turn: Histogram,
    /// `parley_db_acquire_seconds{pool}`: waits for a connection (`read`)
    /// or for the write transaction to begin (`write`).
    pub db_acquire: HistogramVec,
    /// `parley_db_transaction_statements`: statements a committed write
    /// transaction sent the database, its BEGIN and COMMIT included (each
    /// is a round trip: the writer's cost).
    pub db_transaction_statements: Histogram,
    /// `parley_group_commit_writes{kind}`: writes each group commit held
    /// (`inbound` messages, agent `reply`s, courier `sent` records): how
    /// much a busy writer shares its transactions and disk flushes.
    pub group_commit_writes: HistogramVec,
    /// `parley_group_commit_races_total{kind}`: grouped writes run again
    /// because another transaction wrote the same unique key first (or a
    /// deadlock): one webhook delivered to two instances at once, say.
    pub group_commit_races: IntCounterVec,
    /// `parley_db_connections{pool, state}`: `idle` or `busy`, at the scrape.
    pub db_connections: IntGaugeVec,
    /// `parley_stream_clients{kind}`: open `sse` streams and `websocket`s.
    pub stream_clients: IntGaugeVec,
    /// `parley_database_up`: 1 if the scrape could read the database.
    pub database_up: IntGauge,
}

impl Deref for Metrics {
    type Target = Families;
    fn deref(&self) -> &Families {
        &self.0
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// Request and job latencies: 1 ms to 60 s.
const FAST: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
/// Agent runs wait on a model: 50 ms to 2 minutes.
const RUNS: &[f64] = &[0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 120.0];
/// Voice-to-voice: a good agent answers in under a second.
const VOICE: &[f64] = &[0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0];
/// End of turn: the pause the turn-taking waited, 100 ms to 3 s.
const TURN: &[f64] = &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0, 1.5, 2.0, 3.0];
/// Connection waits: 100 µs to 10 s (the acquire timeout).
const WAITS: &[f64] = &[0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 10.0];
/// Writes a group commit held: 1 (no contention) to 32 (the cap).
const GROUPS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0];
/// Statements a transaction: 2 (BEGIN, COMMIT) to hundreds (an import).
const STATEMENTS: &[f64] = &[2.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0, 128.0, 512.0];

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let families = Families {
            http_requests: counters(
                "parley_http_requests_total",
                "HTTP requests answered.",
                &["method", "route", "status"],
            ),
            http_duration: histograms(
                "parley_http_request_duration_seconds",
                "Time to answer an HTTP request (to the response's head).",
                &["method", "route"],
                FAST,
            ),
            job_runs: counters("parley_job_runs_total", "Job runs, by kind and outcome.", &["kind", "outcome"]),
            job_duration: histograms("parley_job_run_duration_seconds", "Time one job run took.", &["kind"], FAST),
            jobs_queued: int_gauges("parley_jobs_queued", "Pending jobs not leased to a worker.", &["kind"]),
            jobs_running: int_gauges("parley_jobs_running", "Jobs under a live lease.", &["kind"]),
            jobs_oldest_due: GaugeVec::new(
                Opts::new("parley_jobs_oldest_due_seconds", "How long the oldest due, unleased job has waited."),
                &["kind"],
            )
            .expect("valid metric"),
            webhook_attempts: counters("parley_webhook_attempts_total", "Webhook delivery attempts.", &["outcome"]),
            webhook_backlog: IntGauge::new("parley_webhook_backlog", "Webhook deliveries waiting to be made.")
                .expect("valid metric"),
            webhook_backlog_oldest: Gauge::new(
                "parley_webhook_backlog_oldest_seconds",
                "Age of the oldest webhook delivery waiting to be made.",
            )
            .expect("valid metric"),
            agent_runs: counters("parley_agent_runs_total", "Agent runs finished, by outcome.", &["outcome"]),
            agent_run_duration: histogram("parley_agent_run_duration_seconds", "Time an agent run took.", RUNS),
            calls_active: IntGauge::new("parley_calls_active", "Calls this instance runs.").expect("valid metric"),
            voice_to_voice: histogram(
                "parley_call_voice_to_voice_seconds",
                "From the caller's last word to the agent's first audio out.",
                VOICE,
            ),
            end_of_turn: histogram(
                "parley_call_end_of_turn_seconds",
                "From the caller's last word to the turn judged over.",
                TURN,
            ),
            db_acquire: histograms(
                "parley_db_acquire_seconds",
                "Waits for a database connection (read) or the write transaction (write).",
                &["pool"],
                WAITS,
            ),
            db_transaction_statements: histogram(
                "parley_db_transaction_statements",
                "Statements a committed write transaction sent, BEGIN and COMMIT included.",
                STATEMENTS,
            ),
            group_commit_writes: histograms(
                "parley_group_commit_writes",
                "Writes one group commit held, by kind.",
                &["kind"],
                GROUPS,
            ),
            group_commit_races: counters(
                "parley_group_commit_races_total",
                "Grouped writes run again after losing a race to another transaction, by kind.",
                &["kind"],
            ),
            db_connections: int_gauges(
                "parley_db_connections",
                "Database connections by pool and state.",
                &["pool", "state"],
            ),
            stream_clients: int_gauges("parley_stream_clients", "Open event streams and WebSockets.", &["kind"]),
            database_up: IntGauge::new("parley_database_up", "1 if the last scrape could read the database.")
                .expect("valid metric"),
            registry,
        };
        let f = &families;
        let all: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(f.http_requests.clone()),
            Box::new(f.http_duration.clone()),
            Box::new(f.job_runs.clone()),
            Box::new(f.job_duration.clone()),
            Box::new(f.jobs_queued.clone()),
            Box::new(f.jobs_running.clone()),
            Box::new(f.jobs_oldest_due.clone()),
            Box::new(f.webhook_attempts.clone()),
            Box::new(f.webhook_backlog.clone()),
            Box::new(f.webhook_backlog_oldest.clone()),
            Box::new(f.agent_runs.clone()),
            Box::new(f.agent_run_duration.clone()),
            Box::new(f.calls_active.clone()),
            Box::new(f.voice_to_voice.clone()),
            Box::new(f.end_of_turn.clone()),
            Box::new(f.db_acquire.clone()),
            Box::new(f.db_transaction_statements.clone()),
            Box::new(f.group_commit_writes.clone()),
            Box::new(f.group_commit_races.clone()),
            Box::new(f.db_connections.clone()),
            Box::new(f.stream_clients.clone()),
            Box::new(f.database_up.clone()),
        ];
        for c in all {
            f.registry.register(c).expect("each family is registered once");
        }
        // Resident memory, CPU seconds, open files: the process's own.
        #[cfg(target_os = "linux")]
        f.registry
            .register(Box::new(prometheus::process_collector::ProcessCollector::for_self()))
            .expect("the process collector is registered once");
        // Families with labels appear once they have a series; these are
        // worth seeing at zero from the start.
        for kind in ["sse", "websocket"] {
            f.stream_clients.with_label_values(&[kind]).set(0);
        }
        for outcome in ["delivered", "failed"] {
            f.webhook_attempts.with_label_values(&[outcome]);
        }
        for outcome in ["completed", "failed", "canceled"] {
            f.agent_runs.with_label_values(&[outcome]);
        }
        for pool in ["read", "write"] {
            f.db_acquire.with_label_values(&[pool]);
        }
        Metrics(Arc::new(families))
    }

    /// Everything, in Prometheus's text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = Vec::new();
        // Encoding our own families into a Vec cannot fail.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// The content type of [`render`](Self::render)'s text.
    pub const CONTENT_TYPE: &'static str = "text/plain; version=0.0.4; charset=utf-8";

    /// Counts an open stream of `kind` (`sse`, `websocket`) until the guard drops.
    pub fn connected(&self, kind: &'static str) -> Connected {
        let gauge = self.stream_clients.with_label_values(&[kind]);
        gauge.inc();
        Connected(gauge)
    }
}

/// An open stream, counted in `parley_stream_clients` while it lives.
pub struct Connected(IntGauge);

impl Drop for Connected {
    fn drop(&mut self) {
        self.0.dec();
    }
}

fn counters(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric")
}

fn int_gauges(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric")
}

fn histograms(name: &str, help: &str, labels: &[&str], buckets: &[f64]) -> HistogramVec {
    HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets.to_vec()), labels).expect("valid metric")
}

fn histogram(name: &str, help: &str, buckets: &[f64]) -> Histogram {
    Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets.to_vec())).expect("valid metric")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_instances_count_apart_and_guards_give_back_their_count() {
        let (a, b) = (Metrics::new(), Metrics::new());
        a.http_requests.with_label_values(&["GET", "/healthz", "200"]).inc();
        {
            let _one = a.connected("sse");
            assert!(a.render().contains("parley_stream_clients{kind=\"sse\"} 1"));
        }
        assert!(a.render().contains("parley_stream_clients{kind=\"sse\"} 0"));
        assert!(a.render().contains("parley_http_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"} 1"));
        assert!(!b.render().contains("route=\"/healthz\""), "a second instance has its own registry");
    }
}
