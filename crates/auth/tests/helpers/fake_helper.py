#!/usr/bin/env python3
"""A Squid basic-auth helper for Sepia's tests.

Usage: fake_helper.py MODE STARTS_FILE [N]
Every start appends a line to STARTS_FILE, so tests can count restarts. A request
"[id] user password" (both %-escaped, as Squid sends them) is valid when the
password is the user name followed by "-pw".

MODE:
  plain       answer each line in order: OK, or ERR message="..."
  concurrent  lines carry a channel-ID; users named slow* are answered 0.5 s
              later, so replies come back out of order
  crash       like plain, but exit(1) on reading line N+1 without answering it
  crash-once  like crash in the first process started, like plain in later ones
  hang        never answer
  bh          answer BH message="backend down"
  garbage     answer something that is not OK/ERR/BH
"""
import fcntl
import sys
import threading
import time
from urllib.parse import unquote_to_bytes

mode, starts = sys.argv[1], sys.argv[2]
limit = int(sys.argv[3]) if len(sys.argv) > 3 else 0
with open(starts, "a+") as f:
    fcntl.flock(f, fcntl.LOCK_EX)  # children start together; one must be first
    f.seek(0)
    first = f.read() == ""
    f.write("start\n")
if mode == "crash-once":
    mode = "crash" if first else "plain"

lock = threading.Lock()


def reply(text):
    with lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def verdict(user, password):
    user, password = unquote_to_bytes(user), unquote_to_bytes(password)
    if password == user + b"-pw":
        return "OK"
    return 'ERR message="wrong password"'


count = 0
for line in sys.stdin:
    count += 1
    words = line.rstrip("\n").split(" ")
    if mode == "plain":
        reply(verdict(words[0], words[1]))
    elif mode == "concurrent":
        channel, user, password = words
        delay = 0.5 if user.startswith("slow") else 0.0
        answer = channel + " " + verdict(user, password)
        threading.Timer(delay, reply, [answer]).start()
    elif mode == "crash":
        if count > limit:
            sys.exit(1)
        reply(verdict(words[0], words[1]))
    elif mode == "hang":
        pass
    elif mode == "bh":
        reply('BH message="backend down"')
    elif mode == "garbage":
        reply("MAYBE")
