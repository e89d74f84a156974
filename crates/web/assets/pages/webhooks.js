// Developers › Webhooks, through /api/v1/webhooks with the session's
// Bearer token (the seed's path): the endpoints of the current mode, one
// page per endpoint with its delivery attempts (status, answer, resend),
// a test event, secret rotation, enabling and deleting. Owners and admins
// only: the API answers anyone else with 403, shown as it is.

import { html, useEffect, useState } from "../lib/html.js";
import { api, ApiError } from "../lib/api.js";
import { useResource } from "../lib/data.js";
import { current } from "../lib/session.js";
import { navigate } from "../lib/router.js";
import {
  ConfirmDialog,
  Dialog,
  EmptyState,
  FormError,
  LoadError,
  PageHeader,
  ShownOnce,
  Skeleton,
  TextField,
  When,
  useForm,
} from "../components/ui.js";

/**
 * @typedef {object} Endpoint
 * @property {number} id
 * @property {string} url
 * @property {string[]} events
 * @property {string | null} [description]
 * @property {"active" | "disabled"} status
 * @property {string | null} [disabled_reason]
 * @property {string} created_at
 * @property {string} updated_at
 */
/**
 * @typedef {object} Attempt
 * @property {number} id
 * @property {string} event_id
 * @property {string} event_type
 * @property {number} attempt
 * @property {number | null} [status_code]
 * @property {string | null} [error]
 * @property {number} duration_ms
 * @property {string | null} [response_body_excerpt]
 * @property {string} created_at
 * @property {string | null} [next_attempt_at]
 */
/** @typedef {{type: string, description: string}} EventTypeInfo */

/** @param {unknown} e */
const forbidden = (e) => e instanceof ApiError && e.status === 403;

function Forbidden() {
  return html`<${EmptyState} title="Only owners and admins manage webhooks">
    Ask an owner of this workspace for the admin role, or for the events you need.
  <//>`;
}

