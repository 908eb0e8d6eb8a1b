#!/usr/bin/env bash
# What `abide proxy` adds when nothing throttles, beside nginx `proxy_pass` on the same
# machine: wrk (Debian's `wrk`) against one upstream that answers at once (nginx
# `return 200`, 3 bytes), directly, through nginx `proxy_pass` (keep-alive upstream pool)
# and through `abide proxy` (rate_hint at the pacer's maximum, concurrency 1024: nothing in
# the session holds a request). The three paths are interleaved, RUNS times, each at
# LOW connections (latency: what one caller waits) and HIGH connections (throughput).
# Loopback only; each wrk run lasts DURATION.
#
#   benches/proxy_overhead.sh                      # RUNS=3 DURATION=10s LOW=1 HIGH=64
#   RUNS=1 DURATION=5s benches/proxy_overhead.sh   # a quick pass
#   ABIDE=target/debug/abide benches/proxy_overhead.sh
#   PERF=1 benches/proxy_overhead.sh               # also `perf record` the proxy at HIGH
#   BASE=/tmp/abide-base benches/proxy_overhead.sh # and a proxy of another build, interleaved
#
# Needs: nginx and wrk (apt-get install -y nginx wrk); perf (linux-perf) for PERF=1.
# Per run: wrk's p50 and p99 latency, requests/s, errors (non-2xx, socket), and for the
# proxy its CPU time per request (user + system, from /proc): on a machine shared with a
# load generator, an upstream and other work, what the proxy would serve on N free cores
# is about N / that.
# Output: one line per run on stdout and in target/bench-out/proxy-overhead-<time>.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
DURATION=${DURATION:-10s}
LOW=${LOW:-1}
HIGH=${HIGH:-64}
THREADS=${THREADS:-1}
PATHS=${PATHS:-"direct nginx abide"}
OUT=$PWD/target/bench-out
mkdir -p "$OUT"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
LOG="$OUT/proxy-overhead-$STAMP.txt"
work=$(mktemp -d)

for tool in nginx wrk; do
    command -v "$tool" >/dev/null || { echo "needs $tool: apt-get install -y nginx wrk" >&2; exit 2; }
done
if [ -z "${ABIDE:-}" ]; then
    cargo build --release -q -p abide
    ABIDE=target/release/abide
fi

pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
    sleep 0.2
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
up_port=$(free_port)
nginx_port=$(free_port)

# One nginx: the upstream (port up_port) and the reference proxy (port nginx_port), two
# worker processes as the proxy has two runtime threads.
cat >"$work/nginx.conf" <<EOF
worker_processes 2;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
daemon on;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $work/body;
    proxy_temp_path $work/proxy;
    fastcgi_temp_path $work/fcgi;
    uwsgi_temp_path $work/uwsgi;
    scgi_temp_path $work/scgi;
    keepalive_requests 1000000;
    upstream up { server 127.0.0.1:$up_port; keepalive 256; }
    server {
        listen 127.0.0.1:$up_port;
        location / { return 200 "ok\n"; }
    }
    server {
        listen 127.0.0.1:$nginx_port;
        location /up/ {
            proxy_pass http://up/;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
nginx -c "$work/nginx.conf"

printf '[[provider]]\nname = "up"\nbase_url = "http://127.0.0.1:%s/"\nrate_hint = 1000000\nconcurrency = 1024\n' \
    "$up_port" >"$work/providers.toml"
start_proxy() { # start_proxy BINARY NAME: its pid in ${NAME}_pid, its URL in ${NAME}_url
    RUST_LOG=warn "$1" proxy --config "$work/providers.toml" --listen 127.0.0.1:0 \
        >"$work/$2.out" 2>&1 &
    local pid=$!
    pids+=("$pid")
    for _ in $(seq 1 300); do
        grep -q '^listening on ' "$work/$2.out" 2>/dev/null && break
        sleep 0.1
    done
    local url
    url=$(sed -n 's/^listening on //p' "$work/$2.out" | head -1)
    [ -n "$url" ] || { cat "$work/$2.out" >&2; exit 1; }
    printf -v "${2}_pid" '%s' "$pid"
    printf -v "${2}_url" '%s' "$url"
}
start_proxy "$ABIDE" abide
proxy_pid=$abide_pid
if [ -n "${BASE:-}" ]; then # BASE=path/to/abide: the same proxy from another build, interleaved
    start_proxy "$BASE" base
    PATHS="$PATHS base"
fi

url_of() {
    case $1 in
        direct) echo "http://127.0.0.1:$up_port/v1/ping" ;;
        nginx) echo "http://127.0.0.1:$nginx_port/up/v1/ping" ;;
        abide) echo "$abide_url/up/v1/ping" ;;
        base) echo "$base_url/up/v1/ping" ;;
    esac
}
for p in $PATHS; do # each path answers 200 before anything is measured
    code=$(curl -s -o /dev/null -w '%{http_code}' "$(url_of "$p")")
    [ "$code" = 200 ] || { echo "$p answered $code" >&2; exit 1; }
