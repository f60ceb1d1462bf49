//! Serving connections under limits (`axum::serve` has no knobs for them): hyper's HTTP/1 server, one
//! task per connection, with
//!
//! - a header timeout: a request's head must arrive whole within it of its first byte;
//! - an idle timeout: a connection with no request in flight (a new one, or one kept alive after its
//!   last answer) is closed once it has sent nothing for that long;
//! - a body timeout: a request's body must arrive whole within it of its head (a `408` otherwise);
//! - a maximum number of connections: past it, no new connection is accepted until one closes (they
//!   wait in the system's backlog);
//! - a `413` at once, before any of the body is read, for a declared `Content-Length` over the body limit;
//! - `Connection: close` on an answer given before its request's body was read to the end (a refused
//!   credential, an unknown route): hyper closes such a connection once the answer is out, and a client
//!   told so beforehand does not send its next request on a connection about to close.
//!
//! On shutdown, the listener closes and every connection ends once its requests in flight have.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tower::ServiceExt as _;

/// The limits of connections.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnLimits {
    pub(crate) header_timeout: Duration,
    pub(crate) idle_timeout: Duration,
    pub(crate) body_timeout: Duration,
    pub(crate) max_connections: usize,
    pub(crate) body_bytes: usize,
    /// The listen backlog [`crate::Server::serve`] asks for.
    pub(crate) backlog: u32,
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets the connections end their requests
/// in flight and returns once all have closed (the caller bounds that with its grace).
pub(crate) async fn serve<F>(listener: TcpListener, router: Router, limits: ConnLimits, shutdown: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of file descriptors and the like: wait a little rather than spin.
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        tune(&tcp);
        let (router, stop) = (router.clone(), stop_rx.clone());
        tokio::spawn(async move {
            connection(tcp, router, limits, stop).await;
            drop(permit);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    // Every connection closed: all their permits back.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = slots.acquire_many(all).await;
}

/// How many bytes a connection's socket may hold that the network has not taken yet (`TCP_NOTSENT_LOWAT`,
/// Linux): a client that stops reading then costs the kernel this much on top of what is in flight,
/// instead of the send buffer the kernel grows up to `tcp_wmem`'s maximum (4 MiB by default), and its
/// stream falls behind, and is cut, that much sooner. What is in flight (the window) is untouched, so a
/// client that reads loses no throughput.
const UNSENT_BYTES: u32 = 128 * 1024;

/// How many bytes the HTTP layer buffers per connection, each way (hyper's default is about 400 KiB): what
/// an answer's body has produced and the socket has not taken yet, and a request's head (one larger gets
/// `431`).
const HTTP_BUFFER_BYTES: usize = 64 * 1024;

/// Sets an accepted connection's options: no Nagle delay (events go out as they come), and at most
/// [`UNSENT_BYTES`] unsent.
fn tune(tcp: &TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if let Err(e) = socket2::SockRef::from(tcp).set_tcp_notsent_lowat(UNSENT_BYTES) {
        tracing::debug!(error = %e, "cannot set TCP_NOTSENT_LOWAT");
    }
}

/// What a connection's watchdog reads: requests in flight, and when the connection last became free
/// and last received bytes.
#[derive(Debug)]
struct Activity {
    started: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds since `started` at which the connection last became free (no request in flight).
    free_since: AtomicU64,
    /// Milliseconds since `started` of the first byte received since then (`u64::MAX`: none).
    head_from: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            started: Instant::now(),
            in_flight: AtomicUsize::new(0),
            free_since: AtomicU64::new(0),
            head_from: AtomicU64::new(u64::MAX),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
    }

    /// Bytes arrived.
    fn received(&self) {
        if self.in_flight.load(Ordering::SeqCst) == 0 {
            let now = self.now();
            let _ = self.head_from.compare_exchange(u64::MAX, now, Ordering::SeqCst, Ordering::SeqCst);
        }
    }

    fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
    }

    fn request_ended(&self) {
        if self.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.head_from.store(u64::MAX, Ordering::SeqCst);
            self.free_since.store(self.now(), Ordering::SeqCst);
        }
    }

    /// Why the connection is to be closed now, if it is.
    fn expired(&self, limits: &ConnLimits) -> Option<&'static str> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let now = self.now();
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        match self.head_from.load(Ordering::SeqCst) {
            u64::MAX => {
                let free = self.free_since.load(Ordering::SeqCst);
                (now.saturating_sub(free) >= millis(limits.idle_timeout)).then_some("idle")
            }
            from => (now.saturating_sub(from) >= millis(limits.header_timeout)).then_some("header"),
        }
    }
}

