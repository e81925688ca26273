//! The estimate per (pod type, node): a Beta(1 + good, 1 + bad) posterior over "a pod of this
//! type does well on this node", whose counts halve every `half_life` (so old evidence fades and
//! a node that recovered is tried again) and are capped at `max_evidence` (so a long bad past
//! fades as fast as a short one).
//!
//! Scoring is optimistic under uncertainty: the upper confidence bound `mean + k·sd`. A bound at
//! or above the neutral prior mean (0.5) scores full marks, so rewards steer pods *away* from
//! nodes that are confidently bad and never rank healthy nodes against each other (telemetry and
//! resource balancing do that): a node with little evidence scores neutral, and a decayed one is
//! explored again. Below neutral the score falls linearly to 0 at a bound of [`BAD_BOUND`]
//! (0.4): the extender's scores are integers 0..=10, so the grading is spent on the band where
//! the decision is made.
//!
//! The defaults (cap 2.5, k = 1) keep both promises of the issue: a single fresh crash (a
//! restart and a crash loop, 2 bad, bound 0.48) already scores 8, so new pods avoid the node at
//! once; a node whose faults stopped falls from the cap to 1.25 bad within one half-life, where
//! its bound (0.53) is neutral again and it wins pods back. A crash after a long healthy history
//! weighs little (the cap scales the good evidence down with the bad).
//!
//! Wire form (gossip value): `<good>,<bad>@<unix ms>`, e.g. `0.5,3.25@1700000000000`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::signal::Signal;

/// The prior mean: what an unseen (type, node) is worth.
pub const NEUTRAL: f64 = 0.5;

/// The upper confidence bound at which a node scores 0: confidently bad.
pub const BAD_BOUND: f64 = 0.4;

/// The model's settings, shared by agent (which observes) and coordinator (which scores).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RewardModel {
    /// Evidence halves every this long.
    pub half_life: Duration,
    /// Total evidence (good + bad) is scaled down to at most this.
    pub max_evidence: f64,
    /// Standard deviations of optimism in the score (0: plain posterior mean).
    pub exploration: f64,
}

impl Default for RewardModel {
    fn default() -> Self {
        Self {
            half_life: Duration::from_secs(600),
            max_evidence: 2.5,
            exploration: 1.0,
        }
    }
}

/// Decaying Beta counts, as of `at_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Estimate {
    /// Weighted good observations.
    pub good: f64,
    /// Weighted bad observations.
    pub bad: f64,
    /// When the counts were last brought up to date (ms since the Unix epoch).
    pub at_ms: u64,
}

impl RewardModel {
    /// The counts of `e` decayed to `now_ms` (never grown: a clock going back changes nothing).
    pub fn decayed(&self, e: &Estimate, now_ms: u64) -> Estimate {
        let dt = now_ms.saturating_sub(e.at_ms) as f64 / 1000.0;
        let factor = 0.5_f64.powf(dt / self.half_life.as_secs_f64().max(1e-9));
        Estimate {
            good: e.good * factor,
            bad: e.bad * factor,
            at_ms: e.at_ms.max(now_ms),
        }
    }

    /// Adds one weighted observation at `now_ms`.
    pub fn observe(&self, e: &mut Estimate, signal: Signal, now_ms: u64) {
        let mut d = self.decayed(e, now_ms);
        d.good += signal.reward * signal.weight;
        d.bad += (1.0 - signal.reward) * signal.weight;
        let total = d.good + d.bad;
        if total > self.max_evidence {
            let scale = self.max_evidence / total;
            d.good *= scale;
            d.bad *= scale;
        }
        *e = d;
    }

    /// The score in [0, 1] the extender uses, as of `now_ms`: 1 at or above neutral, falling
    /// linearly to 0 at [`BAD_BOUND`].
    pub fn score(&self, e: &Estimate, now_ms: u64) -> f64 {
        self.score_of(&self.decayed(e, now_ms))
    }

    /// The score of counts as they are, without decay.
    fn score_of(&self, d: &Estimate) -> f64 {
        ((d.upper(self.exploration) - BAD_BOUND) / (NEUTRAL - BAD_BOUND)).clamp(0.0, 1.0)
    }

