#!/usr/bin/env bash
# bench/disk.sh: Sepia's disk tier (issue 21). See bench/README.md, "Disk tier".
#
#   bench/disk.sh restart [--objects N] [--memory SIZE] [--dir-size SIZE] [--reps R]
#   bench/disk.sh hitcost [--sizes 4k,64k] [--reps R] [--duration S] [--conns C]
#                         [--hit-objects N] [--hit-disk-size SIZE] [--fill-gap G] [--nginx]
#                         [--hit-memory SIZE]
#   bench/disk.sh cold [--sizes 4k,64k] [--hit-objects N] [--duration S] [--conns C]
#                      [--hit-disk-size SIZE] [--fill-gap G]  (root: writes /proc/sys/vm/drop_caches;
#                      COLD_PERF=FILE in the environment: perf record -g of Sepia's core during cold-once;
#                      COLD_STAT=FILE: perf stat of its syscalls and context switches, COLD_STAT_EVENTS)
#                      [--floor]  (also tools/coldfloor.c after each cold-once run: the floor)
#   bench/disk.sh count   [--cg-hits N] [--cg-prime N]  (callgrind: Ir per 4 KiB disk hit and memory hit)
#   bench/disk.sh peers   [--objects N] [--targets sepia,nginx,squid,ats] [--reps R]
#                         [--fill-conns C] [--peer-memory-mb M] [--peer-disk-mb D]
#                         [--interleave]  (fill every target first, then alternate their timed starts)
#                         [--keep]  (leave the filled caches and run directories for a --reuse run)
#                         [--reuse]  (a kept target's fill is not redone: only its timed starts run)
#                         [--no-page-in]  (do not read each target's executable and libraries before a timed start)
#   common: [--sepia-bin PATH] [--disk-root DIR] [--port P] [--read-threads N] (cache.disk_read_threads)
#           [--ring-depth N] (cache.disk_ring_depth; not set: Sepia's default)
#           [--disk-io threads|io_uring|''] (cache.disk_io; '': not set, for binaries before it)
#           [--disk-admission fill|earned] ([[cache.disk]] admission; default: not set)
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
RUN=${DISK_RUN:-$BENCH_DIR/run-disk}  # DISK_RUN: a second run beside another
source "$BENCH_DIR/lib/common.sh"
source "$BENCH_DIR/lib/diskpeers.sh"
source "$BENCH_DIR/lib/diskcount.sh"

MODE=${1:-}; shift || true
OBJECTS=100000 MEMORY=32MiB DIR_SIZE=2GiB REPS=3 DURATION=10 CONNS=64 SIZES=4k,64k
FILL_THREADS=2 FILL_CONNS=16 FILL_GAP=200 NGINX=0 FLOOR=0 HIT_MEMORY=16MiB HIT_OBJECTS= HIT_DISK_SIZE=2GiB
TARGETS=sepia,nginx,squid,ats PEER_MEM_MB=16 PEER_DISK_MB= PEER_TIMEOUT=1500 ATS_SYNC_WAIT=65 INTERLEAVE=0 KEEP=0 REUSE=0 PAGE_IN=1
SEPIA_BIN=${CARGO_TARGET_DIR:-$BENCH_DIR/../target}/release/sepia
DISK_ROOT=/var/tmp/sepia-dbench
ORIGIN_PORT=18480 PORT=18481 READ_THREADS=16 DISK_IO=io_uring DISK_ADMISSION= RING_DEPTH=
COLD_STAT_EVENTS=${COLD_STAT_EVENTS:-raw_syscalls:sys_enter,syscalls:sys_enter_writev,syscalls:sys_enter_sendto,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_write,syscalls:sys_enter_futex,syscalls:sys_enter_read,syscalls:sys_enter_recvfrom,context-switches,page-faults}
while (($#)); do
    case $1 in
        --objects) OBJECTS=$2; shift ;;
        --memory) MEMORY=$2; shift ;;
        --dir-size) DIR_SIZE=$2; shift ;;
        --reps) REPS=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        --conns) CONNS=$2; shift ;;
        --sizes) SIZES=$2; shift ;;
        --hit-objects) HIT_OBJECTS=$2; shift ;;
        --fill-gap) FILL_GAP=$2; shift ;;
        --nginx) NGINX=1 ;;
        --floor) FLOOR=1 ;;
        --hit-memory) HIT_MEMORY=$2; shift ;;
        --hit-disk-size) HIT_DISK_SIZE=$2; shift ;;
        --targets) TARGETS=$2; shift ;;
        --interleave) INTERLEAVE=1 ;;
        --keep) KEEP=1 ;;
        --reuse) REUSE=1 ;;
        --no-page-in) PAGE_IN=0 ;;
        --fill-conns) FILL_CONNS=$2; shift ;;
        --peer-memory-mb) PEER_MEM_MB=$2; shift ;;
        --peer-disk-mb) PEER_DISK_MB=$2; shift ;;
        --sepia-bin) SEPIA_BIN=$2; shift ;;
        --read-threads) READ_THREADS=$2; shift ;;
        --ring-depth) RING_DEPTH=$2; shift ;;
        --disk-io) DISK_IO=$2; shift ;;
        --disk-admission) DISK_ADMISSION=$2; shift ;;
        --cg-hits) COUNT_HITS=$2; shift ;;
        --cg-prime) COUNT_PRIME=$2; shift ;;
        --disk-root) DISK_ROOT=$2; shift ;;
        --port) PORT=$2; ORIGIN_PORT=$(($2 - 1)); shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
