//! Backoff for kube-runtime watch streams that grows while the API server stays unavailable.
//!
//! kube-runtime's `default_backoff()` resets on every item the stream yields, and its watcher
//! yields a synthetic `Event::Init` before each list attempt. So while a list keeps failing (the
//! API server down, a CRD not installed yet), each failure is followed by an `Init` that resets
//! the backoff, and the watcher lists again every 0.8 to 1.6 s for as long as it fails: one
//! request a second per watch, for ever (the fault suite measured it, docs/faults.md). Here
//! only real progress (an object listed or changed, a list done) resets the backoff; `Init`
//! does not. The waits are kube-runtime's: from 0.8 s, doubling, at most 30 s, drawn in their
//! upper half (the workspace's one [`Backoff`]).

use std::time::Duration;

use futures::{Stream, StreamExt as _};
use kube::runtime::watcher::Event;

use crate::backoff::{Backoff, draw};

/// The first wait after a failure.
pub const FIRST: Duration = Duration::from_millis(800);
/// The longest wait.
pub const MAX: Duration = Duration::from_secs(30);

/// The watch streams' backoff: kube-runtime's waits ([`FIRST`], [`MAX`], jittered).
const WAITS: Backoff = Backoff::new(FIRST, MAX).jittered();

/// Takes one item of the stream; returns how long to wait before polling again. `draw` is a
/// uniform number in [0, 1) (the jitter).
fn observe<K, E>(backoff: &mut Backoff, item: &Result<Event<K>, E>, draw: f64) -> Option<Duration> {
    match item {
        Err(_) => Some(backoff.failed(draw)),
        // Announces a list attempt, which may fail again: no progress yet.
        Ok(Event::Init) => None,
        Ok(_) => {
            backoff.reset();
            None
        }
    }
}

/// `stream` with a [`Backoff`] between a failure and the next poll.
pub fn backoff<S, K, E>(stream: S) -> impl Stream<Item = Result<Event<K>, E>> + Send
where
    S: Stream<Item = Result<Event<K>, E>> + Send + 'static,
    K: Send + 'static,
    E: Send + 'static,
{
    let state = (stream.boxed(), WAITS, None::<Duration>);
    futures::stream::unfold(state, |(mut stream, mut waits, wait)| async move {
        if let Some(wait) = wait {
            tokio::time::sleep(wait).await;
        }
        let item = stream.next().await?;
        let wait = observe(&mut waits, &item, draw());
        Some((item, (stream, waits, wait)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    type Item = Result<Event<()>, ()>;

    #[test]
    fn an_init_between_failures_does_not_reset_the_backoff() {
        let mut b = WAITS;
        let waits: Vec<Option<u64>> = [Err(()), Ok(Event::Init), Err(()), Ok(Event::Init), Err(())]
            .iter()
            .map(|i: &Item| observe(&mut b, i, 1.0).map(|d| d.as_millis() as u64))
            .collect();
        assert_eq!(waits, [Some(800), None, Some(1_600), None, Some(3_200)]);
    }

    #[test]
    fn progress_resets_it_and_the_wait_is_capped() {
        let mut b = WAITS;
        for _ in 0..40 {
            observe::<(), ()>(&mut b, &Err(()), 0.5);
        }
        assert_eq!(observe::<(), ()>(&mut b, &Err(()), 1.0), Some(MAX));
        assert_eq!(observe::<(), ()>(&mut b, &Err(()), 0.0), Some(MAX / 2));
        assert_eq!(observe::<(), ()>(&mut b, &Ok(Event::InitDone), 0.0), None);
        assert_eq!(observe::<(), ()>(&mut b, &Err(()), 1.0), Some(FIRST));
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
