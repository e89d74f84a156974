// The dashboard's building blocks. Every control has a label, every error
// sits next to the field it names (and is tied to it with
// aria-describedby), dialogs are native <dialog>s (focus kept inside, Esc
// closes), and nothing here renders HTML from a string: text is text.

import { html, useEffect, useId, useRef, useState } from "../lib/html.js";
import { api, ApiError } from "../lib/api.js";
import { setQuery } from "../lib/router.js";
import { ago, formatDate } from "../lib/format.js";

/**
 * @typedef {object} FieldProps
 * @property {string} label
 * @property {string} [error]
 * @property {string} [hint]
 * @property {(props: {id: string, "aria-describedby"?: string, "aria-invalid"?: "true"}) => any} children
 *   Renders the control with the given id and descriptions.
 */

/** A labelled control with its hint and its error. @param {FieldProps} p */
export function Field({ label, error, hint, children }) {
  const id = useId();
  const described = [hint ? `${id}-hint` : "", error ? `${id}-error` : ""].filter(Boolean).join(" ");
  return html`<div class=${error ? "field invalid" : "field"}>
    <label for=${id}>${label}</label>
    ${children({ id, "aria-describedby": described || undefined, "aria-invalid": error ? "true" : undefined })}
    ${hint && html`<p class="hint" id=${`${id}-hint`}>${hint}</p>`}
    ${error && html`<p class="error" id=${`${id}-error`}>${error}</p>`}
  </div>`;
}

/**
 * A text input bound to `form.values[name]`.
 * @param {{form: Form, name: string, label: string, hint?: string, type?: string, required?: boolean,
 *   autocomplete?: string, placeholder?: string, maxlength?: number}} p
 */
export function TextField({ form, name, label, hint, type = "text", ...rest }) {
  return html`<${Field} label=${label} hint=${hint} error=${form.errors[name]}>
    ${(/** @type {any} */ a) => html`<input
      ...${a}
      ...${rest}
      name=${name}
      type=${type}
      value=${form.values[name] ?? ""}
      onInput=${(/** @type {any} */ e) => form.set(name, e.currentTarget.value)}
    />`}
  <//>`;
}

/**
 * A text area bound to `form.values[name]`.
 * @param {{form: Form, name: string, label: string, hint?: string, rows?: number, maxlength?: number,
 *   class?: string, spellcheck?: string}} p
 */
export function TextAreaField({ form, name, label, hint, ...rest }) {
  return html`<${Field} label=${label} hint=${hint} error=${form.errors[name]}>
    ${(/** @type {any} */ a) => html`<textarea
      ...${a}
      ...${rest}
      name=${name}
      value=${form.values[name] ?? ""}
      onInput=${(/** @type {any} */ e) => form.set(name, e.currentTarget.value)}
    ></textarea>`}
  <//>`;
}

/**
 * A select bound to `form.values[name]`.
 * @param {{form: Form, name: string, label: string, hint?: string, options: [string, string][]}} p
 *   `options` as `[value, label]` pairs.
 */
export function SelectField({ form, name, label, hint, options }) {
  return html`<${Field} label=${label} hint=${hint} error=${form.errors[name]}>
    ${(/** @type {any} */ a) => html`<select
      ...${a}
      name=${name}
      value=${form.values[name] ?? ""}
      onChange=${(/** @type {any} */ e) => form.set(name, e.currentTarget.value)}
    >
      ${options.map(([value, text]) => html`<option value=${value}>${text}</option>`)}
    </select>`}
  <//>`;
}

/**
 * A checkbox bound to `form.values[name]`; its error sits below it.
 * @param {{form: Form, name: string, label: string, hint?: string}} p
 */
export function CheckField({ form, name, label, hint }) {
  const id = useId();
  const error = form.errors[name];
  return html`<div class=${error ? "field check invalid" : "field check"}>
    <input
      id=${id}
      type="checkbox"
      name=${name}
      checked=${Boolean(form.values[name])}
      aria-describedby=${[hint && `${id}-hint`, error && `${id}-error`].filter(Boolean).join(" ") || undefined}
      onChange=${(/** @type {any} */ e) => form.set(name, e.currentTarget.checked)}
    />
    <label for=${id}>${label}</label>
    ${hint && html`<p class="hint" id=${`${id}-hint`}>${hint}</p>`}
    ${error && html`<p class="error" id=${`${id}-error`}>${error}</p>`}
  </div>`;
}

