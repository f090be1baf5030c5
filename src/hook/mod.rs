//! `crosstalk hook EVENT`: Claude Code's hooks, which the `crosstalk`
//! plugin ships, bringing a teammate's message to a session however it was
//! started: no channel flag, in the terminal, an IDE, Desktop or the web.
//!
//! Each reads Claude Code's hook JSON on stdin and the relay from
//! `CROSSTALK_URL` and `CROSSTALK_TOKEN`, and never holds a session up:
//!
//! - **`session-start` and `stop`** run as `asyncRewake` hooks, in the
//!   background: each waits on the relay for the person's next message
//!   (`POST /api/inbox/lease`, `via: wake`), and when one comes prints it
//!   on stderr and exits 2, which makes Claude Code show it to the model at
//!   once: an idle session wakes with nobody typing, and a busy one reads
//!   it between its steps or as its turn ends (`stop` finds what came
//!   during the turn at once). One waits per session: a newer one (the next
//!   turn's `stop`) ends it, and it ends with Claude Code. When the
//!   relay cannot be reached it tries again (1 s, doubling to 30 s) without
//!   end; it only waits, so the session never notices.
//! - **`user-prompt-submit`** adds what waits to the prompt the person sent
//!   (`via: hook`), as context; within 3 s, or nothing.
//! - **`permission-request`** asks the person on the relay (`POST
//!   /api/approvals`): their answer from the page, their phone or the API
//!   allows or denies the step. Unanswered within
//!   [`APPROVAL_WAIT`], or with the relay away, it decides nothing, and
//!   Claude Code asks in the terminal as it would have.
//! - **`pre-tool-use`** decides nothing yet.
//!
//! A session started with a channel flag naming crosstalk gets its
//! messages and prompts through the bridge's channel (`bridge`): there the
//! hooks do nothing.
//!
//! Whatever the path, the model reads a message as the block a channel
//! event gives it (`wire::push::channel_block`), its last line saying how
//! to answer. A hook's lease is the relay's push lease: a message a hook
//! took and nobody acted on is offered again when it ends, as a channel
//! push is.
//!
//! The other clients' hooks (`--client`, written by `crosstalk connect`):
//! Codex's in `codex.rs`; Gemini CLI's `stop` (its `AfterAgent`), which
//! goes on with what waits; OpenCode's `session-start`, the waiter of one
//! OpenCode process, which prints what came for the crosstalk plugin to
//! prompt the session with.

mod codex;

use crate::bridge::Channels;
use crate::wire::{MessageView, Messages, attention::ApprovalView, push};
use serde::Deserialize;
use serde_json::{Value, json};
use std::{
    io::{Read, Write},
    path::PathBuf,
    time::Duration,
};

/// The events the hooks run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Event {
    SessionStart,
    UserPromptSubmit,
    Stop,
    PermissionRequest,
    PreToolUse,
    SessionEnd,
}

/// The client a hook runs in: whose hook JSON it reads and whose answer it
/// gives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    #[default]
    Claude,
    Codex,
    /// Gemini CLI: only `stop` (its `AfterAgent` event) is written for it.
    Gemini,
    /// OpenCode: its crosstalk plugin runs `session-start` as the waiter of
    /// the OpenCode process, and prompts the session with what it prints.
    Opencode,
}

/// One run of a hook, as the command line gives it.
pub struct Hook {
    pub event: Event,
    pub client: Client,
    pub url: Option<String>,
    pub token: Option<String>,
    pub channels: Channels,
    /// The client's program: Codex's waiter runs `codex queue`.
    pub program: Option<PathBuf>,
    /// Be the session's waiter in this process until this process (the
    /// client) ends: Codex's `session-start` starts one so, in the
    /// background.
    pub waiter: Option<u32>,
}

/// How long one wait on the relay lasts before the waiter looks whether it
/// is still the session's, and its Claude Code still runs.
const WAIT_SECONDS: f64 = 25.0;
/// How long a hook that runs in a session's way may take, all told.
const QUICK: Duration = Duration::from_secs(3);
/// How long a permission request waits for its person on the relay before
/// it leaves the terminal's own prompt to them.
pub const APPROVAL_WAIT: Duration = Duration::from_secs(120);
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The most of Claude Code's hook JSON read from stdin.
const MAX_INPUT: u64 = 1 << 20;
/// The source the blocks name, as a channel event from the bridge would.
const SOURCE: &str = "crosstalk";

/// What of Claude Code's hook input the hooks use.
#[derive(Debug, Default, Deserialize)]
struct Input {
    #[serde(default)]
    session_id: String,
    #[serde(default)]
    tool_name: String,
    #[serde(default)]
    tool_input: Value,
}

