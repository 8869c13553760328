# `bench/disk.sh peers`: Sepia's disk tier against nginx proxy_cache, Squid rock and Traffic
# Server on the same content (sourced by disk.sh; see bench/README.md, "Disk tier"). Per
# target: an empty-cache start (memory baseline), a fill of N objects of 1-4 KiB through it
# with the origin up, a clean stop, the origin stopped, a start that asks for nothing and
# reads the memory once the index is complete (`index`), then REPS pairs of timed starts
# (tools/disk_peer_restart.py): `clean-R` (after a SIGTERM) ended by kill -9, `crash-R`
# (after that kill -9) ended by SIGTERM. Configs: peers/disk/ (templates from
# ../shared/peers/perf with a disk cache each). With --interleave every target is filled
# first and their timed starts then alternate (clean-1 and crash-1 of each target, then
# rep 2, ...): the machine's minute-to-minute changes fall on all targets alike.

# peers_render TEMPLATE OUT NAME DIR: render plus the disk placeholders.
peers_render() {
    render "$1" "$2.tmp" "$PORT" "$3"
    sed -e "s#@DIR@#$4#g" -e "s#@DISK_MB@#$PEER_DISK_MB#g" -e "s#@MEM_MB@#$PEER_MEM_MB#g" \
        -e "s#@MEM_BYTES@#$((PEER_MEM_MB << 20))#g" -e "s#@MEM@#${PEER_MEM_MB}MiB#g" \
        -e "s#@DIRSIZE@#${PEER_DISK_MB}MiB#g" -e "s#@THREADS@#$READ_THREADS#g" -e "s#@DISKIO@#$DISK_IO#g" -e '/disk_io = ""/d' \
        -e "s#@RINGDEPTH@#$RING_DEPTH#g" -e '/disk_ring_depth = $/d' \
        -e "s#@ADMISSION@#$DISK_ADMISSION#g" -e '/admission = ""/d' "$2.tmp" > "$2"
    rm "$2.tmp"
}

# peers_prepare TARGET DIR: fresh run directory and empty cache for TARGET; sets PEER_CMD
# (argv), PEER_LOG (its stdout+stderr), PEER_DONE (disk_peer_restart.py's "index
# complete" options) and PEER_TIMED_DONE (the same for the timed starts: none for nginx,
# whose hits do not wait for its loader, a minute and more at 1M objects per start).
peers_prepare() {
    local t=$1 cache=$2 d=$RUN/${1}disk f
    rm -rf "$d" "$cache"
    mkdir -p "$d"
    PEER_LOG=$d/stderr.log
    case $t in
        sepia)
            peers_render "$BENCH_DIR/peers/disk/sepia.toml" "$d/sepia.toml" sepiadisk "$cache"
            "$SEPIA_BIN" --config "$d/sepia.toml" check > /dev/null ;;
        nginx)
            mkdir -p "$d/tmp" "$cache"
            peers_render "$BENCH_DIR/peers/disk/nginx.conf" "$d/nginx.conf" nginxdisk "$cache" ;;
        squid)
            mkdir -p "$cache"
            peers_render "$BENCH_DIR/peers/disk/squid.conf" "$d/squid.conf" squiddisk "$cache"
            chown -R proxy:proxy "$d" "$cache"
            squid -z -N -n "sepiadisk$PORT" -f "$d/squid.conf" >> "$PEER_LOG" 2>&1 ;;
        ats)
            mkdir -p "$d/etc" "$d/var" "$d/run" "$d/log" "$d/data" "$cache"
            cp -r /etc/trafficserver/. "$d/etc/"
            for f in ip_allow.yaml logging.yaml remap.config; do
                render "$BENCH_DIR/peers/ats/$f" "$d/etc/$f" "$PORT"
            done
            peers_render "$BENCH_DIR/peers/disk/ats/records.config" "$d/etc/records.config" atsdisk "$cache"
            peers_render "$BENCH_DIR/peers/disk/ats/storage.config" "$d/etc/storage.config" atsdisk "$cache"
            render "$BENCH_DIR/peers/ats/runroot.yaml" "$d/runroot.yaml.tmp" "$PORT"
            sed "s#$RUN/ats#$d#g" "$d/runroot.yaml.tmp" > "$d/runroot.yaml"; rm "$d/runroot.yaml.tmp"
            chown -R trafficserver:trafficserver "$d" "$cache" ;;
        *) echo "unknown target $t (sepia, nginx, squid, ats)" >&2; exit 2 ;;
    esac
    peers_command "$t"
}

