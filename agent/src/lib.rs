//! telemesh-agent: the per-node part of Telemesh. It samples its node (procfs, PSI, RDT,
//! cgroup v2 per pod), publishes what changed to the gossip mesh, serves per-pod figures to the
//! coordinator over QUIC, and exposes /metrics and health endpoints. It also enforces
//! TASPolicies on its own node: labels, policy status, and local eviction ([`enforcement`]), and
//! learns what the node does to each pod type ([`rewards`]).
//!
//! The binary is a thin `main`; everything runs from [`run`] so tests and the dev cluster can
//! start agents in-process.

pub mod collection;
pub mod config;
pub mod enforcement;
pub mod http;
pub mod metrics;
pub mod rewards;
pub mod run;
pub mod scavengers;
pub mod shared;
#[cfg(test)]
mod test_client;
pub mod watch;

pub use run::{Agent, start};
