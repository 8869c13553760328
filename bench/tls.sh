#!/usr/bin/env bash
# TLS termination: Sepia against haproxy and nginx, one core each (issue 20).
#
# Every target terminates TLS with the same ECDSA P-256 certificate (made at run time) in front
# of the benchmark origin nginx, caching as in bench/run.sh: the target is pinned to CPU 1 with
# one worker, the origin and the load generator share CPU 0. Repetitions are interleaved
# (repetition 1 of every case and target, then repetition 2, ...) and medians are quoted.
# The cost measured is the target's CPU time (user + system, whole process tree) per request or
# per handshake; "per core" rates are 1 s divided by that cost.
#
#   hit-1k-c100     wrk -t1 -c100 keep-alive over TLS 1.3, GET /1k (a cache hit)
#   plain-1k-c100   the same in clear text, Sepia only (its plaintext hit on the same process)
#   h2-1k-c100-m32  h2load -c100 -m32 over TLS (ALPN h2): multiplexed 1 KiB hits, p99 from its log
#   full-1.3        openssl s_time -new -tls1_3: a full handshake per connection, no request
#   full-1.2        the same with TLS 1.2 (ECDHE-ECDSA-AES128-GCM-SHA256)
#   resumed-1.2     openssl s_time -reuse -tls1_2: session resumption (ticket or session id)
#   resumed-1.3     openssl s_time -reuse -tls1_3 (TLS 1.3 resumption still runs a key exchange)
#   idle            after the runs: IDLE_CONNS idle keep-alive TLS connections (one request each)
#                   held open; RSS growth per connection once it settles
#   idle-h2         the same with HTTP/2 connections (ALPN h2, one stream each)
#
#   bench/tls.sh [--reps N] [--duration S] [--targets sepia,haproxy,nginx] [--sepia-bin PATH]
#                [--idle-conns N (default 10000; 0 skips the idle cases)]
#                [--cases LIST (comma-separated, from the names above but idle; default all)]
# Prints a Markdown table (medians) and writes the raw samples to $RUN/tls-samples.tsv.
set -uo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$BENCH_DIR")
RUN=${BENCH_RUN:-$BENCH_DIR/run}/tls
PORT_BASE=28300
REPS=3
DURATION=5
TARGETS=(sepia haproxy nginx)
SEPIA_BIN=""
IDLE_CONNS=10000
ONLY_CASES=()

source "$BENCH_DIR/lib/common.sh"
source "$BENCH_DIR/lib/targets.sh"

while (($#)); do
    case $1 in
        --reps) REPS=$2; shift ;;
        --duration) DURATION=$2; shift ;;
        --targets) IFS=, read -r -a TARGETS <<< "$2"; shift ;;
        --sepia-bin) SEPIA_BIN=$2; shift ;;
        --idle-conns) IDLE_CONNS=$2; shift ;;
        --cases) IFS=, read -r -a ONLY_CASES <<< "$2"; shift ;;
        -h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "tls.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

