// Agents: the list with its filters in the URL, creating one (blank or
// from a template), and one page per agent with three views — its
// settings (every field the API has, saved as one PATCH of what changed,
// the API's faults next to their fields), the playground (the agent's
// answer streamed as it is written, with the tools it called and the
// passages it was given), and its recent runs.

import { html, useEffect, useRef, useState } from "../lib/html.js";
import { api, ApiError, stream } from "../lib/api.js";
import { useResource } from "../lib/data.js";
import { current } from "../lib/session.js";
import { navigate, setQuery, useLocation } from "../lib/router.js";
import {
  CheckField,
  Dialog,
  EmptyState,
  faultsOf,
  Field,
  FormError,
  LoadError,
  NotHere,
  PageHeader,
  SelectField,
  Skeleton,
  TextAreaField,
  TextField,
  useCreate,
  useForm,
  When,
} from "../components/ui.js";
import { Runs } from "../components/runs.js";
import { TalkToAgent } from "../components/webcall.js";
import { humanize as statusLabel } from "../lib/format.js";

/**
 * @typedef {object} HttpTool
 * @property {"http"} type
 * @property {string} name
 * @property {string} description
 * @property {unknown} parameters
 * @property {string} url
 * @property {number} timeout_ms
 * @property {string[]} header_names
 */
/** @typedef {{type: "builtin", name: string}} BuiltinTool */
/**
 * @typedef {object} Agent
 * @property {number} id
 * @property {string} name
 * @property {string} slug
 * @property {string | null} [description]
 * @property {string} text_engine
 * @property {string | null} [model]
 * @property {"active" | "paused" | "archived"} status
 * @property {number} priority
 * @property {number} trigger_count
 * @property {boolean} is_template
 * @property {string} system_prompt
 * @property {string | null} [first_message]
 * @property {string} language
 * @property {{tts_engine: string, voice_id?: string | null, speed?: number | null} | null} [voice]
 * @property {{stt_engine: string, language?: string | null} | null} [transcriber]
 * @property {number} interruption_threshold_ms
 * @property {number} end_of_turn_ms
 * @property {"speak_first" | "wait_for_callee" | "interruptible"} first_message_mode
 * @property {number} first_message_wait_s
 * @property {"smart" | "silence"} turn_detection
 * @property {number} end_of_turn_min_ms
 * @property {number} end_of_turn_max_ms
 * @property {number | null} [silence_reprompt_s]
 * @property {number | null} [silence_hangup_s]
 * @property {{action: "hang_up" | "leave_message", message?: string | null, beep_wait_s: number, on_screening: "respond" | "hang_up"} | null} [voicemail]
 * @property {{summary: boolean, schema?: Record<string, unknown> | null, success_criteria?: string | null}} analysis
 * @property {number[]} prompt_block_ids
 * @property {number[]} knowledge_collection_ids
 * @property {{keywords: string[], max_turns?: number | null, target_user_id?: number | null}} handoff
 * @property {(HttpTool | BuiltinTool)[]} tools
 * @property {number | null} [debounce_ms]
 * @property {Record<string, unknown>} metadata
 * @property {string} updated_at
 */

/** The built-in tools, as a person reads them. */
const BUILTIN_TOOLS = [
  ["handoff_to_human", "Hand off to a person", "Asks a member to take over, with a reason."],
  ["end_conversation", "End the conversation", "Closes it when the contact is done."],
  ["end_call", "End the call", "Hangs up, on calls."],
  ["transfer_call", "Transfer the call", "To a number or SIP address, on calls."],
  ["lookup_contact", "Look up the contact", "Reads the contact's details."],
  ["update_contact", "Update the contact", "Changes name, email or phone."],
  ["search", "Search", "Messages, conversations and contacts of the workspace."],
  ["send_message", "Send a message", "To the contact on another channel."],
];

/** @param {{status: string}} p */
function AgentStatus({ status }) {
  const tone = status === "active" ? "ok" : status === "paused" ? "warn" : "";
  return html`<span class=${`badge ${tone}`}>${statusLabel(status)}</span>`;
}

