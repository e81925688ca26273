//! Every replica's watch of scavenger pods (those labelled [`JOB_LABEL`]), for preempt's
//! victim ranking: which pods the API server still holds as staying, and which ScavengerJobs
//! are being interrupted ([`Standing`]). Gossip learns that a pod left seconds late, while
//! kube-scheduler preempts for a batch of pending pods milliseconds apart; a watch hears of a
//! victim's `DisruptionTarget` and deletion as soon as the scheduler writes them.
//!
//! The [`Standing`] follows the watch event by event, so a preempt call looks pods up instead
//! of sorting them all. Until the first list is in, and after a failed watch until the next
//! list, the handle says nothing ([`Read::standing`] is `None`): the ranking then swaps no
//! victim.

use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};
use parking_lot::{RwLock, RwLockReadGuard};
use telemesh_core::scavenge::JOB_LABEL;
use telemesh_core::scavenge::victims::Standing;
use tokio_util::sync::CancellationToken;

/// The watched scavenger pods: cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ScavengerPods {
    inner: Arc<RwLock<Watched>>,
}

#[derive(Debug, Default)]
struct Watched {
    /// Whether `standing` follows the API server (listed, and no watch error since).
    synced: bool,
    standing: Standing,
}

/// A read of the watched pods, held while one preempt call ranks.
pub struct Read<'a>(RwLockReadGuard<'a, Watched>);

impl Read<'_> {
    /// What the API server says of scavenger pods, or `None` before the watch has listed
    /// (and while a failed watch waits to list again).
    pub fn standing(&self) -> Option<&Standing> {
        self.0.synced.then_some(&self.0.standing)
    }
}

// === impl ScavengerPods ===

impl ScavengerPods {
    /// Starts watching scavenger pods in every namespace: returns the handle and the task to
    /// spawn, which runs until `stop`, retrying failed watches with backoff.
    pub fn watch(
        client: kube::Client,
        stop: CancellationToken,
    ) -> (Self, impl std::future::Future<Output = ()> + Send + 'static) {
        let handle = Self::default();
        let inner = handle.inner.clone();
        let api = kube::Api::<Pod>::all(client);
        let task = async move {
            let config = watcher::Config::default().labels(JOB_LABEL);
            let mut events = watcher::watcher(api, config).default_backoff().boxed();
            // A relist builds a new standing, swapped in whole once listed.
            let mut listing: Option<Standing> = None;
            loop {
                let event = tokio::select! {
                    () = stop.cancelled() => return,
                    event = events.next() => event,
                };
                match event {
                    None => return,
                    Some(Ok(Event::Init)) => listing = Some(Standing::default()),
                    Some(Ok(Event::InitApply(pod))) => {
                        if let Some(standing) = listing.as_mut() {
                            standing.apply(&pod);
                        }
                    }
                    Some(Ok(Event::InitDone)) => {
                        if let Some(standing) = listing.take() {
                            let mut watched = inner.write();
                            if !watched.synced {
                                tracing::debug!("scavenger pod watch listed");
                            }
                            *watched = Watched {
                                synced: true,
                                standing,
                            };
                        }
                    }
                    Some(Ok(Event::Apply(pod))) => inner.write().standing.apply(&pod),
                    Some(Ok(Event::Delete(pod))) => inner.write().standing.remove(&pod),
                    Some(Err(e)) => {
                        // Until the relist, pods that leave may go unseen: swap nothing.
                        inner.write().synced = false;
                        tracing::warn!(error = %e, "scavenger pod watch failed; preempt swaps no victim until it lists again");
                    }
                }
            }
        };
        (handle, task)
    }

    /// A handle that always holds `pods`, listed (tests and benchmarks).
    pub fn from_pods<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Self {
        Self {
            inner: Arc::new(RwLock::new(Watched {
                synced: true,
                standing: Standing::of(pods),
            })),
        }
    }

    /// The watched pods now; hold the read only while ranking one call.
    pub fn read(&self) -> Read<'_> {
        Read(self.inner.read())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_unwatched_handle_says_nothing_a_listed_one_sorts_its_pods() {
        assert_eq!(ScavengerPods::default().read().standing(), None);
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "batch", "uid": "u1",
                         "labels": {JOB_LABEL: "render"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "job", "image": "i"}]},
            "status": {"phase": "Running"},
        }))
        .unwrap();
        let pods = ScavengerPods::from_pods([&pod]);
        let read = pods.read();
        let standing = read.standing().unwrap();
        assert!(standing.may_name("u1"));
        assert!(!standing.interrupted("batch/render"));
    }
}
