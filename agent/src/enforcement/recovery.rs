//! The recovery signal: when this node stops breaking every policy's `dontschedule` rules (or
//! its agent starts and finds it breaking none), the agent stamps an annotation on its own Node,
//! so kube-scheduler retries at once the pods our extender held back.
//!
//! Why a Node write: kube-scheduler retries a pod an extender rejected only on a cluster event
//! or on its 5-minute flush of unschedulable pods, and a node's telemetry recovering changes
//! nothing it watches. In v1.32 an extender's rejection puts `Extender` in the pod's
//! unschedulable plugins, and the framework registers a wildcard event for it (every resource,
//! every action, queueing hint "Queue"), so any Node update that `NodeSchedulingPropertiesChange`
//! reports requeues the pod. That function reports `UpdateNodeAnnotation` when the annotations
//! differ (`extractNodeAnnotationsChange`), so an annotation is enough: no label selectors,
//! taints or descheduler policies are disturbed, and the pod goes straight to the active queue
//! (its backoff expired long ago while it sat unschedulable).
//!
//! Why rare: each write is one API call and makes the scheduler requeue every unschedulable
//! pod. The agent writes only on a transition from breaking to not breaking (and once at start,
//! which covers a node coming back live), after `delay` so that gossip has carried the
//! recovered value to the coordinators before the scheduler asks them again, and at most once
//! per `min_interval`: a flapping node is announced late rather than often. One JSON merge patch
//! of one annotation under the agent's field manager (an Update entry, apart from the labels'
//! server-side apply, so neither removes the other's fields).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::enforcement::labeler::FIELD_MANAGER;

/// The annotation: when the agent last announced that the node breaks no `dontschedule` rule
/// (RFC 3339).
pub const ANNOTATION: &str = "telemesh.io/schedulable-since";

/// When the signal is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryConfig {
    /// How long the node must have stopped breaking before the write (gossip's time to reach
    /// the coordinators).
    pub delay: Duration,
    /// Least time between two writes.
    pub min_interval: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing evaluated yet (the agent just started).
    Unknown,
    /// Breaking some policy's dontschedule.
    Breaking,
    /// Not breaking since `since`, not yet announced.
    Pending { since: Instant },
    /// Announced.
    Announced,
}

/// Decides, evaluation after evaluation, when to write the signal. Pure: verdicts and the
/// clock in, "write now" out.
#[derive(Debug, Clone)]
pub struct RecoverySignal {
    config: RecoveryConfig,
    state: State,
    last_write: Option<Instant>,
}

// === impl RecoverySignal ===

impl RecoverySignal {
    /// A signal that has seen nothing yet.
    pub fn new(config: RecoveryConfig) -> Self {
        Self {
            config,
            state: State::Unknown,
            last_write: None,
        }
    }

    /// Takes one evaluation (`breaking`: the node breaks some policy's dontschedule rules) at
    /// `now`; returns whether to write the signal now.
    pub fn observe(&mut self, breaking: bool, now: Instant) -> bool {
        if breaking {
            self.state = State::Breaking;
            return false;
        }
        let since = match self.state {
            State::Unknown | State::Breaking => {
                self.state = State::Pending { since: now };
                now
            }
            State::Pending { since } => since,
            State::Announced => return false,
        };
        let settled = now.saturating_duration_since(since) >= self.config.delay;
        let allowed = self
            .last_write
            .is_none_or(|w| now.saturating_duration_since(w) >= self.config.min_interval);
        if settled && allowed {
            self.state = State::Announced;
            self.last_write = Some(now);
            return true;
        }
        false
    }

    /// The write [`Self::observe`] asked for failed: try again, no sooner than `min_interval`
    /// after the failed attempt.
    pub fn write_failed(&mut self) {
        if self.state == State::Announced {
            self.state = State::Pending {
                since: self.last_write.unwrap_or_else(Instant::now),
            };
        }
    }
}

/// Writes the signal on `node`: one merge patch of [`ANNOTATION`] with the current time.
pub async fn announce(nodes: &Api<Node>, node: &str) -> kube::Result<()> {
    let patch = serde_json::json!({
        "metadata": {"annotations": {ANNOTATION: k8s_openapi::jiff::Timestamp::now().to_string()}}
    });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    nodes.patch(node, &params, &Patch::Merge(&patch)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: RecoveryConfig = RecoveryConfig {
        delay: Duration::from_secs(2),
        min_interval: Duration::from_secs(30),
    };

    fn at(t0: Instant, secs: u64) -> Instant {
        t0 + Duration::from_secs(secs)
    }

    #[test]
    fn one_write_per_recovery_after_the_delay() {
        let t0 = Instant::now();
        let mut s = RecoverySignal::new(CONFIG);
        assert!(!s.observe(true, at(t0, 0)), "breaking: nothing");
        assert!(!s.observe(true, at(t0, 2)));
        assert!(
            !s.observe(false, at(t0, 4)),
            "recovered, gossip still travelling"
        );
        assert!(!s.observe(false, at(t0, 5)));
        assert!(s.observe(false, at(t0, 6)), "settled: write");
        for t in 7..100 {
            assert!(!s.observe(false, at(t0, t)), "still fine: no second write");
        }
        assert!(!s.observe(true, at(t0, 100)));
        assert!(!s.observe(false, at(t0, 101)));
        assert!(
            s.observe(false, at(t0, 103)),
            "the next recovery: one write"
        );
    }

    #[test]
    fn a_start_on_a_healthy_node_is_announced_once() {
        let t0 = Instant::now();
        let mut s = RecoverySignal::new(CONFIG);
        assert!(!s.observe(false, at(t0, 0)));
        assert!(
            s.observe(false, at(t0, 2)),
            "a node coming back live is announced"
        );
        assert!(!s.observe(false, at(t0, 4)));
    }

    #[test]
    fn a_recovery_that_does_not_last_is_not_announced() {
        let t0 = Instant::now();
        let mut s = RecoverySignal::new(CONFIG);
        s.observe(true, at(t0, 0));
        assert!(!s.observe(false, at(t0, 1)));
        assert!(!s.observe(true, at(t0, 2)), "broke again before the delay");
        assert!(!s.observe(false, at(t0, 3)));
        assert!(!s.observe(false, at(t0, 4)), "the delay restarts");
        assert!(s.observe(false, at(t0, 5)));
    }

    #[test]
    fn a_flapping_node_is_announced_at_most_once_per_interval() {
        let t0 = Instant::now();
        let mut s = RecoverySignal::new(CONFIG);
        s.observe(true, at(t0, 0));
        s.observe(false, at(t0, 1));
        assert!(s.observe(false, at(t0, 3)));
        let mut writes = 1;
        // Breaks and recovers every 4 s for two minutes.
        for t in 4..124 {
            if s.observe(t % 4 == 0, at(t0, t)) {
                writes += 1;
            }
        }
        assert!(writes <= 1 + 120 / 30, "{writes} writes");
        assert!(
            writes >= 4,
            "later recoveries are still announced: {writes}"
        );
    }

    #[test]
    fn a_failed_write_is_retried_after_the_interval() {
        let t0 = Instant::now();
        let mut s = RecoverySignal::new(CONFIG);
        s.observe(true, at(t0, 0));
        s.observe(false, at(t0, 1));
        assert!(s.observe(false, at(t0, 3)));
        s.write_failed();
        assert!(!s.observe(false, at(t0, 4)), "not hammering the API server");
        assert!(!s.observe(false, at(t0, 32)));
        assert!(s.observe(false, at(t0, 33)), "retried");
        assert!(!s.observe(false, at(t0, 34)));
    }
}
