// The signed-in session. The access token lives in memory only (lib/api.js);
// the refresh token is the API's httpOnly cookie, which JavaScript never
// sees. A reload, a renewal before expiry and a refused token all go
// through `refresh()`, serialised across tabs with a Web Lock: the refresh
// token rotates on every use and a reused one ends the session, so two
// tabs must never present the same one.

import { api, ApiError, onUnauthorized, setAccessToken } from "./api.js";
import { restartLive, stopLive } from "./live.js";

/** @typedef {"live" | "test"} Mode */
/** @typedef {"owner" | "admin" | "member"} Role */
/** @typedef {{id: number, email: string, created_at: string}} User */
/** @typedef {{workspace_id: number, workspace_name: string, role: Role}} Membership */
/** @typedef {{user: User, workspace_id: number, mode: Mode, workspaces: Membership[]}} Me */
/** @typedef {{access_token: string, expires_in: number, workspace_id: number, mode: Mode}} Tokens */

/**
 * @typedef {object} SessionState
 * @property {"loading" | "signed-out" | "signed-in"} status
 * @property {Me | null} me
 * @property {Membership | null} membership The current workspace, with the user's role in it.
 * @property {string | null} notice Why the user is on the sign-in page (a session that ended).
 */

/** @type {SessionState} */
let state = { status: "loading", me: null, membership: null, notice: null };
/** @type {Set<(s: SessionState) => void>} */
const listeners = new Set();
/** @type {ReturnType<typeof setTimeout> | undefined} */
let renewal;
/** @type {Promise<boolean> | null} */
let refreshing = null;

// Other tabs of this browser share the cookie: when one signs out or
// switches workspace or mode, the others follow instead of showing one
// scope's data under another's banner.
const tabs = typeof BroadcastChannel === "function" ? new BroadcastChannel("parley-session") : null;
tabs?.addEventListener("message", (e) => {
  if (e.data === "signed-out") end(null);
  if (e.data === "switched") refresh();
});

/** @param {Partial<SessionState>} next */
function set(next) {
  state = { ...state, ...next };
  for (const l of listeners) l(state);
}

export function current() {
  return state;
}

/** @param {(s: SessionState) => void} listener */
export function subscribe(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** @param {Tokens} tokens */
async function adopt(tokens) {
  setAccessToken(tokens.access_token);
  clearTimeout(renewal);
  // Renew a minute before expiry (sooner for short tokens); a token refused
  // anyway (a sleeping laptop) is renewed on its 401.
  const lead = Math.min(60, tokens.expires_in / 4);
  renewal = setTimeout(refresh, Math.max(5, tokens.expires_in - lead) * 1000);
  const me = state.me;
  if (!me || me.workspace_id !== tokens.workspace_id || me.mode !== tokens.mode) {
    /** @type {Me} */
    const fresh = await api("GET", "/api/v1/auth/me");
    const membership = fresh.workspaces.find((w) => w.workspace_id === fresh.workspace_id) ?? null;
    // Another workspace or mode: its stream starts afresh.
    if (me) restartLive();
    set({ status: "signed-in", me: fresh, membership, notice: null });
  }
}

/**
 * The session ends: back to sign-in, saying why.
 * @param {string | null} notice
 */
function end(notice) {
  clearTimeout(renewal);
  stopLive();
  setAccessToken(null);
  set({ status: "signed-out", me: null, membership: null, notice });
}

/**
 * Exchanges the refresh cookie for a new access token. Resolves false (and
 * signs out) when the session is over.
 * @returns {Promise<boolean>}
 */
export function refresh() {
  refreshing ??= (async () => {
    try {
      const run = async () => {
        // A server that never answers must not hold the page (or the other
        // tabs waiting for the lock) forever.
        const r = await fetch("/api/v1/auth/refresh", {
          method: "POST",
          credentials: "same-origin",
          signal: AbortSignal.timeout(REFRESH_TIMEOUT_MS),
        });
        if (!r.ok) return null;
        return /** @type {Tokens} */ (await r.json());
      };
      const tokens = await oneTabAtATime(run);
      if (!tokens) {
        end(state.status === "signed-in" ? "Your session ended. Sign in again to continue." : null);
        return false;
      }
      await adopt(tokens);
      return true;
    } catch {
      // The server is unreachable: keep the state, the next call retries.
      return false;
    } finally {
      refreshing = null;
    }
  })();
  return refreshing;
}

onUnauthorized(refresh);

const REFRESH_TIMEOUT_MS = 15000;
/** How long a refresh waits for another tab's to finish before going on alone. */
const LOCK_WAIT_MS = 5000;

/**
 * Runs `refresh` holding the tabs' refresh lock, so that two tabs never
 * spend one refresh cookie at once. A lock held longer than a refresh can
 * take belongs to a page that is gone or frozen (a blank page stuck at
 * "loading" in the journeys, now and then): after LOCK_WAIT_MS this tab
 * goes on without it rather than wait forever.
 * @template T
 * @param {() => Promise<T>} refresh
 * @returns {Promise<T>}
 */
async function oneTabAtATime(refresh) {
  if (!navigator.locks) return refresh();
  let started = false;
  try {
    return await navigator.locks.request("parley-refresh", { signal: AbortSignal.timeout(LOCK_WAIT_MS) }, () => {
      started = true;
      return refresh();
    });
  } catch (e) {
    if (started) throw e;
    return refresh();
  }
}

/**
 * Restores the session on page load (the cookie survives a reload). An
 * unreachable server is tried a few times, then the sign-in page says so
 * rather than the page loading forever.
 */
export async function restore() {
  for (let attempt = 1; ; attempt++) {
    if ((await refresh()) || state.status !== "loading") return;
    if (attempt === 3) {
      end("Parley could not be reached. Check the connection and sign in again.");
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, attempt * 1000));
  }
}

/**
 * @param {string} email
 * @param {string} password
 */
export async function signIn(email, password) {
  /** @type {Tokens} */
  const tokens = await api("POST", "/api/v1/auth/login", { body: { email, password } });
  state = { ...state, me: null };
  await adopt(tokens);
}

/**
 * Takes a session another sign-in route answered (an accepted invitation,
 * a password reset): the same as a login's.
 * @param {Tokens} tokens
 */
export async function adoptSession(tokens) {
  state = { ...state, me: null };
  await adopt(tokens);
  tabs?.postMessage("switched");
}

export async function signOut() {
  try {
    await api("POST", "/api/v1/auth/logout");
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
  }
  end(null);
  tabs?.postMessage("signed-out");
}

/**
 * Moves the session to another workspace or mode (a new token and cookie).
 * @param {number} workspaceId
 * @param {Mode} mode
 */
export async function switchTo(workspaceId, mode) {
  /** @type {Tokens} */
  const tokens = await api("POST", "/api/v1/auth/workspace", { body: { workspace_id: workspaceId, mode } });
  await adopt(tokens);
  tabs?.postMessage("switched");
}

/** Whether the signed-in user may manage keys, webhooks, members and credits here. */
export function canAdminister() {
  const role = state.membership?.role;
  return role === "owner" || role === "admin";
}