[[ $MODE == restart || $MODE == hitcost || $MODE == cold || $MODE == peers || $MODE == count ]] || { sed -n 2,12p "$0"; exit 2; }
[[ -x $SEPIA_BIN ]] || { echo "no Sepia binary at $SEPIA_BIN (build with cargo build --release -p sepia or pass --sepia-bin)" >&2; exit 1; }
trap cleanup EXIT
raise_fd_limit
mkdir -p "$RUN" "$DISK_ROOT"
RESULTS=$RUN/results.jsonl

start_origin() {
    local dir=$RUN/origin
    mkdir -p "$dir/tmp" "$RUN/www"
    head -c 4096 /dev/zero | tr '\0' 'a' > "$RUN/www/4k"
    head -c 65536 /dev/zero | tr '\0' 'b' > "$RUN/www/64k"
    head -c 1048576 /dev/zero | tr '\0' 'c' > "$RUN/www/1m"
    local k
    for k in 1 2 3 4; do head -c $((k * 1024)) /dev/zero | tr '\0' 'd' > "$RUN/www/d$k"; done
    chmod -R a+rX "$RUN/www"
    render "$BENCH_DIR/peers/disk/origin.nginx.conf" "$dir/nginx.conf" "$ORIGIN_PORT"
    launch "$LOAD_CPU" "$dir/stderr.log" nginx -p "$dir/" -c "$dir/nginx.conf" -g 'daemon off;'
    ORIGIN_PID=$LAUNCHED_PID
    wait_ready "$ORIGIN_PID" "$ORIGIN_PORT" /t/probe 15 || { warn "origin did not start"; exit 1; }
    pin_tree "$ORIGIN_PID" "$LOAD_CPU"
}

# sepia_config NAME PORT MEM DIR DIRSIZE: write $RUN/NAME/sepia.toml (fresh access log).
sepia_config() {
    local name=$1 dir=$RUN/$1
    mkdir -p "$dir"; rm -f "$dir/access.log"
    render "$BENCH_DIR/peers/disk/sepia.toml" "$dir/sepia.toml.tmp" "$2" "$name"
    sed -e "s#@MEM@#$3#g" -e "s#@DIR@#$4#g" -e "s#@DIRSIZE@#$5#g" -e "s#@THREADS@#$READ_THREADS#g" -e "s#@DISKIO@#$DISK_IO#g" -e '/disk_io = ""/d' \
        -e "s#@RINGDEPTH@#$RING_DEPTH#g" -e '/disk_ring_depth = $/d' \
        -e "s#@ADMISSION@#$DISK_ADMISSION#g" -e '/admission = ""/d' "$dir/sepia.toml.tmp" > "$dir/sepia.toml"
    rm "$dir/sepia.toml.tmp"
    "$SEPIA_BIN" --config "$dir/sepia.toml" check > /dev/null
}

