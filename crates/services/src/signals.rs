//! Signals between instances: changes that live views (webchat sockets) and
//! running work (calls) must hear about at once, whichever instance made
//! them. Each signal goes to this instance's subscribers directly and, on
//! PostgreSQL, to the other instances through NOTIFY; `relay` hands the
//! others' signals to this instance's subscribers.

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::Services;

/// The NOTIFY channel.
const CHANNEL: &str = "parley_signals";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Signal {
    /// A conversation changed (after commit): new messages, statuses, reads.
    ConversationChanged { conversation_id: i64 },
    /// End this call, if this instance runs it.
    HangUp { call_id: String },
    /// A committed transaction wrote these events in the scope (oldest
    /// first); none listed means too many to name: look for them.
    EventsWritten { workspace_id: i64, livemode: bool, ids: Vec<String> },
    /// Signals may have been missed here (the relay reconnected): live
    /// views catch up from the database.
    Missed,
    /// A member's presence for the scope's live streams (the frame's JSON).
    Presence { workspace_id: i64, livemode: bool, frame: String },
}

/// At most this many event ids in one signal (a NOTIFY payload is at most
/// 8,000 bytes); a larger transaction sends none and the streams look.
const MAX_IDS: usize = 100;

#[derive(Serialize, Deserialize)]
struct Envelope {
    /// The instance that sent it (it already told its own subscribers).
    from: String,
    #[serde(flatten)]
    signal: Signal,
}

/// Signals waiting for `relay` to send them to the other instances; past
/// this many, new ones are dropped (they are best effort).
const OUTBOX: usize = 4096;

/// This instance's side of the signals.
pub struct Signals {
    instance: String,
    /// Only PostgreSQL has other instances to tell.
    shared: bool,
    local: broadcast::Sender<Signal>,
    /// The live stream's signals (`EventsWritten`, and `Missed`), apart
    /// from the rest: one per committed write, they must not crowd out a
    /// hang-up.
    events: broadcast::Sender<Signal>,
    /// Payloads for NOTIFY, sent one after another by `relay` (one
    /// connection, however many signals a burst of traffic raises).
    outbox: tokio::sync::mpsc::Sender<String>,
    outbox_rx: std::sync::Mutex<Option<tokio::sync::mpsc::Receiver<String>>>,
    /// Signals were dropped with the outbox full: the other instances are
    /// told `Missed` (their live views catch up) once there is room.
    overflowed: std::sync::atomic::AtomicBool,
}