export function Agents() {
  const { query } = useLocation();
  const mode = current().me?.mode ?? "live";
  const filters = { status: query.get("status") ?? "", q: query.get("q") ?? "", templates: query.get("templates") ?? "" };
  const agents = useResource(
    (signal) =>
      api("GET", "/api/v1/agents", {
        query: {
          status: filters.status,
          q: filters.q,
          is_template: filters.templates === "only" ? true : undefined,
          limit: 200,
        },
        signal,
      }),
    [filters.status, filters.q, filters.templates],
  );
  const [creating, setCreating] = useState(false);
  const [search, setSearch] = useState(filters.q);
  useEffect(() => {
    document.title = "Agents · Parley";
  }, []);
  // Typing filters after a pause, not on every key.
  useEffect(() => {
    if (search === filters.q) return;
    const timer = setTimeout(() => setQuery({ q: search.trim() }), 300);
    return () => clearTimeout(timer);
  }, [search]);

  /** @type {Agent[]} */
  const items = agents.data?.agents ?? [];
  const filtered = Boolean(filters.status || filters.q || filters.templates);
  const create = html`<button type="button" class="primary" onClick=${() => setCreating(true)}>Create agent</button>`;
  return html`<${PageHeader} title="Agents" actions=${create}>
      Agents answer your contacts on every channel and on calls. These are your ${mode} agents.
    <//>
    <form class="filters" role="search" aria-label="Filter agents" onSubmit=${(/** @type {Event} */ e) => e.preventDefault()}>
      <label
        >Search
        <input type="search" value=${search} onInput=${(/** @type {any} */ e) => setSearch(e.currentTarget.value)} maxlength="200" />
      </label>
      <label
        >Status
        <select value=${filters.status} onChange=${(/** @type {any} */ e) => setQuery({ status: e.currentTarget.value })}>
          <option value="">Active and paused</option>
          <option value="active">Active</option>
          <option value="paused">Paused</option>
          <option value="archived">Archived</option>
        </select>
      </label>
      <label
        >Kind
        <select value=${filters.templates} onChange=${(/** @type {any} */ e) => setQuery({ templates: e.currentTarget.value })}>
          <option value="">All agents</option>
          <option value="only">Templates only</option>
        </select>
      </label>
    </form>
    ${agents.loading && !agents.data && !agents.error && html`<${Skeleton} />`}
    ${agents.error && html`<${LoadError} error=${agents.error} retry=${agents.reload} />`}
    ${agents.data &&
    !items.length &&
    (filtered
      ? html`<${EmptyState} title="No agents match these filters">Clear the search or choose another status.<//>`
      : html`<${EmptyState} title=${`No ${mode} agents yet`} action=${create}>
          Create an agent, give it a prompt, and try it in the playground before it answers anyone.
        <//>`)}
    ${items.length > 0 &&
    html`<div class="table-wrap">
      <table>
        <caption class="visually-hidden">${mode} agents</caption>
        <thead>
          <tr>
            <th scope="col">Agent</th>
            <th scope="col">Status</th>
            <th scope="col">Engine</th>
            <th scope="col">Triggers</th>
            <th scope="col">Updated</th>
          </tr>
        </thead>
        <tbody>
          ${items.map(
            (a) => html`<tr key=${a.id}>
              <th scope="row">
                <a href=${`/agents/${a.id}`}>${a.name}</a>
                ${a.is_template && html` <span class="badge">Template</span>`}
                ${a.description && html`<div class="muted">${a.description}</div>`}
              </th>
              <td><${AgentStatus} status=${a.status} /></td>
              <td>${a.text_engine}${a.model ? ` · ${a.model}` : ""}</td>
              <td>${a.trigger_count}</td>
              <td><${When} value=${a.updated_at} /></td>
            </tr>`,
          )}
        </tbody>
      </table>
    </div>`}
    ${creating && html`<${CreateAgent} onClose=${() => setCreating(false)} />`}`;
}

/** The configured text engines, for a select. */
function useEngines() {
  return useResource(
    (signal) =>
      api("GET", "/api/v1/text-engines", { query: { limit: 200 }, signal }).then(
        (r) => /** @type {{name: string, kind: string, model: string}[]} */ (r.items),
      ),
    [],
  );
}

/** @param {{onClose: () => void}} p */
function CreateAgent({ onClose }) {
  const templates = useResource(
    (signal) => api("GET", "/api/v1/agents", { query: { is_template: true, limit: 200 }, signal }).then((r) => /** @type {Agent[]} */ (r.agents)),
    [],
  );
  const engines = useEngines();
  const form = useForm({ name: "", template_id: "", text_engine: "builtin", first_message: "" });
  const create = useCreate();
  return html`<${Dialog} title="Create an agent" onClose=${onClose}>
    <form
      novalidate
      onSubmit=${form.submit(async () => {
        /** @type {Record<string, unknown>} */
        const body = { name: form.values.name };
        if (form.values.template_id) body.template_id = Number(form.values.template_id);
        else body.text_engine = form.values.text_engine;
        if (form.values.first_message) body.first_message = form.values.first_message;
        const agent = await create("/api/v1/agents", body);
        onClose();
        navigate(`/agents/${agent.id}`);
      })}
    >
      <div class="dialog-body">
        <${TextField} form=${form} name="name" label="Name" required maxlength=${100} hint="People see it, e.g. Ava from Support." />
        <${SelectField}
          form=${form}
          name="template_id"
          label="Start from"
          hint="A template copies its prompt, tools, knowledge and voice."
          options=${[
            /** @type {[string, string]} */ (["", "A blank agent"]),
            ...(templates.data ?? []).map((t) => /** @type {[string, string]} */ ([String(t.id), `Template: ${t.name}`])),
          ]}
        />
        ${!form.values.template_id &&
        html`<${SelectField}
          form=${form}
          name="text_engine"
          label="Text engine"
          hint="builtin answers offline from the agent's knowledge; configure others in parley.toml."
          options=${(engines.data ?? [{ name: "builtin", model: "builtin" }]).map(
            (e) => /** @type {[string, string]} */ ([e.name, `${e.name} (${e.model})`]),
          )}
        />`}
        <${TextField}
          form=${form}
          name="first_message"
          label="First message (optional)"
          hint="What it says first on calls and in the webchat."
          maxlength=${2000}
        />
        <${FormError} form=${form} fields=${["name", "template_id", "text_engine", "first_message"]} />
      </div>
      <footer>
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary" disabled=${form.busy}>Create agent</button>
      </footer>
    </form>
  <//>`;
}

/** The moves the API allows from each status, as buttons. */
const MOVES = {
  active: [
    ["paused", "Pause"],
    ["archived", "Archive"],
  ],
  paused: [
    ["active", "Activate"],
    ["archived", "Archive"],
  ],
  archived: [["paused", "Restore"]],
};

/** @param {{id: string, view: "settings" | "playground" | "triggers" | "runs"}} p */
export function AgentPage({ id, view }) {
  const agent = useResource((signal) => api("GET", `/api/v1/agents/${encodeURIComponent(id)}`, { signal }), [id]);
  const [moveError, setMoveError] = useState("");
  // Saving reloads the agent, which remounts the form: the page keeps the news.
  const [saved, setSaved] = useState(false);
  /** @type {Agent | undefined} */
  const a = agent.data;
  useEffect(() => {
    if (a) document.title = `${a.name} · Agents · Parley`;
  }, [a?.name]);
  if (agent.error) {
    return html`<${NotHere} error=${agent.error} what="agent" back="/agents" backLabel="All agents" retry=${agent.reload} />`;
  }
  if (!a) return html`<${Skeleton} rows=${6} />`;
  const base = `/agents/${a.id}`;
  const tabs = /** @type {const} */ ([
    ["settings", base, "Settings"],
    ["playground", `${base}/playground`, "Playground"],
    ["triggers", `${base}/triggers`, "Triggers"],
    ["runs", `${base}/runs`, "Runs"],
  ]);
  return html`<nav class="breadcrumb" aria-label="Breadcrumb"><a href="/agents">Agents</a></nav>
    <${PageHeader}
      title=${a.name}
      actions=${MOVES[a.status].map(
        ([to, label]) => html`<button
          type="button"
          class=${to === "archived" ? "danger subtle" : ""}
          onClick=${async () => {
            setMoveError("");
            try {
              await api("PATCH", `/api/v1/agents/${a.id}`, { body: { status: to } });
              agent.reload();
            } catch (e) {
              setMoveError(e instanceof Error ? e.message : String(e));
            }
          }}
        >
          ${label}
        </button>`,
      )}
    >
      <${AgentStatus} status=${a.status} /> ${a.is_template && html`<span class="badge">Template</span>`}
      <span class="muted">${a.slug}</span>
    <//>
    ${moveError && html`<div class="notice error" role="alert"><p>${moveError}</p></div>`}
    ${a.status !== "archived" && !a.is_template && html`<div class="talk"><${TalkToAgent} agent=${a} /></div>`}
    <nav class="tabs" aria-label="Agent">
      ${tabs.map(([key, href, label]) => html`<a href=${href} aria-current=${view === key ? "page" : undefined}>${label}</a>`)}
    </nav>
    ${view === "settings" &&
    html`<${Settings}
      key=${a.updated_at}
      agent=${a}
      saved=${saved}
      onSaved=${() => {
        setSaved(true);
        agent.reload();
      }}
    />`}
    ${view === "playground" && html`<${Playground} agent=${a} />`}
    ${view === "triggers" && html`<${Triggers} agent=${a} onChanged=${agent.reload} />`}
    ${view === "runs" && html`<${AgentRuns} agent=${a} />`}`;
}

/** @param {unknown} v */
const text = (v) => (v === null || v === undefined ? "" : String(v));

