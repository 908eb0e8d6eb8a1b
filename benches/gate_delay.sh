#!/usr/bin/env bash
# Greedy off-the-shelf clients against `abide provider` in refuse and in delay mode, on
# loopback: Python urllib3 (Retry(total=5) on 429, honouring Retry-After) and Node got
# (retry on 429, limit 5, honouring Retry-After). WORKERS closed-loop workers send
# REQUESTS logical requests (each with its own Idempotency-Key) as fast as the limit lets
# them, against a key rate of RATE/s. Each run starts a fresh provider; a run lasts about
# REQUESTS / RATE seconds (20 s by default) and is killed after 90 s (refuse mode runs longer: refused workers sleep whole seconds).
#
#   benches/gate_delay.sh                    # 3 runs of each client in each mode
#   RUNS=1 MODES=delay CLIENTS=python benches/gate_delay.sh
#
# Per run: 429s the client received per logical request (the provider's count of 429s
# sent), accepted ÷ (elapsed × RATE), p50/p99 of a logical request's latency (retries and
# holds included), and the provider's delayed / delay_ms. Output:
# target/bench-out/gate_delay-<time>.txt. The clients are installed into a temporary
# directory from PyPI (urllib3) and npm (got), removed at exit.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
WORKERS=${WORKERS:-40}
REQUESTS=${REQUESTS:-2000}
RATE=${RATE:-100}
BURST=${BURST:-$RATE}   # the provider's default: a second's worth
DELAY_BURST=${DELAY_BURST:-50}
MAX_DELAY=${MAX_DELAY:-500ms}
MODES=${MODES:-"refuse delay"}
CLIENTS=${CLIENTS:-"python node"}
OUT=$PWD/target/bench-out
mkdir -p "$OUT"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
LOG="$OUT/gate_delay-$STAMP.txt"
TMP=$(mktemp -d)

PROVIDER_PID=""
cleanup() {
    [ -n "$PROVIDER_PID" ] && kill "$PROVIDER_PID" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

echo "building (release)..." >&2
cargo build --release -q -p abide
ABIDE=$PWD/target/release/abide

echo "installing urllib3 and got into $TMP..." >&2
pip3 install -q --disable-pip-version-check --target "$TMP/py" urllib3 2>/dev/null
npm install --silent --prefix "$TMP/node" got@14 >/dev/null 2>&1
URLLIB3=$(PYTHONPATH="$TMP/py" python3 -c 'import urllib3; print(urllib3.__version__)')
GOT=$(node -p "require('$TMP/node/node_modules/got/package.json').version")

cat >"$TMP/client.py" <<'EOF'
# WORKERS threads share one pool; each takes the next logical request until none is left.
import json, sys, threading, time
import urllib3
from urllib3.util.retry import Retry

url, workers, total = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pool = urllib3.PoolManager(maxsize=workers, block=True)
retry = Retry(total=5, status_forcelist=[429], allowed_methods=None,
              respect_retry_after_header=True, backoff_factor=0, raise_on_status=False)
lock, next_i, lat, codes = threading.Lock(), [0], [], {}
body = json.dumps({"to": "+15550100", "text": "hello"}).encode()

def work():
    while True:
        with lock:
            i = next_i[0]
            if i >= total:
                return
            next_i[0] += 1
        t0 = time.monotonic()
        r = pool.request("POST", url + "/v1/messages", body=body, retries=retry, headers={
            "Authorization": "Bearer demo-key", "Content-Type": "application/json",
            "Idempotency-Key": "m-%d" % i})
        with lock:
            lat.append(time.monotonic() - t0)
            codes[r.status] = codes.get(r.status, 0) + 1

t0 = time.monotonic()
ts = [threading.Thread(target=work) for _ in range(workers)]
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps({"elapsed": time.monotonic() - t0, "latencies": lat, "codes": codes}))
EOF

