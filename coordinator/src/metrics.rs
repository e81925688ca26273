//! The coordinator's Prometheus metrics: one struct per component, each registered in its own
//! sub-registry of the `telemesh_coordinator` registry. Label values are enums, so
//! cardinality stays bounded.

use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// An extender verb.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Verb {
    /// filter
    Filter,
    /// prioritize
    Prioritize,
    /// preempt
    Preempt,
}

/// What an extender call decided.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Outcome {
    /// The pod names no policy: passed through.
    NoPolicy,
    /// The pod names a policy this replica does not know: passed through.
    PolicyNotFound,
    /// The policy has no strategy for this verb: passed through.
    NoStrategy,
    /// The policy was evaluated.
    Evaluated,
    /// The request was malformed: error reply.
    Malformed,
}

/// Labels of per-verb metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbLabels {
    /// The verb.
    pub verb: Verb,
}

/// Labels of decision counts.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DecisionLabels {
    /// The verb.
    pub verb: Verb,
    /// What it decided.
    pub outcome: Outcome,
}

/// Whether a node passed a filter.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum NodeResult {
    /// Kept.
    Passed,
    /// Filtered out.
    Failed,
}

/// Labels of filtered node counts.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeResultLabels {
    /// Kept or filtered out.
    pub result: NodeResult,
}

/// Whether rewards changed what an extender call answered.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum RewardEffect {
    /// Rewards were applied but the answer is what telemetry alone gives (prioritize: the
    /// same best nodes; filter: no node dropped).
    Unchanged,
    /// Rewards changed the answer (prioritize: other best nodes; filter: nodes dropped).
    Changed,
}

/// Labels of reward counts.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RewardLabels {
    /// The verb.
    pub verb: Verb,
    /// What rewards did.
    pub effect: RewardEffect,
}

/// Extender metrics.
#[derive(Clone, Debug)]
pub struct ExtenderMetrics {
    /// Server time per call, by verb.
    pub latency: Family<VerbLabels, Histogram>,
    /// Calls by verb and outcome.
    pub decisions: Family<DecisionLabels, Counter>,
    /// Candidate nodes by filter result.
    pub filtered_nodes: Family<NodeResultLabels, Counter>,
    /// Calls where rewards were applied, by verb and whether they changed the answer.
    pub reward_scored: Family<RewardLabels, Counter>,
    /// Preempt calls whose answer the victim ranker changed (victims swapped or nodes dropped).
    pub preempt_changed: Counter,
    /// Scavenger victims the scheduler chose that the ranker spared (swapped for pods with less
    /// unsaved work, or for fewer pods).
    pub victims_spared: Counter,
    /// Candidate nodes the ranker dropped because their victims lose more than another's.
    pub preempt_nodes_dropped: Counter,
    /// Unsaved work the swaps saved against the scheduler's own victims, CPU-seconds (summed
    /// over candidate nodes: the scheduler then evicts on one of them, so this is an upper
    /// estimate of what each preemption saves).
    pub loss_avoided_cpu_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
}

// === impl ExtenderMetrics ===