    /// A score `e` is at or above at any time from its stamp on, told without the decay's
    /// `powf` (`None`: it takes the decay to tell). With good >= bad that is 1; with bad >=
    /// good, decay only raises the optimistic bound ([`Self::never_below`]), so the score now,
    /// undecayed, is a lower bound. The extender's reward score asks this first: a node it
    /// gives full marks to needs no decay.
    pub fn score_floor(&self, e: &Estimate) -> Option<f64> {
        if e.good >= e.bad {
            return Some(1.0);
        }
        (self.exploration >= 0.0).then(|| self.score_of(e))
    }

    /// Whether the node is confidently worse than `floor` (the optimistic bound is below it),
    /// as of `now_ms`: what the extender's optional filter drops.
    pub fn confidently_below(&self, e: &Estimate, floor: f64, now_ms: u64) -> bool {
        self.decayed(e, now_ms).upper(self.exploration) < floor
    }

    /// Whether `e` is not [`Self::confidently_below`] `floor` at any time, told without the
    /// decay's `powf`. Decay scales both counts alike, so the mean moves toward neutral and
    /// the spread widens as `e` ages: with bad >= good the optimistic bound only rises, so a
    /// bound at or above `floor` now stays there; with good >= bad the bound never drops below
    /// neutral, so a floor at or under it is never reached. The extender's reward floor asks
    /// this first, for every candidate with an estimate.
    pub fn never_below(&self, e: &Estimate, floor: f64) -> bool {
        (e.good >= e.bad && floor <= NEUTRAL)
            || (e.bad >= e.good && self.exploration >= 0.0 && e.upper(self.exploration) >= floor)
    }
}

impl Estimate {
    /// good + bad.
    pub fn evidence(&self) -> f64 {
        self.good + self.bad
    }

    /// The posterior mean: the reward in [0, 1].
    pub fn mean(&self) -> f64 {
        (self.good + 1.0) / (self.evidence() + 2.0)
    }

    /// The posterior standard deviation.
    pub fn sd(&self) -> f64 {
        let m = self.mean();
        (m * (1.0 - m) / (self.evidence() + 3.0)).sqrt()
    }

    /// mean + k·sd, capped at 1.
    pub fn upper(&self, k: f64) -> f64 {
        (self.mean() + k * self.sd()).min(1.0)
    }

    /// mean − k·sd, floored at 0.
    pub fn lower(&self, k: f64) -> f64 {
        (self.mean() - k * self.sd()).max(0.0)
    }
}

impl fmt::Display for Estimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3},{:.3}@{}", self.good, self.bad, self.at_ms)
    }
}

/// Why a gossiped estimate did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "reward estimate {0:?} is malformed; expected <good>,<bad>@<unix ms> with finite non-negative counts"
)]
pub struct ParseEstimateError(pub String);

