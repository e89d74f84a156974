// Opens the API reference (/docs) in Debian's Chromium and checks that it
// is rendered, not raw: Swagger UI's title and operations, the description's
// markdown turned into HTML, a request body schema, and the try-it console
// answering a real request. Saves a screenshot.
// Usage: node docs.mjs <base-url> <screenshot.png>   (exit 0 on success)
import { chromium } from "playwright-core";

const [base, screenshot] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu"],
});
const page = await browser.newPage({ viewport: { width: 1280, height: 1600 } });
page.on("console", (m) => console.error(`[page] ${m.type()}: ${m.text()}`));
const fail = (why) => {
  throw new Error(why);
};
try {
  await page.goto(`${base}/docs`);
  const title = page.locator(".swagger-ui .info .title");
  await title.waitFor({ timeout: 20000 });
  if (!(await title.textContent()).includes("Parley API")) fail(`title: ${await title.textContent()}`);
  console.log("TITLE");

  // The description's markdown is rendered: code spans are <code>, and no
  // backtick or ** is left in the text a reader sees.
  const description = page.locator(".swagger-ui .info .description");
  const codes = await description.locator("code").count();
  // Operation summaries are shown as plain text: they must carry no markdown.
  const summaries = await page.locator(".opblock-summary-description").allInnerTexts();
  const raw = summaries.filter((t) => t.includes("`") || t.includes("**"));
  if (raw.length) fail(`raw markdown in ${raw.length} summaries, e.g. ${raw[0]}`);
  const text = await description.innerText();
  if (codes < 3) fail(`description has ${codes} code elements: ${text.slice(0, 200)}`);
  if (text.includes("`") || text.includes("**")) fail(`raw markdown in the description: ${text.slice(0, 300)}`);
  console.log("MARKDOWN");

  const operations = await page.locator(".opblock").count();
  if (operations < 60) fail(`only ${operations} operations shown`);
  console.log(`OPERATIONS ${operations}`);

  // An operation opens on its parameters and request body schema.
  const create = page.locator("#operations-Agents-create_agent");
  await create.locator(".opblock-summary").click();
  await create.locator(".opblock-body").waitFor();
  const body = await create.locator(".opblock-body").innerText();
  for (const expected of ["Idempotency-Key", "Request body", "name"]) {
    if (!body.includes(expected)) fail(`create_agent shows no ${expected}: ${body.slice(0, 400)}`);
  }
  console.log("SCHEMA");

  // The console sends a real request and shows the answer.
  const health = page.locator("#operations-Operations-healthz");
  await health.locator(".opblock-summary").click();
  // The console is on (tryItOutEnabled); the button would switch it off.
  const execute = health.locator("button.execute");
  await execute.waitFor({ timeout: 5000 }).catch(async () => {
    await health.locator("button.try-out__btn").click();
  });
  await execute.click();
  const cell = health.locator(".live-responses-table tr.response .response-col_status").first();
  await cell.waitFor({ timeout: 15000 });
  const status = (await cell.innerText()).trim();
  if (status !== "200") fail(`the console got ${status}`);
  console.log("CONSOLE");

  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: screenshot, fullPage: false });
  console.log("SCREENSHOT");
} catch (e) {
  await page.screenshot({ path: "/tmp/parley-docs-failure.png" }).catch(() => {});
  console.error(e);
  process.exitCode = 1;
} finally {
  await browser.close();
}
