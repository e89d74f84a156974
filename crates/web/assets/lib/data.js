// Loading what a view shows: one hook that fetches, re-fetches when its
// inputs change, drops answers that arrive after the view moved on, and
// reloads on demand.

import { useCallback, useEffect, useRef, useState } from "./html.js";

/**
 * @template T
 * @typedef {{data: T | undefined, error: unknown, loading: boolean, reload: () => void}} Resource
 */

/**
 * @template T
 * @param {(signal: AbortSignal) => Promise<T>} load
 * @param {unknown[]} deps What the load depends on (a URL's filters, an id).
 * @returns {Resource<T>}
 */
export function useResource(load, deps) {
  const [data, setData] = useState(/** @type {T | undefined} */ (undefined));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const latest = useRef(load);
  latest.current = load;
  useEffect(() => {
    const control = new AbortController();
    setLoading(true);
    latest
      .current(control.signal)
      .then((d) => {
        if (control.signal.aborted) return;
        setData(d);
        setError(null);
      })
      .catch((e) => {
        if (control.signal.aborted) return;
        setError(e);
      })
      .finally(() => {
        if (!control.signal.aborted) setLoading(false);
      });
    return () => control.abort();
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, loading, reload };
}