/// Runs the hook; the process's exit code: 2 when Claude Code's waiter
/// hands it a message, else 0 (a hook that fails says why on stderr, which
/// the client keeps in its debug log, and lets the session go on).
pub async fn run(hook: Hook) -> i32 {
    let mut raw = String::new();
    let _ = std::io::stdin().take(MAX_INPUT).read_to_string(&mut raw);
    let input: Input = serde_json::from_str(&raw).unwrap_or_default();
    let (Some(url), Some(token)) = (hook.url.clone(), hook.token.clone()) else {
        eprintln!(
            "crosstalk hook: CROSSTALK_URL and CROSSTALK_TOKEN are not both set; nothing to do"
        );
        return 0;
    };
    if let Err(error) = crate::bridge::check_url(&url) {
        eprintln!("crosstalk hook: {error}");
        return 0;
    }
    if hook.client == Client::Claude && hook.channels.shown() {
        // The bridge pushes each message as a channel event and relays the
        // permission prompts: a hook would race it.
        return 0;
    }
    let relay = Relay {
        url: url.trim_end_matches('/').to_owned(),
        token,
        http: reqwest::Client::new(),
    };
    match (hook.client, hook.event) {
        (Client::Claude, Event::SessionStart | Event::Stop) => {
            wait_and_wake(&relay, &input.session_id, Wake::Rewake).await
        }
        (Client::Opencode, Event::SessionStart) => {
            wait_and_wake(&relay, &input.session_id, Wake::Print).await
        }
        (Client::Claude | Client::Codex, Event::UserPromptSubmit) => {
            if let Some(messages) = relay.waiting().await {
                let context = json!({ "hookSpecificOutput": {
                    "hookEventName": "UserPromptSubmit",
                    "additionalContext": blocks(&messages),
                } });
                println!("{context}");
            }
            0
        }
        (Client::Claude, Event::PermissionRequest) => {
            if let Some(decision) = relay.approval(&input).await {
                println!("{decision}");
            }
            0
        }
        (Client::Codex, Event::SessionStart) => match hook.waiter {
            Some(client) => codex::wait_and_queue(&relay, &input.session_id, &hook, client).await,
            None => {
                codex::start_waiter(&raw, &input.session_id, &hook);
                0
            }
        },
        (Client::Codex | Client::Gemini, Event::Stop) => {
            // What came during the turn, and no waiter took: the turn goes
            // on with it, as a prompt. (Gemini CLI passes a block's reason
            // to the model as written; what its hooks add as context it
            // escapes, so no `<channel>` block would survive there.)
            if let Some(messages) = relay.waiting().await {
                println!(
                    "{}",
                    json!({ "decision": "block", "reason": blocks(&messages) })
                );
            }
            0
        }
        (Client::Codex, Event::SessionEnd) => {
            Waiter::end(&input.session_id);
            0
        }
        (Client::Claude, Event::SessionEnd)
        | (Client::Codex, Event::PermissionRequest)
        | (Client::Gemini | Client::Opencode, _)
        | (_, Event::PreToolUse) => 0,
    }
}

/// How a waiter that runs until the person's next message hands it over.
#[derive(Clone, Copy)]
enum Wake {
    /// Claude Code's `asyncRewake`: on stderr, exit 2, which shows it to
    /// the model at once.
    Rewake,
    /// On stdout, exit 0: OpenCode's plugin prompts the session with it.
    Print,
}

/// The waiter: until the person's next message, which it hands over as
/// `wake` says; ends quietly (0, nothing printed) once a newer waiter took
/// the session over, the relay refused, or the client that started it (its
/// parent) is gone.
async fn wait_and_wake(relay: &Relay, session: &str, wake: Wake) -> i32 {
    let parent = rustix::process::getppid();
    let Some(mut watch) = Watch::start(session, move || rustix::process::getppid() == parent)
    else {
        return 0;
    };
    let Some(messages) = watch.next(relay).await else {
        return 0;
    };
    let text = blocks(&messages);
    match wake {
        Wake::Rewake => {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "{text}");
            let _ = stderr.flush();
            2
        }
        Wake::Print => {
            let mut stdout = std::io::stdout().lock();
            let _ = write!(stdout, "{text}");
            let _ = stdout.flush();
            0
        }
    }
}

/// A session's one waiter on the relay, whatever its client does with
/// what it gets: it waits for the person's next messages (`via: wake`)
/// while it is the session's waiter and its client runs.
struct Watch {
    waiter: Waiter,
    /// Told to end by a newer waiter: between two waits, or during one (the
    /// relay then gives back what the wait had not handed over).
    ended: tokio::signal::unix::Signal,
    /// Whether the client it waits for still runs.
    client_runs: Box<dyn Fn() -> bool>,
}

