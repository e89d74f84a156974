//! The courier: sends queued outbound messages through their channel's
//! connector, retries, and records the outcome.
//!
//! It leases due messages from the queue (`FOR UPDATE SKIP LOCKED` on
//! PostgreSQL), at most one per conversation at a time so that a
//! conversation's messages leave in order, and sends them concurrently. A
//! crashed instance's leases lapse and any instance sends those messages
//! again: delivery is at least once, with a stable `webhook-id`
//! (`msg_<id>`) for receivers to deduplicate.

use std::time::Duration;

use parley_domain::Timestamp;
use parley_domain::channel::ChannelStatus;
use parley_domain::conversation::MessageStatus;
use parley_store::repo::outbound::{self, DueSend};
use parley_store::repo::{channels as channel_repo, conversations as conversation_repo};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::channels::{Delivered, Delivery, connector};
use crate::{ServiceResult, Services, messages};

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

/// Runs until `shutdown` turns true, then lets sends in flight finish (up
/// to the request timeout).
pub async fn run(svc: Services, mut shutdown: watch::Receiver<bool>) {
    let config = svc.config.courier.clone();
    let client = parley_events::ssrf::http_client(svc.config.webhooks_allow_private, config.request_timeout);
    let instance = format!("courier-{}", ulid::Ulid::new());
    let mut wake = svc.outbox.subscribe();
    let mut inflight: JoinSet<()> = JoinSet::new();
    loop {
        let room = config.concurrency.saturating_sub(inflight.len());
        if room > 0 {
            match claim(&svc, &instance, room as i64).await {
                Ok(due) => {
                    for d in due {
                        let (svc, client) = (svc.clone(), client.clone());
                        inflight.spawn(async move {
                            let id = d.message_id;
                            if let Err(e) = send_one(&svc, &client, d).await {
                                tracing::warn!(message_id = id, error = %e, "could not record a message send");
                            }
                        });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "could not claim outbound messages"),
            }
        }
        tokio::select! {
            changed = wake.changed() => if changed.is_err() { break },
            // A finished send may let its conversation's next message go.
            Some(_) = inflight.join_next(), if !inflight.is_empty() => {}
            _ = tokio::time::sleep(config.poll_interval) => {}
            _ = shutdown.changed() => break,
        }
    }
    let _ = tokio::time::timeout(config.request_timeout, async { while inflight.join_next().await.is_some() {} }).await;
}

async fn claim(svc: &Services, instance: &str, limit: i64) -> ServiceResult<Vec<DueSend>> {
    let lease_until = Timestamp::from_datetime(Timestamp::now().as_datetime() + svc.config.courier.lease);
    let mut tx = svc.db.begin().await?;
    let due = outbound::claim(&mut tx, instance, lease_until, limit).await?;
    tx.commit().await?;
    Ok(due)
}

/// Sends one leased message and records what happened.
async fn send_one(svc: &Services, client: &reqwest::Client, due: DueSend) -> ServiceResult<()> {
    let scope = due.scope();
    let (message, conversation, channel) = {
        let mut c = svc.db.read().await?;
        let message = conversation_repo::get_message(&mut c, scope, due.message_id).await?;
        let conversation = conversation_repo::get(&mut c, scope, due.conversation_id).await?;
        let channel = channel_repo::get(&mut c, scope, due.channel_id).await?;
        (message, conversation, channel)
    };
    let (Some(mut message), Some(conversation), Some(channel)) = (message, conversation, channel) else {
        return finish(svc, &due, Delivered::Failed { error: "the message, conversation or channel is gone".into() })
            .await;
    };
    if message.status != MessageStatus::Queued {
        // Recorded by an earlier holder that died before leaving the queue.
        let mut tx = svc.db.begin().await?;
        outbound::remove(&mut tx, due.message_id).await?;
        return Ok(tx.commit().await?);
    }
    svc.storage.present(&mut message).await;
    let kind = connector(channel.kind);
    let outcome = match kind {
        None => Delivered::Failed { error: format!("channel type {} cannot send in this version", channel.kind) },
        Some(_) if channel.status != ChannelStatus::Active => {
            Delivered::Failed { error: format!("channel {} is {}", channel.id, channel.status) }
        }
        // Test mode never reaches a third party's servers.
        Some(k) if k.reaches_third_party() && !scope.livemode() => Delivered::Sent { external_id: None },
        Some(k) => {
            let secrets = crate::channels::secret_settings(svc, &channel)?;
            let signing = if k.signs_traffic() { Some(crate::channels::signing_secret(svc, &channel)?) } else { None };
            let to = conversation.item.channel_ref.split_once(':').map_or("", |(_, a)| a);
            k.deliver(Delivery {
                client,
                timeout: svc.config.courier.request_timeout,
                allow_private: svc.config.webhooks_allow_private,
                channel: &channel,
                secrets: &secrets,
                signing: signing.as_ref(),
                message: &message,
                to,
                livemode: scope.livemode(),
            })
            .await
        }
    };
    finish(svc, &due, outcome).await
}

/// Records an attempt's outcome in one transaction, then wakes the event
/// dispatcher and the conversation's live viewers.
async fn finish(svc: &Services, due: &DueSend, outcome: Delivered) -> ServiceResult<()> {
    let scope = due.scope();
    let attempt = due.attempts + 1;
    let mut tx = svc.db.begin().await?;
    match outcome {
        Delivered::Sent { external_id } => {
            messages::advance(
                &mut tx,
                &svc.storage,
                scope,
                due.message_id,
                MessageStatus::Sent,
                external_id.as_deref(),
                None,
            )
            .await?;
            outbound::remove(&mut tx, due.message_id).await?;
        }
        Delivered::Retry { error, after } if (attempt as usize) <= RETRY_SCHEDULE_S.len() => {
            let scaled = Duration::from_secs_f64(
                RETRY_SCHEDULE_S[attempt as usize - 1] as f64 * svc.config.courier.retry_scale.max(0.0),
            );
            let at = Timestamp::from_datetime(Timestamp::now().as_datetime() + after.unwrap_or(scaled));
            tracing::info!(message_id = due.message_id, attempt, %error, "message send failed; will retry");
            outbound::reschedule(&mut tx, due.message_id, attempt, at, &error).await?;
        }
        Delivered::Retry { error, .. } | Delivered::Failed { error } => {
            let error = format!("{error} (after {attempt} attempt{})", if attempt == 1 { "" } else { "s" });
            messages::advance(&mut tx, &svc.storage, scope, due.message_id, MessageStatus::Failed, None, Some(&error))
                .await?;
            outbound::remove(&mut tx, due.message_id).await?;
        }
    }
    tx.commit().await?;
    svc.wake_outbox();
    svc.conversation_changed(due.conversation_id);
    Ok(())
}
