#!/usr/bin/env bash
# Benchmark: inbound messages/s through the api channel, and
# `GET /api/v1/conversations?limit=50` with 100,000 conversations and
# 1,000,000 messages, on SQLite.
#
# 1. Inbound: wrk POSTs signed messages (Standard Webhooks, pre-signed by
#    Python, each with its own external_id) from 2,000 senders to
#    /api/v1/channels/{id}/inbound; every request is a full receive (dedupe,
#    contact, conversation, message, event) committed with synchronous=FULL.
# 2. List: the server stops, Python adds conversations and messages straight
#    into the database up to 100,000 and 1,000,000, the server starts again,
#    and wrk reads the first page (also with a filter).
# Targets on a 2-core machine: >= 3,000 inbound/s; list >= 5,000 req/s, p99 <= 25 ms.
#
# Usage: bench/conversations.sh [duration_seconds] [wrk_connections]   (needs wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-10}"
CONNECTIONS="${2:-32}"
PORT="${PORT:-18484}"
source bench/lib.sh
need_wrk
bench_prepare
start_server
api_channel

# Pre-signed requests, one per line: webhook-id, timestamp, signature, body.
REQUESTS=$(( DURATION * 12000 + 20000 ))
echo "signing $REQUESTS inbound requests…" >&2
python3 - "$SECRET" "$REQUESTS" <<'PY'
import base64, hashlib, hmac, json, sys, time
secret = base64.b64decode(sys.argv[1].removeprefix("whsec_"))
n = int(sys.argv[2])
ts = str(int(time.time()) + 60)
with open("signed.txt", "w") as f:
    for i in range(n):
        body = json.dumps({"from": f"user-{i % 2000}", "text": f"Message {i}: where is my order?", "external_id": f"e-{i}"})
        mid = f"msg_{i}"
        sig = base64.b64encode(hmac.new(secret, f"{mid}.{ts}.{body}".encode(), hashlib.sha256).digest()).decode()
        f.write(f"{mid}\t{ts}\tv1,{sig}\t{body}\n")
PY
cat > inbound.lua <<LUA
local lines = {}
for line in io.lines("signed.txt") do lines[#lines + 1] = line end
local counter = 0
local threads = {}
function setup(thread)
  thread:set("offset", #threads)
  table.insert(threads, thread)
end
function init(args)
  counter = offset
end
request = function()
  counter = counter + 2
  local line = lines[(counter % #lines) + 1]
  local id, ts, sig, body = line:match("([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)")
  return wrk.format("POST", "/api/v1/channels/$CHANNEL/inbound",
    {["content-type"] = "application/json", ["webhook-id"] = id, ["webhook-timestamp"] = ts, ["webhook-signature"] = sig}, body)
end
LUA
echo "inbound for ${DURATION}s with $CONNECTIONS connections…" >&2
IN=$(wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s inbound.lua "$BASE")
echo "$IN" >&2
IN_RPS=$(echo "$IN" | awk '/Requests\/sec/ {print $2}')
IN_P99=$(echo "$IN" | awk '$1 == "99%" {print $2}')
IN_ERR=$(echo "$IN" | awk '/Non-2xx/ {print $4}')
STORED=$(curl -sf "$BASE/api/v1/conversations/1/messages?limit=1" -H "X-API-Key: $KEY" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')

kill $SERVER; wait $SERVER 2>/dev/null || true
echo "seeding up to 100,000 conversations and 1,000,000 messages…" >&2
python3 - "$CHANNEL" <<'PY'
import sqlite3, sys, time
channel = int(sys.argv[1])
db = sqlite3.connect("data/parley.db")
db.execute("PRAGMA synchronous = OFF")
ws, live = db.execute("SELECT workspace_id, livemode FROM channels WHERE id = ?", (channel,)).fetchone()
have = db.execute("SELECT COUNT(*) FROM conversations").fetchone()[0]
now = int(time.time() * 1_000_000)
convs = []
for i in range(have, 100_000):
    t = now - (100_000 - i) * 1_000_000
    convs.append((ws, live, channel, "api", "direct", f"api:seed-{i}", f"Seed {i}", "open", "agent", t, f"Seed message {i}\nsecond line", i % 3, t, t))
db.executemany("""INSERT INTO conversations (workspace_id, livemode, channel_id, channel, kind, channel_ref, title, status,
    handler, last_message_ts, last_message_preview, unread_count, created_at, updated_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""", convs)
ids = [r[0] for r in db.execute("SELECT id FROM conversations ORDER BY id")]
need = 1_000_000 - db.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
def messages():
    for n in range(need):
        c = ids[n % len(ids)]
        yield (ws, live, c, channel, "inbound", "contact", f"Hello, this is seeded message {n} about order #{n % 9973}", "received", now)
db.executemany("""INSERT INTO messages (workspace_id, livemode, conversation_id, channel_id, direction, author_type, text,
    status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""", messages())
db.commit()
print(db.execute("SELECT COUNT(*) FROM conversations").fetchone()[0], db.execute("SELECT COUNT(*) FROM messages").fetchone()[0], file=sys.stderr)
PY
start_server
CONVS=$(curl -sf "$BASE/api/v1/conversations?limit=1" -H "X-API-Key: $KEY" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')
list() { # path
  wrk -t2 -c"$CONNECTIONS" -d2s -H "X-API-Key: $KEY" "$BASE$1" >/dev/null  # warm-up
  wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -H "X-API-Key: $KEY" "$BASE$1"
}
L1=$(list "/api/v1/conversations?limit=50"); echo "$L1" >&2
L2=$(list "/api/v1/conversations?limit=50&status=open&channel=api"); echo "$L2" >&2
field() { echo "$1" | awk -v k="$2" '$1 == k {print $2}'; }
echo
echo "inbound (api channel, signed, $CONNECTIONS connections): ${IN_RPS} msg/s, p99 ${IN_P99}, non-2xx ${IN_ERR:-0}; messages stored in conversation 1: $STORED"
echo "conversations stored: $CONVS; messages: 1,000,000"
echo "GET /api/v1/conversations?limit=50: $(echo "$L1" | awk '/Requests\/sec/ {print $2}') req/s, p50 $(field "$L1" 50%), p99 $(field "$L1" 99%)"
echo "  …&status=open&channel=api:       $(echo "$L2" | awk '/Requests\/sec/ {print $2}') req/s, p50 $(field "$L2" 50%), p99 $(field "$L2" 99%)"
