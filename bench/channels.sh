#!/usr/bin/env bash
# Benchmark: external channels, inbound to the agent's reply at the provider.
#
# 1. SMS: N inbound webhooks, each from its own number, signed with the
#    channel's auth token as Twilio signs them (X-Twilio-Signature), posted
#    by wrk (16 connections) to /hooks/twilio/{public_id}/inbound; a local
#    server speaking the Messages resource's wire format takes the replies.
# 2. Email: N raw messages, each from its own address, posted to
#    /hooks/email/{public_id} with the channel's inbound secret; the replies
#    go over SMTP (STARTTLS and AUTH) to a local aiosmtpd.
# In both a catch-all agent on the builtin engine answers every message.
#
# Prints, per channel:
# - webhooks: wrk's latency percentiles (the 200 is written after the
#   message's group commit: time to the stored message) and messages/s
#   stored over the busy window (from the stored messages' times). Target
#   for SMS on 2 cores, SQLite: >= 1,000 messages/s, p99 <= 50 ms.
# - end to end: replies/s reaching the provider, and p50/p99 from each
#   inbound message's storing to its reply's send (from the database).
#
# Usage: bench/channels.sh [messages]      (default 5000 per channel)
#        AGENT=0 bench/channels.sh         webhooks only, no agent answering
#        CHANNELS="sms" bench/channels.sh  one of them (default "sms email")
#        BENCH_BIN=path/to/parley …        that build (a before/after pair)
#        EXTRA_ENV="PARLEY_LOG__LEVEL=warn,sqlx::query=debug" …
#                                          more server settings (words split)
# Needs python3 (with aiosmtpd for email), openssl and wrk.
set -euo pipefail
cd "$(dirname "$0")/.."
MESSAGES="${1:-5000}"
CHANNELS="${CHANNELS:-sms email}"
PORT="${PORT:-18797}"
TWILIO_PORT="${TWILIO_PORT:-18798}"
SMTP_PORT="${SMTP_PORT:-18799}"
source bench/lib.sh
need_wrk
bench_prepare

# The SMS provider: Messages.json answers 201 with a new sid.
python3 - "$TWILIO_PORT" <<'PY' &
import asyncio, itertools, sys
count = itertools.count(1)
async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
            body = ('{"sid": "SM%032x", "status": "queued"}' % next(count)).encode()
            writer.write(b"HTTP/1.1 201 Created\r\ncontent-type: application/json\r\ncontent-length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    await server.serve_forever()
asyncio.run(main())
PY
EXTRA_PIDS=$!

# The SMTP server (the email tests' own: STARTTLS and AUTH required), with a
# CA and a certificate for 127.0.0.1 made here.
if [[ " $CHANNELS " == *" email "* ]]; then
  printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' > ext.cnf
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj "/CN=Bench CA" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -keyout leaf.key -out leaf.csr -subj /CN=localhost 2>/dev/null
  openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out leaf.pem -days 1 -extfile ext.cnf 2>/dev/null
  python3 "$ROOT/crates/server/tests/email/smtp_server.py" "$SMTP_PORT" leaf.pem leaf.key bench smtp-pass "$WORK/smtp" > smtp.log &
  EXTRA_PIDS="$EXTRA_PIDS $!"
  for _ in $(seq 1 50); do grep -q READY smtp.log 2>/dev/null && break; sleep 0.1; done
fi

start_server ${EXTRA_ENV:-} PARLEY_PUBLIC_URL="http://127.0.0.1:$PORT" PARLEY_AGENTS__DEBOUNCE_MS=0 \
  PARLEY_WEBHOOKS__ALLOW_PRIVATE_TARGETS=true PARLEY_PRICING__AGENT_CREATE_CENTS=0

# Sets up channel $1 (and, unless AGENT=0, an agent answering it), writes $2
# requests to requests.tsv (an auth header's value, the body with its line
# breaks written \n) and prints "channel_id path header content-type".
setup() {
  python3 - "$BASE" "$KEY" "$1" "$2" "$TWILIO_PORT" "$SMTP_PORT" "$WORK/ca.pem" <<'PY'
import base64, hashlib, hmac, json, os, sys, urllib.parse, urllib.request
base, key, kind, n, twilio_port, smtp_port, ca = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7]
def call(method, path, body=None):
    # (Creating an agent is billed: it takes an Idempotency-Key.)
    h = {"X-API-Key": key, "Content-Type": "application/json", "Idempotency-Key": f"{path}-{kind}-bench"}
    with urllib.request.urlopen(urllib.request.Request(base + path, json.dumps(body).encode() if body else None, h, method=method)) as r:
        return json.loads(r.read() or b"null")
account, token, secret = "AC" + "0" * 32, "bench-auth-token", "bench-inbound-secret-0123456789"
if kind == "sms":
    config = {"account_sid": account, "auth_token": token, "from": "+14155550100", "base_url": f"http://127.0.0.1:{twilio_port}"}
else:
    config = {"address": "support@shop.example", "smtp_host": "127.0.0.1", "smtp_port": int(smtp_port),
              "smtp_username": "bench", "smtp_password": "smtp-pass", "tls_ca_pem": open(ca).read(), "inbound_secret": secret}
channel = call("POST", "/api/v1/channels", {"type": kind, "name": f"Bench {kind}", "config": config})
if os.environ.get("AGENT", "1") == "1":
    agent = call("POST", "/api/v1/agents", {"name": f"Bench {kind}", "text_engine": "builtin", "tools": []})
    call("POST", f"/api/v1/agents/{agent['id']}/triggers", {"event": "message.received", "channel": kind})
with open("requests.tsv", "w") as f:
    if kind == "sms":
        path = f"/hooks/twilio/{channel['public_id']}/inbound"
        for i in range(n):
            params = {"MessageSid": f"SM{i:032x}", "AccountSid": account, "From": f"+1415{2000000 + i:07d}",
                      "To": "+14155550100", "Body": f"Where is order {i}?", "NumMedia": "0"}
            data = base + path + "".join(k + v for k, v in sorted(params.items()))
            sig = base64.b64encode(hmac.new(token.encode(), data.encode(), hashlib.sha1).digest()).decode()
            f.write(f"{sig}\t{urllib.parse.urlencode(params)}\n")
        print(channel["id"], path, "x-twilio-signature", "application/x-www-form-urlencoded")
    else:
        path = f"/hooks/email/{channel['public_id']}"
        for i in range(n):
            mail = (f"From: Customer {i} <customer{i}@example.org>\\r\\nTo: support@shop.example\\r\\n"
                    f"Subject: Order {i}\\r\\nMessage-ID: <bench.{i}@example.org>\\r\\n"
                    f"Content-Type: text/plain; charset=utf-8\\r\\n\\r\\nWhere is order {i}?\\r\\n")
            f.write(f"Bearer {secret}\t{mail}\n")
        print(channel["id"], path, "authorization", "message/rfc822")
PY
}

