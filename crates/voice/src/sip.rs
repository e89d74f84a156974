//! The `sip` telephony provider: calls through a SIP trunk (or straight to
//! a SIP URI), with rsipstack for signalling and our own RTP media
//! (G.711 at 20 ms, RFC 4733 DTMF, a jitter buffer).
//!
//! Inbound INVITEs are accepted from the trunk's addresses and the
//! trusted ones (others get 403), rung (180) and handed over as an
//! [`InboundCall`] to answer or reject. With `register`, the endpoint keeps
//! itself registered at the trunk (digest auth); the same credentials
//! answer the trunk's challenges to outbound INVITEs.
//!
//! A placed call reports Ringing on 180/183, Answered on 200 (its SDP
//! negotiated), the far end's audio as live 20 ms frames, DTMF digits, and
//! how it ended: 486/600 → busy; 408/480/487 → no answer; anything else →
//! failed; a BYE → hung up. Commands play audio (queued, paced at 20 ms
//! by an RTP clock), stop playback (barge-in), send DTMF, transfer
//! (REFER) and hang up (CANCEL while ringing, BYE once answered).

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use rsipstack::EndpointBuilder;
use rsipstack::dialog::authenticate::Credential;
use rsipstack::dialog::dialog::{DialogState, TerminatedReason};
use rsipstack::dialog::dialog_layer::DialogLayer;
use rsipstack::dialog::invitation::InviteOption;
use rsipstack::dialog::invite_dialog::InviteDialog;
use rsipstack::dialog::registration::Registration;
use rsipstack::platform::CancellationToken;
use rsipstack::sip::{HeadersExt, StatusCode, StatusCodeKind, ToTypedHeader, Uri};
use rsipstack::transport::TransportLayer;
use rsipstack::transport::udp::UdpConnection;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use crate::provider::{
    Command, Dial, DialError, FarEnd, InboundCall, Pcm, Placed, Provider, ProviderEvent, Refusal, Ringing,
};
use crate::rtp::{self, DtmfReceiver, JitterBuffer, Packet};
use crate::sdp;
use crate::speech::FRAME_SAMPLES;

/// Where Parley's SIP side listens, and where calls go.
#[derive(Debug, Clone)]
pub struct SipSettings {
    /// The signalling socket (`127.0.0.1:5060`; port 0 for any).
    pub bind: SocketAddr,
    /// The trunk (`host:port`) numbers are dialled through; SIP URIs are
    /// dialled directly without one.
    pub trunk: Option<String>,
    /// The caller id user part (`+14155550100`, `parley`).
    pub from: String,
    /// The address RTP sockets bind to.
    pub media_ip: IpAddr,
    /// Digest credentials at the trunk.
    pub credential: Option<SipCredential>,
    /// Keep registered at the trunk (so it sends inbound calls here).
    pub register: bool,
    /// Addresses besides the trunk's that may send inbound INVITEs.
    pub trusted: Vec<IpAddr>,
    /// The ports RTP sockets take (inclusive); any free port without.
    pub rtp_ports: Option<(u16, u16)>,
    /// The address SDP and Contact advertise (behind NAT); `media_ip` without.
    pub public_address: Option<IpAddr>,
}

impl SipSettings {
    /// Listens on `bind`, media on its address, nothing else set.
    pub fn local(bind: SocketAddr, from: &str) -> SipSettings {
        SipSettings {
            bind,
            trunk: None,
            from: from.to_owned(),
            media_ip: bind.ip(),
            credential: None,
            register: false,
            trusted: Vec::new(),
            rtp_ports: None,
            public_address: None,
        }
    }
}

/// A username and password at the trunk.
#[derive(Clone)]
pub struct SipCredential {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SipCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SipCredential {{ username: {:?}, password: <secret> }}", self.username)
    }
}

impl SipCredential {
    fn digest(&self) -> Credential {
        Credential {
            username: self.username.clone(),
            password: self.password.clone(),
            realm: None,
            auth_username: None,
        }
    }
}

