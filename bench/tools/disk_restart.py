#!/usr/bin/env python3
"""Start Sepia and time its first disk hit (bench/disk.sh).

    disk_restart.py --bin B --config C --stderr FILE --port P --path /t/x-5 [--cpu 1]
                    [--timeout 30] [--then term|kill|keep] [--settle 1.0]

Records the time just before exec, then polls GET PATH every 20 ms (PATH may be a comma
separated list, polled in turn: a lookup during the index load can lose its object, see
bench/README.md) with
`Cache-Control: only-if-cached` (so a poll made before the index is loaded is a 504 and
stores nothing: the first `Cache-Status: sepia; hit` is served from disk, never from a copy the polls put in
memory). Prints one JSON line: ms to the first answer of any kind, ms to the first 200,
the `disk cache index loaded` fields from Sepia's stderr (objects, from_checkpoint,
segments, ms), VmRSS 1.5 s (or --settle) after the index is loaded (`rss_bytes`; and 0.2 s
after, `rss_0_2s_bytes`), and what ended the process.
With --path '' it only waits --settle seconds after the first answer (an empty-disk start:
RSS baseline).
"""
import argparse, http.client, json, os, re, signal, socket, subprocess, sys, time


def rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def loaded_line(path):
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    for line in text.splitlines():
        if "disk cache index loaded" in line:
            clean = re.sub(r"\x1b\[[0-9;]*m", "", line)
            fields = dict(re.findall(r"(\w+)=(\S+)", clean))
            return {k: fields.get(k) for k in ("objects", "from_checkpoint", "segments", "ms")} | {"line": clean.strip()}
    return None


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        c.request("GET", path, headers={"Cache-Control": "only-if-cached"})
        r = c.getresponse()
        r.read()
        return r.status, r.getheader("Cache-Status") or ""
    finally:
        c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--stderr", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--path", default="")
    ap.add_argument("--cpu", default="1")
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--then", choices=["term", "kill", "keep"], default="term")
    ap.add_argument("--settle", type=float, default=1.0)
    a = ap.parse_args()
    err = open(a.stderr, "w")
    env = dict(os.environ, SEPIA_LOG=os.environ.get("SEPIA_LOG", "info"), NO_COLOR="1")
    t0 = time.monotonic()
    p = subprocess.Popen(["taskset", "-c", a.cpu, a.bin, "--config", a.config],
                         stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, env=env)
    out = {"pid": p.pid, "first_answer_ms": None, "first_hit_ms": None, "polls": 0, "statuses": {}}
    paths = [x for x in a.path.split(",") if x]
    deadline = t0 + a.timeout
    while time.monotonic() < deadline and p.poll() is None:
        out["polls"] += 1
        try:
            path = paths[out["polls"] % len(paths)] if paths else "/nginx_status"
            status, cs = get(a.port, path)
        except (ConnectionError, socket.timeout, OSError, http.client.HTTPException):
            time.sleep(0.02)
            continue
        now = (time.monotonic() - t0) * 1000
        if out["first_answer_ms"] is None:
            out["first_answer_ms"] = round(now, 1)
        kind = f"{status} {cs.split(';')[1].strip() if ';' in cs else cs}"
        out["statuses"][kind] = out["statuses"].get(kind, 0) + 1
        if not a.path:
            break
        if status == 200 and cs.startswith("sepia; hit"):
            out["hit_path"] = path
            out["first_hit_ms"] = round(now, 1)
            out["cache_status"] = cs
            break
        time.sleep(0.02)
    if not a.path:
        time.sleep(a.settle)
    # the index load line (it may come after the first hit only if the hit raced it)
    end = time.monotonic() + a.timeout
    while a.path and time.monotonic() < end and loaded_line(a.stderr) is None and p.poll() is None:
        time.sleep(0.05)
    out["index"] = loaded_line(a.stderr)
    # RSS once what the load freed has gone back: jemalloc returns freed pages after its
    # 1 s dirty decay (.cargo/config.toml). A rebuild from segment summaries (no checkpoint)
    # frees its read buffers and outgrown tables: for 1M objects RSS was 87 MB 0.2 s after
    # its end and 37.6 MB 1 s after, where it stayed (2026-11-28).
    time.sleep(0.2)
    out["rss_0_2s_bytes"] = rss(p.pid)
    time.sleep(max(a.settle, 1.5) - 0.2)
    out["rss_bytes"] = rss(p.pid)
    out["exited_early"] = p.poll()
    if a.then == "keep":
        print(json.dumps(out)); sys.stdout.flush()
        return
    t1 = time.monotonic()
    p.send_signal(signal.SIGTERM if a.then == "term" else signal.SIGKILL)
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill(); p.wait()
        out["stop"] = "SIGTERM timed out after 60 s: killed"
    out["stop_ms"] = round((time.monotonic() - t1) * 1000, 1)
    out["exit"] = p.returncode
    print(json.dumps(out))


if __name__ == "__main__":
    main()