cat > inbound.lua <<'LUA'
-- Sends each prepared request once: thread k of n takes lines k, k+n, …
local counter = 0
function setup(thread)
  thread:set("tid", counter)
  counter = counter + 1
end
function init(args)
  lines = {}
  for line in io.lines(args[1]) do lines[#lines + 1] = line end
  path, step, header, ctype, i = args[2], tonumber(args[3]), args[4], args[5], tid + 1
end
function request()
  -- wrk may build a thread's first request without sending it: make it one
  -- that does not matter.
  if not started then
    started = true
    return wrk.format("GET", "/healthz")
  end
  local line = lines[i]
  if not line then
    wrk.thread:stop()
    return wrk.format("GET", "/healthz")
  end
  i = i + step
  local auth, body = line:match("([^\t]+)\t(.*)")
  body = body:gsub("\\r\\n", "\r\n")
  return wrk.format("POST", path, {["content-type"] = ctype, [header] = auth}, body)
end
function response(status)
  if status ~= 200 and status ~= 0 then io.stderr:write("unexpected status " .. status .. "\n") end
end
LUA

for kind in $CHANNELS; do
  read -r CHANNEL INBOUND HEADER CTYPE < <(setup "$kind" "$MESSAGES")
  echo "== $kind: $MESSAGES inbound webhooks as fast as wrk sends them, ${DATABASE:-sqlite}, agent ${AGENT:-1} =="
  wrk -t2 -c16 -d300s --latency -s inbound.lua "$BASE" -- "$WORK/requests.tsv" "$INBOUND" 2 "$HEADER" "$CTYPE" > wrk.txt 2>&1 &
  WRK=$!
  # A wrk thread that has sent its share stops, but wrk itself sleeps out
  # its -d: once every message is stored it is interrupted (SIGINT makes it
  # print its figures and exit).
  python3 - "$WORK/data/parley.db" "$MESSAGES" "$CHANNEL" <<'PY'
import sqlite3, sys, time
db, n, channel = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
deadline = time.time() + 300
while time.time() < deadline:
    try:
        c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        got = c.execute("SELECT COUNT(*) FROM messages WHERE direction = 'inbound' AND channel_id = ?", (channel,)).fetchone()[0]
        c.close()
        if got >= n:
            break
    except sqlite3.OperationalError:
        pass
    time.sleep(0.5)
PY
  sleep 1
  kill -INT "$WRK" 2>/dev/null || true
  wait "$WRK" || true
  # wrk's rate counts its whole run: the rate comes from the stored messages.
  grep -E "Latency|50%|90%|99%|unexpected|Non-2xx" wrk.txt | sed 's/^/  /'
  python3 - "$WORK/data/parley.db" "$MESSAGES" "$CHANNEL" "${AGENT:-1}" <<'PY'
import sqlite3, sys, time
db, n, channel, agent = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
got, first, last = c.execute("SELECT COUNT(*), MIN(created_at), MAX(created_at) FROM messages "
                             "WHERE direction = 'inbound' AND channel_id = ?", (channel,)).fetchone()
print(f"  webhooks: {got} of {n} stored; {got / ((last - first) / 1e6):.0f} messages/s over the busy window")
if not agent:
    sys.exit()
deadline = time.time() + 300
while time.time() < deadline:
    sent = c.execute("SELECT COUNT(*) FROM messages WHERE direction = 'outbound' AND status = 'sent' AND channel_id = ?",
                     (channel,)).fetchone()[0]
    if sent >= n:
        break
    time.sleep(0.2)
rows = c.execute("""SELECT i.created_at, o.sent_at FROM messages i
    JOIN messages o ON o.conversation_id = i.conversation_id AND o.direction = 'outbound'
    WHERE i.direction = 'inbound' AND i.channel_id = ? AND o.sent_at IS NOT NULL""", (channel,)).fetchall()
took = sorted((o - i) / 1000 for i, o in rows)
pct = lambda q: took[min(len(took) - 1, int(q * len(took)))]
first, last = min(i for i, _ in rows), max(o for _, o in rows)
print(f"  end to end: {len(rows)} of {n} replies sent to the provider; {len(rows) / ((last - first) / 1e6):.0f} replies/s over the busy window")
print(f"  inbound stored -> reply sent: p50 {pct(.5):.0f} ms, p99 {pct(.99):.0f} ms, max {took[-1]:.0f} ms")
PY
done
