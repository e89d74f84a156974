// The dashboard's entry: restores the session from the refresh cookie,
// then shows the sign-in page or the page the URL names inside the shell.

import { html, render, useEffect, useLayoutEffect, useState } from "./lib/html.js";
import { current, restore, subscribe } from "./lib/session.js";
import { match, navigate, useLocation } from "./lib/router.js";
import { Shell } from "./components/shell.js";
import { EmptyState } from "./components/ui.js";
import { SignIn } from "./pages/sign-in.js";
import { Home } from "./pages/home.js";
import { Inbox } from "./pages/inbox.js";
import { InboxSettings } from "./pages/inbox-settings.js";
import { CallPage, Calls } from "./pages/calls.js";
import { AgentPage, Agents } from "./pages/agents.js";
import { CollectionPage, Knowledge } from "./pages/knowledge.js";
import { ContactPage, Contacts } from "./pages/contacts.js";
import { ChannelPage, Channels } from "./pages/channels.js";
import { Billing, RunPage, RunsPage } from "./pages/billing.js";
import { ApiKeys } from "./pages/api-keys.js";
import { Members } from "./pages/members.js";
import { Webhook, Webhooks } from "./pages/webhooks.js";
import { ConnectedApps } from "./pages/connected-apps.js";
import { AcceptInvitation, ResetPassword } from "./pages/links.js";

/** @type {[string, (params: Record<string, string>) => any][]} */
const ROUTES = [
  ["/", () => html`<${Home} />`],
  ["/inbox", () => html`<${Inbox} />`],
  ["/inbox/:id", (p) => html`<${Inbox} id=${p.id} />`],
  ["/agents", () => html`<${Agents} />`],
  ["/agents/:id", (p) => html`<${AgentPage} id=${p.id} view="settings" />`],
  ["/agents/:id/playground", (p) => html`<${AgentPage} id=${p.id} view="playground" />`],
  ["/agents/:id/triggers", (p) => html`<${AgentPage} id=${p.id} view="triggers" />`],
  ["/agents/:id/runs", (p) => html`<${AgentPage} id=${p.id} view="runs" />`],
  ["/calls", () => html`<${Calls} />`],
  ["/contacts", () => html`<${Contacts} />`],
  ["/contacts/:id", (p) => html`<${ContactPage} id=${p.id} />`],
  ["/channels", () => html`<${Channels} />`],
  ["/runs", () => html`<${RunsPage} />`],
  ["/runs/:id", (p) => html`<${RunPage} id=${p.id} />`],
  ["/billing", () => html`<${Billing} />`],
  ["/channels/:id", (p) => html`<${ChannelPage} id=${p.id} />`],
  ["/knowledge", () => html`<${Knowledge} />`],
  ["/knowledge/:id", (p) => html`<${CollectionPage} id=${p.id} />`],
  ["/calls/:id", (p) => html`<${CallPage} id=${p.id} />`],
  ["/developers", () => html`<${Redirect} to="/developers/api-keys" />`],
  ["/developers/api-keys", () => html`<${ApiKeys} />`],
  ["/developers/webhooks", () => html`<${Webhooks} />`],
  ["/developers/webhooks/:id", (p) => html`<${Webhook} id=${p.id} />`],
  ["/developers/connected-apps", () => html`<${ConnectedApps} />`],
  ["/settings", () => html`<${Redirect} to="/settings/members" />`],
  ["/settings/members", () => html`<${Members} />`],
  ["/settings/inbox", () => html`<${InboxSettings} />`],
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
  useEffect(() => subscribe(setSession), []);

  // Move focus to the new page's heading, as a page load would (before it
  // is painted: a key pressed at once must not lose to a later focus move).
  useLayoutEffect(() => {
    /** @type {HTMLElement | null} */
    const h1 = document.querySelector("main h1");
    if (h1 && document.activeElement !== h1 && !document.querySelector("dialog[open]")) h1.focus({ preventScroll: true });
  }, [path]);

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

const root = document.getElementById("app");
if (root) {
  root.replaceChildren();
  render(html`<${App} />`, root);
}
restore();
