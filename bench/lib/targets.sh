# Origin and targets for bench/run.sh (sourced). Each start_<target> starts one instance pinned
# to CPU 1 with one worker from its config in bench/peers/, sets TPID[<target>] and returns 0 once
# the target answers GET /1k with 200; on failure it sets FAIL_REASON and returns 1.
#
# sepia-base is a second Sepia build (SEPIA_BASE_BIN, run.sh --sepia-base) for A/B runs: started
# exactly like sepia (same config template, its own port and run directory); run.sh adds it to
# ALL_TARGETS, right after sepia, only when a binary is given.
#
# ceiling is not a proxy: tools/ceiling.c, a few dozen lines of epoll answering every request
# head with one pre-built 1 KiB response, the floor under any server's cost per keep-alive hit
# on this kernel. It runs the hit-1k cases only (`target_runs`) and is never a "best peer".
#
# relay is not a proxy either: tools/relay.c, epoll passing bytes between each client and a
# keep-alive origin connection of its own, no parsing: the floor under an epoll read/write
# proxy's cost per miss or pass-through request on this kernel. It runs the miss and no-store
# cases only (and is not filled: it has no cache).

ALL_TARGETS=(sepia haproxy ats nginx varnish squid ceiling relay)
CACHE_MB=${CACHE_MB:-1024}
SEPIA_BASE_BIN=${SEPIA_BASE_BIN:-}
declare -A TPID TPORT
SIZES=(160 1k 4k 64k 1m)
declare -A SIZE_BYTES=([160]=160 [1k]=1024 [4k]=4096 [64k]=65536 [1m]=1048576)

# Ports in a fixed order, whatever ALL_TARGETS holds: sepia-base comes after every other
# target, so an A/B run moves no one else's port.
PORT_ORDER=(sepia haproxy ats nginx varnish squid sepia-base ceiling relay)

assign_ports() {
    local i=1 t
    ORIGIN_PORT=$PORT_BASE
    for t in "${PORT_ORDER[@]}"; do
        TPORT[$t]=$((PORT_BASE + i))
        i=$((i + 1))
    done
}

# target_dir NAME: the target's run directory under $RUN.
target_dir() {
    case $1 in nginx) echo nginxcache ;; *) echo "$1" ;; esac
}

target_version() {
    case $1 in
        sepia) "$SEPIA_BIN" --version 2> /dev/null | head -1 ;;
        sepia-base) "$SEPIA_BASE_BIN" --version 2> /dev/null | head -1 ;;
        haproxy) haproxy -v 2> /dev/null | head -1 | awk '{print "HAProxy " $3}' ;;
        ats) traffic_server -V 2> /dev/null | head -1 | awk '{print $1, $2, $3}' ;;
        nginx) nginx -v 2>&1 | sed 's/.*: //' ;;
        varnish) varnishd -V 2>&1 | head -1 | sed 's/^varnishd (\(.*\) revision.*/\1/' ;;
        squid) squid -v 2> /dev/null | head -1 ;;
        ceiling) echo "bench/tools/ceiling.c, $(cc --version | head -1)" ;;
        relay) echo "bench/tools/relay.c, $(cc --version | head -1)" ;;
    esac
}

# start_origin: nginx serving the test files, pinned to CPU 0 with the load generator.
start_origin() {
    local dir="$RUN/origin" size
    mkdir -p "$dir/tmp" "$dir/logs" "$RUN/www"
    for size in "${SIZES[@]}"; do
        head -c "${SIZE_BYTES[$size]}" /dev/zero | tr '\0' 'x' > "$RUN/www/$size"
    done
    chmod -R a+rX "$RUN/www"
    render "$BENCH_DIR/peers/origin.nginx.conf" "$dir/nginx.conf" "$ORIGIN_PORT" origin
    launch "$LOAD_CPU" "$dir/stderr.log" nginx -p "$dir/" -c "$dir/nginx.conf" -g 'daemon off;'
    ORIGIN_PID=$LAUNCHED_PID
    meta cmd "origin: taskset -c $LOAD_CPU nginx -p $dir/ -c $dir/nginx.conf -g 'daemon off;'"
    if ! wait_ready "$ORIGIN_PID" "$ORIGIN_PORT" /1k 15; then
        warn "origin nginx did not start: $(tail -3 "$dir/stderr.log" "$dir/error.log" 2> /dev/null)"
        return 1
    fi
    pin_tree "$ORIGIN_PID" "$LOAD_CPU"
}

