//! telemesh-agent: the per-node part of Telemesh. It samples its node (procfs, PSI, RDT,
//! cgroup v2 per pod), publishes what changed to the gossip mesh, serves per-pod figures to the
//! coordinator over QUIC, and exposes /metrics and health endpoints. It also enforces
//! TASPolicies on its own node: labels, policy status, and local eviction ([`enforcer`]), and
//! learns what the node does to each pod type ([`rewards`]).
//!
//! The binary is a thin `main`; everything runs from [`run`] so tests and the dev cluster can
//! start agents in-process.

pub mod api_backoff;
pub mod collect;
pub mod collection;
pub mod config;
pub mod enforcer;
pub mod evictor;
pub mod http;
pub mod label_cleanup;
pub mod labeler;
pub mod metrics;
pub mod node_watch;
pub mod plan;
pub mod pods;
pub mod policies;
pub mod publish;
pub mod recovery;
pub mod rewards;
pub mod run;
pub mod scavengers;
pub mod scope;
pub mod shared;
#[cfg(test)]
mod test_client;
pub mod verdict_push;

pub use run::{Agent, start};
