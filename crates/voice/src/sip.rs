//! The `sip` telephony provider: calls through a SIP trunk (or straight to
//! a SIP URI), with rsipstack for signalling and our own RTP media
//! (G.711 at 20 ms, RFC 4733 DTMF, a jitter buffer).
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
use std::time::Duration;

use futures::future::BoxFuture;
use rsipstack::EndpointBuilder;
use rsipstack::dialog::dialog::{DialogState, TerminatedReason};
use rsipstack::dialog::dialog_layer::DialogLayer;
use rsipstack::dialog::invitation::InviteOption;
use rsipstack::platform::CancellationToken;
use rsipstack::sip::{StatusCode, StatusCodeKind, Uri};
use rsipstack::transport::TransportLayer;
use rsipstack::transport::udp::UdpConnection;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use crate::provider::{Command, Dial, DialError, FarEnd, Pcm, Placed, Provider, ProviderEvent};
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
    /// The address RTP sockets bind to and SDP advertises.
    pub media_ip: IpAddr,
}

/// The SIP provider: one endpoint, many calls.
pub struct SipProvider {
    settings: SipSettings,
    dialogs: Arc<DialogLayer>,
    local: SocketAddr,
    stop: CancellationToken,
}

impl Drop for SipProvider {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl SipProvider {
    /// Binds the signalling socket and starts the SIP stack.
    pub async fn start(settings: SipSettings) -> Result<SipProvider, String> {
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
        tokio::spawn(async move {
            let _keep = endpoint;
            let _ = inner.serve().await;
        });
        // In-dialog requests (the far end's BYE, NOTIFYs after a REFER)
        // go to their dialog; anything else is refused for now.
        let routing = dialogs.clone();
        tokio::spawn(async move {
            while let Some(mut tx) = incoming.recv().await {
                match routing.match_dialog(&tx) {
                    Some(mut dialog) => {
                        tokio::spawn(async move {
                            let _ = dialog.handle(&mut tx).await;
                        });
                    }
                    None => {
                        let _ = tx.reply(StatusCode::CallTransactionDoesNotExist).await;
                    }
                }
            }
        });
        Ok(SipProvider { settings, dialogs, local, stop })
    }

    /// The signalling address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The request URI for `to`: a SIP URI as given, or a number at the trunk.
    fn callee(&self, to: &str) -> Result<Uri, DialError> {
        let text = if to.starts_with("sip:") || to.starts_with("sips:") {
            to.to_owned()
        } else {
            let trunk = self.settings.trunk.as_deref().ok_or_else(|| {
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
            let callee = self.callee(&dial.to)?;
            let media = UdpSocket::bind((self.settings.media_ip, 0))
                .await
                .map_err(|e| DialError(format!("could not open an RTP socket: {e}")))?;
            let media_local = media.local_addr().map_err(|e| DialError(e.to_string()))?;
            let session = ulid::Ulid::new().0 as u64 & 0xFFFF_FFFF;
            let from_user = dial.from.clone().unwrap_or_else(|| self.settings.from.clone());
            let me = Uri::try_from(format!("sip:{}@{}", from_user.trim_start_matches('+'), self.local).as_str())
                .map_err(|e| DialError(format!("not a SIP caller id: {e}")))?;
            let option = InviteOption {
                caller: me.clone(),
                callee,
                contact: me,
                content_type: Some("application/sdp".into()),
                offer: Some(sdp::offer(media_local, session).into_bytes()),
                ..Default::default()
            };
            let (state_tx, state_rx) = self.dialogs.new_dialog_state_channel();
            let (dialog, answer) =
                self.dialogs.do_invite_async(option, state_tx).map_err(|e| DialError(format!("INVITE failed: {e}")))?;
            let (events_tx, events) = mpsc::channel(256);
            let (commands, commands_rx) = mpsc::channel(1024);
            let call = Call {
                dialog,
                dialogs: self.dialogs.clone(),
                events: events_tx,
                media,
                ring_timeout: dial.ring_timeout,
            };
            tokio::spawn(call.run(answer, state_rx, commands_rx));
            Ok(Placed { provider_call_id: session.to_string(), events, commands })
        })
    }
}

/// One call's signalling and media.
struct Call {
    dialog: rsipstack::dialog::invite_dialog::InviteDialog,
    dialogs: Arc<DialogLayer>,
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
        loop {
            tokio::select! {
                _ = clock.tick() => {
                    // Out: the next queued frame, or silence (RTP keeps flowing).
                    let frame = queue.pop_front().unwrap_or_else(|| silence.clone());
                    let packet = Packet { payload_type: codec.payload_type(), marker: false, sequence, timestamp, ssrc, payload: codec.encode(&frame) };
                    let _ = self.media.send_to(&packet.to_bytes(), agreed.remote).await;
                    sequence = sequence.wrapping_add(1);
                    timestamp = timestamp.wrapping_add(FRAME_SAMPLES as u32);
                    // In: one frame per tick once the jitter buffer has
                    // filled; a lost packet or a silent far end is silence,
                    // so the speech loop hears time pass (turns end).
                    primed = primed || jitter.held() >= JITTER_DEPTH;
                    if primed {
                        let pcm = match jitter.pop_due() {
                            Some(Some(payload)) => codec.decode(&payload),
                            Some(None) | None => silence.clone(),
                        };
                        let _ = self.events.send(ProviderEvent::Audio(pcm)).await;
                    }
                }
                received = self.media.recv_from(&mut buf) => {
                    let Ok((n, _from)) = received else { continue };
                    let Some(packet) = Packet::parse(&buf[..n]) else { continue };
                    if packet.payload_type == codec.payload_type() {
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
