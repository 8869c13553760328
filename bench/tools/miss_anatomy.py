#!/usr/bin/env python3
"""Where a miss costs, per request, for Sepia and haproxy side by side (and more Sepia builds).

    bench/tools/miss_anatomy.py --sepia-bin target/release/sepia [--also NAME=BIN ...]
                                [--reps 3] [--duration 5] [--port-base 19000]
                                [--syscalls] [--fresh] [--hog NICE] [--relay] [--nostore]
                                [--cache-mb 64]

Starts the benchmark origin (nginx, CPU 0), each Sepia build and haproxy (CPU 1, configs from
bench/peers/), then runs `wrk -t1 -c100` with bench/tools/miss.lua against each in turn,
interleaved (--fresh: each target restarted before each of its runs, so that every run
measures a cache filling from empty, as the miss case of run.sh does; --relay: also
tools/relay.c, the floor under an epoll read/write proxy's miss; --nostore: every request for the origin's
no-store page /ns/page instead of new URLs), and prints per request: the proxy's CPU-µs (and
its user and system shares), voluntary context switches (its
sleeps) and page faults; the origin's and wrk's CPU-µs and sleeps; CPU idle shares; the
rescheduling (RES) and function-call (CAL) IPIs each CPU received; TCP segments sent; with
--syscalls (needs perf), the proxy's epoll_wait, recvfrom and send calls (sendto, writev) and the
wake-ups it caused (sched_waking tracepoints in its threads). Medians last. --hog NICE keeps a busy
loop at that nice level on CPU 0 beside wrk and the origin: their core becomes the limit and the
proxy idles part of the time, as on machines where the load generator is the slower side (on
this machine kind the proxy's core is the limit otherwise). A diagnostic for the miss case of bench/run.sh, which stays the benchmark of record.
Needs nginx, haproxy, wrk, curl and GNU time.
"""
import argparse
import glob
import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

from proc import CLK_TCK, cpu_seconds, stat_fields, tree

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What --syscalls counts in the proxy's threads: its waits for events, reads, writes (one
# slice: sendto, several: writev) and the tasks it woke (wrk, the origin, its own threads).
TRACEPOINTS = ["syscalls:sys_enter_epoll_wait", "syscalls:sys_enter_recvfrom",
               "syscalls:sys_enter_sendto", "syscalls:sys_enter_writev", "sched:sched_waking",
               "raw_syscalls:sys_enter"]


def perf_counts(path):
    """{short name: count} from a `perf stat -x,` output file."""
    counts = {}
    for line in open(path):
        f = line.strip().split(",")
        if len(f) > 2 and f[2] in TRACEPOINTS and f[0].isdigit():
            name = f[2].split(":")[1]
            counts["all_syscalls" if name == "sys_enter" else name.removeprefix("sys_enter_")] = int(f[0])
    return counts


def proc_stat(pid):
    """(CPU seconds, voluntary switches, minor faults, user CPU seconds) over the process tree."""
    pids = tree(pid)
    # after "pid (comm) ": minflt is field 7 (as in proc.py's utime=11, stime=12)
    flt = sum(int(stat_fields(p)[7]) for p in pids)
    user = sum(int(stat_fields(p)[11]) for p in pids) / CLK_TCK
    vol = 0
    for p in pids:
        for t in glob.glob(f"/proc/{p}/task/*/status"):
            vol += int(re.search(r"\nvoluntary_ctxt_switches:\s+(\d+)", open(t).read()).group(1))
    return cpu_seconds(pids), vol, flt, user


