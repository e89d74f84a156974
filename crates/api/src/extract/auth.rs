//! Who is calling. The admission layer (`middleware::admit`) reads the
//! credential once per request, before the rate limiter, so that quotas are
//! counted per principal rather than per header spelling; handlers take
//! the outcome with the [`Auth`] extractor.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use parley_services::tenancy::auth::{self, Principal};
use parley_services::tenancy::oauth;

use crate::error::ApiError;
use crate::state::AppState;

/// The authenticated caller. Put it first among a handler's arguments, so
/// that a request without valid credentials gets its 401 before anything
/// else is looked at.
#[derive(Debug, Clone)]
pub struct Auth(pub Principal);

impl Auth {
    pub fn scope(&self) -> parley_domain::Scope {
        self.0.scope
    }
}

/// What a request's credentials proved, decided once by the admission layer.
#[derive(Debug, Clone)]
pub(crate) enum Identity {
    /// No credential was sent.
    Anonymous,
    Authenticated(Principal),
    /// A credential was sent and refused (the 401 text says which kind).
    Refused(&'static str),
    /// The credential headers themselves are unusable (a 400).
    Malformed(&'static str),
}

impl Identity {
    /// The rate-limit bucket of an authenticated caller: the key or the user,
    /// however the credential was spelled.
    pub fn principal_bucket(&self) -> Option<String> {
        match self {
            Identity::Authenticated(p) => Some(match p.credential {
                auth::Credential::ApiKey { key_id, .. } => format!("key:{key_id}"),
                auth::Credential::User { user_id, .. } => format!("user:{user_id}"),
                auth::Credential::OAuth { grant_id, .. } => format!("grant:{grant_id}"),
            }),
            _ => None,
        }
    }
}

/// What a request presents: an API key (in `X-API-Key`, or as
/// `Authorization: Bearer parley_…`, which MCP clients send) or a dashboard
/// access token (`Authorization: Bearer <JWT>`).
enum Presented {
    ApiKey(String),
    AccessToken(String),
    /// An MCP client's OAuth access token (`pmcp_at_…`).
    McpToken(String),
}

fn presented(headers: &HeaderMap) -> Result<Option<Presented>, &'static str> {
    let mut api_keys = headers.get_all("x-api-key").iter();
    let mut bearers = headers.get_all(header::AUTHORIZATION).iter();
    let (api_key, bearer) = (api_keys.next(), bearers.next());
    if api_keys.next().is_some() || bearers.next().is_some() {
        return Err("Send one credential header, once: X-API-Key or Authorization appears twice");
    }
    if api_key.is_some() && bearer.is_some() {
        return Err("Send either X-API-Key or Authorization, not both");
    }
    if let Some(v) = api_key {
        return Ok(Some(Presented::ApiKey(v.to_str().unwrap_or_default().trim().to_owned())));
    }
    if let Some(v) = bearer {
        let v = v.to_str().unwrap_or_default().trim();
        let token = v
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim().to_owned())
            .unwrap_or_default();
        return Ok(Some(if token.starts_with("parley_") {
            Presented::ApiKey(token)
        } else if token.starts_with(parley_domain::oauth::ACCESS_TOKEN_PREFIX) {
            Presented::McpToken(token)
        } else {
            Presented::AccessToken(token)
        }));
    }
    Ok(None)
}

/// Checks the request's credential, if any. Only a failing database is an error.
/// OAuth access tokens are bound to the MCP endpoint (RFC 8707): anywhere
/// else (`for_mcp` false) they are refused without being looked up.
pub(crate) async fn identify(state: &AppState, headers: &HeaderMap, for_mcp: bool) -> Result<Identity, ApiError> {
    let presented = match presented(headers) {
        Ok(Some(p)) => p,
        Ok(None) => return Ok(Identity::Anonymous),
        Err(why) => return Ok(Identity::Malformed(why)),
    };
    let outcome = match &presented {
        Presented::ApiKey(raw) => auth::authenticate_api_key(&state.services, raw).await?.ok(),
        Presented::AccessToken(token) => auth::authenticate_bearer(&state.services, token).await?,
        Presented::McpToken(_) if !for_mcp => {
            return Ok(Identity::Refused("This OAuth token is for the MCP endpoint (/mcp) only"));
        }
        Presented::McpToken(token) => oauth::authenticate_access_token(&state.services, token).await?,
    };
    Ok(match (outcome, presented) {
        (Some(principal), _) => Identity::Authenticated(principal),
        (None, Presented::ApiKey(_)) => Identity::Refused("Invalid or revoked API key"),
        (None, Presented::AccessToken(_) | Presented::McpToken(_)) => {
            Identity::Refused("Invalid or expired access token")
        }
    })
}

