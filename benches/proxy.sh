#!/usr/bin/env bash
# The incidents' clients directly and through `abide proxy`, against `abide provider` at
# LIMIT/s: urllib3 with 5 retries honouring Retry-After, and a naive client retrying every
# non-2xx five times on its own 1, 2, 4, 8, 16 s schedule; 40 threads, MESSAGES POSTs each
# run; the provider's limit as a fixed window and as GCRA, with rate-limit headers on every
# answer (`--headers ietf`) and without any (`retry-after=imf-fixdate`: a date, no fields).
# What the provider saw is the measure: 429s per message, accepted once, delivered ÷
# (time × limit). Loopback only; each run bounded by the clients' own schedules.
#
#   benches/proxy.sh                               # MESSAGES=3000 LIMIT=100 RUNS=1
#   MESSAGES=600 ALGORITHMS=gcra benches/proxy.sh  # a shorter pass
#   ABIDE=target/debug/abide benches/proxy.sh      # a binary already built
#
# Output: one line per run on stdout and in target/bench-out/proxy-<time>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
MESSAGES=${MESSAGES:-3000}
LIMIT=${LIMIT:-100}
RUNS=${RUNS:-1}
ALGORITHMS=${ALGORITHMS:-"fixed-window gcra"}
HEADERS=${HEADERS:-"on off"}
CLIENTS=${CLIENTS:-"urllib3 naive"}
PATHS=${PATHS:-"direct proxy"}
OUT=$PWD/target/bench-out
mkdir -p "$OUT"
LOG="$OUT/proxy-$(date -u +%Y%m%dT%H%M%SZ).txt"
work=$(mktemp -d)

if [ -z "${ABIDE:-}" ]; then
    cargo build --release -q -p abide
    ABIDE=target/release/abide
fi

pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

listening() { # listening FILE: the ADDR of its "listening on http://ADDR" (30 s at most)
    for _ in $(seq 1 300); do
        if grep -q '^listening on ' "$1" 2>/dev/null; then
            sed -n 's/^listening on //p' "$1" | head -1
            return 0
        fi
        sleep 0.1
    done
    cat "$1" >&2
    return 1
}

echo "# $(date -u +%FT%TZ) MESSAGES=$MESSAGES LIMIT=$LIMIT/s load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$LOG"
for run in $(seq 1 "$RUNS"); do
for algorithm in $ALGORITHMS; do
for headers in $HEADERS; do
for client in $CLIENTS; do
for path in $PATHS; do
    i=$((${i:-0} + 1))
    if [ "$headers" = on ]; then style=(--headers ietf); else style=(--behaviour retry-after=imf-fixdate); fi
    "$ABIDE" provider --listen 127.0.0.1:0 --key-rate "$LIMIT/s" --key-burst 10 \
        --account-rate off --key-concurrency off --algorithm "$algorithm" "${style[@]}" \
        >"$work/provider-$i.out" 2>&1 &
    provider_pid=$!
    pids+=("$provider_pid")
    provider=$(listening "$work/provider-$i.out")
    target=$provider
    proxy_pid=""
    if [ "$path" = proxy ]; then
        printf '[[provider]]\nname = "sms"\nbase_url = "%s"\n' "$provider" >"$work/providers.toml"
        RUST_LOG=warn "$ABIDE" proxy --config "$work/providers.toml" --listen 127.0.0.1:0 \
            >"$work/proxy-$i.out" 2>&1 &
        proxy_pid=$!
        pids+=("$proxy_pid")
        target="$(listening "$work/proxy-$i.out")/sms"
    fi
    seen=$(python3 benches/proxy_client.py "$client" "$target" "$MESSAGES")
    stats=$(curl -s "$provider/_stats")
    python3 - "$run" "$algorithm" "$headers" "$client" "$path" "$LIMIT" "$seen" "$stats" <<'PY' | tee -a "$LOG"
import json, sys
run, algorithm, headers, client, path, limit = sys.argv[1:7]
seen, stats = json.loads(sys.argv[7]), json.loads(sys.argv[8])
n = seen["sent"]
t429 = stats["rejected_by_status"].get("429", 0)
goodput = stats["accepted"] / (seen["elapsed_s"] * int(limit))
print(f"run={run} {algorithm:12} headers={headers:3} {client:7} {path:6} "
      f"429/msg={t429 / n:.3f} 429s={t429} accepted={stats['accepted']} dup={stats['duplicates']} "
      f"client_failed={seen['failed']} elapsed={seen['elapsed_s']:.1f}s goodput={goodput:.3f}")
PY
    [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null || true
    kill "$provider_pid" 2>/dev/null || true
    wait 2>/dev/null || true
done; done; done; done; done
