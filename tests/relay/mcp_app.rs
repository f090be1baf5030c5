//! The MCP App in a real Chromium, rendered as a host renders it: a host
//! page (served by this test, holding the person's token on its server side
//! as a host does) that is an MCP client of the relay, reads the tool's
//! `_meta.ui.resourceUri`, reads that resource, puts the HTML in a
//! `sandbox="allow-scripts"` frame under the CSP the resource declares, and
//! speaks the MCP Apps bridge (JSON-RPC over postMessage) to it: the
//! handshake, the model's tool result, and the app's own `tools/call`s,
//! which it forwards to the relay only for tools visible to apps.
//!
//! A person then presses Allow inside the frame; the relay records it.

use crate::chrome::Chrome;
use crate::support::*;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

/// The host page: the least a host does, as the MCP Apps specification
/// (2026-01-26) says it.
const HOST: &str = r#"<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>a host</title></head><body>
<script>
let session = null, rpc = 0;
window.hostSaw = [];
async function mcp(method, params, notification) {
  const body = notification ? { jsonrpc: "2.0", method, params } : { jsonrpc: "2.0", id: ++rpc, method, params };
  const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
  if (session) { headers["mcp-session-id"] = session; headers["mcp-protocol-version"] = "2025-11-25"; }
  const response = await fetch("/mcp", { method: "POST", headers, body: JSON.stringify(body) });
  session = response.headers.get("mcp-session-id") || session;
  if (notification) return null;
  const text = await response.text();
  const answer = (response.headers.get("content-type") || "").includes("text/event-stream")
    ? text.split("\n").filter((l) => l.startsWith("data:") && l.slice(5).trim()).map((l) => JSON.parse(l.slice(5))).find((m) => m.id === body.id)
    : JSON.parse(text);
  if (answer.error) throw Object.assign(new Error(answer.error.message), { rpc: answer.error });
  return answer.result;
}
(async () => {
  await mcp("initialize", { protocolVersion: "2025-11-25", clientInfo: { name: "a host", version: "1" },
    capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: ["text/html;profile=mcp-app"] } } } });
  await mcp("notifications/initialized", {}, true);
  const { tools } = await mcp("tools/list", {});
  const visible = (tool) => (tool._meta?.ui?.visibility ?? ["model", "app"]);
  const tool = tools.find((t) => t.name === "check_inbox");
  const uri = tool._meta.ui.resourceUri;
  const { contents } = await mcp("resources/read", { uri });
  const page = contents[0];
  if (page.mimeType !== "text/html;profile=mcp-app") throw new Error("not an app: " + page.mimeType);
  const csp = page._meta?.ui?.csp ?? {};
  const list = (domains) => (domains && domains.length ? domains.join(" ") : "'none'");
  const policy = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; " +
    "media-src data:; connect-src " + list(csp.connectDomains) + "; frame-src " + list(csp.frameDomains) +
    "; base-uri " + list(csp.baseUriDomains) + "; object-src 'none'";
  window.hostSaw.push({ uri, policy });
  // What the model called, whose result the app shows.
  const result = mcp("tools/call", { name: "check_inbox", arguments: {} });
  const frame = document.createElement("iframe");
  frame.setAttribute("sandbox", "allow-scripts");
  frame.style.width = "600px";
  frame.style.height = "600px";
  frame.srcdoc = page.text.replace(/<head>/i, `<head><meta http-equiv="Content-Security-Policy" content="${policy}">`);
  const post = (message) => frame.contentWindow.postMessage(message, "*");
  window.addEventListener("message", async (event) => {
    if (event.source !== frame.contentWindow) return;
    const m = event.data;
    if (!m || m.jsonrpc !== "2.0") return;
    window.hostSaw.push(m.method || "answer");
    if (m.method === "ui/initialize") {
      post({ jsonrpc: "2.0", id: m.id, result: { protocolVersion: "2026-01-26",
        hostInfo: { name: "a host", version: "1" }, hostCapabilities: { serverTools: {} },
        hostContext: { theme: "light", displayMode: "inline", availableDisplayModes: ["inline"],
                       toolInfo: { tool }, platform: "web" } } });
    } else if (m.method === "ui/notifications/initialized") {
      post({ jsonrpc: "2.0", method: "ui/notifications/tool-input", params: { arguments: {} } });
      post({ jsonrpc: "2.0", method: "ui/notifications/tool-result", params: await result });
    } else if (m.method === "tools/call") {
      const called = tools.find((t) => t.name === m.params.name);
      if (!called || !visible(called).includes("app")) {
        post({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "not a tool for apps" } });
        return;
      }
      try { post({ jsonrpc: "2.0", id: m.id, result: await mcp("tools/call", m.params) }); }
      catch (e) { post({ jsonrpc: "2.0", id: m.id, error: e.rpc ?? { code: -32603, message: String(e) } }); }
    } else if (m.id !== undefined && m.method) {
      post({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "not here" } });
    }
  });
  document.body.appendChild(frame);
  window.hostReady = true;
})().catch((e) => { window.hostFailed = String(e.stack); document.title = "failed"; });
</script></body></html>"#;

