#!/usr/bin/env bash
# Benchmark: contact CSV import rate, and `GET /api/v1/contacts?q=…` latency
# over 100,000 contacts, on SQLite.
#
# Imports two 50,000-row CSVs (the first is timed: rows/s), then drives the
# list endpoint with wrk, each request searching a different term: partial
# names, email fragments, phone digits in several formats, and no match.
# Targets on a 2-core machine: import >= 20,000 rows/s; search p99 <= 20 ms.
#
# Usage: bench/contacts.sh [duration_seconds] [wrk_connections]   (needs wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-15}"
CONNECTIONS="${2:-4}"
PORT="${PORT:-18383}"
source bench/lib.sh
need_wrk
bench_prepare
start_server

python3 - <<'PY'
import random
random.seed(7)
first = ["Ana", "Bo", "Chen", "Dara", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jo", "Kemal", "Lena", "Mateo", "Nia", "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq"]
areas = [212, 305, 415, 646, 718, 202, 312, 617, 213, 503]
last = ["Lopez", "Smith", "Nguyen", "Okafor", "Rossi", "Kowalski", "Haddad", "Tanaka", "Silva", "Muller", "Dubois", "Ivanova", "Kim", "Patel", "Garcia"]
for part, offset in (("a", 0), ("b", 50_000)):
    with open(f"contacts_{part}.csv", "w") as f:
        f.write("display_name,phone,email,notes,tags\n")
        for i in range(offset, offset + 50_000):
            name = f"{random.choice(first)} {random.choice(last)} {i}"
            phone = f"+1 ({areas[i // 10_000 % len(areas)]}) 555-{i % 10_000:04d}"
            email = f"{name.split()[0].lower()}.{i}@example{i % 50}.com"
            f.write(f"{name},{phone},{email},imported,batch-{part};{random.choice(['vip', 'lead', 'churned'])}\n")
PY

import_csv() {
  curl -s -X POST "$BASE/api/v1/contacts/import" -H "X-API-Key: $KEY" -H "Content-Type: text/csv" \
    --data-binary "@$1" -o "$1.out" -w '%{time_total}'
}
echo "importing 50,000 rows…" >&2
SECONDS_A=$(import_csv contacts_a.csv)
echo "importing 50,000 more…" >&2
SECONDS_B=$(import_csv contacts_b.csv)
TOTAL=$(curl -sf "$BASE/api/v1/contacts?limit=1" -H "X-API-Key: $KEY" | grep -o '"total":[0-9]*')

cat > search.lua <<'LUA'
local terms = {"lopez", "ana%20smi", "kowal", "tanaka%2012", "priya.4", "example7.com", "omar.99999",
  "(212)%20555", "555-01", "2125550100", "%2B1%20305", "rossi%2099", "zzzz", "nia", "quinn%20patel%208",
  "fatima.123", "haddad%2042", "muller", "ivanova%203", "4155551234"}
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/api/v1/contacts?q=" .. terms[(n % #terms) + 1] .. "&limit=50")
end
LUA
wrk -t2 -c"$CONNECTIONS" -d3s -s search.lua -H "X-API-Key: $KEY" "$BASE" >/dev/null  # warm-up
OUT=$(wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -s search.lua -H "X-API-Key: $KEY" "$BASE")
echo "$OUT" >&2
P50=$(echo "$OUT" | awk '$1 == "50%" {print $2}')
P99=$(echo "$OUT" | awk '$1 == "99%" {print $2}')
RPS=$(echo "$OUT" | awk '/Requests\/sec/ {print $2}')
echo
echo "import: 50,000 rows in ${SECONDS_A}s = $(python3 -c "print(round(50000 / $SECONDS_A))") rows/s (second 50,000 into 50,000 existing: $(python3 -c "print(round(50000 / $SECONDS_B))") rows/s); $(cat contacts_a.csv.out)"
echo "contacts stored: ${TOTAL#*:}"
echo "search (20 varied q terms, ${CONNECTIONS} connections): ${RPS} req/s, p50 ${P50}, p99 ${P99}"
ls -l "$WORK/data" >&2
