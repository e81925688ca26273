//! The coordinator's side of the link: one connection per agent, reused, checked with a ping.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use quinn::Endpoint;
use quinn::crypto::rustls::QuicClientConfig;
use tracing::debug;

use super::{
    CLOSE_OK, QuicError, ReadFrameError, read_frame, server::SHUTDOWN_GRACE, transport_config,
    write_frame,
};
use telemesh_core::wire::{self, MAX_FRAME_LEN, Message, Request, Response};

/// Default limit for connecting (handshake and ping) and for each request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Who answered the ping that opened a [`Connection`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerInfo {
    /// The node the agent says it runs on.
    pub node_name: String,
    /// The agent's build version.
    pub agent_version: String,
}

/// An open, ping-checked connection to one agent. Cheap to clone; clones share the connection,
/// and requests on it run concurrently, each on its own stream.
#[derive(Debug, Clone)]
pub struct Connection {
    inner: quinn::Connection,
    peer: Arc<PeerInfo>,
    timeout: Duration,
}

impl Connection {
    /// Sends `request` on a new stream and returns the answer, within the client's timeout. A
    /// [`Response::Error`] from the agent is returned as a response, not as an `Err`.
    pub async fn request(&self, request: &Request) -> Result<Response, QuicError> {
        let addr = self.inner.remote_address();
        tokio::time::timeout(self.timeout, exchange(&self.inner, request))
            .await
            .map_err(|_| QuicError::Timeout {
                addr,
                during: request.kind(),
                timeout: self.timeout,
            })?
    }

    /// The agent that answered the opening ping.
    pub fn peer(&self) -> &PeerInfo {
        &self.peer
    }

    /// The agent's address.
    pub fn remote_address(&self) -> SocketAddr {
        self.inner.remote_address()
    }

    /// The SHA-256 fingerprint ([`super::tls::fingerprint`]) of the certificate the agent
    /// presented on this connection.
    pub fn peer_fingerprint(&self) -> Option<String> {
        let certs = self
            .inner
            .peer_identity()?
            .downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
            .ok()?;
        certs.first().map(super::tls::fingerprint)
    }

    /// Whether the connection has ended (closed by either side, timed out, or lost).
    pub fn is_closed(&self) -> bool {
        self.inner.close_reason().is_some()
    }

    /// quinn's id for the connection, stable for its lifetime: equal ids mean the same
    /// connection.
    pub fn stable_id(&self) -> usize {
        self.inner.stable_id()
    }

    /// Closes the connection for every clone.
    pub fn close(&self) {
        self.inner.close(CLOSE_OK, b"closed by client");
    }
}

/// Connects to agents and keeps one connection per agent address and server name.
pub struct QuicClient {
    endpoint: Endpoint,
    timeout: Duration,
    next_nonce: AtomicU64,
    connections: Mutex<HashMap<(SocketAddr, String), Connection>>,
}

