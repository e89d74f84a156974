#!/usr/bin/env bash
# Benchmark: the MCP endpoint against the REST API it stands for.
#
# Loads 100 agents, then drives, in the same run, 32 connections each:
#   REST  GET  /api/v1/agents?limit=20
#   MCP   POST /mcp  tools/call list_agents {"limit": 20}   (stateless,
#         JSON answer, as a 2025-06-18 client sends it after initialize)
# and prints requests/s, p50/p99 and the MCP/REST ratio.
# Targets on a 2-core machine: MCP >= 0.5x the REST rate, p99 <= 25 ms.
#
# Usage: bench/mcp.sh [duration_seconds]   (needs wrk; DATABASE=postgres for PostgreSQL)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-15}"
PORT="${PORT:-18191}"
source bench/lib.sh
need_wrk
bench_prepare
start_server

parley billing credit --workspace 1 --cents 100000 >/dev/null 2>&1 || true
echo "loading 100 agents…" >&2
seq 1 100 | xargs -P 8 -I{} curl -sf -o /dev/null -X POST "$BASE/api/v1/agents" \
  -H "X-API-Key: $KEY" -H "Idempotency-Key: load-{}" -H "Content-Type: application/json" \
  -d '{"name": "Agent {}", "description": "Benchmark agent {}", "system_prompt": "Answer briefly."}'

cat > mcp.lua <<'LUA'
wrk.method = "POST"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_agents","arguments":{"limit":20}}}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["MCP-Protocol-Version"] = "2025-06-18"
LUA
# One call answered as expected before measuring.
curl -sf -X POST "$BASE/mcp" -H "X-API-Key: $KEY" -H "Content-Type: application/json" \
  -H "Accept: application/json, text/event-stream" -H "MCP-Protocol-Version: 2025-06-18" \
  -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_agents","arguments":{"limit":20}}}' |
  grep -q '"total":100' || { echo "the MCP call did not list the 100 agents" >&2; exit 1; }

run() { # name url [wrk args…]
  local name=$1 url=$2 out
  shift 2
  out=$(wrk -t2 -c32 -d"${DURATION}s" --latency -H "X-API-Key: $KEY" "$@" "$url")
  echo "$name $(echo "$out" | awk '/Requests\/sec/ {print $2}') $(echo "$out" | awk '$1 == "50%" {print $2}') \
$(echo "$out" | awk '$1 == "99%" {print $2}') $(echo "$out" | awk '/Non-2xx/ {print $5}')"
}

wrk -t2 -c32 -d3s -H "X-API-Key: $KEY" "$BASE/api/v1/agents?limit=20" >/dev/null  # warm-up
read -r _ REST_RPS REST_P50 REST_P99 REST_ERR < <(run rest "$BASE/api/v1/agents?limit=20")
read -r _ MCP_RPS MCP_P50 MCP_P99 MCP_ERR < <(run mcp "$BASE/mcp" -s mcp.lua)
RATIO=$(awk -v a="$MCP_RPS" -v b="$REST_RPS" 'BEGIN { printf "%.2f", a / b }')

echo
echo "REST GET /api/v1/agents?limit=20   ${REST_RPS} req/s  p50 ${REST_P50}  p99 ${REST_P99}  non-2xx ${REST_ERR:-0}"
echo "MCP  tools/call list_agents         ${MCP_RPS} req/s  p50 ${MCP_P50}  p99 ${MCP_P99}  non-2xx ${MCP_ERR:-0}"
echo "ratio MCP/REST                      ${RATIO}   (target >= 0.5; MCP p99 target <= 25 ms)"