impl ExtenderMetrics {
    /// Registers the extender's metrics in `reg`.
    pub fn register(reg: &mut Registry) -> Self {
        // 25 µs to about 0.4 s: the extender answers in microseconds at small clusters and in
        // milliseconds for full-node bodies of thousands of nodes.
        let latency = Family::<VerbLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_025, 2.0, 15))
        });
        let decisions = Family::default();
        let filtered_nodes = Family::default();
        let reward_scored = Family::default();
        let preempt_changed = Counter::default();
        let victims_spared = Counter::default();
        let preempt_nodes_dropped = Counter::default();
        let loss_avoided_cpu_seconds = Counter::<f64, std::sync::atomic::AtomicU64>::default();
        reg.register(
            "preempt_changed",
            "Preempt calls whose answer the scavenger victim ranker changed",
            preempt_changed.clone(),
        );
        reg.register(
            "victims_spared",
            "Scheduler-chosen scavenger victims spared for pods with less unsaved work",
            victims_spared.clone(),
        );
        reg.register(
            "preempt_nodes_dropped",
            "Candidate nodes dropped from preemption because their victims lose more unsaved work",
            preempt_nodes_dropped.clone(),
        );
        reg.register(
            "loss_avoided_cpu_seconds",
            "Unsaved scavenger work the victim swaps saved against the scheduler's choice, summed over candidate nodes",
            loss_avoided_cpu_seconds.clone(),
        );
        reg.register(
            "latency_seconds",
            "Extender server time per call, by verb",
            latency.clone(),
        );
        reg.register(
            "decisions",
            "Extender calls by verb and outcome",
            decisions.clone(),
        );
        reg.register(
            "filtered_nodes",
            "Candidate nodes the filter kept or removed",
            filtered_nodes.clone(),
        );
        reg.register(
            "reward_scored",
            "Extender calls where rewards were applied, by verb and whether they changed the answer",
            reward_scored.clone(),
        );
        Self {
            latency,
            decisions,
            filtered_nodes,
            reward_scored,
            preempt_changed,
            victims_spared,
            preempt_nodes_dropped,
            loss_avoided_cpu_seconds,
        }
    }

    /// Records what the victim ranker did in one preempt call.
    pub fn ranked(&self, effect: &crate::extender::preempt::RankEffect) {
        if effect.changed() {
            self.preempt_changed.inc();
        }
        self.victims_spared.inc_by(effect.spared as u64);
        self.preempt_nodes_dropped
            .inc_by(effect.nodes_dropped as u64);
        if effect.loss_avoided > 0 {
            self.loss_avoided_cpu_seconds
                .inc_by(telemesh_core::scavenge::victims::cpu_seconds(
                    effect.loss_avoided,
                ));
        }
    }

    /// Records that rewards were applied to a call.
    pub fn rewarded(&self, verb: Verb, effect: RewardEffect) {
        self.reward_scored
            .get_or_create(&RewardLabels { verb, effect })
            .inc();
    }

    /// Records one call.
    pub fn observe(&self, verb: Verb, outcome: Outcome, elapsed: Duration) {
        self.latency
            .get_or_create(&VerbLabels { verb })
            .observe(elapsed.as_secs_f64());
        self.decisions
            .get_or_create(&DecisionLabels { verb, outcome })
            .inc();
    }

    /// Records a filter's node counts.
    pub fn filtered(&self, passed: usize, failed: usize) {
        for (result, n) in [(NodeResult::Passed, passed), (NodeResult::Failed, failed)] {
            if n > 0 {
                self.filtered_nodes
                    .get_or_create(&NodeResultLabels { result })
                    .inc_by(n as u64);
            }
        }
    }
}

/// A node's liveness, as a label.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum LivenessLabel {
    /// Heard.
    Live,
    /// Not heard.
    Dead,
    /// Announced leaving.
    Left,
}

/// Labels of the node gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LivenessLabels {
    /// Liveness.
    pub liveness: LivenessLabel,
}

/// ClusterView metrics.
#[derive(Clone, Debug)]
pub struct ViewMetrics {
    /// Nodes in the view by liveness.
    pub nodes: Family<LivenessLabels, Gauge>,
    /// Nodes whose newest metric is older than `stale_after`.
    pub stale_nodes: Gauge,
    /// Age of the oldest node's newest metric, seconds.
    pub max_age_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// Gossip key changes folded in.
    pub key_changes: Counter,
    /// Full re-reads of every member.
    pub resyncs: Counter,
    /// (pod type, node) reward estimates in the view.
    pub reward_estimates: Gauge,
    /// Reward values in the view that did not parse (skipped: those nodes count as unseen
    /// for that type).
    pub reward_values_skipped: Gauge,
    /// Malformed reward values received in key changes.
    pub reward_values_malformed: Counter,
    /// Nodes whose scavenger pods changed on a re-read after a gossip update (a pod left).
    pub scavengers_reread: Counter,
    /// Members whose keys were re-read after a gossip update, to find what they deleted.
    pub key_rereads: Counter,
    /// Metrics dropped from the view on a re-read: their agent stopped publishing them.
    pub metrics_removed: Counter,
    /// Nodes whose agent was started with another gossip cell count than this replica.
    pub cell_count_mismatches: Gauge,
    /// Live agents in the flat mesh (a rolling upgrade to cells not over).
    pub flat_mesh_agents: Gauge,
    /// 1 while this replica is in the flat mesh beside its cells.
    pub flat_mesh_joined: Gauge,
}

