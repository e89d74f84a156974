// Calls: the list with its filters in the URL, a test call placed from a
// form, and one page per call — its status timeline, the stereo recording
// with its waveform and the transcript following playback, each agent
// turn's latency, the runs that answered, and the cost. A live call's page
// follows it until it ends.

import { html, useEffect, useRef, useState } from "../lib/html.js";
import { api } from "../lib/api.js";
import { useLiveReload, useResource } from "../lib/data.js";
import { current } from "../lib/session.js";
import { navigate, setQuery, useLocation } from "../lib/router.js";
import { duration, formatDate, humanize, money } from "../lib/format.js";
import {
  CheckField,
  Dialog,
  EmptyState,
  FormError,
  LoadError,
  NotHere,
  PageHeader,
  Pager,
  SelectField,
  Skeleton,
  TextField,
  useCreate,
  useForm,
  When,
} from "../components/ui.js";
import { LatencyChart } from "../components/charts.js";
import { RecordingPlayer } from "../components/player.js";
import { Runs } from "../components/runs.js";

/** @typedef {import("../components/runs.js").Run} Run */

/**
 * @typedef {object} Call
 * @property {string} id
 * @property {number} agent_id
 * @property {number | null} [conversation_id]
 * @property {number | null} [contact_id]
 * @property {"outbound" | "inbound"} direction
 * @property {string | null} [from]
 * @property {string} to
 * @property {string} status
 * @property {string | null} [ended_reason]
 * @property {string} created_at
 * @property {string | null} [ringing_at]
 * @property {string | null} [answered_at]
 * @property {string | null} [ended_at]
 * @property {number | null} [duration_ms]
 * @property {number | null} [cost_cents]
 * @property {{status: string, duration_ms?: number | null, format?: string | null}} recording
 * @property {string} provider
 * @property {string | null} [transfer_to]
 * @property {{turns: number, voice_to_voice_p50_ms: number, voice_to_voice_p95_ms: number} | null} [latency]
 * @property {"human" | "machine" | "uncertain" | null} [answered_by]
 * @property {{cause: string, heard?: string | null, decided_ms: number, beep_end_ms?: number | null, message_left: boolean} | null} [machine_detection]
 * @property {Analysis | null} [analysis]
 */
/**
 * @typedef {object} Analysis
 * @property {"completed" | "failed"} status
 * @property {string | null} [summary]
 * @property {unknown} [data]
 * @property {string[]} data_errors
 * @property {{result: boolean, reason: string} | null} [success]
 * @property {string | null} [error]
 * @property {number | null} [run_id]
 * @property {string} analyzed_at
 */
/**
 * @typedef {object} Segment
 * @property {number} index
 * @property {"agent" | "caller" | "human"} speaker
 * @property {string} text
 * @property {number} start_ms
 * @property {number} end_ms
 * @property {boolean} interrupted
 * @property {import("../components/charts.js").TurnLatency | null} [latency]
 */
/** @typedef {{id: number, name: string, status: string}} AgentRef */

const STATUSES = ["queued", "ringing", "in_progress", "completed", "busy", "no_answer", "failed", "canceled"];
const LIVE = new Set(["queued", "ringing", "in_progress"]);
const PAGE = 50;

const statusLabel = humanize;

/** @param {{status: string}} p */
function CallStatus({ status }) {
  const tone = status === "completed" ? "ok" : LIVE.has(status) ? "warn" : status === "failed" ? "danger" : "";
  return html`<span class=${`badge ${tone}`}>${statusLabel(status)}</span>`;
}

/** The agents of the mode, by id, for names and the filter. */
function useAgents() {
  return useResource(
    (signal) => api("GET", "/api/v1/agents", { query: { limit: 200 }, signal }).then((r) => /** @type {AgentRef[]} */ (r.agents)),
    [],
  );
}

/** A `YYYY-MM-DD` date input's day as the instant it starts (or ends), here. */
function dayBound(/** @type {string} */ day, /** @type {boolean} */ end) {
  if (!day) return undefined;
  const d = new Date(`${day}T00:00:00`);
  if (Number.isNaN(d.getTime())) return undefined;
  if (end) d.setDate(d.getDate() + 1);
  return d.toISOString();
}