# sepia_config NAME: $RUN/NAME/sepia.toml from peers/sepia.toml on NAME's port.
sepia_config() {
    local name=$1 dir="$RUN/$1"
    mkdir -p "$dir"
    render "$BENCH_DIR/peers/sepia.toml" "$dir/sepia.toml" "${TPORT[$name]}"
    # count.sh --admin: the admin listener on, so every request is counted for its metrics.
    [[ -n ${SEPIA_ADMIN_PORT:-} ]] \
        && printf '\n[admin]\nlisten = "127.0.0.1:%s"\n' "$SEPIA_ADMIN_PORT" >> "$dir/sepia.toml"
}

# start_sepia_as NAME BIN: one Sepia from peers/sepia.toml on NAME's port, in $RUN/NAME.
start_sepia_as() {
    local name=$1 bin=$2 dir="$RUN/$1"
    [[ -x "$bin" ]] || { FAIL_REASON="no binary at $bin (build failed?)"; return 1; }
    sepia_config "$name"
    START_CMD="env SEPIA_LOG=warn $bin --config $dir/sepia.toml"
    launch "$TARGET_CPU" "$dir/stderr.log" env SEPIA_LOG=warn "$bin" --config "$dir/sepia.toml"
}

start_sepia() { start_sepia_as sepia "$SEPIA_BIN"; }
start_sepia_base() { start_sepia_as sepia-base "$SEPIA_BASE_BIN"; }

start_haproxy() {
    local dir="$RUN/haproxy"
    mkdir -p "$dir"
    render "$BENCH_DIR/peers/haproxy.cfg" "$dir/haproxy.cfg" "${TPORT[haproxy]}"
    START_CMD="haproxy -db -f $dir/haproxy.cfg"
    launch "$TARGET_CPU" "$dir/stderr.log" haproxy -db -f "$dir/haproxy.cfg"
}

start_nginx() {
    local dir="$RUN/nginxcache"
    rm -rf "$dir/cache"
    mkdir -p "$dir/tmp" "$dir/logs" "$dir/cache"
    render "$BENCH_DIR/peers/nginxcache.conf" "$dir/nginx.conf" "${TPORT[nginx]}"
    START_CMD="nginx -p $dir/ -c $dir/nginx.conf -g 'daemon off;'"
    launch "$TARGET_CPU" "$dir/stderr.log" nginx -p "$dir/" -c "$dir/nginx.conf" -g 'daemon off;'
}

# varnish: default thread pools (threads are added under load; the warm-up grows them), malloc
# storage as large as the others' memory caches, no management port, idle keep-alive connections
# kept 300 s like every other target (varnish's default timeout_idle is 5 s). Its working
# directory holds the mmapped shared-memory log, which varnish wants on tmpfs: on disk, writeback
# of that log stalled varnish at ~25% CPU whenever other work was writing to the same disk.
start_varnish() {
    local dir="$RUN/varnish" work="/dev/shm/sepia-bench-varnish-${TPORT[varnish]}"
    rm -rf "$work"
    mkdir -p "$dir" "$work"
    CLEANUP_PATHS+=("$work")
    render "$BENCH_DIR/peers/varnish.vcl" "$dir/varnish.vcl" "${TPORT[varnish]}"
    chmod -R a+rX "$dir"
    local args=(-F -n "$work" -a "127.0.0.1:${TPORT[varnish]}" -f "$dir/varnish.vcl"
        -s "malloc,${CACHE_MB}M" -T none -p timeout_idle=300)
    START_CMD="varnishd ${args[*]}"
    launch "$TARGET_CPU" "$dir/stderr.log" varnishd "${args[@]}"
}