impl<S: Send + Sync> FromRequestParts<S> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        // Taken, not cloned: a handler asks once.
        match parts.extensions.remove::<Identity>() {
            Some(Identity::Authenticated(p)) => Ok(Auth(p)),
            Some(Identity::Anonymous) => Err(ApiError::unauthorized("Missing API key")),
            Some(Identity::Refused(why)) => Err(ApiError::unauthorized(why)),
            Some(Identity::Malformed(why)) => Err(ApiError::bad_request(why)),
            None => Err(ApiError::Internal("the admission layer did not identify the request".into())),
        }
    }
}

/// The peer's IP address (if known), for per-IP limits.
#[derive(Debug, Clone, Copy)]
pub struct ClientIp(pub Option<std::net::IpAddr>);

impl ClientIp {
    /// The client as the request context found it (behind a trusted proxy,
    /// the address it forwarded for), else the peer.
    pub(crate) fn of(extensions: &axum::http::Extensions) -> ClientIp {
        extensions.get::<ClientIp>().copied().unwrap_or_else(|| ClientIp::peer(extensions))
    }

    /// The TCP peer.
    pub(crate) fn peer(extensions: &axum::http::Extensions) -> ClientIp {
        ClientIp(extensions.get::<axum::extract::ConnectInfo<crate::listener::PeerAddr>>().map(|c| c.0.0.ip()))
    }

    /// The client behind `trusted` proxies: when the peer is one of them,
    /// the rightmost address of `X-Forwarded-For` that is not (each proxy
    /// appends the address it saw; what a client wrote in stays on the
    /// left and is never believed). From any other peer, or without the
    /// header, the peer; at a hop that is not an address, the last trusted
    /// proxy before it.
    pub(crate) fn behind(peer: ClientIp, headers: &axum::http::HeaderMap, trusted: &[ipnet::IpNet]) -> ClientIp {
        let is_trusted = |ip: &std::net::IpAddr| trusted.iter().any(|net| net.contains(ip));
        let Some(peer_ip) = peer.0.filter(|ip| is_trusted(ip)) else { return peer };
        let mut hops: Vec<&str> = Vec::new();
        for value in headers.get_all("x-forwarded-for") {
            let Ok(value) = value.to_str() else { return peer };
            hops.extend(value.split(',').map(str::trim));
        }
        let mut client = peer_ip;
        for hop in hops.iter().rev() {
            let Ok(ip) = hop.parse::<std::net::IpAddr>() else { return ClientIp(Some(client)) };
            client = ip;
            if !is_trusted(&ip) {
                break;
            }
        }
        ClientIp(Some(client))
    }

    /// The bucket of per-IP quotas. An IPv6 client is counted by its /64:
    /// one subscriber usually holds a whole /64, and would otherwise have
    /// 2^64 fresh quotas.
    pub(crate) fn bucket(&self) -> String {
        match self.0 {
            Some(std::net::IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_none() => {
                let s = v6.segments();
                format!("ip6:{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
            Some(std::net::IpAddr::V6(v6)) => format!("ip:{}", v6.to_ipv4_mapped().expect("checked above")),
            Some(ip) => format!("ip:{ip}"),
            None => "ip:".to_owned(),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(ClientIp::of(&parts.extensions))
    }
}

#[cfg(test)]
mod tests {
    use super::ClientIp;

    #[test]
    fn ipv6_clients_share_the_quota_of_their_64() {
        let bucket = |ip: &str| ClientIp(Some(ip.parse().unwrap())).bucket();
        assert_eq!(bucket("2001:db8:1:2:aaaa::1"), bucket("2001:db8:1:2:ffff:ffff:ffff:ffff"));
        assert_ne!(bucket("2001:db8:1:2::1"), bucket("2001:db8:1:3::1"));
        assert_eq!(bucket("::ffff:192.0.2.7"), bucket("192.0.2.7"));
        assert_eq!(bucket("192.0.2.7"), "ip:192.0.2.7");
        assert_ne!(bucket("192.0.2.7"), bucket("192.0.2.8"));
    }
}
