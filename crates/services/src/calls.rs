//! Voice calls: placing them, following them to their end, and what they
//! leave behind (transcript, recording, charge, events).
//!
//! [`place`] checks voice, funds (one minute held) and the concurrency
//! limit, links the contact and a conversation of its own and stores the
//! call `queued`; then, with no transaction open, it dials. A provider
//! failure stores the call `failed` (`dial_failed`, nothing charged) and
//! answers 502. Once the placed call is recorded, [`start`] runs the call
//! engine in a task of this instance (the owner), which writes each state change, transcript
//! segment (also a message in the call's conversation) and, at the end, the
//! recording, the per-second charge and the events. The owner renews the
//! call's `last_seen_at`; a call whose owner vanished (a crash) is ended as
//! `failed`/`error` by any instance (its [`WATCH`] job), charged for the time it ran.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use std::time::Duration;

use parley_domain::Scope;
use parley_domain::Timestamp;
use parley_domain::agent::{EngineKind, FirstMessageMode, TurnDetection};
use parley_domain::call::{
    AnsweredBy, CallDirection, CallStatus, CallTransport, EndedReason, Speaker, TranscriptSegment, TurnLatency,
    WebCallJoin,
};
use parley_domain::contact::Identity;
use parley_domain::conversation::{Author, AuthorType, ConversationKind, ConversationStatus, Direction, MessageStatus};
use parley_domain::event::EventType;
use parley_domain::validation::{
    FieldError, LocPart, Page, Parsed, QueryReader, boolean, enum_value, integer, json_object, loc, parse_object,
    string,
};
use parley_store::Tx;
use parley_store::repo::calls::{self as repo, CallRow, Ending, NewCall};
use parley_store::repo::conversations::{self as conversation_repo, NewConversation, NewMessage};
use parley_store::repo::events;
use parley_voice::engine::{self, Outcome, Progress};
use parley_voice::live::Greeting;
use parley_voice::provider::{Dial, Placed, Provider};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;
use utoipa::ToSchema;

use crate::crm::contacts;
use crate::signals::Signal;
use crate::unit::{Answer, Answered, Claimed, Idempotent, Work};
use crate::{ServiceError, ServiceResult, Services, billing, event_data};

/// The filters lists take.
pub use parley_store::repo::calls::CallFilter;

#[derive(Debug, Clone)]
pub struct CallsConfig {
    /// Calls not yet ended, per workspace and mode.
    pub max_concurrent_calls: i64,
    /// How long an outbound call rings before `no_answer`.
    pub ring_timeout: Duration,
    /// A call whose owner has not renewed it for this long is ended as failed.
    pub lease: Duration,
    /// How long calls in progress when the server stops may go on; the
    /// rest are then hung up (`shutdown`).
    pub shutdown_grace: Duration,
    /// Answering-machine detection's thresholds (`[voice.machine_detection]`).
    pub machine_detection: parley_speech::machine::MachineSettings,
}

impl Default for CallsConfig {
    fn default() -> Self {
        Self {
            max_concurrent_calls: 10,
            ring_timeout: Duration::from_secs(30),
            lease: Duration::from_secs(30),
            shutdown_grace: Duration::from_secs(60),
            machine_detection: Default::default(),
        }
    }
}

/// What a call's agent is, fixed when the call is placed.
#[derive(Clone)]
pub struct CallAgent {
    pub agent: parley_domain::agent::Agent,
    /// The rendered system prompt (the call's variables included).
    pub system: String,
    /// The greeting: the call's, else the agent's, else a default.
    pub first_message: Option<String>,
    /// The call (`call_…`), its conversation and contact.
    pub call_id: String,
    pub conversation_id: Option<i64>,
    pub contact_id: Option<i64>,
    /// The call can be handed to another number (not a browser's web call).
    pub transferable: bool,
}

/// This instance's live calls and the providers it dials with.
pub struct CallRuntime {
    /// Used for test-mode calls always, and for live calls with
    /// `telephony.provider = "simulated"`.
    simulated: Arc<dyn Provider>,
    live: Arc<dyn Provider>,
    /// Names this instance as the owner of the calls it runs; new at every start.
    pub instance: String,
    hangups: Mutex<HashMap<String, oneshot::Sender<EndedReason>>>,
    /// The tasks running this instance's calls, until each is recorded.
    running: tokio_util::task::TaskTracker,
    /// The Twilio provider, when it carries live calls: its webhooks and
    /// media streams arrive through the API.
    twilio: Option<Arc<parley_voice::twilio::TwilioProvider>>,
    /// Browsers' calls, in both modes: their sockets arrive through the API.
    web_calls: Arc<parley_voice::webcall::WebCalls>,
    web: Arc<dyn Provider>,
}

impl CallRuntime {
    pub fn new(simulated: Arc<dyn Provider>, live: Arc<dyn Provider>) -> Self {
        let web_calls = parley_voice::webcall::WebCalls::new();
        Self {
            simulated,
            live,
            instance: format!("calls-{}", ulid::Ulid::new()),
            hangups: Mutex::default(),
            running: tokio_util::task::TaskTracker::new(),
            twilio: None,
            web_calls: web_calls.clone(),
            web: Arc::new(parley_voice::webcall::Web(web_calls)),
        }
    }

    /// Live calls through Twilio.
    pub fn with_twilio(simulated: Arc<dyn Provider>, twilio: Arc<parley_voice::twilio::TwilioProvider>) -> Self {
        let live: Arc<dyn Provider> = Arc::new(parley_voice::twilio::Twilio(twilio.clone()));
        Self { twilio: Some(twilio), ..Self::new(simulated, live) }
    }

    fn provider(&self, scope: Scope) -> &Arc<dyn Provider> {
        if scope.livemode() { &self.live } else { &self.simulated }
    }

