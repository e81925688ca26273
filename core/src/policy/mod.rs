//! TASPolicy: the custom resource ([`crd`]), its validated form ([`Policy`], built by
//! [`Policy::compile`]) and pure evaluation against a node's metrics ([`eval`]) and across
//! candidate nodes ([`score`]), and the targets a publication deadband must not hide
//! ([`targets`]). No API calls: the agent (labels, evictions) and the coordinator (filter,
//! prioritize) apply the verdicts.
//!
//! Where TAS is broken we are right instead (reference §5): fractional targets, stale metrics
//! are unknown, an unknown strategy or operator is reported instead of silently skipping the
//! rest of the policy, and a labeling key shared by rules with different operators makes the
//! labeling strategy invalid and reported (TAS panics every tick).

pub mod crd;
pub mod eval;
pub mod rule;
pub mod score;
pub mod targets;

use std::collections::BTreeMap;
use std::fmt;

pub use crd::{TASPolicy, TASPolicySpec, TASPolicyStatus};
pub use eval::{Metrics, NodeReadings, Reading, RuleOutcome, Unknown, Verdict};
pub use rule::{LabelRule, Labeling, LogicalOperator, Operator, Rule, RuleSet};
pub use targets::Targets;

/// Prefix of labeling-strategy node labels: `telemetry.aware.scheduling.<policy>/<key>`.
pub const LABELING_PREFIX: &str = "telemetry.aware.scheduling.";

/// The value of a deschedule violator label, `<policy-name>=violating`.
pub const VIOLATING: &str = "violating";

/// The pod label that links a pod to a policy in its namespace.
pub const POLICY_LINK_LABEL: &str = "telemetry-policy";

/// The strategies TAS defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StrategyKind {
    /// Prioritize nodes by one metric.
    ScheduleOnMetric,
    /// Filter out violating nodes.
    DontSchedule,
    /// Label violating nodes and evict linked pods from them.
    Deschedule,
    /// Label nodes per violated rule.
    Labeling,
}

// === impl StrategyKind ===

impl StrategyKind {
    /// Every strategy.
    pub const ALL: [Self; 4] = [
        Self::ScheduleOnMetric,
        Self::DontSchedule,
        Self::Deschedule,
        Self::Labeling,
    ];

    /// The key in `spec.strategies`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ScheduleOnMetric => "scheduleonmetric",
            Self::DontSchedule => "dontschedule",
            Self::Deschedule => "deschedule",
            Self::Labeling => "labeling",
        }
    }

    /// Parses a `spec.strategies` key.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for StrategyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why (part of) a policy is not enforced. Each names what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyProblem {
    /// A strategy key TAS does not define.
    #[error(
        "strategy {0:?} is unknown and ignored; use scheduleonmetric, dontschedule, deschedule or labeling"
    )]
    UnknownStrategy(String),
    /// A strategy without rules.
    #[error("strategy {0} has no rules and is ignored; add at least one rule")]
    NoRules(StrategyKind),
    /// `logicalOperator` other than anyOf/allOf.
    #[error("strategy {strategy} has logicalOperator {value:?} and is ignored; use anyOf or allOf")]
    UnknownLogicalOperator {
        /// Strategy.
        strategy: StrategyKind,
        /// What was given.
        value: String,
    },
    /// An operator TAS does not define.
    #[error(
        "strategy {strategy} rule {index} has operator {value:?} and the strategy is ignored; use Equals, LessThan or GreaterThan"
    )]
    UnknownOperator {
        /// Strategy.
        strategy: StrategyKind,
        /// 0-based rule index.
        index: usize,
        /// What was given.
        value: String,
    },
    /// A rule without a metric name.
    #[error("strategy {strategy} rule {index} names no metric and the strategy is ignored")]
    NoMetric {
        /// Strategy.
        strategy: StrategyKind,
        /// 0-based rule index.
        index: usize,
    },
    /// A target that is NaN or infinite.
    #[error("strategy {strategy} rule {index} has a non-finite target and the strategy is ignored")]
    NonFiniteTarget {
        /// Strategy.
        strategy: StrategyKind,
        /// 0-based rule index.
        index: usize,
    },
    /// A labeling entry that is not `key=value` or would not make a valid node label.
    #[error(
        "labeling rule {index} has label {label:?}, which does not make a valid node label \
         `{LABELING_PREFIX}<policy>/<key>=<value>`; labeling is ignored until it is fixed"
    )]
    BadLabel {
        /// 0-based rule index.
        index: usize,
        /// The entry.
        label: String,
    },
    /// One label key written by rules with different operators: which value wins is undefined.
    #[error(
        "label key {key:?} is set by rules with different operators; labeling is ignored: \
         with equivalent labels the operators of the rules must be the same"
    )]
    MixedOperators {
        /// The key.
        key: String,
    },
    /// `scheduleonmetric` uses only its first rule.
    #[error("scheduleonmetric has {0} rules; only the first is used, remove the others")]
    ExtraScheduleRules(usize),
    /// A policy name that cannot be a node label key (deschedule's `<name>=violating`).
    #[error(
        "policy name {0:?} cannot be a node label key, so deschedule and labeling are ignored; rename the policy"
    )]
    NameNotALabelKey(String),
}

