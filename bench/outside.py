#!/usr/bin/env python3
"""The relay measured from outside its process, against a baseline run alternately.

    bench/outside.py [--rounds 3] [--seconds 5] BIN [BASELINE_BIN]

Each round starts each binary in turn (A B A B …) on a spare loopback port
with a throwaway database, the quotas off by their variables and room for
64 MCP sessions a person, and drives it with wrk (Debian's `wrk`): a
second process, never the relay's own threads. `--env` and
`--baseline-env` set variables for A and B, so one binary given twice
compares two settings (`RELAY_SQLITE_SYNC=normal` against the default).
`--postgres` runs A on PostgreSQL (Debian's `postgresql`, a server of the
run's own with its default, durable settings, a fresh database each round)
and B, unless another baseline is named, on SQLite with the same binary;
`--baseline-postgres` runs B on it too (two builds on PostgreSQL).

It measures:

- `GET /healthz`, 32 connections: what the HTTP stack alone serves; the
  baseline of every rate below, from the same run of the same binary;
- `POST /api/channels/bench/messages`, 32 connections, and one connection
  (sequential posts);
- `GET /api/channels/bench/messages?limit=100&since_id=…`, 16 connections:
  pages of a hundred messages from a thousand places among the first
  50,000 the posts wrote (the same places for both builds);
- `tools/call post_message` through `/mcp`, 32 connections, over 32 MCP
  sessions in turn (protocol 2025-11-25, or what the binary settles on)
  and, where the binary speaks it, stateless (2026-07-28);
- from a post until the long-poll waiting for it (`GET …/wait`) returns,
  the post's commit included, one at a time, p50 / p99; and the same while
  8 other connections post to another channel (wrk);
- the relay's resident memory when idle after start and after the load
  (each binary's pages dropped from the kernel's cache before it starts,
  so both builds map their code as read from disk);
- the wake's floor: a sync of the file system the database is on
  (`fsync`, as SQLite makes at each commit with `RELAY_SQLITE_SYNC=full`),
  after the same pause as each wake, p50 / p99: what syncing adds to a
  wake on this disk, whatever the relay does.

`--channel-relay PYTHON` measures crosstalk-mcp 2.0.0 too (C), the Python
channel relay crosstalk replaces, in each round after A and B: its REST
posts, wakes and memory. `--postgres-cpus LIST` starts the PostgreSQL
server on those CPUs; run the script under `taskset -c` with the others
(`taskset -c 0 bench/outside.py --postgres --postgres-cpus 1 …`) to
measure the relay as it runs beside a database on cores of its own.

Beside each rate under load it prints the CPU time a request cost, read
from /proc before and after: the relay's (its SQLite writer thread's
apart), the PostgreSQL server's, and wrk's own, which shares the cores.

Every figure is printed beside its baseline: each rate as a ratio of the
same run's `/healthz`, and each binary's figures beside the other's. Nothing
here leaves 127.0.0.1.
"""

import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