# peers_command TARGET: PEER_CMD, PEER_LOG, PEER_DONE and PEER_TIMED_DONE for TARGET's run
# directory as peers_prepare made it (again before each of its starts when interleaved).
peers_command() {
    local t=$1 d=$RUN/${1}disk
    PEER_LOG=$d/stderr.log
    PEER_TIMED_DONE=(unset)  # an array assignment: a plain one would keep the previous target's other elements
    case $t in
        sepia)
            # Its environment comes from peers_start, not from `env`: an exec of /usr/bin/env
            # before Sepia's was ~1 ms of every timed start that the peers did not pay.
            PEER_CMD=("$SEPIA_BIN" --config "$d/sepia.toml")
            PEER_DONE=(--done-log "$PEER_LOG" --done-regex 'disk cache index loaded') ;;
        nginx)
            PEER_CMD=(nginx -p "$d/" -c "$d/nginx.conf" -g 'daemon off;')
            PEER_DONE=(--done-gone 'cache loader')
            PEER_TIMED_DONE=() ;;
        squid)
            PEER_CMD=(squid --foreground -n "sepiadisk$PORT" -f "$d/squid.conf")
            # the disker's line (kid1 the worker, kid2 the disker, kid3 the coordinator): the
            # worker logs its own "Finished rebuilding" at once, having nothing to scan
            PEER_DONE=(--done-log "$d/cache.log" --done-regex 'kid2\| Finished rebuilding storage from disk') ;;
        ats)
            PEER_CMD=(traffic_server --run-root="$d/runroot.yaml")
            PEER_DONE=() ;;
    esac
    [[ ${PEER_TIMED_DONE[*]-} == unset ]] && PEER_TIMED_DONE=("${PEER_DONE[@]}")
    return 0
}

# peers_sample FILE: 1,000 stored paths, a seeded random choice (not the first ones filled:
# a rebuild that scans in write order would find those first).
peers_sample() {
    python3 -c "
import random, sys
n = int(sys.argv[1]); r = random.Random(21)
for i in r.sample(range(n), min(1000, n)): print(f'/d/p-{i}')" "$OBJECTS" > "$1"
}

# peers_start ARGS...: disk_peer_restart.py over PEER_CMD; prints its JSON line.
peers_start() {
    SEPIA_LOG=info NO_COLOR=1 python3 "$BENCH_DIR/tools/disk_peer_restart.py" --port "$PORT" --log "$PEER_LOG" \
        --cpu "$TARGET_CPU" "$@" -- "${PEER_CMD[@]}"
}

# peers_fill TARGET: an empty start, the fill, a clean stop and the `index` start; the cache
# stays for the timed starts.
peers_fill() {
    local t=$1 cache=$DISK_ROOT/peer-$1 sample=$RUN/sample.txt out pid secs
    if ((REUSE)) && [[ -e $RUN/${t}disk/kept && -e $sample ]]; then
        # the same objects, the same sample: only the timed starts run again (with this
        # run's binary for Sepia); the fill's lines are in the kept run's results
        [[ $(cat "$RUN/${t}disk/kept") == "$OBJECTS" ]] || { warn "$t: kept cache is not of $OBJECTS objects"; exit 1; }
        log "== $t: reusing the kept cache of $OBJECTS objects ($cache)"
        return 0
    fi
    log "== $t: $OBJECTS objects, disk budget ${PEER_DISK_MB} MiB, memory ${PEER_MEM_MB} MiB"
    peers_prepare "$t" "$cache"
    peers_sample "$sample"
    # a stale origin on the port would answer the timed starts' misses (and they would store)
    port_busy "$ORIGIN_PORT" && { warn "port $ORIGIN_PORT (origin) is busy"; exit 1; }
    start_origin
    out=$(peers_start --sample '' --then keep --settle 3)
    pid=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["pid"])' "$out")
    STARTED+=("$pid")
    echo "{\"target\":\"$t\",\"case\":\"empty\",\"objects\":$OBJECTS,\"r\":$out}" | tee -a "$RESULTS"
    log "$t: filling (each URL twice, $FILL_CONNS connections)"
    secs=$(printf "%.1f" "$(fill "$PORT" /d/p- "$OBJECTS")")
    log "$t fill: $secs s; $(grep -E 'requests in|Requests/sec|Non-2xx|Socket errors' "$RUN/fill-wrk.txt" | tr -s ' ' | tr '\n' ' ')"
    sleep 3
    # Traffic Server writes its directory every 60 s (proxy.config.cache.dir.sync_frequency):
    # wait for one, so that every target restarts over its whole fill
    [[ $t == ats ]] && { log "ats: waiting ${ATS_SYNC_WAIT} s for the directory sync"; sleep "$ATS_SYNC_WAIT"; }
    local rss; rss=$(rss_of "$pid")
    [[ $t == squid && -e $RUN/squiddisk/access.log ]] && log "squid fill access log: $(codes "$RUN/squiddisk/access.log")"
    [[ $t == sepia && -e $RUN/sepiadisk/access.log ]] && log "sepia fill access log: $(codes "$RUN/sepiadisk/access.log")"
    stop_tree "$pid" 120 || true  # not our child: `wait` fails
    stop_tree "$ORIGIN_PID" || true
    port_busy "$ORIGIN_PORT" && { warn "the origin still listens on $ORIGIN_PORT"; exit 1; }
    # after the stop: Sepia writes the earned objects still in memory then
    local used; used=$(du -sB1 "$cache" | cut -f1)  # allocated, not apparent (sparse files)
    local files; files=$(find "$cache" -type f | wc -l)
    echo "{\"target\":\"$t\",\"case\":\"fill\",\"objects\":$OBJECTS,\"seconds\":$secs,\"rss\":$rss,\"disk_bytes\":$used,\"files\":$files}" | tee -a "$RESULTS"
    # memory with the whole index loaded and nothing asked for (the timed starts below read
    # 1,000 objects from disk, which every target then keeps in its memory tier)
    out=$(peers_start --sample '' "${PEER_DONE[@]}" --then term --settle 2 --timeout "$PEER_TIMEOUT")
    echo "{\"target\":\"$t\",\"case\":\"index\",\"objects\":$OBJECTS,\"r\":$out}" | tee -a "$RESULTS"
}

