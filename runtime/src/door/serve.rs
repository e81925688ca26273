//! Serving a door's connections: HTTP/1.1 with a header deadline (slowloris), the client's
//! address handed to the router (the rate limit keys on it), graceful shutdown on `stop`.
//!
//! HTTP/1.1 only: kube-scheduler, kubelet probes, Prometheus and curl all speak it, and hyper's
//! HTTP/2 server has no deadline for a connection that never sends its preface.
//!
//! Connections close with a *lingering close*, as nginx and Go's net/http do: a door that
//! refuses a body (413, 408) answers before the client has finished sending it. Closing the
//! socket then, with the client's bytes still arriving, makes the kernel send a reset, which
//! breaks the client's write and may discard the answer it has not read yet. So the server
//! sends its FIN first and reads and discards what still arrives, until the client closes or
//! [`LINGER`] has passed.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

use super::{DoorMetrics, DoorName, Reason};

/// Longest a closing connection keeps reading (and discarding) what its client still sends.
/// Enough for a refused extender body (96 MiB) on loopback or a LAN; a client slower than that
/// gets its reset.
pub const LINGER: Duration = Duration::from_secs(2);

/// Bytes of a closing connection read and discarded at most: four of the largest body any door
/// takes (96 MiB), so lingering costs bounded work whatever the client sends.
const LINGER_MAX_BYTES: u64 = (4 * 96) << 20;

/// How a listener's connections are served.
#[derive(Clone, Debug)]
pub struct Connections {
    /// The door header timeouts are counted against (the listener's main door).
    pub door: DoorName,
    /// Longest the headers of a request may take, counted from when the connection is ready
    /// for the next request (so it also closes idle kept-alive connections).
    pub header_timeout: Duration,
    /// Where header timeouts are counted.
    pub metrics: DoorMetrics,
}

// === impl Connections ===

impl Connections {
    /// Serves one accepted connection (plain TCP or TLS) from `peer` until the client closes
    /// it, a deadline passes, or `stop` (then the request in flight is finished).
    pub async fn serve_connection<I>(
        &self,
        io: I,
        peer: SocketAddr,
        router: Router,
        stop: CancellationToken,
    ) where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let service = router.map_request(move |mut request: http::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            request
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout);
        let mut conn =
            builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
        // `poll_without_shutdown` keeps the socket when hyper is done with it, for the lingering
        // close below.
        let result = tokio::select! {
            r = poll_fn(|cx| conn.poll_without_shutdown(cx)) => r,
            _ = stop.cancelled() => {
                std::pin::Pin::new(&mut conn).graceful_shutdown();
                poll_fn(|cx| conn.poll_without_shutdown(cx)).await
            }
        };
        if result.is_ok() {
            linger(conn.into_parts().io.into_inner(), &stop).await;
        }
        match result {
            Ok(()) => {}
            Err(e) if e.is_timeout() => {
                self.metrics.refused(self.door, Reason::HeaderTimeout);
                tracing::debug!(door = ?self.door, peer.addr = %peer, "headers did not arrive in time; connection closed");
            }
            Err(e) => {
                tracing::debug!(door = ?self.door, peer.addr = %peer, error = %e, "connection ended with an error");
            }
        }
    }
}

/// Closes `io` gracefully: sends FIN, then reads and discards until the client closes, up to
/// [`LINGER`] and [`LINGER_MAX_BYTES`] (or `stop`), so a client still sending reads our answer
/// instead of a reset.
async fn linger<I>(mut io: I, stop: &CancellationToken)
where
    I: AsyncRead + AsyncWrite + Unpin,
{
    if io.shutdown().await.is_err() {
        return;
    }
    let (mut rest, mut sink) = ((&mut io).take(LINGER_MAX_BYTES), tokio::io::sink());
    let discard = tokio::io::copy(&mut rest, &mut sink);
    tokio::select! {
        _ = tokio::time::timeout(LINGER, discard) => {}
        _ = stop.cancelled() => {}
    }
}

/// Serves `router` on `listener` over plain HTTP/1.1 until `stop`, each connection a task of
/// `tasks` (so shutdown waits for requests in flight).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    connections: Connections,
    stop: CancellationToken,
    tasks: TaskTracker,
) {
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (tcp, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(door = ?connections.door, error = %e, "accept failed");
                // Out of file descriptors and the like: do not spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (connections, router, stop) = (connections.clone(), router.clone(), stop.clone());
        tasks.spawn(async move {
            connections.serve_connection(tcp, peer, router, stop).await;
        });
    }
}