impl Watch {
    /// Becomes the session's waiter; none when it cannot be told to end.
    fn start(session: &str, client_runs: impl Fn() -> bool + 'static) -> Option<Watch> {
        let ended =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok()?;
        Some(Watch {
            waiter: Waiter::register(session),
            ended,
            client_runs: Box::new(client_runs),
        })
    }

    /// The person's next messages, leased to this waiter; none once it is
    /// to end: a newer waiter took the session, its client is gone, it was
    /// told to, or the relay refused it. When the relay cannot be reached
    /// it tries again (1 s, doubling to 30 s) without end.
    async fn next(&mut self, relay: &Relay) -> Option<Vec<MessageView>> {
        let mut backoff = FIRST_BACKOFF;
        loop {
            if self.waiter.superseded() || !(self.client_runs)() {
                return None;
            }
            let leased = tokio::select! {
                leased = relay.lease("wake", WAIT_SECONDS) => leased,
                _ = self.ended.recv() => return None,
            };
            match leased {
                Ok(messages) if messages.is_empty() => backoff = FIRST_BACKOFF,
                Ok(messages) => return Some(messages),
                Err(Failure::Refused(why)) => {
                    eprintln!("crosstalk hook: the relay refused: {why}");
                    return None;
                }
                Err(Failure::Away(error)) => {
                    eprintln!(
                        "crosstalk hook: cannot reach the relay ({error}); trying again in {backoff:?}"
                    );
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
}

/// The messages as the model reads them, one block each.
fn blocks(messages: &[MessageView]) -> String {
    messages
        .iter()
        .map(|message| push::channel_block(SOURCE, message))
        .collect::<Vec<_>>()
        .join("\n\n")
}

struct Relay {
    url: String,
    token: String,
    http: reqwest::Client,
}

enum Failure {
    /// The relay answered no: a revoked token, a bad request.
    Refused(String),
    /// The relay did not answer.
    Away(String),
}

impl Relay {
    /// What waits for the person now, leased to a hook that adds it to the
    /// session's turn (`via: hook`), within [`QUICK`]; none when nothing
    /// waits or the relay is away.
    async fn waiting(&self) -> Option<Vec<MessageView>> {
        match tokio::time::timeout(QUICK, self.lease("hook", 0.0)).await {
            Ok(Ok(messages)) if !messages.is_empty() => Some(messages),
            _ => None,
        }
    }

    /// The person's waiting messages, leased to this hook `via` its path,
    /// waiting up to `wait` seconds for one.
    async fn lease(&self, via: &str, wait: f64) -> Result<Vec<MessageView>, Failure> {
        let response = self
            .http
            .post(format!("{}/api/inbox/lease", self.url))
            .bearer_auth(&self.token)
            .timeout(Duration::from_secs_f64(wait) + Duration::from_secs(10))
            .json(&json!({ "via": via, "timeout_seconds": wait }))
            .send()
            .await
            .map_err(|error| Failure::Away(error.to_string()))?;
        let status = response.status();
        if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            return Err(Failure::Away(format!("status {status}")));
        }
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(Failure::Refused(format!("{status}: {body}")));
        }
        let leased: Messages = response
            .json()
            .await
            .map_err(|error| Failure::Away(error.to_string()))?;
        Ok(leased.messages)
    }

    /// Asks the person to approve the step on the relay, and waits for
    /// their answer: Claude Code's decision, or none (the terminal asks).
    async fn approval(&self, input: &Input) -> Option<Value> {
        let asked = json!({
            "request_id": request_id(),
            "tool_name": input.tool_name,
            "description": describe(input),
            "input_preview": preview(&input.tool_input),
        });
        let approval: ApprovalView = self
            .http
            .post(format!("{}/api/approvals", self.url))
            .bearer_auth(&self.token)
            .timeout(QUICK)
            .json(&asked)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .ok()?
            .json()
            .await
            .ok()?;
        let deadline = tokio::time::Instant::now() + APPROVAL_WAIT;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return None;
            }
            let url = format!(
                "{}/api/approvals/{}?wait_seconds={}",
                self.url,
                approval.id,
                left.as_secs().clamp(1, 50)
            );
            let answered = self
                .http
                .get(url)
                .bearer_auth(&self.token)
                .timeout(Duration::from_secs(60))
                .send()
                .await
                .and_then(reqwest::Response::error_for_status);
            let view = match answered {
                Ok(response) => response.json::<ApprovalView>().await.ok(),
                Err(_) => None,
            };
            let behavior = match view.as_ref().map(|v| v.state.as_str()) {
                Some("allowed") => json!({ "behavior": "allow" }),
                Some("denied") => json!({
                    "behavior": "deny",
                    "message": "Your person denied this step from the crosstalk relay.",
                }),
                Some("pending") => continue,
                // Expired, or the relay away: the terminal asks.
                _ => return None,
            };
            return Some(json!({ "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": behavior,
            } }));
        }
    }
}

