// Sign-in: the API's login (its lockout answers 429 with the wait, shown
// as the form's error), then back to the page the visitor asked for.

import { html, useEffect, useLayoutEffect, useRef } from "../lib/html.js";
import { signIn } from "../lib/session.js";
import { FormError, TextField, useForm } from "../components/ui.js";

/** @param {{notice: string | null, onSignedIn: () => void}} p */
export function SignIn({ notice, onSignedIn }) {
  const form = useForm({ email: "", password: "" });
  const heading = useRef(/** @type {HTMLHeadingElement | null} */ (null));
  useEffect(() => {
    document.title = "Sign in · Parley";
  }, []);
  // Before the first paint, so a key pressed as soon as the page shows is
  // not overtaken by focus moving afterwards.
  useLayoutEffect(() => heading.current?.focus(), []);
  return html`<main class="sign-in" id="main">
    <form
      class="card"
      novalidate
      onSubmit=${form.submit(async () => {
        await signIn(form.values.email.trim(), form.values.password);
        onSignedIn();
      })}
    >
      <div class="brand-mark" aria-hidden="true">P</div>
      <h1 tabindex="-1" ref=${heading}>Sign in to Parley</h1>
      ${notice && html`<p class="notice" role="status">${notice}</p>`}
      <${TextField} form=${form} name="email" label="Email" type="email" autocomplete="username" required />
      <${TextField}
        form=${form}
        name="password"
        label="Password"
        type="password"
        autocomplete="current-password"
        required
      />
      <${FormError} form=${form} fields=${["email", "password"]} />
      <button type="submit" class="primary" disabled=${form.busy}>${form.busy ? "Signing in…" : "Sign in"}</button>
      <p class="hint">
        First start? The owner's email and password were printed in the server's log when it first started.
      </p>
    </form>
  </main>`;
}
