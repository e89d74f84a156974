//! Keeping outbound HTTP to user-given URLs away from private networks.
//!
//! A URL is checked when it is saved (its host resolved, every address
//! public) and again at every request: the HTTP client resolves names only
//! through [`GuardedResolver`], and a host written as an IP address is
//! checked before connecting. This defeats DNS answers that change between
//! the two checks (rebinding). `allow_private` lifts the guard for local
//! development and tests.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

/// Whether `ip` is a public unicast address that outbound requests may reach.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            // IPv4 written in IPv6 forms is judged as the IPv4 it carries.
            if let Some(v4) = embedded_v4(v6) {
                return is_public_v4(v4);
            }
            let s = v6.segments();
            !(v6.is_unspecified()
                || (s[0] == 0x0064 && s[1] == 0xff9b && s[2] == 0x0001) // NAT64 local-use 64:ff9b:1::/48
                || (s[0] == 0x2001 && s[1] == 0x0000) // Teredo 2001::/32 (tunnels to embedded IPv4)
                || v6.is_loopback()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
                || (s[0] & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated)
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
                || (s[0] == 0x0100 && s[1] == 0 && s[2] == 0 && s[3] == 0)) // discard-only 100::/64
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // includes the cloud metadata address 169.254.169.254
        || ip.is_multicast()
        || ip.is_broadcast()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT 100.64.0.0/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // documentation
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || (a == 198 && b == 51 && c == 100) // documentation
        || (a == 203 && b == 0 && c == 113) // documentation
        || a >= 240) // reserved
}

/// The IPv4 address inside an IPv4-mapped, IPv4-compatible, NAT64 or 6to4 address.
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let tail = || Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[..5] == [0, 0, 0, 0, 0xffff] && s[5] == 0 {
        return Some(tail()); // ::ffff:0:a.b.c.d (SIIT, IPv4-translated)
    }
    if s[..6] == [0, 0, 0, 0, 0, 0] && !(s[6] == 0 && s[7] <= 1) {
        return Some(tail()); // ::a.b.c.d (deprecated IPv4-compatible)
    }
    if s[0] == 0x0064 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        return Some(tail()); // NAT64 64:ff9b::/96
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8)); // 6to4
    }
    None
}

/// Why a target URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    #[error("must be an absolute http or https URL")]
    NotHttp,
    #[error("must not contain a username or password")]
    Credentials,
    #[error("the host {0} could not be resolved")]
    Unresolvable(String),
    #[error("the host resolves to {0}, which is not a public address")]
    Private(IpAddr),
}

/// Parses a user-given target URL: absolute, http(s), with a host and no
/// credentials. Numeric hosts are normalised (`http://2130706433/` is 127.0.0.1).
pub fn parse_target(raw: &str) -> Result<Url, TargetError> {
    let url = Url::parse(raw.trim()).map_err(|_| TargetError::NotHttp)?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(TargetError::NotHttp);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(TargetError::Credentials);
    }
    Ok(url)
}

/// Resolves `url`'s host and checks every address (a name with one private
/// address among public ones is refused). A name that does not resolve yet
/// is accepted: every delivery resolves again through [`GuardedResolver`].
pub async fn check_target(url: &Url, allow_private: bool) -> Result<(), TargetError> {
    let addrs = match resolve(url).await {
        Ok(addrs) => addrs,
        Err(TargetError::Unresolvable(_)) => return Ok(()),
        Err(e) => return Err(e),
    };
    if !allow_private && let Some(bad) = addrs.iter().find(|ip| !is_public(**ip)) {
        return Err(TargetError::Private(*bad));
    }
    Ok(())
}

/// Checks an IP-literal host before connecting (names go through the resolver).
pub fn check_literal_host(url: &Url, allow_private: bool) -> Result<(), TargetError> {
    let ip = match url.host() {
        Some(Host::Ipv4(v4)) => IpAddr::V4(v4),
        Some(Host::Ipv6(v6)) => IpAddr::V6(v6),
        _ => return Ok(()),
    };
    if allow_private || is_public(ip) { Ok(()) } else { Err(TargetError::Private(ip)) }
}

/// How long saving a URL waits for its name to resolve.
const SAVE_CHECK_DNS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

async fn resolve(url: &Url) -> Result<Vec<IpAddr>, TargetError> {
    match url.host() {
        Some(Host::Ipv4(v4)) => Ok(vec![IpAddr::V4(v4)]),
        Some(Host::Ipv6(v6)) => Ok(vec![IpAddr::V6(v6)]),
        Some(Host::Domain(name)) => {
            let port = url.port_or_known_default().unwrap_or(443);
            // A saved URL is checked again at every delivery, so a resolver
            // that does not answer in time only defers the check; the
            // request that saves it must not wait on it.
            let found: Vec<IpAddr> =
                tokio::time::timeout(SAVE_CHECK_DNS_TIMEOUT, tokio::net::lookup_host((name, port)))
                    .await
                    .map_err(|_| TargetError::Unresolvable(name.to_owned()))?
                    .map_err(|_| TargetError::Unresolvable(name.to_owned()))?
                    .map(|sa| sa.ip())
                    .collect();
            if found.is_empty() { Err(TargetError::Unresolvable(name.to_owned())) } else { Ok(found) }
        }
        None => Err(TargetError::NotHttp),
    }
}

