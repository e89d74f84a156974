//! Channels whose provider is asked rather than calling in (Telegram's
//! `getUpdates`, `updates: "polling"`), and channels whose provider must
//! be told where to call (Telegram's `setWebhook`).
//!
//! - `channel.register` runs after every change of such a channel's
//!   settings: the channel's check, which registers its hook (or removes
//!   it, to poll) and moves the channel to `active` or `error`. Retried
//!   while the provider cannot be reached.
//! - `channel.poll` asks the provider for what arrived since the job's
//!   cursor (a long poll), stores each message, then queues the next poll
//!   with the new cursor in the transaction that completes this one: the
//!   cursor is durable, a crash repeats at most one poll (whose messages
//!   are deduplicated by the provider's ids), and a unique index keeps one
//!   chain per channel (queue `poll:{channel_id}`). The chain ends when
//!   the channel is disabled, deleted, switched to webhooks, or its
//!   credentials are refused; the next successful check starts it again.

use std::time::Duration;

use futures::future::BoxFuture;
use parley_domain::channel::ChannelStatus;
use parley_domain::{Scope, Timestamp};
use parley_jobs::{BackgroundJob, Enqueue, Handler, Job, Outcome, RetryPolicy};
use parley_store::Tx;
use parley_store::repo::channels as channel_repo;
use serde::{Deserialize, Serialize};

use crate::{ServiceResult, Services};
use parley_connectors::{Delivered, Poll, connector};

pub const REGISTER: &str = "channel.register";
pub const POLL: &str = "channel.poll";

/// How long to wait before polling again after the provider failed.
const POLL_BACKOFF: Duration = Duration::from_secs(5);

/// The `channel.register` job: register channel `channel_id`'s webhook
/// with its provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Register {
    pub(crate) channel_id: i64,
}

impl BackgroundJob for Register {
    const KIND: &'static str = REGISTER;
}

/// The `channel.poll` job: read channel `channel_id` from `cursor` on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PollJob {
    pub(crate) channel_id: i64,
    pub(crate) cursor: Option<String>,
}

impl BackgroundJob for PollJob {
    const KIND: &'static str = POLL;
}

/// Queues the channel's registration with its provider, if its type
/// registers (in the caller's transaction: after a settings change).
pub async fn settings_changed(
    tx: &mut Tx,
    scope: Scope,
    channel_id: i64,
    kind: &dyn parley_connectors::Connector,
) -> ServiceResult<()> {
    if kind.registers_hooks() {
        let job = Enqueue::of(&Register { channel_id }).for_scope(scope);
        parley_jobs::enqueue(tx, job).await?;
    }
    Ok(())
}

/// Starts the channel's poll chain unless one runs.
pub async fn start_polling(svc: &Services, scope: Scope, channel_id: i64) -> ServiceResult<()> {
    let mut work = svc.begin().await?;
    queue_poll(&mut work, scope, channel_id, None, Timestamp::now()).await?;
    svc.commit(work).await?;
    Ok(())
}

async fn queue_poll(
    tx: &mut Tx,
    scope: Scope,
    channel_id: i64,
    cursor: Option<String>,
    at: Timestamp,
) -> ServiceResult<()> {
    let job = parley_store::repo::jobs::NewJob {
        kind: POLL,
        queue: Some(format!("poll:{channel_id}")),
        queue_is_new: false,
        payload: PollJob { channel_id, cursor }.to_payload(),
        scope: Some(scope),
        run_at: at,
    };
    parley_store::repo::jobs::enqueue_unless_queued(tx, job).await?;
    Ok(())
}

/// The `channel.register` handler.
pub struct Registrar {
    svc: Services,
}

impl Registrar {
    pub fn new(svc: Services) -> Self {
        Self { svc }
    }
}

