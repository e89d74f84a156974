// Contacts: search and filters in the URL, a CSV import that shows each bad
// row's fault (and writes nothing until every row is right), discovery of
// the addresses that wrote in without a contact ("create all"), and one
// page per contact — identities, edit, merge a duplicate into it, and the
// timeline of their conversations and calls.

import { html, useEffect, useRef, useState } from "../lib/html.js";
import { api, ApiError } from "../lib/api.js";
import { useResource } from "../lib/data.js";
import { current } from "../lib/session.js";
import { navigate, setQuery, useLocation } from "../lib/router.js";
import { duration, formatDate, humanize } from "../lib/format.js";
import {
  ConfirmDialog,
  Dialog,
  EmptyState,
  Field,
  FormError,
  LoadError,
  NotHere,
  PageHeader,
  Pager,
  Skeleton,
  TextField,
  useForm,
  When,
} from "../components/ui.js";

/**
 * @typedef {object} Contact
 * @property {number} id
 * @property {string} display_name
 * @property {string | null} [normalized_phone]
 * @property {string | null} [normalized_email]
 * @property {string | null} [avatar_url]
 * @property {string | null} [notes]
 * @property {string[]} tags
 * @property {"manual" | "discovered" | "import"} origin
 * @property {{channel: string, address: string, unverified?: boolean}[]} identities
 * @property {string} created_at
 * @property {string} updated_at
 */

const PAGE = 50;

