// The inbox: where people work conversations beside the agents. Three
// panes (Chatwoot's layout): the conversation list by view and filters,
// the thread with its private notes and the composer, and the contact and
// labels beside it. Everything follows the live stream; every action is
// the same REST call an integration would make.

import { html, useEffect, useRef, useState } from "../lib/html.js";
import { api, ApiError } from "../lib/api.js";
import { useLiveReload, useResource } from "../lib/data.js";
import { onLive } from "../lib/live.js";
import { current } from "../lib/session.js";
import { navigate, setQuery, useLocation } from "../lib/router.js";
import { formatDate, humanize } from "../lib/format.js";
import { ConfirmDialog, Dialog, EmptyState, Field, LoadError, NotHere, Skeleton, When } from "../components/ui.js";
import { typing, useOthersOn, viewing } from "../lib/presence.js";
import { ContactForm, Merge } from "./contacts.js";

/**
 * @typedef {object} Handoff
 * @property {number} id
 * @property {"human" | "agent"} to
 * @property {"requested" | "accepted" | "completed" | "canceled"} status
 * @property {string} reason
 * @property {string | null} [note]
 * @property {number | null} [user_id]
 * @property {number | null} [offered_user_id]
 * @property {number} offers
 * @property {string} created_at
 */
/**
 * @typedef {object} Conversation
 * @property {number} id
 * @property {string} title
 * @property {string} channel
 * @property {string} status
 * @property {"agent" | "human" | "none"} handler
 * @property {number | null} [agent_id]
 * @property {number | null} [contact_id]
 * @property {number | null} [assignee_user_id]
 * @property {string | null} [waiting_since]
 * @property {string | null} [snoozed_until]
 * @property {string | null} [last_message_ts]
 * @property {string | null} [last_message_preview]
 * @property {number} unread_count
 * @property {string[]} labels
 * @property {number} [channel_id]
 * @property {Handoff | null} [handoff]
 */
/**
 * How the channel would send the composer's text (`reply-preview`).
 * @typedef {{channel: string, refused: string | null, segments: {encoding: string, count: number} | null,
 *   subject: string | null, threaded: boolean | null, html: string | null, template_required: boolean,
 *   free_text_until: string | null}} ReplyPreview
 * @typedef {{content_sid: string, name: string, language: string, body: string, variables: Record<string, string>}} ApprovedTemplate
 */
/**
 * @typedef {object} Message
 * @property {number} id
 * @property {number} conversation_id
 * @property {"inbound" | "outbound"} direction
 * @property {{type: "contact" | "agent" | "user" | "system", id?: number | null}} author
 * @property {string} text
 * @property {{filename: string, content_type: string, size: number, url?: string | null}[]} attachments
 * @property {string} status
 * @property {string | null} [error]
 * @property {string} created_at
 * @property {{encoding: string, count: number} | null} [segments]
 * @property {{subject: string, full_text?: string} | null} [email]
 */
/** @typedef {{id: number, author_user_id: number | null, text: string, mentions: number[], for_agent: boolean, created_at: string}} Note */
/** @typedef {{user_id: number, email: string, role: string}} Member */
/** @typedef {{id: number, name: string, status: string}} AgentRef */
/** @typedef {{id: number, name: string, color: string}} Label */
/** @typedef {{id: number, short_code: string, content: string}} Canned */
/** @typedef {import("./contacts.js").Contact} Contact */

const VIEWS = [
  ["mine", "Mine"],
  ["unassigned", "Unassigned"],
  ["handoffs", "Handoffs waiting"],
  ["all", "All"],
];
const STATUSES = ["open", "pending", "snoozed", "resolved", "closed"];
const CHANNELS = ["webchat", "sms", "whatsapp", "email", "telegram", "voice", "api"];
const PAGE = 50;

/** Events after which the list, the thread or the counts may have changed. */
const INBOX_EVENT = /^(conversation|message|handoff|note)\./;

/** The members, agents and labels of the scope, for names and pickers. */
function useDirectory() {
  const members = useResource(
    (signal) => api("GET", "/api/v1/members", { query: { limit: 200 }, signal }).then((r) => /** @type {Member[]} */ (r.items)),
    [],
  );
  const agents = useResource(
    (signal) => api("GET", "/api/v1/agents", { query: { limit: 200 }, signal }).then((r) => /** @type {AgentRef[]} */ (r.agents)),
    [],
  );
  const labels = useResource(
    (signal) => api("GET", "/api/v1/labels", { query: { limit: 200 }, signal }).then((r) => /** @type {Label[]} */ (r.items)),
    [],
  );
  useLiveReload(labels.reload, (e) => e.event.startsWith("label."));
  return { members: members.data ?? [], agents: agents.data ?? [], labels: labels.data ?? [] };
}

/** @typedef {ReturnType<typeof useDirectory>} Directory */

/** @param {{id: number | null | undefined, dir: Directory}} p */
function MemberName({ id, dir }) {
  const me = current().me?.user.id;
  if (id == null) return html`<span>Nobody</span>`;
  if (id === me) return html`<span>You</span>`;
  return html`<span>${dir.members.find((m) => m.user_id === id)?.email ?? `Member #${id}`}</span>`;
}

