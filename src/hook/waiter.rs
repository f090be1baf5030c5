//! The one waiter of a session, noted in a private directory.

use std::path::{Path, PathBuf};

/// The one waiter of a Claude Code session: a file that names the process
/// waiting for it, in a directory only this user may open. A newer waiter
/// writes its own number over it and tells the older to end (SIGTERM, only
/// to a process that is a `crosstalk hook`); an older one that reads
/// another number ends too.
pub(super) struct Waiter {
    file: Option<PathBuf>,
    me: u32,
}

impl Waiter {
    pub(super) fn register(session: &str) -> Waiter {
        let me = std::process::id();
        let file = Self::file(session);
        if let Some(file) = &file {
            let older = noted(file);
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
    pub(super) fn end(session: &str) {
        let Some(file) = Self::file(session) else {
            return;
        };
        if let Some(pid) = noted(&file).filter(|&pid| is_a_hook(pid)) {
            let _ = rustix::process::Pid::from_raw(pid as i32)
                .map(|pid| rustix::process::kill_process(pid, rustix::process::Signal::TERM));
        }
        forget(&file);
    }

    /// Takes this waiter's note away if it still names this waiter; a
    /// newer waiter's note stays. A note lives as long as its waiter: one
    /// whose client was killed, or whose terminal hung up, leaves none.
    pub(super) fn leave(&self) {
        if let Some(file) = &self.file
            && noted(file) == Some(self.me)
        {
            forget(file);
        }
    }

    /// Where a session's waiter is noted: none for a session id that could
    /// name another file, or when the directory is not this user's own.
    pub(super) fn file(session: &str) -> Option<PathBuf> {
        let safe = !session.is_empty()
            && session.len() <= 128
            && session
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        let dir = waiters_dir();
        (safe && private_dir(&dir)).then(|| dir.join(format!("{session}.waiter")))
    }

    /// Where a session's waiters write what they could not do (Codex's,
    /// which run in the background): beside its note.
    pub(super) fn log(session: &str) -> Option<PathBuf> {
        Some(Self::file(session)?.with_extension("log"))
    }

    pub(super) fn superseded(&self) -> bool {
        self.file
            .as_ref()
            .is_some_and(|file| noted(file).is_some_and(|pid| pid != self.me))
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.leave();
    }
}

/// The process a session's note names.
fn noted(file: &Path) -> Option<u32> {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|text| text.trim().parse().ok())
}

/// Removes a session's note, and its log when nothing was written to it.
fn forget(file: &Path) {
    let _ = std::fs::remove_file(file);
    let log = file.with_extension("log");
    if std::fs::metadata(&log).is_ok_and(|meta| meta.len() == 0) {
        let _ = std::fs::remove_file(log);
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