export function Contacts() {
  const { query } = useLocation();
  const mode = current().me?.mode ?? "live";
  const filters = { q: query.get("q") ?? "", tag: query.get("tag") ?? "", origin: query.get("origin") ?? "" };
  const offset = Math.max(0, Number(query.get("offset")) || 0);
  const contacts = useResource(
    (signal) => api("GET", "/api/v1/contacts", { query: { ...filters, limit: PAGE, offset }, signal }),
    [filters.q, filters.tag, filters.origin, offset],
  );
  const [search, setSearch] = useState(filters.q);
  const [dialog, setDialog] = useState(/** @type {"" | "new" | "import" | "discover"} */ (""));
  useEffect(() => {
    document.title = "Contacts · Parley";
  }, []);
  useEffect(() => {
    if (search === filters.q) return;
    const timer = setTimeout(() => setQuery({ q: search.trim(), offset: null }), 300);
    return () => clearTimeout(timer);
  }, [search]);

  /** @type {Contact[]} */
  const items = contacts.data?.items ?? [];
  const total = contacts.data?.total ?? 0;
  const filtered = Boolean(filters.q || filters.tag || filters.origin);
  const actions = html`<button type="button" onClick=${() => setDialog("discover")}>Find new contacts</button>
    <button type="button" onClick=${() => setDialog("import")}>Import CSV</button>
    <button type="button" class="primary" onClick=${() => setDialog("new")}>Add contact</button>`;
  return html`<${PageHeader} title="Contacts" actions=${actions}>
      One contact per person, however they reach you: every channel's address, merged. These are ${mode} contacts.
    <//>
    <form class="filters" role="search" aria-label="Filter contacts" onSubmit=${(/** @type {Event} */ e) => e.preventDefault()}>
      <label
        >Search
        <input
          type="search"
          value=${search}
          maxlength="200"
          placeholder="Name, email or phone"
          onInput=${(/** @type {any} */ e) => setSearch(e.currentTarget.value)}
        />
      </label>
      <label
        >Tag
        <input value=${filters.tag} maxlength="50" onChange=${(/** @type {any} */ e) => setQuery({ tag: e.currentTarget.value.trim(), offset: null })} />
      </label>
      <label
        >Origin
        <select value=${filters.origin} onChange=${(/** @type {any} */ e) => setQuery({ origin: e.currentTarget.value, offset: null })}>
          <option value="">Any</option>
          <option value="manual">Added by hand</option>
          <option value="discovered">Discovered</option>
          <option value="import">Imported</option>
        </select>
      </label>
    </form>
    ${contacts.loading && !contacts.data && !contacts.error && html`<${Skeleton} />`}
    ${contacts.error && html`<${LoadError} error=${contacts.error} retry=${contacts.reload} />`}
    ${contacts.data &&
    !items.length &&
    (filtered
      ? html`<${EmptyState} title="No contacts match">Try part of a name, an email, or a few digits of a phone number.<//>`
      : html`<${EmptyState} title=${`No ${mode} contacts yet`} action=${actions}>
          Contacts appear when people write or call. Import a CSV of the ones you have, or add one by hand.
        <//>`)}
    ${items.length > 0 &&
    html`<div class="table-wrap">
        <table>
          <caption class="visually-hidden">${mode} contacts</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Phone</th>
              <th scope="col">Email</th>
              <th scope="col">Tags</th>
              <th scope="col">Updated</th>
            </tr>
          </thead>
          <tbody>
            ${items.map(
              (c) => html`<tr key=${c.id}>
                <th scope="row"><a href=${`/contacts/${c.id}`}>${c.display_name}</a></th>
                <td>${c.normalized_phone ?? "—"}</td>
                <td>${c.normalized_email ?? "—"}</td>
                <td>${c.tags.length ? c.tags.map((t) => html`<span class="badge">${t}</span> `) : "—"}</td>
                <td><${When} value=${c.updated_at} /></td>
              </tr>`,
            )}
          </tbody>
        </table>
      </div>
      <${Pager} offset=${offset} total=${total} shown=${items.length} size=${PAGE} />`}
    ${dialog === "new" &&
    html`<${ContactForm} onClose=${() => setDialog("")} onSaved=${(/** @type {Contact} */ c) => navigate(`/contacts/${c.id}`)} />`}
    ${dialog === "import" && html`<${ImportCsv} onClose=${() => setDialog("")} onDone=${contacts.reload} />`}
    ${dialog === "discover" && html`<${Discover} onClose=${() => setDialog("")} onDone=${contacts.reload} />`}`;
}

/** @param {{contact?: Contact, onClose: () => void, onSaved: (c: Contact) => void}} p */
export function ContactForm({ contact, onClose, onSaved }) {
  const form = useForm({
    display_name: contact?.display_name ?? "",
    phone: contact?.normalized_phone ?? "",
    email: contact?.normalized_email ?? "",
    tags: (contact?.tags ?? []).join(", "),
    notes: contact?.notes ?? "",
  });
  return html`<${Dialog} title=${contact ? `Edit ${contact.display_name}` : "Add a contact"} onClose=${onClose}>
    <form
      novalidate
      onSubmit=${form.submit(async () => {
        const v = form.values;
        const body = {
          display_name: v.display_name.trim() || undefined,
          phone: v.phone.trim() || null,
          email: v.email.trim() || null,
          notes: v.notes || null,
          tags: v.tags
            .split(",")
            .map((/** @type {string} */ t) => t.trim())
            .filter(Boolean),
        };
        const saved = contact
          ? await api("PATCH", `/api/v1/contacts/${contact.id}`, { body })
          : await api("POST", "/api/v1/contacts", { body });
        onClose();
        onSaved(saved);
      })}
    >
      <div class="dialog-body">
        <${TextField} form=${form} name="display_name" label="Name" maxlength=${200} hint="Leave empty to use the email or phone." />
        <${TextField} form=${form} name="phone" label="Phone" type="tel" hint="Any common format; it is stored in international form." />
        <${TextField} form=${form} name="email" label="Email" type="email" />
        <${TextField} form=${form} name="tags" label="Tags" hint="Comma-separated, e.g. vip, newsletter." />
        <${Field} label="Notes" error=${form.errors.notes}>
          ${(/** @type {any} */ a) => html`<textarea ...${a} rows="3" value=${form.values.notes} onInput=${(/** @type {any} */ e) => form.set("notes", e.currentTarget.value)}></textarea>`}
        <//>
        <${FormError} form=${form} fields=${["display_name", "phone", "email", "tags", "notes"]} />
      </div>
      <footer>
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary" disabled=${form.busy}>${contact ? "Save" : "Add contact"}</button>
      </footer>
    </form>
  <//>`;
}

/**
 * A CSV sent as the API takes it; every fault shown by row and column.
 * @param {{onClose: () => void, onDone: () => void}} p
 */
