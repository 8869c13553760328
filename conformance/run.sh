#!/usr/bin/env bash
# Caching conformance: runs the http-cache-tests suite (https://cache-tests.fyi, npm package
# http-cache-tests@0.4.5, pinned by package-lock.json) through the real Sepia binary acting as
# a reverse proxy in front of the suite's own test origin, scores it by test kind and compares
# the score with conformance/baseline.json.
#
# Usage: conformance/run.sh [--tls] [--update-baseline | --test ID]
#   (no flag)           run everything; exit 1 when required or optimal is below the baseline
#   --tls               the same through a TLS listener (--tls-cert/--tls-key, a certificate
#                       from a CA made for the run, which the suite's client is told to trust)
#   --update-baseline   also raise baseline.json to today's counts (never lowers it)
#   --test ID           run one test with the suite's request/response dump, no scoring
# Environment: SEPIA_BIN (default: <repo>/target/debug/sepia; build it first).
# Output: score line and failing ids on stdout, details in conformance/last-results.json, the
# processes' logs in conformance/.run/. Everything listens on 127.0.0.1 only.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
pkg="$here/node_modules/http-cache-tests"
suite_version=0.4.5

usage() { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
update_baseline=0
single_test=""
tls=0
while (($#)); do
  case $1 in
    --tls) tls=1 ;;
    --update-baseline) update_baseline=1 ;;
    --test)
      (($# >= 2)) || { echo "run.sh: --test needs a test id" >&2; exit 2; }
      single_test=$2
      shift
      ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

# Resolve SEPIA_BIN against the caller's working directory before anything changes it.
sepia_bin="${SEPIA_BIN:-$repo/target/debug/sepia}"
[[ $sepia_bin == /* ]] || sepia_bin="$PWD/$sepia_bin"
if [[ ! -x $sepia_bin ]]; then
  echo "run.sh: no Sepia binary at $sepia_bin" >&2
  echo "        build it (cargo build -p sepia) or point SEPIA_BIN at one" >&2
  exit 2
fi

if ! command -v node >/dev/null; then
  echo "== installing nodejs npm (Debian packages)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null
fi

# npm ci only when the installed tree is missing or older than the lockfile, so repeated runs
# work offline and stay fast.
installed_version() {
  node -e 'try { console.log(require(process.argv[1]).version) } catch { }' "$pkg/package.json"
}
if [[ $(installed_version) != "$suite_version" || "$here/package-lock.json" -nt "$here/node_modules/.package-lock.json" ]]; then
  echo "== npm ci (http-cache-tests@$suite_version)"
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
fi
[[ $(installed_version) == "$suite_version" ]] || {
  echo "run.sh: http-cache-tests $suite_version did not install" >&2
  exit 2
}

run_dir="$here/.run"
rm -rf "$run_dir"
mkdir -p "$run_dir"

pids=()
# shellcheck disable=SC2317 # invoked by the EXIT trap
cleanup() {
  local pid i
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for ((i = 0; i < 30; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT

# Runs the suite's client as a background job and waits for it: bash runs the INT/TERM traps
# during `wait` but not while a foreground child runs, so this keeps the script killable.
wait_for() {
  local pid=$1 status=0 i
  pids+=("$pid")
  wait "$pid" || status=$?
  # Reaped: forget it so cleanup cannot signal a recycled pid.
  for i in "${!pids[@]}"; do [[ ${pids[$i]} == "$pid" ]] && unset 'pids[i]'; done
  return "$status"
}
trap 'exit 130' INT
trap 'exit 143' TERM

# Succeeds when a GET of $1 is answered with status $2.
http_status_is() {
  node -e 'fetch(process.argv[1]).then(r => process.exit(r.status === +process.argv[2] ? 0 : 1), () => process.exit(1))' "$1" "$2"
}

started=$SECONDS

# The origin picks its own free port (port 0) and reports it.
(cd "$pkg" && exec node "$here/origin.mjs" 0) >"$run_dir/origin.log" 2>&1 &
origin_pid=$!
pids+=("$origin_pid")
origin_port=""
for ((i = 0; i < 100; i++)); do
  origin_port=$(sed -n 's/^listening 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$run_dir/origin.log")
  [[ -n $origin_port ]] && break
  kill -0 "$origin_pid" 2>/dev/null || break
  sleep 0.1
done
if [[ -z $origin_port ]]; then
  echo "run.sh: the test origin did not start:" >&2
  cat "$run_dir/origin.log" >&2
  exit 2
fi

free_port() {
  node -e 'const s = require("net").createServer(); s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close() })'
}

# With --tls: a CA and a certificate for 127.0.0.1, made for this run; node's fetch (the
# suite's client and the probe below) trusts the CA through NODE_EXTRA_CA_CERTS.
tls_args=()
scheme=http
if ((tls)); then
  t="$run_dir/tls"
  mkdir -p "$t"
  ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
  openssl req -x509 "${ec[@]}" -days 2 -subj "/CN=conformance CA" -keyout "$t/ca.key" \
    -out "$t/ca.pem" 2>/dev/null
  openssl req "${ec[@]}" -subj /CN=localhost -keyout "$t/key.pem" -out "$t/cert.csr" 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' >"$t/ext"
  openssl x509 -req -in "$t/cert.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial \
    -days 2 -extfile "$t/ext" -out "$t/cert.pem" 2>/dev/null
  export NODE_EXTRA_CA_CERTS="$t/ca.pem"
  tls_args=(--tls-cert "$t/cert.pem" --tls-key "$t/key.pem")
  scheme=https
fi

# Sepia needs a concrete port; another process could take a free port before Sepia binds it,
# so a start that dies is retried on a new port.
proxy_port=""
for attempt in 1 2 3; do
  port=$(free_port)
  NO_COLOR=1 "$sepia_bin" reverse --listen "127.0.0.1:$port" --origin "http://127.0.0.1:$origin_port" \
    --workers 2 "${tls_args[@]}" >"$run_dir/access.log" 2>"$run_dir/sepia.log" &
  sepia_pid=$!
  pids+=("$sepia_pid")
  for ((i = 0; i < 100; i++)); do
    kill -0 "$sepia_pid" 2>/dev/null || break
    # The origin answers 404 for state it does not have: proof that the whole chain works.
    if http_status_is "$scheme://127.0.0.1:$port/state/conformance-probe" 404; then
      proxy_port=$port
      break
    fi
    sleep 0.1
  done
  [[ -n $proxy_port ]] && break
  echo "run.sh: Sepia did not answer on 127.0.0.1:$port (attempt $attempt):" >&2
  tail -n 20 "$run_dir/sepia.log" >&2
  kill -KILL "$sepia_pid" 2>/dev/null || true
done
[[ -n $proxy_port ]] || { echo "run.sh: giving up on starting Sepia" >&2; exit 2; }
echo "== origin 127.0.0.1:$origin_port, sepia $scheme://127.0.0.1:$proxy_port ($sepia_bin)"

# The suite's CLI reads its options from npm_config_* variables (npm run cli -- --base=...);
# running node directly means setting them here. An empty id runs every test.
base="$scheme://127.0.0.1:$proxy_port"
if [[ -n $single_test ]]; then
  (cd "$pkg" && npm_config_base="$base" npm_config_id="$single_test" npm_package_config_id="" \
    exec node --no-warnings cli.mjs) &
  status=0
  wait_for $! || status=$?
  echo "== what the origin saw (conformance/.run/origin.log)"
  cat "$run_dir/origin.log"
  exit "$status"
fi

echo "== running http-cache-tests@$suite_version"
(cd "$pkg" && npm_config_base="$base" npm_config_id="" npm_package_config_id="" \
  exec timeout 120 node --no-warnings cli.mjs) >"$run_dir/suite.json" 2>"$run_dir/suite.err" &
if ! wait_for $!; then
  echo "run.sh: the suite's CLI failed:" >&2
  tail -n 20 "$run_dir/suite.err" >&2
  exit 2
fi

summarise=(node "$here/summarise.mjs" --results "$run_dir/suite.json"
  --out "$here/last-results.json" --baseline "$here/baseline.json")
((update_baseline)) && summarise+=(--update-baseline)
status=0
"${summarise[@]}" || status=$?
echo "== $((SECONDS - started)) s; details in conformance/last-results.json, logs in conformance/.run/"
exit "$status"