export function Calls() {
  const { query } = useLocation();
  const mode = current().me?.mode ?? "live";
  const filters = {
    status: query.get("status") ?? "",
    agent_id: query.get("agent_id") ?? "",
    direction: query.get("direction") ?? "",
    from: query.get("from") ?? "",
    to: query.get("to") ?? "",
  };
  const offset = Math.max(0, Number(query.get("offset")) || 0);
  const key = JSON.stringify({ ...filters, offset });
  const agents = useAgents();
  const calls = useResource(
    (signal) =>
      api("GET", "/api/v1/calls", {
        query: {
          status: filters.status,
          agent_id: filters.agent_id,
          direction: filters.direction,
          created_after: dayBound(filters.from, false),
          created_before: dayBound(filters.to, true),
          limit: PAGE,
          offset,
        },
        signal,
      }),
    [key],
  );
  const [placing, setPlacing] = useState(false);
  useEffect(() => {
    document.title = "Calls · Parley";
  }, []);
  // Calls placed and moving anywhere show as they happen (the live stream).
  useLiveReload(calls.reload, (e) => e.event.startsWith("call."));
  /** @type {Call[]} */
  const items = calls.data?.items ?? [];

  const names = new Map((agents.data ?? []).map((a) => [a.id, a.name]));
  const filtered = Object.values(filters).some(Boolean);
  const place = html`<button type="button" class="primary" onClick=${() => setPlacing(true)}>
    ${mode === "test" ? "Place a test call" : "Place a call"}
  </button>`;
  const total = calls.data?.total ?? 0;

  return html`<${PageHeader} title="Calls" actions=${place}>
      Every ${mode} call your agents made or answered, newest first. Open one to hear it and read its transcript.
    <//>
    <form class="filters" role="search" aria-label="Filter calls" onSubmit=${(/** @type {Event} */ e) => e.preventDefault()}>
      <label
        >Status
        <select value=${filters.status} onChange=${(/** @type {any} */ e) => setQuery({ status: e.currentTarget.value, offset: null })}>
          <option value="">Any</option>
          ${STATUSES.map((s) => html`<option value=${s}>${statusLabel(s)}</option>`)}
        </select>
      </label>
      <label
        >Agent
        <select value=${filters.agent_id} onChange=${(/** @type {any} */ e) => setQuery({ agent_id: e.currentTarget.value, offset: null })}>
          <option value="">Any</option>
          ${(agents.data ?? []).map((a) => html`<option value=${String(a.id)}>${a.name}</option>`)}
        </select>
      </label>
      <label
        >Direction
        <select value=${filters.direction} onChange=${(/** @type {any} */ e) => setQuery({ direction: e.currentTarget.value, offset: null })}>
          <option value="">Any</option>
          <option value="outbound">Outbound</option>
          <option value="inbound">Inbound</option>
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
      ${filtered &&
      html`<button type="button" class="subtle" onClick=${() => setQuery({ status: null, agent_id: null, direction: null, from: null, to: null, offset: null })}>
        Clear filters
      </button>`}
    </form>
    ${calls.loading && !calls.data && !calls.error && html`<${Skeleton} />`}
    ${calls.error && html`<${LoadError} error=${calls.error} retry=${calls.reload} />`}
    ${calls.data &&
    !items.length &&
    (filtered
      ? html`<${EmptyState} title="No calls match these filters">Clear a filter to see more calls.<//>`
      : html`<${EmptyState} title=${`No ${mode} calls yet`} action=${place}>
          ${mode === "test"
            ? "Place a test call: it runs on the simulated line, costs nothing, and its recording and transcript appear here."
            : "Calls appear here when an agent dials out or answers a voice channel. Try one in test mode first."}
        <//>`)}
    ${items.length > 0 &&
    html`<div class="table-wrap">
        <table>
          <caption class="visually-hidden">${mode} calls</caption>
          <thead>
            <tr>
              <th scope="col">Call</th>
              <th scope="col">Agent</th>
              <th scope="col">Status</th>
              <th scope="col">Duration</th>
              <th scope="col">Cost</th>
              <th scope="col">Placed</th>
            </tr>
          </thead>
          <tbody>
            ${items.map(
              (c) => html`<tr key=${c.id}>
                <th scope="row">
                  <a href=${`/calls/${c.id}`}>${c.provider === "web" ? "Web call" : c.direction === "outbound" ? `To ${c.to}` : `From ${c.from ?? "unknown"}`}</a>
                  <div class="muted">${c.direction === "outbound" ? "Outbound" : "Inbound"}</div>
                </th>
                <td>${names.get(c.agent_id) ?? `Agent ${c.agent_id}`}</td>
                <td><${CallStatus} status=${c.status} /></td>
                <td>${c.duration_ms != null ? duration(c.duration_ms / 1000) : "—"}</td>
                <td>${c.cost_cents != null ? money(c.cost_cents) : "—"}</td>
                <td><${When} value=${c.created_at} /></td>
              </tr>`,
            )}
          </tbody>
        </table>
      </div>
      <${Pager} offset=${offset} total=${total} shown=${items.length} size=${PAGE} />`}
    ${placing && html`<${PlaceCall} agents=${agents.data ?? []} onClose=${() => setPlacing(false)} />`}`;
}

/** @param {{agents: AgentRef[], onClose: () => void}} p */
function PlaceCall({ agents, onClose }) {
  const usable = agents.filter((a) => a.status !== "archived");
  const test = current().me?.mode === "test";
  const form = useForm({
    agent_id: usable[0] ? String(usable[0].id) : "",
    to: test ? "+15005550006" : "",
    first_message: "",
    record: true,
  });
  const place = useCreate();
  if (!usable.length) {
    return html`<${Dialog} title=${test ? "Place a test call" : "Place a live call"} onClose=${onClose}>
      <div class="dialog-body">
        <p>A call needs an agent to speak. Create an agent first, then come back.</p>
      </div>
      <footer><button type="button" onClick=${onClose}>Close</button></footer>
    <//>`;
  }
  return html`<${Dialog} title=${test ? "Place a test call" : "Place a live call"} onClose=${onClose}>
    ${!test &&
    html`<p class="notice" role="note">This calls a real number through your provider and is charged to the live balance.</p>`}
    <form
      novalidate
      onSubmit=${form.submit(async () => {
        /** @type {Record<string, unknown>} */
        const body = { agent_id: Number(form.values.agent_id), to: form.values.to, record: form.values.record };
        if (form.values.first_message) body.first_message = form.values.first_message;
        const call = await place("/api/v1/calls", body);
        onClose();
        navigate(`/calls/${call.id}`);
      })}
    >
      <div class="dialog-body">
        <${SelectField}
          form=${form}
          name="agent_id"
          label="Agent"
          options=${usable.map((a) => /** @type {[string, string]} */ ([String(a.id), a.name]))}
        />
        <${TextField}
          form=${form}
          name="to"
          label="Number to call"
          type="tel"
          required
          hint=${test
            ? "Test mode uses the simulated line: any number answers, except +15005550002 (busy) and +15005550003 (no answer)."
            : "A phone number in international form, or a SIP URI. This is a live call and is charged."}
        />
        <${TextField}
          form=${form}
          name="first_message"
          label="First message (optional)"
          hint="What the agent says when the call is answered; the agent's own first message otherwise."
          maxlength=${2000}
        />
        <${CheckField} form=${form} name="record" label="Record the call" />
        <${FormError} form=${form} fields=${["agent_id", "to", "first_message", "record"]} />
      </div>
      <footer>
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary" disabled=${form.busy}>Place call</button>
      </footer>
    </form>
  <//>`;
}

