// The frame around every signed-in page: the navigation, the workspace
// switcher, the live/test switch with its banner (Stripe's pattern: in test
// mode an orange band says so on every page), and the user menu.

import { html, useEffect, useState } from "../lib/html.js";
import { onLive, onLiveStatus } from "../lib/live.js";
import { startHeartbeat } from "../lib/presence.js";
import { current, signOut, switchTo } from "../lib/session.js";
import { icons, usePopover } from "./ui.js";
import { NotificationBell } from "./notifications.js";

/** @typedef {import("../lib/session.js").Me} Me */

/** The navigation: sections in the order people use them. */
export const SECTIONS = [
  {
    label: "Workspace",
    icon: icons.home,
    links: [
      { href: "/", label: "Home" },
      { href: "/inbox", label: "Inbox" },
      { href: "/agents", label: "Agents" },
      { href: "/runs", label: "Agent runs" },
      { href: "/calls", label: "Calls" },
      { href: "/contacts", label: "Contacts" },
      { href: "/knowledge", label: "Knowledge" },
      { href: "/channels", label: "Channels" },
    ],
  },
  {
    label: "Developers",
    icon: icons.key,
    links: [
      { href: "/developers/api-keys", label: "API keys" },
      { href: "/developers/webhooks", label: "Webhooks" },
      { href: "/developers/connected-apps", label: "Connected apps" },
    ],
  },
  {
    label: "Settings",
    icon: icons.users,
    links: [
      { href: "/settings/members", label: "Members" },
      { href: "/settings/inbox", label: "Inbox settings" },
      { href: "/billing", label: "Billing" },
    ],
  },
];

/** @param {{path: string, children: any}} p */
export function Shell({ path, children }) {
  const { me, membership } = current();
  // On a phone the navigation folds behind a Menu button (else it fills
  // the screen above every page); following a link folds it again.
  const [menu, setMenu] = useState(false);
  useEffect(() => setMenu(false), [path]);
  // Members see who else is online, viewing and typing (lib/presence.js).
  useEffect(() => startHeartbeat(), []);
  if (!me) return null;
  const test = me.mode === "test";
  return html`<div class=${test ? "app test-mode" : "app"}>
    <a class="skip-link" href="#main">Skip to content</a>
    ${test &&
    html`<div class="test-banner" role="status">
      <strong>Test mode</strong>
      <span>You are looking at test data. Nothing here touches live customers or money.</span>
    </div>`}
    <header class="topbar">
      <button type="button" class="nav-toggle subtle" aria-expanded=${menu ? "true" : "false"} aria-controls="main-nav"
        onClick=${() => setMenu(!menu)}>Menu</button>
      <a class="brand" href="/"><span class="brand-mark" aria-hidden="true">P</span>Parley<span class="visually-hidden"> home</span></a>
      <${WorkspaceSwitcher} me=${me} />
      <${ModeSwitch} me=${me} />
      <div class="spacer"></div>
      <${LiveIndicator} />
      <${NotificationBell} />
      <${UserMenu} email=${me.user.email} role=${membership?.role ?? "member"} />
    </header>
    <nav id="main-nav" class=${menu ? "sidebar open" : "sidebar"} aria-label="Main">
      ${SECTIONS.map(
        (s) => html`<div class="nav-section">
          <h2 class="nav-heading">${s.icon}<span>${s.label}</span></h2>
          <ul>
            ${s.links.map(
              (l) => html`<li>
                <a href=${l.href} aria-current=${path === l.href || path.startsWith(`${l.href}/`) ? "page" : undefined}
                  >${l.label}</a
                >
              </li>`,
            )}
          </ul>
        </div>`,
      )}
      <div class="nav-section">
        <ul>
          <li><a href="/docs" target="_blank" rel="noopener">API reference<span class="visually-hidden"> (opens in a new tab)</span></a></li>
        </ul>
      </div>
    </nav>
    <main id="main" class="content" tabindex="-1">${children}</main>
  </div>`;
}

/**
 * Keeps the live stream open while signed in, and says so when it is lost
 * (pages then show what they had until it catches up).
 */
function LiveIndicator() {
  const [status, setStatus] = useState(/** @type {import("../lib/live.js").LiveStatus} */ ("connecting"));
  useEffect(() => {
    const leave = onLive(() => {});
    const unwatch = onLiveStatus(setStatus);
    return () => {
      unwatch();
      leave();
    };
  }, []);
  return html`<span class="live-status" role="status" data-status=${status}
    >${status === "reconnecting" ? "Reconnecting…" : ""}</span
  >`;
}

/** @param {{me: Me}} p */
function WorkspaceSwitcher({ me }) {
  const [error, setError] = useState("");
  if (me.workspaces.length < 2) {
    const only = me.workspaces[0];
    return html`<span class="workspace-name" title="Workspace">${only?.workspace_name ?? ""}</span>`;
  }
  return html`<label class="workspace-switcher">
    <span class="visually-hidden">Workspace</span>
    <select
      value=${String(me.workspace_id)}
      onChange=${async (/** @type {any} */ e) => {
        try {
          setError("");
          await switchTo(Number(e.currentTarget.value), me.mode);
        } catch (err) {
          setError(err instanceof Error ? err.message : String(err));
        }
      }}
    >
      ${me.workspaces.map((w) => html`<option value=${String(w.workspace_id)}>${w.workspace_name}</option>`)}
    </select>
    ${error && html`<span class="error" role="alert">${error}</span>`}
  </label>`;
}

/** @param {{me: Me}} p */
function ModeSwitch({ me }) {
  const test = me.mode === "test";
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  return html`<span class="mode"><button
    type="button"
    role="switch"
    class="mode-switch"
    aria-checked=${test ? "true" : "false"}
    disabled=${busy}
    onClick=${async () => {
      setBusy(true);
      setError("");
      try {
        await switchTo(me.workspace_id, test ? "live" : "test");
      } catch (err) {
        setError(err instanceof Error ? err.message : String(err));
      } finally {
        setBusy(false);
      }
    }}
  >
    <span class="track" aria-hidden="true"><span class="thumb"></span></span>
    Test mode
  </button>${error && html`<span class="error" role="alert">${error}</span>`}</span>`;
}

/** @param {{email: string, role: string}} p */
function UserMenu({ email, role }) {
  const { open, setOpen, id, root } = usePopover();
  return html`<div class="user-menu" ref=${root}>
    <button type="button" class="subtle" aria-expanded=${open ? "true" : "false"} aria-controls=${id} onClick=${() => setOpen(!open)}>
      <span class="visually-hidden">Account: </span>${email}
    </button>
    <div class="menu" id=${id} hidden=${!open}>
      <p class="muted">Signed in as ${email} (${role})</p>
      <button type="button" onClick=${() => signOut()}>Sign out</button>
    </div>
  </div>`;
}
