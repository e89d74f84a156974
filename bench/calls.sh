#!/usr/bin/env bash
# Benchmark: 200 simulated calls placed at once (the concurrency limit
# raised), on SQLite. Reports call setup (from the POST to `ringing`) p50/p99,
# the POST's own latency, and the server's CPU and memory per concurrent call
# (sampled from /proc while the calls run, against the idle baseline).
#
# Usage: bench/calls.sh [calls]   (default 200; needs only python3)
set -euo pipefail
cd "$(dirname "$0")/.."
CALLS="${1:-200}"
PORT="${PORT:-18585}"

source bench/lib.sh
bench_prepare
start_server PARLEY_VOICE__MAX_CONCURRENT_CALLS=$((CALLS + 10))
parley billing credit --workspace 1 --cents 1000000 >/dev/null

python3 - "$PORT" "$KEY" "$CALLS" "$SERVER" <<'PY'
import json, os, sys, threading, time, http.client
from datetime import datetime

port, key, n, pid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
tick = os.sysconf("SC_CLK_TCK")
page = os.sysconf("SC_PAGE_SIZE")

def request(method, path, body=None, idem=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"X-API-Key": key, "Content-Type": "application/json"}
    if idem:
        headers["Idempotency-Key"] = idem
    c.request(method, path, json.dumps(body) if body is not None else None, headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data) if data else None

def cpu_seconds():
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick

def rss_bytes():
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * page

def when(ts):
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()

status, agent = request("POST", "/api/v1/agents", {"name": "Bench", "first_message": "Hello from the benchmark."}, "bench-agent")
assert status == 201, agent
time.sleep(1)
base_rss, base_cpu, started = rss_bytes(), cpu_seconds(), time.time()

posted, errors = [], []
def place(i):
    t0 = time.time()
    status, call = request("POST", "/api/v1/calls", {"agent_id": agent["id"], "to": f"+1415555{i:04d}"}, f"bench-call-{i}")
    if status != 201:
        errors.append((status, call))
        return
    posted.append((call["id"], time.time() - t0))

threads = [threading.Thread(target=place, args=(i,)) for i in range(n)]
for t in threads: t.start()

# Sample memory and CPU while the calls run.
peak_rss, samples = base_rss, []
def live():
    s, page_ = request("GET", "/api/v1/calls?status=in_progress&limit=1")
    return page_["total"]
for t in threads: t.join()
most_live, window_start, window_cpu0 = 0, None, None
while True:
    now_live = live()
    peak_rss = max(peak_rss, rss_bytes())
    if now_live > most_live:
        most_live = now_live
    if now_live >= 0.9 * n and window_start is None:
        window_start, window_cpu0 = time.time(), cpu_seconds()
    if window_start is not None and now_live < 0.9 * n:
        window_end, window_cpu1 = time.time(), cpu_seconds()
        break
    if time.time() - started > 120:
        window_end, window_cpu1 = time.time(), cpu_seconds()
        break
    time.sleep(0.1)

# Let every call finish, then read their timestamps.
deadline = time.time() + 120
while time.time() < deadline:
    s, p = request("GET", f"/api/v1/calls?status=completed&limit=1")
    if p["total"] >= len(posted): break
    time.sleep(0.5)
setups, outcomes = [], {}
for cid, _ in posted:
    s, c = request("GET", f"/api/v1/calls/{cid}")
    outcomes[c["status"]] = outcomes.get(c["status"], 0) + 1
    if c.get("ringing_at"):
        setups.append((when(c["ringing_at"]) - when(c["created_at"])) * 1000)
setups.sort()
posts = sorted(p for _, p in posted)
def pct(xs, q):
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")
window = (window_end - window_start) if window_start else float("nan")
cpu_share = (window_cpu1 - window_cpu0) / window if window_start else float("nan")
print()
print(f"calls placed: {len(posted)} of {n} (errors: {len(errors)} {errors[:3]}); outcomes: {outcomes}; most in progress at once: {most_live}")
print(f"call setup (created → ringing, server clock): p50 {pct(setups, .5):.0f} ms, p99 {pct(setups, .99):.0f} ms, max {setups[-1] if setups else float('nan'):.0f} ms")
print(f"POST /api/v1/calls latency (client): p50 {pct(posts, .5)*1000:.0f} ms, p99 {pct(posts, .99)*1000:.0f} ms")
print(f"server while ≥90% of calls were in progress ({window:.1f} s): CPU {cpu_share*100:.1f}% of a core = {cpu_share*100/max(most_live,1):.3f}% per concurrent call")
print(f"memory: idle RSS {base_rss/1e6:.1f} MB, peak {peak_rss/1e6:.1f} MB = {(peak_rss-base_rss)/max(most_live,1)/1e3:.0f} kB per concurrent call")
PY
