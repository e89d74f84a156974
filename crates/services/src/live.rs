//! The live stream of a scope's changes (`GET /api/v1/stream`): the event
//! log as it is written, sent to every connected client on every instance.
//!
//! Each instance keeps one hub per scope that has clients. A hub hears of
//! new events from the signals (their ids, from whichever instance
//! committed them: see `parley_store::EventBell`), reads each once and
//! broadcasts it, already serialised, to its clients. It also sweeps the
//! last seconds of the log now and then, and at once when signals may have
//! been missed, so a lost signal delays an event but never loses it.
//!
//! A client that reconnects names the last event it saw (`Last-Event-ID`)
//! and is sent what followed, from the log, within a bounded window
//! ([`REPLAY_WINDOW`], [`REPLAY_MAX`]); beyond it, it is told to reload.
//! Events commit in a different order than their ids sort, so the replay
//! starts a little before the named event ([`REPLAY_OVERLAP`]): a client
//! may be sent an event twice across a reconnect, never miss one (the id
//! says which it has).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use parley_domain::event::{Event, EventType};
use parley_domain::user::Role;
use parley_domain::validation::{FieldError, QueryReader, loc};
use parley_domain::{Scope, Timestamp};
use parley_store::repo::events;
use tokio::sync::{broadcast, mpsc};

use crate::signals::Signal;
use crate::tenancy::auth::Principal;
use crate::{ServiceError, ServiceResult, Services};

/// How far back a reconnecting client may resume.
pub const REPLAY_WINDOW: Duration = Duration::from_secs(3600);
/// A replay reads at most this many events (counted from
/// [`REPLAY_OVERLAP`] before the last one seen); more means "reload".
pub const REPLAY_MAX: i64 = 1000;
/// A replay starts this long before the last event seen, for events that
/// committed after it but were stamped before it (a transaction stamps its
/// events as it commits: the gap is its last statements, but an import
/// writes its events as it goes).
pub const REPLAY_OVERLAP: Duration = Duration::from_secs(10);
/// How often a hub reads the log's recent ids, in case a signal was lost.
const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// How far back a sweep looks (longer than any write transaction lasts).
const SWEEP_WINDOW: Duration = Duration::from_secs(30);
/// How far before its start a new hub's sweeps look (its first clients
/// joined then).
const HUB_START_MARGIN: Duration = Duration::from_secs(2);
/// How long a hub remembers what it sent (longer than a sweep looks back).
const SEEN_FOR: Duration = Duration::from_secs(90);
/// Events a slow client may fall behind by before it is caught up from the log.
const CLIENT_BUFFER: usize = 1024;

/// What the stream sends: an event of the log (with its id, resumable), or
/// a passing fact about who is viewing or typing (no id: never replayed).
#[derive(Debug)]
pub enum LiveEvent {
    Logged {
        id: String,
        kind: EventType,
        /// The event as `GET /api/v1/events/{id}` shows it.
        json: String,
    },
    /// A member's presence (`event: presence`).
    Presence { json: String },
}

impl LiveEvent {
    fn of(event: &Event) -> LiveEvent {
        LiveEvent::Logged {
            id: event.id.clone(),
            kind: event.kind,
            json: serde_json::to_string(event).expect("events serialise"),
        }
    }
}

/// Which events a client is sent: those its caller may see, of the types it asked for.
#[derive(Debug, Clone)]
pub struct StreamFilter {
    /// Event types (`message.received`) and families (`message.*`); none: all.
    patterns: Vec<String>,
    /// Members do not see what only owners and admins manage.
    member: bool,
}

impl StreamFilter {
    /// The filter for `caller` and the `types` it asked for (already valid:
    /// see [`valid_pattern`]).
    pub fn new(caller: &Principal, patterns: Vec<String>) -> StreamFilter {
        StreamFilter { patterns, member: caller.role() == Some(Role::Member) }
    }

    /// The same filter for the caller as it is now (a role may have changed).
    pub fn for_caller(&self, caller: &Principal) -> StreamFilter {
        StreamFilter::new(caller, self.patterns.clone())
    }

