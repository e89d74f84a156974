// Billing: both modes' balances (the shown mode's held and available), what agents cost by
// day and agent (a stacked chart), the ledger with its filters in the URL,
// owners' credits and the test-balance reset (owners and admins). And Runs: every agent run of
// the mode, and one page per run with its tokens, timings, tool calls
// (arguments and results, as text) and the passages it retrieved.

import { html, useEffect, useState } from "../lib/html.js";
import { api, ApiError } from "../lib/api.js";
import { useResource } from "../lib/data.js";
import { current } from "../lib/session.js";
import { setQuery, useLocation } from "../lib/router.js";
import { formatDate, humanize, money } from "../lib/format.js";
import {
  ConfirmDialog,
  Dialog,
  EmptyState,
  FormError,
  LoadError,
  NotHere,
  PageHeader,
  Pager,
  Skeleton,
  TextField,
  useCreate,
  useForm,
  When,
} from "../components/ui.js";
import { Runs } from "../components/runs.js";

/**
 * @typedef {{id: number, type: string, amount_cents: number, balance_after_cents: number, description: string,
 *   resource_type?: string | null, resource_id?: string | null, created_at: string}} Entry
 * @typedef {{date: string, total_cents: number, agents: {agent_id: number, cents: number}[]}} UsageDay
 * @typedef {{balance_cents: number, held_cents: number, available_cents: number, low_balance_threshold_cents: number}} Balance
 */

const PAGE = 50;
/** Colours for the agents in the usage chart (the rest share the last). */
const SERIES = ["s1", "s2", "s3", "s4", "s5"];

/** @param {string} iso A `YYYY-MM-DD` day in the reader's calendar. */
const dayStart = (iso) => (iso ? new Date(`${iso}T00:00:00`) : null);

