//! What one observation of a pod is worth: a reward in [0, 1] and a weight (how many
//! observations' worth of evidence it is). The agent turns what it sees into [`Observation`]s;
//! this table is the whole policy, so it is tested and documented in one place.
//!
//! | observation | reward | weight |
//! | --- | --- | --- |
//! | Running and Ready for `d` | 1 | `d / healthy_unit` |
//! | Running but not Ready for `d` | 0 | `d / healthy_unit` |
//! | container restart, `s` after the previous one | 0 | `1 + max(0, 1 - s / restart_window)` (first restart: 1) |
//! | the same, OOM-killed | 0 | the restart's weight + 0.5 |
//! | entered CrashLoopBackOff | 0 | 1 |
//! | pod Failed | 0 | 2 |
//! | CPU throttled a fraction `f >= throttle_threshold` of periods for `d` | `1 - f` | `d / healthy_unit` |
//! | pressure stall `p % >= pressure_threshold` for `d` | `1 - p/100` | `d / healthy_unit` |
//! | the workload's own `telemesh.io/reward: v` (when it changes) | `v` clamped to [0, 1] | 1 |
//! | a bind to the node failed or timed out | 0 | 1 |
//! | the node failed to start the pod (sandbox, volume attach or mount, image pull on this node) | 0 | 2 |
//!
//! A start failure weighs what a fresh crash does (a restart and its crash loop, 1 + 1): a node
//! that cannot start a pod type loses it as a node that crashes it does. The agent decides which
//! pods failed to start *because of the node* and counts each once (agent/src/rewards/start.rs).
//!
//! kubeRL scored only restarts caught while `Terminated` (its MTTF check compared seconds-of-
//! minute fields, so every repeat crash scored 0 and most CrashLoopBackOff time went unpunished);
//! here a restart is counted from `restartCount`, whatever state the event shows, and back-off
//! time counts as not Ready.

use std::time::Duration;

/// The pod annotation a workload may set to report its own reward, a number in [0, 1].
pub const REWARD_ANNOTATION: &str = "telemesh.io/reward";

/// Something seen of a pod on a node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Observation {
    /// Running and Ready for this long since the last look.
    Healthy(Duration),
    /// Running but not Ready (readiness failing, or in back-off) for this long.
    NotReady(Duration),
    /// A container restarted.
    Restart {
        /// Time since this pod's previous restart; `None` for its first.
        since_previous: Option<Duration>,
        /// The container was OOM-killed.
        oom: bool,
    },
    /// A container entered CrashLoopBackOff.
    CrashLoop,
    /// The pod failed.
    Failed,
    /// CPU throttling: the fraction of CFS periods throttled over `over`.
    Throttled {
        /// Throttled periods / periods, 0..=1.
        fraction: f64,
        /// The interval measured.
        over: Duration,
    },
    /// Pressure stall (`some avg10`, the worst of cpu, memory, io) over `over`.
    Pressure {
        /// Percent, 0..=100.
        percent: f64,
        /// The interval measured.
        over: Duration,
    },
    /// The workload's own reward (annotation), in [0, 1].
    Reported(f64),
    /// A bind of the pod to the node failed or timed out. Produced by nothing today:
    /// kube-scheduler's `binding rejected` reports do not name the node (docs/agent.md, "Start
    /// failures").
    BindFailed,
    /// The node failed to start the pod: no sandbox, a volume that does not attach or mount
    /// there, an image this node cannot pull (counted once per pod).
    StartFailed,
}

/// The thresholds and units of the table above.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignalSettings {
    /// Ready time worth one good observation.
    pub healthy_unit: Duration,
    /// A restart sooner than this after the previous one weighs more (kubeRL's MTTF).
    pub restart_window: Duration,
    /// Throttling below this fraction is not a signal.
    pub throttle_threshold: f64,
    /// Pressure below this percentage is not a signal.
    pub pressure_threshold: f64,
}

impl Default for SignalSettings {
    fn default() -> Self {
        Self {
            healthy_unit: Duration::from_secs(300),
            restart_window: Duration::from_secs(600),
            throttle_threshold: 0.25,
            pressure_threshold: 20.0,
        }
    }
}

