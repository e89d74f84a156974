#!/usr/bin/env python3
"""The writing half of bench/cluster.sh's mixed load, with exact accounts.

Through the load balancer, for DURATION seconds:
  - WORKERS clients post signed inbound messages (Standard Webhooks) to an
    api channel, each from a new sender, so each opens a conversation an
    agent answers; a 503 or a dropped connection is retried with the same
    webhook-id and external_id (the server stores a message once), as a
    client following Retry-After would;
  - one client places a test-mode call (the simulated line) every
    CALL_EVERY seconds.
It also receives, on RX_PORT, the agent's replies (the api channel's URL)
and every webhook delivery (an endpoint subscribed to all events).

When the load ends it waits for the work to settle, then prints a JSON
summary: requests by kind and outcome (first attempts' failures by cause),
messages acknowledged, and the ids acknowledged (for the database checks in
bench/cluster.sh), replies and deliveries received (distinct and repeated).

Usage: cluster_load.py BASE LIVE_KEY TEST_KEY CHANNEL SECRET AGENT RX_PORT
       DURATION WORKERS CALL_EVERY OUT.json
"""
import asyncio, base64, hashlib, hmac, json, sys, time, uuid
from collections import Counter

import aiohttp
from aiohttp import web

(BASE, LIVE, TEST, CHANNEL, SECRET, AGENT, RX_PORT, DURATION, WORKERS, CALL_EVERY, OUT) = sys.argv[1:12]
DURATION, WORKERS, CALL_EVERY = float(DURATION), int(WORKERS), float(CALL_EVERY)
KEY = base64.b64decode(SECRET.removeprefix("whsec_"))
RUN = uuid.uuid4().hex[:8]

outcomes = Counter()       # (kind, outcome) of every attempt
first_failures = Counter()  # (kind, cause) of attempts that were retried or failed
acked, placed = [], []
replies, deliveries = Counter(), Counter()
latencies = []


def cause(status=None, error=None, json_body=True):
    """Why an attempt failed: an exception's name, or the status (marked
    when the answer is not Parley's JSON, e.g. the balancer's own 503)."""
    if error is not None:
        return type(error).__name__
    return str(status) if json_body else f"{status} (not JSON)"


def is_json(r):
    return r.headers.get("content-type", "").startswith("application/json")


async def inbound(session, n):
    body = json.dumps({"from": f"load-{RUN}-{n}", "text": f"Where is order {n}?", "external_id": f"{RUN}-{n}"})
    mid = f"msg_{RUN}_{n}"
    for attempt in range(20):
        ts = str(int(time.time()))
        sig = base64.b64encode(hmac.new(KEY, f"{mid}.{ts}.{body}".encode(), hashlib.sha256).digest()).decode()
        headers = {"content-type": "application/json", "webhook-id": mid, "webhook-timestamp": ts,
                   "webhook-signature": f"v1,{sig}"}
        started = time.time()
        try:
            async with session.post(f"{BASE}/api/v1/channels/{CHANNEL}/inbound", data=body, headers=headers) as r:
                await r.read()
                outcomes[("inbound", r.status)] += 1
                if r.status in (200, 201):
                    latencies.append(time.time() - started)
                    acked.append(f"{RUN}-{n}")
                    return
                first_failures[("inbound", cause(r.status, json_body=is_json(r)))] += 1
                if r.status not in (502, 503, 504, 429):
                    return
                wait = float(r.headers.get("retry-after", "1"))
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            outcomes[("inbound", "error")] += 1
            first_failures[("inbound", cause(error=e))] += 1
            wait = 0.5
        await asyncio.sleep(min(wait, 2.0))


async def messages(session, worker, deadline):
    n = worker
    while time.time() < deadline:
        await inbound(session, n)
        n += WORKERS


async def calls(session, agent, deadline):
    while time.time() < deadline:
        try:
            async with session.post(f"{BASE}/api/v1/calls", json={"agent_id": agent, "to": "+14155550123"},
                                    headers={"X-API-Key": TEST, "Idempotency-Key": uuid.uuid4().hex}) as r:
                outcomes[("call", r.status)] += 1
                if r.status == 201:
                    placed.append((await r.json())["id"])
                else:
                    await r.read()
                    first_failures[("call", cause(r.status, json_body=is_json(r)))] += 1
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            outcomes[("call", "error")] += 1
            first_failures[("call", cause(error=e))] += 1
        await asyncio.sleep(CALL_EVERY)


async def receive(request):
    body = await request.read()
    if request.path.startswith("/replies"):
        replies[json.loads(body)["data"]["id"]] += 1
        return web.json_response({"external_id": f"out-{uuid.uuid4().hex}"})
    deliveries[request.headers.get("webhook-id")] += 1
    return web.Response(text="ok")


async def main():
    app = web.Application(client_max_size=4 << 20)
    app.router.add_post("/{tail:.*}", receive)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", int(RX_PORT), backlog=1024).start()
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=WORKERS + 4)) as session:
        async with session.post(f"{BASE}/api/v1/agents", headers={"X-API-Key": TEST, "Idempotency-Key": RUN},
                                json={"name": f"Caller {RUN}", "first_message": "Hello."}) as r:
            voice_agent = (await r.json())["id"]
        started = time.time()
        deadline = started + DURATION
        await asyncio.gather(*(messages(session, w, deadline) for w in range(WORKERS)),
                             calls(session, voice_agent, deadline))
        busy = time.time() - started
        # Let the work settle: every acknowledged message answered, every
        # call ended, the webhook backlog delivered (or 180 s).
        settle_deadline = time.time() + 180
        while time.time() < settle_deadline:
            before = (sum(replies.values()), sum(deliveries.values()))
            await asyncio.sleep(3)
            after = (sum(replies.values()), sum(deliveries.values()))
            if before == after and len(replies) >= len(acked):
                break
        settled = time.time() - started - busy
        # Every call ended (they last seconds; one on a killed instance
        # ends when its lease lapses), and recorded if it was answered.
        statuses, recordings = Counter(), Counter()
        for call_id in placed:
            for _ in range(120):
                async with session.get(f"{BASE}/api/v1/calls/{call_id}", headers={"X-API-Key": TEST}) as r:
                    c = await r.json()
                if c.get("ended_at") and (not c.get("answered_at") or c["recording"]["status"] != "processing"):
                    break
                await asyncio.sleep(1)
            statuses[f"{c['status']}/{c.get('ended_reason')}"] += 1
            if c.get("answered_at"):
                recordings[c["recording"]["status"]] += 1
    await runner.cleanup()
    lat = sorted(latencies)
    pct = lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 1) if lat else None
    summary = {
        "seconds": round(busy, 1),
        "settle_seconds": round(settled, 1),
        "attempts": {f"{k}:{o}": n for (k, o), n in sorted(outcomes.items(), key=str)},
        "failures_by_cause": {f"{k}:{c}": n for (k, c), n in sorted(first_failures.items(), key=str)},
        "messages_acknowledged": len(acked),
        "messages_per_second": round(len(acked) / busy, 1),
        "inbound_p50_ms": pct(0.5), "inbound_p99_ms": pct(0.99),
        "replies_distinct": len(replies), "replies_repeated": sum(replies.values()) - len(replies),
        "deliveries_distinct": len(deliveries), "deliveries_repeated": sum(deliveries.values()) - len(deliveries),
        "calls_placed": len(placed), "calls_by_end": dict(statuses), "answered_calls_recordings": dict(recordings),
        "run": RUN, "acked": acked,
    }
    with open(OUT, "w") as f:
        json.dump(summary, f)


asyncio.run(main())
