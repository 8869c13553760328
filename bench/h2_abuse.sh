#!/usr/bin/env bash
# HTTP/2 abuse against Sepia (issue 20): what one attacking client does to everyone else.
#
# Sepia (one worker, CPU 1) serves prior-knowledge h2c in front of the benchmark origin nginx.
# A well-behaved client, h2load at a fixed rate (-c10 -m4, --rps 100 per client: 1,000
# requests/s of the cached 1 KiB object, CPU 0), measures latency; meanwhile one attacker
# (e2e/scripts/h2_attacks.py, CPU 0 too: there is no third core) repeats one attack for the
# whole window: Rapid Reset (HEADERS+RST_STREAM, CVE-2023-44487), a CONTINUATION flood, PING
# and SETTINGS floods, streams past MAX_CONCURRENT_STREAMS, a zero-window slow reader. Each
# row gives the good client's p99 against a quiet window, Sepia's peak RSS, how many
# connections the attacker made (it reconnects whenever Sepia closes it), and what its last
# one saw (GOAWAY, closed).
#
# Each attacked window is paired with a quiet one just before it; REPS pairs per attack,
# interleaved; medians and the per-pair ratios are printed.
#
#   bench/h2_abuse.sh [--duration S] [--reps N] [--sepia-bin PATH]
set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$BENCH_DIR")
RUN=${BENCH_RUN:-$BENCH_DIR/run}/h2-abuse
PORT_BASE=28400
DURATION=8
REPS=3
SEPIA_BIN=""
ATTACKS=(rapid-reset continuation ping settings stream-limit slow-reader)

source "$BENCH_DIR/lib/common.sh"
source "$BENCH_DIR/lib/targets.sh"

while (($#)); do
    case $1 in
        --duration) DURATION=$2; shift ;;
        --reps) REPS=$2; shift ;;
        --sepia-bin) SEPIA_BIN=$2; shift ;;
        -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "h2_abuse.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

rm -rf "$RUN"
mkdir -p "$RUN/sepia" "$RUN/out"
trap cleanup EXIT
raise_fd_limit
if [[ -z $SEPIA_BIN ]]; then
    (cd "$ROOT" && cargo build --release -q -p sepia) || { echo "build failed" >&2; exit 1; }
    SEPIA_BIN=$ROOT/target/release/sepia
fi
ORIGIN_PORT=$PORT_BASE
PORT=$((PORT_BASE + 1))
start_origin || exit 1

cat > "$RUN/sepia/sepia.toml" << EOF
[server]
workers = 1
[[listen]]
address = "127.0.0.1:$PORT"
mode = "reverse"
h2c = true
[access_log]
path = "off"
[[route]]
host = "*"
origins = ["http://127.0.0.1:$ORIGIN_PORT"]
EOF
launch "$TARGET_CPU" "$RUN/sepia/stderr.log" env SEPIA_LOG=warn "$SEPIA_BIN" --config "$RUN/sepia/sepia.toml"
SEPIA_PID=$LAUNCHED_PID
wait_ready "$SEPIA_PID" "$PORT" /1k 30 || { echo "sepia did not start" >&2; exit 1; }
curl -s -o /dev/null "http://127.0.0.1:$PORT/1k"

# window NAME: the good client's run (attack or not is the caller's business); prints
# "p99_ms peak_rss_bytes failed".
window() {
    local out="$RUN/out/$1" peak=0 rss
    taskset -c "$LOAD_CPU" h2load -c10 -m4 --rps 100 -t1 -D "$DURATION" \
        --log-file "$out.log" "http://127.0.0.1:$PORT/1k" > "$out.txt" 2>&1 &
    local load=$!
    while kill -0 "$load" 2> /dev/null; do
        rss=$(rss_of "$SEPIA_PID")
        ((rss > peak)) && peak=$rss
        sleep 0.2
    done
    wait "$load"
    local p99 failed
    p99=$(sort -n -k3 "$out.log" | awk '{ v[NR] = $3 } END { if (NR) printf "%.2f", v[int(NR * 0.99)] / 1000 }')
    failed=$(awk '/^requests:/ { print $10 }' "$out.txt")
    echo "$p99 $peak ${failed:-?}"
}

# Each attack window is paired with a quiet window just before it, and the pairs repeat REPS
# times, interleaved: the p99 of one 8 s window on a shared core varies by 2x from run to run.
for ((rep = 1; rep <= REPS; rep++)); do
    for attack in "${ATTACKS[@]}"; do
        arg=()
        case $attack in
            ping | settings) arg=(3) ;;
            stream-limit | slow-reader) arg=(/1m) ;;
        esac
        read -r q99 qrss qfailed <<< "$(window "quiet-$attack-$rep")"
        # One process repeats the attack for the window (H2_ATTACK_REPEAT_SECONDS).
        H2_ATTACK_REPEAT_SECONDS=$DURATION taskset -c "$LOAD_CPU" /usr/bin/python3 \
            "$ROOT/e2e/scripts/h2_attacks.py" 127.0.0.1 "$PORT" "$attack" "${arg[@]}" \
            > "$RUN/out/$attack.$rep.json" 2> "$RUN/out/$attack.$rep.err" &
        attacker=$!
        read -r p99 rss failed <<< "$(window "$attack-$rep")"
        wait "$attacker"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$attack" "$rep" "$q99" "$p99" "$((qfailed + failed))" \
            "$rss" "$RUN/out/$attack.$rep.json" >> "$RUN/samples.tsv"
        log "  $attack rep $rep: quiet p99 $q99 ms, attacked p99 $p99 ms, peak RSS $rss B"
    done
done

python3 - "$RUN/samples.tsv" << 'PY'
import json, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
print("| attack | quiet p99 ms | attacked p99 ms | attacked ÷ quiet (per pair) | failed | Sepia peak RSS MiB | attacker connections | the attacker's last run |")
print("|---|---:|---:|---|---:|---:|---:|---|")
for attack in dict.fromkeys(r[0] for r in rows):
    mine = [r for r in rows if r[0] == attack]
    quiet = [float(r[2]) for r in mine]
    hit = [float(r[3]) for r in mine]
    ratios = [h / q for q, h in zip(quiet, hit) if q]
    last = json.load(open(mine[-1][6]))
    runs = last.pop("runs", 1)
    outcome = "closed" if last.get("closed") else "not closed"
    if last.get("goaway"):
        outcome += f", GOAWAY {last['goaway']}"
    print(f"| {attack} | {statistics.median(quiet):.2f} | {statistics.median(hit):.2f} | "
          f"{statistics.median(ratios):.2f} ({', '.join(f'{x:.2f}' for x in ratios)}) | "
          f"{sum(int(r[4]) for r in mine)} | {max(int(r[5]) for r in mine) / 1048576:.1f} | {runs} | {outcome} |")
PY