CONNECTIONS = 32
WAKES = 200
# The posts that load the relay while the loaded wakes are measured.
LOAD_CONNECTIONS = 8
# Reads are of places among this many first messages, which every build
# here posts (over 80,000 in 5 s).
READ_AMONG = 50_000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """A PostgreSQL server of the run's own, on a Unix socket in a temp
    dir, as the `postgres` user when run as root (PostgreSQL refuses root);
    its settings are PostgreSQL's defaults: a commit is on disk."""

    def __init__(self, cpus=None):
        root = "/usr/lib/postgresql"
        versions = sorted((v for v in (os.listdir(root) if os.path.isdir(root) else [])
                           if v.isdigit() and os.path.exists(f"{root}/{v}/bin/initdb")), key=int)
        if not versions:
            raise SystemExit("needs PostgreSQL: apt-get install postgresql")
        self.bin = f"{root}/{versions[-1]}/bin"
        self.dir = tempfile.mkdtemp(prefix="crosstalk-bench-pg-")
        if os.geteuid() == 0:
            shutil.chown(self.dir, user="postgres")
        self.databases = 0
        self.run(f"'{self.bin}/initdb' -D '{self.dir}/data' -A trust -U postgres -E UTF8 "
                 f">'{self.dir}/initdb.log' 2>&1")
        # The server and every process it starts run where pg_ctl does.
        pinned = f"taskset -c {cpus} " if cpus else ""
        self.run(f"{pinned}'{self.bin}/pg_ctl' -D '{self.dir}/data' -w -l '{self.dir}/server.log' "
                 f"-o \"-k {self.dir} -p 5432 -c listen_addresses='' -c max_connections=100\" "
                 "start >/dev/null")

    def run(self, script):
        command = ["sh", "-c", script]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--"] + command
        subprocess.run(command, check=True)

    def database(self):
        """A fresh database's URL."""
        self.databases += 1
        name = f"bench{self.databases}"
        self.run(f"'{self.bin}/createdb' -h '{self.dir}' -U postgres {name}")
        return f"postgresql:///{name}?host={self.dir}&port=5432&user=postgres"

    def cpu_seconds(self):
        """CPU time the server has used: the postmaster and the processes
        it started."""
        with open(f"{self.dir}/data/postmaster.pid") as pid_file:
            postmaster = pid_file.readline().strip()
        used = 0.0
        for pid in filter(str.isdigit, os.listdir("/proc")):
            stat = proc_stat(f"/proc/{pid}/stat")
            if stat and (pid == postmaster or stat[1] == postmaster):
                used += cpu_of(stat)
        return used

    def stop(self):
        self.run(f"'{self.bin}/pg_ctl' -D '{self.dir}/data' -m fast -w stop >/dev/null")
        shutil.rmtree(self.dir, ignore_errors=True)


def proc_stat(path):
    """The fields of a /proc stat file after the command's name (the
    state first), or None for a process or thread that has ended."""
    try:
        with open(path) as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def cpu_of(stat):
    """User and system time (s) in a /proc stat file's fields."""
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def cpu_used(relay, postgres):
    """CPU time (s) used so far by the relay, by its store's writer thread
    (SQLite's), by the PostgreSQL server if there is one, and by this
    script's children that ended (wrk)."""
    used = {"relay": 0.0, "writer": 0.0}
    task = f"/proc/{relay.process.pid}/task"
    for thread in os.listdir(task):
        stat = proc_stat(f"{task}/{thread}/stat")
        if stat is None:
            continue
        used["relay"] += cpu_of(stat)
        try:
            with open(f"{task}/{thread}/comm") as comm:
                if comm.read().strip() == "crosstalk-write":
                    used["writer"] += cpu_of(stat)
        except OSError:
            pass
    used["database"] = postgres.cpu_seconds() if postgres else 0.0
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    used["wrk"] = children.ru_utime + children.ru_stime
    return used


def costed(label, relay, postgres, path, seconds, *load):
    """Runs `wrk(relay.url, path, seconds, *load)`: wrk's answer, and the
    CPU each request cost as figures: the relay's (and its writer's, where
    it has one), the database server's, and wrk's own."""
    before = cpu_used(relay, postgres)
    answer = wrk(relay.url, path, seconds, *load)
    after = cpu_used(relay, postgres)
    requests = answer[0] * seconds
    costs = {}
    for part, name in (("relay", "the relay"), ("writer", "its writer thread"),
                       ("database", "PostgreSQL"), ("wrk", "wrk")):
        spent = after[part] - before[part]
        if spent > 0:
            costs[f"  {label}: CPU a request, {name} (µs)"] = spent / requests * 1e6
    return answer, costs


