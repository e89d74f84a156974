//! OAuth 2.1 rules that need no database: scopes, PKCE, redirect URIs,
//! the resource indicator, and the tokens' shapes.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use sha2::{Digest, Sha256};
use url::{Host, Url};

/// What a grant allows on the MCP endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scopes {
    pub read: bool,
    pub write: bool,
}

pub const SCOPE_READ: &str = "mcp:read";
pub const SCOPE_WRITE: &str = "mcp:write";
pub const SUPPORTED_SCOPES: [&str; 2] = [SCOPE_READ, SCOPE_WRITE];

impl Scopes {
    pub const ALL: Scopes = Scopes { read: true, write: true };

    /// Parses a space-separated `scope`; absent or empty means every scope.
    /// An unknown scope is an error naming it. `mcp:write` implies reading.
    pub fn parse(raw: Option<&str>) -> Result<Scopes, String> {
        let raw = raw.unwrap_or("").trim();
        if raw.is_empty() {
            return Ok(Scopes::ALL);
        }
        let mut s = Scopes { read: false, write: false };
        for word in raw.split(' ').filter(|w| !w.is_empty()) {
            match word {
                SCOPE_READ => s.read = true,
                SCOPE_WRITE => s.write = true,
                other => return Err(format!("unknown scope {other:?}; supported: mcp:read, mcp:write")),
            }
        }
        s.read = true;
        Ok(s)
    }

    /// Whether every scope of `self` is within `granted` (refreshes may
    /// narrow, never widen).
    pub fn within(self, granted: Scopes) -> bool {
        (!self.write || granted.write) && (!self.read || granted.read)
    }

    pub fn as_str(self) -> &'static str {
        if self.write { "mcp:read mcp:write" } else { "mcp:read" }
    }
}

/// Whether `verifier` is a valid PKCE code verifier (RFC 7636 §4.1) whose
/// S256 transform is `challenge`.
pub fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    well_formed && B64.encode(Sha256::digest(verifier.as_bytes())) == challenge
}

/// Whether `challenge` looks like an S256 challenge: 43 base64url characters.
pub fn is_s256_challenge(challenge: &str) -> bool {
    challenge.len() == 43 && challenge.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        Some(Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// Checks a redirect URI a client registers (and, again, one it presents):
/// absolute, no fragment; HTTPS, HTTP only on a loopback host (RFC 8252
/// §7.3), or an app's private-use scheme, which RFC 8252 §7.1 has be a
/// reverse domain name (`com.example.app:/cb`), or one of `app_schemes`
/// (the single-word schemes of known clients, `cursor:`, `vscode:`).
/// Nothing else: not a scheme a browser or the system acts on
/// (`javascript:`, `view-source:`, `jar:`, `ms-settings:`…).
pub fn check_redirect_uri(raw: &str, app_schemes: &[String]) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|_| format!("{raw:?} is not an absolute URI"))?;
    if url.fragment().is_some() {
        return Err(format!("{raw:?} has a fragment"));
    }
    match url.scheme() {
        "https" if url.host().is_some() => Ok(url),
        "http" if is_loopback(&url) => Ok(url),
        "http" => Err(format!("{raw:?} uses http on a non-loopback host; use https")),
        scheme if is_private_use(scheme) || app_schemes.iter().any(|a| a.eq_ignore_ascii_case(scheme)) => Ok(url),
        _ => Err(format!(
            "{raw:?} is not a usable redirect URI: use https, http on a loopback host, or a reverse-domain scheme \
             such as com.example.app:/callback"
        )),
    }
}

/// Reverse-domain schemes an operating system answers itself.
const SYSTEM_SCHEMES: &[&str] = &["x-apple.", "com.apple."];

/// The single-word schemes of known MCP clients, allowed by default
/// (`mcp.redirect_schemes`).
pub const DEFAULT_APP_SCHEMES: &[&str] = &["cursor", "vscode", "vscode-insiders", "windsurf"];

/// A reverse-domain scheme: two or more dot-separated labels of letters,
/// digits and hyphens, the first starting with a letter (URL schemes are
/// lower-cased by the parser).
fn is_private_use(scheme: &str) -> bool {
    // Dotted, yet the system's own.
    if SYSTEM_SCHEMES.iter().any(|s| scheme.starts_with(s)) {
        return false;
    }
    let labels: Vec<&str> = scheme.split('.').collect();
    labels.len() >= 2
        && labels.iter().all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
}

/// Whether a presented redirect URI is one of the registered ones: an exact
/// match, except that a loopback URI's port may differ (RFC 8252 §7.3:
/// native apps listen on whatever port is free).
pub fn redirect_matches(registered: &[String], presented: &str) -> bool {
    if registered.iter().any(|r| r == presented) {
        return true;
    }
    let Ok(p) = Url::parse(presented) else { return false };
    if p.scheme() != "http" || !is_loopback(&p) {
        return false;
    }
    registered.iter().filter_map(|r| Url::parse(r).ok()).any(|r| {
        r.scheme() == "http"
            && is_loopback(&r)
            && r.host() == p.host()
            && r.path() == p.path()
            && r.query() == p.query()
            && r.username() == p.username()
            && r.password() == p.password()
    })
}

/// Whether a `resource` indicator (RFC 8707) names the MCP endpoint at
/// `mcp_url`: the same URL, with or without its trailing slash.
pub fn names_resource(resource: &str, mcp_url: &str) -> bool {
    resource.trim_end_matches('/') == mcp_url.trim_end_matches('/')
}

