//! The agent's own Prometheus metrics: the node metrics it publishes, collection duration,
//! gossip peers and dropped packets. One registry per agent (no globals), so tests running
//! several agents in one process keep them apart.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// A node metric's name as a label (bounded: the collectors' catalogue plus imported series).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MetricLabel {
    /// Metric name.
    pub metric: String,
}

/// Peer liveness, as a label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Liveness {
    /// Alive per the failure detector.
    Alive,
    /// Dead per the failure detector.
    Dead,
}

/// Labels of the gossip peer gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PeerLabels {
    /// Alive or dead.
    pub state: Liveness,
}

/// Why a gossip datagram was dropped (bounded set, named by the gossip layer).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DropLabels {
    /// Reason.
    pub reason: String,
}

/// Direction of gossip traffic, as a label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Direction {
    /// Received on the public gossip socket.
    In,
    /// Sent from the public gossip socket.
    Out,
}

/// Labels of the gossip traffic counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DirectionLabels {
    /// In or out.
    pub direction: Direction,
}

/// Labels of the label-write counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LabelWriteLabels {
    /// `set` or `removed`.
    pub action: String,
}

/// Labels of the eviction counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvictionLabels {
    /// What the attempt did (`evicted`, `blocked_by_budget`, `dry_run`, ...).
    pub outcome: String,
}

/// Labels of the reward gauges (bounded by --reward-max-types).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PodTypeLabel {
    /// `<namespace>/<type>`.
    pub pod_type: String,
}

/// Handles to the agent's metrics.
#[derive(Clone, Debug)]
pub struct AgentMetrics {
    /// Last value of each node metric measured.
    pub node_metric: Family<MetricLabel, Gauge<f64, AtomicU64>>,
    /// Time one collection cycle takes.
    pub collection_seconds: Histogram,
    /// Gossip peers by liveness.
    pub gossip_peers: Family<PeerLabels, Gauge>,
    /// 1 while a live coordinator replica in this agent's gossip uses another cell count.
    pub gossip_cell_count_mismatch: Gauge,
    /// Gossip datagrams dropped, by reason.
    pub gossip_dropped: Family<DropLabels, Counter>,
    /// Gossip bytes on the wire (sealed), by direction.
    pub gossip_bytes: Family<DirectionLabels, Counter>,
    /// Gossip datagrams, by direction.
    pub gossip_datagrams: Family<DirectionLabels, Counter>,
    /// Version 1 gossip frames opened (a rolling upgrade still under way).
    pub gossip_v1_frames: Counter,
    /// Correction applied to this node's clock from its gossip peers' send times.
    pub gossip_clock_correction: Gauge<f64, AtomicU64>,
    /// Metric values published to gossip.
    pub published: Counter,
    /// Exchanges started with coordinator replicas at once because a publication flipped a
    /// dontschedule verdict or removed a metric ([`crate::collection::verdict_push`]).
    pub verdict_pushes: Counter,
    /// Node labels written by policies, by action.
    pub labels_written: Family<LabelWriteLabels, Counter>,
    /// Eviction attempts by outcome.
    pub evictions: Family<EvictionLabels, Counter>,
    /// Pressure eviction attempts of scavenger pods by outcome.
    pub scavenger_evictions: Family<EvictionLabels, Counter>,
    /// Policies this node violates now (any strategy).
    pub policies_violated: Gauge,
    /// Writes outside this node refused, by target ([`crate::enforcement::scope`]).
    pub node_scope_refusals: Family<crate::enforcement::scope::RefusalLabels, Counter>,
    /// Reward (posterior mean) of each pod type on this node.
    pub reward: Family<PodTypeLabel, Gauge<f64, AtomicU64>>,
    /// Evidence (decayed weighted observations) behind each reward.
    pub reward_evidence: Family<PodTypeLabel, Gauge<f64, AtomicU64>>,
}

