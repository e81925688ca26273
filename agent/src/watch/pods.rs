//! The pods on this node, from one watch filtered by `spec.nodeName` (the API server indexes
//! such watches, so 5,000 agents cost it one watcher each per pod change, not 5,000).

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{self, Store, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use telemesh_runtime::store_watch::watcher_for_store;
use telemesh_runtime::watch_backoff::backoff;
use tokio_util::sync::CancellationToken;

/// Starts a reflector of this node's pods; returns its store. The task ends with `stop`.
pub fn watch_node_pods(client: Client, node_name: &str, stop: CancellationToken) -> Store<Pod> {
    let (reader, writer) = reflector::store::<Pod>();
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node_name}"));
    let pods = watcher_for_store(Api::<Pod>::all(client), config);
    let stream = backoff(reflector(writer, pods)).applied_objects();
    let node = node_name.to_owned();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                item = stream.next() => match item {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => tracing::warn!(node.name = %node, error = %e, "pod watch error; retrying with backoff"),
                    None => break,
                },
            }
        }
    });
    reader
}

/// Returns (namespace, name, uid) of every pod in the store.
pub fn pod_refs(store: &Store<Pod>) -> Vec<(String, String, String)> {
    store
        .state()
        .iter()
        .filter_map(|p| {
            let m = &p.metadata;
            Some((m.namespace.clone()?, m.name.clone()?, m.uid.clone()?))
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use kube::api::PostParams;
    use serde_json::json;

    use super::*;

    #[tokio::test]
    async fn the_store_holds_only_this_nodes_pods() {
        let sim = telemesh_sim::Sim::start(Default::default()).await.unwrap();
        let client = sim.client().await.unwrap();
        let pods: Api<Pod> = Api::default_namespaced(client.clone());
        for (name, node) in [("mine", "node-a"), ("theirs", "node-b")] {
            let p: Pod = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}})).unwrap();
            pods.create(&PostParams::default(), &p).await.unwrap();
        }
        let stop = CancellationToken::new();
        let store = watch_node_pods(client, "node-a", stop.clone());
        store.wait_until_ready().await.unwrap();
        let refs =
            telemesh_runtime::testing::eventually("the node's pod", Duration::from_secs(5), || {
                let refs = pod_refs(&store);
                async move { (!refs.is_empty()).then_some(refs) }
            })
            .await;
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].1, "mine");
        // The API server records who wrote the pod; the store keeps none of it.
        let written = pods.get("mine").await.unwrap();
        assert!(
            written
                .metadata
                .managed_fields
                .is_some_and(|m| !m.is_empty())
        );
        assert!(
            store
                .state()
                .iter()
                .all(|p| p.metadata.managed_fields.is_none())
        );
        stop.cancel();
    }
}
