// Channels: every connection of the mode, and connecting one through a form
// generated from its type's settings schema (GET /api/v1/channel-types:
// each setting's type, constraints and description; secret settings are
// write-only password fields). A channel's page gives the addresses to
// paste into the provider's console with copy buttons, checks its
// credentials, shows why it is in error, edits its settings, and for a
// webchat the embed snippet and a live preview.

import { html, useEffect, useState } from "../lib/html.js";
import { api } from "../lib/api.js";
import { useResource } from "../lib/data.js";
import { current } from "../lib/session.js";
import { navigate } from "../lib/router.js";
import { humanize } from "../lib/format.js";
import {
  ConfirmDialog,
  CopyButton,
  Dialog,
  EmptyState,
  Field,
  FormError,
  LoadError,
  NotHere,
  PageHeader,
  SelectField,
  ShownOnce,
  Skeleton,
  TextField,
  useCreate,
  useForm,
  When,
} from "../components/ui.js";

/**
 * @typedef {{type?: string | string[], enum?: unknown[], description?: string, items?: {type?: string},
 *   minimum?: number, maximum?: number, maxLength?: number, oneOf?: any[], anyOf?: any[]}} Setting
 * @typedef {{type: string, settings: {properties?: Record<string, Setting>, required?: string[]},
 *   secret_settings: string[], needed_settings: string[], signs_traffic: boolean,
 *   webhooks: {name: string, url: string}[]}} ChannelKind
 * @typedef {{id: number, type: string, name: string, address: string, public_id: string, status: string,
 *   status_reason?: string | null, config: Record<string, unknown>, secrets_set: string[], created_at: string,
 *   updated_at: string}} Channel
 */

const LABELS = {
  api: "API (your backend)",
  webchat: "Webchat widget",
  voice: "Voice (phone or SIP)",
  sms: "SMS (Twilio)",
  whatsapp: "WhatsApp (Twilio)",
  telegram: "Telegram bot",
  email: "Email mailbox",
};
/** @param {string} t */
const kindLabel = (t) => /** @type {Record<string, string>} */ (LABELS)[t] ?? humanize(t);

function useKinds() {
  return useResource(
    (signal) => api("GET", "/api/v1/channel-types", { query: { limit: 50 }, signal }).then((r) => /** @type {ChannelKind[]} */ (r.items)),
    [],
  );
}

