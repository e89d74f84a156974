#!/usr/bin/env bash
# Benchmark: the agent runtime.
#
# 1. Overhead. N signed inbound messages on an api channel, each from its
#    own sender (so each opens a conversation one run answers), driven by
#    wrk from pre-signed requests; the builtin engine (no model latency),
#    no debounce, a local receiver taking the replies. First as fast as wrk
#    sends them (16 connections): sustained replies/s over the busy window;
#    then paced at RATE messages/s (default 100): p50/p99 of each run's own
#    time from being queued with its message to its reply being written
#    (the run's created_at → completed_at: job claim, prompt, engine, reply,
#    commit). Targets on a 2-core machine: >= 1,000 replies/s on SQLite,
#    >= 600 on PostgreSQL; paced p99 <= 10 ms on SQLite, <= 25 ms on
#    PostgreSQL.
# 2. Concurrency. C conversations at once against an OpenAI-compatible
#    engine (a local streaming server) that takes 300 ms to its first
#    token: all answered; p50/p99 of the time each run added beyond the
#    engine's 300 ms; the server's resident memory per run in flight.
#    Target (C = 500): p99 added <= 50 ms on SQLite, <= 100 ms on PostgreSQL.
#
# Usage: bench/agent_runs.sh [messages] [concurrent]   (defaults 3000, 500;
#        RATE=… paces the overhead part, default 100/s)
#        DATABASE=postgres bench/agent_runs.sh   on a fresh PostgreSQL database
# Needs python3 and wrk.
set -euo pipefail
cd "$(dirname "$0")/.."
MESSAGES="${1:-3000}"
CONCURRENT="${2:-500}"
PORT="${PORT:-18787}"
RX_PORT="${RX_PORT:-18788}"
RATE="${RATE:-100}"
ENGINE_PORT="${ENGINE_PORT:-18789}"
source bench/lib.sh
need_wrk
bench_prepare

# The replies' receiver and the slow engine, one asyncio process: each
# chat completion streams its answer after 300 ms.
python3 - "$RX_PORT" "$ENGINE_PORT" <<'PY' &
import asyncio, json, sys

async def handle(reader, writer, slow):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            if not slow:
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: application/json\r\n\r\n{}")
                await writer.drain()
                continue
            await asyncio.sleep(0.3)
            chunk = lambda d: "data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 1,
                "model": "bench", "choices": [{"index": 0, "delta": d, "finish_reason": None}]}) + "\n\n"
            usage = "data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "bench",
                "choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 8, "total_tokens": 58}}) + "\n\n"
            body = (chunk({"role": "assistant", "content": "Your order "}) + chunk({"content": "ships today."})
                    + usage + "data: [DONE]\n\n").encode()
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()

async def main():
    rx = await asyncio.start_server(lambda r, w: handle(r, w, False), "127.0.0.1", int(sys.argv[1]), backlog=1024)
    engine = await asyncio.start_server(lambda r, w: handle(r, w, True), "127.0.0.1", int(sys.argv[2]), backlog=1024)
    await asyncio.gather(rx.serve_forever(), engine.serve_forever())
asyncio.run(main())
PY
EXTRA_PIDS=$!
start_server PARLEY_AGENTS__DEBOUNCE_MS=0 PARLEY_WEBHOOKS__ALLOW_PRIVATE_TARGETS=true PARLEY_PRICING__AGENT_CREATE_CENTS=0 \
  PARLEY_TEXT_ENGINES__SLOW__BASE_URL="http://127.0.0.1:$ENGINE_PORT/v1" PARLEY_TEXT_ENGINES__SLOW__MODEL=bench \
  PARLEY_TEXT_ENGINES__SLOW__MAX_RETRIES=0

cat > inbound.lua <<'LUA'
-- Sends pre-signed inbound messages, each once: thread k of n takes lines
-- k, k+n, …; when they run out its connections only check /healthz, once a
-- second (the script stops wrk when every message is answered).
local counter = 0
local threads = {}
function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
  table.insert(threads, thread)
end
function init(args)
  lines = {}
  for line in io.lines(args[1]) do lines[#lines + 1] = line end
  path, step, pace, i = args[2], tonumber(args[3]), tonumber(args[4]), tid + 1
end
function delay()
  if lines[i] then return pace end
  return 1000
end
function request()
  -- wrk may build a thread's first request without sending it: make it one
  -- that does not matter.
  if not started then
    started = true
    return wrk.format("GET", "/healthz")
  end
  local line = lines[i]
  if not line then return wrk.format("GET", "/healthz") end
  i = i + step
  local id, ts, sig, body = line:match("([^\t]+)\t([^\t]+)\t([^\t]+)\t(.*)")
  return wrk.format("POST", path, {["content-type"] = "application/json", ["webhook-id"] = id,
    ["webhook-timestamp"] = ts, ["webhook-signature"] = sig}, body)
end
LUA

# Sets up a channel and an agent (on engine $2, taking over the api channel
# with priority $4), writes $1 signed requests to requests.tsv, and prints
# the inbound path and the agent.
setup() {
  python3 - "$BASE" "$KEY" "$RX_PORT" "$1" "$2" "$3" "$4" <<'PY'
import base64, hashlib, hmac, json, sys, time, urllib.request
base, key, rx_port, n, engine, tag, priority = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6], int(sys.argv[7])
def call(method, path, body=None, headers=None):
    h = {"X-API-Key": key, "Content-Type": "application/json", **(headers or {})}
    with urllib.request.urlopen(urllib.request.Request(base + path, json.dumps(body).encode() if body else None, h, method=method)) as r:
        return json.loads(r.read() or b"null")
channel = call("POST", "/api/v1/channels", {"type": "api", "name": tag, "config": {"url": f"http://127.0.0.1:{rx_port}/replies"}})
agent = call("POST", "/api/v1/agents", {"name": tag, "text_engine": engine, "tools": [], "priority": priority},
             {"Idempotency-Key": tag})
call("POST", f"/api/v1/agents/{agent['id']}/triggers", {"event": "message.received", "channel": "api"})
secret = base64.b64decode(channel["secret"].removeprefix("whsec_"))
ts = str(int(time.time()))
with open("requests.tsv", "w") as f:
    for i in range(n):
        body = json.dumps({"from": f"{tag}-{i}", "text": f"Where is order {i}?", "external_id": f"{tag}-{i}"})
        mid = f"msg_{tag}_{i}"
        sig = base64.b64encode(hmac.new(secret, f"{mid}.{ts}.{body}".encode(), hashlib.sha256).digest()).decode()
        f.write(f"{mid}\t{ts}\tv1,{sig}\t{body}\n")
print(f"/api/v1/channels/{channel['id']}/inbound {agent['id']}")
PY
}