CASES=(hit-1k-c100 plain-1k-c100 h2-1k-c100-m32 full-1.3 full-1.2 resumed-1.2 resumed-1.3)
[[ ${#ONLY_CASES[@]} -gt 0 ]] && CASES=("${ONLY_CASES[@]}")
declare -A TLS_PORT=([sepia]=$((PORT_BASE + 1)) [haproxy]=$((PORT_BASE + 2)) [nginx]=$((PORT_BASE + 3)))
SEPIA_PLAIN_PORT=$((PORT_BASE + 11))
ORIGIN_PORT=$PORT_BASE
declare -A PID

rm -rf "$RUN"
mkdir -p "$RUN/tls" "$RUN/out"
trap cleanup EXIT
raise_fd_limit

if [[ -z $SEPIA_BIN ]]; then
    (cd "$ROOT" && cargo build --release -q -p sepia) || { echo "build failed" >&2; exit 1; }
    SEPIA_BIN=$ROOT/target/release/sepia
fi

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost \
    -keyout "$RUN/tls/key.pem" -out "$RUN/tls/cert.pem" 2> /dev/null
cat "$RUN/tls/cert.pem" "$RUN/tls/key.pem" > "$RUN/tls/combined.pem"

start_origin || exit 1

# start TARGET: launch it pinned to CPU 1 and wait until GET /1k over TLS answers 200.
start() {
    local t=$1 port=${TLS_PORT[$1]} dir="$RUN/$1-tls"
    mkdir -p "$dir/tmp" "$dir/cache"
    case $t in
        sepia)
            render "$BENCH_DIR/peers/tls/sepia.toml" "$dir/sepia.toml" "$port" "$SEPIA_PLAIN_PORT"
            launch "$TARGET_CPU" "$dir/stderr.log" env SEPIA_LOG=warn "$SEPIA_BIN" --config "$dir/sepia.toml"
            ;;
        haproxy)
            render "$BENCH_DIR/peers/tls/haproxy.cfg" "$dir/haproxy.cfg" "$port"
            launch "$TARGET_CPU" "$dir/stderr.log" haproxy -db -f "$dir/haproxy.cfg"
            ;;
        nginx)
            render "$BENCH_DIR/peers/tls/nginx.conf" "$dir/nginx.conf" "$port"
            launch "$TARGET_CPU" "$dir/stderr.log" nginx -p "$dir/" -c "$dir/nginx.conf" -g 'daemon off;'
            ;;
    esac
    PID[$t]=$LAUNCHED_PID
    local deadline=$((SECONDS + 30))
    while ((SECONDS < deadline)); do
        if [[ $(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$port/1k") == 200 ]]; then
            curl -sk -o /dev/null "https://127.0.0.1:$port/1k"
            [[ $t == sepia ]] && curl -s -o /dev/null "http://127.0.0.1:$SEPIA_PLAIN_PORT/1k" && curl -s -o /dev/null "http://127.0.0.1:$SEPIA_PLAIN_PORT/1k"
            pin_tree "${PID[$t]}" "$TARGET_CPU"
            return 0
        fi
        sleep 0.2
    done
    echo "tls.sh: $t did not start: $(tail -c 400 "$dir/stderr.log")" >&2
    return 1
}

# sample TARGET CASE REP: one run; appends "case target rep count cpu_us_per p99_ms".
sample() {
    local t=$1 case=$2 rep=$3 port=${TLS_PORT[$1]} out="$RUN/out/$2.$1.$3.txt" c0 c1 count p99=""
    local load=(taskset -c "$LOAD_CPU")
    case $case in
        hit-1k-c100) load+=(wrk -t1 -c100 "-d${DURATION}s" --latency "https://127.0.0.1:$port/1k") ;;
        plain-1k-c100)
            [[ $t == sepia ]] || return 0
            load+=(wrk -t1 -c100 "-d${DURATION}s" --latency "http://127.0.0.1:$SEPIA_PLAIN_PORT/1k") ;;
        h2-1k-c100-m32) load+=(h2load -c100 -m32 -t1 -D "$DURATION" --log-file "$out.log" "https://127.0.0.1:$port/1k") ;;
        full-1.3) load+=(openssl s_time -connect "127.0.0.1:$port" -new -tls1_3 -time "$DURATION") ;;
        full-1.2) load+=(openssl s_time -connect "127.0.0.1:$port" -new -tls1_2 -cipher ECDHE-ECDSA-AES128-GCM-SHA256 -time "$DURATION") ;;
        resumed-1.2) load+=(openssl s_time -connect "127.0.0.1:$port" -reuse -tls1_2 -cipher ECDHE-ECDSA-AES128-GCM-SHA256 -time "$DURATION") ;;
        resumed-1.3) load+=(openssl s_time -connect "127.0.0.1:$port" -reuse -tls1_3 -time "$DURATION") ;;
    esac
    pin_tree "${PID[$t]}" "$TARGET_CPU"
    c0=$(cpu_of "${PID[$t]}")
    "${load[@]}" > "$out" 2>&1
    c1=$(cpu_of "${PID[$t]}")
    if [[ $case == h2-* ]]; then
        count=$(awk '/^requests:/ { print $8 }' "$out")
        # h2load's log: start time, status, microseconds per request.
        p99=$(sort -n -k3 "$out.log" | awk '{ v[NR] = $3 } END { if (NR) printf "%.2f", v[int(NR * 0.99)] / 1000 }')
        grep -q "succeeded, 0 failed" "$out" || echo "tls.sh: $t $case: failed requests" >&2
    elif [[ $case == *-c100 ]]; then
        count=$(awk '/requests in/ { print $1 }' "$out")
        p99=$(awk '$1 == "99%" { v = $2; if (v ~ /us$/) v = v / 1000; else if (v ~ /ms$/) v = v + 0; else if (v ~ /s$/) v = v * 1000; print v }' "$out")
        grep -q "Non-2xx" "$out" && echo "tls.sh: $t $case: non-2xx answers" >&2
    else
        # s_time: "N connections in T real seconds"; the -reuse run's first connection is a full one.
        count=$(awk '/connections in .* real seconds/ { n = $1 } END { print n }' "$out")
        if [[ $case == resumed-* ]] && ! grep -q "^rrr" "$out"; then
            echo "tls.sh: $t $case: connections were not resumed" >&2
        fi
    fi
    local us
    us=$(python3 -c 'import sys; c0, c1, n = map(float, sys.argv[1:4]); print(f"{(c1 - c0) * 1e6 / n:.2f}" if n else "nan")' "$c0" "$c1" "${count:-0}")
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$case" "$t" "$rep" "${count:-0}" "$us" "${p99:-}" >> "$RUN/tls-samples.tsv"
    log "  $case $t rep $rep: ${count:-0} in ${DURATION}s, $us CPU-µs each${p99:+, p99 $p99 ms}"
}

