//! The courier: sends outbound messages through their channel's connector,
//! as `message.send` jobs (see `parley_jobs`).
//!
//! A message's job is enqueued with the message, in the queue of its
//! conversation, so a conversation's messages leave in order, one at a
//! time; different conversations' messages go concurrently. A crashed
//! instance's leases lapse and any instance sends those messages again:
//! delivery is at least once, with a stable `webhook-id` (`msg_<id>`) for
//! receivers to deduplicate. A failed send is retried on
//! [`RETRY_SCHEDULE_S`]; after the last attempt (or a failure that cannot
//! succeed) the message is `failed`, with the reason.

use std::time::Duration;

use futures::future::BoxFuture;
use parley_domain::Scope;
use parley_domain::channel::ChannelStatus;
use parley_domain::conversation::MessageStatus;
use parley_jobs::{BackgroundJob, Enqueue, Handler, Job, Outcome, RetryPolicy};
use parley_store::repo::{channels as channel_repo, conversations as conversation_repo};
use parley_store::{StoreResult, Tx};
use serde::{Deserialize, Serialize};

use crate::messaging::messages;
use crate::{ServiceError, ServiceResult, Services, Work};
use parley_connectors::{Delivered, Delivery, connector};

/// The job kind.
pub const KIND: &str = "message.send";

/// Seconds to wait after the 1st, 2nd, … failed attempt (before scaling);
/// after the last, the message fails.
pub const RETRY_SCHEDULE_S: [u64; 7] = [1, 5, 30, 120, 600, 1800, 3600];

#[derive(Debug, Clone)]
pub struct CourierConfig {
    /// Multiplies the retry schedule (e.g. 0.01 in tests).
    pub retry_scale: f64,
    pub request_timeout: Duration,
    /// How long a leased message stays ours (longer than a send can take).
    pub lease: Duration,
    pub poll_interval: Duration,
    /// Messages in flight at once on this instance.
    pub concurrency: usize,
}

impl Default for CourierConfig {
    fn default() -> Self {
        Self {
            retry_scale: 1.0,
            request_timeout: Duration::from_secs(15),
            lease: Duration::from_secs(60),
            poll_interval: Duration::from_secs(1),
            concurrency: 32,
        }
    }
}

/// What a `message.send` job carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Send {
    pub(crate) message_id: i64,
    pub(crate) conversation_id: i64,
    pub(crate) channel_id: i64,
}

impl BackgroundJob for Send {
    const KIND: &'static str = KIND;
}

/// Queues message `message_id` for sending, in the caller's transaction.
pub async fn enqueue(
    tx: &mut Tx,
    scope: Scope,
    message_id: i64,
    conversation_id: i64,
    channel_id: i64,
) -> StoreResult<()> {
    let job = Enqueue::of(&Send { message_id, conversation_id, channel_id })
        .in_queue(format!("conversation:{conversation_id}"))
        .for_scope(scope);
    parley_jobs::enqueue(tx, job).await?;
    Ok(())
}

/// The `message.send` handler.
pub struct Courier {
    svc: Services,
    client: reqwest::Client,
}

impl Courier {
    pub fn new(svc: Services) -> Self {
        let client =
            parley_events::ssrf::http_client(svc.config.webhooks_allow_private, svc.config.courier.request_timeout);
        Self { svc, client }
    }
}

