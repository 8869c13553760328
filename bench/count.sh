#!/usr/bin/env bash
# Count what one request costs Sepia: syscalls per keep-alive hit and per miss (strace -c -f on
# every thread, during a fixed number of requests) and instructions per request (callgrind,
# a run with N requests minus a baseline run without them). Appends (or replaces) the
# "Counting the costs" section of bench/RESULTS.md. Only 127.0.0.1 is contacted.
#
#   bench/count.sh [--sepia-bin PATH] [--sepia-label TEXT] [--hits N] [--misses N]
#                  [--cg-hits N] [--cg-misses N] [--out FILE] [--admin]
#                  [--cache-mb N] [--cg-cases hit,miss,nostore,vary] [--no-strace]
#   --admin adds an [admin] table (port base + 9) to Sepia's configuration: every request is
#   then counted for the admin listener's metrics.
#   --cache-mb N gives Sepia an N MiB cache and, in every callgrind run (the baseline too),
#   sends it 2 x N MiB of new 1 KiB objects first: the misses counted then evict (issue 23's
#   steady state). --cg-cases picks the callgrind runs: hit, miss (/u/), nostore (one /ns/ URL
#   whose responses say no-store), vary (/v/ misses, Vary: Accept-Encoding).
set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$BENCH_DIR")
RUN=${BENCH_COUNT_RUN:-$BENCH_DIR/run-count}
OUT=$BENCH_DIR/RESULTS.md
PORT_BASE=28200
HITS=20000 MISSES=5000 CG_HITS=2000 CG_MISSES=1000
SEPIA_BIN="" SEPIA_LABEL="" ADMIN=0 STRACE=1 CG_CASES=hit,miss FILL=0
COMMAND_LINE="bench/count.sh${*:+ $*}"

source "$BENCH_DIR/lib/common.sh"
source "$BENCH_DIR/lib/targets.sh"

while (($#)); do
    case $1 in
        --sepia-bin) SEPIA_BIN=$(realpath "$2"); shift ;;
        --sepia-label) SEPIA_LABEL=$2; shift ;;
        --hits) HITS=$2; shift ;;
        --misses) MISSES=$2; shift ;;
        --cg-hits) CG_HITS=$2; shift ;;
        --cg-misses) CG_MISSES=$2; shift ;;
        --port-base) PORT_BASE=$2; shift ;;
        --out) OUT=$(realpath -m "$2"); shift ;;
        --admin) ADMIN=1 ;;
        --cache-mb) CACHE_MB=$2; FILL=$(($2 * 2048)); shift ;;
        --cg-cases) CG_CASES=$2; shift ;;
        --no-strace) STRACE=0 ;;
        *) sed -n '2,17p' "$0" >&2; exit 2 ;;
    esac
    shift
done

for tool in strace valgrind callgrind_annotate ab nginx curl; do
    command -v "$tool" > /dev/null || { echo "missing $tool: run bench/run.sh once (it installs)" >&2; exit 1; }
done

rm -rf "$RUN"
mkdir -p "$RUN"
chmod 755 "$RUN"
: > "$RUN/meta.tsv"
trap cleanup EXIT
trap 'exit 130' INT TERM
raise_fd_limit
assign_ports
port_busy "$ORIGIN_PORT" || port_busy "${TPORT[sepia]}" && { echo "ports $PORT_BASE.. busy" >&2; exit 1; }

if [[ -z $SEPIA_BIN ]]; then
    SEPIA_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/sepia"
    SEPIA_LABEL=${SEPIA_LABEL:-"$(git -C "$ROOT" rev-parse --short HEAD) (cargo build --release -p sepia)"}
    log "building sepia"
    (cd "$ROOT" && cargo build --release -p sepia) > "$RUN/build.log" 2>&1 \
        || { echo "build failed: $RUN/build.log" >&2; exit 1; }
fi
PORT=${TPORT[sepia]}
URL="http://127.0.0.1:$PORT"
((ADMIN)) && export SEPIA_ADMIN_PORT=$((PORT_BASE + 9))
meta date "$(date -u '+%Y-%m-%d %H:%M UTC')"
meta command "$COMMAND_LINE"
meta sepia "${SEPIA_LABEL:-$SEPIA_BIN}"

start_origin || exit 1

# --- syscalls ------------------------------------------------------------------------------
# strace_load NAME CMD...: trace every Sepia thread while CMD runs; the summary lands in
# $RUN/strace.NAME.txt.
strace_load() {
    local name=$1 spid; shift
    strace -c -f -p "${TPID[sepia]}" -o "$RUN/strace.$name.txt" 2> "$RUN/strace.$name.err" &
    spid=$!
    STARTED+=("$spid")
    sleep 1
    "$@" > "$RUN/load.$name.txt" 2>&1
    kill -INT "$spid"
    wait "$spid"
}

if ((STRACE)); then
log "syscalls: starting sepia"
start_target sepia || { echo "sepia did not start: $FAIL_REASON" >&2; exit 1; }
prime sepia /1k
# strace_case NAME N SHOWN CMD...: trace N requests made by CMD; record the counts, N, the
# command as shown in RESULTS.md and what ab said of its requests.
strace_case() {
    local name=$1 n=$2 shown=$3; shift 3
    log "syscalls: $*"
    strace_load "$name" "$@"
    meta "strace_$name" "$(python3 "$TOOLS/counts.py" strace "$RUN/strace.$name.txt")"
    meta "strace_${name}_n" "$n"
    meta "strace_${name}_cmd" "$shown"
    meta "strace_${name}_note" "$(grep -E 'Complete requests|Keep-Alive requests|Non-2xx' "$RUN/load.$name.txt" | tr -s ' ' | paste -sd ';' | sed 's/;/; /g')"
}
strace_case hit "$HITS" "ab -k -n $HITS -c 1 $URL/1k" \
    taskset -c "$LOAD_CPU" ab -k -n "$HITS" -c 1 "$URL/1k"
