// Agent runs as a table: what each answer cost and took, and the tools it
// called with their arguments and results (shown as text, never markup).
// The call page and the agent page share it.

import { html } from "../lib/html.js";
import { humanize, money } from "../lib/format.js";
import { When } from "./ui.js";

/**
 * @typedef {object} Run
 * @property {number} id
 * @property {string} status
 * @property {string} engine
 * @property {string} model
 * @property {number} input_tokens
 * @property {number} output_tokens
 * @property {number} cost_cents
 * @property {number | null} [first_token_ms]
 * @property {number | null} [total_ms]
 * @property {{name: string, arguments: unknown, result?: unknown, error?: string | null, ms: number}[]} tool_calls
 * @property {{passage_id: number, score: number}[]} retrieval
 * @property {string | null} [error]
 * @property {string} created_at
 */


/** @param {{runs: Run[], caption: string}} p */
export function Runs({ runs, caption }) {
  return html`<div class="table-wrap">
    <table>
      <caption class="visually-hidden">${caption}</caption>
      <thead>
        <tr>
          <th scope="col">Run</th>
          <th scope="col">Status</th>
          <th scope="col">Model</th>
          <th scope="col">Tokens in / out</th>
          <th scope="col">First token</th>
          <th scope="col">Tools</th>
          <th scope="col">Cost</th>
        </tr>
      </thead>
      <tbody>
        ${runs.map(
          (r) => html`<tr key=${r.id}>
            <th scope="row"><a href=${`/runs/${r.id}`}>Run #${r.id}</a><div class="muted"><${When} value=${r.created_at} /></div></th>
            <td>
              <span class=${`badge ${r.status === "completed" ? "ok" : r.status === "failed" ? "danger" : ""}`}>${humanize(r.status)}</span>
              ${r.error && html`<div class="muted">${r.error}</div>`}
            </td>
            <td>${r.engine} · ${r.model}</td>
            <td>${r.input_tokens} / ${r.output_tokens}</td>
            <td>${r.first_token_ms != null ? `${r.first_token_ms} ms` : "—"}</td>
            <td>
              ${r.tool_calls.length
                ? html`<details>
                    <summary>${r.tool_calls.length} tool call${r.tool_calls.length > 1 ? "s" : ""}</summary>
                    ${r.tool_calls.map(
                      (t) => html`<div class="tool-call">
                        <strong>${t.name}</strong> <span class="muted">${t.ms} ms</span>
                        <pre class="excerpt">${JSON.stringify(t.arguments, null, 2)}</pre>
                        ${t.error
                          ? html`<p class="error">${t.error}</p>`
                          : html`<pre class="excerpt">${JSON.stringify(t.result ?? null, null, 2)}</pre>`}
                      </div>`,
                    )}
                  </details>`
                : "None"}
            </td>
            <td>${money(r.cost_cents)}</td>
          </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}