/// A validated policy: what of it can be enforced, and what cannot and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Generation compiled.
    pub generation: Option<i64>,
    /// Prioritize by this rule.
    pub schedule_on_metric: Option<Rule>,
    /// Filter out nodes violating these.
    pub dont_schedule: Option<RuleSet>,
    /// Label and evict from nodes violating these.
    pub deschedule: Option<RuleSet>,
    /// Label nodes per violated rule.
    pub labeling: Option<Labeling>,
    /// What is not enforced.
    pub problems: Vec<PolicyProblem>,
}

// === impl Policy ===

impl Policy {
    /// Validates a TASPolicy. Never fails: a broken strategy is left out and its problem listed,
    /// so the rest of the policy still works.
    pub fn compile(policy: &TASPolicy) -> Self {
        let namespace = policy.metadata.namespace.clone().unwrap_or_default();
        let name = policy.metadata.name.clone().unwrap_or_default();
        let mut out = Self {
            namespace,
            name,
            generation: policy.metadata.generation,
            schedule_on_metric: None,
            dont_schedule: None,
            deschedule: None,
            labeling: None,
            problems: Vec::new(),
        };
        let name_ok = is_label_name(&out.name);
        for (key, strategy) in &policy.spec.strategies {
            let Some(kind) = StrategyKind::parse(key) else {
                out.problems
                    .push(PolicyProblem::UnknownStrategy(key.clone()));
                continue;
            };
            let set = match compile_rules(kind, strategy) {
                Ok(set) => set,
                Err(problem) => {
                    out.problems.push(problem);
                    continue;
                }
            };
            match kind {
                StrategyKind::ScheduleOnMetric => {
                    if set.rules.len() > 1 {
                        out.problems
                            .push(PolicyProblem::ExtraScheduleRules(set.rules.len()));
                    }
                    out.schedule_on_metric = set.rules.into_iter().next();
                }
                StrategyKind::DontSchedule => out.dont_schedule = Some(set),
                StrategyKind::Deschedule if name_ok => out.deschedule = Some(set),
                StrategyKind::Labeling if name_ok => {
                    match compile_labeling(&out.name, set, &strategy.rules) {
                        Ok(labeling) => out.labeling = Some(labeling),
                        Err(problem) => out.problems.push(problem),
                    }
                }
                StrategyKind::Deschedule | StrategyKind::Labeling => {
                    let problem = PolicyProblem::NameNotALabelKey(out.name.clone());
                    if !out.problems.contains(&problem) {
                        out.problems.push(problem);
                    }
                }
            }
        }
        out
    }

    /// The rules that compare a metric with a target: `dontschedule`, `deschedule` and
    /// `labeling` (those compiled without problems: a strategy left out is enforced by no one).
    /// `scheduleonmetric` ranks nodes by value and has no threshold. What a publication deadband
    /// must not hide a crossing of ([`Targets`]).
    pub fn threshold_rules(&self) -> impl Iterator<Item = &Rule> {
        [&self.dont_schedule, &self.deschedule]
            .into_iter()
            .flatten()
            .flat_map(|set| &set.rules)
            .chain(
                self.labeling
                    .iter()
                    .flat_map(|l| l.rules.iter().map(|r| &r.rule)),
            )
    }

