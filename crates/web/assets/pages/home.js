// Home: today and the last seven days at a glance, in the reader's days —
// calls, voice-to-voice latency, messages, agent runs, open handoffs, spend
// and failing webhook endpoints — from one request to /api/v1/overview.

import { html, useEffect, useState } from "../lib/html.js";
import { api } from "../lib/api.js";
import { useResource } from "../lib/data.js";
import { canAdminister, current } from "../lib/session.js";
import { money } from "../lib/format.js";
import { EmptyState, LoadError, PageHeader, Skeleton } from "../components/ui.js";
import { Bars } from "../components/charts.js";

/**
 * @typedef {object} Day
 * @property {string} date
 * @property {number} calls
 * @property {number} call_seconds
 * @property {number} messages_in
 * @property {number} messages_out
 * @property {number} agent_runs
 * @property {number} agent_runs_failed
 * @property {number} spend_cents
 */
/** @typedef {{turns: number, voice_to_voice_p50_ms: number, voice_to_voice_p95_ms: number}} Latency */
/**
 * @typedef {object} Overview
 * @property {Day[]} days
 * @property {Latency | null} [voice_to_voice_today]
 * @property {Latency | null} [voice_to_voice]
 * @property {number} open_handoffs
 * @property {{id: number, url: string, status: string, failing_since?: string | null, disabled_reason?: string | null}[]} failing_webhook_endpoints
 * @property {number} balance_cents
 */

const weekday = new Intl.DateTimeFormat(undefined, { weekday: "short", month: "short", day: "numeric" });
/** @param {string} date */
const dayLabel = (date) => weekday.format(new Date(`${date}T12:00:00`));
const count = new Intl.NumberFormat();

/** @param {number} seconds */
function minutes(seconds) {
  return seconds < 60 ? `${seconds} s` : `${count.format(Math.round(seconds / 60))} min`;
}

/** "1 call", "3 calls". @param {number} n @param {string} word */
const plural = (n, word) => `${count.format(n)} ${word}${n === 1 ? "" : "s"}`;

/** @param {Day[]} days @param {(d: Day) => number} pick */
const sum = (days, pick) => days.reduce((n, d) => n + pick(d), 0);

export function Home() {
  const mode = current().me?.mode ?? "live";
  const overview = useResource(
    (signal) =>
      api("GET", "/api/v1/overview", { query: { days: 7, utc_offset_minutes: -new Date().getTimezoneOffset() }, signal }),
    [],
  );
  const [seeded, setSeeded] = useState(false);
  useEffect(() => {
    document.title = "Home · Parley";
  }, []);
  // Figures move while the page is open: refresh them every half minute.
  useEffect(() => {
    const timer = setInterval(() => document.visibilityState === "visible" && overview.reload(), 30000);
    return () => clearInterval(timer);
  }, [overview.reload]);

  /** @type {Overview | undefined} */
  const o = overview.data;
  return html`<${PageHeader} title="Home">Your ${mode} workspace today and over the last seven days.<//>
    ${overview.loading && !o && !overview.error && html`<${Skeleton} rows=${4} />`}
    ${overview.error && html`<${LoadError} error=${overview.error} retry=${overview.reload} />`}
    ${seeded &&
    html`<p class="notice" role="status">
      The demo is ready: <a href="/agents">Ava (demo)</a> is answering three conversations from its help center,
      and a <a href="/calls">test call</a> is ringing. The figures fill in over the next minute.
    </p>`}
    ${o &&
    html`<${Figures}
      o=${o}
      mode=${mode}
      onSeeded=${() => {
        setSeeded(true);
        overview.reload();
      }}
    />`}`;
}

/**
 * One click: a demo in test mode to look at.
 * @param {{onSeeded: () => void}} p
 */
function SeedDemo({ onSeeded }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  return html`<button
      type="button"
      class="primary"
      disabled=${busy}
      onClick=${async () => {
        setBusy(true);
        setError("");
        try {
          await api("POST", "/api/v1/demo");
          onSeeded();
        } catch (e) {
          setError(e instanceof Error ? e.message : String(e));
        } finally {
          setBusy(false);
        }
      }}
    >
      Seed a demo
    </button>
    ${error && html`<p class="error" role="alert">${error}</p>`}`;
}