/** @param {{id?: string}} p */
export function Inbox({ id }) {
  const { query } = useLocation();
  const view = query.get("view") ?? "mine";
  const filters = {
    status: query.get("status") ?? "open",
    channel: query.get("channel") ?? "",
    label: query.get("label") ?? "",
    sort: query.get("sort") ?? "recent",
  };
  const key = JSON.stringify({ view, ...filters });
  const dir = useDirectory();
  const list = useResource(
    (signal) =>
      api("GET", "/api/v1/inbox/conversations", {
        query: { view, status: filters.status === "any" ? "" : filters.status, channel: filters.channel, label: filters.label, sort: filters.sort, limit: PAGE },
        signal,
      }),
    [key],
  );
  const summary = useResource((signal) => api("GET", "/api/v1/inbox/summary", { signal }), []);
  useLiveReload(list.reload, (e) => INBOX_EVENT.test(e.event));
  useLiveReload(summary.reload, (e) => INBOX_EVENT.test(e.event));

  // The tab's title counts what waits for this person.
  const waiting = (summary.data?.handoffs ?? 0) + (summary.data?.unread_mine ?? 0);
  useEffect(() => {
    document.title = `${waiting ? `(${waiting}) ` : ""}Inbox · Parley`;
  }, [waiting]);

  /** @type {Conversation[]} */
  const items = list.data?.items ?? [];
  const selected = id ? Number(id) : null;
  // Conversations ticked for a bulk change (x ticks the open one); a new
  // view or filter starts over.
  const [picked, setPicked] = useState(/** @type {Set<number>} */ (new Set()));
  useEffect(() => setPicked(new Set()), [key]);
  /** @param {number} cid */
  const togglePick = (cid) =>
    setPicked((was) => {
      const next = new Set(was);
      if (next.has(cid)) next.delete(cid);
      else next.add(cid);
      return next;
    });
  // Single-key shortcuts can be turned off (WCAG 2.1.4): remembered in
  // this browser (a preference, nothing secret).
  const [shortcutsOn, setShortcutsOn] = useState(localStorage.getItem("parley-inbox-keys") !== "off");
  const search = location.search;
  /** @param {number} to */
  const open = (to) => navigate(`/inbox/${to}${search}`);

  // j/k move through the list; r replies; e resolves; a assigns to me.
  useEffect(() => {
    /** @param {KeyboardEvent} e */
    const onKey = (e) => {
      const t = /** @type {HTMLElement | null} */ (e.target instanceof HTMLElement ? e.target : null);
      if (!shortcutsOn || e.ctrlKey || e.metaKey || e.altKey) return;
      // Not while writing, nor from a form's or a menu's own buttons.
      if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName) || t.closest("form, .menu, dialog"))) return;
      if (document.querySelector("dialog[open]")) return;
      const at = items.findIndex((c) => c.id === selected);
      if (e.key === "j" || e.key === "k") {
        const next = items[e.key === "j" ? Math.min(items.length - 1, at + 1) : Math.max(0, at - 1)];
        if (next) {
          e.preventDefault();
          open(next.id);
        }
      } else if (e.key === "r" && selected) {
        e.preventDefault();
        /** @type {HTMLTextAreaElement | null} */ (document.getElementById("composer-text"))?.focus();
      } else if (e.key === "x" && selected) {
        e.preventDefault();
        togglePick(selected);
      } else if ((e.key === "e" || e.key === "a") && selected) {
        e.preventDefault();
        document.dispatchEvent(new CustomEvent("inbox-shortcut", { detail: e.key }));
      }
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [items, selected, search, shortcutsOn]);

  const counts = summary.data ?? {};
  return html`<div class="inbox">
    <section class="inbox-list" aria-labelledby="inbox-heading">
      <h1 id="inbox-heading" tabindex="-1">Inbox</h1>
      <nav aria-label="Inbox views">
        <ul class="views">
          ${VIEWS.map(
            ([v, label]) => html`<li>
              <a href=${`/inbox?view=${v}`} aria-current=${v === view ? "page" : undefined}
                >${label}${counts[v] != null && html` <span class="count">${counts[v]}</span>`}</a
              >
            </li>`,
          )}
        </ul>
      </nav>
      <form class="filters compact" role="search" aria-label="Filter conversations" onSubmit=${(/** @type {Event} */ e) => e.preventDefault()}>
        <label
          >Status
          <select value=${filters.status} onChange=${(/** @type {any} */ e) => setQuery({ status: e.currentTarget.value })}>
            ${STATUSES.map((s) => html`<option value=${s}>${humanize(s)}</option>`)}
            <option value="any">Any</option>
          </select>
        </label>
        <label
          >Channel
          <select value=${filters.channel} onChange=${(/** @type {any} */ e) => setQuery({ channel: e.currentTarget.value })}>
            <option value="">Any</option>
            ${CHANNELS.map((c) => html`<option value=${c}>${humanize(c)}</option>`)}
          </select>
        </label>
        <label
          >Label
          <select value=${filters.label} onChange=${(/** @type {any} */ e) => setQuery({ label: e.currentTarget.value })}>
            <option value="">Any</option>
            ${dir.labels.map((l) => html`<option value=${l.name}>${l.name}</option>`)}
          </select>
        </label>
        <label
          >Sort
          <select value=${filters.sort} onChange=${(/** @type {any} */ e) => setQuery({ sort: e.currentTarget.value })}>
            <option value="recent">Latest activity</option>
            <option value="waiting">Waiting longest</option>
          </select>
        </label>
      </form>
      ${list.loading && !list.data && !list.error && html`<${Skeleton} />`}
      ${list.error && html`<${LoadError} error=${list.error} retry=${list.reload} />`}
      ${list.data && !items.length && html`<${EmptyState} title=${emptyTitle(view)}>${emptyHint(view)}<//>`}
      ${items.length > 0 &&
      html`<${BulkBar}
          items=${items}
          picked=${picked}
          setPicked=${setPicked}
          dir=${dir}
          onDone=${() => (list.reload(), summary.reload())}
        />
        <ul class="conversation-list" aria-label="Conversations">
          ${items.map(
            (c) =>
              html`<${ConversationRow}
                key=${c.id}
                c=${c}
                dir=${dir}
                selected=${c.id === selected}
                picked=${picked.has(c.id)}
                onPick=${() => togglePick(c.id)}
                href=${`/inbox/${c.id}${search}`}
              />`,
          )}
        </ul>`}
      ${(list.data?.total ?? 0) > items.length && html`<p class="muted">Showing ${items.length} of ${list.data.total}. Narrow the filters to see the rest.</p>`}
      <label class="keys-toggle"
        ><input type="checkbox" checked=${shortcutsOn} onChange=${(/** @type {any} */ e) => {
          const on = e.currentTarget.checked;
          localStorage.setItem("parley-inbox-keys", on ? "on" : "off");
          setShortcutsOn(on);
        }} />
        Keyboard shortcuts: j and k move, x selects, r replies, e resolves, a assigns to me</label
      >
    </section>
    ${selected
      ? html`<${Thread} key=${selected} id=${selected} dir=${dir} onChanged=${() => (list.reload(), summary.reload())} />`
      : html`<section class="inbox-thread empty-pane" aria-label="Conversation">
          <${EmptyState} title="Pick a conversation">Choose one on the left, or press j and k to move through the list.<//>
        </section>`}
  </div>`;
}

/** @param {string} view */
function emptyTitle(view) {
  return view === "mine" ? "Nothing assigned to you" : view === "handoffs" ? "No handoffs waiting" : "No conversations here";
}

/** @param {string} view */
function emptyHint(view) {
  return view === "mine"
    ? "Conversations you accept or are assigned show here. See Handoffs waiting for people asking for a person."
    : view === "handoffs"
      ? "When an agent hands a conversation to a person, it waits here until someone accepts it."
      : "Conversations arrive from your channels; change the filters to see closed or resolved ones.";
}

/**
 * Resolve or assign the ticked conversations in one call (all or none).
 * @param {{items: Conversation[], picked: Set<number>, setPicked: (s: Set<number>) => void, dir: Directory, onDone: () => void}} p
 */
function BulkBar({ items, picked, setPicked, dir, onDone }) {
  const me = current().me?.user.id;
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const [done, setDone] = useState("");
  const [assignee, setAssignee] = useState("");
  const ids = items.filter((c) => picked.has(c.id)).map((c) => c.id);
  const all = ids.length === items.length;
  /** @param {Record<string, unknown>} change @param {string} said */
  const apply = async (change, said) => {
    setBusy(true);
    setError("");
    try {
      await api("POST", "/api/v1/conversations/bulk", { body: { conversation_ids: ids, ...change } });
      setDone(`${ids.length} ${ids.length === 1 ? "conversation" : "conversations"} ${said}.`);
      setPicked(new Set());
      onDone();
    } catch (e) {
      setError(e instanceof ApiError ? (Object.values(e.fields())[0] ?? e.message) : String(e));
    } finally {
      setBusy(false);
    }
  };
  return html`<div class="bulk-bar" role="group" aria-label="Selected conversations">
    <label class="select-all"
      ><input
        type="checkbox"
        checked=${all}
        onChange=${() => setPicked(all ? new Set() : new Set(items.map((c) => c.id)))}
      />
      Select all</label
    >
    ${ids.length > 0 && html`<span>${ids.length} selected</span>`}
    ${ids.length > 0 &&
    html`<button type="button" disabled=${busy} onClick=${() => apply({ status: "resolved" }, "resolved")}>Resolve</button>
      ${me != null &&
      html`<button type="button" disabled=${busy} onClick=${() => apply({ assignee_user_id: me }, "assigned to you")}>
        Assign to me
      </button>`}
      <label
        >Assign to
        <select value=${assignee} onChange=${(/** @type {any} */ e) => setAssignee(e.currentTarget.value)}>
          <option value="">Choose a member</option>
          ${dir.members.map((m) => html`<option value=${String(m.user_id)}>${m.email}</option>`)}
        </select></label
      >
      <button
        type="button"
        disabled=${busy || !assignee}
        onClick=${() => apply({ assignee_user_id: Number(assignee) }, `assigned to ${dir.members.find((m) => String(m.user_id) === assignee)?.email}`)}
      >
        Assign
      </button>`}
    ${error && html`<p class="field-error" role="alert">${error}</p>`}
    <p class="visually-hidden" role="status">${done}</p>
  </div>`;
}

/**
 * One row of the list, keyed by the conversation's id: when a live reload
 * reorders the list, the row's checkbox (and focus) move with their
 * conversation instead of being reused for another one.
 * @param {{c: Conversation, dir: Directory, selected: boolean, picked: boolean, onPick: () => void, href: string}} p
 */
function ConversationRow({ c, dir, selected, picked, onPick, href }) {
  const requested = c.handoff?.status === "requested";
  return html`<li class=${`conversation-row${selected ? " selected" : ""}${picked ? " picked" : ""}`}>
    <input type="checkbox" class="pick" checked=${picked} onChange=${onPick} aria-label=${`Select ${c.title}`} />
    <a href=${href} aria-current=${selected ? "true" : undefined}>
      <span class="row-top">
        <strong class="title">${c.title}</strong>
        ${c.unread_count > 0 && html`<span class="badge unread">${c.unread_count}<span class="visually-hidden"> unread</span></span>`}
      </span>
      <span class="preview">${c.last_message_preview ?? ""}</span>
      <span class="row-meta">
        <span>${humanize(c.channel)}</span>
        ${requested
          ? html`<span class="badge warn">Wants a person</span>`
          : c.handler === "agent"
            ? html`<span class="badge">Agent</span>`
            : html`<span class="badge ok"><${MemberName} id=${c.assignee_user_id} dir=${dir} /></span>`}
        ${c.waiting_since && html`<span class="waiting">Waiting <${When} value=${c.waiting_since} /></span>`}
        ${c.labels.map((l) => html`<${LabelChip} name=${l} dir=${dir} />`)}
      </span>
    </a>
  </li>`;
}

/** @param {{name: string, dir: Directory}} p */
function LabelChip({ name, dir }) {
  const color = dir.labels.find((l) => l.name === name)?.color ?? "#4b5563";
  return html`<span class="label-chip"><span class="dot" style=${{ background: color }} aria-hidden="true"></span>${name}</span>`;
}

/** Who wrote a message, in words. @param {{m: Message, dir: Directory}} p */
function AuthorName({ m, dir }) {
  const a = m.author;
  if (a.type === "contact") return html`<span>Contact</span>`;
  if (a.type === "system") return html`<span>System</span>`;
  if (a.type === "agent") return html`<span>Agent ${dir.agents.find((x) => x.id === a.id)?.name ?? ""}</span>`;
  return html`<${MemberName} id=${a.id} dir=${dir} />`;
}

/** Delivery status as an icon and words (colour is never the only sign). @param {{m: Message}} p */
function DeliveryStatus({ m }) {
  if (m.direction === "inbound") return null;
  const marks = { queued: "○", sent: "✓", delivered: "✓✓", read: "✓✓", failed: "!" };
  return html`<span class=${`delivery ${m.status}`} title=${m.error ?? ""}
    ><span aria-hidden="true">${marks[/** @type {keyof typeof marks} */ (m.status)] ?? ""}</span> ${humanize(m.status)}</span
  >`;
}

/**
 * One conversation: its header and actions, messages and notes in time
 * order, the composer, and the contact and labels beside it.
 * @param {{id: number, dir: Directory, onChanged: () => void}} p
 */
function Thread({ id, dir, onChanged }) {
  const conversation = useResource((signal) => api("GET", `/api/v1/conversations/${id}`, { signal }), [id]);
  const handoff = useResource(
    (signal) =>
      api("GET", "/api/v1/handoffs", { query: { conversation_id: id, limit: 1 }, signal }).then(
        (r) => /** @type {Handoff | undefined} */ (r.items.find((/** @type {Handoff} */ h) => h.status === "requested" || h.status === "accepted")),
      ),
    [id],
  );
  const messages = useResource(
    (signal) => api("GET", `/api/v1/conversations/${id}/messages`, { query: { order: "desc", limit: 200 }, signal }),
    [id],
  );
  const notes = useResource((signal) => api("GET", `/api/v1/conversations/${id}/notes`, { query: { limit: 200 }, signal }), [id]);
  const contactId = conversation.data?.contact_id;
  const contact = useResource(
    (signal) => (contactId ? api("GET", `/api/v1/contacts/${contactId}`, { signal }) : Promise.resolve(null)),
    [contactId],
  );
  /** @param {import("../lib/api.js").ServerEvent} e */
  const mine = (e) => {
    // The frame carries the event; its `data` is the changed resource.
    const changed = e.data?.data;
    return INBOX_EVENT.test(e.event) && (changed?.conversation_id === id || (e.event.startsWith("conversation.") && changed?.id === id));
  };
  // Why the agent said what it said (each reply's run), and the calls.
  const runs = useResource((signal) => api("GET", "/api/v1/agent-runs", { query: { conversation_id: id, limit: 200 }, signal }), [id]);
  const calls = useResource((signal) => api("GET", "/api/v1/calls", { query: { conversation_id: id, limit: 20 }, signal }), [id]);
  /** @param {import("../lib/api.js").ServerEvent} e */
  const about = (e) => e.data?.data?.conversation_id === id;
  useLiveReload(runs.reload, (e) => e.event.startsWith("agent.run.") && about(e));
  useLiveReload(calls.reload, (e) => e.event.startsWith("call.") && about(e));
  useLiveReload(conversation.reload, mine);
  useLiveReload(handoff.reload, mine);
  useLiveReload(messages.reload, mine);
  // Messages as the stream tells of them, before the next reload brings
  // them (at most once a second): a new one shows at once, a delivery
  // status moves at once.
  const [fresh, setFresh] = useState(/** @type {Map<number, Message>} */ (new Map()));
  useEffect(
    () =>
      onLive((e) => {
        const m = /** @type {Message | undefined} */ (e.data?.data);
        if (!e.event.startsWith("message.") || !m || m.conversation_id !== id || typeof m.id !== "number") return;
        setFresh((was) => new Map(was).set(m.id, m));
      }),
    [id],
  );
  // What a reload brought is no longer news.
  useEffect(() => {
    const loaded = new Set((messages.data?.items ?? []).map((/** @type {Message} */ m) => m.id));
    setFresh((was) => (was.size ? new Map([...was].filter(([mid]) => !loaded.has(mid))) : was));
  }, [messages.data]);
  useLiveReload(notes.reload, mine);
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  // The others see this member here; this member sees them.
  useEffect(() => {
    viewing(id);
    return () => viewing(null);
  }, [id]);
  const others = useOthersOn(id);

  /** @type {Conversation | undefined} */
  const c = conversation.data;
  const me = current().me?.user.id;

  // Reading the thread marks it read (the contact's unread count goes to 0).
  useEffect(() => {
    if (c && c.unread_count > 0) api("POST", `/api/v1/conversations/${id}/read`).then(onChanged, () => {});
  }, [c?.unread_count]);

  /** @param {() => Promise<unknown>} act */
  const run = async (act) => {
    setBusy(true);
    setError("");
    try {
      await act();
      conversation.reload();
      handoff.reload();
      onChanged();
      // The button pressed may be gone now: keep focus in the conversation.
      heading.current?.focus({ preventScroll: true });
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
      // A 409 means it changed meanwhile (another member accepted it): show how it is now.
      conversation.reload();
      handoff.reload();
    } finally {
      setBusy(false);
    }
  };
  const h = handoff.data;
  const heading = useRef(/** @type {HTMLHeadingElement | null} */ (null));
  // An opened conversation takes focus (a screen reader announces it),
  // unless the member is already somewhere in it.
  const loaded = Boolean(c);
  useEffect(() => {
    const at = document.activeElement;
    if (loaded && (!at || at === document.body || at.tagName === "H1" || at.closest(".inbox-list"))) {
      heading.current?.focus({ preventScroll: true });
    }
  }, [id, loaded]);
  const [dialog, setDialog] = useState(/** @type {"" | "snooze" | "close"} */ (""));
  const accept = () => run(() => api("POST", `/api/v1/handoffs/${h?.id}/accept`, { body: {} }));
  const assignMe = () => run(() => api("POST", `/api/v1/conversations/${id}/assign`, { body: { user_id: me } }));
  const setStatus = (/** @type {string} */ status) => run(() => api("PATCH", `/api/v1/conversations/${id}`, { body: { status } }));

  // e resolves, a assigns to me (from the list's keyboard handler).
  const shortcut = useRef(/** @type {(key: string) => void} */ (() => {}));
  shortcut.current = (key) => {
    if (!c || busy) return;
    if (key === "e" && c.status !== "resolved" && c.status !== "closed") setStatus("resolved");
    if (key === "a" && c.assignee_user_id !== me) (h?.status === "requested" ? accept : assignMe)();
  };
  useEffect(() => {
    /** @param {Event} e */
    const on = (e) => shortcut.current(/** @type {CustomEvent} */ (e).detail);
    document.addEventListener("inbox-shortcut", on);
    return () => document.removeEventListener("inbox-shortcut", on);
  }, []);

  if (conversation.error && !conversation.data) {
    return html`<section class="inbox-thread" aria-label="Conversation">
      <${NotHere} error=${conversation.error} what="conversation" back="/inbox" backLabel="Back to the inbox" retry=${conversation.reload} />
    </section>`;
  }
  if (!c) return html`<section class="inbox-thread" aria-label="Conversation"><${Skeleton} rows=${5} /></section>`;

  /** @type {Message[]} */
  const thread = [...(messages.data?.items ?? [])].reverse().map((m) => fresh.get(m.id) ?? m);
  for (const m of fresh.values()) if (!thread.some((t) => t.id === m.id)) thread.push(m);
  /** @type {Note[]} */
  const teamNotes = notes.data?.items ?? [];
  /** @type {Run[]} */
  const agentRuns = runs.data?.items ?? [];
  /** @type {Map<number, Run>} */
  const runOf = new Map(agentRuns.filter((r) => r.reply_message_id != null).map((r) => [/** @type {number} */ (r.reply_message_id), r]));
  const shown = new Set(thread.map((m) => m.id));
  /** @type {{at: string, key: string, m?: Message, n?: Note, r?: Run, call?: CallEntry}[]} */
  const entries = [
    ...thread.map((m) => ({ at: m.created_at, key: `m${m.id}`, m })),
    ...teamNotes.map((n) => ({ at: n.created_at, key: `n${n.id}`, n })),
    // Runs that sent nothing shown here (failed, canceled, or silent) stand on their own.
    ...agentRuns
      .filter((r) => r.status !== "queued" && r.status !== "running" && !(r.reply_message_id != null && shown.has(r.reply_message_id)))
      .map((r) => ({ at: r.created_at, key: `r${r.id}`, r })),
    ...(calls.data?.items ?? []).map((/** @type {CallEntry} */ call) => ({ at: call.created_at, key: `c${call.id}`, call })),
  ].sort((a, b) => a.at.localeCompare(b.at));
  const closed = c.status === "closed";
  const agentName = dir.agents.find((a) => a.id === c.agent_id)?.name;

  return html`<section class="inbox-thread" aria-labelledby="thread-heading">
      <header class="thread-header">
        <div>
          <h2 id="thread-heading" tabindex="-1" ref=${heading}>${c.title}</h2>
          <p class="muted">
            ${humanize(c.channel)} · ${humanize(c.status)} · ${c.handler === "agent"
              ? html`Answered by ${agentName ? `agent ${agentName}` : "an agent"}`
              : c.handler === "human"
                ? html`Handled by <${MemberName} id=${c.assignee_user_id} dir=${dir} />`
                : "Nobody answers"}
          </p>
        </div>
        <div class="actions">
          ${h?.status === "requested" &&
          html`<button type="button" class="primary" disabled=${busy} onClick=${accept}>Accept handoff</button>`}
          ${c.assignee_user_id !== me && h?.status !== "requested" && !closed &&
          html`<button type="button" disabled=${busy} onClick=${assignMe}>Assign to me</button>`}
          ${c.handler !== "agent" && !closed && html`<${GiveBack} c=${c} dir=${dir} busy=${busy} run=${run} />`}
          ${c.status === "resolved" || c.status === "snoozed" || closed
            ? !closed &&
              html`<button type="button" disabled=${busy} onClick=${() => setStatus("open")}>${c.status === "snoozed" ? "Wake now" : "Reopen"}</button>`
            : html`<button type="button" disabled=${busy} onClick=${() => setStatus("resolved")}>Resolve</button>`}
          ${!closed && c.status !== "snoozed" && html`<button type="button" disabled=${busy} onClick=${() => setDialog("snooze")}>Snooze…</button>`}
          ${!closed && html`<button type="button" class="danger subtle" disabled=${busy} onClick=${() => setDialog("close")}>Close</button>`}
        </div>
      </header>
      ${c.status === "snoozed" && c.snoozed_until &&
      html`<p class="notice" role="status">Snoozed until ${formatDate(c.snoozed_until)}: it reopens then, or when the contact writes.</p>`}
      ${dialog === "snooze" &&
      html`<${SnoozeDialog}
        onClose=${() => setDialog("")}
        onSnooze=${(/** @type {string} */ until) => run(() => api("PATCH", `/api/v1/conversations/${id}`, { body: { status: "snoozed", snoozed_until: until } }))}
      />`}
      ${dialog === "close" &&
      html`<${ConfirmDialog}
        title="Close this conversation?"
        confirm="Close conversation"
        onClose=${() => setDialog("")}
        onConfirm=${async () => {
          await api("PATCH", `/api/v1/conversations/${id}`, { body: { status: "closed" } });
          conversation.reload();
          onChanged();
        }}
      >
        A closed conversation never reopens: the contact's next message starts a new one. To set it aside for now, resolve or
        snooze it instead.
      <//>`}
      ${h?.status === "requested" &&
      html`<p class="notice warn" role="status">
        Waiting for a person since <${When} value=${h.created_at} />: ${h.reason}${h.note ? ` (${h.note})` : ""}.
        ${h.offers > 0 && (h.offered_user_id != null ? html` Offered to <${MemberName} id=${h.offered_user_id} dir=${dir} />.` : " Offered to everyone.")}
      </p>`}
      ${error && html`<p class="notice error" role="alert">${error}</p>`}
      <p class="presence muted" role="status">
        ${others.map((o, i) => html`${i ? "; " : ""}${o.email} is ${o.activity === "typing" ? "typing…" : "viewing"}`)}
      </p>
      <ol class="thread" aria-label="Messages and notes">
        ${entries.map((e) =>
          e.m
            ? html`<li key=${e.key} class=${`bubble ${e.m.direction} ${e.m.author.type}`}>
                <p class="who"><${AuthorName} m=${e.m} dir=${dir} /> · <${When} value=${e.m.created_at} /></p>
                ${e.m.email?.subject && html`<p class="subject">${e.m.email.subject}</p>`}
                <${MessageText} text=${e.m.text} full=${e.m.email?.full_text} />
                ${e.m.attachments.map((a) =>
                  a.url && a.content_type.startsWith("image/")
                    ? html`<img class="attachment" src=${a.url} alt=${a.filename} loading="lazy" />`
                    : html`<a class="attachment" href=${a.url ?? undefined} download=${a.filename}>${a.filename}</a>`,
                )}
                <p class="meta">
                  <${DeliveryStatus} m=${e.m} />
                  ${e.m.segments &&
                  html`<span>${e.m.direction === "outbound" ? " · " : ""}${e.m.segments.count} SMS segment${e.m.segments.count === 1 ? "" : "s"}</span>`}
                </p>
                ${runOf.has(e.m.id) && html`<${RunDetails} run=${/** @type {Run} */ (runOf.get(e.m.id))} />`}
              </li>`
            : e.n
              ? html`<li key=${e.key} class="bubble note">
                  <p class="who">
                    Private note${e.n.for_agent ? ", shared with the agent" : ""} · <${MemberName} id=${e.n.author_user_id} dir=${dir} /> ·
                    <${When} value=${e.n.created_at} />
                  </p>
                  <p class="text">${e.n.text}</p>
                </li>`
              : e.r
                ? html`<li key=${e.key} class="thread-event">
                    <p class="who">
                      Agent run ${humanize(e.r.status)}${e.r.error ? `: ${e.r.error}` : e.r.status === "completed" ? ": no reply" : ""} ·
                      <${When} value=${e.r.created_at} />
                    </p>
                    <${RunDetails} run=${e.r} />
                  </li>`
                : e.call && html`<li key=${e.key} class="thread-event"><${CallCard} call=${e.call} /></li>`,
        )}
      </ol>
      ${!closed && html`<${Composer} c=${c} contact=${contact.data} others=${others} onSent=${() => (messages.reload(), notes.reload(), onChanged())} />`}
    </section>
    <${ContactPanel} c=${c} contact=${contact} dir=${dir} onChanged=${() => (conversation.reload(), onChanged())} />`;
}

/**
 * @typedef {{id: number, status: string, reply_message_id: number | null, created_at: string, error: string | null,
 *   engine: string, model: string, total_ms: number | null, input_tokens: number, output_tokens: number,
 *   tool_calls: {name: string, arguments: unknown, result: unknown, error: string | null, ms: number}[],
 *   retrieval: {passage_id: number, score: number}[]}} Run
 * @typedef {{id: string, status: string, direction: string, from: string | null, to: string, created_at: string,
 *   duration_ms: number | null, ended_reason: string | null, recording: {status: string}}} CallEntry
 */

/** What the agent did to answer, folded: its tool calls and what it read. @param {{run: Run}} p */
function RunDetails({ run }) {
  const tools = run.tool_calls.length;
  const read = run.retrieval.length;
  return html`<details class="run-details">
    <summary>
      How the agent answered: ${tools} tool call${tools === 1 ? "" : "s"}, ${read} passage${read === 1 ? "" : "s"} read
    </summary>
    ${run.tool_calls.map(
      (t) => html`<div class="tool-call">
        <p><strong>${t.name}</strong> <span class="muted">${t.ms} ms</span></p>
        <pre class="excerpt">${JSON.stringify(t.arguments, null, 2)}</pre>
        ${t.error ? html`<p class="error">${t.error}</p>` : html`<pre class="excerpt">${JSON.stringify(t.result ?? null, null, 2)}</pre>`}
      </div>`,
    )}
    ${read > 0 &&
    html`<p>Knowledge: ${run.retrieval.map((h) => `passage ${h.passage_id} (score ${h.score.toFixed(2)})`).join(", ")}</p>`}
    <p class="muted">
      ${run.engine} · ${run.model} · ${run.input_tokens} / ${run.output_tokens} tokens${run.total_ms != null ? ` · ${run.total_ms} ms` : ""} ·
      <a href=${`/runs/${run.id}`}>Run #${run.id}</a>
    </p>
  </details>`;
}

/** A call in the thread: how it went, its recording, a link to its transcript. @param {{call: CallEntry}} p */
function CallCard({ call }) {
  const ready = call.recording.status === "available";
  const recording = useResource(
    (signal) =>
      ready ? api("GET", `/api/v1/calls/${encodeURIComponent(call.id)}/recording`, { query: { redirect: true }, signal }) : Promise.resolve(null),
    [call.id, ready],
  );
  const secs = call.duration_ms != null ? Math.round(call.duration_ms / 1000) : null;
  return html`<div class="call-card">
    <p class="who">
      ${call.direction === "outbound" ? `Call to ${call.to}` : `Call from ${call.from ?? "an unknown number"}`} ·
      ${humanize(call.status)}${secs != null ? ` · ${Math.floor(secs / 60)}:${String(secs % 60).padStart(2, "0")}` : ""} ·
      <${When} value=${call.created_at} />
    </p>
    ${recording.data?.url && html`<audio controls preload="none" src=${recording.data.url} aria-label="Call recording"></audio>`}
    <p><a href=${`/calls/${encodeURIComponent(call.id)}`}>Transcript and recording</a></p>
  </div>`;
}

/**
 * A message's text: email quoting (lines from "On … wrote:" or starting
 * with ">") folds behind a disclosure, as does what an inbound email's
 * `full_text` holds beyond the new part. Always text, never markup.
 * @param {{text: string, full?: string}} p
 */
function MessageText({ text, full }) {
  if (full && full.trim() !== text.trim()) {
    const rest = full.trimStart().startsWith(text.trim()) ? full.trimStart().slice(text.trim().length).trim() : full;
    return html`<p class="text">${text}</p>
      <details class="quoted"><summary>Quoted text</summary><p class="text">${rest}</p></details>`;
  }
  const lines = text.split("\n");
  const at = lines.findIndex((l, i) => /^>/.test(l) || (/^On .+ wrote:$/.test(l.trim()) && i > 0));
  if (at <= 0) return html`<p class="text">${text}</p>`;
  return html`<p class="text">${lines.slice(0, at).join("\n")}</p>
    <details class="quoted"><summary>Quoted text</summary><p class="text">${lines.slice(at).join("\n")}</p></details>`;
}

/**
 * When a snoozed conversation comes back: in an hour, tomorrow morning,
 * next Monday morning, or a time the member picks (their own clock).
 * @param {{onClose: () => void, onSnooze: (until: string) => void}} p
 */
function SnoozeDialog({ onClose, onSnooze }) {
  const at = (/** @type {number} */ days, /** @type {number} */ hour) => {
    const d = new Date();
    d.setDate(d.getDate() + days);
    d.setHours(hour, 0, 0, 0);
    return d;
  };
  const monday = (8 - new Date().getDay()) % 7 || 7;
  const choices = [
    ["hour", "In an hour", new Date(Date.now() + 3600_000)],
    ["tomorrow", "Tomorrow at 9:00", at(1, 9)],
    ["monday", "Next Monday at 9:00", at(monday, 9)],
  ];
  const [choice, setChoice] = useState("hour");
  const [custom, setCustom] = useState("");
  const [error, setError] = useState("");
  const submit = () => {
    const picked = choice === "custom" ? (custom ? new Date(custom) : null) : /** @type {Date} */ (choices.find((c) => c[0] === choice)?.[2]);
    if (!picked || Number.isNaN(picked.getTime())) return setError("Pick a date and time.");
    if (picked.getTime() <= Date.now()) return setError("Pick a time in the future.");
    onClose();
    onSnooze(picked.toISOString());
  };
  return html`<${Dialog} title="Snooze until" onClose=${onClose}>
    <form novalidate onSubmit=${(/** @type {Event} */ e) => (e.preventDefault(), submit())}>
      <div class="dialog-body">
        <fieldset class="choices">
          <legend class="visually-hidden">When it comes back</legend>
          ${choices.map(
            ([key, label, when]) => html`<label class="check">
              <input type="radio" name="snooze" checked=${choice === key} onChange=${() => setChoice(/** @type {string} */ (key))} />
              <span>${label}<span class="hint">${formatDate(/** @type {Date} */ (when).toISOString())}</span></span>
            </label>`,
          )}
          <label class="check">
            <input type="radio" name="snooze" checked=${choice === "custom"} onChange=${() => setChoice("custom")} />
            <span>At a time I pick</span>
          </label>
        </fieldset>
        ${choice === "custom" &&
        html`<${Field} label="Date and time" error=${error}>
          ${(/** @type {any} */ a) => html`<input ...${a} type="datetime-local" value=${custom} onInput=${(/** @type {any} */ e) => setCustom(e.currentTarget.value)} />`}
        <//>`}
        ${error && choice !== "custom" && html`<p class="error" role="alert">${error}</p>`}
      </div>
      <footer>
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary">Snooze</button>
      </footer>
    </form>
  <//>`;
}

