//! A program run as a person runs it in a terminal: in a detached tmux
//! session of its own (its own server socket, never the user's), with an
//! environment given whole, read by its screen and typed into.

use std::{
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

/// How long a program may take to start, show a screen, or answer.
pub const PATIENCE: Duration = Duration::from_secs(60);

pub struct Terminal {
    /// The tmux server's socket: one for each terminal.
    socket: String,
}

impl Terminal {
    /// Starts `program` with `args` in `dir`, with exactly `env` (`env -i`).
    pub fn start(dir: &Path, env: &[(String, String)], program: &Path, args: &[&str]) -> Terminal {
        use std::sync::atomic::{AtomicU64, Ordering};
        static STARTS: AtomicU64 = AtomicU64::new(0);
        let n = STARTS.fetch_add(1, Ordering::Relaxed);
        let terminal = Terminal {
            socket: format!("crosstalk-terminal-{}-{n}", std::process::id()),
        };
        let env: Vec<String> = env
            .iter()
            .map(|(k, v)| format!("{k}={}", quote(v)))
            .collect();
        let mut line = vec![quote(&program.display().to_string())];
        line.extend(args.iter().map(|a| quote(a)));
        let script = format!(
            "cd {} && exec env -i {} {}",
            quote(&dir.display().to_string()),
            env.join(" "),
            line.join(" ")
        );
        let started = terminal.tmux(&[
            "new-session",
            "-d",
            "-s",
            "term",
            "-x",
            "200",
            "-y",
            "50",
            &script,
        ]);
        assert!(started.status.success(), "{started:?}");
        terminal
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    /// The screen as a person sees it now.
    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "term"]).stdout)
            .into_owned()
    }

    /// Waits until the screen shows `text` (a terminal has no event to wait
    /// on: its screen is read every 100 ms).
    pub fn until_screen(&self, text: &str) {
        self.until_screen_explained(text, String::new);
    }

    /// The same, with what `explain` tells (a program's log) in the
    /// failure's message.
    pub fn until_screen_explained(&self, text: &str, explain: impl Fn() -> String) {
        let deadline = Instant::now() + PATIENCE;
        while !self.screen().contains(text) {
            assert!(
                Instant::now() < deadline,
                "the screen never showed {text:?}:\n{}\n{}",
                self.screen(),
                explain()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the screen shows one of `texts`; which.
    pub fn until_one_of(&self, texts: &[&str]) -> usize {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let screen = self.screen();
            if let Some(at) = texts.iter().position(|t| screen.contains(t)) {
                return at;
            }
            assert!(
                Instant::now() < deadline,
                "the screen never showed any of {texts:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Presses keys (tmux's names: `Enter`, `Down`).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "term"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// Presses `keys` while the screen shows `text`, until it no longer
    /// does: a key pressed as a screen paints can be lost.
    pub fn answer(&self, text: &str, keys: &[&str]) {
        self.until_screen(text);
        let deadline = Instant::now() + PATIENCE;
        while self.screen().contains(text) {
            assert!(Instant::now() < deadline, "{}", self.screen());
            self.keys(keys);
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Types `text` at the prompt and sends it, as the person would.
    pub fn type_prompt(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "term", "-l", text]);
        self.until_screen(text);
        self.keys(&["Enter"]);
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}

pub fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}
