//! The dashboard, served by the binary at `/`: browser ES modules (and a
//! small vendored library, Preact with htm) embedded at build time, no
//! bundler and no Node at `cargo build`. It is a client of the REST API like
//! any other: it signs in with `/api/v1/auth/login`, keeps the access token
//! in memory and the refresh token in the API's httpOnly cookie.
//!
//! - The dashboard's own pages (`/`, `/sign-in`, `/developers/…`) all answer
//!   `index.html`; the modules route in the browser, so every page has a URL.
//! - `/assets/{path}` serves the embedded files, gzipped for clients that
//!   take it, revalidated by ETag.
//! - Every answer carries a strict Content-Security-Policy (no inline script
//!   or style, no eval, no framing, connections to this origin only).

use std::collections::HashMap;
use std::sync::OnceLock;

use axum::Router;
use axum::body::Body;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rust_embed::Embed;

#[derive(Embed)]
#[folder = "assets/"]
#[exclude = "*.d.ts"]
#[exclude = "*.md"]
struct Assets;

/// The Content-Security-Policy of every dashboard answer: scripts, styles,
/// images and fonts from this origin only (no inline code, no eval), API
/// calls to this origin, audio from it and from blobs, never framed.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                       font-src 'self'; connect-src 'self'; media-src 'self' blob:; manifest-src 'self'; \
                       base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The dashboard's sections: `/{section}` and everything under it answer
/// `index.html`, whose modules route (so every page has a URL). Each names
/// the page modules its pages are in (`app.js` fetches them when first
/// shown): the `index.html` of a section preloads them with the shell.
pub const SECTIONS: &[(&str, &[&str])] = &[
    ("developers", &["pages/api-keys.js", "pages/webhooks.js", "pages/connected-apps.js"]),
    ("inbox", &["pages/inbox.js"]),
    ("agents", &["pages/agents.js"]),
    ("calls", &["pages/calls.js"]),
    ("contacts", &["pages/contacts.js"]),
    ("knowledge", &["pages/knowledge.js"]),
    ("channels", &["pages/channels.js"]),
    ("billing", &["pages/billing.js"]),
    ("runs", &["pages/billing.js"]),
    ("settings", &["pages/members.js", "pages/inbox-settings.js"]),
];

/// The home page's module (`/`).
const HOME_PAGES: &[&str] = &["pages/home.js"];

/// Pages for people who are not signed in: signing in, and the one-time
/// links (their token is in the fragment, which never reaches the server).
pub const PUBLIC_PAGES: &[&str] = &["/sign-in", "/invitation", "/reset-password"];

/// The dashboard's routes, to merge into the application.
pub fn router() -> Router {
    let mut router = Router::new().route("/assets/{*path}", get(asset)).route("/", get(index));
    for page in PUBLIC_PAGES {
        router = router.route(page, get(index));
    }
    for (section, _) in SECTIONS {
        let page = move |headers: HeaderMap| async move { section_index(section, &headers) };
        router = router.route(&format!("/{section}"), get(page)).route(&format!("/{section}/{{*rest}}"), get(page));
    }
    router
}

/// Where `index.html` lists the modules for the browser to fetch at once
/// (`<link rel="modulepreload">`), rather than one import level at a time.
const PRELOAD_MARKER: &str = "<!-- modulepreload -->";

/// The modules `entry` imports, directly or not, itself included: what a
/// page needs before it can run. Dynamic `import(…)`s are not followed
/// (those are the pages, fetched when shown).
fn static_imports(entry: &str) -> Vec<String> {
    let mut seen = vec![entry.to_owned()];
    let mut next = 0;
    while next < seen.len() {
        let name = seen[next].clone();
        next += 1;
        let Some(file) = Assets::get(&name) else { continue };
        let text = String::from_utf8_lossy(&file.data).into_owned();
        let dir = name.rsplit_once('/').map_or("", |(d, _)| d);
        for target in module_specifiers(&text, &["from", "import"]) {
            let resolved = resolve(dir, &target);
            if !seen.contains(&resolved) {
                seen.push(resolved);
            }
        }
    }
    seen
}