def forget_cached_pages(path):
    """Drops a binary's pages from the kernel's page cache, so that each
    build maps its code as it reads it from disk. Resident memory counts the
    code pages mapped, and a page fault maps whatever neighbours are
    cached: the same binary measured 3 MB more idle as a fresh copy, whose
    every page is cached, than as one run before (bench/README.md)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)  # pages not yet written out stay cached otherwise
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


class Server:
    """A process serving on loopback, from a temp dir of its own that
    holds its database and its log (`process`, `dir`)."""

    def serving(self, probe):
        """Returns once `probe` is answered; exits if the process ends or
        30 s pass first."""
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(probe, timeout=1).read()
                return
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise SystemExit(f"{self.process.args[0]} did not start: "
                                     f"see {self.dir}/relay.log")
                time.sleep(0.05)  # polling for the port to open: setup, not a measurement

    def log(self):
        return open(os.path.join(self.dir, "relay.log"), "a")

    def memory_mb(self):
        """Resident memory (MB): all of it, and the part that is the
        process's own (heap, stacks) rather than mapped file pages."""
        fields = {}
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "RssAnon"):
                    fields[name] = int(value.split()[0]) / 1024
        return fields.get("VmRSS", 0), fields.get("RssAnon", 0)

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class Relay(Server):
    """One binary serving on loopback, with two people on it."""

    def __init__(self, binary, env_extra, handles=("alice", "bob")):
        self.dir = tempfile.mkdtemp(prefix="crosstalk-bench-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = dict(
            os.environ,
            RELAY_DB=os.path.join(self.dir, "relay.db"),
            RELAY_HOST="127.0.0.1",
            RELAY_PORT=str(self.port),
            RELAY_PUBLIC_URL=self.url,
            RELAY_RATE_PER_CREDENTIAL="0",
            RELAY_RATE_PER_ADDRESS="0",
            RELAY_MAX_BYTES_PER_DAY="0",
            RELAY_MAX_SESSIONS_PER_PERSON="64",
            RUST_LOG="warn",
        )
        self.env.update(env_extra)
        self.binary = binary
        self.tokens = {h: self.add(h) for h in handles}
        forget_cached_pages(self.binary)
        self.start()

    def start(self):
        self.process = subprocess.Popen(
            [self.binary, "serve"],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=self.log(),
        )
        self.serving(urllib.request.Request(self.url + "/healthz"))

    def restart(self):
        """Stops the relay and starts it again on the same port and database."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)
        self.start()

    def add(self, handle):
        printed = subprocess.run(
            [self.binary, "add", handle], env=self.env, capture_output=True, text=True, check=True
        ).stdout
        return re.search(r"xtalk_[A-Za-z0-9_\-]+", printed).group(0)

    def post(self, channel, text):
        """Posts to a channel as alice: the message's id."""
        _, answer = self.request("POST", f"/api/channels/{channel}/messages",
                                 self.tokens["alice"], {"body": text})
        return json.loads(answer)["id"]

    def wait(self, channel, since):
        """Waits as bob for a message after `since` in a channel."""
        self.request("GET", f"/api/channels/{channel}/wait?since_id={since}&timeout_s=10",
                     self.tokens["bob"])

    def request(self, method, path, token, body=None, headers=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        with urllib.request.urlopen(request, timeout=30) as response:
            return dict(response.headers), response.read().decode()


class ChannelRelay(Server):
    """crosstalk-mcp 2.0.0, the Python channel relay crosstalk replaces,
    serving on loopback with a shared token and a throwaway database, run by
    `python`, an interpreter that has it (`pip install crosstalk-mcp==2.0.0
    "mcp<2"`)."""

    def __init__(self, python):
        self.dir = tempfile.mkdtemp(prefix="crosstalk-bench-channel-relay-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = os.urandom(16).hex()
        self.bearer = {"Authorization": f"Bearer {self.token}",
                       "Content-Type": "application/json"}
        self.process = subprocess.Popen(
            [python, "-c", "import crosstalk_mcp; crosstalk_mcp.main()"],
            cwd=self.dir,
            env=dict(os.environ, RELAY_TOKEN=self.token, HOST="127.0.0.1",
                     PORT=str(self.port), RELAY_DB=os.path.join(self.dir, "relay.db")),
            stdout=subprocess.DEVNULL,
            stderr=self.log(),
        )
        self.serving(urllib.request.Request(self.url + "/api/channels", headers=self.bearer))

    @staticmethod
    def message(text):
        return {"sender": "alice", "type": "NOTE", "body": text}

    def post(self, channel, text):
        request = urllib.request.Request(
            f"{self.url}/api/channels/{channel}/messages", method="POST",
            data=json.dumps(self.message(text)).encode(), headers=self.bearer)
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())["id"]

    def wait(self, channel, since):
        request = urllib.request.Request(
            f"{self.url}/api/channels/{channel}/wait?since_id={since}&timeout_s=10",
            headers=self.bearer)
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()


def rpc_result(text):
    """The JSON-RPC message of a reply, plain JSON or one SSE event."""
    for line in text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            return json.loads(line[5:])
    return json.loads(text)


def open_session(relay):
    """An initialized MCP session: its id and protocol version."""
    accept = {"Accept": "application/json, text/event-stream"}
    headers, text = relay.request(
        "POST",
        "/mcp",
        relay.tokens["alice"],
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            },
        },
        accept,
    )
    session = {k.lower(): v for k, v in headers.items()}["mcp-session-id"]
    version = rpc_result(text)["result"]["protocolVersion"]
    relay.request(
        "POST",
        "/mcp",
        relay.tokens["alice"],
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        dict(accept, **{"Mcp-Session-Id": session, "Mcp-Protocol-Version": version}),
    )
    return session, version


