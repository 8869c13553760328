#!/usr/bin/env bash
# Sepia against haproxy, Traffic Server, nginx proxy_cache, varnish and squid, one core each.
#
# Each target is an accelerator of one origin nginx; the target runs pinned to CPU 1 with one
# worker, the origin and the load generator (wrk -t1, ab) share CPU 0. Repetitions are
# interleaved (repetition 1 of every case and target, then repetition 2, ...) and medians are
# quoted. Writes bench/RESULTS.md. Only 127.0.0.1 is ever contacted; every process started is
# stopped by its own pid on exit. See bench/README.md.
#
#   bench/run.sh                      full run (3 repetitions of 5 s)
#   bench/run.sh --quick              smoke run: a few cases, 1 repetition of 3 s
#   bench/run.sh --targets sepia,haproxy --cases 'hit-1k-*,miss-*' --reps 5 --duration 10
#   bench/run.sh --sepia-base /path/to/main/sepia --sepia-base-label 8373ecd   A/B beside the peers
set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$BENCH_DIR")
RUN=${BENCH_RUN:-$BENCH_DIR/run}
OUT=$BENCH_DIR/RESULTS.md
PORT_BASE=28100
REPS=3
DURATION=5
IDLE_CONNS=10000
QUICK=0
TARGETS_ARG=""
CASES_ARG=""
SEPIA_BIN=""
SEPIA_LABEL=""
SEPIA_BASE_BIN=""
SEPIA_BASE_LABEL=""
INSTALL=1
NOTES=()
COMMAND_LINE="bench/run.sh${*:+ $*}"

source "$BENCH_DIR/lib/common.sh"
source "$BENCH_DIR/lib/targets.sh"
source "$BENCH_DIR/lib/cases.sh"

usage() {
    cat << USAGE
usage: bench/run.sh [options]
  --quick              smoke run: cases ${QUICK_CASES[*]}; 1 repetition of 3 s
  --targets LIST       comma-separated, from: ${ALL_TARGETS[*]}, sepia-base (with --sepia-base)
                       (default: all; with --sepia-base, sepia-base too)
  --cases LIST         comma-separated names or globs (see --list-cases)
  --reps N             repetitions (default $REPS; --quick: 1)
  --duration S         seconds per wrk run (default $DURATION; --quick: 3)
  --idle-conns N       idle connections held in the idle case (default $IDLE_CONNS)
  --cache-mb N         every target's cache budget in MiB (default $CACHE_MB); the steady-state
                       cases first fill each target with 2 x N MiB of new objects, so a small
                       budget (64) keeps them short
  --port-base P        origin port; targets use P+1.. (default $PORT_BASE)
  --sepia-bin PATH     use this sepia binary instead of building one
  --sepia-label TEXT   describe that binary in RESULTS.md (e.g. its commit)
  --sepia-base PATH    A/B: also run this sepia binary (e.g. the main a change came from) as
                       target sepia-base, started and measured exactly like sepia; RESULTS.md
                       gives sepia ÷ sepia-base CPU-µs/req per case
  --sepia-base-label TEXT  describe the sepia-base binary in RESULTS.md (e.g. its commit)
  --out FILE           results file (default bench/RESULTS.md)
  --no-install         do not apt-get install missing tools
  --note TEXT          add TEXT to the notes of RESULTS.md (repeatable)
  --list-cases         print every case name and exit
USAGE
}

while (($#)); do
    case $1 in
        --quick) QUICK=1 ;;
        --targets) TARGETS_ARG=$2; shift ;;
        --cases) CASES_ARG=$2; shift ;;
        --reps) REPS_ARG=$2; shift ;;
        --duration) DURATION_ARG=$2; shift ;;
        --idle-conns) IDLE_CONNS=$2; shift ;;
        --cache-mb) CACHE_MB=$2; shift ;;
        --port-base) PORT_BASE=$2; shift ;;
        --sepia-bin) SEPIA_BIN=$(realpath "$2"); shift ;;
        --sepia-label) SEPIA_LABEL=$2; shift ;;
        --sepia-base) SEPIA_BASE_BIN=$(realpath -m "$2"); shift ;;
        --sepia-base-label) SEPIA_BASE_LABEL=$2; shift ;;
        --out) OUT=$(realpath -m "$2"); shift ;;
        --no-install) INSTALL=0 ;;
        --note) NOTES+=("$2"); shift ;;
        --list-cases) all_cases; exit 0 ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
    shift