// === impl ViewMetrics ===

impl ViewMetrics {
    /// Registers the view's metrics in `reg`.
    pub fn register(reg: &mut Registry) -> Self {
        let m = Self {
            nodes: Family::default(),
            stale_nodes: Gauge::default(),
            max_age_seconds: Gauge::default(),
            key_changes: Counter::default(),
            resyncs: Counter::default(),
            reward_estimates: Gauge::default(),
            reward_values_skipped: Gauge::default(),
            reward_values_malformed: Counter::default(),
            scavengers_reread: Counter::default(),
            key_rereads: Counter::default(),
            metrics_removed: Counter::default(),
            cell_count_mismatches: Gauge::default(),
            flat_mesh_agents: Gauge::default(),
            flat_mesh_joined: Gauge::default(),
        };
        reg.register(
            "flat_mesh_joined",
            "1 while this replica is in the flat gossip mesh beside its cells (left once no agent is in it for --gossip-flat-mesh-grace)",
            m.flat_mesh_joined.clone(),
        );
        reg.register(
            "flat_mesh_agents",
            "Live agents gossiping in the flat mesh rather than a cell (a rolling upgrade to cells under way)",
            m.flat_mesh_agents.clone(),
        );
        reg.register(
            "cell_count_mismatches",
            "Nodes whose agent runs with another --gossip-cells than this replica (make them equal: such agents land in cells nobody serves)",
            m.cell_count_mismatches.clone(),
        );
        reg.register(
            "nodes",
            "Nodes in the cluster view by liveness",
            m.nodes.clone(),
        );
        reg.register(
            "stale_nodes",
            "Nodes whose newest metric is older than --stale-after",
            m.stale_nodes.clone(),
        );
        reg.register(
            "max_age_seconds",
            "Age of the least recently updated node's newest metric",
            m.max_age_seconds.clone(),
        );
        reg.register(
            "key_changes",
            "Gossip key changes folded into the view",
            m.key_changes.clone(),
        );
        reg.register(
            "resyncs",
            "Full re-reads of every gossip member",
            m.resyncs.clone(),
        );
        reg.register(
            "reward_estimates",
            "(pod type, node) reward estimates in the cluster view",
            m.reward_estimates.clone(),
        );
        reg.register(
            "reward_values_skipped",
            "Gossiped reward values in the cluster view that did not parse (those nodes count as unseen for that type)",
            m.reward_values_skipped.clone(),
        );
        reg.register(
            "reward_values_malformed",
            "Malformed reward values received in gossip key changes (skipped)",
            m.reward_values_malformed.clone(),
        );
        reg.register(
            "scavengers_reread",
            "Nodes whose scavenger pods changed when re-read after a gossip update (pods that left)",
            m.scavengers_reread.clone(),
        );
        reg.register(
            "key_rereads",
            "Members whose keys were re-read after a gossip update, to find what they deleted",
            m.key_rereads.clone(),
        );
        reg.register(
            "metrics_removed",
            "Metrics dropped from the cluster view when re-read after a gossip update (their agent stopped publishing them)",
            m.metrics_removed.clone(),
        );
        m
    }

    /// Sets the node gauges.
    pub fn set_nodes(&self, live: i64, dead: i64, left: i64, stale: i64) {
        for (liveness, n) in [
            (LivenessLabel::Live, live),
            (LivenessLabel::Dead, dead),
            (LivenessLabel::Left, left),
        ] {
            self.nodes
                .get_or_create(&LivenessLabels { liveness })
                .set(n);
        }
        self.stale_nodes.set(stale);
    }
}