def stateless_mcp(call):
    """`call` (a `tools/call`) as a stateless client sends it (2026-07-28,
    no session: what it would have said at `initialize` in its `_meta`),
    and the headers it goes with, but for the credential."""
    params = dict(call["params"], _meta={
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    })
    headers = {"Accept": "application/json, text/event-stream",
               "Mcp-Protocol-Version": "2026-07-28",
               "Mcp-Method": "tools/call", "Mcp-Name": call["params"]["name"]}
    return dict(call, params=params), headers


def checked(relay, call, headers, required=True):
    """Whether one call answers a result that is no error."""
    try:
        _, text = relay.request("POST", "/mcp", relay.tokens["alice"], call, headers)
        result = rpc_result(text).get("result", {})
        ok = result.get("isError") is False
    except (urllib.error.URLError, ValueError):
        ok = False
    if required and not ok:
        raise SystemExit(f"a tools/call on /mcp did not succeed on {relay.binary}")
    return ok


def in_turn(values, make):
    """wrk's Lua for requests that take `values` in turn: `make` is the
    Lua that returns the request for `value`."""
    listed = ", ".join(f'"{value}"' for value in values)
    return [f"local values = {{{listed}}}", "local n = 0", "request = function()",
            "  n = n % #values + 1", "  local value = values[n]", f"  {make}", "end"]


def request_lines(method, body, headers):
    """wrk's Lua for one request: its method, its JSON body, its headers."""
    lines = [f'wrk.method = "{method}"']
    if body is not None:
        lines.append(f"wrk.body = {json.dumps(json.dumps(body))}")
    for name, value in (headers or {}).items():
        lines.append(f'wrk.headers["{name}"] = "{value}"')
    return lines


