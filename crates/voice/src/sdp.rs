//! SDP offer/answer for one audio stream (RFC 3264): G.711 (PCMU, PCMA)
//! and RFC 4733 telephone events. Parsing is the `sdp` crate's; the
//! negotiation (which codec, where to send RTP) is ours.

use std::io::Cursor;
use std::net::{IpAddr, SocketAddr};

use sdp::SessionDescription;

use crate::codec::G711;
use crate::rtp::TELEPHONE_EVENT_PT;

/// What was agreed for a call's audio.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// Where to send RTP.
    pub remote: SocketAddr,
    pub codec: G711,
    /// The far end's payload type for telephone events, if it takes them.
    pub dtmf: Option<u8>,
    /// `a=sendonly`/`inactive`: the far end holds the call.
    pub on_hold: bool,
}

/// Why an SDP body cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SdpError {
    #[error("the SDP cannot be parsed: {0}")]
    Syntax(String),
    #[error("the SDP has no audio stream")]
    NoAudio,
    #[error("the SDP's audio has no connection address")]
    NoAddress,
    #[error("no common codec: Parley speaks PCMU and PCMA")]
    NoCodec,
}

/// Parley's SDP for its RTP socket at `local`, offering `codecs` in order
/// of preference and telephone events; also the answer's shape.
pub fn describe(local: SocketAddr, session: u64, codecs: &[G711], dtmf: Option<u8>) -> String {
    let family = if local.is_ipv6() { "IP6" } else { "IP4" };
    let ip = local.ip();
    let mut formats: Vec<String> = codecs.iter().map(|c| c.payload_type().to_string()).collect();
    if let Some(pt) = dtmf {
        formats.push(pt.to_string());
    }
    let mut sdp = format!(
        "v=0\r\no=parley {session} {session} IN {family} {ip}\r\ns=Parley\r\nc=IN {family} {ip}\r\nt=0 0\r\n\
         m=audio {} RTP/AVP {}\r\n",
        local.port(),
        formats.join(" ")
    );
    for codec in codecs {
        let name = match codec {
            G711::Pcmu => "PCMU",
            G711::Pcma => "PCMA",
        };
        sdp.push_str(&format!("a=rtpmap:{} {name}/8000\r\n", codec.payload_type()));
    }
    if let Some(pt) = dtmf {
        sdp.push_str(&format!("a=rtpmap:{pt} telephone-event/8000\r\na=fmtp:{pt} 0-16\r\n"));
    }
    sdp.push_str("a=ptime:20\r\na=sendrecv\r\n");
    sdp
}

/// The offer Parley sends: PCMU, then PCMA, and telephone events.
pub fn offer(local: SocketAddr, session: u64) -> String {
    describe(local, session, &[G711::Pcmu, G711::Pcma], Some(TELEPHONE_EVENT_PT))
}

/// Reads the far end's SDP (an offer or an answer): the first audio stream
/// with a codec Parley speaks, in the far end's order of preference.
pub fn negotiate(remote_sdp: &str) -> Result<Negotiated, SdpError> {
    let parsed = SessionDescription::unmarshal(&mut Cursor::new(remote_sdp.as_bytes()))
        .map_err(|e| SdpError::Syntax(e.to_string()))?;
    let audio = parsed.media_descriptions.iter().find(|m| m.media_name.media == "audio").ok_or(SdpError::NoAudio)?;
    let address = audio
        .connection_information
        .as_ref()
        .or(parsed.connection_information.as_ref())
        .and_then(|c| c.address.as_ref())
        .and_then(|a| a.address.split('/').next().and_then(|ip| ip.parse::<IpAddr>().ok()))
        .ok_or(SdpError::NoAddress)?;
    let port = u16::try_from(audio.media_name.port.value).map_err(|_| SdpError::NoAddress)?;
    // Dynamic payload types are named by `a=rtpmap`; 0 and 8 are static.
    let rtpmap = |pt: &str| -> Option<String> {
        audio.attributes.iter().filter(|a| a.key == "rtpmap").find_map(|a| {
            let value = a.value.as_deref()?;
            let (p, name) = value.split_once(' ')?;
            (p == pt).then(|| name.to_ascii_lowercase())
        })
    };
    let codec = audio
        .media_name
        .formats
        .iter()
        .find_map(|pt| match (pt.as_str(), rtpmap(pt).as_deref()) {
            ("0", _) | (_, Some("pcmu/8000")) => Some(G711::Pcmu),
            ("8", _) | (_, Some("pcma/8000")) => Some(G711::Pcma),
            _ => None,
        })
        .ok_or(SdpError::NoCodec)?;
    let dtmf = audio
        .media_name
        .formats
        .iter()
        .find(|pt| rtpmap(pt).is_some_and(|name| name.starts_with("telephone-event/8000")))
        .and_then(|pt| pt.parse().ok());
    let on_hold = audio.has_attribute("sendonly") || audio.has_attribute("inactive") || address.is_unspecified();
    Ok(Negotiated { remote: SocketAddr::new(address, port), codec, dtmf, on_hold })
}