    /// Presence frames go to every client that did not narrow its types,
    /// and to those that named `presence`.
    pub fn admits_presence(&self) -> bool {
        self.patterns.is_empty() || self.patterns.iter().any(|p| p == PRESENCE || p == "*")
    }

    pub fn admits(&self, kind: EventType) -> bool {
        // Webhook endpoints are owners' and admins' (their test deliveries too).
        if self.member && kind == EventType::WebhookTest {
            return false;
        }
        let name = kind.as_str();
        self.patterns.is_empty()
            || self.patterns.iter().any(|p| match p.strip_suffix('*') {
                Some(family) => name.starts_with(family),
                None => p == name,
            })
    }
}

/// The type name of presence frames in `types`.
pub const PRESENCE: &str = "presence";

/// Whether `pattern` names an event type or a family of them (`call.*`,
/// `*`), or `presence`.
pub fn valid_pattern(pattern: &str) -> bool {
    if pattern == PRESENCE {
        return true;
    }
    match pattern.strip_suffix('*') {
        Some("") => true,
        Some(family) => family.ends_with('.') && EventType::ALL.iter().any(|t| t.starts_with(family)),
        None => EventType::ALL.contains(&pattern),
    }
}

/// At most this many types in a stream's `types`.
const MAX_TYPES: usize = 20;

/// The stream's `types` query parameter: comma-separated event types and
/// families (`message.*`), each checked; none given streams everything.
pub fn parse_types(q: &mut QueryReader) -> Vec<String> {
    let Some(raw) = q.string("types", 1, 1000) else { return Vec::new() };
    let types: Vec<String> = raw.split(',').map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()).collect();
    let at = || loc(&["query", "types"]);
    if types.is_empty() {
        q.push_error(FieldError::new(at(), "value_error.event_type", "name at least one event type or family"));
    } else if types.len() > MAX_TYPES {
        q.push_error(FieldError::list_too_long(at(), MAX_TYPES));
    }
    for t in types.iter().filter(|t| !valid_pattern(t)) {
        q.push_error(FieldError::new(
            at(),
            "value_error.event_type",
            format!("'{t}' is not an event type or family (such as message.received or message.*)"),
        ));
    }
    types
}

/// At most this many streams open at once per credential (an API key, a
/// user) on one instance.
pub const MAX_STREAMS_PER_CALLER: usize = 20;

/// This instance's hubs, one per scope with clients.
#[derive(Default)]
pub struct Hubs {
    hubs: Mutex<HashMap<Scope, Weak<Hub>>>,
    /// Streams open per credential.
    open: Arc<Mutex<HashMap<String, usize>>>,
    /// Set once the task handing signals to the hubs runs.
    dispatching: std::sync::OnceLock<()>,
}

struct Hub {
    sender: broadcast::Sender<Arc<LiveEvent>>,
    /// Event ids to read and send; an empty list asks for a sweep.
    wake: mpsc::Sender<Vec<String>>,
    /// Set when a wake-up did not fit: the next one sweeps.
    overflowed: std::sync::atomic::AtomicBool,
}

/// Wake-ups a hub holds while it reads (each a commit's ids); past this,
/// it sweeps instead.
const WAKE_BUFFER: usize = 1024;

impl Hub {
    fn wake(&self, ids: Vec<String>) {
        if self.wake.try_send(ids).is_err() {
            self.overflowed.store(true, std::sync::atomic::Ordering::Relaxed);
            // An empty list (a sweep) still fits, or one is queued already.
            let _ = self.wake.try_send(Vec::new());
        }
    }
}

/// A client's place in its scope's hub. Dropping it leaves (the hub stops
/// with its last client).
pub struct Subscription {
    _hub: Arc<Hub>,
    pub events: broadcast::Receiver<Arc<LiveEvent>>,
}

/// What a reconnecting client is sent first.
#[derive(Debug)]
pub enum Replay {
    /// The events after the one it saw (and a few before: see [`REPLAY_OVERLAP`]).
    Events(Vec<Event>),
    /// It cannot be caught up: it should reload what it shows.
    Reset(ResetReason),
}