def lua_script(lines):
    """A wrk script of `lines`, in a file the caller removes."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write("\n".join(lines) + "\n")
    return script.name


def wrk(url, path, seconds, connections, method="GET", body=None, headers=None, rotate=None,
        paths=None):
    """Requests a second, and how many answers were not 2xx. `rotate`: a
    header and the values its requests take in turn (an MCP session each);
    `paths`: paths the requests take in turn, in place of `path`."""
    lines = request_lines(method, body, headers)
    if rotate and paths is not None:
        raise ValueError("a header or the path rotates, not both")
    if rotate:
        name, values = rotate
        lines += in_turn(values, f'wrk.headers["{name}"] = value; return wrk.format()')
    if paths is not None:
        lines += in_turn(paths, "return wrk.format(nil, value)")
    script = lua_script(lines)
    try:
        out = subprocess.run(
            [
                "wrk",
                f"-t{min(2, connections)}",
                f"-c{connections}",
                f"-d{seconds}s",
                "-s",
                script,
                url + path,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        os.unlink(script)
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:.*", out)
    if errors:
        print(f"  {path}: {errors.group(0)}", file=sys.stderr)
    return rate, int(bad.group(1)) if bad else 0, errors.group(0) if errors else ""


def wakes(server):
    """Milliseconds from a post to the wake of the long-poll waiting for it,
    p50 / p99."""
    last = server.post("wake", "start")
    took = []
    for _ in range(WAKES):
        woke = {}

        def wait(since=last):
            server.wait("wake", since)
            woke["at"] = time.perf_counter()

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.005)  # the wait is parked before the post: this is setup, not a wait for a result
        sent = time.perf_counter()
        last = server.post("wake", "wake")
        waiter.join()
        took.append((woke["at"] - sent) * 1000)
    took.sort()
    return took[len(took) // 2], took[int(len(took) * 0.99) - 1]


def memory_figures(server, when):
    """The server's resident memory, and how much of it is its own, as
    figures named for `when` it was read."""
    rss, anon = server.memory_mb()
    # The two "of which" rows differ by a space, so each keeps its place
    # under its own total.
    return {f"RSS {when} (MB)": rss,
            "  of which anonymous (MB)" + (" " if when == "after the load" else ""): anon}


def wake_figures(server, headers, body):
    """The long-poll's wake, alone and while LOAD_CONNECTIONS post `body`."""
    quiet, loaded = wakes(server), loaded_wakes(server, headers, body)
    return {
        "post until the waiting long-poll returns, p50 (ms)": quiet[0],
        "post until the waiting long-poll returns, p99 (ms)": quiet[1],
        f"the same while {LOAD_CONNECTIONS} connections post, p50 (ms)": loaded[0],
        f"the same while {LOAD_CONNECTIONS} connections post, p99 (ms)": loaded[1],
    }