# start_sepia NAME PORT: launch on the target CPU with SEPIA_LOG=info; sets SEPIA_PID.
start_sepia() {
    local dir=$RUN/$1
    launch "$TARGET_CPU" "$dir/stderr.log" env SEPIA_LOG=info NO_COLOR=1 "$SEPIA_BIN" --config "$dir/sepia.toml"
    SEPIA_PID=$LAUNCHED_PID
    wait_listen "$SEPIA_PID" "$2" 30 || { warn "sepia $1 did not start: $(tail -3 "$dir/stderr.log")"; exit 1; }
    pin_tree "$SEPIA_PID" "$TARGET_CPU"
}

# fill PORT BASE N: every URL BASE0..BASE(N-1) twice (tools/disk_fill.lua); prints seconds.
fill() {
    local port=$1 base=$2 n=$3 done=$RUN/fill-done t0 wpid
    rm -f "$done"-*
    t0=$(date +%s.%N)
    taskset -c "$LOAD_CPU" wrk -t"$FILL_THREADS" -c"$FILL_CONNS" -d 36000 -s "$BENCH_DIR/tools/disk_fill.lua" \
        "http://127.0.0.1:$port" -- "$base" "$n" "$FILL_THREADS" "$done" "$FILL_GAP" > "$RUN/fill-wrk.txt" 2>&1 &
    wpid=$!
    STARTED+=("$wpid")
    while alive "$wpid"; do
        local k=0 i
        for ((i = 1; i <= FILL_THREADS; i++)); do [[ -e $done-$i ]] && k=$((k + 1)); done
        ((k == FILL_THREADS)) && break
        sleep 0.5
    done
    kill -INT "$wpid" 2> /dev/null || true
    wait "$wpid" 2> /dev/null || true
    echo "$(date +%s.%N) - $t0" | bc
}

# codes FILE [FROM_LINE]: result-code counts of a squid access log (from line FROM on).
codes() {
    tail -n +"${2:-1}" "$1" | awk '{ split($4, a, "/"); c[a[1]]++ } END { for (k in c) printf "%s=%d ", k, c[k]; print "" }'
}

restart_bench() {
    local dir=$DISK_ROOT/restart empty=$DISK_ROOT/empty probe rep out secs
    start_origin
    log "empty-disk baseline RSS"
    rm -rf "$empty"
    sepia_config empty "$PORT" "$MEMORY" "$empty" "$DIR_SIZE"
    out=$(python3 "$BENCH_DIR/tools/disk_restart.py" --bin "$SEPIA_BIN" --config "$RUN/empty/sepia.toml" \
        --stderr "$RUN/empty/stderr.log" --port "$PORT" --path '' --settle 2)
    echo "{\"case\":\"empty\",\"objects_requested\":$OBJECTS,\"r\":$out}" | tee -a "$RESULTS"
    rm -rf "$dir"
    sepia_config fill "$PORT" "$MEMORY" "$dir" "$DIR_SIZE"
    start_sepia fill "$PORT"
    log "filling $OBJECTS objects, each twice (memory $MEMORY, disk $DIR_SIZE)"
    secs=$(fill "$PORT" /t/r- "$OBJECTS")
    sleep 3
    log "fill: $secs s; $(grep -E 'requests in|Requests/sec' "$RUN/fill-wrk.txt" | tr -s ' ' | tr '\n' ' ')"
    log "fill access log: $(codes "$RUN/fill/access.log")"
    rm -f "$RUN/fill/access.log"
    log "disk: $(du -sh "$dir" | cut -f1), $(ls "$dir" | grep -c seg) segments; RSS $(rss_of "$SEPIA_PID")"
    echo "{\"case\":\"fill\",\"objects_requested\":$OBJECTS,\"seconds\":$secs,\"rss\":$(rss_of "$SEPIA_PID"),\"disk_bytes\":$(du -sb "$dir" | cut -f1)}" >> "$RESULTS"
    # an early URL of thread 1: long evicted from memory, so on disk if anything is
    probe=$(seq -s, -f "/t/r-%.0f" $((FILL_THREADS * 100)) 7 $((FILL_THREADS * 100 + 7 * 199)))
    log "kill -9 the filling Sepia 3 s after the fill"
    kill -KILL "$SEPIA_PID"; wait "$SEPIA_PID" 2> /dev/null || true
    run_one() {  # CASE THEN
        sepia_config "$1" "$PORT" "$MEMORY" "$dir" "$DIR_SIZE"
        out=$(python3 "$BENCH_DIR/tools/disk_restart.py" --bin "$SEPIA_BIN" --config "$RUN/$1/sepia.toml" \
            --stderr "$RUN/$1/stderr.log" --port "$PORT" --path "$probe" --then "$2")
        log "$1: checksum warnings: $(grep -c "failed its checksum" "$RUN/$1/stderr.log")"
        echo "{\"case\":\"$1\",\"objects_requested\":$OBJECTS,\"access\":\"$(codes "$RUN/$1/access.log")\",\"r\":$out}" | tee -a "$RESULTS"
    }
    run_one crash-after-fill term
    for ((rep = 1; rep <= REPS; rep++)); do
        run_one "clean-$rep" kill
        run_one "crash-$rep" term
    done
    log "disk at the end: $(du -sh "$dir" | cut -f1)"
    rm -rf "$dir"
}