# squid: -N keeps it one process in the foreground; it drops privileges to `proxy`, which must
# own its run directory.
start_squid() {
    local dir="$RUN/squid"
    mkdir -p "$dir"
    render "$BENCH_DIR/peers/squid.conf" "$dir/squid.conf" "${TPORT[squid]}"
    chown -R proxy:proxy "$dir"
    START_CMD="squid -N -f $dir/squid.conf"
    launch "$TARGET_CPU" "$dir/stderr.log" squid -N -f "$dir/squid.conf"
}

# Traffic Server: traffic_server alone (no traffic_manager), one ET_NET thread, a sandboxed
# layout (runroot.yaml) holding the package's default configs overlaid with ours.
start_ats() {
    local dir="$RUN/ats" f
    rm -rf "$dir"
    mkdir -p "$dir/etc" "$dir/var" "$dir/run" "$dir/log" "$dir/cache" "$dir/data"
    cp -r /etc/trafficserver/. "$dir/etc/"
    for f in records.config remap.config storage.config ip_allow.yaml logging.yaml; do
        render "$BENCH_DIR/peers/ats/$f" "$dir/etc/$f" "${TPORT[ats]}"
    done
    render "$BENCH_DIR/peers/ats/runroot.yaml" "$dir/runroot.yaml" "${TPORT[ats]}"
    chown -R trafficserver:trafficserver "$dir"
    START_CMD="traffic_server --run-root=$dir/runroot.yaml"
    launch "$TARGET_CPU" "$dir/stderr.log" traffic_server --run-root="$dir/runroot.yaml"
}

# start_c_tool NAME ARGS...: bench/tools/NAME.c built at each start (cc -O2) and run with ARGS,
# one thread on CPU 1 like every target (the ceiling server and the relay).
start_c_tool() {
    local name=$1 dir="$RUN/$1"
    shift
    mkdir -p "$dir"
    cc -O2 -o "$dir/$name" "$TOOLS/$name.c" 2> "$dir/build.log" \
        || { FAIL_REASON="cc failed: $(tail -c 300 "$dir/build.log")"; return 1; }
    START_CMD="$dir/$name $*"
    launch "$TARGET_CPU" "$dir/stderr.log" "$dir/$name" "$@"
}

start_ceiling() { start_c_tool ceiling "${TPORT[ceiling]}"; }
start_relay() { start_c_tool relay "${TPORT[relay]}" "$ORIGIN_PORT"; }

# target_runs TARGET CASE: whether TARGET takes part in CASE (the ceiling server answers one
# 1 KiB response to everything, so it runs only the 1 KiB keep-alive hit cases; the relay
# caches nothing, so it runs only the cases where every request reaches the origin).
target_runs() {
    case $1 in
        ceiling) [[ $2 == hit-1k-* ]] ;;
        relay) [[ $2 == miss-* || $2 == nostore-* ]] ;;
        *) true ;;
    esac
}

# start_target NAME: start, wait until it serves the 1 KiB object, pin every thread to CPU 1.
start_target() {
    local t=$1
    FAIL_REASON="" START_CMD=""
    if port_busy "${TPORT[$t]}"; then
        FAIL_REASON="port ${TPORT[$t]} already in use"
        return 1
    fi
    "start_${t//-/_}" || { FAIL_REASON=${FAIL_REASON:-"could not launch"}; return 1; }
    TPID[$t]=$LAUNCHED_PID
    if ! wait_ready "${TPID[$t]}" "${TPORT[$t]}" /1k 60; then
        FAIL_REASON="did not serve GET /1k within 60 s (exit or bad answer: $(http_code "${TPORT[$t]}" /1k)); log: $(tail -c 400 "$RUN/$(target_dir "$t")/stderr.log" 2> /dev/null | tr '\n' ' ')"
        stop_tree "${TPID[$t]}"
        TPID[$t]=""
        return 1
    fi
    pin_tree "${TPID[$t]}" "$TARGET_CPU"
    return 0
}

stop_target() {
    [[ -n "${TPID[$1]:-}" ]] && stop_tree "${TPID[$1]}"
    TPID[$1]=""
}

# prime TARGET PATH: fetch PATH twice so the cache holds it before a hit run.
prime() {
    http_code "${TPORT[$1]}" "$2" > /dev/null
    http_code "${TPORT[$1]}" "$2" > /dev/null
}
