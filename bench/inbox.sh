#!/usr/bin/env bash
# Benchmark: the inbox's live path (GET /api/v1/stream).
#
# CLIENTS stream clients (default 50, each its own connection with the live
# key) watch while signed inbound messages arrive on an api channel at a
# steady RATE per second (default 500) for DURATION seconds (default 20),
# each from its own sender. For every message and every client: the time
# from the inbound request being accepted (its 201) to the client reading
# its `message.received` event. Reports p50/p99/max over all deliveries,
# deliveries missing (must be 0) and duplicated (must be 0), the inbound
# rate reached, and the server's resident memory per connected client
# (measured first, with IDLE idle clients, default 400). One more client is
# a dashboard in Chromium (bench/inbox_dom.mjs) with one conversation open:
# every 25th message goes to it, timed from its 201 to its text in the DOM.
# Target (issue 34): p50 <= 150 ms, p99 <= 500 ms at 500 inbound/s.
#
# Usage: bench/inbox.sh [clients] [rate] [duration]
#        DATABASE=postgres bench/inbox.sh   on a fresh PostgreSQL database
# Needs python3, node, Debian's chromium and playwright-core
# (npm ci --prefix crates/server/tests/browser).
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS="${1:-50}"
RATE="${2:-500}"
DURATION="${3:-20}"
IDLE="${IDLE:-400}"
PORT="${PORT:-18590}"
source bench/lib.sh
bench_prepare
start_server
api_channel
# A server holds at most 20 streams per credential: one key per stream
# client (each stands for a person's dashboard), and one per 20 idle ones.
KEYS=$(( CLIENTS + (IDLE + 19) / 20 ))
echo "creating $KEYS API keys…" >&2
: > keys.txt
for i in $(seq 1 "$KEYS"); do
  parley key create --workspace 1 --name "Bench $i" | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])' >> keys.txt
done

# The member whose dashboard Chromium opens.
printf 'bench-password-1234\n' | parley user create --email bench@example.com --password-stdin --workspace 1 --role owner >/dev/null

python3 - "$BASE" "$KEY" "$CHANNEL" "$SECRET" "$CLIENTS" "$RATE" "$DURATION" "$IDLE" "$SERVER" "$ROOT" <<'PY'
import base64, collections, hashlib, hmac, http.client, json, queue, socket, subprocess, sys, threading, time
from urllib.parse import urlparse

base, key, channel, secret, clients, rate, duration, idle, pid, root = sys.argv[1:11]
clients, rate, duration, idle, pid = int(clients), int(rate), int(duration), int(idle), int(pid)
host, port = urlparse(base).hostname, urlparse(base).port
secret = base64.b64decode(secret.removeprefix("whsec_"))

def rss_kib():
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))

# Memory per connected client, first, on the fresh server: idle streams,
# connected and then let go.
before = rss_kib()
keys = open("keys.txt").read().split()[clients:]
held = []
for n in range(idle):
    s = socket.create_connection((host, port))
    s.sendall(f"GET /api/v1/stream HTTP/1.1\r\nHost: {host}\r\nX-API-Key: {keys[n // 20]}\r\nAccept: text/event-stream\r\n\r\n".encode())
    held.append(s)
time.sleep(2)
after = rss_kib()
for s in held:
    s.close()


# The stream clients: one Node process (an event loop reads 50 streams at
# 500 events/s each without becoming the bottleneck a Python thread pool
# would be); it prints "ready" once every client is live and writes one
# line per delivery, "client external_id epoch_ms", until it is stopped.
watcher = subprocess.Popen(["node", "-e", r"""
const [base, clients] = [process.argv[1], Number(process.argv[3])];
const fs = require("fs");
const keys = fs.readFileSync("keys.txt", "utf8").trim().split("\n");
const out = fs.createWriteStream("deliveries.txt");
let ready = 0;
const now = () => performance.timeOrigin + performance.now();
for (let n = 0; n < clients; n++) {
  (async () => {
    const r = await fetch(base + "/api/v1/stream?types=message.received", { headers: { "X-API-Key": keys[n], Accept: "text/event-stream" } });
    if (r.status !== 200) throw new Error(`stream ${n}: ${r.status} ${await r.text()}`);
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      const at = now();
      buf += dec.decode(value, { stream: true });
      let end;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        const frame = buf.slice(0, end);
        buf = buf.slice(end + 2);
        if (/^event:\s*ready$/m.test(frame) && ++ready === clients) console.log("ready");
        const m = frame.match(/"external_id":"([^"]+)"/);
        if (m && /^event:\s*message\.received$/m.test(frame)) out.write(`${n} ${m[1]} ${at}\n`);
      }
    }
  })().catch((e) => { console.error(e); process.exit(1); });
}
process.on("SIGTERM", () => out.end(() => process.exit(0)));
""", base, key, str(clients)], stdout=subprocess.PIPE, text=True)
assert watcher.stdout.readline().strip() == "ready", "the stream clients did not all connect"

def signed(body):
    mid, ts = f"msg_{hashlib.sha1(body.encode()).hexdigest()}", str(int(time.time()))
    sig = base64.b64encode(hmac.new(secret, f"{mid}.{ts}.{body}".encode(), hashlib.sha256).digest()).decode()
    return {"content-type": "application/json", "webhook-id": mid, "webhook-timestamp": ts, "webhook-signature": f"v1,{sig}"}

