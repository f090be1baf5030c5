#!/usr/bin/env python3
"""Many listening agents on one relay, measured from outside its process.

    bench/listeners.py [--agents 10000] [--mcp 5000] [--followers 1000] [--sends 200] BIN

Starts BIN on a spare loopback port with a throwaway database, its bounds
on connections, open streams and sessions raised by their variables, and
connects AGENTS listening agents to it from this process, from source
addresses spread across 127.0.0.0/8 so the per-address bounds hold as they
would in production:

- MCP of them are MCP sessions as Claude Code holds one: `initialize`
  (2025-11-25) on `/mcp?push=1`, `notifications/initialized`, the
  standalone stream (`GET /mcp?push=1`), and a `tools/list` for each
  `notifications/tools/list_changed` the relay sends to ask the client to
  prove it listens; FOLLOWERS of them follow a channel (`follow_channel`);
- the rest are inbox streams (`GET /api/inbox/stream`).

While all are connected it measures:

- the relay's resident memory per listening agent of each kind (its
  growth while they connected, divided by their number);
- from a send (`POST /api/messages`) to its push on bob's MCP session,
  and to its event on dave's inbox stream, SENDS times one after another,
  p50 / p99; the baseline is the same with nobody else connected, in the
  same run;
- from a channel post to its push on each follower's session, p50 / p99
  over the followers;
- after the relay is restarted on the same database, the time until every
  agent has its stream open again: the sessions carry on under their ids
  (the relay restores them), and one that is refused starts a new one, as
  a client does, which is counted.

Nothing here leaves 127.0.0.1/8. Needs a limit on open files above AGENTS
for this process and for the relay: it raises both as far as the hard
limit allows.
"""

import argparse
import asyncio
import json
import math
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from outside import Relay  # noqa: E402


BATCH = 200
PROTOCOL = "2025-11-25"
# Longest the benchmark waits for any one thing (a stream to be ready, an
# event to arrive) before it fails the run.
TIMEOUT = 60


def raise_file_limit():
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def source(n):
    """The n-th client's source address: 127.0.1.1 onwards, 50 to each."""
    n //= 50
    return f"127.{1 + n // 250}.{1 + n % 250}.1"


def head(method, path, port, headers, body=b""):
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def read_head(reader):
    status = await reader.readline()
    headers = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status.split()[1]) if status else 0, headers


async def read_body(reader, headers):
    if headers.get("transfer-encoding") == "chunked":
        body = b""
        while size := int((await reader.readline()).strip() or b"0", 16):
            body += await reader.readexactly(size)
            await reader.readline()
        return body
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    return await reader.read()


