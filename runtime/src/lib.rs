//! The plumbing Telemesh's binaries share, apart from the decisions in `telemesh-core`: the
//! gossip member and its sealed transport ([`gossip`]), command-line groups every binary
//! flattens in ([`cli`]), logging set-up ([`telemetry`]), the kube client ([`client`]) and its
//! watch backoff, the HTTP door in front of every listener ([`door`]), the QUIC transport
//! ([`quic`]), file and TLS reload, shutdown, process metrics, and test helpers that need tokio
//! ([`testing`]).

pub mod backoff;
pub mod cli;
pub mod client;
pub mod door;
pub mod gossip;
pub mod process_metrics;
pub mod quic;
pub mod reload;
pub mod shutdown;
pub mod store_watch;
pub mod telemetry;
#[cfg(any(test, feature = "testsuite"))]
pub mod testing;
pub mod tls_reload;
pub mod watch_backoff;
