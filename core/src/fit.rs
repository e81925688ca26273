//! Whether a pod fits a node, as kube-scheduler's default filter plugins decide it for what the
//! dev cluster needs: NodeUnschedulable, TaintToleration, NodeAffinity (nodeSelector and required
//! affinity), NodeResourcesFit (requests against allocatable, pod count). Pure functions, shared
//! by sim's scheduler and the coordinator's `action.Bind` check, so the loops and API calls
//! around them stay plumbing.
//!
//! Left out: inter-pod (anti-)affinity, topology spread, volumes, ports, preferred affinities and
//! image locality. The dev cluster's workloads do not use them; a pod that relies on them is
//! placed (or bound) as if they were absent.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::{
    Container, Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube_quantity::ParsedQuantity;

/// Resource name → amount, in the resource's base unit (cores, bytes, count).
pub type Resources = BTreeMap<String, f64>;

/// What the scheduler knows of one node for filtering and scoring.
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    /// Node name.
    pub name: String,
    /// Node labels.
    pub labels: BTreeMap<String, String>,
    /// Node taints, plus the ones the node lifecycle controller would add (not-ready,
    /// unschedulable).
    pub taints: Vec<Taint>,
    /// Allocatable resources; `pods` is the pod limit.
    pub allocatable: Resources,
    /// What the pods on the node request, summed.
    pub requested: Resources,
    /// Pods on the node that are not finished.
    pub pods: usize,
}

/// The taint kube's node lifecycle controller puts on a node that is not Ready.
pub const TAINT_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The taint that stands for `spec.unschedulable` (NodeUnschedulable plugin).
pub const TAINT_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

impl NodeInfo {
    /// Builds the node's entry from its object; `pods` are the unfinished pods bound to it.
    pub fn new<'a>(node: &Node, pods: impl IntoIterator<Item = &'a Pod>) -> Self {
        let spec = node.spec.clone().unwrap_or_default();
        let status = node.status.clone().unwrap_or_default();
        let mut taints = spec.taints.unwrap_or_default();
        let ready = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if !ready {
            taints.push(lifecycle_taint(TAINT_NOT_READY));
        }
        if spec.unschedulable == Some(true) {
            taints.push(lifecycle_taint(TAINT_UNSCHEDULABLE));
        }
        let allocatable = status
            .allocatable
            .or(status.capacity)
            .unwrap_or_default()
            .iter()
            .filter_map(|(k, q)| Some((k.clone(), amount(q)?)))
            .collect();
        let mut info = Self {
            name: node.metadata.name.clone().unwrap_or_default(),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints,
            allocatable,
            ..Self::default()
        };
        for pod in pods {
            info.add(&pod_requests(pod));
        }
        info
    }

    /// Counts a pod with `requests` as placed on this node.
    pub fn add(&mut self, requests: &Resources) {
        self.pods += 1;
        for (k, v) in requests {
            *self.requested.entry(k.clone()).or_default() += v;
        }
    }

    /// Stops counting a pod with `requests` on this node (a preemption victim being tried
    /// without).
    pub fn remove(&mut self, requests: &Resources) {
        self.pods = self.pods.saturating_sub(1);
        for (k, v) in requests {
            if let Some(used) = self.requested.get_mut(k) {
                *used = (*used - v).max(0.0);
            }
        }
    }
}

fn lifecycle_taint(key: &str) -> Taint {
    Taint {
        key: key.to_owned(),
        effect: "NoSchedule".to_owned(),
        ..Taint::default()
    }
}

/// Why a node cannot take a pod, worded as kube-scheduler words it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unfit {
    /// A NoSchedule or NoExecute taint the pod does not tolerate.
    Taint {
        /// Taint key.
        key: String,
        /// Taint value.
        value: String,
    },
    /// nodeSelector or required node affinity does not match.
    Affinity,
    /// Requests exceed what is left of a resource.
    Insufficient(String),
    /// The node already runs as many pods as it allows.
    TooManyPods,
}

impl fmt::Display for Unfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Taint { key, value } if value.is_empty() => {
                write!(f, "node(s) had untolerated taint {{{key}: }}")
            }
            Self::Taint { key, value } => {
                write!(f, "node(s) had untolerated taint {{{key}: {value}}}")
            }
            Self::Affinity => f.write_str("node(s) didn't match Pod's node affinity/selector"),
            Self::Insufficient(r) => write!(f, "Insufficient {r}"),
            Self::TooManyPods => f.write_str("Too many pods"),
        }
    }
}

