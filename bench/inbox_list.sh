#!/usr/bin/env bash
# Benchmark: the inbox's reads on a large workspace.
#
# Seeds 100,000 conversations (80% open, a third with a person, a seventh
# assigned, a quarter waiting, 1% labelled "vip", 834 open handoffs waiting
# for a person) and 1,000,000 messages (1,000 of them in conversation 1)
# straight into the database, then runs wrk (2 threads, CONNECTIONS
# connections, default 2 = this machine's cores, so that p99 is the
# server's time and not wrk's queue; DURATION seconds each, default 10) on each
# inbox list view and filter, the summary, and the newest page (200) of the
# 1,000-message thread. Prints p50 and p99 per request as wrk measures them.
# Target (issue 34): list views and filters p99 <= 25 ms, the thread p99
# <= 40 ms, on SQLite and on PostgreSQL.
#
# Usage: bench/inbox_list.sh [duration]
#        CONNECTIONS=8 bench/inbox_list.sh   (saturated: latency includes queueing)
#        DATABASE=postgres bench/inbox_list.sh
# Needs wrk, sqlite3 (SQLite) or psql (PostgreSQL).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-10}"
CONNECTIONS="${CONNECTIONS:-2}"
PORT="${PORT:-18591}"
source bench/lib.sh
need_wrk
bench_prepare
start_server
api_channel
stop_server

CONVERSATIONS=100000
MESSAGES=1000000
echo "seeding $CONVERSATIONS conversations and $MESSAGES messages…" >&2
started=$(date +%s)
if [ "${DATABASE:-sqlite}" = postgres ]; then
  psql -q "$PARLEY_DATABASE_URL" <<SQL
INSERT INTO conversations (workspace_id, livemode, channel_id, channel, kind, channel_ref, title, status, handler,
  assignee_user_id, waiting_since, last_message_ts, last_message_preview, unread_count, created_at, updated_at, labels)
SELECT 1, true, $CHANNEL, 'api', 'direct', 'api:u' || i, 'Contact ' || i,
  CASE WHEN i % 5 = 0 THEN 'resolved' ELSE 'open' END,
  CASE WHEN i % 3 = 0 THEN 'human' ELSE 'agent' END,
  CASE WHEN i % 7 = 0 THEN 1 ELSE NULL END,
  CASE WHEN i % 4 = 0 THEN to_timestamp(1700000000 + i) ELSE NULL END,
  to_timestamp(1700000000 + i * 10), 'hello ' || i, i % 3, to_timestamp(1700000000 + i), to_timestamp(1700000000 + i),
  CASE WHEN i % 100 = 0 THEN '["vip"]'::jsonb ELSE '[]'::jsonb END
FROM generate_series(1, $CONVERSATIONS) i;
INSERT INTO messages (workspace_id, livemode, conversation_id, channel_id, direction, author_type, text, status, created_at)
SELECT 1, true, CASE WHEN i <= 1000 THEN 1 ELSE (i % $CONVERSATIONS) + 1 END, $CHANNEL,
  CASE WHEN i % 2 = 0 THEN 'inbound' ELSE 'outbound' END, 'contact', 'message number ' || i, 'sent',
  to_timestamp(1700000000 + i / 1000.0)
FROM generate_series(1, $MESSAGES) i;
INSERT INTO handoffs (workspace_id, livemode, conversation_id, target, reason, status, requested_by, created_at, updated_at)
SELECT 1, true, id, 'human', 'asked for a person', 'requested', 'agent', created_at, created_at
FROM conversations WHERE id % 40 = 3 AND handler = 'human';
INSERT INTO labels (workspace_id, livemode, name, color, created_at, updated_at) VALUES (1, true, 'vip', '#1d4ed8', now(), now());
INSERT INTO conversation_labels (workspace_id, livemode, conversation_id, label_id)
SELECT 1, true, id, (SELECT id FROM labels WHERE name = 'vip') FROM conversations WHERE labels = '["vip"]'::jsonb;
-- As autovacuum leaves tables after a bulk load: statistics, and the
-- visibility map that lets counts read an index alone.
VACUUM ANALYZE;
SQL
else
  sqlite3 data/parley.db <<SQL
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $CONVERSATIONS)
INSERT INTO conversations (workspace_id, livemode, channel_id, channel, kind, channel_ref, title, status, handler,
  assignee_user_id, waiting_since, last_message_ts, last_message_preview, unread_count, created_at, updated_at, labels)
