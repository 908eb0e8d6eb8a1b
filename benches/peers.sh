#!/usr/bin/env bash
# abide's outbox engine beside a queue a user might pick instead, run interleaved on this
# machine with the same job count: BullMQ (Node, on the local Redis). Each round runs
#   abide  --transport scripted   vs  BullMQ with a no-op processor   (the queue alone)
#   abide  --transport http       vs  BullMQ POSTing to a loopback server
# N items already queued when the clock starts; the time is until the last is recorded done.
#
#   benches/peers.sh                       # 3 rounds, 20,000 jobs, 32 concurrent
#   ROUNDS=5 JOBS=50000 benches/peers.sh
#   ENGINE=target/release/deps/engine-... benches/peers.sh   # a prebuilt engine bench
#
# What differs, so the figures are read right: abide commits each result to SQLite (WAL) and
# marks each request before it goes out (a crash charges exactly the requests on the wire);
# BullMQ keeps its jobs in Redis, here without persistence (--save "" --appendonly no). The
# HTTP upstream: abide's bench uses its in-process fake (its CPU subtracted), BullMQ a Node
# server in its own process. CPU per job counts BullMQ's worker process and Redis. A third
# HTTP row, Node's fetch alone with no queue, shows what bounds BullMQ's HTTP figure.
#
# Needs node and npm (installs bullmq into benches/peers/node_modules once) and Redis on
# 127.0.0.1:6379. Log: target/bench-out/peers-<time>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
JOBS=${JOBS:-20000}
CONC=${CONC:-32}
OUT=target/bench-out
mkdir -p "$OUT"
LOG="$OUT/peers-$(date -u +%Y%m%dT%H%M%SZ).txt"

if [ ! -d benches/peers/node_modules/bullmq ]; then
    (cd benches/peers && npm install --no-audit --no-fund --silent)
fi
redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null

if [ -z "${ENGINE:-}" ]; then
    ENGINE=$(cargo bench -q -p abide-outbox --bench engine --no-run --message-format=json |
        jq -r 'select(.reason == "compiler-artifact" and .target.name == "engine"
                      and .executable != null) | .executable' | tail -1)
fi

node benches/peers/upstream.mjs >"$OUT/peers-upstream.port" &
UPSTREAM=$!
trap 'kill $UPSTREAM 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do [ -s "$OUT/peers-upstream.port" ] && break; sleep 0.1; done
PORT=$(cat "$OUT/peers-upstream.port")

abide() { # abide TRANSPORT: items/s and CPU µs per item from the bench's RESULT line
    "$ENGINE" --bench --transport "$1" --items "$JOBS" --concurrency "$CONC" |
        awk '/^RESULT/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); r[kv[1]] = kv[2] }
                         printf "%s %s\n", r["items_per_s"], r["outbox_cpu_us_per_item"] }'
}
bullmq() { # bullmq [URL]: jobs/s and CPU µs per job (worker + Redis)
    node benches/peers/bullmq.mjs --jobs "$JOBS" --concurrency "$CONC" ${1:+--post "$1"} |
        jq -r '"\(.jobs_per_sec) \(.cpu_us_per_job_node + .cpu_us_per_job_redis)"'
}

{
    echo "# peers.sh $(date -u +%FT%TZ) on $(nproc) cores; $JOBS jobs, $CONC concurrent, $ROUNDS rounds"
    echo "# engine: $ENGINE"
    printf '%-6s %-8s %-24s %10s %12s %8s\n' round what system "per s" "CPU µs/job" load
    for r in $(seq 1 "$ROUNDS"); do
        for what in scripted http; do
            read -r a_rate a_cpu < <(abide "$what")
            printf '%-6s %-8s %-24s %10s %12s %8s\n' "$r" "$what" "abide" "$a_rate" "$a_cpu" \
                "$(cut -d' ' -f1 /proc/loadavg)"
            if [ "$what" = scripted ]; then url=""; else url="http://127.0.0.1:$PORT/v1/messages"; fi
            read -r b_rate b_cpu < <(bullmq "$url")
            printf '%-6s %-8s %-24s %10s %12s %8s\n' "$r" "$what" "bullmq" "$b_rate" "$b_cpu" \
                "$(cut -d' ' -f1 /proc/loadavg)"
            if [ -n "$url" ]; then
                f_rate=$(node benches/peers/fetch_only.mjs "$url" "$JOBS" "$CONC")
                printf '%-6s %-8s %-24s %10s %12s %8s\n' "$r" "$what" "node fetch, no queue" \
                    "$f_rate" "-" "$(cut -d' ' -f1 /proc/loadavg)"
            fi
        done
    done
} | tee "$LOG"
echo "log: $LOG"