    fn hangups(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<EndedReason>>> {
        self.hangups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Calls this instance runs now.
    pub fn active(&self) -> usize {
        self.hangups().len()
    }
}

impl Default for CallRuntime {
    fn default() -> Self {
        let simulated: Arc<dyn Provider> = Arc::new(parley_voice::simulated::Simulated::default());
        Self::new(simulated.clone(), simulated)
    }
}

/// `POST /api/v1/calls`.
#[derive(Debug, Clone, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"agent_id": 1, "to": "+14155550100", "first_message": "Hi, this is Ava.", "max_duration_s": 300, "metadata": {"order": "A-1"}}))]
pub struct CreateCall {
    /// The agent that talks (of this workspace and mode).
    #[schema(minimum = 1)]
    pub agent_id: i64,
    /// `phone` (default) or `web`: a browser joins with the answer's
    /// `web.token`; then no `to` or `from`.
    #[schema(nullable = false)]
    pub transport: Option<CallTransport>,
    /// Required for `phone` calls: E.164 (or national in the default
    /// region) or a `sip:` URI; up to 255 characters.
    #[schema(nullable = false, format = "phone-or-sip", min_length = 1, max_length = 255)]
    pub to: Option<String>,
    /// The caller id, in the same forms as `to`. Default: the provider's.
    #[schema(nullable = false, format = "phone-or-sip", min_length = 1, max_length = 255)]
    pub from: Option<String>,
    /// The contact called; found or created from `to` when absent.
    #[schema(nullable = false, minimum = 1)]
    pub contact_id: Option<i64>,
    /// What the agent says first, 1–2,000 characters (default: the agent's `first_message`).
    #[schema(nullable = false, min_length = 1, max_length = 2000)]
    pub first_message: Option<String>,
    /// Values for the agent's prompt variables: a JSON object of at most 16 KiB.
    #[schema(value_type = Option<Object>, nullable = false)]
    pub variables: Option<Map<String, Value>>,
    /// 10–7200 seconds (default 600).
    #[schema(nullable = false, minimum = 10, maximum = 7200)]
    pub max_duration_s: Option<i64>,
    /// Record the call (default true).
    #[schema(nullable = false)]
    pub record: Option<bool>,
    /// Your own data, a JSON object of at most 16 KiB, returned with the call.
    #[schema(value_type = Option<Object>, nullable = false)]
    pub metadata: Option<Map<String, Value>>,
    /// Voicemail detection (default: the agent's); null for none. Phone
    /// calls only: a web call's browser is always a person.
    #[schema(value_type = Option<parley_domain::agent::Voicemail>, nullable)]
    pub voicemail: Option<Option<parley_domain::agent::Voicemail>>,
}

fn address(region: parley_domain::contact::Region) -> impl Fn(Value, &[LocPart]) -> Parsed<String> {
    move |v, at| {
        let raw = string(1, 255)(v, at)?;
        if raw.trim().to_ascii_lowercase().starts_with("sip:") {
            let uri = raw.trim();
            return if uri.len() > 4 && !uri.chars().any(char::is_whitespace) {
                Ok(uri.to_owned())
            } else {
                Err(vec![FieldError::new(at.to_vec(), "value_error.sip_uri", "a SIP URI such as sip:ana@example.com")])
            };
        }
        parley_domain::contact::Phone::parse(&raw, region)
            .map(|p| p.as_str().to_owned())
            .map_err(|m| vec![FieldError::new(at.to_vec(), "value_error.phone", m)])
    }
}

pub fn parse_create(body: Value, region: parley_domain::contact::Region) -> Parsed<CreateCall> {
    parse_object(body, loc(&["body"]), |r| {
        let agent_id = r.required("agent_id", integer(1, i64::MAX));
        let transport = r.optional("transport", enum_value::<CallTransport>());
        let sent_to = r.contains("to");
        let to = r.optional("to", address(region));
        let from = r.optional("from", address(region));
        // A phone call needs somewhere to ring; a browser joins by token.
        match transport.unwrap_or(CallTransport::Phone) {
            CallTransport::Phone if !sent_to => r.push_error(FieldError::new(
                r.loc_of("to"),
                "value_error.call.transport",
                "a phone call needs `to` (a web call takes `transport: web` instead)",
            )),
            CallTransport::Web if sent_to || from.is_some() => r.push_error(FieldError::new(
                r.loc_of(if sent_to { "to" } else { "from" }),
                "value_error.call.transport",
                "a web call has no `to` or `from`: the browser joins with the call's token",
            )),
            _ => {}
        }
        let contact_id = r.optional("contact_id", integer(1, i64::MAX));
        let first_message = r.optional("first_message", string(1, 2000));
        let variables = r.optional("variables", json_object(16 * 1024));
        let max_duration_s = r.optional("max_duration_s", integer(10, 7200));
        let record = r.optional("record", boolean());
        let metadata = r.optional("metadata", json_object(16 * 1024));
        let voicemail = r.nullable("voicemail", crate::agents::voicemail());
        if r.has_errors() {
            return None;
        }
        Some(CreateCall {
            agent_id: agent_id?,
            transport,
            to,
            from,
            contact_id,
            first_message,
            variables,
            max_duration_s,
            record,
            metadata,
            voicemail,
        })
    })
}

pub fn parse_filter(q: &mut QueryReader) -> CallFilter {
    CallFilter {
        status: q.enum_value::<CallStatus>("status"),
        agent_id: q.integer("agent_id", 1, i64::MAX),
        contact_id: q.integer("contact_id", 1, i64::MAX),
        conversation_id: q.integer("conversation_id", 1, i64::MAX),
        direction: q.enum_value::<CallDirection>("direction"),
        created_after: q.timestamp("created_after"),
        created_before: q.timestamp("created_before"),
    }
}

/// The `to` of a web call.
pub const WEB_CALLEE: &str = "web";

fn not_found(id: &str) -> ServiceError {
    ServiceError::not_found("Call", id)
}

/// A placed call, started once the unit of work that records it commits.
pub struct Dialed {
    pub scope: Scope,
    pub call: CallRow,
    pub placed: Placed,
    pub agent: CallAgent,
    /// The provider streams live audio (SIP, Twilio), not whole utterances.
    pub streams_audio: bool,
}

/// A placed call starts when the unit of work recording it commits.
impl crate::unit::AfterCommit for Dialed {
    fn committed(self: Box<Self>, svc: &Services) {
        start(svc, *self);
    }

    /// Not committed: a call placed here is one nobody can account for.
    fn abandoned(self: Box<Self>) {
        tracing::warn!(call = %self.call.public_id, "a placed call could not be recorded; hanging it up");
        let _ = self.placed.commands.try_send(parley_voice::provider::Command::Hangup);
    }
}

/// `POST /api/v1/calls`'s answer: the call, and for a web call how its
/// browser joins.
#[derive(Debug, serde::Serialize, ToSchema)]
pub struct PlacedCall {
    #[serde(flatten)]
    pub call: parley_domain::call::Call,
    /// Web calls only (`transport: web`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub web: Option<WebCallJoin>,
}

/// A call stored `queued`, waiting to be dialled.
struct Queued {
    row: CallRow,
    conversation_id: i64,
    provider: Arc<dyn Provider>,
    dial: Dial,
    agent: CallAgent,
}

/// Places a call (see the module comment), answering 201 with the call or
/// 502 when the provider failed. Three steps, so that no network round trip
/// happens while a transaction is open: claim the idempotency key and store
/// the call `queued` (checks, funds held, conversation) in one transaction
/// (a refusal rolls the claim back with it); dial; record the outcome,
/// complete the key and commit, then start the call on this instance.
pub async fn place(
    svc: &Services,
    scope: Scope,
    idem: Option<Idempotent>,
    input: CreateCall,
) -> ServiceResult<Answered> {
    let mut work = svc.begin().await?;
    let hold = match svc.claim_key(&mut work, scope, idem.as_ref()).await? {
        Claimed::Replay(answered) => return Ok(answered),
        Claimed::Run(hold) => hold,
    };
    let queued = queue(&mut work, svc, scope, input).await?;
    svc.commit(work).await?;
    let dialed = queued.provider.dial(queued.dial.clone()).await;
    let recorded = async {
        let mut work = svc.begin().await?;
        let answer = record_dial(&mut work, scope, &queued, dialed).await?;
        if let Some(hold) = &hold {
            hold.complete(&mut work, &answer).await?;
        }
        svc.commit(work).await?;
        Ok(answer)
    }
    .await;
    if recorded.is_err() {
        // The dialled call was hung up with its unit of work; do not leave
        // it `queued` (holding funds and a concurrency slot), nor its key held.
        let failed = async {
            let mut work = svc.begin().await?;
            fail_dial(&mut work, scope, &queued.row, queued.conversation_id).await?;
            svc.commit(work).await
        }
        .await;
        if let Err(e) = failed {
            tracing::error!(call = %queued.row.public_id, error = %e, "could not end a call left queued; the watchdog will");
        }
        if let Some(hold) = &hold {
            svc.release_key(hold).await;
        }
    }
    recorded.map(|answer| Answered { answer, replayed: false })
}

/// Checks and stores a call `queued`, with its conversation and held funds.
async fn queue(tx: &mut Tx, svc: &Services, scope: Scope, input: CreateCall) -> ServiceResult<Queued> {
    let workspace = voice_workspace(tx, scope).await?;
    let agent = parley_store::repo::agents::get(tx, scope, input.agent_id, false).await?.ok_or_else(|| {
        ServiceError::Validation(vec![FieldError::not_found(
            loc(&["body", "agent_id"]),
            &format!("Agent {}", input.agent_id),
        )])
    })?;
    let call_id = parley_domain::call::new_call_id();
    hold_slot(tx, svc, scope, &call_id).await?;
    let contact_id = match input.contact_id {
        Some(id) => {
            parley_store::repo::contacts::get(tx, scope, id, false).await?.ok_or_else(|| {
                ServiceError::Validation(vec![FieldError::not_found(
                    loc(&["body", "contact_id"]),
                    &format!("Contact {id}"),
                )])
            })?;
            Some(id)
        }
        None => match &input.to {
            Some(to) => phone_contact(tx, svc, scope, to).await?,
            None => None,
        },
    };
    let web = input.transport == Some(CallTransport::Web);
    // A web call's other party is a browser: its `to` says so.
    let to = if web { WEB_CALLEE.to_owned() } else { input.to.clone().unwrap_or_default() };
    let title = if web { "Web call".to_owned() } else { format!("Call to {to}") };
    let channel = crate::messaging::channels::voice_channel(tx, scope).await?;
    let conversation = open_conversation(tx, scope, channel.id, &to, &title, contact_id).await?;
    let provider = if web { svc.calls.web.clone() } else { svc.calls.provider(scope).clone() };
    let first_message = input.first_message.clone().or(agent.first_message.clone());
    let mut agent = agent;
    if let Some(voicemail) = input.voicemail.clone() {
        agent.speech.voicemail = voicemail;
    }
    let empty = Map::new();
    let new = NewCall {
        public_id: &call_id,
        agent_id: agent.id,
        contact_id,
        conversation_id: Some(conversation.item.id),
        from: input.from.as_deref(),
        to: &to,
        first_message: first_message.as_deref(),
        variables: input.variables.as_ref().unwrap_or(&empty),
        max_duration_s: input.max_duration_s.unwrap_or(600),
        record: input.record.unwrap_or(true),
        metadata: input.metadata.as_ref().unwrap_or(&empty),
        provider: provider.name(),
        owner: &svc.calls.instance,
        direction: CallDirection::Outbound,
        channel_id: channel.id,
    };
    let (row, agent) = store_queued(tx, svc, scope, &workspace.name, agent, &conversation, new).await?;
    let dial = Dial { call_id, from: input.from, to, ring_timeout: svc.config.calls.ring_timeout };
    Ok(Queued { row, conversation_id: conversation.item.id, provider, dial, agent })
}

/// The scope's workspace, which must have voice enabled (403).
async fn voice_workspace(tx: &mut Tx, scope: Scope) -> ServiceResult<parley_domain::workspace::Workspace> {
    let workspace = parley_store::repo::workspaces::get(tx, scope.workspace_id).await?.ok_or_else(|| {
        ServiceError::invariant(format!("workspace {} of a valid credential is gone", scope.workspace_id))
    })?;
    if !workspace.voice_enabled {
        return Err(ServiceError::Forbidden(format!("Voice is not enabled for workspace {}", workspace.id)));
    }
    Ok(workspace)
}

/// Holds a minute's funds for the call (402) and a place under the
/// workspace's concurrent-call limit (429).
async fn hold_slot(tx: &mut Tx, svc: &Services, scope: Scope, call_id: &str) -> ServiceResult<()> {
    // The hold locks the scope's billing account until commit, so concurrent
    // creations count each other's calls: the limit holds on PostgreSQL too.
    billing::hold_for_call(tx, scope, &svc.config.billing, call_id).await?;
    let limit = svc.config.calls.max_concurrent_calls;
    if repo::count_live(tx, scope).await? >= limit {
        return Err(ServiceError::TooManyRequests(format!(
            "The workspace has {limit} calls in progress, its limit (voice.max_concurrent_calls); try again when one ends"
        )));
    }
    Ok(())
}

/// The contact with phone number `number` (found or created), if it is one.
async fn phone_contact(tx: &mut Tx, svc: &Services, scope: Scope, number: &str) -> ServiceResult<Option<i64>> {
    if !number.starts_with('+') {
        return Ok(None);
    }
    let identity =
        Identity { channel: parley_domain::channel::ChannelType::Voice, address: number.to_owned(), unverified: false };
    Ok(contacts::resolve_address(tx, scope, &svc.config.contacts, &identity, None).await?.map(|c| c.id))
}

/// The call's own conversation (`kind: call` on the voice channel).
async fn open_conversation(
    tx: &mut Tx,
    scope: Scope,
    channel_id: i64,
    other_party: &str,
    title: &str,
    contact_id: Option<i64>,
) -> ServiceResult<parley_domain::conversation::Conversation> {
    let conversation = conversation_repo::insert(
        tx,
        scope,
        &NewConversation {
            channel_id,
            channel: "voice",
            kind: ConversationKind::Call,
            channel_ref: &format!("voice:{other_party}"),
            title,
            contact_id,
            sender_name: None,
            unverified_sender: false,
        },
    )
    .await?;
    events::append(tx, scope, EventType::ConversationCreated, event_data(&conversation)?).await?;
    Ok(conversation)
}

/// Stores the call `queued` (its event, its watchdog) and renders the
/// agent's prompt for it.
async fn store_queued(
    tx: &mut Tx,
    svc: &Services,
    scope: Scope,
    workspace_name: &str,
    agent: parley_domain::agent::Agent,
    conversation: &parley_domain::conversation::Conversation,
    new: NewCall<'_>,
) -> ServiceResult<(CallRow, CallAgent)> {
    let row = repo::insert(tx, scope, &new).await?;
    events::append(tx, scope, EventType::CallQueued, event_data(&row.to_api()?)?).await?;
    enqueue_watch(tx, svc, scope, &row.public_id).await?;
    let system =
        call_prompt(tx, scope, &agent, workspace_name, new.contact_id, conversation, Some(new.variables)).await?;
    let agent = CallAgent {
        agent,
        system,
        first_message: new.first_message.map(str::to_owned),
        call_id: row.public_id.clone(),
        conversation_id: Some(conversation.item.id),
        contact_id: new.contact_id,
        transferable: new.provider != "web",
    };
    Ok((row, agent))
}

/// Where browsers' web-call sockets go.
pub fn web_calls(svc: &Services) -> Arc<parley_voice::webcall::WebCalls> {
    svc.calls.web_calls.clone()
}

/// The Twilio provider, for its webhooks and media streams; 404 when
/// Twilio does not carry this server's calls.
pub fn twilio(svc: &Services) -> ServiceResult<Arc<parley_voice::twilio::TwilioProvider>> {
    svc.calls.twilio.clone().ok_or_else(|| ServiceError::not_found("telephony provider", "twilio"))
}

/// Takes the calls the telephony provider receives, until it stops.
pub async fn answer_inbound(svc: Services, mut calls: mpsc::Receiver<parley_voice::provider::InboundCall>) {
    while let Some(call) = calls.recv().await {
        let svc = svc.clone();
        tokio::spawn(async move { take_inbound(&svc, call).await });
    }
}

/// An inbound call: stored on the voice channel that has the dialled
/// number, with the agent the `call.inbound` triggers choose, then
/// answered and run like a placed call. Refused (with the SIP status
/// that says why) when no live channel has the number (404), voice is off
/// (403), no agent takes it or funds are short (480), or the workspace is
/// at its call limit (486).
async fn take_inbound(svc: &Services, call: parley_voice::provider::InboundCall) {
    use parley_voice::provider::Refusal;
    let stored = async {
        let mut work = svc.begin().await?;
        let stored = store_inbound(&mut work, svc, &call).await?;
        svc.commit(work).await?;
        Ok::<_, ServiceError>(stored)
    }
    .await;
    let (scope, row, agent) = match stored {
        Ok(Ok(stored)) => stored,
        Ok(Err(refusal)) => return call.refuse(refusal),
        Err(e) => {
            let refusal = match e {
                ServiceError::Forbidden(_) => Refusal::Forbidden,
                ServiceError::TooManyRequests(_) => Refusal::Busy,
                // A concurrent repeat stored the call first.
                ServiceError::Store(parley_store::StoreError::UniqueViolation) => Refusal::Repeated,
                ServiceError::PaymentRequired(_) => Refusal::Unavailable,
                _ => {
                    tracing::error!(error = %e, "an inbound call could not be stored; refusing it");
                    Refusal::Unavailable
                }
            };
            tracing::info!(to = %call.to, ?refusal, reason = %e, "refused an inbound call");
            return call.refuse(refusal);
        }
    };
    match call.answer().await {
        Ok(placed) => start(svc, Dialed { scope, call: row, placed, agent, streams_audio: true }),
        Err(e) => {
            // The caller hung up before the answer: nothing ran, nothing is charged.
            tracing::info!(call = %row.public_id, error = %e, "an inbound call ended before it was answered");
            let ended = async {
                let mut work = svc.begin().await?;
                let conversation_id = row.conversation_id.unwrap_or_default();
                end_unanswered(&mut work, scope, &row, conversation_id, EndedReason::Canceled).await?;
                svc.commit(work).await
            }
            .await;
            if let Err(e) = ended {
                tracing::error!(call = %row.public_id, error = %e, "could not end an unanswered call; the watchdog will");
            }
        }
    }
}

/// Stores an inbound call `queued`, or says why it is refused.
async fn store_inbound(
    tx: &mut Tx,
    svc: &Services,
    call: &parley_voice::provider::InboundCall,
) -> ServiceResult<Result<(Scope, CallRow, CallAgent), parley_voice::provider::Refusal>> {
    use parley_voice::provider::Refusal;
    // A repeat of the provider's request (its retry, or a replay of a signed
    // webhook) is the call already taken, not another.
    if repo::provider_call_taken(tx, call.provider, &call.provider_call_id).await? {
        return Ok(Err(Refusal::Repeated));
    }
    // Trunks send numbers with or without the `+`.
    let mut found = parley_store::repo::channels::find_voice_number(tx, &call.to).await?;
    if found.is_none() && call.to.bytes().all(|b| b.is_ascii_digit()) {
        found = parley_store::repo::channels::find_voice_number(tx, &format!("+{}", call.to)).await?;
    }
    let Some((scope, channel)) = found.filter(|(_, c)| c.status == parley_domain::channel::ChannelStatus::Active)
    else {
        return Ok(Err(Refusal::NotFound));
    };
    let workspace = voice_workspace(tx, scope).await?;
    let call_id = parley_domain::call::new_call_id();
    hold_slot(tx, svc, scope, &call_id).await?;
    let caller = if !call.from.is_empty() && call.from.bytes().all(|b| b.is_ascii_digit()) {
        format!("+{}", call.from)
    } else {
        call.from.clone()
    };
    let contact_id = phone_contact(tx, svc, scope, &caller).await?;
    let conversation =
        open_conversation(tx, scope, channel.id, &caller, &format!("Call from {caller}"), contact_id).await?;
    let traffic = crate::agents::routing::Traffic {
        event: parley_domain::agent::TriggerEvent::CallInbound,
        channel: "voice",
        kind: ConversationKind::Call,
        text: "",
    };
    let Some(agent_id) = crate::agents::routing::route(tx, scope, &conversation, traffic).await? else {
        return Ok(Err(Refusal::Unavailable));
    };
    let agent = parley_store::repo::agents::get(tx, scope, agent_id, false)
        .await?
        .ok_or_else(|| ServiceError::invariant(format!("routed agent {agent_id} is gone")))?;
    let empty = Map::new();
    let first_message = agent.first_message.clone();
    let new = NewCall {
        public_id: &call_id,
        agent_id,
        contact_id,
        conversation_id: Some(conversation.item.id),
        from: Some(&caller),
        to: &channel.address,
        first_message: first_message.as_deref(),
        variables: &empty,
        max_duration_s: 3600,
        record: true,
        metadata: &empty,
        provider: call.provider,
        owner: &svc.calls.instance,
        direction: CallDirection::Inbound,
        channel_id: channel.id,
    };
    let (row, agent) = store_queued(tx, svc, scope, &workspace.name, agent, &conversation, new).await?;
    repo::set_provider_call_id(tx, scope, row.id, &call.provider_call_id).await?;
    Ok(Ok((scope, row, agent)))
}

/// The agent's system prompt for a call, with the call's variables and the
/// built-ins (the contact's, the conversation's).
async fn call_prompt(
    tx: &mut Tx,
    scope: Scope,
    agent: &parley_domain::agent::Agent,
    workspace_name: &str,
    contact_id: Option<i64>,
    conversation: &parley_domain::conversation::Conversation,
    variables: Option<&Map<String, Value>>,
) -> ServiceResult<String> {
    use crate::agents::prompt;
    let blocks = parley_store::repo::prompt_blocks::get_many(tx, scope, &agent.prompt_block_ids).await?;
    let contact = match contact_id {
        Some(id) => parley_store::repo::contacts::get(tx, scope, id, false).await?,
        None => None,
    };
    let context = prompt::Context {
        agent,
        workspace_name,
        conversation: Some(conversation),
        contact: contact.as_ref(),
        now: Timestamp::now(),
    };
    let caller: std::collections::BTreeMap<String, String> = variables
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| match v {
            Value::String(s) => Some((k.clone(), s.clone())),
            Value::Number(_) | Value::Bool(_) => Some((k.clone(), v.to_string())),
            _ => None,
        })
        .collect();
    let vars = prompt::variables(prompt::builtin_variables(context), &caller);
    Ok(prompt::system_prompt(agent, &blocks, &vars, prompt::Missing::Empty)?.prompt)
}

/// Records what the provider said: the placed call (201, started after
/// commit) or its failure (502; the call is `failed`, nothing charged).
async fn record_dial(
    work: &mut Work,
    scope: Scope,
    queued: &Queued,
    dialed: Result<Placed, parley_voice::provider::DialError>,
) -> ServiceResult<Answer> {
    let call_id = &queued.row.public_id;
    match dialed {
        Ok(placed) => {
            repo::set_provider_call_id(work, scope, queued.row.id, &placed.provider_call_id).await?;
            let call = repo::get(work, scope, call_id).await?.ok_or_else(|| not_found(call_id))?;
            let web = placed.client_token.clone().map(|token| WebCallJoin {
                url: parley_voice::webcall::SOCKET_PATH.to_owned(),
                token,
                expires_at: Timestamp::now().plus_duration(queued.dial.ring_timeout),
            });
            let answer = Answer::json(201, &PlacedCall { call: call.to_api()?, web })?;
            let streams_audio = queued.provider.streams_audio();
            work.after_commit(Dialed { scope, call, placed, agent: queued.agent.clone(), streams_audio });
            Ok(answer)
        }
        Err(e) => {
            tracing::info!(call = %call_id, error = %e, "the provider failed to place a call");
            fail_dial(work, scope, &queued.row, queued.conversation_id).await?;
            let detail = format!("The telephony provider could not place call {call_id}: {e}");
            Answer::json(502, &json!({ "detail": detail }))
        }
    }
}

/// Ends a call that was never placed: `failed` (`dial_failed`), its hold released.
async fn fail_dial(tx: &mut Work, scope: Scope, row: &CallRow, conversation_id: i64) -> ServiceResult<()> {
    end_unanswered(tx, scope, row, conversation_id, EndedReason::DialFailed).await
}

/// Ends a call that never started talking, nothing charged: `failed` when
/// it could not be placed, `canceled` when the caller gave up first.
async fn end_unanswered(
    tx: &mut Work,
    scope: Scope,
    row: &CallRow,
    conversation_id: i64,
    reason: EndedReason,
) -> ServiceResult<()> {
    billing::release_call_hold(tx, scope, &row.public_id).await?;
    let status = if reason == EndedReason::DialFailed { CallStatus::Failed } else { CallStatus::Canceled };
    let ending = Ending {
        status,
        reason,
        ended_at: Timestamp::now(),
        duration_ms: 0,
        cost_cents: 0,
        recording: None,
        transfer_to: None,
        latency: None,
        machine: None,
    };
    if repo::finish(tx, scope, row.id, &ending).await? {
        close_conversation(tx, scope, conversation_id).await?;
        let call = repo::get(tx, scope, &row.public_id).await?.ok_or_else(|| not_found(&row.public_id))?.to_api()?;
        events::append(tx, scope, EventType::CallCompleted, event_data(&call)?).await?;
    }
    Ok(())
}

/// Runs a placed call in a task of this instance until it ends.
pub fn start(svc: &Services, dialed: Dialed) {
    let (hang, hangup) = oneshot::channel();
    svc.calls.hangups().insert(dialed.call.public_id.clone(), hang);
    let svc = svc.clone();
    // The call's span: its turns and the agent's runs are its children.
    let span = tracing::info_span!(
        "call",
        parley.call.id = %dialed.call.public_id,
        parley.agent.id = dialed.call.agent_id,
        call.direction = dialed.call.direction.as_str(),
        workspace_id = dialed.scope.workspace_id,
    );
    svc.calls.running.clone().spawn(
        async move {
            let call_id = dialed.call.public_id.clone();
            if let Err(e) = supervise(&svc, dialed, hangup).await {
                tracing::error!(call = %call_id, error = %e, "a call could not be recorded; it will be ended as failed");
            }
            svc.calls.hangups().remove(&call_id);
        }
        .instrument(span),
    );
}

async fn supervise(svc: &Services, dialed: Dialed, hangup: oneshot::Receiver<EndedReason>) -> ServiceResult<()> {
    let Dialed { scope, call, placed, agent, streams_audio } = dialed;
    let (progress_tx, mut progress) = mpsc::channel(64);
    // The recording is written to the spool as the call runs, then stored.
    let spool = match spool_path(svc, &call.public_id) {
        _ if !call.record => None,
        Ok(path) => Some(path),
        Err(e) => {
            tracing::error!(call = %call.public_id, error = %e, "no spool directory; the call is not recorded");
            None
        }
    };
    let mut options = engine::Options::new(Duration::from_secs(call.max_duration_s as u64), spool);
    speech_options(&svc.config.speech, &agent.agent, streams_audio, &mut options);
    // Answering-machine detection: outbound calls to a phone line only.
    if streams_audio && call.direction == CallDirection::Outbound && agent.transferable {
        options.listening.machine = agent.agent.speech.voicemail.as_ref().map(|v| machine_policy(&svc.config.calls, v));
    }
    // A warm transfer dials the person on the call's own line, from its number.
    if streams_audio && agent.transferable {
        let ours = match call.direction {
            CallDirection::Outbound => call.from_address.clone(),
            CallDirection::Inbound => Some(call.to_address.clone()),
        };
        options.transfer_line = Some(parley_voice::warm::TransferLine {
            provider: svc.calls.provider(scope).clone(),
            call_id: format!("{}-transfer", call.public_id),
            from: ours,
            ring_timeout: svc.config.calls.ring_timeout,
        });
    }
    let session = svc.call_session(scope, agent);
    let running = tokio::spawn(engine::run(placed, session, options, progress_tx, hangup).in_current_span());
    let heartbeat = tokio::spawn(keep_alive(svc.clone()));
    let mut answered_at = None;
    while let Some(p) = progress.recv().await {
        if let Progress::Segment(TranscriptSegment { start_ms, end_ms, latency: Some(latency), .. }) = &p {
            trace_turn(&call, *start_ms, latency, answered_at.get_or_insert_with(|| answer_time(*end_ms)));
        }
        // Through an outage the call goes on; its progress waits here (the
        // engine's channel buffers the rest) and is written once the
        // database answers.
        despite_outages(&call.public_id, || record_progress(svc, scope, &call, p.clone())).await?;
    }
    heartbeat.abort();
    let outcome = running.await.map_err(|e| ServiceError::internal(e, "the call engine stopped"))?;
    conclude(svc, scope, &call, outcome).await
}

/// Runs `write` until the database does not refuse it for an outage;
/// any other outcome is given back.
async fn despite_outages<T, F: Future<Output = ServiceResult<T>>>(
    call_id: &str,
    mut write: impl FnMut() -> F,
) -> ServiceResult<T> {
    let mut wait = Duration::from_millis(250);
    let mut waited = false;
    loop {
        match write().await {
            Err(ServiceError::Unavailable(_)) => {
                if !waited {
                    tracing::warn!(call = %call_id, "the database is unavailable: the call goes on, its record waits");
                    waited = true;
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(5));
            }
            other => {
                if waited {
                    tracing::info!(call = %call_id, "the call's record caught up");
                }
                return other;
            }
        }
    }
}

/// When the call was answered, from a segment that ends `end_ms` after
/// the answer and is reported as it ends.
fn answer_time(end_ms: i64) -> std::time::SystemTime {
    std::time::SystemTime::now() - Duration::from_millis(end_ms.max(0) as u64)
}

/// A timed turn's span (caller stops → agent's first audio out), with
/// its phases as children, in the call's trace.
fn trace_turn(call: &CallRow, first_out_ms: i64, l: &TurnLatency, answered_at: &std::time::SystemTime) {
    use parley_telemetry::traces::{KeyValue, Phase, timed_span};
    let speech_end_ms = first_out_ms - l.voice_to_voice_ms;
    let phases = [
        Phase { name: "end_of_turn", ms: l.end_of_turn_ms },
        Phase { name: "stt", ms: l.stt_ms },
        Phase { name: "llm.first_token", ms: l.llm_first_token_ms },
        Phase { name: "tts.first_audio", ms: l.tts_first_audio_ms },
    ];
    let start = *answered_at + Duration::from_millis(speech_end_ms.max(0) as u64);
    let attributes = vec![KeyValue::new("parley.call.id", call.public_id.clone())];
    timed_span("call.turn", start, l.voice_to_voice_ms, attributes, &phases);
}

/// How the agent speaks and listens on this call: its engines (else the
/// server's defaults), its interruption threshold and silence handling.
fn speech_options(
    engines: &parley_speech::engines::SpeechEngines,
    agent: &parley_domain::agent::Agent,
    streams_audio: bool,
    options: &mut engine::Options,
) {
    let speech = &agent.speech;
    let voice = match &speech.voice {
        Some(v) => engines.synthesiser(&v.tts_engine, v.voice_id.as_deref(), v.speed.map(|s| s as f32)),
        None => engines.synthesiser(engines.default_tts(), None, None),
    };
    match voice {
        Some(Ok(voice)) => options.voice = voice,
        // Settings are checked when saved; an engine removed from the
        // configuration since, or espeak-ng missing, leaves the tone voice.
        Some(Err(e)) => tracing::warn!(agent = agent.id, error = %e, "the agent's voice cannot speak; using tones"),
        None => tracing::warn!(agent = agent.id, "the agent's text-to-speech engine is not configured; using tones"),
    }
    let (stt, language) = match &speech.transcriber {
        Some(t) => (Some(t.stt_engine.as_str()), t.language.as_deref().unwrap_or(&agent.language)),
        None => (engines.default_stt(), agent.language.as_str()),
    };
    // Speech engines take the language alone (`en`), not its region.
    let language = language.split('-').next().unwrap_or(language);
    options.transcriber = stt.and_then(|name| engines.transcriber(name, Some(language)));
    options.listening.live = streams_audio;
    options.listening.interruption_threshold_ms = speech.interruption_threshold_ms;
    options.listening.turns.hangover_ms = speech.end_of_turn_ms as u64;
    options.listening.smart = match (speech.turn_detection, engines.turn_models()) {
        (TurnDetection::Smart, Some(models)) => {
            let settings = parley_speech::turns::SmartSettings {
                min_silence_ms: speech.end_of_turn_min_ms as u64,
                max_silence_ms: speech.end_of_turn_max_ms as u64,
                ..Default::default()
            };
            Some((settings, models.clone()))
        }
        _ => None,
    };
    options.listening.silence_reprompt_ms = speech.silence_reprompt_s.map(|s| s * 1000);
    options.listening.silence_hangup_ms = speech.silence_hangup_s.map(|s| s * 1000);
    options.listening.greeting = match speech.first_message_mode {
        FirstMessageMode::SpeakFirst => Greeting::SpeakFirst,
        FirstMessageMode::WaitForCallee => Greeting::WaitForCallee { wait_ms: speech.first_message_wait_s * 1000 },
        FirstMessageMode::Interruptible => Greeting::Interruptible,
    };
}

/// How a call acts on answering-machine detection's verdict.
fn machine_policy(
    config: &CallsConfig,
    voicemail: &parley_domain::agent::Voicemail,
) -> parley_voice::live::MachinePolicy {
    use parley_domain::agent::{ScreeningAction, VoicemailAction};
    use parley_voice::live::{MachinePolicy, OnMachine};
    let on_machine = match (voicemail.action, &voicemail.message) {
        (VoicemailAction::LeaveMessage, Some(message)) => OnMachine::LeaveMessage(message.clone()),
        _ => OnMachine::HangUp,
    };
    let mut settings = config.machine_detection;
    settings.beep_wait_ms = voicemail.beep_wait_s as u64 * 1000;
    MachinePolicy { on_machine, answer_screening: voicemail.on_screening == ScreeningAction::Respond, settings }
}

/// Renews this instance's hold on its live calls while they run.
async fn keep_alive(svc: Services) {
    let every = (svc.config.calls.lease / 3).max(Duration::from_millis(200));
    loop {
        tokio::time::sleep(every).await;
        let renewed = svc.transaction(async |work| Ok(repo::heartbeat(work, &svc.calls.instance).await?)).await;
        if let Err(e) = renewed {
            tracing::warn!(error = %e, "could not renew this instance's calls");
        }
    }
}

async fn emit_call(
    tx: &mut Tx,
    scope: Scope,
    call: &CallRow,
    kind: EventType,
    extra: Option<Value>,
) -> ServiceResult<()> {
    let now = repo::get(tx, scope, &call.public_id).await?.ok_or_else(|| not_found(&call.public_id))?;
    let mut data = event_data(&now.to_api()?)?;
    if let (Some(Value::Object(extra)), Value::Object(map)) = (extra, &mut data) {
        map.extend(extra);
    }
    events::append(tx, scope, kind, data).await?;
    Ok(())
}

/// Records what the call engine reports as it happens. A transcript line
/// is also a message of the call's conversation: its live views hear of it.
async fn record_progress(svc: &Services, scope: Scope, call: &CallRow, p: Progress) -> ServiceResult<()> {
    let mut tx = svc.begin().await?;
    match p {
        Progress::Ringing => {
            if repo::advance(&mut tx, scope, call.id, CallStatus::Ringing, Some("ringing_at")).await? {
                emit_call(&mut tx, scope, call, EventType::CallRinging, None).await?;
            }
        }
        Progress::Answered => {
            if repo::advance(&mut tx, scope, call.id, CallStatus::InProgress, Some("answered_at")).await? {
                emit_call(&mut tx, scope, call, EventType::CallStarted, None).await?;
            }
        }
        Progress::Answerer { by, detection } => {
            let first_machine = by == AnsweredBy::Machine
                && repo::get(&mut tx, scope, &call.public_id).await?.is_some_and(|c| c.answered_by != Some(by));
            if repo::set_answered_by(&mut tx, scope, call.id, by, &detection).await? && first_machine {
                emit_call(&mut tx, scope, call, EventType::CallMachineDetected, None).await?;
            }
        }
        Progress::Segment(segment) => {
            // Already there: a retried write whose commit went through as
            // the database went away. Its message and counts came with it.
            if !repo::add_segment(&mut tx, call.id, &segment).await? {
                return Ok(());
            }
            if let Some(l) = segment.latency {
                tx.tally(move |m| {
                    m.voice_to_voice.observe(l.voice_to_voice_ms as f64 / 1000.0);
                    m.end_of_turn.observe(l.end_of_turn_ms as f64 / 1000.0);
                });
            }
            if let Some(conversation_id) = call.conversation_id {
                let (direction, author, status) = match segment.speaker {
                    Speaker::Caller => (
                        Direction::Inbound,
                        Author { kind: AuthorType::Contact, id: call.contact_id },
                        MessageStatus::Received,
                    ),
                    Speaker::Agent => (
                        Direction::Outbound,
                        Author { kind: AuthorType::Agent, id: Some(call.agent_id) },
                        MessageStatus::Sent,
                    ),
                    Speaker::Human => {
                        (Direction::Outbound, Author { kind: AuthorType::User, id: None }, MessageStatus::Sent)
                    }
                };
                let channel_id = channel_id_of(&mut tx, scope, conversation_id).await?;
                conversation_repo::insert_message(
                    &mut tx,
                    scope,
                    &NewMessage {
                        conversation_id,
                        channel_id,
                        direction,
                        author,
                        text: &segment.text,
                        status,
                        external_id: None,
                        attachments: &[],
                        details: &Default::default(),
                    },
                )
                .await?;
                tx.conversation_changed(conversation_id);
            }
        }
    }
    svc.commit(tx).await?;
    Ok(())
}

async fn channel_id_of(tx: &mut Tx, scope: Scope, conversation_id: i64) -> ServiceResult<i64> {
    conversation_repo::get(tx, scope, conversation_id)
        .await?
        .map(|c| c.channel_id)
        .ok_or_else(|| ServiceError::not_found("Conversation", conversation_id))
}

/// Where a call's recording is written as it runs.
fn spool_path(svc: &Services, call_id: &str) -> std::io::Result<std::path::PathBuf> {
    Ok(svc.storage.spool()?.join(format!("{call_id}.wav")))
}

/// Where a call's recording is stored.
fn recording_key(scope: Scope, call_id: &str) -> String {
    format!("recordings/{}/{}/{call_id}.wav", scope.workspace_id, if scope.livemode() { "live" } else { "test" })
}

/// How long a spooled recording must have gone unwritten before a sweep
/// takes it for one whose instance stopped (a running call writes its
/// recording every second).
const SPOOL_IDLE: Duration = Duration::from_secs(60);

/// Stores the recordings that instances which stopped mid-call (killed,
/// crashed) left in this machine's spool. Each is a whole WAV file up to
/// its last write, a few seconds before the stop. It becomes the recording
/// of its call once the watchdog has ended the call; files of calls that
/// have a recording, or of no call, are removed. Returns how many were
/// stored. The watchdog stores a file at once when it ends the call on
/// the machine that has it; this sweep (at start and every minute) takes
/// the rest.
pub async fn adopt_spooled_recordings(svc: &Services) -> ServiceResult<usize> {
    let Ok(dir) = svc.storage.spool() else { return Ok(0) };
    let Ok(mut entries) = tokio::fs::read_dir(&dir).await else { return Ok(0) };
    let mut adopted = 0;
    while let Ok(Some(entry)) = entries.next_entry().await {
        let path = entry.path();
        let Some(call_id) = path.file_stem().and_then(|n| n.to_str()) else { continue };
        let idle = entry.metadata().await.ok().and_then(|m| m.modified().ok()).and_then(|t| t.elapsed().ok());
        if path.extension().is_none_or(|e| e != "wav")
            || idle.is_none_or(|idle| idle < SPOOL_IDLE)
            || svc.calls.hangups().contains_key(call_id)
        {
            continue;
        }
        let call = {
            let mut c = svc.db.read().await?;
            repo::find_anywhere(&mut c, call_id).await?
        };
        if adopt_recording(svc, call, &path).await? {
            adopted += 1;
        }
    }
    Ok(adopted)
}

/// Stores the spooled file at `path` as the recording of `call` if the call
/// has ended without one; removes it if there is nothing to attach it to;
/// leaves it while the call runs. True if stored.
async fn adopt_recording(svc: &Services, call: Option<CallRow>, path: &std::path::Path) -> ServiceResult<bool> {
    if call
        .as_ref()
        .is_some_and(|c| matches!(c.status, CallStatus::Queued | CallStatus::Ringing | CallStatus::InProgress))
    {
        return Ok(false);
    }
    let duration_ms = parley_voice::audio::recorded_ms(path).unwrap_or(0);
    let Some(call) = call.filter(|c| c.recording_key.is_none() && duration_ms > 0) else {
        let _ = tokio::fs::remove_file(path).await;
        return Ok(false);
    };
    let scope = call.scope();
    let key = recording_key(scope, &call.public_id);
    if let Err(e) = svc.storage.put_file(&key, path, "audio/wav").await {
        tracing::warn!(call = %call.public_id, error = %e, "could not store a spooled recording; the next sweep will try again");
        return Ok(false);
    }
    let mut tx = svc.begin().await?;
    let attached = repo::attach_recording(&mut tx, scope, call.id, &key, duration_ms).await?;
    if attached {
        emit_call(&mut tx, scope, &call, EventType::CallRecordingReady, None).await?;
    }
    svc.commit(tx).await?;
    tracing::info!(call = %call.public_id, duration_ms, "stored the recording a stopped instance left in the spool");
    Ok(attached)
}

/// Writes the end of a call: recording, charge, state, events.
async fn conclude(svc: &Services, scope: Scope, call: &CallRow, outcome: Outcome) -> ServiceResult<()> {
    let mut recording = None;
    if let Some(r) = &outcome.recording {
        let key = recording_key(scope, &call.public_id);
        match svc.storage.put_file(&key, &r.path, "audio/wav").await {
            Ok(()) => recording = Some((key, r.duration_ms)),
            Err(e) => {
                tracing::error!(call = %call.public_id, error = %e, "could not store a call's recording");
                let _ = tokio::fs::remove_file(&r.path).await;
            }
        }
    }
    despite_outages(&call.public_id, || write_end(svc, scope, call, &outcome, recording.clone())).await
}

/// The end of a call in one transaction: charge, state, events.
async fn write_end(
    svc: &Services,
    scope: Scope,
    call: &CallRow,
    outcome: &Outcome,
    recording: Option<(String, i64)>,
) -> ServiceResult<()> {
    let mut tx = svc.begin().await?;
    let charged =
        billing::charge_call(&mut tx, scope, &svc.config.billing, &call.public_id, outcome.duration_ms).await?;
    let ending = Ending {
        status: outcome.status,
        reason: outcome.reason,
        ended_at: Timestamp::now(),
        duration_ms: outcome.duration_ms,
        cost_cents: charged.map_or(0, |e| -e.amount_cents),
        recording: recording.clone(),
        transfer_to: outcome.transfer_to.clone(),
        latency: parley_domain::call::CallLatency::of(&outcome.segments),
        machine: outcome.machine.clone(),
    };
    if !repo::finish(&mut tx, scope, call.id, &ending).await? {
        // Ended meanwhile (an instance thought it abandoned): keep that end.
        return Ok(());
    }
    for s in outcome.segments.iter().filter(|s| s.interrupted) {
        repo::mark_interrupted(&mut tx, call.id, s.index).await?;
    }
    if let Some(conversation_id) = call.conversation_id {
        close_conversation(&mut tx, scope, conversation_id).await?;
    }
    let extra = json!({"status": outcome.status, "ended_reason": outcome.reason});
    emit_call(&mut tx, scope, call, EventType::CallCompleted, Some(extra)).await?;
    if !outcome.segments.is_empty() {
        let segments = repo::segments(&mut tx, call.id).await?;
        events::append(
            &mut tx,
            scope,
            EventType::CallTranscriptReady,
            json!({"call_id": call.public_id, "segments": segments}),
        )
        .await?;
    }
    if recording.is_some() {
        emit_call(&mut tx, scope, call, EventType::CallRecordingReady, None).await?;
    }
    if outcome.segments.iter().any(|s| s.speaker == Speaker::Caller) && analysed(svc, &mut tx, scope, call).await? {
        enqueue_analysis(&mut tx, scope, &call.public_id).await?;
    }
    svc.commit(tx).await?;
    Ok(())
}

/// Post-call analysis's job kind: one per answered call in which the
/// caller spoke, and one per `POST /api/v1/calls/{id}/analysis`. The agent
/// runtime handles it (the agent's engine does the work).
pub const ANALYZE: &str = "call.analyze";

#[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct AnalyzeCall {
    pub call_id: String,
}

