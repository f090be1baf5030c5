// The demo conversation, played by the official TypeScript MCP SDK against a
// relay this script starts, with a restart of the relay in the middle.
//
//     CROSSTALK_BIN=target/debug/crosstalk node tests/clients/typescript_client.mjs
//
// The SDK keeps a 2025-11-25 session; the relay must carry it across its
// restart (before sessions were kept, the SDK's next call failed with "404
// Session not found" and never recovered). Exits non-zero, saying what
// failed, on any difference from what a user would expect. `.ci/run` runs it.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const BIN = process.env.CROSSTALK_BIN ?? "target/debug/crosstalk";

function check(condition, what) {
  if (!condition) {
    console.error(`FAILED: ${what}`);
    process.exit(1);
  }
  console.log(`  ok: ${what}`);
}

function freePort() {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// A relay on a spare loopback port, over a database in a temp dir.
class Relay {
  static async make() {
    const relay = new Relay();
    relay.port = await freePort();
    relay.dir = mkdtempSync(join(tmpdir(), "crosstalk-"));
    const env = { ...process.env, RELAY_DB: join(relay.dir, "relay.db"), RELAY_PORT: String(relay.port) };
    for (const name of ["RELAY_TOKEN", "RELAY_PARTICIPANTS", "RELAY_DOMAINS"]) delete env[name];
    relay.env = env;
    relay.url = new URL(`http://127.0.0.1:${relay.port}/mcp`);
    return relay;
  }

  add(handle) {
    const printed = execFileSync(BIN, ["add", handle], { env: this.env, encoding: "utf8" });
    return printed.match(/xtalk_[a-z0-9]+/)[0];
  }

  async start() {
    this.process = spawn(BIN, ["serve"], { env: this.env, stdio: ["ignore", "ignore", "ignore"] });
    this.exited = new Promise((resolve) => this.process.on("exit", resolve));
    for (let i = 0; i < 200; i++) {
      try {
        const health = await fetch(`http://127.0.0.1:${this.port}/healthz`);
        if (health.ok) return;
      } catch {
        // not listening yet
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error("the relay did not answer /healthz");
  }

  // As `systemctl restart`: SIGTERM, wait, start again on the same database.
  async restart() {
    this.process.kill("SIGTERM");
    await this.exited;
    await this.start();
  }

  // Stops the relay and removes its database's directory.
  async stop() {
    if (this.process.exitCode === null) {
      this.process.kill("SIGTERM");
      await this.exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

const APPS = "io.modelcontextprotocol/ui";
const APP_MIME = "text/html;profile=mcp-app";

async function connect(relay, token, rendersApps = false) {
  const transport = new StreamableHTTPClientTransport(relay.url, {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const capabilities = rendersApps ? { extensions: { [APPS]: { mimeTypes: [APP_MIME] } } } : {};
  const client = new Client({ name: "crosstalk-typescript-check", version: "1.0.0" }, { capabilities });
  await client.connect(transport);
  return { client, transport };
}

// A tool's structured result; fails on a tool error.
async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  if (result.isError) {
    check(false, `${name} failed: ${JSON.stringify(result.content)}`);
  }
  return result.structuredContent;
}

const relay = await Relay.make();
const aliceToken = relay.add("alice");
const bobToken = relay.add("bob");
await relay.start();
try {
  const alice = await connect(relay, aliceToken);
  const bob = await connect(relay, bobToken);
  console.log(`typescript SDK: session ${alice.transport.sessionId ? "kept" : "none"}, protocol ${alice.transport.protocolVersion}`);

  // A wait woken by a send (the send wakes it whenever the wait started).
  const waiting = call(bob.client, "check_inbox", { timeout_seconds: 30 });
  const sent = await call(alice.client, "send_message", { to: "bob", type: "QUESTION", body: "Which migration renamed users.email?" });
  const inbox = await waiting;
  check(inbox.messages[0].body === "Which migration renamed users.email?", "a wait woken by a send");

  // The relay restarts: both sessions carry on, on the same session ids.
  const sessionBefore = alice.transport.sessionId;
  await relay.restart();
  console.log("  (the relay restarted)");

  // A thread reply.
  await call(bob.client, "send_message", { to: "alice", thread_id: sent.thread_id, type: "ANSWER", body: "0042_rename_email" });
  const reply = await call(alice.client, "check_inbox", {});
  check(reply.messages[0].thread_id === sent.thread_id && reply.messages[0].from === "bob", "a thread reply, after the restart");
  check(alice.transport.sessionId === sessionBefore, "the same session after the restart");

  // A channel exchange.
  const posted = await call(alice.client, "post_message", { channel: "release", type: "QUESTION", body: "Is main green?" });
  await call(bob.client, "post_message", { channel: "release", type: "DONE", body: "green" });
  const page = await call(alice.client, "get_messages", { channel: "release", since_id: posted.id });
  check(JSON.stringify(page.messages.map((m) => m.body)) === JSON.stringify(["green"]), "a channel exchange");

  // A refused secret, in the relay's words.
  const refused = await alice.client.callTool({ name: "send_message", arguments: { to: "bob", body: "the key is AKIAIOSFODNN7EXAMPLE" } });
  const text = refused.content?.[0]?.text ?? "";
  check(refused.isError && text.includes("secret_refused") && !text.includes("AKIAIOSFODNN7EXAMPLE"), `a refused secret: ${text}`);

  // The MCP App, for a host that renders apps: its resource listed and read
  // under a CSP that allows no other origin, and the tools that name it.
  const host = await connect(relay, aliceToken, true);
  const { resources } = await host.client.listResources();
  const apps = resources.filter((r) => r.mimeType === APP_MIME);
  check(apps.length === 1 && apps[0].uri.startsWith("ui://"), `the app is listed: ${JSON.stringify(resources)}`);
  const { contents } = await host.client.readResource({ uri: apps[0].uri });
  check(contents[0].mimeType === APP_MIME && contents[0].text.startsWith("<!DOCTYPE html>"), "the app reads as HTML");
  const csp = contents[0]._meta.ui.csp;
  check(["connectDomains", "resourceDomains", "frameDomains", "baseUriDomains"].every((k) => Array.isArray(csp[k]) && csp[k].length === 0),
    `its CSP allows no other origin: ${JSON.stringify(csp)}`);
  const { tools } = await host.client.listTools();
  const named = tools.filter((t) => t._meta?.ui?.resourceUri === apps[0].uri).map((t) => t.name).sort();
  check(JSON.stringify(named) === JSON.stringify(["answer_approval", "check_inbox", "list_approvals", "read_thread"]),
    `the tools that name it: ${named}`);
  const plain = (await alice.client.listTools()).tools.map((t) => t.name);
  check(!plain.includes("answer_approval") && !plain.includes("list_approvals"), "an agent's client is not offered the app's own tools");
  await host.client.close();

  // Another person's token on alice's session: refused, in the relay's words.
  const thief = new StreamableHTTPClientTransport(relay.url, {
    sessionId: alice.transport.sessionId,
    requestInit: { headers: { Authorization: `Bearer ${bobToken}` } },
  });
  const stolen = new Client({ name: "crosstalk-typescript-check", version: "1.0.0" });
  await stolen.connect(thief);
  let refusal = { code: 0, message: "" };
  try {
    await stolen.listTools();
  } catch (error) {
    refusal = { code: error?.code, message: String(error?.message ?? error) };
  }
  check(refusal.code === 403 && refusal.message.includes("belongs to someone else"), `another person's token on a session is refused: ${refusal.code} ${refusal.message}`);

  await alice.client.close();
  await bob.client.close();
  console.log("typescript SDK: every step passed");
} finally {
  await relay.stop();
}