async def request(port, address, method, path, headers, body=None):
    """One request on a connection of its own: status, headers, body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))
    try:
        data = json.dumps(body).encode() if body is not None else b""
        writer.write(head(method, path, port, {**headers, "Connection": "close"}, data))
        await writer.drain()
        status, answered = await read_head(reader)
        return status, answered, await read_body(reader, answered)
    finally:
        writer.close()


def event(line):
    """The JSON of an SSE `data:` line; None for any other line (rmcp's
    priming events have empty data)."""
    if not line.startswith(b"data:") or not line[5:].strip():
        return None
    try:
        return json.loads(line[5:])
    except ValueError:
        return None


def reply(headers, data, ident):
    """The JSON-RPC reply numbered `ident` in a POST's answer, plain JSON
    or an SSE stream; an error reply is raised."""
    if headers.get("content-type", "").startswith("application/json"):
        said = [json.loads(data)]
    else:
        said = [e for e in map(event, data.splitlines()) if e is not None]
    for answer in said:
        if isinstance(answer, dict) and answer.get("id") == ident:
            if "result" not in answer:
                raise RuntimeError(f"reply {ident}: {answer}")
            return answer["result"]
    raise RuntimeError(f"no reply {ident} in {data[:200]!r}")


class Stream:
    """One inbox stream, read as it comes: the ids of its events, with when.
    (Each event comes in one chunk of the response, so its chunked framing
    is read past, not taken apart.)"""

    def __init__(self, port, token, address):
        self.port, self.token, self.address = port, token, address
        self.events = {}
        self.waiters = {}
        self.fresh()

    def fresh(self):
        """Before its stream opens (again)."""
        self.ready = asyncio.Event()  # set once pushes can reach it, or it failed
        self.failed = None
        self.ended = False  # its stream ended without being stopped

    path = "/api/inbox/stream"

    def headers(self):
        return {"Authorization": f"Bearer {self.token}", "Accept": "text/event-stream"}

    async def run(self):
        try:
            await self.read()
        except Exception as error:  # said by connect(), which waits on `ready`
            self.failed = error
            self.ready.set()

    async def handshake(self):
        """What comes before the stream opens (nothing for an inbox stream)."""

    async def read(self):
        while True:
            await self.handshake()
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", self.port, local_addr=(self.address, 0), limit=1 << 20
            )
            try:
                writer.write(head("GET", self.path, self.port, self.headers()))
                await writer.drain()
                status, _ = await read_head(reader)
                if status == 404 and self.refused():
                    continue
                if status != 200:
                    raise RuntimeError(f"GET {self.path}: {status}")
                self.opened()
                while line := await reader.readline():
                    if (said := event(line)) is not None:
                        self.seen(said)
                self.ended = True
                return
            finally:
                writer.close()

    def opened(self):
        """Its stream answered 200: an inbox stream is pushed to at once."""
        self.ready.set()

    def refused(self):
        """Whether to start again after a 404 (a session the relay lost)."""
        return False

    def seen(self, said):
        ident = said.get("id") if isinstance(said, dict) else None
        if ident is not None:
            self.arrived(ident)

    def arrived(self, ident):
        self.events[ident] = time.perf_counter()
        waiter = self.waiters.pop(ident, None)
        if waiter:
            waiter.set()

    async def until(self, ident):
        if ident not in self.events:
            waiter = self.waiters.setdefault(ident, asyncio.Event())
            await asyncio.wait_for(waiter.wait(), TIMEOUT)
        return self.events[ident]


class McpAgent(Stream):
    """An MCP session with its push stream, proving it listens as Claude
    Code does: a `tools/list` for each `notifications/tools/list_changed`
    (one at a time); the relay pushes to it after the second since its
    stream opened."""

    path = "/mcp?push=1"

    def __init__(self, port, token, address, follows=None):
        super().__init__(port, token, address)
        self.follows = follows
        self.session = None
        self.started = 0  # sessions this agent had to start
        self.listing = None
        self.list_failures = 0
        self.lists = 0  # tools/list answered since its stream opened

    def headers(self):
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json, text/event-stream",
        }
        if self.session:
            headers["Mcp-Session-Id"] = self.session
            headers["MCP-Protocol-Version"] = PROTOCOL
        return headers

    async def call(self, ident, method, params=None):
        body = {"jsonrpc": "2.0", "method": method}
        if ident is not None:
            body["id"] = ident
        if params is not None:
            body["params"] = params
        status, headers, data = await request(
            self.port, self.address, "POST", self.path, self.headers(), body)
        if status not in (200, 202):
            raise RuntimeError(f"{method}: {status} {data[:200]!r}")
        return headers, None if ident is None else reply(headers, data, ident)

    async def handshake(self):
        if self.session:
            return  # after a restart: carry on under the same session
        headers, _ = await self.call(1, "initialize", {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "listeners-bench", "version": "1"},
        })
        self.session = headers["mcp-session-id"]
        self.started += 1
        await self.call(None, "notifications/initialized")
        if self.follows:
            _, result = await self.call(2, "tools/call", {
                "name": "follow_channel", "arguments": {"channel": self.follows}})
            if result.get("isError"):
                raise RuntimeError(f"follow_channel: {result}")

    def opened(self):
        self.lists = 0

    def refused(self):
        # A client whose session the relay no longer knows starts another.
        if not self.session:
            return False
        self.session = None
        return True

    async def list_tools(self):
        try:
            await self.call(3, "tools/list")
        except (OSError, RuntimeError):
            # Counted: none may fail but across the relay's restart (the
            # next request to prove comes again).
            self.list_failures += 1
            return
        self.lists += 1
        if self.lists == 2:
            self.ready.set()

    def seen(self, said):
        method = said.get("method") if isinstance(said, dict) else None
        if method == "notifications/tools/list_changed":
            if self.listing is None or self.listing.done():
                self.listing = asyncio.ensure_future(self.list_tools())
        elif method == "notifications/claude/channel":
            self.arrived(int(said["params"]["meta"]["message_id"]))


async def post(port, path, token, body):
    status, _, data = await request(port, "127.0.0.1", "POST", path,
                                    {"Authorization": f"Bearer {token}"}, body)
    if status not in (200, 201):
        raise RuntimeError(f"POST {path}: {status} {data[:200]!r}")
    return json.loads(data)


async def stop(tasks):
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def percentiles(values):
    """p50 and p99, each the smallest value with that share at or below it."""
    values = sorted(values)
    return tuple(values[max(0, math.ceil(len(values) * p) - 1)] for p in (0.5, 0.99))


async def sends_to(relay, handle, stream, sends):
    took = []
    for _ in range(sends):
        started = time.perf_counter()
        sent = await post(relay.port, "/api/messages", relay.tokens["alice"],
                          {"to": handle, "body": "are you there?"})
        took.append((await stream.until(sent["message_id"]) - started) * 1000)
    return percentiles(took)


def fail(relay, said):
    log = open(os.path.join(relay.dir, "relay.log")).read()[-2000:]
    raise SystemExit(f"{said}\n{log}")


async def in_batches(agents, act):
    """`act` on every agent, BATCH at a time: a quarter of the connection
    bound may wait unvouched for (their credentials not yet read)."""
    done = []
    for start in range(0, len(agents), BATCH):
        done += await asyncio.gather(*(act(agent) for agent in agents[start:start + BATCH]))
    return done


async def connect(relay, agents):
    """Opens every agent's stream; returns once pushes can reach each."""
    tasks = []

    async def start(agent):
        agent.fresh()
        tasks.append(asyncio.create_task(agent.run()))
        await asyncio.wait_for(agent.ready.wait(), TIMEOUT)

    await in_batches(agents, start)
    failed = [agent.failed for agent in agents if agent.failed]
    if failed:
        fail(relay, f"{len(failed)} of {len(agents)} streams did not open: {failed[0]!r}")
    return tasks


