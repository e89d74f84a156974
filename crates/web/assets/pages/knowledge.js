// Knowledge: the collections agents answer from, and one page per
// collection — its documents with their processing status (followed until
// each is ready or failed), uploads by drag and drop or a file picker
// (text, Markdown, HTML, PDF), text pasted as a document, and a query
// tester that shows what an agent would retrieve: passages, scores and
// the documents they come from.

import { html, useEffect, useRef, useState } from "../lib/html.js";
import { api, ApiError } from "../lib/api.js";
import { useResource } from "../lib/data.js";
import { current } from "../lib/session.js";
import { navigate } from "../lib/router.js";
import { humanize } from "../lib/format.js";
import {
  ConfirmDialog,
  Dialog,
  EmptyState,
  Field,
  FormError,
  LoadError,
  NotHere,
  PageHeader,
  SelectField,
  Skeleton,
  TextField,
  useForm,
  When,
} from "../components/ui.js";

/**
 * @typedef {{id: number, name: string, description?: string | null, document_count: number, passage_count: number,
 *   created_at: string, updated_at: string}} Collection
 * @typedef {{id: number, collection_id: number, title: string, source?: string | null, content_type: string,
 *   status: "processing" | "ready" | "failed", error?: string | null, passage_count: number, bytes: number,
 *   created_at: string}} KnowledgeDocument
 * @typedef {{passage_id: number, document_id: number, title: string, text: string, score: number}} Hit
 */

/** What an upload may be: the API's own list. */
const ACCEPT = ".txt,.md,.markdown,.html,.htm,.pdf,text/plain,text/markdown,text/html,application/pdf";
const MAX_BYTES = 20 * 1024 * 1024;

const bytes = new Intl.NumberFormat(undefined, { style: "unit", unit: "kilobyte", maximumFractionDigits: 1 });
/** @param {number} n */
const size = (n) => (n < 1024 ? `${n} B` : n < 1024 * 1024 ? bytes.format(n / 1024) : `${(n / 1024 / 1024).toFixed(1)} MB`);

export function Knowledge() {
  const mode = current().me?.mode ?? "live";
  const list = useResource((signal) => api("GET", "/api/v1/knowledge-collections", { query: { limit: 200 }, signal }), []);
  const [creating, setCreating] = useState(false);
  useEffect(() => {
    document.title = "Knowledge · Parley";
  }, []);
  /** @type {Collection[]} */
  const items = list.data?.items ?? [];
  const create = html`<button type="button" class="primary" onClick=${() => setCreating(true)}>Create collection</button>`;
  return html`<${PageHeader} title="Knowledge" actions=${items.length > 0 && create}>
      Documents your ${mode} agents answer from. Give an agent a collection in its settings.
    <//>
    ${list.loading && !list.data && !list.error && html`<${Skeleton} />`}
    ${list.error && html`<${LoadError} error=${list.error} retry=${list.reload} />`}
    ${list.data &&
    !items.length &&
    html`<${EmptyState} title="No collections yet" action=${create}>
      A collection groups documents — your help center, policies, price lists — that agents quote with their source.
    <//>`}
    ${items.length > 0 &&
    html`<div class="table-wrap">
      <table>
        <caption class="visually-hidden">Knowledge collections</caption>
        <thead>
          <tr>
            <th scope="col">Collection</th>
            <th scope="col">Documents</th>
            <th scope="col">Passages</th>
            <th scope="col">Updated</th>
          </tr>
        </thead>
        <tbody>
          ${items.map(
            (c) => html`<tr key=${c.id}>
              <th scope="row">
                <a href=${`/knowledge/${c.id}`}>${c.name}</a>
                ${c.description && html`<div class="muted">${c.description}</div>`}
              </th>
              <td>${c.document_count}</td>
              <td>${c.passage_count}</td>
              <td><${When} value=${c.updated_at} /></td>
            </tr>`,
          )}
        </tbody>
      </table>
    </div>`}
    ${creating &&
    html`<${CollectionForm}
      onClose=${() => setCreating(false)}
      onSaved=${(/** @type {Collection} */ c) => navigate(`/knowledge/${c.id}`)}
    />`}`;
}

/** @param {{collection?: Collection, onClose: () => void, onSaved: (c: Collection) => void}} p */
function CollectionForm({ collection, onClose, onSaved }) {
  const form = useForm({ name: collection?.name ?? "", description: collection?.description ?? "" });
  return html`<${Dialog} title=${collection ? "Edit collection" : "Create a collection"} onClose=${onClose}>
    <form
      novalidate
      onSubmit=${form.submit(async () => {
        const body = { name: form.values.name, description: form.values.description || null };
        const saved = collection
          ? await api("PATCH", `/api/v1/knowledge-collections/${collection.id}`, { body })
          : await api("POST", "/api/v1/knowledge-collections", { body });
        onClose();
        onSaved(saved);
      })}
    >
      <div class="dialog-body">
        <${TextField} form=${form} name="name" label="Name" required maxlength=${100} hint="e.g. Help center." />
        <${TextField} form=${form} name="description" label="Description (optional)" maxlength=${2000} />
        <${FormError} form=${form} fields=${["name", "description"]} />
      </div>
      <footer>
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary" disabled=${form.busy}>${collection ? "Save" : "Create collection"}</button>
      </footer>
    </form>
  <//>`;
}

