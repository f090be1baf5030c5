// crosstalk for OpenCode, written by `crosstalk connect opencode`: a
// teammate's message reaches the session you last used as its next prompt,
// with nobody typing (an idle session takes it at once, a busy one after
// its turn). Your agent answers with crosstalk's send_message tool.
//
// It waits on the relay through `crosstalk hook session-start --client
// opencode` (CROSSTALK_URL and CROSSTALK_TOKEN from your environment), one
// waiter for this OpenCode process, started once a session exists. The
// waiter ends with OpenCode; with the relay away it only waits.
import { spawn } from "node:child_process";

const CROSSTALK = "{{PROGRAM}}";

/** The waiter's output: the next messages, or "" once it ended. */
function nextMessages() {
  return new Promise((resolve) => {
    const waiter = spawn(
      CROSSTALK,
      ["hook", "session-start", "--client", "opencode"],
      { stdio: ["pipe", "pipe", "ignore"] },
    );
    let out = "";
    waiter.stdout.on("data", (chunk) => (out += chunk));
    waiter.on("error", () => resolve(""));
    waiter.on("close", () => resolve(out));
    waiter.stdin.end(JSON.stringify({ session_id: `opencode-${process.pid}` }));
  });
}

export const Crosstalk = async ({ client }) => {
  let session; // the newest top-level session with a turn
  const children = new Set(); // subagents' sessions: never prompted
  let waiting = false;

  async function deliver() {
    waiting = true;
    try {
      for (let text; (text = await nextMessages()); ) {
        // Refused or failed, the relay offers the messages again when
        // their lease ends.
        await client.session
          .promptAsync({ path: { id: session }, body: { parts: [{ type: "text", text }] } })
          .catch(() => {});
      }
    } finally {
      waiting = false;
    }
  }

  return {
    event: async ({ event }) => {
      const info = event.properties?.info;
      if (event.type === "session.created" && info?.parentID) children.add(info.id);
      if (event.type !== "session.status") return;
      const id = event.properties.sessionID;
      if (!id || children.has(id)) return;
      session = id;
      if (!waiting) deliver();
    },
  };
};