    /// The policy's `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The deschedule violator label key: the bare policy name, as TAS and the descheduler
    /// affinity `<policy> NotIn [violating]` expect.
    pub fn violator_label_key(&self) -> &str {
        &self.name
    }

    /// The prefix of this policy's labeling-strategy label keys.
    pub fn labeling_prefix(&self) -> String {
        labeling_prefix(&self.name)
    }
}

/// `telemetry.aware.scheduling.<policy>/`.
pub fn labeling_prefix(policy_name: &str) -> String {
    format!("{LABELING_PREFIX}{policy_name}/")
}

fn compile_rules(
    kind: StrategyKind,
    strategy: &crd::TASPolicyStrategy,
) -> Result<RuleSet, PolicyProblem> {
    let logical =
        LogicalOperator::parse(strategy.logical_operator.as_deref()).ok_or_else(|| {
            PolicyProblem::UnknownLogicalOperator {
                strategy: kind,
                value: strategy.logical_operator.clone().unwrap_or_default(),
            }
        })?;
    if strategy.rules.is_empty() {
        return Err(PolicyProblem::NoRules(kind));
    }
    let rules = strategy
        .rules
        .iter()
        .enumerate()
        .map(|(index, r)| {
            let operator =
                Operator::parse(&r.operator).ok_or_else(|| PolicyProblem::UnknownOperator {
                    strategy: kind,
                    index,
                    value: r.operator.clone(),
                })?;
            if r.metricname.is_empty() {
                return Err(PolicyProblem::NoMetric {
                    strategy: kind,
                    index,
                });
            }
            if !r.target.is_finite() {
                return Err(PolicyProblem::NonFiniteTarget {
                    strategy: kind,
                    index,
                });
            }
            Ok(Rule {
                metric: r.metricname.clone(),
                operator,
                target: r.target,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RuleSet { logical, rules })
}

fn compile_labeling(
    policy_name: &str,
    set: RuleSet,
    raw: &[crd::TASPolicyRule],
) -> Result<Labeling, PolicyProblem> {
    let prefix = labeling_prefix(policy_name);
    let mut operators: BTreeMap<&str, Operator> = BTreeMap::new();
    let mut rules = Vec::with_capacity(set.rules.len());
    for (index, (rule, raw)) in set.rules.into_iter().zip(raw).enumerate() {
        let mut labels = Vec::with_capacity(raw.labels.len());
        for entry in &raw.labels {
            let bad = || PolicyProblem::BadLabel {
                index,
                label: entry.clone(),
            };
            let (key, value) = entry.split_once('=').ok_or_else(bad)?;
            if value.contains('=')
                || !is_label_key(&format!("{prefix}{key}"))
                || !is_label_value(value)
            {
                return Err(bad());
            }
            if let Some(previous) = operators.insert(key, rule.operator)
                && previous != rule.operator
            {
                return Err(PolicyProblem::MixedOperators { key: key.into() });
            }
            labels.push((key.to_owned(), value.to_owned()));
        }
        rules.push(LabelRule { rule, labels });
    }
    Ok(Labeling {
        logical: set.logical,
        rules,
    })
}

/// A label key's name part (or a whole unprefixed key): ≤ 63 characters of `[A-Za-z0-9._-]`,
/// alphanumeric at both ends.
pub fn is_label_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
        && s.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric)
}

/// A label value: empty, or a label name.
pub fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_label_name(s)
}

/// A full label key: `[prefix/]name`, the prefix a DNS subdomain of at most 253 characters.
pub fn is_label_key(s: &str) -> bool {
    match s.rsplit_once('/') {
        None => is_label_name(s),
        Some((prefix, name)) => {
            is_label_name(name)
                && !prefix.is_empty()
                && prefix.len() <= 253
                && prefix.split('.').all(|part| {
                    !part.is_empty()
                        && part.len() <= 63
                        && part
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                        && !part.starts_with('-')
                        && !part.ends_with('-')
                })
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
