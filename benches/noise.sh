#!/usr/bin/env bash
# Throttles that do not follow the pace: abide send against abide provider at 100/s that
# also refuses a share of requests whatever the rate (`--behaviour throttle-fraction=`):
# over HTTP 429 with Retry-After: 1, over SMPP submit_sm answered 0x58 (ESME_RTHROTTLED).
# A pacer that cuts on every throttle starves; one that tells noise from a limit keeps
# about (1 - F) x 100/s.
#
#   benches/noise.sh [SEND_BIN] [PROVIDER_BIN]
#     ITEMS=3000 FRACTION=0.05 BOUND=120 PROTO=http|smpp SPREAD=random|even SEED=1
#
# SEND_BIN may be another build of abide (e.g. the commit before) for an interleaved
# comparison; PROVIDER_BIN needs the throttle-fraction facet (random, and on the SMSC, since
# ddfa9dc). 16 senders (HTTP concurrency, SMPP window), no rate_hint. Loopback only; each
# run is killed after BOUND seconds and reports what it delivered by then.
set -euo pipefail
send_bin=${1:-target/release/abide}
prov_bin=${2:-$send_bin}
items=${ITEMS:-3000}
fraction=${FRACTION:-0.05}
bound=${BOUND:-120}
proto=${PROTO:-http}
spread=${SPREAD:-random}
seed=${SEED:-1}
dir=$(mktemp -d)
sampler=""
trap 'kill "$prov" $sampler 2>/dev/null || true; rm -rf "$dir"' EXIT

case $spread in
    random) facet="throttle-fraction=random:$fraction:$seed" ;;
    even) facet="throttle-fraction=$fraction" ;;
    *) echo "SPREAD is random or even" >&2; exit 2 ;;
esac
smpp_args=()
[ "$proto" = smpp ] && smpp_args=(--smpp 127.0.0.1:0 --receipts never)
"$prov_bin" provider --listen 127.0.0.1:0 "${smpp_args[@]}" --key-rate 100/s --key-burst 10 \
    --account-rate off --key-concurrency off --account-concurrency off \
    --behaviour "$facet" >"$dir/prov.out" 2>"$dir/prov.err" &
prov=$!
for _ in $(seq 1 50); do
    n=$(grep -c listening "$dir/prov.out" 2>/dev/null || true)
    [ "${n:-0}" -ge "$([ "$proto" = smpp ] && echo 2 || echo 1)" ] && break
    sleep 0.1
done
url=$(grep -o 'http://[0-9.:]*' "$dir/prov.out" | head -1)
case $proto in
    http)
        printf '[[provider]]\nname = "sms"\nbase_url = "%s"\ncredentials_env = "ABIDE_SMS_TOKEN"\nconcurrency = 16\n' \
            "$url" >"$dir/p.toml"
        path=/v1/messages
        count='s["accepted"]'
        refused='s.get("rejected_by_status", {}).get("429", 0)'
        ;;
    smpp)
        smsc=$(grep -o 'smpp://[0-9.:]*' "$dir/prov.out" | head -1)
        printf '[[provider]]\nname = "sms"\ntransport = "smpp"\naddress = "%s"\nsystem_id = "demo"\npassword_env = "ABIDE_SMS_TOKEN"\nwindow = 16\nsource_addr = "ACME"\n' \
            "${smsc#smpp://}" >"$dir/p.toml"
        path=/
        count='s["smpp"]["accepted"]'
        refused='s["smpp"]["throttled"]'
        ;;
    *) echo "PROTO is http or smpp" >&2; exit 2 ;;
esac
token=$([ "$proto" = smpp ] && echo demo-pw || echo demo-key)
python3 -c "
import json
for i in range($items):
    print(json.dumps({'provider': 'sms', 'path': '$path', 'body': {'to': '+1555%07d' % i, 'text': 'x'}}))
" >"$dir/in.jsonl"
# Accepted so far, every 5 s while the run lasts: the lowest 5 s rate shows a decay the
# average hides.
( while sleep 5; do curl -s "$url/_stats" | python3 -c "import json,sys; s=json.load(sys.stdin); print($count)" \
    >>"$dir/timeline" 2>/dev/null || true; done ) &
sampler=$!
start=$(date +%s.%N)
ABIDE_SMS_TOKEN=$token timeout "$bound" "$send_bin" send --config "$dir/p.toml" \
    --db "$dir/o.db" --quiet --json "$dir/in.jsonl" >"$dir/rep.json" 2>"$dir/send.err" || true
end=$(date +%s.%N)
kill "$sampler" 2>/dev/null || true
curl -s "$url/_stats" >"$dir/stats.json"
touch "$dir/timeline"
python3 - "$dir/stats.json" "$start" "$end" "$items" "$fraction" "$dir/timeline" "$proto" <<PY
import json, sys
s = json.load(open(sys.argv[1]))
marks = [int(x) for x in open(sys.argv[6]).read().split()]
start, end, items, frac = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
el = end - start
acc = $count
r429 = $refused
fair = 100 * (1 - frac)
print(f"{sys.argv[7]}: accepted {acc}/{items} in {el:.1f} s: {acc/el:.1f}/s = {acc/el/fair:.3f} of (1-F)x100/s; "
      f"throttled {r429} ({r429/max(acc,1):.3f} per message)")
# Whole 5 s intervals before the last item (the first starts with the run, enqueue included).
steps = [(b - a) / 5 for a, b in zip([0] + marks, marks) if b < items]
if steps:
    print(f"per 5 s: {' '.join(f'{x:.0f}' for x in steps)}/s; lowest {min(steps):.0f}/s = "
          f"{min(steps)/fair:.2f} of (1-F)x100/s")
PY