impl Handler for Registrar {
    fn kind(&self) -> &'static str {
        REGISTER
    }

    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::seconds(&crate::messaging::courier::RETRY_SCHEDULE_S, self.svc.config.courier.retry_scale)
    }

    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let (Some(scope), Ok(Register { channel_id })) = (job.scope, job.read::<Register>()) else {
                return Outcome::Fail("not a registration".to_owned());
            };
            match crate::messaging::channels::check(&self.svc, scope, parley_domain::ids::ChannelId(channel_id)).await {
                // Refused credentials are the channel's status now; nothing to retry.
                Ok(result) if result.ok || result.channel.status == ChannelStatus::Error => Outcome::Done,
                Ok(result) if result.channel.status == ChannelStatus::Disabled => Outcome::Done,
                Ok(result) => Outcome::Retry { error: result.detail, after: None },
                Err(crate::ServiceError::NotFound { .. }) => Outcome::Done,
                Err(e) => Outcome::Retry { error: e.to_string(), after: None },
            }
        })
    }
}

/// The `channel.poll` handler.
pub struct Poller {
    svc: Services,
    client: reqwest::Client,
}

impl Poller {
    pub fn new(svc: Services) -> Self {
        // The connector asks for a wait on top of the request timeout.
        let client = parley_events::ssrf::http_client(
            svc.config.webhooks_allow_private,
            svc.config.courier.request_timeout + parley_connectors::LONGEST_POLL,
        );
        Self { svc, client }
    }

    async fn poll(&self, job: &Job) -> ServiceResult<Outcome> {
        let svc = &self.svc;
        let (Some(scope), Ok(due)) = (job.scope, job.read::<PollJob>()) else {
            return Ok(Outcome::Fail("not a poll".to_owned()));
        };
        let row = {
            let mut c = svc.db.read().await?;
            channel_repo::get(&mut c, scope, due.channel_id).await?
        };
        let Some(row) = row else { return Ok(Outcome::Done) };
        let Some(kind) = connector(row.kind) else { return Ok(Outcome::Done) };
        if row.status != ChannelStatus::Active || !kind.polls(&row.config.0) {
            return Ok(Outcome::Done);
        }
        let secrets = crate::messaging::channels::secret_settings(svc, &row)?;
        let channel = row.to_api()?;
        let polled = kind
            .poll(Poll {
                client: &self.client,
                timeout: svc.config.courier.request_timeout,
                allow_private: svc.config.webhooks_allow_private,
                channel: &channel,
                secrets: &secrets,
                cursor: due.cursor.as_deref(),
            })
            .await;
        let polled = match polled {
            Ok(polled) => polled,
            Err(Delivered::CredentialsRefused { error }) => {
                // The channel's error and the end of its poll chain commit
                // together: nobody sees one without the other.
                let mut work = svc.begin().await?;
                if job.complete(&mut work).await? {
                    let id = parley_domain::ids::ChannelId(row.id);
                    crate::messaging::channels::refuse_credentials(&mut work, scope, id, &error).await?;
                    svc.commit(work).await?;
                }
                return Ok(Outcome::Committed);
            }
            Err(outcome) => {
                let wait = match &outcome {
                    Delivered::Retry { after: Some(after), .. } => *after,
                    _ => POLL_BACKOFF,
                };
                tracing::warn!(
                    channel = row.id,
                    error = outcome.error().unwrap_or_default(),
                    "a poll of the provider failed"
                );
                return Ok(Outcome::Later(Timestamp::now().plus_duration(wait)));
            }
        };
        for incoming in polled.incoming {
            // A message that cannot be stored stops the chain here: the
            // cursor stays, and the retry asks for it again.
            crate::messaging::channels::take(svc, scope, &row, incoming.without_nul()).await?;
        }
        let mut work = svc.begin().await?;
        if !job.complete(&mut work).await? {
            return Ok(Outcome::Committed);
        }
        queue_poll(&mut work, scope, row.id, polled.cursor, Timestamp::now()).await?;
        svc.commit(work).await?;
        Ok(Outcome::Committed)
    }
}

impl Handler for Poller {
    fn kind(&self) -> &'static str {
        POLL
    }

    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::seconds(&crate::messaging::courier::RETRY_SCHEDULE_S, self.svc.config.courier.retry_scale)
    }

    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            match self.poll(job).await {
                Ok(outcome) => outcome,
                Err(e) => Outcome::Retry { error: e.to_string(), after: None },
            }
        })
    }
}
