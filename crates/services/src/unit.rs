//! The unit of work: one transaction and what must happen once it commits.
//!
//! Every business write runs through here, whoever asks for it (a REST
//! handler, an MCP tool, the CLI): [`Services::transaction`] for a plain
//! write, [`Services::write`] for one that takes an idempotency key, and
//! [`Services::idempotent`] for an operation that needs more than one
//! transaction (placing a call: commit, dial, commit). A [`Work`] derefs to
//! the store's [`Tx`], so use cases take `&mut Tx` when they only write and
//! `&mut Work` when they also leave something for after the commit.
//!
//! After a commit, the workers of the jobs it queued are woken (by the
//! store), signals go to every instance's live views, and the steps areas
//! registered run ([`AfterCommit`]: a placed call starts). If the work is
//! dropped instead, nothing of it happens and each step is told so (a call
//! it placed is hung up). This module names no area.
//!
//! This is the only place in `parley-services` that opens a write
//! transaction (`tests/one_transaction_path.rs` checks it): a change made
//! anywhere else could not signal the live views it changes.

use std::ops::{Deref, DerefMut};

use parley_domain::Scope;
use parley_domain::idempotency::IdempotencyKey;
use parley_store::Tx;
use parley_store::repo::idempotency::{self as repo, Claim};

use crate::signals::Signal;
use crate::{ServiceError, ServiceResult, Services};

/// A transaction and its after-commit effects.
pub struct Work {
    tx: Tx,
    signals: Vec<Signal>,
    steps: Steps,
}

/// Something an area leaves for after a unit of work commits.
pub trait AfterCommit: Send {
    /// The work committed: do it.
    fn committed(self: Box<Self>, svc: &Services);
    /// The work was dropped or its commit failed: undo what cannot stay
    /// unaccounted for.
    fn abandoned(self: Box<Self>) {}
}

/// The registered steps, in order; abandoned unless taken by a commit.
#[derive(Default)]
struct Steps(Vec<Box<dyn AfterCommit>>);

impl Deref for Work {
    type Target = Tx;
    fn deref(&self) -> &Tx {
        &self.tx
    }
}

impl DerefMut for Work {
    fn deref_mut(&mut self) -> &mut Tx {
        &mut self.tx
    }
}

impl parley_store::AsHandle for Work {
    fn handle(&mut self) -> parley_store::Handle<'_> {
        self.tx.handle()
    }

    fn is_postgres(&mut self) -> bool {
        self.tx.is_postgres()
    }

    fn defer_bump(&mut self, scope: Scope, resource: &str) -> bool {
        self.tx.defer_bump(scope, resource)
    }

    fn subscriber_memo(&mut self) -> Option<&mut parley_store::SubscriberMemo> {
        self.tx.subscriber_memo()
    }

    fn queued_job(&mut self, kind: &str) {
        self.tx.queued_job(kind);
    }

    fn job_taker(&mut self, kind: &str) -> Option<parley_store::Taker> {
        self.tx.job_taker(kind)
    }

    fn hand_over(&mut self, taker: parley_store::Taker, job: parley_store::repo::jobs::JobRow) {
        self.tx.hand_over(taker, job);
    }

    fn defer_event(&mut self, scope: Scope, event: parley_domain::event::Event) -> Option<parley_domain::event::Event> {
        self.tx.defer_event(scope, event)
    }

    fn events_written(&mut self, scope: Scope, ids: &[String]) {
        self.tx.events_written(scope, ids);
    }
}

impl Work {
    /// After commit, tells every instance's live views that conversation `id` changed.
    pub fn conversation_changed(&mut self, id: i64) {
        self.signal(Signal::ConversationChanged { conversation_id: id });
    }

    /// After commit, sends `signal` to every instance.
    pub fn signal(&mut self, signal: Signal) {
        if !self.signals.contains(&signal) {
            self.signals.push(signal);
        }
    }

    /// After commit, runs `step` (in the order registered).
    pub fn after_commit(&mut self, step: impl AfterCommit + 'static) {
        self.steps.0.push(Box::new(step));
    }
}

impl Drop for Steps {
    fn drop(&mut self) {
        for step in self.0.drain(..) {
            step.abandoned();
        }
    }
}

/// A request's idempotency key and the fingerprint of what it asked for
/// (the same key with another fingerprint is refused).
#[derive(Debug, Clone)]
pub struct Idempotent {
    pub key: IdempotencyKey,
    pub fingerprint: String,
}

/// What an operation answers, kept as it is for replays: a status in HTTP
/// terms (201, 202, or 502 for a call its provider failed to place) and
/// the JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

impl Answer {
    pub fn json<T: serde::Serialize>(status: u16, value: &T) -> ServiceResult<Answer> {
        let body = serde_json::to_string(value).map_err(|e| ServiceError::internal(e, "serialising an answer"))?;
        Ok(Answer { status, body })
    }
}

/// An [`Answer`], and whether it is the replay of an earlier request's.
#[derive(Debug)]
pub struct Answered {
    pub answer: Answer,
    pub replayed: bool,
}

/// What claiming an idempotency key found.
pub enum Claimed {
    /// Run the operation, holding the key if one was sent.
    Run(Option<KeyHold>),
    /// The key's request already finished: its stored answer.
    Replay(Answered),
}

/// An idempotency key this request holds: the operation stores its answer
/// with [`KeyHold::complete`] in its last transaction.
pub struct KeyHold {
    scope: Scope,
    key: IdempotencyKey,
}

