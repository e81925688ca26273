//! The plumbing Telemesh's binaries share, apart from the decisions in `telemesh-core`:
//! command-line groups every binary flattens in ([`cli`]), logging set-up ([`telemetry`]), the
//! kube client ([`client`]) and its watch backoff, the HTTP door in front of every listener
//! ([`door`]), the QUIC transport ([`quic`]), TLS and file reload, shutdown and process metrics.

pub mod backoff;
pub mod cli;
pub mod client;
pub mod door;
pub mod process_metrics;
pub mod quic;
pub mod shutdown;
pub mod store_watch;
pub mod telemetry;
pub mod tls_reload;
pub mod watch_backoff;
