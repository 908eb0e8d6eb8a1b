#!/usr/bin/env bash
# Politeness on real loopback: the abide outbox against `abide provider` with a rate limit
# that changes mid-run, offered load far above it. Loopback only, bounded in time.
#
#   benches/politeness.sh                      # phases 200/s for 30 s, 100/s, 300/s
#   PHASES="200:20 50:20" benches/politeness.sh
#   RATE_LIMIT_HEADERS=off benches/politeness.sh   # as if the provider advertised nothing
#
# `abide provider` cannot change its limit on a schedule (its schedule covers
# Retry-After form, throttle style, 503s and grace, not rates), so each phase restarts
# it on the same port with the next --key-rate. The bench binary notices the new limit
# by polling GET /v1/quota (charges nothing) and measures convergence from there. A
# restart also loses the provider's memory of idempotency keys; the run's keys are
# unique, so that changes nothing here. Output: target/bench-out/politeness-<time>.txt
# and .csv (the per-second series).
set -euo pipefail

cd "$(dirname "$0")/.."
PHASES=${PHASES:-"200:30 100:30 300:30"}   # LIMIT_PER_SEC:SECONDS ...
BURST=${BURST:-10}
CONCURRENCY=${CONCURRENCY:-20}
RATE_HINT=${RATE_HINT:-1000}
HEADROOM=${HEADROOM:-0.97}           # [provider.pacer] headroom
RATE_LIMIT_HEADERS=${RATE_LIMIT_HEADERS:-on}   # off: learn from 429s alone
OUT=$PWD/target/bench-out
mkdir -p "$OUT"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
LOG="$OUT/politeness-$STAMP.txt"

total=0
for p in $PHASES; do total=$((total + ${p#*:})); done
# Enough work that the queue never drains: twice the most the limits allow.
items=0
for p in $PHASES; do items=$((items + 2 * ${p%%:*} * ${p#*:})); done

echo "building (release)..." >&2
cargo build --release -q -p abide
cargo bench -q -p abide-outbox --bench politeness --no-run 2>/dev/null
ABIDE=target/release/abide

PROVIDER_PID=""
BENCH_PID=""
cleanup() {
    [ -n "$PROVIDER_PID" ] && kill "$PROVIDER_PID" 2>/dev/null || true
    [ -n "$BENCH_PID" ] && kill "$BENCH_PID" 2>/dev/null || true
}
trap cleanup EXIT

# start_provider LISTEN RATE: starts it, waits for its "listening on" line, sets ADDR.
start_provider() {
    local listen=$1 rate=$2 plog="$OUT/provider-$STAMP.log"
    "$ABIDE" provider --listen "$listen" --key-rate "$rate/s" --key-burst "$BURST" \
        --account-rate off --key-concurrency off >"$plog.out" 2>>"$plog" &
    PROVIDER_PID=$!
    for _ in $(seq 100); do
        if grep -q "listening on" "$plog.out" 2>/dev/null; then
            ADDR=$(sed -n 's/.*listening on http:\/\///p' "$plog.out" | head -1)
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

set -- $PHASES
first=${1%%:*}
start_provider 127.0.0.1:0 "$first"
echo "provider on $ADDR at $first/s; phases: $PHASES; $items items queued" >&2

{
    echo "# politeness $(date -u +%F) $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
    echo "# PHASES='$PHASES' BURST=$BURST CONCURRENCY=$CONCURRENCY RATE_HINT=$RATE_HINT HEADROOM=$HEADROOM RATE_LIMIT_HEADERS=$RATE_LIMIT_HEADERS"
} >"$LOG"
timeout $((total + 120)) cargo bench -q -p abide-outbox --bench politeness -- \
    --url "http://$ADDR" --seconds "$total" --items "$items" \
    --concurrency "$CONCURRENCY" --rate-hint "$RATE_HINT" \
    --headroom "$HEADROOM" --rate-limit-headers "$RATE_LIMIT_HEADERS" \
    --csv "$OUT/politeness-$STAMP.csv" >>"$LOG" 2>&1 &
BENCH_PID=$!

# The bench enqueues first; its clock starts with the run. Wait for the first sample's
# second to be under way before timing phases (bounded).
for _ in $(seq 600); do
    grep -q "^running" "$LOG" && break
    sleep 0.1
done

sleep "${1#*:}"
shift
for p in "$@"; do
    rate=${p%%:*}
    secs=${p#*:}
    stop_provider
    start_provider "$ADDR" "$rate"
    echo "limit now $rate/s" >&2
    sleep "$secs"
done

wait "$BENCH_PID" || { echo "bench failed; see $LOG" >&2; exit 1; }
BENCH_PID=""
stop_provider
grep -E "^(whole run|phase|RESULT|run totals)" "$LOG"
echo "full log: $LOG" >&2