impl parley_jobs::BackgroundJob for AnalyzeCall {
    const KIND: &'static str = ANALYZE;
}

/// Whether an ended call is analysed on its own: its agent's plan asks
/// for something and its text engine is a model (`builtin` has none; a
/// call can still be analysed on demand, which says so).
async fn analysed(svc: &Services, tx: &mut Tx, scope: Scope, call: &CallRow) -> ServiceResult<bool> {
    let Some(agent) = parley_store::repo::agents::get(tx, scope, call.agent_id, false).await? else {
        return Ok(false);
    };
    let model = svc.config.text_engines.get(&agent.text_engine).is_some_and(|e| e.kind() != EngineKind::Builtin);
    Ok(model && agent.speech.analysis.wants_any())
}

async fn enqueue_analysis(tx: &mut Tx, scope: Scope, call_id: &str) -> ServiceResult<()> {
    let job = parley_jobs::Enqueue::of(&AnalyzeCall { call_id: call_id.to_owned() }).for_scope(scope);
    parley_jobs::enqueue(tx, job).await?;
    Ok(())
}

/// `POST /api/v1/calls/{id}/analysis`: analyses an ended call again (with
/// the agent's plan as it is now); 409 before the call has ended. The call's
/// `analysis` is replaced when the job is done (`call.analyzed`).
pub async fn analyze(svc: &Services, scope: Scope, id: &str) -> ServiceResult<parley_domain::call::Call> {
    svc.transaction(async |work| {
        let call = repo::get(work, scope, id).await?.ok_or_else(|| not_found(id))?;
        if !call.status.is_terminal() {
            return Err(ServiceError::Conflict(format!("Call {id} has not ended; it is analysed when it does")));
        }
        enqueue_analysis(work, scope, id).await?;
        Ok(call.to_api()?)
    })
    .await
}