# one_run NAME PORT BASE N PID: a measured run of wrk with $WRK_SCRIPT (uniform random
# requests over the N objects unless a case says otherwise); appends a JSON record, and with
# DEPTH_NAME set, the device's record over wrk's run (depth_start).
WRK_SCRIPT=disk_uniform.lua
one_run() {
    local name=$1 port=$2 base=$3 n=$4 pid=$5 c0 c1 l0 req logname=${LOG_NAME:-$1}
    local o0; o0=$(curl -s "http://127.0.0.1:$ORIGIN_PORT/nginx_status" | awk 'NR == 3 { print $3 }')
    l0=1; [[ -e $RUN/$logname/access.log ]] && l0=$(($(wc -l < "$RUN/$logname/access.log") + 1))
    local t0; t0=$(python3 "$BENCH_DIR/tools/disk_threads.py" "$pid")
    local d0; d0=$(du -sb "$DISK_ROOT/hit-$name" 2> /dev/null | cut -f1 || true); d0=${d0:-0}
    c0=$(cpu_of "$pid")
    [[ -n ${DEPTH_NAME:-} ]] && depth_start "$DEPTH_NAME"
    taskset -c "$LOAD_CPU" wrk -t2 -c"$CONNS" -d "$DURATION" -s "$BENCH_DIR/tools/$WRK_SCRIPT" \
        "http://127.0.0.1:$port" -- "$base" "$n" 2 > "$RUN/wrk-$name.txt" 2>&1
    [[ -n ${DEPTH_NAME:-} ]] && depth_stop
    c1=$(cpu_of "$pid")
    local t1; t1=$(python3 "$BENCH_DIR/tools/disk_threads.py" "$pid")
    sleep 1
    local d1; d1=$(du -sb "$DISK_ROOT/hit-$name" 2> /dev/null | cut -f1 || true); d1=${d1:-0}
    local o1; o1=$(curl -s "http://127.0.0.1:$ORIGIN_PORT/nginx_status" | awk 'NR == 3 { print $3 }')
    local threads; threads=$(python3 -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); print(json.dumps({k: round(v - a.get(k, 0), 2) for k, v in b.items() if v - a.get(k, 0) > 0.005}))' "$t0" "$t1")
    req=$(awk '/requests in/ { print $1 }' "$RUN/wrk-$name.txt")
    local rps; rps=$(awk '/Requests\/sec/ { print $2 }' "$RUN/wrk-$name.txt")
    local us; us=$(echo "scale=2; ($c1 - $c0) * 1000000 / $req" | bc)
    local cpu; cpu=$(echo "scale=1; ($c1 - $c0) * 100 / $DURATION" | bc)
    local mix="(no access log)"; [[ -e $RUN/$logname/access.log ]] && mix=$(codes "$RUN/$logname/access.log" "$l0")
    echo "{\"case\":\"$name\",\"requests\":$req,\"rps\":$rps,\"cpu_us\":$us,\"target_cpu_pct\":$cpu,\"mix\":\"$mix\",\"thread_cpu_s\":$threads,\"disk_growth_bytes\":$((d1 - d0)),\"origin_requests\":$((o1 - o0 - 1))}" | tee -a "$RESULTS"
}

