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
BIN=$1 BUDGET=${2:-64MiB} DURATION=${3:-8} SIZE=${SIZE:-1024}
for tool in nginx wrk curl taskset; do
    command -v "$tool" > /dev/null ||
        { echo "budget_rss.sh needs $tool (bench/run.sh installs it)" >&2; exit 2; }
done
ORIGIN_PORT=29310 PORT=29311
RUN=$(mktemp -d /tmp/sepia-budget.XXXXXX)
chmod 755 "$RUN" # nginx's worker (user nobody) must read the files
mkdir -p "$RUN/www" "$RUN/origin/tmp"
# The origin answers every /u/<anything> with the file "1k": here SIZE bytes.
head -c "$SIZE" /dev/zero | tr '\0' x > "$RUN/www/1k"
sed -e "s#@PORT@#$ORIGIN_PORT#g; s#@RUN@#$RUN#g; s#@NAME@#origin#g" \
    "$BENCH_DIR/peers/origin.nginx.conf" > "$RUN/origin/nginx.conf"
sed -e "s#@PORT@#$PORT#; s#@ORIGIN@#$ORIGIN_PORT#; s#^memory = .*#memory = \"$BUDGET\"#" \
    "$BENCH_DIR/peers/sepia.toml" > "$RUN/sepia.toml"
grep -q "^memory = \"$BUDGET\"" "$RUN/sepia.toml" || { echo "budget not set" >&2; exit 1; }

taskset -c 0 nginx -p "$RUN/origin/" -c "$RUN/origin/nginx.conf" -g 'daemon off;' &
ORIGIN_PID=$!
SEPIA_LOG=warn taskset -c 1 "$BIN" --config "$RUN/sepia.toml" > "$RUN/sepia.log" 2>&1 &
SEPIA_PID=$!
cleanup() {
    set +e
    kill -9 "$SEPIA_PID" 2> /dev/null
    kill "$ORIGIN_PID" 2> /dev/null
    wait 2> /dev/null
    rm -rf "$RUN"
}
trap cleanup EXIT

for _ in $(seq 50); do
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/1k" && break
    sleep 0.1
done
curl -sf -o /dev/null "http://127.0.0.1:$PORT/u/check-$RANDOM" ||
    { echo "Sepia or the origin does not answer 200:" >&2; cat "$RUN/sepia.log" >&2; exit 1; }
rss_kib() { awk '/^VmRSS/{print $2}' "/proc/$SEPIA_PID/status"; }
r0=$(rss_kib)
echo "budget $BUDGET, bodies of $SIZE B"
for round in 1 2 3; do
    n=$(taskset -c 0 wrk -t1 -c50 -d"${DURATION}s" "http://127.0.0.1:$PORT/" \
        -s "$BENCH_DIR/tools/miss.lua" -- "budget-$round-$RANDOM$RANDOM" |
        awk '/requests in/{print $1}')
    sleep 2 # jemalloc's purging thread returns freed pages within 1 s
    echo "round $round: $n requests, RSS growth $(($(rss_kib) - r0)) KiB"
done
