#!/usr/bin/env bash
# Benchmark: the agent runtime's own overhead on SQLite, with the builtin
# engine (no model latency) and no debounce.
#
# Sends N signed inbound messages on an api channel, each from its own
# sender (so each opens a conversation that one run answers), from 8
# client threads; a local receiver takes the replies. Reports replies/s
# over the busy window and p50/p99 of each run's own time, from the run
# being queued with its message to its reply being written (the run's
# created_at → completed_at: job claim, prompt, engine, reply, commit).
# Targets on a 2-core machine: p99 <= 10 ms of overhead per reply at a
# steady rate, >= 500 replies/s.
#
# Usage: bench/agent_runs.sh [messages]   (default 2000; needs python3)
set -euo pipefail
cd "$(dirname "$0")/.."
MESSAGES="${1:-2000}"
PORT="${PORT:-18787}"
RX_PORT="${RX_PORT:-18788}"
source bench/lib.sh
bench_prepare

python3 - "$RX_PORT" <<'PY' &
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Ok(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200); self.send_header("content-length", "2"); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *args):
        pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Ok).serve_forever()
PY
EXTRA_PIDS=$!
start_server PARLEY_AGENTS__DEBOUNCE_MS=0 PARLEY_WEBHOOKS__ALLOW_PRIVATE_TARGETS=true PARLEY_PRICING__AGENT_CREATE_CENTS=0

python3 - "$BASE" "$KEY" "$RX_PORT" "$MESSAGES" <<'PY'
import base64, hashlib, hmac, json, sys, threading, time, urllib.request
from datetime import datetime

base, key, rx_port, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def call(method, path, body=None, headers=None):
    h = {"X-API-Key": key, "Content-Type": "application/json", **(headers or {})}
    data = body if isinstance(body, bytes) else (json.dumps(body).encode() if body is not None else None)
    with urllib.request.urlopen(urllib.request.Request(base + path, data, h, method=method)) as r:
        return json.loads(r.read() or b"null")

channel = call("POST", "/api/v1/channels", {"type": "api", "name": "Bench", "config": {"url": f"http://127.0.0.1:{rx_port}/replies"}})
agent = call("POST", "/api/v1/agents", {"name": "Bench"}, {"Idempotency-Key": "bench-agent"})
call("POST", f"/api/v1/agents/{agent['id']}/triggers", {"event": "message.received", "channel": "*"})
secret = base64.b64decode(channel["secret"].removeprefix("whsec_"))

def send(i):
    body = json.dumps({"from": f"user-{i}", "text": f"Where is order {i}?", "external_id": f"e-{i}"}).encode()
    ts, mid = str(int(time.time())), f"msg_{i}"
    sig = base64.b64encode(hmac.new(secret, f"{mid}.{ts}.".encode() + body, hashlib.sha256).digest()).decode()
    call("POST", f"/api/v1/channels/{channel['id']}/inbound", body,
         {"webhook-id": mid, "webhook-timestamp": ts, "webhook-signature": f"v1,{sig}"})

def worker(k):
    for i in range(k, n, 8):
        send(i)

print(f"sending {n} inbound messages…", file=sys.stderr)
started = time.time()
threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
for t in threads: t.start()
for t in threads: t.join()
sent = time.time() - started
while call("GET", "/api/v1/agent-runs?status=completed&limit=1")["total"] < n:
    if time.time() - started > 300:
        sys.exit("not every message was answered within 300 s")
    time.sleep(0.2)

def when(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
runs, offset = [], 0
while offset < n:
    page = call("GET", f"/api/v1/agent-runs?limit=100&offset={offset}")
    runs += page["items"]; offset += 100
took = sorted((when(r["completed_at"]) - when(r["created_at"])) * 1000 for r in runs)
window = max(when(r["completed_at"]) for r in runs) - min(when(r["created_at"]) for r in runs)
pct = lambda q: took[min(len(took) - 1, int(q * len(took)))]
failed = call("GET", "/api/v1/agent-runs?status=failed&limit=1")["total"]
print()
print(f"inbound: {n} messages in {sent:.1f} s ({n / sent:.0f}/s); runs completed: {len(runs)}, failed: {failed}")
print(f"replies/s over the busy window: {n / window:.0f}")
print(f"run time (queued → reply written): p50 {pct(.5):.1f} ms, p99 {pct(.99):.1f} ms, max {took[-1]:.1f} ms")
PY