/// Why a client must reload instead of resuming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetReason {
    /// The event it names is not in this scope's log (another mode or
    /// workspace, or purged).
    UnknownEvent,
    /// It names an event older than the replay window.
    TooOld,
    /// More events followed than a replay sends.
    TooMany,
}

impl ResetReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ResetReason::UnknownEvent => "unknown_event",
            ResetReason::TooOld => "too_old",
            ResetReason::TooMany => "too_many",
        }
    }
}

/// One open stream of a credential, counted until dropped.
pub struct StreamSlot {
    open: Arc<Mutex<HashMap<String, usize>>>,
    caller: String,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.caller) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.caller);
            }
        }
    }
}

impl Services {
    /// Counts a new stream of `caller` (a credential's name), or refuses it
    /// past [`MAX_STREAMS_PER_CALLER`] on this instance.
    pub fn open_stream(&self, caller: String) -> ServiceResult<StreamSlot> {
        let open = Arc::clone(&self.live.open);
        let mut counts = open.lock().unwrap_or_else(|p| p.into_inner());
        let n = counts.entry(caller.clone()).or_default();
        if *n >= MAX_STREAMS_PER_CALLER {
            return Err(ServiceError::TooManyRequests(format!(
                "This credential has {MAX_STREAMS_PER_CALLER} streams open already; close one first"
            )));
        }
        *n += 1;
        drop(counts);
        Ok(StreamSlot { open, caller })
    }

    /// Joins `scope`'s live stream. Join before replaying, so that nothing
    /// written in between is missed.
    pub fn watch(&self, scope: Scope) -> Subscription {
        let live = &self.live;
        live.dispatching.get_or_init(|| {
            tokio::spawn(dispatch(Arc::downgrade(live), self.signals.subscribe_events()));
        });
        let mut hubs = live.hubs.lock().unwrap_or_else(|p| p.into_inner());
        hubs.retain(|_, hub| hub.strong_count() > 0);
        if let Some(hub) = hubs.get(&scope).and_then(Weak::upgrade) {
            let events = hub.sender.subscribe();
            return Subscription { _hub: hub, events };
        }
        let (sender, events) = broadcast::channel(CLIENT_BUFFER);
        let (wake, woken) = mpsc::channel(WAKE_BUFFER);
        let hub = Arc::new(Hub { sender, wake, overflowed: Default::default() });
        hubs.insert(scope, Arc::downgrade(&hub));
        tokio::spawn(run_hub(self.clone(), scope, Arc::downgrade(&hub), woken));
        Subscription { _hub: hub, events }
    }

    /// The events that followed `last_event_id` in `scope`, for a client
    /// that reconnects.
    pub async fn replay(&self, scope: Scope, last_event_id: &str) -> ServiceResult<Replay> {
        let mut c = self.db.read().await?;
        let Some(last) = events::get(&mut c, scope, last_event_id).await? else {
            return Ok(Replay::Reset(ResetReason::UnknownEvent));
        };
        let now = Timestamp::now();
        if last.created_at < now.minus_duration(REPLAY_WINDOW) {
            return Ok(Replay::Reset(ResetReason::TooOld));
        }
        let from = last.created_at.minus_duration(REPLAY_OVERLAP);
        let mut found = events::since(&mut c, scope, from, REPLAY_MAX).await?;
        // A full page may have been cut short: more followed than a replay sends.
        if found.len() as i64 >= REPLAY_MAX {
            return Ok(Replay::Reset(ResetReason::TooMany));
        }
        found.retain(|e| e.id != last.id);
        Ok(Replay::Events(found))
    }
}

