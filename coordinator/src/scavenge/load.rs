//! Cluster load for admission: allocatable and requested resources from the Node and Pod
//! watches, measured use from the gossip view, folded into a [`ClusterLoad`].

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt as _;
use telemesh_core::fit::{self, NodeInfo, Resources};
use telemesh_core::policy::{Metrics as _, Reading};
use telemesh_core::scavenge::JOB_LABEL;
use telemesh_core::scavenge::controller::{ClusterLoad, USE_RESOURCES, run_requests};
use telemesh_core::scavenge::crd::{Phase, ScavengerJob};

use crate::view::Snapshot;

/// The gossip metric that gives a node's measured use of each resource.
fn measured_metric(resource: &str) -> Option<&'static str> {
    match resource {
        "cpu" => Some("node_cpu_utilization_ratio"),
        "memory" => Some("node_memory_utilization_ratio"),
        _ => None,
    }
}

/// The load of the cluster: schedulable nodes' allocatable; requests of unfinished pods other
/// than scavengers that are bound or that the scheduler has tried to place (nominated for a
/// node after preemption, or unschedulable: demand waiting for room, which scavengers must
/// not take), plus the declared requests of every ScavengerJob in `scavengers` (running or
/// starting); measured use, weighted by allocatable, over the nodes with figures fresh at
/// `now_ms` (cluster time).
pub fn cluster_load<'a>(
    nodes: &[std::sync::Arc<Node>],
    pods: &[std::sync::Arc<Pod>],
    scavengers: impl IntoIterator<Item = &'a ScavengerJob>,
    view: &Snapshot,
    now_ms: u64,
    stale_after: Duration,
) -> ClusterLoad {
    let mut load = ClusterLoad::default();
    let mut measured_used = Resources::new();
    let mut measured_allocatable = Resources::new();
    for node in nodes {
        if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
            continue;
        }
        let info = NodeInfo::new(node, std::iter::empty());
        let readings = view.readings(&node.name_any(), now_ms, stale_after);
        for r in USE_RESOURCES {
            let allocatable = info.allocatable.get(r).copied().unwrap_or(0.0);
            *load.allocatable.entry(r.to_owned()).or_default() += allocatable;
            if let Some(Reading::Fresh(v)) = measured_metric(r).map(|m| readings.reading(m)) {
                *measured_used.entry(r.to_owned()).or_default() += v.clamp(0.0, 1.0) * allocatable;
                *measured_allocatable.entry(r.to_owned()).or_default() += allocatable;
            }
        }
    }
    for (r, used) in measured_used {
        let allocatable = measured_allocatable.get(&r).copied().unwrap_or(0.0);
        if allocatable > 0.0 {
            load.measured.insert(r, used / allocatable);
        }
    }
    for pod in pods {
        let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
        let status = pod.status.as_ref();
        let finished = status
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|p| p == "Succeeded" || p == "Failed");
        let waiting_for_room = status.is_some_and(|s| {
            s.nominated_node_name.is_some()
                || s.conditions.iter().flatten().any(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("Unschedulable")
                })
        });
        if !(bound || waiting_for_room) || finished || pod.labels().contains_key(JOB_LABEL) {
            continue;
        }
        add(&mut load.requested, &fit::pod_requests(pod));
    }
    for sj in scavengers {
        add(&mut load.requested, &run_requests(sj));
    }
    load
}

fn add(total: &mut Resources, more: &Resources) {
    for r in USE_RESOURCES {
        if let Some(v) = more.get(r) {
            *total.entry(r.to_owned()).or_default() += v;
        }
    }
}