def loaded_wakes(server, headers, body):
    """The same while LOAD_CONNECTIONS post to another channel as fast as
    they are answered (wrk, a process of its own, stopped after)."""
    script = lua_script(request_lines("POST", body, headers))
    load = subprocess.Popen(
        ["wrk", "-t1", f"-c{LOAD_CONNECTIONS}", "-d300s", "-s", script,
         server.url + "/api/channels/load/messages"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)  # the load under way before the first wake: setup, not a wait for a result
        return wakes(server)
    finally:
        load.terminate()
        load.wait()
        os.unlink(script)


def disk_syncs(folder):
    """Milliseconds an `fsync` of a commit's worth of pages takes in
    `folder` after the pause each wake has, p50 / p99: the part of a synced
    wake that is the disk's."""
    path = os.path.join(folder, "sync-probe")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    took = []
    try:
        os.pwrite(fd, bytes(24 * 4096 * 8), 0)
        os.fsync(fd)
        for i in range(WAKES):
            time.sleep(0.005)  # the pause of a wake, not a wait for a result
            os.pwrite(fd, os.urandom(6 * 4096), (i % 32) * 6 * 4096)
            started = time.perf_counter()
            os.fsync(fd)
            took.append((time.perf_counter() - started) * 1000)
    finally:
        os.close(fd)
        os.unlink(path)
    took.sort()
    return took[len(took) // 2], took[int(len(took) * 0.99) - 1]


def measure(binary, seconds, env_extra, postgres=None):
    relay = Relay(binary, env_extra)
    try:
        figures = memory_figures(relay, "idle after start")
        alice = relay.tokens["alice"]
        bearer = {"Authorization": f"Bearer {alice}", "Content-Type": "application/json"}
        (healthz, _, _), costs = costed("/healthz", relay, postgres,
                                        "/healthz", seconds, CONNECTIONS)
        figures["GET /healthz, 32 connections (/s)"] = healthz
        figures.update(costs)
        post = {"body": "a message from the benchmark"}
        (rate, bad, _), costs = costed("posts", relay, postgres,
                                       "/api/channels/bench/messages", seconds, CONNECTIONS,
                                       "POST", post, bearer)
        figures["REST posts, 32 connections (/s)"] = rate
        figures.update(costs)
        figures["REST posts ÷ /healthz"] = rate / healthz
        figures["REST answers not 2xx"] = bad
        rate, bad, _ = wrk(relay.url, "/api/channels/bench/messages", seconds, 1,
                           "POST", post, bearer)
        figures["REST posts, one connection (/s)"] = rate
        figures["REST answers not 2xx, one connection"] = bad
        # Pages of a hundred messages read from anywhere in the first
        # READ_AMONG messages the posts wrote, as an agent catching up or
        # the page reads them: the same places, in the same order, for
        # every build that posted as many.
        _, text = relay.request("POST", "/api/channels/bench/messages", alice, post)
        among = min(json.loads(text)["id"], READ_AMONG)
        if among < 2:
            raise SystemExit(f"{relay.binary} kept no posts to read")
        places = random.Random(7).sample(range(1, among), min(1000, among - 1))
        rate, bad, _ = wrk(relay.url, "", seconds, 16, headers=bearer, paths=[
            f"/api/channels/bench/messages?limit=100&since_id={place}" for place in places])
        figures["REST reads of 100 messages, 16 connections (/s)"] = rate
        figures["REST reads answers not 2xx"] = bad
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "post_message",
                       "arguments": {"channel": "bench", "body": "a message over MCP"}},
        }
        # One session an agent, as 32 agents would: the calls go to them in turn.
        sessions = [open_session(relay) for _ in range(CONNECTIONS)]
        version = sessions[0][1]
        print(f"  MCP sessions on {version}", file=sys.stderr)
        mcp = dict(bearer, **{"Accept": "application/json, text/event-stream",
                              "Mcp-Protocol-Version": version})
        # wrk counts any 200 as done: a JSON-RPC or tool error would be one,
        # so one call is checked first.
        checked(relay, call, dict(mcp, **{"Mcp-Session-Id": sessions[0][0]}))
        (rate, bad, _), costs = costed("MCP sessions", relay, postgres,
                                       "/mcp", seconds, CONNECTIONS, "POST", call, mcp,
                                       ("Mcp-Session-Id", [s for s, _ in sessions]))
        figures["MCP calls on 32 sessions, 32 connections (/s)"] = rate
        figures.update(costs)
        figures["MCP session calls ÷ REST posts"] = rate / figures["REST posts, 32 connections (/s)"]
        figures["MCP session answers not 2xx"] = bad
        stateless_call, stateless = stateless_mcp(call)
        stateless.update(bearer)
        (rate, bad, _), costs = costed("MCP stateless", relay, postgres,
                                       "/mcp", seconds, CONNECTIONS, "POST", stateless_call,
                                       stateless)
        if bad == 0 and checked(relay, stateless_call, stateless, required=False):
            figures["MCP stateless calls (2026-07-28), 32 connections (/s)"] = rate
            figures["MCP stateless calls ÷ REST posts"] = rate / figures["REST posts, 32 connections (/s)"]
            figures.update(costs)
        figures.update(wake_figures(relay, bearer, post))
        p50, p99 = disk_syncs(relay.dir)
        figures["a disk sync after the same pause, p50 (ms)"] = p50
        figures["a disk sync after the same pause, p99 (ms)"] = p99
        figures.update(memory_figures(relay, "after the load"))
        return figures
    finally:
        relay.stop()