impl Signals {
    pub(crate) fn new(backend: parley_store::Backend) -> Self {
        let (outbox, outbox_rx) = tokio::sync::mpsc::channel(OUTBOX);
        Self {
            instance: ulid::Ulid::new().to_string(),
            shared: backend == parley_store::Backend::Postgres,
            local: broadcast::channel(1024).0,
            events: broadcast::channel(8192).0,
            outbox,
            outbox_rx: std::sync::Mutex::new(Some(outbox_rx)),
            overflowed: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl Signals {
    /// Signals from every instance, this one included (all but the live
    /// stream's: see [`Signals::subscribe_events`]).
    pub fn subscribe(&self) -> broadcast::Receiver<Signal> {
        self.local.subscribe()
    }

    /// The live stream's signals from every instance: `EventsWritten`, and
    /// `Missed` when some may have been lost.
    pub fn subscribe_events(&self) -> broadcast::Receiver<Signal> {
        self.events.subscribe()
    }

    /// Hands a signal to this instance's subscribers of its kind.
    fn deliver_here(&self, signal: Signal) {
        // No receiver is not an error: nobody here is watching.
        match signal {
            Signal::EventsWritten { .. } | Signal::Presence { .. } => {
                let _ = self.events.send(signal);
            }
            Signal::Missed => {
                let _ = self.events.send(Signal::Missed);
                let _ = self.local.send(Signal::Missed);
            }
            _ => {
                let _ = self.local.send(signal);
            }
        }
    }

    /// Sends `signal` to every instance (after the change it announces has
    /// been committed). When signals come faster than they can be sent, the
    /// live views' are dropped and the other instances are then told
    /// `Missed` (they catch up from the database); a hang-up always waits
    /// for its turn.
    pub fn send(&self, signal: Signal) {
        use std::sync::atomic::Ordering;
        self.deliver_here(signal.clone());
        if !self.shared {
            return;
        }
        let hang_up = matches!(signal, Signal::HangUp { .. });
        let payload =
            serde_json::to_string(&Envelope { from: self.instance.clone(), signal }).expect("signals serialise");
        match self.outbox.try_send(payload) {
            Ok(()) => {}
            Err(tokio::sync::mpsc::error::TrySendError::Full(payload)) if hang_up => {
                let outbox = self.outbox.clone();
                tokio::spawn(async move {
                    let _ = outbox.send(payload).await;
                });
            }
            Err(_) => {
                if !self.overflowed.swap(true, Ordering::AcqRel) {
                    tracing::warn!(
                        "signals to the other instances come faster than they can be sent; \
                         their live views will catch up from the database"
                    );
                }
            }
        }
    }

    /// After an overflow: the `Missed` to send the other instances, once.
    fn missed_after_overflow(&self) -> Option<String> {
        self.overflowed.swap(false, std::sync::atomic::Ordering::AcqRel).then(|| {
            serde_json::to_string(&Envelope { from: self.instance.clone(), signal: Signal::Missed })
                .expect("signals serialise")
        })
    }

    /// Announces the events a committed transaction wrote, one signal per scope.
    pub(crate) fn events_written(&self, written: &parley_store::Written) {
        let mut by_scope: Vec<(parley_domain::Scope, Vec<String>)> = Vec::new();
        for (scope, id) in written {
            match by_scope.iter_mut().find(|(s, _)| s == scope) {
                Some((_, ids)) => ids.push(id.clone()),
                None => by_scope.push((*scope, vec![id.clone()])),
            }
        }
        for (scope, mut ids) in by_scope {
            if ids.len() > MAX_IDS {
                ids.clear();
            }
            self.send(Signal::EventsWritten { workspace_id: scope.workspace_id, livemode: scope.livemode(), ids });
        }
    }
}

impl Services {
    /// Sends `signal` to every instance (see [`Signals::send`]).
    pub fn signal(&self, signal: Signal) {
        self.signals.send(signal);
    }

    /// Tells every instance's live views that conversation `id` changed (call after commit).
    pub fn conversation_changed(&self, id: i64) {
        self.signal(Signal::ConversationChanged { conversation_id: id });
    }
}

/// Sends this instance's signals to the others and hands theirs to this
/// instance's subscribers, until `stop` turns true. Nothing to do on SQLite.
pub async fn relay(svc: Services, stop: tokio::sync::watch::Receiver<bool>) {
    let Some(outbox) = svc.signals.outbox_rx.lock().unwrap_or_else(|p| p.into_inner()).take() else {
        tracing::error!("the signal relay runs once per instance");
        return;
    };
    if svc.db.backend() != parley_store::Backend::Postgres {
        return;
    }
    tokio::join!(send(svc.clone(), outbox, stop.clone()), receive(svc, stop));
}

/// A NOTIFY payload must stay under 8,000 bytes: signals waiting together
/// are sent as one JSON array up to this size.
const BATCH_BYTES: usize = 7000;

/// At most one NOTIFY per this long from an instance: under load the
/// signals of this window go together. A NOTIFY is a statement, commits
/// under a lock every notifying transaction of the cluster shares, and
/// wakes every listening instance; sent one per commit they were two
/// statements an agent reply. The first signal after a quiet spell goes at once.
const NOTIFY_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// Sends queued signals with NOTIFY: those waiting together in one (a
/// burst of commits makes a few notifications, not one each).
async fn send(
    svc: Services,
    mut outbox: tokio::sync::mpsc::Receiver<String>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut carried: Option<String> = None;
    let mut sent_at: Option<tokio::time::Instant> = None;
    loop {
        let first = match carried.take() {
            Some(p) => p,
            None => tokio::select! {
                p = outbox.recv() => match p { Some(p) => p, None => return },
                _ = stop.wait_for(|s| *s) => return,
            },
        };
        if let Some(at) = sent_at {
            tokio::time::sleep_until(at + NOTIFY_EVERY).await;
        }
        let mut batch = format!("[{first}");
        if let Some(missed) = svc.signals.missed_after_overflow() {
            batch.push(',');
            batch.push_str(&missed);
        }
        while let Ok(next) = outbox.try_recv() {
            if batch.len() + next.len() + 2 > BATCH_BYTES {
                carried = Some(next);
                break;
            }
            batch.push(',');
            batch.push_str(&next);
        }
        batch.push(']');
        // A full batch leaves more waiting: the next goes at once.
        sent_at = carried.is_none().then(tokio::time::Instant::now);
        if let Err(e) = parley_store::notify::notify(&svc.db, CHANNEL, &batch).await {
            if svc.db.is_closed() {
                return;
            }
            tracing::warn!(error = %e, "could not signal the other instances");
        }
    }
}

/// Hands the other instances' signals to this instance's subscribers.
async fn receive(svc: Services, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut listener = loop {
        match parley_store::notify::listen(&svc.db, CHANNEL).await {
            Ok(Some(listener)) => {
                // Whatever was sent before this listener started is caught up on.
                svc.signals.deliver_here(Signal::Missed);
                break listener;
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "could not listen for other instances' signals; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => continue,
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
        }
    };
    loop {
        let payload = tokio::select! {
            p = listener.recv() => p,
            _ = stop.wait_for(|s| *s) => return,
        };
        match payload {
            Ok(None) => {
                tracing::warn!("the signal listener lost its connection; reconnecting");
                svc.signals.deliver_here(Signal::Missed);
            }
            // An array (a batch); a lone object from an older instance.
            Ok(Some(payload)) => match serde_json::from_str::<Vec<Envelope>>(&payload)
                .or_else(|_| serde_json::from_str::<Envelope>(&payload).map(|e| vec![e]))
            {
                Ok(envelopes) => {
                    for envelope in envelopes.into_iter().filter(|e| e.from != svc.signals.instance) {
                        svc.signals.deliver_here(envelope.signal);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "an unreadable signal was ignored"),
            },
            // The listener holds a pool connection: give it back when the
            // pool closes, or closing would wait for it forever.
            Err(_) if svc.db.is_closed() => return,
            Err(e) => {
                tracing::warn!(error = %e, "listening for signals failed; reconnecting");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                svc.signals.deliver_here(Signal::Missed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(rx: &mut tokio::sync::mpsc::Receiver<String>) -> Vec<Signal> {
        let mut out = Vec::new();
        while let Ok(p) = rx.try_recv() {
            out.push(serde_json::from_str::<Envelope>(&p).unwrap().signal);
        }
        out
    }

    #[tokio::test]
    async fn a_full_outbox_drops_live_view_signals_for_one_missed_but_keeps_hang_ups() {
        let signals = Signals::new(parley_store::Backend::Postgres);
        let mut rx = signals.outbox_rx.lock().unwrap().take().unwrap();
        for id in 0..OUTBOX as i64 + 10 {
            signals.send(Signal::ConversationChanged { conversation_id: id });
        }
        signals.send(Signal::HangUp { call_id: "call_1".into() });
        // The other instances get the first OUTBOX signals, then one Missed (once).
        let first = sent(&mut rx);
        assert_eq!(first.len(), OUTBOX);
        let missed = signals.missed_after_overflow().expect("an overflow is reported");
        assert!(matches!(serde_json::from_str::<Envelope>(&missed).unwrap().signal, Signal::Missed));
        assert!(signals.missed_after_overflow().is_none(), "once per overflow");
        // The hang-up waited for room rather than being dropped.
        tokio::task::yield_now().await;
        let later = tokio::time::timeout(std::time::Duration::from_secs(1), rx.recv()).await.unwrap().unwrap();
        assert!(
            matches!(serde_json::from_str::<Envelope>(&later).unwrap().signal, Signal::HangUp { call_id } if call_id == "call_1")
        );
    }
}
