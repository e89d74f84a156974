//! The authorization pages a person sees when an MCP client asks for
//! access: sign-in, consent, and refusal. Server-rendered HTML, one file,
//! no script, labelled form controls, readable without styles.

use parley_domain::user::Membership;
use parley_services::tenancy::oauth::{AuthorizationRequest, ValidAuthorization};

/// Escapes text for HTML element content and double-quoted attributes.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f5f5f7;color:#1d1d1f}\
main{max-width:28rem;margin:3rem auto;padding:2rem;background:#fff;border-radius:12px;box-shadow:0 1px 4px #0002}\
h1{font-size:1.4rem;margin-top:0}label{display:block;margin:1rem 0 .25rem;font-weight:600}\
input[type=email],input[type=password],select{width:100%;padding:.5rem;font:inherit;box-sizing:border-box}\
.check{display:flex;gap:.5rem;align-items:flex-start;margin-top:1rem}.check label{margin:0;font-weight:400}\
.buttons{display:flex;gap:1rem;margin-top:1.5rem}button{font:inherit;padding:.6rem 1.2rem;border-radius:8px;\
border:1px solid #888;background:#fff;cursor:pointer}button.primary{background:#0b57d0;color:#fff;border-color:#0b57d0}\
.error{color:#b3261e;background:#fce8e6;padding:.75rem;border-radius:8px}.muted{color:#555;font-size:.9rem}\
code{word-break:break-all}";

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{} · Parley</title><style>{STYLE}</style></head>\
         <body><main>{body}</main></body></html>",
        escape(title)
    )
}

/// Hidden inputs carrying the authorization request through a form.
fn hidden_request(req: &AuthorizationRequest) -> String {
    let fields = [
        ("response_type", &req.response_type),
        ("client_id", &req.client_id),
        ("redirect_uri", &req.redirect_uri),
        ("code_challenge", &req.code_challenge),
        ("code_challenge_method", &req.code_challenge_method),
        ("state", &req.state),
        ("scope", &req.scope),
        ("resource", &req.resource),
    ];
    fields
        .iter()
        .filter_map(|(name, value)| {
            value.as_ref().map(|v| format!("<input type=\"hidden\" name=\"{name}\" value=\"{}\">", escape(v)))
        })
        .collect()
}

/// Sign-in: email and password of an existing Parley user.
pub fn login(client_name: &str, request_query: &str, email: &str, error: Option<&str>) -> String {
    let error = error.map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>", escape(e))).unwrap_or_default();
    page(
        "Sign in",
        &format!(
            "<h1>Sign in to Parley</h1>\
             <p><strong>{client}</strong> is asking to use your Parley workspace. Sign in to continue.</p>{error}\
             <form method=\"post\" action=\"/oauth/login\">\
             <input type=\"hidden\" name=\"request\" value=\"{request}\">\
             <label for=\"email\">Email</label>\
             <input id=\"email\" name=\"email\" type=\"email\" autocomplete=\"username\" required value=\"{email}\">\
             <label for=\"password\">Password</label>\
             <input id=\"password\" name=\"password\" type=\"password\" autocomplete=\"current-password\" required>\
             <div class=\"buttons\"><button class=\"primary\" type=\"submit\">Sign in</button></div></form>",
            client = escape(client_name),
            request = escape(request_query),
            email = escape(email),
        ),
    )
}

/// What the consent page shows and offers.
pub struct ConsentView<'a> {
    pub auth: &'a ValidAuthorization,
    pub request: &'a AuthorizationRequest,
    pub email: &'a str,
    pub workspaces: &'a [Membership],
    pub csrf: &'a str,
}

/// Consent: who asks, where the answer goes, and the choices.
pub fn consent(v: &ConsentView) -> String {
    let client = &v.auth.client;
    let redirect_host = url_host(&v.auth.redirect_uri);
    let identity = if client.source == "metadata_document" {
        format!("Its identity is published at <code>{}</code>.", escape(&url_host(&client.client_id)))
    } else {
        "It registered itself; Parley has not verified its name.".to_owned()
    };
    let options: String = v
        .workspaces
        .iter()
        .map(|m| {
            format!("<option value=\"{}\">{} ({})</option>", m.workspace_id, escape(&m.workspace_name), m.role.as_str())
        })
        .collect();
    let write = if v.auth.scopes.write {
        "<div class=\"check\"><input id=\"allow_write\" name=\"allow_write\" type=\"checkbox\" value=\"on\" checked>\
         <label for=\"allow_write\">Allow changes: create, update, send and delete (otherwise read only)</label></div>"
    } else {
        "<p class=\"muted\">Read-only access: the client can look, not change anything.</p>"
    };
    page(
        "Authorize",
        &format!(
            "<h1>Authorize {name}</h1>\
             <p><strong>{name}</strong> wants to use Parley's MCP tools as <strong>{email}</strong>. {identity}</p>\
             <p>After you answer, you will be sent to <strong>{host}</strong>.</p>\
             <form method=\"post\" action=\"/oauth/authorize\">{hidden}\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\
             <label for=\"workspace_id\">Workspace</label><select id=\"workspace_id\" name=\"workspace_id\">{options}</select>\
             <label for=\"mode\">Mode</label><select id=\"mode\" name=\"mode\">\
             <option value=\"live\">live</option><option value=\"test\">test</option></select>\
             <div class=\"check\"><input id=\"workspace_locked\" name=\"workspace_locked\" type=\"checkbox\" value=\"on\" checked>\
             <label for=\"workspace_locked\">Only this workspace (workspace-locked): the client cannot switch to your other workspaces</label></div>\
             {write}\
             <div class=\"buttons\"><button class=\"primary\" type=\"submit\" name=\"decision\" value=\"allow\">Allow</button>\
             <button type=\"submit\" name=\"decision\" value=\"deny\">Deny</button></div></form>\
             <p class=\"muted\">You can revoke this access at any time (<code>DELETE /api/v1/oauth/grants/{{id}}</code>).</p>",
            name = escape(&client.client_name),
            email = escape(v.email),
            host = escape(&redirect_host),
            hidden = hidden_request(v.request),
            csrf = escape(v.csrf),
        ),
    )
}

/// A request Parley will not act on, explained, with no link back to the
/// client (its redirect URI is not trusted). `error` is OAuth's code for
/// it, for programs reading the page (`data-error`).
pub fn refusal(error: &str, message: &str) -> String {
    page(
        "Cannot authorize",
        &format!(
            "<h1>This request cannot be authorized</h1><p class=\"error\" role=\"alert\" data-error=\"{}\">{}</p>\
             <p class=\"muted\">Close this page and try connecting again from your application.</p>",
            escape(error),
            escape(message)
        ),
    )
}

fn url_host(uri: &str) -> String {
    match url_parts(uri) {
        Some((scheme, host)) if host.is_empty() => format!("{scheme}:"),
        Some((_, host)) => host,
        None => uri.to_owned(),
    }
}

/// The scheme and `host[:port]` of an absolute URI.
fn url_parts(uri: &str) -> Option<(String, String)> {
    let (scheme, rest) = uri.split_once(':')?;
    let authority = rest.strip_prefix("//").map(|r| r.split(['/', '?', '#']).next().unwrap_or("")).unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    Some((scheme.to_owned(), host.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
    }

    #[test]
    fn hosts_are_shown_without_credentials_or_paths() {
        assert_eq!(url_host("https://user@app.example:8443/cb?x=1"), "app.example:8443");
        assert_eq!(url_host("http://127.0.0.1:5000/callback"), "127.0.0.1:5000");
        assert_eq!(url_host("com.example.app:/oauth"), "com.example.app:");
    }
}