/** @param {{o: Overview, mode: string, onSeeded: () => void}} p */
function Figures({ o, mode, onSeeded }) {
  const days = o.days;
  const today = days[days.length - 1];
  const quiet =
    sum(days, (d) => d.calls + d.messages_in + d.messages_out + d.agent_runs) === 0 && o.open_handoffs === 0;
  /** @param {(d: Day) => number} pick */
  const points = (pick) => days.map((d) => ({ label: dayLabel(d.date), value: pick(d) }));
  return html`${quiet &&
    html`<${EmptyState} title="Nothing has happened here yet" action=${mode === "test" && html`<${SeedDemo} onSeeded=${onSeeded} />`}>
      ${mode === "test"
        ? html`Seed a demo to see a living console in a minute: an agent that answers from a help center, a webchat
            channel, a few conversations and a test call, all on the simulated line. Or create an agent and place a test
            call from <a href="/calls">Calls</a>.`
        : canAdminister()
          ? html`Switch to test mode to try Parley without touching customers (a demo is one click there), or create
              an API key under <a href="/developers/api-keys">Developers</a> to connect your product.`
          : html`Switch to test mode to try Parley without touching customers: a demo is one click there.`}
    <//>`}
    <div class="tiles">
      <${Tile} title="Calls" href="/calls">
        <p class="figure">${count.format(today.calls)} <span>today</span></p>
        <p class="muted">
          ${`${minutes(today.call_seconds)} today · ${plural(sum(days, (d) => d.calls), "call")}, ${minutes(
            sum(days, (d) => d.call_seconds),
          )} in 7 days`}
        </p>
        <${Bars} label="Calls per day" points=${points((d) => d.calls)} />
      <//>
      <${Tile} title="Voice to voice">
        ${o.voice_to_voice_today
          ? html`<p class="figure">${o.voice_to_voice_today.voice_to_voice_p50_ms} ms <span>p50 today</span></p>
              <p class="muted">p95 ${o.voice_to_voice_today.voice_to_voice_p95_ms} ms over ${o.voice_to_voice_today.turns} turns</p>`
          : html`<p class="figure">— <span>today</span></p>`}
        <p class="muted">
          ${o.voice_to_voice
            ? `7 days: p50 ${o.voice_to_voice.voice_to_voice_p50_ms} ms, p95 ${o.voice_to_voice.voice_to_voice_p95_ms} ms over ${o.voice_to_voice.turns} turns`
            : "No answered turns in 7 days."}
        </p>
      <//>
      <${Tile} title="Messages">
        <p class="figure">${count.format(today.messages_in)} in · ${count.format(today.messages_out)} out <span>today</span></p>
        <p class="muted">
          ${count.format(sum(days, (d) => d.messages_in))} in, ${count.format(sum(days, (d) => d.messages_out))} out in 7 days
        </p>
        <${Bars} label="Messages per day, both ways" points=${points((d) => d.messages_in + d.messages_out)} />
      <//>
      <${Tile} title="Agent runs">
        <p class="figure">${count.format(today.agent_runs)} <span>today</span></p>
        <p class=${today.agent_runs_failed ? "error" : "muted"}>
          ${count.format(today.agent_runs_failed)} failed today · ${count.format(sum(days, (d) => d.agent_runs_failed))} in 7 days
        </p>
        <${Bars} label="Agent runs per day" points=${points((d) => d.agent_runs)} />
      <//>
      <${Tile} title="Open handoffs">
        <p class="figure">${count.format(o.open_handoffs)}</p>
        <p class="muted">${o.open_handoffs ? "Conversations waiting for, or with, a person." : "No conversation is waiting for a person."}</p>
      <//>
      <${Tile} title="Spend">
        <p class="figure">${money(today.spend_cents)} <span>today</span></p>
        <p class="muted">${money(sum(days, (d) => d.spend_cents))} in 7 days · balance ${money(o.balance_cents)}</p>
        <${Bars} label="Spend per day" points=${points((d) => d.spend_cents)} format=${money} tone="warn" />
      <//>
    </div>
    <section class="section" aria-labelledby="failing-h">
      <h2 id="failing-h">Webhook endpoints</h2>
      ${o.failing_webhook_endpoints.length
        ? html`<ul class="failing">
            ${o.failing_webhook_endpoints.map(
              (e) => html`<li>
                <a href=${`/developers/webhooks/${e.id}`}><code>${e.url}</code></a>
                <span class=${`badge ${e.status === "disabled" ? "danger" : "warn"}`}>
                  ${e.status === "disabled" ? "Disabled" : "Failing"}
                </span>
                ${e.disabled_reason && html`<span class="muted">${e.disabled_reason}</span>`}
              </li>`,
            )}
          </ul>`
        : html`<p class="muted">No endpoint is failing.</p>`}
    </section>`;
}

/** @param {{title: string, href?: string, children: any}} p */
function Tile({ title, href, children }) {
  return html`<section class="tile" aria-label=${title}>
    <h2>${href ? html`<a href=${href}>${title}</a>` : title}</h2>
    ${children}
  </section>`;
}