/**
 * @typedef {object} Form
 * @property {Record<string, any>} values
 * @property {Record<string, string>} errors By field path, as the API's `loc` names it; "" for the form.
 * @property {boolean} busy
 * @property {(name: string, value: any) => void} set
 * @property {(action: () => Promise<void>) => (e?: Event) => Promise<void>} submit
 *   Runs the action, putting the API's faults next to their fields.
 * @property {(values: Record<string, any>) => void} reset
 */

/**
 * @param {Record<string, any>} initial
 * @returns {Form}
 */
export function useForm(initial) {
  const [values, setValues] = useState(initial);
  const [errors, setErrors] = useState(/** @type {Record<string, string>} */ ({}));
  const [busy, setBusy] = useState(false);
  return {
    values,
    errors,
    busy,
    set(name, value) {
      setValues((v) => ({ ...v, [name]: value }));
      if (errors[name]) setErrors((e) => ({ ...e, [name]: "" }));
    },
    submit(action) {
      return async (e) => {
        e?.preventDefault();
        if (busy) return;
        setBusy(true);
        setErrors({});
        try {
          await action();
        } catch (err) {
          setErrors(faultsOf(err));
          // Take the reader to the first field with a fault.
          requestAnimationFrame(() => {
            /** @type {HTMLElement | null} */
            const first = document.querySelector("[aria-invalid='true']");
            first?.focus();
          });
        } finally {
          setBusy(false);
        }
      };
    },
    reset(next) {
      setValues(next);
      setErrors({});
    },
  };
}

/**
 * POSTs that create something once: one Idempotency-Key per attempt, so a
 * double click or a retried request never creates two. The API's refusal
 * ends an attempt (a corrected form is a new one); after a network
 * failure the same key finds what the server may have made.
 * @returns {(path: string, body: unknown) => Promise<any>}
 */
export function useCreate() {
  const key = useRef(crypto.randomUUID());
  return async (path, body) => {
    try {
      return await api("POST", path, { body, headers: { "Idempotency-Key": key.current } });
    } catch (e) {
      if (e instanceof ApiError) key.current = crypto.randomUUID();
      throw e;
    }
  };
}

/**
 * An error as form errors: the API's field faults, the rest under "".
 * @param {unknown} err
 * @returns {Record<string, string>}
 */
export function faultsOf(err) {
  if (err instanceof ApiError && err.faults.length) return err.fields();
  return { "": err instanceof Error ? err.message : String(err) };
}

/** A form-level error (the faults no field claims). @param {{form: Form, fields?: string[]}} p */
export function FormError({ form, fields = [] }) {
  const unclaimed = Object.entries(form.errors).filter(([k, v]) => v && !fields.includes(k));
  if (!unclaimed.length) return null;
  return html`<div class="notice error" role="alert">
    ${unclaimed.map(([k, v]) => html`<p>${k ? `${k}: ` : ""}${v}</p>`)}
  </div>`;
}

/**
 * A modal dialog. Closing it (Esc, the close button) calls `onClose`.
 * @param {{title: string, onClose: () => void, children: any, wide?: boolean}} p
 */
export function Dialog({ title, onClose, children, wide }) {
  const ref = useRef(/** @type {HTMLDialogElement | null} */ (null));
  // Set when this dialog goes away: its own close() then fires a "close"
  // event later, which must not close whatever replaced it.
  const gone = useRef(false);
  const id = useId();
  useEffect(() => {
    const d = ref.current;
    gone.current = false;
    if (d && !d.open) d.showModal();
    // Start where the work is: a control marked autofocus, else the first
    // field (showModal alone would pick the Close button).
    /** @type {HTMLElement | null | undefined} */
    const first = d?.querySelector("[autofocus], input:not([type=hidden]):not([disabled]), select, textarea");
    first?.focus();
    return () => {
      gone.current = true;
      d?.close();
    };
  }, []);
  return html`<dialog
    ref=${ref}
    class=${wide ? "wide" : ""}
    aria-labelledby=${id}
    onClose=${() => {
      if (!gone.current) onClose();
    }}
    onCancel=${(/** @type {Event} */ e) => {
      e.preventDefault();
      onClose();
    }}
  >
    <header>
      <h2 id=${id}>${title}</h2>
      <button type="button" class="icon" aria-label="Close" onClick=${onClose}>${icons.close}</button>
    </header>
    ${children}
  </dialog>`;
}

