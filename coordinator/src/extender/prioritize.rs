//! prioritize: a pod's `scheduleonmetric` rule scored by magnitude across the candidates
//! (`policy::score`), 0..=10, never negative, equal values equal scores. Pure.

use telemesh_core::policy::score::{self, MAX_SCORE};
use telemesh_core::policy::{Metrics, Reading, Rule};

use super::parse::{Candidates, PodInfo};
use super::{Settings, UnknownScore};
use crate::view::Snapshot;

/// Where learned per-node preferences (the reward of the pod's type on each node) adjust the
/// metric scores. Called with the scores of every candidate, in order; it must leave them in
/// 0..=10 (they are clamped after). Until rewards land, [`NoBias`] leaves them alone.
pub trait ScoreBias: Send + Sync {
    /// Adjusts `scores` (one per candidate) for `pod`.
    fn adjust(
        &self,
        pod: &PodInfo<'_>,
        view: &Snapshot,
        candidates: &Candidates<'_>,
        scores: &mut [u8],
    );
}

/// No bias: metric scores only.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoBias;

impl ScoreBias for NoBias {
    fn adjust(&self, _: &PodInfo<'_>, _: &Snapshot, _: &Candidates<'_>, _: &mut [u8]) {}
}

/// Scores every candidate for `rule` at `now_ms`; unknown nodes (stale, missing, or not in the
/// view) get what `settings.unknown_score` says.
pub fn prioritize(
    view: &Snapshot,
    rule: &Rule,
    pod: &PodInfo<'_>,
    candidates: &Candidates<'_>,
    settings: &Settings,
    bias: &dyn ScoreBias,
    now_ms: u64,
) -> Vec<u8> {
    let readings: Vec<Reading> = (0..candidates.len())
        .map(|i| {
            view.readings(candidates.name(i), now_ms, settings.stale_after)
                .reading(&rule.metric)
        })
        .collect();
    let known = score::scores(rule, &readings);
    let unknown = match settings.unknown_score {
        UnknownScore::Neutral => score::neutral(&known),
        UnknownScore::Zero => 0,
    };
    let mut scores: Vec<u8> = known.into_iter().map(|s| s.unwrap_or(unknown)).collect();
    bias.adjust(pod, view, candidates, &mut scores);
    for s in &mut scores {
        *s = (*s).min(MAX_SCORE);
    }
    scores
}