export function Channels() {
  const mode = current().me?.mode ?? "live";
  const list = useResource((signal) => api("GET", "/api/v1/channels", { query: { limit: 200 }, signal }), []);
  const [connecting, setConnecting] = useState(false);
  useEffect(() => {
    document.title = "Channels · Parley";
  }, []);
  /** @type {Channel[]} */
  const items = list.data?.items ?? [];
  const connect = html`<button type="button" class="primary" onClick=${() => setConnecting(true)}>Connect a channel</button>`;
  return html`<${PageHeader} title="Channels" actions=${connect}>
      Where your ${mode} contacts reach you: each channel's messages and calls come into one inbox and reach your agents.
    <//>
    ${list.loading && !list.data && !list.error && html`<${Skeleton} />`}
    ${list.error && html`<${LoadError} error=${list.error} retry=${list.reload} />`}
    ${list.data &&
    !items.length &&
    html`<${EmptyState} title=${`No ${mode} channels yet`} action=${connect}>
      Start with a webchat widget for your site, or an API channel for your backend. SMS, WhatsApp, Telegram, email and
      voice connect with your provider's credentials.
    <//>`}
    ${items.length > 0 &&
    html`<div class="table-wrap">
      <table>
        <caption class="visually-hidden">${mode} channels</caption>
        <thead>
          <tr>
            <th scope="col">Channel</th>
            <th scope="col">Type</th>
            <th scope="col">Address</th>
            <th scope="col">Status</th>
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          ${items.map(
            (c) => html`<tr key=${c.id}>
              <th scope="row"><a href=${`/channels/${c.id}`}>${c.name}</a></th>
              <td>${kindLabel(c.type)}</td>
              <td class="mono">${c.address}</td>
              <td>
                <${ChannelStatus} status=${c.status} />
                ${c.status_reason && html`<div class="error">${c.status_reason}</div>`}
              </td>
              <td><${When} value=${c.created_at} /></td>
            </tr>`,
          )}
        </tbody>
      </table>
    </div>`}
    ${connecting && html`<${Connect} onClose=${() => setConnecting(false)} />`}`;
}

/** @param {{status: string}} p */
function ChannelStatus({ status }) {
  const tone = status === "active" ? "ok" : status === "error" ? "danger" : "";
  return html`<span class=${`badge ${tone}`}>${humanize(status)}</span>`;
}

/** The JSON type a setting takes (nullable settings list "null" too). @param {Setting} s */
function typeOf(s) {
  const types = [s.type, ...(s.oneOf ?? []).map((o) => o.type), ...(s.anyOf ?? []).map((o) => o.type)]
    .flat()
    .filter((t) => t && t !== "null");
  return /** @type {string} */ (types[0] ?? "string");
}

/** @param {Setting} s */
function enumOf(s) {
  const all = [s.enum, ...(s.oneOf ?? []).map((o) => o.enum), ...(s.anyOf ?? []).map((o) => o.enum)].flat().filter((v) => v != null);
  return all.length ? all.map(String) : null;
}

/**
 * A form value as the setting's JSON: numbers, booleans and lists parsed;
 * empty means "not set".
 * @param {Setting} s
 * @param {any} v
 */
function settingValue(s, v) {
  const type = typeOf(s);
  if (type === "boolean") return Boolean(v);
  if (typeof v !== "string" || v.trim() === "") return undefined;
  if (type === "integer" || type === "number") {
    const n = Number(v);
    return Number.isFinite(n) ? n : v;
  }
  if (type === "array") {
    return v
      .split(/[\n,]/)
      .map((x) => x.trim())
      .filter(Boolean);
  }
  return v.trim();
}

/** A setting's value as the form shows it. @param {Setting} s @param {unknown} v */
function formValue(s, v) {
  if (typeOf(s) === "boolean") return Boolean(v);
  if (Array.isArray(v)) return v.join("\n");
  return v === null || v === undefined ? "" : String(v);
}

/**
 * The fields of one channel type's settings, generated from its schema.
 * @param {{kind: ChannelKind, form: import("../components/ui.js").Form, secretsSet?: string[]}} p
 */
function SettingsFields({ kind, form, secretsSet = [] }) {
  const props = Object.entries(kind.settings.properties ?? {});
  if (!props.length) return html`<p class="muted">This type has no settings.</p>`;
  return props.map(([name, s]) => {
    const key = `config.${name}`;
    const secret = kind.secret_settings.includes(name);
    // What the channel cannot work without is not "optional", though the API
    // would store the channel without it.
    const required = (kind.settings.required ?? []).includes(name) || kind.needed_settings.includes(name);
    const label = `${humanize(name)}${required ? "" : " (optional)"}`;
    const hint = [s.description, secret && secretsSet.includes(name) ? "Set. Type a new value to replace it." : ""]
      .filter(Boolean)
      .join(" ");
    const type = typeOf(s);
    const options = enumOf(s);
    if (type === "boolean") {
      return html`<label class="check">
        <input type="checkbox" checked=${Boolean(form.values[key])} onChange=${(/** @type {any} */ e) => form.set(key, e.currentTarget.checked)} />
        <span>${label}<span class="hint">${s.description ?? ""}</span></span>
      </label>`;
    }
    if (options) {
      return html`<${SelectField}
        form=${form}
        name=${key}
        label=${label}
        hint=${hint}
        options=${[/** @type {[string, string]} */ (["", required ? "Choose…" : "Default"]), ...options.map((o) => /** @type {[string, string]} */ ([o, o]))]}
      />`;
    }
    if (type === "array") {
      return html`<${Field} label=${label} hint=${`${hint} One per line.`} error=${form.errors[key]}>
        ${(/** @type {any} */ a) => html`<textarea ...${a} rows="3" value=${form.values[key] ?? ""} onInput=${(/** @type {any} */ e) => form.set(key, e.currentTarget.value)}></textarea>`}
      <//>`;
    }
    if (name === "tls_ca_pem") {
      return html`<${Field} label=${label} hint=${hint} error=${form.errors[key]}>
        ${(/** @type {any} */ a) => html`<textarea ...${a} class="code" rows="4" value=${form.values[key] ?? ""} onInput=${(/** @type {any} */ e) => form.set(key, e.currentTarget.value)}></textarea>`}
      <//>`;
    }
    return html`<${TextField}
      form=${form}
      name=${key}
      label=${label}
      hint=${hint}
      type=${secret ? "password" : type === "integer" || type === "number" ? "number" : "text"}
      autocomplete=${secret ? "new-password" : "off"}
    />`;
  });
}

/** The form's `config.*` values as the API's settings. */
function settingsOf(/** @type {ChannelKind} */ kind, /** @type {Record<string, any>} */ values) {
  /** @type {Record<string, unknown>} */
  const config = {};
  for (const [name, s] of Object.entries(kind.settings.properties ?? {})) {
    const v = settingValue(s, values[`config.${name}`]);
    if (v !== undefined) config[name] = v;
  }
  return config;
}

