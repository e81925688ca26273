//! The QUIC link between the coordinator (client) and one agent (server).
//!
//! quinn over rustls with the ring provider set explicitly, TLS 1.3 only, ALPN [`tls::ALPN`],
//! mutual TLS against one CA ([`tls`]). Each bidirectional stream carries one request frame and
//! one response frame ([`telemesh_core::wire`]); a connection carries many streams at once. Both sides
//! send keep-alives every [`KEEP_ALIVE`], well below the [`IDLE_TIMEOUT`].
//!
//! With TLS 1.3 a server that rejects the client's certificate does so after the client
//! considers the handshake done, so [`QuicClient::connect`] pings before handing out a
//! [`Connection`]: a rejected certificate surfaces there, not on some later request.

pub mod client;
pub mod server;
pub mod tls;

pub use client::{Connection, PeerInfo, QuicClient};
pub use server::{Handler, HandlerFuture, QuicServer};
pub use tls::{DevCa, TlsError, TlsFiles};

use std::error::Error as StdError;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use quinn::{IdleTimeout, RecvStream, SendStream, TransportConfig, VarInt};

use telemesh_core::wire::{self, HEADER_LEN, WireError};

/// A connection with no packets for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Each side pings at this interval so an idle but healthy connection stays open.
pub const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// The largest request frame a server reads: requests are tiny, and a peer should not make the
/// server allocate the full [`wire::MAX_FRAME_LEN`] on each of its streams.
pub const MAX_REQUEST_LEN: u32 = 64 * 1024;

// Keep-alives must come well within the idle timeout, and requests stay below the frame cap.
const _: () = assert!(KEEP_ALIVE.as_millis() * 2 < IDLE_TIMEOUT.as_millis());
const _: () = assert!(MAX_REQUEST_LEN < wire::MAX_FRAME_LEN);

/// Application close code for an orderly close (shutdown, client dropped).
const CLOSE_OK: VarInt = VarInt::from_u32(0);

/// What can fail on the link.
#[derive(Debug, thiserror::Error)]
pub enum QuicError {
    /// The certificates or keys could not be loaded.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The rustls configuration cannot drive QUIC.
    #[error("the TLS configuration cannot be used for QUIC ({0}); it needs TLS 1.3")]
    NotQuicCapable(String),
    /// The UDP socket could not be bound.
    #[error("cannot bind a UDP socket on {addr}: {source}")]
    Bind {
        /// Requested address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// quinn refused to start a connection (bad server name, endpoint closing).
    #[error("cannot connect to {addr} as {server_name:?}: {source}")]
    Connect {
        /// Peer address.
        addr: SocketAddr,
        /// Name the server certificate must carry.
        server_name: String,
        /// quinn's reason.
        source: quinn::ConnectError,
    },
    /// The connection or a stream failed: handshake, certificate rejection, peer gone.
    /// Its message already holds the whole chain of causes, so `cause` is not a `source()`.
    #[error("{addr}: {during}: {}", chain(cause.as_ref()))]
    Link {
        /// Peer address.
        addr: SocketAddr,
        /// What was being done.
        during: &'static str,
        /// The transport error.
        cause: Box<dyn StdError + Send + Sync>,
    },
    /// No answer in time.
    #[error("{addr}: no answer within {timeout:?} ({during})")]
    Timeout {
        /// Peer address.
        addr: SocketAddr,
        /// What was being done.
        during: &'static str,
        /// The limit.
        timeout: Duration,
    },
    /// The peer sent a frame that does not decode, or a message could not be encoded.
    #[error("{addr}: {source}")]
    Wire {
        /// Peer address.
        addr: SocketAddr,
        /// What was wrong.
        source: WireError,
    },
    /// The peer answered, but not what was asked.
    #[error("{addr}: expected {expected}, got {got}")]
    UnexpectedResponse {
        /// Peer address.
        addr: SocketAddr,
        /// What the request called for.
        expected: &'static str,
        /// What came, with an error message if it was one.
        got: String,
    },
}

impl QuicError {
    fn link(
        addr: SocketAddr,
        during: &'static str,
        e: impl StdError + Send + Sync + 'static,
    ) -> Self {
        Self::Link {
            addr,
            during,
            cause: Box::new(e),
        }
    }
}

/// An error and its sources, joined with ": " (quinn's "connection lost" hides the reason in
/// its source).
fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        let text = s.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = s.source();
    }
    out
}

/// The transport settings both sides use: idle timeout, keep-alive, no unidirectional streams.
fn transport_config() -> Arc<TransportConfig> {
    let mut t = TransportConfig::default();
    t.max_idle_timeout(Some(IdleTimeout::from(VarInt::from_u32(
        u32::try_from(IDLE_TIMEOUT.as_millis()).unwrap_or(u32::MAX),
    ))))
    .keep_alive_interval(Some(KEEP_ALIVE))
    .max_concurrent_uni_streams(VarInt::from_u32(0));
    Arc::new(t)
}

/// Why a frame could not be read from a stream.
#[derive(Debug)]
enum ReadFrameError {
    /// The bytes arrived but are not an acceptable frame (too large, empty, cut short by the
    /// peer finishing its side): worth an answer.
    Wire(WireError),
    /// The stream or connection broke.
    Stream(quinn::ReadExactError),
}

/// Reads one frame's payload (version byte and body) from `recv`, checking the header against
/// `max` before allocating.
async fn read_frame(recv: &mut RecvStream, max: u32) -> Result<Vec<u8>, ReadFrameError> {
    let mut header = [0u8; HEADER_LEN];
    recv.read_exact(&mut header)
        .await
        .map_err(|e| truncated_or_stream(e, 0, HEADER_LEN))?;
    let len = wire::frame_len(header, max).map_err(ReadFrameError::Wire)?;
    let mut payload = vec![0u8; len];
    recv.read_exact(&mut payload)
        .await
        .map_err(|e| truncated_or_stream(e, HEADER_LEN, HEADER_LEN + len))?;
    Ok(payload)
}

fn truncated_or_stream(e: quinn::ReadExactError, before: usize, needed: usize) -> ReadFrameError {
    match e {
        quinn::ReadExactError::FinishedEarly(got) => ReadFrameError::Wire(WireError::Truncated {
            needed,
            got: before + got,
        }),
        other => ReadFrameError::Stream(other),
    }
}

/// Writes a whole frame and finishes the stream.
async fn write_frame(send: &mut SendStream, frame: &[u8]) -> Result<(), quinn::WriteError> {
    send.write_all(frame).await?;
    // Only fails if the stream was already finished or reset, which write_all would have
    // reported.
    let _ = send.finish();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_joins_sources_once() {
        let inner = std::io::Error::other("peer sent no certificates");
        let outer = QuicError::link(
            "127.0.0.1:1".parse().expect("addr"),
            "ping",
            quinn::ReadExactError::ReadError(quinn::ReadError::ClosedStream),
        );
        assert_eq!(outer.to_string(), "127.0.0.1:1: ping: closed stream");
        let e = QuicError::link("127.0.0.1:1".parse().expect("addr"), "ping", inner);
        assert_eq!(
            e.to_string(),
            "127.0.0.1:1: ping: peer sent no certificates"
        );
    }
}