done
# Warm-up: connections, the proxy's pool, the pacer past any slow start.
for p in $PATHS; do wrk -t1 -c"$HIGH" -d2s "$(url_of "$p")" >/dev/null; done

# The proxy's user + system time so far, in clock ticks.
cpu_ticks() { # cpu_ticks PATH
    case $1 in
        abide) awk '{print $14 + $15}' "/proc/$abide_pid/stat" ;;
        base) awk '{print $14 + $15}' "/proc/$base_pid/stat" ;;
        *) echo 0 ;;
    esac
}

# One wrk run: "p50_us p99_us rps errors".
measure() {
    wrk -t"$THREADS" -c"$2" -d"$DURATION" --latency "$1" >"$work/wrk.txt"
    python3 - "$work/wrk.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
def us(v):
    n, u = re.match(r"([\d.]+)(us|ms|s)", v).groups()
    return float(n) * {"us": 1, "ms": 1e3, "s": 1e6}[u]
p = dict(re.findall(r"^\s+(50|99)%\s+(\S+)", t, re.M))
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
m = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
e = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", t)
errors = (int(m.group(1)) if m else 0) + (sum(map(int, e.groups())) if e else 0)
print(f"{us(p['50']):.0f} {us(p['99']):.0f} {rps:.0f} {errors}")
PY
}

echo "# $(date -u +%FT%TZ) RUNS=$RUNS DURATION=$DURATION LOW=$LOW HIGH=$HIGH wrk -t$THREADS $(nproc) cores load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$LOG"
for run in $(seq 1 "$RUNS"); do
    for conns in "$LOW" "$HIGH"; do
        for p in $PATHS; do
            perf_pid=""
            if [ -n "${PERF:-}" ] && [ "$p" = abide ] && [ "$conns" = "$HIGH" ] && [ "$run" = 1 ]; then
                perf record -F 999 -g -p "$proxy_pid" -o "$OUT/proxy-overhead-$STAMP.perf" \
                    -- sleep "${DURATION%s}" >/dev/null 2>&1 &
                perf_pid=$!
            fi
            cpu0=$(cpu_ticks "$p")
            read -r p50 p99 rps errors < <(measure "$(url_of "$p")" "$conns")
            cpu1=$(cpu_ticks "$p")
            [ -n "$perf_pid" ] && { wait "$perf_pid" 2>/dev/null || true; }
            # The proxy's own CPU time per request it served (its user + system time over
            # the run): what it costs, whatever share of the cores it got.
            cpu=-
            if [ "$p" = abide ] || [ "$p" = base ]; then
                cpu=$(python3 -c "print(round(($cpu1 - $cpu0) / $(getconf CLK_TCK) * 1e6 / ($rps * ${DURATION%s})))")
            fi
            printf 'run=%s conns=%-3s %-6s p50=%6sus p99=%6sus rps=%7s errors=%s proxy_cpu_per_req=%sus load=%s\n' \
                "$run" "$conns" "$p" "$p50" "$p99" "$rps" "$errors" "$cpu" \
                "$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$LOG"
        done
    done
done
if [ -n "${PERF:-}" ]; then
    perf report -i "$OUT/proxy-overhead-$STAMP.perf" --no-children --sort symbol \
        --stdio 2>/dev/null | grep -v '^#' | grep '%' | head -40 >"$OUT/proxy-overhead-$STAMP.perf.txt" || true
    echo "# perf: $OUT/proxy-overhead-$STAMP.perf.txt" | tee -a "$LOG"
fi