/// Policy cache metrics.
#[derive(Clone, Debug)]
pub struct PolicyMetrics {
    /// TASPolicies in the cache.
    pub policies: Gauge,
    /// Watch errors (the watch retries with backoff).
    pub watch_errors: Counter,
}

// === impl PolicyMetrics ===

impl PolicyMetrics {
    /// Registers the policy cache's metrics in `reg`.
    pub fn register(reg: &mut Registry) -> Self {
        let m = Self {
            policies: Gauge::default(),
            watch_errors: Counter::default(),
        };
        reg.register("cached", "TASPolicies in the cache", m.policies.clone());
        reg.register(
            "watch_errors",
            "TASPolicy watch errors (retried with backoff)",
            m.watch_errors.clone(),
        );
        m
    }
}

/// What a JSON-RPC call asked for: an action method (`Create`, ...), `Get`, `Wait`, or `Unknown`
/// for a method that does not exist.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum RpcMethod {
    /// `action.<Method>`: stores an action.
    Action(telemesh_core::action::Method),
    /// action.Get
    Get,
    /// action.Wait
    Wait,
    /// No such method, or a call that could not be read.
    Unknown,
}

impl prometheus_client::encoding::EncodeLabelValue for RpcMethod {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder<'_>,
    ) -> Result<(), std::fmt::Error> {
        use std::fmt::Write as _;
        encoder.write_str(match self {
            Self::Action(method) => method.as_str(),
            Self::Get => "Get",
            Self::Wait => "Wait",
            Self::Unknown => "Unknown",
        })
    }
}

/// How a JSON-RPC call ended.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum RpcOutcome {
    /// A new action was stored.
    Accepted,
    /// An idempotency key found the action an earlier call stored.
    Existing,
    /// Get or Wait answered.
    Answered,
    /// The body or call could not be read.
    InvalidRequest,
    /// No such method.
    MethodNotFound,
    /// Params did not validate.
    InvalidParams,
    /// No valid bearer token.
    Unauthenticated,
    /// Not allowed.
    Forbidden,
    /// The action, pod, node or namespace does not exist.
    NotFound,
    /// Conflicts with what exists (idempotency key reuse, a pod not pending).
    Conflict,
    /// Bind: the node cannot take the pod.
    Unfit,
    /// The API server failed.
    Internal,
}

/// Labels of RPC call counts.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    /// The method.
    pub method: RpcMethod,
    /// How it ended.
    pub outcome: RpcOutcome,
}

/// Labels of RPC latency.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcMethodLabels {
    /// The method.
    pub method: RpcMethod,
}

/// The action API's metrics.
#[derive(Clone, Debug)]
pub struct RpcMetrics {
    /// Calls by method and outcome (`accepted`/`existing` count actions accepted).
    pub calls: Family<RpcLabels, Counter>,
    /// Server time per call, by method (Wait includes its wait).
    pub latency: Family<RpcMethodLabels, Histogram>,
}

// === impl RpcMetrics ===

impl RpcMetrics {
    /// Registers the metrics in `reg`.
    pub fn register(reg: &mut Registry) -> Self {
        // 100 µs to about 400 s: an accept is one API call; a Wait may last 300 s.
        let latency = Family::<RpcMethodLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_1, 2.5, 17))
        });
        let calls = Family::default();
        reg.register(
            "calls",
            "JSON-RPC calls by method and outcome",
            calls.clone(),
        );
        reg.register(
            "latency_seconds",
            "JSON-RPC server time per call, by method",
            latency.clone(),
        );
        Self { calls, latency }
    }

    /// Counts one call.
    pub fn observe(&self, method: RpcMethod, outcome: RpcOutcome, elapsed: Duration) {
        self.latency
            .get_or_create(&RpcMethodLabels { method })
            .observe(elapsed.as_secs_f64());
        self.calls
            .get_or_create(&RpcLabels { method, outcome })
            .inc();
    }
}
