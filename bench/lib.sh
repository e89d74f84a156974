# Shared by the benchmarks; source it from the repository root.
#
#   need_wrk                   exits with a hint when wrk is missing
#   bench_prepare              builds the release binary; sets ROOT (the
#                              repository) and WORK (a scratch directory,
#                              removed on exit unless KEEP_WORK is set) and
#                              moves into WORK
#   start_server [VAR=value…]  starts `parley serve` on $PORT in WORK on
#                              SQLite, rate limits lifted, with the extra
#                              environment given; waits for /healthz; sets
#                              SERVER (its pid), KEY (the live key from the
#                              first banner) and BASE
#   parley …                   runs the release binary (CLI commands)
#   EXTRA_PIDS                 more processes to stop on exit

need_wrk() {
  command -v wrk >/dev/null || { echo "wrk is required (apt-get install wrk)" >&2; exit 1; }
}

bench_prepare() {
  cargo build --release --bin parley >&2
  ROOT=$PWD
  WORK=$(mktemp -d)
  SERVER=
  EXTRA_PIDS=
  trap bench_cleanup EXIT
  cd "$WORK"
}

bench_cleanup() {
  # shellcheck disable=SC2086
  kill $SERVER $EXTRA_PIDS 2>/dev/null || true
  cd "$ROOT"
  if [ -n "${KEEP_WORK:-}" ]; then echo "kept $WORK" >&2; else rm -rf "$WORK"; fi
}

start_server() {
  env PARLEY_RATE_LIMIT__PER_SECOND=10000000 PARLEY_RATE_LIMIT__BURST=10000000 PARLEY_LOG__LEVEL=warn "$@" \
    "$ROOT/target/release/parley" serve --listen "127.0.0.1:$PORT" >>banner.txt 2>>server.log &
  SERVER=$!
  for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
  KEY=$(grep -o 'parley_live_[A-Za-z0-9]*' banner.txt | head -1)
  BASE="http://127.0.0.1:$PORT"
}

parley() {
  "$ROOT/target/release/parley" "$@"
}