/// What post-call analysis reads: the call, its transcript and its agent
/// (`None` if the call is gone).
pub async fn analysis_context(
    svc: &Services,
    scope: Scope,
    id: &str,
) -> ServiceResult<Option<(CallRow, Vec<TranscriptSegment>, Option<parley_domain::agent::Agent>)>> {
    let mut c = svc.db.read().await?;
    let Some(call) = repo::get(&mut c, scope, id).await? else { return Ok(None) };
    let segments = repo::segments(&mut c, call.id).await?;
    let agent = parley_store::repo::agents::get(&mut c, scope, call.agent_id, false).await?;
    Ok(Some((call, segments, agent)))
}

/// Stores a call's analysis and tells subscribers (`call.analyzed`).
pub async fn record_analysis(
    tx: &mut Tx,
    scope: Scope,
    call: &CallRow,
    analysis: &parley_domain::call::Analysis,
) -> ServiceResult<()> {
    if repo::set_analysis(tx, scope, call.id, analysis).await? {
        emit_call(tx, scope, call, EventType::CallAnalyzed, None).await?;
    }
    Ok(())
}

/// Closes an ended call's conversation; its live views hear of it.
async fn close_conversation(work: &mut Work, scope: Scope, conversation_id: i64) -> ServiceResult<()> {
    conversation_repo::set_status(work, scope, conversation_id, ConversationStatus::Closed).await?;
    work.conversation_changed(conversation_id);
    Ok(())
}

