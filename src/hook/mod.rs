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
//! - **`pre-tool-use`** is the edit guard (`guard.rs`): an edit or a write
//!   of a file another person's claim covers is refused, naming the
//!   holder; with the relay away it goes on (and says so on stderr).
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
//! `relay.rs` reaches the relay (a lease, an approval); `waiter.rs` keeps
//! a session's one waiter.
//!
//! The other clients' hooks (`--client`, written by `crosstalk connect`):
//! Codex's in `codex.rs`; Gemini CLI's `stop` (its `AfterAgent`), which
//! goes on with what waits; OpenCode's `session-start`, the waiter of one
//! OpenCode process, which prints what came for the crosstalk plugin to
//! prompt the session with.

mod codex;
mod guard;
mod relay;
mod waiter;

use relay::{Failure, Relay};
use waiter::Waiter;

use crate::wire::{MessageView, push};
use serde::Deserialize;
use serde_json::{Value, json};
use std::{
    io::{Read, Write},
    path::PathBuf,
    time::Duration,
};
use tokio::signal::unix::{Signal, SignalKind, signal};

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

/// One run of a hook: its command line.
#[derive(Debug, clap::Args)]
pub struct Hook {
    /// The hook's event.
    #[arg(value_enum)]
    pub event: Event,
    #[command(flatten)]
    pub reach: crate::bridge::Reach,
    /// The client whose hook this is: its hook JSON, and its answer.
    #[arg(long, value_enum, default_value_t)]
    pub client: Client,
    /// The client's program, which Codex's waiter runs to hand a session a
    /// message (`codex queue`).
    #[arg(long, value_name = "PATH")]
    pub program: Option<PathBuf>,
    /// Be the session's waiter in this process, until process PID (the
    /// client) ends: Codex's `session-start` starts one so, in the
    /// background.
    #[arg(long, hide = true, value_name = "PID")]
    pub waiter: Option<u32>,
}

/// How long one wait on the relay lasts before the waiter looks whether it
/// is still the session's.
const WAIT_SECONDS: f64 = 25.0;
/// How often a waiting waiter looks whether its client still runs.
const CLIENT_LOOK: Duration = Duration::from_secs(1);
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
    #[serde(default)]
    cwd: String,
}

/// Runs the hook; the process's exit code: 2 when Claude Code's waiter
/// hands it a message, else 0 (a hook that fails says why on stderr, which
/// the client keeps in its debug log, and lets the session go on).
pub async fn run(hook: Hook) -> i32 {
    let mut raw = String::new();
    let _ = std::io::stdin().take(MAX_INPUT).read_to_string(&mut raw);
    let input: Input = serde_json::from_str(&raw).unwrap_or_default();
    let (Some(url), Some(token)) = (hook.reach.url.clone(), hook.reach.token.clone()) else {
        eprintln!(
            "crosstalk hook: CROSSTALK_URL and CROSSTALK_TOKEN are not both set; nothing to do"
        );
        return 0;
    };
    if let Err(error) = crate::bridge::check_url(&url) {
        eprintln!("crosstalk hook: {error}");
        return 0;
    }
    if hook.client == Client::Claude && hook.reach.channels.shown() {
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
            // escapes, so no `<channel>` block would survive there. Codex
            // 0.171 passes the reason inside a `<hook_prompt>` tag, escaped:
            // the model reads `&lt;channel …&gt;`, the words intact. Its
            // waiter's `codex queue` gives the block as written.)
            if let Some(messages) = relay.waiting().await {
                println!(
                    "{}",
                    json!({ "decision": "block", "reason": blocks(&messages) })
                );
            }
            0
        }
        (Client::Claude, Event::PreToolUse) => {
            if let Some(decision) = guard::guard(&relay, &input).await {
                println!("{decision}");
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
        | (Client::Codex, Event::PreToolUse) => 0,
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
    /// Told to end (SIGTERM) by a newer waiter or the session's end:
    /// between two waits, or during one (the relay then gives back what the
    /// wait had not handed over).
    ended: Signal,
    /// Its terminal hung up (SIGHUP): its client is going too.
    hung_up: Signal,
    /// Whether the client it waits for still runs.
    client_runs: Box<dyn Fn() -> bool>,
}

impl Watch {
    /// Becomes the session's waiter; none when it cannot be told to end.
    fn start(session: &str, client_runs: impl Fn() -> bool + 'static) -> Option<Watch> {
        Some(Watch {
            ended: signal(SignalKind::terminate()).ok()?,
            hung_up: signal(SignalKind::hangup()).ok()?,
            waiter: Waiter::register(session),
            client_runs: Box::new(client_runs),
        })
    }

    /// Resolves once this waiter is to end: told to, hung up, or its client
    /// gone (looked at once a second). Its note goes then, before the wait
    /// it ends is dropped: its person no longer counts as reachable, and
    /// nothing is leased to a session that cannot show it.
    async fn ending(&mut self) {
        let client_runs = &self.client_runs;
        let client_gone = async {
            // The first tick is at once: a client gone already ends it now.
            let mut look = tokio::time::interval(CLIENT_LOOK);
            loop {
                look.tick().await;
                if !client_runs() {
                    break;
                }
            }
        };
        tokio::select! {
            _ = self.ended.recv() => {}
            _ = self.hung_up.recv() => {}
            () = client_gone => {}
        }
        self.waiter.leave();
    }

    /// The person's next messages, leased to this waiter; none once it is
    /// to end: a newer waiter took the session, its client is gone, it was
    /// told to or hung up, or the relay refused it. When the relay cannot
    /// be reached it tries again (1 s, doubling to 30 s) without end.
    async fn next(&mut self, relay: &Relay) -> Option<Vec<MessageView>> {
        let mut backoff = FIRST_BACKOFF;
        loop {
            if self.waiter.superseded() || !(self.client_runs)() {
                return None;
            }
            let leased = tokio::select! {
                leased = relay.lease("wake", WAIT_SECONDS) => leased,
                () = self.ending() => return None,
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
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        () = self.ending() => return None,
                    }
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