export function Webhooks() {
  const mode = current().me?.mode ?? "live";
  const list = useResource((signal) => api("GET", "/api/v1/webhooks", { query: { limit: 100 }, signal }), []);
  const [adding, setAdding] = useState(false);
  useEffect(() => {
    document.title = "Webhooks · Parley";
  }, []);
  /** @type {Endpoint[]} */
  const items = list.data?.items ?? [];
  const add = html`<button type="button" class="primary" onClick=${() => setAdding(true)}>Add endpoint</button>`;
  return html`<${PageHeader} title="Webhooks" actions=${items.length > 0 && add}>
      Parley posts ${mode} events to these URLs, signed with Standard Webhooks, retried for three days.${" "}
      <a href="/docs/webhooks.md" target="_blank" rel="noopener">How to verify them<span class="visually-hidden"> (opens in a new tab)</span></a>.
    <//>
    ${list.loading && !list.data && !list.error && html`<${Skeleton} />`}
    ${list.error && (forbidden(list.error) ? html`<${Forbidden} />` : html`<${LoadError} error=${list.error} retry=${list.reload} />`)}
    ${list.data &&
    !items.length &&
    html`<${EmptyState} title=${`No ${mode} endpoints yet`} action=${add}>
      Add an endpoint to hear about new messages, finished calls, handoffs and more as they happen.
    <//>`}
    ${items.length > 0 &&
    html`<div class="table-wrap">
      <table>
        <caption class="visually-hidden">${mode} webhook endpoints</caption>
        <thead>
          <tr>
            <th scope="col">URL</th>
            <th scope="col">Events</th>
            <th scope="col">Status</th>
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          ${items.map(
            (e) => html`<tr>
              <th scope="row">
                <a href=${`/developers/webhooks/${e.id}`}><code>${e.url}</code></a>
                ${e.description && html`<div class="muted">${e.description}</div>`}
              </th>
              <td>${eventsLabel(e.events)}</td>
              <td>
                <${EndpointStatus} e=${e} />
                ${e.disabled_reason && html`<div class="muted">${e.disabled_reason}</div>`}
              </td>
              <td><${When} value=${e.created_at} /></td>
            </tr>`,
          )}
        </tbody>
      </table>
    </div>`}
    ${adding &&
    html`<${EndpointForm}
      onClose=${() => setAdding(false)}
      onSaved=${(/** @type {Endpoint} */ e) => {
        list.reload();
        navigate(`/developers/webhooks/${e.id}`);
      }}
    />`}`;
}

/** @param {string[]} events */
function eventsLabel(events) {
  if (events.includes("*")) return "All events";
  return events.length === 1 ? events[0] : `${events.length} event types`;
}

/** @param {{e: Endpoint}} p */
function EndpointStatus({ e }) {
  if (e.status === "active") return html`<span class="badge ok">Active</span>`;
  return html`<span class="badge warn" title=${e.disabled_reason ?? ""}>Disabled</span>`;
}

/**
 * Creates an endpoint, or edits one (`endpoint` given). A new endpoint's
 * secret is shown once, then `onSaved` runs.
 * @param {{endpoint?: Endpoint, onClose: () => void, onSaved: (e: Endpoint) => void}} p
 */
function EndpointForm({ endpoint, onClose, onSaved }) {
  const types = useResource((signal) => api("GET", "/api/v1/event-types", { signal }), []);
  const form = useForm({
    url: endpoint?.url ?? "",
    description: endpoint?.description ?? "",
    events: endpoint?.events ?? ["*"],
  });
  const [created, setCreated] = useState(/** @type {(Endpoint & {secret: string}) | null} */ (null));
  if (created) {
    return html`<${Secret}
      title="Copy the signing secret"
      secret=${created.secret}
      onClose=${() => {
        onClose();
        onSaved(created);
      }}
    >
      Verify every delivery with this secret. This is the only time it is shown; you can rotate it later.
    <//>`;
  }
  /** @type {string[]} */
  const events = form.values.events;
  return html`<${Dialog} title=${endpoint ? "Edit endpoint" : "Add an endpoint"} onClose=${onClose} wide>
    <form
      novalidate
      onSubmit=${form.submit(async () => {
        const body = { url: form.values.url, events, description: form.values.description || null };
        if (endpoint) {
          onSaved(await api("PATCH", `/api/v1/webhooks/${endpoint.id}`, { body }));
          onClose();
        } else {
          setCreated(await api("POST", "/api/v1/webhooks", { body }));
        }
      })}
    >
      <div class="dialog-body">
        <${TextField}
          form=${form}
          name="url"
          label="Endpoint URL"
          type="url"
          hint="A URL on the public internet, e.g. https://example.com/hooks/parley (use https)."
          required
        />
        <${TextField} form=${form} name="description" label="Description (optional)" maxlength=${500} />
        <${EventPicker}
          types=${types.data?.items ?? []}
          value=${events}
          error=${form.errors.events ?? Object.entries(form.errors).find(([k]) => k.startsWith("events."))?.[1]}
          onChange=${(/** @type {string[]} */ v) => form.set("events", v)}
        />
        ${types.error && html`<${LoadError} error=${types.error} retry=${types.reload} />`}
        <${FormError} form=${form} fields=${["url", "description", "events"]} />
      </div>
      <footer>
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary" disabled=${form.busy}>${endpoint ? "Save" : "Add endpoint"}</button>
      </footer>
    </form>
  <//>`;
}

/**
 * The event types, grouped by what they are about, or all of them.
 * @param {{types: EventTypeInfo[], value: string[], error?: string, onChange: (v: string[]) => void}} p
 */
function EventPicker({ types, value, error, onChange }) {
  const all = value.includes("*");
  /** @type {Map<string, EventTypeInfo[]>} */
  const groups = new Map();
  for (const t of types) {
    const group = t.type.split(".")[0].replace("_", " ");
    groups.set(group, [...(groups.get(group) ?? []), t]);
  }
  /** @param {string} type @param {boolean} on */
  const toggle = (type, on) => onChange(on ? [...value.filter((v) => v !== "*"), type] : value.filter((v) => v !== type));
  return html`<fieldset class=${error ? "events invalid" : "events"} aria-describedby=${error ? "events-error" : undefined}>
    <legend>Events to send</legend>
    <div class="field check">
      <input
        id="events-all"
        type="checkbox"
        checked=${all}
        onChange=${(/** @type {any} */ e) => onChange(e.currentTarget.checked ? ["*"] : [])}
      />
      <label for="events-all">All events, including types added later</label>
    </div>
    ${!all &&
    html`<div class="event-groups">
      ${[...groups].map(
        ([group, list]) => html`<fieldset class="event-group">
          <legend>${group}</legend>
          ${list.map(
            (t) => html`<div class="field check">
              <input
                id=${`event-${t.type}`}
                type="checkbox"
                checked=${value.includes(t.type)}
                onChange=${(/** @type {any} */ e) => toggle(t.type, e.currentTarget.checked)}
              />
              <label for=${`event-${t.type}`} title=${t.description}><code>${t.type}</code></label>
            </div>`,
          )}
        </fieldset>`,
      )}
    </div>`}
    ${error && html`<p class="error" id="events-error">${error}</p>`}
  </fieldset>`;
}

