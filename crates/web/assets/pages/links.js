// The pages one-time links open: accepting an invitation, and setting a new
// password. The token is in the URL's fragment (never sent to a server or
// in a Referer); the page takes it into memory and drops it from the
// address bar, then sends it in a request body.

import { html, useEffect, useRef, useState } from "../lib/html.js";
import { api, ApiError } from "../lib/api.js";
import { useResource } from "../lib/data.js";
import { adoptSession } from "../lib/session.js";
import { navigate } from "../lib/router.js";
import { FormError, LoadError, Skeleton, TextField, useForm } from "../components/ui.js";

/** The link's token, read once from the fragment. */
function useLinkToken() {
  const [token] = useState(() => {
    try {
      return decodeURIComponent(location.hash.slice(1));
    } catch {
      return ""; // a mangled link: said so below
    }
  });
  useEffect(() => {
    if (location.hash) history.replaceState(null, "", location.pathname + location.search);
  }, []);
  return token;
}

/** @param {{title: string, children: any}} p */
function Card({ title, children }) {
  const heading = useRef(/** @type {HTMLHeadingElement | null} */ (null));
  useEffect(() => {
    document.title = `${title} · Parley`;
    heading.current?.focus();
  }, [title]);
  return html`<main class="sign-in" id="main">
    <div class="card">
      <div class="brand-mark" aria-hidden="true">P</div>
      <h1 tabindex="-1" ref=${heading}>${title}</h1>
      ${children}
    </div>
  </main>`;
}

/** A used, revoked or lapsed link: say so, and what to do. @param {{what: string, error: unknown}} p */
function DeadLink({ what, error }) {
  if (error instanceof ApiError && error.status === 404) {
    return html`<p class="notice error" role="alert">
      This ${what} link no longer works: it was already used, replaced by a newer one, or it expired. Ask for a new
      one.
    </p>
    <p><a href="/sign-in">Go to sign-in</a></p>`;
  }
  return html`<${LoadError} error=${error} />`;
}

/** @typedef {{workspace_name: string, email: string, role: string, expires_at: string, account_exists: boolean}} Preview */

export function AcceptInvitation() {
  const token = useLinkToken();
  const preview = useResource(
    (signal) => api("POST", "/api/v1/auth/invitations/lookup", { body: { token }, signal }),
    [token],
  );
  const form = useForm({ password: "" });
  /** @type {Preview | undefined} */
  const offer = preview.data;
  if (!token) {
    return html`<${Card} title="Join a workspace">
      <p class="notice error" role="alert">This address holds no invitation, or only part of one. Open the full link you were sent.</p>
    <//>`;
  }
  return html`<${Card} title=${offer ? `Join ${offer.workspace_name}` : "Join a workspace"}>
    ${preview.loading && !offer && html`<${Skeleton} rows=${2} />`}
    ${preview.error && html`<${DeadLink} what="invitation" error=${preview.error} />`}
    ${offer &&
    html`<form
      novalidate
      onSubmit=${form.submit(async () => {
        await adoptSession(
          await api("POST", "/api/v1/auth/invitations/accept", { body: { token, password: form.values.password } }),
        );
        navigate("/", { replace: true });
      })}
    >
      <p>
        You were invited as <strong>${offer.email}</strong>${" "}to be ${offer.role === "member" ? "a" : "an"}${" "}${offer.role}
        ${" "}of ${offer.workspace_name}.
      </p>
      <input type="email" name="username" autocomplete="username" value=${offer.email} readonly hidden />
      ${offer.account_exists
        ? html`<${TextField}
            form=${form}
            name="password"
            label="Your password"
            type="password"
            autocomplete="current-password"
            hint=${`You already have a Parley account as ${offer.email}: sign in with it to accept.`}
            required
          />`
        : html`<${TextField}
            form=${form}
            name="password"
            label="Choose a password"
            type="password"
            autocomplete="new-password"
            hint="At least 8 characters. You will sign in with your email and this password."
            required
          />`}
      <${FormError} form=${form} fields=${["password"]} />
      <button type="submit" class="primary" disabled=${form.busy}>Accept invitation</button>
    </form>`}
  <//>`;
}

export function ResetPassword() {
  const token = useLinkToken();
  const form = useForm({ password: "" });
  const [dead, setDead] = useState(/** @type {unknown} */ (null));
  if (!token) {
    return html`<${Card} title="Set a new password">
      <p class="notice error" role="alert">This address holds no reset link, or only part of one. Open the full link you were given.</p>
    <//>`;
  }
  return html`<${Card} title="Set a new password">
    ${dead
      ? html`<${DeadLink} what="password reset" error=${dead} />`
      : html`<form
          novalidate
          onSubmit=${form.submit(async () => {
            try {
              const tokens = await api("POST", "/api/v1/auth/password-reset", {
                body: { token, password: form.values.password },
              });
              await adoptSession(tokens);
              navigate("/", { replace: true });
            } catch (e) {
              if (e instanceof ApiError && e.status === 404) setDead(e);
              else throw e;
            }
          })}
        >
          <p>Every other session of your account ends when you save the new password.</p>
          <${TextField}
            form=${form}
            name="password"
            label="New password"
            type="password"
            autocomplete="new-password"
            hint="At least 8 characters."
            required
          />
          <${FormError} form=${form} fields=${["password"]} />
          <button type="submit" class="primary" disabled=${form.busy}>Save password and sign in</button>
        </form>`}
  <//>`;
}