# Every WATCH_EVERY-th message goes to one conversation, open in a dashboard
# in Chromium: from its 201 to its text in that page's DOM.
WATCH_EVERY = 25
watched_from = "user-watched"
c = http.client.HTTPConnection(host, port, timeout=30)
body = json.dumps({"from": watched_from, "text": "Message -1: the watched conversation", "external_id": "in-watched"})
c.request("POST", f"/api/v1/channels/{channel}/inbound", body=body, headers=signed(body))
r = c.getresponse()
watched = json.loads(r.read())["conversation_id"]
dom = subprocess.Popen(["node", f"{root}/bench/inbox_dom.mjs", base, "bench@example.com", "bench-password-1234", str(watched)],
                       stdout=subprocess.PIPE, text=True)
assert dom.stdout.readline().strip() == "ready", "the dashboard in Chromium did not open"

total = rate * duration
accepted, sent_at = {}, {}
failed = collections.Counter()
jobs = queue.Queue()
start = time.time() + 0.5
for i in range(total):
    jobs.put((start + i / rate, i))

def send():
    c = http.client.HTTPConnection(host, port, timeout=30)
    while True:
        try:
            due, i = jobs.get_nowait()
        except queue.Empty:
            return
        wait = due - time.time()
        if wait > 0:
            time.sleep(wait)
        sender = watched_from if i % WATCH_EVERY == 0 else f"user-{i}"
        body = json.dumps({"from": sender, "text": f"Message {i}: is my order on its way?", "external_id": f"in-{i}"})
        headers = signed(body)
        try:
            sent_at[f"in-{i}"] = time.time()
            c.request("POST", f"/api/v1/channels/{channel}/inbound", body=body, headers=headers)
            r = c.getresponse()
            r.read()
            if r.status == 201:
                accepted[f"in-{i}"] = time.time()
            else:
                failed[r.status] += 1
        except (OSError, http.client.HTTPException) as e:
            failed[type(e).__name__] += 1
            c.close()
            c = http.client.HTTPConnection(host, port, timeout=30)

senders = [threading.Thread(target=send) for _ in range(32)]
for t in senders:
    t.start()
for t in senders:
    t.join()
sent_for = time.time() - start
time.sleep(3)  # the last events' delivery
watcher.terminate()
watcher.wait()
dom.terminate()
dom.wait()
shown = {}
with open("dom.txt") as f:
    for line in f:
        ext, at = line.split()
        shown[ext] = float(at) / 1000
received = collections.defaultdict(list)  # external_id -> [(client, epoch s)]
with open("deliveries.txt") as f:
    for line in f:
        n, ext, at = line.split()
        received[ext].append((int(n), float(at) / 1000))

lat, whole, missing, dup = [], [], 0, 0
for ext, at in accepted.items():
    got = received.get(ext, [])
    per_client = collections.Counter(n for n, _ in got)
    missing += clients - len(per_client)
    dup += sum(v - 1 for v in per_client.values())
    # The event can be read before the sender has read its 201: 0 then.
    lat.extend(max(0.0, t - at) * 1000 for _, t in got)
    whole.extend((t - sent_at[ext]) * 1000 for _, t in got)
lat.sort()
whole.sort()
pct = lambda xs, p: xs[min(len(xs) - 1, int(len(xs) * p))] if xs else float("nan")

print()
print(f"{clients} stream clients; inbound {len(accepted)} of {total} accepted in {sent_for:.1f} s "
      f"({len(accepted) / sent_for:.0f}/s, asked {rate}/s){'; refused: ' + str(dict(failed)) if failed else ''}")
print(f"accepted (201) → read by a stream client: p50 {pct(lat, 0.50):.1f} ms, p99 {pct(lat, 0.99):.1f} ms, "
      f"max {pct(lat, 1.0):.1f} ms over {len(lat)} deliveries; missing {missing}, duplicated {dup}")
# Only the watched conversation's messages (others also show, as list previews).
watched_ids = {ext for ext in accepted if int(ext.removeprefix("in-")) % WATCH_EVERY == 0}
in_dom = sorted(max(0.0, shown[ext] - accepted[ext]) * 1000 for ext in watched_ids if ext in shown)
watched_total = len(watched_ids)
print(f"accepted (201) → in the DOM of a dashboard in Chromium (1 message in {WATCH_EVERY}, its open conversation): "
      f"p50 {pct(in_dom, 0.50):.1f} ms, p99 {pct(in_dom, 0.99):.1f} ms, max {pct(in_dom, 1.0):.1f} ms; "
      f"{len(in_dom)} of {watched_total} shown")
print(f"request sent → read by a stream client: p50 {pct(whole, 0.50):.1f} ms, p99 {pct(whole, 0.99):.1f} ms, max {pct(whole, 1.0):.1f} ms")
print(f"memory: {before / 1024:.1f} MiB before {idle} idle streams, {after / 1024:.1f} MiB with them: "
      f"{(after - before) / idle:.1f} KiB per connected client")
PY
