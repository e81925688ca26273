//! Workload controllers as kube-controller-manager runs them: ReplicaSet, Deployment, StatefulSet
//! and Job.
//!
//! The sim is only an API server; without these, a Deployment or Job created by a test or in the
//! dev cluster never gets pods. Each controller is a `kube::runtime::Controller` that reads and
//! writes through a `kube::Client`, exactly as the upstream controllers do through client-go, so
//! their writes meet the same defaulting, validation, watches and garbage collection.
//!
//! Simplifications shared by all four (each module lists its own):
//! - **Fresh reads instead of caches and expectations.** Each reconcile GETs its object and LISTs
//!   its children by label selector. Upstream reads informer caches and tracks "expectations" so
//!   it does not create twice what the cache has not seen yet; the sim answers from memory, and
//!   fresh reads make that bookkeeping unnecessary.
//! - **No adoption or release.** Only children whose controller ownerReference names the object
//!   count; orphans that match a selector are left alone, and children that stop matching are
//!   not released.
//! - **No Events** are recorded, and creation is not batched ("slow start").
//!
//! Decisions (what to create, what to delete first, what status to write) are pure functions in
//! each module, unit-tested there; the reconcile functions only read, decide and write.

pub mod deployment;
mod error;
pub mod job;
mod owners;
mod pods;
pub mod replicaset;
mod runner;
pub mod statefulset;

use tokio_util::sync::CancellationToken;

pub use error::{Error, Result};

/// Runs the ReplicaSet, Deployment, StatefulSet and Job controllers until `stop` is cancelled. API errors
/// never end a controller: failed reconciles are retried with backoff, and watches re-list.
pub async fn run(client: kube::Client, stop: CancellationToken) {
    tracing::info!("workload controllers starting");
    tokio::join!(
        replicaset::run(client.clone(), stop.clone()),
        deployment::run(client.clone(), stop.clone()),
        statefulset::run(client.clone(), stop.clone()),
        job::run(client, stop),
    );
    tracing::info!("workload controllers stopped");
}