/// Serves the host page, and passes its `/mcp` to the relay with the
/// person's token added (the page never holds it): the host's URL.
async fn host(relay: String, token: String) -> String {
    let forward = move |headers: HeaderMap, body: Bytes| {
        let (relay, token) = (relay.clone(), token.clone());
        async move {
            let mut request = http()
                .post(format!("{relay}/mcp"))
                .bearer_auth(token)
                .body(body);
            for name in [
                "content-type",
                "accept",
                "mcp-session-id",
                "mcp-protocol-version",
            ] {
                if let Some(value) = headers.get(name) {
                    request = request.header(name, value.as_bytes());
                }
            }
            let answer = request.send().await.unwrap();
            let mut kept = HeaderMap::new();
            for name in ["content-type", "mcp-session-id"] {
                if let Some(value) = answer.headers().get(name) {
                    kept.insert(name, value.clone());
                }
            }
            let status = StatusCode::from_u16(answer.status().as_u16()).unwrap();
            (status, kept, answer.bytes().await.unwrap())
        }
    };
    let app = axum::Router::new()
        .route(
            "/",
            axum::routing::get(|| async { axum::response::Html(HOST) }),
        )
        .route(
            "/favicon.ico",
            axum::routing::get(|| async { StatusCode::NO_CONTENT }),
        )
        .route("/mcp", axum::routing::post(forward));
    serve(app).await
}

#[tokio::test]
#[ignore = "needs Chromium (apt-get install chromium; .ci/run does)"]
async fn a_person_allows_a_step_in_the_app_inside_a_host() {
    let app = spawn_app().await;
    let alice = app.add_person("alice").await;
    let bob = app.add_person("bob").await;
    app.rest(&bob)
        .send(
            "alice",
            "which branch is the release on?",
            json!({ "type": "QUESTION" }),
        )
        .await;
    let (status, asked) = app
        .rest(&alice)
        .post(
            "/api/approvals",
            json!({ "request_id": "run01", "tool_name": "Bash",
                    "description": "run the tests", "input_preview": "cargo test --workspace" }),
        )
        .await;
    assert_eq!(status, 201, "{asked}");
    let id = asked["id"].as_i64().unwrap();
    // A step whose input is withheld whole: allowed only deliberately.
    let body = format!("b3BlbnNzaC1rZXktdjEAAAAA{}", "Qm9iJ3Mga2V5".repeat(4));
    let key = format!(
        "cat > ~/.ssh/id_ed25519 <<EOF\n-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n\
         -----END OPENSSH PRIVATE KEY-----\nEOF"
    );
    let (status, hidden) = app
        .rest(&alice)
        .post(
            "/api/approvals",
            json!({ "request_id": "key01", "tool_name": "Bash",
                    "description": "install the deploy key", "input_preview": key }),
        )
        .await;
    assert_eq!(status, 201, "{hidden}");
    assert_eq!(hidden["input_preview"], Value::Null, "{hidden}");
    let hidden_id = hidden["id"].as_i64().unwrap();

    let chrome = Chrome::start().await;
    chrome.attach_frames().await;
    chrome.open(&host(app.url(), alice.clone()).await).await;
    chrome
        .until("window.hostReady === true || window.hostFailed")
        .await;
    assert_eq!(chrome.eval("window.hostFailed").await, Value::Null);
    let frame = chrome.child_frame().await;
    let frame = Some(frame.as_str());

    // The model's check_inbox, shown; the pending approval, listed by the
    // app's own call.
    chrome
        .until_in(frame, "document.querySelector('#inbox li .body')?.textContent === 'which branch is the release on?'")
        .await;
    chrome
        .until_in(frame, &format!("document.querySelector('li[data-approval=\"{id}\"] pre')?.textContent === 'cargo test --workspace'"))
        .await;

    // Allow, pressed in the frame.
    let shown = format!("li[data-approval=\"{id}\"]");
    chrome
        .eval_in(
            frame,
            &format!("document.querySelector('{shown} button[data-answer=allow]').click()"),
        )
        .await;
    chrome
        .until_in(
            frame,
            &format!("document.querySelector('{shown} .answered')?.textContent === 'allowed'"),
        )
        .await;
    let (status, answered) = app.rest(&alice).get(&format!("/api/approvals/{id}")).await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["state"], "allowed");

    // The hidden one: Allow waits for the box, then allows it.
    let item = format!("li[data-approval=\"{hidden_id}\"]");
    let allow = format!("document.querySelector('{item} button[data-answer=allow]')");
    assert_eq!(
        chrome.eval_in(frame, &format!("{allow}.disabled")).await,
        true
    );
    let tick = format!("document.querySelector('{item} input[data-hidden-ok]').click()");
    chrome.eval_in(frame, &tick).await;
    assert_eq!(
        chrome.eval_in(frame, &format!("{allow}.disabled")).await,
        false
    );
    chrome.eval_in(frame, &format!("{allow}.click()")).await;
    chrome
        .until_in(
            frame,
            &format!("document.querySelector('{item} .answered')?.textContent === 'allowed'"),
        )
        .await;
    let (_, answered) = app
        .rest(&alice)
        .get(&format!("/api/approvals/{hidden_id}"))
        .await;
    assert_eq!(answered["state"], "allowed");
    assert!(
        chrome.problems.lock().unwrap().is_empty(),
        "{:?}",
        chrome.problems.lock().unwrap()
    );

    // The frame is held to the declared CSP: it reaches no origin itself.
    let saw: Value = chrome.eval("JSON.stringify(window.hostSaw[0])").await;
    let saw: Value = serde_json::from_str(saw.as_str().unwrap()).unwrap();
    assert_eq!(saw["uri"], "ui://crosstalk/inbox.html");
    assert!(
        saw["policy"]
            .as_str()
            .unwrap()
            .contains("connect-src 'none'"),
        "{saw}"
    );
    let reached = chrome
        .eval_in(
            frame,
            &format!(
                "fetch('{}/healthz').then(() => 'reached', () => 'blocked')",
                app.url()
            ),
        )
        .await;
    assert_eq!(reached, "blocked");
    // The CSP, not anything else, stopped it: the frame says so.
    chrome
        .event("Log.entryAdded", |params| {
            let text = params["entry"]["text"].as_str().unwrap_or("");
            text.contains("Content Security Policy") && text.contains("connect-src")
        })
        .await;
}
