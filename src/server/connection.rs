//! One connection as the server runs it: the acceptor that counts it
//! against [`ConnectionBounds`], sets `TCP_NODELAY` and wraps its socket
//! and service; the socket that closes when idle (or when closed to make
//! room); the service that counts requests in flight until their response
//! bodies end, and answers each request of a refused connection with its
//! refusal.

use super::bounds::{Activity, ConnectionBounds, Ticket};
use crate::layers::auth::Vouch;
use crate::wire::ApiError;
use axum::{
    body::{Body, HttpBody},
    http::{HeaderValue, Request, Response, Version, header},
    response::IntoResponse,
};
use axum_server::accept::Accept;
use hyper::body::Incoming;
use std::{
    future::{Future, Ready},
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::TcpStream,
    time::{Instant, Sleep},
};
use tower::Service;

/// How long a refused connection stays open for its refusal to be read.
const REFUSED_LINGER: Duration = Duration::from_secs(2);

/// The acceptor: counts each connection, sets `TCP_NODELAY`, and wraps the
/// socket and the service so the connection closes when idle.
#[derive(Clone)]
pub struct Bounded {
    pub bounds: Arc<ConnectionBounds>,
}

impl<S> Accept<TcpStream, S> for Bounded {
    type Stream = IdleClose<TcpStream>;
    type Service = Tracked<S>;
    type Future = Ready<io::Result<(Self::Stream, Self::Service)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        std::future::ready(self.wrap(stream, service))
    }
}

impl Bounded {
    fn wrap<S>(
        &self,
        stream: TcpStream,
        service: S,
    ) -> io::Result<(IdleClose<TcpStream>, Tracked<S>)> {
        // NODELAY: responses (SSE above all) go out in several writes, and
        // Nagle's algorithm would hold the last one for the client's delayed ACK.
        stream.set_nodelay(true)?;
        let peer = stream.peer_addr()?.ip();
        let activity = Arc::new(Activity::default());
        let (ticket, refusal, idle) = match self.bounds.admit(peer, &activity) {
            Ok(ticket) => (Some(ticket), None, self.bounds.limits.idle),
            Err(refusal) => (None, Some(refusal), REFUSED_LINGER),
        };
        let vouch = ticket.as_ref().map(Ticket::vouch);
        let io = IdleClose {
            inner: stream,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
            activity: activity.clone(),
            _ticket: ticket,
        };
        Ok((
            io,
            Tracked {
                inner: service,
                activity,
                refusal,
                vouch,
            },
        ))
    }
}
/// Marks a request in flight until dropped (its response body finished).
struct InFlight(Arc<Activity>);

impl InFlight {
    fn start(activity: &Arc<Activity>) -> InFlight {
        activity.started();
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.ended();
    }
}

/// The connection's socket: reads end (EOF) once the connection has had no
/// request in flight for `idle`, which makes hyper close it.
pub struct IdleClose<T> {
    inner: T,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    activity: Arc<Activity>,
    _ticket: Option<Ticket>,
}

impl<T> IdleClose<T> {
    /// Whether the connection has been idle long enough; re-arms the timer
    /// otherwise, so it wakes the reader when the answer may change.
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.deadline.as_mut().poll(cx).is_pending() {
                return false;
            }
            let now = Instant::now();
            match self.activity.idle_at(self.idle) {
                Some(at) if at <= now => return true,
                Some(at) => self.deadline.as_mut().reset(at),
                None => self.deadline.as_mut().reset(now + self.idle),
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for IdleClose<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.activity.is_evicted(cx) {
            return Poll::Ready(Ok(())); // closed to make room
        }
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Pending if self.expired(cx) => Poll::Ready(Ok(())),
            other => other,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for IdleClose<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.activity.is_evicted(cx) {
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.activity.is_evicted(cx) {
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.activity.is_evicted(cx) {
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// The connection's service: counts requests in flight until their
/// response bodies end, and answers every request on a refused connection
/// with its refusal.
#[derive(Clone)]
pub struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
    refusal: Option<ApiError>,
    /// Put on each request, for a credential to vouch for the connection.
    vouch: Option<Vouch>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S> Service<Request<Incoming>> for Tracked<S>
where
    S: Service<Request<Incoming>, Response = Response<Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<Body>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Incoming>) -> Self::Future {
        if let Some(refusal) = &self.refusal {
            let mut response = refusal.clone().into_response();
            if request.version() < Version::HTTP_2 {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            return Box::pin(std::future::ready(Ok(response)));
        }
        // Once vouched for, a connection needs no more vouching.
        if let Some(vouch) = self.vouch.as_ref().filter(|_| !self.activity.is_vouched()) {
            request.extensions_mut().insert(vouch.clone());
        }
        let in_flight = InFlight::start(&self.activity);
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| {
                Body::new(HeldBody {
                    inner: body,
                    _in_flight: in_flight,
                })
            }))
        })
    }
}

/// A response body that keeps its request counted as in flight until it
/// ends or is dropped.
struct HeldBody {
    inner: Body,
    _in_flight: InFlight,
}

impl HttpBody for HeldBody {
    type Data = <Body as HttpBody>::Data;
    type Error = <Body as HttpBody>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