impl FromStr for Estimate {
    type Err = ParseEstimateError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParseEstimateError(s.chars().take(64).collect());
        let (counts, at) = s.split_once('@').ok_or_else(bad)?;
        let (good, bad_count) = counts.split_once(',').ok_or_else(bad)?;
        let count = |v: &str| {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(bad)
        };
        Ok(Self {
            good: count(good)?,
            bad: count(bad_count)?,
            at_ms: at.parse().map_err(|_| bad())?,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const MIN: u64 = 60_000;

    fn model() -> RewardModel {
        RewardModel {
            half_life: Duration::from_secs(60),
            ..RewardModel::default()
        }
    }

    fn bad(weight: f64) -> Signal {
        Signal {
            reward: 0.0,
            weight,
        }
    }

    fn good(weight: f64) -> Signal {
        Signal {
            reward: 1.0,
            weight,
        }
    }

    #[test]
    fn unseen_is_neutral_bad_is_low_and_good_stays_full() {
        let m = model();
        let unseen = Estimate::default();
        assert_eq!(unseen.mean(), 0.5);
        assert_eq!(m.score(&unseen, 0), 1.0, "no evidence: neutral, full marks");
        let mut failing = Estimate::default();
        for _ in 0..5 {
            m.observe(&mut failing, bad(1.5), 0);
        }
        assert!((failing.evidence() - 2.5).abs() < 1e-9, "capped");
        let s = m.score(&failing, 0);
        assert_eq!(s, 0.0, "confidently bad");
        let mut healthy = Estimate::default();
        m.observe(&mut healthy, good(3.0), 0);
        assert_eq!(m.score(&healthy, 0), 1.0);
        // One crash (restart and crash loop) after a minute Ready is already held against it;
        // a second makes it confidently bad.
        let mut mixed = Estimate::default();
        m.observe(&mut mixed, good(0.2), 0);
        m.observe(&mut mixed, bad(2.0), 0);
        let once = m.score(&mixed, 0);
        assert!((0.5..0.9).contains(&once), "one failure: {once}");
        m.observe(&mut mixed, bad(1.9), 0);
        assert!(m.score(&mixed, 0) < 0.5, "a second crash");
        // The same crash after a long healthy history weighs little.
        let mut long_healthy = Estimate::default();
        m.observe(&mut long_healthy, good(10.0), 0);
        m.observe(&mut long_healthy, bad(2.0), 0);
        assert_eq!(m.score(&long_healthy, 0), 1.0);
    }

    #[test]
    fn evidence_halves_every_half_life_and_a_recovered_node_wins_back() {
        let m = model();
        let mut e = Estimate::default();
        m.observe(&mut e, bad(4.0), 0);
        assert!((e.bad - 2.5).abs() < 1e-9, "capped");
        let later = m.decayed(&e, MIN);
        assert!((later.bad - 1.25).abs() < 1e-9);
        assert_eq!(later.at_ms, MIN);
        let before = m.score(&e, 0);
        let half = m.score(&e, MIN / 2);
        let after_one = m.score(&e, MIN);
        assert!(
            before < half && half < after_one,
            "{before} {half} {after_one}"
        );
        assert_eq!(after_one, 1.0, "neutral again within one half-life");
        // A clock that goes back does not grow the evidence.
        assert_eq!(m.decayed(&later, 0).bad, later.bad);
    }

    /// A model with any optimism and an estimate of any counts and stamp.
    fn model_and_estimate() -> impl proptest::strategy::Strategy<Value = (RewardModel, Estimate)> {
        use proptest::strategy::Strategy as _;
        (0..30u8, 0..30u8, 0..30u8, 0..10_000_000u64).prop_map(|(good, bad, k, at_ms)| {
            let m = RewardModel {
                exploration: f64::from(k) / 10.0,
                ..model()
            };
            let tenths = |n: u8| f64::from(n) / 10.0;
            let e = Estimate {
                good: tenths(good),
                bad: tenths(bad),
                at_ms,
            };
            (m, e)
        })
    }

    proptest::proptest! {
        /// What `never_below` rules out, `confidently_below` never says, at any age.
        #[test]
        fn never_below_is_never_wrong(
            (m, e) in model_and_estimate(),
            floor in 0..=100u8,
            now_ms in 0..20_000_000u64,
        ) {
            let floor = f64::from(floor) / 100.0;
            if m.never_below(&e, floor) {
                proptest::prop_assert!(!m.confidently_below(&e, floor, now_ms), "{e:?} {floor} {now_ms}");
            }
        }

        /// The score never falls below `score_floor`, at any age.
        #[test]
        fn score_floor_is_a_floor((m, e) in model_and_estimate(), now_ms in 0..20_000_000u64) {
            if let Some(floor) = m.score_floor(&e) {
                proptest::prop_assert!(m.score(&e, now_ms) >= floor, "{e:?} {now_ms}");
            }
        }
    }

    #[test]
    fn the_floor_filter_needs_confidence() {
        let m = model();
        let mut one = Estimate::default();
        m.observe(&mut one, bad(1.0), 0);
        assert!(
            !m.confidently_below(&one, 0.5, 0),
            "one failure is not confidence"
        );
        let mut many = Estimate::default();
        m.observe(&mut many, bad(10.0), 0);
        assert!(m.confidently_below(&many, 0.5, 0));
        assert!(!m.confidently_below(&many, 0.5, 3 * MIN), "decayed");
    }

    #[test]
    fn wire_form_round_trips_and_rejects_garbage() {
        let e = Estimate {
            good: 0.5,
            bad: 3.25,
            at_ms: 1_700_000_000_000,
        };
        assert_eq!(e.to_string(), "0.500,3.250@1700000000000");
        assert_eq!(e.to_string().parse::<Estimate>().unwrap(), e);
        for garbage in ["", "1,2", "1@5", "a,b@1", "-1,0@1", "NaN,0@1", "1,1@-3"] {
            assert!(garbage.parse::<Estimate>().is_err(), "{garbage}");
        }
    }
}