done
((QUICK)) && REPS=1 DURATION=3
REPS=${REPS_ARG:-$REPS}
DURATION=${DURATION_ARG:-$DURATION}

# --- what to run ---------------------------------------------------------------------------
if [[ -n $SEPIA_BASE_BIN ]]; then
    ALL_TARGETS=(sepia sepia-base "${ALL_TARGETS[@]:1}")
    SEPIA_BASE_LABEL=${SEPIA_BASE_LABEL:-"binary $SEPIA_BASE_BIN"}
fi
TARGETS=()
for t in ${TARGETS_ARG//,/ }; do
    case $t in trafficserver) t=ats ;; nginxcache | nginx-cache) t=nginx ;; esac
    if [[ $t == sepia-base && -z $SEPIA_BASE_BIN ]]; then
        echo "target sepia-base needs --sepia-base PATH" >&2
        exit 2
    fi
    [[ " ${ALL_TARGETS[*]} " == *" $t "* ]] || { echo "unknown target $t" >&2; exit 2; }
    TARGETS+=("$t")
done
((${#TARGETS[@]})) || TARGETS=("${ALL_TARGETS[@]}")

CASES=()
if [[ -n $CASES_ARG ]]; then
    for c in $(all_cases); do
        for pat in ${CASES_ARG//,/ }; do
            # shellcheck disable=SC2053  # glob match on purpose
            if [[ $c == $pat ]]; then CASES+=("$c"); break; fi
        done
    done
elif ((QUICK)); then
    CASES=("${QUICK_CASES[@]}")
else
    mapfile -t CASES < <(all_cases)
fi
((${#CASES[@]})) || { echo "no case matches '$CASES_ARG' (see --list-cases)" >&2; exit 2; }

# --- tools ---------------------------------------------------------------------------------
install_tools() {
    local -A pkg_of=([nginx]=nginx-light [haproxy]=haproxy [varnishd]=varnish [squid]=squid
        [traffic_server]=trafficserver [wrk]=wrk [ab]=apache2-utils [valgrind]=valgrind
        [strace]=strace [curl]=curl [taskset]=util-linux [ss]=iproute2
        [/usr/bin/time]=time)
    local missing=() bin svc
    for bin in "${!pkg_of[@]}"; do
        command -v "$bin" > /dev/null || missing+=("${pkg_of[$bin]}")
    done
    ((${#missing[@]})) || return 0
    if ((!INSTALL)); then
        warn "missing packages: ${missing[*]} (--no-install given)"
        return 0
    fi
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q > "$RUN/apt.log" 2>&1 && apt-get install -y -q "${missing[@]}" >> "$RUN/apt.log" 2>&1 \
        || warn "apt-get failed, see $RUN/apt.log"
    # Packages may start their system service: the benchmark never uses those. Stop them.
    for svc in nginx haproxy varnish varnishncsa squid trafficserver; do
        [[ -e /etc/init.d/$svc ]] && service "$svc" stop > /dev/null 2>&1
    done
    sleep 1
    local running
    running=$(pgrep -a -x 'nginx|haproxy|varnishd|squid|traffic_server|traffic_manager' || true)
    [[ -n $running ]] && warn "still running after 'service stop' (not ours, left alone): $running"
}

build_sepia() {
    if [[ -n $SEPIA_BIN ]]; then
        SEPIA_LABEL=${SEPIA_LABEL:-"binary $SEPIA_BIN"}
        return 0
    fi
    SEPIA_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/sepia"
    local commit dirty
    commit=$(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null)
    dirty=$(git -C "$ROOT" status --porcelain -- crates Cargo.toml Cargo.lock 2> /dev/null | wc -l)
    SEPIA_LABEL="$commit$( ((dirty)) && echo " + $dirty uncommitted changes in crates/") (cargo build --release -p sepia)"
    log "building sepia: cargo build --release -p sepia"
    if ! (cd "$ROOT" && cargo build --release -p sepia) > "$RUN/build.log" 2>&1; then
        warn "sepia build failed, see $RUN/build.log"
        SEPIA_BIN="$RUN/sepia-build-failed"
        SEPIA_LABEL="$SEPIA_LABEL: BUILD FAILED"
    fi
}

# --- run -----------------------------------------------------------------------------------
finish() {
    local rc=$?
    cleanup
    if [[ -s $RUN/results.jsonl ]]; then
        meta elapsed "$(((SECONDS - T0) / 60)) min $(((SECONDS - T0) % 60)) s"
        meta load_after "$(cut -d' ' -f1-3 /proc/loadavg)"
        python3 "$TOOLS/report.py" --jsonl "$RUN/results.jsonl" --meta "$RUN/meta.tsv" --out "$OUT" \
            && log "wrote $OUT"
    fi
    exit "$rc"
}

T0=$SECONDS
rm -rf "$RUN"
mkdir -p "$RUN/out"
chmod 755 "$RUN"
: > "$RUN/meta.tsv"
trap finish EXIT
trap 'exit 130' INT TERM
raise_fd_limit
assign_ports
install_tools
[[ " ${TARGETS[*]} " == *" sepia "* ]] && build_sepia
RUN_ID=$(date +%s)

n_wrk=0 n_ab=0 n_idle=0
for c in "${CASES[@]}"; do
    # seconds per target and repetition, measured on the 2-core machine under load
    case $c in ab-*-k) n_ab=$((n_ab + 4)) ;; ab-*) n_ab=$((n_ab + 10)) ;; idle) n_idle=1 ;;
        *) n_wrk=$((n_wrk + 1)) ;; esac
done
estimate=$((REPS * ${#TARGETS[@]} * (n_wrk * (DURATION + 1) + n_ab + n_idle * (DURATION + 15)) + 30))
log "cases: ${CASES[*]}"
log "targets: ${TARGETS[*]}; $REPS repetition(s) of ${DURATION} s; estimated $((estimate / 60)) min $((estimate % 60)) s"

meta date "$(date -u '+%Y-%m-%d %H:%M UTC')"
meta machine "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, Linux $(uname -r)"
meta command "$COMMAND_LINE"
meta reps "$REPS"
meta cache_mb "$CACHE_MB"
meta duration "$DURATION"
meta idle_conns "$IDLE_CONNS"
meta quick "$QUICK"
meta load_before "$(cut -d' ' -f1-3 /proc/loadavg)"
meta sepia_commit "${SEPIA_LABEL:-not run}"
[[ " ${TARGETS[*]} " == *" sepia-base "* ]] && meta sepia_base "$SEPIA_BASE_LABEL"
for c in "${CASES[@]}"; do meta case "$c"; done
for n in "${NOTES[@]}"; do meta note "$n"; done

port_busy "$ORIGIN_PORT" && { warn "port $ORIGIN_PORT is in use: choose another --port-base"; exit 1; }
start_origin || exit 1

ACTIVE=()
for t in "${TARGETS[@]}"; do
    meta target "$t"
    meta version "$t=$(target_version "$t")"
    log "starting $t on 127.0.0.1:${TPORT[$t]}"
    if start_target "$t"; then
        ACTIVE+=("$t")
        meta start "$t=taskset -c $TARGET_CPU $START_CMD"
        # warm up (not recorded): the first seconds of any server are slower
        for size in "${SIZES[@]}"; do prime "$t" "/$size"; done
        for warm_c in 10 1000; do
            taskset -c "$LOAD_CPU" wrk -t1 "-c$warm_c" -d1s "http://127.0.0.1:${TPORT[$t]}/1k" > /dev/null 2>&1
        done
    else
        warn "$t failed to start: $FAIL_REASON"
        meta failed "**$t did not start**: $FAIL_REASON"
    fi
done
((${#ACTIVE[@]})) || { warn "no target started"; exit 1; }

meta cmd "wrk (paths /160 /1k /4k /64k /1m): taskset -c $LOAD_CPU wrk -t1 -c<C> -d${DURATION}s --latency http://127.0.0.1:<port>/<path>"
meta cmd "close: <the wrk line> -H 'Connection: close'"
meta cmd "miss: taskset -c $LOAD_CPU wrk -t1 -c100 -d${DURATION}s --latency http://127.0.0.1:<port>/ -s bench/tools/miss.lua -- <run-target-rep>"
meta cmd "ab: taskset -c $LOAD_CPU ab -q [-k] -c 10 -n 100000 http://127.0.0.1:<port>/4k"
meta cmd "idle: taskset -c $LOAD_CPU python3 bench/tools/idle_clients.py --port <port> --path /1k --n $IDLE_CONNS  (then the wrk line, -c100, /1k, while they are held)"
meta cmd "pinning (after start and before every run, each process of the target): taskset -a -cp $TARGET_CPU <pid>"

for ((rep = 1; rep <= REPS; rep++)); do
    for c in "${CASES[@]}"; do
        log "rep $rep/$REPS: $c"
        for t in "${ACTIVE[@]}"; do
            target_runs "$t" "$c" || continue
            if ! alive "${TPID[$t]:-}"; then
                warn "$t is not running: restarting"
                meta note "$t was found dead before $c rep $rep and restarted"
                start_target "$t" || { meta note "$t: restart failed: $FAIL_REASON"; continue; }
            fi
            run_case "$t" "$c" "$rep"
            sleep 0.3
        done
    done
done

for t in sepia sepia-base; do
    if [[ -s $RUN/$t/stderr.log ]]; then
        meta note "$t stderr (last lines): $(tail -3 "$RUN/$t/stderr.log" | tr '\n' ' ' | cut -c1-300)"
    fi
done
meta note "Each target runs with one worker on CPU 1 and a cache of $CACHE_MB MiB: haproxy nbthread 1, cache total-max-size; Traffic Server one ET_NET thread (exec_thread.limit 1), RAM cache of that size over a disk cache twice that (at least 256 MiB); nginx worker_processes 1, proxy_cache max_size; varnish default thread pools, malloc, timeout_idle 300 s; squid -N (one process), cache_mem; Sepia workers = 1, cache memory, access log off."
[[ " ${ACTIVE[*]} " == *" ceiling "* ]] && meta note "ceiling is not a proxy: bench/tools/ceiling.c (epoll, one pre-built 1 KiB response per request head, no parsing), run on the hit-1k cases only; it is never the \"best peer\"."
[[ " ${ACTIVE[*]} " == *" relay "* ]] && meta note "relay is not a proxy: bench/tools/relay.c (epoll, each client's bytes passed to a keep-alive origin connection of its own and back, no parsing), run on the miss and no-store cases only; it is never the \"best peer\"."
if [[ " ${ACTIVE[*]} " == *" sepia-base "* ]]; then
    meta note "A/B: sepia-base is a second Sepia build ($SEPIA_BASE_LABEL) started exactly like sepia (same config template bench/peers/sepia.toml, its own port and run directory, the same pinning and cases), interleaved with the other targets in every repetition. It is not counted as a peer: \"best peer\" excludes it."
fi
meta note "Hits are primed by two GETs of the object before each run; a hit run that reached the origin is marked NOT A HIT."
meta note "ab reports whole milliseconds: its p50/p99 are coarse."
if [[ " ${ACTIVE[*]} " == *" haproxy "* && " ${CASES[*]} " == *" ab-"* ]]; then
    meta note "haproxy 2.6's cache does not answer HTTP/1.0 requests, and ab speaks HTTP/1.0: every ab request through haproxy reaches the origin (two curl --http1.0 requests both show X-Cache-Status: MISS), hence NOT A HIT in the ab tables."
fi
meta note "varnish runs with its working directory (the mmapped shared-memory log) on /dev/shm, as varnish recommends, and timeout_idle=300 (default 5 s) so idle keep-alive clients are held like everywhere else."
exit 0
