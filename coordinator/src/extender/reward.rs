//! Rewards in the extender (docs/architecture.md, "Learn"): each candidate's reward score for the pod's type,
//! its blend with the telemetry score in prioritize, and the optional floor in filter. Pure: a
//! snapshot, the candidates, the model and the clock in, scores or a decision out.
//!
//! The estimates are the agents' (gossiped, parsed once into the view); the model that decays
//! and scores them is [`telemesh_core::reward::RewardModel`], so every replica scores the same
//! gossip the same way. A node without an estimate for the type is unseen, which is neutral:
//! full marks, since rewards only steer pods *away* from nodes where they fare badly.

use std::fmt::Write as _;

use telemesh_core::policy::score::MAX_SCORE;
use telemesh_core::reward::{Estimate, RewardModel};

use super::filter::FilterDecision;
use super::parse::Candidates;
use crate::view::{NodeEntry, RewardColumn, Snapshot};

/// Returns the reward score of `estimate` at `now_ms`: `round(10 × model.score)`, in 0..=10;
/// 10 for anything at or above the neutral prior, and for an unseen node.
#[inline]
pub fn score(model: &RewardModel, estimate: &Estimate, now_ms: u64) -> u8 {
    // Full marks at any age need no decay's powf (most nodes, in a healthy cluster): the
    // score only rises with age from what `score_floor` tells.
    if model
        .score_floor(estimate)
        .is_some_and(|s| round_score(s) == MAX_SCORE)
    {
        return MAX_SCORE;
    }
    let s = model.score(estimate, now_ms);
    if s.is_nan() {
        return MAX_SCORE;
    }
    round_score(s)
}

/// A model score in [0, 1] as the extender's 0..=10.
#[inline]
fn round_score(s: f64) -> u8 {
    // In 0..=10 after the clamp, so the cast is exact.
    (s.clamp(0.0, 1.0) * f64::from(MAX_SCORE)).round() as u8
}

/// Returns each candidate's reward score for `pod_type`, or `None` when no candidate has an
/// estimate for it (the pod has no reward history there: rewards do not apply). One lookup of
/// the type per candidate node.
pub fn scores(
    view: &Snapshot,
    pod_type: &str,
    candidates: &Candidates<'_>,
    model: &RewardModel,
    now_ms: u64,
) -> Option<Vec<u8>> {
    if !view.has_reward_type(pod_type) {
        return None;
    }
    let entries = view.entries_of(candidates);
    scores_of(&entries, pod_type, model, now_ms)
}

/// [`scores`] for candidates already looked up in the view (`None`: not in it), so a blended
/// prioritize looks each node up once.
pub fn scores_of(
    entries: &[Option<&NodeEntry>],
    pod_type: &str,
    model: &RewardModel,
    now_ms: u64,
) -> Option<Vec<u8>> {
    scores_by(
        entries.len(),
        |i| entries[i].and_then(|e| e.reward(pod_type)).copied(),
        model,
        now_ms,
    )
}

/// [`scores`] for candidates at `positions` in the snapshot `column` (the pod type's estimates,
/// [`Snapshot::reward_column`]) belongs to: no lookup per node.
pub fn scores_located(
    positions: &[Option<u32>],
    column: &RewardColumn,
    model: &RewardModel,
    now_ms: u64,
) -> Option<Vec<u8>> {
    scores_by(
        positions.len(),
        |i| positions[i].and_then(|p| column.get(p).flatten()),
        model,
        now_ms,
    )
}

/// The scores of `n` candidates whose estimates `estimate` gives.
fn scores_by(
    n: usize,
    estimate: impl Fn(usize) -> Option<Estimate>,
    model: &RewardModel,
    now_ms: u64,
) -> Option<Vec<u8>> {
    let mut any = false;
    let out = (0..n)
        .map(|i| match estimate(i) {
            Some(e) => {
                any = true;
                score(model, &e, now_ms)
            }
            None => MAX_SCORE,
        })
        .collect();
    any.then_some(out)
}