def system_stat():
    idle, irq, net = {}, {}, {}
    for line in open("/proc/stat"):
        if re.match(r"cpu\d", line):
            f = line.split()
            idle[f[0]] = (int(f[4]) + int(f[5])) / CLK_TCK
    for line in open("/proc/interrupts"):
        f = line.split()
        if f and f[0] in ("RES:", "CAL:"):
            irq[f[0]] = (int(f[1]), int(f[2]))
    lines = open("/proc/net/snmp").read().splitlines()
    for h, v in zip(lines[::2], lines[1::2]):
        if h.startswith("Tcp:"):
            net = dict(zip(h.split()[1:], map(int, v.split()[1:])))
    return idle, irq, net


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sepia-bin", required=True)
    ap.add_argument("--also", action="append", default=[], metavar="NAME=BIN")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--port-base", type=int, default=19000)
    ap.add_argument("--syscalls", action="store_true",
                    help="count the proxy's syscalls and wake-ups per request with perf stat")
    ap.add_argument("--fresh", action="store_true",
                    help="restart each target before each of its runs (a cache filling from empty)")
    ap.add_argument("--hog", type=int, metavar="NICE",
                    help="a busy loop at this nice level on CPU 0 (the load generator's core)")
    ap.add_argument("--cache-mb", type=int, default=64, help="each proxy's cache budget (MiB)")
    ap.add_argument("--relay", action="store_true",
                    help="also tools/relay.c (bytes passed to the origin and back, no parsing)")
    ap.add_argument("--nostore", action="store_true",
                    help="request the origin's no-store page (pass-through) instead of new URLs")
    a = ap.parse_args()
    if a.syscalls and not shutil.which("perf"):
        raise SystemExit("--syscalls needs perf (apt-get install linux-perf)")
    run = tempfile.mkdtemp(prefix="miss-anatomy-")
    origin_port = a.port_base
    os.makedirs(f"{run}/origin/tmp")
    os.makedirs(f"{run}/www")
    open(f"{run}/www/1k", "w").write("x" * 1024)
    os.chmod(run, 0o755)
    procs = []

    def render(src, dst, port, name=""):
        text = open(src).read()
        for k, v in (("@RUN@", run), ("@PORT@", str(port)), ("@ORIGIN_PORT@", str(origin_port)),
                     ("@ORIGIN@", str(origin_port)), ("@NAME@", name),
                     ("@CACHE_MB@", str(a.cache_mb))):
            text = text.replace(k, v)
        open(dst, "w").write(text)

    def launch(cpu, args, env=None):
        p = subprocess.Popen(["taskset", "-c", str(cpu)] + args, stdout=subprocess.DEVNULL,
                             stderr=open(f"{run}/stderr.log", "a"), env=env)
        procs.append(p)
        return p

    def ready(port):
        for _ in range(100):
            r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                                f"http://127.0.0.1:{port}/1k"], capture_output=True, text=True)
            if r.stdout == "200":
                return
            time.sleep(0.1)
        raise SystemExit(f"nothing answers on port {port}: see {run}/stderr.log")

    def pin(pid, cpu):
        for p in tree(pid):
            subprocess.run(["taskset", "-a", "-cp", str(cpu), str(p)], stdout=subprocess.DEVNULL)

    try:
        render(f"{BENCH}/peers/origin.nginx.conf", f"{run}/origin/nginx.conf", origin_port, "origin")
        origin = launch(0, ["nginx", "-p", f"{run}/origin/", "-c", f"{run}/origin/nginx.conf",
                            "-g", "daemon off;"])
        ready(origin_port)
        pin(origin.pid, 0)
        commands = {}
        port = origin_port + 1
        for name, binary in [("sepia", a.sepia_bin)] + [x.split("=", 1) for x in a.also]:
            os.makedirs(f"{run}/{name}")
            render(f"{BENCH}/peers/sepia.toml", f"{run}/{name}/sepia.toml", port)
            env = dict(os.environ, SEPIA_LOG="warn")
            commands[name] = ([binary, "--config", f"{run}/{name}/sepia.toml"], env, port)
            port += 1
        os.makedirs(f"{run}/haproxy")
        render(f"{BENCH}/peers/haproxy.cfg", f"{run}/haproxy/haproxy.cfg", port)
        commands["haproxy"] = (["haproxy", "-db", "-f", f"{run}/haproxy/haproxy.cfg"], None, port)
        if a.relay:
            port += 1
            subprocess.run(["cc", "-O2", "-o", f"{run}/relay", f"{BENCH}/tools/relay.c"], check=True)
            commands["relay"] = ([f"{run}/relay", str(port), str(origin_port)], None, port)

        def start(name):
            args, env, port = commands[name]
            p = launch(1, args, env)
            ready(port)
            pin(p.pid, 1)
            return p, port

        def stop(p):
            p.terminate()
            p.wait()
            procs.remove(p)

        targets = {name: start(name) for name in commands}
        if a.hog is not None:
            launch(0, ["nice", "-n", str(a.hog), "sh", "-c", "while :; do :; done"])
        worker = [p for p in tree(origin.pid) if p != origin.pid][0]
        rows = {n: [] for n in targets}
        for rep in range(a.reps):
            for name in commands:
                if a.fresh and rep > 0:
                    stop(targets[name][0])
                    targets[name] = start(name)
                p, port = targets[name]
                wrk = ["taskset", "-c", "0", "wrk", "-t1", "-c100", "-s", f"{BENCH}/tools/miss.lua",
                       f"http://127.0.0.1:{port}/", "--"]
                if a.nostore:  # no script; the run's name below goes after "--", unused
                    wrk = wrk[:5] + ["-c100", f"http://127.0.0.1:{port}/ns/page", "--"]
                warm = wrk[:5] + ["-d1s"] + wrk[5:] + [f"warm-{rep}-{name}-{time.time()}"]
                subprocess.run(warm, capture_output=True)
                counting = None
                if a.syscalls:
                    counting = subprocess.Popen(["perf", "stat", "-x,", "-o", f"{run}/perf.csv",
                                                 "-e", ",".join(TRACEPOINTS), "-p", str(p.pid)],
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(0.3)  # attached before the load starts
                p0, o0, s0, t0 = proc_stat(p.pid), proc_stat(worker), system_stat(), time.time()
                out = subprocess.run(["/usr/bin/time", "-f", "TIME %U %S %w"] + wrk[:5]
                                     + [f"-d{a.duration}s"] + wrk[5:] + [f"run-{rep}-{name}-{time.time()}"],
                                     capture_output=True, text=True)
                wall = time.time() - t0
                p1, o1, s1 = proc_stat(p.pid), proc_stat(worker), system_stat()
                calls = {}
                if counting:
                    counting.send_signal(signal.SIGINT)
                    counting.wait()
                    calls = perf_counts(f"{run}/perf.csv")
                n = int(re.search(r"(\d+) requests in", out.stdout).group(1))
                wu, ws, wv = (float(x) for x in re.search(r"TIME (\S+) (\S+) (\S+)", out.stderr).groups())
                row = {
                    "req/s": n / wall,
                    "proxy_us": (p1[0] - p0[0]) / n * 1e6,
                    "proxy_user_us": (p1[3] - p0[3]) / n * 1e6,
                    "proxy_sleeps": (p1[1] - p0[1]) / n,
                    "proxy_faults": (p1[2] - p0[2]) / n,
                    "origin_us": (o1[0] - o0[0]) / n * 1e6,
                    "origin_sleeps": (o1[1] - o0[1]) / n,
                    "wrk_us": (wu + ws) / n * 1e6,
                    "wrk_sleeps": wv / n,
                    "idle_cpu0": (s1[0]["cpu0"] - s0[0]["cpu0"]) / wall,
                    "idle_cpu1": (s1[0]["cpu1"] - s0[0]["cpu1"]) / wall,
                    "RES_cpu0": (s1[1]["RES:"][0] - s0[1]["RES:"][0]) / n,
                    "CAL_cpu1": (s1[1]["CAL:"][1] - s0[1]["CAL:"][1]) / n,
                    "tcp_segs_out": (s1[2]["OutSegs"] - s0[2]["OutSegs"]) / n,
                    **{f"proxy_{k}": v / n for k, v in calls.items()},
                }
                rows[name].append(row)
                print(f"rep {rep + 1} {name:8}", " ".join(f"{k}={v:.3f}" if v < 100 else f"{k}={v:,.0f}"
                                                        for k, v in row.items()), flush=True)
        print("medians:")
        for name, rs in rows.items():
            print(f"  {name:8}", " ".join(f"{k}={statistics.median(r[k] for r in rs):.3f}" for k in rs[0]))
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait()
        shutil.rmtree(run, ignore_errors=True)


if __name__ == "__main__":
    main()
