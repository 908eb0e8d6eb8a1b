#!/usr/bin/env bash
# The outbox engine bench (crates/abide-outbox/benches/engine.rs) for this checkout against
# an older commit REV, run interleaved (REV, checkout, REV, checkout, ...) so both see the
# same machine load, with the ratio pair by pair: a regression is visible as a ratio below
# 1 in every pair, not a difference called noise.
#
#   benches/engine_vs.sh REV                                   # HTTP loopback, 20,000 items
#   benches/engine_vs.sh REV --transport scripted --items 100000
#   PAIRS=5 benches/engine_vs.sh d3277e7 --transport scripted --items 50000
#   AGAINST=main benches/engine_vs.sh d3277e7      # two commits, neither the checkout
#
# Everything after REV is passed to the bench binary. REV is built in its own temporary
# worktree under /work/wt (removed afterwards) with a target directory of its own per
# commit, target/engine-vs/target-<commit> (a full build the first time): in a shared one,
# cargo took the workspace crates built there from the other tree for fresh (its dep-info
# paths are relative to the workspace root) and both columns were one build. Each binary is copied to target/engine-vs/<commit>/ and reused
# there while the commit is unchanged (a dirty checkout is always rebuilt, from its files
# as they are while cargo compiles: do not edit them meanwhile); two commits that give the
# same binary are refused. Set WT_ROOT to put the worktrees elsewhere.
#
# Output per run: items/s end to end, CPU µs per delivered item (whole process and the
# outbox without the in-process provider), the load average; then per pair the ratio
# checkout ÷ REV of items/s (above 1: the checkout is faster) and of CPU per item (below 1:
# the checkout is cheaper). Log: target/bench-out/engine-vs-<time>.txt.
set -euo pipefail

if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
REV_ARG=$1
shift
cd "$(dirname "$0")/.."
ROOT=$PWD
PAIRS=${PAIRS:-3}
WT_ROOT=${WT_ROOT:-/work/wt}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
OUT=$TARGET/bench-out
mkdir -p "$OUT" "$TARGET/engine-vs"
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
LOG="$OUT/engine-vs-$STAMP.txt"

REV=$(git rev-parse --verify "$REV_ARG^{commit}")
HEAD_SHA=$(git rev-parse HEAD)
DIRTY=""
git diff --quiet HEAD -- && git diff --cached --quiet HEAD -- || DIRTY=1

# Build the engine bench of the tree at $1 (into $TARGET for the checkout, into a target
# directory of its own for another tree); print the executable's path.
build_in() {
    local dir=$TARGET
    [ "$1" = "$ROOT" ] || dir=$TARGET/engine-vs/target-$2
    (cd "$1" && CARGO_TARGET_DIR=$dir cargo bench -q -p abide-outbox --bench engine \
        --no-run --message-format=json) |
        jq -r 'select(.reason == "compiler-artifact" and .target.name == "engine"
                      and .executable != null) | .executable' | tail -1
}

WT=""
cleanup() {
    if [ -n "$WT" ] && [ -d "$WT" ]; then
        git -C "$ROOT" worktree remove --force "$WT" || true
    fi
}
trap cleanup EXIT

# The binary of commit $1 (built from worktree $2, which the caller provides).
binary_for() {
    local sha=$1 tree=$2 dest=$TARGET/engine-vs/$1/engine exe
    if [ -x "$dest" ] && [ "$tree" != "$ROOT" -o -z "$DIRTY" ]; then
        echo "$dest"
        return
    fi
    echo "building the engine bench of ${sha:0:9} (release)..." >&2
    exe=$(build_in "$tree" "${sha:0:9}")
    [ -n "$exe" ] || { echo "no engine bench binary for $sha" >&2; exit 1; }
    mkdir -p "$(dirname "$dest")"
    cp "$exe" "$dest.tmp" && mv "$dest.tmp" "$dest"
    echo "$dest"
}

# The cached binary of commit $1, built in its own temporary worktree if missing.
binary_of_rev() {
    local sha=$1
    if [ -x "$TARGET/engine-vs/$sha/engine" ]; then
        echo "$TARGET/engine-vs/$sha/engine"
        return
    fi
    WT=$WT_ROOT/engine-vs-${sha:0:9}-$$
    git worktree add -q --detach "$WT" "$sha" >&2
    binary_for "$sha" "$WT"
    git worktree remove --force "$WT" >&2
    WT=""
}

B=$(binary_of_rev "$REV")
if [ -n "${AGAINST:-}" ]; then
    # Two commits, neither the checkout: AGAINST takes the checkout's place.
    HEAD_SHA=$(git rev-parse --verify "$AGAINST^{commit}")
    DIRTY=""
    A=$(binary_of_rev "$HEAD_SHA")
elif [ -n "$DIRTY" ]; then
    A=$(binary_for "dirty-$HEAD_SHA" "$ROOT")
else
    A=$(binary_for "$HEAD_SHA" "$ROOT")
fi

if cmp -s "$A" "$B"; then
    echo "the two builds are one binary ($A, $B): nothing to compare" >&2
    exit 1
fi

label_a="${AGAINST:+rev }${AGAINST:-checkout} ${HEAD_SHA:0:9}${DIRTY:+ (dirty)}"
label_b="rev ${REV:0:9}"
{
    echo "# $(date -u '+%F %T UTC') $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1))"
    echo "# rev = $label_b (run first in each pair), checkout = $label_a; bench args: --bench $*"
    echo "# pair build items_per_s cpu_us_per_item outbox_cpu_us_per_item load_avg_1m"
} | tee "$LOG"

# One run of binary $2; prints "items cpu outbox" from its RESULT line.
run_one() {
    local line
    line=$("$2" --bench "${@:3}" | grep '^RESULT ') || { echo "run failed: $2" >&2; exit 1; }
    local items cpu outbox
    items=$(sed -n 's/.* items_per_s=\([0-9.]*\).*/\1/p' <<<"$line")
    cpu=$(sed -n 's/.* cpu_us_per_item=\([0-9.]*\).*/\1/p' <<<"$line")
    outbox=$(sed -n 's/.* outbox_cpu_us_per_item=\([0-9.]*\).*/\1/p' <<<"$line")
    echo "$items $cpu $outbox"
}

RATIOS=()
for pair in $(seq "$PAIRS"); do
    read -r bi bc bo < <(run_one "$pair" "$B" "$@")
    echo "$pair rev      $bi $bc $bo $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$LOG"
    read -r ai ac ao < <(run_one "$pair" "$A" "$@")
    echo "$pair checkout $ai $ac $ao $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$LOG"
    r=$(python3 -c "print(f'{$ai / $bi:.3f} {$ac / $bc:.3f}')")
    RATIOS+=("$r")
    echo "$pair ratio checkout/rev: items/s ${r% *}, CPU per item ${r#* }" | tee -a "$LOG"
done
echo "# ratios items/s (CPU per item), pair by pair: $(printf '%s; ' "${RATIOS[@]}" | sed 's/ \([0-9.]*\);/ (\1);/g')" | tee -a "$LOG"
echo "wrote $LOG" >&2
