//! Whether the Claude Code this bridge (or hook) runs under shows
//! crosstalk's channel events: as told, or as its command line says.

/// Whether the client shows crosstalk's channel events (`--channels`,
/// `CROSSTALK_CHANNELS`): as Claude Code's command line says, or as told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Channels {
    /// As the command line of the Claude Code that started this says
    /// ([`channels_named`]).
    #[default]
    Auto,
    /// It shows them (a client that is not Claude Code, or one whose
    /// command line cannot be read).
    On,
    /// It does not.
    Off,
}

impl Channels {
    /// Whether the client shows channel events.
    pub fn shown(self) -> bool {
        match self {
            Channels::Auto => claude_shows_channels(),
            Channels::On => true,
            Channels::Off => false,
        }
    }
}

/// Whether the Claude Code that runs this process (its parent, or up to
/// two shells above it: a hook's command runs in one) shows crosstalk's
/// channel events, by how it was started ([`channels_named`]).
fn claude_shows_channels() -> bool {
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..3 {
        if channels_named(&command_line(pid)) {
            return true;
        }
        match parent_of(pid) {
            Some(parent) if parent > 1 => pid = parent,
            _ => break,
        }
    }
    false
}

/// The parent of process `pid`, where it can be read.
fn parent_of(pid: u32) -> Option<u32> {
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "pid (name) state ppid …": the name may hold spaces and ')'.
        let after = &stat[stat.rfind(')')? + 1..];
        return after.split_whitespace().nth(1)?.parse().ok();
    }
    let out = std::process::Command::new("ps")
        .args(["-o", "ppid=", "-p", &pid.to_string()])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// The command line of process `pid`; empty where it cannot be read.
fn command_line(parent: u32) -> Vec<String> {
    if let Ok(raw) = std::fs::read(format!("/proc/{parent}/cmdline")) {
        return raw
            .split(|&b| b == 0)
            .filter(|arg| !arg.is_empty())
            .map(|arg| String::from_utf8_lossy(arg).into_owned())
            .collect();
    }
    // No /proc (macOS): ps prints the arguments joined by spaces.
    std::process::Command::new("ps")
        .args(["-o", "args=", "-p", &parent.to_string()])
        .output()
        .map(|out| {
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a Claude Code command line turns on channel events from
/// crosstalk: `--channels` naming the plugin (`plugin:crosstalk@…`), or
/// `--dangerously-load-development-channels` naming it or the server
/// `crosstalk` (`server:crosstalk`, as `crosstalk add` names it). Claude
/// Code skips the channel events of a server it was not started with, and
/// says so only in its debug log: without the flag, a push would be
/// claimed and never shown.
fn channels_named(args: &[String]) -> bool {
    let mut named = false;
    let mut listing = false;
    for arg in args {
        let value = match arg.split_once('=') {
            Some((flag, value)) if is_channel_flag(flag) => {
                listing = true;
                value
            }
            _ if is_channel_flag(arg) => {
                listing = true;
                continue;
            }
            _ if arg.starts_with('-') => {
                listing = false;
                continue;
            }
            _ if listing => arg.as_str(),
            _ => continue,
        };
        named |= value.split([',', ' ']).any(|entry| {
            entry == "server:crosstalk"
                || entry.starts_with("plugin:crosstalk@")
                || entry.starts_with("plugin:crosstalk:")
        });
    }
    named
}

fn is_channel_flag(flag: &str) -> bool {
    matches!(
        flag,
        "--channels" | "--dangerously-load-development-channels"
    )
}

#[cfg(test)]
#[test]
fn only_a_channel_flag_naming_crosstalk_turns_pushes_on() {
    let line = |text: &str| -> Vec<String> { text.split(' ').map(str::to_owned).collect() };
    for on in [
        "claude --channels plugin:crosstalk@crosstalk",
        "claude --permission-mode default --channels=plugin:crosstalk@team",
        "claude --dangerously-load-development-channels server:crosstalk --debug",
        "claude --dangerously-load-development-channels server:other plugin:crosstalk@crosstalk",
    ] {
        assert!(channels_named(&line(on)), "{on}");
    }
    for off in [
        "claude",
        "claude --permission-mode default",
        "claude --channels plugin:other@market server:crosstalk-not",
        "claude --channels plugin:other@market --allowedTools server:crosstalk",
        "claude server:crosstalk",
    ] {
        assert!(!channels_named(&line(off)), "{off}");
    }
}
