//! Offering a handoff to a person: to the member it names; else to one
//! available member (online on the dashboard now), each in turn (the one
//! offered a handoff longest ago first); else, nobody being online, to every
//! member. Each offer notifies and emits `handoff.offered`. While nobody
//! accepts, a `handoff.offer` job offers it again every
//! `inbox.reoffer_seconds`: to the next available member, or to the named
//! one again. Nobody online twice running tells nobody anew: everyone was
//! told already, and the next member to come online is offered it then.

use std::time::Duration;

use parley_domain::conversation::{AuthorType, Handoff, HandoffStatus};
use parley_domain::event::EventType;
use parley_domain::ids::ConversationId;
use parley_domain::user::NotificationKind;
use parley_domain::{Scope, Timestamp};
use parley_jobs::{BackgroundJob, Enqueue, Outcome};
use parley_store::Tx;
use parley_store::repo::{conversations as conversation_repo, events, handoffs as repo, presence};
use serde::{Deserialize, Serialize};

use super::notifications;
use crate::tenancy::presence::TTL;
use crate::{ServiceResult, Services, event_data};

/// The job that offers a waiting handoff again.
pub const OFFER: &str = "handoff.offer";

#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct OfferJob {
    pub(crate) handoff_id: i64,
}

impl BackgroundJob for OfferJob {
    const KIND: &'static str = OFFER;
}

/// Offers requested handoff `h` (the first time, or again) and, the first
/// time, queues the job that offers it again; in the caller's transaction.
pub(crate) async fn offer(tx: &mut Tx, scope: Scope, h: &Handoff, title: &str) -> ServiceResult<()> {
    let now = Timestamp::now();
    let to = match h.user_id {
        Some(named) => Some(named),
        None => {
            let fresh = now.minus_duration(TTL);
            let next = presence::next_available(tx, scope.workspace_id, fresh, h.offered_user_id).await?;
            if let Some(member) = next {
                presence::offered(tx, scope.workspace_id, member, now).await?;
            }
            next
        }
    };
    let again = h.offers > 0;
    if again && to.is_none() && h.offered_user_id.is_none() {
        return Ok(());
    }
    if !repo::offered(tx, scope, h.id, to, now).await? {
        return Ok(()); // taken or withdrawn meanwhile
    }
    let tell = match to {
        Some(member) => vec![member],
        None => notifications::everyone(tx, scope).await?,
    };
    let actor = if h.requested_by.kind == AuthorType::User { h.requested_by.id } else { None };
    let what = notifications::about(title, ConversationId(h.conversation_id));
    let text = if again {
        format!("{what} is still waiting for a person: {}", h.reason)
    } else {
        format!("{what} is waiting for a person: {}", h.reason)
    };
    notifications::notify(tx, scope, &tell, NotificationKind::Handoff, h.conversation_id, actor, &text).await?;
    let offered = repo::get(tx, scope, h.id).await?.unwrap_or_else(|| h.clone());
    events::append(tx, scope, EventType::HandoffOffered, event_data(&offered)?).await?;
    if !again {
        parley_jobs::enqueue(tx, Enqueue::of(&OfferJob { handoff_id: h.id }).for_scope(scope)).await?;
    }
    Ok(())
}

/// The `handoff.offer` handler.
pub struct Reoffer {
    svc: Services,
}

impl Reoffer {
    pub fn new(svc: Services) -> Self {
        Self { svc }
    }
}

impl parley_jobs::Handler for Reoffer {
    fn kind(&self) -> &'static str {
        OFFER
    }

    fn retry_policy(&self) -> parley_jobs::RetryPolicy {
        parley_jobs::RetryPolicy::seconds(&[1, 5, 30, 120], 1.0)
    }

    fn run<'a>(&'a self, job: &'a parley_jobs::Job) -> futures::future::BoxFuture<'a, Outcome> {
        Box::pin(async move {
            let (Some(scope), Ok(offer)) = (job.scope, job.read::<OfferJob>()) else {
                return Outcome::Fail(format!("job {} is not a handoff offer", job.id));
            };
            match reoffer(&self.svc, scope, offer.handoff_id).await {
                Ok(outcome) => outcome,
                Err(e) => Outcome::Retry { error: e.to_string(), after: None },
            }
        })
    }
}

/// Offers handoff `id` again if it still waits and its last offer is
/// `reoffer` old; otherwise says when to look again.
async fn reoffer(svc: &Services, scope: Scope, id: i64) -> ServiceResult<Outcome> {
    let Some(every) = svc.config.handoff_reoffer.filter(|d| !d.is_zero()) else {
        return Ok(Outcome::Done);
    };
    let due = |h: &Handoff| h.offered_at.unwrap_or(h.created_at).plus_duration(every);
    let waiting = {
        let mut c = svc.db.read().await?;
        repo::get(&mut c, scope, id).await?
    };
    match waiting {
        Some(h) if h.status == HandoffStatus::Requested => {
            if due(&h) > Timestamp::now() {
                return Ok(Outcome::Later(due(&h)));
            }
        }
        _ => return Ok(Outcome::Done),
    }
    let mut work = svc.begin().await?;
    let Some(h) = repo::get(&mut work, scope, id).await?.filter(|h| h.status == HandoffStatus::Requested) else {
        return Ok(Outcome::Done);
    };
    let title =
        conversation_repo::get(&mut work, scope, h.conversation_id).await?.map(|c| c.item.title).unwrap_or_default();
    offer(&mut work, scope, &h, &title).await?;
    svc.commit(work).await?;
    Ok(Outcome::Later(Timestamp::now().plus_duration(every)))
}

/// `inbox.reoffer_seconds` as the services take it (0: never again).
pub fn reoffer_after(seconds: u64) -> Option<Duration> {
    (seconds > 0).then(|| Duration::from_secs(seconds))
}