impl std::fmt::Debug for QuicClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicClient")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl QuicClient {
    /// A client on an ephemeral IPv4 port (`0.0.0.0:0`) with `tls` from
    /// [`super::tls::client_config`]. Must be called inside a tokio runtime.
    pub fn new(tls: Arc<rustls::ClientConfig>) -> Result<Self, QuicError> {
        Self::bind(tls, SocketAddr::from(([0, 0, 0, 0], 0)))
    }

    /// A client on `local` (for IPv6 agents, `[::]:0`; in tests, `127.0.0.1:0`).
    pub fn bind(tls: Arc<rustls::ClientConfig>, local: SocketAddr) -> Result<Self, QuicError> {
        let crypto = QuicClientConfig::try_from(tls)
            .map_err(|e| QuicError::NotQuicCapable(e.to_string()))?;
        let mut config = quinn::ClientConfig::new(Arc::new(crypto));
        config.transport_config(transport_config());
        let mut endpoint = Endpoint::client(local).map_err(|source| QuicError::Bind {
            addr: local,
            source,
        })?;
        endpoint.set_default_client_config(config);
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Ok(Self {
            endpoint,
            timeout: REQUEST_TIMEOUT,
            next_nonce: AtomicU64::new(seed),
            connections: Mutex::new(HashMap::new()),
        })
    }

    /// Sets the limit for connecting and for each request (default [`REQUEST_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The connection to the agent at `addr` whose certificate carries `server_name`: the open
    /// one if there is one, else a new one, checked with a [`Request::Ping`] before it is
    /// returned (a server that rejects this client's certificate shows it here).
    pub async fn connect(
        &self,
        addr: SocketAddr,
        server_name: &str,
    ) -> Result<Connection, QuicError> {
        if let Some(conn) = self.cached(addr, server_name) {
            return Ok(conn);
        }
        self.connect_new(addr, server_name).await
    }

    /// Sends `request` to the agent at `addr` over its reused connection. If a reused
    /// connection turns out to have died, reconnects and sends once more (both requests are
    /// idempotent reads).
    pub async fn request(
        &self,
        addr: SocketAddr,
        server_name: &str,
        request: &Request,
    ) -> Result<Response, QuicError> {
        let (conn, reused) = match self.cached(addr, server_name) {
            Some(conn) => (conn, true),
            None => (self.connect_new(addr, server_name).await?, false),
        };
        match conn.request(request).await {
            Err(e) if conn.is_closed() => {
                self.forget(addr, server_name, &conn);
                if !reused {
                    return Err(e);
                }
                debug!(%addr, error = %e, "reused QUIC connection had died; reconnecting");
                self.connect_new(addr, server_name)
                    .await?
                    .request(request)
                    .await
            }
            other => other,
        }
    }

    /// Closes every connection and waits (briefly) for the agents to be told.
    pub async fn close(&self) {
        let connections: Vec<Connection> = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .map(|(_, c)| c)
            .collect();
        for conn in connections {
            conn.close();
        }
        self.endpoint.close(CLOSE_OK, b"client closing");
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, self.endpoint.wait_idle()).await;
    }

    fn cached(&self, addr: SocketAddr, server_name: &str) -> Option<Connection> {
        let mut map = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let key = (addr, server_name.to_owned());
        match map.get(&key) {
            Some(conn) if !conn.is_closed() => Some(conn.clone()),
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }

    fn forget(&self, addr: SocketAddr, server_name: &str, conn: &Connection) {
        let mut map = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let key = (addr, server_name.to_owned());
        if map
            .get(&key)
            .is_some_and(|c| c.stable_id() == conn.stable_id())
        {
            map.remove(&key);
        }
    }

    async fn connect_new(
        &self,
        addr: SocketAddr,
        server_name: &str,
    ) -> Result<Connection, QuicError> {
        let connecting =
            self.endpoint
                .connect(addr, server_name)
                .map_err(|source| QuicError::Connect {
                    addr,
                    server_name: server_name.to_owned(),
                    source,
                })?;
        let nonce = self.next_nonce.fetch_add(1, Ordering::Relaxed);
        let handshake_and_ping = async {
            let inner = connecting
                .await
                .map_err(|e| QuicError::link(addr, "TLS handshake", e))?;
            match exchange(&inner, &Request::Ping { nonce }).await {
                Ok(Response::Pong {
                    nonce: echoed,
                    node_name,
                    agent_version,
                }) if echoed == nonce => Ok(Connection {
                    inner,
                    peer: Arc::new(PeerInfo {
                        node_name,
                        agent_version,
                    }),
                    timeout: self.timeout,
                }),
                Ok(other) => {
                    inner.close(CLOSE_OK, b"unexpected answer to ping");
                    Err(QuicError::UnexpectedResponse {
                        addr,
                        expected: "Pong with the ping's nonce",
                        got: describe(&other),
                    })
                }
                Err(e) => {
                    inner.close(CLOSE_OK, b"ping failed");
                    // Where a server's rejection of our certificate shows (TLS 1.3).
                    Err(match e {
                        QuicError::Link { addr, cause, .. } => QuicError::Link {
                            addr,
                            during: "first request after the handshake",
                            cause,
                        },
                        other => other,
                    })
                }
            }
        };
        let conn = tokio::time::timeout(self.timeout, handshake_and_ping)
            .await
            .map_err(|_| QuicError::Timeout {
                addr,
                during: "connecting",
                timeout: self.timeout,
            })??;
        debug!(%addr, node = %conn.peer.node_name, version = %conn.peer.agent_version, "QUIC connection up");
        let replaced = self
            .connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((addr, server_name.to_owned()), conn.clone());
        // Two callers raced to connect: keep the newer connection, close the other.
        if let Some(old) = replaced {
            old.close();
        }
        Ok(conn)
    }
}

fn describe(response: &Response) -> String {
    match response {
        Response::Pong { nonce, .. } => format!("Pong with nonce {nonce}"),
        Response::Error { message } => format!("Error: {message}"),
        other => other.kind().to_owned(),
    }
}

/// One request and its response, on a new stream.
async fn exchange(conn: &quinn::Connection, request: &Request) -> Result<Response, QuicError> {
    let addr = conn.remote_address();
    let frame = request
        .encode()
        .map_err(|source| QuicError::Wire { addr, source })?;
    let (mut send, mut recv) = conn
        .open_bi()
        .await
        .map_err(|e| QuicError::link(addr, "opening a stream", e))?;
    write_frame(&mut send, &frame)
        .await
        .map_err(|e| QuicError::link(addr, "sending a request", e))?;
    let payload = read_frame(&mut recv, MAX_FRAME_LEN)
        .await
        .map_err(|e| match e {
            ReadFrameError::Wire(source) => QuicError::Wire { addr, source },
            ReadFrameError::Stream(e) => QuicError::link(addr, "reading the response", e),
        })?;
    wire::decode_payload::<Response>(&payload).map_err(|source| QuicError::Wire { addr, source })
}
