//! Every replica's watch of scavenger pods (those labelled [`JOB_LABEL`]), for preempt's
//! victim ranking: which pods the API server still holds as staying, and which ScavengerJobs
//! are being interrupted ([`Standing`]). Gossip learns that a pod left seconds late, while
//! kube-scheduler preempts for a batch of pending pods milliseconds apart; a watch hears of a
//! victim's `DisruptionTarget` and deletion as soon as the scheduler writes them.
//!
//! Until the first list is in, and after a failed watch until the next list, the handle says
//! nothing ([`ScavengerPods::standing`] is `None`): the ranking then swaps no victim.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt as _;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use telemesh_core::scavenge::JOB_LABEL;
use telemesh_core::scavenge::victims::Standing;
use tokio_util::sync::CancellationToken;

/// The watched scavenger pods: cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ScavengerPods {
    inner: Option<Watched>,
}

#[derive(Debug, Clone)]
struct Watched {
    store: Store<Pod>,
    synced: Arc<AtomicBool>,
}

// === impl ScavengerPods ===

impl ScavengerPods {
    /// Starts watching scavenger pods in every namespace: returns the handle and the task to
    /// spawn, which runs until `stop`, retrying failed watches with backoff.
    pub fn watch(
        client: kube::Client,
        stop: CancellationToken,
    ) -> (Self, impl std::future::Future<Output = ()> + Send + 'static) {
        let (store, writer) = reflector::store::<Pod>();
        let synced = Arc::new(AtomicBool::new(false));
        let handle = Self {
            inner: Some(Watched {
                store,
                synced: synced.clone(),
            }),
        };
        let api = kube::Api::<Pod>::all(client);
        let task = async move {
            let config = watcher::Config::default().labels(JOB_LABEL);
            let mut events = reflector::reflector(writer, watcher::watcher(api, config))
                .default_backoff()
                .boxed();
            loop {
                let event = tokio::select! {
                    () = stop.cancelled() => return,
                    event = events.next() => event,
                };
                match event {
                    None => return,
                    Some(Ok(Event::InitDone)) => {
                        if !synced.swap(true, Ordering::Release) {
                            tracing::debug!("scavenger pod watch synced");
                        }
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        // Until the relist, pods that leave are not seen: swap nothing.
                        synced.store(false, Ordering::Release);
                        tracing::warn!(error = %e, "scavenger pod watch failed; preempt swaps no victim until it lists again");
                    }
                }
            }
        };
        (handle, task)
    }

    /// A handle that always holds `pods`, listed (tests and benchmarks).
    pub fn from_pods(pods: impl IntoIterator<Item = Pod>) -> Self {
        let mut writer = reflector::store::Writer::<Pod>::default();
        writer.apply_watcher_event(&Event::Init);
        for pod in pods {
            writer.apply_watcher_event(&Event::InitApply(pod));
        }
        writer.apply_watcher_event(&Event::InitDone);
        let store = writer.as_reader();
        // The reader outlives the writer: a dropped writer leaves the store as it was.
        drop(writer);
        Self {
            inner: Some(Watched {
                store,
                synced: Arc::new(AtomicBool::new(true)),
            }),
        }
    }

    /// What the API server says of scavenger pods now, or `None` before the watch has listed
    /// (and while a failed watch waits to list again).
    pub fn standing(&self) -> Option<Standing> {
        let watched = self.inner.as_ref()?;
        if !watched.synced.load(Ordering::Acquire) {
            return None;
        }
        let pods = watched.store.state();
        Some(Standing::of(pods.iter().map(|p| &**p)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_unwatched_handle_says_nothing_a_listed_one_sorts_its_pods() {
        assert_eq!(ScavengerPods::default().standing(), None);
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "batch", "uid": "u1",
                         "labels": {JOB_LABEL: "render"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "job", "image": "i"}]},
            "status": {"phase": "Running"},
        }))
        .unwrap();
        let standing = ScavengerPods::from_pods([pod]).standing().unwrap();
        assert!(standing.may_name("u1"));
        assert!(standing.interrupted.is_empty());
    }
}