/// Parley's answer to `remote_offer`, for its RTP socket at `local`: the
/// codec chosen and telephone events if offered.
pub fn answer(remote_offer: &str, local: SocketAddr, session: u64) -> Result<(String, Negotiated), SdpError> {
    let agreed = negotiate(remote_offer)?;
    Ok((describe(local, session, &[agreed.codec], agreed.dtmf), agreed))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SDP SIPp's built-in `uac` scenario sends (with PCMA first, here).
    const SIPP_OFFER: &str = "v=0\r\no=user1 53655765 2353687637 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\n\
                              t=0 0\r\nm=audio 6000 RTP/AVP 8 0 101\r\na=rtpmap:8 PCMA/8000\r\na=rtpmap:0 PCMU/8000\r\n\
                              a=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15\r\n";

    #[test]
    fn the_answer_takes_the_offerers_first_common_codec_and_its_dtmf() {
        let local: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let (sdp, agreed) = answer(SIPP_OFFER, local, 7).unwrap();
        assert_eq!(agreed.remote, "127.0.0.1:6000".parse().unwrap());
        assert_eq!((agreed.codec, agreed.dtmf, agreed.on_hold), (G711::Pcma, Some(101), false));
        assert!(sdp.contains("m=audio 40000 RTP/AVP 8 101\r\n"), "{sdp}");
        assert!(sdp.contains("a=rtpmap:8 PCMA/8000") && sdp.contains("c=IN IP4 127.0.0.1"));
        // Our own answer reads back as what was agreed, from the other side.
        let back = negotiate(&sdp).unwrap();
        assert_eq!((back.remote, back.codec, back.dtmf), (local, G711::Pcma, Some(101)));
    }

    #[test]
    fn our_offer_prefers_pcmu_and_media_level_addresses_win() {
        let offer = offer("127.0.0.1:40002".parse().unwrap(), 1);
        assert_eq!(negotiate(&offer).unwrap().codec, G711::Pcmu);
        let media_level = "v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\nc=IN IP4 10.0.0.1\r\nt=0 0\r\n\
                           m=audio 7000 RTP/AVP 0\r\nc=IN IP4 127.0.0.2\r\na=sendonly\r\n";
        let agreed = negotiate(media_level).unwrap();
        assert_eq!(agreed.remote, "127.0.0.2:7000".parse().unwrap());
        assert!(agreed.on_hold);
        assert_eq!(agreed.dtmf, None);
    }

    #[test]
    fn unusable_offers_are_refused_with_their_reason() {
        let opus = "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\ns=-\r\nc=IN IP4 1.2.3.4\r\nt=0 0\r\nm=audio 7000 RTP/AVP 111\r\na=rtpmap:111 opus/48000/2\r\n";
        assert_eq!(negotiate(opus), Err(SdpError::NoCodec));
        let video = "v=0\r\no=- 1 1 IN IP4 1.2.3.4\r\ns=-\r\nc=IN IP4 1.2.3.4\r\nt=0 0\r\nm=video 7000 RTP/AVP 96\r\n";
        assert_eq!(negotiate(video), Err(SdpError::NoAudio));
        assert!(matches!(negotiate("nonsense"), Err(SdpError::Syntax(_))));
    }
}
