//! The agent's side of the link: accepts connections, answers one request per stream.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use quinn::crypto::rustls::QuicServerConfig;
use quinn::{Endpoint, Incoming, RecvStream, SendStream};
use rustls::pki_types::CertificateDer;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use super::{
    CLOSE_OK, MAX_REQUEST_LEN, QuicError, ReadFrameError, read_frame, tls, transport_config,
    write_frame,
};
use telemesh_core::wire::{self, Message, Request, Response};

/// How long one stream may take, from accepting it to the response being acknowledged.
pub const STREAM_TIMEOUT: Duration = Duration::from_secs(10);

/// How long shutdown waits for requests in flight before closing connections regardless.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What [`Handler::pod_telemetry`] returns: a boxed future, so the trait stays object-safe.
pub type HandlerFuture<'a> = Pin<Box<dyn Future<Output = Response> + Send + 'a>>;

/// Answers requests. The agent implements it over figures it already holds in memory.
pub trait Handler: Send + Sync + 'static {
    /// Answers [`Request::Ping`]: a [`Response::Pong`] echoing `nonce`, with the node name and
    /// agent version.
    fn ping(&self, nonce: u64) -> Response;

    /// Answers [`Request::PodTelemetry`]: a [`Response::PodTelemetry`], or a
    /// [`Response::Error`] if there is nothing to give yet.
    fn pod_telemetry(&self) -> HandlerFuture<'_>;
}

/// A bound QUIC endpoint that serves a [`Handler`] once [`run`](Self::run) is awaited.
pub struct QuicServer {
    endpoint: Endpoint,
    local_addr: SocketAddr,
    handler: Arc<dyn Handler>,
}

impl std::fmt::Debug for QuicServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicServer")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl QuicServer {
    /// Binds `addr` (port 0 picks one; see [`local_addr`](Self::local_addr)) with `tls` from
    /// [`tls::server_config`]. Must be called inside a tokio runtime.
    pub fn bind(
        addr: SocketAddr,
        tls: Arc<rustls::ServerConfig>,
        handler: Arc<dyn Handler>,
    ) -> Result<Self, QuicError> {
        let crypto = QuicServerConfig::try_from(tls)
            .map_err(|e| QuicError::NotQuicCapable(e.to_string()))?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        config.transport_config(transport_config());
        let endpoint =
            Endpoint::server(config, addr).map_err(|source| QuicError::Bind { addr, source })?;
        let local_addr = endpoint
            .local_addr()
            .map_err(|source| QuicError::Bind { addr, source })?;
        Ok(Self {
            endpoint,
            local_addr,
            handler,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves until `shutdown` is cancelled, then stops accepting, lets requests in flight
    /// finish (up to [`SHUTDOWN_GRACE`]), closes every connection and returns.
    pub async fn run(self, shutdown: CancellationToken) {
        info!(addr = %self.local_addr, "QUIC server listening");
        let connections = TaskTracker::new();
        loop {
            let incoming = tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                incoming = self.endpoint.accept() => match incoming {
                    Some(incoming) => incoming,
                    None => break,
                },
            };
            connections.spawn(serve_connection(
                incoming,
                self.handler.clone(),
                shutdown.clone(),
            ));
        }
        // Refuse new handshakes while the streams in flight finish.
        self.endpoint.set_server_config(None);
        connections.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, connections.wait())
            .await
            .is_err()
        {
            warn!(
                "QUIC requests still running after {SHUTDOWN_GRACE:?}; closing their connections"
            );
        }
        self.endpoint.close(CLOSE_OK, b"shutting down");
        // Lets the close frames go out; peers otherwise notice only at their idle timeout.
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, self.endpoint.wait_idle()).await;
        info!(addr = %self.local_addr, "QUIC server stopped");
    }
}

async fn serve_connection(
    incoming: Incoming,
    handler: Arc<dyn Handler>,
    shutdown: CancellationToken,
) {
    let remote = incoming.remote_address();
    let conn = tokio::select! {
        () = shutdown.cancelled() => return,
        conn = std::future::IntoFuture::into_future(incoming) => match conn {
            Ok(conn) => conn,
            Err(e) => {
                // A client whose certificate we reject ends here.
                debug!(%remote, error = %e, "QUIC handshake failed");
                return;
            }
        },
    };
    debug!(%remote, peer = %peer_identity(&conn), "QUIC connection accepted");
    let streams = TaskTracker::new();
    loop {
        let (send, recv) = tokio::select! {
            () = shutdown.cancelled() => break,
            stream = conn.accept_bi() => match stream {
                Ok(stream) => stream,
                Err(e) => {
                    debug!(%remote, reason = %e, "QUIC connection ended");
                    break;
                }
            },
        };
        let handler = handler.clone();
        streams.spawn(async move {
            if tokio::time::timeout(STREAM_TIMEOUT, serve_stream(send, recv, handler, remote))
                .await
                .is_err()
            {
                debug!(%remote, "QUIC stream took longer than {STREAM_TIMEOUT:?}; dropped");
            }
        });
    }
    streams.close();
    streams.wait().await;
    conn.close(CLOSE_OK, b"shutting down");
}

/// Reads one request, answers it, and waits until the peer has the whole answer (so closing the
/// connection right after cannot cut it off).
async fn serve_stream(
    mut send: SendStream,
    mut recv: RecvStream,
    handler: Arc<dyn Handler>,
    remote: SocketAddr,
) {
    let response = match read_frame(&mut recv, MAX_REQUEST_LEN).await {
        Ok(payload) => match wire::decode_payload::<Request>(&payload) {
            Ok(Request::Ping { nonce }) => handler.ping(nonce),
            Ok(Request::PodTelemetry) => handler.pod_telemetry().await,
            Err(e) => refuse(remote, &e),
        },
        Err(ReadFrameError::Wire(e)) => {
            // Tell the peer to stop sending the rest of an oversized frame.
            let _ = recv.stop(CLOSE_OK);
            refuse(remote, &e)
        }
        Err(ReadFrameError::Stream(e)) => {
            debug!(%remote, error = %e, "QUIC stream broke before a request arrived");
            return;
        }
    };
    let frame = match response.encode() {
        Ok(frame) => frame,
        Err(e) => {
            warn!(%remote, error = %e, "cannot encode a QUIC response");
            match (Response::Error {
                message: format!("the agent could not encode its answer: {e}"),
            })
            .encode()
            {
                Ok(frame) => frame,
                Err(_) => return,
            }
        }
    };
    if let Err(e) = write_frame(&mut send, &frame).await {
        debug!(%remote, error = %e, "QUIC response not delivered");
        return;
    }
    let _ = send.stopped().await;
}

fn refuse(remote: SocketAddr, e: &wire::WireError) -> Response {
    debug!(%remote, error = %e, "bad QUIC request");
    Response::Error {
        message: format!("bad request: {e}"),
    }
}

/// The client certificate's fingerprint, for logs.
fn peer_identity(conn: &quinn::Connection) -> String {
    let chain = conn
        .peer_identity()
        .and_then(|id| id.downcast::<Vec<CertificateDer<'static>>>().ok());
    match chain.as_deref().and_then(|c| c.first()) {
        Some(leaf) => format!("certificate sha256:{}", tls::fingerprint(leaf)),
        None => "no certificate".to_owned(),
    }
}
