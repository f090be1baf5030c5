#!/usr/bin/env python3
"""What a teammate's posts can cost the others, measured from outside the relay.

    bench/hardening.py [--rounds 2] BIN [BASELINE_BIN]

Each figure is printed beside its baseline from the same run: a cost
against the same cost of ordinary use, and, when a second binary is named,
each binary's figures beside the other's (run alternately, A B A B).

- Rendering: a channel of 60 table bombs (wide headers over one-cell rows,
  as much as a body holds), each distinct, viewed on the team page by 8
  clients at once that leave after 1 s, on a fresh relay (nothing
  rendered yet). The relay's CPU seconds from the first view until it is
  idle again, and its peak resident memory, beside the same for a channel
  of 60 ordinary bodies of 64 KB (prose, lists, code, a table).
- Reply waits: posts a second, one after another from 4 connections, into
  a thread in which the poster has 16 `wait_for_reply_seconds` waits open,
  beside the same with none open.

The relay's CPU time is read from /proc (utime + stime), its peak memory
from VmHWM. Nothing here leaves 127.0.0.1.
"""

import argparse
import base64
import concurrent.futures
import os
import random
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from outside import Relay  # noqa: E402

BODIES = 60
VIEWERS = 8
VIEWERS_LEAVE_AFTER = 1.0
WAITS = 16
POSTERS = 4
POST_SECONDS = 5.0
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def peak_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def bomb(n):
    table = "|h" * 2000 + "|\n" + "|-" * 2000 + "|\n" + "|x|\n" * 200
    return (f"bomb {n}\n\n" + table * 8)[:64_000]


WORDS = ("the relay keeps every message in one file and wakes each waiting agent when "
         "a teammate answers so nobody polls and nothing is lost on the way").split()


def ordinary(n):
    rng = random.Random(n)
    parts = [f"# Notes {n}\n"]
    while sum(map(len, parts)) < 63_000:
        kind = rng.randrange(4)
        if kind == 0:
            parts.append(" ".join(rng.choice(WORDS) for _ in range(80)) + "\n")
        elif kind == 1:
            parts.append("".join(f"- {' '.join(rng.sample(WORDS, 6))}\n" for _ in range(8)))
        elif kind == 2:
            parts.append("```rust\n" + "".join(
                f"let x{i} = relay.wait({i}).await?;\n" for i in range(12)) + "```\n")
        else:
            parts.append("| name | state | when |\n|---|---|---|\n" + "".join(
                f"| {rng.choice(WORDS)} | {rng.choice(WORDS)} | {i} |\n" for i in range(10)))
    return "\n".join(parts)[:64_000]


def post(relay, path, token, body):
    relay.request("POST", path, token, body)


def idle(pid, quiet=0.5, limit=600.0):
    """Waits until the process has used no CPU for `quiet` seconds (polling
    /proc: this is the end of a measurement, not part of it)."""
    deadline = time.monotonic() + limit
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(quiet)
        now = cpu_seconds(pid)
        if now - last < 0.01:
            return
        last = now


def view(relay, token):
    request = urllib.request.Request(relay.url + "/channels/c")
    basic = base64.b64encode(f"x:{token}".encode()).decode()
    request.add_header("Authorization", f"Basic {basic}")
    try:
        with urllib.request.urlopen(request, timeout=VIEWERS_LEAVE_AFTER) as response:
            response.read()
            return "whole"
    except (TimeoutError, urllib.error.URLError, ConnectionError):
        return "left"


def rendering(binary, make):
    relay = Relay(binary, {})
    try:
        token = relay.tokens["alice"]
        for n in range(BODIES):
            post(relay, "/api/channels/c/messages", token, {"body": make(n)})
        idle(relay.process.pid)
        cpu, before = cpu_seconds(relay.process.pid), peak_mb(relay.process.pid)
        with concurrent.futures.ThreadPoolExecutor(VIEWERS) as pool:
            outcomes = list(pool.map(lambda _: view(relay, token), range(VIEWERS)))
        idle(relay.process.pid)
        return {
            "cpu": cpu_seconds(relay.process.pid) - cpu,
            "peak": peak_mb(relay.process.pid),
            "grew": peak_mb(relay.process.pid) - before,
            "whole": outcomes.count("whole"),
        }
    finally:
        relay.stop()


def replies(binary, waits):
    relay = Relay(binary, {})
    try:
        alice = relay.tokens["alice"]
        _, opened = relay.request("POST", "/api/messages", alice, {"to": "bob", "body": "hi"})
        thread = __import__("json").loads(opened)["thread_id"]
        waiting = [threading.Thread(target=lambda i=i: post(relay, "/api/messages", alice, {
            "to": "bob", "body": f"question {i}", "thread_id": thread,
            "wait_for_reply_seconds": 50}), daemon=True) for i in range(waits)]
        for w in waiting:
            w.start()
        time.sleep(1.0)  # the waits reach the relay and park: setup, not measured
        sent = [0] * POSTERS
        end = time.monotonic() + POST_SECONDS

        def poster(k):
            while time.monotonic() < end:
                post(relay, "/api/messages", alice,
                     {"to": "bob", "body": f"more {k} {sent[k]}", "thread_id": thread})
                sent[k] += 1

        cpu = cpu_seconds(relay.process.pid)
        with concurrent.futures.ThreadPoolExecutor(POSTERS) as pool:
            list(pool.map(poster, range(POSTERS)))
        return {"rate": sum(sent) / POST_SECONDS,
                "cpu_per_post_ms": 1000 * (cpu_seconds(relay.process.pid) - cpu) / sum(sent)}
    finally:
        relay.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("binary")
    parser.add_argument("baseline", nargs="?")
    args = parser.parse_args()
    binaries = [("A", args.binary)] + ([("B", args.baseline)] if args.baseline else [])
    figures = {}
    for _ in range(args.rounds):
        for name, binary in binaries:
            for kind, make in (("bombs", bomb), ("ordinary", ordinary)):
                figures.setdefault((name, kind), []).append(rendering(binary, make))
            for waits in (WAITS, 0):
                figures.setdefault((name, f"waits={waits}"), []).append(replies(binary, waits))
    for name, binary in binaries:
        print(f"{name}: {binary}")
        for kind in ("bombs", "ordinary"):
            runs = figures[(name, kind)]
            print(f"  {VIEWERS} first views of {BODIES} {kind:8}: "
                  f"CPU {statistics.median(r['cpu'] for r in runs):6.2f} s, "
                  f"peak {max(r['peak'] for r in runs):7.1f} MB "
                  f"(+{max(r['grew'] for r in runs):6.1f} MB by the views), "
                  f"pages sent whole {min(r['whole'] for r in runs)}/{VIEWERS}")
        bombs, plain = (statistics.median(r["cpu"] for r in figures[(name, k)])
                        for k in ("bombs", "ordinary"))
        print(f"  bombs / ordinary CPU: {bombs / max(plain, 0.01):.2f}")
        for waits in (WAITS, 0):
            runs = figures[(name, f"waits={waits}")]
            print(f"  posts a second, {waits:2} waits open: "
                  f"{statistics.median(r['rate'] for r in runs):7.1f} "
                  f"(CPU {statistics.median(r['cpu_per_post_ms'] for r in runs):.2f} ms a post)")
        busy, quiet = (statistics.median(r["rate"] for r in figures[(name, f"waits={w}")])
                       for w in (WAITS, 0))
        print(f"  with / without waits: {busy / quiet:.2f}")


if __name__ == "__main__":
    main()