/// A DNS resolver for the HTTP client that drops non-public addresses, so a
/// name that resolved publicly when saved cannot later point inside.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|sa| allow_private || is_public(sa.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(format!("{host} has no public address").into());
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The shared outbound client: no redirects, guarded DNS, bounded timeouts,
/// and no proxy: a proxy would resolve the target's name itself, out of
/// the guard's reach, so `HTTP_PROXY`/`HTTPS_PROXY` are ignored here.
pub fn http_client(allow_private: bool, timeout: std::time::Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver { allow_private }))
        .timeout(timeout)
        .connect_timeout(timeout.min(std::time::Duration::from_secs(10)))
        .pool_max_idle_per_host(8)
        .user_agent(concat!("Parley-Webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("the HTTP client configuration is valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn public(s: &str) -> bool {
        is_public(s.parse().unwrap())
    }

    #[test]
    fn private_and_special_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "127.1.2.3",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.10",
            "198.18.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd00:ec2::254",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b::a00:1",
            "64:ff9b::c0a8:101",
            "64:ff9b:1::a00:1",
            "::ffff:0:7f00:1",
            "::ffff:0:a00:1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2002:7f00:1::",
            "2001:db8::1",
        ] {
            assert!(!public(ip), "{ip} must not be public");
        }
        for ip in [
            "93.184.216.34",
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "::ffff:0:808:808",
            "64:ff9b::808:808",
            "100.128.0.1",
        ] {
            assert!(public(ip), "{ip} is public");
        }
    }

    #[test]
    fn target_urls_must_be_http_without_credentials() {
        assert_eq!(parse_target("ftp://example.com/x"), Err(TargetError::NotHttp));
        assert_eq!(parse_target("/relative"), Err(TargetError::NotHttp));
        assert_eq!(parse_target("https://user:pw@example.com/"), Err(TargetError::Credentials));
        // The decimal form of 127.0.0.1 is normalised, so the literal check sees it.
        let u = parse_target("http://2130706433/hook").unwrap();
        assert_eq!(check_literal_host(&u, false), Err(TargetError::Private("127.0.0.1".parse().unwrap())));
        assert_eq!(check_literal_host(&u, true), Ok(()));
        for literal in ["http://[::ffff:127.0.0.1]/", "http://[::ffff:0:7f00:1]/", "http://[64:ff9b::a00:1]/"] {
            let u = parse_target(literal).unwrap();
            assert!(check_literal_host(&u, false).is_err(), "{literal}");
        }
    }

    #[tokio::test]
    async fn names_are_judged_by_every_address_they_resolve_to() {
        // Resolution only; nothing is connected to.
        let u = parse_target("http://localhost:9/hook").unwrap();
        assert!(matches!(check_target(&u, false).await, Err(TargetError::Private(_))));
        assert_eq!(check_target(&u, true).await, Ok(()));
        let u = parse_target("http://169.254.169.254/latest/meta-data").unwrap();
        assert!(matches!(check_target(&u, false).await, Err(TargetError::Private(_))));
        // Not resolvable yet: accepted now, checked again at every delivery.
        let u = parse_target("http://no-such-host.invalid/").unwrap();
        assert_eq!(check_target(&u, false).await, Ok(()));
    }

    #[tokio::test]
    async fn the_guarded_client_ignores_proxy_settings() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let target = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target_addr = target.local_addr().unwrap();
        let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
        // Proxies are read from the environment when a client is built. No
        // other test in this binary builds an HTTP client.
        // SAFETY: set and removed around one builder call; tests here read no proxy variables.
        unsafe {
            std::env::set_var("HTTP_PROXY", &proxy_url);
            std::env::set_var("http_proxy", &proxy_url);
        }
        let client = http_client(true, std::time::Duration::from_secs(5));
        unsafe {
            std::env::remove_var("HTTP_PROXY");
            std::env::remove_var("http_proxy");
        }
        let serve = tokio::spawn(async move {
            let (mut socket, _) = target.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = socket.read(&mut buf).await.unwrap();
            socket.write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n").await.unwrap();
        });
        let url = format!("http://{target_addr}/hook");
        let r = client.get(&url).send().await.expect("sent straight to the target");
        assert_eq!(r.status(), 204);
        serve.await.unwrap();
        // The proxy never saw a connection.
        let idle = tokio::time::timeout(std::time::Duration::from_millis(100), proxy.accept()).await;
        assert!(idle.is_err(), "the request went through the proxy");
    }
}