/// Checks the filters in kube-scheduler's order; `ignored` are extended resources the scheduler
/// leaves to an extender (`ignoredByScheduler`).
pub fn check(
    pod: &Pod,
    requests: &Resources,
    node: &NodeInfo,
    ignored: &BTreeSet<String>,
) -> Result<(), Unfit> {
    let spec = pod.spec.clone().unwrap_or_default();
    let tolerations = spec.tolerations.unwrap_or_default();
    if let Some(t) = node.taints.iter().find(|t| {
        matches!(t.effect.as_str(), "NoSchedule" | "NoExecute")
            && !tolerations.iter().any(|tol| tolerates(tol, t))
    }) {
        return Err(Unfit::Taint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
        });
    }
    if !matches_node(pod, node) {
        return Err(Unfit::Affinity);
    }
    let pod_limit = node.allocatable.get("pods").copied().unwrap_or(f64::MAX);
    if node.pods as f64 + 1.0 > pod_limit {
        return Err(Unfit::TooManyPods);
    }
    for (resource, want) in requests {
        if ignored.contains(resource) || *want <= 0.0 {
            continue;
        }
        let have = node.allocatable.get(resource).copied().unwrap_or(0.0);
        let used = node.requested.get(resource).copied().unwrap_or(0.0);
        if used + want > have + 1e-9 {
            return Err(Unfit::Insufficient(resource.clone()));
        }
    }
    Ok(())
}

/// Whether `toleration` tolerates `taint` (upstream's `ToleratesTaint`).
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = toleration.effect.as_deref()
        && !effect.is_empty()
        && effect != taint.effect
    {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    let exists = toleration.operator.as_deref() == Some("Exists");
    if key.is_empty() {
        // An empty key with Exists tolerates everything; with Equal it matches nothing.
        return exists;
    }
    if key != taint.key {
        return false;
    }
    exists || toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
}

/// nodeSelector and required node affinity (NodeAffinity plugin's filter).
pub fn matches_node(pod: &Pod, node: &NodeInfo) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| node.labels.get(k) == Some(v));
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    // Terms are ORed; an empty term list matches nothing, as upstream.
    let affinity_ok = required.is_none_or(|r| {
        r.node_selector_terms
            .iter()
            .any(|term| term_matches(term, node))
    });
    selector_ok && affinity_ok
}

fn term_matches(term: &NodeSelectorTerm, node: &NodeInfo) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let name_fields: BTreeMap<String, String> =
        BTreeMap::from([("metadata.name".to_owned(), node.name.clone())]);
    expressions
        .iter()
        .all(|r| requirement_matches(r, &node.labels))
        && fields.iter().all(|r| requirement_matches(r, &name_fields))
}

fn requirement_matches(r: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&r.key);
    let values = r.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), Some(want)) = (
                value.and_then(|v| number(v)),
                values.first().and_then(|v| number(v)),
            ) else {
                return false;
            };
            if r.operator == "Gt" {
                have > want
            } else {
                have < want
            }
        }
        _ => false,
    }
}

/// What a pod asks for: the containers' requests summed (a limit stands in for a missing
/// request, as the API server defaults it), at least the largest init container's.
pub fn pod_requests(pod: &Pod) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources::new();
    };
    let mut total = Resources::new();
    for c in &spec.containers {
        for (k, v) in container_requests(c) {
            *total.entry(k).or_default() += v;
        }
    }
    for c in spec.init_containers.iter().flatten() {
        for (k, v) in container_requests(c) {
            let slot = total.entry(k).or_default();
            *slot = slot.max(v);
        }
    }
    for (k, q) in spec.overhead.iter().flatten() {
        if let Some(v) = amount(q) {
            *total.entry(k.clone()).or_default() += v;
        }
    }
    total
}

fn container_requests(c: &Container) -> Resources {
    let Some(resources) = c.resources.as_ref() else {
        return Resources::new();
    };
    let mut out: Resources = resources
        .limits
        .iter()
        .flatten()
        .filter_map(|(k, q)| Some((k.clone(), amount(q)?)))
        .collect();
    for (k, q) in resources.requests.iter().flatten() {
        if let Some(v) = amount(q) {
            out.insert(k.clone(), v);
        }
    }
    out
}

