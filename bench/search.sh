#!/usr/bin/env bash
# Benchmark: full-text search over 1,000,000 messages on SQLite.
#
# Loads 1,000,000 messages (Zipf-distributed words from a 5,000-word
# vocabulary, plus names and order numbers; one a minute, so about two
# years) into 10,000 conversations straight into the database, through the
# same triggers that index API writes, and reports the load rate; the
# index's size against the raw text (dbstat); and p50/p99 of 22
# representative queries over HTTP with the default `type=all` (30 runs
# each after 2 warm-ups, one connection, keep-alive).
# Targets on a 2-core machine: p99 <= 50 ms for every query; index <= 1.5x the raw text.
#
# Usage: bench/search.sh [messages]   (default 1000000; needs python3)
#        DATABASE=postgres bench/search.sh   runs it on PostgreSQL instead
#        (database parley_bench_search at $PG_URL, default
#        postgres://postgres@127.0.0.1:5432, dropped and created; loaded with
#        psql \copy; reports the GIN index and the stored tsvectors).
set -euo pipefail
cd "$(dirname "$0")/.."
MESSAGES="${1:-1000000}"
PORT="${PORT:-18686}"
DATABASE="${DATABASE:-sqlite}"
PG_URL="${PG_URL:-postgres://postgres@127.0.0.1:5432}"
if [ "$DATABASE" = postgres ]; then
  psql -q "$PG_URL/postgres" -c 'DROP DATABASE IF EXISTS parley_bench_search' -c 'CREATE DATABASE parley_bench_search'
  export PARLEY_DATABASE_URL="$PG_URL/parley_bench_search"
  PARLEY_SECRETS__MASTER_KEY=$(head -c 32 /dev/urandom | base64)
  export PARLEY_SECRETS__MASTER_KEY
fi

cargo build --release --bin parley >&2
WORK=$(mktemp -d)
cleanup() {
  kill $SERVER 2>/dev/null && wait $SERVER 2>/dev/null || true
  if [ -n "${KEEP_WORK:-}" ]; then echo "kept $WORK" >&2; return; fi
  cd "$ROOT"; rm -rf "$WORK"
  [ "$DATABASE" != postgres ] || psql -q "$PG_URL/postgres" -c 'DROP DATABASE IF EXISTS parley_bench_search'
}
trap cleanup EXIT
ROOT=$PWD
cd "$WORK"
start_server() {
  PARLEY_RATE_LIMIT__PER_SECOND=10000000 PARLEY_RATE_LIMIT__BURST=10000000 PARLEY_LOG__LEVEL=warn \
    "$BIN" serve --listen "127.0.0.1:$PORT" >>banner.txt 2>>server.log &
  SERVER=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
}
start_server
KEY=$(grep -o 'parley_live_[A-Za-z0-9]*' banner.txt | head -1)
CHANNEL=$(curl -sf -X POST "http://127.0.0.1:$PORT/api/v1/channels" -H "X-API-Key: $KEY" -H "Content-Type: application/json" \
  -d '{"type": "api", "name": "Bench"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
kill $SERVER; wait $SERVER 2>/dev/null || true

python3 - "$CHANNEL" "$MESSAGES" "$DATABASE" "${PARLEY_DATABASE_URL:-}" <<'PY'
import datetime, random, sqlite3, subprocess, sys, time
channel, n, backend, url = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
random.seed(11)
def psql(sql):
    return subprocess.run(["psql", "-qAtX", url, "-c", sql], check=True, capture_output=True, text=True).stdout.strip()
def pg_time(micros):
    return datetime.datetime.fromtimestamp(micros / 1e6, datetime.timezone.utc).isoformat()
if backend == "postgres":
    ws, live = psql(f"SELECT workspace_id, livemode FROM channels WHERE id = {channel}").split("|")
    live = live == "t"
else:
    db = sqlite3.connect("data/parley.db")
    db.execute("PRAGMA synchronous = OFF")
    ws, live = db.execute("SELECT workspace_id, livemode FROM channels WHERE id = ?", (channel,)).fetchone()
now = int(time.time() * 1_000_000)
syll = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "be", "da", "fi", "go", "ha", "ju", "pe", "zu"]
vocab = ["".join(random.choice(syll) for _ in range(random.randint(2, 4))) for _ in range(5000)]
vocab[:12] = ["order", "delivery", "refund", "payment", "account", "password", "invoice", "shipping", "tracking", "address", "support", "thanks"]
weights = [1 / (i + 1) for i in range(len(vocab))]
names = ["Ana", "Bo", "Chen", "Dara", "Élodie", "Fatima", "Gus", "Hana", "Ivan", "Jo"]
conversations = [(ws, live, channel, f"api:user-{i}", f"User {i}", now, now) for i in range(10_000)]
if backend == "postgres":
    with open("conversations.tsv", "w") as f:
        for c in conversations:
            f.write("\t".join([str(c[0]), "t" if c[1] else "f", str(c[2]), "api", "direct", c[3], c[4], "open", "agent", "0", pg_time(c[5]), pg_time(c[6])]) + "\n")
    psql("\\copy conversations (workspace_id, livemode, channel_id, channel, kind, channel_ref, title, status, handler, unread_count, created_at, updated_at) FROM 'conversations.tsv'")
    ids = [int(x) for x in psql("SELECT id FROM conversations ORDER BY id").split()]
