#!/usr/bin/env bash
# Benchmark: knowledge retrieval over 10,000 passages.
#
# Adds 88 documents of synthetic prose (Zipf-distributed words from a
# 5,000-word vocabulary, in paragraphs under headings) to one collection
# through the API, waits until the job has split them into passages
# (about 10,000), and reports how long processing took; then p50/p99 of
# `GET /knowledge-collections/{id}/query` over 12 representative questions
# (wrk, 2 connections, 20 s). Target on a 2-core machine: p99 <= 20 ms.
#
# Usage: bench/knowledge.sh [documents]   (default 88)
#        DATABASE=postgres bench/knowledge.sh   on a fresh PostgreSQL database
# Needs python3 and wrk.
set -euo pipefail
cd "$(dirname "$0")/.."
DOCUMENTS="${1:-88}"
PORT="${PORT:-18790}"
source bench/lib.sh
need_wrk
bench_prepare
start_server

python3 - "$BASE" "$KEY" "$DOCUMENTS" <<'PY'
import json, random, sys, time, urllib.request
base, key, documents = sys.argv[1], sys.argv[2], int(sys.argv[3])
def call(method, path, body=None):
    h = {"X-API-Key": key, "Content-Type": "application/json"}
    with urllib.request.urlopen(urllib.request.Request(base + path, json.dumps(body).encode() if body else None, h, method=method)) as r:
        return json.loads(r.read() or b"null")
rng = random.Random(7)
syllables = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "pe", "do", "ga", "fu", "ri", "zo", "be", "tan", "mor", "lis"]
vocab = sorted({"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(6000)})[:5000]
weights = [1 / (i + 1) for i in range(len(vocab))]
def sentence():
    return " ".join(rng.choices(vocab, weights, k=rng.randint(8, 18))).capitalize() + "."
collection = call("POST", "/api/v1/knowledge-collections", {"name": "Bench"})
started = time.time()
for d in range(documents):
    sections = []
    for s in range(60):
        paragraphs = ["# " + " ".join(rng.choices(vocab[:800], k=3)).title()]
        paragraphs += [" ".join(sentence() for _ in range(rng.randint(4, 8))) for _ in range(4)]
        sections.append("\n\n".join(paragraphs))
    call("POST", f"/api/v1/knowledge-collections/{collection['id']}/documents",
         {"title": f"Manual {d}", "text": "\n\n".join(sections), "content_type": "text/markdown"})
while True:
    docs = call("GET", f"/api/v1/knowledge-collections/{collection['id']}/documents?limit=200")["items"]
    if all(d["status"] != "processing" for d in docs):
        break
    time.sleep(0.2)
took = time.time() - started
coll = call("GET", f"/api/v1/knowledge-collections/{collection['id']}")
failed = sum(d["status"] == "failed" for d in docs)
print(f"{coll['document_count']} documents ({failed} failed) → {coll['passage_count']} passages in {took:.1f} s "
      f"({coll['passage_count'] / took:.0f} passages/s, upload included)")
# Questions: common, middling and rare words, and a miss.
picks = [vocab[min(i, len(vocab) - 1)] for i in (1, 5, 40, 200, 900, 2500, 4900)]
questions = [
    f"What is {picks[0]}?", f"How do I {picks[1]} the {picks[2]}?", f"{picks[3]} {picks[4]}",
    f"Where can I find {picks[5]}", f"{picks[6]} and {picks[2]} with {picks[0]}", "zzqx",
    f"Tell me about {picks[4]} {picks[5]} {picks[6]}", f"{picks[2]}", f"{picks[1]} {picks[3]} {picks[5]} {picks[0]}",
    f"why {picks[3]}", f"{picks[6]}", f"{picks[0]} {picks[1]} {picks[2]} {picks[3]} {picks[4]} {picks[5]} {picks[6]}",
]
with open("queries.txt", "w") as f:
    for q in questions:
        f.write(f"/api/v1/knowledge-collections/{collection['id']}/query?q={urllib.parse.quote(q)}\n")
PY

cat > query.lua <<'LUA'
local paths = {}
for line in io.lines("queries.txt") do paths[#paths + 1] = line end
local i = 0
function request()
  i = i % #paths + 1
  return wrk.format("GET", paths[i], {["X-API-Key"] = os.getenv("KEY")})
end
LUA
echo "query latency (wrk, 2 connections, 20 s, 12 questions in turn, ${DATABASE:-sqlite}):"
KEY=$KEY wrk -t1 -c2 -d20s --latency -s query.lua "$BASE" | grep -E "Requests/sec|50%|99%|Non-2xx|Latency "