/// A reward with its weight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Signal {
    /// In [0, 1].
    pub reward: f64,
    /// Observations' worth of evidence, > 0.
    pub weight: f64,
}

impl Observation {
    /// What this observation is worth; `None` when it carries no evidence (below a threshold,
    /// zero duration, a malformed report).
    pub fn signal(&self, s: &SignalSettings) -> Option<Signal> {
        let units = |d: &Duration| d.as_secs_f64() / s.healthy_unit.as_secs_f64().max(1e-9);
        let (reward, weight) = match self {
            Self::Healthy(d) => (1.0, units(d)),
            Self::NotReady(d) => (0.0, units(d)),
            Self::Restart {
                since_previous,
                oom,
            } => {
                let soon = since_previous.map_or(0.0, |since| {
                    (1.0 - since.as_secs_f64() / s.restart_window.as_secs_f64().max(1e-9)).max(0.0)
                });
                (0.0, 1.0 + soon + if *oom { 0.5 } else { 0.0 })
            }
            Self::CrashLoop => (0.0, 1.0),
            Self::Failed => (0.0, 2.0),
            Self::Throttled { fraction, over } if *fraction >= s.throttle_threshold => {
                (1.0 - fraction.clamp(0.0, 1.0), units(over))
            }
            Self::Pressure { percent, over } if *percent >= s.pressure_threshold => {
                (1.0 - (percent / 100.0).clamp(0.0, 1.0), units(over))
            }
            Self::Throttled { .. } | Self::Pressure { .. } => return None,
            Self::Reported(v) if v.is_finite() => (v.clamp(0.0, 1.0), 1.0),
            Self::Reported(_) => return None,
            Self::BindFailed => (0.0, 1.0),
            Self::StartFailed => (0.0, 2.0),
        };
        (weight.is_finite() && weight > 0.0).then_some(Signal { reward, weight })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn sig(o: Observation) -> Option<(f64, f64)> {
        o.signal(&SignalSettings::default()).map(|s| {
            (
                (s.reward * 1000.0).round() / 1000.0,
                (s.weight * 1000.0).round() / 1000.0,
            )
        })
    }

    #[test]
    fn the_table() {
        let secs = Duration::from_secs;
        assert_eq!(sig(Observation::Healthy(secs(150))), Some((1.0, 0.5)));
        assert_eq!(sig(Observation::Healthy(Duration::ZERO)), None);
        assert_eq!(sig(Observation::NotReady(secs(300))), Some((0.0, 1.0)));
        let restart = |since: Option<u64>, oom| Observation::Restart {
            since_previous: since.map(secs),
            oom,
        };
        assert_eq!(sig(restart(None, false)), Some((0.0, 1.0)));
        assert_eq!(
            sig(restart(Some(10), false)),
            Some((0.0, 1.983)),
            "soon weighs more"
        );
        assert_eq!(
            sig(restart(Some(3600), false)),
            Some((0.0, 1.0)),
            "long after: plain"
        );
        assert_eq!(sig(restart(Some(600), true)), Some((0.0, 1.5)));
        assert_eq!(sig(Observation::CrashLoop), Some((0.0, 1.0)));
        assert_eq!(sig(Observation::Failed), Some((0.0, 2.0)));
        let throttled = |fraction| Observation::Throttled {
            fraction,
            over: secs(300),
        };
        assert_eq!(sig(throttled(0.1)), None, "below threshold");
        assert_eq!(sig(throttled(0.6)), Some((0.4, 1.0)));
        let pressure = |percent| Observation::Pressure {
            percent,
            over: secs(30),
        };
        assert_eq!(sig(pressure(5.0)), None);
        assert_eq!(sig(pressure(50.0)), Some((0.5, 0.1)));
        assert_eq!(sig(Observation::Reported(0.7)), Some((0.7, 1.0)));
        assert_eq!(sig(Observation::Reported(7.0)), Some((1.0, 1.0)), "clamped");
        assert_eq!(sig(Observation::Reported(f64::NAN)), None);
        assert_eq!(sig(Observation::BindFailed), Some((0.0, 1.0)));
        assert_eq!(
            sig(Observation::StartFailed),
            Some((0.0, 2.0)),
            "as a crash"
        );
    }
}
