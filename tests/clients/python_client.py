"""The demo conversation, played by the official Python MCP SDK against a
relay this script starts, with a restart of the relay in the middle.

    CROSSTALK_BIN=target/debug/crosstalk python tests/clients/python_client.py auto
    CROSSTALK_BIN=target/debug/crosstalk python tests/clients/python_client.py legacy

`auto` lets the SDK pick the protocol (it probes `server/discover`); `legacy`
forces the initialize handshake and a 2025-11-25 session, which the relay
must carry across its restart. Exits non-zero, saying what failed, on any
difference from what a user would expect. `.ci/run` runs it in both modes.
"""

import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import httpx2
from mcp import Client
from mcp.client import advertise
from mcp.client.streamable_http import streamable_http_client

BIN = os.environ.get("CROSSTALK_BIN", "target/debug/crosstalk")
APPS = "io.modelcontextprotocol/ui"
APP_MIME = "text/html;profile=mcp-app"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Relay:
    """A relay on a spare loopback port, over a database in a temp dir."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.port = free_port()
        self.env = dict(os.environ, RELAY_DB=f"{self.dir}/relay.db", RELAY_PORT=str(self.port))
        for name in ("RELAY_TOKEN", "RELAY_PARTICIPANTS", "RELAY_DOMAINS"):
            self.env.pop(name, None)
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process = None

    def add(self, handle: str) -> str:
        out = subprocess.run([BIN, "add", handle], env=self.env, check=True, capture_output=True, text=True)
        return re.search(r"xtalk_[a-z0-9]+", out.stdout).group(0)

    def start(self) -> None:
        self.process = subprocess.Popen([BIN, "serve"], env=self.env, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1)
                return
            except OSError:
                if self.process.poll() is not None:
                    sys.exit("the relay did not start")
                time.sleep(0.05)
        sys.exit("the relay did not answer /healthz")

    def restart(self) -> None:
        """As `systemctl restart`: SIGTERM, wait, start again on the same database."""
        self.process.terminate()
        self.process.wait(timeout=30)
        self.start()

    def stop(self) -> None:
        """Stops the relay and removes its database's directory."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


def client(relay: Relay, token: str, mode: str, renders_apps: bool = False) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=120))
    extensions = [advertise(APPS, {"mimeTypes": [APP_MIME]})] if renders_apps else []
    return Client(streamable_http_client(relay.url, http_client=http), mode=mode, raise_exceptions=True,
                  extensions=extensions)


def result(called) -> dict:
    """A tool's structured result; fails on a tool error."""
    if called.is_error:
        sys.exit(f"a tool call failed: {called.content}")
    return called.structured_content


def check(condition: bool, what: str) -> None:
    if not condition:
        sys.exit(f"FAILED: {what}")
    print(f"  ok: {what}")


