#!/usr/bin/env bash
# Benchmark: a cluster (scripts/cluster: N instances on PostgreSQL and Redis
# behind HAProxy) under a mixed load, and the same load through faults.
#
# The load, through HAProxy, for DURATION seconds:
#   - API reads: wrk, READERS connections, cycling over agents,
#     conversations, contacts and events lists (live key);
#   - inbound messages answered by an agent: bench/cluster_load.py, WORKERS
#     clients posting signed messages to an api channel, each from a new
#     sender; the builtin engine answers each, and the reply is POSTed to
#     the load's receiver; 503s and dropped connections are retried with the
#     same ids, as a client following Retry-After would;
#   - webhook deliveries: an endpoint subscribed to every event, on the
#     load's receiver;
#   - test calls: one test-mode call every CALL_EVERY s, on the simulated
#     line with live audio (the caller's lines spoken by espeak-ng, 20 ms
#     frames, recorded as SIP calls are; a speech-to-text engine is named
#     but nobody listens on its port, so the agent only greets and the
#     caller waits 15 s for each answer: a call lasts ~35 s).
# Then, once the work settles, the database is checked: every acknowledged
# message stored once with its message.received event, every conversation
# answered once, every delivery made.
#
# Usage: bench/cluster.sh [duration_seconds]          (default 30)
#   SIZES="1 2 3"   cluster sizes to measure, one run each (default 1 2 3)
#   FAULT=kill      kill -9 instance 2 a third of the way in, start it 10 s later
#   FAULT=term      SIGTERM instance 2 (graceful drain), start it again
#   FAULT=postgres  stop PostgreSQL for 5 s (pg_ctlcluster), then start it
#   FAULT=redis     stop Redis for 10 s, then start it again
#                   (a FAULT run uses 3 instances unless SIZES says otherwise)
#   WORKERS=16 READERS=8 CALL_EVERY=0.5 PORT=18400 PARLEY_BIN=…
# Needs haproxy, wrk, psql, redis-cli and python3 with aiohttp (Twilio's SDK
# installs it). Uses the database parley_clusterbench, dropped first.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DURATION=${1:-30}
WORKERS=${WORKERS:-16}
READERS=${READERS:-8}
CALL_EVERY=${CALL_EVERY:-0.5}
FAULT=${FAULT:-}
if [ -n "$FAULT" ]; then SIZES=${SIZES:-3}; else SIZES=${SIZES:-"1 2 3"}; fi
export PORT=${PORT:-18400}
RX_PORT=$((PORT + 300))
PG=postgres://postgres@127.0.0.1:5432
export DATABASE_URL=$PG/parley_clusterbench
command -v wrk >/dev/null || { echo "wrk is required (apt-get install wrk)" >&2; exit 1; }
command -v haproxy >/dev/null || { echo "haproxy is required (apt-get install haproxy)" >&2; exit 1; }
if [ -z "${PARLEY_BIN:-}" ]; then
  cargo build --release --bin parley >&2
  export PARLEY_BIN=$ROOT/target/release/parley
fi
WORK=$(mktemp -d)
export CLUSTER_DIR=$WORK/cluster
cleanup() {
  "$ROOT/scripts/cluster" down >/dev/null 2>&1 || true
  [ -n "${KEEP_WORK:-}" ] && echo "kept $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT

# Every instance: replies and deliveries may go to 127.0.0.1, limits lifted
# (the load is one client), no debounce (one run per message).
export PARLEY_WEBHOOKS__ALLOW_PRIVATE_TARGETS=true PARLEY_AGENTS__DEBOUNCE_MS=0 \
  PARLEY_RATE_LIMIT__PER_SECOND=10000000 PARLEY_RATE_LIMIT__BURST=10000000 \
  PARLEY_VOICE__MAX_CONCURRENT_CALLS=10000 PARLEY_LOG__LEVEL=warn PARLEY_PRICING__AGENT_CREATE_CENTS=0 \
  PARLEY_SPEECH__STT__EARS__KIND=wyoming PARLEY_SPEECH__STT__EARS__HOST=127.0.0.1 \
  PARLEY_SPEECH__STT__EARS__PORT=$((PORT + 301)) PARLEY_SPEECH__DEFAULT_STT=ears

cat >"$WORK/reads.lua" <<'LUA'
-- Cycles over four list reads with the live key; counts statuses.
local paths = {"/api/v1/agents?limit=20", "/api/v1/conversations?limit=20",
               "/api/v1/contacts?limit=20", "/api/v1/events?limit=20"}
local i = 0
statuses = {}
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) key = args[1]; statuses = {} end
function request()
  i = i % #paths + 1
  return wrk.format("GET", paths[i], {["X-API-Key"] = key})