/** @param {{c: Conversation, dir: Directory, busy: boolean, run: (act: () => Promise<unknown>) => void}} p */
function GiveBack({ c, dir, busy, run }) {
  const usable = dir.agents.filter((a) => a.status === "active");
  const [chosen, setAgent] = useState("");
  // The conversation's own agent if it may answer, else the first that may.
  const fallback = usable.find((a) => a.id === c.agent_id) ?? usable[0];
  const agent = usable.some((a) => String(a.id) === chosen) ? chosen : String(fallback?.id ?? "");
  if (!usable.length) return null;
  return html`<span class="give-back">
    <label
      ><span class="visually-hidden">Agent to give it back to</span>
      <select value=${agent} onChange=${(/** @type {any} */ e) => setAgent(e.currentTarget.value)}>
        ${usable.map((a) => html`<option value=${String(a.id)}>${a.name}</option>`)}
      </select></label
    >
    <button type="button" disabled=${busy || !agent}
      onClick=${() => run(() => api("POST", `/api/v1/conversations/${c.id}/give-back`, { body: { agent_id: Number(agent) } }))}>
      Give back to agent
    </button>
  </span>`;
}

/**
 * A canned response's text for this contact: `{{contact.*}}` filled in,
 * an unknown or empty one left blank.
 * @param {string} content
 * @param {Contact | null | undefined} contact
 */