hitcost_bench() {
    local size n rep memmem=1GiB
    start_origin
    for size in ${SIZES//,/ }; do
        case $size in
            4k) n=40000 ;;
            64k) n=4000 ;;
            1m) n=400 ;;
        esac
        [[ -n $HIT_OBJECTS ]] && n=$HIT_OBJECTS
        local base=/s/$size/h$RANDOM-
        rm -rf "$DISK_ROOT/hit-disk-$size" "$DISK_ROOT/hit-mem-$size"
        sepia_config "disk-$size" "$PORT" "$HIT_MEMORY" "$DISK_ROOT/hit-disk-$size" "$HIT_DISK_SIZE"
        start_sepia "disk-$size" "$PORT"; local dpid=$SEPIA_PID
        sepia_config "mem-$size" $((PORT + 1)) "$memmem" "$DISK_ROOT/hit-mem-$size" 64MiB
        start_sepia "mem-$size" $((PORT + 1)); local mpid=$SEPIA_PID
        log "$size: filling $n objects into each (disk: memory $HIT_MEMORY; mem: memory $memmem)"
        fill "$PORT" "$base" "$n" > /dev/null
        fill $((PORT + 1)) "$base" "$n" > /dev/null
        sleep 3
        log "disk-$size after the fill: $(du -sh "$DISK_ROOT/hit-disk-$size" | cut -f1)"
        log "disk-$size fill: $(codes "$RUN/disk-$size/access.log"); mem-$size fill: $(codes "$RUN/mem-$size/access.log")"
        local npid=
        if ((NGINX)); then
            local nd=$RUN/nginxcache
            rm -rf "$nd"; mkdir -p "$nd/tmp"
            render "$BENCH_DIR/peers/nginxcache.conf" "$nd/nginx.conf" $((PORT + 2))
            launch "$TARGET_CPU" "$nd/stderr.log" nginx -p "$nd/" -c "$nd/nginx.conf" -g 'daemon off;'
            npid=$LAUNCHED_PID
            wait_listen "$npid" $((PORT + 2)) 15 || { warn "nginx proxy_cache did not start"; exit 1; }
            pin_tree "$npid" "$TARGET_CPU"
            fill $((PORT + 2)) "$base" "$n" > /dev/null
            sleep 1
        fi
        log "warm-up (5 s each)"
        local D=$DURATION; DURATION=5
        one_run "disk-$size" "$PORT" "$base" "$n" "$dpid" > /dev/null
        one_run "mem-$size" $((PORT + 1)) "$base" "$n" "$mpid" > /dev/null
        [[ -n $npid ]] && one_run "nginxcache" $((PORT + 2)) "$base" "$n" "$npid" > /dev/null
        DURATION=$D
        for ((rep = 1; rep <= REPS; rep++)); do
            one_run "disk-$size" "$PORT" "$base" "$n" "$dpid"
            one_run "mem-$size" $((PORT + 1)) "$base" "$n" "$mpid"
            [[ -n $npid ]] && one_run "nginxcache" $((PORT + 2)) "$base" "$n" "$npid"
        done
        [[ -n $npid ]] && { stop_tree "$npid"; rm -rf "$RUN/nginxcache/cache"; }
        stop_tree "$dpid"; stop_tree "$mpid"
        rm -rf "$DISK_ROOT/hit-disk-$size" "$DISK_ROOT/hit-mem-$size" "$RUN/disk-$size/access.log" "$RUN/mem-$size/access.log"
    done
}

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# depth_start NAME ... depth_stop: what the device under $DISK_ROOT did meanwhile (reads/s,
# KiB per read, block-layer ms per read, reads its driver held at once), one JSON line in
# the results (tools/device_depth.py).
depth_start() {
    python3 "$BENCH_DIR/tools/device_depth.py" --path "$DISK_ROOT" --name "$1" >> "$RESULTS" &
    DEPTH_PID=$!
}
depth_stop() { kill -TERM "$DEPTH_PID" 2> /dev/null; wait "$DEPTH_PID" || true; }

