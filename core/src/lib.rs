//! What Telemesh's agent, coordinator and simulator share.
//!
//! Pure logic lives here, apart from network plumbing: command-line groups every binary
//! flattens in ([`cli`]), logging set-up ([`telemetry`]), and, as the later issues land, CRD
//! types, policy evaluation, the reward model, the gossip state schema and wire messages.
//! This crate makes no Kubernetes API calls (it only builds the client, [`client`]); the
//! binaries do.

pub mod action;
pub mod backoff;
pub mod cli;
pub mod client;
#[cfg(test)]
mod crd_parity;
pub mod door;
pub mod extender;
pub mod fit;
pub mod go;
pub mod gossip;
pub mod metric;
pub mod pod;
pub mod policy;
pub mod process_metrics;
pub mod quic;
pub mod reload;
pub mod reward;
pub mod scavenge;
pub mod selector;
pub mod shutdown;
pub mod store_watch;
pub mod telemetry;
pub mod testing;
pub mod tls_reload;
pub mod watch_backoff;
pub mod wire;
