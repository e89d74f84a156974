// Settings › Inbox: the labels a team puts on conversations and the
// canned responses it picks with `/`. Owners and admins keep them (the API
// refuses a member's change); members see what there is.

import { html, useEffect, useState } from "../lib/html.js";
import { api } from "../lib/api.js";
import { useResource } from "../lib/data.js";
import { canAdminister } from "../lib/session.js";
import { ConfirmDialog, EmptyState, Field, FormError, LoadError, PageHeader, Skeleton, TextField, useForm } from "../components/ui.js";

/** @typedef {{id: number, name: string, color: string, description?: string | null}} Label */
/** @typedef {{id: number, short_code: string, content: string}} Canned */

export function InboxSettings() {
  useEffect(() => {
    document.title = "Inbox settings · Parley";
  }, []);
  return html`<${PageHeader} title="Inbox settings">
      Labels sort conversations; canned responses are replies your team inserts by typing / and their short code.
    <//>
    <${Labels} />
    <${CannedResponses} />`;
}

function Labels() {
  const admin = canAdminister();
  const labels = useResource((signal) => api("GET", "/api/v1/labels", { query: { limit: 200 }, signal }), []);
  const form = useForm({ name: "", color: "#1d4ed8", description: "" });
  const [deleting, setDeleting] = useState(/** @type {Label | null} */ (null));
  /** @type {Label[]} */
  const items = labels.data?.items ?? [];
  const create = form.submit(async () => {
    const { name, color, description } = form.values;
    await api("POST", "/api/v1/labels", { body: { name, color, description: description || null } });
    form.reset({ name: "", color, description: "" });
    labels.reload();
  });
  return html`<section class="section" aria-labelledby="labels-heading">
    <h2 id="labels-heading">Labels</h2>
    ${labels.loading && !labels.data && html`<${Skeleton} />`}
    ${labels.error && html`<${LoadError} error=${labels.error} retry=${labels.reload} />`}
    ${labels.data && !items.length && html`<${EmptyState} title="No labels yet">
      ${admin ? "Create one below, then tick it beside any conversation in the inbox." : "Owners and admins create labels."}
    <//>`}
    ${items.length > 0 &&
    html`<ul class="plain-list" aria-label="Labels">
      ${items.map(
        (l) => html`<li>
          <span class="label-chip"><span class="dot" style=${{ background: l.color }} aria-hidden="true"></span>${l.name}</span>
          ${l.description && html`<span class="muted"> — ${l.description}</span>`}
          ${admin && html`<button type="button" class="subtle" onClick=${() => setDeleting(l)}>Delete<span class="visually-hidden"> label ${l.name}</span></button>`}
        </li>`,
      )}
    </ul>`}
    ${admin &&
    html`<form class="inline-form" aria-label="New label" onSubmit=${create}>
      <${TextField} form=${form} name="name" label="Label name" hint="One word: letters, digits, - and _." maxlength=${50} />
      <${TextField} form=${form} name="color" label="Colour" type="color" />
      <${TextField} form=${form} name="description" label="Description (optional)" maxlength=${200} />
      <${FormError} form=${form} fields=${["name", "color", "description"]} />
      <button type="submit" class="primary" disabled=${form.busy}>Add label</button>
    </form>`}
    ${deleting &&
    html`<${ConfirmDialog} title=${`Delete label ${deleting.name}?`} confirm="Delete label"
      onConfirm=${async () => {
        await api("DELETE", `/api/v1/labels/${deleting.id}`);
        setDeleting(null);
        labels.reload();
      }}
      onClose=${() => setDeleting(null)}>
      It comes off every conversation it is on.
    <//>`}
  </section>`;
}

function CannedResponses() {
  const admin = canAdminister();
  const canned = useResource((signal) => api("GET", "/api/v1/canned-responses", { query: { limit: 200 }, signal }), []);
  const form = useForm({ short_code: "", content: "" });
  const [deleting, setDeleting] = useState(/** @type {Canned | null} */ (null));
  /** @type {Canned[]} */
  const items = canned.data?.items ?? [];
  const create = form.submit(async () => {
    await api("POST", "/api/v1/canned-responses", { body: { short_code: form.values.short_code, content: form.values.content } });
    form.reset({ short_code: "", content: "" });
    canned.reload();
  });
  return html`<section class="section" aria-labelledby="canned-heading">
    <h2 id="canned-heading">Canned responses</h2>
    ${canned.loading && !canned.data && html`<${Skeleton} />`}
    ${canned.error && html`<${LoadError} error=${canned.error} retry=${canned.reload} />`}
    ${canned.data && !items.length && html`<${EmptyState} title="No canned responses yet">
      ${admin ? "Save the replies your team writes often; in a conversation, type / and the short code." : "Owners and admins save canned responses."}
    <//>`}
    ${items.length > 0 &&
    html`<ul class="plain-list" aria-label="Canned responses">
      ${items.map(
        (r) => html`<li>
          <strong>/${r.short_code}</strong> <span class="muted">${r.content}</span>
          ${admin && html`<button type="button" class="subtle" onClick=${() => setDeleting(r)}>Delete<span class="visually-hidden"> /${r.short_code}</span></button>`}
        </li>`,
      )}
    </ul>`}
    ${admin &&
    html`<form class="inline-form" aria-label="New canned response" onSubmit=${create}>
      <${TextField} form=${form} name="short_code" label="Short code" hint="Typed after /: letters, digits, - and _." maxlength=${50} />
      <${Field} label="Reply" hint="{{contact.first_name}}, {{contact.name}}, {{contact.email}} and {{contact.phone}} are filled in." error=${form.errors.content}>
        ${(/** @type {any} */ a) => html`<textarea ...${a} name="content" rows="3" maxlength="10000" value=${form.values.content}
          onInput=${(/** @type {any} */ e) => form.set("content", e.currentTarget.value)}></textarea>`}
      <//>
      <${FormError} form=${form} fields=${["short_code", "content"]} />
      <button type="submit" class="primary" disabled=${form.busy}>Save response</button>
    </form>`}
    ${deleting &&
    html`<${ConfirmDialog} title=${`Delete /${deleting.short_code}?`} confirm="Delete response"
      onConfirm=${async () => {
        await api("DELETE", `/api/v1/canned-responses/${deleting.id}`);
        setDeleting(null);
        canned.reload();
      }}
      onClose=${() => setDeleting(null)}>
      Your team can no longer insert it.
    <//>`}
  </section>`;
}