# fio_randread NAME DIR BS BYTES EXTRA...: c=$CONNS random reads of BS over a file of BYTES in
# DIR (the disk tier's file system), page cache dropped first; appends a JSON record.
fio_randread() {
    local name=$1 dir=$2 bs=$3 bytes=$4; shift 4
    local f=$dir/fio.dat out iops
    # Written back before anything is measured (dropping the page cache leaves dirty pages).
    [[ -e $f ]] || { head -c "$bytes" /dev/urandom > "$f" && sync; }
    drop_caches
    depth_start "$name"
    out=$(taskset -c "$TARGET_CPU" fio --name="$name" --filename="$f" --rw=randread --bs="$bs" \
        --size="$bytes" --time_based --runtime="$DURATION" --group_reporting \
        --output-format=json "$@" 2> /dev/null)
    depth_stop
    iops=$(python3 -c 'import json,sys; print(round(json.load(sys.stdin)["jobs"][0]["read"]["iops"]))' <<< "$out")
    # fio's own CPU per read (user + system, µs): the kernel's share of any read of this size.
    local us; us=$(python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print(round((j["usr_cpu"] + j["sys_cpu"]) * 1e4 / max(j["read"]["iops"], 1), 2))' <<< "$out")
    echo "{\"case\":\"$name\",\"bs\":\"$bs\",\"file_bytes\":$bytes,\"iops\":$iops,\"cpu_us_per_read\":$us,\"args\":\"$*\"}" | tee -a "$RESULTS"
}

# floor_run SIZE BS N: tools/coldfloor.c on Sepia's CPU, answering every request with a block
# of fio's file read O_DIRECT, checksummed and sent (the floor under a cold hit); the same
# wrk run as cold-once, page cache dropped first. Records "floor-once-SIZE" (as one_run's) and
# "floor-stats-SIZE" (the reads it kept in flight on average; wrapped: blocks read twice).
floor_run() {
    local size=$1 bs=$2 n=$3 dir=$RUN/coldfloor port=$((PORT + 2))
    mkdir -p "$dir"
    cc -O2 -o "$dir/coldfloor" "$BENCH_DIR/tools/coldfloor.c" 2> "$dir/build.log" \
        || { warn "coldfloor did not build: $(tail -c 300 "$dir/build.log")"; return 0; }
    drop_caches
    launch "$TARGET_CPU" "$dir/stderr.log" "$dir/coldfloor" "$port" "$DISK_ROOT/fio.dat" "$bs"
    local pid=$LAUNCHED_PID
    wait_listen "$pid" "$port" 10 || { warn "coldfloor did not start: $(tail -3 "$dir/stderr.log")"; return 0; }
    DEPTH_NAME="floor-once-$size" WRK_SCRIPT=disk_once.lua one_run "floor-once-$size" "$port" /f/ "$n" "$pid"
    stop_tree "$pid" || true
    # Its last line: in_flight=X responses=N blocks=B wrapped=0|1 write_waits=W (see the tool).
    local stats; stats=$(grep '^coldfloor: in_flight=' "$dir/stderr.log" | tail -1 | cut -d' ' -f2-)
    [[ -n $stats ]] && echo "{\"case\":\"floor-stats-$size\",$(sed -E 's/([a-z_]+)=([0-9.]+)/"\1":\2/g; s/ /,/g' <<< "$stats")}" | tee -a "$RESULTS"
    return 0
}

# Cold page cache (issue 21): Sepia's disk hits at c=$CONNS right after the page cache is
# dropped, against fio's random reads of the same block size on the same file system. The
# file fio reads is as large as the disk tier's segments, so both warm the cache alike.
cold_bench() {
    local size n bs bytes rep
    start_origin
    for size in ${SIZES//,/ }; do
        case $size in
            4k) n=100000 bs=4k ;;
            64k) n=16000 bs=64k ;;
        esac
        [[ -n $HIT_OBJECTS ]] && n=$HIT_OBJECTS
        local base=/s/$size/c$RANDOM- dir=$DISK_ROOT/hit-cold-$size
        rm -rf "$dir"
        sepia_config "cold-$size" "$PORT" "$HIT_MEMORY" "$dir" "$HIT_DISK_SIZE"
        start_sepia "cold-$size" "$PORT"
        log "$size: filling $n objects (memory $HIT_MEMORY)"
        fill "$PORT" "$base" "$n" > /dev/null
        sleep 3
        log "cold-$size after the fill: $(du -sh "$dir" | cut -f1); $(codes "$RUN/cold-$size/access.log")"
        # A second pass stores what the first could not write (the disk's queue drops
        # demotions when the device falls behind: up to 13 % of the objects in one run),
        # so that the measured requests are disk hits, not origin misses. It reads every
        # stored object once, which marks it verified (see disk/index.rs): a restart
        # forgets that, as after any restart; the first repetition then measures first
        # reads (past the page cache), later ones partly second reads (through it).
        local l0; l0=$(($(wc -l < "$RUN/cold-$size/access.log") + 1))
        fill "$PORT" "$base" "$n" > /dev/null
        sleep 3
        bytes=$(du -sb "$dir" | cut -f1)
        log "cold-$size after the second pass: $(du -sh "$dir" | cut -f1); $(codes "$RUN/cold-$size/access.log" "$l0")"
        stop_tree "$SEPIA_PID"
        start_sepia "cold-$size" "$PORT"
        for ((rep = 1; rep <= REPS; rep++)); do
            # fio before and after Sepia's runs (the ratio is to their mean): this VM's
            # device gave 21,000-38,000 IOPS from one minute to the next (bench/RESULTS.md,
            # 2026-11-27), and one fio run after Sepia's made the ratio swing with it.
            fio_randread "fio-direct-before-$size" "$DISK_ROOT" "$bs" "$bytes" \
                --direct=1 --ioengine=libaio --iodepth="$CONNS" --numjobs=1
            # Each object at most once: every hit reads the device (the JSON's requests
            # must stay below N, or the run wrapped into the page cache).
            drop_caches
            # COLD_PERF=FILE: a `perf record -g` of Sepia's core during the first reads;
            # COLD_STAT=FILE: `perf stat` of Sepia's syscalls and context switches instead.
            local perf_pid=
            if [[ -n ${COLD_PERF:-} ]]; then
                perf record -q -g -C "$TARGET_CPU" -o "$COLD_PERF-$size-$rep" -- sleep "$DURATION" > /dev/null 2> "$COLD_PERF-$size-$rep.log" &
                perf_pid=$!
            elif [[ -n ${COLD_STAT:-} ]]; then
                perf stat -e "$COLD_STAT_EVENTS" -p "$SEPIA_PID" -o "$COLD_STAT-$size-$rep" -- sleep "$DURATION" > /dev/null 2> "$COLD_STAT-$size-$rep.log" &
                perf_pid=$!
            fi
            DEPTH_NAME="cold-once-$size" WRK_SCRIPT=disk_once.lua LOG_NAME="cold-$size" \
                one_run "cold-once-$size" "$PORT" "$base" "$n" "$SEPIA_PID"
            if [[ -n $perf_pid ]]; then
                wait "$perf_pid" || warn "perf exited with status $? (COLD_PERF / COLD_STAT)"
            fi
            ((FLOOR)) && floor_run "$size" "$bs" "$n"
            # Uniform random over the N objects: the first reads warm the page cache.
            drop_caches
            one_run "cold-$size" "$PORT" "$base" "$n" "$SEPIA_PID"
            fio_randread "fio-direct-$size" "$DISK_ROOT" "$bs" "$bytes" \
                --direct=1 --ioengine=libaio --iodepth="$CONNS" --numjobs=1
            fio_randread "fio-buffered-$size" "$DISK_ROOT" "$bs" "$bytes" \
                --direct=0 --ioengine=psync --numjobs="$CONNS"
            # at the depth of 2 blocking readers (Sepia's read threads before 16)
            fio_randread "fio-buffered-2-$size" "$DISK_ROOT" "$bs" "$bytes" \
                --direct=0 --ioengine=psync --numjobs=2
        done
        stop_tree "$SEPIA_PID"
        rm -rf "$dir" "$DISK_ROOT/fio.dat" "$RUN/cold-$size/access.log"
    done
}

meta() { :; }
case $MODE in
    restart) restart_bench ;;
    hitcost) hitcost_bench ;;
    count) count_bench ;;
    cold) cold_bench ;;
    peers) peers_bench ;;
esac