/// Serves one connection until it ends, a limit closes it, or a shutdown lets it finish its requests.
async fn connection(tcp: TcpStream, router: Router, limits: ConnLimits, mut stop: watch::Receiver<bool>) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched { inner: tcp, activity: Arc::clone(&activity) });
    let service_activity = Arc::clone(&activity);
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let (router, activity) = (router.clone(), Arc::clone(&service_activity));
        async move { Ok::<_, std::convert::Infallible>(answer(router, activity, limits, request).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The header and idle timeouts are this module's (hyper's own would also close idle connections).
    builder.timer(TokioTimer::new()).header_read_timeout(None).max_buf_size(HTTP_BUFFER_BYTES);
    // With upgrades: the protocol's WebSocket (`/threads/{id}/stream/events`) takes the connection over.
    let conn = builder.serve_connection(io, service).with_upgrades();
    tokio::pin!(conn);
    let tick = (limits.header_timeout.min(limits.idle_timeout) / 4).max(Duration::from_millis(10));
    let mut watchdog = tokio::time::interval(tick);
    watchdog.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "a connection ended with an error");
                }
                return;
            }
            changed = stop.changed(), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
            _ = watchdog.tick() => {
                if let Some(why) = activity.expired(&limits) {
                    tracing::debug!(timeout = why, "closing a connection");
                    return;
                }
            }
        }
    }
}