/// RTP counters over all the provider's calls (benchmarks read them;
/// operators could export them).
pub struct MediaStats {
    pub packets_sent: AtomicU64,
    pub packets_received: AtomicU64,
    /// Audio sequence numbers skipped in what arrived: packets lost on
    /// the way (or so late they came out of order).
    pub packets_lost: AtomicU64,
    /// How late each packet went out after its 20 ms slot, counted in
    /// 100 µs buckets; the last bucket holds everything from 100 ms.
    send_lateness: Box<[AtomicU64]>,
}

const LATENESS_BUCKETS: usize = 1001;

impl Default for MediaStats {
    fn default() -> Self {
        MediaStats {
            packets_sent: AtomicU64::new(0),
            packets_received: AtomicU64::new(0),
            packets_lost: AtomicU64::new(0),
            send_lateness: (0..LATENESS_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl MediaStats {
    fn sent_late(&self, late: Duration) {
        let bucket = ((late.as_micros() / 100) as usize).min(LATENESS_BUCKETS - 1);
        self.send_lateness[bucket].fetch_add(1, Ordering::Relaxed);
        self.packets_sent.fetch_add(1, Ordering::Relaxed);
    }

    /// The `q` quantile (0–1) of send lateness, to 100 µs (`None` before any packet).
    pub fn send_lateness_quantile(&self, q: f64) -> Option<Duration> {
        let counts: Vec<u64> = self.send_lateness.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((total as f64 * q).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        let bucket = counts.iter().position(|c| {
            seen += c;
            seen >= rank
        })?;
        Some(Duration::from_micros(bucket as u64 * 100 + 100))
    }
}

/// The SIP provider: one endpoint, many calls.
pub struct SipProvider {
    shared: Arc<Shared>,
    stop: CancellationToken,
}

/// What the provider's tasks share.
struct Shared {
    settings: SipSettings,
    dialogs: Arc<DialogLayer>,
    local: SocketAddr,
    /// Addresses inbound INVITEs are accepted from.
    trusted: Vec<IpAddr>,
    stats: Arc<MediaStats>,
}

/// A SIP call ringing at Parley (rung with 180, its SDP answer ready).
struct SipRinging {
    dialog: InviteDialog,
    shared: Arc<Shared>,
    states: rsipstack::dialog::dialog::DialogStateReceiver,
    media: UdpSocket,
    answer_sdp: String,
    agreed: sdp::Negotiated,
}

impl Ringing for SipRinging {
    /// 200 with the SDP answer, then the media.
    fn answer(self: Box<Self>) -> BoxFuture<'static, Result<Placed, DialError>> {
        let SipRinging { dialog, shared, mut states, media, answer_sdp, agreed } = *self;
        Box::pin(async move {
            let content_type = rsipstack::sip::Header::ContentType("application/sdp".into());
            dialog
                .accept(Some(vec![content_type]), Some(answer_sdp.into_bytes()))
                .map_err(|e| DialError(format!("could not answer: {e}")))?;
            let (events_tx, events) = mpsc::channel(256);
            let (commands, mut commands_rx) = mpsc::channel(1024);
            let provider_call_id = dialog.id().call_id.clone();
            let call = shared.call(dialog, events_tx, media, Duration::ZERO);
            tokio::spawn(async move {
                let _ = call.events.send(ProviderEvent::Answered).await;
                let ended = call.talk(agreed, &mut states, &mut commands_rx).await;
                let _ = call.events.send(ProviderEvent::Ended(ended)).await;
                call.dialogs.remove_dialog(&call.dialog.id());
            });
            Ok(Placed { provider_call_id, events, commands, client_token: None })
        })
    }

    /// The SIP status that says why.
    fn refuse(self: Box<Self>, why: Refusal) {
        let code = match why {
            Refusal::NotFound => StatusCode::NotFound,
            Refusal::Forbidden => StatusCode::Forbidden,
            Refusal::Busy => StatusCode::BusyHere,
            Refusal::Unavailable => StatusCode::TemporarilyUnavailable,
            Refusal::Repeated => StatusCode::LoopDetected,
        };
        let _ = self.dialog.reject(Some(code), None);
        self.shared.dialogs.remove_dialog(&self.dialog.id());
    }
}

impl Drop for SipProvider {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl SipProvider {
    /// Binds the signalling socket and starts the SIP stack; inbound calls
    /// arrive on the receiver.
    pub async fn start(settings: SipSettings) -> Result<(SipProvider, mpsc::Receiver<InboundCall>), String> {
        let stop = CancellationToken::new();
        let transports = TransportLayer::new(stop.child_token());
        let udp = UdpConnection::create_connection(settings.bind, None, Some(stop.child_token()))
            .await
            .map_err(|e| format!("could not bind SIP on {}: {e}", settings.bind))?;
        let local = udp.get_addr().get_socketaddr().map_err(|e| e.to_string())?;
        transports.add_transport(udp.into());
        let endpoint = EndpointBuilder::new()
            .with_user_agent(concat!("Parley/", env!("CARGO_PKG_VERSION")))
            .with_transport_layer(transports)
            .with_cancel_token(stop.clone())
            .build();
        let mut incoming = endpoint.incoming_transactions().map_err(|e| e.to_string())?;
        let dialogs = Arc::new(DialogLayer::new(endpoint.inner.clone()));
        let inner = endpoint.inner.clone();
        let mut trusted = settings.trusted.clone();
        if let Some(trunk) = &settings.trunk {
            let hosts = tokio::net::lookup_host(trunk.as_str())
                .await
                .map_err(|e| format!("telephony.sip.trunk `{trunk}` does not resolve: {e}"))?;
            trusted.extend(hosts.map(|a| a.ip()));
        }
        if settings.register {
            let (Some(trunk), Some(credential)) = (&settings.trunk, &settings.credential) else {
                return Err("telephony.sip.register needs a trunk, a username and a password".into());
            };
            tokio::spawn(keep_registered(inner.clone(), trunk.clone(), credential.digest(), stop.child_token()));
        }
        tokio::spawn(async move {
            let _keep = endpoint;
            let _ = inner.serve().await;
        });
        let shared = Arc::new(Shared { settings, dialogs, local, trusted, stats: Arc::default() });
        let (inbound_tx, inbound) = mpsc::channel(64);
        // In-dialog requests (the far end's BYE, NOTIFYs after a REFER) go
        // to their dialog; new INVITEs become inbound calls; OPTIONS (a
        // trunk's keep-alive) are answered; anything else is refused.
        let routing = shared.clone();
        tokio::spawn(async move {
            while let Some(mut tx) = incoming.recv().await {
                match routing.dialogs.match_dialog(&tx) {
                    Some(mut dialog) => {
                        tokio::spawn(async move {
                            let _ = dialog.handle(&mut tx).await;
                        });
                    }
                    None if tx.original.method == rsipstack::sip::Method::Invite => {
                        let (shared, inbound_tx) = (routing.clone(), inbound_tx.clone());
                        tokio::spawn(async move { ring(shared, tx, inbound_tx).await });
                    }
                    None if tx.original.method == rsipstack::sip::Method::Options => {
                        let _ = tx.reply(StatusCode::OK).await;
                    }
                    None => {
                        let _ = tx.reply(StatusCode::CallTransactionDoesNotExist).await;
                    }
                }
            }
        });
        Ok((SipProvider { shared, stop }, inbound))
    }

    /// The signalling address.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local
    }

    /// RTP counters over all calls so far.
    pub fn media_stats(&self) -> Arc<MediaStats> {
        self.shared.stats.clone()
    }

    /// The request URI for `to`: a SIP URI as given, or a number at the trunk.
    fn callee(&self, to: &str) -> Result<Uri, DialError> {
        let text = if to.starts_with("sip:") || to.starts_with("sips:") {
            to.to_owned()
        } else {
            let trunk = self.shared.settings.trunk.as_deref().ok_or_else(|| {
                DialError(
                    "no SIP trunk is configured to dial numbers; dial a sip: URI or set telephony.sip.trunk".into(),
                )
            })?;
            format!("sip:{}@{trunk}", to.trim_start_matches("tel:"))
        };
        Uri::try_from(text.as_str()).map_err(|e| DialError(format!("not a SIP URI: {e}")))
    }
}

impl Provider for SipProvider {
    fn name(&self) -> &'static str {
        "sip"
    }

    fn streams_audio(&self) -> bool {
        true
    }

    fn dial(&self, dial: Dial) -> BoxFuture<'_, Result<Placed, DialError>> {
        Box::pin(async move {
            let shared = &self.shared;
            let callee = self.callee(&dial.to)?;
            let (media, advertised) = shared.media_socket().await?;
            let session = ulid::Ulid::new().0 as u64 & 0xFFFF_FFFF;
            let from_user = dial.from.clone().unwrap_or_else(|| shared.settings.from.clone());
            let me =
                Uri::try_from(format!("sip:{}@{}", from_user.trim_start_matches('+'), shared.contact_host()).as_str())
                    .map_err(|e| DialError(format!("not a SIP caller id: {e}")))?;
            let option = InviteOption {
                caller: me.clone(),
                callee,
                contact: me,
                content_type: Some("application/sdp".into()),
                offer: Some(sdp::offer(advertised, session).into_bytes()),
                credential: shared.settings.credential.as_ref().map(SipCredential::digest),
                ..Default::default()
            };
            let (state_tx, state_rx) = shared.dialogs.new_dialog_state_channel();
            let (dialog, answer) = shared
                .dialogs
                .do_invite_async(option, state_tx)
                .map_err(|e| DialError(format!("INVITE failed: {e}")))?;
            let (events_tx, events) = mpsc::channel(256);
            let (commands, commands_rx) = mpsc::channel(1024);
            let call = shared.call(dialog, events_tx, media, dial.ring_timeout);
            tokio::spawn(call.run(answer, state_rx, commands_rx));
            Ok(Placed { provider_call_id: session.to_string(), events, commands, client_token: None })
        })
    }
}

impl Shared {
    /// An RTP socket (in `rtp_ports` if set) and the address SDP advertises for it.
    async fn media_socket(&self) -> Result<(UdpSocket, SocketAddr), DialError> {
        let ip = self.settings.media_ip;
        let socket = match self.settings.rtp_ports {
            None => UdpSocket::bind((ip, 0)).await.ok(),
            Some((low, high)) => {
                // Random tries, then a sweep: a busy range fails, not hangs.
                let span = u32::from(high - low) + 1;
                let start = (ulid::Ulid::new().0 as u32) % span;
                let mut found = None;
                for i in 0..span.min(4096) {
                    let port = low + ((start + i) % span) as u16;
                    if let Ok(s) = UdpSocket::bind((ip, port)).await {
                        found = Some(s);
                        break;
                    }
                }
                found
            }
        };
        let socket = socket.ok_or_else(|| DialError("no free RTP port (telephony.sip.rtp_ports)".into()))?;
        let local = socket.local_addr().map_err(|e| DialError(e.to_string()))?;
        let advertised = SocketAddr::new(self.settings.public_address.unwrap_or(local.ip()), local.port());
        Ok((socket, advertised))
    }

    /// One call's signalling and media, reporting to `events`.
    fn call(
        &self,
        dialog: InviteDialog,
        events: mpsc::Sender<ProviderEvent>,
        media: UdpSocket,
        ring_timeout: Duration,
    ) -> Call {
        Call { dialog, dialogs: self.dialogs.clone(), stats: self.stats.clone(), events, media, ring_timeout }
    }

    /// The host:port Contact headers name.
    fn contact_host(&self) -> SocketAddr {
        SocketAddr::new(self.settings.public_address.unwrap_or(self.local.ip()), self.local.port())
    }
}

/// An INVITE arrived: checks where from, rings, negotiates the SDP and
/// hands the call over; refused before a dialog exists when it cannot be
/// taken.
async fn ring(
    shared: Arc<Shared>,
    mut tx: rsipstack::transaction::transaction::Transaction,
    inbound: mpsc::Sender<InboundCall>,
) {
    let source = source_ip(&tx.original);
    if !source.is_some_and(|ip| shared.trusted.contains(&ip)) {
        tracing::warn!(?source, "refused an INVITE from an address that is not the trunk's nor trusted");
        let _ = tx.reply(StatusCode::Forbidden).await;
        return;
    }
    let offer = String::from_utf8_lossy(&tx.original.body).into_owned();
    let Ok((media, advertised)) = shared.media_socket().await else {
        let _ = tx.reply(StatusCode::ServiceUnavailable).await;
        return;
    };
    let session = ulid::Ulid::new().0 as u64 & 0xFFFF_FFFF;
    let (answer_sdp, agreed) = match sdp::answer(&offer, advertised, session) {
        Ok(answered) => answered,
        Err(e) => {
            tracing::info!(error = %e, "refused an INVITE whose SDP offer is unusable");
            let _ = tx.reply(StatusCode::NotAcceptableHere).await;
            return;
        }
    };
    let user = |uri: &Uri| uri.user().map(str::to_owned).unwrap_or_else(|| uri.host_with_port.to_string());
    let to = user(&tx.original.uri);
    let from = tx.original.from_header().ok().and_then(|h| h.typed().ok()).map(|f| user(&f.uri)).unwrap_or_default();
    let contact = Uri::try_from(format!("sip:{}@{}", to, shared.contact_host()).as_str()).ok();
    let (state_tx, states) = shared.dialogs.new_dialog_state_channel();
    let dialog = match shared.dialogs.get_or_create_server_invite(&tx, state_tx, None, contact) {
        Ok(dialog) => dialog,
        Err(e) => {
            tracing::warn!(error = %e, "could not take an INVITE");
            let _ = tx.reply(StatusCode::ServerInternalError).await;
            return;
        }
    };
    let _ = dialog.ringing(None, None);
    let line = SipRinging { dialog: dialog.clone(), shared: shared.clone(), states, media, answer_sdp, agreed };
    let call = InboundCall::new("sip", from, to, dialog.id().call_id.clone(), Box::new(line));
    if let Err(refused) = inbound.send(call).await {
        refused.0.refuse(Refusal::Unavailable);
    }
    // The dialog answers the INVITE's transaction (and the caller's CANCEL, ACK, BYE).
    let mut dialog = rsipstack::dialog::dialog::Dialog::Invite(dialog);
    let _ = dialog.handle(&mut tx).await;
}

/// Where a request came from: its top Via's `received` (which the stack
/// sets when the packet's source differs from what the Via claims), else
/// the Via's host.
fn source_ip(request: &rsipstack::sip::Request) -> Option<IpAddr> {
    let via = request.via_header().ok()?.typed().ok()?;
    match via.received() {
        Some(received) => received.ok(),
        None => via.sent_by().host.to_string().parse().ok(),
    }
}

/// Registers at the trunk and renews before the registration expires;
/// retries a minute after a failure.
async fn keep_registered(
    endpoint: rsipstack::transaction::endpoint::EndpointInnerRef,
    trunk: String,
    credential: Credential,
    stop: CancellationToken,
) {
    let Ok(server) = Uri::try_from(format!("sip:{trunk}").as_str()) else {
        tracing::error!(trunk, "telephony.sip.trunk is not a SIP host");
        return;
    };
    let mut registration = Registration::new(endpoint, Some(credential));
    loop {
        let wait = match registration.register(server.clone(), Some(REGISTER_EXPIRES_S)).await {
            Ok(response) if response.status_code.kind() == StatusCodeKind::Successful => {
                let granted = registration.granted_expires.unwrap_or(REGISTER_EXPIRES_S);
                tracing::info!(trunk, expires = granted, "registered at the SIP trunk");
                Duration::from_secs(u64::from(granted.max(60)) / 2)
            }
            Ok(response) => {
                tracing::warn!(trunk, status = %response.status_code, "the SIP trunk refused the registration");
                Duration::from_secs(60)
            }
            Err(e) => {
                tracing::warn!(trunk, error = %e, "could not register at the SIP trunk");
                Duration::from_secs(60)
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// How long a registration is asked to last.
const REGISTER_EXPIRES_S: u32 = 600;

/// One call's signalling and media.
struct Call {
    dialog: InviteDialog,
    dialogs: Arc<DialogLayer>,
    stats: Arc<MediaStats>,
    events: mpsc::Sender<ProviderEvent>,
    media: UdpSocket,
    ring_timeout: Duration,
}

/// Frames the jitter buffer holds before playout starts (60 ms).
const JITTER_DEPTH: usize = 3;

type Answer = rsipstack::platform::JoinHandle<rsipstack::dialog::invitation::InviteAsyncResult>;

fn far_end_of(code: u16) -> FarEnd {
    match code {
        486 | 600 => FarEnd::Busy,
        408 | 480 | 487 => FarEnd::NoAnswer,
        _ => FarEnd::Failed,
    }
}

impl Call {
    async fn run(
        self,
        answer: Answer,
        mut states: rsipstack::dialog::dialog::DialogStateReceiver,
        mut commands: mpsc::Receiver<Command>,
    ) {
        // Ringing: until the final answer, the ring timeout, or our hang-up.
        let mut answer = answer;
        let mut rang = false;
        let deadline = tokio::time::sleep(self.ring_timeout);
        tokio::pin!(deadline);
        let response = loop {
            tokio::select! {
                done = &mut answer => break done.ok().and_then(Result::ok).and_then(|(_, r)| r),
                Some(state) = states.recv() => {
                    if let DialogState::Early(..) = state && !rang {
                        rang = true;
                        let _ = self.events.send(ProviderEvent::Ringing).await;
                    }
                }
                command = commands.recv() => match command {
                    Some(Command::Hangup) | None => {
                        let _ = self.dialog.cancel().await;
                        let _ = self.events.send(ProviderEvent::Ended(FarEnd::HungUp)).await;
                        return;
                    }
                    Some(_) => {} // nothing to play before the answer
                },
                _ = &mut deadline => {
                    let _ = self.dialog.cancel().await;
                    let _ = self.events.send(ProviderEvent::Ended(FarEnd::NoAnswer)).await;
                    return;
                }
            }
        };
        let Some(response) = response else {
            let _ = self.events.send(ProviderEvent::Ended(FarEnd::Failed)).await;
            return;
        };
        if response.status_code.kind() != StatusCodeKind::Successful {
            let _ = self.events.send(ProviderEvent::Ended(far_end_of(response.status_code.code()))).await;
            return;
        }
        let agreed = match sdp::negotiate(&String::from_utf8_lossy(&response.body)) {
            Ok(agreed) => agreed,
            Err(e) => {
                tracing::warn!(error = %e, "the answer's SDP is unusable; hanging up");
                let _ = self.dialog.bye().await;
                let _ = self.events.send(ProviderEvent::Ended(FarEnd::Failed)).await;
                return;
            }
        };
        let _ = self.events.send(ProviderEvent::Answered).await;
        let ended = self.talk(agreed, &mut states, &mut commands).await;
        let _ = self.events.send(ProviderEvent::Ended(ended)).await;
        self.dialogs.remove_dialog(&self.dialog.id());
    }

    /// The answered call: media both ways until either side ends it.
    async fn talk(
        &self,
        agreed: sdp::Negotiated,
        states: &mut rsipstack::dialog::dialog::DialogStateReceiver,
        commands: &mut mpsc::Receiver<Command>,
    ) -> FarEnd {
        let codec = agreed.codec;
        let ssrc = ulid::Ulid::new().0 as u32;
        let (mut sequence, mut timestamp) = (ulid::Ulid::new().0 as u16, ulid::Ulid::new().0 as u32);
        let mut queue: VecDeque<Pcm> = VecDeque::new();
        let mut jitter = JitterBuffer::new(JITTER_DEPTH);
        let mut primed = false;
        let mut dtmf = DtmfReceiver::default();
        let mut buf = vec![0u8; 2048];
        let mut clock = tokio::time::interval(Duration::from_millis(20));
        clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let silence = vec![0i16; FRAME_SAMPLES];
        let mut last_heard: Option<u16> = None;
        loop {
            tokio::select! {
                slot = clock.tick() => {
                    // Out: the next queued frame, or silence (RTP keeps flowing).
                    let frame = queue.pop_front().unwrap_or_else(|| silence.clone());
                    let packet = Packet { payload_type: codec.payload_type(), marker: false, sequence, timestamp, ssrc, payload: codec.encode(&frame) };
                    let _ = self.media.send_to(&packet.to_bytes(), agreed.remote).await;
                    self.stats.sent_late(slot.elapsed());
                    sequence = sequence.wrapping_add(1);
                    timestamp = timestamp.wrapping_add(FRAME_SAMPLES as u32);
                    // In: one frame per tick once the jitter buffer has
                    // filled; a lost packet or a silent far end is silence,
                    // so the speech loop hears time pass (turns end).
                    // Before it fills (or from a far end that sends no
                    // audio at all) that is silence too.
                    primed = primed || jitter.held() >= JITTER_DEPTH;
                    let due = if primed { jitter.pop_due().flatten() } else { None };
                    let pcm = due.map_or_else(|| silence.clone(), |payload| codec.decode(&payload));
                    let _ = self.events.send(ProviderEvent::Audio(pcm)).await;
                }
                received = self.media.recv_from(&mut buf) => {
                    let Ok((n, _from)) = received else { continue };
                    let Some(packet) = Packet::parse(&buf[..n]) else { continue };
                    if packet.payload_type == codec.payload_type() {
                        self.stats.packets_received.fetch_add(1, Ordering::Relaxed);
                        let step = last_heard.map_or(1, |last| packet.sequence.wrapping_sub(last));
                        if step > 0 && step < 0x8000 {
                            self.stats.packets_lost.fetch_add(u64::from(step - 1), Ordering::Relaxed);
                            last_heard = Some(packet.sequence);
                        }
                        jitter.push(packet.sequence, packet.payload);
                    } else if Some(packet.payload_type) == agreed.dtmf && let Some(digit) = dtmf.packet(&packet) {
                        let _ = self.events.send(ProviderEvent::Dtmf(digit)).await;
                    }
                }
                Some(state) = states.recv() => {
                    if let DialogState::Terminated(_, reason) = state {
                        return match reason {
                            TerminatedReason::UacBye | TerminatedReason::UasBye => FarEnd::HungUp,
                            _ => FarEnd::Failed,
                        };
                    }
                }
                command = commands.recv() => match command {
                    Some(Command::Play(pcm)) => queue.extend(pcm.chunks(FRAME_SAMPLES).map(|c| {
                        let mut frame = c.to_vec();
                        frame.resize(FRAME_SAMPLES, 0);
                        frame
                    })),
                    Some(Command::StopPlayback) => queue.clear(),
                    Some(Command::SendDtmf(digits)) => {
                        if let Some(pt) = agreed.dtmf {
                            for digit in digits.chars() {
                                for (marker, payload) in rtp::dtmf_payloads(digit, 100) {
                                    let packet = Packet { payload_type: pt, marker, sequence, timestamp, ssrc, payload };
                                    let _ = self.media.send_to(&packet.to_bytes(), agreed.remote).await;
                                    sequence = sequence.wrapping_add(1);
                                }
                                timestamp = timestamp.wrapping_add(800);
                            }
                        }
                    }
                    Some(Command::Transfer(to)) => {
                        let _ = self.dialog.refer(to.as_str(), None, None).await;
                        let _ = self.dialog.bye().await;
                        return FarEnd::HungUp;
                    }
                    Some(Command::Hangup) | None => {
                        let _ = self.dialog.bye().await;
                        return FarEnd::HungUp;
                    }
                },
            }
        }
    }
}
