//! Node scope: an agent acts on its own node only. These are the checks its writes go through,
//! whatever they are given: an eviction only of a pod bound to this node ([`pod`]), a policy
//! status patch that touches no other node's entry ([`status_patch`]). [`Refusals`] logs and
//! counts each refusal (`telemesh_agent_node_scope_refusals_total{target}`).
//!
//! The Node writes need no check of their own: the labeler and the recovery annotation address
//! the Node named by `--node-name` and nothing else ([`crate::enforcement::labeler::Labeler::new`],
//! [`crate::enforcement::recovery::announce`]). On the server, the chart's ValidatingAdmissionPolicy refuses
//! the agent's service account the same writes, except an eviction, whose pod's node it cannot
//! see (deploy/README.md, "Node-scoped agents"): that one is this module's alone.

use k8s_openapi::api::core::v1::Pod;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde_json::Value;

/// A write outside this agent's node, refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutsideNode {
    /// An eviction of a pod bound to another node, or to none.
    #[error(
        "refusing to evict pod {namespace}/{name}: it is bound to {bound}, and this agent evicts only pods on its own node {own}"
    )]
    Pod {
        /// This agent's node.
        own: String,
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        name: String,
        /// `node <name>`, or `no node`.
        bound: String,
    },
    /// A policy status patch touching other nodes' entries.
    #[error(
        "refusing to write TASPolicy {policy} status entries of other nodes ({others}): this agent writes status.nodes.{own} only"
    )]
    Status {
        /// This agent's node.
        own: String,
        /// The policy (`namespace/name`).
        policy: String,
        /// The other entries the patch names, comma separated.
        others: String,
    },
}

impl OutsideNode {
    /// What was refused, as a bounded metric label.
    pub fn target(&self) -> Target {
        match self {
            Self::Pod { .. } => Target::Pod,
            Self::Status { .. } => Target::Status,
        }
    }
}

/// Whether `pod` is bound to `own`, the node this agent runs on (`spec.nodeName`).
pub fn pod(own: &str, pod: &Pod) -> Result<(), OutsideNode> {
    let bound = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    if bound == Some(own) {
        return Ok(());
    }
    Err(OutsideNode::Pod {
        own: own.to_owned(),
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        bound: bound.map_or_else(|| "no node".to_owned(), |n| format!("node {n}")),
    })
}

/// Whether a merge patch of a TASPolicy's status (`policy` is `namespace/name`) touches no
/// entry of `status.nodes` but `own`'s.
pub fn status_patch(own: &str, policy: &str, patch: &Value) -> Result<(), OutsideNode> {
    let nodes = patch.pointer("/status/nodes");
    let others: Vec<&str> = match nodes {
        None => Vec::new(),
        Some(Value::Object(entries)) => entries
            .keys()
            .map(String::as_str)
            .filter(|k| *k != own)
            .collect(),
        // `null` (or any non-object) replaces every node's entry.
        Some(_) => vec!["all of them"],
    };
    if others.is_empty() {
        return Ok(());
    }
    Err(OutsideNode::Status {
        own: own.to_owned(),
        policy: policy.to_owned(),
        others: others.join(", "),
    })
}

/// What a refusal was about, as a metric label.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Target {
    /// An eviction.
    Pod,
    /// A TASPolicy status write.
    Status,
}

/// Labels of the refusal counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabels {
    /// What was refused.
    pub target: Target,
}

/// Logs and counts refusals, one method for both so they cannot drift apart.
#[derive(Clone, Debug, Default)]
pub struct Refusals {
    counter: Family<RefusalLabels, Counter>,
}

impl Refusals {
    /// Counts into `counter` (registered as `node_scope_refusals` by [`crate::metrics`]).
    /// Both targets are exported at zero from the start: the series exist before the first
    /// refusal, so `increase()` and an alert on it see the first one.
    pub fn new(counter: Family<RefusalLabels, Counter>) -> Self {
        for target in [Target::Pod, Target::Status] {
            let _ = counter.get_or_create(&RefusalLabels { target });
        }
        Self { counter }
    }

    /// Logs the refusal as a warning and counts it.
    pub fn refuse(&self, e: &OutsideNode) {
        tracing::warn!(target_kind = ?e.target(), error = %e, "write outside this agent's node refused");
        self.counter
            .get_or_create(&RefusalLabels { target: e.target() })
            .inc();
    }

    /// How many refusals of `target` were counted.
    pub fn count(&self, target: Target) -> u64 {
        self.counter.get_or_create(&RefusalLabels { target }).get()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod_on(node: Option<&str>) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "shop"},
            "spec": {"nodeName": node, "containers": []}
        }))
        .unwrap()
    }

    #[test]
    fn only_pods_bound_to_this_node_may_be_evicted() {
        assert_eq!(pod("node-a", &pod_on(Some("node-a"))), Ok(()));
        let other = pod("node-a", &pod_on(Some("node-b"))).unwrap_err();
        assert_eq!(
            other.to_string(),
            "refusing to evict pod shop/web-1: it is bound to node node-b, and this agent evicts only pods on its own node node-a"
        );
        assert_eq!(other.target(), Target::Pod);
        let pending = pod("node-a", &pod_on(None)).unwrap_err();
        assert!(
            pending.to_string().contains("bound to no node"),
            "{pending}"
        );
    }

    #[test]
    fn status_patches_touch_only_this_nodes_entry() {
        let own = json!({"status": {"nodes": {"node-a": {"strategies": ["deschedule"]}}, "problems": []}});
        assert_eq!(status_patch("node-a", "ns/p", &own), Ok(()));
        let cleared = json!({"status": {"nodes": {"node-a": null}}});
        assert_eq!(status_patch("node-a", "ns/p", &cleared), Ok(()));
        let problems_only = json!({"status": {"problems": ["x"]}});
        assert_eq!(status_patch("node-a", "ns/p", &problems_only), Ok(()));
        let others = json!({"status": {"nodes": {"node-a": null, "node-b": null, "node-c": {}}}});
        let e = status_patch("node-a", "ns/p", &others).unwrap_err();
        assert_eq!(
            e.to_string(),
            "refusing to write TASPolicy ns/p status entries of other nodes (node-b, node-c): this agent writes status.nodes.node-a only"
        );
        let all = json!({"status": {"nodes": null}});
        assert!(status_patch("node-a", "ns/p", &all).is_err());
    }

    #[test]
    fn refusals_are_counted_by_target() {
        let r = Refusals::default();
        r.refuse(&pod("a", &pod_on(Some("b"))).unwrap_err());
        assert_eq!((r.count(Target::Pod), r.count(Target::Status)), (1, 0));
    }
}
