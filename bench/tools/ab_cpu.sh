#!/usr/bin/env bash
# A/B of Sepia builds on one case: CPU-µs per request of each binary, in alternated runs (A, B,
# A, B, ...), and the median of the paired ratios to the first binary. Same origin, pinning and
# CPU accounting as run.sh (origin nginx and wrk on CPU 0, Sepia on CPU 1, utime+stime from
# /proc/PID/stat), without the peers; meant for changes smaller than run-to-run noise, which
# only many pairs can show. Only 127.0.0.1 is contacted.
#
#   bench/tools/ab_cpu.sh [--case miss|miss64k|nostore|mix|hit] [--reps N] [--duration S]
#                         [--cache-mb MB] BIN_A BIN_B [BIN ...]
# (--cache-mb: the memory cache, 1024 MiB by default as in run.sh; miss64k: every URL new,
# 64 KiB bodies, from the origin's /b/; nostore: every URL new and answered `no-store`, from
# /ns/; mix: tools/mix.lua, half new URLs and half 100 hot ones.) A BIN may also be
# `haproxy` (bench/peers/haproxy.cfg, with its cache), `relay` or `relay-batch`
# (bench/tools/relay.c without and with --batch: no parsing, the floor of a miss) or `ceiling`
# (bench/tools/ceiling.c: the floor of a hit; it answers every request the same), to put Sepia
# builds beside them in the same alternation; the ratios are to whichever comes first.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "$0")/.." && pwd)
CASE=miss REPS=10 DURATION=4 CACHE_MB=1024
while [[ $# -gt 0 && $1 == --* ]]; do
    case $1 in
        --case) CASE=$2; shift ;;
        --reps) REPS=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        --cache-mb) CACHE_MB=$2; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[[ $# -ge 2 ]] || { sed -n 2,10p "$0" >&2; exit 2; }
[[ $CASE =~ ^(miss|miss64k|nostore|mix|hit)$ ]] || { echo "--case is miss, miss64k, nostore, mix or hit" >&2; exit 2; }
for tool in nginx wrk curl taskset python3 /usr/bin/time; do
    command -v "$tool" > /dev/null || { echo "ab_cpu.sh needs $tool (bench/run.sh installs the tools it and this script use)" >&2; exit 2; }
done
RUN=$(mktemp -d /tmp/sepia-ab.XXXXXX)
# mktemp makes the directory private; nginx's worker (user nobody) must read the files, or
# every request is answered 403 and neither case measures what it says.
chmod 755 "$RUN"
ORIGIN_PORT=29300 PORT=29301
mkdir -p "$RUN/www" "$RUN/origin/tmp"
head -c 1024 /dev/zero | tr '\0' x > "$RUN/www/1k"
head -c 65536 /dev/zero | tr '\0' x > "$RUN/www/64k"
sed -e "s#@PORT@#$ORIGIN_PORT#g; s#@RUN@#$RUN#g; s#@NAME@#origin#g" \
    "$BENCH_DIR/peers/origin.nginx.conf" > "$RUN/origin/nginx.conf"
sed -e "s#@PORT@#$PORT#; s#@ORIGIN@#$ORIGIN_PORT#; s#@CACHE_MB@#$CACHE_MB#" \
    "$BENCH_DIR/peers/sepia.toml" > "$RUN/sepia.toml"
mkdir -p "$RUN/haproxy"
sed -e "s#@RUN@#$RUN#g; s#@PORT@#$PORT#g; s#@ORIGIN@#$ORIGIN_PORT#g; s#@CACHE_MB@#$CACHE_MB#g" \
    "$BENCH_DIR/peers/haproxy.cfg" > "$RUN/haproxy/haproxy.cfg"
[[ " $* " =~ \ relay(-batch)?\  ]] && cc -O2 -o "$RUN/relay" "$BENCH_DIR/tools/relay.c"
[[ " $* " == *" ceiling "* ]] && cc -O2 -o "$RUN/ceiling" "$BENCH_DIR/tools/ceiling.c"
taskset -c 0 nginx -p "$RUN/origin/" -c "$RUN/origin/nginx.conf" -g 'daemon off;' &
ORIGIN_PID=$!
SEPIA_PID=
cleanup() {
    set +e
    [[ -n $SEPIA_PID ]] && kill -9 "$SEPIA_PID" 2> /dev/null
    kill "$ORIGIN_PID" 2> /dev/null
    wait 2> /dev/null
    rm -rf "$RUN"
}
trap cleanup EXIT

if [[ $CASE == hit ]]; then
    WRK=(http://127.0.0.1:$PORT/1k)
elif [[ $CASE == mix ]]; then
    WRK=(http://127.0.0.1:$PORT/ -s "$BENCH_DIR/tools/mix.lua" --)
else
    WRK=(http://127.0.0.1:$PORT/ -s "$BENCH_DIR/tools/miss.lua" --)
fi
# After the run's URL prefix: miss.lua's base path (the origin's /b/ answers 64 KiB).
WRK_TAIL=()
[[ $CASE == miss64k ]] && WRK_TAIL=(/b/)
[[ $CASE == nostore ]] && WRK_TAIL=(/ns/)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Voluntary context switches of a process, all its threads (its sleeps: each one is a wake-up
# someone paid for).
sleeps() { cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt_switches/{n += $2} END{print n}'; }

# The object must be a stored 200: the second request of the same URL is a hit.
check_sepia() {
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/u/check-$RANDOM$RANDOM" -D "$RUN/check.head" ||
        { echo "origin or Sepia does not answer 200" >&2; exit 1; }
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/1k" -D "$RUN/check.head" ||
        { echo "Sepia does not answer /1k" >&2; exit 1; }
    grep -qi '^cache-status:.*hit' "$RUN/check.head" ||
        { echo "a repeated request is not a hit:" >&2; cat "$RUN/check.head" >&2; exit 1; }
}

# one_run BIN: writes to $RUN/result the CPU-µs per request of one run of BIN, then the sleeps
# per request of wrk, of the origin's worker and of Sepia. Runs in the script's own shell, so
# that a failed check (set -e) leaves SEPIA_PID for cleanup to kill.
one_run() {
    case $1 in
        haproxy) taskset -c 1 haproxy -db -f "$RUN/haproxy/haproxy.cfg" > "$RUN/sepia.log" 2>&1 & ;;
        relay) taskset -c 1 "$RUN/relay" "$PORT" "$ORIGIN_PORT" > "$RUN/sepia.log" 2>&1 & ;;
        relay-batch) taskset -c 1 "$RUN/relay" "$PORT" "$ORIGIN_PORT" --batch > "$RUN/sepia.log" 2>&1 & ;;
        ceiling) taskset -c 1 "$RUN/ceiling" "$PORT" > "$RUN/sepia.log" 2>&1 & ;;
        *) SEPIA_LOG=warn taskset -c 1 "$1" --config "$RUN/sepia.toml" > "$RUN/sepia.log" 2>&1 & ;;
    esac
    SEPIA_PID=$!
    for _ in $(seq 50); do
        curl -sf -o /dev/null "http://127.0.0.1:$PORT/1k" && break
        sleep 0.1
    done
    [[ $1 =~ ^(haproxy|relay|relay-batch|ceiling)$ ]] || check_sepia
    taskset -c 0 wrk -t1 -c100 -d2s "${WRK[@]}" "warm-$RANDOM$RANDOM" "${WRK_TAIL[@]}" > /dev/null
    local t0 t1 n o0 o1 s0 s1 worker w
    worker=$(pgrep -P "$ORIGIN_PID" | head -1) ||
        { echo "the origin nginx has no worker process" >&2; exit 1; }
    t0=$(cpu_ticks "$SEPIA_PID") o0=$(sleeps "$worker") s0=$(sleeps "$SEPIA_PID")
    n=$(taskset -c 0 /usr/bin/time -f 'wrk-sleeps %w' -o "$RUN/wrk.time" \
        wrk -t1 -c100 -d"${DURATION}s" "${WRK[@]}" "run-$RANDOM$RANDOM" "${WRK_TAIL[@]}" |
        awk '/requests in/{print $1}')
    t1=$(cpu_ticks "$SEPIA_PID") o1=$(sleeps "$worker") s1=$(sleeps "$SEPIA_PID")
    w=$(awk '/wrk-sleeps/{print $2}' "$RUN/wrk.time")
    kill -9 "$SEPIA_PID"
    wait "$SEPIA_PID" 2> /dev/null || true
    SEPIA_PID=
    # A tick is 1/100 s (CLK_TCK): 10,000 µs.
    python3 -c "print(f'{($t1 - $t0) * 10000 / $n:.1f} {$w / $n:.2f} {($o1 - $o0) / $n:.2f} {($s1 - $s0) / $n:.2f}')" \
        > "$RUN/result"
}

BINS=("$@")
RESULTS=() # per binary, by its position: its CPU-µs per request, one per rep
for rep in $(seq "$REPS"); do
    for i in "${!BINS[@]}"; do
        one_run "${BINS[i]}"
        read -r us wrk_sleeps origin_sleeps sepia_sleeps < "$RUN/result"
        RESULTS[i]+="$us "
        echo "rep $rep  ${BINS[i]}  $us CPU-µs/req  sleeps/req: wrk $wrk_sleeps origin $origin_sleeps sepia $sepia_sleeps"
    done
done
for i in "${!BINS[@]}"; do
    python3 - "${BINS[i]}" "${RESULTS[0]}" "${RESULTS[i]}" << 'EOF'
import statistics, sys
name, base, this = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
ratios = sorted(t / b for t, b in zip(this, base))
print(f"{name}: median {statistics.median(this):.1f} CPU-µs/req; ratio to the first, per pair "
      f"{', '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}")
EOF
done
