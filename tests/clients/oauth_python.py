"""A connector's sign-in, played by the official Python SDK's OAuth client
(`OAuthClientProvider` as the httpx auth of `streamable_http_client`)
against a relay. The relay's test (tests/relay/oauth_clients.rs) starts this
script and plays the person in a real browser:

    python oauth_python.py MCP_URL CALLBACK_PORT [CLIENT_METADATA_URL]

It speaks one line at a time on stdout, as oauth_typescript.mjs does:
AUTHORIZE <url>, SIGNED-IN <json>, REFRESHED, WAITING (then it reads a line
on stdin while the person revokes the grant), REFUSED <why>; and exits 0.
Any difference from that prints FAILED and exits 1.
"""

import asyncio
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from threading import Thread
from urllib.parse import parse_qs, urlparse

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

MCP_URL, CALLBACK_PORT = sys.argv[1], int(sys.argv[2])
CLIENT_METADATA_URL = sys.argv[3] if len(sys.argv) > 3 else None
REDIRECT = f"http://127.0.0.1:{CALLBACK_PORT}/callback"


def say(line: str) -> None:
    print(line, flush=True)


def fail(what: str) -> None:
    say(f"FAILED: {what}")
    sys.exit(1)


class Memory:
    """What a real connector keeps between runs, in memory."""

    def __init__(self) -> None:
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens) -> None:
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info) -> None:
        self.client = client_info


answers: asyncio.Queue = asyncio.Queue()
loop: asyncio.AbstractEventLoop


class Callback(BaseHTTPRequestHandler):
    """The person's answer arrives here: the code (or an error)."""

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path != "/callback":
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.end_headers()
        self.wfile.write(b"<h1>Signed in</h1>")
        params = {name: values[0] for name, values in parse_qs(url.query).items()}
        loop.call_soon_threadsafe(answers.put_nowait, params)

    def log_message(self, *args) -> None:
        pass


authorizations = 0
refusing = False
# How many sign-ins were asked for before the call after the revocation.
asked = 0


async def redirect_handler(url: str) -> None:
    global authorizations
    authorizations += 1
    say(f"AUTHORIZE {url}")


async def callback_handler() -> AuthorizationCodeResult:
    if refusing:
        raise RuntimeError("asked to sign in again")
    params = await answers.get()
    if "error" in params:
        fail(f"the person's answer: {params['error']}")
    return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))


def result(called) -> dict:
    if called.is_error:
        fail(f"a tool call failed: {called.content}")
    return called.structured_content


async def main() -> None:
    global loop, refusing, asked
    loop = asyncio.get_running_loop()
    server = HTTPServer(("127.0.0.1", CALLBACK_PORT), Callback)
    Thread(target=server.serve_forever, daemon=True).start()

    memory = Memory()
    provider = OAuthClientProvider(
        server_url=MCP_URL,
        client_metadata=OAuthClientMetadata(
            client_name="Python SDK test",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            scope="crosstalk",
        ),
        storage=memory,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=CLIENT_METADATA_URL,
    )
    http = httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30, read=120))
    # The test's word that the person removed the grant (read once).
    removed = loop.run_in_executor(None, sys.stdin.readline)
    try:
        async with Client(streamable_http_client(MCP_URL, http_client=http), mode="legacy", raise_exceptions=True) as client:
            # First contact went through a 401, discovery, registration and the
            # person's sign-in before the session opened.
            if CLIENT_METADATA_URL and memory.client.client_id != CLIENT_METADATA_URL:
                fail(f"the client id is {memory.client.client_id}, not its metadata document's URL")
            say(f"SIGNED-IN {json.dumps(result(await client.call_tool('list_peers', {})))}")

            # An hour passes: the SDK refreshes before its next call.
            before = memory.tokens.access_token
            provider.context.token_expiry_time = time.time() - 1
            result(await client.call_tool("list_peers", {}))
            if memory.tokens.access_token == before:
                fail("the SDK did not refresh its tokens")
            say("REFRESHED")

            # The person revokes the grant on the relay's page; the next call fails.
            asked = authorizations
            refusing = True
            say("WAITING")
            await asyncio.shield(removed)
            await refused_call(client)
    except SystemExit:
        raise
    except BaseException:
        # The relay ended the session with the grant, and the SDK raised
        # its stream's end out of the session before the call was made:
        # the call, then, on a session of its own.
        if not refusing or authorizations > asked:
            raise
        await asyncio.shield(removed)
        async with Client(streamable_http_client(MCP_URL, http_client=http), mode="legacy", raise_exceptions=True) as client:
            await refused_call(client)
    finally:
        server.shutdown()


async def refused_call(client) -> None:
    """The call after the revocation: refused, and the SDK asked to sign in again."""
    try:
        await client.call_tool("list_peers", {})
    except Exception as error:  # the SDK's own, whichever it raises
        if authorizations == asked:
            fail(f"the SDK did not ask to sign in again: {error!r}")
        say(f"REFUSED {error!r}")
        return
    fail("a call after the revocation was answered")


try:
    asyncio.run(main())
except SystemExit:
    raise
except BaseException as error:
    # The SDK may raise the refusal out of the session itself (its task
    # group), not out of the call.
    if refusing and authorizations > asked:
        say(f"REFUSED {error!r}")
        sys.exit(0)
    fail(f"{error!r}")
