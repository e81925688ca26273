//! filter: a pod's `dontschedule` rules against each candidate node. Pure: a snapshot, the
//! policy and the clock in, the kept and removed candidates out, each removal with its reason.
//!
//! Every removal, here and by the reward floor or a workload action's placement, is one that
//! preemption cannot resolve: kube-scheduler gets them all in `FailedAndUnresolvableNodes`, never
//! in `FailedNodes` ("preemption may help"), and `preempt` drops those nodes from its candidates.
//! A dontschedule verdict is about the node's telemetry, which the filter goes on refusing after
//! any eviction: upstream would nominate the node, the filter refuse it again on the next
//! attempt, and the victims die for nothing (issue 15); whether evicting a pod would ever bring a
//! metric back under its target is a guess no one can check before the kill. A reward is how pods
//! of this type fare on this node, which other pods' eviction does not change either. A placement
//! wants the pod on one node, so no eviction elsewhere serves it.

use std::fmt::Write as _;

use telemesh_core::policy::{Metrics, Policy, Reading, RuleSet, StrategyKind, Unknown};

use std::sync::Arc;

use super::folded::{Verdicts, columns_of};
use super::parse::Candidates;
use super::settings::Settings;
use crate::view::{ColumnReadings, Snapshot};

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
/// `settings.unknown` says. Looks every candidate up by name: [`filter_located`] gives the same
/// answer from the snapshot's columns.
pub fn filter(
    view: &Snapshot,
    policy: &Policy,
    rules: &RuleSet,
    candidates: &Candidates<'_>,
    settings: &Settings,
    now_ms: u64,
) -> FilterDecision {
    filter_by(
        policy,
        rules,
        candidates.len(),
        settings.unknown,
        |_| None,
        |i| view.readings(candidates.name(i), now_ms, settings.stale_after),
    )
}

/// [`filter`] for candidates at `positions` in `view` ([`Snapshot::locate`]): each verdict read
/// from `verdicts` (the rules folded into the snapshot) where they cover `now_ms`, else each
/// rule's metric read from its column, with no lookup per node either way.
pub fn filter_located(
    view: &Snapshot,
    positions: &[Option<u32>],
    verdicts: &Verdicts,
    policy: &Policy,
    rules: &RuleSet,
    settings: &Settings,
    now_ms: u64,
) -> FilterDecision {
    let columns = columns_of(view, rules);
    let stale_after_ms = u64::try_from(settings.stale_after.as_millis()).unwrap_or(u64::MAX);
    filter_by(
        policy,
        rules,
        positions.len(),
        settings.unknown,
        |i| positions[i].and_then(|pos| verdicts.at(pos, now_ms)),
        |i| ColumnReadings {
            columns: &columns,
            pos: positions[i],
            now_ms,
            stale_after_ms,
        },
    )
}

/// The filter over `n` candidates whose verdicts `folded` gives where it can (`Some(None)`
/// kept, `Some(Some(reason))` refused) and whose metrics `readings` gives for the rest.
fn filter_by<'v, M: Metrics>(
    policy: &Policy,
    rules: &RuleSet,
    n: usize,
    unknown: Unknown,
    folded: impl Fn(usize) -> Option<Option<&'v Arc<str>>>,
    readings: impl Fn(usize) -> M,
) -> FilterDecision {
    let mut out = FilterDecision {
        passed: Vec::with_capacity(n),
        failed: Vec::new(),
    };
    let mut reasons: Option<Reasons> = None;
    for i in 0..n {
        match folded(i) {
            Some(None) => {
                out.passed.push(i);
                continue;
            }
            Some(Some(reason)) => {
                out.failed.push((i, String::from(&**reason)));
                continue;
            }
            None => {}
        }
        let readings = readings(i);
        if !rules.violated(&readings, unknown) {
            out.passed.push(i);
            continue;
        }
        // Only removed nodes pay for a reason.
        let reasons = reasons.get_or_insert_with(|| Reasons::new(policy, rules));
        out.failed
            .push((i, reasons.reason(rules, &readings, unknown)));
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
            write_reading(&mut out, reading);
            out.push(')');
        }
        out
    }
}

/// Appends `reading` exactly as [`telemesh_core::policy::Reading::write_value`] does, formatting
/// the value once instead of twice: that writes the shorter of the positional and the
/// exponential form, and the exponential one can only be shorter when the positional one has a
/// run of zeros, so only then is it formatted too. Every removed node pays for this.
fn write_reading(out: &mut String, reading: Reading) {
    let v = match reading {
        Reading::Fresh(v) => v,
        Reading::Stale(v) => {
            out.push_str("stale ");
            v
        }
        Reading::Missing => {
            out.push_str("missing");
            return;
        }
    };
    let start = out.len();
    let _ = write!(out, "{v}");
    if out[start..].contains("00") {
        let exponential = format!("{v:e}");
        if exponential.len() < out.len() - start {
            out.truncate(start);
            out.push_str(&exponential);
        }
    }
}

/// Removes every kept candidate but `node` from `decision`: a workload action (`action`) places
/// the pod there. The default filters already ran, so when `node` is not among the candidates
/// the pod is unschedulable with the scheduler's reason for `node` beside ours for the rest.
pub fn apply_placement(
    candidates: &Candidates<'_>,
    decision: &mut FilterDecision,
    action: &str,
    node: &str,
) {
    let mut reason: Option<String> = None;
    let mut kept = Vec::with_capacity(1);
    for i in decision.passed.drain(..) {
        if candidates.name(i) == node {
            kept.push(i);
        } else {
            let reason = reason.get_or_insert_with(|| {
                format!("workload action {action} places this pod on node {node}")
            });
            decision.failed.push((i, reason.clone()));
        }
    }
    decision.passed = kept;
    decision.failed.sort_by_key(|(i, _)| *i);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn assert_same_text(v: f64) {
        for reading in [Reading::Fresh(v), Reading::Stale(v), Reading::Missing] {
            let (mut a, mut b) = (String::new(), String::new());
            reading.write_value(&mut a);
            write_reading(&mut b, reading);
            assert_eq!(a, b, "{v:?}");
        }
    }

    /// The one-format path writes what `Reading::write_value` writes at the edges: zeros,
    /// powers of ten, the switch to exponents, the extremes.
    #[test]
    fn write_reading_matches_write_value_at_the_edges() {
        for v in [
            0.0,
            -0.0,
            1.0,
            10.0,
            100.0,
            1e21,
            1e-7,
            0.05,
            0.005,
            123_000_000.0,
            1.5e300,
            -2e-300,
            f64::MAX,
            f64::MIN_POSITIVE,
            3.25,
            1_000_001.0,
            0.000_123,
        ] {
            assert_same_text(v);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// ... and on any finite value.
        #[test]
        fn write_reading_matches_write_value(
            v in prop::num::f64::POSITIVE | prop::num::f64::NEGATIVE | prop::num::f64::NORMAL
                | prop::num::f64::SUBNORMAL | prop::num::f64::ZERO,
        ) {
            assert_same_text(v);
        }

        /// ... and on decimal values of every magnitude, with and without runs of zeros.
        #[test]
        fn write_reading_matches_write_value_on_decimals(
            mantissa in 0..100_000u32,
            exponent in -20..20i32,
        ) {
            assert_same_text(f64::from(mantissa) * 10f64.powi(exponent));
        }
    }
}