/// Token prefixes: they tell an MCP token from an API key or a dashboard
/// JWT at a glance, so each is refused where it does not belong.
pub const ACCESS_TOKEN_PREFIX: &str = "pmcp_at_";
pub const REFRESH_TOKEN_PREFIX: &str = "pmcp_rt_";
pub const CODE_PREFIX: &str = "pmcp_ac_";
pub const CLIENT_ID_PREFIX: &str = "pmcp_client_";
pub const CLIENT_SECRET_PREFIX: &str = "pmcp_cs_";

/// A new random token with `prefix` (256 bits).
pub fn new_token(prefix: &str) -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("{prefix}{}", B64.encode(bytes))
}

/// How tokens, codes and client secrets are stored.
pub fn hash_secret(raw: &str) -> String {
    hex::encode(Sha256::digest(raw.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_parse_default_and_refuse_unknown_ones() {
        assert_eq!(Scopes::parse(None).unwrap(), Scopes::ALL);
        assert_eq!(Scopes::parse(Some("mcp:read")).unwrap(), Scopes { read: true, write: false });
        assert_eq!(Scopes::parse(Some("mcp:write")).unwrap(), Scopes::ALL);
        assert!(Scopes::parse(Some("mcp:read admin")).unwrap_err().contains("admin"));
        let read = Scopes::parse(Some("mcp:read")).unwrap();
        assert!(read.within(Scopes::ALL));
        assert!(!Scopes::ALL.within(read));
    }

    #[test]
    fn pkce_s256_matches_the_rfc_7636_example() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert!(is_s256_challenge(challenge));
        assert!(pkce_matches(verifier, challenge));
        assert!(!pkce_matches("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXx", challenge));
        assert!(!pkce_matches("short", challenge));
    }

    #[test]
    fn redirect_uris_match_exactly_except_loopback_ports() {
        let reg = vec!["http://127.0.0.1:3000/callback".to_owned(), "https://app.example/cb".to_owned()];
        assert!(redirect_matches(&reg, "http://127.0.0.1:3000/callback"));
        assert!(redirect_matches(&reg, "http://127.0.0.1:51234/callback"));
        assert!(!redirect_matches(&reg, "http://127.0.0.1:51234/other"));
        assert!(!redirect_matches(&reg, "http://localhost:3000/callback"));
        assert!(redirect_matches(&reg, "https://app.example/cb"));
        assert!(!redirect_matches(&reg, "https://app.example/cb/"));
        assert!(!redirect_matches(&reg, "https://app.example:8443/cb"));
        assert!(!redirect_matches(&reg, "https://evil.example/cb"));
    }

    #[test]
    fn redirect_uris_are_https_loopback_or_private_use() {
        assert!(check_redirect_uri("https://app.example/cb", &[]).is_ok());
        assert!(check_redirect_uri("http://127.0.0.1/cb", &[]).is_ok());
        assert!(check_redirect_uri("http://[::1]:8080/cb", &[]).is_ok());
        assert!(check_redirect_uri("com.example.app:/oauth", &[]).is_ok());
        assert!(check_redirect_uri("http://app.example/cb", &[]).is_err());
        assert!(check_redirect_uri("javascript:alert(1)", &[]).is_err());
        assert!(check_redirect_uri("https://app.example/cb#x", &[]).is_err());
        assert!(check_redirect_uri("/relative", &[]).is_err());
        // Schemes a browser or the system acts on are not apps' (issue 31).
        for raw in [
            "view-source:https://a.example/",
            "jar:https://a.example/x.jar!/",
            "ms-settings:privacy",
            "myapp:/cb",
            "data:text/html,x",
            "com..example:/cb",
            "com.example_app:/cb",
        ] {
            assert!(check_redirect_uri(raw, &[]).is_err(), "{raw}");
        }
        assert!(check_redirect_uri("com.example.app-dev:/oauth/callback", &[]).is_ok());
        assert!(check_redirect_uri("x-apple.systempreferences:com.apple.preference", &[]).is_err());
        // A known client's single-word scheme, when allowed.
        let apps: Vec<String> = DEFAULT_APP_SCHEMES.iter().map(|s| s.to_string()).collect();
        assert!(check_redirect_uri("cursor://anysphere.cursor-retrieval/oauth/callback", &apps).is_ok());
        assert!(check_redirect_uri("cursor://anysphere.cursor-retrieval/oauth/callback", &[]).is_err());
    }

    #[test]
    fn the_resource_is_the_mcp_url_with_or_without_its_slash() {
        assert!(names_resource("https://p.example/mcp", "https://p.example/mcp"));
        assert!(names_resource("https://p.example/mcp/", "https://p.example/mcp"));
        assert!(!names_resource("https://p.example/api/v1", "https://p.example/mcp"));
        assert!(!names_resource("https://other.example/mcp", "https://p.example/mcp"));
    }
}

/// A user's consent to an MCP client (`GET /api/v1/oauth/grants`).
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct OAuthGrant {
    pub id: i64,
    /// The client's id: Parley's for a registered client, the metadata
    /// document's URL otherwise.
    pub client_id: String,
    /// The client's name as it registered it (not verified by Parley).
    pub client_name: String,
    /// The workspace the grant acts on (its default when not locked).
    pub workspace_id: i64,
    pub mode: crate::Mode,
    /// Only `workspace_id` is served; no tool may name another workspace.
    pub workspace_locked: bool,
    /// `mcp:read`, or `mcp:read mcp:write`.
    #[schema(example = "mcp:read mcp:write")]
    pub scope: String,
    pub created_at: crate::Timestamp,
    /// When a token of the grant was last issued or used (to the minute).
    pub last_used_at: Option<crate::Timestamp>,
}