# 50 clients at once, each still sending its next request only after its answer: one request
# per read as above, but the worker finds several connections ready per look at its events.
HITS50=$((HITS * 5 / 2))
strace_case hit50 "$HITS50" "ab -k -n $HITS50 -c 50 $URL/1k" \
    taskset -c "$LOAD_CPU" ab -k -n "$HITS50" -c 50 "$URL/1k"
strace_case miss "$MISSES" "bench/tools/seqclient.py --n $MISSES --unique <prefix>" \
    taskset -c "$LOAD_CPU" python3 "$TOOLS/seqclient.py" --port "$PORT" --n "$MISSES" --unique "strace-$(date +%s)"
meta strace_miss_note "$(tail -1 "$RUN/load.miss.txt"), one keep-alive HTTP/1.1 connection"
stop_target sepia
fi

# --- instructions --------------------------------------------------------------------------
# callgrind_run NAME [CMD...]: Sepia under callgrind: start, 2 priming GETs, the fill
# (--cache-mb), CMD, stop.
callgrind_run() {
    local name=$1 pid; shift
    sepia_config sepia
    launch "$TARGET_CPU" "$RUN/cg.$name.log" env SEPIA_LOG=warn valgrind --tool=callgrind \
        --callgrind-out-file="$RUN/cg.$name.out" "$SEPIA_BIN" --config "$RUN/sepia/sepia.toml"
    pid=$LAUNCHED_PID
    wait_listen "$pid" "$PORT" 120 || { warn "sepia under valgrind did not listen"; return 1; }
    http_code "$PORT" /1k > /dev/null
    http_code "$PORT" /1k > /dev/null
    ((FILL)) && python3 "$TOOLS/seqclient.py" --port "$PORT" --n "$FILL" --unique fill > "$RUN/fill.$name.txt" 2>&1
    (($#)) && "$@" > "$RUN/load.cg.$name.txt" 2>&1
    stop_tree "$pid" 60
    [[ -s $RUN/cg.$name.out ]]
}

SEQ=(taskset -c "$LOAD_CPU" python3 "$TOOLS/seqclient.py" --port "$PORT")
declare -A CG_CMD CG_SHOWN CG_N
CG_CMD[hit]="taskset -c $LOAD_CPU ab -k -n $CG_HITS -c 1 $URL/1k"
CG_SHOWN[hit]="ab -k -n $CG_HITS -c 1 $URL/1k" CG_N[hit]=$CG_HITS
CG_CMD[miss]="${SEQ[*]} --n $CG_MISSES --unique cg-$(date +%s)"
CG_SHOWN[miss]="seqclient.py --n $CG_MISSES --unique <prefix>" CG_N[miss]=$CG_MISSES
CG_CMD[nostore]="${SEQ[*]} --n $CG_MISSES --path /ns/page"
CG_SHOWN[nostore]="seqclient.py --n $CG_MISSES --path /ns/page" CG_N[nostore]=$CG_MISSES
CG_CMD[vary]="${SEQ[*]} --n $CG_MISSES --unique cg-$(date +%s) --dir v --header Accept-Encoding:gzip"
CG_SHOWN[vary]="seqclient.py --n $CG_MISSES --unique <prefix> --dir v --header Accept-Encoding:gzip"
CG_N[vary]=$CG_MISSES
((FILL)) && meta cg_fill "$FILL new 1 KiB objects (/u/fill-<i>) sent after the priming GETs into a $CACHE_MB MiB cache, so every counted miss evicts"
log "callgrind: baseline"
if callgrind_run base; then
    meta ir_base "$(python3 "$TOOLS/counts.py" ir "$RUN/cg.base.out")"
    python3 "$TOOLS/counts.py" top "$RUN/cg.base.out" | while read -r line; do meta top_base "$line"; done
    for kind in ${CG_CASES//,/ }; do
        [[ -n ${CG_CMD[$kind]:-} ]] || { warn "no callgrind case $kind"; continue; }
        log "callgrind: ${CG_CMD[$kind]}"
        # shellcheck disable=SC2086 # the command is split on purpose
        if callgrind_run "$kind" ${CG_CMD[$kind]}; then
            meta "ir_$kind" "$(python3 "$TOOLS/counts.py" ir "$RUN/cg.$kind.out")"
            meta "ir_${kind}_n" "${CG_N[$kind]}"
            meta "ir_${kind}_cmd" "${CG_SHOWN[$kind]}"
            python3 "$TOOLS/counts.py" top "$RUN/cg.$kind.out" | while read -r line; do meta "top_$kind" "$line"; done
        fi
    done
fi
meta note "Sepia as in run.sh (bench/peers/sepia.toml: one worker, cache on, access log off), pinned to CPU 1; the origin and the client on CPU 0."
meta note "ab -k speaks HTTP/1.0 with Connection: keep-alive; \"Keep-Alive requests\" above shows whether the connection was kept. ab sends a client's next request only after its answer, so exactly one request arrives per read. With one client Sepia must also wait for each request (an epoll_wait per hit); with 50, one wait finds many connections ready."
python3 "$TOOLS/counts.py" section --meta "$RUN/meta.tsv" --out "$OUT" && log "wrote the count section of $OUT"