export function fillCanned(content, contact) {
  const name = contact?.display_name ?? "";
  /** @type {Record<string, string>} */
  const values = {
    "contact.name": name,
    "contact.first_name": name.split(/\s+/)[0] ?? "",
    "contact.email": contact?.normalized_email ?? "",
    "contact.phone": contact?.normalized_phone ?? "",
  };
  return content.replace(/\{\{\s*([\w.]+)\s*\}\}/g, (_, key) => (Object.hasOwn(values, key) ? values[key] : ""));
}

/**
 * Reply on the conversation's channel, or write a private note for the
 * team (never sent; @email mentions notify). Typing `/` and a short code
 * offers the canned responses that match.
 * Before a reply goes out while another member is typing one, it asks
 * once more (two answers crossing confuse a customer).
 * @param {{c: Conversation, contact: Contact | null | undefined, others: import("../lib/presence.js").Other[], onSent: () => void}} p
 */
function Composer({ c, contact, others, onSent }) {
  const [note, setNote] = useState(false);
  const [text, setText] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  // Who was typing when the member pressed Send: the question stays put
  // until answered, even if their typing stops under the member's cursor.
  const [warned, setWarned] = useState(/** @type {string | null} */ (null));
  const typist = note ? undefined : others.find((o) => o.activity === "typing");
  const rival = note ? null : warned;
  const box = useRef(/** @type {HTMLTextAreaElement | null} */ (null));
  const [dismissed, setDismissed] = useState(false);
  const slash = dismissed ? null : /^\/([\w-]*)$/.exec(text);
  const code = slash ? slash[1] : null;
  const canned = useResource(
    (signal) =>
      code === null
        ? Promise.resolve(null)
        : api("GET", "/api/v1/canned-responses", { query: { q: code || undefined, limit: 8 }, signal }),
    [code],
  );
  /** @type {Canned[]} */
  const offers = code === null || canned.loading ? [] : (canned.data?.items ?? []);
  /** @param {Canned} r */
  const pick = (r) => {
    setText(fillCanned(r.content, contact));
    box.current?.focus();
  };
  // How the channel would send it (segments, subject, formatting, the
  // WhatsApp window), asked as the member pauses typing.
  const [preview, setPreview] = useState(/** @type {ReplyPreview | null} */ (null));
  useEffect(() => {
    if (note) return;
    const ask = new AbortController();
    const timer = setTimeout(
      () =>
        api("POST", `/api/v1/conversations/${c.id}/reply-preview`, { body: { text }, signal: ask.signal }).then(setPreview, () => {}),
      text ? 300 : 0,
    );
    return () => (clearTimeout(timer), ask.abort());
  }, [text, note, c.id]);
  const [subject, setSubject] = useState(/** @type {string | null} */ (null));
  const [forAgent, setForAgent] = useState(false);
  const [files, setFiles] = useState(/** @type {File[]} */ ([]));
  const send = async () => {
    if (busy) return;
    if (!text.trim()) {
      setError(note ? "Write the note first." : "Write a reply first.");
      return;
    }
    if (typist && !warned) {
      setWarned(typist.email);
      return;
    }
    setBusy(true);
    setError("");
    setWarned(null);
    try {
      if (note) await api("POST", `/api/v1/conversations/${c.id}/notes`, { body: { text, for_agent: forAgent } });
      else {
        /** @type {Record<string, unknown>} */
        const body = { conversation_id: c.id, text };
        if (files.length) body.attachments = await Promise.all(files.map(asAttachment));
        if (subject != null && subject !== preview?.subject) body.subject = subject;
        await api("POST", "/api/v1/messages", { body });
      }
      setText("");
      setFiles([]);
      setSubject(null);
      setForAgent(false);
      onSent();
    } catch (e) {
      setError(e instanceof ApiError ? (Object.values(e.fields())[0] ?? e.message) : String(e));
    } finally {
      setBusy(false);
    }
  };
  const modes = html`<div class="composer-modes" role="radiogroup" aria-label="Write">
    <label><input type="radio" name="composer-mode" checked=${!note} onChange=${() => setNote(false)} /> Reply</label>
    <label><input type="radio" name="composer-mode" checked=${note} onChange=${() => setNote(true)} /> Private note</label>
  </div>`;
  // WhatsApp outside its 24-hour window: only an approved template may go.
  if (!note && preview?.template_required && c.channel_id) {
    return html`<div class="composer">
      ${modes}
      <${TemplateComposer} c=${c} contact=${contact} onSent=${onSent} />
    </div>`;
  }
  const refused = !note && preview?.refused;
  return html`<form class=${note ? "composer note" : "composer"} aria-label="Reply"
    onSubmit=${(/** @type {Event} */ e) => (e.preventDefault(), send())}>
    ${modes}
    ${!note && preview?.subject != null &&
    html`<div class="subject-field">
      <label for="composer-subject">Subject</label>
      <input id="composer-subject" type="text" maxlength="998" aria-describedby="composer-thread" value=${subject ?? preview.subject}
        onInput=${(/** @type {any} */ e) => setSubject(e.currentTarget.value)} />
      <span id="composer-thread" class="hint">${preview.threaded ? "Sent in the contact's email thread." : "Starts a new email thread."}</span>
    </div>`}
    <label for="composer-text" class="visually-hidden">${note ? "Private note" : "Reply"}</label>
    <textarea id="composer-text" ref=${box} rows="3" value=${text} aria-invalid=${error || refused ? "true" : undefined} aria-describedby="composer-hint composer-facts composer-error"
      placeholder=${note ? "Only your team sees notes. @name@example.com mentions a member." : `Reply by ${humanize(c.channel)}… (/ for canned responses)`}
      aria-controls="canned-offers" aria-autocomplete="list"
      onInput=${(/** @type {any} */ e) => {
        setText(e.currentTarget.value);
        setDismissed(false);
        typing();
      }}
      onKeyDown=${(/** @type {KeyboardEvent} */ e) => {
        if (e.key === "Enter" && (e.metaKey || e.ctrlKey)) {
          e.preventDefault();
          send();
        } else if (e.key === "Escape" && code !== null) {
          e.preventDefault();
          setDismissed(true);
        } else if (e.key === "ArrowDown" && offers.length) {
          e.preventDefault();
          /** @type {HTMLButtonElement | null} */ (document.querySelector(".canned-offers button"))?.focus();
        }
      }}></textarea>
    <div class="canned-offers" id="canned-offers">
      <p class="visually-hidden" role="status">
        ${code !== null && !canned.loading ? `${offers.length} canned response${offers.length === 1 ? "" : "s"} match` : ""}
      </p>
      ${code !== null && !canned.loading && !offers.length && html`<p class="muted">No canned response matches “/${code}”.</p>`}
      ${offers.length > 0 &&
      html`<ul aria-label="Canned responses">
        ${offers.map(
          (r) => html`<li>
            <button type="button" class="subtle" onClick=${() => pick(r)}
              onKeyDown=${(/** @type {KeyboardEvent} */ e) => {
                const t = /** @type {HTMLElement} */ (e.currentTarget).closest("li");
                const to = e.key === "ArrowDown" ? t?.nextElementSibling : e.key === "ArrowUp" ? t?.previousElementSibling : null;
                if (e.key === "ArrowUp" && !t?.previousElementSibling) {
                  e.preventDefault();
                  box.current?.focus();
                } else if (to) {
                  e.preventDefault();
                  /** @type {HTMLButtonElement | null} */ (to.querySelector("button"))?.focus();
                }
              }}>
              <strong>/${r.short_code}</strong> <span class="muted">${r.content.slice(0, 80)}</span>
            </button>
          </li>`,
        )}
      </ul>`}
    </div>
    ${note &&
    html`<label class="check share-note"
      ><input type="checkbox" checked=${forAgent} onChange=${(/** @type {any} */ e) => setForAgent(e.currentTarget.checked)} />
      Share with the agent: its next answers read this note as guidance (the contact never sees it)</label
    >`}
    ${!note && html`<${ChannelFacts} preview=${preview} />`}
    ${!note &&
    html`<div class="attachments-field">
      <label class="file-button"
        >Attach files
        <input type="file" multiple onChange=${(/** @type {any} */ e) => {
          setFiles([...files, ...Array.from(/** @type {FileList} */ (e.currentTarget.files))].slice(0, 10));
          e.currentTarget.value = "";
        }} /></label
      >
      ${files.length > 0 &&
      html`<ul class="chosen-files" aria-label="Files to send">
        ${files.map(
          (f, i) => html`<li>
            ${f.name} <span class="muted">${Math.ceil(f.size / 1024)} KB</span>
            <button type="button" class="subtle" onClick=${() => setFiles(files.filter((_, j) => j !== i))}>Remove ${f.name}</button>
          </li>`,
        )}
      </ul>`}
    </div>`}
    <p id="composer-error" class="error" role=${error || refused ? "alert" : undefined}>${error || (refused ? `Too long for this channel: ${refused}.` : "")}</p>
    ${rival && html`<p class="notice warn" role="alert">${rival} is typing a reply too. Send yours anyway?</p>`}
    <div class="composer-actions">
      <span id="composer-hint" class="muted">${note ? "Never sent to the contact." : c.handler === "agent" ? "The agent answers this conversation; your reply is sent as you." : ""}</span>
      <button type="submit" class="primary" disabled=${busy || Boolean(refused)}>${note ? "Add note" : rival ? "Send anyway" : "Send"}</button>
    </div>
  </form>`;
}