export function Billing() {
  const { query } = useLocation();
  const { me, membership } = current();
  const mode = me?.mode ?? "live";
  const filters = { type: query.get("type") ?? "", from: query.get("from") ?? "", to: query.get("to") ?? "" };
  const offset = Math.max(0, Number(query.get("offset")) || 0);
  // Both modes' (a person may switch between them); the page is about the shown one.
  const balance = useResource(
    (signal) => /** @type {Promise<{live: Balance, test: Balance}>} */ (api("GET", "/api/v1/billing/balances", { signal })),
    [],
  );
  const ledger = useResource(
    (signal) => {
      const to = dayStart(filters.to);
      to?.setDate(to.getDate() + 1);
      return api("GET", "/api/v1/billing/transactions", {
        query: {
          type: filters.type,
          created_after: dayStart(filters.from)?.toISOString(),
          created_before: to?.toISOString(),
          limit: PAGE,
          offset,
        },
        signal,
      });
    },
    [filters.type, filters.from, filters.to, offset],
  );
  const usage = useResource(
    (signal) => api("GET", "/api/v1/billing/usage", { query: { days: 30, utc_offset_minutes: -new Date().getTimezoneOffset() }, signal }),
    [],
  );
  const agents = useResource(
    (signal) => api("GET", "/api/v1/agents", { query: { limit: 200, status: undefined }, signal }).then((r) => r.agents),
    [],
  );
  const [dialog, setDialog] = useState(/** @type {"" | "credit" | "reset"} */ (""));
  useEffect(() => {
    document.title = "Billing · Parley";
  }, []);
  const changed = () => {
    balance.reload();
    ledger.reload();
  };
  const owner = membership?.role === "owner";
  const manager = owner || membership?.role === "admin";
  const actions = html`${owner && html`<button type="button" class="primary" onClick=${() => setDialog("credit")}>Add credit</button>`}
    ${mode === "test" && manager && html`<button type="button" onClick=${() => setDialog("reset")}>Reset the test balance</button>`}`;
  /** @type {Entry[]} */
  const entries = ledger.data?.items ?? [];
  const total = ledger.data?.total ?? 0;
  const b = balance.data?.[mode];
  const otherMode = mode === "live" ? "test" : "live";
  const other = balance.data?.[otherMode];
  return html`<${PageHeader} title="Billing" actions=${actions}>
      Money in whole cents, on an append-only ledger. This is the ${mode} account${mode === "live" ? "; test mode has its own" : ""}.
    <//>
    ${balance.error && html`<${LoadError} error=${balance.error} retry=${balance.reload} />`}
    ${b &&
    html`<div class="tiles">
      <section class="tile" aria-label="Balance">
        <h2>${mode === "live" ? "Live balance" : "Test balance"}</h2>
        <p class="figure">${money(b.balance_cents)}</p>
        <p class="muted">${money(b.available_cents)} available · ${money(b.held_cents)} held by calls in progress</p>
        ${b.balance_cents < b.low_balance_threshold_cents &&
        html`<p class="error">Below ${money(b.low_balance_threshold_cents)}: calls and paid engines stop when it runs out.</p>`}
        ${other && html`<p class="muted">${otherMode === "live" ? "Live" : "Test"} balance: ${money(other.balance_cents)} (switch to ${otherMode} mode for its ledger)</p>`}
      </section>
      <section class="tile usage" aria-label="Usage">
        <h2>Usage by agent, last 30 days</h2>
        ${usage.error && html`<${LoadError} error=${usage.error} retry=${usage.reload} />`}
        ${usage.data && html`<${UsageChart} days=${usage.data.days} agents=${agents.data ?? []} />`}
      </section>
    </div>`}
    <section class="section" aria-labelledby="ledger-h">
      <h2 id="ledger-h">Ledger</h2>
      <form class="filters" role="search" aria-label="Filter the ledger" onSubmit=${(/** @type {Event} */ e) => e.preventDefault()}>
        <label
          >Type
          <select value=${filters.type} onChange=${(/** @type {any} */ e) => setQuery({ type: e.currentTarget.value, offset: null })}>
            <option value="">Any</option>
            ${["credit", "charge", "refund", "adjustment"].map((t) => html`<option value=${t}>${humanize(t)}</option>`)}
          </select>
        </label>
        <label
          >From
          <input type="date" value=${filters.from} onChange=${(/** @type {any} */ e) => setQuery({ from: e.currentTarget.value, offset: null })} />
        </label>
        <label
          >To
          <input type="date" value=${filters.to} onChange=${(/** @type {any} */ e) => setQuery({ to: e.currentTarget.value, offset: null })} />
        </label>
      </form>
      ${ledger.loading && !ledger.data && !ledger.error && html`<${Skeleton} />`}
      ${ledger.error && html`<${LoadError} error=${ledger.error} retry=${ledger.reload} />`}
      ${ledger.data && !entries.length && html`<p class="muted">No entries${filters.type || filters.from || filters.to ? " match these filters" : ""}.</p>`}
      ${entries.length > 0 &&
      html`<div class="table-wrap">
          <table>
            <caption class="visually-hidden">Ledger entries, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Entry</th>
                <th scope="col">Type</th>
                <th scope="col" class="number">Amount</th>
                <th scope="col" class="number">Balance after</th>
                <th scope="col">For</th>
                <th scope="col">When</th>
              </tr>
            </thead>
            <tbody>
              ${entries.map(
                (e) => html`<tr key=${e.id}>
                  <th scope="row">${e.description}</th>
                  <td>${humanize(e.type)}</td>
                  <td class=${`number ${e.amount_cents < 0 ? "" : "ok-text"}`}>${e.amount_cents > 0 ? "+" : ""}${money(e.amount_cents)}</td>
                  <td class="number">${money(e.balance_after_cents)}</td>
                  <td>${e.resource_type === "call" && e.resource_id
                    ? html`<a href=${`/calls/${e.resource_id}`}>Call</a>`
                    : e.resource_type === "agent" && e.resource_id
                      ? html`<a href=${`/agents/${e.resource_id}`}>Agent</a>`
                      : e.resource_type ?? "—"}</td>
                  <td><${When} value=${e.created_at} /></td>
                </tr>`,
              )}
            </tbody>
          </table>
        </div>
        <${Pager} offset=${offset} total=${total} shown=${entries.length} size=${PAGE} />`}
    </section>
    ${dialog === "credit" && html`<${AddCredit} mode=${mode} onClose=${() => setDialog("")} onDone=${changed} />`}
    ${dialog === "reset" &&
    html`<${ConfirmDialog}
      title="Reset the test balance?"
      confirm="Reset"
      onClose=${() => setDialog("")}
      onConfirm=${async () => {
        await api("POST", "/api/v1/billing/reset");
        changed();
      }}
    >
      One adjustment brings the test balance back to its starting amount. The ledger keeps every entry.
    <//>`}`;
}

/**
 * Stacked bars: each day's cost by agent; the five costliest agents of the
 * window by name, the rest together.
 * @param {{days: UsageDay[], agents: {id: number, name: string}[]}} p
 */
