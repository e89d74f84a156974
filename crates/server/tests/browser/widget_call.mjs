// A visitor calls from the webchat widget in Debian's Chromium, its fake
// microphone playing a WAV the Rust test wrote: the widget's Call button
// opens the microphone, asks for the call over the chat socket, and joins
// it with the audio module and worklets loaded from Parley's origin.
// Usage: node widget_call.mjs <page-url> <caller.wav>
// Prints TALKING once the call is up, then waits for a line "HANGUP" on
// stdin, hangs up, and prints ENDED (exit 0 on success).
import { createInterface } from "node:readline";
import { chromium } from "playwright-core";

const [pageUrl, wav] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--autoplay-policy=no-user-gesture-required",
    "--use-fake-device-for-media-stream",
    "--use-fake-ui-for-media-stream",
    `--use-file-for-fake-audio-capture=${wav}%noloop`,
  ],
});
const context = await browser.newContext({ permissions: ["microphone"] });
const page = await context.newPage();
page.on("console", (m) => console.error(`[page] ${m.type()}: ${m.text()}`));
const lines = createInterface({ input: process.stdin });
const told = (what) => new Promise((resolve) => lines.on("line", (l) => l.trim() === what && resolve()));
try {
  await page.goto(pageUrl);
  await page.click("#parley-launcher");
  await page.waitForSelector("#parley-state:text('online')", { timeout: 15000 });
  const call = page.getByRole("button", { name: "Call" });
  await call.click();
  await page.waitForSelector("#parley-state:text('on a call')", { timeout: 20000 });
  await page.getByRole("button", { name: "Hang up" }).waitFor();
  // The agent's greeting plays in the page.
  await page.waitForFunction(() => Number(document.getElementById("parley-webchat")?.getAttribute("data-call-played")) > 25, null, { timeout: 15000 });
  console.log("TALKING");
  await told("HANGUP");
  await page.getByRole("button", { name: "Hang up" }).click();
  await page.waitForSelector("#parley-state:text('online')", { timeout: 15000 });
  await call.waitFor();
  console.log("ENDED");
} catch (e) {
  await page.screenshot({ path: "/tmp/parley-widget-call-failure.png" }).catch(() => {});
  console.error(e);
  process.exitCode = 1;
} finally {
  lines.close();
  await browser.close();
}