/// Hands the signals about events to the hubs of their scopes.
async fn dispatch(hubs: Weak<Hubs>, mut signals: broadcast::Receiver<Signal>) {
    loop {
        let signal = signals.recv().await;
        let Some(hubs) = hubs.upgrade() else { return };
        let live = hubs.hubs.lock().unwrap_or_else(|p| p.into_inner());
        match signal {
            Ok(Signal::EventsWritten { workspace_id, livemode, ids }) => {
                let scope = Scope::new(workspace_id, parley_domain::Mode::from_livemode(livemode));
                if let Some(hub) = live.get(&scope).and_then(Weak::upgrade) {
                    hub.wake(ids);
                }
            }
            Ok(Signal::Presence { workspace_id, livemode, frame }) => {
                let scope = Scope::new(workspace_id, parley_domain::Mode::from_livemode(livemode));
                if let Some(hub) = live.get(&scope).and_then(Weak::upgrade) {
                    let _ = hub.sender.send(Arc::new(LiveEvent::Presence { json: frame }));
                }
            }
            // Signals were lost here: every hub sweeps.
            Ok(Signal::Missed) | Err(broadcast::error::RecvError::Lagged(_)) => {
                for hub in live.values().filter_map(Weak::upgrade) {
                    hub.wake(Vec::new());
                }
            }
            Ok(_) => {}
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Reads the events a hub is woken for (or finds by sweeping) and sends
/// each to its clients once, until its last client leaves.
async fn run_hub(svc: Services, scope: Scope, hub: Weak<Hub>, mut woken: mpsc::Receiver<Vec<String>>) {
    // What committed before the hub started is not news to its clients (a
    // reconnecting one is replayed it): sweeps look no further back.
    let started = Timestamp::now().minus_duration(HUB_START_MARGIN);
    let mut seen = Seen::default();
    let mut sweep = tokio::time::interval(SWEEP_EVERY);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    sweep.tick().await;
    loop {
        let mut ids = tokio::select! {
            ids = woken.recv() => match ids { Some(ids) => ids, None => return },
            _ = sweep.tick() => Vec::new(),
        };
        let Some(hub) = hub.upgrade() else { return };
        // Everything waiting, in one read.
        let mut must_sweep = ids.is_empty() || hub.overflowed.swap(false, std::sync::atomic::Ordering::Relaxed);
        while let Ok(more) = woken.try_recv() {
            must_sweep |= more.is_empty();
            ids.extend(more);
        }
        let sender = hub.sender.clone();
        drop(hub);
        let since = Timestamp::now().minus_duration(SWEEP_WINDOW).max(started);
        if let Err(e) = deliver(&svc, scope, &mut seen, &sender, ids, must_sweep.then_some(since)).await {
            // The next wake-up or sweep tries again.
            tracing::warn!(error = %e, "the live stream could not read new events");
        }
    }
}

async fn deliver(
    svc: &Services,
    scope: Scope,
    seen: &mut Seen,
    sender: &broadcast::Sender<Arc<LiveEvent>>,
    mut ids: Vec<String>,
    sweep_since: Option<Timestamp>,
) -> ServiceResult<()> {
    let mut c = svc.db.read().await?;
    if let Some(since) = sweep_since {
        ids.extend(events::ids_since(&mut c, scope, since, 10 * REPLAY_MAX).await?);
    }
    seen.forget_old();
    ids.retain(|id| !seen.contains(id));
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return Ok(());
    }
    for event in events::by_ids(&mut c, scope, &ids).await? {
        seen.insert(event.id.clone());
        // No client now is not an error: the last one just left.
        let _ = sender.send(Arc::new(LiveEvent::of(&event)));
    }
    Ok(())
}

/// The event ids a hub sent recently, so that a sweep sends none twice.
#[derive(Default)]
struct Seen {
    ids: HashSet<String>,
    order: VecDeque<(Instant, String)>,
}

impl Seen {
    fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    fn insert(&mut self, id: String) {
        if self.ids.insert(id.clone()) {
            self.order.push_back((Instant::now(), id));
        }
    }

    fn forget_old(&mut self) {
        while let Some((at, _)) = self.order.front() {
            if at.elapsed() < SEEN_FOR {
                break;
            }
            let (_, id) = self.order.pop_front().expect("looked at");
            self.ids.remove(&id);
        }
    }
}
