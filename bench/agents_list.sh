#!/usr/bin/env bash
# Benchmark: GET /api/v1/agents?limit=50 against GET /healthz on SQLite.
#
# Loads 1,000 agents into a fresh database, then drives each endpoint with wrk
# (64 connections, 2 threads) and prints requests/s, p99 latency and the ratio.
# Target on a 2-core machine: agents list >= 10,000 req/s, p99 <= 20 ms, and a
# ratio to /healthz >= 0.3.
#
# Usage: bench/agents_list.sh [duration_seconds]   (needs wrk: apt-get install wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-15}"
PORT="${PORT:-18181}"
source bench/lib.sh
need_wrk
bench_prepare
start_server

# Each agent costs pricing.agent_create_cents (50): fund 1,000 of them.
parley billing credit --workspace 1 --cents 100000 >/dev/null
echo "loading 1,000 agents…" >&2
seq 1 1000 | xargs -P 8 -I{} curl -sf -o /dev/null -X POST "$BASE/api/v1/agents" \
  -H "X-API-Key: $KEY" -H "Idempotency-Key: load-{}" -H "Content-Type: application/json" \
  -d '{"name": "Agent {}", "description": "Benchmark agent {}", "system_prompt": "Answer briefly.", "metadata": {"batch": "b"}}'
TOTAL=$(curl -sf "$BASE/api/v1/agents?limit=1" -H "X-API-Key: $KEY" | grep -o '"total":[0-9]*')
echo "agents stored: ${TOTAL#*:}" >&2

run() { # name url [header]
  local out
  if [ -n "${3:-}" ]; then
    out=$(wrk -t2 -c64 -d"${DURATION}s" --latency -H "$3" "$2")
  else
    out=$(wrk -t2 -c64 -d"${DURATION}s" --latency "$2")
  fi
  local rps p99 errors
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
  errors=$(echo "$out" | awk '/Non-2xx/ {print $5}')
  echo "$1 $rps $p99 ${errors:-0}"
}

wrk -t2 -c64 -d3s -H "X-API-Key: $KEY" "$BASE/api/v1/agents?limit=50" >/dev/null  # warm-up
read -r _ LIST_RPS LIST_P99 LIST_ERR < <(run agents "$BASE/api/v1/agents?limit=50" "X-API-Key: $KEY")
read -r _ HEALTH_RPS HEALTH_P99 HEALTH_ERR < <(run healthz "$BASE/healthz")
RATIO=$(awk -v a="$LIST_RPS" -v b="$HEALTH_RPS" 'BEGIN { printf "%.2f", a / b }')

echo
echo "GET /api/v1/agents?limit=50  ${LIST_RPS} req/s  p99 ${LIST_P99}  non-2xx ${LIST_ERR}"
echo "GET /healthz                 ${HEALTH_RPS} req/s  p99 ${HEALTH_P99}  non-2xx ${HEALTH_ERR}"
echo "ratio agents/healthz         ${RATIO}"
