// The dashboard's entry: restores the session from the refresh cookie,
// then shows the sign-in page or the page the URL names inside the shell.

import { html, render, useEffect, useLayoutEffect, useRef, useState } from "./lib/html.js";
import { current, restore, subscribe } from "./lib/session.js";
import { match, navigate, useLocation } from "./lib/router.js";
import { Shell } from "./components/shell.js";
import { EmptyState, LoadError, Skeleton } from "./components/ui.js";
import { SignIn } from "./pages/sign-in.js";
import { AcceptInvitation, ResetPassword } from "./pages/links.js";

// Each section's page module is fetched when first shown, so a page load
// parses the shell and one page, not the whole console. The server
// preloads the module of the page it was asked for (web/src/lib.rs
// SECTIONS names each section's modules: keep the two in step).
const PAGES = {
  home: () => import("./pages/home.js"),
  inbox: () => import("./pages/inbox.js"),
  inboxSettings: () => import("./pages/inbox-settings.js"),
  calls: () => import("./pages/calls.js"),
  agents: () => import("./pages/agents.js"),
  knowledge: () => import("./pages/knowledge.js"),
  contacts: () => import("./pages/contacts.js"),
  channels: () => import("./pages/channels.js"),
  billing: () => import("./pages/billing.js"),
  apiKeys: () => import("./pages/api-keys.js"),
  members: () => import("./pages/members.js"),
  webhooks: () => import("./pages/webhooks.js"),
  connectedApps: () => import("./pages/connected-apps.js"),
};

/** @typedef {() => Promise<any>} Loader */
/** Modules already fetched, by loader. @type {Map<Loader, any>} */
const loaded = new Map();

/** Moves focus to the page's heading, as a page load would. */
function focusHeading() {
  /** @type {HTMLElement | null} */
  const h1 = document.querySelector("main h1");
  if (h1 && document.activeElement !== h1 && !document.querySelector("dialog[open]")) h1.focus({ preventScroll: true });
}

/**
 * A page from its module: a placeholder while the module is fetched the
 * first time, then `view(module)`.
 * @param {{load: Loader, view: (m: any) => any}} p
 */
function Lazy({ load, view }) {
  const [failed, setFailed] = useState(/** @type {unknown} */ (null));
  const [, loadedNow] = useState(0);
  // A page shown after its module arrived takes focus as a navigation
  // does (the path's change came before its heading existed); the first
  // page of a load does not, as after any page load.
  const arrived = useRef(false);
  const module = loaded.get(load);
  useEffect(() => {
    if (module || failed) return;
    load().then(
      (m) => {
        loaded.set(load, m);
        arrived.current = true;
        loadedNow((n) => n + 1);
      },
      (e) => setFailed(e),
    );
  }, [load, module, failed]);
  useLayoutEffect(() => {
    if (module && arrived.current) {
      arrived.current = false;
      focusHeading();
    }
  }, [module]);
  if (failed) return html`<${LoadError} error=${failed} retry=${() => location.reload()} />`;
  if (!module) return html`<${Skeleton} rows=${6} />`;
  return view(module);
}

/**
 * A route's view: `page` from its module, given the path's params.
 * @param {Loader} load
 * @param {(m: any, params: Record<string, string>) => any} page
 * @returns {(params: Record<string, string>) => any}
 */
const lazy = (load, page) => {
  /** @param {Record<string, string>} params */
  const view = (params) => html`<${Lazy} load=${load} view=${(/** @type {any} */ m) => page(m, params)} />`;
  loaders.set(view, load);
  return view;
};
/** Each lazy route's loader, by its view. @type {Map<(params: Record<string, string>) => any, Loader>} */
const loaders = new Map();