cat >"$TMP/node/client.mjs" <<'EOF'
// WORKERS async loops share one agent; each takes the next logical request.
import got from 'got';
import http from 'node:http';
const [url, workers, total] = [process.argv[2], +process.argv[3], +process.argv[4]];
const agent = new http.Agent({ keepAlive: true, maxSockets: workers });
let next = 0; const lat = []; const codes = {};
async function work() {
  while (next < total) {
    const i = next++;
    const t0 = performance.now();
    const r = await got.post(url + '/v1/messages', {
      json: { to: '+15550100', text: 'hello' },
      headers: { authorization: 'Bearer demo-key', 'idempotency-key': `m-${i}` },
      retry: { limit: 5, methods: ['POST'], statusCodes: [429] },
      throwHttpErrors: false, agent: { http: agent },
    });
    lat.push((performance.now() - t0) / 1000);
    codes[r.statusCode] = (codes[r.statusCode] || 0) + 1;
  }
}
const t0 = performance.now();
await Promise.all(Array.from({ length: workers }, work));
console.log(JSON.stringify({ elapsed: (performance.now() - t0) / 1000, latencies: lat, codes }));
agent.destroy();
EOF

# start_provider MODE: a fresh provider on a free port; sets ADDR.
start_provider() {
    local plog="$TMP/provider.out"
    : >"$plog"
    "$ABIDE" provider --listen 127.0.0.1:0 --key-rate "$RATE/s" --key-burst "$BURST" \
        --account-rate off --key-concurrency off --gate-mode "$1" \
        --delay-burst "$DELAY_BURST" --max-delay "$MAX_DELAY" >"$plog" 2>/dev/null &
    PROVIDER_PID=$!
    for _ in $(seq 100); do
        if grep -q "listening on" "$plog"; then
            ADDR=$(sed -n 's/.*listening on //p' "$plog" | head -1)
            return 0
        fi
        sleep 0.1
    done
    echo "provider did not start" >&2
    exit 1
}

stop_provider() {
    kill "$PROVIDER_PID" 2>/dev/null || true
    wait "$PROVIDER_PID" 2>/dev/null || true
    PROVIDER_PID=""
}

{
    echo "# gate_delay $(date -u '+%F %H:%M') UTC, $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# urllib3 $URLLIB3 (python $(python3 -c 'import platform; print(platform.python_version())')), got $GOT (node $(node --version)); WORKERS=$WORKERS REQUESTS=$REQUESTS RATE=$RATE/s BURST=$BURST DELAY_BURST=$DELAY_BURST MAX_DELAY=$MAX_DELAY"
    printf '%-7s %-6s %3s %8s %9s %8s %8s %8s %9s %8s\n' client mode run 429/req of-limit p50_ms p99_ms delayed delay_ms non-202
} | tee "$LOG"

for run in $(seq "$RUNS"); do
    for mode in $MODES; do
        for client in $CLIENTS; do
            start_provider "$mode"
            case $client in
                python) cmd=(env PYTHONPATH="$TMP/py" python3 "$TMP/client.py") ;;
                node) cmd=(node "$TMP/node/client.mjs") ;;
            esac
            out=$(timeout 90 "${cmd[@]}" "$ADDR" "$WORKERS" "$REQUESTS") || { echo "$client $mode run $run: no result (exit $?)" | tee -a "$LOG"; stop_provider; continue; }
            stats=$(curl -s "$ADDR/_stats")
            stop_provider
            python3 - "$client" "$mode" "$run" "$RATE" "$REQUESTS" "$out" "$stats" <<'EOF' | tee -a "$LOG"
import json, sys
client, mode, run, rate, total = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
out, st = json.loads(sys.argv[6]), json.loads(sys.argv[7])
lat = sorted(out["latencies"])
pct = lambda p: lat[max(0, -(-len(lat) * p // 100) - 1)] * 1000
sent_429 = st["rejected_by_status"].get("429", 0)
non202 = sum(n for c, n in out["codes"].items() if c != "202")
print("%-7s %-6s %3s %8.3f %9.3f %8.0f %8.0f %8d %9d %8d" % (
    client, mode, run, sent_429 / total, st["accepted"] / (out["elapsed"] * rate),
    pct(50), pct(99), st.get("delayed", 0), st.get("delay_ms", 0), non202))
EOF
        done
    done
done
echo "written: $LOG" >&2
