//! What `/metrics` shows: the instance's counters and histograms (counted
//! where things happen, see `parley_telemetry`), and gauges set here, at
//! the scrape, from what is stored and held now: the job queue by kind,
//! the webhook backlog, the calls this instance runs, its connections.
//!
//! The queue and the backlog are the whole database's (every instance
//! reports the same figures: aggregate them with `max`, not `sum`).

use parley_domain::Timestamp;
use parley_store::repo;

use crate::Services;

/// Sets the scrape-time gauges and renders everything in Prometheus's
/// text format. A database that does not answer leaves its gauges out
/// (and `parley_database_up` at 0): the rest is still worth reading
/// during an outage.
pub async fn scrape(svc: &Services) -> String {
    let m = svc.metrics();
    let now = Timestamp::now();
    // Read first, then replace the gauges with no await between: a scrape
    // running beside this one never renders them half-set.
    let stored = stored(svc).await;
    m.jobs_queued.reset();
    m.jobs_running.reset();
    m.jobs_oldest_due.reset();
    match stored {
        Ok((depths, (backlog, oldest))) => {
            let seconds_since = |t: Timestamp| ((now.unix_micros() - t.unix_micros()).max(0) as f64) / 1e6;
            for d in depths {
                m.jobs_queued.with_label_values(&[&d.kind]).set(d.queued);
                m.jobs_running.with_label_values(&[&d.kind]).set(d.running);
                m.jobs_oldest_due.with_label_values(&[&d.kind]).set(d.oldest_due.map_or(0.0, seconds_since));
            }
            m.webhook_backlog.set(backlog);
            m.webhook_backlog_oldest.set(oldest.map_or(0.0, seconds_since));
            m.database_up.set(1);
        }
        Err(e) => {
            tracing::warn!(error = %e, "the metrics could not read the job queue and webhook backlog");
            m.database_up.set(0);
        }
    }
    m.calls_active.set(svc.calls.active() as i64);
    svc.db.gauge_connections();
    m.render()
}

/// The job queue by kind, and the webhook backlog with its oldest delivery.
type Stored = (Vec<repo::jobs::KindDepth>, (i64, Option<Timestamp>));

async fn stored(svc: &Services) -> Result<Stored, parley_store::StoreError> {
    let mut c = svc.db.read().await?;
    let depths = repo::jobs::depths(&mut c, Timestamp::now()).await?;
    let backlog = repo::webhooks::backlog(&mut c).await?;
    Ok((depths, backlog))
}