end
function response(status) statuses[status] = (statuses[status] or 0) + 1 end
function done(summary, latency, requests)
  local all = {}
  for _, t in ipairs(threads) do
    local s = t:get("statuses")
    for k, v in pairs(s) do all[k] = (all[k] or 0) + v end
  end
  local parts = {}
  for k, v in pairs(all) do table.insert(parts, k .. ":" .. v) end
  io.write(string.format("READS %d %.1f %.1f %.1f %s errors=%d\n", summary.requests,
    summary.requests / (summary.duration / 1e6), latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    table.concat(parts, ","), summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
  io.flush()
end
LUA

inject() {
  sleep $((DURATION / 3))
  case "$FAULT" in
    kill) "$ROOT/scripts/cluster" kill 2; echo "fault: instance 2 killed (-9) at $(date +%T)"; sleep 10
          "$ROOT/scripts/cluster" start 2 ;;
    term) echo "fault: SIGTERM to instance 2 at $(date +%T)"; "$ROOT/scripts/cluster" term 2
          echo "fault: instance 2 drained and stopped at $(date +%T)"; "$ROOT/scripts/cluster" start 2 ;;
    postgres) pg_ctlcluster 15 main stop -m fast; echo "fault: PostgreSQL stopped at $(date +%T)"; sleep 5
              pg_ctlcluster 15 main start; echo "fault: PostgreSQL started at $(date +%T)" ;;
    redis) redis-cli shutdown nosave >/dev/null 2>&1 || true; echo "fault: Redis stopped at $(date +%T)"; sleep 10
           redis-server --bind 127.0.0.1 --port 6379 --daemonize yes --save '' --appendonly no >/dev/null
           echo "fault: Redis started at $(date +%T)" ;;
    *) echo "unknown FAULT=$FAULT (kill, term, postgres, redis)" >&2; exit 2 ;;
  esac
}

sql() { psql -Atq "$DATABASE_URL" "$@"; }

for N in $SIZES; do
  psql -q "$PG/postgres" -c "DROP DATABASE IF EXISTS parley_clusterbench" -c "CREATE DATABASE parley_clusterbench"
  rm -rf "$CLUSTER_DIR"
  "$ROOT/scripts/cluster" up "$N" >/dev/null
  LIVE=$(grep -o 'parley_live_[A-Za-z0-9]*' "$CLUSTER_DIR/banner.txt" | head -1)
  TEST=$(grep -o 'parley_test_[A-Za-z0-9]*' "$CLUSTER_DIR/banner.txt" | head -1)
  BASE=http://127.0.0.1:$PORT
  read -r CHANNEL SECRET AGENT < <(python3 - "$BASE" "$LIVE" "$RX_PORT" <<'PY'
import json, sys, urllib.request, uuid
base, key, rx = sys.argv[1:4]
def call(path, body):
    r = urllib.request.Request(base + path, json.dumps(body).encode(), {"X-API-Key": key,
        "Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4())})
    return json.loads(urllib.request.urlopen(r).read())
channel = call("/api/v1/channels", {"type": "api", "name": "Load", "config": {"url": f"http://127.0.0.1:{rx}/replies"}})
agent = call("/api/v1/agents", {"name": "Answers", "tools": []})
call(f"/api/v1/agents/{agent['id']}/triggers", {"event": "message.received", "channel": "api"})
call("/api/v1/webhooks", {"url": f"http://127.0.0.1:{rx}/hook", "events": ["*"]})
print(channel["id"], channel["secret"], agent["id"])
PY
)
  echo "== $N instance(s), ${DURATION} s${FAULT:+, fault: $FAULT} =="
  [ -n "$FAULT" ] && { inject & FAULTING=$!; }
  wrk -t2 -c"$READERS" -d"${DURATION}s" -s "$WORK/reads.lua" "$BASE" -- "$LIVE" >"$WORK/wrk.txt" 2>&1 &
  WRK=$!
  python3 "$ROOT/bench/cluster_load.py" "$BASE" "$LIVE" "$TEST" "$CHANNEL" "$SECRET" "$AGENT" "$RX_PORT" \
    "$DURATION" "$WORKERS" "$CALL_EVERY" "$WORK/load.json"
  wait "$WRK" || true
  [ -n "$FAULT" ] && { wait "$FAULTING" || true; }
  read -r _ READS READ_RPS READ_P50 READ_P99 READ_STATUSES READ_ERRORS < <(grep '^READS' "$WORK/wrk.txt")

  python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["acked"]))' "$WORK/load.json" >"$WORK/acked.txt"
  RUN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"])' "$WORK/load.json")
  CHECKS=$(sql <<SQL
CREATE TEMP TABLE acked (external_id TEXT PRIMARY KEY);
\copy acked FROM '$WORK/acked.txt'
SELECT 'lost=' || count(*) FROM acked a
  WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.direction = 'inbound' AND m.external_id = a.external_id);
