//! This node's own Node, metadata only, from one watch filtered by `metadata.name`: the labels
//! and who wrote them, which the label clean-up ([`crate::enforcement::label_cleanup`]) reads every policy
//! pass without a request. Started only under `--label-cleanup tas`.
//!
//! Metadata only (`PartialObjectMetadata`): a Node's status (images, conditions) is most of its
//! size and changes with every kubelet report; the store keeps of the managedFields only the
//! label fields ([`crate::enforcement::label_cleanup::keep_label_fields`]). kube-apiserver indexes Node
//! watches by name (kubelets watch their own Node the same way), so 5,000 agents cost it one
//! watcher each per change of their own Node.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use telemesh_runtime::watch_backoff::backoff;
use tokio_util::sync::CancellationToken;

/// The store of this node's metadata.
pub type OwnNode = Store<PartialObjectMeta<Node>>;

/// Starts a reflector of `node_name`'s metadata; returns its store. The task ends with `stop`.
pub fn watch_own_node(client: Client, node_name: &str, stop: CancellationToken) -> OwnNode {
    let (reader, writer) = reflector::store::<PartialObjectMeta<Node>>();
    let config = watcher::Config::default().fields(&format!("metadata.name={node_name}"));
    // An Api of PartialObjectMeta asks for metadata only.
    let node = watcher(Api::<PartialObjectMeta<Node>>::all(client), config)
        .modify(|n| crate::enforcement::label_cleanup::keep_label_fields(&mut n.metadata));
    let stream = backoff(reflector(writer, node)).applied_objects();
    let name = node_name.to_owned();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                item = stream.next() => match item {
                    Some(Ok(_)) => {}
                    Some(Err(e)) => tracing::warn!(node.name = %name, error = %e, "node watch error; retrying with backoff"),
                    None => break,
                },
            }
        }
    });
    reader
}

/// This node's metadata as the store holds it now; `None` before the watch listed it.
pub fn current(store: &OwnNode) -> Option<ObjectMeta> {
    store.state().first().map(|n| n.metadata.clone())
}