def check_none_lost(relay, agents):
    ended = sum(agent.ended for agent in agents)
    unlisted = sum(getattr(agent, "list_failures", 0) for agent in agents)
    if ended or unlisted:
        fail(relay, f"{ended} streams ended, {unlisted} tools/list failed")


async def measure(args):
    limit = raise_file_limit()
    # Never below the defaults: a quarter of the connection bound may wait
    # unvouched for, and a batch's streams and its sessions' requests come
    # together.
    bound = str(max(args.agents + 1000, 4096))
    env = {
        "RELAY_MAX_CONNECTIONS": bound,
        "RELAY_MAX_WAITS": bound,
        "RELAY_MAX_WAITS_PER_PERSON": bound,
        "RELAY_MAX_SESSIONS_PER_PERSON": bound,
    }
    relay = Relay(args.binary, env, handles=("alice", "bob", "carol", "dave"))
    figures = {}
    tasks = []
    try:
        bob = McpAgent(relay.port, relay.tokens["bob"], "127.0.0.1")
        dave = Stream(relay.port, relay.tokens["dave"], "127.0.0.1")
        mine = [bob, dave]
        tasks += await connect(relay, mine)
        await post(relay.port, "/api/channels/bench/messages", relay.tokens["alice"],
                   {"body": "the channel the followers follow"})
        figures["send to push on an MCP session, nobody else connected, p50 / p99 (ms)"] = \
            await sends_to(relay, "bob", bob, args.sends)
        figures["send to an inbox stream, nobody else connected, p50 / p99 (ms)"] = \
            await sends_to(relay, "dave", dave, args.sends)

        carol = relay.tokens["carol"]
        sessions = [McpAgent(relay.port, carol, source(n),
                             "bench" if n < args.followers else None)
                    for n in range(args.mcp)]
        streams = [Stream(relay.port, carol, source(n)) for n in range(args.mcp, args.agents)]
        handshakes = 0
        if sessions:
            before, _ = relay.memory_mb()
            await in_batches(sessions, McpAgent.handshake)
            after, _ = relay.memory_mb()
            handshakes = (after - before) * 1024 / len(sessions)
            figures["relay memory per MCP session before its stream opens (KiB)"] = handshakes
        for kind, agents, opened in (("MCP sessions with a push stream", sessions, handshakes),
                                     ("inbox streams", streams, 0)):
            if not agents:
                continue
            before, _ = relay.memory_mb()
            started = time.perf_counter()
            tasks += await connect(relay, agents)
            figures[f"connecting {len(agents)} {kind}, until pushes reach each (s)"] = \
                time.perf_counter() - started
            after, _ = relay.memory_mb()
            figures[f"relay memory per listening agent, {kind}, in all (KiB)"] = \
                opened + (after - before) * 1024 / len(agents)
        everyone = mine + sessions + streams
        after, anon = relay.memory_mb()
        figures["relay memory with all connected, all / anonymous (MB)"] = (after, anon)
        figures[f"send to push on an MCP session, {len(everyone)} connected, p50 / p99 (ms)"] = \
            await sends_to(relay, "bob", bob, args.sends)
        figures[f"send to an inbox stream, {len(everyone)} connected, p50 / p99 (ms)"] = \
            await sends_to(relay, "dave", dave, args.sends)
        if args.followers:
            started = time.perf_counter()
            posted = await post(relay.port, "/api/channels/bench/messages",
                                relay.tokens["alice"], {"body": "to every follower"})
            arrived = [await s.until(posted["id"]) for s in sessions[: args.followers]]
            figures[f"channel post to {args.followers} following sessions, p50 / p99 (ms)"] = \
                percentiles([(t - started) * 1000 for t in arrived])
        check_none_lost(relay, everyone)

        relay.restart()
        await stop(tasks)
        started_before = sum(s.started for s in sessions)
        started = time.perf_counter()
        tasks = await connect(relay, everyone)
        figures[f"reconnecting {len(everyone)} agents after a restart, until pushes reach each (s)"] = \
            time.perf_counter() - started
        figures["sessions started again after the restart (of those connected)"] = \
            sum(s.started for s in sessions) - started_before
        figures["send to push on an MCP session after the restart, p50 / p99 (ms)"] = \
            await sends_to(relay, "bob", bob, min(args.sends, 50))
    finally:
        await stop(tasks)
        relay.stop()
    print(f"{args.binary}: {args.agents} agents, {args.mcp} of them MCP sessions "
          f"({args.followers} following a channel), the rest inbox streams; "
          f"open files up to {limit}")
    for name, value in figures.items():
        shown = " / ".join(f"{v:,.2f}" for v in value) if isinstance(value, tuple) else f"{value:,.2f}"
        print(f"{name:<90} {shown}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--mcp", type=int, help="how many are MCP sessions (half by default)")
    parser.add_argument("--followers", type=int, default=1_000)
    parser.add_argument("--sends", type=int, default=200)
    args = parser.parse_args()
    if args.mcp is None:
        args.mcp = args.agents // 2
    if not 0 <= args.followers <= args.mcp <= args.agents:
        parser.error("need 0 <= --followers <= --mcp <= --agents")
    asyncio.run(measure(args))


if __name__ == "__main__":
    main()
