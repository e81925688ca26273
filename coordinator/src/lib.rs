//! telemesh-coordinator: a replica of Telemesh's thin control plane. It joins the agents'
//! gossip as an observer and keeps the whole cluster's node state in memory ([`view`]), watches
//! TASPolicies ([`policies`]), and answers kube-scheduler extender calls from those two alone
//! ([`extender`]), so any number of replicas behind one Service give the same answers. It also
//! serves a JSON API ([`api`]), a live cluster page ([`page`]) and `/metrics`, `/healthz`,
//! `/readyz` ([`health`]), and workload actions ([`actions`]): every replica accepts WAM's JSON-RPC calls on `POST /rpc` and stores
//! them as WorkloadActions, the replica holding the executor Lease runs them, and every
//! replica's extender enforces the placements they ask for. The same replica, elected through
//! one Lease ([`leader`]), runs the ScavengerJob controller ([`scavenge`]).
//!
//! The binary is a thin `main`; everything runs from [`run`] so tests and the dev cluster can
//! start replicas in-process.

pub mod actions;
pub mod api;
pub mod config;
pub mod doors;
pub mod extender;
pub mod gossip_metrics;
pub mod health;
pub mod leader;
pub mod metrics;
pub mod page;
pub mod policies;
pub mod run;
pub mod scavenge;
pub mod view;

pub use run::{Coordinator, start};
