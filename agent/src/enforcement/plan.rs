//! The policy pass's decision, pure: given every compiled policy, this node's readings, when
//! each deschedule violation began and the settings, [`plan`] says what the node should look
//! like — the labels it wants and why, its entry in each policy's status, its `v:` gossip
//! values, whether it breaks a dontschedule rule, and which policies' pods are due for
//! eviction. [`crate::enforcement`] calls it every period and writes the result.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use telemesh_core::gossip::{MetricValue, NodeState};
use telemesh_core::metric::Sample;
use telemesh_core::policy::crd::{NodeViolation, ViolatedRule};
use telemesh_core::policy::{NodeReadings, Policy, RuleOutcome, TASPolicy, VIOLATING, Verdict};

use crate::config::PolicyConfig;

/// Builds the node state the rules read: the latest samples, stamped with their collection time.
pub fn node_state(samples: &[Sample], at: SystemTime) -> NodeState {
    let mut state = NodeState::default();
    for s in samples {
        if let Ok(v) = MetricValue::new(&s.name, s.value, at) {
            state.metrics.insert(s.name.clone(), v);
        }
    }
    state
}

/// One policy's outcome on this node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Outcomes {
    /// `dontschedule`, if the policy has it.
    pub dont_schedule: Option<Verdict>,
    /// `deschedule`, if the policy has it.
    pub deschedule: Option<Verdict>,
    /// `labeling` verdict and the labels it wants.
    pub labeling: Option<(BTreeMap<String, String>, Verdict)>,
}

impl Outcomes {
    /// Evaluates a compiled policy against `readings`.
    pub fn evaluate(policy: &Policy, readings: &NodeReadings<'_>, config: &PolicyConfig) -> Self {
        Self {
            dont_schedule: policy
                .dont_schedule
                .as_ref()
                .map(|s| s.evaluate(readings, config.unknown)),
            deschedule: policy
                .deschedule
                .as_ref()
                .map(|s| s.evaluate(readings, config.unknown)),
            labeling: policy
                .labeling
                .as_ref()
                .map(|l| l.labels(&policy.name, readings, config.unknown)),
        }
    }

    /// The violated strategies with their verdicts, in a fixed order.
    pub fn violated(&self) -> Vec<(&'static str, &Verdict)> {
        let mut out = Vec::new();
        if let Some(v) = self.deschedule.as_ref().filter(|v| v.violated) {
            out.push(("deschedule", v));
        }
        if let Some(v) = self.dont_schedule.as_ref().filter(|v| v.violated) {
            out.push(("dontschedule", v));
        }
        if let Some((_, v)) = self.labeling.as_ref().filter(|(_, v)| v.violated) {
            out.push(("labeling", v));
        }
        out
    }

    /// This node's status entry (`since` left empty), or `None` when nothing is violated.
    pub fn status_entry(&self) -> Option<NodeViolation> {
        let violated = self.violated();
        if violated.is_empty() {
            return None;
        }
        let mut entry = NodeViolation::default();
        for (strategy, verdict) in violated {
            entry.strategies.push(strategy.to_owned());
            entry.rules.extend(
                verdict
                    .violating_rules()
                    .map(|r| violated_rule(strategy, r)),
            );
        }
        Some(entry)
    }
}

fn violated_rule(strategy: &str, r: &RuleOutcome) -> ViolatedRule {
    ViolatedRule {
        strategy: strategy.to_owned(),
        metricname: r.rule.metric.clone(),
        operator: r.rule.operator.as_str().to_owned(),
        target: r.rule.target,
        // Unknown readings count as violated only under `--unknown-metrics violating`.
        value: r.reading.fresh(),
    }
}

/// When each policy's deschedule rules began to be violated here, by `namespace/name`: the
/// eviction grace counts from it. Carried from one pass to the next.
pub type ViolatingSince = HashMap<String, Instant>;

/// A policy's status entry for this node (`None`: the node violates nothing of it).
#[derive(Debug, Clone)]
pub struct StatusEntry {
    /// The policy as stored (its status is patched).
    pub raw: Arc<TASPolicy>,
    /// The policy as compiled (its problems are written).
    pub policy: Arc<Policy>,
    /// The entry the node should have.
    pub entry: Option<NodeViolation>,
}

/// A deschedule policy whose pods on this node are due for eviction, and why.
#[derive(Debug, Clone)]
pub struct Eviction {
    /// The policy (its linked pods go).
    pub policy: Arc<Policy>,
    /// The reason the evictions give.
    pub reason: String,
}

