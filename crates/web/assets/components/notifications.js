// The bell: the member's notifications (a handoff waiting, a mention, an
// assignment), read again whenever the live stream says something that
// may have made one, shown as browser notifications when allowed.

import { html, useEffect, useState } from "../lib/html.js";
import { api } from "../lib/api.js";
import { useLiveReload, useResource } from "../lib/data.js";
import { navigate } from "../lib/router.js";
import { When, icons, usePopover } from "./ui.js";

/** @typedef {{id: number, kind: string, conversation_id: number, text: string, read_at: string | null, created_at: string}} Note */

const CAUSES = new Set(["handoff.requested", "note.created", "conversation.updated"]);

/** Ids already seen in this tab (only newer ones become browser notifications). */
const told = new Set();
let primed = false;

/** @param {Note[]} items */
function tellBrowser(items) {
  const fresh = items.filter((n) => !n.read_at && !told.has(n.id));
  for (const n of items) told.add(n.id);
  // What was there when the page opened is not news.
  if (!primed) {
    primed = true;
    return;
  }
  if (typeof Notification !== "function" || Notification.permission !== "granted") return;
  for (const n of fresh) {
    const shown = new Notification("Parley", { body: n.text, tag: `parley-${n.id}` });
    shown.onclick = () => {
      window.focus();
      navigate(`/inbox/${n.conversation_id}?view=all`);
    };
  }
}

export function NotificationBell() {
  const list = useResource((signal) => api("GET", "/api/v1/notifications", { query: { limit: 20 }, signal }), []);
  useLiveReload(list.reload, (e) => CAUSES.has(e.event));
  const { open, setOpen, id, root } = usePopover();
  const [asked, setAsked] = useState(typeof Notification === "function" ? Notification.permission : "denied");
  /** @type {Note[]} */
  const items = list.data?.items ?? [];
  const unread = list.data?.unread ?? 0;
  useEffect(() => {
    if (list.data) tellBrowser(items);
  }, [list.data]);

  /** @param {Note} n */
  const follow = async (n) => {
    setOpen(false);
    if (!n.read_at) await api("POST", `/api/v1/notifications/${n.id}/read`).catch(() => {});
    list.reload();
    navigate(`/inbox/${n.conversation_id}?view=all`);
  };
  return html`<div class="user-menu bell" ref=${root}>
    <button type="button" class="subtle" aria-expanded=${open ? "true" : "false"} aria-controls=${id} onClick=${() => setOpen(!open)}>
      ${icons.bell}<span class="visually-hidden">Notifications</span>${unread > 0 && html` <span class="badge unread">${unread}<span class="visually-hidden"> unread</span></span>`}
    </button>
    <div class="menu notifications" id=${id} hidden=${!open}>
      ${!items.length && html`<p class="muted">Nothing yet. Handoffs, mentions and assignments show here.</p>`}
      ${items.length > 0 &&
      html`<ul aria-label="Notifications">
        ${items.map(
          (n) => html`<li class=${n.read_at ? "read" : "unread"}>
            <a href=${`/inbox/${n.conversation_id}?view=all`} onClick=${(/** @type {Event} */ e) => (e.preventDefault(), follow(n))}>
              ${!n.read_at && html`<span class="visually-hidden">Unread: </span>`}${n.text}
            </a>
            <span class="muted"> · <${When} value=${n.created_at} /></span>
          </li>`,
        )}
      </ul>`}
      <div class="menu-actions">
        ${unread > 0 &&
        html`<button type="button" onClick=${async () => (await api("POST", "/api/v1/notifications/read-all").catch(() => {}), list.reload())}>
          Mark all read
        </button>`}
        ${asked === "default" &&
        html`<button type="button" onClick=${async () => setAsked(await Notification.requestPermission())}>
          Turn on browser notifications
        </button>`}
      </div>
    </div>
  </div>`;
}