for t in "${TARGETS[@]}"; do start "$t" || exit 1; done
for ((rep = 1; rep <= REPS; rep++)); do
    for case in "${CASES[@]}"; do
        for t in "${TARGETS[@]}"; do sample "$t" "$case" "$rep"; done
    done
done

# idle TARGET KIND [ARGS]: RSS growth per held idle TLS connection, once the RSS stops changing.
idle() {
    local t=$1 kind=$2 port=${TLS_PORT[$1]} ready="$RUN/$2-$1.ready" rss0 rss1 prev i ok
    shift 2
    # A fresh process: memory freed by earlier cases would otherwise be reused, not counted.
    stop_tree "${PID[$t]}"
    start "$t" || return 1
    sleep 1
    rss0=$(rss_of "${PID[$t]}")
    launch "$LOAD_CPU" "$RUN/$kind-$t.log" /usr/bin/python3 "$TOOLS/idle_tls_clients.py" --port "$port" \
        --n "$IDLE_CONNS" --ready-file "$ready" "$@"
    local client=$LAUNCHED_PID deadline=$((SECONDS + 300))
    while [[ ! -s $ready ]] && alive "$client" && ((SECONDS < deadline)); do sleep 1; done
    prev=$(rss_of "${PID[$t]}")
    for ((i = 0; i < 15; i++)); do
        sleep 1
        rss1=$(rss_of "${PID[$t]}")
        ((rss1 * 100 >= prev * 99 && rss1 * 100 <= prev * 101)) && break
        prev=$rss1
    done
    ok=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ok"])' "$ready" 2> /dev/null || echo 0)
    printf '%s\t%s\t1\t%s\t%s\t\n' "$kind" "$t" "$ok" "$(((rss1 - rss0) / (ok > 0 ? ok : 1)))" >> "$RUN/idle.tsv"
    log "  $kind $t: $ok connections held, RSS $rss0 -> $rss1 B, $(((rss1 - rss0) / (ok > 0 ? ok : 1))) B each"
    stop_tree "$client"
}
if ((IDLE_CONNS > 0)); then
    for t in "${TARGETS[@]}"; do idle "$t" idle; done
    for t in "${TARGETS[@]}"; do idle "$t" idle-h2 --h2; done
fi

python3 - "$RUN/tls-samples.tsv" << 'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
cases = list(dict.fromkeys(r[0] for r in rows))
targets = list(dict.fromkeys(r[1] for r in rows))
def med(case, t, col):
    vals = [float(r[col]) for r in rows if r[0] == case and r[1] == t and r[col] not in ("", "nan")]
    return statistics.median(vals) if vals else None
print("| case | " + " | ".join(f"{t} CPU-µs" for t in targets) + " | " + " | ".join(f"{t} p99 ms" for t in targets) + " | sepia ÷ best peer |")
print("|---|" + "---:|" * (2 * len(targets) + 1))
for case in cases:
    us = [med(case, t, 4) for t in targets]
    p99 = [med(case, t, 5) for t in targets]
    peers = [u for t, u in zip(targets, us) if t != "sepia" and u]
    ratio = f"{us[0] / min(peers):.2f}" if us[0] and peers and targets[0] == "sepia" else ""
    fmt = lambda v, d: "" if v is None else f"{v:.{d}f}"
    print(f"| {case} | " + " | ".join(fmt(u, 1) for u in us) + " | " + " | ".join(fmt(p, 2) for p in p99) + f" | {ratio} |")
PY
if [[ -s $RUN/idle.tsv ]]; then
    echo
    echo "| idle keep-alive connections over TLS | target | held | RSS per connection (B) |"
    echo "|---|---|---:|---:|"
    awk -F'\t' '{ printf "| %s | %s | %s | %s |\n", ($1 == "idle" ? "HTTP/1.1" : "HTTP/2"), $2, $4, $5 }' "$RUN/idle.tsv"
fi
