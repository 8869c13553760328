#!/usr/bin/env bash
# A/B of Sepia builds on one case: CPU-µs per request of each binary, in alternated runs (A, B,
# A, B, ...), and the median of the paired ratios to the first binary. Same origin, pinning and
# CPU accounting as run.sh (origin nginx and wrk on CPU 0, Sepia on CPU 1, utime+stime from
# /proc/PID/stat), without the peers; meant for changes smaller than run-to-run noise, which
# only many pairs can show. Only 127.0.0.1 is contacted.
#
#   bench/tools/ab_cpu.sh [--case miss|hit] [--reps N] [--duration S] BIN_A BIN_B [BIN ...]
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
CASE=miss REPS=10 DURATION=4
while [[ $# -gt 0 && $1 == --* ]]; do
    case $1 in
        --case) CASE=$2; shift ;;
        --reps) REPS=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[[ $# -ge 2 ]] || { sed -n 2,8p "$0" >&2; exit 2; }
[[ $CASE == miss || $CASE == hit ]] || { echo "--case is miss or hit" >&2; exit 2; }
RUN=$(mktemp -d /tmp/sepia-ab.XXXXXX)
ORIGIN_PORT=29300 PORT=29301
mkdir -p "$RUN/www" "$RUN/origin/tmp"
head -c 1024 /dev/zero | tr '\0' x > "$RUN/www/1k"
sed -e "s#@PORT@#$ORIGIN_PORT#g; s#@RUN@#$RUN#g; s#@NAME@#origin#g" \
    "$BENCH_DIR/peers/origin.nginx.conf" > "$RUN/origin/nginx.conf"
sed -e "s#@PORT@#$PORT#; s#@ORIGIN@#$ORIGIN_PORT#" "$BENCH_DIR/peers/sepia.toml" > "$RUN/sepia.toml"
taskset -c 0 nginx -p "$RUN/origin/" -c "$RUN/origin/nginx.conf" -g 'daemon off;' &
ORIGIN_PID=$!
SEPIA_PID=
cleanup() {
    [[ -n $SEPIA_PID ]] && kill -9 "$SEPIA_PID" 2> /dev/null
    kill "$ORIGIN_PID" 2> /dev/null
    wait 2> /dev/null
    rm -rf "$RUN"
}
trap cleanup EXIT

if [[ $CASE == hit ]]; then
    WRK=(http://127.0.0.1:$PORT/1k)
else
    WRK=(http://127.0.0.1:$PORT/ -s "$BENCH_DIR/tools/miss.lua" --)
fi
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# one_run BIN: prints CPU-µs per request of one run of BIN.
one_run() {
    SEPIA_LOG=warn taskset -c 1 "$1" --config "$RUN/sepia.toml" > "$RUN/sepia.log" 2>&1 &
    SEPIA_PID=$!
    for _ in $(seq 50); do
        curl -sf -o /dev/null "http://127.0.0.1:$PORT/1k" && break
        sleep 0.1
    done
    taskset -c 0 wrk -t1 -c100 -d2s "${WRK[@]}" "warm-$RANDOM$RANDOM" > /dev/null
    local t0 t1 n
    t0=$(cpu_ticks "$SEPIA_PID")
    n=$(taskset -c 0 wrk -t1 -c100 -d"${DURATION}s" "${WRK[@]}" "run-$RANDOM$RANDOM" |
        awk '/requests in/{print $1}')
    t1=$(cpu_ticks "$SEPIA_PID")
    kill -9 "$SEPIA_PID"
    wait "$SEPIA_PID" 2> /dev/null || true
    SEPIA_PID=
    # A tick is 1/100 s (CLK_TCK): 10,000 µs.
    python3 -c "print(f'{($t1 - $t0) * 10000 / $n:.1f}')"
}

declare -A RESULTS
for rep in $(seq "$REPS"); do
    for bin in "$@"; do
        us=$(one_run "$bin")
        RESULTS[$bin]+="$us "
        echo "rep $rep  $bin  $us CPU-µs/req"
    done
done
first=$1
for bin in "$@"; do
    python3 - "$bin" "${RESULTS[$first]}" "${RESULTS[$bin]}" << 'EOF'
import statistics, sys
name, base, this = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
ratios = sorted(t / b for t, b in zip(this, base))
print(f"{name}: median {statistics.median(this):.1f} CPU-µs/req; ratio to the first, per pair "
      f"{', '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}")
EOF
done
