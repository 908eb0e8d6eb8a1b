#!/usr/bin/env bash
# Cold start on real loopback (issue 9): `abide send` of a batch, no rate_hint, from process
# start to drained, against `abide provider` at LIMIT/s for each --algorithm, with the
# client reading rate-limit headers and with it ignoring them (use_rate_limit_headers =
# false: as against a provider that advertises nothing). Loopback only, bounded in time.
#
#   benches/cold_start.sh                          # 3 runs of each of the 6 cells
#   RUNS=5 ITEMS=3000 SENDERS=40 LIMIT=100 benches/cold_start.sh
#   ABIDE=target/debug/abide SKIP_BUILD=1 HEADERS=on ITEMS=200 LIMIT=40 benches/cold_start.sh
#   STYLE=x-ratelimit benches/cold_start.sh        # provider --headers STYLE (ietf, draft-6,
#                                                  # x-ratelimit); default: its own IETF fields
#
# Per run: wall time of `abide send` (process start to exit, i.e. drained), delivered,
# 429s from the provider's /_stats, and delivered / (wall time x LIMIT).
# Output: target/bench-out/cold-start-<time>.txt (one line per run).
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
ITEMS=${ITEMS:-3000}
SENDERS=${SENDERS:-40}
LIMIT=${LIMIT:-100}
ALGORITHMS=${ALGORITHMS:-"gcra fixed-window sliding-window"}
HEADERS=${HEADERS:-"on off"}
STYLE=${STYLE:-}
OUT=$PWD/target/bench-out
mkdir -p "$OUT"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
LOG="$OUT/cold-start-$STAMP.txt"
WORK=$(mktemp -d)

if [ -z "${SKIP_BUILD:-}" ]; then   # SKIP_BUILD=1: use target/release/abide as it is
    echo "building (release)..." >&2
    cargo build --release -q -p abide
fi
ABIDE=$(realpath "${ABIDE:-target/release/abide}")

PROVIDER_PID=""
cleanup() {
    [ -n "$PROVIDER_PID" ] && kill "$PROVIDER_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

for i in $(seq 0 $((ITEMS - 1))); do
    printf '{"provider":"sms","path":"/v1/messages","body":{"to":"+1555%07d","text":"hi"}}\n' "$i"
done >"$WORK/items.jsonl"

echo "# $(date -u) $(nproc) cores; $ITEMS items, $SENDERS senders, no rate_hint, limit $LIMIT/s${STYLE:+, headers $STYLE}; $ABIDE" | tee "$LOG"
echo "# algorithm headers run wall_s delivered throttled_429 per_msg efficiency" | tee -a "$LOG"
for algo in $ALGORITHMS; do
    for headers in $HEADERS; do
        use=true; [ "$headers" = off ] && use=false
        for run in $(seq "$RUNS"); do
            plog="$WORK/provider.out"
            # A fresh file: the shell truncates it in the background job, and under load the
            # wait below could otherwise read the last run's address.
            rm -f "$plog"
            "$ABIDE" provider --listen 127.0.0.1:0 --key-rate "$LIMIT/s" --algorithm "$algo" \
                --account-rate off --key-concurrency off ${STYLE:+--headers "$STYLE"} >"$plog" 2>/dev/null &
            PROVIDER_PID=$!
            for _ in $(seq 300); do
                grep -q "listening on" "$plog" 2>/dev/null && break
                sleep 0.1
            done
            addr=$(sed -n 's/.*listening on http:\/\///p' "$plog" | head -1)
            cat >"$WORK/providers.toml" <<EOF
[[provider]]
name = "sms"
base_url = "http://$addr"
credentials_env = "ABIDE_SMS_TOKEN"
concurrency = $SENDERS
[provider.pacer]
use_rate_limit_headers = $use
EOF
            rm -f "$WORK"/send.db*
            start=$(date +%s.%N)
            # Bounded: a run that cannot reach its provider must not hang the bench.
            ABIDE_SMS_TOKEN=demo-key timeout 300 "$ABIDE" send --quiet --json --config "$WORK/providers.toml" \
                --db "$WORK/send.db" "$WORK/items.jsonl" >"$WORK/report.json" || echo "send exited $?" >&2
            end=$(date +%s.%N)
            stats=$(curl -s "http://$addr/_stats")
            kill "$PROVIDER_PID"; wait "$PROVIDER_PID" 2>/dev/null || true; PROVIDER_PID=""
            python3 - "$algo" "$headers" "$run" "$start" "$end" "$LIMIT" "$stats" <<'PY' | tee -a "$LOG"
import json, sys
algo, headers, run, start, end, limit, stats = sys.argv[1:]
s = json.loads(stats)
wall = float(end) - float(start)
accepted = s["accepted"]
throttled = s.get("rejected_by_status", {}).get("429", 0)
print(f"{algo} {headers} {run} {wall:.2f} {accepted} {throttled} "
      f"{throttled / max(accepted, 1):.4f} {accepted / (wall * float(limit)):.3f}")
PY
        done
    done
done
echo "wrote $LOG" >&2