SELECT 'duplicate_messages=' || count(*) FROM (SELECT 1 FROM messages WHERE direction = 'inbound'
  AND external_id LIKE '$RUN-%' GROUP BY channel_id, external_id HAVING count(*) > 1) d;
SELECT 'duplicate_events=' || count(*) FROM (SELECT 1 FROM events WHERE type = 'message.received'
  GROUP BY data->>'id' HAVING count(*) > 1) d;
SELECT 'messages_without_event=' || count(*) FROM messages m WHERE m.direction = 'inbound'
  AND m.channel_id = $CHANNEL AND NOT EXISTS (SELECT 1 FROM events e WHERE e.type = 'message.received' AND e.data->>'id' = m.id::text);
SELECT 'unanswered=' || count(*) FILTER (WHERE n = 0) || ' answered_twice=' || count(*) FILTER (WHERE n > 1)
  FROM (SELECT (SELECT count(*) FROM messages o WHERE o.conversation_id = i.conversation_id
                AND o.direction = 'outbound') AS n
        FROM messages i WHERE i.direction = 'inbound' AND i.external_id LIKE '$RUN-%') x;
SELECT 'replies_by_status=' || coalesce(string_agg(status || ':' || n, ','), '') FROM
  (SELECT status, count(*) n FROM messages WHERE direction = 'outbound' AND channel_id = $CHANNEL
   GROUP BY status ORDER BY status) s;
SELECT 'deliveries_by_status=' || coalesce(string_agg(status || ':' || n, ','), '') FROM
  (SELECT status, count(*) n FROM webhook_deliveries GROUP BY status ORDER BY status) s;
SELECT 'events=' || count(*) FROM events;
SELECT 'jobs_left=' || coalesce(string_agg(kind || ':' || n, ','), '') FROM
  (SELECT kind, count(*) n FROM jobs GROUP BY kind ORDER BY kind) j;
SQL
)
  python3 - "$WORK/load.json" "$READS" "$READ_RPS" "$READ_P50" "$READ_P99" "$READ_STATUSES" "$READ_ERRORS" "$CHECKS" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
reads, rps, p50, p99, statuses, errors, checks = sys.argv[2:9]
seconds = s["seconds"]
print(f"API reads: {reads} in {seconds} s = {float(rps):.0f}/s (p50 {p50} ms, p99 {p99} ms; statuses {statuses}; socket {errors})")
print(f"inbound messages acknowledged: {s['messages_acknowledged']} = {s['messages_per_second']}/s "
      f"(p50 {s['inbound_p50_ms']} ms, p99 {s['inbound_p99_ms']} ms)")
print(f"agent replies received: {s['replies_distinct']} (repeated {s['replies_repeated']}); "
      f"webhook deliveries: {s['deliveries_distinct']} = {s['deliveries_distinct'] / seconds:.0f}/s during the load "
      f"(repeated {s['deliveries_repeated']}); settled {s['settle_seconds']} s after the load")
print(f"test calls placed: {s['calls_placed']}, ended as {s['calls_by_end']}; recordings of answered calls {s['answered_calls_recordings']}")
print(f"attempts: {s['attempts']}")
print(f"failed first attempts by cause: {s['failures_by_cause'] or 'none'}")
total = int(reads) + sum(v for k, v in s["attempts"].items())
print(f"total requests/s: {total / seconds:.0f}")
print("checks: " + " ".join(checks.split()))
PY
  if [ "$FAULT" = redis ]; then
    echo "Redis fallback log lines per instance: $(for i in $(seq 1 "$N"); do grep -ci redis "$CLUSTER_DIR/instance-$i.log" || true; done | tr '\n' ' ')"
  fi
  "$ROOT/scripts/cluster" down >/dev/null
done