/// What one pass wants of the node.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    /// The policy labels the node should carry.
    pub labels: BTreeMap<String, String>,
    /// Why each of [`Plan::labels`] is wanted (for the label Events).
    pub reasons: BTreeMap<String, String>,
    /// The violated strategies of each violated policy (`deschedule,labeling`), by
    /// `namespace/name`: the node's `v:` gossip values.
    pub violations: BTreeMap<String, String>,
    /// Each current policy's status entry, in the policies' order.
    pub statuses: Vec<StatusEntry>,
    /// Whether the node breaks a dontschedule rule (the recovery signal's input).
    pub breaking_dont_schedule: bool,
    /// Deschedule policies violated for longer than the eviction grace (empty when eviction
    /// is off).
    pub evict: Vec<Eviction>,
    /// The next pass's [`ViolatingSince`]: current violations only.
    pub violating_since: ViolatingSince,
}

/// Decides one pass. `policies` come sorted by `namespace/name` ([`crate::watch::policies::Compiled`]):
/// when two policies of one name in two namespaces want one label key, the first wins it.
pub fn plan(
    policies: &[(Arc<TASPolicy>, Arc<Policy>)],
    readings: &NodeReadings<'_>,
    violating_since: &ViolatingSince,
    now: Instant,
    config: &PolicyConfig,
) -> Plan {
    let mut plan = Plan::default();
    for (raw, policy) in policies {
        let key = policy.key();
        let outcomes = Outcomes::evaluate(policy, readings, config);
        plan.breaking_dont_schedule |= outcomes.dont_schedule.as_ref().is_some_and(|v| v.violated);
        if let Some(v) = outcomes.deschedule.as_ref().filter(|v| v.violated) {
            let reason = v.reason(&key, "deschedule");
            let label = policy.violator_label_key().to_owned();
            plan.labels.insert(label.clone(), VIOLATING.to_owned());
            plan.reasons.insert(label, reason.clone());
            let since = *violating_since.get(&key).unwrap_or(&now);
            plan.violating_since.insert(key.clone(), since);
            if config
                .eviction
                .as_ref()
                .is_some_and(|e| now.duration_since(since) >= e.grace)
            {
                plan.evict.push(Eviction {
                    policy: policy.clone(),
                    reason,
                });
            }
        }
        if let Some((labels, verdict)) = &outcomes.labeling {
            for (k, v) in labels {
                if !plan.labels.contains_key(k) {
                    plan.labels.insert(k.clone(), v.clone());
                    plan.reasons
                        .insert(k.clone(), verdict.reason(&key, "labeling"));
                }
            }
        }
        let violated: Vec<&str> = outcomes.violated().iter().map(|(s, _)| *s).collect();
        if !violated.is_empty() {
            plan.violations.insert(key, violated.join(","));
        }
        plan.statuses.push(StatusEntry {
            raw: raw.clone(),
            policy: policy.clone(),
            entry: outcomes.status_entry(),
        });
    }
    plan
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use telemesh_core::metric::MetricName;
    use telemesh_core::policy::Unknown;
    use telemesh_core::testing::tas_policy;

    use super::*;
    use crate::config::EvictionConfig;

    const GRACE: Duration = Duration::from_secs(30);

    fn config(eviction: bool) -> PolicyConfig {
        PolicyConfig {
            interval: Duration::from_secs(1),
            unknown: Unknown::default(),
            stale_after: Duration::from_secs(60),
            label_cleanup: Default::default(),
            eviction: eviction.then_some(EvictionConfig {
                dry_run: false,
                max_per_minute: 10,
                min_pod_age: Duration::ZERO,
                grace: GRACE,
            }),
            recovery: crate::enforcement::recovery::RecoveryConfig {
                delay: Duration::from_secs(1),
                min_interval: Duration::from_secs(1),
            },
        }
    }

    fn compiled(namespace: &str, name: &str, strategies: &str) -> (Arc<TASPolicy>, Arc<Policy>) {
        let raw = tas_policy(namespace, name, strategies);
        let policy = Policy::compile(&raw);
        (Arc::new(raw), Arc::new(policy))
    }

    fn state(metrics: &[(&str, f64)], at: SystemTime) -> NodeState {
        let samples: Vec<Sample> = metrics
            .iter()
            .map(|(m, v)| Sample {
                name: MetricName::new(*m).unwrap(),
                value: *v,
            })
            .collect();
        node_state(&samples, at)
    }

    const DESCHEDULE: &str = "    deschedule:\n      rules:\n      \
        - {metricname: node_load1, operator: GreaterThan, target: 8}\n";
    const DONT_SCHEDULE: &str = "    dontschedule:\n      rules:\n      \
        - {metricname: node_load1, operator: GreaterThan, target: 4}\n";
    const LABELING: &str = "    labeling:\n      rules:\n      \
        - {metricname: node_load1, operator: GreaterThan, target: 2, labels: [load=high]}\n";

    /// A deschedule violation labels the node `<policy>=violating`, gives the status entry and
    /// the `v:` value, and makes the policy's pods due only once it has lasted the grace.
    #[test]
    fn a_deschedule_violation_labels_at_once_and_evicts_after_the_grace() {
        let policies = [compiled("ns", "hot", DESCHEDULE)];
        let at = SystemTime::now();
        let node = state(&[("node_load1", 9.0)], at);
        let readings = NodeReadings {
            state: &node,
            now: at,
            stale_after: Duration::from_secs(60),
        };
        let start = Instant::now();
        let first = plan(
            &policies,
            &readings,
            &ViolatingSince::new(),
            start,
            &config(true),
        );
        assert_eq!(first.labels.get("hot").map(String::as_str), Some(VIOLATING));
        assert!(
            first.reasons["hot"].contains("ns/hot"),
            "{:?}",
            first.reasons
        );
        assert_eq!(
            first.violations.get("ns/hot").map(String::as_str),
            Some("deschedule")
        );
        let entry = first.statuses[0].entry.as_ref().unwrap();
        assert_eq!(entry.strategies, ["deschedule"]);
        assert_eq!(entry.rules[0].value, Some(9.0));
        assert!(first.evict.is_empty(), "evicted before the grace");
        assert_eq!(first.violating_since.get("ns/hot"), Some(&start));

        let later = plan(
            &policies,
            &readings,
            &first.violating_since,
            start + GRACE,
            &config(true),
        );
        assert_eq!(later.evict.len(), 1);
        assert_eq!(later.evict[0].policy.key(), "ns/hot");
        assert_eq!(later.violating_since.get("ns/hot"), Some(&start));
        // Eviction off: labels alone.
        let off = plan(
            &policies,
            &readings,
            &first.violating_since,
            start + GRACE,
            &config(false),
        );
        assert!(off.evict.is_empty());
        assert_eq!(off.labels, later.labels);
    }

    /// A node back under the target loses the label, the entry, the `v:` value and its place
    /// in the grace: a new violation counts from zero.
    #[test]
    fn a_violation_that_ends_is_forgotten() {
        let policies = [compiled("ns", "hot", DESCHEDULE)];
        let at = SystemTime::now();
        let cool = state(&[("node_load1", 1.0)], at);
        let readings = NodeReadings {
            state: &cool,
            now: at,
            stale_after: Duration::from_secs(60),
        };
        let start = Instant::now();
        let held = ViolatingSince::from([("ns/hot".to_owned(), start)]);
        let plan = plan(&policies, &readings, &held, start + GRACE, &config(true));
        assert!(plan.labels.is_empty(), "{:?}", plan.labels);
        assert!(plan.violations.is_empty());
        assert!(plan.statuses[0].entry.is_none());
        assert!(plan.evict.is_empty());
        assert!(plan.violating_since.is_empty());
    }

    /// dontschedule feeds the recovery signal, labeling adds its labels; a key two policies
    /// of one name in two namespaces want goes to the first by `namespace/name`.
    #[test]
    fn dontschedule_and_labeling_and_the_first_policy_wins_a_key() {
        let both = format!("{DONT_SCHEDULE}{LABELING}");
        let policies = [
            compiled("a", "p", &both),
            compiled("b", "p", &LABELING.replace("load=high", "load=other")),
        ];
        let at = SystemTime::now();
        let node = state(&[("node_load1", 5.0)], at);
        let readings = NodeReadings {
            state: &node,
            now: at,
            stale_after: Duration::from_secs(60),
        };
        let plan = plan(
            &policies,
            &readings,
            &ViolatingSince::new(),
            Instant::now(),
            &config(true),
        );
        let key = "telemetry.aware.scheduling.p/load";
        assert!(plan.breaking_dont_schedule);
        assert_eq!(plan.labels.get(key).map(String::as_str), Some("high"));
        assert!(plan.reasons[key].contains("a/p"), "{:?}", plan.reasons);
        assert_eq!(
            plan.violations.get("a/p").map(String::as_str),
            Some("dontschedule,labeling")
        );
        assert_eq!(
            plan.violations.get("b/p").map(String::as_str),
            Some("labeling")
        );
        assert!(plan.evict.is_empty());
        assert_eq!(plan.statuses.len(), 2);
    }
}
