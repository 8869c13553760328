# The benchmark cases for bench/run.sh (sourced).
#
#   hit-<size>-c<C>   keep-alive hits, wrk -c C            (size: 160 1k 4k 64k 1m)
#   close-1k-c100     hits with `Connection: close`, a new connection per request
#   miss-1k-c100      every request a URL never asked before (/u/<prefix>-<counter>)
#   ab-4k, ab-4k-k    the references' own test: ab -c 10 -n 100000 (and -k)
#   idle              N idle keep-alive clients on a fresh target, then wrk -c100 meanwhile
#
# The steady-state cases (issue 23) run on a cache already full: before the first of them, each
# target process gets twice its cache budget (--cache-mb) in new 1 KiB objects (`ensure_full`),
# so every insert evicts; the processes are kept across repetitions (until `idle` restarts them).
#   miss-full-c100    every URL new, the cache full and evicting
#   miss-vary-c100    the same with `Vary: Accept-Encoding` responses (/v/, Accept-Encoding sent)
#   nostore-1k-c100   one URL whose responses say `no-store`: every request passes through
#   mix50-1k-c100     every other request new, the rest over 100 hot URLs (tools/mix.lua)

all_cases() {
    local size c
    for size in "${SIZES[@]}"; do
        for c in 10 100 1000; do echo "hit-$size-c$c"; done
    done
    echo close-1k-c100 miss-1k-c100 miss-full-c100 miss-vary-c100 nostore-1k-c100 mix50-1k-c100 \
        ab-4k ab-4k-k idle | tr ' ' '\n'
}

declare -A FILLED # target -> the pid whose cache ensure_full filled

# ensure_full TARGET: unless this process of TARGET was filled already, request 2 x CACHE_MB MiB
# of new 1 KiB objects through it (body bytes alone twice the budget: every target's cache is
# full and evicting afterwards): wrk with tools/miss.lua until the origin has seen that many
# requests (wrk itself can only stop on time). Not recorded; its rate goes to the log.
ensure_full() {
    local t=$1 n=$((CACHE_MB * 2048)) t0=$SECONDS o0 fill_pid
    [[ ${FILLED[$t]:-} == "${TPID[$t]}" ]] && return 0
    [[ $t == relay ]] && return 0 # no cache to fill
    pin_tree "${TPID[$t]}" "$TARGET_CPU"
    o0=$(origin_count)
    launch "$LOAD_CPU" "$RUN/out/fill.$t.${TPID[$t]}.txt" wrk -t1 -c100 -d900s \
        "http://127.0.0.1:${TPORT[$t]}/" -s "$TOOLS/miss.lua" -- "fill-$RUN_ID-$t-${TPID[$t]}"
    fill_pid=$LAUNCHED_PID
    while alive "$fill_pid" && (($(origin_count) - o0 < n)) && ((SECONDS - t0 < 900)); do
        sleep 0.5
    done
    stop_tree "$fill_pid"
    FILLED[$t]=${TPID[$t]}
    log "  $t: cache filled with $n new 1 KiB objects in $((SECONDS - t0)) s"
    meta note "$t (pid ${TPID[$t]}): cache filled with $n new 1 KiB objects in $((SECONDS - t0)) s before the steady-state cases"
}
QUICK_CASES=(hit-1k-c100 hit-64k-c100 close-1k-c100 miss-1k-c100 ab-4k-k ab-4k idle)

