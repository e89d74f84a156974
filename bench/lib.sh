# Shared by the benchmarks; source it from the repository root.
#
#   need_wrk                   exits with a hint when wrk is missing
#   bench_prepare              builds the release binary (or takes the one
#                              BENCH_BIN names: a before/after on two
#                              builds); sets BIN, ROOT (the
#                              repository) and WORK (a scratch directory,
#                              removed on exit unless KEEP_WORK is set, which
#                              keeps the PostgreSQL database too) and moves
#                              into WORK
#   start_server [VAR=value…]  starts `parley serve` on $PORT in WORK on
#                              SQLite, rate limits lifted, with the extra
#                              environment given; waits for /healthz; sets
#                              SERVER (its pid), KEY (the live key from the
#                              first banner) and BASE
#   parley …                   runs the release binary (CLI commands)
#   api_channel                creates an api channel (with $KEY); sets
#                              CHANNEL (its id) and SECRET (its signing secret)
#   DATABASE=postgres          start_server uses a fresh PostgreSQL database
#                              (parley_bench_<pid> at $PG_URL, default
#                              postgres://postgres@127.0.0.1:5432), dropped on
#                              exit; otherwise SQLite in WORK. Refuses a
#                              PostgreSQL without autovacuum (production runs
#                              it; see below) unless ALLOW_NO_AUTOVACUUM=1
#   EXTRA_PIDS                 more processes to stop on exit

need_wrk() {
  command -v wrk >/dev/null || { echo "wrk is required (apt-get install wrk)" >&2; exit 1; }
}

bench_prepare() {
  ROOT=$PWD
  if [ -n "${BENCH_BIN:-}" ]; then
    BIN=$(realpath "$BENCH_BIN")
  else
    cargo build --release --bin parley >&2
    BIN="$ROOT/target/release/parley"
  fi
  WORK=$(mktemp -d)
  SERVER=
  EXTRA_PIDS=
  trap bench_cleanup EXIT
  cd "$WORK"
  if [ "${DATABASE:-sqlite}" = postgres ]; then
    PG_URL="${PG_URL:-postgres://postgres@127.0.0.1:5432}"
    BENCH_DB="parley_bench_$$"
    psql -q "$PG_URL/postgres" -c "DROP DATABASE IF EXISTS $BENCH_DB" -c "CREATE DATABASE $BENCH_DB"
    # Without autovacuum no table here is ever analyzed: statements planned
    # while the tables were empty keep plans that scan a whole workspace's
    # rows through a tenant index instead of using the primary key (seen:
    # 57 million index tuples read in one run), and the figures say nothing
    # about a production server. CI's PostgreSQL turns it off.
    if [ "$(psql -At "$PG_URL/postgres" -c 'SHOW autovacuum')" != on ]; then
      echo "PostgreSQL runs without autovacuum: the figures will not hold for production." >&2
      echo "Turn it on first: psql -c 'ALTER SYSTEM SET autovacuum = on' -c 'SELECT pg_reload_conf()'" >&2
      [ -n "${ALLOW_NO_AUTOVACUUM:-}" ] || exit 1
    fi
    # PG_PARAMS: connection parameters for the server, e.g. sslmode=disable.
    export PARLEY_DATABASE_URL="$PG_URL/$BENCH_DB${PG_PARAMS:+?$PG_PARAMS}"
    PARLEY_SECRETS__MASTER_KEY=$(head -c 32 /dev/urandom | base64)
    export PARLEY_SECRETS__MASTER_KEY
  fi
}

# Stops the server started last (to start another on the same data).
stop_server() {
  kill "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
  SERVER=
}

bench_cleanup() {
  # shellcheck disable=SC2086
  kill $SERVER $EXTRA_PIDS 2>/dev/null || true
  # shellcheck disable=SC2086
  wait $SERVER 2>/dev/null || true
  cd "$ROOT"
  if [ -n "${KEEP_WORK:-}" ]; then
    echo "kept $WORK${BENCH_DB:+ and the database $BENCH_DB}" >&2
  else
    rm -rf "$WORK"
    if [ -n "${BENCH_DB:-}" ]; then psql -q "$PG_URL/postgres" -c "DROP DATABASE IF EXISTS $BENCH_DB" || true; fi
  fi
}

start_server() {
  env PARLEY_RATE_LIMIT__PER_SECOND=10000000 PARLEY_RATE_LIMIT__BURST=10000000 PARLEY_LOG__LEVEL=warn "$@" \
    "$BIN" serve --listen "127.0.0.1:$PORT" >>banner.txt 2>>server.log &
  SERVER=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
  KEY=$(grep -o 'parley_live_[A-Za-z0-9]*' banner.txt | head -1)
  BASE="http://127.0.0.1:$PORT"
}

parley() {
  "$BIN" "$@"
}

# Creates an api channel with the live key; sets CHANNEL and SECRET.
api_channel() {
  local created
  created=$(curl -sf -X POST "$BASE/api/v1/channels" -H "X-API-Key: $KEY" -H "Content-Type: application/json" \
    -d '{"type": "api", "name": "Bench"}')
  CHANNEL=$(echo "$created" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  SECRET=$(echo "$created" | python3 -c 'import json,sys; print(json.load(sys.stdin)["secret"])')
}