/** A file as `POST /messages` takes it (base64). @param {File} f */
async function asAttachment(f) {
  const bytes = new Uint8Array(await f.arrayBuffer());
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return { filename: f.name, content_type: f.type || "application/octet-stream", data: btoa(binary) };
}

/** What the channel makes of the reply: segments, the window, how it renders. @param {{preview: ReplyPreview | null}} p */
function ChannelFacts({ preview }) {
  if (!preview) return html`<p id="composer-facts" class="composer-facts"></p>`;
  const seg = preview.segments;
  return html`<div id="composer-facts" class="composer-facts">
    ${seg &&
    seg.count > 0 &&
    html`<p>
      ${seg.count} SMS segment${seg.count === 1 ? "" : "s"} · ${seg.encoding}${seg.encoding === "UCS-2"
        ? " (an emoji or a character outside GSM-7: 70 characters per segment, 67 once split)"
        : ""}
    </p>`}
    ${preview.free_text_until && html`<p>WhatsApp allows free text until <${When} value=${preview.free_text_until} />; after that, templates only.</p>`}
    ${preview.html != null &&
    preview.html.trim() !== "" &&
    html`<details class="rendered-preview">
      <summary>Preview as ${humanize(preview.channel)} shows it</summary>
      <${SafeHtml} html=${preview.html} />
    </details>`}
  </div>`;
}

