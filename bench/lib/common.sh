# Shared helpers for bench/run.sh and bench/count.sh (sourced, not run).
# Expects BENCH_DIR and RUN to be set. Every process started goes through `launch`, is
# recorded in STARTED, and is stopped by its own pid in `cleanup` (run on EXIT).

TOOLS="$BENCH_DIR/tools"
STARTED=()          # pids we launched, in order
CLEANUP_PATHS=()    # scratch directories outside the run directory (varnish's tmpfs workdir)
TARGET_CPU=1        # the proxy under test
LOAD_CPU=0          # origin and load generator

log()  { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
warn() { printf '%s WARNING: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# meta KEY VALUE: one line of run metadata for the report (keys may repeat).
meta() { printf '%s\t%s\n' "$1" "$2" >> "$RUN/meta.tsv"; }

port_busy() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }

# render TEMPLATE OUT PORT [NAME]: fill the placeholders of a config template.
render() {
    sed -e "s#@RUN@#$RUN#g" -e "s#@PORT@#$3#g" -e "s#@ORIGIN@#$ORIGIN_PORT#g" \
        -e "s#@ORIGIN_PORT@#$ORIGIN_PORT#g" -e "s#@NAME@#${4:-}#g" \
        -e "s#@CACHE_MB@#${CACHE_MB:-1024}#g" -e "s#@CACHE_BYTES@#$((${CACHE_MB:-1024} << 20))#g" \
        -e "s#@ATS_DISK_MB@#$(((${CACHE_MB:-1024} * 2) < 256 ? 256 : ${CACHE_MB:-1024} * 2))#g" "$1" > "$2"
}

# launch CPU LOG CMD...: start CMD in the background pinned to CPU; sets LAUNCHED_PID.
launch() {
    local cpu=$1 logfile=$2; shift 2
    taskset -c "$cpu" "$@" >> "$logfile" 2>&1 < /dev/null &
    LAUNCHED_PID=$!
    STARTED+=("$LAUNCHED_PID")
}

alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }

# stop_tree PID [SECONDS]: SIGTERM the process, wait up to SECONDS (10), then SIGKILL whatever
# of its tree is left.
stop_tree() {
    local pid=$1 grace=${2:-10} tree i
    alive "$pid" || { wait "$pid" 2>/dev/null; return 0; }
    tree=$(python3 "$TOOLS/proc.py" tree "$pid")
    kill -TERM "$pid" 2>/dev/null
    for ((i = 0; i < grace * 10; i++)); do
        alive "$pid" || break
        sleep 0.1
    done
    for p in $tree; do
        alive "$p" && kill -KILL "$p" 2>/dev/null
    done
    # children of a target (nginx workers, varnish child) may outlive the root briefly
    for ((i = 0; i < 50; i++)); do
        local left=0
        for p in $tree; do alive "$p" && left=1; done
        ((left)) || break
        sleep 0.1
    done
    wait "$pid" 2>/dev/null
    return 0
}

cleanup() {
    local i
    for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do
        stop_tree "${STARTED[i]}"
    done
    STARTED=()
    for i in "${CLEANUP_PATHS[@]}"; do rm -rf "$i"; done
    CLEANUP_PATHS=()
}

# pin_tree PID CPU: move every thread of every process of the tree to CPU.
pin_tree() {
    local p
    for p in $(python3 "$TOOLS/proc.py" tree "$1"); do
        taskset -a -cp "$2" "$p" > /dev/null 2>&1
    done
}

cpu_of() { python3 "$TOOLS/proc.py" cpu "$1"; }
rss_of() { python3 "$TOOLS/proc.py" rss "$1"; }

# http_code PORT PATH: the status code of one GET through 127.0.0.1:PORT (000 on failure).
http_code() {
    curl -s -o /dev/null -m 5 -w '%{http_code}' "http://127.0.0.1:$1$2" 2>/dev/null || true
}

# origin_count: the origin's stub_status request counter (includes this request).
origin_count() {
    curl -s -m 5 "http://127.0.0.1:$ORIGIN_PORT/nginx_status" | awk 'NR == 3 { print $3 }'
}

# wait_ready PID PORT PATH SECONDS: poll until GET PATH answers 200 (squid answers 502 for about
# a second after start), failing early if the process died.
wait_ready() {
    local pid=$1 port=$2 path=$3 deadline=$((SECONDS + $4))
    while ((SECONDS < deadline)); do
        alive "$pid" || return 1
        [[ $(http_code "$port" "$path") == 200 ]] && return 0
        sleep 0.2
    done
    return 1
}

# wait_listen PID PORT SECONDS: poll until something listens on PORT (no request sent).
wait_listen() {
    local deadline=$((SECONDS + $3))
    while ((SECONDS < deadline)); do
        alive "$1" || return 1
        port_busy "$2" && return 0
        sleep 0.2
    done
    return 1
}

raise_fd_limit() {
    ulimit -n 20000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
}