/// The relative or absolute specifiers quoted right after one of
/// `keywords` (`from "./x.js"`, `import "./y.js"`; not `import("./z.js")`).
fn module_specifiers(text: &str, keywords: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for keyword in keywords {
        let mut rest = text;
        while let Some(i) = rest.find(keyword) {
            rest = &rest[i + keyword.len()..];
            let trimmed = rest.trim_start();
            let Some(quote) = trimmed.chars().next().filter(|c| *c == '"' || *c == '\'') else { continue };
            let Some(end) = trimmed[1..].find(quote) else { continue };
            let spec = &trimmed[1..1 + end];
            if spec.starts_with('.') || spec.starts_with('/') {
                out.push(spec.to_owned());
            }
        }
    }
    out
}

/// `target` as an embedded file's name, seen from the directory `dir`.
fn resolve(dir: &str, target: &str) -> String {
    let mut parts: Vec<&str> =
        if target.starts_with('/') { Vec::new() } else { dir.split('/').filter(|p| !p.is_empty()).collect() };
    for part in target.trim_start_matches("/assets/").split('/') {
        match part {
            "." | "" => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// An embedded file, with what serving it needs.
struct Served {
    content_type: String,
    etag: String,
    plain: Vec<u8>,
    /// The gzipped bytes, for text types worth compressing.
    gzipped: Option<Vec<u8>>,
    /// Readable by pages of any origin (CORS): what the webchat widget
    /// loads from here for a visitor's call.
    shared: bool,
}

/// The files the webchat widget loads from Parley's origin for a call, on
/// its host page's origin: the audio module and its worklets.
fn shared_with_any_origin(name: &str) -> bool {
    name == "lib/webcall-audio.js" || name.starts_with("worklets/")
}

/// Every embedded file, prepared once.
fn served() -> &'static HashMap<String, Served> {
    static SERVED: OnceLock<HashMap<String, Served>> = OnceLock::new();
    SERVED.get_or_init(|| {
        Assets::iter()
            .filter_map(|name| {
                let file = Assets::get(&name)?;
                let plain = file.data.into_owned();
                let content_type = mime_guess::from_path(name.as_ref()).first_or_octet_stream();
                let compressible = matches!(content_type.type_().as_str(), "text" | "application")
                    && !matches!(content_type.subtype().as_str(), "octet-stream" | "zip" | "gzip" | "pdf");
                let gzipped = compressible.then(|| gzip(&plain));
                let etag = format!("\"{}\"", hex::encode(&file.metadata.sha256_hash()[..12]));
                let content_type = match content_type.type_().as_str() {
                    "text" => format!("{content_type}; charset=utf-8"),
                    _ if content_type.subtype() == "javascript" => "text/javascript; charset=utf-8".to_owned(),
                    _ => content_type.to_string(),
                };
                let shared = shared_with_any_origin(&name);
                Some((name.into_owned(), Served { content_type, etag, plain, gzipped, shared }))
            })
            .collect()
    })
}

/// `index.html` as served for a section: preloading the shell's modules
/// and those of the section's pages, each with what it imports.
fn index_for(pages: &[&str]) -> Served {
    let index = Assets::get("index.html").map(|f| f.data.into_owned()).unwrap_or_default();
    let mut modules = static_imports("app.js");
    for page in pages {
        for module in static_imports(page) {
            if !modules.contains(&module) {
                modules.push(module);
            }
        }
    }
    let plain = with_preloads(&index, modules);
    let etag = format!("\"{}\"", hex::encode(&sha256(&plain)[..12]));
    let gzipped = Some(gzip(&plain));
    Served { content_type: "text/html; charset=utf-8".to_owned(), etag, plain, gzipped, shared: false }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

/// `index.html` for each section (and `""` for `/` and the public pages).
fn indexes() -> &'static HashMap<&'static str, Served> {
    static INDEXES: OnceLock<HashMap<&'static str, Served>> = OnceLock::new();
    INDEXES.get_or_init(|| {
        let mut all: HashMap<&'static str, Served> =
            SECTIONS.iter().map(|(section, pages)| (*section, index_for(pages))).collect();
        all.insert("", index_for(HOME_PAGES));
        all
    })
}

/// `index` with a preload link for each of `modules` in place of the marker.
fn with_preloads(index: &[u8], mut modules: Vec<String>) -> Vec<u8> {
    modules.sort();
    let links: String = modules
        .iter()
        .map(|m| format!(r#"<link rel="modulepreload" href="/assets/{m}" />"#))
        .collect::<Vec<_>>()
        .join("\n    ");
    String::from_utf8_lossy(index).replace(PRELOAD_MARKER, &links).into_bytes()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut out = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to memory cannot fail.
    let _ = out.write_all(bytes);
    out.finish().unwrap_or_default()
}

/// The headers every dashboard answer carries.
fn secured(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.insert(http::HeaderName::from_static("cross-origin-opener-policy"), HeaderValue::from_static("same-origin"));
    r
}

fn send(file: &Served, headers: &HeaderMap) -> Response {
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim().trim_start_matches("W/") == file.etag));
    let mut r = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let takes_gzip = headers
            .get(header::ACCEPT_ENCODING)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|e| e.split(';').next().is_some_and(|e| e.trim() == "gzip")));
        match (&file.gzipped, takes_gzip) {
            (Some(gz), true) => {
                let mut r = Response::new(Body::from(gz.clone()));
                r.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                r
            }
            _ => Response::new(Body::from(file.plain.clone())),
        }
    };
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&file.content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    if let Ok(v) = HeaderValue::from_str(&file.etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if file.shared {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    }
    // Revalidated every time: a new build is seen at once, an unchanged
    // file costs a 304.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    secured(r)
}

async fn index(headers: HeaderMap) -> Response {
    section_index("", &headers)
}

fn section_index(section: &str, headers: &HeaderMap) -> Response {
    match indexes().get(section) {
        Some(file) if !file.plain.is_empty() => send(file, headers),
        _ => secured(StatusCode::NOT_FOUND.into_response()),
    }
}

async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    match served().get(&path) {
        Some(file) => send(file, &headers),
        None => {
            let body = r#"{"detail":"Not Found"}"#;
            secured((StatusCode::NOT_FOUND, [(header::CONTENT_TYPE, "application/json")], body).into_response())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get(path: &str, headers: &[(&str, &str)]) -> Response {
        let mut req = Request::get(path);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        router().oneshot(req.body(Body::empty()).unwrap()).await.unwrap()
    }

    #[tokio::test]
    async fn pages_answer_the_index_with_a_strict_policy() {
        for path in [
            "/",
            "/sign-in",
            "/invitation",
            "/reset-password",
            "/settings/members",
            "/developers",
            "/developers/api-keys",
            "/calls/17",
            "/inbox",
            "/inbox/3",
        ] {
            let r = get(path, &[]).await;
            assert_eq!(r.status(), 200, "{path}");
            assert_eq!(r.headers()[header::CONTENT_SECURITY_POLICY], CSP);
            assert_eq!(r.headers()[header::X_FRAME_OPTIONS], "DENY");
            assert!(r.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/html"));
            let body = r.into_body().collect().await.unwrap().to_bytes();
            let text = String::from_utf8_lossy(&body);
            assert!(text.contains(r#"<script type="module" src="/assets/app.js">"#), "{text}");
            assert!(!text.contains("<script>") && !text.contains(" style="), "no inline script or style");
            assert!(text.contains(r#"<link rel="modulepreload" href="/assets/lib/api.js" />"#), "{text}");
            assert!(!text.contains(PRELOAD_MARKER));
        }
    }

    /// The preloads of a page: the shell, and that section's page modules
    /// with what they import, not the other sections'.
    #[tokio::test]
    async fn a_page_preloads_its_own_module_and_not_the_others() {
        let preloads = |text: &str| -> Vec<String> {
            text.split(r#"<link rel="modulepreload" href="/assets/"#)
                .skip(1)
                .map(|rest| rest.split('"').next().unwrap().to_owned())
                .collect()
        };
        for (path, own, other) in [
            ("/", "pages/home.js", "pages/inbox.js"),
            ("/agents/7/playground", "pages/agents.js", "pages/home.js"),
            ("/inbox/3", "pages/inbox.js", "pages/agents.js"),
            ("/settings/inbox", "pages/inbox-settings.js", "pages/calls.js"),
        ] {
            let body = get(path, &[]).await.into_body().collect().await.unwrap().to_bytes();
            let listed = preloads(&String::from_utf8_lossy(&body));
            assert!(listed.iter().any(|m| m == own) && !listed.iter().any(|m| m == other), "{path}: {listed:?}");
            assert!(
                listed.iter().any(|m| m == "app.js") && !listed.iter().any(|m| m.starts_with("worklets/")),
                "{listed:?}"
            );
        }
    }

    /// Every page module `app.js` loads is preloaded by some section (or
    /// `/`), and every module a section names exists: the two lists agree.
    #[test]
    fn the_sections_name_the_page_modules_app_js_loads() {
        let app = String::from_utf8(Assets::get("app.js").unwrap().data.into_owned()).unwrap();
        let loaded: Vec<String> = module_specifiers(&app, &["import("]).iter().map(|t| resolve("", t)).collect();
        assert!(loaded.len() >= 10, "{loaded:?}");
        let named: Vec<&str> =
            SECTIONS.iter().flat_map(|(_, pages)| pages.iter().copied()).chain(HOME_PAGES.iter().copied()).collect();
        for module in &loaded {
            assert!(named.contains(&module.as_str()), "app.js loads {module}, which no section preloads");
        }
        for module in named {
            assert!(Assets::get(module).is_some(), "a section names {module}, which is not embedded");
        }
    }

    /// The webchat widget loads the call audio from other sites' pages:
    /// those files (only those) carry CORS.
    #[tokio::test]
    async fn the_call_audio_is_readable_cross_origin_and_nothing_else_is() {
        for path in ["/assets/lib/webcall-audio.js", "/assets/worklets/capture.js", "/assets/worklets/playback.js"] {
            let r = get(path, &[("origin", "https://shop.example")]).await;
            assert_eq!(r.status(), 200, "{path}");
            assert_eq!(r.headers()[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*", "{path}");
        }
        for path in ["/assets/lib/api.js", "/assets/lib/webcall.js", "/assets/app.js", "/"] {
            let r = get(path, &[("origin", "https://shop.example")]).await;
            assert!(r.headers().get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none(), "{path}");
        }
    }

    #[tokio::test]
    async fn assets_are_gzipped_and_revalidated() {
        let r = get("/assets/vendor/preact.module.js", &[("accept-encoding", "gzip, br")]).await;
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()[header::CONTENT_ENCODING], "gzip");
        assert_eq!(r.headers()[header::CONTENT_TYPE], "text/javascript; charset=utf-8");
        let etag = r.headers()[header::ETAG].to_str().unwrap().to_owned();
        let again = get("/assets/vendor/preact.module.js", &[("if-none-match", &etag)]).await;
        assert_eq!(again.status(), 304);
        let plain = get("/assets/vendor/preact.module.js", &[]).await;
        assert!(plain.headers().get(header::CONTENT_ENCODING).is_none());
        assert_eq!(get("/assets/nothing.js", &[]).await.status(), 404);
        assert_eq!(get("/assets/vendor/README.md", &[]).await.status(), 404, "notes are not served");
    }

    #[test]
    fn every_module_it_imports_is_embedded() {
        // A relative import naming a missing file would fail only in the
        // browser: check every import of every module here.
        let names: Vec<String> = Assets::iter().map(|n| n.into_owned()).collect();
        let import = relative_imports;
        for name in names.iter().filter(|n| n.ends_with(".js")) {
            let text = String::from_utf8(Assets::get(name).unwrap().data.into_owned()).unwrap();
            let dir = name.rsplit_once('/').map_or("", |(d, _)| d);
            for target in import(&text) {
                let resolved = resolve(dir, &target);
                assert!(names.contains(&resolved), "{name} imports {target} ({resolved}), which is not embedded");
            }
        }
    }

    /// The relative or absolute specifiers quoted after `from`, `import` or
    /// `addModule(` (the audio worklets a module loads).
    fn relative_imports(text: &str) -> Vec<String> {
        module_specifiers(text, &["from", "import", "addModule("])
    }
}
