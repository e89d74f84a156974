// The dashboard benchmark's browser half (bench/dashboard.sh runs it):
// Chromium signs in as a person does, then
//  - transfer: the bytes on the wire (compressed, as served) of the first
//    load of the sign-in page, and of everything up to a signed-in Home;
//  - interactive: for Home and a call page, from navigation start to the
//    later of "its data is on screen" and the end of the last long task
//    before the main thread is quiet for 500 ms (Lighthouse's TTI rule,
//    unthrottled), cold cache, median of 5;
//  - Lighthouse on Home, Agents and the call page, with the test suite's
//    own runner (crates/server/tests/browser/dashboard/lighthouse.mjs).
//
// Usage: node bench/dashboard.mjs BASE EMAIL PASSWORD CALL_ID [runs]
// Exits 1 when a Lighthouse score is under its target.

const { signedInBrowser, score } = await import(
  new URL("../crates/server/tests/browser/dashboard/lighthouse.mjs", import.meta.url).href
);

const [base, email, password, callId, runsArg] = process.argv.slice(2);
const runs = Number(runsArg) || 5;
const bytes = { assets: 0, api: 0, requests: 0 };
const kb = (n) => `${(n / 1024).toFixed(1)} KB`;
let cdp;
let firstLoad = "";

const { trackRequests } = await import(
  new URL("../crates/server/tests/browser/dashboard/harness.mjs", import.meta.url).href
);
/** @type {(quietMs?: number) => Promise<void>} */
let settled = async () => {};
const browser = await signedInBrowser(base, email, password, async (page) => {
  // "networkidle" never comes: the live stream stays open; count the rest.
  settled = trackRequests(page);
  await page.addInitScript(() => {
    /** @type {any} */ (window).__long = [];
    new PerformanceObserver((l) => {
      for (const e of l.getEntries()) /** @type {any} */ (window).__long.push([e.startTime, e.startTime + e.duration]);
    }).observe({ type: "longtask", buffered: true });
  });
  cdp = await page.context().newCDPSession(page);
  await cdp.send("Network.enable");
  await cdp.send("Network.setCacheDisabled", { cacheDisabled: true });
  const urls = new Map();
  cdp.on("Network.requestWillBeSent", (e) => urls.set(e.requestId, e.request.url));
  cdp.on("Network.loadingFinished", (e) => {
    const url = urls.get(e.requestId) ?? "";
    bytes[url.includes("/api/") ? "api" : "assets"] += e.encodedDataLength;
    bytes.requests += 1;
  });
  page.once("load", () => {
    // The sign-in page's own load: its HTML, styles and every module.
    firstLoad = `first load, sign-in page: ${kb(bytes.assets)} of assets in ${bytes.requests} requests (target <= 200 KB)`;
  });
});
let ok = false;
try {
  const { page } = browser;
  await page.getByRole("region", { name: "Calls" }).getByText(/today ·/).waitFor();
  await settled();
  console.log(firstLoad);
  console.log(
    `through a signed-in Home: ${kb(bytes.assets)} of assets + ${kb(bytes.api)} of API answers in ${bytes.requests} requests`,
  );

  // Time to interactive, unthrottled, cold cache (the session carries on).
  const pages = [
    ["Home", "/", (p) => p.getByRole("region", { name: "Calls" }).getByText(/today ·/)],
    // The transcript listed and the waveform drawn.
    ["call page (10-minute recording)", `/calls/${callId}`, (p) => p.locator('.waveform[aria-busy="false"]')],
  ];
  for (const [name, path, ready] of pages) {
    const times = [];
    for (let i = 0; i < runs; i++) {
      await page.goto(base + path);
      await ready(page).waitFor();
      const shown = await page.evaluate(() => performance.now());
      await settled();
      const tti = await page.evaluate(
        (shown) =>
          new Promise((resolve) => {
            // Wait until 500 ms have passed without a long task, then report.
            const check = () => {
              const long = /** @type {any} */ (window).__long;
              const last = long.length ? Math.max(...long.map((/** @type {number[]} */ t) => t[1])) : 0;
              if (performance.now() - Math.max(last, shown) >= 500) resolve(Math.max(last, shown));
              else setTimeout(check, 100);
            };
            check();
          }),
        shown,
      );
      times.push([shown, tti]);
    }
    times.sort((a, b) => a[1] - b[1]);
    const [shown, tti] = times[Math.floor(times.length / 2)];
    console.log(`${name}: data on screen ${shown.toFixed(0)} ms, interactive ${tti.toFixed(0)} ms (median of ${runs}, unthrottled)`);
  }
  await cdp.send("Network.setCacheDisabled", { cacheDisabled: false });
  await page.goto("about:blank");
  ok = await score(browser.port, base, [
    ["Home", "/"],
    ["Agents", "/agents"],
    ["call page", `/calls/${callId}`],
  ]);
} finally {
  await browser.done();
}
process.exit(ok ? 0 : 1);