function ImportCsv({ onClose, onDone }) {
  const input = useRef(/** @type {HTMLInputElement | null} */ (null));
  const [file, setFile] = useState(/** @type {File | null} */ (null));
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState(/** @type {{created: number, updated: number, unchanged: number} | null} */ (null));
  const [faults, setFaults] = useState(/** @type {{where: string, msg: string}[]} */ ([]));
  const [error, setError] = useState("");
  return html`<${Dialog} title="Import contacts from CSV" onClose=${onClose} wide>
    <div class="dialog-body">
      <p>
        A header row naming columns among <code>display_name</code>, <code>phone</code>, <code>email</code>,
        <code>notes</code> and <code>tags</code> (tags separated by <code>;</code>). A row with a known phone or email
        updates that contact. Nothing is written unless every row is right.
      </p>
      <${Field} label="CSV file" error=${error || undefined}>
        ${(/** @type {any} */ a) => html`<input
          ...${a}
          ref=${input}
          type="file"
          accept=".csv,text/csv"
          onChange=${(/** @type {any} */ e) => {
            setFile(e.currentTarget.files?.[0] ?? null);
            setResult(null);
            setFaults([]);
            setError("");
          }}
        />`}
      <//>
      ${faults.length > 0 &&
      html`<div class="notice error" role="alert">
        <p>Nothing was imported. Fix these rows and import the file again:</p>
        <ul class="faults">
          ${faults.map((f) => html`<li><strong>${f.where}</strong>: ${f.msg}</li>`)}
        </ul>
      </div>`}
      ${result &&
      html`<p class="notice" role="status">
        Imported: ${result.created} created, ${result.updated} updated, ${result.unchanged} unchanged.
      </p>`}
    </div>
    <footer>
      <button type="button" onClick=${onClose}>${result ? "Done" : "Cancel"}</button>
      <button
        type="button"
        class="primary"
        disabled=${!file || busy}
        onClick=${async () => {
          if (!file) return;
          setBusy(true);
          setFaults([]);
          setError("");
          try {
            const r = await api("POST", "/api/v1/contacts/import", {
              body: file.slice(0, file.size, "text/csv"),
              headers: { "Content-Type": "text/csv" },
            });
            setResult(r);
            onDone();
          } catch (e) {
            if (e instanceof ApiError && e.faults.length) {
              setFaults(
                e.faults.map((f) => {
                  const [, part, row, column] = f.loc;
                  const where =
                    part === "rows" ? `Row ${row}${column ? `, ${column}` : ""}` : part === "header" ? `Header, ${row}` : "The file";
                  return { where, msg: f.msg };
                }),
              );
            } else {
              setError(e instanceof Error ? e.message : String(e));
            }
          } finally {
            setBusy(false);
          }
        }}
      >
        Import
      </button>
    </footer>
  <//>`;
}

/**
 * @typedef {{channel: string, address: string, display_name_guess?: string | null, conversation_count: number,
 *   last_seen_at: string, contact_id?: number, unverified?: boolean}} Found
 */

/** @param {{onClose: () => void, onDone: () => void}} p */
function Discover({ onClose, onDone }) {
  const found = useResource((signal) => api("POST", "/api/v1/contacts/discover", { body: { create: false }, signal }), []);
  const [created, setCreated] = useState(/** @type {Found[] | null} */ (null));
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  /** @type {Found[]} */
  const items = created ?? found.data?.items ?? [];
  return html`<${Dialog} title="Find new contacts" onClose=${onClose} wide>
    <div class="dialog-body">
      <p>Addresses that wrote or called in without becoming a contact.</p>
      ${found.loading && !found.data && html`<${Skeleton} />`}
      ${found.error && html`<${LoadError} error=${found.error} retry=${found.reload} />`}
      ${found.data && !items.length && html`<p role="status">Everyone who reached you is a contact already.</p>`}
      ${items.length > 0 &&
      html`<div class="table-wrap">
        <table>
          <caption class="visually-hidden">Addresses without a contact</caption>
          <thead>
            <tr>
              <th scope="col">Address</th>
              <th scope="col">Name they gave</th>
              <th scope="col">Conversations</th>
              <th scope="col">Last seen</th>
            </tr>
          </thead>
          <tbody>
            ${items.map(
              (f) => html`<tr>
                <th scope="row">
                  ${f.contact_id ? html`<a href=${`/contacts/${f.contact_id}`}>${f.address}</a>` : f.address}
                  <div class="muted">${humanize(f.channel)}${f.unverified ? " · unverified sender" : ""}</div>
                </th>
                <td>${f.display_name_guess ?? "—"}</td>
                <td>${f.conversation_count}</td>
                <td><${When} value=${f.last_seen_at} /></td>
              </tr>`,
            )}
          </tbody>
        </table>
      </div>`}
      ${created && html`<p class="notice" role="status">Created or linked ${created.length} contacts.</p>`}
      ${error && html`<p class="notice error" role="alert">${error}</p>`}
    </div>
    <footer>
      <button type="button" onClick=${onClose}>${created ? "Done" : "Cancel"}</button>
      ${!created &&
      html`<button
        type="button"
        class="primary"
        disabled=${busy || !items.length}
        onClick=${async () => {
          setBusy(true);
          setError("");
          try {
            setCreated((await api("POST", "/api/v1/contacts/discover", { body: { create: true } })).items);
            onDone();
          } catch (e) {
            setError(e instanceof Error ? e.message : String(e));
          } finally {
            setBusy(false);
          }
        }}
      >
        Create all
      </button>`}
    </footer>
  <//>`;
}

