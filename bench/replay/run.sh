#!/usr/bin/env bash
# Cache effectiveness: replay a synthetic Zipf trace through the real sepia binary and print
# object and byte hit ratios beside LRU, S3-FIFO and Bélády simulations of the same trace.
# See bench/README.md ("Trace replayer") and the docstrings of the Python files here.
#
#   bench/replay/run.sh                         # defaults: 200,000 requests over 50,000 objects,
#                                               # memory 64MiB and 256MiB, 3 repetitions (~2 min)
#   bench/replay/run.sh --memory 64MiB --disk-dir /var/tmp/sepia-disk --disk-size 1GiB
#   bench/replay/run.sh --requests 2000000 --objects 500000 --memory 256MiB --reps 1
#
# Options (defaults in brackets):
#   --sepia PATH          the binary [${CARGO_TARGET_DIR:-target}/release/sepia, built if missing]
#   --memory LIST         comma-separated cache.memory sizes, one configuration each [64MiB,256MiB]
#   --disk-dir DIR        also run each memory size with [[cache.disk]] at DIR (emptied first) ...
#   --disk-size SIZE      ... of this size (both or neither)
#   --disk-admission LIST the disk's admission, comma-separated (fill, earned), one
#                         configuration each [Sepia's default]
#   --max-object SIZE     cache.max_object [16MiB]
#   --requests N --objects M --alpha A --one-hit SHARE --seed S    the trace [200000 50000 0.9 0.5 21]
#   --trace FILE          replay this trace instead of generating one
#   --clients C           concurrent keep-alive clients [16]
#   --workers W           server.workers [0: one per core]
#   --reps R              repetitions of each configuration [3] (Sepia's shard hashing is seeded
#                         per process, so repetitions differ a little)
#   --no-ceiling          skip the check run with memory for the whole working set
#   --verify              compare every body received with the origin's bytes
#   --run-dir DIR         working files [bench/replay/run]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
sepia="" memory="64MiB,256MiB" disk_dir="" disk_size="" disk_admission="" max_object="16MiB"
requests=200000 objects=50000 alpha=0.9 one_hit=0.5 seed=21 trace=""
clients=16 workers=0 reps=3 ceiling=1 verify="" run_dir="$here/run"

while [ $# -gt 0 ]; do
    case "$1" in
        --sepia) sepia=$2; shift 2 ;;
        --memory) memory=$2; shift 2 ;;
        --disk-dir) disk_dir=$2; shift 2 ;;
        --disk-size) disk_size=$2; shift 2 ;;
        --disk-admission) disk_admission=$2; shift 2 ;;
        --max-object) max_object=$2; shift 2 ;;
        --requests) requests=$2; shift 2 ;;
        --objects) objects=$2; shift 2 ;;
        --alpha) alpha=$2; shift 2 ;;
        --one-hit) one_hit=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --trace) trace=$2; shift 2 ;;
        --clients) clients=$2; shift 2 ;;
        --workers) workers=$2; shift 2 ;;
        --reps) reps=$2; shift 2 ;;
        --no-ceiling) ceiling=0; shift ;;
        --verify) verify=--verify; shift ;;
        --run-dir) run_dir=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
        *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
if { [ -n "$disk_dir" ] && [ -z "$disk_size" ]; } || { [ -z "$disk_dir" ] && [ -n "$disk_size" ]; }; then
    echo "run.sh: --disk-dir and --disk-size go together" >&2; exit 2
fi

if [ -z "$sepia" ]; then
    sepia="${CARGO_TARGET_DIR:-$repo/target}/release/sepia"
    if [ ! -x "$sepia" ]; then
        echo "== building sepia (cargo build --release -p sepia)"
        (cd "$repo" && cargo build --release -p sepia)
    fi
fi
[ -x "$sepia" ] || { echo "run.sh: no sepia binary at $sepia" >&2; exit 2; }

mkdir -p "$run_dir"
results="$run_dir/results.jsonl"
: > "$results"

echo "== simulator self-test"
python3 "$here/sim.py" --self-test | tail -1

if [ -z "$trace" ]; then
    trace="$run_dir/trace.txt"
    echo "== trace"
    python3 "$here/tracegen.py" --out "$trace" --requests "$requests" --objects "$objects" \
        --alpha "$alpha" --one-hit "$one_hit" --seed "$seed"
fi

replay() {  # replay LABEL MEMORY [DISK_DIR DISK_SIZE [ADMISSION]]
    local label=$1 mem=$2 extra=()
    if [ $# -ge 4 ]; then
        rm -rf "$3"
        extra=(--disk-dir "$3" --disk-size "$4")
        [ -n "${5:-}" ] && extra+=(--disk-admission "$5")
    fi
    python3 "$here/replay.py" run --trace "$trace" --sepia "$sepia" --memory "$mem" \
        --max-object "$max_object" --clients "$clients" --workers "$workers" --label "$label" \
        --results "$results" --run-dir "$run_dir/sepia" $verify "${extra[@]}" \
        | grep -E '^(replaying|done|result codes|disk writes|PROBLEM)'
}

status=0
IFS=, read -r -a memories <<< "$memory"
for rep in $(seq 1 "$reps"); do
    for mem in "${memories[@]}"; do
        echo "== repetition $rep: memory $mem"
        replay "memory only" "$mem" || status=1
        if [ -n "$disk_dir" ]; then
            IFS=, read -r -a admissions <<< "${disk_admission:-default}"
            for adm in "${admissions[@]}"; do
                local_label="memory + disk"
                [ "$adm" != default ] && local_label="memory + disk ($adm)"
                [ "$adm" = default ] && adm=""
                echo "== repetition $rep: memory $mem + disk $disk_size${adm:+, admission $adm}"
                replay "$local_label" "$mem" "$disk_dir" "$disk_size" "$adm" || status=1
            done
        fi
    done
done

if [ "$ceiling" = 1 ]; then
    # Room for every object (charged as Sepia charges it) plus a quarter: every request after
    # an object's first must hit, so the ratios must equal the compulsory-miss ceiling.
    big=$(python3 -c "
import sys; sys.path.insert(0, '$here')
import sim, tracegen
h, t, s = tracegen.read_trace('$trace')
need = sum(sim.sepia_charge(v) for v in s.values()) * 5 // 4
print(f'{-(-need // (1 << 20))}MiB')")
    echo "== ceiling check: memory $big (the whole working set)"
    replay "ceiling check" "$big" || status=1
fi

echo
echo "== results ($results)"
python3 "$here/replay.py" report --results "$results" | tee "$run_dir/table.md"
python3 - "$results" <<'EOF' || status=1
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
bad = 0
for r in recs:
    if r["label"] == "ceiling check":
        inf = r["baselines"]["infinite"]
        same = r["hits"] == round(inf["object"] * r["requests"]) and abs(r["byte_hit_ratio"] - inf["byte"]) < 1e-9
        print(f"ceiling check: {'ok' if same else 'FAILED'}: measured {r['hits']} hits, "
              f"compulsory-miss ceiling {round(inf['object'] * r['requests'])}")
        bad += not same
    bad += bool(r["problems"])
sys.exit(1 if bad else 0)
EOF
exit $status
