#!/usr/bin/env bash
# The Python (urllib3) and Node (fetch) examples through `abide proxy`, against
# `abide provider` with each of its quirks, asserting what the provider saw: every message
# accepted once, and the 429s it sent per message.
#
#   examples/proxy-clients.sh [path/to/abide]
set -euo pipefail
cd "$(dirname "$0")/.."
abide=${1:-target/debug/abide}
n=${PROXY_EXAMPLE_MESSAGES:-100}
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# first_line FILE: wait (at most 30 s) for a process's "listening on http://ADDR".
listening() {
    for _ in $(seq 1 300); do
        if grep -q '^listening on ' "$1" 2>/dev/null; then
            sed -n 's/^listening on //p' "$1" | head -1
            return 0
        fi
        sleep 0.1
    done
    echo "no 'listening on' in $1" >&2
    cat "$1" >&2
    return 1
}

run_quirk() { # run_quirk NAME BEHAVIOUR...
    local name=$1
    shift
    local dir="$work/$name"
    mkdir -p "$dir"
    "$abide" provider --listen 127.0.0.1:0 --key-rate 50/s --key-burst 5 "$@" \
        >"$dir/provider.out" 2>&1 &
    pids+=($!)
    local provider
    provider=$(listening "$dir/provider.out")
    printf '[[provider]]\nname = "sms"\nbase_url = "%s"\ncredentials_env = "EXAMPLE_SMS_TOKEN"\n' \
        "$provider" >"$dir/providers.toml"
    EXAMPLE_SMS_TOKEN=demo-key RUST_LOG=warn "$abide" proxy --config "$dir/providers.toml" \
        --listen 127.0.0.1:0 >"$dir/proxy.out" 2>&1 &
    pids+=($!)
    local proxy
    proxy=$(listening "$dir/proxy.out")
    python3 examples/python/send_through_proxy.py "$proxy/sms" "$n"
    node examples/node/send_through_proxy.mjs "$proxy/sms" "$n"
    python3 - "$provider" "$((2 * n))" "$name" <<'PY'
import json, sys, urllib.request
stats = json.load(urllib.request.urlopen(sys.argv[1] + "/_stats"))
want, name = int(sys.argv[2]), sys.argv[3]
throttled = sum(v for k, v in stats["rejected_by_status"].items() if k in ("429", "403"))
print(f"{name}: provider accepted {stats['accepted']} of {want}, "
      f"{throttled / want:.3f} throttles per message")
assert stats["accepted"] == want, stats
assert stats["duplicates"] == 0, stats
assert throttled / want <= 0.01, stats
PY
}

run_quirk "429-http-date" --behaviour retry-after=http-date
run_quirk "403-retry-after-0" --behaviour throttle=403 --behaviour retry-after=0
run_quirk "503-burst" --behaviour fail-503=0.1
