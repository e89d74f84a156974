#!/usr/bin/env python3
"""A minimal asyncio HTTP/1.1 webhook receiver for bench/webhooks.sh.

Answers every POST with 200 and records, per delivery, the arrival time and
the event's own timestamp (from the JSON body). On SIGTERM it prints a JSON
summary: deliveries, distinct webhook-ids, deliveries/s over the busy window,
and p50/p99 event-to-delivery latency in milliseconds.
"""
import asyncio, json, signal, sys, time
from datetime import datetime

records = []  # (arrival, event_time, webhook_id)

async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length, wid = 0, ""
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                k = k.strip().lower()
                if k == b"content-length":
                    length = int(v)
                elif k == b"webhook-id":
                    wid = v.strip().decode()
            body = await reader.readexactly(length)
            now = time.time()
            ts = json.loads(body)["timestamp"]
            records.append((now, datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp(), wid))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    except (asyncio.IncompleteReadError, ConnectionResetError):
        pass
    finally:
        writer.close()

def summary():
    if not records:
        return {"deliveries": 0}
    arrivals = sorted(r[0] for r in records)
    lat = sorted((r[0] - r[1]) * 1000 for r in records)
    window = max(arrivals[-1] - arrivals[0], 1e-9)
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    return {
        "deliveries": len(records),
        "distinct_ids": len({r[2] for r in records}),
        "per_second": round(len(records) / window, 1),
        "p50_ms": round(pick(0.50), 1),
        "p99_ms": round(pick(0.99), 1),
        "max_ms": round(lat[-1], 1),
    }

async def report_count(path):
    # Lets the driver see when deliveries stop arriving.
    while True:
        with open(path, "w") as f:
            f.write(str(len(records)))
        await asyncio.sleep(0.5)

async def main(port, out):
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    asyncio.create_task(report_count(out + ".count"))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    async with server:
        await stop.wait()
    with open(out, "w") as f:
        json.dump(summary(), f)

if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
