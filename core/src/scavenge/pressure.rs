//! Pressure eviction of scavengers: when a node's pressure stays high ([`Sustained`]), its agent
//! evicts the scavenger pod that loses the least unsaved work ([`least_unsaved`]), one at a
//! time. Pure: the agent feeds in pressure samples and the `s:` values it publishes.

use std::time::{Duration, Instant, SystemTime};

use super::{ScavengerPod, unsaved};

/// The scavenger pod to evict first among `pods` (uid, value) at `now`: the one with the least
/// unsaved work. Ties (equal unsaved work, e.g. every pod still within its minimum run) go to
/// the pod with the larger CPU request, then the larger memory request (evicting it relieves
/// the node most), then the smaller uid, so the choice never depends on input order.
pub fn least_unsaved<'a>(
    pods: impl IntoIterator<Item = (&'a str, &'a ScavengerPod)>,
    now: SystemTime,
) -> Option<&'a str> {
    pods.into_iter()
        .min_by(|(a_uid, a), (b_uid, b)| {
            unsaved(a.checkpoint(), now)
                .cmp(&unsaved(b.checkpoint(), now))
                .then(b.cpu_millis.cmp(&a.cpu_millis))
                .then(b.memory_bytes.cmp(&a.memory_bytes))
                .then(a_uid.cmp(b_uid))
        })
        .map(|(uid, _)| uid)
}

/// Whether pressure has stayed above a threshold for a while: fed one sample at a time, it
/// answers true once every sample for `hold` has been above `threshold`. After an eviction,
/// [`Sustained::restart`] makes it wait a whole `hold` again, so the pressure averages
/// (avg10 is a 10 s average) can show the relief before the next eviction.
#[derive(Debug, Clone)]
pub struct Sustained {
    threshold: f64,
    hold: Duration,
    above_since: Option<Instant>,
}

impl Sustained {
    /// Pressure above `threshold` (the sample's unit) for `hold`.
    pub fn new(threshold: f64, hold: Duration) -> Self {
        Self {
            threshold,
            hold,
            above_since: None,
        }
    }

    /// Takes the sample `value` seen at `now` (None: no sample, which counts as not above);
    /// returns whether the pressure has now been above the threshold for the whole hold.
    pub fn observe(&mut self, value: Option<f64>, now: Instant) -> bool {
        match value {
            Some(v) if v > self.threshold => {
                let since = *self.above_since.get_or_insert(now);
                now.saturating_duration_since(since) >= self.hold
            }
            _ => {
                self.above_since = None;
                false
            }
        }
    }

    /// Starts the hold again from `now` (after an eviction).
    pub fn restart(&mut self, now: Instant) {
        if self.above_since.is_some() {
            self.above_since = Some(now);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    fn pod(checkpoint_s: u64, cpu_millis: u64, memory_bytes: u64) -> ScavengerPod {
        ScavengerPod {
            job: "batch/j".into(),
            checkpoint_ms: checkpoint_s * 1000,
            cpu_millis,
            memory_bytes,
        }
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn the_pod_with_the_least_unsaved_work_goes_first() {
        let pods = [
            ("a", pod(100, 500, 1)),
            ("b", pod(190, 500, 1)),
            ("c", pod(150, 4000, 1)),
        ];
        let pick = least_unsaved(pods.iter().map(|(u, p)| (*u, p)), at(200));
        assert_eq!(pick, Some("b"), "10 s unsaved beats 50 s and 100 s");
        assert_eq!(least_unsaved(std::iter::empty(), at(200)), None);
    }

    #[test]
    fn ties_go_to_the_bigger_pod_then_the_smaller_uid_whatever_the_order() {
        // Checkpoints in the future (within a minimum run) count as nothing unsaved: a tie.
        let pods = [
            ("d", pod(300, 500, 9)),
            ("b", pod(250, 1000, 1)),
            ("c", pod(200, 1000, 2)),
            ("a", pod(200, 1000, 2)),
        ];
        for rotation in 0..pods.len() {
            let mut order = pods.to_vec();
            order.rotate_left(rotation);
            let pick = least_unsaved(order.iter().map(|(u, p)| (*u, p)), at(200));
            assert_eq!(pick, Some("a"), "rotation {rotation}");
        }
        let small_only = [("x", pod(200, 100, 5)), ("w", pod(200, 100, 5))];
        let pick = least_unsaved(small_only.iter().map(|(u, p)| (*u, p)), at(200));
        assert_eq!(pick, Some("w"));
    }

    #[test]
    fn pressure_must_stay_above_for_the_whole_hold() {
        let t0 = Instant::now();
        let s = |secs: u64| t0 + Duration::from_secs(secs);
        let mut p = Sustained::new(20.0, Duration::from_secs(30));
        assert!(!p.observe(Some(25.0), s(0)));
        assert!(!p.observe(Some(25.0), s(29)));
        assert!(p.observe(Some(25.0), s(30)));
        // A dip (or a missing sample) starts over.
        assert!(!p.observe(Some(20.0), s(31)), "equal is not above");
        assert!(!p.observe(Some(90.0), s(32)));
        assert!(!p.observe(None, s(40)));
        assert!(!p.observe(Some(90.0), s(41)));
        assert!(p.observe(Some(90.0), s(71)));
        // After an eviction, a whole hold again.
        p.restart(s(71));
        assert!(!p.observe(Some(90.0), s(72)));
        assert!(!p.observe(Some(90.0), s(100)));
        assert!(p.observe(Some(90.0), s(101)));
    }

    #[test]
    fn restart_without_pressure_changes_nothing() {
        let t0 = Instant::now();
        let mut p = Sustained::new(10.0, Duration::ZERO);
        p.restart(t0);
        assert!(!p.observe(Some(5.0), t0));
        assert!(
            p.observe(Some(11.0), t0),
            "a zero hold acts on the first high sample"
        );
    }
}
