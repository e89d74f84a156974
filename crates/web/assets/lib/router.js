// URLs are state: every page, filter and selection is in the address, so a
// reload, Back and a pasted link land in the same place. Same-origin links
// are followed without a page load.

import { useEffect, useState } from "./html.js";

/** @type {Set<() => void>} */
const listeners = new Set();

function changed() {
  for (const l of listeners) l();
}

window.addEventListener("popstate", changed);

/**
 * @param {string} to A path with its query, e.g. "/calls?status=completed".
 * @param {{replace?: boolean}} [options]
 */
export function navigate(to, { replace = false } = {}) {
  if (to === location.pathname + location.search) return;
  if (replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  changed();
}

/** The current location, re-rendering the caller when it changes. */
export function useLocation() {
  const [, tick] = useState(0);
  const rendered = location.pathname + location.search;
  useEffect(() => {
    const l = () => tick((n) => n + 1);
    listeners.add(l);
    // Children's effects run before their parent's: a child that navigated
    // at once (a redirect) did so before this listener existed.
    if (location.pathname + location.search !== rendered) l();
    return () => {
      listeners.delete(l);
    };
  }, []);
  return { path: location.pathname, query: new URLSearchParams(location.search) };
}

/**
 * Replaces some query parameters of the current URL (empty values are
 * removed), as filters do.
 * @param {Record<string, string | number | null | undefined>} changes
 */
export function setQuery(changes) {
  const q = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(changes)) {
    if (v === null || v === undefined || v === "") q.delete(k);
    else q.set(k, String(v));
  }
  const s = q.toString();
  navigate(location.pathname + (s ? `?${s}` : ""), { replace: true });
}

/**
 * Matches a path against a pattern such as "/agents/:id".
 * @param {string} pattern
 * @param {string} path
 * @returns {Record<string, string> | null}
 */
export function match(pattern, path) {
  // Trailing slashes do not count: "/" is [""], "/agents/" is "/agents".
  const p = pattern.replace(/\/+$/, "").split("/");
  const s = path.replace(/\/+$/, "").split("/");
  if (p.length !== s.length) return null;
  /** @type {Record<string, string>} */
  const params = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i].startsWith(":")) {
      if (!s[i]) return null;
      // A mangled escape (`%E0%A4%A`) is no page, not a crash.
      try {
        params[p[i].slice(1)] = decodeURIComponent(s[i]);
      } catch {
        return null;
      }
    } else if (p[i] !== s[i]) {
      return null;
    }
  }
  return params;
}

// Plain <a href="/…"> links navigate in place; new-tab clicks, downloads
// and other origins behave as links do.
document.addEventListener("click", (e) => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = e.target instanceof Element ? e.target.closest("a") : null;
  if (!a || a.target || a.hasAttribute("download") || a.origin !== location.origin) return;
  // An in-page anchor (the skip link) is the browser's to follow.
  if (a.hash && a.pathname === location.pathname && a.search === location.search) return;
  if (["/api/", "/docs", "/files/", "/mcp"].some((p) => a.pathname.startsWith(p)) || a.pathname === "/openapi.json") return;
  e.preventDefault();
  navigate(a.pathname + a.search);
});