/** @param {{id: string}} p */
export function CallPage({ id }) {
  const call = useResource((signal) => api("GET", `/api/v1/calls/${encodeURIComponent(id)}`, { signal }), [id]);
  const transcript = useResource(
    (signal) => api("GET", `/api/v1/calls/${encodeURIComponent(id)}/transcript`, { signal }),
    [id],
  );
  const agents = useAgents();
  /** @type {Call | undefined} */
  const c = call.data;
  const live = c ? LIVE.has(c.status) : false;
  const recordingReady = c?.recording.status === "available";
  const recording = useResource(
    (signal) =>
      recordingReady
        ? api("GET", `/api/v1/calls/${encodeURIComponent(id)}/recording`, { query: { redirect: true }, signal })
        : Promise.resolve(null),
    [id, recordingReady],
  );
  const runs = useResource(
    (signal) => api("GET", "/api/v1/agent-runs", { query: { call_id: id, limit: 100 }, signal }),
    [id, c?.status],
  );
  const [hangingUp, setHangingUp] = useState("");
  const [time, setTime] = useState(-1);
  const audio = useRef(/** @type {HTMLAudioElement | null} */ (null));

  useEffect(() => {
    document.title = c ? `${callTitle(c)} · Parley` : "Call · Parley";
  }, [c?.id]);
  // Its status changes arrive on the live stream.
  useLiveReload(call.reload, (e) => e.event.startsWith("call.") && e.data?.data?.id === id);
  // Follow a live call: its transcript moves without a reload; after it
  // ends, the recording is written a moment later.
  const settling = c && !live && c.recording.status === "processing";
  useEffect(() => {
    if (!live && !settling) return;
    const timer = setInterval(() => {
      if (document.visibilityState !== "visible") return;
      call.reload();
      transcript.reload();
    }, 1500);
    return () => clearInterval(timer);
  }, [live, settling, call.reload, transcript.reload]);

  if (call.error) {
    return html`<${NotHere} error=${call.error} what="call" back="/calls" backLabel="All calls" retry=${call.reload} />`;
  }
  if (!c) return html`<${Skeleton} rows=${5} />`;

  /** @type {Segment[]} */
  const segments = transcript.data?.segments ?? [];
  const agentName = (agents.data ?? []).find((a) => a.id === c.agent_id)?.name ?? `Agent ${c.agent_id}`;
  /** @type {Run[]} */
  const runItems = runs.data?.items ?? [];
  const turns = segments
    .filter((s) => s.speaker === "agent" && s.latency)
    .map((s, i) => ({ label: `Turn ${i + 1}`, latency: /** @type {any} */ (s.latency) }));

  return html`<nav class="breadcrumb" aria-label="Breadcrumb"><a href="/calls">Calls</a></nav>
    <${PageHeader}
      title=${callTitle(c)}
      actions=${live &&
      html`<button
        type="button"
        class="danger"
        onClick=${async () => {
          setHangingUp("");
          try {
            await api("POST", `/api/v1/calls/${encodeURIComponent(c.id)}/hangup`);
            call.reload();
          } catch (e) {
            setHangingUp(e instanceof Error ? e.message : String(e));
          }
        }}
      >
        Hang up
      </button>`}
    >
      <${CallStatus} status=${c.status} /> ${c.ended_reason && html`<span class="muted">${statusLabel(c.ended_reason)}</span>`}
      ${live && html`<span class="muted"> · following live</span>`}
    <//>
    ${hangingUp && html`<div class="notice error" role="alert"><p>${hangingUp}</p></div>`}
    <dl class="facts">
      <div><dt>Agent</dt><dd>${agentName}</dd></div>
      <div><dt>Direction</dt><dd>${c.direction === "outbound" ? "Outbound" : "Inbound"}</dd></div>
      <div><dt>From</dt><dd>${c.from ?? "—"}</dd></div>
      <div><dt>To</dt><dd>${c.to}</dd></div>
      ${c.contact_id && html`<div><dt>Contact</dt><dd><a href=${`/contacts/${c.contact_id}`}>Open contact</a></dd></div>`}
      <div><dt>Duration</dt><dd>${c.duration_ms != null ? duration(c.duration_ms / 1000) : "—"}</dd></div>
      <div><dt>Cost</dt><dd>${c.cost_cents != null ? money(c.cost_cents) : live ? "Charged when it ends" : "—"}</dd></div>
      <div><dt>Voice to voice</dt><dd>${c.latency ? `p50 ${c.latency.voice_to_voice_p50_ms} ms · p95 ${c.latency.voice_to_voice_p95_ms} ms over ${c.latency.turns} turns` : "—"}</dd></div>
      <div><dt>Line</dt><dd>${c.provider}</dd></div>
      ${c.transfer_to && html`<div><dt>Transferred to</dt><dd>${c.transfer_to}</dd></div>`}
      ${c.answered_by && html`<div><dt>Answered by</dt><dd>${answeredBy(c)}</dd></div>`}
      <div><dt>Call id</dt><dd><code>${c.id}</code></dd></div>
    </dl>
    <section class="section" aria-labelledby="timeline-h">
      <h2 id="timeline-h">Timeline</h2>
      <ol class="timeline">
        <li><span>Placed</span> <time datetime=${c.created_at}>${formatDate(c.created_at)}</time></li>
        ${c.ringing_at && html`<li><span>Ringing</span> <time datetime=${c.ringing_at}>${formatDate(c.ringing_at)}</time></li>`}
        ${c.answered_at && html`<li><span>Answered</span> <time datetime=${c.answered_at}>${formatDate(c.answered_at)}</time></li>`}
        ${c.ended_at &&
        html`<li>
          <span>Ended${c.ended_reason ? ` (${statusLabel(c.ended_reason)})` : ""}</span>
          <time datetime=${c.ended_at}>${formatDate(c.ended_at)}</time>
        </li>`}
      </ol>
    </section>
    <section class="section" aria-labelledby="recording-h">
      <h2 id="recording-h">Recording</h2>
      ${c.recording.status === "available" && recording.data
        ? html`<${RecordingPlayer} callId=${id} src=${recording.data.url} durationMs=${recording.data.duration_ms} audio=${audio} onTime=${setTime} />`
        : c.recording.status === "available" && recording.error
          ? html`<${LoadError} error=${recording.error} retry=${recording.reload} />`
          : html`<p class="muted">
              ${c.recording.status === "processing" || (live && c.recording.status !== "deleted")
                ? "The recording is written when the call ends."
                : c.recording.status === "deleted"
                  ? "The recording was deleted."
                  : "This call was not recorded."}
            </p>`}
    </section>
    <section class="section" aria-labelledby="transcript-h">
      <h2 id="transcript-h">Transcript</h2>
      ${transcript.error && html`<${LoadError} error=${transcript.error} retry=${transcript.reload} />`}
      ${transcript.data && !segments.length && html`<p class="muted">${live ? "Nobody has spoken yet." : "Nothing was said."}</p>`}
      ${segments.length > 0 &&
      html`<${Transcript}
        segments=${segments}
        time=${time}
        canSeek=${Boolean(recording.data)}
        onSeek=${(/** @type {number} */ ms) => {
          const el = audio.current;
          if (!el) return;
          el.currentTime = ms / 1000;
          el.play().catch(() => {});
        }}
      />`}
    </section>
    ${!live && html`<${CallAnalysisSection} call=${c} onQueued=${call.reload} />`}
    ${turns.length > 0 &&
    html`<section class="section" aria-labelledby="latency-h">
      <h2 id="latency-h">Latency per turn</h2>
      <p class="muted">From the end of the caller's speech to the agent's first audio.</p>
      <${LatencyChart} turns=${turns} />
    </section>`}
    <section class="section" aria-labelledby="runs-h">
      <h2 id="runs-h">Agent runs</h2>
      ${runs.error && html`<${LoadError} error=${runs.error} retry=${runs.reload} />`}
      ${runs.data && !runItems.length && html`<p class="muted">No runs: the agent has not answered a turn.</p>`}
      ${runItems.length > 0 && html`<${Runs} runs=${runItems} caption="Agent runs of this call" />`}
    </section>`;
}

