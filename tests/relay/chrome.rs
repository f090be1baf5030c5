//! A small driver for a real Chromium over the DevTools protocol: start it
//! headless, open a page, answer its Basic sign-in prompts, run script in
//! it, wait for what a person would see, take screenshots, and collect
//! every console error and Content-Security-Policy violation.

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message as Frame;

/// How long any one step may take before the test fails.
const STEP: Duration = Duration::from_secs(20);

/// The Chromium binary, if this machine has one.
fn binary() -> Option<String> {
    if let Ok(path) = std::env::var("CHROMIUM") {
        return Some(path);
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(str::to_owned)
}

/// The credentials the page's Basic prompts are answered with; `None`
/// cancels the prompt, as a person closing the dialog would.
type Credentials = Arc<Mutex<Option<(String, String)>>>;

pub struct Chrome {
    /// One of the few browsers that may run at once (see [`BROWSERS`]).
    _running: tokio::sync::OwnedSemaphorePermit,
    child: Child,
    _profile: tempfile::TempDir,
    commands: mpsc::UnboundedSender<(Value, oneshot::Sender<Value>)>,
    /// Console errors, uncaught exceptions and CSP violations, as logged.
    pub problems: Arc<Mutex<Vec<String>>>,
    pub credentials: Credentials,
    session: String,
    /// The page's target, to bring it to the front again.
    page: Value,
    loaded: Arc<tokio::sync::Notify>,
    /// Every event so far (method, params), and a wake-up when one comes.
    events: Events,
}

type Events = Arc<(Mutex<Vec<(String, Value)>>, tokio::sync::Notify)>;

impl Drop for Chrome {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How many browsers the tests run at once: each is a handful of
/// processes, and on a 2-core machine more than two side by side starve
/// each other (and the relays under test) past the tests' deadlines.
static BROWSERS: std::sync::LazyLock<Arc<tokio::sync::Semaphore>> =
    std::sync::LazyLock::new(|| Arc::new(tokio::sync::Semaphore::new(2)));

impl Chrome {
    /// Starts Chromium with one page, once fewer than [`BROWSERS`] run. (The tests that drive it are
    /// `#[ignore]`d, saying so: where it is missing, they fail.)
    pub async fn start() -> Chrome {
        let binary =
            binary().expect("chromium is not installed: apt-get install chromium (.ci/run does)");
        let running = BROWSERS.clone().acquire_owned().await.unwrap();
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(&binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
                "--remote-allow-origins=*",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .env("HOME", profile.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start chromium");
        let stderr = child.stderr.take().unwrap();
        let (found, endpoint) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stderr).lines();
            for line in lines.by_ref().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    let _ = found.send(url.trim().to_owned());
                    break;
                }
            }
            // Keep reading so Chromium never blocks on a full pipe.
            for _ in lines {}
        });
        let endpoint = endpoint
            .recv_timeout(STEP)
            .expect("chromium says where its DevTools listen");
        let (socket, _) = tokio_tungstenite::connect_async(&endpoint)
            .await
            .expect("connect to chromium's DevTools");
        let (mut sink, mut stream) = socket.split();

        let (commands, mut queue) = mpsc::unbounded_channel::<(Value, oneshot::Sender<Value>)>();
        let problems: Arc<Mutex<Vec<String>>> = Arc::default();
        let credentials: Credentials = Arc::default();
        let loaded = Arc::new(tokio::sync::Notify::new());
        let events: Events = Arc::default();
        let (replies_in, mut replies_out) = mpsc::unbounded_channel::<Value>();
        // One task owns the socket: it sends commands (numbering them),
        // routes each answer to its caller, and handles events.
        {
            let (problems, credentials, loaded, events) = (
                problems.clone(),
                credentials.clone(),
                loaded.clone(),
                events.clone(),
            );
            tokio::spawn(async move {
                let mut next_id = 1u64;
                let mut waiting: HashMap<u64, oneshot::Sender<Value>> = HashMap::new();
                loop {
                    tokio::select! {
                        command = queue.recv() => {
                            let Some((mut command, reply)) = command else { break };
                            command["id"] = json!(next_id);
                            waiting.insert(next_id, reply);
                            next_id += 1;
                            if sink.send(Frame::text(command.to_string())).await.is_err() { break; }
                        }
                        // Commands the event handling itself sends (no one waits).
                        Some(mut command) = replies_out.recv() => {
                            command["id"] = json!(next_id);
                            next_id += 1;
                            if sink.send(Frame::text(command.to_string())).await.is_err() { break; }
                        }
                        frame = stream.next() => {
                            let Some(Ok(Frame::Text(text))) = frame else {
                                if frame.is_none() { break; }
                                continue;
                            };
                            let message: Value = serde_json::from_str(&text).unwrap_or_default();
                            if let Some(id) = message["id"].as_u64() {
                                if let Some(reply) = waiting.remove(&id) {
                                    let _ = reply.send(message);
                                }
                                continue;
                            }
                            handle_event(&message, &problems, &credentials, &loaded, &replies_in);
                            if let Some(method) = message["method"].as_str() {
                                events.0.lock().unwrap().push((method.to_owned(), message["params"].clone()));
                                events.1.notify_waiters();
                            }
                        }
                    }
                }
            });
        }
        let mut chrome = Chrome {
            _running: running,
            child,
            _profile: profile,
            commands,
            problems,
            credentials,
            session: String::new(),
            page: Value::Null,
            loaded,
            events,
        };
        let targets = chrome.browser("Target.getTargets", json!({})).await;
        let page = targets["targetInfos"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["type"] == "page"))
            .map(|t| t["targetId"].clone())
            .expect("a page");
        chrome.page = page.clone();
        let attached = chrome
            .browser(
                "Target.attachToTarget",
                json!({ "targetId": page, "flatten": true }),
            )
            .await;
        chrome.session = attached["sessionId"].as_str().unwrap().to_owned();
        for domain in ["Page.enable", "Runtime.enable", "Log.enable"] {
            chrome.send(domain, json!({})).await;
        }
        chrome
            .send(
                "Fetch.enable",
                json!({ "handleAuthRequests": true, "patterns": [{ "urlPattern": "*" }] }),
            )
            .await;
        // Violations the page itself sees, beside the ones logged.
        chrome
            .send(
                "Page.addScriptToEvaluateOnNewDocument",
                json!({ "source": "document.addEventListener('securitypolicyviolation', \
                    e => console.error('CSP violation: ' + e.violatedDirective + ' ' + e.blockedURI));" }),
            )
            .await;
        chrome
    }

    async fn command(&self, command: Value) -> Value {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send((command, reply))
            .expect("the DevTools connection is open");
        let answer = tokio::time::timeout(STEP, answer)
            .await
            .expect("chromium answers in time")
            .expect("chromium answers");
        assert!(answer.get("error").is_none(), "DevTools refused: {answer}");
        answer["result"].clone()
    }

    async fn browser(&self, method: &str, params: Value) -> Value {
        self.command(json!({ "method": method, "params": params }))
            .await
    }

    /// A command to the page.
    pub async fn send(&self, method: &str, params: Value) -> Value {
        self.command(json!({ "method": method, "params": params, "sessionId": self.session }))
            .await
    }

    /// Opens `url` and waits until it has loaded.
    pub async fn open(&self, url: &str) {
        let loaded = self.loaded.notified();
        tokio::pin!(loaded);
        loaded.as_mut().enable();
        self.send("Page.navigate", json!({ "url": url })).await;
        tokio::time::timeout(STEP, loaded)
            .await
            .unwrap_or_else(|_| panic!("{url} loads in time"));
    }

    /// Runs `expression`, which leads the page elsewhere (a click on a
    /// link or a form's button), and waits until the next page has loaded.
    pub async fn follow(&self, expression: &str) {
        let loaded = self.loaded.notified();
        tokio::pin!(loaded);
        loaded.as_mut().enable();
        self.send(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true }),
        )
        .await;
        tokio::time::timeout(STEP, loaded)
            .await
            .unwrap_or_else(|_| panic!("{expression} leads to a page that loads in time"));
    }

    /// The value of `expression` in the page (awaited if a promise).
    pub async fn eval(&self, expression: &str) -> Value {
        self.eval_in(None, expression).await
    }

    /// Has every frame the page opens from now on attached as a target of
    /// its own: a sandboxed frame runs in a process of its own (site
    /// isolation), out of the page's reach. Call it before the frame is
    /// made; [`Chrome::child_frame`] then finds it.
    pub async fn attach_frames(&self) {
        self.send(
            "Target.setAutoAttach",
            json!({ "autoAttach": true, "waitForDebuggerOnStart": false, "flatten": true }),
        )
        .await;
    }

    /// The session of the page's first child frame (after
    /// [`Chrome::attach_frames`]), its console errors and CSP violations
    /// counted among [`Chrome::problems`] from now on: what
    /// [`Chrome::eval_in`] and [`Chrome::until_in`] take to run there, as
    /// the frame's own script runs, under its own Content-Security-Policy.
    pub async fn child_frame(&self) -> String {
        let attached = self
            .event("Target.attachedToTarget", |params| {
                params["targetInfo"]["type"] == "iframe"
            })
            .await;
        let session = attached["sessionId"].as_str().unwrap().to_owned();
        for domain in ["Runtime.enable", "Log.enable"] {
            self.command(json!({ "method": domain, "params": {}, "sessionId": session }))
                .await;
        }
        session
    }

    /// The value of `expression` in the page, or in the child `frame`'s
    /// session (awaited if a promise).
    pub async fn eval_in(&self, frame: Option<&str>, expression: &str) -> Value {
        let result = self
            .command(json!({
                "method": "Runtime.evaluate",
                "params": { "expression": expression, "returnByValue": true, "awaitPromise": true },
                "sessionId": frame.unwrap_or(&self.session),
            }))
            .await;
        assert!(
            result.get("exceptionDetails").is_none(),
            "{expression} threw: {result}"
        );
        result["result"]["value"].clone()
    }

    /// Waits until `condition` (an expression) holds in the page, checking
    /// it whenever the document changes; fails after a while.
    pub async fn until(&self, condition: &str) {
        self.until_in(None, condition).await
    }

    /// [`Chrome::until`], in the page or in the child `frame`'s session.
    pub async fn until_in(&self, frame: Option<&str>, condition: &str) {
        let expression = format!(
            "new Promise(resolve => {{ \
               const check = () => {{ if ({condition}) {{ observer.disconnect(); resolve(true); }} }}; \
               const observer = new MutationObserver(check); \
               observer.observe(document, {{ subtree: true, childList: true, characterData: true, attributes: true }}); \
               check(); }})"
        );
        tokio::time::timeout(STEP, self.eval_in(frame, &expression))
            .await
            .unwrap_or_else(|_| panic!("the page never showed {condition}"));
    }

    /// The first event `method` so far (or from now on) whose params
    /// satisfy `wanted`; fails after a while.
    pub async fn event(&self, method: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let (events, arrived) = &*self.events;
        let found = async {
            loop {
                let next = arrived.notified();
                tokio::pin!(next);
                next.as_mut().enable();
                if let Some((_, params)) = events
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|(m, params)| m == method && wanted(params))
                {
                    return params.clone();
                }
                next.await;
            }
        };
        tokio::time::timeout(STEP, found)
            .await
            .unwrap_or_else(|_| panic!("chromium never sent {method} as wanted"))
    }

    /// Grants the page's origin a permission (`notifications`), as a
    /// person answering the browser's prompt with Allow.
    pub async fn grant(&self, permission: &str, origin: &str) {
        self.browser(
            "Browser.grantPermissions",
            json!({ "permissions": [permission], "origin": origin }),
        )
        .await;
    }

    /// Opens another tab in front, as a person switching away: the page
    /// is hidden (and keeps running) until [`Chrome::front`].
    pub async fn away(&self) {
        self.browser("Target.createTarget", json!({ "url": "about:blank" }))
            .await;
    }

    /// Brings the page to the front again, and waits until it is shown.
    pub async fn front(&self) {
        self.browser("Target.activateTarget", json!({ "targetId": self.page }))
            .await;
        self.eval(
            "document.hidden ? new Promise(shown => document.addEventListener( \
               'visibilitychange', () => shown(true), { once: true })) : true",
        )
        .await;
    }

    /// The page as a person sees it at `width`×`height` (a phone when
    /// `mobile`), in dark mode when `dark`.
    pub async fn view(&self, width: u32, height: u32, mobile: bool, dark: bool) {
        self.send(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile }),
        )
        .await;
        let scheme = if dark { "dark" } else { "light" };
        self.send(
            "Emulation.setEmulatedMedia",
            json!({ "features": [{ "name": "prefers-color-scheme", "value": scheme }] }),
        )
        .await;
    }

    /// A PNG of the page as it stands, saved at `path`.
    pub async fn screenshot(&self, path: &std::path::Path) {
        let shot = self
            .send("Page.captureScreenshot", json!({ "format": "png" }))
            .await;
        use base64::Engine;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

/// Handles an event: answers sign-in prompts, lets paused requests go,
/// notes page loads and problems.
fn handle_event(
    message: &Value,
    problems: &Mutex<Vec<String>>,
    credentials: &Credentials,
    loaded: &tokio::sync::Notify,
    send: &mpsc::UnboundedSender<Value>,
) {
    let params = &message["params"];
    let session = message["sessionId"].clone();
    let reply = |method: &str, params: Value| {
        let _ = send.send(json!({ "method": method, "params": params, "sessionId": session }));
    };
    match message["method"].as_str().unwrap_or("") {
        "Page.loadEventFired" => loaded.notify_waiters(),
        "Fetch.requestPaused" => {
            reply(
                "Fetch.continueRequest",
                json!({ "requestId": params["requestId"] }),
            );
        }
        "Fetch.authRequired" => {
            let answer = match credentials.lock().unwrap().clone() {
                Some((username, password)) => json!({
                    "response": "ProvideCredentials", "username": username, "password": password
                }),
                None => json!({ "response": "CancelAuth" }),
            };
            reply(
                "Fetch.continueWithAuth",
                json!({ "requestId": params["requestId"], "authChallengeResponse": answer }),
            );
        }
        "Runtime.consoleAPICalled" if params["type"] == "error" => {
            let said: Vec<String> = params["args"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| {
                    a["value"]
                        .as_str()
                        .map_or_else(|| a.to_string(), str::to_owned)
                })
                .collect();
            problems
                .lock()
                .unwrap()
                .push(format!("console.error: {}", said.join(" ")));
        }
        "Runtime.exceptionThrown" => {
            problems
                .lock()
                .unwrap()
                .push(format!("exception: {}", params["exceptionDetails"]));
        }
        "Log.entryAdded" if params["entry"]["level"] == "error" => {
            let entry = &params["entry"];
            problems
                .lock()
                .unwrap()
                .push(format!("log: {} {}", entry["text"], entry["url"]));
        }
        _ => {}
    }
}
