//! Codex's side of the hooks: its hooks run in the session's way (Codex
//! waits for each), so the one that waits runs on its own.
//!
//! `session-start` starts the session's waiter in the background and
//! returns at once. The waiter waits on the relay for the person's next
//! message (`via: wake`) and hands it to the session with `codex queue
//! --thread SESSION`: Codex's own way to give a running session a message,
//! which an idle session takes as its next turn at once (nobody typing) and
//! a busy one after the turn it is in. It goes on waiting until the session
//! ends (`session-end`), a newer waiter takes the session over, or the
//! Codex process that started it is gone.

use super::{Hook, Relay, Waiter, Watch, blocks};
use std::{
    io::Write,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

/// Starts the session's waiter: this program again, in a process group of
/// its own (Codex ending the hook does not end it), with the hook's input.
pub(super) fn start_waiter(raw: &str, session: &str, hook: &Hook) {
    let Ok(me) = std::env::current_exe() else {
        return;
    };
    let mut command = Command::new(me);
    command
        .args(["hook", "session-start", "--client", "codex", "--waiter"])
        .arg(codex_process().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(log(session).map_or_else(Stdio::null, Stdio::from))
        .process_group(0);
    if let Some(program) = &hook.program {
        command.arg("--program").arg(program);
    }
    match command.spawn() {
        Ok(mut waiter) => {
            if let Some(mut stdin) = waiter.stdin.take() {
                let _ = stdin.write_all(raw.as_bytes());
            }
        }
        Err(error) => eprintln!("crosstalk hook: cannot start the session's waiter: {error}"),
    }
}

/// The waiter: hands each of the person's messages to the session as it
/// comes, until the session ends or the Codex process `client` is gone.
pub(super) async fn wait_and_queue(relay: &Relay, session: &str, hook: &Hook, client: u32) -> i32 {
    if session.is_empty() {
        return 0;
    }
    let codex = hook
        .program
        .clone()
        .unwrap_or_else(|| PathBuf::from("codex"));
    let client_runs = move || Path::new(&format!("/proc/{client}")).exists();
    let Some(mut watch) = Watch::start(session, client_runs) else {
        return 0;
    };
    while let Some(messages) = watch.next(relay).await {
        let queued = tokio::process::Command::new(&codex)
            .args(["queue", "--thread", session, "--message"])
            .arg(blocks(&messages))
            .stdin(Stdio::null())
            .output()
            .await;
        // The session is gone, or `codex` cannot be run: what it leased is
        // offered again when its lease ends.
        match queued {
            Ok(done) if done.status.success() => {}
            Ok(done) => {
                eprintln!(
                    "crosstalk hook: codex queue failed: {}",
                    String::from_utf8_lossy(&done.stderr)
                );
                return 0;
            }
            Err(error) => {
                eprintln!("crosstalk hook: cannot run {}: {error}", codex.display());
                return 0;
            }
        }
    }
    0
}

/// The Codex process this hook runs under: the nearest ancestor that is a
/// `codex` (the terminal's, `codex exec`, or the app server that runs the
/// sessions), else the hook's parent.
fn codex_process() -> u32 {
    let parent = rustix::process::getppid().map_or(1, |pid| pid.as_raw_nonzero().get() as u32);
    let mut pid = parent;
    for _ in 0..8 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            break;
        };
        // `pid (comm) state ppid …`: the name may hold spaces and brackets.
        let Some((name, rest)) = stat
            .split_once(" (")
            .and_then(|(_, rest)| rest.rsplit_once(") "))
        else {
            break;
        };
        if name == "codex" {
            return pid;
        }
        match rest
            .split_whitespace()
            .nth(1)
            .and_then(|ppid| ppid.parse().ok())
        {
            Some(next) if next > 1 => pid = next,
            _ => break,
        }
    }
    parent
}

/// The waiter's log, beside the note of it: what it could not do.
fn log(session: &str) -> Option<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(Waiter::log(session)?)
        .ok()
}