/** @param {{id: string}} p */
export function CollectionPage({ id }) {
  const path = `/api/v1/knowledge-collections/${encodeURIComponent(id)}`;
  const collection = useResource((signal) => api("GET", path, { signal }), [id]);
  const documents = useResource((signal) => api("GET", `${path}/documents`, { query: { limit: 200 }, signal }), [id]);
  const [editing, setEditing] = useState(false);
  const [deleting, setDeleting] = useState(false);
  const [removing, setRemoving] = useState(/** @type {KnowledgeDocument | null} */ (null));
  const [pasting, setPasting] = useState(false);
  /** @type {Collection | undefined} */
  const c = collection.data;
  /** @type {KnowledgeDocument[]} */
  const docs = documents.data?.items ?? [];
  const processing = docs.some((d) => d.status === "processing");
  useEffect(() => {
    if (c) document.title = `${c.name} · Knowledge · Parley`;
  }, [c?.name]);
  // Follow documents being processed until each is ready or failed.
  useEffect(() => {
    if (!processing) return;
    const timer = setInterval(() => {
      if (document.visibilityState !== "visible") return;
      documents.reload();
      collection.reload();
    }, 1500);
    return () => clearInterval(timer);
  }, [processing, documents.reload, collection.reload]);

  if (collection.error) {
    return html`<${NotHere} error=${collection.error} what="collection" back="/knowledge" backLabel="All collections" retry=${collection.reload} />`;
  }
  if (!c) return html`<${Skeleton} rows=${5} />`;
  const changed = () => {
    documents.reload();
    collection.reload();
  };
  return html`<nav class="breadcrumb" aria-label="Breadcrumb"><a href="/knowledge">Knowledge</a></nav>
    <${PageHeader}
      title=${c.name}
      actions=${html`<button type="button" onClick=${() => setEditing(true)}>Edit</button>
        <button type="button" class="danger subtle" onClick=${() => setDeleting(true)}>Delete</button>`}
    >
      ${c.description ? html`${c.description} · ` : ""}${`${c.document_count} document${c.document_count === 1 ? "" : "s"}, ${c.passage_count} passage${c.passage_count === 1 ? "" : "s"}.`}
    <//>
    <section class="section" aria-labelledby="documents-h">
      <h2 id="documents-h">Documents</h2>
      <${Upload} path=${`${path}/documents`} onAdded=${changed} onPaste=${() => setPasting(true)} />
      ${documents.error && html`<${LoadError} error=${documents.error} retry=${documents.reload} />`}
      ${documents.data && !docs.length && html`<p class="muted">No documents yet: drop files above, or paste text.</p>`}
      ${docs.length > 0 &&
      html`<div class="table-wrap">
        <table>
          <caption class="visually-hidden">Documents of ${c.name}</caption>
          <thead>
            <tr>
              <th scope="col">Document</th>
              <th scope="col">Status</th>
              <th scope="col">Passages</th>
              <th scope="col">Size</th>
              <th scope="col">Added</th>
              <th scope="col"><span class="visually-hidden">Actions</span></th>
            </tr>
          </thead>
          <tbody>
            ${docs.map(
              (d) => html`<tr key=${d.id}>
                <th scope="row">${d.title}<div class="muted">${d.source && d.source !== d.title ? d.source : d.content_type}</div></th>
                <td>
                  <span class=${`badge ${d.status === "ready" ? "ok" : d.status === "failed" ? "danger" : "warn"}`}>
                    ${humanize(d.status)}
                  </span>
                  ${d.error && html`<div class="error">${d.error}</div>`}
                </td>
                <td>${d.status === "ready" ? d.passage_count : "—"}</td>
                <td>${size(d.bytes)}</td>
                <td><${When} value=${d.created_at} /></td>
                <td class="row-actions">
                  <button type="button" class="danger subtle" onClick=${() => setRemoving(d)}>
                    Delete<span class="visually-hidden"> ${d.title}</span>
                  </button>
                </td>
              </tr>`,
            )}
          </tbody>
        </table>
      </div>`}
    </section>
    <${QueryTester} path=${path} />
    ${editing &&
    html`<${CollectionForm} collection=${c} onClose=${() => setEditing(false)} onSaved=${() => collection.reload()} />`}
    ${pasting && html`<${PasteText} path=${`${path}/documents`} onClose=${() => setPasting(false)} onAdded=${changed} />`}
    ${deleting &&
    html`<${ConfirmDialog}
      title=${`Delete ${c.name}?`}
      confirm="Delete collection"
      onClose=${() => setDeleting(false)}
      onConfirm=${async () => {
        await api("DELETE", path);
        navigate("/knowledge");
      }}
    >
      Its ${c.document_count} documents are deleted, and agents that use it stop answering from it.
    <//>`}
    ${removing &&
    html`<${ConfirmDialog}
      title=${`Delete ${removing.title}?`}
      confirm="Delete document"
      onClose=${() => setRemoving(null)}
      onConfirm=${async () => {
        await api("DELETE", `${path}/documents/${removing.id}`);
        changed();
      }}
    >
      Agents stop answering from its passages.
    <//>`}`;
}

/**
 * Files dropped or picked, uploaded one by one, each with its own result.
 * @param {{path: string, onAdded: () => void, onPaste: () => void}} p
 */
function Upload({ path, onAdded, onPaste }) {
  const input = useRef(/** @type {HTMLInputElement | null} */ (null));
  const [over, setOver] = useState(false);
  const [results, setResults] = useState(/** @type {{name: string, error?: string}[]} */ ([]));
  const [busy, setBusy] = useState(false);

  /** @param {FileList | File[]} files */
  async function send(files) {
    const list = [...files];
    if (!list.length) return;
    setBusy(true);
    /** @type {{name: string, error?: string}[]} */
    const done = [];
    for (const file of list) {
      if (file.size > MAX_BYTES) {
        done.push({ name: file.name, error: "larger than 20 MiB" });
        continue;
      }
      const body = new FormData();
      body.append("file", file, file.name);
      try {
        await api("POST", path, { body });
        done.push({ name: file.name });
      } catch (e) {
        done.push({ name: file.name, error: uploadError(e) });
      }
    }
    setResults(done);
    setBusy(false);
    onAdded();
  }

  return html`<div
      class=${over ? "dropzone over" : "dropzone"}
      role="group"
      aria-label="Add documents"
      onDragOver=${(/** @type {DragEvent} */ e) => {
        e.preventDefault();
        setOver(true);
      }}
      onDragLeave=${() => setOver(false)}
      onDrop=${(/** @type {DragEvent} */ e) => {
        e.preventDefault();
        setOver(false);
        if (e.dataTransfer) send(e.dataTransfer.files);
      }}
    >
      <p>Drop text, Markdown, HTML or PDF files here (up to 20 MiB each), or</p>
      <div class="actions">
        <button type="button" class="primary" disabled=${busy} onClick=${() => input.current?.click()}>Choose files</button>
        <button type="button" onClick=${onPaste}>Paste text</button>
      </div>
      <input
        ref=${input}
        type="file"
        multiple
        accept=${ACCEPT}
        hidden
        aria-label="Files to upload"
        onChange=${(/** @type {any} */ e) => {
          send(e.currentTarget.files);
          e.currentTarget.value = "";
        }}
      />
      ${busy && html`<p role="status">Uploading…</p>`}
    </div>
    ${results.length > 0 &&
    html`<ul class="upload-results" aria-label="Upload results">
      ${results.map(
        (r) => html`<li>
          ${r.error
            ? html`<span class="error">${`${r.name}: not added — ${r.error}`}</span>`
            : html`<span>${`${r.name}: added, processing`}</span>`}
        </li>`,
      )}
    </ul>`}`;
}

/** Why a file was refused, in a person's words. @param {unknown} e */
function uploadError(e) {
  if (!(e instanceof ApiError)) return e instanceof Error ? e.message : String(e);
  if (e.faults.some((f) => f.type.includes("enum"))) return "only text, Markdown, HTML and PDF files can be added";
  return e.faults.length ? e.faults.map((f) => f.msg).join("; ") : e.message;
}

/** @param {{path: string, onClose: () => void, onAdded: () => void}} p */
function PasteText({ path, onClose, onAdded }) {
  const form = useForm({ title: "", text: "", content_type: "text/plain" });
  return html`<${Dialog} title="Add text as a document" onClose=${onClose} wide>
    <form
      novalidate
      onSubmit=${form.submit(async () => {
        await api("POST", path, { body: form.values });
        onAdded();
        onClose();
      })}
    >
      <div class="dialog-body">
        <${TextField} form=${form} name="title" label="Title" required maxlength=${200} />
        <${SelectField}
          form=${form}
          name="content_type"
          label="Format"
          options=${[
            ["text/plain", "Plain text"],
            ["text/markdown", "Markdown"],
            ["text/html", "HTML"],
          ]}
        />
        <${Field} label="Text" error=${form.errors.text}>
          ${(/** @type {any} */ a) => html`<textarea
            ...${a}
            rows="10"
            value=${form.values.text}
            onInput=${(/** @type {any} */ e) => form.set("text", e.currentTarget.value)}
          ></textarea>`}
        <//>
        <${FormError} form=${form} fields=${["title", "text", "content_type"]} />
      </div>
      <footer>
        <button type="button" onClick=${onClose}>Cancel</button>
        <button type="submit" class="primary" disabled=${form.busy}>Add document</button>
      </footer>
    </form>
  <//>`;
}

