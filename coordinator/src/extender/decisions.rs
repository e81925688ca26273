//! Recent extender decisions with their reasons, for the live page: a small ring of the last
//! [`CAPACITY`] answers. Kept off the hot path's cost: every filter that removed a node and
//! every preempt is recorded, of the routine rest (filters that kept every node, prioritizes)
//! one in [`SAMPLE_EVERY`]; deciding costs one atomic increment, and only a recorded call
//! copies names and reasons (at most [`MAX_REASONS`]) and takes the ring's short lock.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde::Serialize;

use super::filter::FilterDecision;
use super::parse::{Candidates, PodInfo};

/// How many decisions the ring keeps.
pub const CAPACITY: usize = 64;

/// One in this many routine calls is recorded.
pub const SAMPLE_EVERY: u64 = 32;

/// At most this many nodes' reasons are kept per decision.
pub const MAX_REASONS: usize = 8;

/// One answer as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// When it was answered (unix ms).
    pub at_ms: u64,
    /// `filter`, `prioritize` or `preempt`.
    pub verb: &'static str,
    /// `namespace/name` of the pod.
    pub pod: String,
    /// What was decided, in a line.
    pub summary: String,
    /// Nodes and why, for the nodes the answer singled out (removed, best, victims).
    pub reasons: Vec<NodeReason>,
}

/// A node and what the answer said of it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeReason {
    /// The node.
    pub node: String,
    /// Why.
    pub reason: String,
}

/// The shared ring: cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Decisions {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    ring: Mutex<VecDeque<Decision>>,
    calls: AtomicU64,
    recorded: AtomicU64,
}

// === impl Decisions ===

impl Decisions {
    /// Whether to record this call: always when `notable`, else one in [`SAMPLE_EVERY`].
    #[inline]
    pub fn wants(&self, notable: bool) -> bool {
        notable
            || self
                .inner
                .calls
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(SAMPLE_EVERY)
    }

    /// Adds `decision`, dropping the oldest beyond [`CAPACITY`].
    pub fn record(&self, decision: Decision) {
        let mut ring = self.inner.ring.lock();
        if ring.len() == CAPACITY {
            ring.pop_front();
        }
        ring.push_back(decision);
        self.inner.recorded.fetch_add(1, Ordering::Release);
    }

    /// The recorded decisions, newest first.
    pub fn recent(&self) -> Vec<Decision> {
        self.inner.ring.lock().iter().rev().cloned().collect()
    }

    /// How many decisions were ever recorded: changes whenever [`Decisions::recent`] does.
    pub fn version(&self) -> u64 {
        self.inner.recorded.load(Ordering::Acquire)
    }
}

fn pod_key(pod: &PodInfo<'_>) -> String {
    format!("{}/{}", pod.namespace, pod.name)
}

/// A filter answer: the nodes removed and why.
pub fn filter(
    at_ms: u64,
    pod: &PodInfo<'_>,
    candidates: &Candidates<'_>,
    decision: &FilterDecision,
) -> Decision {
    Decision {
        at_ms,
        verb: "filter",
        pod: pod_key(pod),
        summary: format!(
            "kept {} of {} nodes",
            decision.passed.len(),
            candidates.len()
        ),
        reasons: decision
            .failed
            .iter()
            .take(MAX_REASONS)
            .map(|(i, reason)| NodeReason {
                node: candidates.name(*i).to_owned(),
                reason: reason.clone(),
            })
            .collect(),
    }
}

/// A prioritize answer: the best-scored node (the first among equals).
pub fn prioritize(
    at_ms: u64,
    pod: &PodInfo<'_>,
    candidates: &Candidates<'_>,
    scores: &[u8],
    rewards_applied: bool,
) -> Decision {
    let best = scores
        .iter()
        .enumerate()
        .max_by(|(i, a), (j, b)| a.cmp(b).then(j.cmp(i)));
    let with = if rewards_applied {
        "telemetry and rewards"
    } else {
        "telemetry"
    };
    Decision {
        at_ms,
        verb: "prioritize",
        pod: pod_key(pod),
        summary: format!("scored {} nodes by {with}", scores.len()),
        reasons: best
            .map(|(i, score)| NodeReason {
                node: candidates.name(i).to_owned(),
                reason: format!("best, score {score}"),
            })
            .into_iter()
            .collect(),
    }
}

/// A preempt answer: the nodes kept with their victim counts, and how many the policy refused.
pub fn preempt(
    at_ms: u64,
    pod: &PodInfo<'_>,
    refused: usize,
    victims: impl Iterator<Item = (String, usize)>,
) -> Decision {
    let reasons: Vec<NodeReason> = victims
        .take(MAX_REASONS)
        .map(|(node, n)| NodeReason {
            node,
            reason: format!("{n} victims"),
        })
        .collect();
    Decision {
        at_ms,
        verb: "preempt",
        pod: pod_key(pod),
        summary: format!(
            "{} candidate nodes kept, {refused} refused by the pod's policy",
            reasons.len()
        ),
        reasons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(n: u64) -> Decision {
        Decision {
            at_ms: n,
            verb: "filter",
            pod: format!("default/p{n}"),
            summary: String::new(),
            reasons: Vec::new(),
        }
    }

    #[test]
    fn the_ring_keeps_the_newest_first_and_bounded() {
        let d = Decisions::default();
        assert_eq!(d.version(), 0);
        for n in 0..(CAPACITY as u64 + 5) {
            d.record(decision(n));
        }
        let recent = d.recent();
        assert_eq!(recent.len(), CAPACITY);
        assert_eq!(recent[0].at_ms, CAPACITY as u64 + 4);
        assert_eq!(recent[CAPACITY - 1].at_ms, 5);
        assert_eq!(d.version(), CAPACITY as u64 + 5);
    }

    #[test]
    fn notable_calls_are_always_kept_and_routine_ones_sampled() {
        let d = Decisions::default();
        assert!((0..100).all(|_| d.wants(true)));
        let kept = (0..SAMPLE_EVERY * 4).filter(|_| d.wants(false)).count();
        assert_eq!(kept, 4);
    }
}
