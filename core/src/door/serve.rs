//! Serving a door's connections: HTTP/1.1 with a header deadline (slowloris), the client's
//! address handed to the router (the rate limit keys on it), graceful shutdown on `stop`.
//!
//! HTTP/1.1 only: kube-scheduler, kubelet probes, Prometheus and curl all speak it, and hyper's
//! HTTP/2 server has no deadline for a connection that never sends its preface.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

use super::{DoorMetrics, DoorName, Reason};

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
        let conn = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
        tokio::pin!(conn);
        let result = tokio::select! {
            r = conn.as_mut() => r,
            _ = stop.cancelled() => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        };
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