/** The form's values from an agent. @param {Agent} a */
function valuesOf(a) {
  /** @type {HttpTool[]} */
  const http = /** @type {any[]} */ (a.tools.filter((t) => t.type === "http"));
  return {
    name: a.name,
    description: text(a.description),
    priority: text(a.priority),
    language: a.language,
    is_template: a.is_template,
    system_prompt: a.system_prompt,
    first_message: text(a.first_message),
    text_engine: a.text_engine,
    model: text(a.model),
    debounce_ms: text(a.debounce_ms),
    prompt_block_ids: a.prompt_block_ids,
    knowledge_collection_ids: a.knowledge_collection_ids,
    builtin: a.tools.filter((t) => t.type === "builtin").map((t) => t.name),
    http: http.map((t) => ({
      name: t.name,
      description: t.description,
      url: t.url,
      timeout_ms: text(t.timeout_ms),
      parameters: JSON.stringify(t.parameters, null, 2),
      header_names: t.header_names,
      headers: "",
    })),
    "handoff.keywords": a.handoff.keywords.join(", "),
    "handoff.max_turns": text(a.handoff.max_turns),
    "handoff.target_user_id": text(a.handoff.target_user_id),
    "voice.tts_engine": a.voice?.tts_engine ?? "",
    "voice.voice_id": text(a.voice?.voice_id),
    "voice.speed": text(a.voice?.speed),
    "transcriber.stt_engine": a.transcriber?.stt_engine ?? "",
    "transcriber.language": text(a.transcriber?.language),
    interruption_threshold_ms: text(a.interruption_threshold_ms),
    end_of_turn_ms: text(a.end_of_turn_ms),
    first_message_mode: a.first_message_mode,
    first_message_wait_s: text(a.first_message_wait_s),
    turn_detection: a.turn_detection,
    end_of_turn_min_ms: text(a.end_of_turn_min_ms),
    end_of_turn_max_ms: text(a.end_of_turn_max_ms),
    silence_reprompt_s: text(a.silence_reprompt_s),
    silence_hangup_s: text(a.silence_hangup_s),
    "voicemail.action": a.voicemail?.action ?? "",
    "voicemail.message": a.voicemail?.message ?? "",
    "voicemail.beep_wait_s": text(a.voicemail?.beep_wait_s ?? 30),
    "voicemail.on_screening": a.voicemail?.on_screening ?? "respond",
    "analysis.summary": a.analysis.summary,
    "analysis.schema": a.analysis.schema ? JSON.stringify(a.analysis.schema, null, 2) : "",
    "analysis.success_criteria": a.analysis.success_criteria ?? "",
    metadata: JSON.stringify(a.metadata, null, 2),
  };
}

/**
 * What a text box means to the API: a number when it reads as one (the
 * API's 422 says when it does not), null when emptied.
 * @param {string} v
 */
function numberOrNull(v) {
  const t = v.trim();
  if (!t) return null;
  const n = Number(t);
  return Number.isFinite(n) ? n : t;
}

/**
 * Problems with a JSON Schema for a tool's arguments, found as it is
 * typed; the API checks it fully when it is saved.
 * @param {string} source
 * @returns {string}
 */
export function schemaProblem(source) {
  /** @type {any} */
  let schema;
  try {
    schema = JSON.parse(source);
  } catch (e) {
    return `Not JSON: ${e instanceof Error ? e.message : e}`;
  }
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) return "A schema is a JSON object.";
  if (schema.type !== "object") return 'The arguments are an object: the schema needs "type": "object".';
  if (schema.properties !== undefined) {
    if (typeof schema.properties !== "object" || schema.properties === null || Array.isArray(schema.properties)) {
      return '"properties" is an object of schemas.';
    }
    for (const [name, p] of Object.entries(schema.properties)) {
      if (typeof p !== "object" || p === null || Array.isArray(p)) return `The property "${name}" needs a schema object.`;
    }
  }
  if (schema.required !== undefined) {
    if (!Array.isArray(schema.required) || schema.required.some((/** @type {unknown} */ r) => typeof r !== "string")) {
      return '"required" is a list of property names.';
    }
    const missing = schema.required.find((/** @type {string} */ r) => !(schema.properties ?? {})[r]);
    if (missing) return `"${missing}" is required but not among the properties.`;
  }
  return "";
}

/**
 * The PATCH body: only the fields that changed, shaped as the API wants.
 * @param {Agent} a
 * @param {ReturnType<typeof valuesOf>} v
 */
function changes(a, v) {
  const before = valuesOf(a);
  /** @type {Record<string, unknown>} */
  const body = {};
  const same = (/** @type {keyof typeof before} */ k) => JSON.stringify(before[k]) === JSON.stringify(v[k]);
  if (!same("name")) body.name = v.name;
  if (!same("description")) body.description = v.description || null;
  if (!same("priority")) body.priority = numberOrNull(v.priority);
  if (!same("language")) body.language = v.language;
  if (!same("is_template")) body.is_template = v.is_template;
  if (!same("system_prompt")) body.system_prompt = v.system_prompt;
  if (!same("first_message")) body.first_message = v.first_message || null;
  if (!same("text_engine")) body.text_engine = v.text_engine;
  if (!same("model")) body.model = v.model.trim() || null;
  if (!same("debounce_ms")) body.debounce_ms = numberOrNull(v.debounce_ms);
  if (!same("prompt_block_ids")) body.prompt_block_ids = v.prompt_block_ids;
  if (!same("knowledge_collection_ids")) body.knowledge_collection_ids = v.knowledge_collection_ids;
  if (!same("builtin") || !same("http")) {
    body.tools = [
      ...v.builtin.map((name) => ({ type: "builtin", name })),
      ...v.http.map((t) => {
        /** @type {Record<string, unknown>} */
        const tool = { type: "http", name: t.name, description: t.description, url: t.url };
        let parameters;
        try {
          parameters = JSON.parse(t.parameters);
        } catch {
          parameters = t.parameters;
        }
        tool.parameters = parameters;
        const timeout = numberOrNull(t.timeout_ms);
        if (timeout !== null) tool.timeout_ms = timeout;
        // Header values are write-only: without new ones the tool keeps its own.
        if (t.headers.trim()) tool.headers = headerMap(t.headers);
        return tool;
      }),
    ];
  }
  if (!same("handoff.keywords") || !same("handoff.max_turns") || !same("handoff.target_user_id")) {
    body.handoff = {
      keywords: v["handoff.keywords"]
        .split(",")
        .map((k) => k.trim())
        .filter(Boolean),
      max_turns: numberOrNull(v["handoff.max_turns"]),
      target_user_id: numberOrNull(v["handoff.target_user_id"]),
    };
  }
  if (!same("voice.tts_engine") || !same("voice.voice_id") || !same("voice.speed")) {
    body.voice = v["voice.tts_engine"]
      ? { tts_engine: v["voice.tts_engine"], voice_id: v["voice.voice_id"].trim() || null, speed: numberOrNull(v["voice.speed"]) }
      : null;
  }
  if (!same("transcriber.stt_engine") || !same("transcriber.language")) {
    body.transcriber = v["transcriber.stt_engine"]
      ? { stt_engine: v["transcriber.stt_engine"], language: v["transcriber.language"].trim() || null }
      : null;
  }
  const numbers = /** @type {const} */ ([
    "interruption_threshold_ms",
    "end_of_turn_ms",
    "end_of_turn_min_ms",
    "end_of_turn_max_ms",
    "first_message_wait_s",
  ]);
  for (const k of numbers) {
    if (!same(k)) body[k] = numberOrNull(v[k]);
  }
  if (!same("first_message_mode")) body.first_message_mode = v.first_message_mode;
  if (!same("turn_detection")) body.turn_detection = v.turn_detection;
  for (const k of /** @type {const} */ (["silence_reprompt_s", "silence_hangup_s"])) {
    if (!same(k)) body[k] = numberOrNull(v[k]);
  }
  const voicemail = /** @type {const} */ (["voicemail.action", "voicemail.message", "voicemail.beep_wait_s", "voicemail.on_screening"]);
  if (!voicemail.every(same)) {
    const action = v["voicemail.action"];
    body.voicemail = action
      ? {
          action,
          message: action === "leave_message" ? v["voicemail.message"].trim() || null : null,
          beep_wait_s: numberOrNull(v["voicemail.beep_wait_s"]) ?? 30,
          on_screening: v["voicemail.on_screening"],
        }
      : null;
  }
  const analysis = /** @type {const} */ (["analysis.summary", "analysis.schema", "analysis.success_criteria"]);
  if (!analysis.every(same)) {
    const schema = v["analysis.schema"].trim();
    /** @type {unknown} */
    let parsed = null;
    try {
      parsed = schema ? JSON.parse(schema) : null;
    } catch {
      parsed = schema; // the API says what is wrong, next to the field
    }
    body.analysis = {
      summary: v["analysis.summary"],
      schema: parsed,
      success_criteria: v["analysis.success_criteria"].trim() || null,
    };
  }
  if (!same("metadata")) {
    try {
      body.metadata = JSON.parse(v.metadata || "{}");
    } catch {
      body.metadata = v.metadata;
    }
  }
  return body;
}