/// Every resource name a pod requests or limits (for an extender's `managedResources`).
pub fn resource_names(pod: &Pod) -> BTreeSet<String> {
    let Some(spec) = pod.spec.as_ref() else {
        return BTreeSet::new();
    };
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .filter_map(|c| c.resources.as_ref())
        .flat_map(|r| r.requests.iter().flatten().chain(r.limits.iter().flatten()))
        .map(|(k, _)| k.clone())
        .collect()
}

/// A quantity as a number in its base unit; `None` for a malformed one (counted as absent).
pub fn amount(q: &Quantity) -> Option<f64> {
    ParsedQuantity::try_from(q)
        .ok()
        .and_then(|p| p.to_bytes_f64())
}

/// NodeResourcesFit's default score (LeastAllocated, CPU and memory weighted equally): 0..=100,
/// higher for a node with more left after placing the pod.
pub fn least_allocated_score(node: &NodeInfo, requests: &Resources) -> i64 {
    let mut sum = 0.0;
    let mut n = 0.0;
    for resource in ["cpu", "memory"] {
        let have = node.allocatable.get(resource).copied().unwrap_or(0.0);
        if have <= 0.0 {
            continue;
        }
        let used = node.requested.get(resource).copied().unwrap_or(0.0)
            + requests.get(resource).copied().unwrap_or(0.0);
        sum += ((have - used).max(0.0) / have) * 100.0;
        n += 1.0;
    }
    if n == 0.0 { 0 } else { (sum / n) as i64 }
}