/** Elements (and the one attribute) a rendered preview may keep. */
const KEPT = new Set(["B", "STRONG", "I", "EM", "S", "DEL", "CODE", "PRE", "A", "BLOCKQUOTE", "P", "BR", "UL", "OL", "LI", "H1", "H2", "H3", "H4", "H5", "H6"]);

/**
 * The channel's rendering of the markup, rebuilt node by node from what
 * the server made of it: only formatting elements, links only to web,
 * mail and phone addresses; anything else becomes its text. Never HTML
 * put into the page as it came.
 * @param {{html: string}} p
 */
function SafeHtml({ html: source }) {
  const root = useRef(/** @type {HTMLDivElement | null} */ (null));
  useEffect(() => {
    const parsed = new DOMParser().parseFromString(source, "text/html");
    /** @param {Node} from @param {Node} to */
    const copy = (from, to) => {
      for (const n of Array.from(from.childNodes)) {
        if (n.nodeType === Node.TEXT_NODE) to.appendChild(document.createTextNode(n.textContent ?? ""));
        else if (n instanceof Element && KEPT.has(n.tagName)) {
          const el = document.createElement(n.tagName.toLowerCase());
          const href = n.getAttribute("href") ?? "";
          if (n.tagName === "A" && /^(https?:|mailto:|tel:)/i.test(href)) {
            el.setAttribute("href", href);
            el.setAttribute("rel", "noopener noreferrer");
            el.setAttribute("target", "_blank");
          }
          copy(n, el);
          to.appendChild(el);
        } else copy(n, to);
      }
    };
    const out = document.createDocumentFragment();
    copy(parsed.body, out);
    root.current?.replaceChildren(out);
  }, [source]);
  return html`<div class="rendered" ref=${root}></div>`;
}