/**
 * The transcript as a list of buttons: the one playing is marked current
 * and kept in view; a click plays from it.
 * @param {{segments: Segment[], time: number, canSeek: boolean, onSeek: (ms: number) => void}} p
 */
function Transcript({ segments, time, canSeek, onSeek }) {
  const list = useRef(/** @type {HTMLOListElement | null} */ (null));
  let playing = -1;
  if (time >= 0) {
    for (const s of segments) if (s.start_ms <= time) playing = s.index;
  }
  useEffect(() => {
    if (playing < 0 || !list.current) return;
    const el = list.current.querySelector(`[data-index="${playing}"]`);
    el?.scrollIntoView({ block: "nearest" });
  }, [playing]);
  return html`<ol class="transcript" ref=${list}>
    ${segments.map((s) => {
      const who = s.speaker === "caller" ? "Caller" : s.speaker === "agent" ? "Agent" : "Person";
      const body = html`<span class="speaker">${who}</span>
        <span class="at">${clock(s.start_ms)}</span>
        <span class="text">${s.text}</span>
        ${s.interrupted && html`<span class="badge warn">Interrupted</span>`}`;
      return html`<li
        key=${s.index}
        data-index=${s.index}
        class=${`segment ${s.speaker}`}
        aria-current=${s.index === playing ? "true" : undefined}
      >
        ${canSeek
          ? html`<button type="button" class="seek" onClick=${() => onSeek(s.start_ms)}>
              <span class="visually-hidden">Play from ${clock(s.start_ms)}: </span>${body}
            </button>`
          : html`<div class="seek">${body}</div>`}
      </li>`;
    })}
  </ol>`;
}

