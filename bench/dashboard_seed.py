#!/usr/bin/env python3
"""Grows a workspace's test-mode data to the dashboard benchmark's size.

bench/dashboard.sh first makes real rows through the API (the demo seed: an
agent, a webchat with chats, a finished test call with its recording, runs
and charges; and one contact), then stops the server and runs this. Each
table is grown by cloning those rows with `INSERT … SELECT` over a number
series, so every column holds what Parley itself wrote, with new ids, new
addresses and timestamps spread evenly over the last `--days` days:

  contacts       --conversations (one each)
  conversations  --conversations (1,000 open, the rest closed)
  messages       --messages (alternating in and out, 10 per conversation)
  agent_runs     one per conversation (1 in 50 failed), and its charge
  calls          --calls (each with the demo call's transcript, its agent
                 turns timed),
                 and their charges
  a long call    one ended call whose recording is a stereo WAV of
                 --long-call-seconds written here, with a transcript that
                 covers it

Usage: dashboard_seed.py (--sqlite PATH | --postgres URL) --storage DIR
"""

import argparse
import array
import math
import os
import subprocess
import sqlite3
import sys
import time
import wave

DAY_US = 86_400_000_000


class Db:
    def __init__(self, args):
        self.pg = args.postgres
        if not self.pg:
            self.conn = sqlite3.connect(args.sqlite, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode = WAL")

    def rows(self, sql):
        if self.pg:
            out = subprocess.run(["psql", self.pg, "-v", "ON_ERROR_STOP=1", "-Atq", "-F", "\t", "-c", sql],
                                 check=True, capture_output=True, text=True).stdout
            return [line.split("\t") for line in out.splitlines() if line]
        return [[("" if v is None else str(v)) for v in r] for r in self.conn.execute(sql).fetchall()]

    def one(self, sql):
        r = self.rows(sql)
        return r[0][0] if r else None

    def run(self, sql):
        started = time.monotonic()
        if self.pg:
            subprocess.run(["psql", self.pg, "-v", "ON_ERROR_STOP=1", "-q", "-c", sql], check=True)
        else:
            self.conn.executescript(sql)
        return time.monotonic() - started

    def columns(self, table):
        if self.pg:
            return [r[0] for r in self.rows(
                f"SELECT column_name FROM information_schema.columns WHERE table_name = '{table}' "
                "AND table_schema = current_schema() AND is_generated = 'NEVER' ORDER BY ordinal_position")]
        return [r[1] for r in self.conn.execute(f"PRAGMA table_info({table})").fetchall()]

    def ago(self, us_expr):
        """A timestamp `us_expr` microseconds before now, as the column holds it."""
        if self.pg:
            return f"(now() - ({us_expr}) * interval '1 microsecond')"
        return f"({int(time.time() * 1_000_000)} - ({us_expr}))"

    def pad(self, expr, width):
        if self.pg:
            return f"lpad(CAST({expr} AS TEXT), {width}, '0')"
        return f"printf('%0{width}d', {expr})"


def clone(db, table, template, count, overrides):
    """Inserts `count` copies of row `template` of `table`, series value s.n
    from 1, with `overrides` (column -> SQL over t (the template) and s)."""
    cols = [c for c in db.columns(table) if c != "id"]
    values = ", ".join(overrides.get(c, f"t.{c}") for c in cols)
    sql = (f"INSERT INTO {table} ({', '.join(cols)}) SELECT {values} FROM {table} t "
           f"JOIN bench_seq s ON s.n <= {count} WHERE t.id = {template} ORDER BY s.n")
    return db.run(sql)


def write_wav(path, seconds, segments):
    """A stereo 8 kHz 16-bit WAV: tones where each side speaks."""
    rate = 8000
    frames = array.array("h", bytes(4 * rate * seconds))
    for speaker, start, end in segments:
        channel = 0 if speaker == "caller" else 1
        freq = 180 if channel == 0 else 240
        for i in range(start * rate // 1000, min(end * rate // 1000, rate * seconds)):
            envelope = 0.5 + 0.5 * math.sin(i / rate * 6.0)
            frames[2 * i + channel] = int(9000 * envelope * math.sin(2 * math.pi * freq * i / rate))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with wave.open(path, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(frames.tobytes())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sqlite")
    p.add_argument("--postgres")
    p.add_argument("--storage", required=True, help="the local object store's directory")
    p.add_argument("--conversations", type=int, default=100_000)
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--calls", type=int, default=10_000)
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--long-call-seconds", type=int, default=600)
    args = p.parse_args()
    db = Db(args)
    scope = "workspace_id = 1 AND livemode = FALSE"
    span = args.days * DAY_US

    conversation = db.one(f"SELECT MIN(id) FROM conversations WHERE {scope} AND kind <> 'call'")
    inbound = db.one(f"SELECT MIN(id) FROM messages WHERE conversation_id = {conversation} AND direction = 'inbound'")
    outbound = db.one(f"SELECT MIN(id) FROM messages WHERE conversation_id = {conversation} AND direction = 'outbound'")
    call = db.one(f"SELECT MIN(id) FROM calls WHERE {scope} AND recording_key IS NOT NULL")
    run = db.one(f"SELECT MIN(id) FROM agent_runs WHERE {scope} AND conversation_id IS NOT NULL AND status = 'completed'")
    charge = db.one(f"SELECT MIN(id) FROM ledger_entries WHERE {scope} AND type = 'charge'")
    contact = db.one(f"SELECT MIN(id) FROM contacts WHERE {scope}")
    missing = [n for n, v in [("conversation", conversation), ("inbound message", inbound),
                              ("outbound message", outbound), ("recorded call", call), ("run", run),
                              ("charge", charge), ("contact", contact)] if not v]
    if missing:
        sys.exit(f"dashboard_seed: the API-made rows to clone are missing: {', '.join(missing)}")

    # The simulated line times no turn: give the demo call's agent turns a
    # latency breakdown (as a live call's carry), so Home reads them too.
    db.run(f"""UPDATE call_segments SET latency = '{{"stt_ms": 420, "llm_first_token_ms": 310,
               "tts_first_audio_ms": 180, "voice_to_voice_ms": 990}}' WHERE call_id = {call} AND speaker = 'agent'""")
    db.run(f"""UPDATE calls SET latency = '{{"turns": 2, "voice_to_voice_p50_ms": 990,
               "voice_to_voice_p95_ms": 990}}' WHERE id = {call}""")

    n_conv, n_msg, n_calls = args.conversations, args.messages, args.calls
    per_conv = max(1, n_msg // n_conv)
    biggest = max(n_conv, n_msg // 2, n_calls, 1200)
    db.run("DROP TABLE IF EXISTS bench_seq")
    if db.pg:
        db.run(f"CREATE TABLE bench_seq AS SELECT generate_series(CAST(1 AS BIGINT), {biggest}) AS n; "
               "ALTER TABLE bench_seq ADD PRIMARY KEY (n)")
    else:
        db.run(f"CREATE TABLE bench_seq (n INTEGER PRIMARY KEY); INSERT INTO bench_seq "
               f"WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < {biggest}) SELECT n FROM s")

    def conv_time(i):  # conversation i (1 = the newest) starts this long ago (its last message 3 min later)
        return f"(({i}) * {span // n_conv} + 300000000)"

    contact_base = int(db.one("SELECT COALESCE(MAX(id), 0) FROM contacts"))
    t = clone(db, "contacts", contact, n_conv, {
        "display_name": "'Customer ' || s.n",
        "canonical_name": "'customer ' || s.n",
        "normalized_phone": f"'+1555' || {db.pad('s.n', 7)}",
        "normalized_email": "'c' || s.n || '@example.com'",
        "search_text": f"'customer ' || s.n || ' c' || s.n || '@example.com +1555' || {db.pad('s.n', 7)}",
        "created_at": db.ago(conv_time("s.n")),
        "updated_at": db.ago(conv_time("s.n")),
    })
    print(f"contacts: {n_conv} in {t:.1f} s", file=sys.stderr)

    conv_base = int(db.one("SELECT COALESCE(MAX(id), 0) FROM conversations"))
    last = f"{conv_time('s.n')} - {(per_conv - 1) * 20_000_000}"
    t = clone(db, "conversations", conversation, n_conv, {
        "channel_ref": "'bench-' || s.n",
        "title": "'Customer ' || s.n",
        "status": "CASE WHEN s.n <= 1000 THEN 'open' ELSE 'closed' END",
        "contact_id": f"{contact_base} + s.n",
        "sender_name": "'Customer ' || s.n",
        "waiting_since": "NULL",
        "last_message_ts": db.ago(last),
        "unread_count": "CASE WHEN s.n <= 1000 THEN 1 ELSE 0 END",
        "created_at": db.ago(conv_time("s.n")),
        "updated_at": db.ago(last),
    })
    print(f"conversations: {n_conv} in {t:.1f} s", file=sys.stderr)

    # Message k (0-based) of a conversation is 20 s after the one before;
    # even k are the contact's, odd k the agent's.
    half = n_msg // 2
    for template, parity in ((inbound, 0), (outbound, 1)):
        k = f"(((s.n - 1) % {per_conv // 2 or 1}) * 2 + {parity})"
        conv = f"((s.n - 1) / {per_conv // 2 or 1} + 1)"
        at = db.ago(f"{conv_time(conv)} - {k} * 20000000")
        t = clone(db, "messages", template, half, {
            "conversation_id": f"{conv_base} + {conv}",
            "text": "t.text || ' #' || s.n",
            "external_id": "'bench-' || s.n" if parity == 0 else "NULL",
            "created_at": at,
            "sent_at": "NULL" if parity == 0 else at,
            "delivered_at": "NULL" if parity == 0 else at,
            "read_at": "NULL",
        })
        print(f"messages ({'in' if parity == 0 else 'out'}bound): {half} in {t:.1f} s", file=sys.stderr)

    t = clone(db, "agent_runs", run, n_conv, {
        "conversation_id": f"{conv_base} + s.n",
        "call_id": "NULL",
        "reply_message_id": "NULL",
        "status": "CASE WHEN s.n % 50 = 0 THEN 'failed' ELSE t.status END",
        "error": "CASE WHEN s.n % 50 = 0 THEN 'The text engine did not answer in time.' ELSE NULL END",
        "created_at": db.ago(conv_time("s.n")),
        "completed_at": db.ago(f"{conv_time('s.n')} - 1500000"),
    })
    print(f"agent runs: {n_conv} in {t:.1f} s", file=sys.stderr)

    call_base = int(db.one("SELECT COALESCE(MAX(id), 0) FROM calls"))
    call_step = span // n_calls
    times = {c: db.ago(f"s.n * {call_step} - {d}") for c, d in
             (("created_at", 0), ("ringing_at", 1_000_000), ("answered_at", 4_000_000), ("ended_at", 64_000_000))}
    t = clone(db, "calls", call, n_calls, {
        "public_id": f"'call_01BENCH' || {db.pad('s.n', 19)}",
        "contact_id": f"{contact_base} + s.n",
        "conversation_id": "NULL",
        "provider_call_id": "NULL",
        "owner": "NULL",
        "last_seen_at": "NULL",
        "status": "CASE WHEN s.n % 10 = 0 THEN 'failed' ELSE t.status END",
        "direction": "CASE WHEN s.n % 3 = 0 THEN 'inbound' ELSE t.direction END",
        **times,
        "updated_at": times["ended_at"],
    })
    segs = db.columns("call_segments")
    values = ", ".join({"call_id": "c.id"}.get(c, f"t.{c}") for c in segs if c != "id")
    t += db.run(f"INSERT INTO call_segments ({', '.join(c for c in segs if c != 'id')}) SELECT {values} "
                f"FROM calls c JOIN call_segments t ON t.call_id = {call} WHERE c.id > {call_base} ORDER BY c.id, t.idx")
    print(f"calls: {n_calls} with their transcripts in {t:.1f} s", file=sys.stderr)

    t = clone(db, "ledger_entries", charge, n_conv + n_calls, {
        "amount_cents": f"CASE WHEN s.n <= {n_calls} THEN -12 ELSE -1 END",
        "description": f"CASE WHEN s.n <= {n_calls} THEN 'Call' ELSE 'Agent run' END",
        "entry_key": "'bench-' || s.n",
        "created_at": db.ago(f"CASE WHEN s.n <= {n_calls} THEN s.n * {call_step} "
                             f"ELSE (s.n - {n_calls}) * {span // n_conv} END"),
    })
    print(f"charges: {n_conv + n_calls} in {t:.1f} s", file=sys.stderr)

    # The long call: the demo call's transcript repeated over its length,
    # and a recording of that length.
    ms = args.long_call_seconds * 1000
    last_end = int(db.one(f"SELECT MAX(end_ms) FROM call_segments WHERE call_id = {call}")) + 2000
    repeats = max(1, ms // last_end)
    clone(db, "calls", call, 1, {
        "public_id": "'call_01BENCHZZZZZZZZZZZZZZZZZZZ'",
        "provider_call_id": "NULL",
        "owner": "NULL",
        "last_seen_at": "NULL",
        "created_at": db.ago(600_000_000 + ms * 1000),
        "duration_ms": str(ms),
        "recording_duration_ms": str(ms),
        "recording_key": "'bench/long-call.wav'",
    })
    long_id = db.one("SELECT id FROM calls WHERE public_id = 'call_01BENCHZZZZZZZZZZZZZZZZZZZ'")
    values = ", ".join({"call_id": str(long_id), "idx": f"(s.n - 1) * 1000 + t.idx",
                        "start_ms": f"t.start_ms + (s.n - 1) * {last_end}",
                        "end_ms": f"t.end_ms + (s.n - 1) * {last_end}"}.get(c, f"t.{c}") for c in segs if c != "id")
    db.run(f"INSERT INTO call_segments ({', '.join(c for c in segs if c != 'id')}) SELECT {values} "
           f"FROM call_segments t JOIN bench_seq s ON s.n <= {repeats} WHERE t.call_id = {call} ORDER BY s.n, t.idx")
    spoken = [(r[0], int(r[1]), int(r[2])) for r in db.rows(
        f"SELECT speaker, start_ms, end_ms FROM call_segments WHERE call_id = {long_id} ORDER BY idx")]
    write_wav(os.path.join(args.storage, "bench", "long-call.wav"), args.long_call_seconds, spoken)
    print(f"long call: {long_id} with {len(spoken)} transcript lines and a {args.long_call_seconds} s recording",
          file=sys.stderr)

    db.run("DROP TABLE bench_seq")
    if db.pg:
        # The seeded messages left a million count deltas: fold them now
        # (as the server's housekeeping would within a minute), so the
        # bench reads the quarter-hour counts it reads in steady state.
        db.run("WITH d AS (DELETE FROM message_count_deltas RETURNING *) "
               "INSERT INTO message_counts AS c (workspace_id, livemode, bucket_start, shard, inbound, outbound) "
               "SELECT workspace_id, livemode, bucket_start, 0, SUM(inbound), SUM(outbound) FROM d GROUP BY 1, 2, 3 "
               "ON CONFLICT (workspace_id, livemode, bucket_start, shard) "
               "DO UPDATE SET inbound = c.inbound + EXCLUDED.inbound, outbound = c.outbound + EXCLUDED.outbound")
    db.run("VACUUM ANALYZE" if db.pg else "ANALYZE")
    for table in ("contacts", "conversations", "messages", "agent_runs", "calls", "call_segments", "ledger_entries"):
        print(f"  {table}: {db.one(f'SELECT COUNT(*) FROM {table} WHERE {scope}' if table != 'call_segments' else 'SELECT COUNT(*) FROM call_segments')} rows",
              file=sys.stderr)


if __name__ == "__main__":
    main()