/// One request: a `413` at once for a declared body over the limit, else the router's answer, the
/// request's body under the body timeout, the request in flight until its answer's body is dropped.
async fn answer(
    router: Router,
    activity: Arc<Activity>,
    limits: ConnLimits,
    request: Request<Incoming>,
) -> Response<Body> {
    activity.request_started();
    let guard = InFlight(Arc::clone(&activity));
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > u64::try_from(limits.body_bytes).unwrap_or(u64::MAX)) {
        let detail = format!("Request body too large (limit: {} bytes)", limits.body_bytes);
        let mut response = Response::new(Body::new(Tracked {
            inner: Body::from(serde_json::json!({ "detail": detail }).to_string()),
            _guard: guard,
        }));
        *response.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        // The body is never read: the connection cannot carry another request.
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        return response;
    }
    let ended = Arc::new(AtomicBool::new(hyper::body::Body::is_end_stream(request.body())));
    let body_ended = Arc::clone(&ended);
    let request = request.map(|body| Body::new(Timed::new(body, limits.body_timeout, body_ended)));
    let mut response = match router.oneshot(request).await {
        Ok(response) => response.map(|body| Body::new(Tracked { inner: body, _guard: guard })),
        Err(never) => match never {},
    };
    if !ended.load(Ordering::SeqCst) && response.status() != StatusCode::SWITCHING_PROTOCOLS {
        // hyper reads on to the body's end only when it has already arrived, and closes the connection
        // otherwise, perhaps after the answer went out as if the connection were kept alive.
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// Counts a request in flight until dropped.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}

/// An answer's body, its request in flight until the body is done with.
struct Tracked {
    inner: Body,
    _guard: InFlight,
}

impl hyper::body::Body for Tracked {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request body that must arrive whole within its timeout, noting when it has been read to its end.
struct Timed {
    inner: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    timeout: Duration,
    ended: Arc<AtomicBool>,
}

impl Timed {
    fn new(inner: Incoming, timeout: Duration, ended: Arc<AtomicBool>) -> Self {
        Self { inner, deadline: Box::pin(tokio::time::sleep(timeout)), timeout, ended }
    }
}

/// A request body that did not arrive within the body timeout (read as a `408`).
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub(crate) struct BodyTimeout(Duration);

impl hyper::body::Body for Timed {
    type Data = axum::body::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            if frame.is_none() || self.inner.is_end_stream() {
                self.ended.store(true, Ordering::SeqCst);
            }
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout(self.timeout))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether a body read failed on the body timeout.
pub(crate) fn is_body_timeout(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(e) = source {
        if e.is::<BodyTimeout>() {
            return true;
        }
        source = e.source();
    }
    false
}

/// The connection's socket, noting when bytes arrive.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.received();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use tokio::io::AsyncWriteExt as _;

    use super::{ConnLimits, serve};

    fn limits() -> ConnLimits {
        let timeout = Duration::from_secs(10);
        let (header_timeout, idle_timeout, body_timeout) = (timeout, timeout, timeout);
        ConnLimits {
            header_timeout,
            idle_timeout,
            body_timeout,
            max_connections: 4,
            body_bytes: 1024,
            backlog: 16,
        }
    }

    /// Serves a body of endless 16 KiB chunks to a client (receive buffer 16 KiB) that never reads it;
    /// returns how many bytes the body had handed over once it stalled (nothing more taken for 500 ms).
    async fn taken_by_a_client_that_does_not_read() -> usize {
        let produced = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&produced);
        let router = Router::new().route(
            "/flood",
            get(move || {
                let counter = Arc::clone(&counter);
                async move {
                    let chunks = futures::stream::repeat_with(move || {
                        counter.fetch_add(16 * 1024, Ordering::SeqCst);
                        Ok::<_, std::io::Error>(vec![b'x'; 16 * 1024])
                    });
                    Body::from_stream(chunks)
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, router, limits(), async move {
            let _ = stopped.await;
        }));
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(16 * 1024).unwrap();
        let mut client = socket.connect(addr).await.unwrap();
        client.write_all(b"GET /flood HTTP/1.1\r\nHost: test\r\n\r\n").await.unwrap();
        let mut last = 0;
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let now = produced.load(Ordering::SeqCst);
            if now == last && now > 0 {
                break;
            }
            last = now;
        }
        drop(client);
        let _ = stop.send(());
        let _ = server.await;
        last
    }

    /// A client that stops reading holds the connection's unsent bytes to [`super::UNSENT_BYTES`] and the
    /// HTTP layer's buffer to [`super::HTTP_BUFFER_BYTES`]: the body stalls after about 224 KiB, not after
    /// the 3.5 MiB it took with neither (a send buffer the kernel grew, hyper's 400 KiB).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_client_that_does_not_read_holds_little_in_the_kernel() {
        let taken = taken_by_a_client_that_does_not_read().await;
        assert!(taken < 1024 * 1024, "{} KiB taken by a client that reads nothing", taken / 1024);
    }

    /// A request head that outgrows the HTTP layer's buffer before it ends gets `431`; one of 40 KiB is
    /// served. (Each is sent in 4 KiB pieces, as a slow client's: a head that arrives whole in one read
    /// is parsed before the buffer's size is checked.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_head_over_the_buffer_gets_431() {
        use tokio::io::AsyncReadExt as _;
        let router = Router::new().route("/", get(|| async { "ok" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(serve(listener, router, limits(), std::future::pending()));
        for (size, expected) in
            [(40 * 1024, "HTTP/1.1 200"), (super::HTTP_BUFFER_BYTES + 4096, "HTTP/1.1 431")]
        {
            let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
            let head = format!(
                "GET / HTTP/1.1\r\nHost: test\r\nX-Big: {}\r\nConnection: close\r\n\r\n",
                "a".repeat(size)
            );
            for piece in head.as_bytes().chunks(4096) {
                if client.write_all(piece).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            let mut answer = Vec::new();
            let _ = client.read_to_end(&mut answer).await;
            let answer = String::from_utf8_lossy(&answer);
            assert!(answer.starts_with(expected), "a {size}-byte header: {answer}");
        }
        server.abort();
    }
}
