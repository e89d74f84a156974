// Developers › Connected apps: the MCP clients (Claude, Cursor, an agent
// framework) the signed-in user allowed through OAuth, with the workspace
// and scope each acts on. Revoking stops the client's tokens at once.
// These are the user's own grants, so every role sees this page.

import { html, useEffect, useState } from "../lib/html.js";
import { api } from "../lib/api.js";
import { useResource } from "../lib/data.js";
import { current } from "../lib/session.js";
import { ConfirmDialog, EmptyState, LoadError, PageHeader, Skeleton, When } from "../components/ui.js";

/**
 * @typedef {{id: number, client_id: string, client_name: string, workspace_id: number, mode: "live" | "test",
 *   workspace_locked: boolean, scope: string, created_at: string, last_used_at?: string | null}} Grant
 */

export function ConnectedApps() {
  const grants = useResource((signal) => api("GET", "/api/v1/oauth/grants", { query: { limit: 200 }, signal }), []);
  const [revoking, setRevoking] = useState(/** @type {Grant | null} */ (null));
  useEffect(() => {
    document.title = "Connected apps · Parley";
  }, []);
  const names = new Map((current().me?.workspaces ?? []).map((w) => [w.workspace_id, w.workspace_name]));
  /** @type {Grant[]} */
  const items = grants.data?.items ?? [];
  return html`<${PageHeader} title="Connected apps">
      MCP clients you allowed to act for you, through Parley's MCP endpoint at <code>/mcp</code>.
    <//>
    ${grants.loading && !grants.data && html`<${Skeleton} />`}
    ${grants.error && html`<${LoadError} error=${grants.error} retry=${grants.reload} />`}
    ${grants.data &&
    !items.length &&
    html`<${EmptyState} title="No connected apps">
      Point an MCP client (Claude, Cursor, the MCP Inspector) at this server's <code>/mcp</code> URL: it will ask you
      to sign in and choose a workspace, and then appear here.
    <//>`}
    ${items.length > 0 &&
    html`<div class="table-wrap">
      <table>
        <caption class="visually-hidden">Connected apps</caption>
        <thead>
          <tr>
            <th scope="col">App</th>
            <th scope="col">Workspace</th>
            <th scope="col">Access</th>
            <th scope="col">Last used</th>
            <th scope="col">Allowed</th>
            <th scope="col"><span class="visually-hidden">Actions</span></th>
          </tr>
        </thead>
        <tbody>
          ${items.map(
            (g) => html`<tr>
              <th scope="row">${g.client_name}<div class="muted mono">${g.client_id}</div></th>
              <td>
                ${names.get(g.workspace_id) ?? `Workspace ${g.workspace_id}`} (${g.mode})
                ${g.workspace_locked ? html`<div class="muted">This workspace only</div>` : ""}
              </td>
              <td>${g.scope.includes("mcp:write") ? "Read and write" : "Read only"}</td>
              <td><${When} value=${g.last_used_at} /></td>
              <td><${When} value=${g.created_at} /></td>
              <td class="row-actions">
                <button type="button" class="danger subtle" onClick=${() => setRevoking(g)}>
                  Revoke<span class="visually-hidden"> ${g.client_name}</span>
                </button>
              </td>
            </tr>`,
          )}
        </tbody>
      </table>
    </div>`}
    ${revoking &&
    html`<${ConfirmDialog}
      title=${`Disconnect ${revoking.client_name}?`}
      confirm="Revoke access"
      onClose=${() => setRevoking(null)}
      onConfirm=${async () => {
        await api("DELETE", `/api/v1/oauth/grants/${revoking.id}`);
        grants.reload();
      }}
    >
      Its tokens stop working at once. It can ask you again later.
    <//>`}`;
}
