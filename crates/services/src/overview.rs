//! The home page's read model (`GET /api/v1/overview`): the last days of a
//! workspace's calls, messages, agent runs and spend, cut at the reader's
//! midnight, with open handoffs, failing webhook endpoints and the balance.
//! Read only, on two read connections at once.

use parley_domain::Scope;
use parley_domain::Timestamp;
use parley_domain::call::CallLatency;
use parley_domain::overview::{AgentUsage, DayFigures, Overview, Usage, UsageDay};
use parley_domain::validation::QueryReader;
use parley_store::repo::{billing, overview as repo};
use time::{Duration, UtcOffset};

use crate::{ServiceResult, Services};

/// The window: `days` (1–31, default 7) ending today, in days that start
/// at midnight `utc_offset_minutes` east of UTC (−840 to 840, default 0;
/// the dashboard sends the browser's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverviewQuery {
    pub days: i64,
    pub utc_offset_minutes: i64,
}

impl Default for OverviewQuery {
    fn default() -> Self {
        OverviewQuery { days: 7, utc_offset_minutes: 0 }
    }
}

pub fn parse_query(q: &mut QueryReader) -> OverviewQuery {
    parse_window(q, 31, 7)
}

/// The usage window: `days` 1–90 (default 30), `utc_offset_minutes` as for the overview.
pub fn parse_usage_query(q: &mut QueryReader) -> UsageQuery {
    UsageQuery(parse_window(q, 90, 30))
}

/// `GET /api/v1/billing/usage`'s window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageQuery(pub OverviewQuery);

fn parse_window(q: &mut QueryReader, most: i64, default: i64) -> OverviewQuery {
    OverviewQuery {
        days: q.integer("days", 1, most).unwrap_or(default),
        utc_offset_minutes: q.integer("utc_offset_minutes", -840, 840).unwrap_or(0),
    }
}

/// The window's first instant and its days' dates, oldest first.
fn window(q: OverviewQuery, now: Timestamp) -> (Timestamp, Vec<String>) {
    let offset = UtcOffset::from_whole_seconds((q.utc_offset_minutes * 60) as i32).unwrap_or(UtcOffset::UTC);
    let today = now.as_datetime().to_offset(offset).date();
    let first = today - Duration::days(q.days - 1);
    let since = Timestamp::from_datetime(first.midnight().assume_offset(offset));
    (since, (0..q.days).map(|i| (first + Duration::days(i)).to_string()).collect())
}

/// What agents cost per day, by agent (runs and calls).
pub async fn usage(svc: &Services, scope: Scope, q: UsageQuery) -> ServiceResult<Usage> {
    let (since, dates) = window(q.0, Timestamp::now());
    let mut days: Vec<UsageDay> = dates.into_iter().map(|date| UsageDay { date, ..UsageDay::default() }).collect();
    let mut c = svc.db.read().await?;
    let last = days.len() - 1;
    for (day, agent_id, cents) in repo::usage_by_agent(&mut c, scope, since).await? {
        let d = &mut days[(day.max(0) as usize).min(last)];
        d.total_cents += cents;
        match d.agents.iter_mut().find(|a| a.agent_id == agent_id) {
            Some(a) => a.cents += cents,
            None => d.agents.push(AgentUsage { agent_id, cents }),
        }
    }
    for d in &mut days {
        d.agents.sort_by(|a, b| b.cents.cmp(&a.cents).then(a.agent_id.cmp(&b.agent_id)));
    }
    Ok(Usage { utc_offset_minutes: q.0.utc_offset_minutes, days })
}

/// How many failing endpoints the overview names.
const FAILING_ENDPOINTS: i64 = 20;

/// A day's figures; a row stamped after `now` (another instance's clock)
/// counts as today.
fn slot(days: &mut [DayFigures], day: i64) -> &mut DayFigures {
    let last = days.len() - 1;
    &mut days[(day.max(0) as usize).min(last)]
}

pub async fn overview(svc: &Services, scope: Scope, q: OverviewQuery) -> ServiceResult<Overview> {
    overview_at(svc, scope, q, Timestamp::now()).await
}

async fn overview_at(svc: &Services, scope: Scope, q: OverviewQuery, now: Timestamp) -> ServiceResult<Overview> {
    let (since, dates) = window(q, now);
    let mut days: Vec<DayFigures> =
        dates.into_iter().map(|date| DayFigures { date, ..DayFigures::default() }).collect();
    // Two read connections at once, for the two halves of the work
    // (measured on a busy week: runs and messages ~20 ms, turns and spend ~24 ms
    // on PostgreSQL).
    let turns_and_spend = async {
        let mut c = svc.db.read().await?;
        let turns = repo::turn_latencies(&mut c, scope, since).await?;
        ServiceResult::Ok((turns, repo::spend(&mut c, scope, since).await?))
    };
    let the_rest = async {
        let mut c = svc.db.read().await?;
        let calls = repo::calls(&mut c, scope, since).await?;
        let messages = repo::messages(&mut c, scope, since).await?;
        let runs = repo::agent_runs(&mut c, scope, since).await?;
        ServiceResult::Ok((calls, messages, runs, c))
    };
    let ((turns, spend), (calls, messages, runs, mut c)) = tokio::try_join!(turns_and_spend, the_rest)?;
    let last = q.days - 1;
    for (day, n, ms) in calls {
        let d = slot(&mut days, day);
        d.calls += n;
        d.call_seconds += ms / 1000;
    }
    for (day, inbound, outbound) in messages {
        let d = slot(&mut days, day);
        d.messages_in += inbound;
        d.messages_out += outbound;
    }
    for (day, runs, failed) in runs {
        let d = slot(&mut days, day);
        d.agent_runs += runs;
        d.agent_runs_failed += failed;
    }
    for (day, cents) in spend {
        slot(&mut days, day).spend_cents += cents;
    }
    let today_turns = turns.iter().filter(|(day, _)| *day >= last).map(|(_, ms)| *ms).collect();
    Ok(Overview {
        utc_offset_minutes: q.utc_offset_minutes,
        days,
        voice_to_voice_today: CallLatency::over(today_turns),
        voice_to_voice: CallLatency::over(turns.into_iter().map(|(_, ms)| ms).collect()),
        open_handoffs: repo::open_handoffs(&mut c, scope).await?,
        failing_webhook_endpoints: repo::failing_endpoints(&mut c, scope, FAILING_ENDPOINTS).await?,
        balance_cents: billing::account(&mut c, scope).await?.balance_cents,
    })
}
