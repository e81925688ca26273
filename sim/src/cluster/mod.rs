//! The cluster around the API server: workload controllers, a scheduler that calls extenders,
//! kubelet stand-ins per simulated node and scripted telemetry. They talk to the server through
//! the kube client, as real components do, so what they do is what a client sees.

pub mod container_start;
pub mod controllers;
pub mod http;
pub mod kubelet;
pub mod machines;
pub mod pod_state;
pub mod scenario;
pub mod scheduler;
pub mod service;
pub mod workload;

/// Pod-to-node fit, shared with the coordinator's `action.Bind` check.
pub use telemesh_core::fit;

use std::sync::Arc;

use futures::StreamExt as _;
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Drives a reflector's watch stream (re-watching with backoff after errors) and wakes `changed`
/// on every object it applies, until `stop`: the scheduler and kubelets act on a wake-up rather
/// than on each event.
pub(crate) async fn notify_on_change<S, T>(stream: S, changed: Arc<Notify>, stop: CancellationToken)
where
    S: futures::Stream<Item = Result<watcher::Event<T>, watcher::Error>> + Send,
{
    let stream = stream.default_backoff().touched_objects();
    let mut stream = std::pin::pin!(stream);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            item = stream.next() => match item {
                Some(Ok(_)) => changed.notify_one(),
                Some(Err(e)) => tracing::debug!(error = %e, "watch error; re-watching"),
                None => return,
            },
        }
    }
}