/**
 * "Call to +1…", "Call from …", or "Web call" (a browser, from the dashboard or an API client).
 * @param {Call} c
 */
function callTitle(c) {
  if (c.provider === "web") return "Web call";
  return c.direction === "outbound" ? `Call to ${c.to}` : `Call from ${c.from ?? "unknown"}`;
}

/** @param {number} ms */
function clock(ms) {
  const s = Math.max(0, Math.floor(ms / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
}

/**
 * Who picked up, as answering-machine detection judged, in a sentence.
 * @param {Call} c
 */
function answeredBy(c) {
  const d = c.machine_detection;
  const by = { human: "A person", machine: "A machine", uncertain: "Not sure (treated as a person)" }[c.answered_by ?? "uncertain"];
  if (!d) return by;
  const why = d.heard ? `heard “${d.heard}”` : statusLabel(d.cause).toLowerCase();
  const message = c.answered_by === "machine" ? (d.message_left ? " · message left" : " · no message") : "";
  return `${by} (${why}, after ${(d.decided_ms / 1000).toFixed(1)} s)${message}`;
}

/**
 * Post-call analysis: the summary, whether the call met the agent's
 * criteria, the facts extracted (or why they were refused), and a way to
 * run it again.
 * @param {{call: Call, onQueued: () => void}} p
 */
function CallAnalysisSection({ call, onQueued }) {
  const a = call.analysis;
  const [state, setState] = useState(/** @type {"" | "queued" | string} */ (""));
  const again = async () => {
    setState("");
    try {
      await api("POST", `/api/v1/calls/${encodeURIComponent(call.id)}/analysis`);
      setState("queued");
      onQueued();
    } catch (e) {
      setState(e instanceof Error ? e.message : String(e));
    }
  };
  return html`<section class="section" aria-labelledby="analysis-h">
    <h2 id="analysis-h">Analysis</h2>
    ${!a && html`<p class="muted">Not analysed: the agent's text engine must be a model, and its analysis plan ask for something (agent settings, "After each call").</p>`}
    ${a?.status === "failed" && html`<p class="notice error">The analysis failed: ${a.error}</p>`}
    ${a?.status === "completed" &&
    html`<dl class="facts">
      ${a.summary && html`<div><dt>Summary</dt><dd>${a.summary}</dd></div>`}
      ${a.success && html`<div><dt>Success</dt><dd>${a.success.result ? "Met" : "Not met"}${a.success.reason ? ` — ${a.success.reason}` : ""}</dd></div>`}
      ${a.data != null &&
      html`<div><dt>Extracted</dt><dd><pre class="code">${JSON.stringify(a.data, null, 2)}</pre></dd></div>`}
      ${a.data_errors.length > 0 &&
      html`<div>
        <dt>Not extracted</dt>
        <dd>
          The model's answer did not fit the schema, so nothing was stored:
          <ul>
            ${a.data_errors.map((e) => html`<li>${e}</li>`)}
          </ul>
        </dd>
      </div>`}
    </dl>`}
    ${a && html`<p class="muted">Analysed ${formatDate(a.analyzed_at)}.</p>`}
    <p>
      <button type="button" onClick=${again} disabled=${state === "queued"}>${a ? "Analyse again" : "Analyse now"}</button>
      ${state === "queued" && html` <span role="status">Queued: the analysis appears here when it is done.</span>`}
    </p>
    ${state && state !== "queued" && html`<div class="notice error" role="alert"><p>${state}</p></div>`}
  </section>`;
}