/** @param {{id: string}} p */
export function ContactPage({ id }) {
  const path = `/api/v1/contacts/${encodeURIComponent(id)}`;
  const contact = useResource((signal) => api("GET", path, { signal }), [id]);
  const conversations = useResource(
    (signal) => api("GET", "/api/v1/conversations", { query: { contact_id: id, limit: 50 }, signal }),
    [id],
  );
  const calls = useResource((signal) => api("GET", "/api/v1/calls", { query: { contact_id: id, limit: 50 }, signal }), [id]);
  const [dialog, setDialog] = useState(/** @type {"" | "edit" | "merge" | "delete"} */ (""));
  /** @type {Contact | undefined} */
  const c = contact.data;
  useEffect(() => {
    if (c) document.title = `${c.display_name} · Contacts · Parley`;
  }, [c?.display_name]);
  if (contact.error) {
    return html`<${NotHere} error=${contact.error} what="contact" back="/contacts" backLabel="All contacts" retry=${contact.reload} />`;
  }
  if (!c) return html`<${Skeleton} rows=${5} />`;

  /** @type {{at: string, kind: string, title: string, href?: string, detail: string}[]} */
  const timeline = [
    ...(conversations.data?.items ?? [])
      .filter((/** @type {any} */ v) => v.kind !== "call")
      .map((/** @type {any} */ v) => ({
        at: v.last_message_ts ?? v.created_at,
        kind: `${humanize(v.channel)} conversation`,
        title: v.title,
        // List items carry no status: what was said last, and what is unread.
        detail: `${v.unread_count ? `${v.unread_count} unread · ` : ""}${v.last_message_preview ?? ""}`,
      })),
    ...(calls.data?.items ?? []).map((/** @type {any} */ call) => ({
      at: call.created_at,
      kind: call.direction === "outbound" ? "Call to them" : "Call from them",
      title: `${humanize(call.status)}${call.duration_ms != null ? `, ${duration(call.duration_ms / 1000)}` : ""}`,
      href: `/calls/${call.id}`,
      detail: call.ended_reason ? humanize(call.ended_reason) : "",
    })),
  ].sort((a, b) => b.at.localeCompare(a.at));

  return html`<nav class="breadcrumb" aria-label="Breadcrumb"><a href="/contacts">Contacts</a></nav>
    <${PageHeader}
      title=${c.display_name}
      actions=${html`<button type="button" onClick=${() => setDialog("edit")}>Edit</button>
        <button type="button" onClick=${() => setDialog("merge")}>Merge a duplicate</button>
        <button type="button" class="danger subtle" onClick=${() => setDialog("delete")}>Delete</button>`}
    >
      ${humanize(c.origin === "manual" ? "added by hand" : c.origin)} · since ${formatDate(c.created_at)}
    <//>
    <dl class="facts">
      <div><dt>Phone</dt><dd>${c.normalized_phone ?? "—"}</dd></div>
      <div><dt>Email</dt><dd>${c.normalized_email ?? "—"}</dd></div>
      <div><dt>Tags</dt><dd>${c.tags.length ? c.tags.join(", ") : "—"}</dd></div>
      <div><dt>Notes</dt><dd class="notes">${c.notes ?? "—"}</dd></div>
    </dl>
    <section class="section" aria-labelledby="identities-h">
      <h2 id="identities-h">Addresses</h2>
      ${c.identities.length
        ? html`<ul class="identities">
            ${c.identities.map(
              (i) => html`<li>
                <span class="badge">${humanize(i.channel)}</span> <span class="mono">${i.address}</span>
                ${i.unverified && html` <span class="badge warn">Unverified sender</span>`}
              </li>`,
            )}
          </ul>`
        : html`<p class="muted">No channel address yet: they get one when they write or call.</p>`}
    </section>
    <section class="section" aria-labelledby="timeline-h">
      <h2 id="timeline-h">Conversations and calls</h2>
      ${(conversations.error || calls.error) &&
      html`<${LoadError} error=${conversations.error || calls.error} retry=${() => (conversations.reload(), calls.reload())} />`}
      ${conversations.data && calls.data && !timeline.length && html`<p class="muted">Nothing yet.</p>`}
      ${timeline.length > 0 &&
      html`<ol class="contact-timeline">
        ${timeline.map(
          (t) => html`<li>
            <time datetime=${t.at}>${formatDate(t.at)}</time>
            <span class="muted">${t.kind}</span>
            ${t.href ? html`<a href=${t.href}>${t.title}</a>` : html`<strong>${t.title}</strong>`}
            ${t.detail && html`<span class="muted">${t.detail}</span>`}
          </li>`,
        )}
      </ol>`}
    </section>
    ${dialog === "edit" && html`<${ContactForm} contact=${c} onClose=${() => setDialog("")} onSaved=${() => contact.reload()} />`}
    ${dialog === "merge" &&
    html`<${Merge}
      primary=${c}
      onClose=${() => setDialog("")}
      onMerged=${() => {
        contact.reload();
        conversations.reload();
        calls.reload();
      }}
    />`}
    ${dialog === "delete" &&
    html`<${ConfirmDialog}
      title=${`Delete ${c.display_name}?`}
      confirm="Delete contact"
      onClose=${() => setDialog("")}
      onConfirm=${async () => {
        await api("DELETE", path);
        navigate("/contacts");
      }}
    >
      Their addresses are removed; their conversations and calls stay, without a contact.
    <//>`}`;
}

