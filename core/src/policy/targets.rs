//! The targets of every threshold rule (`dontschedule`, `deschedule`, `labeling`), by the metric
//! they read: the values a publication deadband must never hide a crossing of.
//!
//! An agent decides its rules on its own latest reading, and so does TAS, while the extender
//! decides on the value the agent last published to gossip. Between the two sits the agent's
//! deadband, which holds back moves smaller than a few percent. Held back across a target (a
//! node at 7.95 reading 8.05 against `GreaterThan 8`), the two values decide the rule
//! differently. A rule compares its value with its target only by order (`<`, `>`, `==`), so
//! two values decide every rule on a metric alike exactly when they sit on the same side of (or
//! both on) each of that metric's targets: [`Targets::crossed`] says when a move leaves that
//! side, and the agent publishes such a move whatever its size.

use std::cmp::Ordering;
use std::collections::HashMap;

use super::rule::Rule;
use crate::metric::MetricName;

/// Every threshold rule's target, by the metric name the rule uses (full or without `node_`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Targets {
    by_metric: HashMap<String, Vec<f64>>,
}

// === impl Targets ===

impl Targets {
    /// The targets of `rules`, by the metric name each uses: for a set of policies, their
    /// [`Policy::threshold_rules`](super::Policy::threshold_rules).
    pub fn from_rules<'r>(rules: impl IntoIterator<Item = &'r Rule>) -> Self {
        let mut by_metric: HashMap<String, Vec<f64>> = HashMap::new();
        for rule in rules {
            by_metric
                .entry(rule.metric.clone())
                .or_default()
                .push(rule.target);
        }
        for targets in by_metric.values_mut() {
            targets.sort_by(f64::total_cmp);
            targets.dedup();
        }
        Self { by_metric }
    }

    /// Whether no rule has a target.
    pub fn is_empty(&self) -> bool {
        self.by_metric.is_empty()
    }

    /// Whether metric `name` moving from `old` to `new` changes how some rule reading it (by
    /// its full name or without `node_`) compares it with its target: `old` and `new` sit on
    /// different sides of a target, or one of them on it.
    pub fn crossed(&self, name: &MetricName, old: f64, new: f64) -> bool {
        let full = self.by_metric.get(name.as_str());
        let short = (name.adapter_name() != name.as_str())
            .then(|| self.by_metric.get(name.adapter_name()))
            .flatten();
        full.into_iter()
            .chain(short)
            .flatten()
            .any(|t| side(old, *t) != side(new, *t))
    }
}

/// Where `value` sits against `target`. Values and targets are finite (policies refuse other
/// targets, collectors drop other values); a NaN counts as unordered, so it crosses every target.
fn side(value: f64, target: f64) -> Option<Ordering> {
    value.partial_cmp(&target)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::policy::{Metrics, Policy, Unknown};

    fn policy(strategies: &str) -> Policy {
        Policy::compile(&crate::testing::tas_policy("default", "p", strategies))
    }

    fn name(s: &str) -> MetricName {
        MetricName::new(s).unwrap()
    }

    const RULES: &str = "    dontschedule:\n      rules:\n      \
        - {metricname: node_load1, operator: GreaterThan, target: 8}\n    \
        deschedule:\n      rules:\n      \
        - {metricname: memory_bytes, operator: LessThan, target: 2000000000}\n    \
        labeling:\n      rules:\n      \
        - {metricname: node_metric, operator: Equals, target: -1, labels: [health=bad]}\n    \
        scheduleonmetric:\n      rules:\n      \
        - {metricname: node_rank, operator: GreaterThan, target: 0}\n";

    #[test]
    fn a_move_across_or_onto_a_target_is_a_crossing() {
        let p = policy(RULES);
        let t = Targets::from_rules(p.threshold_rules());
        let load = name("node_load1");
        assert!(t.crossed(&load, 7.95, 8.05));
        assert!(t.crossed(&load, 8.05, 7.95));
        assert!(t.crossed(&load, 7.95, 8.0), "onto the target");
        assert!(t.crossed(&load, 8.0, 8.05), "off the target");
        assert!(!t.crossed(&load, 8.05, 9.0));
        assert!(!t.crossed(&load, 1.0, 7.99));
        // A rule names a metric by its full name or without `node_`.
        let mem = name("node_memory_bytes");
        assert!(t.crossed(&mem, 2_000_000_001.0, 1_999_999_999.0));
        assert!(!t.crossed(&mem, 2_000_000_001.0, 2_000_000_002.0));
        let metric = name("node_metric");
        assert!(t.crossed(&metric, 50.0, -1.0) && t.crossed(&metric, -1.0, -0.5));
        // scheduleonmetric ranks and has no threshold; unnamed metrics have none either.
        assert!(!t.crossed(&name("node_rank"), -1.0, 1.0));
        assert!(!t.crossed(&name("node_other"), -1.0, 1.0));
        assert!(Targets::from_rules([]).is_empty());
    }

    /// What the targets are for: two values no crossing separates decide every rule alike,
    /// whatever the operator and however close to the target.
    #[test]
    fn values_without_a_crossing_between_them_decide_every_rule_alike() {
        let p = policy(
            "    dontschedule:\n      rules:\n      \
             - {metricname: node_x, operator: GreaterThan, target: 1000000}\n      \
             - {metricname: node_x, operator: LessThan, target: 10}\n      \
             - {metricname: node_x, operator: Equals, target: 500}\n",
        );
        let t = Targets::from_rules(p.threshold_rules());
        let x = name("node_x");
        let rules = &p.dont_schedule.as_ref().unwrap().rules;
        let verdicts = |v: f64| -> Vec<bool> {
            let values: std::collections::BTreeMap<String, f64> = [("node_x".to_owned(), v)].into();
            rules
                .iter()
                .map(|r| r.violated_by(values.reading(&r.metric), Unknown::NotViolating))
                .collect()
        };
        let values = [
            -1.0,
            9.0,
            10.0,
            11.0,
            499.0,
            500.0,
            501.0,
            999_999.0,
            1_000_000.0,
            1_000_001.0,
            2e9,
        ];
        for &a in &values {
            for &b in &values {
                if !t.crossed(&x, a, b) {
                    assert_eq!(verdicts(a), verdicts(b), "{a} and {b}");
                }
            }
        }
    }
}