/** What an agent would retrieve for a question. @param {{path: string}} p */
function QueryTester({ path }) {
  const form = useForm({ q: "", limit: "5" });
  const [hits, setHits] = useState(/** @type {{items: Hit[], total: number} | null} */ (null));
  return html`<section class="section" aria-labelledby="query-h">
    <h2 id="query-h">Try a question</h2>
    <p class="muted">The passages an agent would be given for it, best first, with their BM25 scores.</p>
    <form
      class="query"
      novalidate
      onSubmit=${form.submit(async () => {
        setHits(await api("GET", `${path}/query`, { query: { q: form.values.q, limit: form.values.limit } }));
      })}
    >
      <div class="row">
        <${TextField} form=${form} name="q" label="Question" required maxlength=${1000} />
        <${TextField} form=${form} name="limit" label="Passages" type="number" hint="1–50." />
      </div>
      <${FormError} form=${form} fields=${["q", "limit"]} />
      <button type="submit" class="primary" disabled=${form.busy}>Search</button>
    </form>
    ${hits &&
    (hits.items.length
      ? html`<ol class="hits" aria-label="Passages found">
          ${hits.items.map(
            (h) => html`<li key=${h.passage_id}>
              <div><strong>${h.title}</strong> <span class="muted">score ${h.score.toFixed(2)}</span></div>
              <pre class="excerpt">${h.text}</pre>
            </li>`,
          )}
        </ol>`
      : html`<p role="status">No passage has the question's words. Try other words, or add a document that answers it.</p>`)}
  </section>`;
}
