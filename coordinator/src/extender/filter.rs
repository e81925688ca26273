//! filter: a pod's `dontschedule` rules against each candidate node. Pure: a snapshot, the
//! policy and the clock in, the kept and removed candidates out.

use telemesh_core::policy::{Metrics, Policy, RuleSet, StrategyKind, Unknown};

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
        if !rules.violated(&readings, settings.unknown) {
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
            if !rule.violated_by(reading, unknown) {
                continue;
            }
            if !first {
                out.push(';');
            }
            first = false;
            out.push_str(prefix);
            reading.write_value(&mut out);
            out.push(')');
        }
        out
    }
}