function UsageChart({ days, agents }) {
  const totals = new Map();
  for (const d of days) for (const a of d.agents) totals.set(a.agent_id, (totals.get(a.agent_id) ?? 0) + a.cents);
  const top = [...totals.entries()].sort((a, b) => b[1] - a[1]).slice(0, SERIES.length - 1).map(([id]) => id);
  const names = new Map(agents.map((a) => [a.id, a.name]));
  const nameOf = (/** @type {number} */ id) => names.get(id) ?? `Agent ${id}`;
  const sum = [...totals.values()].reduce((a, b) => a + b, 0);
  if (!sum) return html`<p class="muted">No agent has cost anything in 30 days.</p>`;
  const width = 300;
  const height = 80;
  const max = Math.max(1, ...days.map((d) => d.total_cents));
  const bar = width / days.length;
  const series = (/** @type {number} */ id) => SERIES[top.indexOf(id)] ?? SERIES[SERIES.length - 1];
  const summary = `${money(sum)} in 30 days: ${[...totals.entries()].map(([id, c]) => `${nameOf(id)} ${money(c)}`).join(", ")}`;
  return html`<figure class="usage-chart">
    <svg viewBox=${`0 0 ${width} ${height}`} role="img" aria-label=${summary}>
      ${days.map((d, i) => {
        let y = height;
        return d.agents.map((a) => {
          const h = (a.cents / max) * (height - 2);
          y -= h;
          return html`<rect class=${`part ${series(a.agent_id)}`} x=${i * bar + 1} y=${y} width=${Math.max(1, bar - 2)} height=${h}
            ><title>${`${d.date}, ${nameOf(a.agent_id)}: ${money(a.cents)}`}</title></rect
          >`;
        });
      })}
    </svg>
    <figcaption class="legend">
      ${top.map((id) => html`<span><i class=${`swatch ${series(id)}`} aria-hidden="true"></i>${nameOf(id)}</span>`)}
      ${totals.size > top.length && html`<span><i class="swatch s5" aria-hidden="true"></i>Other agents</span>`}
    </figcaption>
  </figure>`;
}

/** @param {{mode: string, onClose: () => void, onDone: () => void}} p */
function AddCredit({ mode, onClose, onDone }) {
  const form = useForm({ amount: "", description: "" });
  const create = useCreate();
  return html`<${Dialog} title=${`Add ${mode} credit`} onClose=${onClose}>
    <form
      novalidate
      onSubmit=${form.submit(async () => {
        const dollars = Number(form.values.amount);
        /** @type {Record<string, unknown>} */
        const body = { amount_cents: Number.isFinite(dollars) && form.values.amount.trim() ? Math.round(dollars * 100) : form.values.amount };
        if (form.values.description) body.description = form.values.description;
        try {
          await create("/api/v1/billing/credits", body);
        } catch (e) {
          // The API names cents; the form asks for dollars.
          if (e instanceof ApiError) e.faults = e.faults.map((f) => (f.loc.at(-1) === "amount_cents" ? { ...f, loc: ["body", "amount"] } : f));
          throw e;
        }
        onDone();
        onClose();
      })}
    >
      <div class="dialog-body">
        <${TextField} form=${form} name="amount" label="Amount (USD)" type="number" required hint="e.g. 25 or 12.50." />
        <${TextField} form=${form} name="description" label="Description (optional)" maxlength=${200} hint="e.g. Invoice 2026-11." />
        <${FormError} form=${form} fields=${["amount", "description"]} />
      </div>
      <footer>
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary" disabled=${form.busy}>Add credit</button>
      </footer>
    </form>
  <//>`;
}