async def play(mode: str) -> None:
    relay = Relay()
    alice_token, bob_token = relay.add("alice"), relay.add("bob")
    relay.start()
    try:
        async with client(relay, alice_token, mode) as alice, client(relay, bob_token, mode) as bob:
            print(f"python SDK, mode {mode}: protocol {alice.protocol_version}")
            # A wait woken by a send.
            waiting = asyncio.create_task(bob.call_tool("check_inbox", {"timeout_seconds": 30}))
            await asyncio.sleep(0.3)
            sent = result(await alice.call_tool(
                "send_message", {"to": "bob", "type": "QUESTION", "body": "Which migration renamed users.email?"}))
            inbox = result(await waiting)
            check(inbox["messages"][0]["body"] == "Which migration renamed users.email?", "a wait woken by a send")
            thread = sent["thread_id"]

            # The relay restarts: both sessions carry on.
            relay.restart()
            print("  (the relay restarted)")

            # A thread reply.
            result(await bob.call_tool(
                "send_message", {"to": "alice", "thread_id": thread, "type": "ANSWER", "body": "0042_rename_email"}))
            reply = result(await alice.call_tool("check_inbox", {}))
            check(reply["messages"][0]["thread_id"] == thread and reply["messages"][0]["from"] == "bob",
                  "a thread reply, after the restart")

            # A channel exchange.
            posted = result(await alice.call_tool(
                "post_message", {"channel": "release", "type": "QUESTION", "body": "Is main green?"}))
            result(await bob.call_tool("post_message", {"channel": "release", "type": "DONE", "body": "green"}))
            page = result(await alice.call_tool("get_messages", {"channel": "release", "since_id": posted["id"]}))
            check([m["body"] for m in page["messages"]] == ["green"], "a channel exchange")

            # A refused secret, in the relay's words.
            refused = await alice.call_tool(
                "send_message", {"to": "bob", "body": "the key is AKIAIOSFODNN7EXAMPLE"})
            text = refused.content[0].text if refused.content else ""
            check(refused.is_error and "secret_refused" in text and "AKIAIOSFODNN7EXAMPLE" not in text,
                  f"a refused secret: {text}")

        await check_the_app(relay, alice_token, mode)

        # Another person's token on a session: refused (sessions only).
        if mode == "legacy":
            await refuse_another_token(relay, alice_token, bob_token)
    finally:
        relay.stop()


async def check_the_app(relay: Relay, token: str, mode: str) -> None:
    """The MCP App: its resource listed and read, held to a CSP that allows
    no other origin; the tools that name it; and the app's own tools only
    for a client that renders apps."""
    async with client(relay, token, mode, renders_apps=True) as host, client(relay, token, mode) as agent:
        listed = (await host.list_resources()).resources
        apps = [r for r in listed if r.mime_type == APP_MIME]
        check(len(apps) == 1 and str(apps[0].uri).startswith("ui://"), f"the app is listed: {listed}")
        uri = str(apps[0].uri)
        contents = (await host.read_resource(uri)).contents
        page = contents[0]
        check(page.mime_type == APP_MIME and page.text.startswith("<!DOCTYPE html>"), "the app reads as HTML")
        csp = page.meta["ui"]["csp"]
        check(all(csp.get(k) == [] for k in ("connectDomains", "resourceDomains", "frameDomains",
                                             "baseUriDomains")), f"its CSP allows no other origin: {csp}")
        tools = {t.name: t for t in (await host.list_tools()).tools}
        for name, visibility in (("check_inbox", ["model", "app"]), ("read_thread", ["model", "app"]),
                                 ("list_approvals", ["app"]), ("answer_approval", ["app"])):
            ui = (tools[name].meta or {}).get("ui", {})
            check(ui.get("resourceUri") == uri and ui.get("visibility") == visibility,
                  f"{name} names the app, for {visibility}")
        plain = {t.name for t in (await agent.list_tools()).tools}
        check("check_inbox" in plain and not plain & {"list_approvals", "answer_approval"},
              "a client that renders no app is not offered the app's own tools")
        refused = await agent.call_tool("answer_approval", {"id": 1, "behavior": "allow"})
        check(refused.is_error and "forbidden" in refused.content[0].text,
              "nor may it answer an approval through them")


async def refuse_another_token(relay: Relay, alice_token: str, bob_token: str) -> None:
    async with httpx2.AsyncClient() as http:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "check", "version": "1"}}}
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        opened = await http.post(relay.url, json=init, headers={**headers, "Authorization": f"Bearer {alice_token}"})
        session = opened.headers["mcp-session-id"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
        stolen = await http.post(relay.url, json=call, headers={
            **headers, "Authorization": f"Bearer {bob_token}", "Mcp-Session-Id": session,
            "MCP-Protocol-Version": "2025-11-25"})
        said = json.loads(stolen.text)
        check(stolen.status_code == 403 and "someone else" in said["error"]["message"],
              "another person's token on a session is refused")


if __name__ == "__main__":
    asyncio.run(play(sys.argv[1] if len(sys.argv) > 1 else "auto"))
    print("python SDK: every step passed")
