#!/usr/bin/env bash
# Does `cache.memory` bound the memory the cache really takes? Starts the benchmark origin and
# one Sepia with the given budget, fills it past eviction with unique URLs (three rounds of
# `wrk -c50` with miss.lua), and prints the process's RSS growth over the primed process after
# each round. Compare the last figure with the budget. Only 127.0.0.1 is contacted.
#
#   [SIZE=bytes] bench/tools/budget_rss.sh BIN [BUDGET] [SECONDS]
#   BUDGET: a cache.memory value (default 64MiB); SIZE: the body of every response (default 1024)
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
[[ $# -ge 1 ]] || { sed -n 2,8p "$0" >&2; exit 2; }
BIN=$(realpath "$1") BUDGET=${2:-64MiB} DURATION=${3:-8} SIZE=${SIZE:-1024}
for tool in nginx wrk curl taskset python3; do
    command -v "$tool" > /dev/null ||
        { echo "budget_rss.sh needs $tool (bench/run.sh installs it)" >&2; exit 2; }
done
RUN=$(mktemp -d /tmp/sepia-budget.XXXXXX)
source "$BENCH_DIR/lib/common.sh"
source "$BENCH_DIR/lib/targets.sh"
CLEANUP_PATHS+=("$RUN")
trap cleanup EXIT
ORIGIN_PORT=29310 PORT=29311

chmod 755 "$RUN" # nginx's worker (user nobody) must read the files
start_origin
# The origin answers every /u/<anything> with the file "1k": here SIZE bytes.
head -c "$SIZE" /dev/zero | tr '\0' x > "$RUN/www/1k"
render "$BENCH_DIR/peers/sepia.toml" "$RUN/sepia.toml" "$PORT"
sed -i "s#^memory = .*#memory = \"$BUDGET\"#" "$RUN/sepia.toml"
grep -q "^memory = \"$BUDGET\"" "$RUN/sepia.toml" || { echo "budget not set" >&2; exit 1; }
launch "$TARGET_CPU" "$RUN/sepia.log" env SEPIA_LOG=warn "$BIN" --config "$RUN/sepia.toml"
SEPIA_PID=$LAUNCHED_PID
wait_ready "$SEPIA_PID" "$PORT" /1k 10 && [[ $(http_code "$PORT" "/u/check-$RANDOM") == 200 ]] ||
    { echo "Sepia or the origin does not answer 200:" >&2; cat "$RUN/sepia.log" >&2; exit 1; }

rss_kib() { awk '/^VmRSS/{print $2}' "/proc/$SEPIA_PID/status"; }
r0=$(rss_kib)
echo "budget $BUDGET, bodies of $SIZE B"
for round in 1 2 3; do
    n=$(taskset -c "$LOAD_CPU" wrk -t1 -c50 -d"${DURATION}s" "http://127.0.0.1:$PORT/" \
        -s "$TOOLS/miss.lua" -- "budget-$round-$RANDOM$RANDOM" | awk '/requests in/{print $1}')
    sleep 2 # jemalloc's purging thread returns freed pages within 1 s
    echo "round $round: $n requests, RSS growth $(($(rss_kib) - r0)) KiB"
done
