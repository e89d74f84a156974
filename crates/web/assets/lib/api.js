// The dashboard's door to the REST API: every call goes through `api()`,
// which sends the in-memory access token, renews it once on a 401 and
// turns error bodies into `ApiError`s whose validation faults are keyed by
// the field they name.

/** @typedef {{loc: (string|number)[], msg: string, type: string}} Fault */

export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} message
   * @param {Fault[]} [faults]
   */
  constructor(status, message, faults = []) {
    super(message);
    this.status = status;
    this.faults = faults;
  }

  /**
   * The 422 faults by field path under the body or query (`name`,
   * `tools.0.url`); faults about the whole body are under "".
   * @returns {Record<string, string>}
   */
  fields() {
    /** @type {Record<string, string>} */
    const out = {};
    for (const f of this.faults) {
      const path = f.loc.slice(f.loc[0] === "body" || f.loc[0] === "query" ? 1 : 0).join(".");
      out[path] = out[path] ? `${out[path]}; ${f.msg}` : f.msg;
    }
    return out;
  }
}

/** @type {string | null} */
let accessToken = null;
/** @type {() => Promise<boolean>} */
let renew = async () => false;

/** @param {string | null} token */
export function setAccessToken(token) {
  accessToken = token;
}

/**
 * How to get a new access token when one is refused (set by the session).
 * @param {() => Promise<boolean>} fn
 */
export function onUnauthorized(fn) {
  renew = fn;
}

/**
 * @typedef {object} RequestOptions
 * @property {unknown} [body] JSON-encoded, or sent as is when FormData or Blob.
 * @property {Record<string, string | number | boolean | null | undefined>} [query]
 * @property {AbortSignal} [signal]
 * @property {Record<string, string>} [headers]
 */

/**
 * @param {string} path
 * @param {RequestOptions["query"]} [query]
 */
export function url(path, query) {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) {
    if (v !== undefined && v !== null && v !== "") params.set(k, String(v));
  }
  const q = params.toString();
  return q ? `${path}?${q}` : path;
}

/**
 * Calls the API and returns the parsed JSON body (null for 204).
 * @param {string} method
 * @param {string} path
 * @param {RequestOptions} [options]
 * @returns {Promise<any>}
 */
export async function api(method, path, options = {}) {
  let response = await send(method, path, options);
  if (response.status === 401 && accessToken !== null && (await renew())) {
    response = await send(method, path, options);
  }
  return read(response);
}

/**
 * @param {string} method
 * @param {string} path
 * @param {RequestOptions} options
 */
function send(method, path, { body, query, signal, headers = {} }) {
  /** @type {Record<string, string>} */
  const h = { Accept: "application/json", ...headers };
  if (accessToken) h.Authorization = `Bearer ${accessToken}`;
  /** @type {BodyInit | undefined} */
  let payload;
  if (body instanceof FormData || body instanceof Blob) {
    payload = body;
  } else if (body !== undefined) {
    h["Content-Type"] = "application/json";
    payload = JSON.stringify(body);
  }
  return fetch(url(path, query), { method, headers: h, body: payload, signal, credentials: "same-origin" });
}

/** @param {Response} response */
export async function read(response) {
  if (response.status === 204) return null;
  const text = await response.text();
  /** @type {any} */
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (response.ok) return body;
  const detail = body?.detail;
  if (Array.isArray(detail)) {
    throw new ApiError(response.status, "Some fields need attention", detail);
  }
  const message =
    typeof detail === "string" ? detail : `The server answered ${response.status} ${response.statusText}`.trim();
  throw new ApiError(response.status, message);
}

/**
 * POSTs `body` asking for Server-Sent Events and calls `onEvent` with each
 * event's name and parsed data as it arrives; renews the session once on
 * a 401 as `api()` does. A refusal before the stream starts throws the
 * API's error.
 * @param {string} path
 * @param {unknown} body
 * @param {(event: string, data: any) => void} onEvent
 * @param {AbortSignal} [signal]
 */
export async function stream(path, body, onEvent, signal) {
  const options = { body, signal, headers: { Accept: "text/event-stream" } };
  let response = await send("POST", path, options);
  if (response.status === 401 && accessToken !== null && (await renew())) {
    response = await send("POST", path, options);
  }
  if (!response.ok || !response.body || !(response.headers.get("content-type") ?? "").startsWith("text/event-stream")) {
    return read(response);
  }
  await readEvents(response.body, (event) => onEvent(event.event, event.data));
  return null;
}

/** @typedef {{id: string | null, event: string, data: any}} ServerEvent */

/**
 * Reads a Server-Sent Events body to its end, calling `onEvent` with each
 * event that has data (comments and the retry hint are skipped).
 * @param {NonNullable<Response["body"]>} body
 * @param {(event: ServerEvent) => void} onEvent
 */
export async function readEvents(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value.replace(/\r\n?/g, "\n");
    for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      /** @type {string | null} */
      let id = null;
      let event = "message";
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("id:")) id = line.slice(3).trim();
        else if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) onEvent({ id, event, data: JSON.parse(data.join("\n")) });
    }
  }
}

/** Asks the session for a fresh access token (false when it has ended). */
export function renewAccess() {
  return renew();
}

/** Headers for a raw `fetch` (an SSE stream, a recording) under the session. */
export function authHeaders() {
  /** @type {Record<string, string>} */
  const h = {};
  if (accessToken) h.Authorization = `Bearer ${accessToken}`;
  return h;
}
