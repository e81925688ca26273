//! Helpers the workspace's tests share that need the runtime (tokio). The pure ones are
//! `telemesh_core::testing`.

use std::future::Future;
use std::time::Duration;

/// Polls `probe` until it returns `Some`, or panics naming `what` after `within`.
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        // A poll interval, not a guess at timing.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