/**
 * WhatsApp outside its 24-hour window: pick an approved template, fill its
 * placeholders, see the message, send it.
 * @param {{c: Conversation, contact: Contact | null | undefined, onSent: () => void}} p
 */
function TemplateComposer({ c, contact, onSent }) {
  const templates = useResource((signal) => api("GET", `/api/v1/channels/${c.channel_id}/templates`, { query: { limit: 200 }, signal }), [c.channel_id]);
  const [chosen, setChosen] = useState("");
  const [values, setValues] = useState(/** @type {Record<string, string>} */ ({}));
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  /** @type {ApprovedTemplate[]} */
  const items = templates.data?.items ?? [];
  const t = items.find((x) => x.content_sid === chosen);
  const keys = t ? [...new Set([...t.body.matchAll(/\{\{\s*(\w+)\s*\}\}/g)].map((m) => m[1]))] : [];
  const filled = t ? t.body.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, k) => values[k] || `{{${k}}}`) : "";
  const missing = keys.filter((k) => !values[k]?.trim());
  const send = async () => {
    if (!t) return setError("Choose a template first.");
    if (missing.length) return setError(`Fill in ${missing.map((k) => `{{${k}}}`).join(", ")}.`);
    setBusy(true);
    setError("");
    try {
      const variables = Object.fromEntries(keys.map((k) => [k, values[k]]));
      await api("POST", "/api/v1/messages", {
        body: { conversation_id: c.id, text: filled, template: { content_sid: t.content_sid, variables } },
      });
      setChosen("");
      setValues({});
      onSent();
    } catch (e) {
      setError(e instanceof ApiError ? (Object.values(e.fields())[0] ?? e.message) : String(e));
    } finally {
      setBusy(false);
    }
  };
  return html`<form class="template-composer" aria-label="Send a template" onSubmit=${(/** @type {Event} */ e) => (e.preventDefault(), send())}>
    <p class="notice warn">
      ${contact?.display_name ?? "The contact"} has not written in the last 24 hours: WhatsApp allows only an approved template until they do.
    </p>
    ${templates.error && html`<${LoadError} error=${templates.error} retry=${templates.reload} />`}
    ${templates.data && !items.length && html`<p class="muted">This WhatsApp sender has no approved templates. Create them in Twilio's Content Template Builder and submit them to WhatsApp.</p>`}
    ${items.length > 0 &&
    html`<label
        >Template
        <select value=${chosen} onChange=${(/** @type {any} */ e) => (setChosen(e.currentTarget.value), setValues({}), setError(""))}>
          <option value="">Choose an approved template</option>
          ${items.map((x) => html`<option value=${x.content_sid}>${x.name} (${x.language})</option>`)}
        </select></label
      >
      ${keys.map(
        (k) => html`<label
          >${`{{${k}}}`}
          <input type="text" maxlength="1024" value=${values[k] ?? ""} placeholder=${t?.variables[k] ? `e.g. ${t.variables[k]}` : ""}
            onInput=${(/** @type {any} */ e) => (setValues({ ...values, [k]: e.currentTarget.value }), setError(""))} /></label
        >`,
      )}
      ${t && html`<p class="template-preview" aria-label="Message preview">${filled}</p>`}`}
    <p class="error" role=${error ? "alert" : undefined}>${error}</p>
    <div class="composer-actions">
      <span></span>
      <button type="submit" class="primary" disabled=${busy || !items.length}>Send template</button>
    </div>
  </form>`;
}

/**
 * The contact beside the thread, and the conversation's labels.
 * @param {{c: Conversation, contact: import("../lib/data.js").Resource<Contact | null>, dir: Directory, onChanged: () => void}} p
 */
function ContactPanel({ c, contact, dir, onChanged }) {
  const [error, setError] = useState("");
  // The labels as this member last set them: two quick ticks build on
  // each other, not on a conversation that has not reloaded yet.
  const [labels, setLocal] = useState(c.labels);
  useEffect(() => setLocal(c.labels), [c.labels.join("\n")]);
  /** @param {string[]} next */
  const setLabels = async (next) => {
    setError("");
    setLocal(next);
    try {
      await api("PUT", `/api/v1/conversations/${c.id}/labels`, { body: { labels: next } });
      onChanged();
    } catch (e) {
      setLocal(c.labels);
      setError(e instanceof Error ? e.message : String(e));
    }
  };
  const p = contact.data;
  const [dialog, setDialog] = useState(/** @type {"" | "edit" | "merge"} */ (""));
  // The contact's other conversations and their calls, newest first.
  const others = useResource(
    (signal) =>
      c.contact_id ? api("GET", "/api/v1/inbox/conversations", { query: { contact_id: c.contact_id, limit: 10 }, signal }) : Promise.resolve(null),
    [c.contact_id],
  );
  const calls = useResource(
    (signal) => (c.contact_id ? api("GET", "/api/v1/calls", { query: { contact_id: c.contact_id, limit: 5 }, signal }) : Promise.resolve(null)),
    [c.contact_id],
  );
  /** @type {Conversation[]} */
  const elsewhere = (others.data?.items ?? []).filter((/** @type {Conversation} */ o) => o.id !== c.id);
  /** @type {CallEntry[]} */
  const theirCalls = calls.data?.items ?? [];
  const changed = () => (contact.reload(), others.reload(), calls.reload(), onChanged());
  return html`<aside class="inbox-contact" aria-label="Contact and labels">
    <h2>Contact</h2>
    ${!c.contact_id && html`<p class="muted">No contact is linked to this conversation.</p>`}
    ${contact.error && html`<${LoadError} error=${contact.error} retry=${contact.reload} />`}
    ${p &&
    html`<p><a href=${`/contacts/${p.id}`}>${p.display_name}</a></p>
      <dl class="facts">
        ${(p.identities ?? []).map(
          (/** @type {{channel: string, address: string}} */ i) => html`<div><dt>${humanize(i.channel)}</dt><dd>${i.address}</dd></div>`,
        )}
        <div><dt>Tags</dt><dd>${p.tags?.length ? p.tags.join(", ") : "—"}</dd></div>
        <div><dt>Notes</dt><dd class="notes">${p.notes ?? "—"}</dd></div>
        ${p.created_at && html`<div><dt>Since</dt><dd>${formatDate(p.created_at)}</dd></div>`}
      </dl>
      <p class="actions">
        <button type="button" onClick=${() => setDialog("edit")}>Edit contact</button>
        <button type="button" onClick=${() => setDialog("merge")}>Merge a duplicate</button>
      </p>
      <h3>Other conversations</h3>
      ${others.data && !elsewhere.length && html`<p class="muted">None.</p>`}
      ${elsewhere.length > 0 &&
      html`<ul class="plain">
        ${elsewhere.map(
          (o) => html`<li><a href=${`/inbox/${o.id}?view=all`}>${humanize(o.channel)} · ${humanize(o.status)}</a> ${o.last_message_ts && html`<${When} value=${o.last_message_ts} />`}</li>`,
        )}
      </ul>`}
      <h3>Calls</h3>
      ${calls.data && !theirCalls.length && html`<p class="muted">None.</p>`}
      ${theirCalls.length > 0 &&
      html`<ul class="plain">
        ${theirCalls.map(
          (k) => html`<li><a href=${`/calls/${encodeURIComponent(k.id)}`}>${k.direction === "outbound" ? "Call to them" : "Call from them"} · ${humanize(k.status)}</a> <${When} value=${k.created_at} /></li>`,
        )}
      </ul>`}
      ${dialog === "edit" && html`<${ContactForm} contact=${p} onClose=${() => setDialog("")} onSaved=${changed} />`}
      ${dialog === "merge" && html`<${Merge} primary=${p} onClose=${() => setDialog("")} onMerged=${changed} />`}`}
    <h2>Labels</h2>
    ${!dir.labels.length && html`<p class="muted">No labels yet. Owners and admins create them under <a href="/settings/inbox">Settings › Inbox</a>.</p>`}
    <fieldset class="label-picker">
      <legend class="visually-hidden">Labels on this conversation</legend>
      ${dir.labels.map(
        (l) => html`<label
          ><input type="checkbox" checked=${labels.some((n) => n.toLowerCase() === l.name.toLowerCase())}
            onChange=${(/** @type {any} */ e) =>
              setLabels(
                e.currentTarget.checked
                  ? [...labels, l.name]
                  : labels.filter((n) => n.toLowerCase() !== l.name.toLowerCase()),
              )} />
          <${LabelChip} name=${l.name} dir=${dir}
        /></label>`,
      )}
    </fieldset>
    ${error && html`<p class="error" role="alert">${error}</p>`}
  </aside>`;
}
