#!/usr/bin/env bash
# Benchmark: what a fresh `parley serve` holds in memory at rest, and what
# its first requests cost.
#
# Starts the release binary on a new SQLite database (first start: it
# migrates and creates the Default workspace), waits until it has been idle
# for IDLE seconds (default 5; background loading done), and prints its
# resident memory (VmRSS, split into anonymous and file-backed pages), then
# times the first request of each kind a new server meets — /healthz, a
# list, a contact with a phone number (the numbering plans), the OpenAPI
# document, the dashboard — and prints the memory after them.
# Target: resident ≤ 40 MB at rest, first requests as fast as before
# (docs/research/idle-memory.md: the release build holds ~29 MB).
#
# The file-backed part (the binary's code mapped as the start runs it)
# depends on what the page cache holds: each run first evicts the binary
# from it, so every run starts as a cold start does, and runs compare.
#
# Usage: bench/idle_memory.sh [idle_seconds] [runs]   (BENCH_BIN=path for a prebuilt binary)
set -euo pipefail
cd "$(dirname "$0")/.."
IDLE="${1:-5}"
RUNS="${2:-3}"
PORT="${PORT:-18191}"
source bench/lib.sh
bench_prepare

kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$SERVER/status"; }
mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
first() { # label, curl arguments…: prints the time of one request in ms
  local label=$1
  shift
  local t
  t=$(curl -s -o /dev/null -w '%{time_total}' "$@")
  printf '  first %-28s %6.1f ms\n' "$label" "$(awk -v t="$t" 'BEGIN { print t * 1000 }')"
}

for run in $(seq 1 "$RUNS"); do
  rm -rf data banner.txt
  python3 -c "import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)" "$BIN"
  start_server
  sleep "$IDLE"
  echo "run $run: at rest after ${IDLE} s: RSS $(mb "$(kib VmRSS)") MB (anonymous $(mb "$(kib RssAnon)") MB, file $(mb "$(kib RssFile)") MB)"
  first "GET /healthz" "$BASE/healthz"
  first "GET /api/v1/agents" -H "X-API-Key: $KEY" "$BASE/api/v1/agents"
  first "POST /api/v1/contacts (phone)" -X POST -H "X-API-Key: $KEY" -H "Content-Type: application/json" \
    -d '{"display_name": "Ana", "phone": "(415) 555-0100"}' "$BASE/api/v1/contacts"
  first "GET /openapi.json" "$BASE/openapi.json"
  first "GET / (dashboard)" "$BASE/"
  echo "  after them: RSS $(mb "$(kib VmRSS)") MB (anonymous $(mb "$(kib RssAnon)") MB, file $(mb "$(kib RssFile)") MB)"
  stop_server
done
