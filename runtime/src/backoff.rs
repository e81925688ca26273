//! The one exponential backoff of the workspace: the wait after the `n`th failure in a row is
//! `first` doubled `n - 1` times, at most `max`, and, when jittered, drawn in the upper half of
//! that (half fixed, half random: a crowd that failed at the same moment does not come back at
//! the same moment, and no wait is shorter than half the nominal one). Its users keep only what
//! is theirs: when a failure counts and what resets it (kube watch streams,
//! [`crate::watch_backoff`]), a floor such as the server's `Retry-After` (the agent's writes), a
//! bound on attempts (action callbacks), a restart count (sim's kubelet).
//!
//! Pure: the random draw is an argument ([`draw`] gives one from the clock).

use std::time::Duration;

/// Doublings stop here (65,536 × `first`), far past every cap in use; no overflow however long
/// the failures go on.
const MAX_DOUBLINGS: u32 = 16;

/// An exponential backoff and the failures in a row it has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    jitter: bool,
    failures: u32,
}

// === impl Backoff ===

impl Backoff {
    /// Waits of `first`, doubled per further failure, at most `max`, without jitter.
    pub const fn new(first: Duration, max: Duration) -> Self {
        Self {
            first,
            max,
            jitter: false,
            failures: 0,
        }
    }

    /// The same waits, each drawn in the upper half of its nominal value.
    #[must_use]
    pub const fn jittered(mut self) -> Self {
        self.jitter = true;
        self
    }

    /// The nominal wait after the `n`th failure in a row (`n` = 1 for the first; 0 counts as 1),
    /// before jitter: `first × 2^(n-1)`, at most `max`.
    pub fn nominal(&self, n: u32) -> Duration {
        let doublings = n.saturating_sub(1).min(MAX_DOUBLINGS);
        self.first.saturating_mul(1 << doublings).min(self.max)
    }

    /// Counts a failure; returns the wait before the next try. `draw` is a uniform number in
    /// [0, 1) (clamped), used only when jittered.
    pub fn failed(&mut self, draw: f64) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let nominal = self.nominal(self.failures);
        if self.jitter {
            nominal.mul_f64(0.5 + 0.5 * draw.clamp(0.0, 1.0))
        } else {
            nominal
        }
    }

    /// Forgets the failures: the next one waits `first` again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// Failures in a row so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

/// A draw in [0, 1) for the jitter: the clock's nanoseconds, which differ from process to process
/// (no random number generator needed in the agent's binary).
pub fn draw() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos) / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn waits_double_from_first_up_to_max() {
        let b = Backoff::new(SECOND, Duration::from_secs(30));
        let waits: Vec<u64> = (1..=7).map(|n| b.nominal(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(b.nominal(0), SECOND, "0 counts as the first");
        let mut b = b;
        let waits: Vec<u64> = (0..7).map(|_| b.failed(0.3).as_secs()).collect();
        assert_eq!(
            waits,
            [1, 2, 4, 8, 16, 30, 30],
            "no jitter: the draw is unused"
        );
        assert_eq!(b.failures(), 7);
    }

    #[test]
    fn jittered_waits_are_drawn_in_the_upper_half() {
        let mut b = Backoff::new(Duration::from_millis(800), Duration::from_secs(30)).jittered();
        assert_eq!(b.failed(0.0), Duration::from_millis(400));
        assert_eq!(b.failed(1.0), Duration::from_millis(1_600));
        assert_eq!(b.failed(0.5), Duration::from_millis(2_400));
        // Out-of-range draws are clamped.
        assert_eq!(b.failed(7.0), Duration::from_millis(6_400));
        assert_eq!(b.failed(-1.0), Duration::from_millis(6_400));
    }

    #[test]
    fn reset_starts_over_and_many_failures_do_not_overflow() {
        let mut b = Backoff::new(SECOND, Duration::from_secs(10)).jittered();
        for _ in 0..100 {
            b.failed(0.5);
        }
        assert_eq!(b.failed(1.0), Duration::from_secs(10));
        assert_eq!(b.failures(), 101);
        b.reset();
        assert_eq!(b.failures(), 0);
        assert_eq!(b.failed(1.0), SECOND);
        let huge = Backoff::new(Duration::MAX, Duration::MAX);
        assert_eq!(huge.nominal(u32::MAX), Duration::MAX);
    }

    #[test]
    fn draws_are_in_range() {
        let d = draw();
        assert!((0.0..1.0).contains(&d), "{d}");
    }
}