# Waits for `n` completed runs of agent $1, then prints their figures;
# $3 = the engine's own latency in ms, subtracted.
report() {
  python3 - "$BASE" "$KEY" "$1" "$2" "$3" "$SERVER" <<'PY'
import json, sys, time, urllib.request
from datetime import datetime
base, key, agent, n, engine_ms, pid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
def call(path):
    with urllib.request.urlopen(urllib.request.Request(base + path, headers={"X-API-Key": key})) as r:
        return json.loads(r.read())
def rss_mb():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
started, peak = time.time(), rss_mb()
while call(f"/api/v1/agent-runs?agent_id={agent}&status=completed&limit=1")["total"] < n:
    peak = max(peak, rss_mb())
    if time.time() - started > float(__import__("os").environ.get("BENCH_WAIT_S", "600")):
        sys.exit(f"not every message was answered within 600 s: {call(f'/api/v1/agent-runs?agent_id={agent}')['total']} runs")
    time.sleep(0.05)
def when(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
runs, offset = [], 0
while offset < n:
    page = call(f"/api/v1/agent-runs?agent_id={agent}&limit=200&offset={offset}")
    runs += page["items"]; offset += 200
took = sorted((when(r["completed_at"]) - when(r["created_at"])) * 1000 - engine_ms for r in runs)
window = max(when(r["completed_at"]) for r in runs) - min(when(r["created_at"]) for r in runs)
pct = lambda q: took[min(len(took) - 1, int(q * len(took)))]
failed = call(f"/api/v1/agent-runs?agent_id={agent}&status=failed&limit=1")["total"]
label = "run time (queued → reply written)" if engine_ms == 0 else f"added beyond the engine's {engine_ms:.0f} ms"
print(f"runs completed: {len(runs)}, failed: {failed}; replies/s over the busy window: {n / window:.0f}")
print(f"{label}: p50 {pct(.5):.1f} ms, p99 {pct(.99):.1f} ms, max {took[-1]:.1f} ms")
print(f"server memory: peak {peak:.0f} MiB", file=sys.stderr)
print(f"PEAK_RSS_MB={peak:.1f}")
PY
}

rss_now() { awk '/VmRSS/ {print $2 / 1024}' "/proc/$SERVER/status"; }

echo "== throughput: $MESSAGES messages as fast as wrk sends them, builtin engine, ${DATABASE:-sqlite} =="
read -r INBOUND AGENT < <(setup "$MESSAGES" builtin throughput 1)
START=$(date +%s.%N)
wrk -t2 -c16 -d300s -s inbound.lua "$BASE" -- "$WORK/requests.tsv" "$INBOUND" 2 0 >/dev/null 2>&1 &
WRK=$!
report "$AGENT" "$MESSAGES" 0 | grep -v PEAK_RSS
kill $WRK 2>/dev/null || true
echo "all answered $(python3 -c "print(round($(date +%s.%N) - $START, 1))") s after the first message"

PACED=$((RATE * 20))
echo "== overhead: $PACED messages at $RATE/s, builtin engine =="
read -r INBOUND AGENT < <(setup "$PACED" builtin overhead 2)
wrk -t2 -c16 -d300s -s inbound.lua "$BASE" -- "$WORK/requests.tsv" "$INBOUND" 2 $((16000 / RATE)) >/dev/null 2>&1 &
WRK=$!
report "$AGENT" "$PACED" 0 | grep -v PEAK_RSS
kill $WRK 2>/dev/null || true

echo "== concurrency: $CONCURRENT conversations at once, engine 300 ms to first token =="
BEFORE=$(rss_now)
read -r INBOUND AGENT < <(setup "$CONCURRENT" slow concurrent 3)
wrk -t2 -c"$CONCURRENT" -d60s -s inbound.lua "$BASE" -- "$WORK/requests.tsv" "$INBOUND" 2 0 >/dev/null 2>&1 &
WRK=$!
OUT=$(report "$AGENT" "$CONCURRENT" 300)
kill $WRK 2>/dev/null || true
echo "$OUT" | grep -v PEAK_RSS
PEAK=$(echo "$OUT" | sed -n 's/PEAK_RSS_MB=//p')
python3 -c "print(f'memory: {$BEFORE:.0f} MiB before, peak {$PEAK:.0f} MiB: {($PEAK - $BEFORE) * 1024 / $CONCURRENT:.0f} KiB per concurrent run')"