SELECT 1, 1, $CHANNEL, 'api', 'direct', 'api:u' || i, 'Contact ' || i,
  CASE WHEN i % 5 = 0 THEN 'resolved' ELSE 'open' END,
  CASE WHEN i % 3 = 0 THEN 'human' ELSE 'agent' END,
  CASE WHEN i % 7 = 0 THEN 1 ELSE NULL END,
  CASE WHEN i % 4 = 0 THEN (1700000000 + i) * 1000000 ELSE NULL END,
  (1700000000 + i * 10) * 1000000, 'hello ' || i, i % 3, (1700000000 + i) * 1000000, (1700000000 + i) * 1000000,
  CASE WHEN i % 100 = 0 THEN '["vip"]' ELSE '[]' END
FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $MESSAGES)
INSERT INTO messages (workspace_id, livemode, conversation_id, channel_id, direction, author_type, text, status, created_at)
SELECT 1, 1, CASE WHEN i <= 1000 THEN 1 ELSE (i % $CONVERSATIONS) + 1 END, $CHANNEL,
  CASE WHEN i % 2 = 0 THEN 'inbound' ELSE 'outbound' END, 'contact', 'message number ' || i, 'sent',
  1700000000000000 + i * 1000
FROM n;
INSERT INTO handoffs (workspace_id, livemode, conversation_id, target, reason, status, requested_by, created_at, updated_at)
SELECT 1, 1, id, 'human', 'asked for a person', 'requested', 'agent', created_at, created_at
FROM conversations WHERE id % 40 = 3 AND handler = 'human';
INSERT INTO labels (workspace_id, livemode, name, color, created_at, updated_at) VALUES (1, 1, 'vip', '#1d4ed8', 0, 0);
INSERT INTO conversation_labels (workspace_id, livemode, conversation_id, label_id)
SELECT 1, 1, id, (SELECT id FROM labels WHERE name = 'vip') FROM conversations WHERE labels = '["vip"]';
ANALYZE;
SQL
fi
echo "seeded in $(( $(date +%s) - started )) s" >&2
start_server

measure() {
  local name=$1 path=$2 out p50 p99
  out=$(wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency -H "X-API-Key: $KEY" "$BASE$path")
  if echo "$out" | grep -q "Non-2xx"; then
    echo "$name: non-2xx answers" >&2
    echo "$out" >&2
    exit 1
  fi
  p50=$(echo "$out" | awk '$1 == "50%" {print $2}')
  p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
  printf '%-34s p50 %9s  p99 %9s  %s req/s\n' "$name" "$p50" "$p99" "$(echo "$out" | awk '/Requests\/sec/ {print $2}')"
}

echo "backend: ${DATABASE:-sqlite}; $CONVERSATIONS conversations, $MESSAGES messages; wrk -t2 -c$CONNECTIONS ${DURATION}s each"
measure "all, open, recent" "/api/v1/inbox/conversations?status=open&limit=50"
measure "all, open, waiting longest" "/api/v1/inbox/conversations?status=open&sort=waiting&limit=50"
measure "handoffs waiting, open, waiting" "/api/v1/inbox/conversations?view=handoffs&status=open&sort=waiting&limit=50"
measure "unassigned, open" "/api/v1/inbox/conversations?view=unassigned&status=open&limit=50"
measure "assignee 1, open" "/api/v1/inbox/conversations?assignee_user_id=1&status=open&limit=50"
measure "label vip" "/api/v1/inbox/conversations?label=vip&limit=50"
measure "channel api, handler human" "/api/v1/inbox/conversations?channel=api&handler=human&status=open&limit=50"
measure "summary" "/api/v1/inbox/summary"
measure "thread (1,000 messages): newest 200" "/api/v1/conversations/1/messages?order=desc&limit=200"
