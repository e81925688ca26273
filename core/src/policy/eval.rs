//! Evaluating rules against one node's metrics: which rules are violated, whether a strategy
//! is, and which labeling labels the node should carry.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::rule::{Labeling, LogicalOperator, Operator, Rule, RuleSet};
use crate::gossip::NodeState;

/// What is known of a metric on a node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reading {
    /// Measured within `stale_after`.
    Fresh(f64),
    /// Measured, but longer ago than `stale_after`: treated as unknown.
    Stale(f64),
    /// Never published by this node.
    Missing,
}

// === impl Reading ===

impl Reading {
    /// The value if fresh.
    pub fn fresh(self) -> Option<f64> {
        match self {
            Self::Fresh(v) => Some(v),
            Self::Stale(_) | Self::Missing => None,
        }
    }
}

/// What a rule whose metric is stale or missing counts as. TAS never expires values and counts
/// a missing one as not violating; we expire them and let the operator choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Unknown {
    /// The rule is not violated (TAS's behaviour for missing metrics; the default).
    #[default]
    NotViolating,
    /// The rule is violated: a node that stops reporting is treated as breaking it.
    Violating,
}

/// A node's metrics as rules see them.
pub trait Metrics {
    /// The reading of the metric a policy names (with or without `node_`).
    fn reading(&self, metric: &str) -> Reading;
}

/// A gossiped [`NodeState`] read at `now`: values older than `stale_after` are stale.
#[derive(Debug, Clone, Copy)]
pub struct NodeReadings<'a> {
    /// The node's state.
    pub state: &'a NodeState,
    /// The reader's clock.
    pub now: SystemTime,
    /// Age beyond which a value is unknown.
    pub stale_after: Duration,
}

impl Metrics for NodeReadings<'_> {
    fn reading(&self, metric: &str) -> Reading {
        match self.state.metric(metric) {
            None => Reading::Missing,
            Some(v) => match v.fresh(self.now, self.stale_after) {
                Some(value) => Reading::Fresh(value),
                None => Reading::Stale(v.value),
            },
        }
    }
}

/// A plain map of fresh values, for the agent's own latest collection and for tests.
impl Metrics for BTreeMap<String, f64> {
    fn reading(&self, metric: &str) -> Reading {
        let found = self.get(metric).or_else(|| {
            metric
                .strip_prefix("node_")
                .and_then(|bare| self.get(bare))
                .or_else(|| self.get(&format!("node_{metric}")))
        });
        found.map_or(Reading::Missing, |v| Reading::Fresh(*v))
    }
}

/// One rule's outcome on a node.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleOutcome {
    /// Index of the rule in its strategy.
    pub index: usize,
    /// The rule.
    pub rule: Rule,
    /// What was known of its metric.
    pub reading: Reading,
    /// Whether it counts as violated (unknown readings per [`Unknown`]).
    pub violated: bool,
}

/// A strategy's outcome on a node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Verdict {
    /// Whether the strategy is violated as a whole.
    pub violated: bool,
    /// Every rule's outcome, in order.
    pub rules: Vec<RuleOutcome>,
}

// === impl Verdict ===

impl Verdict {
    /// The violated rules.
    pub fn violating_rules(&self) -> impl Iterator<Item = &RuleOutcome> {
        self.rules.iter().filter(|r| r.violated)
    }

    /// A reason a person reads: `"policy ns/p dontschedule: temperature GreaterThan 80 (value 93.5)"`.
    pub fn reason(&self, policy_key: &str, strategy: &str) -> String {
        let mut out = format!("policy {policy_key} {strategy}:");
        for (i, r) in self.violating_rules().enumerate() {
            if i > 0 {
                out.push(';');
            }
            let value = match r.reading {
                Reading::Fresh(v) => crate::gossip::schema::format_f64(v),
                Reading::Stale(v) => format!("stale {}", crate::gossip::schema::format_f64(v)),
                Reading::Missing => "missing".into(),
            };
            out.push_str(&format!(" {} (value {value})", r.rule));
        }
        out
    }
}

/// Evaluates one rule.
pub fn evaluate_rule(
    index: usize,
    rule: &Rule,
    metrics: &impl Metrics,
    unknown: Unknown,
) -> RuleOutcome {
    let reading = metrics.reading(&rule.metric);
    let violated = match reading.fresh() {
        Some(v) => rule.operator.holds(v, rule.target),
        None => unknown == Unknown::Violating,
    };
    RuleOutcome {
        index,
        rule: rule.clone(),
        reading,
        violated,
    }
}

// === impl RuleSet ===

impl RuleSet {
    /// Evaluates the rules and combines them: `anyOf` is violated by one violated rule,
    /// `allOf` only when every rule is.
    pub fn evaluate(&self, metrics: &impl Metrics, unknown: Unknown) -> Verdict {
        let rules: Vec<RuleOutcome> = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| evaluate_rule(i, r, metrics, unknown))
            .collect();
        let violated = combine(self.logical, &rules);
        Verdict { violated, rules }
    }
}

fn combine(logical: LogicalOperator, rules: &[RuleOutcome]) -> bool {
    match logical {
        LogicalOperator::AnyOf => rules.iter().any(|r| r.violated),
        LogicalOperator::AllOf => !rules.is_empty() && rules.iter().all(|r| r.violated),
    }
}

// === impl Labeling ===

impl Labeling {
    /// The labels this strategy puts on the node, full keys
    /// (`telemetry.aware.scheduling.<policy>/<key>`) to values, with the verdict. With `allOf`,
    /// no label unless every rule is violated. Several violated rules setting one key: for
    /// `GreaterThan` the rule with the largest value wins, for `LessThan` the smallest, and on a
    /// tie (or for `Equals`) the earliest rule, so the outcome is stable (TAS: random).
    pub fn labels(
        &self,
        policy_name: &str,
        metrics: &impl Metrics,
        unknown: Unknown,
    ) -> (BTreeMap<String, String>, Verdict) {
        let rules: Vec<RuleOutcome> = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| evaluate_rule(i, &r.rule, metrics, unknown))
            .collect();
        let violated = combine(self.logical, &rules);
        let mut chosen: BTreeMap<&str, (&str, Option<f64>, Operator)> = BTreeMap::new();
        if violated {
            for (outcome, rule) in rules.iter().zip(&self.rules) {
                if !outcome.violated {
                    continue;
                }
                let value = outcome.reading.fresh();
                for (key, label_value) in &rule.labels {
                    match chosen.get(key.as_str()) {
                        Some((_, best, op)) if !beats(*op, value, *best) => {}
                        _ => {
                            chosen.insert(key, (label_value, value, rule.rule.operator));
                        }
                    }
                }
            }
        }
        let prefix = super::labeling_prefix(policy_name);
        let labels = chosen
            .into_iter()
            .map(|(k, (v, _, _))| (format!("{prefix}{k}"), v.to_owned()))
            .collect();
        (labels, Verdict { violated, rules })
    }
}

/// Whether a later rule's value beats the current choice for a shared label key. A known value
/// beats an unknown one; equal values keep the earlier rule.
fn beats(op: Operator, candidate: Option<f64>, current: Option<f64>) -> bool {
    match (candidate, current) {
        (Some(c), Some(b)) => match op {
            Operator::GreaterThan => c > b,
            Operator::LessThan => c < b,
            Operator::Equals => false,
        },
        (Some(_), None) => true,
        (None, _) => false,
    }
}
