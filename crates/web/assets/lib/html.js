// The one place the vendored library is imported: pages and components
// take `html` (htm bound to Preact's `h`) and the hooks from here.
import { h, render, Fragment, createContext } from "../vendor/preact.module.js";
import htm from "../vendor/htm.module.js";

export const html = htm.bind(h);
export { render, Fragment, createContext };
export { useState, useEffect, useLayoutEffect, useRef, useMemo, useCallback, useContext, useId } from "../vendor/hooks.module.js";
