#!/usr/bin/env python3
"""Start a cache (Sepia or a peer) over a filled disk cache and time its disk hits
(`bench/disk.sh peers`).

    disk_peer_restart.py --port P --sample FILE --log FILE [--cpu 1] [--timeout 1200]
        [--done-log FILE --done-regex RE | --done-gone TEXT] [--then term|kill|keep]
        [--settle 1.0] -- COMMAND...

The origin is down while this runs, and every request carries `Cache-Control:
only-if-cached` (Sepia, Squid and Traffic Server answer 504 without asking the origin;
nginx ignores it and gets a 502 from the dead origin): so nothing a poll asks for can be
stored, and a 200 can only come from the cache. The memory tier of every target is empty
after a start, so the first 200 for a URL is a hit served from its disk cache.

Records the time just before exec, then
  1. polls the first 200 URLs of the sample in turn every millisecond (`--poll-ms`; it
     was 10 ms until 2026-11-26, which made every target answer "on the second poll" and
     hid differences below 10 ms): the first 200 is `first_hit_ms`;
  2. sweeps the whole sample (FILE: one path a line, 1,000 stored objects) again and again,
     each URL until it has answered 200 once (never asked again: a second answer could come
     from memory): `p99_ms` when 99 % of them have (the loader / rebuild has reached them);
  3. waits until the target says its index is complete (`--done-log`: a line matching
     `--done-regex` written to FILE after the start; `--done-gone`: no process of the tree has
     TEXT in its command line any more, nginx's "cache loader"; neither: at once), then
     `--settle` seconds, and reads the memory of the whole process tree: the sum of VmRSS,
     the sum of Pss, and the sum of Pss_Anon + Pss_Shmem (`anon_shmem_bytes`: heap and
     shared memory such as nginx's keys zone or Squid's shared index, counted once, not once
     per process that maps it; without the file-backed pages, whose Pss moves with whatever
     else maps the same binary and libraries, such as a second run beside this one).
Then stops the target by its pid (SIGTERM and wait, or SIGKILL) unless `--then keep`, and
records how much of the system's Shmem the stop gave back (`shmem_freed_bytes`: shared
memory no live process maps, such as nginx's keys zone after its loader exits). Prints
one JSON line. With an empty --sample it only waits for the first answer of any kind (an
empty-cache start: the memory baseline).
"""
import argparse, http.client, json, os, re, signal, socket, subprocess, sys, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proc import tree  # noqa: E402


def memory(root):
    """(sum of VmRSS, sum of Pss, sum of Pss_Anon + Pss_Shmem, [(pid, name, rss, pss)]) over
    the tree, bytes."""
    rss = pss = private = anon = 0
    procs = []
    for p in tree(root):
        r = s = a = 0
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        r = int(line.split()[1]) * 1024
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        s = int(line.split()[1]) * 1024
                    elif line.startswith(("Pss_Anon:", "Pss_Shmem:")):
                        a += int(line.split()[1]) * 1024
                        if line.startswith("Pss_Anon:"):
                            anon += int(line.split()[1]) * 1024
            with open(f"/proc/{p}/cmdline", "rb") as f:
                name = f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:60]
        except OSError:
            continue
        rss += r
        pss += s
        private += a
        procs.append((p, name, r, s))
    return rss, pss, private, anon, procs