else:
    db.executemany("""INSERT INTO conversations (workspace_id, livemode, channel_id, channel, kind, channel_ref, title, status,
        handler, unread_count, created_at, updated_at) VALUES (?, ?, ?, 'api', 'direct', ?, ?, 'open', 'agent', 0, ?, ?)""", conversations)
    ids = [r[0] for r in db.execute("SELECT id FROM conversations ORDER BY id")]
    db.commit()
def rows():
    for k in range(n):
        words = random.choices(vocab, weights, k=random.randint(6, 24))
        if k % 10 == 0:
            words.insert(random.randrange(len(words)), f"#{k % 99991}")
        if k % 7 == 0:
            words.insert(0, random.choice(names) + ",")
        # One message a minute: a million span about two years.
        yield (ws, live, ids[k % len(ids)], channel, "inbound", "contact", " ".join(words), "received", now - (n - k) * 60_000_000)
started = time.time()
if backend == "postgres":
    with open("messages.tsv", "w") as f:
        for r in rows():
            f.write("\t".join([str(r[0]), "t" if r[1] else "f", str(r[2]), str(r[3]), r[4], r[5], r[6], r[7], pg_time(r[8])]) + "\n")
    psql("\\copy messages (workspace_id, livemode, conversation_id, channel_id, direction, author_type, text, status, created_at) FROM 'messages.tsv'")
    psql("VACUUM ANALYZE")  # what autovacuum does after a bulk load
    took = time.time() - started
    raw = int(psql("SELECT SUM(octet_length(text)) FROM messages"))
    gin = int(psql("SELECT pg_relation_size('messages_search')"))
    vectors = int(psql("SELECT SUM(pg_column_size(search)) FROM messages"))
    index, index_note = gin + vectors, f"GIN {gin / 1e6:.1f} MB + stored tsvectors {vectors / 1e6:.1f} MB"
else:
    db.executemany("""INSERT INTO messages (workspace_id, livemode, conversation_id, channel_id, direction, author_type, text,
        status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""", rows())
    db.commit()
    took = time.time() - started
    raw = db.execute("SELECT SUM(LENGTH(CAST(text AS BLOB))) FROM messages").fetchone()[0]
    index = db.execute("SELECT SUM(pgsize) FROM dbstat WHERE name LIKE 'messages_fts%'").fetchone()[0]
    index_note = "FTS5"
rare = vocab[4999]
with open("load.txt", "w") as f:
    f.write(f"{n} {took:.2f} {raw} {index} {rare} {ids[0]}\n")
with open("index_note.txt", "w") as f:
    f.write(index_note)
PY
read -r N TOOK RAW INDEX RARE CONV < load.txt
start_server
python3 - "$PORT" "$KEY" "$RARE" "$CONV" "$N" "$TOOK" "$RAW" "$INDEX" <<'PY'
import datetime, http.client, json, sys, time, urllib.parse
port, key, rare, conv = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
n, took, raw, index = int(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
def ago(days):
    t = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=days)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")
queries = [
    ("rare word", f"q={rare}"),
    ("common word", "q=order"),
    ("two common words", "q=order refund"),
    ("common + rare", f"q=order {rare}"),
    ("phrase", 'q="order delivery"'),
    ("phrase, rare", f'q="{rare} order"'),
    ("prefix", "q=ship*"),
    ("short prefix", "q=ka*"),
    ("exclusion", "q=refund -order"),
    ("accented name", "q=élodie"),
    ("name, folded", "q=elodie refund"),
    ("order number", "q=#12340"),
    ("no match", "q=zzzzqqq"),
    ("common, conversation filter", f"q=order&conversation_id={conv}"),
    ("common, channel filter", "q=order&channel=api"),
    ("common, last 30 days", f"q=order&after={ago(30)}"),
    ("common, a week a year ago", f"q=order&after={ago(372)}&before={ago(365)}"),
    ("rare, before a year ago", f"q={rare}&before={ago(365)}"),
    ("common, page 10", "q=payment&limit=50&offset=450"),
    ("three words", "q=order payment account"),
    ("deep page", "q=order&limit=50&offset=9950"),
    ("prefix + word", "q=track* support"),
]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
print()
note = open("index_note.txt").read()
print(f"loaded {n} messages in {took:.1f} s = {n / took:,.0f} msg/s (indexed as API writes are)")
print(f"raw text {raw / 1e6:.1f} MB; index {index / 1e6:.1f} MB ({note}) = {index / raw:.2f}x the text")
worst = 0
for name, qs in queries:
    path = "/api/v1/search?" + "&".join(urllib.parse.quote(p, safe="=:") for p in qs.split("&"))
    times, total = [], None
    for i in range(32):
        t0 = time.perf_counter()
        c.request("GET", path, headers={"X-API-Key": key})
        r = c.getresponse()
        body = r.read()
        if i >= 2:  # the first two warm the cache
            times.append((time.perf_counter() - t0) * 1000)
        assert r.status == 200, (name, r.status, body[:200])
        found = json.loads(body)
        total = f'{found["total"]}{"+" if found["total_relation"] == "gte" else ""}'

    times.sort()
    p50, p99 = times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.99))]
    worst = max(worst, p99)
    print(f"  {name:30} total {total:>8}  p50 {p50:7.1f} ms  p99 {p99:7.1f} ms")
print(f"worst p99: {worst:.1f} ms (totals marked + are counted up to 10,000)")
PY
