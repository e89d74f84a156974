// One dashboard in Chromium, for bench/inbox.sh: signs in, opens a
// conversation in the inbox, prints "ready", then writes a line
// "external_id epoch_ms" to dom.txt the moment each message's text
// ("Message N: …") is in the page's DOM (a MutationObserver in the page,
// timed with the page's clock, which is this machine's). Stops on SIGTERM.
//
// Usage: node bench/inbox_dom.mjs BASE EMAIL PASSWORD CONVERSATION_ID
// Needs playwright-core (crates/server/tests/browser's node_modules) and
// Debian's chromium.
import { createRequire } from "node:module";
import { createWriteStream } from "node:fs";

const [base, email, password, conversation] = process.argv.slice(2);
const require = createRequire(new URL("../crates/server/tests/browser/package.json", import.meta.url));
const { chromium } = require("playwright-core");

const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--headless", "--no-sandbox"] });
const page = await browser.newPage({ baseURL: base });
const out = createWriteStream("dom.txt");
await page.exposeFunction("seen", (lines) => out.write(lines));
await page.goto("/");
await page.getByLabel("Email").fill(email);
await page.getByLabel("Password").fill(password);
await page.getByRole("button", { name: "Sign in" }).click();
await page.getByRole("button", { name: `Account: ${email}` }).waitFor();
await page.goto(`/inbox/${conversation}?view=all`);
await page.getByRole("list", { name: "Messages and notes" }).waitFor();
await page.evaluate(() => {
  const first = new Set();
  const now = () => performance.timeOrigin + performance.now();
  /** @param {Node} node */
  const scan = (node, at, lines) => {
    const text = node.textContent ?? "";
    for (const m of text.matchAll(/Message (\d+):/g)) {
      if (!first.has(m[1])) {
        first.add(m[1]);
        lines.push(`in-${m[1]} ${at}\n`);
      }
    }
  };
  new MutationObserver((records) => {
    const at = now();
    const lines = [];
    for (const r of records) for (const n of r.addedNodes) scan(n, at, lines);
    if (lines.length) window.seen(lines.join(""));
  }).observe(document.body, { childList: true, subtree: true });
});
console.log("ready");
process.on("SIGTERM", async () => {
  await browser.close();
  out.end(() => process.exit(0));
});
