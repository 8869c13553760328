#!/usr/bin/env bash
# What one multiplexed HTTP/2 hit over TLS costs Sepia (issue 20): syscalls per request
# (strace -c -f on every thread while h2load runs) and instructions per request (callgrind: a
# run with h2load minus a baseline run with the same connections' handshakes and no load
# beyond the priming requests). Prints both; no file is written outside the run directory.
#
#   bench/h2count.sh --sepia-bin PATH [--n REQUESTS] [--cg-n REQUESTS] [--c CLIENTS]
#                    [--m STREAMS] [--port-base P] [--no-callgrind]
set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RUN=${BENCH_RUN:-$BENCH_DIR/run}/h2count
PORT_BASE=28700
N=64000 CG_N=32000 C=100 M=32 CALLGRIND=1
SEPIA_BIN=""

source "$BENCH_DIR/lib/common.sh"
source "$BENCH_DIR/lib/targets.sh"

while (($#)); do
    case $1 in
        --sepia-bin) SEPIA_BIN=$(realpath "$2"); shift ;;
        --n) N=$2; shift ;;
        --cg-n) CG_N=$2; shift ;;
        --c) C=$2; shift ;;
        --m) M=$2; shift ;;
        --port-base) PORT_BASE=$2; shift ;;
        --no-callgrind) CALLGRIND=0 ;;
        *) sed -n '2,8p' "$0" >&2; exit 2 ;;
    esac
    shift
done
[[ -x $SEPIA_BIN ]] || { echo "h2count.sh: --sepia-bin PATH required" >&2; exit 2; }

rm -rf "$RUN"
mkdir -p "$RUN/tls" "$RUN/sepia"
: > "$RUN/meta.tsv"
trap cleanup EXIT
trap 'exit 130' INT TERM
raise_fd_limit
ORIGIN_PORT=$PORT_BASE
PORT=$((PORT_BASE + 1))
PLAIN=$((PORT_BASE + 2))
URL="https://127.0.0.1:$PORT/1k"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost \
    -keyout "$RUN/tls/key.pem" -out "$RUN/tls/cert.pem" 2> /dev/null
render "$BENCH_DIR/peers/tls/sepia.toml" "$RUN/sepia/sepia.toml" "$PORT" "$PLAIN"
start_origin || exit 1

# start_sepia [WRAPPER...]: Sepia pinned to CPU 1 (under WRAPPER), primed with two GETs.
start_sepia() {
    launch "$TARGET_CPU" "$RUN/sepia/stderr.log" env SEPIA_LOG=warn "$@" "$SEPIA_BIN" \
        --config "$RUN/sepia/sepia.toml"
    SEPIA_PID=$LAUNCHED_PID
    wait_listen "$SEPIA_PID" "$PORT" 120 || { echo "sepia did not listen" >&2; exit 1; }
    curl -sk -o /dev/null "$URL"
    curl -sk -o /dev/null "$URL"
}
load() { taskset -c "$LOAD_CPU" h2load -c "$C" -m "$M" -t1 -n "$1" "$URL"; }

start_sepia
load 2000 > /dev/null
strace -c -f -p "$SEPIA_PID" -o "$RUN/strace.txt" 2> "$RUN/strace.err" &
SPID=$!
STARTED+=("$SPID")
sleep 1
load "$N" > "$RUN/load.strace.txt" 2>&1
kill -INT "$SPID"
wait "$SPID"
grep -q "succeeded, 0 failed" "$RUN/load.strace.txt" || echo "h2count.sh: failed requests" >&2
echo "syscalls per request (h2load -c $C -m $M -n $N):"
python3 - "$RUN/strace.txt" "$N" << 'PY'
import sys
n = int(sys.argv[2])
total = 0
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 5 and f[0][0].isdigit() and f[-1] not in ("total",):
        calls = int(f[3])
        total += calls
        if calls / n >= 0.005:
            print(f"  {f[-1]:<16} {calls / n:.3f}")
print(f"  {'all':<16} {total / n:.3f}")
PY
stop_tree "$SEPIA_PID"

((CALLGRIND)) || exit 0
cg_run() {
    local name=$1; shift
    start_sepia valgrind --tool=callgrind --callgrind-out-file="$RUN/cg.$name.out"
    (($#)) && "$@" > "$RUN/load.cg.$name.txt" 2>&1
    stop_tree "$SEPIA_PID" 60
}
cg_run base taskset -c "$LOAD_CPU" h2load -c "$C" -m 1 -t1 -n "$C" "$URL"
cg_run h2 load "$CG_N"
grep -q "succeeded, 0 failed" "$RUN/load.cg.h2.txt" || echo "h2count.sh: failed requests under callgrind" >&2
base=$(python3 "$TOOLS/counts.py" ir "$RUN/cg.base.out")
run=$(python3 "$TOOLS/counts.py" ir "$RUN/cg.h2.out")
echo "instructions per request: $(((run - base) / (CG_N - C))) (callgrind, $CG_N requests minus a run of $C)"
echo "callgrind outputs: $RUN/cg.base.out $RUN/cg.h2.out"
