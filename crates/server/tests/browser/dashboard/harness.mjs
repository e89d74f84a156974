// What every dashboard journey needs: one Chromium shared by parallel
// contexts, a page that fails the journey on an uncaught error or a CSP
// refusal, sign-in as a person does it, and axe-core on each page state.

import { AsyncLocalStorage } from "node:async_hooks";
import { createHmac, randomUUID } from "node:crypto";
import { chromium } from "playwright-core";
import AxeBuilder from "@axe-core/playwright";

/**
 * One Chromium for the journeys; with `microphone` (a WAV file's path),
 * its fake capture device plays that file once, then silence.
 */
export function launch(microphone) {
  const media = microphone
    ? ["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream", `--use-file-for-fake-audio-capture=${microphone}%noloop`]
    : [];
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--autoplay-policy=no-user-gesture-required", ...media],
  });
}

export class JourneyError extends Error {}

/** The contexts a running journey opened (closed, and screenshotted on failure, by the runner). */
export const journey = new AsyncLocalStorage();

/** Throws unless `cond`. */
export function check(cond, why) {
  if (!cond) throw new JourneyError(why);
}

/**
 * A fresh context (its own cookies, like another browser) with one page.
 * Problems seen on the page (an uncaught error, a CSP refusal, a dialog a
 * script opened) fail the journey at its end.
 */
export async function open(browser, base, { permissions = [], viewport = { width: 1280, height: 900 } } = {}) {
  const context = await browser.newContext({ baseURL: base, viewport, permissions });
  const page = await context.newPage();
  // A loaded CI machine can be slow to answer: wait longer than the default 30 s.
  page.setDefaultTimeout(60000);
  const problems = [];
  page.on("pageerror", (e) => problems.push(`uncaught: ${e.message}`));
  page.on("console", (m) => {
    const text = m.text();
    if (/Content Security Policy|Refused to (execute|load|apply)/i.test(text)) problems.push(`CSP: ${text}`);
  });
  page.on("dialog", (d) => {
    problems.push(`a script opened a ${d.type()} dialog: ${d.message()}`);
    d.dismiss().catch(() => {});
  });
  // What the page was waiting for, for the report of a journey that fails.
  const inflight = new Map();
  page.on("request", (r) => inflight.set(r, Date.now()));
  page.on("requestfinished", (r) => inflight.delete(r));
  page.on("requestfailed", (r) => inflight.delete(r));
  const describe = async () => {
    const text = await page
      .evaluate(() => document.body?.innerText ?? "")
      .catch((e) => `(unreadable: ${e.message})`);
    const waiting = [...inflight].map(([r, at]) => `${r.method()} ${r.url()} (${Math.round((Date.now() - at) / 1000)} s)`);
    return `at ${page.url()}; page text: ${JSON.stringify(text.slice(0, 300))}; requests in flight: ${waiting.join(", ") || "none"}`;
  };
  const opened = { context, page, problems, describe };
  journey.getStore()?.push(opened);
  return opened;
}

export async function signIn(page, email, password) {
  await page.getByLabel("Email").fill(email);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
}

/** Opens `/`, signs in and waits for the first page's heading. */
export async function signedIn(browser, base, who, options) {
  const s = await open(browser, base, options);
  await s.page.goto("/");
  await s.page.getByRole("heading", { name: "Sign in to Parley" }).waitFor();
  await signIn(s.page, who.email, who.password);
  // The account menu is in the frame at every width (on a phone the
  // navigation itself folds behind a Menu button).
  await s.page.getByRole("button", { name: `Account: ${who.email}` }).waitFor();
  return s;
}

/**
 * axe-core on the page as it is now: no serious or critical violation;
 * and nothing makes the page scroll sideways.
 */
export async function axe(page, state, seen) {
  const wide = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  check(wide[0] <= wide[1], `${state}: the page is ${wide[0]}px wide in a ${wide[1]}px window`);
  const result = await new AxeBuilder({ page }).analyze();
  const bad = result.violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  check(
    !bad.length,
    `axe on ${state}: ${bad.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`).join("; ")}`,
  );
  seen?.add(state);
}

/** The API, called from outside the browser (as a customer's server would). */
export async function api(base, method, path, { key, token, body, cookie, headers: extra = {} } = {}) {
  const headers = { Accept: "application/json", ...extra };
  if (key) headers["X-API-Key"] = key;
  if (token) headers.Authorization = `Bearer ${token}`;
  if (cookie) headers.Cookie = cookie;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  return { status: r.status, body: json, text };
}

/**
 * A message from a contact on an API channel, signed as the channel's
 * backend signs it (Standard Webhooks: HMAC-SHA256 of id.timestamp.body).
 */
export async function inbound(base, channelId, secret, body) {
  const bytes = JSON.stringify(body);
  const id = `msg_${randomUUID()}`;
  const timestamp = String(Math.floor(Date.now() / 1000));
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const signature = createHmac("sha256", key).update(`${id}.${timestamp}.${bytes}`).digest("base64");
  const r = await fetch(`${base}/api/v1/channels/${channelId}/inbound`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "webhook-id": id, "webhook-timestamp": timestamp, "webhook-signature": `v1,${signature}` },
    body: bytes,
  });
  check(r.status === 201, `inbound message: ${r.status} ${await r.text()}`);
}

/** Storage a script could read must hold no token or key. */
export async function noSecretsInStorage(page) {
  const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }));
  check(!/eyJ|parley_(live|test)_|rt_/.test(stored), `web storage holds a secret: ${stored.slice(0, 200)}`);
  const cookies = await page.evaluate(() => document.cookie);
  check(!cookies.includes("parley_refresh"), `the refresh cookie is readable by scripts: ${cookies}`);
}

/**
 * Follows `page`'s requests from now on; the function it returns waits
 * until none has been in flight for `quietMs`. Playwright's "networkidle"
 * never comes on the dashboard: its live stream (/api/v1/stream) stays
 * open by design, so it is left out of the count.
 */
export function trackRequests(page) {
  const inflight = new Set();
  page.on("request", (r) => {
    if (!r.url().includes("/api/v1/stream")) inflight.add(r);
  });
  const done = (r) => inflight.delete(r);
  page.on("requestfinished", done);
  page.on("requestfailed", done);
  return async function settled(quietMs = 500, timeout = 30000) {
    const deadline = Date.now() + timeout;
    let quietSince = Date.now();
    while (Date.now() < deadline) {
      if (inflight.size) quietSince = Date.now();
      else if (Date.now() - quietSince >= quietMs) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`requests still in flight: ${[...inflight].map((r) => r.url()).join(", ")}`);
  };
}
