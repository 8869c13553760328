#!/usr/bin/env bash
# HTTP/2 abuse against Sepia (issue 20): what one attacking client does to everyone else.
#
# Sepia (one worker, CPU 1) serves prior-knowledge h2c in front of the benchmark origin nginx.
# A well-behaved client, h2load at a fixed rate (-c10 -m4, --rps 100 per client: 1,000
# requests/s of the cached 1 KiB object, CPU 0), measures latency; meanwhile one attacker
# (e2e/scripts/h2_attacks.py, CPU 0 too: there is no third core) repeats one attack for the
# whole window: Rapid Reset (HEADERS+RST_STREAM, CVE-2023-44487), a CONTINUATION flood, PING
# and SETTINGS floods, streams past MAX_CONCURRENT_STREAMS, a zero-window slow reader. Each
# row gives the good client's p99 against the quiet baseline, Sepia's peak RSS, and what the
# attacker's last run saw (GOAWAY, closed).
#
#   bench/h2_abuse.sh [--duration S] [--sepia-bin PATH]
set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$BENCH_DIR")
RUN=${BENCH_RUN:-$BENCH_DIR/run}/h2-abuse
PORT_BASE=28400
DURATION=8
SEPIA_BIN=""
ATTACKS=(rapid-reset continuation ping settings stream-limit slow-reader)

source "$BENCH_DIR/lib/common.sh"
source "$BENCH_DIR/lib/targets.sh"

while (($#)); do
    case $1 in
        --duration) DURATION=$2; shift ;;
        --sepia-bin) SEPIA_BIN=$2; shift ;;
        -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

read -r base_p99 base_rss base_failed <<< "$(window baseline)"
log "baseline: p99 $base_p99 ms, peak RSS $base_rss B, $base_failed failed"
printf '| attack | good client p99 ms | × baseline | failed | Sepia peak RSS MiB | attacker runs | last run |\n'
printf '|---|---:|---:|---:|---:|---:|---|\n'
printf '| none | %s | 1.00 | %s | %.1f | | |\n' "$base_p99" "$base_failed" "$(echo "$base_rss / 1048576" | bc -l)"
for attack in "${ATTACKS[@]}"; do
    arg=()
    case $attack in
        ping | settings) arg=(3) ;;
        stream-limit) arg=(/1m) ;;
        slow-reader) arg=(/1m) ;;
    esac
    (
        runs=0
        end=$((SECONDS + DURATION))
        while ((SECONDS < end)); do
            taskset -c "$LOAD_CPU" /usr/bin/python3 "$ROOT/e2e/scripts/h2_attacks.py" 127.0.0.1 "$PORT" \
                "$attack" "${arg[@]}" > "$RUN/out/$attack.last.json" 2>> "$RUN/out/$attack.err"
            runs=$((runs + 1))
            echo "$runs" > "$RUN/out/$attack.runs"
        done
    ) &
    attacker=$!
    read -r p99 rss failed <<< "$(window "$attack")"
    wait "$attacker"
    ratio=$(python3 -c 'import sys; b, p = map(float, sys.argv[1:3]); print(f"{p / b:.2f}" if b else "")' "$base_p99" "$p99")
    printf '| %s | %s | %s | %s | %.1f | %s | `%s` |\n' "$attack" "$p99" "$ratio" "$failed" \
        "$(echo "$rss / 1048576" | bc -l)" "$(cat "$RUN/out/$attack.runs" 2> /dev/null)" \
        "$(tr -d '\n' < "$RUN/out/$attack.last.json" 2> /dev/null | cut -c1-120)"
done
