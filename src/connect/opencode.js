// crosstalk for OpenCode, written by `crosstalk connect opencode`: a
// teammate's message reaches the session you last used as its next prompt,
// with nobody typing (an idle session takes it at once, a busy one after
// its turn). Your agent answers with crosstalk's send_message tool.
//
// It waits on the relay through `crosstalk hook session-start --client
// opencode` (CROSSTALK_URL and CROSSTALK_TOKEN from your environment), one
// waiter for each project this OpenCode process has open, started once a
// session exists. The waiter ends with OpenCode; with the relay away it
// only waits.
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";

const CROSSTALK = "{{PROGRAM}}";

/** The waiter's output: the next messages, or "" once it ended. `waiter`
 * names it: a newer waiter of the same name ends an older one. */
function nextMessages(waiter) {
  return new Promise((resolve) => {
    const child = spawn(
      CROSSTALK,
      ["hook", "session-start", "--client", "opencode"],
      { stdio: ["pipe", "pipe", "ignore"] },
    );
    let out = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.on("error", () => resolve(""));
    child.on("close", () => resolve(out));
    child.stdin.end(JSON.stringify({ session_id: waiter }));
  });
}

export const Crosstalk = async ({ client }) => {
  // OpenCode loads a plugin once for each project it serves: each has a
  // waiter of its own, which another project's never ends.
  const waiter = `opencode-${process.pid}-${randomUUID().slice(0, 8)}`;
  let session; // the newest top-level session with a turn
  const children = new Set(); // subagents' sessions: never prompted
  let waiting = false;

  async function deliver() {
    waiting = true;
    try {
      for (let text; (text = await nextMessages(waiter)); ) {
        // Refused or failed, the relay offers the messages again when
        // their lease ends; OpenCode's log says why.
        try {
          await client.session.promptAsync({
            path: { id: session },
            body: { parts: [{ type: "text", text }] },
          });
        } catch (error) {
          await client.app
            .log({ body: { service: "crosstalk", level: "warn", message: `prompting the session failed: ${error}` } })
            .catch(() => {});
        }
      }
    } finally {
      waiting = false;
    }
  }

  return {
    event: async ({ event }) => {
      const info = event.properties?.info;
      if (event.type === "session.created" && info?.parentID) children.add(info.id);
      if (event.type === "session.deleted" && info?.id === session) session = undefined;
      if (event.type !== "session.status") return;
      const id = event.properties.sessionID;
      if (!id || children.has(id)) return;
      session = id;
      if (!waiting) deliver();
    },
  };
};
