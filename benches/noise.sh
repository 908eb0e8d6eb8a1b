#!/usr/bin/env bash
# Throttles that do not follow the pace: abide send against abide provider at 100/s that
# also answers a fixed share of requests 429 (Retry-After: 1) whatever the rate
# (`--behaviour throttle-fraction=F`). A pacer that cuts on every throttle starves; one that
# tells noise from a limit keeps about (1 - F) x 100/s.
#
#   benches/noise.sh [SEND_BIN] [PROVIDER_BIN]     # ITEMS=3000 FRACTION=0.05 BOUND=120
#
# SEND_BIN may be another build of abide (e.g. the commit before) for an interleaved
# comparison; PROVIDER_BIN needs the throttle-fraction facet. Loopback only; each run is
# killed after BOUND seconds and reports what it delivered by then.
set -euo pipefail
send_bin=${1:-target/release/abide}
prov_bin=${2:-$send_bin}
items=${ITEMS:-3000}
fraction=${FRACTION:-0.05}
bound=${BOUND:-120}
dir=$(mktemp -d)
sampler=""
trap 'kill "$prov" $sampler 2>/dev/null || true; rm -rf "$dir"' EXIT

"$prov_bin" provider --listen 127.0.0.1:0 --key-rate 100/s --key-burst 10 \
    --account-rate off --key-concurrency off --account-concurrency off \
    --behaviour "throttle-fraction=$fraction" >"$dir/prov.out" 2>"$dir/prov.err" &
prov=$!
for _ in $(seq 1 50); do grep -q listening "$dir/prov.out" 2>/dev/null && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*' "$dir/prov.out" | head -1)
printf '[[provider]]\nname = "sms"\nbase_url = "%s"\ncredentials_env = "ABIDE_SMS_TOKEN"\nconcurrency = 16\n' \
    "$url" >"$dir/p.toml"
python3 -c "
import json
for i in range($items):
    print(json.dumps({'provider': 'sms', 'path': '/v1/messages', 'body': {'to': '+1555%07d' % i, 'text': 'x'}}))
" >"$dir/in.jsonl"
# Accepted so far, every 5 s while the run lasts: the lowest 5 s rate shows a decay the
# average hides.
( while sleep 5; do curl -s "$url/_stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["accepted"])' \
    >>"$dir/timeline" 2>/dev/null || true; done ) &
sampler=$!
start=$(date +%s.%N)
ABIDE_SMS_TOKEN=demo-key timeout "$bound" "$send_bin" send --config "$dir/p.toml" \
    --db "$dir/o.db" --quiet --json "$dir/in.jsonl" >"$dir/rep.json" 2>"$dir/send.err" || true
end=$(date +%s.%N)
kill "$sampler" 2>/dev/null || true
curl -s "$url/_stats" >"$dir/stats.json"
touch "$dir/timeline"
python3 - "$dir/stats.json" "$start" "$end" "$items" "$fraction" "$dir/timeline" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
marks = [int(x) for x in open(sys.argv[6]).read().split()]
start, end, items, frac = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
el = end - start
acc = s["accepted"]
r429 = s.get("rejected_by_status", {}).get("429", 0)
fair = 100 * (1 - frac)
print(f"accepted {acc}/{items} in {el:.1f} s: {acc/el:.1f}/s = {acc/el/fair:.3f} of (1-F)x100/s; "
      f"429s {r429} ({r429/max(acc,1):.3f} per message)")
# Whole 5 s intervals before the last item (the first starts with the run, enqueue included).
steps = [(b - a) / 5 for a, b in zip([0] + marks, marks) if b < items]
if steps:
    print(f"per 5 s: {' '.join(f'{x:.0f}' for x in steps)}/s; lowest {min(steps):.0f}/s = "
          f"{min(steps)/fair:.2f} of (1-F)x100/s")
PY