/// kube-scheduler's summary of why no node fits: `0/4 nodes are available: 1 Insufficient cpu,
/// 3 node(s) had untolerated taint {k: v}.` Reasons are counted, and the `<count> <reason>`
/// strings sorted as strings, as upstream's `FitError.Error` (v1.32) sorts them.
pub fn unschedulable_message(total: usize, reasons: &[String]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in reasons {
        *counts.entry(r.as_str()).or_default() += 1;
    }
    let mut parts: Vec<String> = counts.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    if parts.is_empty() {
        format!("0/{total} nodes are available.")
    } else {
        format!("0/{total} nodes are available: {}.", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn node(v: serde_json::Value) -> Node {
        serde_json::from_value(v).unwrap()
    }

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    fn ready_node(labels: serde_json::Value, taints: serde_json::Value) -> NodeInfo {
        NodeInfo::new(
            &node(json!({
                "metadata": {"name": "n1", "labels": labels},
                "spec": {"taints": taints},
                "status": {
                    "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "3"},
                    "conditions": [{"type": "Ready", "status": "True"}]
                }
            })),
            [],
        )
    }

    fn container(resources: serde_json::Value) -> serde_json::Value {
        json!({"name": "c", "image": "i", "resources": resources})
    }

    #[test]
    fn requests_sum_containers_use_limits_as_default_and_cover_init_containers() {
        let p = pod(json!({
            "containers": [
                container(json!({"requests": {"cpu": "500m", "memory": "1Gi"}})),
                container(json!({"limits": {"cpu": "250m", "telemetry/scheduling": "1"}})),
            ],
            "initContainers": [container(json!({"requests": {"cpu": "1", "memory": "100Mi"}}))]
        }));
        let r = pod_requests(&p);
        assert_eq!(r["cpu"], 1.0, "init container's 1 cpu beats 0.75");
        assert_eq!(r["memory"], 1024.0 * 1024.0 * 1024.0);
        assert_eq!(r["telemetry/scheduling"], 1.0);
        assert!(resource_names(&p).contains("telemetry/scheduling"));
    }

    #[test]
    fn resources_must_fit_what_is_left_and_ignored_resources_are_skipped() {
        let mut n = ready_node(json!({}), json!([]));
        let big = pod(json!({"containers": [container(json!({"requests": {"cpu": "1500m"}}))]}));
        let req = pod_requests(&big);
        assert_eq!(check(&big, &req, &n, &BTreeSet::new()), Ok(()));
        n.add(&req);
        assert_eq!(
            check(&big, &req, &n, &BTreeSet::new()),
            Err(Unfit::Insufficient("cpu".into()))
        );
        let dummy = pod(
            json!({"containers": [container(json!({"limits": {"telemetry/scheduling": "1"}}))]}),
        );
        let req = pod_requests(&dummy);
        assert_eq!(
            check(&dummy, &req, &n, &BTreeSet::new()),
            Err(Unfit::Insufficient("telemetry/scheduling".into()))
        );
        let ignored = BTreeSet::from(["telemetry/scheduling".to_owned()]);
        assert_eq!(check(&dummy, &req, &n, &ignored), Ok(()));
        n.add(&Resources::new());
        n.add(&Resources::new());
        assert_eq!(check(&dummy, &req, &n, &ignored), Err(Unfit::TooManyPods));
    }

    #[test]
    fn taints_need_tolerations_and_not_ready_nodes_are_tainted() {
        let n = ready_node(
            json!({}),
            json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                   {"key": "soft", "effect": "PreferNoSchedule"}]),
        );
        let plain = pod(json!({"containers": [container(json!({}))]}));
        let err = check(&plain, &Resources::new(), &n, &BTreeSet::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "node(s) had untolerated taint {dedicated: gpu}"
        );
        for toleration in [
            json!({"key": "dedicated", "value": "gpu"}),
            json!({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}),
            json!({"operator": "Exists"}),
        ] {
            let p = pod(json!({"containers": [container(json!({}))], "tolerations": [toleration]}));
            assert_eq!(check(&p, &Resources::new(), &n, &BTreeSet::new()), Ok(()));
        }
        let wrong = pod(json!({"containers": [container(json!({}))],
            "tolerations": [{"key": "dedicated", "value": "cpu"}]}));
        assert!(check(&wrong, &Resources::new(), &n, &BTreeSet::new()).is_err());

        let not_ready = NodeInfo::new(
            &node(json!({"metadata": {"name": "n2"}, "status": {
                "conditions": [{"type": "Ready", "status": "False"}]}})),
            [],
        );
        assert!(matches!(
            check(&plain, &Resources::new(), &not_ready, &BTreeSet::new()),
            Err(Unfit::Taint { key, .. }) if key == TAINT_NOT_READY
        ));
    }

    #[test]
    fn node_selector_and_required_affinity() {
        let n = ready_node(json!({"zone": "a", "gen": "5"}), json!([]));
        let cases = [
            (json!({"nodeSelector": {"zone": "a"}}), true),
            (json!({"nodeSelector": {"zone": "b"}}), false),
            (
                affinity(json!([{"key": "zone", "operator": "In", "values": ["a", "b"]}])),
                true,
            ),
            (
                affinity(json!([{"key": "zone", "operator": "NotIn", "values": ["a"]}])),
                false,
            ),
            (
                affinity(json!([{"key": "gpu", "operator": "DoesNotExist"}])),
                true,
            ),
            (
                affinity(json!([{"key": "gen", "operator": "Gt", "values": ["4"]}])),
                true,
            ),
            (
                affinity(json!([{"key": "gen", "operator": "Lt", "values": ["4"]}])),
                false,
            ),
            (
                affinity(json!([{"key": "zone", "operator": "Exists"},
                             {"key": "gpu", "operator": "Exists"}])),
                false,
            ),
        ];
        for (mut spec, fits) in cases {
            spec["containers"] = json!([container(json!({}))]);
            let p = pod(spec.clone());
            assert_eq!(matches_node(&p, &n), fits, "{spec}");
        }
    }

    fn affinity(expressions: serde_json::Value) -> serde_json::Value {
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": expressions}]}}}})
    }

    #[test]
    fn least_allocated_prefers_emptier_nodes_and_message_counts_reasons() {
        let mut busy = ready_node(json!({}), json!([]));
        let idle = busy.clone();
        busy.add(&Resources::from([("cpu".into(), 1.0)]));
        let req = Resources::from([("cpu".into(), 0.5)]);
        assert!(least_allocated_score(&idle, &req) > least_allocated_score(&busy, &req));
        let msg = unschedulable_message(
            4,
            &[
                "Insufficient cpu".into(),
                "node(s) had untolerated taint {a: }".into(),
                "Insufficient cpu".into(),
            ],
        );
        assert_eq!(
            msg,
            "0/4 nodes are available: 1 node(s) had untolerated taint {a: }, 2 Insufficient cpu."
        );
    }
}
