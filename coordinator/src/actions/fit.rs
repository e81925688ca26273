//! `action.Bind`'s check: the pod exists, is Pending with no node (WAM's exact messages), and
//! the node exists and can take it by the default scheduler filters' rules
//! ([`telemesh_core::fit`]: resources, taints and tolerations, nodeSelector and required
//! affinity, cordons). The RPC front end calls it before storing a Bind, so a refusal is
//! synchronous as in WAM; the executor calls it again just before binding.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use telemesh_core::action::PodRef;
use telemesh_core::fit::{self, NodeInfo};

/// Extended resources the shipped scheduler configuration marks `ignoredByScheduler`: TAS's
/// dummy resource, which nodes need not advertise.
pub const IGNORED_RESOURCES: [&str; 1] = ["telemetry/scheduling"];

/// Why a pod cannot be bound to a node.
#[derive(Debug, thiserror::Error)]
pub enum BindRefusal {
    /// The pod does not exist (WAM: `error getting pod for binding …`).
    #[error("error getting pod for binding: pods {0:?} not found in namespace {1:?}")]
    PodNotFound(String, String),
    /// WAM's message for a pod whose phase is not Pending.
    #[error("pod cannot be bound since it is not in pending state")]
    NotPending,
    /// WAM's message for a pod some scheduler already placed.
    #[error("pod cannot be bound since it has nodeName set")]
    NodeNameSet,
    /// The pod is being deleted.
    #[error("pod cannot be bound since it is being deleted")]
    Deleting,
    /// No such node.
    #[error("failed to bind Pod {pod} to Node {node}: node {node:?} not found")]
    NodeNotFound {
        /// Pod name.
        pod: String,
        /// Node name.
        node: String,
    },
    /// The node cannot take the pod; `reason` as kube-scheduler words it.
    #[error("failed to bind Pod {pod} to Node {node}: the node cannot take the pod: {reason}")]
    Unfit {
        /// Pod name.
        pod: String,
        /// Node name.
        node: String,
        /// The scheduler filter's reason (`Insufficient cpu`, `node(s) had untolerated taint …`).
        reason: String,
    },
    /// The API server failed.
    #[error("cannot check the pod and node with the API server: {0}")]
    Api(#[source] kube::Error),
}

impl BindRefusal {
    /// A bounded name for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::PodNotFound(..) | Self::NodeNotFound { .. } => "not_found",
            Self::NotPending | Self::NodeNameSet | Self::Deleting => "conflict",
            Self::Unfit { .. } => "unfit",
            Self::Api(_) => "api",
        }
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Decides whether `pod` may be bound to `node`, given the unfinished pods already on the node.
pub fn decide<'a>(
    pod: &Pod,
    node: &Node,
    pods_on_node: impl IntoIterator<Item = &'a Pod>,
) -> Result<(), BindRefusal> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    if pod.metadata.deletion_timestamp.is_some() {
        return Err(BindRefusal::Deleting);
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if phase != Some("Pending") {
        return Err(BindRefusal::NotPending);
    }
    if pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
    {
        return Err(BindRefusal::NodeNameSet);
    }
    let unfinished = pods_on_node.into_iter().filter(|p| {
        !matches!(
            p.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
    });
    let info = NodeInfo::new(node, unfinished);
    let ignored: BTreeSet<String> = IGNORED_RESOURCES.iter().map(|r| (*r).to_owned()).collect();
    fit::check(pod, &fit::pod_requests(pod), &info, &ignored).map_err(|unfit| BindRefusal::Unfit {
        pod: name,
        node: info.name.clone(),
        reason: unfit.to_string(),
    })
}

/// Reads the pod, the node and the node's pods, and decides; returns the pod when it may be
/// bound. Three reads, only for Bind.
pub async fn check_bind(
    client: &kube::Client,
    pod_ref: &PodRef,
    node: &str,
) -> Result<Pod, BindRefusal> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &pod_ref.namespace);
    let pod = match pods.get(&pod_ref.name).await {
        Ok(p) => p,
        Err(e) if is_not_found(&e) => {
            return Err(BindRefusal::PodNotFound(
                pod_ref.name.clone(),
                pod_ref.namespace.clone(),
            ));
        }
        Err(e) => return Err(BindRefusal::Api(e)),
    };
    let node_obj = match Api::<Node>::all(client.clone()).get(node).await {
        Ok(n) => n,
        Err(e) if is_not_found(&e) => {
            return Err(BindRefusal::NodeNotFound {
                pod: pod_ref.name.clone(),
                node: node.to_owned(),
            });
        }
        Err(e) => return Err(BindRefusal::Api(e)),
    };
    let on_node = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .map_err(BindRefusal::Api)?;
    decide(&pod, &node_obj, &on_node.items)?;
    Ok(pod)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(phase: &str, node_name: Option<&str>, cpu: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ul"},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": cpu}, "limits": {"telemetry/scheduling": "1"}}}]},
            "status": {"phase": phase}
        }))
        .unwrap()
    }

    fn node(unschedulable: bool) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "spec": {"unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap()
    }

    #[test]
    fn wams_refusals_come_first_then_the_filters() {
        let n = node(false);
        assert!(matches!(
            decide(&pod("Running", None, "1"), &n, []),
            Err(BindRefusal::NotPending)
        ));
        assert_eq!(
            decide(&pod("Pending", Some("n2"), "1"), &n, [])
                .unwrap_err()
                .to_string(),
            "pod cannot be bound since it has nodeName set"
        );
        // TAS's dummy resource is ignored, as the scheduler configuration says.
        decide(&pod("Pending", None, "1"), &n, []).unwrap();
        let busy = pod("Running", Some("n1"), "1500m");
        let done = pod("Succeeded", Some("n1"), "2");
        let err = decide(&pod("Pending", None, "1"), &n, [&busy, &done]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed to bind Pod p to Node n1: the node cannot take the pod: Insufficient cpu"
        );
        let err = decide(&pod("Pending", None, "1"), &node(true), []).unwrap_err();
        assert!(
            err.to_string()
                .contains("untolerated taint {node.kubernetes.io/unschedulable: }"),
            "{err}"
        );
    }
}
