// The dashboard's journeys, each as a person would do it in Chromium
// (roles and labels, not CSS paths), run in parallel browser contexts of one
// Chromium. Every page state a journey reaches is checked with axe-core.
//
// Usage: node journeys.mjs <config.json> [journey …]
// The config (written by the Rust driver) names the server, the people and
// the workspaces it prepared. Prints "PASS <journey>" or "FAIL <journey>:
// <why>" per journey and "AXE <state>" per page state checked; exits 1 on
// any failure. Screenshots go to config.screenshots.

import { readFileSync } from "node:fs";
import { api, axe, check, inbound, journey, launch, noSecretsInStorage, open, signIn, signedIn, trackRequests } from "./harness.mjs";

const [configPath, ...only] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const { base, owner, member, screenshots } = config;
const axeStates = new Set();

/** From wherever the journey landed to the API keys page, by the navigation. */
async function toKeys(page) {
  await page.getByRole("link", { name: "API keys" }).click();
  await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
}

/** Signed in as `who`, with conversation `id` (headed `name`) open in the inbox. */
async function openConversation(browser, who, id, name) {
  const { page } = await signedIn(browser, base, who);
  await page.goto(`/inbox/${id}?view=all`);
  await page.getByRole("heading", { name, level: 2 }).waitFor();
  return page;
}