/// The watchdog's job kind: one job per call, enqueued with it, that ends
/// the call if its owner stops renewing it (a crash) and otherwise looks
/// again when the owner's hold would lapse.
pub const WATCH: &str = "call.watch";

#[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
pub(crate) struct Watch {
    pub(crate) call_id: String,
}

impl parley_jobs::BackgroundJob for Watch {
    const KIND: &'static str = WATCH;
}

async fn enqueue_watch(tx: &mut Tx, svc: &Services, scope: Scope, call_id: &str) -> ServiceResult<()> {
    let first_look = Timestamp::now().plus_duration(svc.config.calls.lease);
    let job = parley_jobs::Enqueue::of(&Watch { call_id: call_id.to_owned() }).for_scope(scope).at(first_look);
    parley_jobs::enqueue(tx, job).await?;
    Ok(())
}

/// The `call.watch` handler.
pub struct Watchdog {
    svc: Services,
}

impl Watchdog {
    pub fn new(svc: Services) -> Self {
        Self { svc }
    }
}

impl parley_jobs::Handler for Watchdog {
    fn kind(&self) -> &'static str {
        WATCH
    }

    fn retry_policy(&self) -> parley_jobs::RetryPolicy {
        // A store failure while ending a call: keep trying for a while.
        parley_jobs::RetryPolicy::seconds(&[1, 5, 30, 120, 600], 1.0)
    }

    fn run<'a>(&'a self, job: &'a parley_jobs::Job) -> futures::future::BoxFuture<'a, parley_jobs::Outcome> {
        Box::pin(async move {
            let (Some(scope), Ok(watch)) = (job.scope, job.read::<Watch>()) else {
                return parley_jobs::Outcome::Fail(format!("job {} is not a call watch", job.id));
            };
            match watch_call(&self.svc, scope, &watch.call_id).await {
                Ok(outcome) => outcome,
                Err(e) => parley_jobs::Outcome::Retry { error: e.to_string(), after: None },
            }
        })
    }
}

