#!/usr/bin/env bash
# Benchmark: the dashboard, with a busy workspace behind it.
#
#  1. Data: the demo seed and a contact made through the API, grown by
#     bench/dashboard_seed.py to 100,000 conversations (and contacts, and
#     agent runs), 1,000,000 messages and 10,000 calls over 30 days, plus one
#     call with a 10-minute recording.
#  2. API: each request the Home, Calls and Contacts pages make, with the
#     dashboard's own credentials (a JWT from the owner login, test mode),
#     driven by wrk on one connection; p50/p99 each; target p99 <= 50 ms.
#     The silent refresh (a rotating cookie) is timed by a Python loop.
#  3. Browser (bench/dashboard.mjs): the first load's transfer size
#     (compressed, as served; target <= 200 KB); Chromium signs in and loads
#     Home and the long call's page, unthrottled: the time until the page's
#     data is on screen and the main thread has been quiet for 500 ms.
#     Then Lighthouse 12.2.3 scores Home, Agents and the long call's page
#     (its default mobile emulation with simulated throttling).
#
# Usage: bench/dashboard.sh [wrk_seconds]            SQLite
#        DATABASE=postgres bench/dashboard.sh        PostgreSQL
#        SKIP_BROWSER=1 …                            the API's figures only
# Needs wrk, psql (for PostgreSQL), Chromium and the npm packages of
# crates/server/tests/browser (npm ci --prefix crates/server/tests/browser).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-10}"
PORT="${PORT:-18390}"
source bench/lib.sh
need_wrk
BROWSER_MODULES="$PWD/crates/server/tests/browser/node_modules"
[ -d "$BROWSER_MODULES/lighthouse" ] || { echo "run: npm ci --prefix crates/server/tests/browser" >&2; exit 1; }
bench_prepare
start_server
TEST_KEY=$(grep -o 'parley_test_[A-Za-z0-9]*' banner.txt | head -1)
read -r EMAIL PASSWORD < <(sed -n 's/^ *owner login: \(.*\) \/ \(.*\)$/\1 \2/p' banner.txt)

echo "== seeding through the API" >&2
curl -sf -X POST "$BASE/api/v1/demo" -H "X-API-Key: $TEST_KEY" -o demo.json
curl -sf -X POST "$BASE/api/v1/contacts" -H "X-API-Key: $TEST_KEY" -H 'Content-Type: application/json' \
  -d '{"display_name": "Template Person", "phone": "+14155550100", "email": "template@example.com"}' >/dev/null
CALL=$(python3 -c 'import json; print(json.load(open("demo.json"))["call_id"])')
for _ in $(seq 1 120); do
  curl -sf "$BASE/api/v1/calls/$CALL" -H "X-API-Key: $TEST_KEY" | python3 -c "import json,sys; sys.exit(json.load(sys.stdin)[\"recording\"][\"status\"] != \"available\")" && break
  sleep 1
done
curl -sf "$BASE/api/v1/calls/$CALL" -H "X-API-Key: $TEST_KEY" | python3 -c "import json,sys; sys.exit(json.load(sys.stdin)[\"recording\"][\"status\"] != \"available\")" ||
  { echo "the demo's test call did not finish with a recording" >&2; exit 1; }
sleep 2 # the call's runs and charges settle
stop_server

echo "== growing the data" >&2
if [ "${DATABASE:-sqlite}" = postgres ]; then
  python3 "$ROOT/bench/dashboard_seed.py" --postgres "$PARLEY_DATABASE_URL" --storage data/objects
else
  python3 "$ROOT/bench/dashboard_seed.py" --sqlite data/parley.db --storage data/objects
fi
start_server

echo "== API latency (wrk, 1 connection, ${DURATION}s each)" >&2
TOKENS=$(curl -sf -c cookies.txt -X POST "$BASE/api/v1/auth/login" -H 'Content-Type: application/json' \
  -d "{\"email\": \"$EMAIL\", \"password\": \"$PASSWORD\"}")
ACCESS=$(echo "$TOKENS" | python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])')
TOKENS=$(curl -sf -b cookies.txt -c cookies.txt -X POST "$BASE/api/v1/auth/workspace" -H "Authorization: Bearer $ACCESS" \
  -H 'Content-Type: application/json' -d '{"workspace_id": 1, "mode": "test"}')
ACCESS=$(echo "$TOKENS" | python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])')
AGENT=$(curl -sf "$BASE/api/v1/agents?limit=1" -H "Authorization: Bearer $ACCESS" | python3 -c 'import json, sys; print(json.load(sys.stdin)["agents"][0]["id"])')
WEEK_AGO=$(date -u -d '7 days ago' +%Y-%m-%dT00:00:00Z)
printf '%-58s %9s %9s %8s\n' "request (page)" "p50" "p99" "req/s"
measure() { # page path
  local out
  out=$(wrk -t1 -c1 -d"${DURATION}s" --latency -H "Authorization: Bearer $ACCESS" "$BASE$2")
  if echo "$out" | grep -q 'Non-2xx'; then echo "$2 answered non-2xx: $out" >&2; exit 1; fi
  printf '%-58s %9s %9s %8s\n' "$2 ($1)" "$(echo "$out" | awk '$1 == "50%" {print $2}')" \
    "$(echo "$out" | awk '$1 == "99%" {print $2}')" "$(echo "$out" | awk '/Requests\/sec/ {print int($2)}')"
}
measure all "/api/v1/auth/me"
measure home "/api/v1/overview?days=7&utc_offset_minutes=60"
measure calls "/api/v1/agents?limit=200"
measure calls "/api/v1/calls?limit=50&offset=0"
measure calls "/api/v1/calls?limit=50&offset=5000"
measure calls "/api/v1/calls?status=failed&limit=50&offset=0"
measure calls "/api/v1/calls?agent_id=$AGENT&direction=inbound&limit=50&offset=0"
measure calls "/api/v1/calls?created_after=$WEEK_AGO&limit=50&offset=0"
measure contacts "/api/v1/contacts?limit=50&offset=0"
measure contacts "/api/v1/contacts?limit=50&offset=50000"
measure contacts "/api/v1/contacts?q=customer%204242&limit=50&offset=0"
measure contacts "/api/v1/contacts?q=555001&limit=50&offset=0"
python3 - "$BASE" <<'PY'
# The silent refresh rotates its cookie, so each request carries the last one.
import http.client, sys, time
from urllib.parse import urlparse
u = urlparse(sys.argv[1])
conn = http.client.HTTPConnection(u.hostname, u.port)
def refresh(cookie):
    conn.request("POST", "/api/v1/auth/refresh", headers={"Cookie": cookie, "Origin": sys.argv[1]})
    r = conn.getresponse(); r.read()
    assert r.status == 200, r.status
    return r.getheader("Set-Cookie").split(";")[0]
# curl's cookie jar: the last line holds the refresh cookie the login set.
fields = [l.split("\t") for l in open("cookies.txt").read().splitlines() if l.count("\t") == 6][-1]
cookie = f"{fields[5]}={fields[6]}"
times = []
for _ in range(300):
    t = time.perf_counter(); cookie = refresh(cookie); times.append((time.perf_counter() - t) * 1000)
times.sort()
print(f"{'POST /api/v1/auth/refresh (all; 300 in a row)':<58} {times[149]:>7.2f}ms {times[296]:>7.2f}ms")
PY

[ -n "${SKIP_BROWSER:-}" ] && exit 0
echo "== browser" >&2
node "$ROOT/bench/dashboard.mjs" "$BASE" "$EMAIL" "$PASSWORD" call_01BENCHZZZZZZZZZZZZZZZZZZZ