/**
 * "Name: value" lines as a header object.
 * @param {string} lines
 */
function headerMap(lines) {
  /** @type {Record<string, string>} */
  const out = {};
  for (const line of lines.split("\n")) {
    const at = line.indexOf(":");
    if (at > 0) out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return out;
}

/**
 * Unsaved settings, per person and agent version, kept in memory while the
 * tab lives: a look at the Playground or Runs and back does not lose them
 * (nothing is written to storage; a reload starts from the saved agent).
 * Keyed by the person too, so whoever signs in next in this tab never
 * sees another's draft.
 * @type {Map<string, any>}
 */
const drafts = new Map();

/** @param {{agent: Agent, saved: boolean, onSaved: () => void}} p */
function Settings({ agent, saved, onSaved }) {
  const draftKey = `${current().me?.user.id}:${agent.id}@${agent.updated_at}`;
  const [restored] = useState(() => drafts.has(draftKey));
  const form = useForm(drafts.get(draftKey) ?? valuesOf(agent));
  const engines = useEngines();
  const speech = useResource(
    (signal) =>
      api("GET", "/api/v1/speech-engines", { query: { limit: 200 }, signal }).then(
        (r) => /** @type {{name: string, direction: string, detail?: string | null}[]} */ (r.items),
      ),
    [],
  );
  const blocks = useResource(
    (signal) =>
      api("GET", "/api/v1/prompt-blocks", { query: { limit: 200 }, signal }).then(
        (r) => /** @type {{id: number, name: string, kind: string, content: string}[]} */ (r.items),
      ),
    [],
  );
  const collections = useResource(
    (signal) =>
      api("GET", "/api/v1/knowledge-collections", { query: { limit: 200 }, signal }).then(
        (r) => /** @type {{id: number, name: string}[]} */ (r.items),
      ),
    [],
  );
  const members = useResource(
    (signal) =>
      api("GET", "/api/v1/members", { query: { limit: 200 }, signal }).then(
        (r) => /** @type {{user_id: number, email: string}[]} */ (r.items),
      ),
    [],
  );
  const v = form.values;
  const body = changes(agent, /** @type {any} */ (v));
  const dirty = Object.keys(body).length > 0;
  useEffect(() => {
    if (dirty) drafts.set(draftKey, v);
    else drafts.delete(draftKey);
  }, [v, dirty]);
  const schemaErrors = v.http.map((/** @type {any} */ t) => schemaProblem(t.parameters));
  const tts = (speech.data ?? []).filter((e) => e.direction === "tts");
  const stt = (speech.data ?? []).filter((e) => e.direction === "stt");
  /** @param {string} name @param {unknown} value */
  const setHttp = (/** @type {number} */ i, name, value) =>
    form.set(
      "http",
      v.http.map((/** @type {any} */ t, /** @type {number} */ j) => (j === i ? { ...t, [name]: value } : t)),
    );

  return html`<form
    class="settings"
    novalidate
    onSubmit=${form.submit(async () => {
      if (schemaErrors.some(Boolean)) {
        throw new ApiError(
          422,
          "Some fields need attention",
          schemaErrors.flatMap((/** @type {string} */ msg, /** @type {number} */ i) =>
            msg ? [{ loc: ["body", "tools", v.builtin.length + i, "parameters"], msg, type: "value_error.schema" }] : [],
          ),
        );
      }
      await api("PATCH", `/api/v1/agents/${agent.id}`, { body });
      onSaved();
    })}
  >
    ${restored &&
    dirty &&
    html`<div class="notice" role="status"><p>Your unsaved changes are still here: save or discard them at the end of the form.</p></div>`}
    <fieldset>
      <legend>Basics</legend>
      <${TextField} form=${form} name="name" label="Name" required maxlength=${100} />
      <${TextField} form=${form} name="description" label="Description (optional)" maxlength=${2000} />
      <div class="row">
        <${TextField} form=${form} name="language" label="Language" hint="A BCP 47 tag, e.g. en-US." />
        <${TextField} form=${form} name="priority" label="Priority" type="number" hint="0–1000: the higher answers first when triggers tie." />
      </div>
      <${CheckField} form=${form} name="is_template" label="This agent is a template" hint="Templates never answer; new agents can start from them." />
    </fieldset>

    <fieldset>
      <legend>Prompt</legend>
      <${BlockPicker} form=${form} blocks=${blocks.data ?? []} />
      <${TextAreaField}
        form=${form}
        name="system_prompt"
        label="System prompt"
        rows=${8}
        hint="Comes after the prompt blocks. {{variables}} are filled from the call or conversation."
      />
      <${TextField} form=${form} name="first_message" label="First message (optional)" maxlength=${2000} />
      <div class="row">
        <${SelectField}
          form=${form}
          name="first_message_mode"
          label="On calls, greet"
          options=${[
            /** @type {[string, string]} */ (["speak_first", "At once; the callee cannot cut it short"]),
            /** @type {[string, string]} */ (["wait_for_callee", "After the callee's hello (or a silence)"]),
            /** @type {[string, string]} */ (["interruptible", "At once; the callee can interrupt"]),
          ]}
        />
        <${TextField} form=${form} name="first_message_wait_s" label="Silence before greeting anyway (s)" type="number" hint="When waiting for the callee: 1–30." />
      </div>
      <${PromptPreview} agent=${agent} dirty=${dirty} />
    </fieldset>

    <fieldset>
      <legend>Model</legend>
      <div class="row">
        <${SelectField}
          form=${form}
          name="text_engine"
          label="Text engine"
          options=${(engines.data ?? [{ name: agent.text_engine, model: "" }]).map(
            (e) => /** @type {[string, string]} */ ([e.name, e.model ? `${e.name} (${e.model})` : e.name]),
          )}
        />
        <${TextField} form=${form} name="model" label="Model (optional)" hint="Overrides the engine's model." maxlength=${200} />
        <${TextField} form=${form} name="debounce_ms" label="Wait before answering (ms)" type="number" hint="Empty for the server's default." />
      </div>
    </fieldset>

    <fieldset>
      <legend>Tools</legend>
      <div class="checks">
        ${BUILTIN_TOOLS.map(
          ([name, label, hint]) => html`<label class="check">
            <input
              type="checkbox"
              checked=${v.builtin.includes(name)}
              onChange=${(/** @type {any} */ e) =>
                form.set(
                  "builtin",
                  e.currentTarget.checked ? [...v.builtin, name] : v.builtin.filter((/** @type {string} */ n) => n !== name),
                )}
            />
            <span>${label}<span class="hint">${hint}</span></span>
          </label>`,
        )}
      </div>
      ${v.http.map(
        (/** @type {any} */ t, /** @type {number} */ i) => {
          const at = `tools.${v.builtin.length + i}`;
          const err = (/** @type {string} */ f) => form.errors[`${at}.${f}`];
          return html`<fieldset class="http-tool">
            <legend>HTTP tool ${t.name || i + 1}</legend>
            <div class="row">
              <${Field} label="Name" error=${err("name")} hint="Letters, digits, _ or -.">
                ${(/** @type {any} */ a) => html`<input ...${a} value=${t.name} onInput=${(/** @type {any} */ e) => setHttp(i, "name", e.currentTarget.value)} />`}
              <//>
              <${Field} label="Timeout (ms)" error=${err("timeout_ms")} hint="100–30,000.">
                ${(/** @type {any} */ a) => html`<input ...${a} type="number" value=${t.timeout_ms} onInput=${(/** @type {any} */ e) => setHttp(i, "timeout_ms", e.currentTarget.value)} />`}
              <//>
            </div>
            <${Field} label="URL" error=${err("url")} hint="Parley POSTs the arguments here, signed with the agent's tool secret.">
              ${(/** @type {any} */ a) => html`<input ...${a} type="url" value=${t.url} onInput=${(/** @type {any} */ e) => setHttp(i, "url", e.currentTarget.value)} />`}
            <//>
            <${Field} label="Description" error=${err("description")} hint="What it does, for the model.">
              ${(/** @type {any} */ a) => html`<input ...${a} value=${t.description} onInput=${(/** @type {any} */ e) => setHttp(i, "description", e.currentTarget.value)} />`}
            <//>
            <${Field}
              label="Arguments (JSON Schema)"
              error=${err("parameters") || schemaErrors[i] || undefined}
              hint="The model's arguments are checked against it before each call."
            >
              ${(/** @type {any} */ a) => html`<textarea
                ...${a}
                class="code"
                rows="8"
                spellcheck="false"
                value=${t.parameters}
                onInput=${(/** @type {any} */ e) => setHttp(i, "parameters", e.currentTarget.value)}
              ></textarea>`}
            <//>
            <${Field}
              label="Headers (optional)"
              error=${err("headers")}
              hint=${t.header_names?.length
                ? `Set: ${t.header_names.join(", ")}. Values are never shown; type "Name: value" lines to replace them.`
                : 'One "Name: value" per line, e.g. an API key. Never shown again.'}
            >
              ${(/** @type {any} */ a) => html`<textarea
                ...${a}
                class="code"
                rows="2"
                spellcheck="false"
                autocomplete="off"
                value=${t.headers}
                onInput=${(/** @type {any} */ e) => setHttp(i, "headers", e.currentTarget.value)}
              ></textarea>`}
            <//>
            <button
              type="button"
              class="danger subtle"
              onClick=${() =>
                form.set(
                  "http",
                  v.http.filter((/** @type {any} */ _t, /** @type {number} */ j) => j !== i),
                )}
            >
              Remove ${t.name || "this tool"}
            </button>
          </fieldset>`;
        },
      )}
      <button
        type="button"
        onClick=${() =>
          form.set("http", [
            ...v.http,
            {
              name: "",
              description: "",
              url: "https://",
              timeout_ms: "",
              parameters: JSON.stringify({ type: "object", properties: {}, required: [] }, null, 2),
              header_names: [],
              headers: "",
            },
          ])}
      >
        Add an HTTP tool
      </button>
    </fieldset>

    <fieldset>
      <legend>Knowledge</legend>
      ${collections.data && !collections.data.length
        ? html`<p class="muted">No knowledge collections yet. Create one to let the agent answer from your documents.</p>`
        : html`<div class="checks">
            ${(collections.data ?? []).map(
              (c) => html`<label class="check">
                <input
                  type="checkbox"
                  checked=${v.knowledge_collection_ids.includes(c.id)}
                  onChange=${(/** @type {any} */ e) =>
                    form.set(
                      "knowledge_collection_ids",
                      e.currentTarget.checked
                        ? [...v.knowledge_collection_ids, c.id]
                        : v.knowledge_collection_ids.filter((/** @type {number} */ k) => k !== c.id),
                    )}
                />
                <span>${c.name}</span>
              </label>`,
            )}
          </div>`}
      ${form.errors.knowledge_collection_ids && html`<p class="error">${form.errors.knowledge_collection_ids}</p>`}
    </fieldset>

    <fieldset>
      <legend>Handoff to people</legend>
      <${TextField}
        form=${form}
        name="handoff.keywords"
        label="Keywords"
        hint="Comma-separated words in a contact's message that hand the conversation to a person, e.g. agent, human."
      />
      <div class="row">
        <${TextField} form=${form} name="handoff.max_turns" label="Hand off after this many answers" type="number" hint="Empty for never." />
        <${SelectField}
          form=${form}
          name="handoff.target_user_id"
          label="Offer handoffs to"
          options=${[
            /** @type {[string, string]} */ (["", "Any member"]),
            ...(members.data ?? []).map((m) => /** @type {[string, string]} */ ([String(m.user_id), m.email])),
          ]}
        />
      </div>
    </fieldset>

    <fieldset>
      <legend>Voice on calls</legend>
      <div class="row">
        <${SelectField}
          form=${form}
          name="voice.tts_engine"
          label="Voice engine"
          options=${[
            /** @type {[string, string]} */ (["", "The server's default"]),
            ...tts.map((e) => /** @type {[string, string]} */ ([e.name, e.detail ? `${e.name} (${e.detail})` : e.name])),
          ]}
        />
        <${TextField} form=${form} name="voice.voice_id" label="Voice (optional)" hint="e.g. en-us, en_US-joe-medium." />
        <${TextField} form=${form} name="voice.speed" label="Speed" type="number" hint="0.25–4; empty for 1." />
      </div>
      <div class="row">
        <${SelectField}
          form=${form}
          name="transcriber.stt_engine"
          label="Transcriber"
          options=${[
            /** @type {[string, string]} */ (["", "The server's default"]),
            ...stt.map((e) => /** @type {[string, string]} */ ([e.name, e.detail ? `${e.name} (${e.detail})` : e.name])),
          ]}
        />
        <${TextField} form=${form} name="transcriber.language" label="Listens for (optional)" hint="A BCP 47 tag; the agent's language otherwise." />
      </div>
      <div class="row">
        <${SelectField}
          form=${form}
          name="turn_detection"
          label="Turn detection"
          options=${[
            /** @type {[string, string]} */ (["smart", "Smart: listens to how the caller speaks"]),
            /** @type {[string, string]} */ (["silence", "Silence: a fixed pause"]),
          ]}
        />
        <${TextField} form=${form} name="end_of_turn_min_ms" label="Smart: shortest pause (ms)" type="number" hint="Ends the turn when the caller has clearly finished: 100–1,000." />
        <${TextField} form=${form} name="end_of_turn_max_ms" label="Smart: longest wait (ms)" type="number" hint="Ends the turn whatever the model says: 300–5,000." />
        <${TextField} form=${form} name="end_of_turn_ms" label="Silence rule: end of turn (ms)" type="number" hint="Silence that ends the caller's turn: 200–3,000." />
      </div>
      <div class="row">
        <${TextField} form=${form} name="interruption_threshold_ms" label="Interruption (ms)" type="number" hint="Speech over the agent that stops it: 0–5,000." />
        <${TextField} form=${form} name="silence_reprompt_s" label="Prompt again after (s)" type="number" hint="Empty for never." />
        <${TextField} form=${form} name="silence_hangup_s" label="Hang up after silence (s)" type="number" hint="Empty for never." />
      </div>
      <div class="row">
        <${SelectField}
          form=${form}
          name="voicemail.action"
          label="When a machine answers"
          hint="Outbound calls: the greeting waits until Parley knows a person picked up."
          options=${[
            /** @type {[string, string]} */ (["", "Don't check (greet at once)"]),
            /** @type {[string, string]} */ (["hang_up", "Hang up"]),
            /** @type {[string, string]} */ (["leave_message", "Leave a message after the beep"]),
          ]}
        />
        <${SelectField}
          form=${form}
          name="voicemail.on_screening"
          label="When a call screener asks who is calling"
          options=${[
            /** @type {[string, string]} */ (["respond", "Say the greeting and go on"]),
            /** @type {[string, string]} */ (["hang_up", "Hang up"]),
          ]}
        />
        <${TextField} form=${form} name="voicemail.beep_wait_s" label="Wait for the beep (s)" type="number" hint="1–60, from the answer." />
      </div>
      ${v["voicemail.action"] === "leave_message" &&
      html`<${TextAreaField}
        form=${form}
        name="voicemail.message"
        label="Voicemail message"
        rows=${3}
        maxlength=${1000}
        hint="Said once the beep has passed; up to 1,000 characters."
      />`}
    </fieldset>

    <fieldset>
      <legend>After each call</legend>
      <p class="hint">The agent's text engine reads the transcript of each answered call (a run, billed like any other).</p>
      <${CheckField} form=${form} name="analysis.summary" label="Write a summary" />
      <${TextAreaField}
        form=${form}
        name="analysis.schema"
        label="Facts to extract (JSON Schema, optional)"
        rows=${6}
        class="code"
        spellcheck="false"
        hint='An object schema, e.g. {"type": "object", "properties": {"order_id": {"type": "string"}}}. An answer that does not fit is reported, not stored.'
      />
      <${TextAreaField}
        form=${form}
        name="analysis.success_criteria"
        label="Success criteria (optional)"
        rows=${2}
        maxlength=${2000}
        hint="What makes a call a success, e.g. the caller booked a table."
      />
    </fieldset>

    <fieldset>
      <legend>Metadata</legend>
      <${Field} label="Metadata (JSON object)" error=${form.errors.metadata} hint="Yours to keep: Parley stores it and returns it.">
        ${(/** @type {any} */ a) => html`<textarea
          ...${a}
          class="code"
          rows="3"
          spellcheck="false"
          value=${v.metadata}
          onInput=${(/** @type {any} */ e) => form.set("metadata", e.currentTarget.value)}
        ></textarea>`}
      <//>
    </fieldset>

    <${FormError} form=${form} fields=${Object.keys(v).concat(v.http.flatMap((/** @type {any} */ _t, /** @type {number} */ i) =>
      ["name", "url", "description", "parameters", "timeout_ms", "headers"].map((f) => `tools.${v.builtin.length + i}.${f}`),
    ))} />
    <div class="form-actions">
      <button type="submit" class="primary" disabled=${form.busy || !dirty}>Save changes</button>
      <button type="button" disabled=${!dirty} onClick=${() => form.reset(valuesOf(agent))}>Discard</button>
      ${saved && !dirty && html`<span role="status" class="muted">Saved.</span>`}
      ${dirty && html`<span class="muted">Unsaved changes.</span>`}
    </div>
  </form>`;
}

/**
 * The agent's prompt blocks, in order: add, move, remove.
 * @param {{form: import("../components/ui.js").Form, blocks: {id: number, name: string, kind: string, content: string}[]}} p
 */
function BlockPicker({ form, blocks }) {
  /** @type {number[]} */
  const ids = form.values.prompt_block_ids;
  const byId = new Map(blocks.map((b) => [b.id, b]));
  const unused = blocks.filter((b) => !ids.includes(b.id));
  const move = (/** @type {number} */ i, /** @type {number} */ by) => {
    const next = [...ids];
    [next[i], next[i + by]] = [next[i + by], next[i]];
    form.set("prompt_block_ids", next);
  };
  return html`<div class="blocks">
    <h3 id="blocks-h">Prompt blocks</h3>
    ${!ids.length && html`<p class="muted">No blocks: the system prompt stands alone.</p>`}
    ${ids.length > 0 &&
    html`<ol aria-labelledby="blocks-h">
      ${ids.map((id, i) => {
        const b = byId.get(id);
        const name = b?.name ?? `Block ${id}`;
        return html`<li key=${id}>
          <details>
            <summary>${name} ${b && html`<span class="muted">(${b.kind})</span>`}</summary>
            <pre class="excerpt">${b?.content ?? ""}</pre>
          </details>
          <span class="row-actions">
            <button type="button" class="subtle" disabled=${i === 0} onClick=${() => move(i, -1)}>
              Up<span class="visually-hidden">: ${name}</span>
            </button>
            <button type="button" class="subtle" disabled=${i === ids.length - 1} onClick=${() => move(i, 1)}>
              Down<span class="visually-hidden">: ${name}</span>
            </button>
            <button
              type="button"
              class="danger subtle"
              onClick=${() => form.set("prompt_block_ids", ids.filter((x) => x !== id))}
            >
              Remove<span class="visually-hidden">: ${name}</span>
            </button>
          </span>
        </li>`;
      })}
    </ol>`}
    ${form.errors.prompt_block_ids && html`<p class="error">${form.errors.prompt_block_ids}</p>`}
    ${unused.length > 0 &&
    html`<label class="inline"
      >Add a block
      <select
        value=""
        onChange=${(/** @type {any} */ e) => {
          const id = Number(e.currentTarget.value);
          if (id) form.set("prompt_block_ids", [...ids, id]);
          e.currentTarget.value = "";
        }}
      >
        <option value="">Choose…</option>
        ${unused.map((b) => html`<option value=${String(b.id)}>${b.name}</option>`)}
      </select>
    </label>`}
  </div>`;
}

/**
 * The saved agent's system prompt as a run renders it.
 * @param {{agent: Agent, dirty: boolean}} p
 */
function PromptPreview({ agent, dirty }) {
  const [vars, setVars] = useState("{}");
  const [preview, setPreview] = useState(/** @type {{prompt: string} | null} */ (null));
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  return html`<div class="preview">
    <${Field} label="Variables for the preview (JSON)" error=${error || undefined} hint='Values for {{variables}}, e.g. {"customer": "Ana"}.'>
      ${(/** @type {any} */ a) => html`<input ...${a} class="code" value=${vars} onInput=${(/** @type {any} */ e) => setVars(e.currentTarget.value)} />`}
    <//>
    <button
      type="button"
      disabled=${busy}
      onClick=${async () => {
        setError("");
        setBusy(true);
        try {
          let variables;
          try {
            variables = JSON.parse(vars || "{}");
          } catch {
            throw new Error("The variables are not JSON.");
          }
          setPreview(await api("POST", `/api/v1/agents/${agent.id}/prompt/preview`, { body: { variables } }));
        } catch (e) {
          const f = faultsOf(e);
          setError(Object.entries(f).map(([k, m]) => (k ? `${k}: ${m}` : m)).join("; "));
        } finally {
          setBusy(false);
        }
      }}
    >
      Preview the prompt${dirty ? " (as saved)" : ""}
    </button>
    ${preview &&
    html`<section aria-label="Rendered prompt">
      <pre class="excerpt prompt">${preview.prompt || "(empty)"}</pre>
    </section>`}
  </div>`;
}

/**
 * @typedef {object} Turn
 * @property {"user" | "assistant"} role
 * @property {string} content
 * @property {boolean} [streaming]
 * @property {{name: string, arguments: unknown, result?: unknown, error?: string | null, ms: number}[]} [tool_calls]
 * @property {{source: string, text: string, score: number}[]} [passages]
 * @property {string | null} [handoff]
 * @property {boolean} [end_conversation]
 * @property {number} [run_id]
 * @property {string} [error]
 */

/** @param {{agent: Agent}} p */
function Playground({ agent }) {
  const [turns, setTurns] = useState(/** @type {Turn[]} */ ([]));
  const [draft, setDraft] = useState("");
  const [busy, setBusy] = useState(false);
  const control = useRef(/** @type {AbortController | null} */ (null));
  const log = useRef(/** @type {HTMLOListElement | null} */ (null));
  useEffect(() => () => control.current?.abort(), []);
  useEffect(() => {
    log.current?.lastElementChild?.scrollIntoView({ block: "nearest" });
  }, [turns]);

  /** @param {Event} e */
  async function send(e) {
    e.preventDefault();
    const content = draft.trim();
    if (!content || busy) return;
    const history = [...turns.filter((t) => !t.error), { role: /** @type {const} */ ("user"), content }];
    const asked = history.map((t) => ({ role: t.role, content: t.content || "…" }));
    setTurns([...history, { role: "assistant", content: "", streaming: true }]);
    setDraft("");
    setBusy(true);
    control.current = new AbortController();
    /** @param {(t: Turn) => Turn} f */
    const update = (f) => setTurns((ts) => [...ts.slice(0, -1), f(ts[ts.length - 1])]);
    try {
      await stream(
        `/api/v1/agents/${agent.id}/chat`,
        { messages: asked },
        (event, data) => {
          if (event === "delta") update((t) => ({ ...t, content: t.content + data.text }));
          else if (event === "done") update(() => ({ role: "assistant", ...data, content: data.message }));
          else if (event === "error") update((t) => ({ ...t, streaming: false, error: data.detail }));
        },
        control.current.signal,
      );
    } catch (err) {
      update((t) => ({ ...t, streaming: false, error: err instanceof Error ? err.message : String(err) }));
    } finally {
      setBusy(false);
    }
  }

  return html`<section class="playground" aria-labelledby="playground-h">
    <h2 id="playground-h" class="visually-hidden">Playground</h2>
    <p class="muted">
      Talk to ${agent.name} as a contact would. It answers with its real prompt, knowledge, tools and engine, but
      nothing is sent to anyone: actions are only described. Each answer is recorded as a run.
    </p>
    <ol class="chat" ref=${log} aria-live="polite" aria-label="Conversation with the agent">
      ${!turns.length && html`<li class="muted empty-chat">Say hello to start.</li>`}
      ${turns.map(
        (t, i) => html`<li key=${i} class=${`bubble ${t.role}`} aria-busy=${t.streaming ? "true" : undefined}>
          <span class="who">${t.role === "user" ? "You" : agent.name}</span>
          <p class="said">${t.content || (t.streaming ? "…" : "")}</p>
          ${t.error && html`<p class="error" role="alert">${t.error}</p>`}
          ${t.handoff && html`<p class="notice">Would hand off to a person: ${t.handoff}</p>`}
          ${t.end_conversation && html`<p class="notice">Would end the conversation.</p>`}
          ${t.tool_calls?.length
            ? html`<details>
                <summary>${t.tool_calls.length} tool call${t.tool_calls.length > 1 ? "s" : ""}</summary>
                ${t.tool_calls.map(
                  (c) => html`<div class="tool-call">
                    <strong>${c.name}</strong> <span class="muted">${c.ms} ms</span>
                    <pre class="excerpt">${JSON.stringify(c.arguments, null, 2)}</pre>
                    ${c.error ? html`<p class="error">${c.error}</p>` : html`<pre class="excerpt">${JSON.stringify(c.result ?? null, null, 2)}</pre>`}
                  </div>`,
                )}
              </details>`
            : ""}
          ${t.passages?.length
            ? html`<details>
                <summary>${t.passages.length} passage${t.passages.length > 1 ? "s" : ""} from knowledge</summary>
                ${t.passages.map(
                  (p) => html`<div class="passage">
                    <strong>${p.source}</strong> <span class="muted">score ${p.score.toFixed(2)}</span>
                    <pre class="excerpt">${p.text}</pre>
                  </div>`,
                )}
              </details>`
            : ""}
          ${t.run_id && html`<span class="muted">Run #${t.run_id}</span>`}
        </li>`,
      )}
    </ol>
    <form class="composer" onSubmit=${send}>
      <label for="playground-message" class="visually-hidden">Message to ${agent.name}</label>
      <textarea
        id="playground-message"
        rows="2"
        placeholder="Write as a contact would…"
        value=${draft}
        maxlength="10000"
        onInput=${(/** @type {any} */ e) => setDraft(e.currentTarget.value)}
        onKeyDown=${(/** @type {KeyboardEvent} */ e) => {
          if (e.key === "Enter" && !e.shiftKey) send(e);
        }}
      ></textarea>
      <div class="composer-actions">
        <button type="submit" class="primary" disabled=${busy || !draft.trim()}>Send</button>
        <button
          type="button"
          disabled=${!turns.length || busy}
          onClick=${() => {
            setTurns([]);
          }}
        >
          Start over
        </button>
      </div>
    </form>
  </section>`;
}

/** @param {{agent: Agent}} p */
function AgentRuns({ agent }) {
  const { query } = useLocation();
  const status = query.get("status") ?? "";
  const runs = useResource(
    (signal) => api("GET", "/api/v1/agent-runs", { query: { agent_id: agent.id, status, limit: 50 }, signal }),
    [agent.id, status],
  );
  const items = runs.data?.items ?? [];
  return html`<form class="filters" role="search" aria-label="Filter runs" onSubmit=${(/** @type {Event} */ e) => e.preventDefault()}>
      <label
        >Status
        <select value=${status} onChange=${(/** @type {any} */ e) => setQuery({ status: e.currentTarget.value })}>
          <option value="">Any</option>
          ${["queued", "running", "completed", "failed", "canceled"].map((s) => html`<option value=${s}>${statusLabel(s)}</option>`)}
        </select>
      </label>
    </form>
    ${runs.loading && !runs.data && !runs.error && html`<${Skeleton} />`}
    ${runs.error && html`<${LoadError} error=${runs.error} retry=${runs.reload} />`}
    ${runs.data &&
    !items.length &&
    html`<${EmptyState} title="No runs yet">Each answer the agent gives is a run. Try it in the playground.<//>`}
    ${items.length > 0 && html`<${Runs} runs=${items} caption=${`Runs of ${agent.name}, newest first`} />`}`;
}

/**
 * @typedef {{id: number, event: string, channel: string, kind?: string | null, pattern?: string | null,
 *   pattern_type: string, enabled: boolean}} Trigger
 */

const CHANNELS = ["*", "api", "webchat", "email", "sms", "whatsapp", "telegram", "voice"];

/**
 * What routes inbound messages and calls to the agent: add, pause, remove.
 * @param {{agent: Agent, onChanged: () => void}} p
 */
function Triggers({ agent, onChanged }) {
  const path = `/api/v1/agents/${agent.id}/triggers`;
  const list = useResource((signal) => api("GET", path, { query: { limit: 200 }, signal }), [agent.id]);
  const form = useForm({ event: "message.received", channel: "*", pattern: "", pattern_type: "keyword" });
  const [error, setError] = useState("");
  /** @type {Trigger[]} */
  const items = list.data?.items ?? [];
  const changed = () => {
    list.reload();
    onChanged();
  };
  /** @param {() => Promise<unknown>} action */
  const act = async (action) => {
    setError("");
    try {
      await action();
      changed();
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    }
  };
  return html`<p class="muted">
      A conversation without an agent goes to the first active agent (highest priority first) with a trigger that
      matches: its event, its channel or any, and its keyword or regular expression if it has one.
    </p>
    ${list.error && html`<${LoadError} error=${list.error} retry=${list.reload} />`}
    ${error && html`<div class="notice error" role="alert"><p>${error}</p></div>`}
    ${list.data && !items.length && html`<p class="muted">No triggers: this agent answers only conversations given to it.</p>`}
    ${items.length > 0 &&
    html`<div class="table-wrap">
      <table>
        <caption class="visually-hidden">Triggers of ${agent.name}</caption>
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">Channel</th>
            <th scope="col">Matching</th>
            <th scope="col">Status</th>
            <th scope="col"><span class="visually-hidden">Actions</span></th>
          </tr>
        </thead>
        <tbody>
          ${items.map(
            (t) => html`<tr key=${t.id}>
              <th scope="row">${t.event === "call.inbound" ? "A call comes in" : "A message comes in"}</th>
              <td>${t.channel === "*" ? "Any channel" : statusLabel(t.channel)}</td>
              <td>${t.pattern ? html`<code>${t.pattern}</code> <span class="muted">(${t.pattern_type})</span>` : "Everything"}</td>
              <td><span class=${`badge ${t.enabled ? "ok" : ""}`}>${t.enabled ? "On" : "Off"}</span></td>
              <td class="row-actions">
                <button type="button" class="subtle" onClick=${() => act(() => api("PATCH", `${path}/${t.id}`, { body: { enabled: !t.enabled } }))}>
                  ${t.enabled ? "Turn off" : "Turn on"}<span class="visually-hidden"> trigger ${t.id}</span>
                </button>
                <button type="button" class="danger subtle" onClick=${() => act(() => api("DELETE", `${path}/${t.id}`))}>
                  Remove<span class="visually-hidden"> trigger ${t.id}</span>
                </button>
              </td>
            </tr>`,
          )}
        </tbody>
      </table>
    </div>`}
    <form
      class="settings"
      novalidate
      onSubmit=${form.submit(async () => {
        /** @type {Record<string, unknown>} */
        const body = { event: form.values.event, channel: form.values.channel };
        if (form.values.pattern.trim()) {
          body.pattern = form.values.pattern.trim();
          body.pattern_type = form.values.pattern_type;
        }
        await api("POST", path, { body });
        form.reset({ ...form.values, pattern: "" });
        changed();
      })}
    >
      <fieldset>
        <legend>Add a trigger</legend>
        <div class="row">
          <${SelectField}
            form=${form}
            name="event"
            label="When"
            options=${[
              ["message.received", "A message comes in"],
              ["call.inbound", "A call comes in"],
            ]}
          />
          <${SelectField}
            form=${form}
            name="channel"
            label="On"
            options=${CHANNELS.map((c) => /** @type {[string, string]} */ ([c, c === "*" ? "Any channel" : statusLabel(c)]))}
          />
        </div>
        <div class="row">
          <${TextField} form=${form} name="pattern" label="Matching (optional)" maxlength=${500} hint="Empty matches everything." />
          <${SelectField}
            form=${form}
            name="pattern_type"
            label="As"
            options=${[
              ["keyword", "A whole word, any case"],
              ["regex", "A regular expression"],
            ]}
          />
        </div>
        <${FormError} form=${form} fields=${["event", "channel", "pattern", "pattern_type"]} />
        <button type="submit" class="primary" disabled=${form.busy}>Add trigger</button>
      </fieldset>
    </form>`;
}
