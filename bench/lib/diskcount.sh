# bench/disk.sh count: instructions (callgrind) per 4 KiB disk hit and per memory hit, the
# repeatable counterpart of `hitcost` (whose CPU-µs move with the machine's load). Sourced by
# disk.sh, which provides start_origin, sepia_config, start_sepia and the options.
#
# 1. A Sepia without valgrind, memory large, fetches /s/4k/<p>-0 .. -(P+H-1) twice each
#    (the second time a memory hit: the object earned its disk place) and stops cleanly:
#    `close` writes the earned objects and checkpoints.
# 2. The same disk under callgrind, memory COUNT_MEMORY (2 MiB: ~380 such objects): the
#    first P objects are disk hits that fill memory, so every counted disk hit after them
#    promotes into a full memory and evicts, as in the steady state of `hitcost`.
# 3. Counted (callgrind_control -z, the requests, -d): H disk hits of objects P .. P+H-1,
#    one keep-alive connection, one request at a time; then H memory hits of the last one.
# The page cache holds the segments (just written), so every disk hit is read by the worker
# (`preadv2 RWF_NOWAIT`); callgrind counts user space only (not the kernel's copy).
COUNT_MEMORY=2MiB COUNT_PRIME=800 COUNT_HITS=2000

count_bench() {
    local dir=$DISK_ROOT/count-4k prefix=c$RANDOM pid out ir_disk ir_mem
    local total=$((COUNT_PRIME + COUNT_HITS))
    local seq=(taskset -c "$LOAD_CPU" python3 "$BENCH_DIR/tools/seqclient.py" --port "$PORT" --dir s/4k --unique "$prefix")
    start_origin
    rm -rf "$dir" "$RUN/count"
    sepia_config count-fill "$PORT" 64MiB "$dir" 256MiB
    start_sepia count-fill "$PORT"
    log "count: filling $total objects of 4 KiB, each twice"
    "${seq[@]}" --n "$total" > /dev/null || { warn "fill failed"; exit 1; }
    "${seq[@]}" --n "$total" > /dev/null || { warn "fill failed"; exit 1; }
    stop_tree "$SEPIA_PID" 60
    grep -h "wrote the earned" "$RUN/count-fill/stderr.log" | tail -1 >&2
    sepia_config count "$PORT" "$COUNT_MEMORY" "$dir" 256MiB
    mkdir -p "$RUN/count"
    out=$RUN/count/cg.out
    launch "$TARGET_CPU" "$RUN/count/valgrind.log" env SEPIA_LOG=warn valgrind --tool=callgrind \
        --callgrind-out-file="$out" "$SEPIA_BIN" --config "$RUN/count/sepia.toml"
    pid=$LAUNCHED_PID
    wait_listen "$pid" "$PORT" 120 || { warn "sepia under valgrind did not listen"; exit 1; }
    "${seq[@]}" --n "$COUNT_PRIME" > /dev/null || { warn "priming failed"; exit 1; }
    callgrind_control -z "$pid" > /dev/null
    "${seq[@]}" --n "$COUNT_HITS" --first "$COUNT_PRIME" > /dev/null || { warn "disk hits failed"; exit 1; }
    callgrind_control -d "$pid" > /dev/null
    local last=/s/4k/$prefix-$((total - 1))
    taskset -c "$LOAD_CPU" python3 "$BENCH_DIR/tools/seqclient.py" --port "$PORT" --path "$last" --n 10 > /dev/null
    callgrind_control -z "$pid" > /dev/null
    taskset -c "$LOAD_CPU" python3 "$BENCH_DIR/tools/seqclient.py" --port "$PORT" --path "$last" --n "$COUNT_HITS" > /dev/null
    callgrind_control -d "$pid" > /dev/null
    stop_tree "$pid" 60
    ir_disk=$(python3 "$TOOLS/counts.py" ir "$out.1")
    ir_mem=$(python3 "$TOOLS/counts.py" ir "$out.2")
    log "count: access log $(codes "$RUN/count/access.log")"
    python3 - "$ir_disk" "$ir_mem" "$COUNT_HITS" <<'PY' | tee -a "$RESULTS"
import json, sys
disk, mem, n = (int(a) for a in sys.argv[1:])
print(json.dumps({"case": "count-4k", "hits": n, "ir_per_disk_hit": round(disk / n),
                  "ir_per_memory_hit": round(mem / n), "ratio": round(disk / mem, 3)}))
PY
    rm -rf "$dir"
}