/** @type {[string, (params: Record<string, string>) => any][]} */
const ROUTES = [
  ["/", lazy(PAGES.home, (m) => html`<${m.Home} />`)],
  ["/inbox", lazy(PAGES.inbox, (m) => html`<${m.Inbox} />`)],
  ["/inbox/:id", lazy(PAGES.inbox, (m, p) => html`<${m.Inbox} id=${p.id} />`)],
  ["/agents", lazy(PAGES.agents, (m) => html`<${m.Agents} />`)],
  ["/agents/:id", lazy(PAGES.agents, (m, p) => html`<${m.AgentPage} id=${p.id} view="settings" />`)],
  ["/agents/:id/playground", lazy(PAGES.agents, (m, p) => html`<${m.AgentPage} id=${p.id} view="playground" />`)],
  ["/agents/:id/triggers", lazy(PAGES.agents, (m, p) => html`<${m.AgentPage} id=${p.id} view="triggers" />`)],
  ["/agents/:id/runs", lazy(PAGES.agents, (m, p) => html`<${m.AgentPage} id=${p.id} view="runs" />`)],
  ["/calls", lazy(PAGES.calls, (m) => html`<${m.Calls} />`)],
  ["/calls/:id", lazy(PAGES.calls, (m, p) => html`<${m.CallPage} id=${p.id} />`)],
  ["/contacts", lazy(PAGES.contacts, (m) => html`<${m.Contacts} />`)],
  ["/contacts/:id", lazy(PAGES.contacts, (m, p) => html`<${m.ContactPage} id=${p.id} />`)],
  ["/channels", lazy(PAGES.channels, (m) => html`<${m.Channels} />`)],
  ["/channels/:id", lazy(PAGES.channels, (m, p) => html`<${m.ChannelPage} id=${p.id} />`)],
  ["/runs", lazy(PAGES.billing, (m) => html`<${m.RunsPage} />`)],
  ["/runs/:id", lazy(PAGES.billing, (m, p) => html`<${m.RunPage} id=${p.id} />`)],
  ["/billing", lazy(PAGES.billing, (m) => html`<${m.Billing} />`)],
  ["/knowledge", lazy(PAGES.knowledge, (m) => html`<${m.Knowledge} />`)],
  ["/knowledge/:id", lazy(PAGES.knowledge, (m, p) => html`<${m.CollectionPage} id=${p.id} />`)],
  ["/developers", () => html`<${Redirect} to="/developers/api-keys" />`],
  ["/developers/api-keys", lazy(PAGES.apiKeys, (m) => html`<${m.ApiKeys} />`)],
  ["/developers/webhooks", lazy(PAGES.webhooks, (m) => html`<${m.Webhooks} />`)],
  ["/developers/webhooks/:id", lazy(PAGES.webhooks, (m, p) => html`<${m.Webhook} id=${p.id} />`)],
  ["/developers/connected-apps", lazy(PAGES.connectedApps, (m) => html`<${m.ConnectedApps} />`)],
  ["/settings", () => html`<${Redirect} to="/settings/members" />`],
  ["/settings/members", lazy(PAGES.members, (m) => html`<${m.Members} />`)],
  ["/settings/inbox", lazy(PAGES.inboxSettings, (m) => html`<${m.InboxSettings} />`)],
];

/** Pages a one-time link opens, signed in or not. */
/** @type {Record<string, () => any>} */
const LINK_PAGES = {
  "/invitation": () => html`<${AcceptInvitation} />`,
  "/reset-password": () => html`<${ResetPassword} />`,
};

/** @param {{to: string}} p */
function Redirect({ to }) {
  useEffect(() => navigate(to, { replace: true }), [to]);
  return null;
}

/** @param {{children: any}} p */
function Scoped({ children }) {
  return children;
}

function NotFound() {
  useEffect(() => {
    document.title = "Not found · Parley";
  }, []);
  return html`<${EmptyState} title="There is no page here" action=${html`<a class="button" href="/">Go home</a>`}>
    The address may be mistyped, or the page may have moved.
  <//>`;
}

function App() {
  const [session, setSession] = useState(current());
  const { path, query } = useLocation();
  useEffect(() => {
    // The session may have changed between the first render and now.
    setSession(current());
    const unsubscribe = subscribe(setSession);
    return () => void unsubscribe();
  }, []);

  // Move focus to the new page's heading, as a page load would (before it
  // is painted: a key pressed at once must not lose to a later focus move).
  useLayoutEffect(focusHeading, [path]);

  const link = LINK_PAGES[path];
  if (link) return link();
  if (session.status === "loading") return html`<div class="boot" aria-busy="true" aria-label="Loading"></div>`;
  if (session.status === "signed-out") {
    if (path !== "/sign-in") {
      const next = path + location.search;
      return html`<${Redirect} to=${`/sign-in${next !== "/" ? `?next=${encodeURIComponent(next)}` : ""}`} />`;
    }
    return html`<${SignIn}
      notice=${session.notice}
      onSignedIn=${() => {
        const next = query.get("next");
        navigate(next && next.startsWith("/") && !next.startsWith("//") ? next : "/", { replace: true });
      }}
    />`;
  }
  if (path === "/sign-in") return html`<${Redirect} to="/" />`;
  // A page belongs to one workspace and mode: switching either mounts it
  // afresh, so nothing of the old scope's data or state survives.
  const scope = `${session.me?.workspace_id}:${session.me?.mode}`;
  for (const [pattern, view] of ROUTES) {
    const params = match(pattern, path);
    if (params) return html`<${Shell} path=${path}><${Scoped} key=${scope}>${view(params)}<//><//>`;
  }
  return html`<${Shell} path=${path}><${NotFound} /><//>`;
}

// The session is asked for at once; the first page's module (preloaded
// with index.html) is awaited before the first render, so the first paint
// is the page, not a placeholder.
restore();
const first = ROUTES.find(([pattern]) => match(pattern, location.pathname));
const firstLoad = first && loaders.get(first[1]);
if (firstLoad) {
  await firstLoad().then(
    (m) => loaded.set(firstLoad, m),
    () => {},
  );
}
const root = document.getElementById("app");
if (root) {
  root.replaceChildren();
  render(html`<${App} />`, root);
}