/// Ends call `id` as `failed`/`error` if its owner stopped renewing it,
/// charged for the time it ran before the owner vanished.
async fn watch_call(svc: &Services, scope: Scope, id: &str) -> ServiceResult<parley_jobs::Outcome> {
    let Some(call) = ({
        let mut c = svc.db.read().await?;
        repo::get(&mut c, scope, id).await?
    }) else {
        return Ok(parley_jobs::Outcome::Done);
    };
    if !matches!(call.status, CallStatus::Queued | CallStatus::Ringing | CallStatus::InProgress) {
        return Ok(parley_jobs::Outcome::Done);
    }
    let last_seen = call.last_seen_at.unwrap_or(call.created_at);
    let lapses = last_seen.plus_duration(svc.config.calls.lease);
    if lapses > Timestamp::now() {
        return Ok(parley_jobs::Outcome::Later(lapses));
    }
    let duration_ms = call.answered_at.map_or(0, |a| (last_seen.unix_micros() - a.unix_micros()).max(0) / 1000);
    let mut work = svc.begin().await?;
    let charged = billing::charge_call(&mut work, scope, &svc.config.billing, &call.public_id, duration_ms).await?;
    let ending = Ending {
        status: CallStatus::Failed,
        reason: EndedReason::Error,
        ended_at: Timestamp::now(),
        duration_ms,
        cost_cents: charged.map_or(0, |e| -e.amount_cents),
        recording: None,
        transfer_to: None,
        latency: None,
        machine: None,
    };
    if repo::finish(&mut work, scope, call.id, &ending).await? {
        if let Some(conversation_id) = call.conversation_id {
            close_conversation(&mut work, scope, conversation_id).await?;
        }
        let extra = json!({"status": CallStatus::Failed, "ended_reason": EndedReason::Error});
        emit_call(&mut work, scope, &call, EventType::CallCompleted, Some(extra)).await?;
        svc.commit(work).await?;
        tracing::warn!(call = %call.public_id, "ended a call whose instance stopped running it");
        // Its recording, if that instance ran on this machine.
        if let Ok(path) = spool_path(svc, &call.public_id)
            && path.exists()
            && !svc.calls.hangups().contains_key(&call.public_id)
        {
            let ended = {
                let mut c = svc.db.read().await?;
                repo::get(&mut c, scope, &call.public_id).await?
            };
            adopt_recording(svc, ended, &path).await?;
        }
    }
    Ok(parley_jobs::Outcome::Done)
}