impl KeyHold {
    /// Stores `answer` for replays, in the same transaction as the change.
    pub async fn complete(&self, tx: &mut Tx, answer: &Answer) -> ServiceResult<()> {
        repo::complete(tx, self.scope, self.key.as_str(), answer.status, &answer.body).await?;
        Ok(())
    }
}

impl Work {
    /// Begins a unit of work on `db` before there are [`Services`] (the
    /// first start's bootstrap, the CLI making a user, the signing keys):
    /// commit it with [`Work::commit_before_services`].
    pub(crate) async fn begin_on(db: &parley_store::Db) -> ServiceResult<Work> {
        Ok(Work { tx: db.begin().await?, signals: Vec::new(), steps: Steps::default() })
    }

    /// Commits work begun by [`Work::begin_on`]. It may not have left
    /// anything for after the commit: nothing could carry it out.
    pub(crate) async fn commit_before_services(self) -> ServiceResult<()> {
        let Work { tx, signals, steps } = self;
        if !signals.is_empty() || !steps.0.is_empty() {
            return Err(ServiceError::invariant("work begun before services left something for after its commit"));
        }
        tx.commit().await?;
        Ok(())
    }
}

impl Services {
    /// Begins a unit of work.
    pub async fn begin(&self) -> ServiceResult<Work> {
        Work::begin_on(&self.db).await
    }

    /// Commits `work`, then carries out what it left for after the commit.
    pub async fn commit(&self, work: Work) -> ServiceResult<()> {
        let Work { tx, signals, mut steps } = work;
        // On failure, dropping `steps` abandons them.
        // Wakes the workers of the jobs it queued.
        tx.commit().await?;
        for signal in signals {
            self.signal(signal);
        }
        for step in steps.0.drain(..) {
            step.committed(self);
        }
        Ok(())
    }

    /// Runs `op` in one unit of work and commits it.
    pub async fn transaction<T>(&self, op: impl AsyncFnOnce(&mut Work) -> ServiceResult<T>) -> ServiceResult<T> {
        let mut work = self.begin().await?;
        let value = op(&mut work).await?;
        self.commit(work).await?;
        Ok(value)
    }

    /// Runs `op` in one unit of work, answering what it answers.
    ///
    /// With an idempotency key, the key is claimed first (a concurrent twin
    /// gets [`ServiceError::KeyInUse`]), the answer is stored in the same
    /// transaction as the change, and a later request with the same key and
    /// fingerprint gets that answer replayed. A failed write stores nothing,
    /// so a retry runs again; the same key with another fingerprint is a
    /// conflict.
    pub async fn write(
        &self,
        scope: Scope,
        idem: Option<Idempotent>,
        op: impl AsyncFnOnce(&mut Work) -> ServiceResult<Answer>,
    ) -> ServiceResult<Answered> {
        self.idempotent(scope, idem, async move |hold| {
            let mut work = self.begin().await?;
            let answer = op(&mut work).await?;
            if let Some(hold) = &hold {
                hold.complete(&mut work, &answer).await?;
            }
            self.commit(work).await?;
            Ok(answer)
        })
        .await
    }

    /// The idempotency protocol around an operation that runs its own
    /// units of work: `op` gets the key it holds (if one was sent) and must
    /// [`KeyHold::complete`] it in its last transaction. If `op` fails, the
    /// key is released so that a retry runs again. (An operation may
    /// instead claim the key in its own first transaction with
    /// [`Services::claim_key`], saving one.)
    pub async fn idempotent(
        &self,
        scope: Scope,
        idem: Option<Idempotent>,
        op: impl AsyncFnOnce(Option<KeyHold>) -> ServiceResult<Answer>,
    ) -> ServiceResult<Answered> {
        let claimed = self.transaction(async |work| self.claim_key(work, scope, idem.as_ref()).await).await?;
        let hold = match claimed {
            Claimed::Replay(answered) => return Ok(answered),
            Claimed::Run(hold) => hold,
        };
        let key = hold.as_ref().map(|h| h.key.clone());
        match op(hold).await {
            Ok(answer) => Ok(Answered { answer, replayed: false }),
            Err(e) => {
                if let Some(key) = key {
                    self.release_key(&KeyHold { scope, key }).await;
                }
                Err(e)
            }
        }
    }

    /// Claims the idempotency key (if one was sent) in `tx`: a replay of a
    /// finished request answers its stored response; a different request
    /// under the key is a 409, as is one still running. Rolling `tx` back
    /// gives the key up.
    pub async fn claim_key(&self, tx: &mut Tx, scope: Scope, idem: Option<&Idempotent>) -> ServiceResult<Claimed> {
        let Some(idem) = idem else { return Ok(Claimed::Run(None)) };
        match repo::claim(tx, scope, idem.key.as_str(), &idem.fingerprint, self.config.idempotency_lease_s).await? {
            Claim::Acquired => Ok(Claimed::Run(Some(KeyHold { scope, key: idem.key.clone() }))),
            Claim::Replay { status, body } => {
                Ok(Claimed::Replay(Answered { answer: Answer { status, body }, replayed: true }))
            }
            Claim::FingerprintMismatch => Err(ServiceError::Conflict(
                "This Idempotency-Key was already used with a different request; use a new key".into(),
            )),
            Claim::InProgress => Err(ServiceError::KeyInUse),
        }
    }

    /// Gives up a committed claim after the operation failed, so a retry
    /// runs again (if this fails, the claim's lease expires on its own).
    pub async fn release_key(&self, hold: &KeyHold) {
        let released =
            self.transaction(async |work| Ok(repo::release(work, hold.scope, hold.key.as_str()).await?)).await;
        if let Err(e) = released {
            tracing::warn!(error = %e, "could not release an idempotency key");
        }
    }
}
