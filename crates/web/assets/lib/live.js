// The live stream (GET /api/v1/stream): one connection per tab, shared by
// every view that listens. It is read with fetch rather than EventSource
// so the access token travels in a header, never in a URL. It reconnects
// on its own, naming the last event it saw so nothing is missed; an event
// sent twice across a reconnect is passed on once; a `reset` (too long
// away) tells the views to reload what they show.

import { authHeaders, readEvents, renewAccess } from "./api.js";

/** @typedef {import("./api.js").ServerEvent} ServerEvent */
/** @typedef {"connecting" | "live" | "reconnecting"} LiveStatus */

/** @type {Set<(e: ServerEvent) => void>} */
const listeners = new Set();
/** @type {Set<(s: LiveStatus) => void>} */
const statusListeners = new Set();
/** @type {LiveStatus} */
let status = "connecting";
/** @type {string | null} */
let lastId = null;
/** @type {AbortController | null} */
let connection = null;
/** Ids passed on lately, oldest first (a resume may send some again). */
const recent = new Set();
const RECENT = 500;

/** @param {LiveStatus} next */
function setStatus(next) {
  if (status === next) return;
  status = next;
  for (const l of statusListeners) l(status);
}

/** @param {ServerEvent} e */
function dispatch(e) {
  if (e.id) {
    if (recent.has(e.id)) return;
    recent.add(e.id);
    if (recent.size > RECENT) recent.delete(recent.values().next().value);
    lastId = e.id;
  }
  if (e.event === "ready") setStatus("live");
  // Too long away to resume: views reload, and the next reconnect starts afresh.
  if (e.event === "reset") lastId = null;
  for (const l of [...listeners]) l(e);
}

/** Set when the server ended the stream because the credential expired. */
let endedUnauthorized = false;

/** Refusals in a row after which the stream stops trying (the session
 * is over, or this member was removed: the page's own calls sign out). */
const MAX_REFUSALS = 3;

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Keeps one connection open while anyone listens. */
async function run() {
  const controller = new AbortController();
  connection = controller;
  let wait = 1000;
  let refusals = 0;
  while (!controller.signal.aborted) {
    let refused = false;
    const sentWith = authHeaders().Authorization;
    try {
      /** @type {Record<string, string>} */
      const headers = { Accept: "text/event-stream", ...authHeaders() };
      if (lastId) headers["Last-Event-ID"] = lastId;
      // Low priority: the stream never finishes, so it must not compete
      // with the page's own loads, nor count as one still under way.
      const response = await fetch("/api/v1/stream", {
        headers,
        signal: controller.signal,
        credentials: "same-origin",
        priority: "low",
      });
      if (response.status === 401) {
        refused = true;
      } else if (response.status === 429) {
        // Too many streams open for this user (other tabs): wait longer.
        wait = Math.max(wait, 15000);
      } else if (response.ok && response.body) {
        wait = 1000;
        refusals = 0;
        await readEventsFrom(response.body);
      }
    } catch {
      // A network error or the abort below: try again unless stopped.
    }
    if (controller.signal.aborted) break;
    setStatus("reconnecting");
    if (refused || endedUnauthorized) {
      endedUnauthorized = false;
      if (++refusals > MAX_REFUSALS) break;
      // Renew the token only if the one refused is still current (the
      // session may have renewed it meanwhile).
      if (authHeaders().Authorization === sentWith) await renewAccess();
    }
    await sleep(wait);
    wait = Math.min(wait * 2, 30000);
  }
  if (connection === controller) connection = null;
}

/** @param {NonNullable<Response["body"]>} body */
async function readEventsFrom(body) {
  await readEvents(body, (e) => {
    if (e.event === "error" && e.data?.status === 401) endedUnauthorized = true;
    else dispatch(e);
  });
}

/**
 * Calls `listener` with every event of the stream (and `ready`, `reset`)
 * until the returned function is called.
 * @param {(e: ServerEvent) => void} listener
 * @returns {() => void}
 */
export function onLive(listener) {
  listeners.add(listener);
  if (!connection) run();
  return () => {
    listeners.delete(listener);
    if (listeners.size === 0) stopLive();
  };
}

/**
 * Calls `listener` whenever the connection's state changes.
 * @param {(s: LiveStatus) => void} listener
 * @returns {() => void}
 */
export function onLiveStatus(listener) {
  statusListeners.add(listener);
  listener(status);
  return () => statusListeners.delete(listener);
}

/** Closes the stream and forgets where it was (a sign-out). */
export function stopLive() {
  connection?.abort();
  connection = null;
  lastId = null;
  recent.clear();
  setStatus("connecting");
}

/** Starts over in another scope (a switch of workspace or mode): nothing of the last one is resumed. */
export function restartLive() {
  const listening = listeners.size > 0;
  stopLive();
  if (listening) run();
}
