//! filter: a pod's `dontschedule` rules against each candidate node. Pure: a snapshot, the
//! policy and the clock in, the kept and removed candidates out.

use telemesh_core::gossip::schema::format_f64;
use telemesh_core::policy::{Metrics, Policy, Reading, Rule, RuleSet, StrategyKind, Unknown};

use super::Settings;
use super::parse::Candidates;
use crate::view::Snapshot;

/// Which candidates a filter kept and which it removed, by index into the candidates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterDecision {
    /// Kept, in input order.
    pub passed: Vec<usize>,
    /// Removed, in input order, with the reason naming policy, rule and value.
    pub failed: Vec<(usize, String)>,
}

/// Evaluates `rules` (the policy's dontschedule) on every candidate at `now_ms`. Metrics older
/// than `settings.stale_after`, and nodes the view does not know, are unknown and count as
/// `settings.unknown` says.
pub fn filter(
    view: &Snapshot,
    policy: &Policy,
    rules: &RuleSet,
    candidates: &Candidates<'_>,
    settings: &Settings,
    now_ms: u64,
) -> FilterDecision {
    let mut out = FilterDecision {
        passed: Vec::with_capacity(candidates.len()),
        failed: Vec::new(),
    };
    let mut reasons: Option<Reasons> = None;
    for i in 0..candidates.len() {
        let readings = view.readings(candidates.name(i), now_ms, settings.stale_after);
        if !violated(rules, &readings, settings.unknown) {
            out.passed.push(i);
            continue;
        }
        // Only removed nodes pay for a reason.
        let reasons = reasons.get_or_insert_with(|| Reasons::new(policy, rules));
        out.failed
            .push((i, reasons.reason(rules, &readings, settings.unknown)));
    }
    out
}

/// Writes the reasons [`telemesh_core::policy::Verdict::reason`] writes, with the parts that
/// do not depend on the node formatted once per request.
pub struct Reasons {
    head: String,
    rules: Vec<String>,
}

impl Reasons {
    /// Prepares the reasons of `rules` in `policy`'s dontschedule.
    pub fn new(policy: &Policy, rules: &RuleSet) -> Self {
        Self {
            head: format!(
                "policy {} {}:",
                policy.key(),
                StrategyKind::DontSchedule.as_str()
            ),
            rules: rules
                .rules
                .iter()
                .map(|r| format!(" {r} (value "))
                .collect(),
        }
    }

    /// The reason a node with `metrics` violates `rules`.
    pub fn reason(&self, rules: &RuleSet, metrics: &impl Metrics, unknown: Unknown) -> String {
        let mut out = String::with_capacity(self.head.len() + 48 * self.rules.len());
        out.push_str(&self.head);
        let mut first = true;
        for (rule, prefix) in rules.rules.iter().zip(&self.rules) {
            let reading = metrics.reading(&rule.metric);
            let violated = match reading.fresh() {
                Some(v) => rule.operator.holds(v, rule.target),
                None => unknown == Unknown::Violating,
            };
            if !violated {
                continue;
            }
            if !first {
                out.push(';');
            }
            first = false;
            out.push_str(prefix);
            match reading {
                Reading::Fresh(v) => out.push_str(&format_f64(v)),
                Reading::Stale(v) => {
                    out.push_str("stale ");
                    out.push_str(&format_f64(v));
                }
                Reading::Missing => out.push_str("missing"),
            }
            out.push(')');
        }
        out
    }
}

/// Whether `rules` are violated, as [`RuleSet::evaluate`] decides, without allocating.
#[inline]
pub fn violated(rules: &RuleSet, metrics: &impl Metrics, unknown: Unknown) -> bool {
    let one = |r: &Rule| match metrics.reading(&r.metric).fresh() {
        Some(v) => r.operator.holds(v, r.target),
        None => unknown == Unknown::Violating,
    };
    match rules.logical {
        telemesh_core::policy::LogicalOperator::AnyOf => rules.rules.iter().any(one),
        telemesh_core::policy::LogicalOperator::AllOf => {
            !rules.rules.is_empty() && rules.rules.iter().all(one)
        }
    }
}