case_path() {
    local size=${1#*-}
    echo "/${size%%-*}"
}

# load_run OUTFILE CMD...: run a load generator with the target's CPU time and the origin's
# request counter sampled just around it (target in $LOAD_TARGET).
load_run() {
    M_OUT=$1; shift
    M_CMD=$(printf '%q ' "$@")
    pin_tree "${TPID[$LOAD_TARGET]}" "$TARGET_CPU"
    M_O0=$(origin_count); M_C0=$(cpu_of "${TPID[$LOAD_TARGET]}")
    "$@" > "$M_OUT" 2> "$M_OUT.err"
    M_C1=$(cpu_of "${TPID[$LOAD_TARGET]}"); M_O1=$(origin_count)
}

# load_record TOOL KIND CASE REP [record.py --extra k=v ...]: record the last load_run.
load_record() {
    local tool=$1 kind=$2 case=$3 rep=$4; shift 4
    python3 "$TOOLS/record.py" --tool "$tool" --output "$M_OUT" --jsonl "$RUN/results.jsonl" \
        --case "$case" --kind "$kind" --target "$LOAD_TARGET" --rep "$rep" \
        --cpu0 "$M_C0" --cpu1 "$M_C1" --origin0 "${M_O0:-0}" --origin1 "${M_O1:-0}" \
        --cmd "$M_CMD" "$@"
}

# measure TOOL KIND CASE TARGET REP CMD...: load_run + load_record.
measure() {
    local tool=$1 kind=$2 case=$3 rep=$5
    LOAD_TARGET=$4; shift 5
    load_run "$RUN/out/$case.$LOAD_TARGET.$rep.txt" "$@"
    load_record "$tool" "$kind" "$case" "$rep"
}

# wrk_cmd C URL [more wrk args]: the pinned wrk command line, in WRK.
wrk_cmd() {
    local c=$1 url=$2; shift 2
    WRK=(taskset -c "$LOAD_CPU" wrk -t1 "-c$c" "-d${DURATION}s" --latency "$url" "$@")
}

# run_case TARGET CASE REP
run_case() {
    local t=$1 case=$2 rep=$3 port=${TPORT[$1]}
    local base="http://127.0.0.1:$port"
    case $case in
        hit-*)
            local path c=${case##*-c}
            path=$(case_path "$case")
            prime "$t" "$path"
            wrk_cmd "$c" "$base$path"
            measure wrk hit "$case" "$t" "$rep" "${WRK[@]}"
            ;;
        close-*)
            local path c=${case##*-c}
            path=$(case_path "$case")
            prime "$t" "$path"
            wrk_cmd "$c" "$base$path" -H 'Connection: close'
            measure wrk close "$case" "$t" "$rep" "${WRK[@]}"
            ;;
        miss-full-* | miss-vary-*)
            local c=${case##*-c} path=/u/ vary=()
            [[ $case == miss-vary-* ]] && path=/v/ vary=(-H 'Accept-Encoding: gzip')
            ensure_full "$t"
            wrk_cmd "$c" "$base/" -s "$TOOLS/miss.lua" "${vary[@]}" -- "$RUN_ID-$t-$rep" "$path"
            measure wrk miss "$case" "$t" "$rep" "${WRK[@]}"
            ;;
        miss-*)
            local c=${case##*-c}
            wrk_cmd "$c" "$base/" -s "$TOOLS/miss.lua" -- "$RUN_ID-$t-$rep"
            measure wrk miss "$case" "$t" "$rep" "${WRK[@]}"
            ;;
        nostore-*)
            local c=${case##*-c}
            ensure_full "$t"
            wrk_cmd "$c" "$base/ns/page"
            measure wrk miss "$case" "$t" "$rep" "${WRK[@]}"
            ;;
        mix50-*)
            local c=${case##*-c}
            ensure_full "$t"
            wrk_cmd "$c" "$base/" -s "$TOOLS/mix.lua" -- "$RUN_ID-$t-$rep"
            measure wrk mix "$case" "$t" "$rep" "${WRK[@]}"
            ;;
        ab-*)
            local path keep=()
            path=$(case_path "$case")
            [[ $case == *-k ]] && keep=(-k)
            prime "$t" "$path"
            measure ab ab "$case" "$t" "$rep" \
                taskset -c "$LOAD_CPU" ab -q "${keep[@]}" -c 10 -n 100000 "$base$path"
            ;;
        idle) run_idle "$t" "$rep" ;;
        *) warn "unknown case $case" ;;
    esac
}

# settled_rss PID FIRST: the RSS once it stops changing (two samples 1 s apart within 1%, at
# most 15 s). Idle connections are a steady state: a target that frees per-connection memory a
# moment after the client goes quiet (Sepia parks a connection after 1 s; allocators return
# freed pages after their decay time) is measured once that has happened, every target alike.
settled_rss() {
    local pid=$1 prev=$2 cur i
    for ((i = 0; i < 15; i++)); do
        sleep 1
        cur=$(rss_of "$pid")
        if ((cur * 100 >= prev * 99 && cur * 100 <= prev * 101)); then break; fi
        prev=$cur
    done
    echo "$cur"
}

# run_idle TARGET REP: restart the target fresh, hold IDLE_CONNS keep-alive connections (one
# request each), record RSS growth per connection, and run wrk -c100 on the 1 KiB hit meanwhile.
run_idle() {
    local t=$1 rep=$2 port=${TPORT[$1]} ready="$RUN/idle.ready" idle_pid rss0 rss1 rss_1s ok held
    stop_target "$t"
    if ! start_target "$t"; then
        warn "$t did not restart for the idle case: $FAIL_REASON"
        meta note "$t: idle case rep $rep skipped: restart failed ($FAIL_REASON)"
        return 1
    fi
    prime "$t" /1k
    sleep 1
    rss0=$(rss_of "${TPID[$t]}")
    rm -f "$ready"
    launch "$LOAD_CPU" "$RUN/idle.log" python3 "$TOOLS/idle_clients.py" --port "$port" \
        --path /1k --n "$IDLE_CONNS" --ready-file "$ready"
    idle_pid=$LAUNCHED_PID
    local deadline=$((SECONDS + 180))
    while [[ ! -s $ready ]] && alive "$idle_pid" && ((SECONDS < deadline)); do sleep 0.5; done
    if [[ ! -s $ready ]]; then
        warn "$t: idle client did not finish opening connections"
        meta note "$t: idle case rep $rep: the idle client never finished ($(tail -c 300 "$RUN/idle.log"))"
        stop_tree "$idle_pid"
        return 1
    fi
    sleep 1
    rss_1s=$(rss_of "${TPID[$t]}")
    rss1=$(settled_rss "${TPID[$t]}" "$rss_1s")
    ok=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ok"])' "$ready")
    wrk_cmd 100 "http://127.0.0.1:$port/1k"
    LOAD_TARGET=$t
    load_run "$RUN/out/idle.$t.$rep.txt" "${WRK[@]}"
    held=$(ss -Htn state established "( sport = :$port )" | wc -l)
    load_record wrk idle idle "$rep" --extra "idle_ok=$ok" --extra "rss_before=$rss0" \
        --extra "rss_after=$rss1" --extra "rss_after_1s=$rss_1s" --extra "rss_per_conn=$(((rss1 - rss0) / (ok > 0 ? ok : 1)))" \
        --extra "held_after=$held"
    log "  $t idle: $ok connections opened ($(cat "$ready")), RSS $rss0 -> $rss1 B, $held still held after wrk"
    stop_tree "$idle_pid"
}