/// Ends call `id` if this instance runs it; false if it does not.
fn hang_up_here(svc: &Services, id: &str) -> bool {
    match svc.calls.hangups().remove(id) {
        Some(signal) => {
            let _ = signal.send(EndedReason::AgentHangup);
            true
        }
        None => false,
    }
}

/// When the server stops: lets the calls this instance runs go on for up
/// to `voice.shutdown_grace_seconds`, hangs up those still running
/// (`shutdown`), and waits until each is recorded (its recording stored,
/// its charge made). Call once no new call can start here.
pub async fn drain(svc: &Services) {
    let calls = &svc.calls;
    calls.running.close();
    let grace = svc.config.calls.shutdown_grace;
    if calls.running.is_empty() {
        return;
    }
    tracing::info!(calls = calls.running.len(), grace_s = grace.as_secs(), "waiting for calls in progress to end");
    if tokio::time::timeout(grace, calls.running.wait()).await.is_ok() {
        return;
    }
    let still: Vec<_> = calls.hangups().drain().collect();
    tracing::warn!(calls = still.len(), "the shutdown grace is over: hanging up the calls still in progress");
    for (_, signal) in still {
        let _ = signal.send(EndedReason::Shutdown);
    }
    // Recording a call that was hung up takes moments; one that cannot be
    // recorded now is ended by another instance once its lease lapses.
    if tokio::time::timeout(Duration::from_secs(15), calls.running.wait()).await.is_err() {
        tracing::warn!(
            "calls hung up at shutdown were not recorded in time; another instance ends them after their lease"
        );
    }
}

