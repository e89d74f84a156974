// Developers › API keys (the seed's "dashboard settings, developer
// section"): the keys of the current mode, created with the full key shown
// once, revoked after a confirmation. Owners and admins only: the API
// answers a member's request with 403, which this page shows as it is.

import { html, useEffect, useState } from "../lib/html.js";
import { api, ApiError } from "../lib/api.js";
import { useResource } from "../lib/data.js";
import { current } from "../lib/session.js";
import {
  CheckField,
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
 * @typedef {object} ApiKeyInfo
 * @property {number} id
 * @property {string} name
 * @property {"live" | "test"} mode
 * @property {boolean} workspace_locked
 * @property {string} hint
 * @property {string} created_at
 * @property {string | null} [last_used_at]
 * @property {string | null} [expires_at]
 * @property {string | null} [revoked_at]
 */

export function ApiKeys() {
  const mode = current().me?.mode ?? "live";
  const keys = useResource(
    (signal) => api("GET", "/api/v1/api-keys", { query: { mode, limit: 200 }, signal }),
    [mode],
  );
  const [creating, setCreating] = useState(false);
  const [revoking, setRevoking] = useState(/** @type {ApiKeyInfo | null} */ (null));
  useEffect(() => {
    document.title = "API keys · Parley";
  }, []);

  const forbidden = keys.error instanceof ApiError && keys.error.status === 403;
  /** @type {ApiKeyInfo[]} */
  const items = keys.data?.items ?? [];
  const create = html`<button type="button" class="primary" onClick=${() => setCreating(true)}>Create key</button>`;

  return html`<${PageHeader} title="API keys" actions=${!forbidden && items.length > 0 && create}>
      Keys let your code call the API. This list shows ${mode} keys: they read and write ${mode} data.
    <//>
    ${keys.loading && !keys.data && !keys.error && html`<${Skeleton} />`}
    ${keys.error && !forbidden && html`<${LoadError} error=${keys.error} retry=${keys.reload} />`}
    ${forbidden &&
    html`<${EmptyState} title="Only owners and admins manage API keys">
      Ask an owner of this workspace for a key, or for the admin role.
    <//>`}
    ${keys.data &&
    !items.length &&
    html`<${EmptyState} title=${`No ${mode} keys yet`} action=${create}>
      Create a key to call the API from your server. You will see the full key once, when it is created.
    <//>`}
    ${items.length > 0 &&
    html`<div class="table-wrap">
      <table>
        <caption class="visually-hidden">${mode} API keys</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Key</th>
            <th scope="col">Workspace-locked</th>
            <th scope="col">Last used</th>
            <th scope="col">Created</th>
            <th scope="col">Expires</th>
            <th scope="col">Status</th>
            <th scope="col"><span class="visually-hidden">Actions</span></th>
          </tr>
        </thead>
        <tbody>
          ${items.map(
            (k) => html`<tr>
              <th scope="row">${k.name}</th>
              <td><code>${k.hint}</code></td>
              <td>${k.workspace_locked ? "Yes" : "No"}</td>
              <td><${When} value=${k.last_used_at} /></td>
              <td><${When} value=${k.created_at} /></td>
              <td><${When} value=${k.expires_at} never="Never" /></td>
              <td><${KeyStatus} k=${k} /></td>
              <td class="row-actions">
                ${!k.revoked_at &&
                html`<button type="button" class="danger subtle" onClick=${() => setRevoking(k)}>
                  Revoke<span class="visually-hidden"> ${k.name}</span>
                </button>`}
              </td>
            </tr>`,
          )}
        </tbody>
      </table>
    </div>`}
    ${creating && html`<${CreateKey} mode=${mode} onClose=${() => setCreating(false)} onCreated=${keys.reload} />`}
    ${revoking &&
    html`<${ConfirmDialog}
      title=${`Revoke ${revoking.name}?`}
      confirm="Revoke key"
      onClose=${() => setRevoking(null)}
      onConfirm=${async () => {
        await api("DELETE", `/api/v1/api-keys/${revoking.id}`);
        keys.reload();
      }}
    >
      Requests made with <code>${revoking.hint}</code> will be refused from now on. This cannot be undone.
    <//>`}`;
}

/** @param {{k: ApiKeyInfo}} p */
function KeyStatus({ k }) {
  if (k.revoked_at) return html`<span class="badge">Revoked</span>`;
  if (k.expires_at && new Date(k.expires_at).getTime() <= Date.now()) return html`<span class="badge">Expired</span>`;
  return html`<span class="badge ok">Active</span>`;
}

/** @param {{mode: "live" | "test", onClose: () => void, onCreated: () => void}} p */
function CreateKey({ mode, onClose, onCreated }) {
  const form = useForm({ name: "", expires_at: "", workspace_locked: false });
  const [created, setCreated] = useState(/** @type {(ApiKeyInfo & {key: string}) | null} */ (null));
  if (created) {
    return html`<${ShownOnce} title="Copy your new key" label=${created.name} value=${created.key} copyLabel="Copy key" onClose=${onClose}>
      This is the only time the full key is shown. Store it in your server's secrets now; if you lose it, revoke it and
      create another.
    <//>`;
  }
  return html`<${Dialog} title=${`Create a ${mode} key`} onClose=${onClose}>
    <form
      novalidate
      onSubmit=${form.submit(async () => {
        /** @type {Record<string, unknown>} */
        const body = { name: form.values.name, mode, workspace_locked: form.values.workspace_locked };
        if (form.values.expires_at) body.expires_at = new Date(form.values.expires_at).toISOString();
        setCreated(await api("POST", "/api/v1/api-keys", { body }));
        onCreated();
      })}
    >
      <div class="dialog-body">
        <${TextField} form=${form} name="name" label="Name" hint="What uses it, e.g. Production backend." required maxlength=${100} />
        <${TextField}
          form=${form}
          name="expires_at"
          label="Expires (optional)"
          type="datetime-local"
          hint="Leave empty for a key that never expires."
        />
        <${CheckField}
          form=${form}
          name="workspace_locked"
          label="Lock to this workspace"
          hint="MCP sessions with this key then serve only this workspace."
        />
        <${FormError} form=${form} fields=${["name", "expires_at", "workspace_locked"]} />
      </div>
      <footer>
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary" disabled=${form.busy}>Create key</button>
      </footer>
    </form>
  <//>`;
}
