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

use std::sync::Arc;

use telemesh_core::policy::{Metrics, Policy, RuleSet, Unknown};

use super::folded::{Verdicts, columns_of};
use super::parse::Candidates;
use super::reasons::Reasons;
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