/// Ends the calls other instances were asked to hang up, when this one runs
/// them, until `shutdown` turns true.
pub async fn follow_hangups(svc: Services, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut signals = svc.signals.subscribe();
    loop {
        tokio::select! {
            signal = signals.recv() => match signal {
                Ok(Signal::HangUp { call_id }) => {
                    hang_up_here(&svc, &call_id);
                }
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            },
            _ = shutdown.changed() => return,
        }
    }
}

pub async fn get(svc: &Services, scope: Scope, id: &str) -> ServiceResult<parley_domain::call::Call> {
    let mut c = svc.db.read().await?;
    Ok(repo::get(&mut c, scope, id).await?.ok_or_else(|| not_found(id))?.to_api()?)
}

pub async fn list(
    svc: &Services,
    scope: Scope,
    filter: &CallFilter,
    page: Page,
) -> ServiceResult<(Vec<parley_domain::call::Call>, i64)> {
    let mut c = svc.db.read().await?;
    let (rows, total) = repo::list(&mut c, scope, filter, page).await?;
    Ok((rows.iter().map(CallRow::to_api).collect::<Result<_, _>>()?, total))
}

/// `GET /api/v1/calls/{id}/transcript`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Transcript {
    pub call_id: String,
    pub segments: Vec<TranscriptSegment>,
}

pub async fn transcript(svc: &Services, scope: Scope, id: &str) -> ServiceResult<Transcript> {
    let mut c = svc.db.read().await?;
    let call = repo::get(&mut c, scope, id).await?.ok_or_else(|| not_found(id))?;
    Ok(Transcript { call_id: call.public_id, segments: repo::segments(&mut c, call.id).await? })
}

/// Ends a live call from Parley's side (`agent_hangup`), whichever instance
/// runs it; 409 once it has ended.
pub async fn hangup(svc: &Services, scope: Scope, id: &str) -> ServiceResult<parley_domain::call::Call> {
    let call = get(svc, scope, id).await?;
    if call.status.is_terminal() {
        return Err(ServiceError::Conflict(format!("Call {id} has already ended ({})", call.status.as_str())));
    }
    if !hang_up_here(svc, id) {
        // Another instance runs it (the id was checked against the caller's scope above).
        svc.signal(Signal::HangUp { call_id: id.to_owned() });
    }
    // Answer with the ended call: the engine records the end promptly.
    for _ in 0..250 {
        let now = get(svc, scope, id).await?;
        if now.status.is_terminal() {
            return Ok(now);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    get(svc, scope, id).await
}

/// A recording link, for `GET /api/v1/calls/{id}/recording`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RecordingLink {
    pub url: String,
    #[schema(value_type = String)]
    pub expires_at: Timestamp,
    pub content_type: String,
    pub duration_ms: Option<i64>,
}

/// The call and its recording's storage key; 404 for a call that is not
/// the scope's or has no recording.
async fn recorded(svc: &Services, scope: Scope, id: &str) -> ServiceResult<(repo::CallRow, String)> {
    let call = {
        let mut c = svc.db.read().await?;
        repo::get(&mut c, scope, id).await?.ok_or_else(|| not_found(id))?
    };
    match call.recording_key.clone() {
        Some(key) => Ok((call, key)),
        None => Err(ServiceError::NotFound { kind: "Recording of call", id: id.to_owned() }),
    }
}

/// A signed link to the call's recording: 404 without one, 503 when
/// storage cannot serve it (the file is checked, so a link is never dead).
pub async fn recording(svc: &Services, scope: Scope, id: &str) -> ServiceResult<RecordingLink> {
    let (call, key) = recorded(svc, scope, id).await?;
    let key = key.as_str();
    svc.storage
        .size(key)
        .await
        .map_err(|e| ServiceError::Unavailable(format!("Recording storage cannot produce a URL for call {id}: {e}")))?;
    let content_type = "audio/wav";
    let signed =
        svc.storage.link(key, content_type).await.map_err(|e| {
            ServiceError::Unavailable(format!("Recording storage cannot produce a URL for call {id}: {e}"))
        })?;
    Ok(RecordingLink {
        url: signed.url,
        expires_at: signed.expires_at,
        content_type: content_type.to_owned(),
        duration_ms: call.recording_duration_ms,
    })
}

/// A recording's waveform, for `GET /api/v1/calls/{id}/recording/waveform`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Waveform {
    /// How many columns each side has.
    pub points: usize,
    pub duration_ms: Option<i64>,
    /// The caller's (left channel's) loudest sample per column, in
    /// thousandths of full scale (0–1000).
    pub caller: Vec<u16>,
    /// The agent's (right channel's), likewise.
    pub agent: Vec<u16>,
}

/// Columns of a waveform: `points` query parameter bounds and default.
pub const WAVEFORM_POINTS: (i64, i64, i64) = (10, 4000, 1000);

/// The waveform of the call's recording, read from storage a chunk at a
/// time (a page draws a 10-minute call from ~10 KB, not its 19 MB).
pub async fn waveform(svc: &Services, scope: Scope, id: &str, points: usize) -> ServiceResult<Waveform> {
    const CHUNK: u64 = 1 << 20;
    let (call, key) = recorded(svc, scope, id).await?;
    let key = key.as_str();
    let unreadable = |e: String| ServiceError::Unavailable(format!("The recording of call {id} cannot be read: {e}"));
    let head = svc.storage.read(key, Some(0..4096)).await.map_err(|e| unreadable(e.to_string()))?;
    let layout = parley_voice::audio::WavLayout::read(&head.bytes)
        .ok_or_else(|| unreadable("it is not a 16-bit PCM WAV".into()))?;
    let mut peaks = parley_voice::audio::Peaks::new(layout, points);
    let end = (layout.data_start + layout.frames * layout.frame_bytes()).min(head.size);
    // Whole frames per read, so no sample straddles two.
    let step = CHUNK - CHUNK % layout.frame_bytes();
    let mut at = layout.data_start;
    while at < end {
        let upto = (at + step).min(end);
        let part = svc.storage.read(key, Some(at..upto)).await.map_err(|e| unreadable(e.to_string()))?;
        peaks.feed(&part.bytes);
        at = upto;
    }
    Ok(Waveform { points, duration_ms: call.recording_duration_ms, caller: peaks.caller, agent: peaks.agent })
}

/// The configured speech engines, speech-to-text first.
pub fn speech_engines(svc: &Services, page: Page) -> (Vec<parley_domain::call::SpeechEngineInfo>, i64) {
    let all: Vec<_> = svc
        .config
        .speech
        .list()
        .into_iter()
        .map(|e| parley_domain::call::SpeechEngineInfo {
            name: e.name,
            direction: e.direction.to_owned(),
            kind: e.kind.to_owned(),
            detail: e.detail,
        })
        .collect();
    let total = all.len() as i64;
    (all.into_iter().skip(page.offset as usize).take(page.limit as usize).collect(), total)
}