const journeys = {
  async "sign-in"(browser) {
    const { page } = await open(browser, base);
    await page.goto("/developers/api-keys");
    await page.getByRole("heading", { name: "Sign in to Parley" }).waitFor();
    check(page.url().endsWith("/sign-in?next=%2Fdevelopers%2Fapi-keys"), `redirected to ${page.url()}`);
    await axe(page, "sign-in", axeStates);
    await signIn(page, owner.email, "not the password");
    const error = page.getByRole("alert");
    await error.waitFor();
    check((await error.innerText()).includes("Invalid email or password"), await error.innerText());
    await axe(page, "sign-in with an error", axeStates);
    await page.screenshot({ path: `${screenshots}/sign-in.png` });
    await signIn(page, owner.email, owner.password);
    // Back to the page that was asked for.
    await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
    check(new URL(page.url()).pathname === "/developers/api-keys", page.url());
    await noSecretsInStorage(page);
    // A reload restores the session from the httpOnly cookie.
    await page.reload();
    await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
    // An unknown page says so inside the frame.
    await page.goto("/developers/nothing-here");
    await page.getByRole("heading", { name: "There is no page here" }).waitFor();
    await axe(page, "not found", axeStates);
    // Sign out from the account menu: back to sign-in, and staying there.
    await page.getByRole("button", { name: `Account: ${owner.email}` }).click();
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in to Parley" }).waitFor();
    await page.goto("/developers/api-keys");
    await page.getByRole("heading", { name: "Sign in to Parley" }).waitFor();
  },

  async keys(browser) {
    const { page } = await signedIn(browser, base, owner, {
      permissions: ["clipboard-read", "clipboard-write"],
    });
    await toKeys(page);
    await page.getByRole("button", { name: "Create key" }).click();
    const dialog = page.getByRole("dialog", { name: "Create a live key" });
    await dialog.waitFor();
    await axe(page, "create key", axeStates);
    // The API's 422 is shown next to the field it names.
    await dialog.getByRole("button", { name: "Create key" }).click();
    const name = dialog.getByLabel("Name");
    await page.waitForFunction(() => document.activeElement?.getAttribute("aria-invalid") === "true");
    check((await name.getAttribute("aria-invalid")) === "true", "the empty name is not marked invalid");
    const described = await name.getAttribute("aria-describedby");
    const fault = await page.locator(`[id="${described.split(" ").pop()}"]`).innerText();
    check(fault.length > 0, "no error next to Name");
    await axe(page, "create key with an error", axeStates);
    await name.fill("CI deploy");
    await dialog.getByRole("button", { name: "Create key" }).click();
    const shown = page.getByRole("dialog", { name: "Copy your new key" });
    await shown.waitFor();
    const key = await shown.getByLabel("CI deploy").inputValue();
    check(/^parley_live_/.test(key), `the new key: ${key}`);
    await shown.getByRole("button", { name: "Copy key" }).click();
    await shown.getByText("Copied").waitFor();
    check((await page.evaluate(() => navigator.clipboard.readText())) === key, "the clipboard holds the key");
    await axe(page, "new key", axeStates);
    await shown.getByRole("button", { name: "Done" }).click();
    const row = page.getByRole("row", { name: /CI deploy/ });
    await row.waitFor();
    check((await row.innerText()).includes("Active"), await row.innerText());
    check(!(await page.locator("main").innerText()).includes(key), "the full key is shown after the dialog closed");
    check((await api(base, "GET", "/api/v1/agents", { key })).status === 200, "the new key works");
    await page.screenshot({ path: `${screenshots}/api-keys.png` });
    // Revoke, after a confirmation; the very next request with it is a 401.
    await row.getByRole("button", { name: "Revoke CI deploy" }).click();
    const confirm = page.getByRole("dialog", { name: "Revoke CI deploy?" });
    await confirm.waitFor();
    await axe(page, "revoke key", axeStates);
    await confirm.getByRole("button", { name: "Revoke key" }).click();
    await row.getByText("Revoked").waitFor();
    const refused = await api(base, "GET", "/api/v1/agents", { key });
    check(refused.status === 401, `the revoked key got ${refused.status}`);
  },

  async modes(browser) {
    const { page } = await signedIn(browser, base, owner);
    await toKeys(page);
    const live = config.workspaces.a.live_key_name;
    await page.getByRole("row", { name: new RegExp(live) }).waitFor();
    const toggle = page.getByRole("switch", { name: "Test mode" });
    check((await toggle.getAttribute("aria-checked")) === "false", "starts in live mode");
    check(!(await page.getByText("You are looking at test data").isVisible()), "a banner in live mode");
    await toggle.click();
    const banner = page.getByRole("status").filter({ hasText: "Test mode" });
    await banner.waitFor();
    check((await toggle.getAttribute("aria-checked")) === "true", "the switch shows test mode");
    // Everything shown is the test mode's: its keys, not the live ones.
    await page.getByRole("row", { name: new RegExp(config.workspaces.a.test_key_name) }).waitFor();
    await page.getByText("This list shows test keys").waitFor();
    check(!(await page.getByRole("row", { name: new RegExp(live) }).count()), "a live key is listed in test mode");
    await axe(page, "test mode", axeStates);
    await page.screenshot({ path: `${screenshots}/test-mode.png` });
    // Another workspace, same mode; a reload keeps both (the cookie does).
    await page.getByLabel("Workspace").selectOption({ label: config.workspaces.b.name });
    await page.getByRole("row", { name: new RegExp(config.workspaces.b.test_key_name) }).waitFor();
    await page.reload();
    await banner.waitFor();
    check(
      (await page.getByLabel("Workspace").inputValue()) === String(config.workspaces.b.id),
      "the workspace did not survive a reload",
    );
    await page.getByRole("row", { name: new RegExp(config.workspaces.b.test_key_name) }).waitFor();
    await toggle.click();
    await page.getByRole("status").filter({ hasText: "Test mode" }).waitFor({ state: "detached" });
  },

  async member(browser) {
    const { page } = await signedIn(browser, base, member);
    // A member lands on Home too: the figures are theirs to see.
    await page.getByRole("heading", { name: "Home", level: 1 }).waitFor();
    await page.getByRole("region", { name: "Calls" }).waitFor();
    await page.getByRole("link", { name: "API keys" }).click();
    await page.getByRole("heading", { name: "Only owners and admins manage API keys" }).waitFor();
    check(!(await page.getByRole("button", { name: "Create key" }).count()), "a member is offered Create key");
    await axe(page, "member without key access", axeStates);
    // Hiding the button is not the wall: the API refuses a crafted request.
    const login = await api(base, "POST", "/api/v1/auth/login", { body: member });
    check(login.status === 200, `member login: ${login.text}`);
    const token = login.body.access_token;
    const create = await api(base, "POST", "/api/v1/api-keys", { token, body: { name: "sneaky", mode: "live" } });
    check(create.status === 403, `a member creating a key got ${create.status}`);
    const list = await api(base, "GET", "/api/v1/api-keys?mode=live", { token });
    check(list.status === 403, `a member listing keys got ${list.status}`);
    const revoke = await api(base, "DELETE", `/api/v1/api-keys/${config.workspaces.a.live_key_id}`, { token });
    check(revoke.status === 403, `a member revoking a key got ${revoke.status}`);
    // Billing: the figures, but no credit to add; a crafted credit is refused.
    await page.getByRole("link", { name: "Billing" }).click();
    await page.getByRole("region", { name: "Balance" }).waitFor();
    check(!(await page.getByRole("button", { name: "Add credit" }).count()), "a member is offered Add credit");
    const credit = await api(base, "POST", "/api/v1/billing/credits", { token, body: { amount_cents: 100 } });
    check(credit.status === 403, `a member adding credit got ${credit.status}`);
    // Nor a test-balance reset: not offered in test mode, and refused.
    await page.getByRole("switch", { name: "Test mode" }).click();
    await page.getByRole("status").filter({ hasText: "Test mode" }).waitFor();
    await page.getByRole("region", { name: "Balance" }).getByText(/^Live balance: \$/).waitFor();
    check(!(await page.getByRole("button", { name: "Reset the test balance" }).count()), "a member is offered the reset");
    const test = await api(base, "POST", "/api/v1/auth/workspace", {
      token,
      body: { workspace_id: config.workspaces.a.id, mode: "test" },
    });
    check(test.status === 200, `member to test mode: ${test.text}`);
    const reset = await api(base, "POST", "/api/v1/billing/reset", { token: test.body.access_token });
    check(reset.status === 403, `a member resetting the test balance got ${reset.status}`);
  },

  async xss(browser) {
    const { page } = await signedIn(browser, base, owner);
    await toKeys(page);
    const payloads = [`<img src=x onerror="window.__pwned=1">`, "javascript:window.__pwned=2", "<b>bold</b>"];
    for (const payload of payloads) {
      await page.getByRole("button", { name: "Create key" }).click();
      const dialog = page.getByRole("dialog", { name: "Create a live key" });
      await dialog.getByLabel("Name").fill(payload);
      await dialog.getByRole("button", { name: "Create key" }).click();
      await page.getByRole("button", { name: "Done" }).click();
      await page.getByRole("rowheader", { name: payload, exact: true }).waitFor();
    }
    // The workspace's own name (set by its owner) is markup too.
    check(
      (await page.getByLabel("Workspace").locator("option").allInnerTexts()).includes(config.workspaces.b.name),
      "the workspace name is not shown as text",
    );
    check((await page.evaluate(() => /** @type {any} */ (window).__pwned)) === undefined, "a payload ran");
    check(!(await page.locator("main img, main b").count()), "markup from a name was rendered");
    await page.screenshot({ path: `${screenshots}/xss.png` });
  },

  // An owner invites; the invitee accepts in another browser; roles change
  // and a removal ends the removed person's session.
  async members(browser) {
    const { page } = await signedIn(browser, base, owner);
    await page.getByRole("link", { name: "Members" }).click();
    await page.getByRole("heading", { name: "Members", level: 1 }).waitFor();
    await page.getByRole("row", { name: new RegExp(member.email) }).waitFor();
    await axe(page, "members", axeStates);
    // The only owner is not offered Leave (the API would answer 409): told why instead.
    const ownRow = page.getByRole("row", { name: new RegExp(owner.email) });
    await ownRow.getByText("The only owner: make someone else an owner to leave").waitFor();
    check(!(await ownRow.getByRole("button", { name: "Leave workspace" }).count()), "the only owner is offered Leave");
    await page.getByRole("button", { name: "Invite member" }).click();
    const dialog = page.getByRole("dialog", { name: "Invite a member" });
    await dialog.getByRole("button", { name: "Create invitation" }).click();
    const email = dialog.getByLabel("Email");
    await page.waitForFunction(() => document.activeElement?.getAttribute("aria-invalid") === "true");
    check((await email.getAttribute("aria-invalid")) === "true", "the empty email is not marked invalid");
    await axe(page, "invite with an error", axeStates);
    await email.fill("sam@example.com");
    await dialog.getByLabel("Role").selectOption("admin");
    await dialog.getByRole("button", { name: "Create invitation" }).click();
    const sent = page.getByRole("dialog", { name: "Send this link" });
    const link = await sent.getByLabel("Invitation link for sam@example.com").inputValue();
    check(/\/invitation#inv_/.test(link), `the link: ${link}`);
    await axe(page, "invitation link", axeStates);
    await sent.getByRole("button", { name: "Done" }).click();
    await page.getByRole("row", { name: /sam@example\.com/ }).waitFor();
    await page.screenshot({ path: `${screenshots}/members.png` });

    // The invitee, in their own browser, opens the link (the server's
    // public URL may differ from this test server's: keep the fragment).
    const invitee = await open(browser, base);
    const fragment = link.slice(link.indexOf("#"));
    await invitee.page.goto(`/invitation${fragment}`);
    await invitee.page.getByRole("heading", { name: `Join ${config.workspaces.a.name}` }).waitFor();
    check(!invitee.page.url().includes("#"), `the token stayed in the address bar: ${invitee.page.url()}`);
    await axe(invitee.page, "accept invitation", axeStates);
    const password = invitee.page.getByLabel("Choose a password");
    await password.fill("short");
    await invitee.page.getByRole("button", { name: "Accept invitation" }).click();
    await invitee.page.waitForFunction(() => document.activeElement?.getAttribute("aria-invalid") === "true");
    await password.fill("sam's long password");
    await invitee.page.getByRole("button", { name: "Accept invitation" }).click();
    // Signed in as an admin: on Home, and keys are theirs to make.
    await invitee.page.getByRole("heading", { name: "Home", level: 1 }).waitFor();
    await toKeys(invitee.page);
    await invitee.page.getByRole("button", { name: "Create key" }).waitFor();
    // The link is used up.
    const late = await open(browser, base);
    await late.page.goto(`/invitation${fragment}`);
    await late.page.getByText("This invitation link no longer works").waitFor();

    // The owner makes the new admin a member: the API says so at once.
    await page.reload();
    const samRow = page.getByRole("row", { name: /sam@example\.com/ });
    await samRow.getByText("admin", { exact: true }).waitFor();
    await samRow.getByRole("button", { name: "Change role of sam@example.com" }).click();
    const change = page.getByRole("dialog", { name: "Change the role of sam@example.com" });
    // Choosing is not yet changing: nothing is sent until Save.
    await change.getByLabel("Role").selectOption("owner");
    await change.getByText("An owner can do everything you can").waitFor();
    await axe(page, "change role", axeStates);
    await change.getByLabel("Role").selectOption("member");
    await change.getByRole("button", { name: "Save role" }).click();
    await samRow.getByText("member", { exact: true }).waitFor();
    await invitee.page.reload();
    await invitee.page.getByRole("heading", { name: "Only owners and admins manage API keys" }).waitFor();
    // Removed: their next click ends their session.
    await page.getByRole("button", { name: "Remove sam@example.com" }).click();
    await page.getByRole("dialog", { name: "Remove sam@example.com?" }).getByRole("button", { name: "Remove member" }).click();
    await page.getByRole("row", { name: /sam@example\.com/ }).waitFor({ state: "detached" });
    await invitee.page.getByRole("link", { name: "Members" }).click();
    await invitee.page.getByRole("heading", { name: "Sign in to Parley" }).waitFor();
  },

  // A member sees who is in the workspace, and nothing to manage.
  async "member-list"(browser) {
    const { page } = await signedIn(browser, base, member);
    await page.getByRole("link", { name: "Members" }).click();
    await page.getByRole("heading", { name: "Only owners and admins invite people" }).waitFor();
    await page.getByRole("row", { name: new RegExp(owner.email) }).waitFor();
    check(!(await page.getByRole("button", { name: "Invite member" }).count()), "a member is offered Invite member");
    check(!(await page.getByRole("button", { name: /^Change role/ }).count()), "a member is offered role changes");
    await axe(page, "members as a member", axeStates);
  },

  // `parley user reset-password` printed a link (made by the driver).
  async "reset-password"(browser) {
    const { page } = await open(browser, base);
    const fragment = config.reset_url.slice(config.reset_url.indexOf("#"));
    await page.goto(`/reset-password${fragment}`);
    await page.getByRole("heading", { name: "Set a new password" }).waitFor();
    await axe(page, "reset password", axeStates);
    const field = page.getByLabel("New password");
    await field.fill("short");
    await page.getByRole("button", { name: "Save password and sign in" }).click();
    await page.waitForFunction(() => document.activeElement?.getAttribute("aria-invalid") === "true");
    const described = await field.getAttribute("aria-describedby");
    check(described?.includes("error"), "no error tied to New password");
    await field.fill("rae's brand new password");
    await page.getByRole("button", { name: "Save password and sign in" }).click();
    await page.getByRole("navigation", { name: "Main" }).waitFor();
    const old = await api(base, "POST", "/api/v1/auth/login", { body: config.resetting });
    check(old.status === 401, `the old password still works: ${old.status}`);
    const fresh = await api(base, "POST", "/api/v1/auth/login", {
      body: { email: config.resetting.email, password: "rae's brand new password" },
    });
    check(fresh.status === 200, `the new password does not work: ${fresh.status}`);
    // A used link says so.
    const again = await open(browser, base);
    await again.page.goto(`/reset-password${fragment}`);
    await again.page.getByLabel("New password").fill("yet another password");
    await again.page.getByRole("button", { name: "Save password and sign in" }).click();
    await again.page.getByText("This password reset link no longer works").waitFor();
  },

  // An owner adds an endpoint (its secret shown once), sends a test event,
  // sees the delivery land and resends it; rotates the secret; disables it.
  async webhooks(browser) {
    const { page } = await signedIn(browser, base, owner, { permissions: ["clipboard-read", "clipboard-write"] });
    await page.getByRole("link", { name: "Webhooks" }).click();
    await page.getByRole("heading", { name: "No live endpoints yet" }).waitFor();
    await axe(page, "webhooks, none yet", axeStates);
    await page.getByRole("button", { name: "Add endpoint" }).click();
    const dialog = page.getByRole("dialog", { name: "Add an endpoint" });
    const url = dialog.getByLabel("Endpoint URL");
    await url.fill("ftp://example.com/hook");
    await dialog.getByRole("button", { name: "Add endpoint" }).click();
    await page.waitForFunction(() => document.activeElement?.getAttribute("aria-invalid") === "true");
    check((await url.getAttribute("aria-invalid")) === "true", "the bad URL is not marked invalid");
    await axe(page, "add endpoint with an error", axeStates);
    await url.fill(config.receiver_url);
    await dialog.getByLabel("Description (optional)").fill(`<img src=x onerror="window.__pwned=4">Staging`);
    await dialog.getByLabel("All events, including types added later").uncheck();
    await dialog.getByLabel("webhook.test").check();
    await dialog.getByLabel("message.received").check();
    await dialog.getByRole("button", { name: "Add endpoint" }).click();
    const secret = page.getByRole("dialog", { name: "Copy the signing secret" });
    check(/^whsec_/.test(await secret.getByLabel("Signing secret").inputValue()), "no whsec_ secret shown");
    await secret.getByRole("button", { name: "Done" }).click();
    await page.getByRole("heading", { name: "Webhook endpoint", level: 1 }).waitFor();
    await page.getByText(`<img src=x onerror="window.__pwned=4">Staging`).waitFor();
    await page.getByText("Nothing was sent here yet").waitFor();
    await page.getByRole("button", { name: "Send test event" }).click();
    const delivered = page.getByRole("row", { name: /webhook\.test/ });
    await delivered.getByText("HTTP 200").waitFor({ timeout: 15000 });
    await axe(page, "webhook endpoint", axeStates);
    await page.screenshot({ path: `${screenshots}/webhook.png` });
    await delivered.first().getByRole("button", { name: /Resend webhook\.test/ }).click();
    await page.waitForFunction(() => document.querySelectorAll("tbody tr").length >= 2, null, { timeout: 15000 });
    // Rotation shows the new secret once.
    await page.getByRole("button", { name: "Rotate secret" }).click();
    await page.getByRole("dialog", { name: "Rotate the signing secret?" }).getByRole("button", { name: "Rotate secret" }).click();
    const rotated = page.getByRole("dialog", { name: "Copy the new signing secret" });
    check(/^whsec_/.test(await rotated.getByLabel("Signing secret").inputValue()), "no new secret shown");
    await rotated.getByRole("button", { name: "Done" }).click();
    await page.getByRole("button", { name: "Disable" }).click();
    await page.getByText("The endpoint is disabled.").waitFor();
    await page.getByRole("button", { name: "Enable" }).waitFor();
    check(await page.getByRole("button", { name: "Send test event" }).isDisabled(), "a disabled endpoint offers a test");
    check((await page.evaluate(() => /** @type {any} */ (window).__pwned)) === undefined, "a payload ran");
    // Another workspace's endpoint id is the same 404 as none.
    await page.goto("/developers/webhooks/999999");
    await page.getByRole("heading", { name: "There is no such endpoint here" }).waitFor();
    // The member sees the API's 403, said plainly.
    const m = await signedIn(browser, base, member);
    await m.page.goto("/developers/webhooks");
    await m.page.getByRole("heading", { name: "Only owners and admins manage webhooks" }).waitFor();
  },

  async "connected-apps"(browser) {
    const { page } = await signedIn(browser, base, owner);
    await page.getByRole("link", { name: "Connected apps" }).click();
    await page.getByRole("heading", { name: "No connected apps" }).waitFor();
    await axe(page, "connected apps, none", axeStates);
  },

  // A test call placed from the form, followed live to its end, then
  // heard: the recording plays (by range requests) under its waveform and
  // the transcript follows it; a click on a line seeks there. Home counts it.
  async calls(browser) {
    const { page } = await signedIn(browser, base, owner);
    await page.getByRole("heading", { name: "Home", level: 1 }).waitFor();
    await page.getByRole("switch", { name: "Test mode" }).click();
    await page.getByRole("status").filter({ hasText: "Test mode" }).waitFor();
    await page.getByRole("link", { name: "Calls" }).first().click();
    await page.getByRole("heading", { name: "No test calls yet" }).waitFor();
    await axe(page, "calls, none yet", axeStates);
    await page.getByRole("button", { name: "Place a test call" }).first().click();
    const dialog = page.getByRole("dialog", { name: "Place a test call" });
    await dialog.waitFor();
    // The API's 422 lands next to the number.
    await dialog.getByLabel("Number to call").fill("not a number");
    await dialog.getByRole("button", { name: "Place call" }).click();
    const to = dialog.getByLabel("Number to call");
    await page.waitForFunction(() => document.activeElement?.getAttribute("aria-invalid") === "true");
    check((await to.getAttribute("aria-invalid")) === "true", "the bad number is not marked invalid");
    await axe(page, "place call with an error", axeStates);
    await to.fill("+14155550100");
    await dialog.getByLabel("Agent").selectOption({ label: config.agent_name });
    const ranges = [];
    page.on("response", (r) => {
      if (r.url().includes("/files/")) ranges.push(r.status());
    });
    await dialog.getByRole("button", { name: "Place call" }).click();
    await page.getByRole("heading", { name: "Call to +14155550100", level: 1 }).waitFor();
    // Followed live: it ends and its recording arrives without a reload.
    await page.locator("main").getByText("Completed", { exact: true }).first().waitFor({ timeout: 60000 });
    const player = page.getByLabel("Call recording");
    await player.waitFor({ timeout: 30000 });
    const transcript = page.getByRole("list").filter({ has: page.getByRole("button", { name: /^Play from/ }) });
    const lines = transcript.getByRole("listitem");
    await lines.first().waitFor();
    check((await lines.count()) === 5, `${await lines.count()} transcript lines`);
    check((await lines.first().innerText()).includes(config.first_message), await lines.first().innerText());
    // The waveform is drawn from the file: both lanes have bars taller
    // than the 1-unit floor somewhere (someone spoke on each side).
    await page.waitForFunction(() => {
      const svg = document.querySelector("svg.wave");
      const loud = (cls) => {
        const d = svg?.querySelector(`path.bars.${cls}:not(.played)`)?.getAttribute("d") ?? "";
        return [...d.matchAll(/v([0-9.]+)/g)].some((m) => Number(m[1]) > 10);
      };
      return loud("caller") && loud("agent");
    });
    await axe(page, "call page", axeStates);
    await page.screenshot({ path: `${screenshots}/call.png`, fullPage: true });
    // A click on the third line plays from its start, and marks it current.
    const third = lines.nth(2);
    const segments = (await api(base, "GET", `/api/v1/calls/${page.url().split("/").pop()}/transcript`, { key: config.test_key })).body.segments;
    // Paused right after the seek (a slow machine may not play past it
    // first): the current line is the one the position is in, the third.
    await third.getByRole("button").click();
    await page.waitForFunction(() => document.querySelector("audio")?.seeking === false && document.querySelector("audio").currentTime > 0);
    await player.evaluate((a) => a.pause());
    const at = await player.evaluate((a) => a.currentTime * 1000);
    check(at >= segments[2].start_ms - 50, `the recording is at ${at} ms, the line starts at ${segments[2].start_ms} ms`);
    const expected = segments.filter((s) => s.start_ms <= at).pop().index;
    await page.waitForFunction((i) => document.querySelector("[aria-current='true']")?.getAttribute("data-index") === String(i), expected);
    check(expected === segments[2].index, `the recording is at ${at} ms, past the clicked line`);
    await player.evaluate((a) => a.play());
    // Playing moves the highlight on to the next line by itself.
    await page.waitForFunction(
      (next) => document.querySelector(`[data-index="${next}"]`)?.getAttribute("aria-current") === "true",
      3,
      { timeout: 20000 },
    );
    check(ranges.includes(206), `the recording was never fetched by range: ${ranges}`);
    // Post-call analysis needs a model: asked for with the builtin engine,
    // the page says why it could not be made (the live stream brings it).
    const analysis = page.getByRole("region", { name: "Analysis" });
    await analysis.getByText(/^Not analysed/).waitFor();
    await analysis.getByRole("button", { name: "Analyse now" }).click();
    await analysis.getByRole("status").filter({ hasText: "Queued" }).waitFor();
    await analysis.getByText(/The analysis failed: .*not a model/).waitFor({ timeout: 20000 });
    // Another workspace's call, or a live one seen in test mode, is the
    // same "no such call" as a missing one.
    for (const id of [config.calls.foreign, config.calls.a, "call_nothing"]) {
      await page.goto(`/calls/${id}`);
      await page.getByRole("heading", { name: "There is no such call" }).waitFor();
    }
    // Home counts the call among today's.
    await page.getByRole("link", { name: "Home", exact: true }).click();
    const calls = page.getByRole("region", { name: "Calls" });
    await calls.getByText(/^1 today/).waitFor();
    await axe(page, "home", axeStates);
    await page.screenshot({ path: `${screenshots}/home.png` });
    // The list follows the live stream: a call placed elsewhere (here,
    // through the API) shows up and moves on without a reload.
    await page.getByRole("link", { name: "Calls" }).first().click();
    await page.getByRole("heading", { name: "Calls", level: 1 }).waitFor();
    const agents = (await api(base, "GET", "/api/v1/agents", { key: config.test_key })).body.agents;
    const agentId = agents.find((a) => a.name === config.agent_name).id;
    const placed = await api(base, "POST", "/api/v1/calls", {
      key: config.test_key,
      headers: { "Idempotency-Key": `journey-live-${Date.now()}` },
      body: { agent_id: agentId, to: "+14155550123" },
    });
    check(placed.status === 201, `placing a call through the API: ${placed.text}`);
    const row = page.getByRole("row").filter({ hasText: "+14155550123" });
    await row.waitFor({ timeout: 10000 });
    await row.getByText("Completed", { exact: true }).waitFor({ timeout: 60000 });
  },

  // An agent from nothing: created (its name is text, never markup),
  // edited with the API's and the schema editor's faults next to their
  // fields, paused and activated, tried in the playground with the answer
  // streamed, and its run listed.
  async agents(browser) {
    const { page } = await signedIn(browser, base, owner);
    await page.getByRole("link", { name: "Agents", exact: true }).click();
    await page.getByRole("heading", { name: "Agents", level: 1 }).waitFor();
    await page.getByRole("button", { name: "Create agent" }).first().click();
    const dialog = page.getByRole("dialog", { name: "Create an agent" });
    await dialog.getByRole("button", { name: "Create agent" }).click();
    await page.waitForFunction(() => document.activeElement?.getAttribute("aria-invalid") === "true");
    check((await dialog.getByLabel("Name").getAttribute("aria-invalid")) === "true", "the empty name is not marked");
    await axe(page, "create agent with an error", axeStates);
    const name = `<img src=x onerror="window.__pwned=5">Nova`;
    await dialog.getByLabel("Name").fill(name);
    await dialog.getByLabel("First message (optional)").fill("Hi, Nova here.");
    await dialog.getByRole("button", { name: "Create agent" }).click();
    await page.getByRole("heading", { name, level: 1 }).waitFor();
    check((await page.evaluate(() => window.__pwned)) === undefined, "the agent's name ran as markup");
    await axe(page, "agent settings", axeStates);

    // The schema editor says what is wrong as it is typed; the save is refused.
    await page.getByRole("button", { name: "Add an HTTP tool" }).click();
    const tool = page.getByRole("group", { name: /^HTTP tool/ });
    await tool.getByLabel("Name").fill("book_table");
    await tool.getByLabel("URL").fill("https://example.com/book");
    await tool.getByLabel("Description").fill("Books a table");
    const schema = tool.getByLabel("Arguments (JSON Schema)");
    await schema.fill('{"type": "object", "required": ["day"]}');
    await page.getByText('"day" is required but not among the properties.').waitFor();
    await page.getByRole("button", { name: "Save changes" }).click();
    await page.waitForFunction(() => document.activeElement?.getAttribute("aria-invalid") === "true");
    check(await schema.evaluate((e) => e === document.activeElement), "the bad schema does not take focus");
    await axe(page, "agent settings with an error", axeStates);
    await schema.fill('{"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]}');
    // The API's own 422 lands next to the field it names.
    await page.getByLabel("End of turn (ms)").fill("50");
    await page.getByRole("button", { name: "Save changes" }).click();
    const endOfTurn = page.getByLabel("End of turn (ms)");
    await page.waitForFunction(() => document.activeElement?.getAttribute("aria-invalid") === "true");
    check((await endOfTurn.getAttribute("aria-invalid")) === "true", "the API's fault is not next to End of turn");
    await endOfTurn.fill("700");
    await page.getByLabel("System prompt").fill("You are Nova. Be brief.");
    // Unsaved changes survive a look at another tab.
    const agentTabs = page.getByRole("navigation", { name: "Agent" });
    await agentTabs.getByRole("link", { name: "Runs" }).click();
    await agentTabs.getByRole("link", { name: "Settings" }).click();
    await page.getByRole("status").filter({ hasText: "Your unsaved changes are still here" }).waitFor();
    const kept = await page.getByLabel("System prompt").inputValue();
    check(kept === "You are Nova. Be brief.", `the unsaved system prompt came back as ${JSON.stringify(kept)}`);
    await page.getByRole("button", { name: "Save changes" }).click();
    await page.getByRole("status").filter({ hasText: "Saved." }).waitFor();
    const id = new URL(page.url()).pathname.split("/")[2];
    const saved = (await api(base, "GET", `/api/v1/agents/${id}`, { key: config.live_key })).body;
    check(saved.system_prompt === "You are Nova. Be brief." && saved.end_of_turn_ms === 700, JSON.stringify(saved));
    check(saved.tools.some((t) => t.name === "book_table" && t.parameters.required[0] === "day"), JSON.stringify(saved.tools));

    // Voicemail detection: leaving a message asks for the message, next to its field.
    await page.getByLabel("When a machine answers").selectOption("leave_message");
    await page.getByRole("button", { name: "Save changes" }).click();
    const voicemailMessage = page.getByLabel("Voicemail message");
    await page.waitForFunction(() => document.activeElement?.getAttribute("aria-invalid") === "true");
    check((await voicemailMessage.getAttribute("aria-invalid")) === "true", "the missing voicemail message is not marked");
    await axe(page, "agent voicemail settings with an error", axeStates);
    await page.getByRole("group", { name: "Voice on calls" }).screenshot({ path: `${screenshots}/agent-voice.png` });
    await voicemailMessage.fill("Hi, this is Nova from Acme. Please call us back.");
    const patched = page.waitForResponse((r) => r.request().method() === "PATCH" && r.url().endsWith(`/api/v1/agents/${id}`));
    await page.getByRole("button", { name: "Save changes" }).click();
    check((await patched).status() === 200, "the voicemail settings were refused");
    const voicemail = (await api(base, "GET", `/api/v1/agents/${id}`, { key: config.live_key })).body.voicemail;
    check(voicemail?.action === "leave_message" && voicemail.message.startsWith("Hi, this is Nova") && voicemail.beep_wait_s === 30, JSON.stringify(voicemail));

    // Status moves as the API allows.
    await page.getByRole("button", { name: "Pause" }).click();
    await page.getByRole("button", { name: "Activate" }).waitFor();
    await page.getByRole("button", { name: "Activate" }).click();
    await page.getByRole("button", { name: "Pause" }).waitFor();

    // Triggers: a bad regular expression is refused next to its field; one
    // that compiles is added, turned off, and removed.
    await page.getByRole("link", { name: "Triggers", exact: true }).click();
    await page.getByText("No triggers: this agent answers only conversations given to it.").waitFor();
    await page.getByLabel("Matching (optional)").fill("(book");
    await page.getByLabel("As").selectOption("regex");
    await page.getByRole("button", { name: "Add trigger" }).click();
    await page.waitForFunction(() => document.activeElement?.getAttribute("aria-invalid") === "true");
    check((await page.getByLabel("Matching (optional)").getAttribute("aria-invalid")) === "true", "the bad regex is not marked");
    await axe(page, "agent triggers with an error", axeStates);
    await page.getByLabel("Matching (optional)").fill("book|table");
    await page.getByRole("button", { name: "Add trigger" }).click();
    const triggers = page.getByRole("table", { name: /^Triggers of/ });
    const row = triggers.getByRole("row", { name: /book\|table/ });
    await row.getByText("On", { exact: true }).waitFor();
    await row.getByRole("button", { name: /^Turn off/ }).click();
    await row.getByText("Off", { exact: true }).waitFor();
    const listed = (await api(base, "GET", `/api/v1/agents/${id}/triggers`, { key: config.live_key })).body.items;
    check(listed.length === 1 && listed[0].pattern === "book|table" && listed[0].enabled === false, JSON.stringify(listed));
    await row.getByRole("button", { name: /^Remove/ }).click();
    await triggers.waitFor({ state: "detached" });

    // The playground streams the answer (Server-Sent Events) and says what it would do.
    await page.getByRole("link", { name: "Playground" }).click();
    const streamed = page.waitForResponse((r) => r.url().endsWith(`/api/v1/agents/${id}/chat`));
    await page.getByLabel(/^Message to/).fill("Can I book a table?");
    await page.getByRole("button", { name: "Send" }).click();
    const response = await streamed;
    check(response.headers()["content-type"].startsWith("text/event-stream"), response.headers()["content-type"]);
    const reply = page.getByRole("list", { name: "Conversation with the agent" }).getByRole("listitem").nth(1);
    await reply.getByText("Would hand off to a person").waitFor();
    check((await reply.innerText()).includes("Let me get a person"), await reply.innerText());
    await axe(page, "playground", axeStates);
    await page.screenshot({ path: `${screenshots}/playground.png` });
    await page.getByRole("link", { name: "Runs", exact: true }).click();
    await page.getByRole("table", { name: /^Runs of/ }).getByRole("row").nth(1).waitFor();

    // An unsaved draft is its author's: whoever signs in next in this tab
    // sees the saved settings.
    await page.getByRole("navigation", { name: "Agent" }).getByRole("link", { name: "Settings" }).click();
    await page.getByLabel("System prompt").fill("A draft nobody saved.");
    await page.getByRole("button", { name: `Account: ${owner.email}` }).click();
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "Sign in to Parley" }).waitFor();
    await signIn(page, config.member.email, config.member.password);
    await page.getByRole("button", { name: `Account: ${config.member.email}` }).waitFor();
    // Within the page, as a person clicks (a load would clear memory anyway).
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Agents", exact: true }).click();
    await page.getByRole("link", { name: saved.name, exact: true }).click();
    const prompt = page.getByLabel("System prompt");
    await prompt.waitFor();
    check((await prompt.inputValue()) === "You are Nova. Be brief.", `the next person saw ${await prompt.inputValue()}`);
    check(!(await page.getByText("Your unsaved changes are still here").count()), "another person's draft was offered");
  },

  // Knowledge from files: a collection, documents dropped and picked (a
  // wrong kind refused with its reason), followed until ready, a question
  // answered with its passages; then an agent given the collection quotes
  // it in the playground, showing the passage it was given.
  async knowledge(browser) {
    const { page } = await signedIn(browser, base, owner);
    await page.getByRole("link", { name: "Knowledge" }).click();
    await page.getByRole("heading", { name: "No collections yet" }).waitFor();
    await axe(page, "knowledge, none yet", axeStates);
    await page.getByRole("button", { name: "Create collection" }).click();
    const dialog = page.getByRole("dialog", { name: "Create a collection" });
    await dialog.getByLabel("Name").fill("Help center");
    await dialog.getByRole("button", { name: "Create collection" }).click();
    await page.getByRole("heading", { name: "Help center", level: 1 }).waitFor();
    // Picked: a Markdown file, and a picture that is refused with the reason.
    await page.getByLabel("Files to upload").setInputFiles([
      { name: "hours.md", mimeType: "text/markdown", buffer: Buffer.from("# Opening hours\n\nWe open at 9am on weekdays.\n\n## Weekends\n\nOn Saturdays we open at 10am.\n") },
      { name: "photo.png", mimeType: "image/png", buffer: Buffer.from([137, 80, 78, 71]) },
    ]);
    const results = page.getByRole("list", { name: "Upload results" });
    await results.getByText("added, processing").waitFor();
    check((await results.innerText()).includes("photo.png: not added"), await results.innerText());
    // Dropped: a file dragged onto the drop zone.
    const dropped = await page.evaluateHandle(() => {
      const d = new DataTransfer();
      d.items.add(new File(["Returns are free within 30 days of delivery."], "returns.txt", { type: "text/plain" }));
      return d;
    });
    await page.getByRole("group", { name: "Add documents" }).dispatchEvent("drop", { dataTransfer: dropped });
    const documents = page.getByRole("table", { name: "Documents of Help center" });
    await documents.getByRole("row", { name: /returns\.txt/ }).waitFor();
    // Both become ready without a reload.
    for (const title of ["hours.md", "returns.txt"]) {
      await documents.getByRole("row", { name: new RegExp(title.replace(".", "\\.")) }).getByText("Ready").waitFor({ timeout: 30000 });
    }
    await axe(page, "collection", axeStates);
    await page.getByRole("textbox", { name: "Question" }).fill("When do you open on Saturday?");
    await page.getByRole("button", { name: "Search" }).click();
    const hits = page.getByRole("list", { name: "Passages found" });
    await hits.waitFor();
    check((await hits.getByRole("listitem").first().innerText()).includes("On Saturdays we open at 10am."), await hits.innerText());
    await page.screenshot({ path: `${screenshots}/knowledge.png`, fullPage: true });

    // The agent answers from it, and the playground shows what it was given.
    await page.getByRole("link", { name: "Agents", exact: true }).click();
    await page.getByRole("link", { name: config.knowledge_agent }).click();
    await page.getByRole("checkbox", { name: "Help center" }).check();
    await page.getByRole("button", { name: "Save changes" }).click();
    await page.getByRole("status").filter({ hasText: "Saved." }).waitFor();
    await page.getByRole("link", { name: "Playground" }).click();
    await page.getByLabel(/^Message to/).fill("Are you open on Saturday?");
    await page.getByRole("button", { name: "Send" }).click();
    const reply = page.getByRole("list", { name: "Conversation with the agent" }).getByRole("listitem").nth(1);
    await reply.getByText(/^\d+ passages? from knowledge$/).click();
    await reply.getByText("On Saturdays we open at 10am.").first().waitFor();
    check((await reply.innerText()).includes("hours.md"), await reply.innerText());
  },

  // Contacts from a CSV: a bad row is named with its fault and nothing is
  // written; fixed, the file imports. Searched, opened, edited, and a
  // duplicate merged into the first; what people typed is shown as text.
  async contacts(browser) {
    const { page } = await signedIn(browser, base, owner);
    // In the other workspace, whose live mode has no contact yet.
    await page.getByLabel("Workspace").selectOption({ label: config.workspaces.b.name });
    await page.getByRole("link", { name: "Contacts" }).click();
    await page.getByRole("heading", { name: "No live contacts yet" }).waitFor();
    const key = config.workspaces.b.live_key;
    await axe(page, "contacts, none yet", axeStates);
    await page.getByRole("button", { name: "Import CSV" }).first().click();
    const dialog = page.getByRole("dialog", { name: "Import contacts from CSV" });
    const csv = (rows) => ({ name: "contacts.csv", mimeType: "text/csv", buffer: Buffer.from(rows.join("\n")) });
    const header = "display_name,phone,email,tags";
    const pwn = `<img src=x onerror="window.__pwned=6">Zed`;
    await dialog.getByLabel("CSV file").setInputFiles(csv([header, "Ana Lima,+14155550101,ana@example.org,vip", "Bo,not a phone,,", `"${pwn.replaceAll('"', '""')}",,zed@example.org,`]));
    await dialog.getByRole("button", { name: "Import" }).click();
    const fault = dialog.getByRole("alert");
    await fault.waitFor();
    check((await fault.innerText()).includes("Row 2, phone"), await fault.innerText());
    await axe(page, "import with a bad row", axeStates);
    const none = await api(base, "GET", "/api/v1/contacts", { key });
    check(none.body.total === 0, `a refused import wrote ${none.body.total} contacts`);
    await dialog.getByLabel("CSV file").setInputFiles(csv([header, "Ana Lima,+14155550101,ana@example.org,vip", "Bo,(415) 555-0102,,", `"${pwn.replaceAll('"', '""')}",,zed@example.org,`]));
    await dialog.getByRole("button", { name: "Import" }).click();
    await dialog.getByText("Imported: 3 created, 0 updated, 0 unchanged.").waitFor();
    await dialog.getByRole("button", { name: "Done" }).click();
    const table = page.getByRole("table", { name: "live contacts" });
    await table.getByRole("row", { name: /Zed/ }).waitFor();
    check((await page.evaluate(() => window.__pwned)) === undefined, "a contact's name ran as markup");
    // A phone typed as people type it finds the contact.
    await page.getByRole("searchbox", { name: "Search" }).fill("(415) 555-0102");
    await table.getByRole("row").nth(2).waitFor({ state: "detached" });
    await table.getByRole("link", { name: "Bo" }).click();
    await page.getByRole("heading", { name: "Bo", level: 1 }).waitFor();
    await axe(page, "contact", axeStates);
    // Edit: a phone another contact has is refused, saying whose it is.
    await page.getByRole("button", { name: "Edit" }).click();
    const edit = page.getByRole("dialog", { name: "Edit Bo" });
    await edit.getByLabel("Phone").fill("+14155550101");
    await edit.getByRole("button", { name: "Save" }).click();
    await edit.getByRole("alert").getByText(/already has the phone number/).waitFor();
    await edit.getByLabel("Phone").fill("+14155550102");
    await edit.getByLabel("Name").fill("Bo Lima");
    await edit.getByRole("button", { name: "Save" }).click();
    await page.getByRole("heading", { name: "Bo Lima", level: 1 }).waitFor();
    // Merge Ana into Bo: Bo keeps its phone and gains Ana's email.
    await page.getByRole("button", { name: "Merge a duplicate" }).click();
    const merge = page.getByRole("dialog", { name: "Merge into Bo Lima" });
    await merge.getByRole("searchbox", { name: "Find the duplicate" }).fill("Ana");
    await merge.getByRole("radio", { name: /Ana Lima/ }).check();
    await axe(page, "merge contacts", axeStates);
    await merge.getByRole("button", { name: "Merge Ana Lima into Bo Lima" }).click();
    await merge.waitFor({ state: "detached" });
    await page.getByRole("definition").filter({ hasText: "ana@example.org" }).waitFor();
    const left = (await api(base, "GET", "/api/v1/contacts", { key })).body.items.map((c) => c.display_name).sort();
    check(JSON.stringify(left) === JSON.stringify(["Bo Lima", pwn].sort()), `after the merge: ${left}`);
    await page.screenshot({ path: `${screenshots}/contact.png` });
  },

  // Channels from their settings schema: an SMS channel against the local
  // Twilio-format server (a bad sender named next to its field, the
  // provider's addresses with copy buttons, credentials checked, then
  // broken and reported), and a webchat with its snippet and live preview.
  async channels(browser) {
    const { context, page } = await signedIn(browser, base, owner, { permissions: ["clipboard-read", "clipboard-write"] });
    // In the other workspace's live mode, which no call has given a voice channel.
    await page.getByLabel("Workspace").selectOption({ label: config.workspaces.b.name });
    await page.getByRole("link", { name: "Channels" }).click();
    await page.getByRole("heading", { name: "No live channels yet" }).waitFor();
    await axe(page, "channels, none yet", axeStates);
    await page.getByRole("button", { name: "Connect a channel" }).first().click();
    const dialog = page.getByRole("dialog", { name: "Connect a channel" });
    await dialog.getByLabel("Type").selectOption({ label: "SMS (Twilio)" });
    await dialog.getByLabel("Name").fill("Support SMS");
    // What an SMS channel cannot work without is not called optional.
    await dialog.getByLabel("Account sid", { exact: true }).fill(config.twilio.account_sid);
    await dialog.getByLabel(/^Auth token/).fill(config.twilio.auth_token);
    check((await dialog.getByLabel(/^Auth token/).getAttribute("type")) === "password", "the secret setting is shown as typed");
    await dialog.getByLabel(/^From/).fill("not a number");
    await dialog.getByLabel(/^Base url/).fill(config.twilio.base_url);
    await dialog.getByRole("button", { name: "Connect" }).click();
    await page.waitForFunction(() => document.activeElement?.getAttribute("aria-invalid") === "true");
    check((await dialog.getByLabel(/^From/).getAttribute("aria-invalid")) === "true", "the bad sender is not marked");
    await axe(page, "connect sms with an error", axeStates);
    await dialog.getByLabel(/^From/).fill("+14155550199");
    await dialog.getByRole("button", { name: "Connect" }).click();
    await page.getByRole("heading", { name: "Support SMS", level: 1 }).waitFor();
    const publicId = await page.getByRole("definition").filter({ hasText: /^sms_/ }).innerText();
    const inbound = `/hooks/twilio/${publicId}/inbound`;
    await page.getByRole("code").filter({ hasText: inbound }).waitFor();
    await page.getByRole("button", { name: "Copy: A message comes in (HTTP POST)" }).click();
    check((await page.evaluate(() => navigator.clipboard.readText())).endsWith(inbound), "the copied address");
    await page.getByRole("button", { name: "Check credentials" }).click();
    await page.getByText("The credentials work.").waitFor();
    await axe(page, "sms channel", axeStates);
    // A wrong token: the check fails and the channel says why.
    await page.getByLabel(/^Auth token/).fill("not-the-token");
    await page.getByRole("button", { name: "Save settings" }).click();
    await page.getByRole("status").filter({ hasText: "Saved." }).waitFor();
    await page.getByRole("button", { name: "Check credentials" }).click();
    await page.getByText("The check failed.").waitFor();
    await page.locator("main").getByText("Error", { exact: true }).waitFor();
    await page.screenshot({ path: `${screenshots}/channel.png`, fullPage: true });

    // A webchat: its snippet, and a preview page where the widget opens.
    await page.getByRole("navigation", { name: "Breadcrumb" }).getByRole("link", { name: "Channels" }).click();
    await page.getByRole("button", { name: "Connect a channel" }).first().click();
    await dialog.getByLabel("Type").selectOption({ label: "Webchat widget" });
    await dialog.getByLabel("Name").fill("Website chat");
    await dialog.getByRole("button", { name: "Connect" }).click();
    await page.getByRole("heading", { name: "Website chat", level: 1 }).waitFor();
    const snippet = await page.getByText(/^<script src=.*webchat\/widget\.js" data-channel="wc_/).innerText();
    await axe(page, "webchat channel", axeStates);
    const [preview] = await Promise.all([
      context.waitForEvent("page"),
      page.getByRole("link", { name: /Open a live preview/ }).click(),
    ]);
    await preview.getByRole("heading", { name: "Webchat preview" }).waitFor();
    await preview.getByRole("textbox", { name: "Message" }).fill("Hello from the preview");
    await preview.keyboard.press("Enter");
    await preview.getByText("Hello from the preview").waitFor();
    await axe(preview, "webchat preview", axeStates);
    check(snippet.includes(`data-channel="wc_`), snippet);
  },

  // Billing: the balance, usage by agent, an owner's credit landing on the
  // ledger (filtered by type), and the runs behind the costs.
  async billing(browser) {
    const { page } = await signedIn(browser, base, owner);
    await page.getByRole("link", { name: "Billing" }).click();
    await page.getByRole("heading", { name: "Billing", level: 1 }).waitFor();
    const balance = page.getByRole("region", { name: "Balance" });
    await balance.getByText(/^\$/).first().waitFor();
    const before = await balance.locator("p").first().innerText();
    await page.getByRole("img", { name: /in 30 days: .*Live Ava/ }).waitFor();
    await axe(page, "billing", axeStates);
    await page.getByRole("button", { name: "Add credit" }).click();
    const dialog = page.getByRole("dialog", { name: "Add live credit" });
    await dialog.getByLabel("Amount (USD)").fill("-5");
    await dialog.getByRole("button", { name: "Add credit" }).click();
    await page.waitForFunction(() => document.activeElement?.getAttribute("aria-invalid") === "true");
    check((await dialog.getByLabel("Amount (USD)").getAttribute("aria-invalid")) === "true", "the API's fault is not on Amount");
    await dialog.getByLabel("Amount (USD)").fill("25");
    await dialog.getByLabel("Description (optional)").fill("Invoice 2026-11");
    await dialog.getByRole("button", { name: "Add credit" }).click();
    await dialog.waitFor({ state: "detached" });
    const ledger = page.getByRole("table", { name: "Ledger entries, newest first" });
    await ledger.getByRole("row", { name: /Invoice 2026-11/ }).getByText("+$25.00").waitFor();
    await page.waitForFunction((b) => document.querySelector("[aria-label='Balance'] p")?.textContent !== b, before);
    await page.getByLabel("Type").selectOption("charge");
    await ledger.getByRole("row", { name: /Invoice 2026-11/ }).waitFor({ state: "detached" });
    check(new URL(page.url()).searchParams.get("type") === "charge", page.url());
    await page.screenshot({ path: `${screenshots}/billing.png`, fullPage: true });
    // The runs behind the costs, and one run's page.
    await page.getByRole("link", { name: "Agent runs" }).click();
    await page.getByRole("heading", { name: "Agent runs", level: 1 }).waitFor();
    await page.getByRole("link", { name: /^Run #/ }).first().click();
    await page.getByRole("heading", { name: /^Run #\d+$/, level: 1 }).waitFor();
    await page.getByRole("heading", { name: "Tool calls" }).waitFor();
    await axe(page, "run", axeStates);
  },

  // A new workspace's Home says what to do; in test mode one click seeds a
  // demo that comes alive: an agent answering, a test call ringing.
  async demo(browser) {
    const { page } = await signedIn(browser, base, owner);
    await page.getByLabel("Workspace").selectOption({ label: config.workspaces.c.name });
    await page.getByRole("heading", { name: "Nothing has happened here yet" }).waitFor();
    check(!(await page.getByRole("button", { name: "Seed a demo" }).count()), "a demo is offered in live mode");
    await page.getByRole("switch", { name: "Test mode" }).click();
    await page.getByRole("button", { name: "Seed a demo" }).waitFor();
    await axe(page, "home, quiet", axeStates);
    await page.getByRole("button", { name: "Seed a demo" }).click();
    await page.getByRole("status").filter({ hasText: "The demo is ready" }).waitFor({ timeout: 30000 });
    await page.getByRole("region", { name: "Messages" }).getByText(/^3 in · \d+ out today$/).waitFor();
    await page.getByRole("region", { name: "Calls" }).getByText(/^1 today/).waitFor();
    await axe(page, "home with the demo", axeStates);
    await page.screenshot({ path: `${screenshots}/demo.png` });
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Agents", exact: true }).click();
    await page.getByRole("link", { name: "Ava (demo)" }).click();
    await page.getByRole("link", { name: "Runs", exact: true }).click();
    await page.getByRole("table", { name: /^Runs of/ }).getByRole("row").nth(3).waitFor({ timeout: 30000 });
    // A visitor's contact page lists their chat.
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Contacts" }).click();
    await page.getByRole("link", { name: "Ana Lima" }).click();
    await page.getByText("Webchat conversation").waitFor();
    await axe(page, "contact with a chat", axeStates);
    // A mangled address is no page, not a crash.
    await page.goto("/agents/%E0%A4%A");
    await page.getByRole("heading", { name: "There is no page here" }).waitFor();
  },

  // A live call's page: each agent turn's latency as a chart, whose text
  // says the figures too.
  async latency(browser) {
    const { page } = await signedIn(browser, base, owner);
    await page.getByRole("link", { name: "Calls" }).first().click();
    await page.getByRole("row", { name: /To \+14155550111/ }).getByRole("link").click();
    await page.getByRole("heading", { name: "Latency per turn" }).waitFor();
    const chart = page.getByRole("img", { name: /^Latency per agent turn/ });
    const label = await chart.getAttribute("aria-label");
    check(label.includes("Turn 1: 990 ms voice to voice") && label.includes("Turn 2: 990 ms"), label);
    await page.getByText("p50 990 ms · p95 990 ms over 2 turns").waitFor();
    await axe(page, "call page with latency", axeStates);
    await page.screenshot({ path: `${screenshots}/latency.png`, fullPage: true });
    // The callee's contact lists the call in their timeline, and leads back to it.
    await page.getByRole("link", { name: "Open contact" }).click();
    await page.getByRole("heading", { name: "+14155550111", level: 1 }).waitFor();
    await page.getByRole("link", { name: /^Completed, / }).click();
    await page.getByRole("heading", { name: "Call to +14155550111", level: 1 }).waitFor();
  },

  // On a phone: nothing scrolls sideways, and the page starts on screen.
  async phone(browser) {
    const viewport = { width: 390, height: 844 };
    const { page } = await signedIn(browser, base, owner, { viewport });
    const settled = trackRequests(page);
    const paths = ["/", "/agents", "/calls", `/calls/${config.calls.a}`, "/contacts", "/knowledge", "/channels", "/billing", "/runs", "/developers/api-keys", "/settings/members", "/developers/webhooks"];
    for (const path of paths) {
      await page.goto(path);
      const heading = page.getByRole("heading", { level: 1 });
      await heading.waitFor();
      await settled();
      const wide = await page.evaluate(() => document.documentElement.scrollWidth);
      check(wide <= viewport.width, `${path} is ${wide}px wide on a ${viewport.width}px screen`);
      // The page starts at the top: the navigation is folded away.
      const box = await heading.boundingBox();
      check(box !== null && box.y < 250, `${path}: the heading starts at ${box?.y}px, far down the screen`);
      // Every page with its rows (the other journeys check most of them empty, at desktop width).
      await axe(page, `${path === `/calls/${config.calls.a}` ? "/calls/{id}" : path} on a phone`, axeStates);
    }
    await page.screenshot({ path: `${screenshots}/phone.png` });
    // The Menu button unfolds the navigation; following a link folds it again.
    const nav = page.getByRole("navigation", { name: "Main" });
    check(!(await nav.isVisible()), "the navigation is open on a phone before it is asked for");
    await page.getByRole("button", { name: "Menu" }).click();
    await nav.getByRole("link", { name: "Contacts" }).click();
    await page.getByRole("heading", { name: "Contacts", level: 1 }).waitFor();
    await nav.waitFor({ state: "hidden" });
    check((await page.getByRole("button", { name: "Menu" }).getAttribute("aria-expanded")) === "false", "the menu stays open");
  },

  // The access token lives `config.access_token_ttl` seconds: the page
  // renews it before expiry, and when the session is ended elsewhere the
  // next renewal fails and the page returns to sign-in, saying why.
  async expiry(browser) {
    const { context, page } = await signedIn(browser, base, owner);
    await toKeys(page);
    const renewed = await page.waitForResponse((r) => r.url().endsWith("/api/v1/auth/refresh"), {
      timeout: (config.access_token_ttl + 5) * 1000,
    });
    check(renewed.status() === 200, `silent refresh answered ${renewed.status()}`);
    // Still signed in and working after the first token expired.
    await page.getByRole("link", { name: "API keys" }).click();
    await page.getByRole("row", { name: new RegExp(config.workspaces.a.live_key_name) }).waitFor();
    // The session ends elsewhere (signed out from another device).
    const cookie = (await context.cookies()).find((c) => c.name === "parley_refresh");
    check(cookie?.httpOnly, "the refresh cookie is not httpOnly");
    const out = await api(base, "POST", "/api/v1/auth/logout", { cookie: `parley_refresh=${cookie.value}` });
    check(out.status === 204, `logout: ${out.status}`);
    await page.getByRole("heading", { name: "Sign in to Parley" }).waitFor({ timeout: (config.access_token_ttl + 10) * 1000 });
    await page.getByText("Your session ended. Sign in again to continue.").waitFor();
    check(page.url().includes("next=%2Fdevelopers%2Fapi-keys"), page.url());
    await signIn(page, owner.email, owner.password);
    await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
  },

  // The inbox: a contact asked for a person. The owner finds the handoff,
  // accepts it, replies (text stays text), leaves a private note, labels
  // the conversation, sees the contact's next message arrive live, and
  // gives the conversation back to the agent.
  async inbox(browser) {
    const { page } = await signedIn(browser, base, owner);
    // Settings › Inbox: a canned response, refused first for its short code.
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Inbox settings" }).click();
    await page.getByRole("heading", { name: "Inbox settings", level: 1 }).waitFor();
    await page.getByRole("heading", { name: "No canned responses yet" }).waitFor();
    await axe(page, "inbox settings", axeStates);
    const cannedForm = page.getByRole("form", { name: "New canned response" });
    await cannedForm.getByLabel("Short code").fill("two words");
    await cannedForm.getByLabel("Reply").fill("Thanks {{contact.first_name}}, we are on it.");
    await cannedForm.getByRole("button", { name: "Save response" }).click();
    await cannedForm.getByText("use letters, digits, - and _ only (no spaces)").waitFor();
    check(
      await cannedForm.getByLabel("Short code").evaluate((e) => e.getAttribute("aria-invalid") === "true"),
      "the short code's error is not tied to its field",
    );
    await axe(page, "inbox settings with an error", axeStates);
    await cannedForm.getByLabel("Short code").fill("thanks");
    await cannedForm.getByRole("button", { name: "Save response" }).click();
    await page.getByRole("button", { name: "Delete /thanks" }).waitFor();
    await page.screenshot({ path: `${screenshots}/inbox-settings.png` });

    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Inbox", exact: true }).click();
    await page.getByRole("heading", { name: "Inbox", level: 1 }).waitFor();
    await page.getByRole("heading", { name: "Nothing assigned to you" }).waitFor();
    await axe(page, "inbox, nothing mine", axeStates);
    await page.getByRole("navigation", { name: "Inbox views" }).getByRole("link", { name: /^Handoffs waiting/ }).click();
    const list = page.getByRole("list", { name: "Conversations" });
    await list.getByRole("link", { name: /Lia Moreau/ }).click();
    await page.getByRole("heading", { name: "Lia Moreau", level: 2 }).waitFor();
    await page.getByRole("status").filter({ hasText: "Asked for a person" }).waitFor();
    check(/^\(\d+\) Inbox/.test(await page.title()), `the tab's title counts nothing waiting: ${await page.title()}`);
    await axe(page, "inbox, handoff waiting", axeStates);

    await page.getByRole("button", { name: "Accept handoff" }).click();
    await page.getByText("Handled by You").waitFor();
    const thread = page.getByRole("list", { name: "Messages and notes" });
    // "/" offers the canned responses; one picked is filled for this contact.
    const box = page.getByRole("textbox", { name: "Reply" });
    await box.fill("/tha");
    await page.getByRole("list", { name: "Canned responses" }).getByRole("button", { name: /^\/thanks/ }).click();
    check((await box.inputValue()) === "Thanks Lia, we are on it.", `the canned response reads ${await box.inputValue()}`);
    const reply = "Hi Lia, <b>Ana</b> here. Let me check.";
    await page.getByRole("textbox", { name: "Reply" }).fill(reply);
    await page.getByRole("button", { name: "Send" }).click();
    await thread.getByText(reply, { exact: true }).waitFor();
    check(!(await thread.locator("b").count()), "a reply's markup was rendered");
    await page.getByRole("radio", { name: "Private note" }).check();
    await page.getByRole("textbox", { name: "Private note" }).fill("Refund over $100: @mia@example.com please approve");
    await page.getByRole("button", { name: "Add note" }).click();
    await thread.getByText(/^Private note · You/).waitFor();
    // An empty note is refused next to the box.
    await page.getByRole("button", { name: "Add note" }).click();
    await page.getByRole("alert").filter({ hasText: "Write the note first." }).waitFor();
    await page.getByRole("checkbox", { name: "vip" }).check();
    await page.getByRole("navigation", { name: "Inbox views" }).getByRole("link", { name: /^Mine/ }).click();
    await list.getByRole("link", { name: /Lia Moreau/ }).filter({ hasText: "vip" }).waitFor();
    await list.getByRole("link", { name: /Lia Moreau/ }).click();
    // The contact writes again: it shows in the thread without a reload.
    await inbound(base, config.inbox.channel_id, config.inbox.secret, { from: "lia-1", text: "Thanks! It is order 1234.", external_id: "inbox-2" });
    await thread.getByText("Thanks! It is order 1234.").waitFor({ timeout: 10000 });
    await axe(page, "inbox, taken over", axeStates);
    await page.screenshot({ path: `${screenshots}/inbox.png` });

    await page.getByRole("button", { name: "Give back to agent" }).click();
    await page.getByText(/Answered by agent/).waitFor();
    await axe(page, "inbox, given back", axeStates);
    // The agent answers the next message; why it said it folds under its reply.
    await inbound(base, config.inbox.channel_id, config.inbox.secret, { from: "lia-1", text: "And the invoice?", external_id: "inbox-4" });
    const why = thread.getByText(/^How the agent answered: \d+ tool calls?, \d+ passages? read/).first();
    await why.waitFor({ timeout: 15000 });
    await why.click();
    await thread.getByRole("link", { name: /^Run #\d+$/ }).first().waitFor();
    // Keyboard: r goes to the reply box; e resolves.
    await page.getByRole("heading", { name: "Lia Moreau", level: 2 }).click();
    await page.keyboard.press("r");
    check(await page.getByRole("textbox", { name: "Reply" }).evaluate((e) => e === document.activeElement), "r does not focus the reply");
    await page.getByRole("heading", { name: "Lia Moreau", level: 2 }).click();
    await page.keyboard.press("e");
    await page.getByRole("button", { name: "Reopen" }).waitFor();

    // Many at once: tick two, resolve them in one go; they leave the open list.
    await page.goto("/inbox?view=all");
    for (const name of ["Ola Berg", "Pia Lund"]) await list.getByRole("checkbox", { name: `Select ${name}` }).check();
    const bulk = page.getByRole("group", { name: "Selected conversations" });
    await bulk.getByText("2 selected").waitFor();
    await axe(page, "inbox, two selected", axeStates);
    await bulk.getByRole("button", { name: "Resolve" }).click();
    await page.getByRole("status").filter({ hasText: "2 conversations resolved." }).waitFor();
    for (const name of ["Ola Berg", "Pia Lund"]) await list.getByRole("link", { name: new RegExp(name) }).waitFor({ state: "detached" });
  },

  // Two members on one conversation: each sees the other viewing, then
  // typing; a reply sent while the other types asks once more.
  async "inbox-together"(browser) {
    const path = `/inbox/${config.inbox.noah}?view=all`;
    const ana = (await signedIn(browser, base, owner)).page;
    await ana.goto(path);
    await ana.getByRole("heading", { name: "Noah Park", level: 2 }).waitFor();
    const mia = (await signedIn(browser, base, member)).page;
    await mia.goto(path);
    await mia.getByRole("heading", { name: "Noah Park", level: 2 }).waitFor();
    const anaSees = ana.getByRole("status").filter({ hasText: "mia@example.com is" });
    await anaSees.filter({ hasText: "mia@example.com is viewing" }).waitFor({ timeout: 10000 });
    await mia.getByRole("status").filter({ hasText: "ana@example.com is viewing" }).waitFor({ timeout: 10000 });
    await mia.getByRole("textbox", { name: "Reply" }).pressSequentially("Hi Noah, checking");
    await anaSees.filter({ hasText: "mia@example.com is typing…" }).waitFor({ timeout: 10000 });
    await ana.getByRole("textbox", { name: "Reply" }).fill("It shipped yesterday.");
    await ana.getByRole("button", { name: "Send" }).click();
    await ana.getByRole("alert").filter({ hasText: "mia@example.com is typing a reply too. Send yours anyway?" }).waitFor();
    await axe(ana, "inbox, two members", axeStates);
    await ana.screenshot({ path: `${screenshots}/inbox-together.png` });
    await ana.getByRole("button", { name: "Send anyway" }).click();
    await ana.getByRole("list", { name: "Messages and notes" }).getByText("It shipped yesterday.").waitFor();
    // Mia's thread shows Ana's reply live.
    await mia.getByRole("list", { name: "Messages and notes" }).getByText("It shipped yesterday.").waitFor({ timeout: 10000 });
    // Mia mentions Ana in a note: Ana's bell says so, and leads to the conversation.
    await mia.getByRole("radio", { name: "Private note" }).check();
    await mia.getByRole("textbox", { name: "Private note" }).fill("@ana@example.com is this the order from Tuesday?");
    await mia.getByRole("button", { name: "Add note" }).click();
    const bell = ana.getByRole("button", { name: /^Notifications/ });
    await ana.getByRole("list", { name: "Messages and notes" }).getByText("is this the order from Tuesday?").waitFor({ timeout: 10000 });
    await bell.click();
    const told = ana.getByRole("list", { name: "Notifications" }).getByRole("link", { name: /^Unread: You were mentioned in a note on Noah Park/ });
    await told.waitFor({ timeout: 10000 });
    await axe(ana, "notifications", axeStates);
    await ana.goto("/inbox?view=all");
    await ana.getByRole("button", { name: /^Notifications/ }).click();
    await ana.getByRole("list", { name: "Notifications" }).getByRole("link", { name: /You were mentioned in a note on Noah Park/ }).click();
    await ana.getByRole("heading", { name: "Noah Park", level: 2 }).waitFor();
    check(new URL(ana.url()).pathname === `/inbox/${config.inbox.noah}`, `the notification led to ${ana.url()}`);
  },

  // An SMS conversation: the composer counts the segments as the send
  // will (an emoji makes it UCS-2); the reply goes out on the channel.
  async "inbox-sms"(browser) {
    const page = await openConversation(browser, owner, config.inbox.sms, "Sam Ortiz");
    await page.getByRole("button", { name: "Accept handoff" }).click();
    await page.getByText("Handled by You").waitFor();
    const box = page.getByRole("textbox", { name: "Reply" });
    await box.fill("Hi Sam, your refund is on its way.");
    await page.getByText("1 SMS segment · GSM-7").waitFor();
    const reply = "Hi Sam, your refund of $25 is on its way and should reach your card within three days 🙂";
    await box.fill(reply);
    await page.getByText(/^2 SMS segments · UCS-2/).waitFor();
    await axe(page, "inbox, sms reply", axeStates);
    await page.screenshot({ path: `${screenshots}/inbox-sms.png` });
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByRole("list", { name: "Messages and notes" }).getByText(reply).waitFor();
    check((await box.inputValue()) === "", "the reply box was not emptied after sending");
    // Snooze it until tomorrow morning, wake it, then close it for good.
    await page.getByRole("button", { name: "Snooze…" }).click();
    const snooze = page.getByRole("dialog", { name: "Snooze until" });
    await snooze.getByRole("radio", { name: /^Tomorrow at 9:00/ }).check();
    await axe(page, "snooze", axeStates);
    await snooze.getByRole("button", { name: "Snooze" }).click();
    await page.getByRole("status").filter({ hasText: /^Snoozed until/ }).waitFor();
    await page.getByRole("button", { name: "Wake now" }).click();
    await page.getByRole("button", { name: "Resolve" }).waitFor();
    await page.getByRole("button", { name: "Close", exact: true }).click();
    await page.getByRole("dialog", { name: "Close this conversation?" }).getByRole("button", { name: "Close conversation" }).click();
    await page.getByText("Sms · Closed").waitFor();
    check(!(await page.getByRole("textbox", { name: "Reply" }).count()), "a closed conversation still offers a reply");
  },

  // A visitor chats on the shop's site; the agent answers; the visitor asks
  // for a person. A member sees the handoff arrive without a reload,
  // accepts and replies; the visitor sees the reply while the agent stays
  // silent; given back, the agent answers the visitor's next message.
  async "inbox-webchat"(browser) {
    const { page } = await signedIn(browser, base, member);
    await page.goto("/inbox?view=handoffs");
    const list = page.getByRole("list", { name: "Conversations" });
    await list.waitFor();
    const visitor = (await open(browser, config.webchat.page)).page;
    await visitor.goto("/");
    await visitor.getByRole("button", { name: "Chat with us" }).click();
    const chat = visitor.getByRole("dialog", { name: "Chat" });
    await chat.getByText("online").waitFor({ timeout: 15000 });
    const say = async (text) => {
      await chat.getByRole("textbox", { name: "Message" }).fill(text);
      await chat.getByRole("button", { name: "Send" }).click();
      await chat.getByText(text).waitFor();
    };
    await say("Hello, do you ship to Norway?");
    await chat.getByText(config.webchat.agent_answer).first().waitFor({ timeout: 30000 });
    await say("Could a real person help me?");
    // The handoff reaches the member's list live.
    const row = list.getByRole("link").filter({ hasText: "Could a real person help me?" });
    await row.waitFor({ timeout: 15000 });
    await row.click();
    // A visitor who gave no name is named for people, not by its random id.
    await page.getByRole("heading", { name: /^Website visitor \w{4}$/, level: 2 }).waitFor();
    await page.getByRole("status").filter({ hasText: 'The contact wrote "person"' }).waitFor();
    await page.getByRole("button", { name: "Accept handoff" }).click();
    await page.getByText("Handled by You").waitFor();
    const thread = page.getByRole("list", { name: "Messages and notes" });
    await page.getByRole("textbox", { name: "Reply" }).fill("Hi, Mia here. Yes, we ship to Norway.");
    // With our shipping rates attached: a file goes as a link the visitor can open.
    await page.getByLabel("Attach files").setInputFiles({ name: "rates.txt", mimeType: "text/plain", buffer: Buffer.from("Norway: 12 EUR") });
    await page.getByRole("list", { name: "Files to send" }).getByText("rates.txt").waitFor();
    await page.getByRole("button", { name: "Send" }).click();
    await thread.getByText("Hi, Mia here. Yes, we ship to Norway.").waitFor();
    await thread.getByRole("link", { name: "rates.txt" }).waitFor();
    await chat.getByText("Hi, Mia here. Yes, we ship to Norway.").waitFor({ timeout: 15000 });
    const file = chat.getByRole("link", { name: "rates.txt" });
    const fetched = await visitor.evaluate(async (href) => (await fetch(href)).text(), await file.getAttribute("href"));
    check(fetched === "Norway: 12 EUR", `the visitor's attachment downloads as ${fetched}`);
    // The visitor answers the person; only the person's reply came, the agent's never.
    await say("Great, thanks Mia!");
    await thread.getByText("Great, thanks Mia!").waitFor({ timeout: 10000 });
    await axe(page, "inbox, webchat", axeStates);
    await page.screenshot({ path: `${screenshots}/inbox-webchat.png` });
    await visitor.screenshot({ path: `${screenshots}/webchat-visitor.png` });
    await page.waitForTimeout(1500);
    check((await chat.getByText(config.webchat.agent_answer).count()) === 1, "the agent answered while a person handled the conversation");
    // Given back to the agent (the conversation's own, chosen), it answers the next message.
    check((await page.getByLabel("Agent to give it back to").inputValue()) === String(config.webchat.agent_id), "the conversation's agent is not the one chosen");
    await page.getByRole("button", { name: "Give back to agent" }).click();
    await page.getByText("Answered by agent Wren").waitFor();
    await say("One more question: do you gift wrap?");
    await chat.getByText(config.webchat.agent_answer).nth(1).waitFor({ timeout: 30000 });
    await thread.getByText(config.webchat.agent_answer).nth(1).waitFor({ timeout: 10000 });
  },

  // Two members press Accept on one handoff at the same moment: one has it,
  // the other is told who and sees it is theirs.
  async "inbox-race"(browser) {
    const path = `/inbox/${config.inbox.uma}?view=all`;
    const people = [member, config.second_member];
    const pages = [];
    // Both presses reach the server together: each accept is held until
    // the other has been pressed too. Otherwise, on a slow machine, the
    // first accept's event reaches the other page before its click, its
    // button goes (rightly), and there is no race to see.
    let pressed = 0;
    /** @type {(v?: unknown) => void} */
    let release = () => {};
    const bothPressed = new Promise((resolve) => (release = resolve));
    for (const who of people) {
      const { page } = await signedIn(browser, base, who);
      await page.route("**/api/v1/handoffs/*/accept", async (route) => {
        if (++pressed === people.length) release();
        await bothPressed;
        await route.continue();
      });
      await page.goto(path);
      await page.getByRole("button", { name: "Accept handoff" }).waitFor();
      pages.push(page);
    }
    await Promise.all(pages.map((p) => p.getByRole("button", { name: "Accept handoff" }).click()));
    // Each page settles: its own accept, or the other's named in an alert.
    const settled = await Promise.all(
      pages.map((p) =>
        Promise.race([
          p.getByText("Handled by You").waitFor().then(() => "won"),
          p.getByRole("alert").filter({ hasText: /was already accepted by/ }).waitFor().then(() => "lost"),
        ]),
      ),
    );
    check(settled.filter((s) => s === "won").length === 1, `both or neither won: ${settled}`);
    const winner = people[settled.indexOf("won")];
    const loser = pages[settled.indexOf("lost")];
    await loser.getByRole("alert").filter({ hasText: `was already accepted by ${winner.email}` }).waitFor();
    await loser.getByText(`Handled by ${winner.email}`).waitFor();
    check(!(await loser.getByRole("button", { name: "Accept handoff" }).count()), "the loser is still offered the handoff");
    await axe(loser, "inbox, accepted by another", axeStates);
  },

  // WhatsApp outside its 24-hour window: only an approved template can go;
  // its placeholders are asked for and the message previewed, then sent.
  async "inbox-whatsapp"(browser) {
    const page = await openConversation(browser, owner, config.inbox.whatsapp, "Wes Park");
    const form = page.getByRole("form", { name: "Send a template" });
    await form.getByText("has not written in the last 24 hours").waitFor();
    check(!(await page.getByRole("textbox", { name: "Reply" }).count()), "free text is offered outside the 24-hour window");
    await form.getByRole("button", { name: "Send template" }).click();
    await form.getByRole("alert").filter({ hasText: "Choose a template first." }).waitFor();
    await form.getByLabel("Template").selectOption({ label: "order_shipped (en)" });
    await form.getByRole("button", { name: "Send template" }).click();
    await form.getByRole("alert").filter({ hasText: "Fill in {{1}}, {{2}}." }).waitFor();
    await form.getByLabel("{{1}}").fill("Wes");
    await form.getByLabel("{{2}}").fill("5678");
    check(!(await form.getByRole("alert").count()), "the placeholders' error stays once they are filled");
    const shown = await form.getByLabel("Message preview").innerText();
    check(shown === "Hi Wes, your order 5678 has shipped.", `the template's preview reads ${shown}`);
    await axe(page, "inbox, whatsapp template", axeStates);
    await page.screenshot({ path: `${screenshots}/inbox-whatsapp.png` });
    await form.getByRole("button", { name: "Send template" }).click();
    await page.getByRole("list", { name: "Messages and notes" }).getByText("Hi Wes, your order 5678 has shipped.").waitFor();
  },

  // An email: the composer shows the subject and that the reply stays in
  // the contact's thread; the quoted text of the contact's mail is folded.
  async "inbox-email"(browser) {
    const page = await openConversation(browser, owner, config.inbox.email, "Eve Ng");
    const thread = page.getByRole("list", { name: "Messages and notes" });
    await thread.getByText("the zipper broke on day two").waitFor();
    const quoted = thread.getByRole("group").filter({ hasText: "Quoted text" });
    check(!(await quoted.getByText("Thanks for your order.").isVisible()), "the quoted text is not folded");
    await page.getByRole("button", { name: "Accept handoff" }).click();
    await page.getByText("Handled by You").waitFor();
    check((await page.getByLabel("Subject").inputValue()) === "Re: Broken zipper", `the subject reads ${await page.getByLabel("Subject").inputValue()}`);
    await page.getByText("Sent in the contact's email thread.").waitFor();
    await page.getByRole("textbox", { name: "Reply" }).fill("Sorry about that, Eve. A **new zipper** is on its way.");
    await page.getByText("Preview as Email shows it").click();
    const rendered = page.getByRole("group").filter({ hasText: "Preview as Email shows it" }).getByText("new zipper", { exact: true });
    check((await rendered.evaluate((e) => e.tagName)) === "STRONG", "the preview does not render the markup");
    // The preview is the one place HTML is rendered: markup runs nothing and
    // a javascript: link loses its address.
    const reply = await page.getByRole("textbox", { name: "Reply" }).inputValue();
    const preview = page.getByRole("group").filter({ hasText: "Preview as Email shows it" });
    await page
      .getByRole("textbox", { name: "Reply" })
      .fill(`<img src=x onerror="window.__pwned=7"><script>window.__pwned=9</script> [click me](javascript:window.__pwned=8)`);
    const link = preview.getByText("click me", { exact: true });
    await link.waitFor();
    check((await link.evaluate((e) => e.closest("[href]")?.getAttribute("href") ?? null)) === null, "a javascript: link kept its address");
    await link.click();
    check((await page.evaluate(() => window.__pwned)) === undefined, "the email preview ran a payload");
    check(!(await preview.locator("img, script, [onerror]").count()), "the email preview kept markup it should drop");
    await page.getByRole("textbox", { name: "Reply" }).fill(reply);
    await preview.getByText("new zipper", { exact: true }).waitFor();
    await axe(page, "inbox, email reply", axeStates);
    await page.screenshot({ path: `${screenshots}/inbox-email.png` });
    await page.getByRole("button", { name: "Send" }).click();
    await thread.getByText("A **new zipper** is on its way.").waitFor();
  },

  // Everything by keyboard: sign in, skip to content, open a dialog, close
  // it with Escape and land back on the button that opened it.
  async keyboard(browser) {
    const { page } = await open(browser, base);
    await page.goto("/sign-in");
    const signInHeading = page.getByRole("heading", { name: "Sign in to Parley" });
    await signInHeading.waitFor();
    // Focus is on the heading from the moment it shows, as after a page load.
    check(await signInHeading.evaluate((e) => e === document.activeElement), "the sign-in heading does not have focus");
    await page.keyboard.press("Tab");
    check(await page.getByLabel("Email").evaluate((e) => e === document.activeElement), "Tab does not reach Email");
    await page.keyboard.type(owner.email);
    await page.keyboard.press("Tab");
    await page.keyboard.type(owner.password);
    await page.keyboard.press("Enter");
    // The new page's heading takes focus, as after a page load.
    await page.getByRole("heading", { name: "Home", level: 1 }).waitFor();
    await page.waitForFunction(() => document.activeElement?.tagName === "H1");
    // The navigation is reachable backwards from the heading, and Enter follows a link.
    const keysLink = page.getByRole("link", { name: "API keys" });
    for (let i = 0; i < 20 && !(await keysLink.evaluate((e) => e === document.activeElement)); i++) {
      await page.keyboard.press("Shift+Tab");
    }
    check(await keysLink.evaluate((e) => e === document.activeElement), "Shift+Tab from the heading does not reach API keys");
    await page.keyboard.press("Enter");
    const heading = page.getByRole("heading", { name: "API keys", level: 1 });
    await heading.waitFor();
    await page.waitForFunction(() => document.activeElement?.tagName === "H1");
    const create = page.getByRole("button", { name: "Create key" });
    await create.waitFor();
    await page.keyboard.press("Tab");
    check(await create.evaluate((e) => e === document.activeElement), "Tab from the heading does not reach Create key");
    // After a reload the first stop is the skip link, which leads past the navigation.
    await page.reload();
    await heading.waitFor();
    await page.keyboard.press("Tab");
    const skip = page.getByRole("link", { name: "Skip to content" });
    check(await skip.evaluate((e) => e === document.activeElement), "the first Tab stop is not the skip link");
    check(await skip.evaluate((e) => e.getBoundingClientRect().top >= 0), "the focused skip link is off screen");
    await page.keyboard.press("Enter");
    for (let i = 0; i < 3 && !(await create.evaluate((e) => e === document.activeElement)); i++) {
      await page.keyboard.press("Tab");
    }
    check(await create.evaluate((e) => e === document.activeElement), "Tab from the content does not reach Create key");
    await page.keyboard.press("Enter");
    const dialog = page.getByRole("dialog", { name: "Create a live key" });
    await dialog.waitFor();
    check(await dialog.getByLabel("Name").evaluate((e) => e === document.activeElement), "the dialog does not focus Name");
    await page.keyboard.press("Escape");
    await dialog.waitFor({ state: "detached" });
    check(await create.evaluate((e) => e === document.activeElement), "focus did not return to Create key");
    // The mode switch works from the keyboard (Space on a switch).
    await page.getByRole("switch", { name: "Test mode" }).focus();
    await page.keyboard.press("Space");
    await page.getByRole("status").filter({ hasText: "Test mode" }).waitFor();
  },
};

// Journeys that need a server of their own, run only when named.
const alone = {
  // A web call from the agent's page, Chromium's fake microphone playing a
  // recorded caller who talks over the greeting: the greeting plays, the
  // caller's words make the server clear what the browser still held, the
  // caller is transcribed as the call goes and answered, hanging up ends
  // the call, and its page has the transcript.
  async "web-call"(browser) {
    const { page } = await signedIn(browser, base, owner, { permissions: ["microphone"] });
    await page.goto(`/agents/${config.web_call.agent_id}`);
    await page.getByRole("heading", { name: config.web_call.agent_name, level: 1 }).waitFor();
    await page.getByRole("button", { name: "Talk to this agent" }).click();
    const panel = page.getByRole("region", { name: `Web call with ${config.web_call.agent_name}` });
    await panel.getByRole("status").filter({ hasText: "Talking" }).waitFor({ timeout: 15000 });
    await axe(page, "web call", axeStates);
    // The greeting arrives and plays.
    const stat = (name) => panel.evaluate((e, n) => Number(e.getAttribute(`data-${n}`)), name);
    await page.waitForFunction(() => Number(document.querySelector("[data-played]")?.getAttribute("data-played")) > 25, null, { timeout: 15000 });
    const transcript = panel.getByRole("list", { name: "Transcript so far" });
    // The caller, heard through the fake microphone over the greeting, then the agent's answer after it.
    await transcript.getByRole("listitem").filter({ hasText: /^You/ }).filter({ hasText: /order/i }).waitFor({ timeout: 40000 });
    await transcript.getByRole("listitem").filter({ hasText: "(interrupted)" }).first().waitFor();
    await transcript.getByRole("listitem").last().filter({ hasText: config.web_call.agent_name }).waitFor({ timeout: 30000 });
    await page.screenshot({ path: `${screenshots}/web-call.png` });
    check((await stat("dropped")) > 0, "the barge-in's clear dropped nothing the browser held");
    check((await stat("played")) > 50, `only ${await stat("played")} frames of the agent played`);
    await panel.getByRole("button", { name: "Hang up" }).click();
    await panel.getByRole("status").filter({ hasText: "Call ended" }).waitFor();
    await axe(page, "web call ended", axeStates);
    await panel.getByRole("link", { name: "See the call" }).click();
    await page.getByRole("heading", { name: "Web call", level: 1 }).waitFor();
    await page.getByText("Completed").first().waitFor({ timeout: 15000 });
    await page.getByText(/order/i).first().waitFor();
  },

  // Signed in on one instance; messages arrive on another instance on the
  // same PostgreSQL database: each shows in the open thread within a second
  // of the other instance accepting it.
  async instances(browser) {
    const { page } = await signedIn(browser, base, owner);
    await page.goto(`/inbox/${config.instances.conversation}?view=all`);
    const thread = page.getByRole("list", { name: "Messages and notes" });
    await thread.getByText("First, on instance A").waitFor();
    const took = [];
    for (let i = 1; i <= 5; i++) {
      const text = `Arrived on instance A, number ${i}`;
      await inbound(config.instances.a_base, config.instances.channel_id, config.instances.secret, { from: "ivy-1", text, external_id: `instances-${i}` });
      const accepted = Date.now();
      await thread.getByText(text).waitFor({ timeout: 5000 });
      took.push(Date.now() - accepted);
    }
    console.log(`INSTANCES ${took.join(" ")}`);
    check(Math.max(...took) < 1000, `a message took over a second to reach the other instance's dashboard: ${took} ms`);
    await page.screenshot({ path: `${screenshots}/instances.png` });
  },
};

const selected = only.length ? only : Object.keys(journeys);
Object.assign(journeys, alone);
// A fake microphone playing the config's WAV, for the web-call journey.
const browser = await launch(config.fake_microphone);
let failed = false;
// Two at a time: this machine has two cores and the server shares them.
const queue = [...selected];
async function worker() {
  for (let name = queue.shift(); name; name = queue.shift()) {
    const started = Date.now();
    const opened = [];
    try {
      await journey.run(opened, () => journeys[name](browser));
      const problems = opened.flatMap((o) => o.problems);
      if (problems.length) throw new Error(problems.join("; "));
      console.log(`PASS ${name} ${Date.now() - started}ms`);
    } catch (e) {
      failed = true;
      console.log(`FAIL ${name}: ${String(e.stack || e).replaceAll("\n", " | ")}`);
      for (const o of opened) console.log(`  page ${(await o.describe().catch(() => "gone")).replaceAll("\n", " | ")}`);
      for (const [i, o] of opened.entries()) {
        await o.page.screenshot({ path: `${screenshots}/failed-${name}-${i}.png` }).catch(() => {});
      }
    } finally {
      for (const o of opened) await o.context.close().catch(() => {});
    }
  }
}
await Promise.all([worker(), worker()]);
for (const state of [...axeStates].sort()) console.log(`AXE ${state}`);
await browser.close();
process.exitCode = failed ? 1 : 0;