/** @param {{onClose: () => void}} p */
function Connect({ onClose }) {
  const kinds = useKinds();
  const form = useForm({ type: "webchat", name: "" });
  const create = useCreate();
  const [secret, setSecret] = useState(/** @type {{id: number, secret: string} | null} */ (null));
  const kind = (kinds.data ?? []).find((k) => k.type === form.values.type);
  if (secret) {
    return html`<${ShownOnce}
      title="Copy the channel's signing secret"
      label="Signing secret"
      value=${secret.secret}
      copyLabel="Copy secret"
      onClose=${() => {
        onClose();
        navigate(`/channels/${secret.id}`);
      }}
    >
      Sign what you send to this channel with it, and verify what it sends you (Standard Webhooks). It is shown only now.
    <//>`;
  }
  return html`<${Dialog} title="Connect a channel" onClose=${onClose} wide>
    <form
      novalidate
      onSubmit=${form.submit(async () => {
        if (!kind) return;
        const channel = await create("/api/v1/channels", { type: kind.type, name: form.values.name, config: settingsOf(kind, form.values) });
        if (channel.secret) setSecret({ id: channel.id, secret: channel.secret });
        else {
          onClose();
          navigate(`/channels/${channel.id}`);
        }
      })}
    >
      <div class="dialog-body">
        ${kinds.error && html`<${LoadError} error=${kinds.error} retry=${kinds.reload} />`}
        <${SelectField}
          form=${form}
          name="type"
          label="Type"
          options=${(kinds.data ?? []).map((k) => /** @type {[string, string]} */ ([k.type, kindLabel(k.type)]))}
        />
        <${TextField} form=${form} name="name" label="Name" required maxlength=${100} hint="For you, e.g. Website chat." />
        ${kind && html`<fieldset class="settings-fields"><legend>Settings</legend><${SettingsFields} kind=${kind} form=${form} /></fieldset>`}
        <${FormError}
          form=${form}
          fields=${["type", "name", ...Object.keys(kind?.settings.properties ?? {}).map((n) => `config.${n}`)]}
        />
      </div>
      <footer>
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary" disabled=${form.busy || !kind}>Connect</button>
      </footer>
    </form>
  <//>`;
}

/** @param {{id: string}} p */
export function ChannelPage({ id }) {
  const path = `/api/v1/channels/${encodeURIComponent(id)}`;
  const channel = useResource((signal) => api("GET", path, { signal }), [id]);
  const kinds = useKinds();
  const [dialog, setDialog] = useState(/** @type {"" | "delete"} */ (""));
  const [check, setCheck] = useState(/** @type {{ok: boolean, detail: string} | null} */ (null));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  // Saving reloads the channel, which remounts the form (secrets cleared).
  const [saved, setSaved] = useState(false);
  /** @type {Channel | undefined} */
  const c = channel.data;
  useEffect(() => {
    if (c) document.title = `${c.name} · Channels · Parley`;
  }, [c?.name]);
  if (channel.error) {
    return html`<${NotHere} error=${channel.error} what="channel" back="/channels" backLabel="All channels" retry=${channel.reload} />`;
  }
  if (!c) return html`<${Skeleton} rows=${5} />`;
  const kind = (kinds.data ?? []).find((k) => k.type === c.type);
  const fill = (/** @type {string} */ url) => url.replace("{public_id}", c.public_id).replace("{id}", String(c.id));
  const widget = kind?.webhooks.find((w) => w.url.endsWith("/webchat/widget.js"));
  /** @param {() => Promise<void>} action */
  const act = async (action) => {
    setBusy(true);
    setError("");
    try {
      await action();
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      setBusy(false);
    }
  };
  return html`<nav class="breadcrumb" aria-label="Breadcrumb"><a href="/channels">Channels</a></nav>
    <${PageHeader}
      title=${c.name}
      actions=${html`<button
          type="button"
          disabled=${busy}
          onClick=${() =>
            act(async () => {
              setCheck(await api("POST", `${path}/check`));
              channel.reload();
            })}
        >
          Check credentials
        </button>
        <button
          type="button"
          disabled=${busy}
          onClick=${() =>
            act(async () => {
              await api("PATCH", path, { body: { status: c.status === "disabled" ? "active" : "disabled" } });
              channel.reload();
            })}
        >
          ${c.status === "disabled" ? "Enable" : "Disable"}
        </button>
        <button type="button" class="danger subtle" onClick=${() => setDialog("delete")}>Delete</button>`}
    >
      ${kindLabel(c.type)} · <${ChannelStatus} status=${c.status} />
    <//>
    ${c.status_reason && html`<div class="notice error" role="alert"><p>${c.status_reason}</p></div>`}
    ${error && html`<div class="notice error" role="alert"><p>${error}</p></div>`}
    ${check &&
    html`<div class=${check.ok ? "notice" : "notice error"} role="status">
      <p>${check.ok ? "The credentials work." : "The check failed."} ${check.detail}</p>
    </div>`}
    <dl class="facts">
      <div><dt>Address</dt><dd class="mono">${c.address}</dd></div>
      <div><dt>Public id</dt><dd class="mono">${c.public_id}</dd></div>
      <div><dt>Created</dt><dd><${When} value=${c.created_at} /></dd></div>
    </dl>
    ${kind && kind.webhooks.length > 0 && c.type !== "webchat" &&
    html`<section class="section" aria-labelledby="hooks-h">
      <h2 id="hooks-h">Addresses for your provider</h2>
      <ul class="hooks">
        ${kind.webhooks.map(
          (w) => html`<li>
            <span>${w.name}</span>
            <code>${fill(w.url)}</code>
            <${CopyButton} text=${fill(w.url)} label=${`Copy: ${w.name}`} />
          </li>`,
        )}
      </ul>
    </section>`}
    ${c.type === "webchat" && widget && html`<${Embed} channel=${c} widgetUrl=${widget.url} />`}
    ${kind &&
    html`<${EditSettings}
      key=${c.updated_at}
      channel=${c}
      kind=${kind}
      saved=${saved}
      onSaved=${() => {
        setSaved(true);
        channel.reload();
      }}
    />`}
    ${dialog === "delete" &&
    html`<${ConfirmDialog}
      title=${`Delete ${c.name}?`}
      confirm="Delete channel"
      onClose=${() => setDialog("")}
      onConfirm=${async () => {
        await api("DELETE", path);
        navigate("/channels");
      }}
    >
      A channel that has conversations cannot be deleted: disable it instead.
    <//>`}`;
}

