#!/usr/bin/env python3
"""Many listening agents on one relay, measured from outside its process.

    bench/listeners.py [--agents 10000] [--followers 1000] [--sends 200] BIN

Starts BIN on a spare loopback port with a throwaway database, its bounds
on connections and open streams raised by their variables, and connects
AGENTS listening agents to it from this process: each an inbox stream
(`GET /api/inbox/stream`), FOLLOWERS of them a channel's stream instead
(`GET /api/channels/bench/stream`), from source addresses spread across
127.0.0.0/8 so the per-address bounds hold as they would in production.
While all are connected it measures:

- the relay's resident memory per listening agent (its growth from
  before the agents connected, divided by their number);
- from a send to bob (`POST /api/messages`) to its event on bob's stream,
  SENDS times one after another, p50 / p99; the baseline is the same
  with nobody else connected, in the same run;
- from a channel post to its event on each of the followers' streams,
  p50 / p99 over the followers;
- after the relay is restarted on the same database, the time until every
  agent has its stream open again.

Nothing here leaves 127.0.0.1/8. Needs a limit on open files above twice
AGENTS: it raises its own and the relay's as far as the hard limit allows.
"""

import argparse
import asyncio
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from outside import Relay  # noqa: E402


BATCH = 200


def raise_file_limit():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def source(n):
    """The n-th client's source address: 127.0.1.1 onwards, 50 to each."""
    n //= 50
    return f"127.{1 + n // 250}.{1 + n % 250}.1"


class Stream:
    """One SSE stream, read as it comes: the ids of its events, with when."""

    def __init__(self):
        self.events = {}
        self.waiters = {}
        self.open = asyncio.Event()
        self.failed = None

    async def run(self, port, path, token, address):
        try:
            await self.read(port, path, token, address)
        except Exception as error:  # said by connect(), which waits on `open`
            self.failed = error
            self.open.set()

    async def read(self, port, path, token, address):
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, local_addr=(address, 0), limit=1 << 20
        )
        writer.write(
            (
                f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
            ).encode()
        )
        await writer.drain()
        status = await reader.readline()
        if b" 200 " not in status:
            raise RuntimeError(f"{path}: {status!r}")
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        self.open.set()
        try:
            while line := await reader.readline():
                if line.startswith(b"data:"):
                    try:
                        said = json.loads(line[5:])
                    except ValueError:
                        continue
                    ident = said.get("id") if isinstance(said, dict) else None
                    if ident is not None:
                        self.events[ident] = time.perf_counter()
                        waiter = self.waiters.pop(ident, None)
                        if waiter:
                            waiter.set()
        finally:
            writer.close()

    async def until(self, ident):
        if ident not in self.events:
            event = self.waiters.setdefault(ident, asyncio.Event())
            await event.wait()
        return self.events[ident]


async def post(port, path, token, body):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    writer.write(
        (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n"
        ).encode()
        + data
    )
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])


async def stop(tasks):
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def percentiles(values):
    values = sorted(values)
    return values[len(values) // 2], values[max(0, int(len(values) * 0.99) - 1)]


async def sends_to_bob(relay, bob_stream, sends):
    took = []
    for _ in range(sends):
        started = time.perf_counter()
        sent = await post(relay.port, "/api/messages", relay.tokens["alice"],
                          {"to": "bob", "body": "are you there?"})
        took.append((await bob_stream.until(sent["message_id"]) - started) * 1000)
    return percentiles(took)


async def connect(relay, agents, followers, carol):
    streams, tasks = [], []
    for n in range(agents):
        stream = Stream()
        path = "/api/channels/bench/stream" if n < followers else "/api/inbox/stream"
        tasks.append(asyncio.create_task(stream.run(relay.port, path, carol, source(n))))
        streams.append(stream)
        # A quarter of the connection bound may wait unvouched for (their
        # credentials not yet read): open them in batches below that.
        if n % BATCH == BATCH - 1:
            await asyncio.gather(*(s.open.wait() for s in streams[-BATCH:]))
    await asyncio.gather(*(s.open.wait() for s in streams))
    failed = [s.failed for s in streams if s.failed]
    if failed:
        log = open(os.path.join(relay.dir, "relay.log")).read()[-2000:]
        raise SystemExit(f"{len(failed)} of {agents} streams did not open: {failed[0]!r}\n{log}")
    return streams, tasks


async def measure(args):
    limit = raise_file_limit()
    env = {
        "RELAY_MAX_CONNECTIONS": str(args.agents + 1000),
        "RELAY_MAX_WAITS": str(args.agents + 1000),
        "RELAY_MAX_WAITS_PER_PERSON": str(args.agents + 1000),
    }
    relay = Relay(args.binary, env, handles=("alice", "bob", "carol"))
    figures = {}
    try:
        bob = Stream()
        bob_task = asyncio.create_task(bob.run(relay.port, "/api/inbox/stream",
                                               relay.tokens["bob"], "127.0.0.1"))
        await bob.open.wait()
        figures["send to push, nobody else connected, p50 / p99 (ms)"] = await sends_to_bob(
            relay, bob, args.sends)
        before, _ = relay.memory_mb()
        started = time.perf_counter()
        streams, tasks = await connect(relay, args.agents, args.followers, relay.tokens["carol"])
        figures[f"connecting {args.agents} agents (s)"] = time.perf_counter() - started
        after, anon = relay.memory_mb()
        figures["relay memory per listening agent (KiB)"] = (after - before) * 1024 / args.agents
        figures["relay memory with all connected, all / anonymous (MB)"] = (after, anon)
        figures[f"send to push, {args.agents} connected, p50 / p99 (ms)"] = await sends_to_bob(
            relay, bob, args.sends)
        started = time.perf_counter()
        posted = await post(relay.port, "/api/channels/bench/messages", relay.tokens["alice"],
                            {"body": "to every follower"})
        arrived = [await s.until(posted["id"]) for s in streams[: args.followers]]
        figures[f"channel post to {args.followers} followers, p50 / p99 (ms)"] = percentiles(
            [(t - started) * 1000 for t in arrived])
        relay.restart()
        await stop(tasks + [bob_task])
        started = time.perf_counter()
        streams, tasks = await connect(relay, args.agents, args.followers, relay.tokens["carol"])
        figures[f"reconnecting {args.agents} agents after a restart (s)"] = time.perf_counter() - started
        await stop(tasks)
    finally:
        relay.stop()
    print(f"{args.binary}: {args.agents} agents ({args.followers} following a channel), "
          f"open files up to {limit}")
    for name, value in figures.items():
        shown = " / ".join(f"{v:,.2f}" for v in value) if isinstance(value, tuple) else f"{value:,.2f}"
        print(f"{name:<60} {shown}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--followers", type=int, default=1_000)
    parser.add_argument("--sends", type=int, default=200)
    asyncio.run(measure(parser.parse_args()))


if __name__ == "__main__":
    main()
