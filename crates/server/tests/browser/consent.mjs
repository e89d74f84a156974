// Plays the person at Parley's OAuth authorization page in Debian's Chromium:
// opens the authorization URL, signs in if asked, picks the workspace and mode
// on the consent page, and allows or denies. The browser is then sent back to
// the client's redirect URI; that request is caught here (nothing needs to
// answer it), and its URL printed with the consent page's text:
//   {"redirect": "<redirect_uri>?code=…&state=…&iss=…", "consent_text": "…"}
// (consent_text is null if the server redirected without showing consent).
// Usage: node consent.mjs <authorize-url> <email> <password>
//          [--workspace ID] [--mode live|test] [--unlocked] [--deny]
// (exit 0 once the redirect is seen; non-zero with the reason otherwise)
// Fields are found by role and label, so an unlabelled control fails it.
import { chromium } from "playwright-core";

const [authorizeUrl, email, password, ...rest] = process.argv.slice(2);
const opt = (name) => (rest.includes(name) ? rest[rest.indexOf(name) + 1] : undefined);
const workspace = opt("--workspace");
const mode = opt("--mode");
const unlocked = rest.includes("--unlocked");
const deny = rest.includes("--deny");
if (!password) {
  console.error("usage: node consent.mjs AUTHORIZE_URL EMAIL PASSWORD [--workspace ID] [--mode live|test] [--unlocked] [--deny]");
  process.exit(2);
}

// The redirect URI the client asked for: any request to it (path and all,
// whatever the query) is the end of the flow.
const redirectUri = new URL(new URL(authorizeUrl).searchParams.get("redirect_uri") ?? "about:blank");
const isRedirect = (url) =>
  url.origin === redirectUri.origin && url.pathname === redirectUri.pathname;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu"],
});
const page = await browser.newPage();
page.on("console", (m) => console.error(`[page] ${m.type()}: ${m.text()}`));
const fail = async (why) => {
  const text = await page.locator("body").innerText().catch(() => "");
  throw new Error(`${why}\n--- page ${page.url()} ---\n${text}`);
};

// Seen as the browser's request, which page.route would miss: routes see
// only the first URL of a redirect chain, and this one ends a 303. The
// request itself may go nowhere; the browser is closed once it is seen.
let redirected;
const redirect = new Promise((resolve) => (redirected = resolve));
page.on("request", (r) => isRedirect(new URL(r.url())) && redirected(r.url()));
// Resolves with "redirect" or with the locator that showed up first.
const until = (locator, timeout = 15000) =>
  Promise.race([redirect.then(() => "redirect"), locator.waitFor({ timeout }).then(() => locator)]);
// A form control found by role and name attribute, which must carry a label.
const control = async (role, name) => {
  const el = page.getByRole(role).and(page.locator(`[name="${name}"]`));
  if ((await el.count()) !== 1) await fail(`no ${role} named ${name} on the consent page`);
  const labelled = await el.evaluate(
    (e) => e.labels?.length > 0 || !!e.getAttribute("aria-label") || !!e.getAttribute("aria-labelledby"),
  );
  if (!labelled) await fail(`the ${role} ${name} has no label`);
  return el;
};

let consentText = null;
try {
  await Promise.race([redirect, page.goto(authorizeUrl)]);
  const signIn = page.getByRole("button", { name: "Sign in", exact: true });
  const allow = page.getByRole("button", { name: "Allow", exact: true });
  let shown = await until(signIn.or(allow)).catch(() => fail("neither the sign-in nor the consent page was shown"));

  if (shown !== "redirect" && (await signIn.isVisible())) {
    await page.getByLabel("Email", { exact: true }).fill(email);
    await page.getByLabel("Password", { exact: true }).fill(password);
    await Promise.race([redirect, Promise.all([page.waitForEvent("load"), signIn.click()])]);
    shown = await until(signIn.or(allow));
    if (shown !== "redirect" && (await signIn.isVisible())) {
      const alert = await page.getByRole("alert").allInnerTexts();
      await fail(`signing in was refused${alert.length ? `: ${alert.join(" / ")}` : ""}`);
    }
  }

  if (shown !== "redirect") {
    consentText = await page.locator("body").innerText();
    if (workspace) await (await control("combobox", "workspace_id")).selectOption(workspace);
    if (mode) await (await control("combobox", "mode")).selectOption(mode);
    await (await control("checkbox", "workspace_locked")).setChecked(!unlocked);
    // The click waits for the navigation it starts, which may never answer.
    const decided = page.getByRole("button", { name: deny ? "Deny" : "Allow", exact: true }).click();
    await Promise.race([redirect, decided]);
  }

  const url = await Promise.race([
    redirect,
    page.waitForTimeout(15000).then(() => fail(`no redirect to ${redirectUri} after the decision`)),
  ]);
  console.log(JSON.stringify({ redirect: url, consent_text: consentText }));
} catch (e) {
  await page.screenshot({ path: "/tmp/parley-consent-failure.png" }).catch(() => {});
  console.error(e.message ?? e);
  process.exitCode = 1;
} finally {
  await browser.close();
}
