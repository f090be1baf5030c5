//! systemd's notify protocol (`Type=notify`, sd_notify(3)): `READY=1` once
//! the relay listens, `STOPPING=1` when it begins to stop, and
//! `WATCHDOG=1` at half the watchdog interval, from a task of the async
//! runtime, so a runtime that stops making progress stops feeding it and
//! systemd restarts the relay.
//!
//! Outside systemd (`NOTIFY_SOCKET` unset) all of it does nothing.

use std::os::unix::net::UnixDatagram;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The notify socket systemd named, if any.
struct Socket {
    datagram: UnixDatagram,
    path: String,
}

impl Socket {
    fn from_env() -> Option<Socket> {
        let path = std::env::var("NOTIFY_SOCKET").ok()?;
        let datagram = UnixDatagram::unbound().ok()?;
        Some(Socket { datagram, path })
    }

    /// Sends `state`; a failure is logged, never fatal (systemd times the
    /// start out on its own).
    fn send(&self, state: &str) {
        let sent = match self.path.strip_prefix('@') {
            // An abstract socket's name (Linux).
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
                    .and_then(|addr| self.datagram.send_to_addr(state.as_bytes(), &addr))
            }
            None => self.datagram.send_to(state.as_bytes(), &self.path),
        };
        if let Err(error) = sent {
            tracing::warn!(%error, state, "could not tell systemd");
        }
    }
}

/// The watchdog's interval, if systemd set one for this process
/// (`WATCHDOG_USEC`, and `WATCHDOG_PID` naming it when set).
fn watchdog_interval() -> Option<Duration> {
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.trim() != std::process::id().to_string()
    {
        return None;
    }
    let micros: u64 = std::env::var("WATCHDOG_USEC").ok()?.trim().parse().ok()?;
    (micros > 0).then(|| Duration::from_micros(micros))
}

/// Tells systemd the relay is ready (call once it listens), and feeds the
/// watchdog until `shutdown`, when it says the relay is stopping.
pub fn ready(shutdown: CancellationToken) {
    let Some(socket) = Socket::from_env() else {
        return;
    };
    socket.send("READY=1");
    let watchdog = watchdog_interval();
    tokio::spawn(async move {
        match watchdog {
            Some(interval) => {
                let mut every = tokio::time::interval(interval / 2);
                loop {
                    tokio::select! {
                        _ = every.tick() => socket.send("WATCHDOG=1"),
                        () = shutdown.cancelled() => break,
                    }
                }
            }
            None => shutdown.cancelled().await,
        }
        socket.send("STOPPING=1");
    });
}