export function RunsPage() {
  const { query } = useLocation();
  const mode = current().me?.mode ?? "live";
  const filters = { agent_id: query.get("agent_id") ?? "", status: query.get("status") ?? "" };
  const offset = Math.max(0, Number(query.get("offset")) || 0);
  const runs = useResource(
    (signal) => api("GET", "/api/v1/agent-runs", { query: { ...filters, limit: PAGE, offset }, signal }),
    [filters.agent_id, filters.status, offset],
  );
  const agents = useResource(
    (signal) => api("GET", "/api/v1/agents", { query: { limit: 200 }, signal }).then((r) => /** @type {{id: number, name: string}[]} */ (r.agents)),
    [],
  );
  useEffect(() => {
    document.title = "Agent runs · Parley";
  }, []);
  const items = runs.data?.items ?? [];
  const total = runs.data?.total ?? 0;
  return html`<${PageHeader} title="Agent runs">
      Every answer your ${mode} agents gave or tried to give: what it cost, how long it took, and the tools it called.
    <//>
    <form class="filters" role="search" aria-label="Filter runs" onSubmit=${(/** @type {Event} */ e) => e.preventDefault()}>
      <label
        >Agent
        <select value=${filters.agent_id} onChange=${(/** @type {any} */ e) => setQuery({ agent_id: e.currentTarget.value, offset: null })}>
          <option value="">Any</option>
          ${(agents.data ?? []).map((a) => html`<option value=${String(a.id)}>${a.name}</option>`)}
        </select>
      </label>
      <label
        >Status
        <select value=${filters.status} onChange=${(/** @type {any} */ e) => setQuery({ status: e.currentTarget.value, offset: null })}>
          <option value="">Any</option>
          ${["queued", "running", "completed", "failed", "canceled"].map((s) => html`<option value=${s}>${humanize(s)}</option>`)}
        </select>
      </label>
    </form>
    ${runs.loading && !runs.data && !runs.error && html`<${Skeleton} />`}
    ${runs.error && html`<${LoadError} error=${runs.error} retry=${runs.reload} />`}
    ${runs.data &&
    !items.length &&
    html`<${EmptyState} title="No runs yet">Runs appear when agents answer messages and calls, or in the playground.<//>`}
    ${items.length > 0 && html`<${Runs} runs=${items} caption=${`${mode} agent runs, newest first`} />`}
    <${Pager} offset=${offset} total=${total} shown=${items.length} size=${PAGE} />`;
}

/** @param {{id: string}} p */
export function RunPage({ id }) {
  const run = useResource((signal) => api("GET", `/api/v1/agent-runs/${encodeURIComponent(id)}`, { signal }), [id]);
  const agentId = run.data?.agent_id;
  const agent = useResource(
    (signal) => (agentId ? api("GET", `/api/v1/agents/${agentId}`, { signal }) : Promise.resolve(null)),
    [agentId],
  );
  useEffect(() => {
    document.title = `Run #${id} · Parley`;
  }, [id]);
  if (run.error) {
    return html`<${NotHere} error=${run.error} what="run" back="/runs" backLabel="All runs" retry=${run.reload} />`;
  }
  /** @type {import("../components/runs.js").Run & {agent_id: number, trigger: string, conversation_id?: number | null,
   *   call_id?: string | null, completed_at?: string | null, reply_message_id?: number | null}} */
  const r = run.data;
  if (!r) return html`<${Skeleton} rows=${5} />`;
  return html`<nav class="breadcrumb" aria-label="Breadcrumb"><a href="/runs">Agent runs</a></nav>
    <${PageHeader} title=${`Run #${r.id}`}>
      <span class=${`badge ${r.status === "completed" ? "ok" : r.status === "failed" ? "danger" : ""}`}>${humanize(r.status)}</span>
      ${" "}${humanize(r.trigger)} · ${formatDate(r.created_at)}
    <//>
    ${r.error && html`<div class="notice error" role="alert"><p>${r.error}</p></div>`}
    <dl class="facts">
      <div><dt>Agent</dt><dd><a href=${`/agents/${r.agent_id}`}>${agent.data?.name ?? `Agent ${r.agent_id}`}</a></dd></div>
      <div><dt>Engine</dt><dd>${r.engine} · ${r.model}</dd></div>
      <div><dt>Tokens in / out</dt><dd>${r.input_tokens} / ${r.output_tokens}</dd></div>
      <div><dt>Cost</dt><dd>${money(r.cost_cents)}</dd></div>
      <div><dt>First token</dt><dd>${r.first_token_ms != null ? `${r.first_token_ms} ms` : "—"}</dd></div>
      <div><dt>In all</dt><dd>${r.total_ms != null ? `${r.total_ms} ms` : "—"}</dd></div>
      ${r.call_id && html`<div><dt>Call</dt><dd><a href=${`/calls/${r.call_id}`}>${r.call_id}</a></dd></div>`}
      ${r.conversation_id && html`<div><dt>Conversation</dt><dd>#${r.conversation_id}</dd></div>`}
    </dl>
    <section class="section" aria-labelledby="tools-h">
      <h2 id="tools-h">Tool calls</h2>
      ${r.tool_calls.length
        ? r.tool_calls.map(
            (t) => html`<div class="tool-call">
              <h3>${t.name} <span class="muted">${t.ms} ms</span></h3>
              <p class="muted">Arguments</p>
              <pre class="excerpt">${JSON.stringify(t.arguments, null, 2)}</pre>
              ${t.error
                ? html`<p class="error">${t.error}</p>`
                : html`<p class="muted">Result</p><pre class="excerpt">${JSON.stringify(t.result ?? null, null, 2)}</pre>`}
            </div>`,
          )
        : html`<p class="muted">None.</p>`}
    </section>
    <section class="section" aria-labelledby="retrieval-h">
      <h2 id="retrieval-h">Retrieved passages</h2>
      ${r.retrieval.length
        ? html`<ol>
            ${r.retrieval.map((h) => html`<li>Passage ${h.passage_id} <span class="muted">score ${h.score.toFixed(2)}</span></li>`)}
          </ol>`
        : html`<p class="muted">None: the agent has no knowledge, or nothing matched.</p>`}
      <p class="muted">
        The rendered prompt is not kept per run; the agent's <a href=${`/agents/${r.agent_id}`}>settings</a> preview
        its prompt as it is now.
      </p>
    </section>`;
}
