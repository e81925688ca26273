//! `scheduleonmetric` scores: 0..=10 by the metric's magnitude across the candidate nodes, where
//! TAS gives `10 - rank` (negative past eleven nodes, blind to how far apart values are).
//!
//! The range is anchored at zero when all values share a sign, so that scores reflect
//! magnitude rather than the spread alone: `GreaterThan` over free memory of 100 and 101 GiB
//! gives 10 and 10 (no real difference), not 0 and 10 as plain min-max would. With `lo =
//! min(0, min v)` and `hi = max(0, max v)`:
//! - `GreaterThan` (larger is better): `10 (v - lo) / (hi - lo)`;
//! - `LessThan` (smaller is better): `10 (hi - v) / (hi - lo)`;
//! - `Equals` (closer to the target is better): `10 (1 - d / max d)`, `d = |v - target|`.
//!
//! Scores are rounded half up; equal values always get equal scores, and the output keeps the
//! input order, so ties are stable. A node whose reading is unknown (stale or missing) gets
//! `None`: the caller decides (the extender's default is [`neutral`], the mean of the known
//! scores, neither favoured nor penalised).

use super::eval::Reading;
use super::rule::{Operator, Rule};

/// Highest score, as kube-scheduler's extender API expects (`MaxExtenderPriority`).
pub const MAX_SCORE: u8 = 10;

/// Scores each reading for `rule`; `None` where the reading is not fresh.
pub fn scores(rule: &Rule, readings: &[Reading]) -> Vec<Option<u8>> {
    let known = readings.iter().filter_map(|r| r.fresh());
    let (mut lo, mut hi, mut dmax) = (0.0_f64, 0.0_f64, 0.0_f64);
    for v in known {
        lo = lo.min(v);
        hi = hi.max(v);
        dmax = dmax.max((v - rule.target).abs());
    }
    readings
        .iter()
        .map(|r| {
            let v = r.fresh()?;
            let fraction = match rule.operator {
                Operator::GreaterThan if hi > lo => (v - lo) / (hi - lo),
                Operator::LessThan if hi > lo => (hi - v) / (hi - lo),
                Operator::Equals if dmax > 0.0 => 1.0 - (v - rule.target).abs() / dmax,
                // Every candidate has the same value: none is better.
                _ => 1.0,
            };
            Some(to_score(fraction))
        })
        .collect()
}

/// The score for unknown nodes that neither favours nor penalises them: the rounded mean of
/// the known scores (0 when none is known).
pub fn neutral(scores: &[Option<u8>]) -> u8 {
    let (sum, n) = scores
        .iter()
        .flatten()
        .fold((0u32, 0u32), |(s, n), v| (s + u32::from(*v), n + 1));
    if n == 0 {
        return 0;
    }
    u8::try_from((sum + n / 2) / n).unwrap_or(MAX_SCORE)
}

fn to_score(fraction: f64) -> u8 {
    let clamped = fraction.clamp(0.0, 1.0) * f64::from(MAX_SCORE);
    // Clamped to 0..=10 above, so the cast cannot truncate.
    (clamped + 0.5).floor() as u8
}