/**
 * Choose the duplicate by searching; the primary keeps its values and
 * gains the duplicate's addresses, conversations and calls.
 * @param {{primary: Contact, onClose: () => void, onMerged: () => void}} p
 */
export function Merge({ primary, onClose, onMerged }) {
  const [q, setQ] = useState("");
  const [term, setTerm] = useState("");
  const [chosen, setChosen] = useState(/** @type {Contact | null} */ (null));
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    const timer = setTimeout(() => setTerm(q.trim()), 250);
    return () => clearTimeout(timer);
  }, [q]);
  const found = useResource(
    (signal) => (term ? api("GET", "/api/v1/contacts", { query: { q: term, limit: 10 }, signal }) : Promise.resolve(null)),
    [term],
  );
  /** @type {Contact[]} */
  const candidates = (found.data?.items ?? []).filter((/** @type {Contact} */ c) => c.id !== primary.id);
  return html`<${Dialog} title=${`Merge into ${primary.display_name}`} onClose=${onClose} wide>
    <div class="dialog-body">
      <p>
        ${primary.display_name} keeps its name, phone and email; empty ones are filled from the duplicate, whose addresses,
        conversations and calls move here. The duplicate is then deleted.
      </p>
      <label class="inline"
        >Find the duplicate
        <input type="search" value=${q} maxlength="200" onInput=${(/** @type {any} */ e) => setQ(e.currentTarget.value)} />
      </label>
      ${term && found.data && !candidates.length && html`<p class="muted" role="status">No other contact matches.</p>`}
      ${candidates.length > 0 &&
      html`<fieldset class="choices">
        <legend>Duplicate</legend>
        ${candidates.map(
          (c) => html`<label class="check">
            <input type="radio" name="duplicate" checked=${chosen?.id === c.id} onChange=${() => setChosen(c)} />
            <span>${c.display_name}<span class="hint">${[c.normalized_phone, c.normalized_email].filter(Boolean).join(" · ") || "No phone or email"}</span></span>
          </label>`,
        )}
      </fieldset>`}
      ${error && html`<p class="notice error" role="alert">${error}</p>`}
    </div>
    <footer>
      <button type="button" onClick=${onClose}>Cancel</button>
      <button
        type="button"
        class="primary"
        disabled=${!chosen || busy}
        onClick=${async () => {
          if (!chosen) return;
          setBusy(true);
          setError("");
          try {
            await api("POST", "/api/v1/contacts/merge", { body: { primary_id: primary.id, duplicate_id: chosen.id } });
            onClose();
            onMerged();
          } catch (e) {
            setError(e instanceof Error ? e.message : String(e));
          } finally {
            setBusy(false);
          }
        }}
      >
        ${chosen ? `Merge ${chosen.display_name} into ${primary.display_name}` : "Merge"}
      </button>
    </footer>
  <//>`;
}
