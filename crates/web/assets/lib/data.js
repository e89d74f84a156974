// Loading what a view shows: one hook that fetches, re-fetches when its
// inputs change, drops answers that arrive after the view moved on, and
// reloads on demand.

import { useCallback, useEffect, useRef, useState } from "./html.js";
import { onLive } from "./live.js";

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

/**
 * Calls `reload` when the live stream brings an event `wanted` accepts, or
 * says to reload everything (a `reset` after a long disconnection). A
 * burst of events makes one reload, and reloads come at most once a second.
 * @param {() => void} reload
 * @param {(e: import("./api.js").ServerEvent) => boolean} wanted
 */
export function useLiveReload(reload, wanted) {
  const want = useRef(wanted);
  want.current = wanted;
  useEffect(() => {
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let timer;
    let last = 0;
    const stop = onLive((e) => {
      if (e.event !== "reset" && !(e.id && want.current(e))) return;
      // Soon after the first event, then at most once a second.
      timer ??= setTimeout(
        () => {
          timer = undefined;
          last = Date.now();
          reload();
        },
        Math.max(150, last + 1000 - Date.now()),
      );
    });
    return () => {
      clearTimeout(timer);
      stop();
    };
  }, [reload]);
}