/**
 * Asks before something that cannot be undone.
 * @param {{title: string, children: any, confirm: string, onConfirm: () => Promise<void>, onClose: () => void}} p
 */
export function ConfirmDialog({ title, children, confirm, onConfirm, onClose }) {
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  return html`<${Dialog} title=${title} onClose=${onClose}>
    <div class="dialog-body">${children}</div>
    ${error && html`<p class="notice error" role="alert">${error}</p>`}
    <footer>
      <button type="button" autofocus onClick=${onClose}>Cancel</button>
      <button
        type="button"
        class="danger"
        disabled=${busy}
        onClick=${async () => {
          setBusy(true);
          try {
            await onConfirm();
            onClose();
          } catch (e) {
            setError(e instanceof Error ? e.message : String(e));
            setBusy(false);
          }
        }}
      >
        ${confirm}
      </button>
    </footer>
  <//>`;
}

/**
 * A secret or one-time link shown once (a new key, a signing secret, an
 * invitation link): read-only, selected on focus, with a copy button.
 * @param {{title: string, label: string, value: string, copyLabel: string, onClose: () => void, children: any}} p
 */
export function ShownOnce({ title, label, value, copyLabel, onClose, children }) {
  const id = useId();
  return html`<${Dialog} title=${title} onClose=${onClose}>
    <div class="dialog-body">
      <p>${children}</p>
      <div class="secret">
        <label for=${id}>${label}</label>
        <input id=${id} readonly value=${value} onFocus=${(/** @type {any} */ e) => e.currentTarget.select()} />
        <${CopyButton} text=${value} label=${copyLabel} />
      </div>
    </div>
    <footer><button type="button" class="primary" onClick=${onClose}>Done</button></footer>
  <//>`;
}

/**
 * Copies `text`, saying so to screen readers too.
 * @param {{text: string, label?: string}} p
 */
export function CopyButton({ text, label = "Copy" }) {
  const [done, setDone] = useState(false);
  return html`<button
    type="button"
    class="copy"
    onClick=${async () => {
      try {
        await navigator.clipboard.writeText(text);
        setDone(true);
        setTimeout(() => setDone(false), 2000);
      } catch {
        setDone(false);
      }
    }}
  >
    ${icons.copy}<span>${label}</span><span class="visually-hidden" aria-live="polite">${done ? "Copied" : ""}</span>
    ${done && html`<span aria-hidden="true"> ✓</span>`}
  </button>`;
}

/**
 * What a page shows before it has anything: what this is and what to do next.
 * @param {{title: string, children?: any, action?: any}} p
 */
export function EmptyState({ title, children, action }) {
  return html`<div class="empty">
    <h2>${title}</h2>
    ${children && html`<p>${children}</p>`}
    ${action}
  </div>`;
}

/** A failed load, with a retry. @param {{error: unknown, retry?: () => void}} p */
export function LoadError({ error, retry }) {
  const message = error instanceof Error ? error.message : String(error);
  return html`<div class="notice error" role="alert">
    <p>${message}</p>
    ${retry && html`<button type="button" onClick=${retry}>Try again</button>`}
  </div>`;
}

/** Placeholder rows while a table loads. @param {{rows?: number}} p */
export function Skeleton({ rows = 3 }) {
  return html`<div class="skeleton" aria-busy="true" aria-label="Loading">
    ${Array.from({ length: rows }, () => html`<div class="bar"></div>`)}
  </div>`;
}

/** A date as "3 minutes ago", exact on hover. @param {{value: string | null | undefined, never?: string}} p */
export function When({ value, never = "Never" }) {
  if (!value) return html`<span class="muted">${never}</span>`;
  return html`<time datetime=${value} title=${formatDate(value)}>${ago(value)}</time>`;
}