/// Returns `round((1 − weight) · telemetry + weight · reward)`, in 0..=10.
#[inline]
pub fn blend(telemetry: u8, reward: u8, weight: f64) -> u8 {
    let w = if weight.is_finite() {
        weight.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let s = (1.0 - w) * f64::from(telemetry.min(MAX_SCORE)) + w * f64::from(reward.min(MAX_SCORE));
    (s.round() as u8).min(MAX_SCORE)
}

/// Whether the best-scored candidates of `after` differ from those of `before`; `before` is
/// `None` when, without rewards, every candidate would have been equal (the pass-through `[]`).
pub fn best_changed(before: Option<&[u8]>, after: &[u8]) -> bool {
    let best = |s: &[u8]| s.iter().copied().max().unwrap_or(0);
    let after_best = best(after);
    match before {
        None => after.iter().any(|s| *s != after_best),
        Some(before) => {
            let before_best = best(before);
            before
                .iter()
                .zip(after)
                .any(|(b, a)| (*b == before_best) != (*a == after_best))
        }
    }
}

/// Moves the kept candidates whose reward for `pod_type` is confidently below `floor` at
/// `now_ms` into `decision.failed`, with a reason naming type, node, mean and evidence (decayed
/// to now); `decision.failed` stays in input order. Returns whether any candidate had an
/// estimate (the floor applied) and how many it dropped.
pub fn apply_floor(
    view: &Snapshot,
    pod_type: &str,
    floor: f64,
    model: &RewardModel,
    candidates: &Candidates<'_>,
    decision: &mut FilterDecision,
    now_ms: u64,
) -> (bool, usize) {
    if !view.has_reward_type(pod_type) {
        return (false, 0);
    }
    let estimate = |i: usize| {
        view.node(candidates.name(i))
            .and_then(|n| n.reward(pod_type))
            .copied()
    };
    floor_by(
        estimate, pod_type, floor, model, candidates, decision, now_ms,
    )
}

/// [`apply_floor`] for candidates at `positions` in `view` ([`Snapshot::locate`]): estimates
/// read from the pod type's column, with no lookup per node.
#[allow(clippy::too_many_arguments)]
pub fn apply_floor_located(
    view: &Snapshot,
    positions: &[Option<u32>],
    pod_type: &str,
    floor: f64,
    model: &RewardModel,
    candidates: &Candidates<'_>,
    decision: &mut FilterDecision,
    now_ms: u64,
) -> (bool, usize) {
    if !view.has_reward_type(pod_type) {
        return (false, 0);
    }
    let column = view.reward_column(pod_type);
    let estimate = |i: usize| positions[i].and_then(|p| column.get(p).flatten());
    floor_by(
        estimate, pod_type, floor, model, candidates, decision, now_ms,
    )
}

/// The floor over the candidates whose estimates `estimate` gives.
fn floor_by(
    estimate: impl Fn(usize) -> Option<Estimate>,
    pod_type: &str,
    floor: f64,
    model: &RewardModel,
    candidates: &Candidates<'_>,
    decision: &mut FilterDecision,
    now_ms: u64,
) -> (bool, usize) {
    let mut applied = false;
    let mut dropped = 0;
    let before_failed = decision.failed.len();
    decision.passed.retain(|&i| {
        let Some(e) = estimate(i) else {
            return true;
        };
        applied = true;
        // Most nodes are ruled out without the decay's powf (`never_below`).
        if model.never_below(&e, floor) || !model.confidently_below(&e, floor, now_ms) {
            return true;
        }
        let name = candidates.name(i);
        let d = model.decayed(&e, now_ms);
        let mut reason = String::with_capacity(96 + pod_type.len() + name.len());
        let _ = write!(
            reason,
            "reward of {pod_type} on {name} is confidently below {floor} (mean {:.2}, evidence {:.1})",
            d.mean(),
            d.evidence()
        );
        decision.failed.push((i, reason));
        dropped += 1;
        false
    });
    if dropped > 0 && before_failed > 0 {
        decision.failed.sort_by_key(|(i, _)| *i);
    }
    (applied, dropped)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn blend_is_the_weighted_mean_rounded_and_stays_in_range() {
        assert_eq!(blend(10, 0, 0.5), 5);
        assert_eq!(blend(7, 10, 0.5), 9, "8.5 rounds away from zero");
        assert_eq!(blend(4, 2, 0.0), 4, "weight 0: telemetry alone");
        assert_eq!(blend(4, 2, 1.0), 2, "weight 1: reward alone");
        assert_eq!(blend(3, 9, 0.25), 5, "0.75·3 + 0.25·9 = 4.5");
        for t in 0..=10 {
            for r in 0..=10 {
                for w in [0.0, 0.1, 0.5, 0.9, 1.0, f64::NAN, -3.0, 7.0] {
                    assert!(blend(t, r, w) <= 10);
                }
            }
        }
    }

    #[test]
    fn best_changed_compares_the_top_sets() {
        assert!(
            !best_changed(None, &[10, 10, 10]),
            "all equal, as without rewards"
        );
        assert!(best_changed(None, &[10, 3, 10]));
        assert!(!best_changed(Some(&[10, 5, 0]), &[8, 5, 0]));
        assert!(best_changed(Some(&[10, 5, 0]), &[5, 8, 0]));
        assert!(best_changed(Some(&[10, 10]), &[10, 9]), "a tie broken");
    }

    #[test]
    fn scores_round_and_unseen_is_full_marks() {
        let model = RewardModel::default();
        assert_eq!(score(&model, &Estimate::default(), 0), 10);
        let bad = Estimate {
            good: 0.0,
            bad: 4.0,
            at_ms: 1_000,
        };
        let s = score(&model, &bad, 1_000);
        assert!(s < 7, "{s}");
        let expect = (model.score(&bad, 1_000) * 10.0).round() as u8;
        assert_eq!(s, expect);
    }

    proptest::proptest! {
        /// The good >= bad shortcut gives what the model gives, at any age.
        #[test]
        fn the_shortcut_agrees_with_the_model(
            good in 0..50u8,
            bad in 0..50u8,
            at_ms in 0..10_000_000u64,
            now in 0..20_000_000u64,
        ) {
            let model = RewardModel::default();
            let e = Estimate {
                good: f64::from(good) / 10.0,
                bad: f64::from(bad) / 10.0,
                at_ms,
            };
            let full = model.score(&e, now);
            let expect = (full.clamp(0.0, 1.0) * 10.0).round() as u8;
            proptest::prop_assert_eq!(score(&model, &e, now), expect, "{:?} at {}", e, now);
        }
    }
}
