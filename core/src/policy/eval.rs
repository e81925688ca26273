//! Evaluating rules against one node's metrics: which rules are violated, whether a strategy
//! is, and which labeling labels the node should carry.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use super::rule::{Labeling, LogicalOperator, Operator, Rule, RuleSet};
use crate::gossip::NodeState;
use crate::gossip::schema::format_f64;

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

    /// Appends the reading as reasons show it: `93.5`, `stale 93.5` or `missing`.
    pub fn write_value(self, out: &mut String) {
        match self {
            Self::Fresh(v) => out.push_str(&format_f64(v)),
            Self::Stale(v) => {
                out.push_str("stale ");
                out.push_str(&format_f64(v));
            }
            Self::Missing => out.push_str("missing"),
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

/// A plain map of fresh values (tests, and callers without measurement times).
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
            out.push_str(&format!(" {} (value ", r.rule));
            r.reading.write_value(&mut out);
            out.push(')');
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
    RuleOutcome {
        index,
        rule: rule.clone(),
        reading,
        violated: rule.violated_by(reading, unknown),
    }
}

// === impl Rule ===

impl Rule {
    /// Whether `reading` violates this rule; a stale or missing reading counts as `unknown`
    /// says.
    pub fn violated_by(&self, reading: Reading, unknown: Unknown) -> bool {
        match reading.fresh() {
            Some(v) => self.operator.holds(v, self.target),
            None => unknown == Unknown::Violating,
        }
    }
}

// === impl LogicalOperator ===

impl LogicalOperator {
    /// Combines rule outcomes: `anyOf` is violated by one violated rule, `allOf` only when
    /// there is at least one rule and every rule is.
    pub fn combine(self, mut violated: impl Iterator<Item = bool>) -> bool {
        match self {
            Self::AnyOf => violated.any(|v| v),
            Self::AllOf => {
                let mut any = false;
                for v in violated {
                    if !v {
                        return false;
                    }
                    any = true;
                }
                any
            }
        }
    }
}

// === impl RuleSet ===

impl RuleSet {
    /// Whether the strategy is violated, as [`RuleSet::evaluate`] decides, without building a
    /// verdict (no allocation: the extender's filter asks this per candidate node).
    pub fn violated(&self, metrics: &impl Metrics, unknown: Unknown) -> bool {
        self.logical.combine(
            self.rules
                .iter()
                .map(|r| r.violated_by(metrics.reading(&r.metric), unknown)),
        )
    }

    /// Evaluates the rules and combines them: `anyOf` is violated by one violated rule,
    /// `allOf` only when every rule is.
    pub fn evaluate(&self, metrics: &impl Metrics, unknown: Unknown) -> Verdict {
        let rules: Vec<RuleOutcome> = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| evaluate_rule(i, r, metrics, unknown))
            .collect();
        let violated = self.logical.combine(rules.iter().map(|r| r.violated));
        Verdict { violated, rules }
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
        let violated = self.logical.combine(rules.iter().map(|r| r.violated));
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