/// A request id the relay takes: letters and digits.
fn request_id() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    format!("hook-{}", u64::from_le_bytes(bytes))
}

/// What the step says it does: its own description, else its tool.
fn describe(input: &Input) -> String {
    match input.tool_input["description"].as_str() {
        Some(description) if !description.trim().is_empty() => description.to_owned(),
        _ => format!("Run {}", input.tool_name),
    }
}

/// The step's input as the person reads it: a command as typed, a file's
/// path, else the input's JSON.
fn preview(input: &Value) -> String {
    for field in ["command", "file_path", "url", "pattern"] {
        if let Some(text) = input[field].as_str() {
            return text.to_owned();
        }
    }
    input.to_string()
}

/// The one waiter of a Claude Code session: a file that names the process
/// waiting for it, in a directory only this user may open. A newer waiter
/// writes its own number over it and tells the older to end (SIGTERM, only
/// to a process that is a `crosstalk hook`); an older one that reads
/// another number ends too.
struct Waiter {
    file: Option<PathBuf>,
    me: u32,
}

impl Waiter {
    fn register(session: &str) -> Waiter {
        let me = std::process::id();
        let file = Self::file(session);
        if let Some(file) = &file {
            let older = std::fs::read_to_string(file)
                .ok()
                .and_then(|text| text.trim().parse::<u32>().ok());
            if let Err(error) = std::fs::write(file, me.to_string()) {
                eprintln!("crosstalk hook: cannot note this session's waiter: {error}");
            }
            if let Some(older) = older.filter(|&pid| pid != me && is_a_hook(pid)) {
                let _ = rustix::process::Pid::from_raw(older as i32)
                    .map(|pid| rustix::process::kill_process(pid, rustix::process::Signal::TERM));
            }
        }
        Waiter { file, me }
    }

    /// Ends the session's waiter, if one is noted (its client's session
    /// ended).
    fn end(session: &str) {
        let Some(file) = Self::file(session) else {
            return;
        };
        if let Some(pid) = std::fs::read_to_string(&file)
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
            .filter(|&pid| is_a_hook(pid))
        {
            let _ = rustix::process::Pid::from_raw(pid as i32)
                .map(|pid| rustix::process::kill_process(pid, rustix::process::Signal::TERM));
        }
        let _ = std::fs::remove_file(file);
    }

    /// Where a session's waiter is noted: none for a session id that could
    /// name another file, or when the directory is not this user's own.
    fn file(session: &str) -> Option<PathBuf> {
        let safe = !session.is_empty()
            && session.len() <= 128
            && session
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        let dir = waiters_dir();
        (safe && private_dir(&dir)).then(|| dir.join(format!("{session}.waiter")))
    }

    fn superseded(&self) -> bool {
        self.file.as_ref().is_some_and(|file| {
            std::fs::read_to_string(file)
                .ok()
                .and_then(|text| text.trim().parse::<u32>().ok())
                .is_some_and(|pid| pid != self.me)
        })
    }
}

/// Whether process `pid` is a `crosstalk hook` (a number a waiter noted may
/// have gone to another process since).
fn is_a_hook(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|raw| {
        let args: Vec<&[u8]> = raw.split(|&b| b == 0).collect();
        args.first()
            .is_some_and(|program| program.ends_with(b"crosstalk"))
            && args.get(1).is_some_and(|arg| *arg == b"hook")
    })
}

/// Makes `dir` if it is not there, and says whether it is this user's own
/// directory that nobody else may open (not a link someone else put there):
/// otherwise waiters go on without noting themselves, and overlap.
fn private_dir(dir: &std::path::Path) -> bool {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let _ = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir);
    let private = std::fs::symlink_metadata(dir).is_ok_and(|meta| {
        meta.is_dir()
            && meta.uid() == rustix::process::getuid().as_raw()
            && meta.mode() & 0o077 == 0
    });
    if !private {
        eprintln!(
            "crosstalk hook: {} is not this user's private directory; not noting the waiter",
            dir.display()
        );
    }
    private
}

/// Where the waiters note themselves: the user's runtime directory, else
/// one of the user's own under the temporary directory.
fn waiters_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir).join("crosstalk-hooks"),
        _ => std::env::temp_dir().join(format!(
            "crosstalk-hooks-{}",
            rustix::process::getuid().as_raw()
        )),
    }
}