/** A page's heading row. @param {{title: string, children?: any, actions?: any}} p */
export function PageHeader({ title, children, actions }) {
  return html`<header class="page-header">
    <div>
      <h1 tabindex="-1">${title}</h1>
      ${children && html`<p class="lede">${children}</p>`}
    </div>
    ${actions && html`<div class="actions">${actions}</div>`}
  </header>`;
}

/** An inline SVG icon on a 24-unit grid, hidden from assistive technology. @param {any} shapes */
const icon = (shapes) => html`<svg viewBox="0 0 24 24" aria-hidden="true" focusable="false">${shapes}</svg>`;

/** Inline SVG icons (no icon font: the CSP allows our own files only). */
export const icons = {
  bell: icon(html`<path d="M6 16V11a6 6 0 0 1 12 0v5l2 2H4l2-2M10 20a2 2 0 0 0 4 0" />`),
  close: icon(html`<path d="M6 6l12 12M18 6L6 18" />`),
  copy: icon(html`<rect x="9" y="9" width="11" height="11" rx="2" /><path d="M5 15V5a2 2 0 0 1 2-2h8" />`),
  home: icon(html`<path d="M3 11l9-7 9 7M5 9.5V20h5v-6h4v6h5V9.5" />`),
  key: icon(html`<circle cx="8" cy="15" r="4" /><path d="M11 12l9-9M17 6l3 3M15 8l2 2" />`),
  users: icon(
    html`<circle cx="9" cy="8" r="3.5" /><path d="M2.5 20a6.5 6.5 0 0 1 13 0M16 4.5a3.5 3.5 0 0 1 0 7M18 14a6 6 0 0 1 3.5 6" />`,
  ),
};

/**
 * A menu that opens under its button: closes on Escape (focus back on the
 * button) and on a click elsewhere. Put `root` on the element holding
 * both, `id` on the menu.
 */
export function usePopover() {
  const [open, setOpen] = useState(false);
  const id = useId();
  const root = useRef(/** @type {HTMLDivElement | null} */ (null));
  useEffect(() => {
    if (!open) return;
    /** @param {KeyboardEvent} e */
    const key = (e) => {
      if (e.key !== "Escape") return;
      setOpen(false);
      root.current?.querySelector("button")?.focus();
    };
    /** @param {MouseEvent} e */
    const click = (e) => {
      if (e.target instanceof Node && !root.current?.contains(e.target)) setOpen(false);
    };
    document.addEventListener("keydown", key);
    document.addEventListener("click", click);
    return () => {
      document.removeEventListener("keydown", key);
      document.removeEventListener("click", click);
    };
  }, [open]);
  return { open, setOpen, id, root };
}

/**
 * Previous and Next through a list paged by `offset` in the URL.
 * @param {{offset: number, total: number, shown: number, size: number}} p
 */
export function Pager({ offset, total, shown, size }) {
  if (total <= size && offset === 0) return null;
  return html`<nav class="pager" aria-label="Pages">
    <span>${offset + 1}–${offset + shown} of ${total}</span>
    <button type="button" disabled=${offset === 0} onClick=${() => setQuery({ offset: Math.max(0, offset - size) || null })}>
      Previous
    </button>
    <button type="button" disabled=${offset + shown >= total} onClick=${() => setQuery({ offset: offset + size })}>Next</button>
  </nav>`;
}

/**
 * A page whose resource failed to load: another workspace's or mode's id
 * (404, or 422 for what is no id at all) reads as missing, like an unknown
 * one; anything else is an error with a retry.
 * @param {{error: unknown, what: string, back: string, backLabel: string, retry: () => void}} p
 */
export function NotHere({ error, what, back, backLabel, retry }) {
  if (error instanceof ApiError && (error.status === 404 || error.status === 422)) {
    return html`<${EmptyState} title=${`There is no such ${what}`} action=${html`<a class="button" href=${back}>${backLabel}</a>`}>
      It may belong to another workspace or mode: each keeps its own.
    <//>`;
  }
  return html`<${LoadError} error=${error} retry=${retry} />`;
}