/** @param {{channel: Channel, widgetUrl: string}} p */
function Embed({ channel, widgetUrl }) {
  const snippet = `<script src="${widgetUrl}" data-channel="${channel.address}" async></script>`;
  const preview = `/webchat/${encodeURIComponent(channel.public_id)}/preview`;
  return html`<section class="section" aria-labelledby="embed-h">
    <h2 id="embed-h">Add it to your site</h2>
    <p>Paste this before <code>${"</body>"}</code> on the pages where visitors may chat:</p>
    <pre class="excerpt snippet">${snippet}</pre>
    <div class="actions">
      <${CopyButton} text=${snippet} label="Copy snippet" />
      ${channel.status === "active"
        ? html`<a class="button" href=${preview} target="_blank" rel="noopener"
            >Open a live preview<span class="visually-hidden"> (opens in a new tab)</span></a
          >`
        : html`<span class="muted">Enable the channel to preview it.</span>`}
    </div>
    <p class="muted">
      The preview runs on this server's address: if the channel lists allowed origins, add it there to chat in the
      preview.
    </p>
  </section>`;
}

/** @param {{channel: Channel, kind: ChannelKind, saved: boolean, onSaved: () => void}} p */
function EditSettings({ channel, kind, saved, onSaved }) {
  /** @type {Record<string, any>} */
  const initial = { name: channel.name };
  for (const [name, s] of Object.entries(kind.settings.properties ?? {})) {
    initial[`config.${name}`] = kind.secret_settings.includes(name) ? "" : formValue(s, channel.config[name]);
  }
  const form = useForm(initial);
  return html`<section class="section" aria-labelledby="settings-h">
    <h2 id="settings-h">Settings</h2>
    <form
      class="settings"
      novalidate
      onSubmit=${form.submit(async () => {
        /** @type {Record<string, unknown>} */
        const config = {};
        for (const [name, s] of Object.entries(kind.settings.properties ?? {})) {
          const before = kind.secret_settings.includes(name) ? undefined : settingValue(s, initial[`config.${name}`]);
          const now = settingValue(s, form.values[`config.${name}`]);
          // A secret left empty keeps its value; any other emptied setting is removed.
          if (kind.secret_settings.includes(name)) {
            if (now !== undefined) config[name] = now;
          } else if (JSON.stringify(before) !== JSON.stringify(now)) {
            config[name] = now === undefined ? null : now;
          }
        }
        /** @type {Record<string, unknown>} */
        const body = { config };
        if (form.values.name !== channel.name) body.name = form.values.name;
        await api("PATCH", `/api/v1/channels/${channel.id}`, { body });
        onSaved();
      })}
    >
      <${TextField} form=${form} name="name" label="Name" required maxlength=${100} />
      <${SettingsFields} kind=${kind} form=${form} secretsSet=${channel.secrets_set} />
      <${FormError} form=${form} fields=${["name", ...Object.keys(kind.settings.properties ?? {}).map((n) => `config.${n}`)]} />
      <div class="form-actions">
        <button type="submit" class="primary" disabled=${form.busy}>Save settings</button>
        ${saved && html`<span role="status" class="muted">Saved.</span>`}
      </div>
    </form>
  </section>`;
}
