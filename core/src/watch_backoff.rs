//! Backoff for kube-runtime watch streams that grows while the API server stays unavailable.
//!
//! kube-runtime's `default_backoff()` resets on every item the stream yields, and its watcher
//! yields a synthetic `Event::Init` before each list attempt. So while a list keeps failing (the
//! API server down, a CRD not installed yet), each failure is followed by an `Init` that resets
//! the backoff, and the watcher lists again every 0.8 to 1.6 s for as long as it fails: one
//! request a second per watch, for ever (the fault suite measured it, docs/faults.md). Here
//! only real progress (an object listed or changed, a list done) resets the backoff; `Init`
//! does not. The waits are kube-runtime's: from 0.8 s, doubling, at most 30 s, drawn in their
//! upper half.

use std::time::Duration;

use futures::{Stream, StreamExt as _};
use kube::runtime::watcher::Event;

/// The first wait after a failure.
pub const FIRST: Duration = Duration::from_millis(800);
/// The longest wait.
pub const MAX: Duration = Duration::from_secs(30);

/// Failures in a row and the wait before the next poll: the pure part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchBackoff {
    failures: u32,
}

impl WatchBackoff {
    /// Takes one item of the stream; returns how long to wait before polling again. `draw` is a
    /// uniform number in [0, 1) (the jitter).
    pub fn observe<K, E>(&mut self, item: &Result<Event<K>, E>, draw: f64) -> Option<Duration> {
        match item {
            Err(_) => {
                let exponent = self.failures.min(16);
                self.failures = self.failures.saturating_add(1);
                let full = FIRST.saturating_mul(1 << exponent).min(MAX);
                Some(full.mul_f64(0.5 + 0.5 * draw.clamp(0.0, 1.0)))
            }
            // Announces a list attempt, which may fail again: no progress yet.
            Ok(Event::Init) => None,
            Ok(_) => {
                self.failures = 0;
                None
            }
        }
    }
}

/// `stream` with a [`WatchBackoff`] between a failure and the next poll.
pub fn backoff<S, K, E>(stream: S) -> impl Stream<Item = Result<Event<K>, E>> + Send
where
    S: Stream<Item = Result<Event<K>, E>> + Send + 'static,
    K: Send + 'static,
    E: Send + 'static,
{
    let state = (stream.boxed(), WatchBackoff::default(), None::<Duration>);
    futures::stream::unfold(state, |(mut stream, mut backoff, wait)| async move {
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
        let item = stream.next().await?;
        let wait = backoff.observe(&item, draw());
        Some((item, (stream, backoff, wait)))
    })
}

/// A draw in [0, 1) from the clock's nanoseconds (they differ from process to process).
fn draw() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos) / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    type Item = Result<Event<()>, ()>;

    #[test]
    fn an_init_between_failures_does_not_reset_the_backoff() {
        let mut b = WatchBackoff::default();
        let waits: Vec<Option<u64>> = [Err(()), Ok(Event::Init), Err(()), Ok(Event::Init), Err(())]
            .iter()
            .map(|i: &Item| b.observe(i, 1.0).map(|d| d.as_millis() as u64))
            .collect();
        assert_eq!(waits, [Some(800), None, Some(1_600), None, Some(3_200)]);
    }

    #[test]
    fn progress_resets_it_and_the_wait_is_capped() {
        let mut b = WatchBackoff::default();
        for _ in 0..40 {
            b.observe::<(), ()>(&Err(()), 0.5);
        }
        assert_eq!(b.observe::<(), ()>(&Err(()), 1.0), Some(MAX));
        assert_eq!(b.observe::<(), ()>(&Err(()), 0.0), Some(MAX / 2));
        assert_eq!(b.observe::<(), ()>(&Ok(Event::InitDone), 0.0), None);
        assert_eq!(b.observe::<(), ()>(&Err(()), 1.0), Some(FIRST));
    }

    #[tokio::test(start_paused = true)]
    async fn the_stream_waits_after_a_failure() {
        let items: Vec<Item> = vec![Err(()), Ok(Event::Init), Err(()), Ok(Event::InitDone)];
        let started = tokio::time::Instant::now();
        let seen: Vec<Item> = backoff(futures::stream::iter(items)).collect().await;
        assert_eq!(seen.len(), 4);
        // Two waits: at least 0.4 s and 0.8 s (the lower halves of 0.8 s and 1.6 s).
        assert!(started.elapsed() >= Duration::from_millis(1_200));
    }
}