impl AgentMetrics {
    /// Registers the metrics under `registry` (give it the `telemesh_agent` prefix).
    pub fn register(registry: &mut Registry) -> Self {
        let node_metric = Family::default();
        let collection_seconds = Histogram::new(exponential_buckets(0.000_05, 2.0, 14));
        let gossip_peers = Family::default();
        let gossip_dropped = Family::default();
        let gossip_bytes = Family::default();
        let gossip_datagrams = Family::default();
        let published = Counter::default();
        let verdict_pushes = Counter::default();
        let gossip_v1_frames = Counter::default();
        let gossip_clock_correction = Gauge::default();
        registry.register(
            "gossip_v1_frames",
            "Version 1 gossip frames (no replay protection) opened; zero once a rolling upgrade is over",
            gossip_v1_frames.clone(),
        );
        registry.register(
            "gossip_clock_correction_seconds",
            "Correction applied to this node's clock, estimated from its gossip peers' send times (cluster minus local)",
            gossip_clock_correction.clone(),
        );
        registry.register(
            "node_metric",
            "Last value of each node metric the agent measured",
            node_metric.clone(),
        );
        registry.register(
            "collection_seconds",
            "Time one collection cycle takes",
            collection_seconds.clone(),
        );
        registry.register(
            "gossip_peers",
            "Gossip members by liveness",
            gossip_peers.clone(),
        );
        let gossip_cell_count_mismatch = Gauge::default();
        registry.register(
            "gossip_cell_count_mismatch",
            "1 while a live coordinator replica in this agent's gossip cell runs with another --gossip-cells",
            gossip_cell_count_mismatch.clone(),
        );
        registry.register(
            "gossip_dropped_packets",
            "Gossip datagrams dropped, by reason",
            gossip_dropped.clone(),
        );
        registry.register(
            "gossip_bytes",
            "Gossip bytes on the wire (sealed), by direction",
            gossip_bytes.clone(),
        );
        registry.register(
            "gossip_datagrams",
            "Gossip datagrams on the public socket, by direction",
            gossip_datagrams.clone(),
        );
        registry.register(
            "published_values",
            "Metric values published to gossip",
            published.clone(),
        );
        registry.register(
            "gossip_verdict_pushes",
            "Gossip exchanges started with coordinator replicas ahead of the round because a publication flipped a dontschedule verdict or removed a metric",
            verdict_pushes.clone(),
        );
        let labels_written = Family::default();
        let evictions = Family::default();
        let policies_violated = Gauge::default();
        let scavenger_evictions = Family::default();
        registry.register(
            "scavenger_evictions",
            "Eviction attempts of scavenger pods under sustained node pressure, by outcome",
            scavenger_evictions.clone(),
        );
        registry.register(
            "policy_labels_written",
            "Node labels set or removed because of TASPolicies",
            labels_written.clone(),
        );
        registry.register(
            "evictions",
            "Eviction attempts of pods linked to a violated deschedule policy, by outcome",
            evictions.clone(),
        );
        registry.register(
            "policies_violated",
            "TASPolicies this node violates now (any strategy)",
            policies_violated.clone(),
        );
        let node_scope_refusals = Family::default();
        registry.register(
            "node_scope_refusals",
            "Writes outside this agent's node it refused, by target (pod: an eviction, status: a TASPolicy status entry)",
            node_scope_refusals.clone(),
        );
        let reward = Family::default();
        let reward_evidence = Family::default();
        registry.register(
            "reward",
            "Reward (posterior mean, 0..1) of each pod type on this node",
            reward.clone(),
        );
        registry.register(
            "reward_evidence",
            "Decayed weighted observations behind each pod type's reward",
            reward_evidence.clone(),
        );
        Self {
            node_metric,
            collection_seconds,
            gossip_peers,
            gossip_cell_count_mismatch,
            gossip_dropped,
            gossip_bytes,
            gossip_datagrams,
            gossip_v1_frames,
            gossip_clock_correction,
            published,
            verdict_pushes,
            labels_written,
            evictions,
            scavenger_evictions,
            policies_violated,
            node_scope_refusals,
            reward,
            reward_evidence,
        }
    }

    /// The handle that logs and counts refusals of writes outside this node.
    pub fn refusals(&self) -> crate::enforcement::scope::Refusals {
        crate::enforcement::scope::Refusals::new(self.node_scope_refusals.clone())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn metrics_encode_with_their_prefix() {
        let mut registry = Registry::with_prefix("telemesh_agent");
        let m = AgentMetrics::register(&mut registry);
        m.node_metric
            .get_or_create(&MetricLabel {
                metric: "node_cpu_utilization_ratio".into(),
            })
            .set(0.25);
        m.gossip_dropped
            .get_or_create(&DropLabels {
                reason: "no_key_opens".into(),
            })
            .inc();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("telemesh_agent_node_metric{metric=\"node_cpu_utilization_ratio\"} 0.25"),
            "{text}"
        );
        assert!(
            text.contains("telemesh_agent_gossip_dropped_packets_total{reason=\"no_key_opens\"} 1"),
            "{text}"
        );
    }
}
