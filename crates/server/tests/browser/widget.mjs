// Drives the webchat widget in Debian's Chromium: opens the page, sends a
// message, waits for the agent's answer, and for the reply the Rust test
// sends through the API.
// Usage: node widget.mjs <page-url> <expected-reply> <expected-agent-answer>
// (exit 0 on success)
import { chromium } from "playwright-core";

const [pageUrl, expectedReply, expectedAnswer] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu"],
});
const page = await browser.newPage();
page.on("console", (m) => console.error(`[page] ${m.type()}: ${m.text()}`));
try {
  await page.goto(pageUrl);
  await page.click("#parley-launcher");
  await page.waitForSelector("#parley-state:text('online')", { timeout: 15000 });
  // The channel does not offer calls: no Call button.
  if (await page.isVisible("#parley-call")) throw new Error("a Call button on a channel without calls");
  await page.fill("#parley-input", "Hello from the browser");
  await page.click("#parley-send");
  // Stored by Parley: the widget marks the bubble delivered.
  await page.waitForSelector("[data-testid=parley-message].inbound .meta:text('Delivered')", { timeout: 15000 });
  console.log("SENT");
  // The agent answers on its own, through the runtime.
  await page.locator("[data-testid=parley-message].outbound", { hasText: expectedAnswer }).waitFor({ timeout: 30000 });
  console.log("AGENT");
  const reply = page.locator("[data-testid=parley-message].outbound", { hasText: expectedReply });
  await reply.waitFor({ timeout: 30000 });
  // The widget rendered the reply as text, not markup.
  const html = await reply.evaluate((el) => el.innerHTML);
  if (html.includes("<b>")) throw new Error(`reply rendered as HTML: ${html}`);
  // Its attachment is a link that downloads the file.
  const link = reply.locator("a.file");
  if ((await link.textContent()) !== "receipt.txt") throw new Error(`no attachment link in: ${html}`);
  const file = await page.evaluate(async (href) => (await fetch(href)).text(), await link.getAttribute("href"));
  if (file !== "Paid in full") throw new Error(`the attachment downloaded as: ${file}`);
  console.log("REPLY");
  if (process.env.PARLEY_WIDGET_SCREENSHOT) await page.screenshot({ path: process.env.PARLEY_WIDGET_SCREENSHOT });
  // Give the read receipt a moment to leave before closing.
  await page.waitForTimeout(300);
} catch (e) {
  await page.screenshot({ path: "/tmp/parley-widget-failure.png" }).catch(() => {});
  console.error(e);
  process.exitCode = 1;
} finally {
  await browser.close();
}