impl Handler for Courier {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::seconds(&RETRY_SCHEDULE_S, self.svc.config.courier.retry_scale)
    }

    fn run<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            match send(&self.svc, &self.client, job).await {
                Ok(outcome) => outcome,
                // A store failure: try again (the schedule bounds it).
                Err(e) => Outcome::Retry { error: e.to_string(), after: None },
            }
        })
    }

    fn dead<'a>(&'a self, tx: &'a mut Tx, job: &'a Job, error: &'a str) -> BoxFuture<'a, anyhow::Result<()>> {
        Box::pin(async move {
            let (Some(scope), Ok(send)) = (job.scope, job.read::<Send>()) else { return Ok(()) };
            let attempts = job.attempt;
            let error = format!("{error} (after {attempts} attempt{})", if attempts == 1 { "" } else { "s" });
            let failed = messages::advance(
                tx,
                &self.svc.storage,
                scope,
                send.message_id,
                MessageStatus::Failed,
                None,
                Some(&error),
            )
            .await;
            match failed {
                Ok(_) | Err(ServiceError::NotFound { .. }) => Ok(()),
                Err(e) => Err(anyhow::Error::new(e).context(format!("marking message {} failed", send.message_id))),
            }
        })
    }

    fn committed(&self, job: &Job) {
        if let Ok(send) = job.read::<Send>() {
            self.svc.conversation_changed(send.conversation_id);
        }
    }
}

/// Sends one message; on success records it `sent` and completes the job
/// in one transaction.
async fn send(svc: &Services, client: &reqwest::Client, job: &Job) -> ServiceResult<Outcome> {
    let Some(scope) = job.scope else { return Ok(Outcome::Fail("the job names no workspace".into())) };
    let due = match job.read::<Send>() {
        Ok(due) => due,
        Err(e) => return Ok(Outcome::Fail(e)),
    };
    let (message, conversation, channel) = {
        let mut c = svc.db.read().await?;
        let message = conversation_repo::get_message(&mut c, scope, due.message_id).await?;
        let conversation = conversation_repo::get(&mut c, scope, due.conversation_id).await?;
        let channel = channel_repo::get(&mut c, scope, due.channel_id).await?;
        (message, conversation, channel)
    };
    let (Some(mut message), Some(conversation), Some(channel)) = (message, conversation, channel) else {
        return Ok(Outcome::Fail("the message, conversation or channel is gone".into()));
    };
    if message.status != MessageStatus::Queued {
        // Recorded by an earlier holder that died before completing the job.
        return Ok(Outcome::Done);
    }
    svc.storage.present(&mut message);
    let delivered = match connector(channel.kind) {
        None => Delivered::Failed { error: format!("channel type {} cannot send in this version", channel.kind) },
        Some(_) if channel.status != ChannelStatus::Active => {
            Delivered::Failed { error: format!("channel {} is {}", channel.id, channel.status) }
        }
        // Test mode never reaches a third party's servers.
        Some(k) if k.reaches_third_party() && !scope.livemode() => Delivered::Sent { external_id: None },
        Some(k) => {
            let secrets = crate::messaging::channels::secret_settings(svc, &channel)?;
            let signing =
                if k.signs_traffic() { Some(crate::messaging::channels::signing_secret(svc, &channel)?) } else { None };
            let to = conversation.item.channel_ref.split_once(':').map_or("", |(_, a)| a);
            let domain_channel = channel.to_api()?;
            let files = if k.embeds_files() { read_files(svc, &message).await? } else { Vec::new() };
            let delivery = Delivery {
                client,
                timeout: svc.config.courier.request_timeout,
                allow_private: svc.config.webhooks_allow_private,
                channel: &domain_channel,
                secrets: &secrets,
                signing: signing.as_ref(),
                message: &message,
                to,
                livemode: scope.livemode(),
                public_url: svc.config.public_url(),
                public_id: &channel.public_id,
                files: &files,
            };
            // An earlier attempt may have reached the provider without its
            // answer being recorded (the process died, the request timed
            // out): where the provider can say, take that send instead of
            // sending again.
            let uncertain = job.attempt > 1 || job.interrupted > 0;
            let earlier = if uncertain { k.look_up_sent(delivery).await } else { None };
            match earlier {
                Some(Ok(sids)) => match unrecorded(svc, scope, channel.id, sids).await? {
                    Some(sid) => Delivered::Sent { external_id: Some(sid) },
                    None => k.deliver(delivery).await,
                },
                // Not knowing is no reason to hold the message back: it
                // goes, at the risk of a repeat (docs/channels.md).
                Some(Err(e)) => {
                    tracing::warn!(message = due.message_id, error = %e, "could not look for an earlier send; sending");
                    k.deliver(delivery).await
                }
                None => k.deliver(delivery).await,
            }
        }
    };
    match delivered {
        Delivered::Sent { external_id } => {
            let sent = SentJob { scope, send: due, external_id, job: job.clone() };
            // Recorded, or another instance took the job over and records the send.
            svc.sent.submit(svc, sent).await?;
            Ok(Outcome::Committed)
        }
        Delivered::Retry { error, after } => Ok(Outcome::Retry { error, after }),
        Delivered::Failed { error } => Ok(Outcome::Fail(error)),
        Delivered::CredentialsRefused { error } => {
            crate::messaging::channels::credentials_refused(
                svc,
                scope,
                parley_domain::ids::ChannelId(due.channel_id),
                &error,
            )
            .await?;
            Ok(Outcome::Fail(error))
        }
    }
}

