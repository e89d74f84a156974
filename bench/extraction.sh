#!/usr/bin/env bash
# Benchmark: reading knowledge documents in a child process (issue 31).
#
# 1. What the child costs: the same small document (about 2 KB of prose)
#    uploaded N times as Markdown (read in process) and N times as HTML
#    (read by `parley extract-document` in a child process), one at a time,
#    each timed from the upload to `ready`; prints p50/p95 of both and the
#    difference of the medians.
# 2. What a big document costs everyone else: while a 1.2 MB HTML manual
#    (about 1,000 passages) is read and indexed, and then a 1 KB PDF whose
#    drawing repeats a long line 5,000 times is refused, another workspace
#    creates a contact every 50 ms; prints how long each document took and
#    the contacts' p50/p99/max latency.
#
# Usage: bench/extraction.sh [documents]   (default 40)
#        DATABASE=postgres bench/extraction.sh
# Needs python3.
set -euo pipefail
cd "$(dirname "$0")/.."
DOCUMENTS="${1:-40}"
PORT="${PORT:-18791}"
source bench/lib.sh
bench_prepare
start_server
OTHER=$(parley workspace create --name Other | python3 -c 'import json,sys; print(json.load(sys.stdin)["api_key"]["key"])')

python3 - "$BASE" "$KEY" "$OTHER" "$DOCUMENTS" <<'PY'
import json, statistics, sys, threading, time, urllib.request, uuid, zlib
base, key, other, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def call(method, path, body=None, k=key, raw=None, ctype="application/json"):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    h = {"X-API-Key": k, "Content-Type": ctype}
    with urllib.request.urlopen(urllib.request.Request(base + path, data, h, method=method)) as r:
        return json.loads(r.read() or b"null")

def upload(coll, name, ctype, data):
    b = uuid.uuid4().hex
    body = (f"--{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n"
            f"Content-Type: {ctype}\r\n\r\n").encode() + data + f"\r\n--{b}--\r\n".encode()
    return call("POST", f"/api/v1/knowledge-collections/{coll}/documents", raw=body,
                ctype=f"multipart/form-data; boundary={b}")

def wait(coll, doc):
    while True:
        d = call("GET", f"/api/v1/knowledge-collections/{coll}/documents/{doc['id']}")
        if d["status"] != "processing":
            return d
        time.sleep(0.005)

coll = call("POST", "/api/v1/knowledge-collections", {"name": "Bench"})["id"]
prose = " ".join(f"Sentence {i} tells the customer how returns, refunds and shipping work." for i in range(28))
md = f"# Returns\n\n{prose}\n".encode()
html = f"<html><body><h1>Returns</h1><p>{prose}</p></body></html>".encode()
timings = {}
for kind, ctype, data in [("markdown", "text/markdown", md), ("html", "text/html", html)]:
    times = []
    for i in range(n):
        started = time.perf_counter()
        d = wait(coll, upload(coll, f"doc{i}.{kind}", ctype, data))
        assert d["status"] == "ready", d
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    timings[kind] = times
    print(f"{kind:9} (read {'in process' if kind == 'markdown' else 'in a child'}): "
          f"p50 {statistics.median(times):.1f} ms, p95 {times[int(len(times) * 0.95) - 1]:.1f} ms over {n}")
print(f"the child process costs {statistics.median(timings['html']) - statistics.median(timings['markdown']):.1f} ms a document (difference of the medians)")

# A big manual and a text bomb, while another workspace writes.
section = "".join(f"<h2>Chapter {c}</h2>" + "".join(f"<p>{prose} Paragraph {p}.</p>" for p in range(6)) for c in range(100))
manual = f"<html><body>{section}</body></html>".encode()
line = b"BT /F1 12 Tf 72 700 Td (" + b"repeated words " * 600 + b") Tj ET"
def pdf(objects):
    out, offsets = b"%PDF-1.4\n", []
    for i, o in enumerate(objects, 1):
        offsets.append(len(out)); out += f"{i} 0 obj\n".encode() + o + b"\nendobj\n"
    x = len(out)
    out += f"xref\n0 {len(objects)+1}\n0000000000 65535 f \n".encode() + b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    return out + f"trailer\n<< /Size {len(objects)+1} /Root 1 0 R >>\nstartxref\n{x}\n%%EOF\n".encode()
def stream(d, data): return f"<< {d} /Length {len(data)} >>\nstream\n".encode() + data + b"\nendstream"
bomb = pdf([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /XObject << /T 5 0 R >> /Font << /F1 6 0 R >> >> /Contents 4 0 R >>",
    stream("/Filter /FlateDecode", zlib.compress(b"/T Do " * 5000)), stream("/Type /XObject /Subtype /Form /BBox [0 0 10 10]", line),
    b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"])
latencies, stop = [], threading.Event()
def writer():
    i = 0
    while not stop.is_set():
        started = time.perf_counter()
        call("POST", "/api/v1/contacts", {"display_name": f"Writer {i}"}, k=other)
        latencies.append((time.perf_counter() - started) * 1000)
        i += 1
        time.sleep(0.05)
t = threading.Thread(target=writer); t.start()
time.sleep(0.5)
for name, ctype, data in [("manual.html", "text/html", manual), ("bomb.pdf", "application/pdf", bomb)]:
    started = time.perf_counter()
    d = wait(coll, upload(coll, name, ctype, data))
    took = time.perf_counter() - started
    print(f"{name} ({len(data) / 1e6:.2f} MB): {d['status']} in {took:.2f} s, {d['passage_count']} passages"
          + (f" ({d['error']})" if d.get("error") else ""))
time.sleep(0.5)
stop.set(); t.join()
latencies.sort()
print(f"meanwhile another workspace created {len(latencies)} contacts: p50 {statistics.median(latencies):.1f} ms, "
      f"p99 {latencies[int(len(latencies) * 0.99) - 1]:.1f} ms, max {latencies[-1]:.1f} ms")
PY
