#!/usr/bin/env bash
# Scale out (issue 15): NODES `abide send` processes on one PostgreSQL outbox and one Redis
# deliver ITEMS messages to one `abide provider` limited to LIMIT/s per key.
#
#   benches/scale_out.sh                       # 3 runs each of: kill (kill -9 of one node
#                                              # at a third), restart (Redis restarted, all
#                                              # state lost, at a third), none
#   RUNS=5 ITEMS=6000 LIMIT=100 NODES=3 MODES="kill restart" benches/scale_out.sh
#
# Needs PostgreSQL on 127.0.0.1:5432 (trust, user postgres; a database per run is created
# and dropped) and redis-server on PATH: the bench starts its own Redis on REDIS_PORT
# (default 6390) so that restarting it disturbs nobody else's.
#
# Per run: wall time from the first node's start to the last node's exit; accepted,
# duplicates and 429s from the provider's /_stats; efficiency = accepted / (seconds with
# traffic x LIMIT) from its per-second histogram (whole seconds: reads slightly low); the
# busiest second in requests (the restart criterion: never above 1.2 x LIMIT); Redis round
# trips (EVALSHA calls, from INFO commandstats; after the restart only, in restart mode)
# per item. The provider's /_stats of each run is kept next to the log.
# Output: target/bench-out/scale-out-<time>.txt (one line per run).
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
ITEMS=${ITEMS:-6000}
LIMIT=${LIMIT:-100}
NODES=${NODES:-3}
SENDERS=${SENDERS:-16}
MODES=${MODES:-"kill restart none"}
REDIS_PORT=${REDIS_PORT:-6390}
PG=${PG:-postgres://postgres@127.0.0.1:5432}
OUT=$PWD/target/bench-out
mkdir -p "$OUT"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
LOG="$OUT/scale-out-$STAMP.txt"
WORK=$(mktemp -d)

if [ -z "${SKIP_BUILD:-}" ]; then
    echo "building (release)..." >&2
    cargo build --release -q -p abide
fi
ABIDE=$PWD/target/release/abide

PROVIDER_PID=""
REDIS_PID=""
NODE_PIDS=()
cleanup() {
    for p in "${NODE_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -n "$PROVIDER_PID" ] && kill "$PROVIDER_PID" 2>/dev/null || true
    [ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

start_redis() {
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
        >"$WORK/redis.out" 2>&1 &
    REDIS_PID=$!
    for _ in $(seq 100); do
        redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && return
        sleep 0.05
    done
    echo "redis-server did not start" >&2
    exit 1
}

stat() { curl -s "http://$1/_stats"; }

for i in $(seq 0 $((ITEMS - 1))); do
    printf '{"provider":"sms","path":"/v1/messages","body":{"to":"+1555%07d","text":"hi %d"}}\n' "$i" "$i"
done >"$WORK/items.jsonl"

echo "# $(date -u) $(nproc) cores; $NODES nodes x $SENDERS senders, $ITEMS items, limit $LIMIT/s per key" | tee "$LOG"
echo "# mode run wall_s accepted duplicates throttled_429 per_msg efficiency max_req_per_s redis_round_trips_per_item" | tee -a "$LOG"
start_redis
for mode in $MODES; do
    for run in $(seq "$RUNS"); do
        db="abide_bench_scale_$$_$run"
        psql "$PG/test" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null
        plog="$WORK/provider.out"
        "$ABIDE" provider --listen 127.0.0.1:0 --key-rate "$LIMIT/s" --account-rate off \
            --key-concurrency off >"$plog" 2>/dev/null &
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
credentials_env = "BENCH_TOKEN"
concurrency = $SENDERS
timeout_secs = 2.0

[coordination]
redis_url = "redis://127.0.0.1:$REDIS_PORT"
EOF
        prefix="bench:$STAMP:$mode:$run"
        t0=$(date +%s.%N)
        NODE_PIDS=()
        for n in $(seq "$NODES"); do
            BENCH_TOKEN=demo-key RUST_LOG=${RUST_LOG:-warn} "$ABIDE" send --config "$WORK/providers.toml" --db "$PG/$db" \
                --quiet --lease 6s --redis-prefix "$prefix" "$WORK/items.jsonl" \
                >"$WORK/node$n.out" 2>"$WORK/node$n.err" &
            NODE_PIDS+=($!)
            sleep 0.2
        done
        if [ "$mode" != none ]; then
            for _ in $(seq 600); do
                acc=$(stat "$addr" | sed -n 's/.*"accepted":\([0-9]*\).*/\1/p')
                [ "${acc:-0}" -ge $((ITEMS / 3)) ] && break
                sleep 0.1
            done
            if [ "$mode" = kill ]; then
                kill -9 "${NODE_PIDS[$((NODES - 1))]}"
            else
                kill -9 "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null || true
                sleep 1   # nodes fall back, then find the state gone
                start_redis
            fi
        fi
        for p in "${NODE_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
        NODE_PIDS=()
        t1=$(date +%s.%N)
        stat "$addr" >"$WORK/stats.json"
        cp "$WORK/stats.json" "$OUT/scale-out-$STAMP-$mode-$run.json"
        for n in $(seq "$NODES"); do
            grep -v "result refused" "$WORK/node$n.err" >"$OUT/scale-out-$STAMP-$mode-$run-node$n.log" || true
        done
        syncs=$(redis-cli -p "$REDIS_PORT" info commandstats | sed -n 's/^cmdstat_evalsha:calls=\([0-9]*\),.*/\1/p')
        redis-cli -p "$REDIS_PORT" config resetstat >/dev/null
        kill "$PROVIDER_PID" 2>/dev/null || true; wait "$PROVIDER_PID" 2>/dev/null || true
        PROVIDER_PID=""
        psql "$PG/test" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null
        python3 - "$WORK/stats.json" "$mode" "$run" "$t0" "$t1" "$ITEMS" "$LIMIT" "${syncs:-0}" <<'PY' | tee -a "$LOG"
import json, sys
s = json.load(open(sys.argv[1])); mode, run = sys.argv[2], sys.argv[3]
t0, t1, items, limit = float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
h = [x for x in s["histogram"] if x["requests"] > 0]
secs = h[-1]["second"] - h[0]["second"] + 1 if h else 1
r429 = s.get("rejected_by_status", {}).get("429", 0)
print(f"{mode} {run} {t1 - t0:.1f} {s['accepted']} {s['duplicates']} {r429} "
      f"{r429 / items:.4f} {s['accepted'] / (secs * limit):.3f} "
      f"{max((x['requests'] for x in h), default=0)} {int(sys.argv[8]) / items:.3f}")
PY
    done
done
echo "wrote $LOG" >&2
