// A connector's sign-in, played by the official TypeScript SDK's OAuth
// client (`OAuthClientProvider` with `StreamableHTTPClientTransport`)
// against a relay. The relay's test (tests/relay/oauth_clients.rs) starts
// this script and plays the person in a real browser:
//
//     node oauth_typescript.mjs MCP_URL CALLBACK_PORT [CLIENT_METADATA_URL]
//
// It speaks one line at a time on stdout:
//   AUTHORIZE <url>   the SDK asks the person to sign in at <url>
//   SIGNED-IN <json>  list_peers, called with the tokens the SDK got
//   REFRESHED         the SDK refreshed its tokens, and a call with the new ones answered
//   WAITING           it waits for a line on stdin (the person revokes the grant)
//   REFUSED <why>     the next call failed, and the SDK asked to sign in again
// and exits 0; any difference from that prints FAILED and exits 1.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { auth, UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { createServer } from "node:http";
import { createInterface } from "node:readline";

const [mcpUrl, callbackPort, clientMetadataUrl] = process.argv.slice(2);
const redirectUrl = `http://127.0.0.1:${callbackPort}/callback`;

function fail(what) {
  console.log(`FAILED: ${what}`);
  process.exit(1);
}

// The person's answer arrives at the callback: the code (or an error).
let answered;
const answer = new Promise((resolve) => (answered = resolve));
const callback = createServer((request, response) => {
  const url = new URL(request.url, redirectUrl);
  if (url.pathname !== "/callback") {
    response.writeHead(404).end();
    return;
  }
  response.writeHead(200, { "content-type": "text/html" }).end("<h1>Signed in</h1>");
  answered(url.searchParams);
});
await new Promise((resolve) => callback.listen(Number(callbackPort), "127.0.0.1", resolve));

// What a real connector keeps between runs, in memory.
const kept = { client: undefined, tokens: undefined, verifier: undefined, discovery: undefined };
let authorizations = 0;
const provider = {
  get redirectUrl() {
    return redirectUrl;
  },
  get clientMetadata() {
    return {
      client_name: "TypeScript SDK test",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  clientMetadataUrl,
  state: () => "ts-state",
  clientInformation: () => kept.client,
  saveClientInformation: (information) => {
    kept.client = information;
  },
  tokens: () => kept.tokens,
  saveTokens: (tokens) => {
    kept.tokens = tokens;
  },
  codeVerifier: () => kept.verifier,
  saveCodeVerifier: (verifier) => {
    kept.verifier = verifier;
  },
  discoveryState: () => kept.discovery,
  saveDiscoveryState: (state) => {
    kept.discovery = state;
  },
  invalidateCredentials: (scope) => {
    if (scope === "all" || scope === "client") kept.client = undefined;
    if (scope === "all" || scope === "tokens") kept.tokens = undefined;
    if (scope === "all" || scope === "verifier") kept.verifier = undefined;
  },
  redirectToAuthorization: (url) => {
    authorizations += 1;
    console.log(`AUTHORIZE ${url.href}`);
  },
};

async function connected() {
  const client = new Client({ name: "oauth-typescript-check", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
  await client.connect(transport);
  return { client, transport };
}

async function peers(client) {
  const result = await client.callTool({ name: "list_peers", arguments: {} });
  if (result.isError) fail(`list_peers: ${JSON.stringify(result)}`);
  return result.structuredContent;
}

// First contact: a 401, discovery, registration, the person's sign-in.
let transport;
try {
  await connected();
  fail("the relay served a client that had no token");
} catch (error) {
  if (!(error instanceof UnauthorizedError)) fail(`the first connection: ${error}`);
}
const params = await answer;
if (params.get("error")) fail(`the person's answer: ${params.get("error")}`);
if (params.get("state") !== "ts-state") fail(`state came back as ${params.get("state")}`);
if (params.get("iss") !== new URL(mcpUrl).origin) fail(`iss came back as ${params.get("iss")}`);
if (clientMetadataUrl && kept.client?.client_id !== clientMetadataUrl) {
  fail(`the client id is ${kept.client?.client_id}, not its metadata document's URL`);
}
transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
await transport.finishAuth(params.get("code"));
let { client } = await connected();
console.log(`SIGNED-IN ${JSON.stringify(await peers(client))}`);
await client.close();

// A refresh: new tokens, which the relay takes.
const before = kept.tokens.access_token;
if ((await auth(provider, { serverUrl: new URL(mcpUrl) })) !== "AUTHORIZED") fail("the refresh");
if (kept.tokens.access_token === before) fail("the refresh gave the same access token");
({ client } = await connected());
await peers(client);
console.log("REFRESHED");

// The person revokes the grant on the relay's page; the next call fails.
console.log("WAITING");
const lines = createInterface({ input: process.stdin });
await new Promise((resolve) => lines.once("line", resolve));
lines.close();
const asked = authorizations;
try {
  await peers(client);
  fail("a call after the revocation was answered");
} catch (error) {
  if (authorizations === asked) fail(`the SDK did not ask to sign in again: ${error}`);
  console.log(`REFUSED ${error.message ?? error}`);
}
callback.close();
process.exit(0);
