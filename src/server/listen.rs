//! Listening: binding a socket, the bounds every connection gets, draining
//! at shutdown, and re-reading certificate files on SIGHUP.

use super::StartError;
use crate::tls;
use axum_server::tls_rustls::RustlsConfig;
use hyper_util::{rt::TokioExecutor, server::conn::auto::Builder};
use std::{net::SocketAddr, path::PathBuf, time::Duration};
use tokio_util::sync::CancellationToken;

/// How long a new connection may take to send its first whole request.
pub const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bytes of request line and headers read for one HTTP/1 request
/// (a larger head is answered 431), as Tomcat and Jetty allow by default.
/// It also bounds what one read takes, and so each connection's read
/// buffer: hyper-util's protocol sniffing hands hyper the first 24 bytes
/// alone, and any bound above hyper's first 8 KiB had every connection's
/// buffer grow to 16 KiB before it had read one head (bench/README.md).
pub const MAX_HEADER_BYTES: usize = 8 * 1024;
/// The same for an HTTP/2 request's header list, which is decoded into a
/// buffer of the request's own, not one the connection keeps: browsers
/// send each cookie as a field of its own there.
pub const MAX_HEADER_LIST_BYTES: u32 = 32 * 1024;
/// How long connections may take to finish at shutdown before they are cut.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// How often an HTTP/2 connection is pinged when the client sends nothing,
/// and how long the answer may take before the connection is dropped: finds
/// peers that vanished without closing.
pub const PING_EVERY: Duration = Duration::from_secs(30);
pub const PING_TIMEOUT: Duration = Duration::from_secs(20);

/// Bounds on what one connection may hold: header size and read time,
/// HTTP/2 streams, and pings that find dead peers. (Idle connections and
/// the caps on connections are `bounds.rs`'s.)
fn bound_connections(builder: &mut Builder<TokioExecutor>, header_read: Duration) {
    builder
        .http1()
        .header_read_timeout(header_read)
        .max_buf_size(MAX_HEADER_BYTES);
    builder
        .http2()
        .timer(hyper_util::rt::TokioTimer::new())
        .keep_alive_interval(PING_EVERY)
        .keep_alive_timeout(PING_TIMEOUT)
        .max_header_list_size(MAX_HEADER_LIST_BYTES)
        .max_concurrent_streams(128);
}

/// Binds `addr` and makes a server on it with the connection bounds
/// (headers read within `header_read`), which drains when `shutdown`
/// fires; returns it and the address it got.
pub(super) fn listen(
    addr: SocketAddr,
    header_read: Duration,
    shutdown: &CancellationToken,
) -> Result<(axum_server::Server<SocketAddr>, SocketAddr), StartError> {
    let error = |source| StartError::Listen { addr, source };
    let listener = std::net::TcpListener::bind(addr).map_err(error)?;
    listener.set_nonblocking(true).map_err(error)?;
    let bound = listener.local_addr().map_err(error)?;
    let mut server = axum_server::from_tcp(listener)
        .map_err(error)?
        .handle(shutdown_handle(shutdown))
        .first_request_timeout(FIRST_REQUEST_TIMEOUT);
    bound_connections(server.http_builder(), header_read);
    Ok((server, bound))
}

/// A server handle that starts a graceful shutdown when `shutdown` fires.
fn shutdown_handle(shutdown: &CancellationToken) -> axum_server::Handle<SocketAddr> {
    let handle = axum_server::Handle::new();
    let stopping = handle.clone();
    let shutdown = shutdown.clone();
    tokio::spawn(async move {
        shutdown.cancelled().await;
        stopping.graceful_shutdown(Some(SHUTDOWN_GRACE));
    });
    handle
}

/// Certificate files mode: re-reads the files on SIGHUP. A pair that does not
/// load is logged and the one in use kept.
pub(super) async fn reload_on_hangup(
    rustls: RustlsConfig,
    cert: PathBuf,
    key: PathBuf,
    shutdown: CancellationToken,
) {
    let mut hangups = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(error) => {
            tracing::error!(%error, "cannot listen for SIGHUP; certificate files will not be reloaded");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = hangups.recv() => match tls::from_files(&cert, &key) {
                Ok(config) => {
                    rustls.reload_from_config(config);
                    tracing::info!(cert = %cert.display(), "reloaded the TLS certificate");
                }
                Err(error) => tracing::error!(error = &error as &dyn std::error::Error, "kept the TLS certificate in use"),
            },
            () = shutdown.cancelled() => return,
        }
    }
}

/// Waits for SIGINT or SIGTERM.
pub(super) async fn stop_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(error) => {
            tracing::error!(%error, "cannot listen for SIGTERM; stopping on Ctrl-C only");
            let _ = ctrl_c.await;
            return;
        }
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = term.recv() => {}
    }
}