def measure_channel_relay(python, seconds):
    """The figures of `measure` that crosstalk-mcp has: REST posts, the
    long-poll's wake, its memory."""
    relay = ChannelRelay(python)
    try:
        figures = memory_figures(relay, "idle after start")
        post = relay.message("a message from the benchmark")
        path = "/api/channels/bench/messages"
        for connections, key in ((CONNECTIONS, "REST posts, 32 connections (/s)"),
                                 (1, "REST posts, one connection (/s)")):
            rate, bad, _ = wrk(relay.url, path, seconds, connections, "POST", post, relay.bearer)
            figures[key] = rate
            figures[f"REST answers not 2xx{'' if connections > 1 else ', one connection'}"] = bad
        figures.update(wake_figures(relay, relay.bearer, post))
        figures.update(memory_figures(relay, "after the load"))
        return figures
    finally:
        relay.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("baseline", nargs="?")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--env", action="append", default=[],
                        help="NAME=VALUE for the first binary (A)")
    parser.add_argument("--baseline-env", action="append", default=[],
                        help="NAME=VALUE for the baseline (B): give one binary twice to compare settings")
    parser.add_argument("--postgres", action="store_true",
                        help="A on PostgreSQL; B, unless named, the same binary on SQLite")
    parser.add_argument("--baseline-postgres", action="store_true", help="B on PostgreSQL too")
    parser.add_argument("--postgres-cpus", metavar="LIST",
                        help="run the PostgreSQL server on these CPUs (taskset's list), as a "
                             "database on cores of its own: run this script under `taskset -c` "
                             "with the others")
    parser.add_argument("--channel-relay", metavar="PYTHON",
                        help="also measure crosstalk-mcp (C) each round, run by this Python")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("needs wrk: apt-get install wrk")
    extra = dict(pair.split("=", 1) for pair in args.env)
    baseline_extra = dict(pair.split("=", 1) for pair in args.baseline_env)
    if (args.postgres or args.baseline_postgres) and not args.baseline:
        args.baseline = args.binary
    runs = [("A", args.binary, extra)]
    if args.baseline:
        runs.append(("B", args.baseline, baseline_extra))
    if args.channel_relay:
        runs.append(("C", "crosstalk-mcp", {}))
    results = {name: [] for name, _, _ in runs}
    postgres = (Postgres(args.postgres_cpus) if args.postgres or args.baseline_postgres
                else None)
    on_postgres = {name for name, wanted in (("A", args.postgres), ("B", args.baseline_postgres))
                   if wanted}
    try:
        for round_ in range(args.rounds):
            for name, binary, env_extra in runs:
                if name in on_postgres:
                    env_extra = dict(env_extra, RELAY_DATABASE_URL=postgres.database())
                print(f"round {round_ + 1}: {name} {binary} {env_extra or ''}", file=sys.stderr)
                if name == "C":
                    results[name].append(measure_channel_relay(args.channel_relay, args.seconds))
                else:
                    results[name].append(measure(binary, args.seconds, env_extra,
                                                 postgres if name in on_postgres else None))
    finally:
        if postgres:
            postgres.stop()
    where = {name: " on PostgreSQL" if name in on_postgres else "" for name, _, _ in runs}
    print(f"A = {args.binary} {extra or ''}{where['A']}")
    if args.baseline:
        print(f"B = {args.baseline} {baseline_extra or ''}{where.get('B', '')}")
    if args.channel_relay:
        print("C = crosstalk-mcp 2.0.0, the Python channel relay")
        posts = "REST posts, 32 connections (/s)"
        for name, _, _ in runs[:-1]:
            over = statistics.median(r[posts] for r in results[name]) / statistics.median(
                r[posts] for r in results["C"])
            print(f"{name}'s REST posts ÷ C's (medians): {over:.1f}×")
    # Every figure any run has, each after the one it follows in its run.
    keys = []
    for rounds in results.values():
        for r in rounds:
            previous = None
            for key in r:
                if key not in keys:
                    keys.insert(keys.index(previous) + 1 if previous else len(keys), key)
                previous = key
    width = max(map(len, keys))
    for key in keys:
        cells = []
        for name, _, _ in runs:
            values = [r[key] for r in results[name] if key in r]
            if not values:
                cells.append(f"{name}: —")
                continue
            low, high = min(values), max(values)
            fmt = (lambda v: f"{v:,.2f}") if high < 100 else (lambda v: f"{v:,.0f}")
            cells.append(f"{name}: {fmt(low)}–{fmt(high)} (median {fmt(statistics.median(values))})")
        print(f"{key:<{width}}  " + "   ".join(cells))


if __name__ == "__main__":
    main()