def system_shmem():
    """The system's Shmem (/proc/meminfo), bytes: shared memory resident whether or not a
    process maps it now. nginx's keys zone is filled by its cache loader, which then exits:
    no process that remains has touched those pages, so no Pss shows them."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("Shmem:"):
                return int(line.split()[1]) * 1024
    return 0


def cmdlines(root):
    out = []
    for p in tree(root):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                out.append(f.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            pass
    return out


class Client:
    """One keep-alive connection, reopened after any error."""

    def __init__(self, port):
        self.port, self.c = port, None

    def get(self, path):
        for _ in range(2):
            try:
                if self.c is None:
                    self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                self.c.request("GET", path, headers={"Cache-Control": "only-if-cached"})
                r = self.c.getresponse()
                r.read()
                if (r.getheader("Connection") or "").lower() == "close":
                    self.c.close(); self.c = None
                return r.status, {k.lower(): v for k, v in r.getheaders()}
            except (ConnectionError, socket.timeout, OSError, http.client.HTTPException):
                if self.c is not None:
                    self.c.close()
                self.c = None
        return None, {}


def running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            t = f.read()
        return t[t.rindex(")") + 2] != "Z"
    except (OSError, ValueError):
        return False


def index_done(a, done_from, pid):
    """Whether the target says its index is complete (see --done-log, --done-gone)."""
    if a.done_log:
        try:
            with open(a.done_log, errors="replace") as f:
                f.seek(done_from)
                return re.search(a.done_regex, f.read()) is not None
        except OSError:
            return False
    if a.done_gone:
        return not any(a.done_gone in c for c in cmdlines(pid))
    return True


def hit_marks(h):
    return {k: h[k] for k in ("cache-status", "x-cache-status", "x-cache", "via", "age") if k in h}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--sample", default="")
    ap.add_argument("--log", required=True, help="the command's stdout and stderr")
    ap.add_argument("--cpu", default="1")
    ap.add_argument("--timeout", type=float, default=1200)
    ap.add_argument("--done-log", default="")
    ap.add_argument("--done-regex", default="")
    ap.add_argument("--done-gone", default="")
    ap.add_argument("--then", choices=["term", "kill", "keep"], default="term")
    ap.add_argument("--settle", type=float, default=1.0)
    ap.add_argument("--poll-ms", type=float, default=1.0)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    sample = [l.strip() for l in open(a.sample)] if a.sample else []
    sample = [s for s in sample if s]
    done_from = os.path.getsize(a.done_log) if a.done_log and os.path.exists(a.done_log) else 0
    log = open(a.log, "a")
    t0 = time.monotonic()
    p = subprocess.Popen(["taskset", "-c", a.cpu] + cmd, stdout=log, stderr=log,
                         stdin=subprocess.DEVNULL, start_new_session=False)
    ms = lambda: round((time.monotonic() - t0) * 1000, 1)
    out = {"pid": p.pid, "first_answer_ms": None, "first_hit_ms": None, "p99_ms": None,
           "polls": 0, "statuses": {}}
    deadline = t0 + a.timeout
    cl = Client(a.port)
    probes = sample[:200]
    # 1. the first answer / the first hit
    while time.monotonic() < deadline and p.poll() is None:
        path = probes[out["polls"] % len(probes)] if probes else "/"
        out["polls"] += 1
        status, h = cl.get(path)
        if status is None:
            time.sleep(a.poll_ms / 1000)
            continue
        if out["first_answer_ms"] is None:
            out["first_answer_ms"] = ms()
        out["statuses"][str(status)] = out["statuses"].get(str(status), 0) + 1
        if not sample:
            break
        if status == 200:
            out["first_hit_ms"] = ms()
            out["first_hit"] = {"path": path} | hit_marks(h)
            break
        time.sleep(a.poll_ms / 1000)
    # 2. 99 % of the sample; give up once the index is complete and a whole sweep after that
    # found nothing new (objects the target lost: `sample_hits` says how many it has)
    if sample and out["first_hit_ms"] is not None:
        left = [s for s in sample if s != out["first_hit"]["path"]]
        need = len(sample) - len(sample) * 99 // 100
        sweeps, marks, done_at = 0, {}, None
        while time.monotonic() < deadline and p.poll() is None:
            sweeps += 1
            was_done = done_at is not None
            still = []
            for path in left:
                status, h = cl.get(path)
                if status == 200:
                    m = hit_marks(h)
                    key = " ".join(f"{k}={m[k]}" for k in sorted(m) if k != "age")
                    marks[key] = marks.get(key, 0) + 1
                else:
                    still.append(path)
            found = len(left) - len(still)
            left = still
            if len(left) < need and out["p99_ms"] is None:
                out["p99_ms"] = ms()
            if not left or out["p99_ms"] is not None or (was_done and not found):
                break
            if done_at is None and index_done(a, done_from, p.pid):
                done_at = ms()
            time.sleep(0.05)
        out["sweeps"], out["sample_hits"] = sweeps, len(sample) - len(left)
        out["hit_headers"] = marks
    # 3. the index complete: then memory
    while time.monotonic() < deadline and p.poll() is None and not index_done(a, done_from, p.pid):
        time.sleep(0.1)
    out["index_done_ms"] = ms()
    time.sleep(a.settle)
    rss, pss, anon_shmem, anon, procs = memory(p.pid)
    out["rss_bytes"], out["pss_bytes"], out["anon_shmem_bytes"] = rss, pss, anon_shmem
    out["anon_bytes"] = anon
    out["procs"] = [{"pid": q, "cmd": n, "rss": r, "pss": s} for q, n, r, s in procs]
    out["exited_early"] = p.poll()
    if a.then == "keep":
        print(json.dumps(out)); sys.stdout.flush()
        os._exit(0)
    t1 = time.monotonic()
    shmem_before = system_shmem()
    p.send_signal(signal.SIGTERM if a.then == "term" else signal.SIGKILL)
    if a.then == "kill":
        # the whole tree: nginx's workers, Squid's kids
        for q, *_ in procs:
            try:
                os.kill(q, signal.SIGKILL)
            except OSError:
                pass
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill(); p.wait()
        out["stop"] = "SIGTERM timed out after 120 s: killed"
    # children may outlive the root briefly
    for _ in range(100):
        if not any(running(q) for q, *_ in procs if q != p.pid):
            break
        time.sleep(0.1)
    out["stop_ms"] = round((time.monotonic() - t1) * 1000, 1)
    time.sleep(0.2)
    # what the stop gave back (other processes' changes meanwhile are noise in this figure)
    out["shmem_freed_bytes"] = shmem_before - system_shmem()
    out["exit"] = p.returncode
    print(json.dumps(out))


if __name__ == "__main__":
    main()