/// Whether `sj` holds capacity: Running.
pub fn holds_capacity(sj: &ScavengerJob) -> bool {
    sj.phase() == Phase::Running
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;
    use std::time::{SystemTime, UNIX_EPOCH};

    use serde_json::json;
    use telemesh_core::gossip::{Liveness, NodeState};

    use super::*;
    use crate::view::NodeEntry;

    fn node(name: &str, cpu: &str, unschedulable: bool) -> Arc<Node> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"unschedulable": unschedulable},
                "status": {"allocatable": {"cpu": cpu, "memory": "10Gi", "pods": "110"}}
            }))
            .unwrap(),
        )
    }

    fn pod(cpu: &str, node: Option<&str>, phase: &str, scavenger: bool) -> Arc<Pod> {
        pod_with(cpu, node, json!({"phase": phase}), scavenger)
    }

    fn pod_with(
        cpu: &str,
        node: Option<&str>,
        status: serde_json::Value,
        scavenger: bool,
    ) -> Arc<Pod> {
        let labels = if scavenger {
            json!({JOB_LABEL: "x"})
        } else {
            json!({})
        };
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "p", "labels": labels},
                "spec": {"nodeName": node, "containers": [{"name": "c",
                    "resources": {"requests": {"cpu": cpu}}}]},
                "status": status
            }))
            .unwrap(),
        )
    }

    #[test]
    fn requested_counts_ordinary_pods_placed_or_waiting_for_room_and_running_scavengers() {
        let nodes = [
            node("a", "4", false),
            node("b", "4", false),
            node("c", "4", true),
        ];
        let pods = [
            pod("1", Some("a"), "Running", false),
            pod("500m", Some("b"), "Pending", false),
            pod("2", None, "Pending", false),
            pod("2", Some("a"), "Succeeded", false),
            pod("2", Some("a"), "Running", true),
            // Waiting for room: nominated after preemption, or found unschedulable.
            pod_with(
                "300m",
                None,
                json!({"phase": "Pending", "nominatedNodeName": "b"}),
                false,
            ),
            pod_with(
                "200m",
                None,
                json!({"phase": "Pending", "conditions": [{"type": "PodScheduled",
                "status": "False", "reason": "Unschedulable"}]}),
                false,
            ),
        ];
        let sj: ScavengerJob = serde_json::from_value(json!({
            "metadata": {"name": "s", "namespace": "n"},
            "spec": {"image": "i", "checkpointInterval": "1m", "parallelism": 2,
                     "resources": {"requests": {"cpu": "250m"}}},
            "status": {"phase": "Running"}
        }))
        .unwrap();
        let load = cluster_load(
            &nodes,
            &pods,
            [&sj],
            &Snapshot::default(),
            0,
            Duration::from_secs(45),
        );
        assert_eq!(
            load.allocatable["cpu"], 8.0,
            "the cordoned node does not count"
        );
        assert_eq!(load.requested["cpu"], 2.5);
        assert!(load.measured.is_empty());
        assert!(holds_capacity(&sj));
    }

    #[test]
    fn measured_use_is_weighted_by_allocatable_over_fresh_nodes() {
        let nodes = [
            node("a", "2", false),
            node("b", "6", false),
            node("c", "4", false),
        ];
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let state = |ratio: f64, at: u128| {
            let value = format!("{ratio}@{at}");
            NodeState::from_key_values([
                ("v", "1"),
                ("role", "agent"),
                ("m:node_cpu_utilization_ratio", value.as_str()),
            ])
        };
        let view = Snapshot::from_entries([
            NodeEntry::new("a", 1, Liveness::Live, state(1.0, now)),
            NodeEntry::new("b", 1, Liveness::Live, state(0.2, now)),
            NodeEntry::new("c", 1, Liveness::Live, state(0.9, now - 600_000)),
        ]);
        let now_ms = u64::try_from(now).unwrap();
        let load = cluster_load(&nodes, &[], [], &view, now_ms, Duration::from_secs(45));
        // (1.0 × 2 + 0.2 × 6) / 8; c is stale.
        assert!((load.measured["cpu"] - 0.4).abs() < 1e-9, "{load:?}");
        assert!(!load.measured.contains_key("memory"));
    }
}