/// A message the provider took, to be recorded `sent` with its job's
/// completion: in a group commit with the others sent at the same time
/// (see [`crate::group_commit`]), one transaction and flush for all.
#[derive(Clone)]
pub(crate) struct SentJob {
    scope: Scope,
    send: Send,
    external_id: Option<String>,
    job: Job,
}

/// Records one send (a [`SentJob`]), unless the job's lease lapsed (false):
/// then it writes nothing, and the job's new holder records the send.
pub(crate) fn record_sent<'a>(
    work: &'a mut Work,
    svc: &'a Services,
    sent: SentJob,
) -> BoxFuture<'a, ServiceResult<bool>> {
    Box::pin(async move {
        let SentJob { scope, send, external_id, job } = sent;
        // First: the rest is written only by the job's holder.
        if !job.complete(work).await? {
            return Ok(false);
        }
        messages::advance(
            work,
            &svc.storage,
            scope,
            send.message_id,
            MessageStatus::Sent,
            external_id.as_deref(),
            None,
        )
        .await?;
        if let Some(external_id) = external_id.as_deref() {
            messages::apply_early_reports(work, &svc.storage, scope, send.channel_id, send.message_id, external_id)
                .await?;
        }
        work.conversation_changed(send.conversation_id);
        Ok(true)
    })
}

/// The first of the provider's `sids` that no message of the channel has
/// yet (a match already taken by another message is that message's).
async fn unrecorded(svc: &Services, scope: Scope, channel_id: i64, sids: Vec<String>) -> ServiceResult<Option<String>> {
    let mut c = svc.db.read().await?;
    for sid in sids {
        let taken = conversation_repo::by_external_id(
            &mut c,
            scope,
            channel_id,
            parley_domain::conversation::Direction::Outbound,
            &sid,
        )
        .await?;
        if taken.is_none() {
            return Ok(Some(sid));
        }
    }
    Ok(None)
}

/// The message's files, from storage (a store failure is retried).
async fn read_files(
    svc: &Services,
    message: &parley_domain::conversation::Message,
) -> ServiceResult<Vec<parley_connectors::OutboundFile>> {
    let mut files = Vec::with_capacity(message.attachments.len());
    for a in &message.attachments {
        let read = svc.storage.read(&a.key, None).await?;
        files.push(parley_connectors::OutboundFile {
            filename: a.filename.clone(),
            content_type: a.content_type.clone(),
            bytes: read.bytes.to_vec(),
        });
    }
    Ok(files)
}

/// The worker configuration the courier's settings call for.
pub fn worker_config(config: &CourierConfig) -> parley_jobs::WorkerConfig {
    parley_jobs::WorkerConfig {
        lease: config.lease,
        poll_interval: config.poll_interval,
        concurrency: config.concurrency,
    }
}
