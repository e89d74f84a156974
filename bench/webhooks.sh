#!/usr/bin/env bash
# Benchmark: sustained webhook deliveries per second to a local receiver, and
# event-to-delivery latency, on SQLite.
#
# 8 endpoints subscribe to every event; wrk PATCHes an agent (each change is
# an agent.updated event, fanned out to the 8 endpoints) for DURATION seconds.
# The receiver reports deliveries/s over its busy window and the p50/p99 time
# from the event's timestamp to its arrival.
# Target on a 2-core machine: >= 2,000 deliveries/s, p99 <= 250 ms.
#
# Usage: bench/webhooks.sh [duration_seconds] [wrk_connections]   (needs wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-15}"
CONNECTIONS="${2:-8}"
ENDPOINTS=8
PORT="${PORT:-18282}"
RX_PORT="${RX_PORT:-18283}"
source bench/lib.sh
need_wrk
bench_prepare

python3 "$ROOT/bench/webhook_receiver.py" "$RX_PORT" "$WORK/summary.json" &
RECEIVER=$!
EXTRA_PIDS=$RECEIVER
start_server PARLEY_WEBHOOKS__ALLOW_PRIVATE_TARGETS=true PARLEY_WEBHOOKS__POLL_INTERVAL_MS=100

for i in $(seq 1 $ENDPOINTS); do
  curl -sf -o /dev/null -X POST "$BASE/api/v1/webhooks" -H "X-API-Key: $KEY" -H "Content-Type: application/json" \
    -d "{\"url\": \"http://127.0.0.1:$RX_PORT/hook/$i\", \"events\": [\"*\"]}"
done
AGENT=$(curl -sf -X POST "$BASE/api/v1/agents" -H "X-API-Key: $KEY" -H "Idempotency-Key: bench" \
  -H "Content-Type: application/json" -d '{"name": "Bench"}' | grep -o '"id":[0-9]*' | head -1 | cut -d: -f2)

cat > patch.lua <<LUA
local n = 0
request = function()
  n = n + 1
  return wrk.format("PATCH", "/api/v1/agents/$AGENT", nil, '{"description": "change ' .. n .. ' ' .. math.random(1, 1000000000) .. '"}')
end
LUA
echo "driving agent.updated events for ${DURATION}s (${CONNECTIONS} connections, ${ENDPOINTS} endpoints)…" >&2
WRK=$(wrk -t1 -c"$CONNECTIONS" -d"${DURATION}s" -s patch.lua -H "X-API-Key: $KEY" -H "Content-Type: application/json" "$BASE")
EVENTS=$(echo "$WRK" | awk '/requests in/ {print $1}')
# Let the queue drain: wait until deliveries stop arriving for 3 s.
EXPECTED=$((EVENTS * ENDPOINTS))
LAST=-1; STILL=0
while [ "$STILL" -lt 6 ]; do
  sleep 0.5
  NOW=$(cat "$WORK/summary.json.count" 2>/dev/null || echo 0)
  if [ "$NOW" = "$LAST" ]; then STILL=$((STILL + 1)); else STILL=0; LAST=$NOW; fi
done
kill -TERM "$RECEIVER"; wait "$RECEIVER" 2>/dev/null || true
echo "$WRK" | grep -E "Requests/sec|Latency" >&2
echo
echo "events created: $EVENTS (each to $ENDPOINTS endpoints: $EXPECTED deliveries expected)"
python3 - "$WORK/summary.json" "$EXPECTED" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); expected = int(sys.argv[2])
print(f"deliveries received: {s['deliveries']} ({expected} from the driven events, plus the agent's creation)")
print(f"sustained deliveries/s: {s['per_second']}")
print(f"event-to-delivery latency: p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms, max {s['max_ms']} ms")
PY