# peers_page_in: read PEER_CMD's executable, its shared libraries and taskset into the page
# cache (unless --no-page-in). This machine (a Firecracker VM) runs DAMON proactive reclaim:
# a kdamond pages out file pages that no process maps once they have looked unused for about
# a minute (/sys/kernel/mm/damon/admin/kdamonds/0: action pageout, filter `unmapped`, min age
# 12 x 5 s). A target that ran last minutes ago (the first timed start after another
# target's fill) then reads its executable from disk at exec: 13-18 ms more for Sepia and for
# nginx alike (measured 2026-11-28, bench/RESULTS.md), which falls on whichever target the
# order makes wait. A restart on a machine without such reclaim finds them in memory; the
# cache's own files (index, checkpoint, objects) are left as the stop left them.
peers_page_in() {
    ((PAGE_IN)) || return 0
    local exe f
    exe=$(command -v "${PEER_CMD[0]}")
    for f in "$exe" $(ldd "$exe" 2> /dev/null | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }') "$(command -v taskset)"; do
        cat "$f" > /dev/null
    done
}

# peers_timed TARGET REP: the rep's two timed starts, `clean-REP` (after a clean stop, ended
# by kill -9) and `crash-REP` (after that kill -9, ended by SIGTERM).
peers_timed() {
    local t=$1 rep=$2 sample=$RUN/sample.txt out
    peers_command "$t"
    peers_page_in
    out=$(peers_start --sample "$sample" "${PEER_TIMED_DONE[@]}" --then kill --timeout "$PEER_TIMEOUT")
    echo "{\"target\":\"$t\",\"case\":\"clean-$rep\",\"objects\":$OBJECTS,\"r\":$out}" | tee -a "$RESULTS"
    peers_page_in
    out=$(peers_start --sample "$sample" "${PEER_TIMED_DONE[@]}" --then term --timeout "$PEER_TIMEOUT")
    echo "{\"target\":\"$t\",\"case\":\"crash-$rep\",\"objects\":$OBJECTS,\"r\":$out}" | tee -a "$RESULTS"
}

peers_done() {
    local t=$1 cache=$DISK_ROOT/peer-$1
    log "$t: disk at the end $(du -sh "$cache" | cut -f1)"
    if ((KEEP)); then
        echo "$OBJECTS" > "$RUN/${t}disk/kept"
        log "$t: cache kept for --reuse ($cache, $RUN/${t}disk)"
    else
        rm -rf "$cache" "$RUN/${t}disk/kept"
    fi
}

peers_bench() {
    local t rep
    PEER_DISK_MB=${PEER_DISK_MB:-$((OBJECTS * 6 / 1000 < 256 ? 256 : OBJECTS * 6 / 1000))}
    if ((REUSE)) && [[ -e $RESULTS ]]; then
        # the report reads one run: the kept fills' lines, then this run's timed starts
        local old; old=$RUN/results.$(date +%H%M%S).jsonl
        mv "$RESULTS" "$old"
        grep -E '"case":"(empty|fill|index)"' "$old" > "$RESULTS" || true
        log "earlier results moved to $old"
    fi
    if ((INTERLEAVE)); then
        for t in ${TARGETS//,/ }; do
            peers_fill "$t"
        done
        for ((rep = 1; rep <= REPS; rep++)); do
            for t in ${TARGETS//,/ }; do
                peers_timed "$t" "$rep"
            done
        done
        for t in ${TARGETS//,/ }; do
            peers_done "$t"
        done
    else
        for t in ${TARGETS//,/ }; do
            peers_fill "$t"
            for ((rep = 1; rep <= REPS; rep++)); do
                peers_timed "$t" "$rep"
            done
            peers_done "$t"
        done
    fi
    python3 "$BENCH_DIR/tools/disk_peer_report.py" "$RESULTS"
}