/** A signing secret, shown once. @param {{title: string, secret: string, children: any, onClose: () => void}} p */
function Secret({ title, secret, children, onClose }) {
  return html`<${ShownOnce} title=${title} label="Signing secret" value=${secret} copyLabel="Copy secret" onClose=${onClose}>
    ${children}
  <//>`;
}

/** One endpoint: its settings, actions and delivery attempts. @param {{id: string}} p */
export function Webhook({ id }) {
  const endpoint = useResource((signal) => api("GET", `/api/v1/webhooks/${id}`, { signal }), [id]);
  const attempts = useResource(
    (signal) => api("GET", `/api/v1/webhooks/${id}/deliveries`, { query: { limit: 50 }, signal }),
    [id],
  );
  const [dialog, setDialog] = useState(/** @type {null | "edit" | "rotate" | "delete"} */ (null));
  const [secret, setSecret] = useState(/** @type {string | null} */ (null));
  const [notice, setNotice] = useState("");
  const [error, setError] = useState("");
  /** @type {Endpoint | undefined} */
  const e = endpoint.data;
  useEffect(() => {
    document.title = `${e?.url ?? "Webhook"} · Parley`;
  }, [e?.url]);
  // Deliveries arrive in the background: look again every few seconds while the page is seen.
  useEffect(() => {
    const timer = setInterval(() => {
      if (document.visibilityState === "visible") attempts.reload();
    }, 3000);
    return () => clearInterval(timer);
  }, [attempts.reload]);

  /** @param {string} done @param {() => Promise<unknown>} action */
  async function act(done, action) {
    setError("");
    setNotice("");
    try {
      await action();
      setNotice(done);
      endpoint.reload();
      attempts.reload();
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  }

  if (endpoint.error) {
    if (forbidden(endpoint.error)) return html`<${PageHeader} title="Webhook" /><${Forbidden} />`;
    if (endpoint.error instanceof ApiError && endpoint.error.status === 404) {
      return html`<${PageHeader} title="Webhook not found" />
        <${EmptyState} title="There is no such endpoint here" action=${html`<a class="button" href="/developers/webhooks">All endpoints</a>`}>
          It may have been deleted, or belong to the other mode or another workspace.
        <//>`;
    }
    return html`<${LoadError} error=${endpoint.error} retry=${endpoint.reload} />`;
  }
  if (!e) return html`<${Skeleton} />`;
  /** @type {Attempt[]} */
  const rows = attempts.data?.items ?? [];
  const enabled = e.status === "active";
  return html`<p class="breadcrumb"><a href="/developers/webhooks">Webhooks</a></p>
    <${PageHeader}
      title="Webhook endpoint"
      actions=${html`
        <button type="button" disabled=${!enabled} onClick=${() => act("A test event was queued.", () => api("POST", `/api/v1/webhooks/${e.id}/test`))}>
          Send test event
        </button>
        <button type="button" onClick=${() => setDialog("edit")}>Edit</button>
        <button
          type="button"
          onClick=${() =>
            act(enabled ? "The endpoint is disabled." : "The endpoint is enabled.", () =>
              api("PATCH", `/api/v1/webhooks/${e.id}`, { body: { enabled: !enabled } }),
            )}
        >
          ${enabled ? "Disable" : "Enable"}
        </button>
        <button type="button" onClick=${() => setDialog("rotate")}>Rotate secret</button>
        <button type="button" class="danger subtle" onClick=${() => setDialog("delete")}>Delete</button>
      `}
    >
      <code>${e.url}</code>
    <//>
    ${notice && html`<p class="notice" role="status">${notice}</p>`}
    ${error && html`<p class="notice error" role="alert">${error}</p>`}
    <dl class="facts">
      <div><dt>Status</dt><dd><${EndpointStatus} e=${e} />${e.disabled_reason && html` <span class="muted">${e.disabled_reason}</span>`}</dd></div>
      <div><dt>Events</dt><dd>${e.events.includes("*") ? "All events" : e.events.join(", ")}</dd></div>
      <div><dt>Description</dt><dd>${e.description || html`<span class="muted">None</span>`}</dd></div>
      <div><dt>Created</dt><dd><${When} value=${e.created_at} /></dd></div>
    </dl>
    <section class="section" aria-labelledby="deliveries-heading">
      <h2 id="deliveries-heading">Delivery attempts</h2>
      ${attempts.error && html`<${LoadError} error=${attempts.error} retry=${attempts.reload} />`}
      ${attempts.data &&
      !rows.length &&
      html`<p class="muted">Nothing was sent here yet. Send a test event to see what a delivery looks like.</p>`}
      ${rows.length > 0 &&
      html`<div class="table-wrap">
        <table>
          <caption class="visually-hidden">Delivery attempts, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">Attempt</th>
              <th scope="col">Answer</th>
              <th scope="col">Time</th>
              <th scope="col">Sent</th>
              <th scope="col"><span class="visually-hidden">Actions</span></th>
            </tr>
          </thead>
          <tbody>
            ${rows.map(
              (a) => html`<tr key=${a.id}>
                <th scope="row"><code>${a.event_type}</code><div class="muted mono">${a.event_id}</div></th>
                <td>${a.attempt}</td>
                <td>
                  <${AttemptOutcome} a=${a} />
                  ${(a.response_body_excerpt || a.error) &&
                  html`<details>
                    <summary>Response</summary>
                    <pre class="excerpt">${a.error ?? ""}${a.error && a.response_body_excerpt ? "\n" : ""}${a.response_body_excerpt ?? ""}</pre>
                  </details>`}
                  ${a.next_attempt_at && html`<div class="muted">Next try <${When} value=${a.next_attempt_at} /></div>`}
                </td>
                <td>${a.duration_ms} ms</td>
                <td><${When} value=${a.created_at} /></td>
                <td class="row-actions">
                  <button
                    type="button"
                    class="subtle"
                    onClick=${() =>
                      act(`${a.event_type} was queued again.`, () =>
                        api("POST", `/api/v1/webhooks/${e.id}/deliveries/${a.id}/retry`),
                      )}
                  >
                    Resend<span class="visually-hidden"> ${a.event_type} attempt ${a.attempt}</span>
                  </button>
                </td>
              </tr>`,
            )}
          </tbody>
        </table>
      </div>`}
    </section>
    ${dialog === "edit" &&
    html`<${EndpointForm} endpoint=${e} onClose=${() => setDialog(null)} onSaved=${() => endpoint.reload()} />`}
    ${dialog === "rotate" &&
    html`<${ConfirmDialog}
      title="Rotate the signing secret?"
      confirm="Rotate secret"
      onClose=${() => setDialog(null)}
      onConfirm=${async () => {
        const rotated = await api("POST", `/api/v1/webhooks/${e.id}/rotate-secret`);
        setSecret(rotated.secret);
      }}
    >
      For the next 24 hours deliveries carry signatures with both the old and the new secret, so your receiver can
      switch without missing events.
    <//>`}
    ${secret &&
    html`<${Secret} title="Copy the new signing secret" secret=${secret} onClose=${() => setSecret(null)}>
      The old secret keeps working for 24 hours. This is the only time the new one is shown.
    <//>`}
    ${dialog === "delete" &&
    html`<${ConfirmDialog}
      title="Delete this endpoint?"
      confirm="Delete endpoint"
      onClose=${() => setDialog(null)}
      onConfirm=${async () => {
        await api("DELETE", `/api/v1/webhooks/${e.id}`);
        navigate("/developers/webhooks", { replace: true });
      }}
    >
      Deliveries waiting for it are dropped. This cannot be undone.
    <//>`}`;
}

/** @param {{a: Attempt}} p */
function AttemptOutcome({ a }) {
  const ok = a.status_code !== null && a.status_code !== undefined && a.status_code >= 200 && a.status_code < 300;
  const label = a.status_code ? `HTTP ${a.status_code}` : "No answer";
  return html`<span class=${ok ? "badge ok" : "badge danger"}>${ok ? "✓ " : "✕ "}${label}</span>`;
}
